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
pin() { "$python" "$repo/tools/e2e/answer_pin.py" 1234 "$@"; } # runs a command, typing PIN 1234 at its prompts
groups=${E2E_GROUPS:-libfido2,ssh,python,conform,bridge,gadget,browser}
want() { [[ ",$groups," == *",$1,"* ]]; }
rounds=${E2E_REPEAT:-1}
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "E2E_REPEAT must be a positive number, not '$rounds'"; rounds=1; }
results=$out
# step, gate, group, cleanup, step_retry and the counters: tools/e2e/steps.sh (tested on the host by test_steps.sh).
source "$repo/tools/e2e/steps.sh"

finish() {
    dmesg | grep -i -E "uhid|hid-generic|queue|usb" >"$results/dmesg.log" 2>&1
    {
        if [ "$rounds" -gt 1 ]; then
            echo "failures per step over $rounds rounds:"
            [ ${#failures[@]} -eq 0 ] && echo "  none"
            for f in "${!failures[@]}"; do echo "  $f: failed in ${failures[$f]} of $rounds"; done
        fi
        for f in "${failed[@]}"; do echo "failed: $f"; done
        echo "e2e: $pass passed, $fail failed, $skip skipped (skipped because an earlier step of its group failed)$([ "$rounds" -gt 1 ] && echo ", $rounds rounds")"
    } | tee "$results/summary"
    exit 0
}

modprobe uhid || { echo "modprobe uhid failed"; fail=1; failed+=(modprobe-uhid); finish; }

# --- files in the guest's memory ----------------------------------------------------------------
# The guest reads the host's files over 9p without a cache, and under emulation every page of a program's code that
# it touches for the first time costs a round trip: Chromium took 36 s to start cold against 8 s from memory. Large
# sequential reads are cheap, so the browsers are copied into the guest's RAM (tmpfs) and mounted over their own
# directories, in the background while the other groups run; the fidosim binary is copied before anything starts.
in_memory() { # in_memory DIR: DIR's files from RAM from now on
    local copy=/run/in-memory$1
    mkdir -p "$copy" && cp -a "$1/." "$copy/" && mount --bind "$copy" "$1"
}
mkdir -p /run/in-memory && cp "$bin" /run/in-memory/fidosim && bin=/run/in-memory/fidosim
copy_pid=
if want browser; then
    ( for browser in ${E2E_BROWSERS:-chromium firefox}; do
        case $browser in chromium) d=/usr/lib/chromium ;; firefox) d=/usr/lib/firefox-esr ;; *) continue ;; esac
        [ -d "$d" ] && { in_memory "$d" || echo "copying $d to memory failed (the browser runs from 9p)"; }
      done ) >"$results/in-memory.log" 2>&1 &
    copy_pid=$!
fi

