#!/usr/bin/env bash
# export reads every byte of the model's blobs: a blob whose bytes no longer hash to its name
# fails the export naming it, and no output file is left (it used to write the damaged bytes
# and exit 0).
. "$(dirname "$0")/lib.sh"
src="$MODELS/stories260K/stories260K.gguf"
[ -f "$src" ] || skip "$src not found (set MSTORE_TEST_MODELS)"

expect_ok mstore import "$src" --name s
victim=$(ls -S "$MSTORE_HOME/blobs" | head -1)
chmod u+w "$MSTORE_HOME/blobs/$victim"
flip_byte "$MSTORE_HOME/blobs/$victim" 200
expect_fail 1 "blob sha256:${victim#sha256-} is damaged" mstore export s --gguf "$WORK/out.gguf"
[ ! -e "$WORK/out.gguf" ] || fail "a failed export left its output"
ls "$WORK" | grep -q partial && fail "a failed export left a partial file"
echo "ok $TEST_NAME"
