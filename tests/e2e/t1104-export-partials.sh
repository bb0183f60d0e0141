#!/usr/bin/env bash
# A killed export leaves <out>.partial.<pid>; the next export to that path removes the ones
# whose process is gone and spares one whose process runs (another export at work).
. "$(dirname "$0")/lib.sh"
src="$MODELS/stories260K/stories260K.gguf"
[ -f "$src" ] || skip "$src not found (set MSTORE_TEST_MODELS)"

expect_ok mstore import "$src" --name s
dead=4194305   # above Linux's pid_max: no such process
echo junk > "$WORK/out.gguf.partial.$dead"
echo busy > "$WORK/out.gguf.partial.$$"
echo other > "$WORK/other.gguf.partial.$dead"   # another output's: not this export's to judge
expect_ok mstore export s --gguf "$WORK/out.gguf"
cmp -s "$src" "$WORK/out.gguf" || fail "export differs from the source"
[ ! -e "$WORK/out.gguf.partial.$dead" ] || fail "a dead export's partial file was left"
[ -e "$WORK/out.gguf.partial.$$" ] || fail "a live export's partial file was removed"
[ -e "$WORK/other.gguf.partial.$dead" ] || fail "another output's partial file was removed"
echo "ok $TEST_NAME"
