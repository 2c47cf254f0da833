"""The VM run's step machinery (tools/e2e/steps.sh), checked on the host: a failed gate skips the rest of its group
and is counted apart from failures, cleanups still run, and a new group is not blocked."""

from __future__ import annotations

import pathlib
import subprocess

STEPS = pathlib.Path(__file__).with_name("steps.sh")


def run(script: str, tmp_path: pathlib.Path) -> tuple[str, dict[str, str]]:
    """Runs `script` after sourcing steps.sh; returns its output and the counters it ends with."""
    full = f"""set -u
out={tmp_path}
source {STEPS}
{script}
echo "COUNTS $pass $fail $skip ${{failed[*]:-}}"
"""
    done = subprocess.run(["bash", "-c", full], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    counts = done.stdout.strip().splitlines()[-1].split(" ", 4) + [""]
    return done.stdout, {"pass": counts[1], "fail": counts[2], "skip": counts[3], "failed": counts[4]}


def test_a_failed_gate_skips_its_group_and_only_its_group(tmp_path):
    output, counts = run("""
group
gate start-a false
step a-one true
step a-two false
cleanup stop-a touch cleaned
group
gate start-b true
step b-one false
step b-two true
""", tmp_path)
    assert counts == {"pass": "2", "fail": "2", "skip": "3", "failed": "start-a b-one"}
    assert "SKIP  a-one" in output and "(skipped: start-a failed)" in output
    assert "SKIP  stop-a" in output
    assert (tmp_path / "cleaned").exists(), "a skipped cleanup still cleans up"
    assert "FAIL  b-one" in output and "PASS  b-two" in output


def test_a_failed_plain_step_blocks_nothing(tmp_path):
    _, counts = run("""
group
step one false
step two true
""", tmp_path)
    assert counts == {"pass": "1", "fail": "1", "skip": "0", "failed": "one"}
