#!/usr/bin/env bash
# Runs inside the e2e VM as root: $1 fidosim binary, $2 results dir (writable), $3 repository.
# The whole script is one { ... } block: bash reads it completely before running it, so editing this file on the
# host while a VM runs it (the guest sees the host's file) cannot break the run half-way.
{
set -u
bin=$1
out=$2
repo=$3
python=${PYTHON:-python3}
# The launcher of keys (vm-lib.sh's launch): the package from the checkout, with the bytecode run-vm.sh compiled,
# run by the system's python3 without its site-packages (-S). The guest reads every file anew from the host,
# emulated: the venv's python with python-fido2 and its cryptography (which the launcher does not need) took about
# 6 s to start, per key.
launcher=(env "PYTHONPATH=$repo/tools/python/src" "PYTHONPYCACHEPREFIX=$out/pycache" python3 -S)
pin() { "$python" "$repo/tools/e2e/answer_pin.py" 1234 "$@"; } # runs a command, typing PIN 1234 at its prompts
groups=${E2E_GROUPS:-libfido2,ssh,python,conform,bridge,gadget,usbip,browser}
want() { [[ ",$groups," == *",$1,"* ]]; }
rounds=${E2E_REPEAT:-1}
# The VM runs what needs a kernel (uhid, the gadget on dummy_hcd, usbip through vhci-hcd, the bridge board over
# libusb) and one smoke ceremony per client over the kernel's hidraw node; every client's full group runs on the
# host against private keys (make host-e2e).
smoke=1
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "E2E_REPEAT must be a positive number, not '$rounds'"; rounds=1; }
results=$out
# step, gate, group, cleanup and the counters: tools/e2e/steps.sh (tested on the host by test_steps.sh).
source "$repo/tools/e2e/steps.sh"

# The device lifecycle and lanes, then one file per group (each read now, whole, like this block).
source "$repo/tools/e2e/vm-lib.sh"
for group_file in "$repo"/tools/e2e/groups/*.sh; do source "$group_file"; done


modprobe uhid || { echo "modprobe uhid failed"; fail=1; failed+=(modprobe-uhid); finish; }

mkdir -p /run/in-memory && cp "$bin" /run/in-memory/fidosim && bin=/run/in-memory/fidosim
copy_pid=
if want browser; then
    ( for browser in ${E2E_BROWSERS:-chromium firefox}; do
        case $browser in chromium) d=/usr/lib/chromium ;; firefox) d=/usr/lib/firefox-esr ;; *) continue ;; esac
        [ -d "$d" ] && { in_memory "$d" || echo "copying $d to memory failed (the browser runs from 9p)"; }
      done ) >"$results/in-memory.log" 2>&1 &
    copy_pid=$!
fi

# --- one round of every group ------------------------------------------------------------------------
# E2E_REPEAT=N runs every group N times in this boot, each round in a fresh home directory with its logs in
# round-K/, and counts per step the rounds in which it failed. The second lane runs beside the first groups; OpenSSH
# and the browsers send requests to every FIDO device they find, so they run after it has ended.
run_round() {
    { want python || want conform; } && run_lane second second_lane
    e2e_libfido2
    e2e_daily
    e2e_bridge
    e2e_gadget
    join_lane second
    e2e_usbip
    e2e_ssh
    e2e_browser
}

run_rounds stop_key stop_board
finish
exit
}
