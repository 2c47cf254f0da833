#!/usr/bin/env bash
# Coverage-guided fuzzing with libFuzzer (swiftc -sanitize=fuzzer,address): builds each target from its
# module's sources plus the driver in tools/fuzz/, seeds it with tools/fuzz/corpus/TARGET, and runs it.
#   tools/fuzz/run.sh            every target for FUZZ_SECONDS (default 300) each
#   tools/fuzz/run.sh --smoke    every target for a fixed number of runs with a fixed seed (reproducible)
#   tools/fuzz/run.sh cbor ...   only the named targets
# Crashes are written to .build/fuzz/artifacts/; a crash fails the run. Prints executions and coverage per
# target and a closing line "fuzz: N passed, N failed".
set -uo pipefail
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
[ ${#targets[@]} -gt 0 ] || targets=(cbor ctaphid flashstore)
swiftc=$(command -v swiftc || echo /opt/swift/usr/bin/swiftc)

module_of() {
    case $1 in
        cbor) echo CTAPCBOR ;;
        ctaphid) echo CTAPHID ;;
        flashstore) echo FlashStore ;;
        *) return 1 ;;
    esac
}

pass=0
fail=0
for target in "${targets[@]}"; do
    module=$(module_of "$target") || { echo "fuzz: unknown target $target"; fail=$((fail + 1)); continue; }
    if ! "$swiftc" -sanitize=fuzzer,address -parse-as-library -O -package-name fidosim -module-name "$module" \
        Sources/"$module"/*.swift "tools/fuzz/$target.swift" -o "$out/$target" >"$out/$target.build.log" 2>&1; then
        echo "fuzz $target: build failed"; grep -E "error" "$out/$target.build.log" | head -20
        fail=$((fail + 1))
        continue
    fi
    work=$(mktemp -d "$out/corpus-$target.XXXXXX")
    cp "tools/fuzz/corpus/$target/"* "$work/" 2>/dev/null
    dict=()
    [ -f "tools/fuzz/$target.dict" ] && dict=(-dict="tools/fuzz/$target.dict")
    if [ $smoke = 1 ]; then
        limit=(-runs="${FUZZ_RUNS:-200000}" -seed=1)
    else
        limit=(-max_total_time="${FUZZ_SECONDS:-300}")
    fi
    "$out/$target" "${limit[@]}" "${dict[@]}" -print_final_stats=1 -max_len=8192 -timeout=10 -rss_limit_mb=4096 \
        -artifact_prefix="$out/artifacts/$target-" "$work" >"$out/$target.log" 2>&1
    status=$?
    runs=$(grep -E "^stat::number_of_executed_units" "$out/$target.log" | awk '{print $2}')
    cov=$(grep -oE "cov: [0-9]+ ft: [0-9]+" "$out/$target.log" | tail -n 1)
    rm -rf "$work"
    if [ $status = 0 ]; then
        echo "fuzz $target: ${runs:-?} executions, ${cov:-no coverage line}, 0 crashes"
        pass=$((pass + 1))
    else
        echo "fuzz $target: FAILED (exit $status) after ${runs:-?} executions; see $out/$target.log and $out/artifacts/"
        grep -E "ERROR|Fatal error|Precondition|SUMMARY" "$out/$target.log" | head -5
        fail=$((fail + 1))
    fi
done
echo "fuzz: $pass passed, $fail failed"
[ $fail = 0 ]
