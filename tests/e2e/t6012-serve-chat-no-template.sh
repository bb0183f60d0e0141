#!/usr/bin/env bash
# A model without a chat template is chatted with as ollama does it, "{{ .Prompt }}": the user's
# message is the bare prompt, so /api/chat and /v1/chat/completions with one user message give
# the greedy text `mstore run MODEL PROMPT` gives, as /api/generate does (issue 40 item 13).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_serve.sh"
S260K=$MODELS/stories260K/stories260K.gguf
[ -f "$S260K" ] || skip "stories260K not found under $MODELS"
command -v curl >/dev/null || skip "no curl"
expect_ok mstore import "$S260K" --name stories:260k --quiet
expect_ok mstore run stories:260k "Once upon a time" --temp 0 -n 16
want=$out
serve_start
field() { printf '%s' "$1" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)'"$2"')'; }

r=$(curl -s --max-time 120 "$SERVE/api/chat" -d '{"model": "stories:260k", "stream": false,
    "messages": [{"role": "user", "content": "Once upon a time"}], "options": {"temperature": 0, "num_predict": 16}}')
got=$(field "$r" '["message"]["content"]')
[ "$got" = "$want" ] || fail "/api/chat: '$got', mstore run: '$want'"
[ "$(field "$r" '["prompt_eval_count"]')" = 5 ] || fail "/api/chat ran another prompt than the bare one: $r"

r=$(curl -s --max-time 120 "$SERVE/v1/chat/completions" -d '{"model": "stories:260k", "temperature": 0,
    "max_tokens": 16, "messages": [{"role": "user", "content": "Once upon a time"}]}')
got=$(field "$r" '["choices"][0]["message"]["content"]')
[ "$got" = "$want" ] || fail "/v1/chat/completions: '$got', mstore run: '$want'"

# A system message and earlier turns add nothing, as in ollama: the user messages, back to back.
expect_ok mstore run stories:260k "Once upon a time there was" --temp 0 -n 16
want2=$out
r=$(curl -s --max-time 120 "$SERVE/api/chat" -d '{"model": "stories:260k", "stream": false, "messages": [
    {"role": "system", "content": "Be nice."}, {"role": "user", "content": "Once upon a time"},
    {"role": "assistant", "content": " and so on"}, {"role": "user", "content": " there was"}],
    "options": {"temperature": 0, "num_predict": 16}}')
got=$(field "$r" '["message"]["content"]')
[ "$got" = "$want2" ] || fail "/api/chat of several turns: '$got', mstore run of the user messages: '$want2'"
serve_alive
echo "ok $TEST_NAME"
