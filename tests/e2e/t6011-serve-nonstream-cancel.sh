#!/usr/bin/env bash
# A request answered in one piece ("stream": false) whose client has gone is cancelled at its
# next token, as a streamed one is, and the model is free for the next request (issue 40 item 4).
# No timing: the server is stopped (SIGSTOP) while the client sends its whole request and closes
# its connection, so the client is certainly gone before generation starts; without the check
# the generation would run to the full context (num_predict -1) and the log would say "length".
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_serve.sh"
S260K=$MODELS/stories260K/stories260K.gguf
[ -f "$S260K" ] || skip "stories260K not found under $MODELS"
command -v curl >/dev/null || skip "no curl"
expect_ok mstore import "$S260K" --name stories:260k --quiet
serve_start
# load first, so that the cancelled request's log line is the only one it can be
expect_ok curl -sf --max-time 120 "$SERVE/api/generate" -d '{"model": "stories:260k", "prompt": "Hi", "stream": false, "options": {"num_predict": 1}}'

kill -STOP "$SERVE_PID"
"$PY" - "$SERVE_PORT" <<'PYEOF' || { kill -CONT "$SERVE_PID"; fail "the client could not send its request"; }
import json, socket, sys
body = json.dumps({"model": "stories:260k", "prompt": "Once upon a time", "stream": False,
                   "options": {"num_predict": -1, "temperature": 0}}).encode()
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=30)
s.sendall(b"POST /api/generate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
          b"Content-Length: %d\r\n\r\n" % len(body) + body)
s.close()  # the listen queue holds the connection and its bytes; the server reads them after
PYEOF
kill -CONT "$SERVE_PID"

# The next request answers (a generous bound: it only waits for the one before it to end).
r=$(curl -s --max-time 300 "$SERVE/api/generate" -d '{"model": "stories:260k", "prompt": "Once upon a time", "stream": false, "options": {"num_predict": 8, "temperature": 0}}') ||
    fail "the request after the abandoned one did not answer: $(tail -5 "$SERVE_LOG")"
contains "$r" '"done":true'
grep -q '/api/generate stories:260k: .*cancelled (client gone)' "$SERVE_LOG" ||
    fail "the abandoned request was not cancelled: $(cat "$SERVE_LOG")"
serve_alive
echo "ok $TEST_NAME"
