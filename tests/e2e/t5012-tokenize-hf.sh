#!/usr/bin/env bash
# Models imported from Hugging Face directories tokenize with their tokenizer.json exactly as the
# GGUF vocab it was converted from: each llama.cpp test vocab (byte-level BPE: gpt-2,
# deepseek-llm, deepseek-coder; SentencePiece BPE: llama-spm; WordPiece: bert-bge) is written
# as a tokenizer.json the way the hub holds it (mkfixture.py tokenizer_json_from_gguf), imported, and
# `mstore tokenize` must give llama.cpp's ids: the .inp/.out vectors, and llama-tokenize's ids
# for our own strings (tests/data/tokenizer) with BOS and with --parse-special.
# Then a Qwen 3 (and a Qwen 2) HF fixture with random weights and the gpt-2 vocab runs by name,
# and runs the same after `mstore export --gguf` and re-import.
. "$(dirname "$0")/lib.sh"

[ -d "$MODELS/vocab" ] || skip "vocab GGUFs not found under $MODELS"
for v in gpt-2 deepseek-llm deepseek-coder llama-spm bert-bge; do
    [ -f "$MODELS/vocab/ggml-vocab-$v.gguf" ] || skip "ggml-vocab-$v.gguf not found under $MODELS/vocab"
done

for v in gpt-2 deepseek-llm deepseek-coder llama-spm bert-bge; do
    pairs=
    case $v in deepseek-coder | llama-spm) pairs=--merges-as-pairs ;; esac   # both merge spellings
    make_hf "$WORK/hf-$v" --tokenizer-from "$MODELS/vocab/ggml-vocab-$v.gguf" $pairs --dtype F16 --layers 1 --dim 8
    expect_ok mstore import "$WORK/hf-$v" --name "hf-$v" --quiet
done

"$PY" - "$MSTORE_BIN" "$MODELS/vocab" "$MSTORE_SRC/tests/data/tokenizer" <<'PYEOF' || fail "tokenizer.json ids differ from llama.cpp's"
import json, os, subprocess, sys
mstore, vocab_dir, data = sys.argv[1:4]
SEP = b"\n__ggml_vocab_test__\n"

def batch(name, texts, flags):
    r = subprocess.run([mstore, "tokenize", "hf-" + name, "--batch"] + flags, input=b"".join(t + b"\0" for t in texts),
                       capture_output=True)
    if r.returncode != 0:
        sys.exit("%s: mstore tokenize --batch exited %d: %s" % (name, r.returncode, r.stderr.decode()))
    lines = r.stdout.decode().split("\n")[:-1]
    if len(lines) != len(texts):
        sys.exit("%s: %d lines for %d texts" % (name, len(lines), len(texts)))
    return [[int(x) for x in l.split()] for l in lines]

total = bad = 0
for v in ["gpt-2", "deepseek-llm", "deepseek-coder", "llama-spm", "bert-bge"]:
    base = os.path.join(vocab_dir, "ggml-vocab-%s.gguf" % v)
    inp = open(base + ".inp", "rb").read()
    cases = inp.split(SEP)[:-1]   # each case is followed by the separator
    want = [[int(x) for x in l.split()] for l in open(base + ".out").read().split("\n")[:len(cases)]]
    groups = [(cases, want, ["--no-special"])]
    d = json.load(open(os.path.join(data, "ggml-vocab-%s.json" % v), encoding="utf-8"))
    for ps in (False, True):
        cs = [c for c in d["cases"] if c["parse_special"] == ps]
        groups.append(([bytes.fromhex(c["text_hex"]) if "text_hex" in c else c["text"].encode() for c in cs],
                       [c["ids"] for c in cs], ["--parse-special"] if ps else []))
    for texts, ids, flags in groups:
        got = batch(v, texts, flags)
        for t, w, g in zip(texts, ids, got):
            total += 1
            if w != g:
                bad += 1
                print("%s %r %s:\n  llama.cpp %s\n  mstore    %s" % (v, t[:60], flags, w, g), file=sys.stderr)
print("agree on %d of %d cases" % (total - bad, total))
sys.exit(1 if bad or total < 650 else 0)
PYEOF

# The tokenizer is the same object whichever verb asks: run and tokenize agree on BOS.
expect_ok mstore tokenize hf-deepseek-llm "Hello world"
[ "$out" = "100000 17464 1843" ] || fail "deepseek-llm (BOS first): $out"
expect_ok mstore tokenize hf-llama-spm "I believe the meaning of life is"
[ "$out" = "1 306 4658 278 6593 310 2834 338" ] || fail "llama-spm: $out"

