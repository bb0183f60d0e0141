#!/bin/sh
# setup.sh: install what mstore needs on Debian 12, build it, install it, and run the main job:
# import a model into a store and run it. Safe to run again.
set -eu
cd "$(dirname "$0")"

# What mstore needs to build and run; nothing else. Packages only the tests use (a registry,
# numpy, curl...) are installed by tests/run.sh, never on a user's machine by this script.
# MSTORE_SETUP_MAIN_ONLY=1 skips to the main job with the mstore already on PATH (the tests
# run the main job that way).
SUDO=
[ "$(id -u)" -eq 0 ] || SUDO=sudo
PACKAGES="build-essential cmake pkg-config libjansson-dev libssl-dev libsqlite3-dev check
libcurl4-openssl-dev libpcre2-dev libmicrohttpd-dev libedit-dev libvulkan-dev glslc spirv-cross python3
ca-certificates"
if [ "${MSTORE_SETUP_MAIN_ONLY:-0}" != 1 ]; then
    missing=
    for p in $PACKAGES; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
    done
    if [ -n "$missing" ]; then
        echo "setup: installing$missing"
        $SUDO apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
    fi

    # without the -emul CPU paths, which only the tests use (src/cpu/CMakeLists.txt)
    cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DMSTORE_EMUL_PATHS=OFF >/dev/null
    cmake --build build -j"$(nproc)"
    $SUDO cmake --install build --prefix /usr/local >/dev/null
    echo "setup: installed $(command -v mstore)"
fi

# The main job: import a model into your store (--home, $MSTORE_HOME, else ~/.mstore: the one
# every later mstore command uses, so the README's next example finds it) and run it.
store=${MSTORE_HOME:-$HOME/.mstore}
MODELS="${MSTORE_TEST_MODELS:-../shared/models}"
if [ -f "$MODELS/stories260K/stories260K.gguf" ]; then
    digest=$(mstore import "$MODELS/stories260K/stories260K.gguf" --name stories:260k --quiet)
    echo "setup: imported $MODELS/stories260K/stories260K.gguf as stories:260k into $store"
    echo "setup:   manifest $digest"
    echo "setup: running it: mstore run stories:260k \"Once upon a time\" --temp 0 -n 64"
    # run prints the continuation only: show the prompt it continues.
    printf 'Once upon a time'
    mstore run stories:260k "Once upon a time" --temp 0 -n 64
    echo
    echo "setup: done. Try: mstore list; mstore show stories:260k; mstore run stories:260k \"Once upon a time\" --temp 0"
else
    echo "setup: no stories260K model at $MODELS/stories260K/stories260K.gguf (set MSTORE_TEST_MODELS);"
    echo "setup: importing a tiny generated model instead (store and verify only: its tokenizer cannot run)"
    python3 tests/e2e/mkfixture.py hf build/demo-model
    digest=$(mstore import build/demo-model --name demo:tiny --quiet)
    echo "setup: imported build/demo-model as demo:tiny into $store"
    echo "setup:   manifest $digest"
    mstore list
    mstore show demo:tiny
    mstore verify demo:tiny
    echo "setup: done. To run a model: mstore import model.gguf --name NAME, then mstore run NAME \"Once upon a time\""
fi
