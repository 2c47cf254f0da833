# The VM run's usbip group: fidosim as a USB/IP server (serve --transport usbip); Linux's vhci-hcd imports the key
# with `usbip attach`, and it is a USB HID device with a hidraw node like any key. Sourced by inside-vm.sh;
# e2e_usbip runs it in the current round, after the second lane (OpenSSH talks to every FIDO device it finds).

usbip_serial=
usbip_ready() { UDEV=$(hidraw_with "HID_UNIQ=$usbip_serial"); }
usbip_gone() { no_hidraw_with "HID_UNIQ=$usbip_serial"; }
usbip_listed() { usbip list -r 127.0.0.1 2>/dev/null | grep -q "1209:f1d0"; }
usbip_port() { usbip port 2>/dev/null | sed -n 's/^Port \([0-9]*\):.*/\1/p' | head -1; }
ms_since() { echo $((($(date +%s%N) - $1) / 1000000)); }

start_usbip() {
    modprobe vhci-hcd || return 1
    usbip_serial=U$RANDOM$RANDOM
    launch "$out/key-usbip.json" -- --transport usbip --flash memory --presence approve --presence-delay 0 \
        --name usbip --serial "$usbip_serial" --log-level info >"$out/serve-usbip.log" 2>&1 &
    serve_pid=$!
    serve_gone=(usbip_gone)
    wait_for 30 "the USB/IP server" usbip_listed && return 0
    cat "$out/serve-usbip.log"
    stop_key
    return 1
}

attach_usbip() {
    local start
    start=$(date +%s%N)
    usbip attach -r 127.0.0.1 -b 1-1 || return 1
    wait_for 30 "the attached key's hidraw node" usbip_ready || return 1
    echo "usbip: attach to hidraw node in $(ms_since "$start") ms" | tee -a "$out/usbip-timing.txt"
}

detach_usbip() {
    local port
    port=$(usbip_port)
    [ -n "$port" ] || { echo "no port is attached"; return 1; }
    usbip detach -p "$port" && wait_for 30 "the detached key's hidraw node to go" usbip_gone
}

usbip_make_and_assert() { # a discoverable credential made and an assertion verified through the imported device
    local cdh id
    cdh() { head -c 32 /dev/urandom | base64; }
    printf '%s\n%s\n%s\n%s\n' "$(cdh)" "example.com" "alice" "$(head -c 16 /dev/urandom | base64)" >usbip.in
    fido2-cred -M -r -i usbip.in -o usbip.cred "${UDEV:-}" es256 &&
        fido2-cred -V -i usbip.cred -o usbip.pub es256 || return 1
    id=$(sed -n 5p usbip.cred)
    printf '%s\n%s\n%s\n' "$(cdh)" "example.com" "$id" >usbip.ain
    local start
    start=$(date +%s%N)
    fido2-assert -G -i usbip.ain -o usbip.assert "${UDEV:-}" || return 1
    echo "usbip: fido2-assert -G (getAssertion with its INIT and getInfo) in $(ms_since "$start") ms" |
        tee -a "$out/usbip-timing.txt"
    fido2-assert -V -i usbip.assert usbip.pub es256
}

usbip_discoverable_after_reattach() { # the credential made before the detach signs after the attach
    printf '%s\n%s\n' "$(head -c 32 /dev/urandom | base64)" "example.com" >usbip-rk.ain
    fido2-assert -G -r -i usbip-rk.ain -o usbip-rk.assert "${UDEV:-}" && fido2-assert -V -i usbip-rk.assert usbip.pub es256
}

# One key on uhid and USB/IP at once (serve --transport uhid --transport usbip): two hidraw nodes with one serial,
# this machine's through uhid and the attached one through vhci-hcd; one CTAPHID machine answers both.
joined_serial=
joined_node() { # joined_node uhid|vhci: the key's hidraw node under that driver
    local f node
    for f in /sys/class/hidraw/hidraw*; do
        grep -qx "HID_UNIQ=$joined_serial" "$f/device/uevent" 2>/dev/null || continue
        readlink -f "$f" | grep -q "$1" || continue
        node=/dev/$(basename "$f")
        [ -c "$node" ] && { echo "$node"; return 0; }
    done
    return 1
}
joined_local() { JLOCAL=$(joined_node uhid); }
joined_remote() { JREMOTE=$(joined_node vhci); }
joined_remote_gone() { ! joined_node vhci >/dev/null; }

