# The host run's device lifecycle: every key is a private hidraw node (serve --transport private) in a umockdev
# testbed of its own, and the steps' programs join its tree through its environment file. Sourced by run-host.sh
# after vm-lib.sh, whose start_key and stop_key it replaces; the groups run unchanged on top of it.
key_transport=private
# The environment a python-fido2 suite runs in to follow each test's private key (tools/interop/conftest.py).
hidraw_env=(FIDOSIM_TRANSPORT=private LD_PRELOAD=libumockdev-preload.so.0)

# start_key SERIAL [serve options]: a private key with that serial number, started through the package's launcher
# (launch, vm-lib.sh); DEV is its node, and this shell's later programs see it (LD_PRELOAD and UMOCKDEV_DIR from its
# environment file) until stop_key.
start_key() {
    local serial=$1
    shift
    local presence=(--presence approve) input=/dev/null
    if [ -n "${daily_in:-}" ]; then presence=(); input=$daily_in; fi
    local ready=$out/ready-$serial.json environment=$HOME/key-$serial.env
    launch "$ready" --hidraw -- --transport private "${presence[@]}" --log-level info --serial "$serial" \
        --env-file "$environment" "$@" <"$input" >"$out/serve-$serial.log" 2>&1 &
    serve_pid=$!
    serve_gone=()
    if ! wait_for 30 "the private key $serial" test -s "$ready"; then
        echo "the key did not start"; cat "$out/serve-$serial.log"
        stop_key
        return 1
    fi
    # shellcheck disable=SC1090 # the key's own file
    . "$environment"
    DEV=$("$python" -c 'import json, sys; print(json.load(open(sys.argv[1]))["devnode"])' "$ready")
    echo "key $serial: $DEV in $UMOCKDEV_DIR"
}

stop_key() {
    [ -n "$serve_pid" ] || return 0
    local rc=0
    stop_pid "$serve_pid" serve || rc=$?
    serve_pid=
    unset LD_PRELOAD UMOCKDEV_DIR
    [ "$rc" = 0 ]
}
