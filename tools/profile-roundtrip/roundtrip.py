"""The capture round trip (make profile-roundtrip): for each built-in profile and a quirky profile file, a fidosim
key is captured (`fidosim profile capture --allow-destructive`: PIN, token, credential management and capacity
rules too), the capture is served (`serve --profile captured.json`) and captured
again, and `fidosim conform` runs against both. The two captures must be equal but for timing (over UDP a key has
no USB identity, hence no serial), and `fidosim conform --compare` must find no difference.

    python roundtrip.py [--quick] [PROFILE ...]

--quick runs conform without --allow-destructive (make test's interop run uses it); the make target runs the
whole suite. Prints one line per profile and exits 1 when any round trip differs."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fidosim import FidosimServer

HERE = Path(__file__).resolve().parent
BINARY = os.environ.get("FIDOSIM_BIN", str(HERE.parent.parent / ".build" / "debug" / "fidosim"))


def capture(server: FidosimServer, out: Path) -> dict:
    """A destructive capture (the key is reset, given a PIN, filled and reset again) through the key's control
    socket. A line saying the copy will answer otherwise is a difference of the round trip."""
    key = server.keys[0]
    run = subprocess.run([BINARY, "profile", "capture", "--device", f"udp:127.0.0.1:{key.port}", "-o", str(out),
                          "--allow-destructive", "--control", key.control_path],
                         capture_output=True, text=True, timeout=300)
    if run.returncode != 0:
        raise RuntimeError(f"capture failed: {run.stderr}")
    if "will answer otherwise" in run.stderr:
        raise RuntimeError(f"the capture says the copy will differ: {run.stderr}")
    return json.loads(out.read_text())


def conform(server: FidosimServer, report: Path, destructive: bool) -> dict:
    key = server.keys[0]
    args = [BINARY, "conform", "--device", f"udp:127.0.0.1:{key.port}", "--control", key.control_path, "--report",
            str(report)]
    if destructive:
        args.append("--allow-destructive")
    run = subprocess.run(args, capture_output=True, text=True, timeout=600)
    if run.returncode not in (0, 1):
        raise RuntimeError(f"conform could not run: {run.stdout[-2000:]}{run.stderr}")
    return json.loads((report / "report.json").read_text())


def without_timing(document: dict) -> dict:
    copy = json.loads(json.dumps(document))
    copy.get("capture", {}).pop("timing", None)
    return copy


def differences(a, b, path="") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for key in sorted(set(a) | set(b)):
            out += differences(a.get(key), b.get(key), f"{path}.{key}")
        return out
    return [] if a == b else [f"{path}: {json.dumps(a)[:80]} | {json.dumps(b)[:80]}"]


def round_trip(profile: str, work: Path, destructive: bool) -> tuple[bool, str]:
    work.mkdir(parents=True, exist_ok=True)
    with FidosimServer(binary=BINARY, profile=profile) as original:
        first = capture(original, work / "original.json")
        report_a = conform(original, work / "conform-original", destructive)
    with FidosimServer(binary=BINARY, profile=str(work / "original.json")) as copy:
        second = capture(copy, work / "copy.json")
        report_b = conform(copy, work / "conform-copy", destructive)
    diff = differences(without_timing(first), without_timing(second))
    compare = subprocess.run([BINARY, "conform", "--compare", str(work / "conform-original"),
                              str(work / "conform-copy")], capture_output=True, text=True, timeout=60)
    timing = " ".join(f"{name} {first['capture']['timing'].get(name)}/{second['capture']['timing'].get(name)} ms"
                      for name in ("initMs", "getInfoMs"))
    totals = report_a["totals"]
    line = (f"{profile:<14} capture {'equal' if not diff else f'{len(diff)} differences'}; conform "
            f"{totals['passed']}/{totals['failed']}/{totals['skipped']} vs {report_b['totals']['passed']}/"
            f"{report_b['totals']['failed']}/{report_b['totals']['skipped']} (passed/failed/skipped): "
            f"{compare.stdout.strip().splitlines()[-1]}; timing original/copy {timing}")
    detail = "".join(f"\n    capture {d}" for d in diff)
    if compare.returncode != 0:
        detail += "".join(f"\n    conform {d}" for d in compare.stdout.strip().splitlines()[:-1])
    return not diff and compare.returncode == 0, line + detail


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="conform without --allow-destructive")
    parser.add_argument("profiles", nargs="*")
    args = parser.parse_args()
    names = subprocess.run([BINARY, "profiles", "--json"], capture_output=True, text=True, check=True)
    profiles = args.profiles or [p["name"] for p in json.loads(names.stdout)] + [str(HERE / "quirky.json")]
    ok = True
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="fidosim-roundtrip-") as directory:
        for profile in profiles:
            same, line = round_trip(profile, Path(directory) / Path(profile).stem, not args.quick)
            ok &= same
            print(("same  " if same else "DIFF  ") + line, flush=True)
    print(f"{len(profiles)} profiles, {'every round trip the same' if ok else 'round trips differ'} "
          f"({'non-destructive' if args.quick else 'destructive'} conform) in {time.monotonic() - started:.0f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
