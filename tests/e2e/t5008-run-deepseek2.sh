#!/usr/bin/env bash
# DeepSeek V2 / V3 (deepseek2, issue 39 part 3) from the command line: the synthetic GGUF of
# tests/reference/make_synthetic_arch.py imports (show names its MLA sizes), runs from the store
# with the greedy text of the file itself, and exports back to a GGUF that runs the same. The
# exactness against the float64 reference is test_runtime_archs'; this is the CLI's path.
. "$(dirname "$0")/lib.sh"
vocab="$MODELS/stories260K/stories260K.gguf"
[ -f "$vocab" ] || skip "$vocab not found (set MSTORE_TEST_MODELS)"
"$PY" -c 'import numpy' 2>/dev/null || skip "numpy missing (the synthetic models need it)"

f="$WORK/ds.gguf"
"$PY" "$MSTORE_SRC/tests/reference/make_synthetic_arch.py" --arch deepseek2 --dtype q8_0 --vocab "$vocab" \
    -o "$f" >/dev/null 2>&1 || fail "make_synthetic_arch.py --arch deepseek2"
expect_ok mstore import "$f" --name ds:tiny --quiet
expect_ok mstore show ds:tiny
contains "$out" "deepseek2"
contains "$out" "kv lora rank           32"
contains "$out" "q lora rank            32"

args=("Once upon a time" --raw --temp 0 -n 24)
expect_ok mstore run --gguf "$f" "${args[@]}"
want=$out
[ -n "$want" ] || fail "run --gguf answered nothing"
expect_ok mstore run ds:tiny "${args[@]}"
[ "$out" = "$want" ] || fail "the store's text differs from the file's:
store: $out
file:  $want"
# a longer prompt and a context that the answer fills (the run stops there, saying so)
expect_ok mstore run ds:tiny "$(printf 'Once upon a time %.0s' $(seq 1 12))" --raw --temp 0 -n 40 --ctx 96
[ -n "$out" ] || fail "chunked prefill answered nothing"
expect_ok mstore export ds:tiny --gguf "$WORK/back.gguf"
expect_ok mstore run --gguf "$WORK/back.gguf" "${args[@]}"
[ "$out" = "$want" ] || fail "the exported GGUF's text differs: $out"
