#!/usr/bin/env bash
# Connections that never finish sending a request cannot lock clients out (issue 40): with
# --max-clients 4, one slot taken by a streaming generation and 28 half-sent requests (headers
# cut mid-line, a body stalled after its first bytes: more than the 4 slots and the 16 let in
# past them), /api/version still answers: the connection that went longest without sending a
# whole request gives its slot up, the generation in progress is never the one, and it streams
# on. Nothing here is timed: each wait is for a state, with a generous bound.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_serve.sh"
S260K=$MODELS/stories260K/stories260K.gguf
[ -f "$S260K" ] || skip "stories260K not found under $MODELS"
command -v curl >/dev/null || skip "no curl"
expect_ok mstore import "$S260K" --name stories:260k --quiet
serve_start --max-clients 4

"$PY" - "$SERVE_PORT" <<'PYEOF' || fail "half-sent connections locked the server"
import select, socket, subprocess, sys, time
port = int(sys.argv[1])
def connect():
    return socket.create_connection(("127.0.0.1", port), timeout=120)

# 1. a generation streaming: it holds a slot while it answers
gen = connect()
body = b'{"model": "stories:260k", "prompt": "Once upon a time", "options": {"num_predict": 100000, "num_ctx": 2048}}'
gen.sendall(b"POST /api/generate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
got = b""
while got.count(b'"done":false') < 3:
    chunk = gen.recv(4096)
    assert chunk, got
    got += chunk

# 2. connections that never send a whole request, kept open: past --max-clients and the 16
#    connections let in beyond it
held = []
for i in range(28):
    s = connect()
    if i % 2:
        s.sendall(b"POST /api/copy HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{\"sour")
    else:
        s.sendall(b"GET /api/version HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: a")
    held.append(s)

# 3. a short request gets its answer while they are held open (connections are accepted in
#    order, so it comes after all of them)
for _ in range(3):
    r = subprocess.run(["curl", "-s", "--max-time", "60", "http://127.0.0.1:%d/api/version" % port],
                       capture_output=True, text=True)
    assert r.returncode == 0 and '"version"' in r.stdout, ("/api/version", r.returncode, r.stdout, r.stderr)

# 4. the oldest half-sent connections were the ones closed for it
closed = 0
deadline = time.monotonic() + 120
while not closed and time.monotonic() < deadline:
    ready, _, _ = select.select(held, [], [], 1)
    for s in ready:
        try:
            data = s.recv(4096)
        except OSError:
            data = b""
        if not data:
            closed += 1
assert closed, "no half-sent connection was closed"

# 5. the generation was not: it streams on
more = b""
while more.count(b'"done":false') < 3:
    chunk = gen.recv(4096)
    assert chunk, "the streaming generation was cut"
    more += chunk
gen.close()
for s in held:
    s.close()
PYEOF
serve_alive
echo "ok $TEST_NAME"
