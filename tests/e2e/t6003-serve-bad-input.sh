#!/usr/bin/env bash
# mstore serve refuses bad input clearly, in the shape of the API it came to, and keeps serving
# after each: malformed JSON, wrong field types, a body over the limit, an unknown model (404
# with ollama's {"error": ...}), unbuilt features named, a missing or wrong token, a client gone
# mid-stream (its generation stops), writes to the read-only registry, a blob that lies.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_serve.sh"
S260K=$MODELS/stories260K/stories260K.gguf
[ -f "$S260K" ] || skip "stories260K not found under $MODELS"
command -v curl >/dev/null || skip "no curl"
expect_ok mstore import "$S260K" --name stories:260k --quiet
before=$(store_state)
serve_start --max-body 4096

# req METHOD PATH [BODY] [curl args]: sets $code and $body.
req() {
    local m=$1 p=$2 d=${3-}
    shift 2
    [ $# -gt 0 ] && shift
    code=$(curl -s -o "$WORK/body" -w '%{http_code}' --max-time 60 -X "$m" ${d:+--data-binary "$d"} "$@" "$SERVE$p")
    body=$(cat "$WORK/body")
}
# bad STATUS SUBSTRING METHOD PATH [BODY] [curl args]: the answer, then the server still serves.
bad() {
    local want=$1 msg=$2
    shift 2
    req "$@"
    [ "$code" = "$want" ] || fail "$1 $2 ${3:-}: HTTP $code, want $want: $body"
    contains "$body" "$msg"
    serve_alive
}
G=/api/generate
bad 400 '{"error":"invalid JSON' POST $G '{"model": "stories:260k", "prompt": '
bad 400 '"error":"the request body must be a JSON object"' POST $G '[1, 2]'
bad 400 '"error":"missing request body"' POST $G ''
bad 400 '"error":"prompt: expected a string"' POST $G '{"model": "stories:260k", "prompt": 5}'
bad 400 '"error":"options.temperature: expected a number' POST $G '{"model": "stories:260k", "prompt": "hi", "options": {"temperature": "hot"}}'
bad 400 '"error":"options.top_k: expected an integer' POST $G '{"model": "stories:260k", "prompt": "hi", "options": {"top_k": 1.5}}'
bad 400 '"error":"options.top_p: expected a number from 0 to 1; 1.5 is too large"' POST $G '{"model": "stories:260k", "prompt": "hi", "options": {"top_p": 1.5}}'
bad 400 '"error":"options.stop[0]: expected a string' POST $G '{"model": "stories:260k", "prompt": "hi", "options": {"stop": [1]}}'
bad 400 '"error":"stream: expected true or false' POST $G '{"model": "stories:260k", "prompt": "hi", "stream": "yes"}'
bad 400 '"error":"keep_alive' POST $G '{"model": "stories:260k", "prompt": "hi", "keep_alive": "soon"}'
bad 400 '"error":"messages: expected an array' POST /api/chat '{"model": "stories:260k", "messages": "hi"}'
bad 400 '"error":"messages[0].role' POST /api/chat '{"model": "stories:260k", "messages": [{"role": "robot", "content": "hi"}]}'
bad 400 '"error":"model: ' POST $G '{"model": "../../etc/passwd", "prompt": "hi"}'
bad 400 '"error":"model: required' POST $G '{"prompt": "hi"}'
# unbuilt features that change an answer's meaning are named
bad 400 '"error":"images: not supported' POST $G '{"model": "stories:260k", "prompt": "hi", "images": ["aGk="]}'
# formats: what is not a format, and schema keywords the grammar does not build, named (issue 33)
bad 400 '"error":"format: expected \"json\" or a JSON Schema object' POST $G '{"model": "stories:260k", "prompt": "hi", "format": "yaml"}'
bad 400 '"error":"format: schema keyword '"'"'uniqueItems'"'"' at '"'"'/properties/a'"'"' is not supported' POST $G '{"model": "stories:260k", "prompt": "hi", "format": {"type": "object", "properties": {"a": {"type": "array", "uniqueItems": true}}}}'
bad 400 '"message":"response_format.json_schema.schema: schema keyword '"'"'not'"'"' at' POST /v1/chat/completions '{"model": "stories:260k", "messages": [{"role": "user", "content": "hi"}], "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"not": {}}}}}'
bad 400 '"message":"response_format.type: expected' POST /v1/completions '{"model": "stories:260k", "prompt": "hi", "response_format": {"type": "xml"}}'
bad 400 '"error":"tools[0]: expected {\"type\": \"function\", \"function\": {...}}' POST /api/chat '{"model": "stories:260k", "messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function"}]}'
bad 400 '"error":"tools[0].function.name: expected 1 to 64 letters' POST /api/chat '{"model": "stories:260k", "messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function", "function": {"name": "a b"}}]}'
bad 400 '"error":"stories:260k: the model'"'"'s template (plain) does not support tools' POST /api/chat '{"model": "stories:260k", "messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function", "function": {"name": "f"}}]}'
bad 400 '"message":"tool_choice: no tool is named '"'"'g'"'"'' POST /v1/chat/completions '{"model": "stories:260k", "messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": {"type": "function", "function": {"name": "g"}}}'
bad 400 '"message":"tools[0].function.parameters: schema keyword '"'"'not'"'"'' POST /v1/chat/completions '{"model": "stories:260k", "messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "not": {}}}}], "tool_choice": "required"}'
bad 400 '"message":"tools: only /v1/chat/completions takes tools' POST /v1/completions '{"model": "stories:260k", "prompt": "hi", "tools": []}'
bad 400 '"error":"messages[0].images: not supported' POST /api/chat '{"model": "stories:260k", "messages": [{"role": "user", "content": "hi", "images": ["aGk="]}]}'
# a field that changes an answer is honoured or refused by name (issue 39 item 6): the penalties
# have the option table's bounds, logprobs theirs; thinking by a model that does not think,
# and gpt-oss's levels, are refused as ollama refuses them
C=/v1/chat/completions
M='"model": "stories:260k", "messages": [{"role": "user", "content": "hi"}]'
bad 400 '"error":"options.presence_penalty: expected a number from -2 to 2; 3 is too large"' POST $G '{"model": "stories:260k", "prompt": "hi", "options": {"presence_penalty": 3}}'
bad 400 '"message":"frequency_penalty: expected a number from -2 to 2; -2.5 is too small"' POST $C "{$M, \"frequency_penalty\": -2.5}"
bad 400 '"message":"presence_penalty: expected a number from -2 to 2; \"high\" is not a number"' POST /v1/completions '{"model": "stories:260k", "prompt": "hi", "presence_penalty": "high"}'
bad 400 '"message":"top_logprobs: expected an integer from 0 to 20' POST $C "{$M, \"logprobs\": true, \"top_logprobs\": 21}"
bad 400 '"message":"top_logprobs: needs logprobs: true"' POST $C "{$M, \"top_logprobs\": 2}"
bad 400 '"message":"logprobs: expected an integer from 0 to 5' POST /v1/completions '{"model": "stories:260k", "prompt": "hi", "logprobs": 6}'
bad 400 'does not support thinking"' POST $C "{$M, \"reasoning_effort\": \"low\"}"
bad 400 'does not support thinking"' POST /api/chat "{$M, \"think\": true}"
bad 400 'is not supported for this model' POST $G '{"model": "stories:260k", "prompt": "hi", "think": "high"}'
bad 400 '"error":"think: expected true, false' POST $G '{"model": "stories:260k", "prompt": "hi", "think": "yes"}'
bad 400 '"error":"logprobs: expected true or false"' POST $G '{"model": "stories:260k", "prompt": "hi", "logprobs": "x"}'
bad 400 '"error":"top_logprobs: needs logprobs: true"' POST /api/chat "{$M, \"top_logprobs\": 1}"
# what asks for nothing is accepted, as clients send it
req POST $C "{$M, \"stream\": false, \"max_tokens\": 2, \"logprobs\": false, \"top_logprobs\": 0, \"reasoning_effort\": \"none\", \"frequency_penalty\": 0.5, \"presence_penalty\": -0.5}"
[ "$code" = 200 ] || fail "logprobs false, penalties: HTTP $code $body"
req POST $G '{"model": "stories:260k", "prompt": "hi", "stream": false, "think": false, "logprobs": false, "options": {"num_predict": 2, "frequency_penalty": 1}}'
[ "$code" = 200 ] || fail "think false: HTTP $code $body"
# unknown model: 404, ollama's shape; OpenAI's shape on /v1
bad 404 '{"error":"model '"'"'nosuch'"'"' not found' POST $G '{"model": "nosuch", "prompt": "hi"}'
bad 404 '"code":"model_not_found"' POST /v1/chat/completions '{"model": "nosuch", "messages": [{"role": "user", "content": "hi"}]}'
bad 400 '"error":{"message":"invalid JSON' POST /v1/chat/completions '{'
bad 400 '"error":{"message":"temperature: expected a number from 0 to 2; 3 is too large"' POST /v1/chat/completions '{"model": "stories:260k", "messages": [{"role": "user", "content": "hi"}], "temperature": 3}'
bad 404 '"error":"no such endpoint: GET /api/nothing' GET /api/nothing
# bodies over the limit (4096 here): declared, and chunked without a length
big=$("$PY" -c 'print("{\"model\": \"stories:260k\", \"prompt\": \"" + "a" * 10000 + "\"}")')
bad 413 '"error":"request body over the limit of 4096 bytes' POST $G "$big"
bad 413 '"error":"request body over the limit of 4096 bytes' POST $G "$big" -H "Transfer-Encoding: chunked"
bad 413 '"message":"request body over the limit' POST /v1/completions "$big"
# the read-only registry refuses writes in the distribution spec's shape
bad 405 '{"errors":[{"code":"UNSUPPORTED"' PUT /v2/library/stories/manifests/evil '{}'
bad 405 '"code":"UNSUPPORTED"' POST /v2/library/stories/blobs/uploads/ ''
bad 404 '"code":"MANIFEST_UNKNOWN"' GET /v2/library/stories/manifests/nosuch
bad 404 '"code":"BLOB_UNKNOWN"' GET "/v2/library/stories/blobs/sha256:$(printf '0%.0s' $(seq 64))"
bad 400 '"code":"DIGEST_INVALID"' GET /v2/library/stories/blobs/sha256:xyz
# a blob whose bytes do not hash to its name is refused and leaves nothing
bad 400 '"error":"digest mismatch' POST "/api/blobs/sha256:$(printf '0%.0s' $(seq 64))" 'not those bytes'
bad 400 '"error":"digest' POST /api/blobs/sha256:short 'x'
[ "$(store_state)" = "$before" ] || fail "a refused request changed the store"
# a real blob upload, then HEAD finds it
d=sha256:$(printf 'hello blob' | sha256sum | cut -d' ' -f1)
req POST "/api/blobs/$d" 'hello blob'
[ "$code" = 201 ] || fail "blob upload: HTTP $code $body"
req HEAD "/api/blobs/$d" '' -I
[ "$code" = 200 ] || fail "HEAD blob: $code"
# An upload in progress holds no lock until its bytes are in: t6023.

# A client gone mid-stream: its generation stops at the next token (the log says so), the model
# is free for the next request, and the server serves on.
"$PY" - "$SERVE_PORT" <<'PYEOF' || fail "mid-stream client"
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
body = b'{"model": "stories:260k", "prompt": "Once upon a time", "options": {"num_predict": 100000, "num_ctx": 2048}}'
s.sendall(b"POST /api/generate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
got = b""
s.settimeout(60)
while got.count(b"\n") < 12:   # the headers and the first objects
    chunk = s.recv(4096)
    assert chunk, got         # the server closed the stream early
    got += chunk
assert b'"done":false' in got, got
s.close()
PYEOF
req POST $G '{"model": "stories:260k", "prompt": "Once upon a time", "stream": false, "options": {"num_predict": 4, "num_ctx": 2048}}'
[ "$code" = 200 ] || fail "after a client left: HTTP $code $body"
contains "$body" '"done":true'
contains "$(cat "$SERVE_LOG")" "cancelled (client gone)"
case "$(cat "$SERVE_LOG")" in *"generated, context"*) fail "the abandoned generation ran to the full context" ;; esac
serve_alive

# With a token, every API wants it; the wrong one is refused the same way.
kill "$SERVE_PID"
MSTORE_API_KEY=s3cret serve_start
SERVE_AUTH=s3cret   # serve_alive's own check sends it
bad 401 '"error":"unauthorized' GET /api/tags
bad 401 '"error":"unauthorized' GET /api/tags '' -H "Authorization: Bearer wrong"
bad 401 '"code":"invalid_api_key"' GET /v1/models
bad 401 '"code":"UNAUTHORIZED"' GET /v2/
bad 401 '"code":"UNAUTHORIZED"' GET /v2/library/stories/manifests/260k
req GET /api/tags '' -H "Authorization: Bearer s3cret"
[ "$code" = 200 ] || fail "right token: HTTP $code"
contains "$body" '"name":"stories:260k"'
req GET /v2/library/stories/tags/list '' -H "Authorization: Bearer s3cret"
[ "$code" = 200 ] || fail "right token on /v2: HTTP $code"
serve_alive

# A port in use is a clear error that says what to do.
expect_fail 1 "already in use" mstore serve --listen "127.0.0.1:$SERVE_PORT"
contains "$err" "--listen"
MSTORE_HOST=127.0.0.1:$SERVE_PORT expect_fail 1 "already in use" mstore serve
MSTORE_HOST=http://127.0.0.1:$SERVE_PORT expect_fail 1 "127.0.0.1:$SERVE_PORT is already in use" mstore serve   # as OLLAMA_HOST
expect_fail 1 "port 'x' is not a number" mstore serve --listen 127.0.0.1:x
echo "ok $TEST_NAME"
