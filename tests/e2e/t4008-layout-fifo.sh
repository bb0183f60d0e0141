#!/usr/bin/env bash
# pull --from DIR refuses a FIFO in the layout (index.json, a manifest, a layer) at once
# instead of blocking forever in open(2); nothing is stored.
. "$(dirname "$0")/lib.sh"

make_hf "$WORK/hf"
expect_ok mstore import "$WORK/hf" --name tiny
expect_ok mstore push tiny --to "$WORK/oci"
manifest=$(sed 's/.*"digest": *"sha256:\([0-9a-f]*\)".*/\1/' "$WORK/oci/index.json")
layer=$(ls -S "$WORK/oci/blobs/sha256" | head -1)
export MSTORE_HOME=$WORK/home2
mkdir -p "$MSTORE_HOME"
expect_ok mstore list
before=$(store_state)
for victim in index.json "blobs/sha256/$manifest" "blobs/sha256/$layer"; do
    rm -rf "$WORK/fifo"
    cp -r "$WORK/oci" "$WORK/fifo"
    rm "$WORK/fifo/$victim"
    mkfifo "$WORK/fifo/$victim"
    expect_fail 1 "not a regular file" timeout 30 "$MSTORE_BIN" pull --from "$WORK/fifo" tiny
    contains "$err" "$victim"
    [ "$(store_state)" = "$before" ] || fail "store changed after refusing a FIFO $victim"
done
echo "ok $TEST_NAME"
