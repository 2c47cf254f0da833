"""`fidosim bench --only udp`: a fidosim serve child started without Foundation's Process (posix_spawn), driven over
UDP one request at a time and with four channels in flight; every row is a real measurement (requests answered)."""

import os
import re
import subprocess

BIN = os.environ.get("FIDOSIM_BIN", ".build/debug/fidosim")


def test_bench_udp_rows_measure_answered_requests():
    run = subprocess.run([BIN, "bench", "--only", "udp", "--seconds", "0.3"], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    rows = dict(re.findall(r"^(getAssertion over UDP[^:]*): (\d+)/s", run.stdout, re.M))
    assert set(rows) == {"getAssertion over UDP (client process -> fidosim serve)",
                         "getAssertion over UDP, 4 channels in flight (throughput)"}, run.stdout
    assert all(int(v) > 0 for v in rows.values()), run.stdout
    assert "failed" not in run.stdout
    # The child is gone after the run (SIGTERM and waitpid).
    pid = int(re.search(r"udp server pid (\d+)", run.stdout).group(1))
    assert not os.path.exists(f"/proc/{pid}")


def test_bench_refuses_an_unknown_only():
    run = subprocess.run([BIN, "bench", "--only", "nothing"], capture_output=True, text=True, timeout=60)
    assert run.returncode != 0
    assert "--only takes get-assertion, ctaphid or udp" in run.stderr
