#!/usr/bin/env bash
# Coverage-guided fuzzing with libFuzzer (swiftc -sanitize=fuzzer,address): builds each target from its
# module's sources plus the driver in tools/fuzz/, seeds it with tools/fuzz/corpus/TARGET, and runs it.
#   tools/fuzz/run.sh            every target for FUZZ_SECONDS (default 300) each
#   tools/fuzz/run.sh --smoke    every target: the regression inputs, then the seed corpus and a fixed number of runs
#                                from a fixed seed, deterministically (two runs of one commit explore the same inputs)
#   tools/fuzz/run.sh cbor ...   only the named targets
#   FUZZ_RUNS=N tools/fuzz/run.sh  every target for N executions instead of a time
#   FUZZ_CORPUS=DIR tools/fuzz/run.sh  keep each target's corpus in DIR/TARGET (seeded on first use), so that a
#                                      later run goes on from what earlier ones found (not with --smoke)
#   FUZZ_TIMEOUT=S tools/fuzz/run.sh  a hang is an input that runs S seconds (default 10). libFuzzer counts wall-clock
#                                     time: a campaign at nice 19 beside other work needs more (an input of 92 ms was
#                                     reported as a 37 s timeout while a VM run held both CPUs)
#   FUZZ_JOBS=N tools/fuzz/run.sh  run N libFuzzer processes side by side on the one corpus (-jobs=N -workers=N),
#                                  each for FUZZ_RUNS/N executions or for FUZZ_SECONDS; executions are summed
#                                  (not with --smoke)
# Crashes are written to .build/fuzz/artifacts/; a crash fails the run. Inputs in tools/fuzz/regressions/TARGET
# (once a crash, hang or slow unit) are replayed first. Prints executions and coverage per target and a closing
# line "fuzz: N passed, N failed".
set -uo pipefail
# A relative FUZZ_CORPUS is where the caller is, not the repository root this script works from.
[ -n "${FUZZ_CORPUS:-}" ] && FUZZ_CORPUS=$(mkdir -p "$FUZZ_CORPUS" && cd "$FUZZ_CORPUS" && pwd)
cd "$(dirname "$0")/../.." || exit 1
out=.build/fuzz
mkdir -p "$out/artifacts"
smoke=0
targets=()
for arg in "$@"; do
    case $arg in
        --smoke) smoke=1 ;;
        *) targets+=("$arg") ;;
    esac
done
# An input may run 10 s in a campaign; in the smoke run (make test, often beside other work) 60 s: libFuzzer counts
# wall-clock time, and a real hang runs for ever either way.
default_timeout=10
[ "$smoke" = 1 ] && default_timeout=60
case ${FUZZ_TIMEOUT:-$default_timeout} in '' | *[!0-9]* | 0) echo "FUZZ_TIMEOUT: a number of seconds, 1 or more"; exit 64 ;; esac
timeout=$((10#${FUZZ_TIMEOUT:-$default_timeout}))
case ${FUZZ_JOBS:-1} in *[!0-9]*) FUZZ_JOBS=0 ;; esac
[ $((10#${FUZZ_JOBS:-1})) -ge 1 ] || { echo "FUZZ_JOBS: a number of processes, 1 or more"; exit 64; }
[ ${#targets[@]} -gt 0 ] || targets=(cbor ctaphid nfc usbip flashstore flashimage authenticator control client webdriver)
swiftc=$(command -v swiftc || echo /opt/swift/usr/bin/swiftc)

module_of() {
    case $1 in
        cbor) echo CTAPCBOR ;;
        ctaphid) echo CTAPHID ;;
        nfc) echo CTAPNFC ;;
        usbip) echo USBIP ;;
        flashstore | flashimage) echo FlashStore ;;
        authenticator) echo CTAPCore ;;
        control) echo ControlProtocol ;;
        client) echo FIDOClient ;;
        webdriver) echo WebDriverFront ;;
        *) return 1 ;;
    esac
}