serve_pid=
serve_gone=()  # the command that tells the running key's device is gone (stop_key waits for it)
DEV=
# wait_for SECONDS WHAT COMMAND [ARGS...]: runs the command every 0.1 s until it succeeds; after SECONDS of
# wall-clock time (not a number of tries: under load one try can take long) it says what it waited for and fails.
# Commands passed here treat a device node or sysfs entry that vanishes while they read it as "not yet".
wait_for() {
    local seconds=$1 what=$2
    shift 2
    local deadline=$(($(date +%s) + seconds))
    while :; do
        "$@" 2>/dev/null && return 0
        [ "$(date +%s)" -ge "$deadline" ] && break
        sleep 0.1
    done
    echo "waited ${seconds} s for $what: gave up"
    return 1
}
hidraw_with() { # hidraw_with PATTERN: the /dev/hidrawN whose uevent has a line matching PATTERN (grep -x)
    local f node
    for f in /sys/class/hidraw/hidraw*/device/uevent; do
        grep -qx -- "$1" "$f" 2>/dev/null || continue  # listed, then gone: not this one
        node=/dev/$(basename "$(dirname "$(dirname "$f")")")
        [ -c "$node" ] && { echo "$node"; return 0; }
    done
    return 1
}
no_hidraw_with() { ! hidraw_with "$1" >/dev/null; }
key_with_serial() { DEV=$(hidraw_with "HID_UNIQ=$1"); } # sets DEV to the hidraw node of the key with serial $1
# start_key SERIAL [serve options]: a key with that serial number, found as $DEV by it (HID_UNIQ): the python-fido2
# and conform keys of the second lane come and go at the same time.
start_key() {
    local serial=$1
    shift
    # A key of the same serial from an earlier step or round must be gone, or DEV could name its node.
    wait_for 30 "the previous key $serial to go" no_hidraw_with "HID_UNIQ=$serial" || return 1
    # A test rig's key approves; with $daily_in set, the key keeps the default of a key the desktop sees (prompt)
    # and that fifo is its terminal.
    local presence=(--presence approve) input=/dev/null
    if [ -n "${daily_in:-}" ]; then presence=(); input=$daily_in; fi
    "$bin" serve --transport auto "${presence[@]}" --log-level info --serial "$serial" "$@" <"$input" \
        >"$out/serve-$serial.log" 2>&1 &
    serve_pid=$!
    serve_gone=(no_hidraw_with "HID_UNIQ=$serial")
    wait_for 60 "the hidraw node of key $serial" key_with_serial "$serial" && return 0
    echo "the key did not appear"; cat "$out/serve-$serial.log"
    stop_key  # no stray key for the steps that talk to every key
    return 1
}
# stop_pid PID WHAT: sends SIGTERM and returns the exit status, saying so unless it is 0.
stop_pid() {
    kill "$1" 2>/dev/null
    wait "$1"
    local rc=$?
    [ "$rc" = 0 ] || echo "$2 exited with status $rc (0 expected after SIGTERM)"
    return "$rc"
}
# stop_key: stops the running key and waits until its device is gone, so the next step starts without it.
stop_key() {
    [ -n "$serve_pid" ] || return 0
    local rc=0
    stop_pid "$serve_pid" serve || rc=$?
    serve_pid=
    if [ ${#serve_gone[@]} -gt 0 ]; then
        wait_for 30 "the stopped key's device to go" "${serve_gone[@]}" || rc=1
        serve_gone=()
    fi
    [ "$rc" = 0 ]
}

# --- lanes ------------------------------------------------------------------------------------------
# The guest has two CPUs and a step mostly keeps one busy, so the python-fido2 suite (the longest group) and conform
# run in a second lane, in the background, beside libfido2, the bridge and the gadget. That is safe because every
# client in these groups opens only its own key's device (by path, serial number or USB IDs). OpenSSH and the
# browsers send requests to every FIDO device they find, so they run after the lane has ended, each with only
# its own key present. A lane's steps are printed when it is joined.
declare -A lane_pid
run_lane() { # run_lane NAME FUNCTION
    (
        pass=0 fail=0 skip=0 failed=()
        group
        "$2"
        { echo "$pass $fail $skip"; for f in "${failed[@]}"; do echo "$f"; done; } >"$out/lane-$1.result"
    ) >"$out/lane-$1.out" 2>&1 &
    lane_pid[$1]=$!
}
join_lane() { # join_lane NAME: waits for the lane, prints its steps and counts its results
    [ -n "${lane_pid[$1]:-}" ] || return 0
    wait "${lane_pid[$1]}"
    cat "$out/lane-$1.out"
    if [ ! -s "$out/lane-$1.result" ]; then
        echo "FAIL  lane $1 ended without its results"
        fail=$((fail + 1))
        failed+=("lane-$1")
        return
    fi
    local p f k name
    { read -r p f k; while read -r name; do failed+=("$name"); done; } <"$out/lane-$1.result"
    pass=$((pass + p))
    fail=$((fail + f))
    skip=$((skip + k))
}

# --- python-fido2 over its own hidraw backend: the interop suite (second lane) --------------------------
# Under emulation every test pays a few seconds to start a key, so the VM runs the part of the suite whose outcome
# depends on the transport: the core flows and CTAPHID behaviour (test_udp_interop), PIN protocols 1 and 2 with
# their blocks and power cycles, credential management, hmac-secret, a large blob (long fragmented messages), and
# of the control socket the touches, events and power cycles that go through the real hidraw device. The rest of
# the suite (bio, config, CTAP 2.2, profiles, attestation, several keys, restarts) is about transport-independent
# firmware features and runs over UDP in `make test`. Each test's key has its own serial number, by which the
# fixtures find its hidraw device.
vm_python_tests=(
    test_udp_interop.py
    "test_pin_interop.py::test_set_change_pin_and_retries"
    "test_pin_interop.py::test_three_wrong_pins_block_until_power_cycle_and_retries_persist"
    "test_pin_interop.py::test_client_register_and_authenticate_with_pin"
    "test_pin_interop.py::test_credential_management"
    "test_pin_interop.py::test_hmac_secret_and_prf"
    "test_blob_config_interop.py::test_large_blob_extension_with_fido2_client"
    "test_control_interop.py::test_prompt_mode_waits_for_a_touch_announced_by_an_event"
    "test_control_interop.py::test_deny_and_approve_next"
    "test_control_interop.py::test_power_cycle_lifts_the_three_wrong_pins_block"
)
# --- fidosim conform over /dev/hidraw through hidapi ---------------------------------------------------
# Every check, destructive ones included; touches, refusals and power cycles (a uhid unplug and replug, after
# which the runner finds the key again by its serial number) go through the key's control socket. In the second
# lane, after python-fido2, which keeps the two lanes about as long as each other.
conform_group() {
    group
    gate start-key-conform start_key e2e-conform --flash memory --name conform
    step conform-hidraw "$bin" conform --device "hid:$DEV" --name conform --allow-destructive --report "$out/conform"
    # getAssertion through hidraw against the raw signing rate, measured in this VM (emulated, debug build). conform
    # replugged the key, so its node is looked up again by serial number: the old one may now be the gadget's, and a
    # bench there made the first lane's gadget-conform see CHANNEL_BUSY.
    gate find-key-conform wait_for 30 "the conform key's hidraw node" key_with_serial e2e-conform
    step bench-hidraw bash -c "set -o pipefail; '$bin' bench --hid-device '$DEV' --seconds 3 | tee '$out/bench-hidraw.md'"
    cleanup stop-key-conform stop_key
}

second_lane() {
    want python && group && step python-fido2-hidraw env FIDOSIM_TRANSPORT=uhid FIDOSIM_BIN="$bin" "$python" -m pytest \
        -p no:benchmark -p no:cacheprovider -q "${vm_python_tests[@]/#/$repo/tools/interop/}"
    want conform && conform_group
    # Last: started before conform, it moved conform-hidraw's 7609-byte PING next to the first lane's browsers,
    # where the starved key let the kernel's uhid output queue (32 reports) overflow once.
    want python && device_suite_group
}
# python-fido2's device tests over hidraw, once: a fresh key with a batch attestation, touched and replugged
# through its control socket by the suite's plugin (tools/device-suite). The socket lives in the round's home
# directory: the results directory is the host's filesystem, where a unix socket cannot be bound.
device_suite_group() {
    local sock=$HOME/device-suite.sock
    group
    gate start-key-device-suite start_key e2e-device-suite --name device-suite --flash memory --presence prompt \
        --control "$sock"
    gate provision-device-suite "$bin" attestation provision --socket "$sock" --root-out "$HOME/device-suite-root.pem"
    step python-fido2-device-suite-hidraw env FIDOSIM_BIN="$bin" PYTHON="$python" \
        DEVICE_SUITE_CACHE="$repo/.build/device-suite" bash "$repo/tools/device-suite/run.sh" --hidraw \
        "$sock" e2e-device-suite
    cleanup stop-key-device-suite stop_key
}
# --- one round of every group ------------------------------------------------------------------------
# E2E_REPEAT=N runs every group N times in this boot, each round in a fresh home directory with its logs in
# round-K/, and counts per step the rounds in which it failed.
run_round() {
{ want python || want conform; } && run_lane second second_lane

# --- the device ---------------------------------------------------------------------------------
group
gate start-key start_key e2e-libfido2 --name libfido2
step auto-transport-picks-uhid grep -q "using uhid" "$out/serve-e2e-libfido2.log"
step approve-on-uhid-warns grep -q "warning: presence approve after 0.2 seconds on uhid: any local program" \
    "$out/serve-e2e-libfido2.log"
step fido2-token-list bash -c "fido2-token -L | tee /dev/stderr | grep -q '$DEV: vendor=0x1209, product=0xf1d0'"
step fido2-token-info bash -c "fido2-token -I $DEV | tee /dev/stderr | grep -q 'version strings: U2F_V2, FIDO_2_0, FIDO_2_1_PRE, FIDO_2_1'"

# --- libfido2 tools: make and verify credentials, assertions ----------------------------------
if want libfido2; then
cdh() { head -c 32 /dev/urandom | base64; }
make_cred() { # $1 name, extra args for fido2-cred -M; $wrap runs fido2-cred -M (pin: answering the PIN prompt)
    local name=$1; shift
    printf '%s\n%s\n%s\n%s\n' "$(cdh)" "example.com" "alice" "$(head -c 16 /dev/urandom | base64)" >"$name.in"
    local verify_args=()
    [[ " $* " == *" -h "* ]] && verify_args=(-h)
    ${wrap:-} fido2-cred -M "$@" -i "$name.in" -o "$name.cred" "$DEV" es256 &&
        fido2-cred -V "${verify_args[@]}" -i "$name.cred" -o "$name.pub" es256
}
assert_cred() { # $1 name; verifies an assertion with the credential's id against its public key
    local name=$1
    local id
    id=$(sed -n 5p "$name.cred")
    printf '%s\n%s\n%s\n' "$(cdh)" "example.com" "$id" >"$name.ain"
    fido2-assert -G -i "$name.ain" -o "$name.assert" "$DEV" &&
        fido2-assert -V -i "$name.assert" "$name.pub" es256
}
assert_discoverable() { # no allow list: the key picks the discoverable credential
    printf '%s\n%s\n' "$(cdh)" "example.com" >rk.ain
    fido2-assert -G -r -i rk.ain -o rk.assert "$DEV" &&
        fido2-assert -V -i rk.assert rk.pub es256
}
step fido2-cred-make-verify make_cred plain
step fido2-assert-get-verify assert_cred plain
step fido2-cred-discoverable make_cred rk -r
step fido2-assert-discoverable assert_discoverable

# With a PIN: set it, then PIN-protected discoverable credentials, hmac-secret, credential management.
assert_hmac() { # two assertions with the same salt give the same hmac-secret output
    local id salt
    id=$(sed -n 5p pinrk.cred)
    salt=$(head -c 32 /dev/urandom | base64)
    for n in 1 2; do
        printf '%s\n%s\n%s\n%s\n' "$(cdh)" "example.com" "$id" "$salt" >"hmac$n.ain"
        fido2-assert -G -h -i "hmac$n.ain" -o "hmac$n.assert" "$DEV" || return 1
        fido2-assert -V -h -i "hmac$n.assert" pinrk.pub es256 || return 1
    done
    local a b
    a=$(tail -n 1 hmac1.assert)
    b=$(tail -n 1 hmac2.assert)
    echo "hmac-secret outputs: $a / $b"
    [ -n "$a" ] && [ "$a" = "$b" ]
}
list_rps() { pin fido2-token -L -r "$DEV" | tee /dev/stderr | grep -q "example.com"; }
list_creds() { # the discoverable credential made with the PIN is listed under example.com
    pin fido2-token -L -k example.com "$DEV" | tee /dev/stderr | grep -qF "$(sed -n 5p pinrk.cred)"
}
delete_cred() { # after deleting it, the key no longer lists it and no longer signs with it
    local id
    id=$(sed -n 5p pinrk.cred)
    pin fido2-token -D -i "$id" "$DEV" || return 1
    if pin fido2-token -L -k example.com "$DEV" | grep -qF "$id"; then echo "still listed"; return 1; fi
    if assert_cred pinrk; then echo "still signs"; return 1; fi
    return 0
}
step fido2-token-set-pin pin fido2-token -S "$DEV"
step fido2-token-info-pin bash -c "fido2-token -I $DEV | tee /dev/stderr | grep -qw clientPin && fido2-token -I $DEV | grep -q 'pin retries: 8'"
step fido2-token-change-pin pin fido2-token -C "$DEV"
wrap=pin step fido2-cred-discoverable-pin-hmac make_cred pinrk -r -h
step fido2-assert-hmac-secret assert_hmac
step fido2-token-list-rps list_rps
step fido2-token-list-credentials list_creds
step fido2-token-delete-credential delete_cred
fi

cleanup stop-key stop_key

# --- a daily key: on uhid without --presence, nothing is signed until the person answers its terminal ---------
if want libfido2; then
touch_daily() {
    make_cred daily &
    local pid=$!
    wait_for 20 "the daily key to ask" grep -q "touch requested: makeCredential for example.com" \
        "$out/serve-e2e-daily.log" || { kill $pid; return 1; }
    sleep 1
    kill -0 $pid 2>/dev/null || { echo "makeCredential ended without a touch"; return 1; }
    echo y >&7
    wait $pid
}
group
daily_in="$HOME/daily-terminal.fifo"
rm -f "$daily_in" && mkfifo "$daily_in" && exec 7<>"$daily_in"
gate start-daily-key start_key e2e-daily --name daily --flash memory
daily_in=
step daily-key-prompts-by-default grep -q "presence: prompt, the default on uhid" "$out/serve-e2e-daily.log"
step daily-key-does-not-warn bash -c "! grep -q 'warning: presence' '$out/serve-e2e-daily.log'"
step daily-key-waits-for-the-person touch_daily
cleanup stop-daily-key stop_key
exec 7>&-
fi

# --- the firmware through a HID bridge board: serve --transport hid ------------------------------------
# tools/bridge/board_fixture.py stands in for the board with two uhid devices: the board side (vendor usage page,
# 1209:0001) that fidosim opens through hidapi, and the host side (a FIDO key, 1209:F1D1) the clients use.
board_names=("HID_NAME=fidosim bridge board (host side)" "HID_NAME=fidosim bridge board (board side)"
    "HID_NAME=fidosim fidosim bridge board (board side)")
bridge_ready() { # sets BDEV to the board's host-side hidraw node once fidosim serves through the board
    BDEV=$(hidraw_with "HID_NAME=fidosim bridge board (host side)") &&
        grep -q "serving a virtual key on hid " "$out/serve-bridge.log"
}
board_started() { # the fixture said it is ready; 3 (give up) when it has exited instead
    grep -q "bridge board ready" "$out/board.log" && return 0
    kill -0 "$board_pid" 2>/dev/null || return 3
    return 1
}
board_gone() { # no side of a board is left: neither hidraw node, nor the USB board's gadget in configfs
    local name
    for name in "${board_names[@]}"; do hidraw_with "$name" >/dev/null && return 1; done
    [ ! -e /sys/kernel/config/usb_gadget/fidosim-board ]
}
udc_free() { # no gadget in configfs is bound to a USB device controller
    local f
    for f in /sys/kernel/config/usb_gadget/*/UDC; do
        [ -e "$f" ] || continue
        [ -z "$(tr -d '[:space:]' <"$f" 2>/dev/null)" ] || return 1
    done
}
# start_bridge [fixture options] [-- serve options]: the board fixture, then fidosim serving through its board side.
start_bridge() {
    local fixture=() serve=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do fixture+=("$1"); shift; done
    [ "${1:-}" = -- ] && shift
    serve=("$@")
    wait_for 30 "the previous board to go" board_gone || return 1
    wait_for 30 "the USB device controller to be free" udc_free || return 1
    # Raised priority: the fixture stands in for the board's own processor. It must drain its uhid devices'
    # kernel queues (32 reports, and uhid drops what does not fit) while the other lane keeps the CPUs busy; a
    # 7,609-byte PING (129 reports) once lost reports to it.
    nice -n -10 "$python" "$repo/tools/bridge/board_fixture.py" "${fixture[@]}" >"$out/board.log" 2>&1 &
    board_pid=$!
    if ! wait_for 90 "the board fixture to be ready" board_started; then
        cat "$out/board.log"
        stop_board
        return 1
    fi
    "$bin" serve --transport hid --device 1209:0001 "${serve[@]}" --flash memory --presence approve --name bridge \
        --log-level info >"$out/serve-bridge.log" 2>&1 &
    serve_pid=$!
    wait_for 60 "fidosim to serve through the board" bridge_ready && return 0
    cat "$out/board.log" "$out/serve-bridge.log"
    return 1
}
stop_board() { # stops the fixture and waits until both its devices are gone
    [ -n "${board_pid:-}" ] || return 0
    local rc=0
    stop_pid "$board_pid" "the board fixture" || rc=$?
    board_pid=
    wait_for 30 "the board's devices to go" board_gone || rc=1
    [ "$rc" = 0 ]
}
stop_bridge() {
    stop_key
    local rc=$?
    stop_board || rc=1
    cat "$out/board.log"
    return $rc
}
# The same with the board as a real USB device (a HID gadget on dummy_hcd) that fidosim opens through hidapi's
# libusb backend, as a board that needs it would be.
start_bridge_usb() {
    modprobe dummy_hcd && modprobe libcomposite && modprobe usb_f_hid || return 1
    mountpoint -q /sys/kernel/config || mount -t configfs none /sys/kernel/config || return 1
    start_bridge --board-usb -- --hid-backend libusb && grep -q "libusb backend" "$out/serve-bridge.log"
}
if want bridge; then
    group
    gate start-bridge start_bridge
    step bridge-fido2-token-info bash -c "fido2-token -I $BDEV | tee /dev/stderr | grep -q 'version strings: U2F_V2, FIDO_2_0, FIDO_2_1_PRE, FIDO_2_1'"
    step bridge-conform "$bin" conform --device "hid:$BDEV" --name bridge --allow-destructive --report "$out/conform-bridge"
    cleanup stop-bridge stop_bridge
    group
    gate start-bridge-usb-libusb start_bridge_usb
    step bridge-usb-libusb-fido2-token-info bash -c "fido2-token -I $BDEV | tee /dev/stderr | grep -q 'version strings: U2F_V2'"
    step bridge-usb-libusb-conform bash -c "'$bin' conform --device 'hid:$BDEV' --name bridge --allow-destructive \
        --report '$out/conform-bridge-usb' && grep '0 failed, 0 skipped' '$out/conform-bridge-usb/report.md'"
    cleanup stop-bridge-usb-libusb stop_bridge
    step bridge-usb-removed bash -c "! ls /sys/kernel/config/usb_gadget/fidosim-board 2>/dev/null"
fi

# --- the firmware as a USB device: serve --transport gadget on dummy_hcd -------------------------------
# configfs makes a gadget with one HID function; dummy_hcd is a loopback USB device controller whose host side is
# this kernel: it enumerates the gadget over USB, binds usbhid, and the key appears as a hidraw device.
gadget_ready() { GDEV=$(hidraw_with "HID_NAME=fidosim fidosim gadget key"); } # its hidraw node, once usbhid bound it
gadget_gone() { no_hidraw_with "HID_NAME=fidosim fidosim gadget key" && [ ! -e /sys/kernel/config/usb_gadget/fidosim-gadget ]; }
start_gadget() {
    modprobe dummy_hcd && modprobe libcomposite && modprobe usb_f_hid || return 1
    mountpoint -q /sys/kernel/config || mount -t configfs none /sys/kernel/config || return 1
    wait_for 30 "the previous gadget to go" gadget_gone || return 1
    wait_for 30 "the USB device controller to be free" udc_free || return 1
    "$bin" serve --transport gadget --flash memory --presence approve --name gadget --device-name "fidosim gadget key" \
        --log-level info >"$out/serve-gadget.log" 2>&1 &
    serve_pid=$!
    serve_gone=(gadget_gone)
    wait_for 90 "the gadget key's hidraw node" gadget_ready && return 0
    cat "$out/serve-gadget.log"; ls /sys/class/udc /sys/class/hidraw; grep -h HID_NAME /sys/class/hidraw/*/device/uevent
    stop_key
    return 1
}
if want gadget; then
    group
    gate start-gadget start_gadget
    step gadget-usb-enumerated bash -c "grep -l 'fidosim gadget key' /sys/bus/usb/devices/*/product | tee /dev/stderr | grep -q ."
    step gadget-fido2-token-list bash -c "fido2-token -L | tee /dev/stderr | grep -q '$GDEV: vendor=0x1209, product=0xf1d0'"
    step gadget-conform "$bin" conform --device "hid:$GDEV" --name gadget --allow-destructive --report "$out/conform-gadget"
    # The gadget is a real USB device, so hidapi's libusb backend (loaded at run time) lists it by its USB IDs, with
    # the FIDO usage page read from usbhid's sysfs node (hidapi-libusb 0.13 reports none).
    step gadget-list-libusb bash -c "'$bin' conform --list-devices --hid-backend libusb | tee /dev/stderr | grep -q '1209:f1d0	FIDO'"
    # The whole suite again through libusb (usbfs; usbhid is detached while it runs), found by usage page.
    step gadget-conform-libusb bash -c "'$bin' conform --device hid:auto --hid-backend libusb --name gadget \
        --allow-destructive --report '$out/conform-gadget-libusb' && grep '0 failed, 0 skipped' '$out/conform-gadget-libusb/report.md'"
    cleanup stop-gadget stop_key
    step gadget-removed bash -c "! ls /sys/kernel/config/usb_gadget/fidosim-gadget 2>/dev/null"
fi

# --- OpenSSH: FIDO keys, signatures verified by ssh-keygen ---------------------------------------
# After the second lane: ssh-keygen's middleware sends requests to every FIDO device it finds.
join_lane second
if want ssh; then
group
gate start-key-ssh start_key e2e-ssh --name ssh
ssh_sign_verify() { # $1 key file
    echo "a message for $1" >"$1.msg"
    ssh-keygen -Y sign -f "$1" -n file "$1.msg" &&
        echo "alice@fidosim $(cut -d' ' -f1,2 "$1.pub")" >"$1.allowed" &&
        ssh-keygen -Y verify -f "$1.allowed" -I alice@fidosim -n file -s "$1.msg.sig" <"$1.msg"
}
ensure_pin() { fido2-token -I "$DEV" | grep -qw clientPin || pin fido2-token -S "$DEV"; }
download_resident() { # ssh-keygen -K writes the resident key's handle files; the public key must match
    mkdir -p rk && cd rk || return 1
    pin ssh-keygen -K -N "" || return 1
    ls -l
    local got
    got=$(cut -d' ' -f2 id_ecdsa_sk_rk_e2e.pub)
    cd .. && [ "$got" = "$(cut -d' ' -f2 id_rk.pub)" ]
}
step ssh-keygen-ecdsa-sk ssh-keygen -t ecdsa-sk -f id_ecdsa_sk -N "" -C e2e
step ssh-sign-verify-ecdsa-sk ssh_sign_verify id_ecdsa_sk
step ssh-keygen-ed25519-sk ssh-keygen -t ed25519-sk -f id_ed25519_sk -N "" -C e2e
step ssh-sign-verify-ed25519-sk ssh_sign_verify id_ed25519_sk
step ssh-ensure-pin ensure_pin
step ssh-keygen-resident pin ssh-keygen -t ecdsa-sk -O resident -O application=ssh:e2e -f id_rk -N "" -C e2e
step ssh-sign-verify-resident ssh_sign_verify id_rk
step ssh-keygen-download-resident download_resident
cleanup stop-key-ssh stop_key
fi

# --- browsers ----------------------------------------------------------------------------------
# The key must exist before a browser starts (Chromium enumerates hidraw devices at start-up). Each browser
# gets a fresh key in memory (no PIN: a headless browser cannot show its PIN dialog) and runs its flows in one
# start; its log (Chromium's with its FIDO device log) lands in $out/<browser>.log.
# Chromium raises userVerification to "required" for a discoverable credential on a security key: its key has
# the simulated fingerprint sensor with one finger enrolled, so Chromium verifies the user with the finger
# (getPinUvAuthTokenUsingUvWithPermissions) and runs the passkey flow too. Firefox takes "preferred" at its
# word and runs both flows on a key without built-in UV.
flows_for() {
    case $1 in
        chromium) echo "${CHROMIUM_FLOWS:-passkey,second-factor}" ;;
        *) echo "${BROWSER_FLOWS:-passkey,second-factor}" ;;
    esac
}
key_args_for() {
    case $1 in
        chromium) echo "--uv fingerprint --enrolled-fingers 1" ;;
        *) echo "" ;;
    esac
}
if want browser; then
    [ -n "$copy_pid" ] && wait "$copy_pid" && cat "$results/in-memory.log"
    copy_pid=
    for browser in ${E2E_BROWSERS:-chromium firefox}; do
        group
        # shellcheck disable=SC2046 # the key arguments are words
        gate "start-key-$browser" start_key "e2e-$browser" --flash memory $(key_args_for "$browser")
        step_retry "browser-$browser" env PYTHON="$python" BROWSER_FLOWS="$(flows_for "$browser")" \
            BROWSER_LOG_DIR="$out" "$repo/tools/browser/run-browsers.sh" "$browser"
        cleanup "stop-key-$browser" stop_key
    done
fi

}

for ((round = 1; round <= rounds; round++)); do
    out=$results
    if [ "$rounds" -gt 1 ]; then
        out=$results/round-$round
        mkdir -p "$out"
        echo "--- round $round of $rounds"
    fi
    work=$(mktemp -d)
    export HOME=$work
    cd "$work" || exit 1
    failed_before=${#failed[@]}
    run_round
    for f in "${failed[@]:failed_before}"; do failures[$f]=$((${failures[$f]:-0} + 1)); done
    # Nothing of this round may outlive it: a key, a board or a gadget left here would meet the next round.
    group
    stop_key >/dev/null 2>&1
    stop_board >/dev/null 2>&1
done
finish
exit
}
