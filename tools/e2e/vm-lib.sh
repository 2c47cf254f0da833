# The VM run's device lifecycle and lanes: sourced by inside-vm.sh (after steps.sh). Needs $bin, $out, $results,
# $python, $rounds and the counters of steps.sh.

# run_rounds AFTER...: runs run_round $rounds times, each in a new $HOME and working directory (and with its own
# $out when there are several), counting the rounds each step failed in; after each round the commands AFTER end
# what it may have left (a key, a board, a gadget would meet the next round).
run_rounds() {
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
        local failed_before=${#failed[@]}
        run_round
        for f in "${failed[@]:failed_before}"; do failures[$f]=$((${failures[$f]:-0} + 1)); done
        group
        local end
        for end in "$@"; do "$end" >/dev/null 2>&1; done
    done
}

finish() {
    dmesg 2>/dev/null | grep -i -E "uhid|hid-generic|queue|usb" >"$results/dmesg.log" 2>&1
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

# --- files in the guest's memory ----------------------------------------------------------------
# The guest reads the host's files over 9p without a cache, and under emulation every page of a program's code that
# it touches for the first time costs a round trip: Chromium took 36 s to start cold against 8 s from memory. Large
# sequential reads are cheap, so the browsers are copied into the guest's RAM (tmpfs) and mounted over their own
# directories, in the background while the other groups run; the fidosim binary is copied before anything starts.
in_memory() { # in_memory DIR: DIR's files from RAM from now on
    local copy=/run/in-memory$1
    mkdir -p "$copy" && cp -a "$1/." "$copy/" && mount --bind "$copy" "$1"
}

# The kind of key the steps drive: uhid in the VM (host-lib.sh makes it private on the host), and the environment a
# python-fido2 suite needs to find it through hidraw (tools/interop/conftest.py).
key_transport=uhid
hidraw_env=(FIDOSIM_TRANSPORT=uhid)
# smoke=1 (the VM): each client runs one ceremony over the kernel's hidraw node; the host runs every step.
smoke=${smoke:-0}
serve_pid=
serve_gone=()  # the command that tells the running key's device is gone (stop_key waits for it)
DEV=
# wait_for SECONDS WHAT COMMAND [ARGS...]: runs the command every 0.1 s until it succeeds; after SECONDS times
# E2E_WAIT_SCALE (default 3) of wall-clock time (not a number of tries: under load one try can take long) it says
# what it waited for and fails. A wait ends as soon as its condition holds, so the scale costs a passing run
# nothing; it is there for a busy host, where the VM's emulated CPUs run slower still (a key's start took over
# 60 s in a make test beside a Swift build, against 5-6 s alone). Commands passed here treat a device node or sysfs
# entry that vanishes while they read it as "not yet".
wait_for() {
    local seconds=$(($1 * ${E2E_WAIT_SCALE:-3})) what=$2
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
# hidraw_with PATTERN: the /dev/hidrawN whose uevent has a line matching PATTERN (grep -x). It looks in a child
# shell, which sees what the programs of the steps see: inside a private key's tree (host-lib.sh), its testbed.
hidraw_with() {
    bash -c 'for f in /sys/class/hidraw/hidraw*/device/uevent; do
        grep -qx -- "$1" "$f" 2>/dev/null || continue  # listed, then gone: not this one
        node=/dev/$(basename "$(dirname "$(dirname "$f")")")
        [ -c "$node" ] && { echo "$node"; exit 0; }
    done
    exit 1' hidraw_with "$1"
}
no_hidraw_with() { ! hidraw_with "$1" >/dev/null; }
# launch RECORD [--hidraw] -- SERVE_OPTIONS: `fidosim serve SERVE_OPTIONS` started through the package's launcher
# (python -m fidosim.launch, tools/python): once the key is ready (with --hidraw: once each key's hidraw node exists)
# its ready record is in RECORD; SIGTERM stops serve, and the launcher exits with serve's status. Only in the
# background (launch ... &, with serve's redirections): it becomes the launcher (exec), so $! is what stop_pid stops.
launch() {
    local record=$1
    shift
    rm -f "$record"
    exec "${launcher[@]:-$python}" -m fidosim.launch --binary "$bin" --record "$record" \
        --timeout $((60 * ${E2E_WAIT_SCALE:-3})) "$@"
}
key_with_serial() { DEV=$(hidraw_with "HID_UNIQ=$1"); } # sets DEV to the hidraw node of the key with serial $1
# start_key SERIAL [serve options]: a key with that serial number (started through the package's launcher, which
# waits for its hidraw node), found as $DEV by it (HID_UNIQ): the python-fido2 and conform keys of the second lane
# come and go at the same time.
start_key() {
    local serial=$1
    shift
    # A key of the same serial from an earlier step or round must be gone, or DEV could name its node.
    wait_for 30 "the previous key $serial to go" no_hidraw_with "HID_UNIQ=$serial" || return 1
    # A test rig's key approves; with $daily_in set, the key keeps the default of a key the desktop sees (prompt)
    # and that fifo is its terminal.
    local presence=(--presence approve) input=/dev/null
    if [ -n "${daily_in:-}" ]; then presence=(); input=$daily_in; fi
    local record=$out/key-$serial.json
    launch "$record" --hidraw -- --transport auto "${presence[@]}" --log-level info --serial "$serial" "$@" \
        <"$input" >"$out/serve-$serial.log" 2>&1 &
    serve_pid=$!
    serve_gone=(no_hidraw_with "HID_UNIQ=$serial")
    wait_for 60 "the hidraw node of key $serial" test -s "$record" && key_with_serial "$serial" && return 0
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
