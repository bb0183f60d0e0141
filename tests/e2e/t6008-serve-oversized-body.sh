#!/usr/bin/env bash
# A JSON body over --max-body gets the 413 the README promises, with its JSON error, through
# clients that send the whole body before reading (Python's http.client, as the probe of issue
# 40 did: it saw a broken pipe) and through curl; a declared length over the limit is answered
# before the server reads the body, and the server serves on. A refused token is answered the
# same way while the body is still on its way.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_serve.sh"
command -v curl >/dev/null || skip "no curl"
serve_start   # the default limit: 16 MiB
big=$WORK/big.json
"$PY" -c 'import sys; sys.stdout.write("{\"model\": \"x\", \"prompt\": \"" + "a" * (17 << 20) + "\"}")' >"$big"

# post_whole PATH FILE [HEADER=VALUE...]: Python's http.client sends the whole body, then reads.
post_whole() {
    "$PY" - "$SERVE_PORT" "$@" <<'PYEOF'
import http.client, sys
port, path, body = int(sys.argv[1]), sys.argv[2], open(sys.argv[3], "rb").read()
headers = {"Content-Type": "application/json"}
headers.update(h.split("=", 1) for h in sys.argv[4:])
c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
try:
    c.request("POST", path, body=body, headers=headers)
    r = c.getresponse()
    print(r.status, r.read().decode())
except OSError as e:
    print("error", repr(e))
PYEOF
}
got=$(post_whole /api/generate "$big")
case "$got" in "413 "*) ;; *) fail "17 MiB body, Python: want 413, got: $got" ;; esac
contains "$got" '{"error":"request body over the limit of 16777216 bytes"}'
got=$(post_whole /v1/chat/completions "$big")
case "$got" in "413 "*) ;; *) fail "17 MiB body to /v1, Python: want 413, got: $got" ;; esac
contains "$got" '"message":"request body over the limit of 16777216 bytes"'
serve_alive

# curl, with and without Expect: 100-continue (without it, curl sends until it sees the answer)
for expect in 'Expect:' 'Expect: 100-continue'; do
    code=$(curl -s -o "$WORK/body" -w '%{http_code}' --max-time 120 -H "$expect" -H 'Content-Type: application/json' \
        --data-binary "@$big" "$SERVE/api/chat")
    [ "$code" = 413 ] || fail "17 MiB body, curl ($expect): HTTP $code"
    contains "$(cat "$WORK/body")" '"error":"request body over the limit'
done

# A declared length over the limit is answered at the headers: the 413 comes back while not
# one byte of the body has been sent (the client waits for it with a generous bound).
"$PY" - "$SERVE_PORT" <<'PYEOF' || fail "a declared length over the limit was not answered before the body"
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"POST /api/generate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
          b"Content-Length: 1099511627776\r\n\r\n")
s.settimeout(120)
reply = b""
while b"\r\n\r\n" not in reply:
    chunk = s.recv(4096)
    if not chunk:
        break
    reply += chunk
assert reply.startswith(b"HTTP/1.1 413"), reply
PYEOF
serve_alive

# With a token, a request without it is refused the same way while its body is on its way.
kill "$SERVE_PID"
MSTORE_API_KEY=s3cret serve_start
SERVE_AUTH=s3cret
small=$WORK/small.json
"$PY" -c 'import sys; sys.stdout.write("{\"model\": \"x\", \"prompt\": \"" + "a" * (8 << 20) + "\"}")' >"$small"
got=$(post_whole /api/generate "$small")
case "$got" in "401 "*) ;; *) fail "8 MiB body without the token, Python: want 401, got: $got" ;; esac
contains "$got" '"error":"unauthorized'
serve_alive
echo "ok $TEST_NAME"
