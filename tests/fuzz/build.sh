#!/bin/sh
# Build the libFuzzer targets with clang (apt-get install -y clang) into $1 (default
# /tmp/mstore-fuzz). Only the sources a target needs are compiled, so other modules' state
# does not matter.
set -eu
cd "$(dirname "$0")/../.."
out=${1:-/tmp/mstore-fuzz}
mkdir -p "$out"
clang -std=c11 -D_GNU_SOURCE -g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined \
    -fno-sanitize-recover=undefined -Isrc \
    src/util/error.c src/util/file.c src/format/gguf.c src/format/gguf_kv.c src/format/gguf_write.c \
    src/format/ggml_types.c tests/fuzz/fuzz_gguf.c $(pkg-config --cflags --libs jansson) -lm \
    -o "$out/fuzz_gguf"
echo "built $out/fuzz_gguf"
