#!/bin/sh
# tests/run.sh: build and run every test (Check unit suites and end-to-end scripts) twice:
# a plain build and one under AddressSanitizer + UBSan. Exits non-zero if any test fails.
#
# tests/run.sh --quick: the development loop instead: the plain build and the tests labelled
# quick (no GPU, network, kill or slow tests; no ASan, fuzz or qemu stages), a few minutes on
# 2 cores. The full run is what CI runs. tests/README.md lists the labels.
set -eu
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
quick=0
case "${1:-}" in
--quick) quick=1 ;;
"") ;;
-h | --help)
    sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'
    exit 0
    ;;
*)
    echo "tests/run.sh: unknown option '$1' (--quick, or nothing for the full run)" >&2
    exit 2
    ;;
esac

# Packages only the tests need (setup.sh installs what mstore itself needs): the Distribution
# registry the pull/push tests start on 127.0.0.1, numpy for the reference scripts, curl and
# procps for the end-to-end scripts; mesa-vulkan-drivers is lavapipe, the CPU implementation of
# Vulkan the GPU tests run on; skopeo for OCI interop, node and npm for the real ollama and
# openai client libraries the serve tests install from npm; clang for the fuzz stage, with
# libclang-rt-dev, which holds libFuzzer and the sanitizer runtimes and which clang only
# recommends (this install skips recommends). node may come from elsewhere (nodesource ships
# npm inside its nodejs): only a missing command asks apt. Installed when
# missing, as setup.sh does. Debian's docker-registry package would start its service on port
# 5000 on every interface: a policy-rc.d keeps any service from starting during this install,
# and the service is disabled at boot; the tests start their own on loopback.
TEST_PACKAGES="python3 python3-numpy docker-registry curl procps mesa-vulkan-drivers skopeo clang libclang-rt-dev"
command -v node >/dev/null 2>&1 || TEST_PACKAGES="$TEST_PACKAGES nodejs"
command -v npm >/dev/null 2>&1 || TEST_PACKAGES="$TEST_PACKAGES npm"
# qemu-user-static runs the x86-64 stage (tests/x86.sh: CPU models without AVX-512) and the
# aarch64 one.
if [ "$(uname -m)" = x86_64 ]; then TEST_PACKAGES="$TEST_PACKAGES qemu-user-static"; fi
# The aarch64 stage (tests/arm64.sh): Debian's cross compiler, qemu-user, and mstore's libraries
# for arm64 through multiarch. Not on an aarch64 host, whose own build runs the NEON paths;
# MSTORE_TEST_ARM64=0 leaves it out.
ARM64_PACKAGES=
if [ "$(uname -m)" = x86_64 ] && [ "${MSTORE_TEST_ARM64:-1}" = 1 ]; then
    ARM64_PACKAGES="gcc-aarch64-linux-gnu libc6-dev-arm64-cross libjansson-dev:arm64
libssl-dev:arm64 libsqlite3-dev:arm64 check:arm64 libcurl4-openssl-dev:arm64 libpcre2-dev:arm64
libmicrohttpd-dev:arm64 libedit-dev:arm64"
    TEST_PACKAGES="$TEST_PACKAGES $ARM64_PACKAGES"
fi
# The quick tier needs only what the quick tests run (python3 with numpy for fixtures, curl).
if [ "$quick" = 1 ]; then
    TEST_PACKAGES="python3 python3-numpy curl procps"
    ARM64_PACKAGES=
fi
missing=
for p in $TEST_PACKAGES; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
if [ -n "$missing" ] && command -v apt-get >/dev/null 2>&1; then
    SUDO=
    [ "$(id -u)" -eq 0 ] || SUDO=sudo
    echo "tests: installing$missing"
    rc_policy=
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
        $SUDO chmod 755 /usr/sbin/policy-rc.d
        rc_policy=1
    fi
    case $missing in *:arm64*) dpkg --print-foreign-architectures | grep -qx arm64 || $SUDO dpkg --add-architecture arm64 ;; esac
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
    [ -z "$rc_policy" ] || $SUDO rm -f /usr/sbin/policy-rc.d
    if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
        $SUDO systemctl disable --now docker-registry >/dev/null 2>&1 || true
    fi
fi

if [ "$quick" = 1 ]; then
    echo "=== plain build (quick)"
    cmake -S . -B build-test-plain -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
    cmake --build build-test-plain -j"$jobs"
    echo "=== quick tests"
    exec ctest --test-dir build-test-plain -L quick --output-on-failure -j"$jobs"
fi

for variant in plain asan; do
    dir=build-test-$variant
    flags="-DCMAKE_BUILD_TYPE=RelWithDebInfo"
    [ "$variant" = asan ] && flags="$flags -DMSTORE_SANITIZE=ON"
    echo "=== $variant build"
    cmake -S . -B "$dir" $flags >/dev/null
    cmake --build "$dir" -j"$jobs"
    echo "=== $variant tests"
    # detect_leaks: a leak fails the run like any other sanitizer report.
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        ctest --test-dir "$dir" --output-on-failure -j"$jobs"
done

# Fuzzing: every parser's libFuzzer target for a bounded time from its seed corpus (about two
# minutes; tests/fuzz/run.sh). A crash, leak or sanitizer report fails the run.
rc=0
sh tests/fuzz/run.sh || rc=$?
[ "$rc" -eq 77 ] && echo "fuzz: skipped (clang with libFuzzer missing)"
[ "$rc" -eq 0 ] || [ "$rc" -eq 77 ] || exit "$rc"

# x86-64 CPU classes without AVX-512 (Haswell: AVX2; Nehalem: no AVX) under qemu-x86_64, on the
# plain build: the kernel and runtime suites and the runtime end-to-end tests with MSTORE_CPU
# unset, whatever the host has (tests/x86.sh; a few minutes).
rc=0
sh tests/x86.sh build-test-plain || rc=$?
[ "$rc" -eq 77 ] && echo "x86: skipped (qemu-x86_64-static missing or not an x86-64 host)"
[ "$rc" -eq 0 ] || [ "$rc" -eq 77 ] || exit "$rc"

# aarch64: the cross build and its tests under qemu (a few minutes; no ASan there).
if [ -n "$ARM64_PACKAGES" ]; then
    rc=0
    sh tests/arm64.sh || rc=$?
    [ "$rc" -eq 77 ] && echo "arm64: skipped (cross tools missing)"
    [ "$rc" -eq 0 ] || [ "$rc" -eq 77 ] || exit "$rc"
fi
