#!/usr/bin/env bash
# mstore run on the real stories260K model: the documented 200-step greedy text from BOS,
# exactly; seeded sampling is repeatable; bad input is refused clearly.
. "$(dirname "$0")/lib.sh"
src="$MODELS/stories260K/stories260K.gguf"
[ -f "$src" ] || skip "$src not found (set MSTORE_TEST_MODELS)"

expect_ok mstore import "$src" --name stories:260k
want=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["upstream_documented"]["greedy_from_bos_200_steps"]["expected_text"])' \
    "$MODELS/stories260K/expected_outputs.json")
expect_ok mstore run stories:260k "" --temp 0 -n 200
[ "$out" = "$want" ] || fail "greedy text from BOS differs:
got:  ${out:0:200}
want: ${want:0:200}"
# the same on the VNNI kernels' emulation (any CPU) and on the SIMD paths where the CPU has them;
# where it lacks one, asking for it is an error that says so (exit 1), never an illegal instruction
for path in vnni-emul avx512vnni avxvnni avxvnni-evex avx512 avx2; do
    MSTORE_CPU=$path run mstore run stories:260k "" --temp 0 -n 200
    case "$err" in *"MSTORE_CPU '$path': not supported by this cpu"*)
        [ "$rc" -eq 1 ] || fail "MSTORE_CPU=$path refused with exit $rc, want 1"
        continue ;;
    esac
    [ "$rc" -eq 0 ] && [ "$out" = "$want" ] || fail "MSTORE_CPU=$path: greedy text from BOS differs (exit $rc, $err)"
done

# A prompt continues as the computed reference says (SOURCES.md): "Once upon a time" then
# ", there was a little girl named Lily."
expect_ok mstore run stories:260k "Once upon a time" --temp 0 -n 12
contains "$out" ", there was a little girl named Lily."

# With no PROMPT and standard input not a terminal, the prompt is read from it (as ollama does).
out=$(printf 'Once upon a time\n' | "$MSTORE_BIN" run stories:260k --temp 0 -n 12)
contains "$out" ", there was a little girl named Lily."

# Same seed, same text; --verbose reports counts and rates like ollama.
expect_ok mstore run stories:260k "Once upon a time" --temp 0.9 --top-k 40 --top-p 0.9 --seed 7 -n 40
a=$out
expect_ok mstore run stories:260k "Once upon a time" --temp 0.9 --top-k 40 --top-p 0.9 --seed 7 -n 40
[ "$out" = "$a" ] || fail "same seed gave different text"
expect_ok mstore run stories:260k "Once upon a time" --temp 0.9 --seed 8 -n 40 --min-p 0.05 --repeat-penalty 1.1
[ "$out" != "$a" ] || fail "different seeds gave the same 40 tokens"
expect_ok mstore run stories:260k "Once upon a time" --temp 0 -n 8 --verbose
contains "$err" "prompt eval count:    5 token(s)"
contains "$err" "eval count:           8 token(s)"
contains "$err" "load duration"

# Bad input.
expect_fail 1 "not found" mstore run nosuch "hi"
expect_fail 2 "--temp" mstore run stories:260k "hi" --temp -1
expect_fail 2 "--threads" mstore run stories:260k "hi" --threads 0
expect_fail 2 "--bogus" mstore run stories:260k "hi" --bogus
expect_fail 1 "context" mstore run stories:260k "Once upon a time there was a little girl named Lily who loved to play" --ctx 8
if [ -f "$MODELS/vocab/ggml-vocab-gpt-2.gguf" ]; then
    expect_ok mstore import "$MODELS/vocab/ggml-vocab-gpt-2.gguf" --name gpt2vocab
    expect_fail 1 "architecture 'gpt2' is not supported" mstore run gpt2vocab "hi"
fi
# A damaged blob is refused when the model opens, naming the layer.
victim=$(mstore show stories:260k --tensors | awk '/ model.layers.2.mlp.up_proj.weight /{print $NF}')
[ -n "$victim" ] || fail "no blob for model.layers.2.mlp.up_proj.weight"
f="$MSTORE_HOME/blobs/sha256-${victim#sha256:}"
chmod u+w "$f"; truncate -s 100 "$f"
expect_fail 1 "model.layers.2.mlp.up_proj.weight" mstore run stories:260k "hi" -n 4
rm -f "$f"
expect_fail 1 "model.layers.2.mlp.up_proj.weight" mstore run stories:260k "hi" -n 4
echo "ok $TEST_NAME"