# An MLX directory carries the same tokenizer files: its import tokenizes the same way.
"$PY" "$MSTORE_SRC/tests/e2e/mkfixture.py" mlx "$WORK/mlx" --layers 1
"$PY" "$MSTORE_SRC/tests/e2e/mkfixture.py" tokjson "$MODELS/vocab/ggml-vocab-deepseek-coder.gguf" "$WORK/mlx"
expect_ok mstore import "$WORK/mlx" --name mlx-coder --quiet
text=$'def f(x):\n\treturn x**2 # 12345 \xc3\xa9t\xc3\xa9'
expect_ok mstore tokenize mlx-coder "$text"
mlx_ids=$out
expect_ok mstore tokenize --gguf "$MODELS/vocab/ggml-vocab-deepseek-coder.gguf" "$text"
[ "$mlx_ids" = "$out" ] || fail "MLX import: '$mlx_ids', the GGUF: '$out'"

# A tokenizer.json that is not byte-level or SentencePiece-style: a clear refusal, the model
# itself still imports (it can run on ids).
mkdir "$WORK/uni" && cp "$WORK/hf-gpt-2/config.json" "$WORK/hf-gpt-2/model.safetensors" "$WORK/uni/"
printf '{"model": {"type": "Unigram", "vocab": [["a", 0.0]]}}' >"$WORK/uni/tokenizer.json"
expect_ok mstore import "$WORK/uni" --name uni --quiet
expect_fail 1 "model.type: 'Unigram' is not supported" mstore tokenize uni x
sed 's/"Isolated"/"MergedWithPrevious"/' "$WORK/hf-deepseek-coder/tokenizer.json" >"$WORK/uni/tokenizer.json"
expect_ok mstore import "$WORK/uni" --name uni2 --quiet
expect_fail 1 "pre_tokenizer.pretokenizers[0].behavior: 'MergedWithPrevious' is not supported" mstore tokenize uni2 x

# Exported to GGUF, each converted tokenizer.json keeps its ids: SentencePiece-style as a
# "llama" vocab with scores, byte-level BPE as "gpt2" with llama.cpp's pre-tokenizer name,
# BOS added where tokenizer.json adds it, WordPiece as "bert" with [CLS] and [SEP].
for v in gpt-2 deepseek-llm deepseek-coder llama-spm bert-bge; do
    expect_ok mstore export "hf-$v" --gguf "$WORK/exp-$v.gguf"
    for text in "Hello world" "  two leading spaces" "ünïcödé 中文 🦙" "int main() { return 42; }" "I've 123456 cats"; do
        expect_ok mstore tokenize "hf-$v" "$text"
        want=$out
        expect_ok mstore tokenize --gguf "$WORK/exp-$v.gguf" "$text"
        [ "$out" = "$want" ] || fail "$v: exported GGUF tokenizes '$text' as '$out', tokenizer.json as '$want'"
    done
done
expect_ok mstore tokenize --gguf "$WORK/exp-bert-bge.gguf" "" --verbose
[ "$out" = "101 102" ] || fail "bert-bge exported: '$out'"
contains "$err" "tokenizer: WPM, 30522 tokens, BOS 101 '[CLS]' added, EOS 102 '[SEP]' added, UNK 100 '[UNK]'"

# Qwen 3 and Qwen 2 from HF directories run by name with the tokenizer.json vocab, and give the
# same greedy text after export to GGUF and re-import (the export writes the vocab as gpt2).
for arch in qwen3 qwen2; do
    make_hf "$WORK/$arch" --arch "$arch" --tokenizer-from "$MODELS/vocab/ggml-vocab-gpt-2.gguf" --layers 2 --dim 32
    expect_ok mstore import "$WORK/$arch" --name "$arch-hf" --quiet
    expect_ok mstore run "$arch-hf" "some prompt" --raw --temp 0 -n 8 --seed 1
    hf_out=$out
    [ -n "$hf_out" ] || fail "$arch: no output"
    expect_ok mstore export "$arch-hf" --gguf "$WORK/$arch.gguf"
    expect_ok mstore tokenize --gguf "$WORK/$arch.gguf" "some prompt"
    from_gguf=$out
    expect_ok mstore tokenize "$arch-hf" "some prompt"
    [ "$out" = "$from_gguf" ] || fail "$arch: tokenizer.json gave '$out', the exported GGUF '$from_gguf'"
    expect_ok mstore import "$WORK/$arch.gguf" --name "$arch-gguf" --quiet
    expect_ok mstore run "$arch-gguf" "some prompt" --raw --temp 0 -n 8 --seed 1
    [ "$out" = "$hf_out" ] || fail "$arch: HF import gave '$hf_out', exported and re-imported '$out'"
done
echo "ok $TEST_NAME"
