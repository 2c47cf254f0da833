# The VM run's steps: sourced by inside-vm.sh (and by test_steps.sh, which checks them on the host).
# Needs $out (where each step's log goes). A step prints PASS, FAIL (with the end of its log) or SKIP, and counts
# into pass, fail, skip and failed (the names of failed steps).
pass=0
fail=0
skip=0
failed=()
declare -A failures=()  # step name -> rounds in which it failed (E2E_REPEAT)

# step NAME COMMAND...: runs one step, its output in $out/NAME.log. A step after a failed gate (below) of its group
# is not run: it is reported as skipped because of that gate, and counted apart from failures.
blocked=
step() {
    local name=$1
    shift
    if [ -n "$blocked" ]; then
        skip=$((skip + 1))
        printf 'SKIP  %-32s (skipped: %s failed)\n' "$name" "$blocked"
        return 1
    fi
    local t0
    t0=$(date +%s%N)
    if "$@" >"$out/$name.log" 2>&1; then
        pass=$((pass + 1))
        printf 'PASS  %-32s %6d ms\n' "$name" $((($(date +%s%N) - t0) / 1000000))
    else
        fail=$((fail + 1))
        failed+=("$name")
        # A client that gave up may have been starved (the VM's emulated CPUs): the machine's load goes with it.
        { echo "load when it failed: $(cat /proc/loadavg 2>/dev/null)"
          sed 's/^/cpu pressure: /' /proc/pressure/cpu 2>/dev/null; } >>"$out/$name.log"
        printf 'FAIL  %-32s %6d ms\n' "$name" $((($(date +%s%N) - t0) / 1000000))
        tail -n 25 "$out/$name.log" | sed 's/^/      | /'
        return 1
    fi
}
# gate NAME COMMAND...: a step the rest of its group needs (a key or board starting): when it fails, the group's
# later steps are skipped until the next `group`; its cleanup steps still clean up.
gate() {
    step "$@" && return 0
    [ -n "$blocked" ] || blocked=$1
    return 1
}
group() { blocked=; }  # a new group of steps: nothing before it blocks them
# cleanup NAME COMMAND...: a step that stops what its group started. After a failed gate it still runs, quietly
# (whatever did start must not outlive its group), and is reported as skipped.
cleanup() {
    if [ -n "$blocked" ]; then
        "${@:2}" >"$out/$1.log" 2>&1
        step "$@"
        return 1
    fi
    step "$@"
}

