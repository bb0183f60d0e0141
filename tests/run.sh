#!/bin/sh
# tests/run.sh: build and run every test (Check unit suites and end-to-end scripts) twice:
# a plain build and one under AddressSanitizer + UBSan. Exits non-zero if any test fails.
set -eu
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)

# Packages only the tests need, installed when missing as setup.sh installs its own:
# mesa-vulkan-drivers is lavapipe, the CPU implementation of Vulkan the GPU tests run on.
TEST_PACKAGES="mesa-vulkan-drivers"
SUDO=
[ "$(id -u)" -eq 0 ] || SUDO=sudo
missing=
for p in $TEST_PACKAGES; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    echo "tests: installing$missing"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
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
