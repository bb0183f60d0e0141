#!/usr/bin/env bash
# mstore tokenize prints llama.cpp's ids for the Llama 2 SPM vocab (BOS added, or not with
# --no-special), for byte-level BPE vocabs and for WordPiece (bge; --verbose names the kind),
# from a GGUF file and from a model in the store; unknown names and models without a readable
# tokenizer are refused with a message.
. "$(dirname "$0")/lib.sh"

VOCAB=$MODELS/vocab/ggml-vocab-llama-spm.gguf
S260K=$MODELS/stories260K/stories260K.gguf
[ -f "$VOCAB" ] && [ -f "$S260K" ] || skip "test models not found under $MODELS"

# From the GGUF file. Expected ids: llama.cpp's ggml-vocab-llama-spm.gguf.out and llama2.c's test.c.
expect_ok mstore tokenize --gguf "$VOCAB" "I believe the meaning of life is"
[ "$out" = "1 306 4658 278 6593 310 2834 338" ] || fail "ids: $out"
expect_ok mstore tokenize --gguf "$VOCAB" " Hello World!" --no-special
[ "$out" = "29871 15043 2787 29991" ] || fail "ids: $out"
expect_ok mstore tokenize --gguf "$VOCAB" --no-special $'\t\n'
[ "$out" = "29871 12 13" ] || fail "ids: $out"
expect_ok mstore tokenize --gguf "$VOCAB" --no-special -- "-x"
[ "$out" = "448 29916" ] || fail "ids: $out"
# An empty text is BOS alone; "<s>" is plain text unless --parse-special.
expect_ok mstore tokenize --gguf "$VOCAB" ""
[ "$out" = "1" ] || fail "ids: $out"
expect_ok mstore tokenize --gguf "$VOCAB" --no-special --parse-special "<s>"
[ "$out" = "1" ] || fail "ids: $out"
expect_ok mstore tokenize --gguf "$VOCAB" --no-special "<s>"
[ "$out" != "1" ] || fail "<s> was parsed as a control token without --parse-special"

# From the store: stories260K (upstream llama.cpp server tests count 18 prompt tokens with BOS).
expect_ok mstore import "$S260K" --name s260k --quiet
expect_ok mstore tokenize s260k "I believe the meaning of life is"
[ "$(printf '%s\n' "$out" | wc -w)" -eq 18 ] || fail "stories260K: $out"
from_store=$out
expect_ok mstore tokenize --gguf "$S260K" "I believe the meaning of life is"
[ "$out" = "$from_store" ] || fail "store gave '$from_store', file gave '$out'"

# The vocab-only GGUF itself, when the importer takes a GGUF without tensors.
run mstore import "$VOCAB" --name llama-spm --quiet
if [ "$rc" -eq 0 ]; then
    expect_ok mstore tokenize llama-spm "I believe the meaning of life is"
    [ "$out" = "1 306 4658 278 6593 310 2834 338" ] || fail "llama-spm from the store: $out"
else
    echo "note $TEST_NAME: importing the vocab-only GGUF failed ($err); tokenized it with --gguf only" >&2
fi

# Byte-level BPE (tokenizer.ggml.model "gpt2"); ids from llama.cpp's .out files.
expect_ok mstore tokenize --gguf "$MODELS/vocab/ggml-vocab-gpt-2.gguf" "Hello world"
[ "$out" = "15496 995" ] || fail "gpt-2: $out"
expect_ok mstore tokenize --gguf "$MODELS/vocab/ggml-vocab-deepseek-llm.gguf" "Hello world"
[ "$out" = "100000 17464 1843" ] || fail "deepseek-llm (BOS first): $out"

# WordPiece (tokenizer.ggml.model "bert"): [CLS] ... [SEP]; ids from llama.cpp's .out file.
BGE=$MODELS/vocab/ggml-vocab-bert-bge.gguf
if [ -f "$BGE" ]; then
    expect_ok mstore tokenize --gguf "$BGE" "Hello world"
    [ "$out" = "101 7592 2088 102" ] || fail "bert-bge: $out"
    expect_ok mstore tokenize --gguf "$BGE" --no-special ""
    [ -z "$out" ] || fail "bert-bge, empty text without specials: '$out'"
    # --verbose says what the tokenizer is, on stderr only
    expect_ok mstore tokenize --gguf "$BGE" "" --verbose
    [ "$out" = "101 102" ] || fail "bert-bge, empty text: $out"
    contains "$err" "tokenizer: WPM, 30522 tokens, BOS 101 '[CLS]' added, EOS 102 '[SEP]' added, UNK 100 '[UNK]'"
fi
expect_ok mstore tokenize --gguf "$MODELS/vocab/ggml-vocab-gpt-2.gguf" "Hello world" --verbose
contains "$err" "tokenizer: BPE (gpt2), 50257 tokens"

# Refusals.
before=$(store_state)
expect_fail 1 "model 'nope:latest' not found" mstore tokenize nope x
expect_fail 1 "no-such.gguf" mstore tokenize --gguf "$WORK/no-such.gguf" x
expect_fail 2 "needs NAME and TEXT" mstore tokenize s260k
expect_fail 2 "unknown option '--bogus'" mstore tokenize s260k x --bogus
[ "$(store_state)" = "$before" ] || fail "a refused tokenize changed the store"

# The HF fixture's placeholder tokenizer.json (two tokens, no pre-tokenizer) is neither form
# tokenizer_from_json reads (t5012 covers the real ones).
make_hf "$WORK/hf"
expect_ok mstore import "$WORK/hf" --name hf-tiny
expect_fail 1 "tokenizer.json: a BPE model that is neither byte-level" mstore tokenize hf-tiny x

expect_ok mstore tokenize --help
contains "$out" "usage: mstore tokenize NAME TEXT"
echo "ok $TEST_NAME"
