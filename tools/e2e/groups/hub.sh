# Keys added and removed at run time on uhid (serve --hub): the kernel's hidraw node comes with an added key and goes
# with a removed one, and libfido2 talks to it. Only in the VM (uhid); e2e_libfido2 calls it there.

hub_keys_come_and_go() {
    local dir pid rc=0
    dir=$(mktemp -d)
    launch "$out/key-hub.json" -- --transport uhid --keys 0 --hub "$dir/hub.sock" --log-level info \
        >"$out/serve-hub.log" 2>&1 &
    pid=$!
    wait_for 30 "the hub socket" test -S "$dir/hub.sock" || rc=1
    [ "$rc" = 0 ] && { "$bin" ctl --control "$dir/hub.sock" addVirtualAuthenticator serial=HUB-UHID-1 \
        hasResidentKey=true || rc=1; }
    [ "$rc" = 0 ] && { wait_for 30 "the added key's hidraw node" key_with_serial HUB-UHID-1 || rc=1; }
    [ "$rc" = 0 ] && { fido2-token -I "$DEV" | tee /dev/stderr | grep -q 'options: rk,' || rc=1; }
    [ "$rc" = 0 ] && { "$bin" ctl --control "$dir/hub.sock" removeVirtualAuthenticator \
        authenticatorId=authenticator-1 || rc=1; }
    [ "$rc" = 0 ] && { wait_for 30 "the removed key's node to go" no_hidraw_with HID_UNIQ=HUB-UHID-1 || rc=1; }
    stop_pid "$pid" "serve --hub" || rc=1
    [ "$rc" = 0 ] || cat "$out/serve-hub.log"
    rm -rf "$dir"
    return "$rc"
}
