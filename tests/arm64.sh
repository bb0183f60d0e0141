#!/bin/sh
# tests/arm64.sh: cross-build mstore for aarch64 (cmake/aarch64-linux-gnu.cmake) and run its unit
# suites and the runtime end-to-end tests (tests/e2e/t500*) under qemu-aarch64, on CPU models with
# and without the optional instructions, so that each NEON path runs:
#   max         SDOT, USDOT and SMMLA: auto picks neon-i8mm; the unit suites force every path by name
#   cortex-a72  plain ARMv8.0 NEON: auto picks neon, and asking for neon-dotprod must be refused
# qemu numbers say nothing about speed. A Release build (no ASan: under qemu it would take most
# of CI's hour). Exits non-zero if any test fails; 77 (skip) when the cross tools are missing and
# cannot be installed.
set -eu
cd "$(dirname "$0")/.."
# A path name exported for the host (MSTORE_CPU=avx2) means nothing to aarch64 code: each run below
# says which path it wants.
unset MSTORE_CPU
jobs=$(nproc 2>/dev/null || echo 2)
dir=${MSTORE_ARM64_BUILD:-build-arm64}
qemu=qemu-aarch64-static
command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 && command -v $qemu >/dev/null 2>&1 ||
    { echo "arm64: aarch64-linux-gnu-gcc or $qemu missing (tests/run.sh installs them)"; exit 77; }

echo "=== arm64 cross build"
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DCMAKE_TOOLCHAIN_FILE="$PWD/cmake/aarch64-linux-gnu.cmake" >/dev/null
cmake --build "$dir" -j"$jobs"
# ELF e_machine (bytes 18-19) 183: the build really is aarch64, not the host's compiler.
[ "$(od -An -tu2 -j18 -N2 "$dir/mstore" | tr -d ' ')" = 183 ] || { echo "arm64: $dir/mstore is not aarch64"; exit 1; }

# The end-to-end scripts run $MSTORE_BIN (and $MSTORE_BUILD/test_chat) directly: binfmt_misc is
# not there in every container, so they get wrappers that start qemu.
wrap="$PWD/$dir/qemu-wrap"
mkdir -p "$wrap"
for b in mstore test_chat; do
    printf '#!/bin/sh\nexec %s "%s" "$@"\n' "$qemu" "$PWD/$dir/$b" >"$wrap/$b"
    chmod +x "$wrap/$b"
done

fail=0
# Check's per-test timeouts are set for native speed; qemu runs some 10 to 30 times slower.
export CK_TIMEOUT_MULTIPLIER=${CK_TIMEOUT_MULTIPLIER:-6}
# e2e CPU-MODEL PATH SCRIPT...: end-to-end tests on that qemu model with MSTORE_CPU=PATH (auto: unset).
e2e() {
    cpu=$1 path=$2
    shift 2
    for t in "$@"; do
        rc=0
        # auto: MSTORE_CPU unset, as users run it
        (if [ "$path" = auto ]; then unset MSTORE_CPU; else export MSTORE_CPU=$path; fi
         QEMU_CPU=$cpu MSTORE_BIN="$wrap/mstore" MSTORE_BUILD="$wrap" MSTORE_SRC="$PWD" bash "$t") \
            >"$dir/e2e.log" 2>&1 || rc=$?
        case $rc in
        0) echo "ok   -cpu $cpu $path $(basename "$t")" ;;
        77) echo "skip -cpu $cpu $path $(basename "$t"): $(tail -1 "$dir/e2e.log")" ;;
        *)
            echo "FAIL -cpu $cpu $path $(basename "$t") (exit $rc)"
            cat "$dir/e2e.log"
            fail=1
            ;;
        esac
    done
}

# The suites the kernel paths change (every path forced by name: row dots against the scalar
# definition, K-quant and MLX row dots (test_runtime_breadth), tiled matmuls against row dots, the stories260K greedy text and the s260k models
# against their float64 references), and the portable core (blobs, manifests, GGUF, store,
# tokenizer). MSTORE_ARM64_ALL=1 runs every suite (long under qemu).
suites='^unit/test_(kernels|runtime|runtime_breadth|runtime_batch|blob|manifest|gguf|store|tokenizer)$'
[ "${MSTORE_ARM64_ALL:-0}" = 1 ] && suites='^unit/'

# -cpu max has SDOT and USDOT: auto must pick neon-i8mm (test_kernels checks it).
echo "=== arm64 unit tests on qemu -cpu max"
QEMU_CPU=max MSTORE_EXPECT_CPU_PATH=neon-i8mm ctest --test-dir "$dir" --output-on-failure -j"$jobs" -R "$suites" || fail=1
echo "=== arm64 end-to-end tests on qemu -cpu max"
# The runtime's end-to-end tests (run, interrupt and bench, sampling arguments). The tokenizer
# ones (t501x) start mstore hundreds of times, minutes each under qemu; test_tokenizer covers that
# code on aarch64.
e2e max auto tests/e2e/t500[1-3]-*.sh
e2e max neon-dotprod tests/e2e/t5001-*.sh
e2e max neon tests/e2e/t5001-*.sh
# cortex-a72 has neither: auto must take plain NEON and refuse the others (test_kernels).
echo "=== arm64 tests on qemu -cpu cortex-a72"
QEMU_CPU=cortex-a72 MSTORE_EXPECT_CPU_PATH=neon ctest --test-dir "$dir" --output-on-failure -R '^unit/test_kernels$' || fail=1
e2e cortex-a72 auto tests/e2e/t5001-*.sh
exit $fail
