# The VM run's bridge group: the firmware through a HID bridge board (uhid and USB). Sourced by inside-vm.sh;
# e2e_bridge runs it in the current round.

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
    launch "$out/key-bridge.json" -- --transport hid --device 1209:0001 "${serve[@]}" --flash memory \
        --presence approve --name bridge --log-level info >"$out/serve-bridge.log" 2>&1 &
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

e2e_bridge() {
if want bridge; then
    group
    gate start-bridge start_bridge
    step bridge-fido2-token-info bash -c "fido2-token -I $BDEV | tee /dev/stderr | grep -q 'version strings: U2F_V2, FIDO_2_0, FIDO_2_1_PRE, FIDO_2_1'"
    # The board's path (CTAPHID through hidapi, both ways) under the HID and getInfo checks; the firmware's checks run
    # on the host over a private hidraw key (make host-e2e).
    step bridge-conform "$bin" conform --device "hid:$BDEV" --name bridge --only hid,info --report "$out/conform-bridge"
    cleanup stop-bridge stop_bridge
    group
    gate start-bridge-usb-libusb start_bridge_usb
    step bridge-usb-libusb-fido2-token-info bash -c "fido2-token -I $BDEV | tee /dev/stderr | grep -q 'version strings: U2F_V2'"
    step bridge-usb-libusb-conform bash -c "'$bin' conform --device 'hid:$BDEV' --name bridge --only hid,info \
        --report '$out/conform-bridge-usb' && grep '0 failed, 0 skipped' '$out/conform-bridge-usb/report.md'"
    cleanup stop-bridge-usb-libusb stop_bridge
    step bridge-usb-removed bash -c "! ls /sys/kernel/config/usb_gadget/fidosim-board 2>/dev/null"
fi
}