start_joined() {
    joined_serial=J$RANDOM$RANDOM
    launch "$out/key-joined.json" -- --transport uhid --transport usbip --usbip-port 3241 --flash memory \
        --presence approve --presence-delay 0 --name joined --serial "$joined_serial" --log-level info \
        >"$out/serve-joined.log" 2>&1 &
    serve_pid=$!
    serve_gone=(no_hidraw_with "HID_UNIQ=$joined_serial")
    wait_for 30 "the joined key's uhid node" joined_local && return 0
    cat "$out/serve-joined.log"
    stop_key
    return 1
}

attach_joined() {
    usbip --tcp-port 3241 attach -r 127.0.0.1 -b 1-1 && wait_for 30 "the joined key's vhci node" joined_remote
}

joined_cred_here_assert_there() { # made through uhid, signed through USB/IP
    printf '%s\n%s\n%s\n%s\n' "$(head -c 32 /dev/urandom | base64)" "example.com" "jo" \
        "$(head -c 16 /dev/urandom | base64)" >joined.in
    fido2-cred -M -r -i joined.in -o joined.cred "$JLOCAL" es256 &&
        fido2-cred -V -i joined.cred -o joined.pub es256 || return 1
    printf '%s\n%s\n' "$(head -c 32 /dev/urandom | base64)" "example.com" >joined.ain
    fido2-assert -G -r -i joined.ain -o joined.assert "$JREMOTE" && fido2-assert -V -i joined.assert joined.pub es256
}

joined_detach_keeps_local() { # the USB/IP host lets go; this machine's node stays, and signs
    local before=$JLOCAL port
    port=$(usbip_port)
    usbip detach -p "$port" && wait_for 30 "the joined key's vhci node to go" joined_remote_gone || return 1
    grep -q "the key stays plugged into uhid" "$out/serve-joined.log" || { echo "no 'stays plugged' line"; return 1; }
    ! grep -q "power cycle" "$out/serve-joined.log" || { echo "the detach power-cycled the key"; return 1; }
    joined_local && [ "$JLOCAL" = "$before" ] || { echo "the uhid node changed: $before -> $JLOCAL"; return 1; }
    fido2-assert -G -r -i joined.ain -o joined2.assert "$JLOCAL" && fido2-assert -V -i joined2.assert joined.pub es256
}

# A rig, as a lab builds one for a real key (conform --touch-command/--refuse-command/--replug-command): the key
# waits for touches (presence prompt), a "relay" script presses until the key takes it, and the replug is the host
# letting go of the USB device and attaching it again. The runner is told nothing about the control socket.
write_rig_scripts() {
    cat >rig-touch.sh <<RIG
#!/bin/sh
# what a relay script does: press (here: the control socket's touch) until the key takes it, at most 10 s
for i in \$(seq 100); do "$bin" ctl --name usbip touch >/dev/null 2>&1 && exit 0; sleep 0.1; done
exit 1
RIG
    cat >rig-refuse.sh <<RIG
#!/bin/sh
for i in \$(seq 100); do "$bin" ctl --name usbip refuse >/dev/null 2>&1 && exit 0; sleep 0.1; done
exit 1
RIG
    cat >rig-replug.sh <<RIG
#!/bin/bash
# the USB host lets go of the key and attaches it again (usbip detach / attach): an unplug and a plug
port=\$(usbip port 2>/dev/null | sed -n 's/^Port \([0-9]*\):.*/\1/p' | head -1)
[ -n "\$port" ] && usbip detach -p "\$port" >&2
for i in \$(seq 50); do usbip attach -r 127.0.0.1 -b 1-1 >&2 2>/dev/null && exit 0; sleep 0.1; done
exit 1
RIG
    chmod +x rig-touch.sh rig-refuse.sh rig-replug.sh
}

