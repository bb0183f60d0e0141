#!/usr/bin/env bash
# The embedding endpoints, /api/embed, /api/embeddings and /v1/embeddings, on a random-weight
# BERT: one text gives `mstore embed`'s vector on every surface (/api/embeddings before its
# normalization, as ollama answers there; OpenAI's base64 decodes to the
# same float32 values, token ids to the text's vector); a list gives the vectors of its strings
# one by one; dimensions renormalizes; truncate false refuses an input past the context giving
# both sizes, truncate true gives the vector of the cut tokens; a decoder is refused by name,
# an unknown model 404, a bad field 400 naming it. /api/show says ["embedding"], and generate,
# chat and chat completions refuse the encoder as ollama does.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_serve.sh"
. "$(dirname "$0")/lib_embed.sh"
command -v curl >/dev/null || skip "no curl"
bert_fixture
S260K=$MODELS/stories260K/stories260K.gguf
[ -f "$S260K" ] || skip "stories260K not found under $MODELS"
expect_ok mstore import "$S260K" --name stories --quiet

T1="hello world"
T2="Ünïcödé café, 你好! 3.14"
expect_ok mstore embed bert "$T1" "$T2"
printf '%s\n' "$out" >"$WORK/cli.json"
expect_ok mstore embed bert "$T1"
printf '%s\n' "$out" >"$WORK/cli1.json"
expect_ok mstore embed bert --dimensions 8 "$T1" "$T2"
printf '%s\n' "$out" >"$WORK/cli8.json"
N12=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["prompt_eval_count"])' "$WORK/cli.json")
expect_ok mstore tokenize bert "$T1"
IDS1=$(printf '%s' "$out" | tr ' ' ',')
long=$(printf 'hello %.0s' $(seq 100))
cut=$(printf 'hello %.0s' $(seq 62))
expect_ok mstore embed bert --no-truncate "$cut"
printf '%s\n' "$out" >"$WORK/cli-cut.json"
serve_start

