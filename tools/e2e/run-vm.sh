#!/usr/bin/env bash
# End-to-end run: boots Debian's kernel (which has uhid) with this machine's filesystem under virtme-ng,
# starts `fidosim serve --transport uhid` inside, and drives the key with unmodified real clients.
# Usage: tools/e2e/run-vm.sh [path/to/fidosim]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
bin=${1:-$repo/.build/debug/fidosim}
kernel=$(ls /boot/vmlinuz-* 2>/dev/null | sort -V | tail -n 1 || true)
[ -n "$kernel" ] || { echo "no kernel in /boot: install linux-image-amd64 (make e2e-deps)"; exit 1; }
command -v vng >/dev/null || { echo "vng not found: pip install virtme-ng (make e2e-deps)"; exit 1; }
[ -x "$bin" ] || { echo "fidosim binary not found at $bin: run swift build"; exit 1; }

# The guest's PATH is not this shell's: hand it the python that has fido2, pytest and selenium.
python=${PYTHON:-$(python3 -c 'import sys; print(sys.executable)')}
results=$(mktemp -d /tmp/fidosim-e2e.XXXXXX)
chmod 0755 "$results"
# The bytecode of the guest's launcher of keys (inside-vm.sh: the package and what it imports of the standard
# library), made here by importing it as the guest does: with a cache prefix Python compiles every module it
# imports, which took seconds in the emulated guest.
PYTHONPYCACHEPREFIX="$results/pycache" PYTHONPATH="$repo/tools/python/src" python3 -S -c 'import fidosim.launch'
start=$(date +%s)
echo "e2e: booting $kernel under virtme-ng (TCG, no KVM); results in $results"
# The guest sees the host filesystem read-only, with $results writable.
set +e
# E2E_REPEAT=N runs the groups N times in this one boot (round-K/ in the results); one round takes 10 to 15 min.
repeat=${E2E_REPEAT:-1}
[[ $repeat =~ ^[1-9][0-9]*$ ]] || { echo "E2E_REPEAT must be a positive number, not '$repeat'"; exit 2; }
timeout $((300 + 1200 * repeat)) vng --run "$kernel" --disable-kvm --user root --memory 4G --cpus 2 --rwdir "$results" \
    --exec "PYTHON=$python E2E_REPEAT=$repeat E2E_GROUPS=${E2E_GROUPS:-libfido2,ssh,python,conform,bridge,gadget,usbip,browser} E2E_BROWSERS='${E2E_BROWSERS:-chromium firefox}' bash $here/inside-vm.sh $bin $results $repo" 2>&1 | grep -v -E '^\s*$'
status=${PIPESTATUS[0]}
set -e
echo "e2e: VM exited with status $status after $(( $(date +%s) - start )) s"
if [ ! -f "$results/summary" ]; then
    echo "e2e: no summary written by the VM: the run did not complete"
    exit 1
fi
cat "$results/summary"
grep -q "^e2e: [0-9]* passed, 0 failed" "$results/summary"
