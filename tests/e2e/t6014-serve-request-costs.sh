#!/usr/bin/env bash
# Costs that would grow with the request are bounded before the work (issue 40 item 7): an
# OpenAI message of 330,000 content parts is refused for its parts before they are joined; a
# prompt of 13 MB is refused for its bytes against the context before it is tokenized (the
# error says "at least N tokens (B bytes)": counted from bytes, not from tokens); a chat of
# 2,000 turns keeps its newest turns that fit, as ollama does; a small request still answers.
# No timing is asserted: the refusals' words show which check refused.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_serve.sh"
S260K=$MODELS/stories260K/stories260K.gguf
[ -f "$S260K" ] || skip "stories260K not found under $MODELS"
command -v curl >/dev/null || skip "no curl"
expect_ok mstore import "$S260K" --name stories:260k --quiet
expect_ok mstore run stories:260k "Once upon a time" --temp 0 -n 8
want=$out
"$PY" - "$WORK" <<'PYEOF'
import json, sys
w = sys.argv[1]
parts = [{"type": "text", "text": "Once upon a time "} for _ in range(330000)]
json.dump({"model": "stories:260k", "max_tokens": 4, "messages": [{"role": "user", "content": parts}]},
          open(w + "/parts.json", "w"))
json.dump({"model": "stories:260k", "max_tokens": 4, "messages": [{"role": "user", "content": "Once upon a time " * 800000}]},
          open(w + "/big.json", "w"))
msgs = [{"role": "user" if i % 2 == 0 else "assistant", "content": "The cat sat on the mat and looked at the sky. " * 3}
        for i in range(1999)] + [{"role": "user", "content": "Once upon a time"}]
json.dump({"model": "stories:260k", "stream": False, "messages": msgs, "options": {"num_predict": 4, "temperature": 0}},
          open(w + "/long.json", "w"))
PYEOF
serve_start
post() { # post PATH FILE: sets code and body
    body=$(curl -s --max-time 600 -o - -w '\n%{http_code}' "$SERVE$1" -d @"$2")
    code=${body##*$'\n'}
    body=${body%$'\n'*}
}

post /v1/chat/completions "$WORK/parts.json"
[ "$code" = 400 ] || fail "330,000 content parts: $code $body"
contains "$body" "messages[0].content: 330000 parts, at most 4096"

post /v1/chat/completions "$WORK/big.json"
[ "$code" = 400 ] || fail "a 13 MB prompt: $code $body"
contains "$body" "prompt of at least"
contains "$body" "(13600000 bytes) does not fit the context of"

post /api/chat "$WORK/long.json"
[ "$code" = 200 ] || fail "a chat of 2,000 turns: $code $body"
n=$(printf '%s' "$body" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["prompt_eval_count"])')
[ "$n" -gt 1000 ] && [ "$n" -lt 2048 ] || fail "a chat of 2,000 turns ran $n prompt tokens: not its newest turns that fit"

r=$(curl -s --max-time 120 "$SERVE/api/generate" -d '{"model": "stories:260k", "prompt": "Once upon a time", "stream": false, "options": {"temperature": 0, "num_predict": 8}}')
[ "$(printf '%s' "$r" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["response"])')" = "$want" ] ||
    fail "a small request after them: $r"
serve_alive
echo "ok $TEST_NAME"
