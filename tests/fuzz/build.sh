#!/bin/sh
# Build the libFuzzer targets with clang (Debian: apt-get install clang libclang-rt-dev) into
# $1 (default /tmp/mstore-fuzz). Only the sources a target needs are compiled, each once (in
# parallel), with ASan + UBSan, so other modules' state does not matter. Prints the targets built.
set -eu
cd "$(dirname "$0")/../.."
out=${1:-/tmp/mstore-fuzz}
jobs=${FUZZ_BUILD_JOBS:-$(nproc 2>/dev/null || echo 2)}
CC=${CC_FUZZ:-clang}
CFLAGS="-std=c11 -D_GNU_SOURCE -g -O1 -fno-omit-frame-pointer -fsanitize=address,undefined
    -fno-sanitize-recover=undefined -Wall -Wextra -Werror -Wno-string-concatenation -Isrc"
LIBS="$(pkg-config --libs jansson libpcre2-8 libcurl libcrypto) -lpthread -lm"

# whole modules where a target needs one of their files: their files call each other
UTIL=$(echo src/util/*.c)
GGUF=$(echo src/format/*.c)
BLOB=$(echo src/blob/*.c)
TOK="src/tokenizer/bpe.c src/tokenizer/gguf_load.c src/tokenizer/json_load.c src/tokenizer/merge.c
    src/tokenizer/pretok.c src/tokenizer/spm.c src/tokenizer/tokenizer.c src/tokenizer/ucd.c src/tokenizer/vocab.c
    src/tokenizer/wpm.c"
GOTMPL="src/chat/gotmpl.c src/chat/gotmpl_exec.c src/chat/gotmpl_tools.c"
JINJA="src/chat/jinja_lex.c src/chat/jinja_parse.c src/chat/jinja_eval.c src/chat/jinja_lib.c src/chat/jinja_value.c src/chat/jinja_chat.c"
CHAT="$GOTMPL $JINJA src/chat/chat.c src/chat/think.c src/chat/harmony.c src/chat/pyjson.c src/chat/tools.c src/chat/tooltmpl.c"
# the option table compiles a "format" (JSON Schema) where it is read: its readers link src/grammar
GRAMMAR="$(echo src/grammar/*.c) $GGUF $TOK"

# target: its sources (besides tests/fuzz/<target>.c)
targets="fuzz_gguf fuzz_safetensors fuzz_manifest fuzz_config fuzz_tokenizer fuzz_registry fuzz_gotmpl fuzz_jinja fuzz_harmony fuzz_modelfile fuzz_serve"
srcs() {
    case $1 in
    fuzz_gguf) echo "$UTIL $GGUF" ;;
    fuzz_safetensors) echo "$UTIL $GGUF" ;;
    fuzz_manifest) echo "$UTIL src/blob/hash.c src/blob/sha256.c src/manifest/manifest.c src/manifest/name.c" ;;
    fuzz_config) echo "$UTIL $GGUF src/runtime/config.c" ;;
    fuzz_tokenizer) echo "$UTIL $GGUF $TOK" ;;
    fuzz_registry) echo "$UTIL $BLOB src/registry/http.c src/registry/download.c src/registry/tar.c tests/fuzz/stubs.c" ;;
    fuzz_gotmpl | fuzz_jinja) echo "$UTIL $GGUF $CHAT $BLOB src/manifest/manifest.c tests/fuzz/stubs.c" ;;
    fuzz_harmony) echo "$UTIL $CHAT $GGUF $BLOB src/manifest/manifest.c tests/fuzz/stubs.c" ;;
    fuzz_modelfile) echo "$UTIL $CHAT $BLOB $GRAMMAR src/manifest/manifest.c src/modelfile/parse.c src/modelfile/params.c src/modelfile/options.c src/runtime/sampler.c tests/fuzz/stubs.c" ;;
    fuzz_serve) echo "$UTIL $BLOB $GRAMMAR src/manifest/manifest.c src/modelfile/parse.c src/modelfile/params.c src/modelfile/options.c src/modelfile/request.c src/runtime/sampler.c src/server/gate.c src/server/request.c $CHAT tests/fuzz/stubs.c" ;;
    esac
}

mkdir -p "$out/obj"
all=$(for t in $targets; do srcs "$t"; echo "tests/fuzz/$t.c"; done | tr ' ' '\n' | grep . | sort -u)
# -fsanitize=fuzzer-no-link: coverage for the fuzzer, main comes at link time
echo "$all" | xargs -P "$jobs" -I{} sh -c \
    'o="$1/obj/$(echo "$2" | tr / _).o"; '"$CC"' '"$(echo $CFLAGS)"' -fsanitize=fuzzer-no-link '"$(pkg-config --cflags jansson libpcre2-8 libcurl libcrypto)"' -c "$2" -o "$o"' \
    _ "$out" {}
for t in $targets; do
    objs=
    for s in $(srcs "$t") "tests/fuzz/$t.c"; do
        objs="$objs $out/obj/$(echo "$s" | tr / _).o"
    done
    $CC $CFLAGS -fsanitize=fuzzer $objs $LIBS -o "$out/$t"
    echo "built $out/$t"
done
