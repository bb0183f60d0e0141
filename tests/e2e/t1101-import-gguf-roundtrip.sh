#!/usr/bin/env bash
# Every GGUF under the shared models imports and exports back to the same sha256; a
# re-import writes no blob; the mixed-type model keeps its Q5_0/Q8_0/F16 bytes.
. "$(dirname "$0")/lib.sh"
[ -d "$MODELS" ] || skip "shared models not found at $MODELS (set MSTORE_TEST_MODELS)"

n=0
for f in "$MODELS"/*/*.gguf; do
    [ -f "$f" ] || continue
    n=$((n + 1))
    tag="m$n"
    expect_ok mstore import "$f" --name "gguf:$tag"
    before=$(ls "$MSTORE_HOME/blobs" | wc -l)
    expect_ok mstore import "$f" --name "gguf:$tag-again"
    [ "$(ls "$MSTORE_HOME/blobs" | wc -l)" -eq "$before" ] || fail "re-import of $f wrote blobs"
    expect_ok mstore export "gguf:$tag" --gguf "$WORK/out.gguf"
    contains "$out" "identical to the imported file"
    [ "$(sha256sum < "$f")" = "$(sha256sum < "$WORK/out.gguf")" ] || fail "export of $f differs"
done
[ "$n" -gt 0 ] || skip "no GGUF files under $MODELS"

if [ -f "$MODELS/stories260K/s260k-mixed.gguf" ]; then
    expect_ok mstore import "$MODELS/stories260K/s260k-mixed.gguf" --name mixed
    expect_ok mstore show mixed --tensors
    contains "$out" "model.layers.0.self_attn.q_proj.weight"
    line=$(printf '%s\n' "$out" | grep ' model.layers.0.mlp.down_proj.weight ')
    contains "$line" "F16"
    line=$(printf '%s\n' "$out" | grep ' lm_head.weight ')
    contains "$line" "Q8_0"
    contains "$line" "[512, 64]"
    expect_ok mstore show mixed
    contains "$out" '"Q5_0":29'
    contains "$out" "architecture           llama"
    contains "$out" "kv heads               4"
fi
expect_ok mstore verify
echo "ok $TEST_NAME ($n files)"
