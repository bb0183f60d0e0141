#!/bin/sh
# tests/fuzz/run.sh: build the libFuzzer targets (build.sh) and run each for a bounded time
# from its seed corpus (tests/fuzz/corpus/<target>/), one process at a time. Any crash, leak,
# sanitizer report, timeout (> 10 s on one input) or allocation over the limits fails the run;
# the input that did it is kept in $dir/artifacts/ and named in the output.
#   FUZZ_SECONDS   seconds per target (default: FUZZ_TOTAL_SECONDS shared out, whole seconds)
#   FUZZ_TOTAL_SECONDS  the stage's fuzzing time when FUZZ_SECONDS is unset (default 120: about
#                  2 minutes, plus the build, however many targets there are)
#   FUZZ_DIR       build and scratch directory (default build-test-fuzz)
# Exits 0 when every target ran clean, 1 when one did not, 77 when clang with libFuzzer is not
# installed (Debian: apt-get install clang libclang-rt-dev).
set -eu
cd "$(dirname "$0")/../.."
dir=${FUZZ_DIR:-build-test-fuzz}
mkdir -p "$dir"

probe="$dir/probe.c"
printf '#include <stdint.h>\n#include <stddef.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' > "$probe"
if ! command -v clang >/dev/null 2>&1 ||
   ! clang -fsanitize=fuzzer,address,undefined "$probe" -o "$dir/probe" >/dev/null 2>&1; then
    echo "fuzz: skipped: clang with libFuzzer is not installed (apt-get install clang libclang-rt-dev)"
    exit 77
fi

echo "=== fuzz build"
if ! sh tests/fuzz/build.sh "$dir/bin" >"$dir/build.log" 2>&1; then
    cat "$dir/build.log"
    echo "fuzz: the build failed"
    exit 1
fi
targets=$(sed -n 's|^built .*/||p' "$dir/build.log")
# A new target takes its time from the others: the stage's total stays what CI budgets for it.
n_targets=$(echo "$targets" | wc -w)
seconds=${FUZZ_SECONDS:-$((${FUZZ_TOTAL_SECONDS:-120} / n_targets))}
rm -rf "$dir/artifacts"
mkdir -p "$dir/artifacts"
failed=
for t in $targets; do
    work="$dir/corpus/$t"
    rm -rf "$work"
    mkdir -p "$work"
    # New inputs go to the first directory (scratch); the checked-in seeds stay as they are.
    # detect_leaks is on by default; the limits are per process and per malloc.
    if "$dir/bin/$t" -max_total_time="$seconds" -max_len=16384 -timeout=10 -rss_limit_mb=2048 \
            -malloc_limit_mb=1024 -print_final_stats=1 -artifact_prefix="$dir/artifacts/$t-" \
            "$work" "tests/fuzz/corpus/$t" >"$dir/$t.log" 2>&1; then
        runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/$t.log")
        echo "fuzz: $t: ok, $runs executions in ${seconds}s"
    else
        echo "fuzz: $t: FAILED; the log's end ($dir/$t.log):"
        tail -n 40 "$dir/$t.log"
        ls "$dir/artifacts/" | sed -n "s|^\($t-.*\)|fuzz: input: $dir/artifacts/\1|p"
        failed="$failed $t"
    fi
done
if [ -n "$failed" ]; then
    echo "fuzz: failed:$failed (reproduce: $dir/bin/<target> <input>)"
    exit 1
fi