# The groups whose checks touch, refuse and replug, destructive, touches by the relay script, replugs by usbip:
# 0 failed, 0 skipped, no prompt (the other groups run on the host, make host-e2e).
usbip_rig_conform() {
    write_rig_scripts
    "$bin" ctl --name usbip presence prompt || return 1
    local rc=0
    "$bin" conform --device "hid:${UDEV:-}" --allow-destructive --only hid,info,reset,selection,client-pin \
        --touch-command ./rig-touch.sh \
        --refuse-command ./rig-refuse.sh --replug-command ./rig-replug.sh --report "$out/conform-usbip-rig" \
        2>"$out/conform-usbip-rig.err" || rc=$?
    cat "$out/conform-usbip-rig.err"
    "$bin" ctl --name usbip presence approve delayMs=0
    usbip_ready  # the node after the last replug, for the steps after this one
    [ "$rc" = 0 ] || return 1
    grep -q ' 0 failed, 0 skipped' "$out/conform-usbip-rig/report.md" || { echo "failures or skips"; return 1; }
    ! grep -q '>>>' "$out/conform-usbip-rig.err" || { echo "a person was asked"; return 1; }
}

e2e_usbip() {
if want usbip; then
    group
    gate start-usbip start_usbip
    step usbip-list bash -c "usbip list -r 127.0.0.1 | tee /dev/stderr | grep -q '1-1: .*(1209:f1d0)'"
    gate usbip-attach attach_usbip
    step usbip-usb-device bash -c "grep -l '$usbip_serial' /sys/bus/usb/devices/*/serial | tee /dev/stderr | grep -q ."
    step usbip-fido2-token-list bash -c "fido2-token -L | tee /dev/stderr | grep -q '${UDEV:-}: vendor=0x1209, product=0xf1d0'"
    step usbip-fido2-token-info bash -c "fido2-token -I ${UDEV:-} | tee /dev/stderr | grep -q 'version strings: U2F_V2'"
    # First: its reset erases what the key holds.
    step usbip-rig-conform usbip_rig_conform
    step usbip-cred-assert usbip_make_and_assert
    step usbip-ssh-keygen bash -c "rm -f usbip_sk usbip_sk.pub; ssh-keygen -q -t ecdsa-sk -N '' -f usbip_sk </dev/null && \
        echo signed >usbip_msg && ssh-keygen -Y sign -n file -f usbip_sk usbip_msg && \
        printf 'u %s\n' \"\$(cat usbip_sk.pub)\" >usbip_allowed && \
        ssh-keygen -Y verify -n file -f usbip_allowed -I u -s usbip_msg.sig <usbip_msg"
    # A detach is an unplug: the key power-cycles (volatile state goes), its credentials stay.
    step usbip-detach detach_usbip
    step usbip-detach-is-a-power-cycle grep -q "the host detached the key" "$out/serve-usbip.log"
    step usbip-reattach attach_usbip
    step usbip-credentials-kept usbip_discoverable_after_reattach
    # The control plane's power cycle pulls the key out of its host (the host sees the device go) and offers it
    # again: attaching once more finds it, with its credentials.
    step usbip-control-power-cycle bash -c "'$bin' ctl --name usbip power-cycle && \
        for i in \$(seq 100); do [ -z \"\$(usbip port 2>/dev/null | sed -n 's/^Port \([0-9]*\):.*/\1/p')\" ] && exit 0; sleep 0.1; done; exit 1"
    step usbip-attach-after-power-cycle attach_usbip
    step usbip-credentials-after-power-cycle usbip_discoverable_after_reattach
    cleanup usbip-detach-last bash -c "[ -z \"\$(usbip port 2>/dev/null | sed -n 's/^Port \([0-9]*\):.*/\1/p')\" ] || \
        usbip detach -p \"\$(usbip port | sed -n 's/^Port \([0-9]*\):.*/\1/p' | head -1)\""
    cleanup stop-usbip stop_key
    group
    gate usbip-joined-start start_joined
    gate usbip-joined-attach attach_joined
    step usbip-joined-two-nodes bash -c "grep -lx 'HID_UNIQ=$joined_serial' /sys/class/hidraw/hidraw*/device/uevent | \
        tee /dev/stderr | wc -l | grep -qx 2 && fido2-token -I $JREMOTE | grep -q 'version strings: U2F_V2'"
    step usbip-joined-cred-here-assert-there joined_cred_here_assert_there
    step usbip-joined-detach-keeps-local joined_detach_keeps_local
    cleanup stop-joined stop_key
    group
fi
}
