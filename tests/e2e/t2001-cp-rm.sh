#!/usr/bin/env bash
# cp adds a name to the same manifest; rm removes a name and frees blobs no one else uses.
. "$(dirname "$0")/lib.sh"

make_hf "$WORK/a"
make_hf "$WORK/b" --seed 9
expect_ok mstore import "$WORK/a" --name a
da=$out
expect_ok mstore import "$WORK/b" --name b
expect_ok mstore cp a copy:v2
contains "$out" "copied"
expect_ok mstore show copy:v2
contains "$out" "$da"
n_before=$(ls "$MSTORE_HOME/blobs" | wc -l)
expect_ok mstore rm a
contains "$out" "deleted 'a'"
# The copy still holds a's blobs.
[ "$(ls "$MSTORE_HOME/blobs" | wc -l)" -eq "$n_before" ] || fail "rm freed blobs still named by copy:v2"
expect_ok mstore verify copy:v2
expect_ok mstore rm copy:v2
[ "$(ls "$MSTORE_HOME/blobs" | wc -l)" -lt "$n_before" ] || fail "rm of the last name freed nothing"
expect_ok mstore verify b
expect_ok mstore list
contains "$out" "b:latest"
case "$out" in *"copy"*) fail "copy still listed" ;; esac
expect_fail 1 "not found" mstore show a
expect_fail 2 "needs SRC and DST" mstore cp a
echo "ok $TEST_NAME"
