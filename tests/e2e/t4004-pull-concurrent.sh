#!/usr/bin/env bash
# Two pulls of the same model into one store at the same time both succeed, and each blob is
# stored once.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_registry.sh"

registry_start
make_layout "$WORK/lay" v1 96 3
expect_ok mstore pull --from "$WORK/lay" m:v1
digest=${out##* }
want_blobs=$(blob_digests)
expect_ok mstore push --insecure m:v1 "$REG_HOST/t/m:v1"

export MSTORE_HOME=$WORK/home2
"$MSTORE_BIN" pull --insecure --parallel 2 "$REG_HOST/t/m:v1" >"$WORK/a.out" 2>"$WORK/a.err" &
a=$!
"$MSTORE_BIN" pull --insecure --parallel 3 "$REG_HOST/t/m:v1" >"$WORK/b.out" 2>"$WORK/b.err" &
b=$!
wait "$a" || fail "first pull failed: $(cat "$WORK/a.err")"
wait "$b" || fail "second pull failed: $(cat "$WORK/b.err")"
contains "$(cat "$WORK/a.out")" "$digest"
contains "$(cat "$WORK/b.out")" "$digest"
[ "$(blob_digests)" = "$want_blobs" ] || fail "blobs differ: $(blob_digests)"
expect_ok mstore verify
expect_ok mstore list
[ "$(printf '%s\n' "$out" | grep -c "t/m:v1")" -eq 1 ] || fail "name listed other than once: $out"
echo "ok $TEST_NAME"