fuzz_flags=(-sanitize=fuzzer,address -parse-as-library -O -package-name fidosim
    -enable-upcoming-feature InternalImportsByDefault)

# One module whose sources contain the driver: CTAPCBOR, CTAPHID, CTAPNFC, USBIP, FlashStore, ControlProtocol.
build_single() { # $1 target, $2 module
    local sources
    mapfile -t sources < <(find Sources/"$2" -name '*.swift' | sort)
    local extra=()
    if [ "$1" = flashimage ]; then
        # The image file (FlashImage) is compiled into the store's module here: one instrumented module. Its file
        # I/O is swift-system's, linked (not instrumented) from the debug build.
        sources+=(Sources/FlashImage/*.swift)
        swift build --product fidosim || return 1
        local deps=.build/debug
        extra=(-I "$deps/Modules"
            -Xcc -fmodule-map-file=.build/checkouts/swift-system/Sources/CSystem/include/module.modulemap
            $(find "$deps/SystemPackage.build" "$deps/CSystem.build" -name '*.o' | sort))
    fi
    [ ${#sources[@]} -gt 0 ] || return 1
    "$swiftc" "${fuzz_flags[@]}" -wmo -module-name "$2" "${sources[@]}" "tools/fuzz/$1.swift" "${extra[@]}" \
        -o "$out/$1"
}

# The authenticator: CTAPCBOR, FlashStore, Secp256k1 and CTAPCore instrumented, each its own module, linked with
# swift-crypto's objects from the debug build (not instrumented: coverage is wanted for our code).
build_authenticator() {
    local mods=$out/authenticator-modules
    mkdir -p "$mods"
    # swift-crypto's objects: from the debug build for the smoke test (make test has it anyway), and for long runs
    # from a debug build whose C code (BoringSSL) is compiled with -O2 (.build/fuzz-deps, FUZZ_DEPS=fast): the
    # Swift side is the debug build's, so the instrumented modules link with it as they do with debug, and
    # signing runs at BoringSSL's optimized speed. The release build's objects crash at the first signature when
    # linked into the instrumented modules (a null type metadata inside ECDSASignature.derRepresentation).
    local config=${FUZZ_DEPS:-$([ "$smoke" = 1 ] && echo debug || echo fast)}
    local deps
    case $config in
        fast)
            swift build --scratch-path .build/fuzz-deps -Xcc -O2 --product fidosim || return 1
            deps=.build/fuzz-deps/debug ;;
        debug | release)
            swift build -c "$config" --product fidosim || return 1
            deps=.build/$config ;;
        *) echo "FUZZ_DEPS: fast, debug or release"; return 1 ;;
    esac
    echo "swift-crypto from $deps"
    local module
    for module in CTAPCBOR FlashStore Secp256k1 CTAPCore; do
        "$swiftc" "${fuzz_flags[@]}" -module-name "$module" -I "$mods" -I "$deps/Modules" -I Sources/CSecp256k1 -wmo \
            -emit-module -emit-module-path "$mods/$module.swiftmodule" -emit-object -o "$mods/$module.o" \
            $(find Sources/"$module" -name '*.swift' | sort) || return 1
    done
    rm -f "$mods/libcryptodeps.a"
    find "$deps/Crypto.build" "$deps/_CryptoExtras.build" "$deps/CryptoExtras.build" "$deps/CCryptoBoringSSL.build" \
        "$deps/CCryptoBoringSSLShims.build" "$deps/CryptoBoringWrapper.build" "$deps/CXKCP.build" \
        "$deps/CXKCPShims.build" "$deps/SwiftASN1.build" -name "*.o" -print0 2>/dev/null |
        xargs -0 ar rcs "$mods/libcryptodeps.a" || return 1
    "$swiftc" "${fuzz_flags[@]}" -module-name FuzzAuthenticator -I "$mods" -I "$deps/Modules" -I Sources/CSecp256k1 \
        tools/fuzz/authenticator.swift "$mods"/CTAPCBOR.o "$mods"/FlashStore.o "$mods"/Secp256k1.o "$mods"/CTAPCore.o \
        -L "$mods" -Xlinker --whole-archive -lcryptodeps -Xlinker --no-whole-archive -lcrypto -o "$out/authenticator"
}

# FIDOClient's readers of what a key sends (no hidapi, OpenSSL or swift-crypto), over an instrumented CTAPCBOR.
build_client() {
    local mods=$out/client-modules
    mkdir -p "$mods"
    "$swiftc" "${fuzz_flags[@]}" -module-name CTAPCBOR -wmo -emit-module -emit-module-path "$mods/CTAPCBOR.swiftmodule" \
        -emit-object -o "$mods/CTAPCBOR.o" Sources/CTAPCBOR/*.swift || return 1
    # CTAP2Client also speaks to cards: PCSCCard and pcsc-lite's header and library come along.
    "$swiftc" "${fuzz_flags[@]}" -module-name FIDOClient -I "$mods" -I Sources/CPCSC \
        $(pkg-config --cflags-only-I libpcsclite | sed 's/-I/-Xcc -I/g') \
        Sources/FIDOClient/{ClientError,AuthenticatorData,ReportChannel,CTAPHIDClient,CTAP2Client,U2FMessage,PCSCCard}.swift \
        tools/fuzz/client.swift "$mods/CTAPCBOR.o" -lpcsclite -o "$out/client"
}

# The WebDriver front's readers (HTTP, the WebAuthn routes, New Session), over an instrumented ControlProtocol.
build_webdriver() {
    local mods=$out/webdriver-modules
    mkdir -p "$mods"
    "$swiftc" "${fuzz_flags[@]}" -module-name ControlProtocol -wmo -emit-module \
        -emit-module-path "$mods/ControlProtocol.swiftmodule" -emit-object -o "$mods/ControlProtocol.o" \
        $(find Sources/ControlProtocol -name '*.swift' | sort) || return 1
    "$swiftc" "${fuzz_flags[@]}" -module-name WebDriverFront -I "$mods" \
        Sources/WebDriverFront/{HTTPMessage,WebAuthnRoute,NewSession}.swift tools/fuzz/webdriver.swift \
        "$mods/ControlProtocol.o" -o "$out/webdriver"
}

# The smoke run without address randomization (setarch -R), where the machine allows it.
fixed_addresses=()
if [ "$smoke" = 1 ]; then
    if setarch "$(uname -m)" -R true 2>/dev/null; then
        fixed_addresses=(setarch "$(uname -m)" -R)
    else
        echo "fuzz: setarch -R is refused here: the smoke run's exploration may differ from run to run"
    fi
fi

pass=0
fail=0
for target in "${targets[@]}"; do
    module=$(module_of "$target") || { echo "fuzz: unknown target $target"; fail=$((fail + 1)); continue; }
    case $target in
        authenticator) build=(build_authenticator) ;;
        client) build=(build_client) ;;
        webdriver) build=(build_webdriver) ;;
        *) build=(build_single "$target" "$module") ;;
    esac
    if ! "${build[@]}" >"$out/$target.build.log" 2>&1; then
        echo "fuzz $target: build failed"; grep -E "error" "$out/$target.build.log" | head -20
        fail=$((fail + 1))
        continue
    fi
    # Inputs that once crashed, hung or ran too long: each is run once, and must finish well within the timeout.
    # (They are kept out of the seed corpus: a large one would set libFuzzer's length limit and slow every run.)
    if [ -d "tools/fuzz/regressions/$target" ]; then
        if ! "$out/$target" -timeout="$timeout" -rss_limit_mb=4096 "tools/fuzz/regressions/$target"/* >"$out/$target.regressions.log" 2>&1; then
            echo "fuzz $target: a regression input fails again; see $out/$target.regressions.log"
            grep -E "ERROR|Fatal error|Precondition|SUMMARY" "$out/$target.regressions.log" | head -5
            fail=$((fail + 1))
            continue
        fi
        echo "fuzz $target: $(ls "tools/fuzz/regressions/$target" | wc -l) regression inputs pass"
    fi
    # The smoke test always starts from the seeds, so that it stays reproducible.
    if [ -n "${FUZZ_CORPUS:-}" ] && [ $smoke = 0 ]; then
        work=$FUZZ_CORPUS/$target
        mkdir -p "$work"
    else
        work=$(mktemp -d "$out/corpus-$target.XXXXXX")
    fi
    seeds=()
    hashing=()
    if [ $smoke = 1 ]; then
        # The smoke run's verdict is the commit's, not the run's: libFuzzer reads the seeds in the order of a sorted
        # list (a directory's order is its file system's), from a fixed random seed; Swift's hashing is
        # deterministic (Set and Dictionary orders, otherwise random per process, steer which paths a run finds);
        # and addresses are not randomized (comparisons of pointers feed libFuzzer's table of compared values, from
        # which it mutates). Two runs of one commit then add the same inputs in the same order. New seeds are
        # make fuzz's job.
        find "tools/fuzz/corpus/$target" -type f | LC_ALL=C sort | paste -sd, >"$work.seeds"
        seeds=(-seed_inputs=@"$work.seeds" -reload=0)
        hashing=(SWIFT_DETERMINISTIC_HASHING=1)
    else
        cp -n "tools/fuzz/corpus/$target/"* "$work/" 2>/dev/null
    fi
    dict=()
    [ -f "tools/fuzz/$target.dict" ] && dict=(-dict="tools/fuzz/$target.dict")
    if [ $smoke = 1 ]; then
        # The authenticator signs and runs key agreements: far fewer executions per second than the others.
        runs=${FUZZ_RUNS:-200000}
        [ "$target" = authenticator ] && runs=${FUZZ_RUNS:-6000}
        # The control target parses whole JSON documents: about 3,000 executions per second.
        [ "$target" = control ] && runs=${FUZZ_RUNS:-60000}
        # The image target writes a file and opens it for every input.
        [ "$target" = flashimage ] && runs=${FUZZ_RUNS:-100000}
        limit=(-runs="$runs" -seed=1)
    elif [ -n "${FUZZ_RUNS:-}" ]; then
        limit=(-runs="$FUZZ_RUNS")  # a number of executions, however long they take
    else
        limit=(-max_total_time="${FUZZ_SECONDS:-300}")
    fi
    # Control lines are JSON of a few hundred bytes (a credential import with its key is under 1 KB): longer inputs
    # only slow the parser target down (from about 1,900 executions a second to 600 as they grew to 8 KB).
    # A flash store input is the tiny geometry's 1,536-byte image and then one byte per operation: 2,048 bytes give
    # up to 512 operations, which fill and compact the 6 pages several times over; longer inputs ran ever slower
    # (from about 4,000 executions a second to 75 as the corpus filled with 8 KB inputs).
    # Long runs record two frames of each allocation's stack, not 30 (ASan's unwinding and stack store were a fifth
    # of the control and flash store targets' time). Two is the least that keeps leak detection: LeakSanitizer
    # takes an allocation whose caller it does not know (with 0 or 1 frames) for reachable and never reports it.
    # A crash or leak found this way is replayed with full stacks (the line printed below).
    options=${ASAN_OPTIONS:-}
    [ $smoke = 0 ] && [ -z "$options" ] && options=malloc_context_size=2
    max_len=8192
    [ "$target" = control ] && max_len=1024
    [ "$target" = flashstore ] && max_len=2048
    jobs=$((10#${FUZZ_JOBS:-1}))  # decimal, also with a leading zero
    in_jobs=""
    [ $smoke = 1 ] && jobs=1
    if [ "$jobs" -gt 1 ]; then
        # Each process writes its own log (fuzz-N.log, in the directory it starts in) and its finds into the
        # shared corpus; a worker that finds a crash stops, and the run fails.
        [ -n "${FUZZ_RUNS:-}" ] && limit=(-runs=$(((FUZZ_RUNS + jobs - 1) / jobs)))
        logs=$out/jobs-$target
        rm -rf "$logs" && mkdir -p "$logs"
        root=$(pwd)
        case $work in /*) ;; *) work=$root/$work ;; esac
        dict=("${dict[@]/#-dict=/-dict=$root/}")
        (cd "$logs" && ASAN_OPTIONS=$options "$root/$out/$target" "${limit[@]}" "${dict[@]}" -jobs="$jobs" \
            -workers="$jobs" -print_final_stats=1 -max_len=$max_len -timeout="$timeout" -rss_limit_mb=4096 \
            -artifact_prefix="$root/$out/artifacts/$target-" "$work") >"$out/$target.log" 2>&1
        status=$?
        # (libFuzzer's parent copies each worker's log into its own output as the worker ends: $out/$target.log.)
        runs=$(cat "$logs"/fuzz-*.log 2>/dev/null | grep -E "^stat::number_of_executed_units" |
            awk '{n += $2} END {if (NR) print n}')
        [ -n "$runs" ] && in_jobs=" in $jobs processes"
        # The parent exits 1 when a worker did not end with 0, and writes "Job N exited with exit code S" for each.
        # Workers interrupted by SIGINT end with 72: when all did, the run is reported as interrupted, like a single
        # process; the workers' logs are searched for a crash as well.
        ends=$(grep -oE "Job [0-9]+ exited with exit code -?[0-9]+" "$out/$target.log" | awk '{print $NF}' | sort -u)
        [ $status != 0 ] && [ "$ends" = 72 ] && status=72
        [ $status = 0 ] && grep -qE "^==[0-9]+==ERROR|^SUMMARY|Fatal error|deadly signal" "$logs"/fuzz-*.log && status=1
    else
        env "${hashing[@]}" ASAN_OPTIONS=$options "${fixed_addresses[@]}" "$out/$target" "${limit[@]}" "${seeds[@]}" "${dict[@]}" \
            -print_final_stats=1 -max_len=$max_len -timeout="$timeout" -rss_limit_mb=4096 -artifact_prefix="$out/artifacts/$target-" "$work" >"$out/$target.log" 2>&1
        status=$?
        runs=$(grep -E "^stat::number_of_executed_units" "$out/$target.log" | awk '{print $2}')
    fi
    cov=$(grep -oE "cov: [0-9]+ ft: [0-9]+" "$out/$target.log" | tail -n 1)
    [ -n "${FUZZ_CORPUS:-}" ] && [ $smoke = 0 ] || rm -rf "$work" "$work.seeds"
    if [ $status = 0 ]; then
        echo "fuzz $target: ${runs:-?} executions$in_jobs, ${cov:-no coverage line}, 0 crashes"
        pass=$((pass + 1))
    elif [ $status = 72 ]; then
        # libFuzzer's exit status when interrupted (SIGINT): no crash, nothing to replay; still not a pass.
        echo "fuzz $target: interrupted after ${runs:-?} executions$in_jobs, ${cov:-no coverage line}, 0 crashes"
        fail=$((fail + 1))
    else
        echo "fuzz $target: FAILED (exit $status) after ${runs:-?} executions$in_jobs; see $out/$target.log and $out/artifacts/"
        grep -E "ERROR|Fatal error|Precondition|SUMMARY" "$out/$target.log" | head -5
        echo "  replay with allocation stacks: ASAN_OPTIONS=malloc_context_size=30 $out/$target $out/artifacts/$target-*"
        fail=$((fail + 1))
    fi
done
echo "fuzz: $pass passed, $fail failed"
[ $fail = 0 ]
