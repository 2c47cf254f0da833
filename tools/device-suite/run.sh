#!/usr/bin/env bash
# python-fido2's own device tests (tests/device of its source distribution) against fidosim, in each configuration
# of fidosim_device_suite.py (default: all four), over UDP, and the default configuration as an NFC card in a PC/SC
# reader (nfc: the suite's NFC mode; ccid: its mode for a USB key with a smart-card interface). Prints the pass/skip/deselect counts per configuration
# and fails when any test fails.
#
#   tools/device-suite/run.sh [CONFIG ...]        FIDOSIM_BIN=path/to/fidosim (default .build/debug/fidosim)
#   tools/device-suite/run.sh --hidraw SOCKET SERIAL   one run against a key already served on uhid (the VM run)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
python=${PYTHON:-python3}
export FIDOSIM_BIN=${FIDOSIM_BIN:-$repo/.build/debug/fidosim}

# The suite of the python-fido2 that is installed (its tests use its API), from PyPI's source distribution.
version=$("$python" -c 'import importlib.metadata as m; print(m.version("fido2"))')
cache=${DEVICE_SUITE_CACHE:-$repo/.build/device-suite}
sdist=$cache/fido2-$version
if [ ! -d "$sdist/tests/device" ]; then
    mkdir -p "$cache"
    echo "device-suite: fetching python-fido2 $version's source distribution from PyPI"
    "$python" -m pip download -q --no-deps --no-binary :all: "fido2==$version" -d "$cache"
    archive=$cache/fido2-$version.tar.gz
    # The pinned version's archive is checked; another version is used as PyPI serves it.
    if [ "$version" = 2.2.1 ]; then
        echo "85787428a94c3f8eaf72f0ff30afba983b559a1b1b795c93318c81b4ad4062c4  $archive" | sha256sum -c --quiet -
    else
        echo "device-suite: python-fido2 $version is not the pinned 2.2.1; its archive is not checked"
    fi
    tar -xzf "$archive" -C "$cache"
fi

export PYTHONPATH=$here${PYTHONPATH:+:$PYTHONPATH}
cd "$sdist"
run() {  # label, pytest arguments...
    local label=$1; shift
    local log; log=$(mktemp)
    local rc=0
    "$python" -m pytest -p fidosim_device_suite -p no:cacheprovider -p no:benchmark -q -rfEs "$@" tests/device \
        >"$log" 2>&1 || rc=$?
    local summary; summary=$(grep -E '^[0-9]+ (passed|failed|skipped|deselected|error)|^=+ .*(passed|failed).* =+$' "$log" | tail -1 | tr -d '=')
    echo "device-suite $label:${summary:- no summary}"
    if [ "$rc" -ne 0 ]; then
        grep -E '^(FAILED|ERROR)' "$log" || tail -40 "$log"
    fi
    # Each skip is for a feature the key does not claim: say which.
    grep -E '^SKIPPED' "$log" | sed -E 's/^SKIPPED \[([0-9]+)\] [^ ]+: /  skipped \1: /' | sort | uniq | sed 's/^/  /' || true
    grep -A50 -E 'deselected [0-9]+ -+$' "$log" | grep -E '^tests/' | sed 's/^/  deselected: /' || true
    rm -f "$log"
    return "$rc"
}
lane() {  # configurations, one after another; fails when one failed
    local rc=0
    for config in "$@"; do
        case $config in
            # The default configuration as a card in a vpcd reader of a pcscd of the run's own (--reader).
            nfc | ccid) run "pcsc-$config" --fidosim-config default --fidosim-pcsc "$config" || rc=1 ;;
            *) run "$config" --fidosim-config "$config" || rc=1 ;;
        esac
    done
    return "$rc"
}
failures=0
if [ "${1:-}" = --hidraw ]; then
    run hidraw --fidosim-config default --fidosim-hidraw --fidosim-socket "$2" --fidosim-serial "$3" || failures=1
else
    configs=("$@")
    [ ${#configs[@]} -gt 0 ] || configs=(default fingerprint ep yubikey5 nfc ccid)
    udp=() pcsc=()
    for config in "${configs[@]}"; do
        case $config in nfc | ccid) pcsc+=("$config") ;; *) udp+=("$config") ;; esac
    done
    # The runs go in lanes at once, since the suite mostly waits (replugs, touches): the UDP ones one after another,
    # and each PC/SC one in a reader of its own of one pcscd (vpcd's two readers; pcscd has one socket per machine).
    # Each lane's reports are printed whole.
    logs=() pids=()
    if [ ${#pcsc[@]} -gt 2 ]; then echo "device-suite: at most two PC/SC runs (vpcd's two readers)"; exit 2; fi
    if [ ${#pcsc[@]} -gt 0 ]; then
        holder_out=$(mktemp)
        exec {holder_in}> >("$python" -m fidosim.pcsc >"$holder_out")
        for _ in $(seq 200); do [ -s "$holder_out" ] && break; sleep 0.1; done
        port=$("$python" -c 'import json,sys; print(json.load(open(sys.argv[1]))["port"])' "$holder_out") || {
            echo "device-suite: no pcscd for the PC/SC runs"; exit 1; }
        for i in "${!pcsc[@]}"; do
            logs+=("$(mktemp)")
            FIDOSIM_PCSC_PORT=$port FIDOSIM_PCSC_READER=$i lane "${pcsc[$i]}" >"${logs[-1]}" 2>&1 &
            pids+=($!)
        done
    fi
    if [ ${#udp[@]} -gt 0 ]; then lane "${udp[@]}" || failures=1; fi
    for i in "${!pids[@]}"; do
        wait "${pids[$i]}" || failures=1
        cat "${logs[$i]}"
        rm -f "${logs[$i]}"
    done
    if [ ${#pcsc[@]} -gt 0 ]; then
        exec {holder_in}>&-  # the holder stops its pcscd when its standard input closes
        for _ in $(seq 100); do pgrep -f "python.* -m fidosim.pcsc" >/dev/null || break; sleep 0.1; done
        rm -f "$holder_out"
    fi
fi
[ "$failures" -eq 0 ]
