#!/usr/bin/env bash
# mstore embed: one JSON object of unit vectors for a random-weight BERT; a list of texts gives
# the vectors of the texts one by one, standard input's lines the same; prompt_eval_count is
# the tokens `mstore tokenize` counts; --dimensions keeps the first N components renormalized;
# a text past the context is cut keeping its final [SEP] (the vector of the cut tokens), or
# with --no-truncate refused giving both sizes; a decoder is refused by name.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_embed.sh"
bert_fixture

embed_to() { # embed_to FILE ARGS...: mstore embed ARGS, its JSON into FILE
    local f=$1
    shift
    expect_ok mstore embed "$@"
    printf '%s\n' "$out" >"$f"
}

embed_to "$WORK/two.json" bert "hello world" "Ünïcödé café, 你好! 3.14"
contains "$out" '"model":"bert"'
vec count "$WORK/two.json" 2
vec unit "$WORK/two.json"
n1=$(ntokens bert "hello world")
n2=$(ntokens bert "Ünïcödé café, 你好! 3.14")
vec tokens "$WORK/two.json" $((n1 + n2))

# the list is the strings one by one (one runtime_embed call packs them into one batch)
embed_to "$WORK/a.json" bert "hello world"
embed_to "$WORK/b.json" bert "Ünïcödé café, 你好! 3.14"
"$PY" -c 'import json,sys; a,b=(json.load(open(p)) for p in sys.argv[1:3]); print(json.dumps({"embeddings": a["embeddings"] + b["embeddings"]}))' \
    "$WORK/a.json" "$WORK/b.json" >"$WORK/ab.json"
vec same "$WORK/two.json" "$WORK/ab.json"
vec tokens "$WORK/a.json" "$n1"
# and the same vector again: nothing of one call stays for the next
embed_to "$WORK/a2.json" bert "hello world"
vec same "$WORK/a.json" "$WORK/a2.json"

# standard input: one input a line, with no TEXT or with "-"
printf 'hello world\nÜnïcödé café, 你好! 3.14\n' | "$MSTORE_BIN" embed bert >"$WORK/stdin.json" ||
    fail "embed from standard input"
vec same "$WORK/two.json" "$WORK/stdin.json"
printf 'hello world' | "$MSTORE_BIN" embed bert - >"$WORK/stdin1.json" || fail "embed -"
vec same "$WORK/a.json" "$WORK/stdin1.json"

# dimensions: the first 8 components, scaled back to length 1
embed_to "$WORK/d8.json" bert --dimensions 8 "hello world" "Ünïcödé café, 你好! 3.14"
vec prefix "$WORK/two.json" "$WORK/d8.json" 8
vec unit "$WORK/d8.json"
expect_fail 1 "dimensions: 100000 is past the model's embedding length of" mstore embed bert --dimensions 100000 x

# past the context of 64: "hello" is one token, so 100 of them are [CLS] + 100 + [SEP]
[ "$(ntokens bert "hello hello")" -eq 4 ] || fail "'hello' is not one token in the bge vocab"
long=$(printf 'hello %.0s' $(seq 100))
cut=$(printf 'hello %.0s' $(seq 62)) # [CLS] + 62 + [SEP] = 64: what truncation must leave
expect_fail 1 "input 0 has 102 tokens, past the context of $BERT_CTX" mstore embed bert --no-truncate "$long"
embed_to "$WORK/long.json" bert "$long"
embed_to "$WORK/cut.json" bert --no-truncate "$cut"
vec same "$WORK/long.json" "$WORK/cut.json"
vec tokens "$WORK/long.json" "$BERT_CTX"
embed_to "$WORK/long2.json" bert --truncate "$long"
vec same "$WORK/long.json" "$WORK/long2.json"

# a decoder cannot embed; usage errors exit 2
S260K=$MODELS/stories260K/stories260K.gguf
if [ -f "$S260K" ]; then
    expect_ok mstore import "$S260K" --name stories --quiet
    expect_fail 1 "model 'stories' does not support embeddings" mstore embed stories "hello"
fi
expect_fail 1 "not found" mstore embed nosuch "hello"
expect_fail 2 "needs NAME" mstore embed
expect_fail 2 "exclude each other" mstore embed bert --truncate --no-truncate x
expect_fail 2 "--dimensions" mstore embed bert --dimensions 0 x
expect_ok mstore embed --help
contains "$out" "usage: mstore embed NAME"
