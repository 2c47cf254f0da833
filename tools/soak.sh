#!/usr/bin/env bash
# make soak: make test's stages that run on this host (the Swift tests beside the fuzz smoke run, then both lanes:
# the package, interop and device suite; the host run and the browser examples), round after round, while other
# processes keep the CPUs busy at normal priority, as on a developer's or a shared CI machine. A test is judged by
# what the code did, never by how fast a loaded machine was: any test that fails here is a defect to find.
#   SOAK_ROUNDS=N   rounds (default 3)
#   SOAK_LOAD=N     busy processes beside the tests (default 2: stress-ng's CPU workers, or `sha256sum /dev/zero`
#                   where stress-ng is missing)
#   SOAK_LOG=DIR    where each round's output is kept (default a new directory under /tmp)
# It builds once (debug, with the tests) and makes the venv once, before the load starts. At the end it prints a
# table of rounds (seconds, failed tests) and each test that failed in any round, and exits non-zero if one did.
{
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
rounds=${SOAK_ROUNDS:-3}
load=${SOAK_LOAD:-2}
case $rounds$load in *[!0-9]*) echo "SOAK_ROUNDS and SOAK_LOAD: numbers"; exit 64 ;; esac
logs=${SOAK_LOG:-$(mktemp -d /tmp/fidosim-soak.XXXXXX)}
mkdir -p "$logs"

swift build --build-tests && swift build --product fidosim || exit 1
make --no-print-directory venv >/dev/null || exit 1

busy=()
start_load() {
    local i
    if command -v stress-ng >/dev/null; then
        stress-ng --cpu "$load" --quiet >/dev/null 2>&1 &
        busy+=($!)
    else
        for ((i = 0; i < load; i++)); do
            sha256sum /dev/zero >/dev/null 2>&1 &
            busy+=($!)
        done
    fi
}
stop_load() {
    [ ${#busy[@]} -gt 0 ] && kill "${busy[@]}" 2>/dev/null
    wait "${busy[@]}" 2>/dev/null
    busy=()
}
trap 'stop_load; exit 130' INT TERM

# The tests that failed in one round's log: pytest's "FAILED path::test", Swift Testing's "✘ Test name() ...
# failed", a fuzz target's "fuzz NAME: FAILED", a stage's own failure line.
failures_in() {
    grep -ahoE "^FAILED [^ ]+|^ERROR [^ ]+::[^ ]+|^✘ Test [^ ]+ (recorded an issue|failed)|^fuzz [a-z]+: (FAILED|build failed|a regression input fails)|^[a-z-]+: [0-9]+ passed, [1-9][0-9]* failed|^stage [a-z-]+: exit [0-9]+" "$1" |
        sed -E 's/ (recorded an issue|failed)$//' | sort -u
}

# stage TARGET: the make target, and a line "stage TARGET: exit N" when it fails (a failure no test line names).
stage() {
    make --no-print-directory STAGED=1 "$1"
    local rc=$?
    [ $rc = 0 ] || echo "stage $1: exit $rc"
}

table=$logs/rounds.txt
: >"$table"
all=$logs/failures.txt
: >"$all"
for ((round = 1; round <= rounds; round++)); do
    log=$logs/round-$round.log
    echo "=== soak round $round of $rounds ($load busy processes beside it): $log"
    start_load
    t0=$(date +%s)
    {
        stage unit-test-and-fuzz-smoke
        lane_log=$(mktemp)
        (
            stage host-e2e
            stage browser-examples
        ) >"$lane_log" 2>&1 &
        lane=$!
        stage python-package-test
        stage interop
        stage device-suite
        wait $lane
        cat "$lane_log"
        rm -f "$lane_log"
    } >"$log" 2>&1
    seconds=$(($(date +%s) - t0))
    stop_load
    found=$(failures_in "$log")
    count=$(printf '%s' "$found" | grep -c . || true)
    printf '%s\n' "$found" | grep . | sed "s/^/round $round: /" >>"$all"
    echo "$round|$seconds|$count" >>"$table"
    echo "soak round $round: ${seconds} s, $count failed"
    [ -n "$found" ] && printf '%s\n' "$found" | sed 's/^/  /'
done

echo
echo "make soak: $rounds rounds with $load busy processes"
printf '  %-6s %7s  %s\n' round s failed
while IFS='|' read -r r s c; do printf '  %-6s %7d  %s\n' "$r" "$s" "$c"; done <"$table"
if [ -s "$all" ]; then
    echo "failed in some round:"
    sed 's/^/  /' "$all"
    echo "logs: $logs"
    exit 1
fi
echo "make soak: every round clean (logs: $logs)"
exit 0
}
