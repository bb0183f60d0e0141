#!/bin/sh
# tests/x86.sh: the x86-64 CPU classes most users have, whatever the host: the plain build's
# kernel and runtime suites and the runtime end-to-end tests under qemu-x86_64 (user mode) on CPU
# models without AVX-512, so that no path is tested only where the host has it:
#   Haswell   AVX2, FMA, F16C, no AVX-512 and no SHA extensions (most laptops and desktops:
#             Intel client CPUs since Alder Lake, AMD Zen 1-3): auto must pick avx2, and OpenSSL
#             hashes blobs without SHA-NI
#   Nehalem   SSE4.2, no AVX: auto must pick scalar
# with MSTORE_CPU unset (what users run) and with the other paths such a CPU runs (the -emul ones).
# QEMU 7.2's TCG has no AVX-512, so an AVX-512 instruction reached on these models is a SIGILL
# here, as on the users' machines. qemu numbers say nothing about speed.
#
#   sh tests/x86.sh [BUILD_DIR]     (default build-test-plain, built by tests/run.sh)
#
# Exits non-zero if any test fails; 77 (skip) when qemu-x86_64-static is missing or not on x86-64.
set -eu
cd "$(dirname "$0")/.."
unset MSTORE_CPU   # each run below says which path it wants
dir=${1:-build-test-plain}
qemu=qemu-x86_64-static
[ "$(uname -m)" = x86_64 ] || { echo "x86: not an x86-64 host"; exit 77; }
command -v $qemu >/dev/null 2>&1 || { echo "x86: $qemu missing (tests/run.sh installs qemu-user-static)"; exit 77; }
[ -x "$dir/mstore" ] || { echo "x86: $dir/mstore not built"; exit 1; }

# The end-to-end scripts run $MSTORE_BIN directly: they get a wrapper that starts qemu with the CPU
# model in $QEMU_CPU (qemu-user reads it from the environment).
wrap="$PWD/$dir/qemu-x86-wrap"
mkdir -p "$wrap"
printf '#!/bin/sh\nexec %s "%s" "$@"\n' "$qemu" "$PWD/$dir/mstore" >"$wrap/mstore"
chmod +x "$wrap/mstore"

# Haswell less the system features qemu-user's TCG does not emulate (it would warn about each on
# every start, into the stderr the tests read); none of them is visible to a user-mode program.
haswell=Haswell,-pcid,-x2apic,-tsc-deadline,-hle,-invpcid,-rtm

fail=0
log="$dir/x86.log"
# Check's per-test timeouts are set for native speed; qemu runs some 10 to 30 times slower.
export CK_TIMEOUT_MULTIPLIER=${CK_TIMEOUT_MULTIPLIER:-8}

# unit CPU-MODEL EXPECT PATHS SUITE...: the Check suites on that model, MSTORE_CPU unset;
# test_kernels checks that auto took EXPECT and that the paths the model lacks are refused by
# name, and runs its per-path tests on PATHS only (MSTORE_TEST_PATHS: the paths this CPU class
# runs natively; the emulated VNNI and AMX arithmetic is portable C the host's run tests).
unit() {
    cpu=$1 expect=$2 want=$3
    shift 3
    for s in "$@"; do
        rc=0
        (QEMU_CPU=$cpu MSTORE_EXPECT_CPU_PATH=$expect MSTORE_TEST_PATHS=$want MSTORE_SRC="$PWD" \
            $qemu "$dir/$s") >"$log" 2>&1 || rc=$?
        if [ $rc -eq 0 ]; then
            echo "ok   -cpu ${cpu%%,*} $s ($(grep -E '^[0-9]+%' "$log" | tail -1))"
        else
            echo "FAIL -cpu ${cpu%%,*} $s (exit $rc)"
            tail -40 "$log"
            fail=1
        fi
    done
}

# e2e CPU-MODEL PATH SCRIPT...: end-to-end tests on that model with MSTORE_CPU=PATH ("" unset).
e2e() {
    cpu=$1 path=$2
    shift 2
    for t in "$@"; do
        rc=0
        (if [ -n "$path" ]; then export MSTORE_CPU=$path; else unset MSTORE_CPU; fi
         QEMU_CPU=$cpu MSTORE_BIN="$wrap/mstore" MSTORE_BUILD="$PWD/$dir" MSTORE_SRC="$PWD" bash "$t") >"$log" 2>&1 || rc=$?
        case $rc in
        0) echo "ok   -cpu ${cpu%%,*} MSTORE_CPU=${path:-unset} $(basename "$t")" ;;
        77) echo "skip -cpu ${cpu%%,*} MSTORE_CPU=${path:-unset} $(basename "$t"): $(tail -1 "$log")" ;;
        *)
            echo "FAIL -cpu ${cpu%%,*} MSTORE_CPU=${path:-unset} $(basename "$t") (exit $rc)"
            tail -40 "$log"
            fail=1
            ;;
        esac
    done
}

# The suites: every kernel path by name against its row dots and the float64 definition
# (test_kernels, which also checks auto's choice), the stories260K models (F32, F16, mixed
# q5_0/q8_0/f16) against their float64 references (test_runtime), the synthetic architectures
# (test_runtime_archs), K-quants and MLX (test_runtime_breadth), and blob hashing (test_blob).
suites="test_kernels test_runtime test_runtime_archs test_runtime_breadth test_runtime_batch test_blob"
echo "=== x86-64 under qemu -cpu Haswell (AVX2, no AVX-512)"
unit $haswell avx2 avx2,scalar $suites
# t5001: the documented greedy texts (stories260K from BOS, and its prompts); t5002: interrupt and
# bench; with MSTORE_CPU unset, and on scalar and the VNNI emulation, which this CPU also runs.
e2e $haswell "" tests/e2e/t5001-*.sh tests/e2e/t5002-*.sh
e2e $haswell scalar tests/e2e/t5001-*.sh
echo "=== x86-64 under qemu -cpu Nehalem (no AVX)"
unit Nehalem scalar scalar test_kernels test_runtime
e2e Nehalem "" tests/e2e/t5001-*.sh
exit $fail
