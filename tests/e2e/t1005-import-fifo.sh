#!/usr/bin/env bash
# A FIFO where a regular file is expected is refused at once (open(2) of a FIFO blocks until a
# writer comes): a shard named by the safetensors index, and the GGUF file itself.
. "$(dirname "$0")/lib.sh"

make_hf "$WORK/hf" --shards 2
expect_ok mstore import "$WORK/hf" --name keep
before=$(store_state)
shard=$(ls "$WORK/hf" | grep '\.safetensors$' | tail -1)
rm "$WORK/hf/$shard"
mkfifo "$WORK/hf/$shard"
expect_fail 1 "not a regular file" timeout 30 "$MSTORE_BIN" import "$WORK/hf" --name bad
contains "$err" "$shard"
[ "$(store_state)" = "$before" ] || fail "store changed after refusing a FIFO shard"

mkfifo "$WORK/model.gguf"
expect_fail 1 "not a regular file" timeout 30 "$MSTORE_BIN" import "$WORK/model.gguf" --name bad
[ "$(store_state)" = "$before" ] || fail "store changed after refusing a FIFO GGUF"
echo "ok $TEST_NAME"