# post PATH FILE JSON: the answer's body into FILE, its status in $code
post() {
    code=$(curl -s --max-time 120 -o "$2" -w '%{http_code}' -H 'Content-Type: application/json' \
        --data-binary "$3" "$SERVE$1") || fail "curl $1"
}
json() { "$PY" -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$1"; } # a JSON string
J1=$(json "$T1")
J2=$(json "$T2")

# ollama's /api/embed: one string, a list
post /api/embed "$WORK/e1.json" "{\"model\": \"bert\", \"input\": $J1}"
[ "$code" = 200 ] || fail "/api/embed: $code $(cat "$WORK/e1.json")"
vec same "$WORK/cli1.json" "$WORK/e1.json"
"$PY" - "$WORK/e1.json" <<'PYEOF' || fail "/api/embed fields: $(cat "$WORK/e1.json")"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["model"] == "bert", j["model"]
assert j["total_duration"] >= j["load_duration"] >= 0 and j["total_duration"] > 0, j
PYEOF
post /api/embed "$WORK/e2.json" "{\"model\": \"bert\", \"input\": [$J1, $J2]}"
[ "$code" = 200 ] || fail "/api/embed list: $code $(cat "$WORK/e2.json")"
vec same "$WORK/cli.json" "$WORK/e2.json"
vec tokens "$WORK/e2.json" "$N12"
vec unit "$WORK/e2.json"
post /api/embed "$WORK/e0.json" '{"model": "bert", "input": []}'
[ "$code" = 200 ] || fail "/api/embed of nothing: $code"
vec count "$WORK/e0.json" 0

# the older /api/embeddings: the pooled vector as ollama answers it there, not normalized
post /api/embeddings "$WORK/old.json" "{\"model\": \"bert\", \"prompt\": $J1}"
[ "$code" = 200 ] || fail "/api/embeddings: $code $(cat "$WORK/old.json")"
vec pooled "$WORK/old.json" "$WORK/cli1.json"

# OpenAI's /v1/embeddings: floats, base64 (little-endian float32), token ids
post /v1/embeddings "$WORK/o2.json" "{\"model\": \"bert\", \"input\": [$J1, $J2], \"encoding_format\": \"float\", \"user\": \"u\"}"
[ "$code" = 200 ] || fail "/v1/embeddings: $code $(cat "$WORK/o2.json")"
vec same "$WORK/cli.json" "$WORK/o2.json"
vec tokens "$WORK/o2.json" "$N12"
"$PY" - "$WORK/o2.json" <<'PYEOF' || fail "/v1/embeddings fields: $(cat "$WORK/o2.json")"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["object"] == "list" and j["model"] == "bert", j
assert j["usage"]["total_tokens"] == j["usage"]["prompt_tokens"] > 0, j["usage"]
PYEOF
post /v1/embeddings "$WORK/o64.json" "{\"model\": \"bert\", \"input\": [$J1, $J2], \"encoding_format\": \"base64\"}"
[ "$code" = 200 ] || fail "/v1/embeddings base64: $code"
grep -q '"embedding":"' "$WORK/o64.json" || fail "base64 was not a string: $(head -c 200 "$WORK/o64.json")"
vec same "$WORK/cli.json" "$WORK/o64.json"
post /v1/embeddings "$WORK/oids.json" "{\"model\": \"bert\", \"input\": [$IDS1]}"
[ "$code" = 200 ] || fail "/v1/embeddings token ids: $code $(cat "$WORK/oids.json")"
vec same "$WORK/cli1.json" "$WORK/oids.json"
post /v1/embeddings "$WORK/oids2.json" "{\"model\": \"bert\", \"input\": [[$IDS1], [$IDS1]]}"
[ "$code" = 200 ] || fail "/v1/embeddings token arrays: $code"
vec count "$WORK/oids2.json" 2

# dimensions: the CLI's, the first 8 components renormalized
post /api/embed "$WORK/e8.json" "{\"model\": \"bert\", \"input\": [$J1, $J2], \"dimensions\": 8}"
[ "$code" = 200 ] || fail "/api/embed dimensions: $code $(cat "$WORK/e8.json")"
vec same "$WORK/cli8.json" "$WORK/e8.json"
vec prefix "$WORK/cli.json" "$WORK/e8.json" 8
post /v1/embeddings "$WORK/o8.json" "{\"model\": \"bert\", \"input\": [$J1, $J2], \"dimensions\": 8, \"encoding_format\": \"base64\"}"
vec same "$WORK/cli8.json" "$WORK/o8.json"
post /api/embed "$WORK/err.json" '{"model": "bert", "input": "x", "dimensions": 100000}'
[ "$code" = 400 ] || fail "dimensions past the model's: $code"
contains "$(cat "$WORK/err.json")" "dimensions: 100000 is past the model's embedding length of"

# past the context: refused with both sizes, or cut keeping [SEP]
post /api/embed "$WORK/err.json" "{\"model\": \"bert\", \"input\": [\"x\", \"$long\"], \"truncate\": false}"
[ "$code" = 400 ] || fail "truncate false: $code $(cat "$WORK/err.json")"
contains "$(cat "$WORK/err.json")" "input 1 has 102 tokens, past the context of $BERT_CTX"
post /api/embed "$WORK/long.json" "{\"model\": \"bert\", \"input\": \"$long\"}"
[ "$code" = 200 ] || fail "truncate (default): $code"
vec same "$WORK/cli-cut.json" "$WORK/long.json"
vec tokens "$WORK/long.json" "$BERT_CTX"
post /v1/embeddings "$WORK/olong.json" "{\"model\": \"bert\", \"input\": \"$long\"}"
vec same "$WORK/cli-cut.json" "$WORK/olong.json"

# refusals: a decoder by name, an unknown model, bad fields naming them
post /api/embed "$WORK/err.json" '{"model": "stories", "input": "x"}'
[ "$code" = 400 ] || fail "decoder: $code"
contains "$(cat "$WORK/err.json")" "\"error\":\"model 'stories' does not support embeddings\""
post /v1/embeddings "$WORK/err.json" '{"model": "stories", "input": "x"}'
[ "$code" = 400 ] || fail "decoder on /v1: $code"
contains "$(cat "$WORK/err.json")" "\"message\":\"model 'stories' does not support embeddings\""
post /api/embeddings "$WORK/err.json" '{"model": "stories", "prompt": "x"}'
[ "$code" = 400 ] || fail "decoder on /api/embeddings: $code"
post /api/embed "$WORK/err.json" '{"model": "nosuch", "input": "x"}'
[ "$code" = 404 ] || fail "unknown model: $code"
post /v1/embeddings "$WORK/err.json" '{"model": "nosuch", "input": "x"}'
[ "$code" = 404 ] || fail "unknown model on /v1: $code"
contains "$(cat "$WORK/err.json")" '"code":"model_not_found"'
post /api/embed "$WORK/err.json" '{"model": "bert", "input": 5}'
[ "$code" = 400 ] || fail "bad input: $code"
contains "$(cat "$WORK/err.json")" "input: expected a string or an array of strings"
post /v1/embeddings "$WORK/err.json" '{"model": "bert", "input": "x", "encoding_format": "hex"}'
[ "$code" = 400 ] || fail "bad encoding_format: $code"
contains "$(cat "$WORK/err.json")" 'encoding_format: expected'
post /v1/embeddings "$WORK/err.json" '{"model": "bert", "input": [1, 99999999]}'
[ "$code" = 400 ] || fail "token out of the vocab: $code"
contains "$(cat "$WORK/err.json")" "input 0: token 99999999 is outside the vocabulary"

# what the encoder is for: show says so, generation refuses it as ollama does
post /api/show "$WORK/show.json" '{"model": "bert"}'
"$PY" -c 'import json,sys; c=json.load(open(sys.argv[1]))["capabilities"]; assert c == ["embedding"], c' \
    "$WORK/show.json" || fail "bert's capabilities: $(cat "$WORK/show.json" | head -c 300)"
post /api/show "$WORK/show.json" '{"model": "stories"}'
"$PY" -c 'import json,sys; c=json.load(open(sys.argv[1]))["capabilities"]; assert "completion" in c and "embedding" not in c, c' \
    "$WORK/show.json" || fail "stories' capabilities"
post /api/generate "$WORK/err.json" '{"model": "bert", "prompt": "x", "stream": false}'
[ "$code" = 400 ] || fail "generate on an encoder: $code"
contains "$(cat "$WORK/err.json")" "model 'bert' does not support generate"
post /api/generate "$WORK/err.json" '{"model": "bert"}'
[ "$code" = 400 ] || fail "a load-only generate on an encoder: $code"
post /api/chat "$WORK/err.json" '{"model": "bert", "messages": [{"role": "user", "content": "x"}], "stream": false}'
[ "$code" = 400 ] || fail "chat on an encoder: $code"
contains "$(cat "$WORK/err.json")" "model 'bert' does not support chat"
post /v1/chat/completions "$WORK/err.json" '{"model": "bert", "messages": [{"role": "user", "content": "x"}]}'
[ "$code" = 400 ] || fail "chat completions on an encoder: $code"
contains "$(cat "$WORK/err.json")" "model 'bert' does not support chat"
serve_alive
