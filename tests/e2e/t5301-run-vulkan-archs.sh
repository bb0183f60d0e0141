#!/usr/bin/env bash
# The architectures past llama and Qwen on the Vulkan backend, from the command line: the
# synthetic Mixtral, Qwen3-MoE, Qwen2-MoE, Gemma 3, Mistral (window) and Phi-3 (window) of
# tests/reference/make_synthetic_arch.py, F32 and Q8_0, gpt-oss (F32, MXFP4 experts) and DeepSeek V3 (F32, Q8_0)
# and V2 (Q8_0, llama.cpp's mainline layout), multi-head latent attention, give the CPU's greedy text with
# MSTORE_DEVICE=vulkan (run --gguf), and one of them does from the store (run --device vulkan).
# The prompt plus 16 tokens runs past the window of 8 of Gemma 3's window layers.
. "$(dirname "$0")/lib.sh"
vocab="$MODELS/stories260K/stories260K.gguf"
[ -f "$vocab" ] || skip "$vocab not found (set MSTORE_TEST_MODELS)"
"$PY" -c 'import numpy' 2>/dev/null || skip "numpy missing (the synthetic models need it)"

expect_ok mstore devices
case "$out" in
*" vulkan "*) ;;
*) skip "no Vulkan device: $(printf '%s' "$out" | tail -n 1)" ;;
esac

# the CPU's greedy text of the synthetic `arch` in `dt` (more generator options after them; $4: a
# name for the file), and Vulkan's, the same
same_text() {
    local arch=$1 dt=$2 f="$WORK/$1-$2${4:+-$4}.gguf"
    "$PY" "$MSTORE_SRC/tests/reference/make_synthetic_arch.py" --arch "$arch" --dtype "$dt" ${3:-} --vocab "$vocab" \
        -o "$f" >/dev/null 2>&1 || fail "make_synthetic_arch.py --arch $arch --dtype $dt ${3:-}"
    run env MSTORE_DEVICE=cpu "$MSTORE_BIN" run --gguf "$f" "Once upon" --temp 0 -n 16
    [ "$rc" -eq 0 ] || fail "cpu run of $arch $dt: $err"
    want=$out
    run env MSTORE_DEVICE=vulkan "$MSTORE_BIN" run --gguf "$f" "Once upon" --temp 0 -n 16 --verbose
    [ "$rc" -eq 0 ] || fail "vulkan run of $arch $dt: $err"
    contains "$err" "device vulkan"
    [ "$out" = "$want" ] || fail "$arch $dt: vulkan text differs:
vulkan: $out
cpu:    $want"
}
for arch in mixtral qwen3moe qwen2moe gemma3 mistral phi3; do
    for dt in f32 q8_0; do
        same_text "$arch" "$dt"
    done
done
# gpt-oss: sinks, the expert biases, the clamped SwiGLU, and its experts in ggml's MXFP4
same_text gpt-oss f32
same_text gpt-oss mxfp4
# DeepSeek: MLA (matmul_heads, store_rows, attention of head_dim kv_lora + rope over one kv head),
# V3's sigmoid routes with groups and a selection bias, V2's softmax ones
same_text deepseek2 f32
same_text deepseek2 q8_0
same_text deepseek2 q8_0 "--gating softmax --ds-layout mainline" v2

expect_ok mstore import "$WORK/qwen2moe-q8_0.gguf" --name "moe:q8"
run env MSTORE_DEVICE=cpu "$MSTORE_BIN" run moe:q8 "Once upon" --temp 0 -n 16
[ "$rc" -eq 0 ] || fail "cpu run from the store: $err"
want=$out
expect_ok mstore run moe:q8 "Once upon" --temp 0 -n 16 --device vulkan
[ "$out" = "$want" ] || fail "qwen2moe q8_0 from the store: vulkan text differs"
echo "ok $TEST_NAME"
