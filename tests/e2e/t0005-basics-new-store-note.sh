#!/usr/bin/env bash
# A mistyped store path does not pass silently: a verb other than import or pull that finds no
# store says on stderr that it created an empty one; import and pull, which are expected to
# create it, and any verb on an existing store, say nothing of the kind.
. "$(dirname "$0")/lib.sh"

export MSTORE_HOME="$WORK/typo"
expect_ok mstore list
contains "$err" "mstore: note: there was no store at $WORK/typo; created an empty one"
expect_ok mstore list
[ -z "$err" ] || fail "an existing store got a note: $err"
export MSTORE_HOME="$WORK/other"
expect_fail 1 "not found" mstore show nosuch
contains "$err" "there was no store at $WORK/other"

export MSTORE_HOME="$WORK/fresh"
make_hf "$WORK/hf"
expect_ok mstore import "$WORK/hf" --name tiny
case "$err" in *"note:"*) fail "import, which makes the store, got a note: $err" ;; esac
echo "ok $TEST_NAME"
