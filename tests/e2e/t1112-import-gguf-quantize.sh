#!/usr/bin/env bash
# --quantize on a float GGUF: matrices become MLX int8/int4 blobs, norms stay float, the error
# is reported, the quantized model still runs and still tells the stories260K story, and
# export refuses to pretend it can rebuild the original file.
. "$(dirname "$0")/lib.sh"
src="$MODELS/stories260K/stories260K.gguf"
[ -f "$src" ] || skip "$src not found (set MSTORE_TEST_MODELS)"

expect_ok mstore import "$src" --name s:q8 --quantize int8 --group-size 32
expect_ok mstore show s:q8 --tensors
line=$(printf '%s\n' "$out" | grep ' model.layers.0.self_attn.q_proj.weight ')
contains "$line" "int8"
line=$(printf '%s\n' "$out" | grep ' model.layers.0.input_layernorm.weight ')
contains "$line" "F32"
expect_ok mstore show s:q8 --verbose
contains "$out" "quantization error     int8 group 32 over 32 tensors: max abs"
expect_fail 1 "quantized on import (int8)" mstore export s:q8 --gguf "$WORK/x.gguf"
[ ! -e "$WORK/x.gguf" ] || fail "refused export left a file"
expect_ok mstore run s:q8 "" --temp 0 -n 16
contains "$out" "Once upon a time, there was a little girl named Lily."
expect_ok mstore import "$src" --name s:q4 --quantize int4
expect_ok mstore show s:q4 --json
contains "$out" '"int4"'
expect_ok mstore verify
echo "ok $TEST_NAME"
