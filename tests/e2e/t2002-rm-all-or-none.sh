#!/usr/bin/env bash
# rm of several names removes all of them or none: one missing name among them changes
# nothing (it used to delete the names before it, keep those after, and free nothing).
. "$(dirname "$0")/lib.sh"

make_hf "$WORK/a"
make_hf "$WORK/b" --seed 9
expect_ok mstore import "$WORK/a" --name a
expect_ok mstore import "$WORK/b" --name b
before=$(store_state)
expect_fail 1 "model 'nosuch:latest' not found" mstore rm a nosuch b
case "$out" in *deleted*) fail "a refused rm said it deleted: $out" ;; esac
[ "$(store_state)" = "$before" ] || fail "a refused rm changed the store"
expect_ok mstore rm a b
contains "$out" "deleted 'a'"
contains "$out" "deleted 'b'"
[ -z "$(ls "$MSTORE_HOME/blobs")" ] || fail "rm of every name left blobs: $(ls "$MSTORE_HOME/blobs")"
echo "ok $TEST_NAME"
