#!/usr/bin/env bash
# make test: every stage once, each timed, the table printed at the end (docs/testing.md). One debug build and one
# venv serve every stage (STAGED=1). A failed stage does not stop the later ones: the run reports them all, and
# exits non-zero if any failed. The independent waiting stages run side by side within the 2 cores:
#   lane 1: the Python package's examples, interop (itself two lanes), then the device suite: each starts pcscd
#           (the package's NFC example, the PC/SC tests, the device suite's card runs), and a machine has one
#   lane 2: the host e2e run, then the package's browser examples (Playwright, Selenium): private keys, no pcscd
# The VM comes last, alone: its emulated CPUs take both cores.
#   E2E=skip leaves the VM out.
# The whole script is one { ... } block, read before it runs: editing it during a run cannot break that run.
{
set -uo pipefail
cd "$(dirname "$0")/.."
times=$(mktemp)
logs=$(mktemp -d /tmp/fidosim-make-test.XXXXXX)
started=$(date +%s)
failed=()

# stage NAME COMMAND...: runs the command, prints its output, records its seconds and status.
stage() {
    local name=$1 t0 rc
    shift
    t0=$(date +%s)
    echo "=== $name"
    "$@"
    rc=$?
    echo "$name|$(($(date +%s) - t0))|$rc" >>"$times"
    [ "$rc" = 0 ] || failed+=("$name")
    return 0
}

# lane NAME STAGE... (in the background): each "name:make-target" stage one after another, output to its log.
lane() {
    local name=$1
    shift
    (
        for spec in "$@"; do
            local label=${spec%%:*} target=${spec#*:} t0 rc
            t0=$(date +%s)
            echo "=== $label"
            make --no-print-directory STAGED=1 "$target"
            rc=$?
            echo "$label|$(($(date +%s) - t0))|$rc" >>"$times"
        done
    ) >"$logs/$name.log" 2>&1 &
}

stage "format lint" make --no-print-directory format-lint
stage "build (debug, with tests)" bash -c 'swift build --build-tests && swift build --product fidosim'
stage "venv" make --no-print-directory venv
stage "architecture map" make --no-print-directory STAGED=1 architecture-map
stage "swift tests + fuzz smoke" make --no-print-directory STAGED=1 unit-test-and-fuzz-smoke

t0=$(date +%s)
lane interop "python package:python-package-test" "interop lanes:interop" "device suite:device-suite"
lane clients "private-key clients (host e2e):host-e2e" "browser examples (Playwright, Selenium):browser-examples"
wait
for name in interop clients; do
    echo "=== lane $name"
    cat "$logs/$name.log"
done
echo "both lanes, side by side (package, interop, device suite; host e2e, browser examples)|$(($(date +%s) - t0))|0" \
    >>"$times"

if [ "${E2E:-}" = skip ]; then
    echo "e2e: skipped (E2E=skip)"
else
    stage "VM (kernel devices, smoke per client)" make --no-print-directory STAGED=1 e2e-auto
fi

while IFS='|' read -r name seconds rc; do
    [ "$rc" = 0 ] || [[ " ${failed[*]} " == *" $name "* ]] || failed+=("$name")
done <"$times"
echo
echo "make test: timing (seconds)"
printf '  %-62s %6s  %s\n' "stage" "s" "result"
while IFS='|' read -r name seconds rc; do
    printf '  %-62s %6d  %s\n' "$name" "$seconds" "$([ "$rc" = 0 ] && echo ok || echo "FAILED ($rc)")"
done <"$times"
printf '  %-62s %6d\n' "total" "$(($(date +%s) - started))"
rm -rf "$times" "$logs"
if [ ${#failed[@]} -gt 0 ]; then
    echo "make test: failed: ${failed[*]}"
    exit 1
fi
echo "make test: every stage passed"
exit 0
}
