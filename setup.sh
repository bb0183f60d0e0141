#!/bin/sh
# setup.sh: install what mstore needs on Debian 12, build it, install it, and run the main job:
# import a model into a store and run it. Safe to run again.
set -eu
cd "$(dirname "$0")"

SUDO=
[ "$(id -u)" -eq 0 ] || SUDO=sudo
PACKAGES="build-essential cmake pkg-config libjansson-dev libssl-dev libsqlite3-dev check
libcurl4-openssl-dev libpcre2-dev libmicrohttpd-dev libedit-dev python3 python3-numpy docker-registry curl ca-certificates procps
libvulkan-dev glslc spirv-cross"
missing=
for p in $PACKAGES; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    echo "setup: installing$missing"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
$SUDO cmake --install build --prefix /usr/local >/dev/null
echo "setup: installed $(command -v mstore)"

# The main job: import a model and run it, in a demo store beside the build.
export MSTORE_HOME="${MSTORE_HOME:-$PWD/build/demo-home}"
MODELS="${MSTORE_TEST_MODELS:-../shared/models}"
if [ -f "$MODELS/stories260K/stories260K.gguf" ] && mstore run --help >/dev/null 2>&1; then
    mstore import "$MODELS/stories260K/stories260K.gguf" --name stories:260k
    mstore run stories:260k --temp 0 -n 64 "Once upon a time"
else
    python3 tests/e2e/mkfixture.py hf build/demo-model
    mstore import build/demo-model --name demo:tiny
    mstore list
    mstore show demo:tiny
    mstore verify demo:tiny
fi
