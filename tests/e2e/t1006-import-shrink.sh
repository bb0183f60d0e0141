#!/usr/bin/env bash
# A source file that shrinks while it is imported (GGUF, safetensors, MLX, --quantize; or run
# with --gguf) is refused by name:
# "<file>: file changed during import", exit 1, nothing under blobs/ or tmp/, the index as it
# was. MSTORE_TEST_IMPORT_SHRINK (tests only) truncates the file to that many bytes right after
# the import wrote its first tensor blob: the point is reached every time, no timing involved.
. "$(dirname "$0")/lib.sh"
src="$MODELS/stories260K/stories260K.gguf"
[ -f "$src" ] || skip "$src not found (set MSTORE_TEST_MODELS)"

make_hf "$WORK/hf"
expect_ok mstore import "$WORK/hf" --name keep
before=$(store_state)
size=$(stat -c %s "$src")

# Into the data section (the tensors after the first are gone), into the header, to nothing.
for to in $((size / 2)) 1000 0; do
    cp "$src" "$WORK/shrink.gguf"
    MSTORE_TEST_IMPORT_SHRINK=$to expect_fail 1 "shrink.gguf: file changed during import" \
        mstore import "$WORK/shrink.gguf" --name shrunk
    [ "$(store_state)" = "$before" ] || fail "store changed after a file shrank to $to bytes"
    expect_fail 1 "not found" mstore show shrunk
done

# Only the last byte lost: past every tensor, in the padding that the gaps scan reads.
cp "$src" "$WORK/shrink.gguf"
MSTORE_TEST_IMPORT_SHRINK=$((size - 1)) expect_fail 1 "shrink.gguf: file changed during import" \
    mstore import "$WORK/shrink.gguf" --name shrunk
[ "$(store_state)" = "$before" ] || fail "store changed after the file lost its last byte"

# A safetensors shard of a Hugging Face directory, likewise.
make_hf "$WORK/hf2" --seed 3
MSTORE_TEST_IMPORT_SHRINK=1000 expect_fail 1 "hf2/model.safetensors: file changed during import" \
    mstore import "$WORK/hf2" --name shrunk
[ "$(store_state)" = "$before" ] || fail "store changed after a shard shrank"

# ... quantized on the way (--quantize reads the float values it quantizes from the file too) ...
make_hf "$WORK/hf3" --seed 4
MSTORE_TEST_IMPORT_SHRINK=1000 expect_fail 1 "hf3/model.safetensors: file changed during import" \
    mstore import "$WORK/hf3" --name shrunk --quantize int4
[ "$(store_state)" = "$before" ] || fail "store changed after a shard shrank under --quantize"

# ... and an MLX-quantized directory's.
make_mlx "$WORK/mlx"
MSTORE_TEST_IMPORT_SHRINK=1000 expect_fail 1 "mlx/model.safetensors: file changed during import" \
    mstore import "$WORK/mlx" --name shrunk
[ "$(store_state)" = "$before" ] || fail "store changed after an MLX shard shrank"

# Without the hook the same file imports, and verify passes.
cp "$src" "$WORK/shrink.gguf"
expect_ok mstore import "$WORK/shrink.gguf" --name whole
expect_ok mstore verify

# run --gguf: a file shorter than its header says is refused at open, naming the file.
head -c $((size - 4096)) "$src" > "$WORK/short.gguf"
expect_fail 1 "short.gguf" mstore run --gguf "$WORK/short.gguf" "Once" -n 4
contains "$err" "past end of file"
# ... and one that shrinks during the run (MSTORE_TEST_RUN_SHRINK: truncated right before the
# first forward, after every open of the file) says so and exits 1 instead of dying of SIGBUS.
for to in 0 $((size / 2)); do
    cp "$src" "$WORK/run.gguf"
    MSTORE_TEST_RUN_SHRINK=$to expect_fail 1 "run.gguf: file changed while running" \
        mstore run --gguf "$WORK/run.gguf" "Once" -n 4
done
echo "ok $TEST_NAME"
