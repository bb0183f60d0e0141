#!/usr/bin/env bash
# --quantize turns the float linear and embedding weights of a safetensors directory into
# MLX-layout quantized blobs; norms stay float; show --verbose reports the error.
. "$(dirname "$0")/lib.sh"

make_hf "$WORK/f32" --dim 64
make_hf "$WORK/bf16" --dim 64 --dtype BF16

expect_ok mstore import "$WORK/f32" --name plain
expect_ok mstore show plain --verbose
contains "$out" "quantization error     none"

expect_ok mstore import "$WORK/f32" --name q4 --quantize int4
expect_ok mstore show q4 --verbose --tensors
contains "$out" "quantization error     int4 group 32 over 16 tensors: max abs"
line=$(printf '%s\n' "$out" | grep ' model.layers.0.mlp.up_proj.weight ')
contains "$line" "U32"
contains "$line" "int4"
contains "$line" "[128, 64]"
contains "$(printf '%s\n' "$out" | grep ' model.layers.0.mlp.up_proj.weight.scale ')" "[128, 2]"
contains "$(printf '%s\n' "$out" | grep ' model.layers.0.mlp.up_proj.weight.bias ')" "F32"
contains "$(printf '%s\n' "$out" | grep ' model.norm.weight ')" "F32"
# The error is what the bits imply: int4 on weights in [-1, 1] is within a step (2/15).
expect_ok mstore show q4 --json
"$PY" -c '
import json, sys
e = json.load(sys.stdin)["config"]["quantization_error"]
assert 0 < e["max_abs"] <= 2 / 15 + 1e-6, e
assert 0 < e["rms_rel"] < 0.1, e
assert e["quant_type"] == "int4" and e["group_size"] == 32 and e["n_tensors"] == 16, e' <<<"$out" \
    || fail "quantization_error out of bounds: $out"

for t in int8 nvfp4 mxfp8; do
    expect_ok mstore import "$WORK/bf16" --name "bf16-$t" --quantize "$t"
    expect_ok mstore show "bf16-$t" --verbose
    contains "$out" "quantization error     $t group"
done
expect_ok mstore import "$WORK/bf16" --name bf16-g128 --quantize int8 --group-size 128
expect_ok mstore show bf16-g128 --verbose --tensors
contains "$out" "int8 group 128 over 2 tensors"   # only down_proj has 128 columns
contains "$(printf '%s\n' "$out" | grep ' model.layers.0.mlp.down_proj.weight.scale ')" "BF16"

# Quantizing twice gives the same blobs (deterministic).
expect_ok mstore import "$WORK/f32" --name q4b --quantize int4
[ "$(mstore show q4 --json | grep '"digest"' | head -1)" = "$(mstore show q4b --json | grep '"digest"' | head -1)" ] \
    || fail "two int4 imports of the same directory differ"

before=$(store_state)
expect_fail 1 "--quantize 'q4_k': not a quantization type" mstore import "$WORK/f32" --name bad --quantize q4_k
expect_fail 1 "--group-size 48: int4 needs 32, 64 or 128" mstore import "$WORK/f32" --name bad --quantize int4 --group-size 48
expect_fail 1 "--group-size 32: nvfp4 has a fixed group size of 16" mstore import "$WORK/f32" --name bad --quantize nvfp4 --group-size 32
expect_fail 2 "--group-size needs --quantize" mstore import "$WORK/f32" --name bad --group-size 64
expect_fail 2 "--group-size" mstore import "$WORK/f32" --name bad --quantize int4 --group-size x
"$PY" "$MSTORE_SRC/tests/e2e/mkfixture.py" random "$WORK/notgguf" 1
expect_fail 1 "not a GGUF file" mstore import "$WORK/notgguf" --name bad --quantize int4
[ "$(store_state)" = "$before" ] || fail "store changed after refusals"
expect_ok mstore import --help
contains "$out" "--quantize TYPE"
echo "ok $TEST_NAME"
