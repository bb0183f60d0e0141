#!/usr/bin/env bash
# Non-zero bytes after a GGUF's tensors are kept by streaming them into the gaps blob, not by
# one malloc of every gap byte: a 300 MB zero tail with one non-zero byte imports under a
# 200 MB data limit (RLIMIT_DATA counts malloc, not the read-only mapping of the file), and
# export gives the file back byte for byte.
. "$(dirname "$0")/lib.sh"
src="$MODELS/stories260K/stories260K.gguf"
[ -f "$src" ] || skip "$src not found (set MSTORE_TEST_MODELS)"
case "${MSTORE_BUILD:-}" in *asan*) skip "the sanitizer's shadow memory does not fit a data limit" ;; esac

cp "$src" "$WORK/tail.gguf"
truncate -s +300M "$WORK/tail.gguf"
printf '\177' >> "$WORK/tail.gguf"
run bash -c 'ulimit -d 200000 && exec "$0" import "$1" --name tail' "$MSTORE_BIN" "$WORK/tail.gguf"
[ "$rc" -eq 0 ] || fail "import under a 200 MB data limit exited $rc: $err"
expect_ok mstore export tail --gguf "$WORK/back.gguf"
cmp -s "$WORK/tail.gguf" "$WORK/back.gguf" || fail "export differs from the source"
echo "ok $TEST_NAME"
