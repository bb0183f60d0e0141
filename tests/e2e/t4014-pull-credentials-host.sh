#!/usr/bin/env bash
# Registry credentials go only to the host they were given for. A loopback stub registry that
# answers every request 401 with a Basic challenge records the Authorization headers it gets:
# a pull naming the stub while $MSTORE_REGISTRY_AUTH is for another registry sends none (from
# the CLI, and from `mstore serve` when a client names the stub in POST /api/pull); credentials
# for the stub's own host ($MSTORE_REGISTRY naming it, or its credentials.json entry) are sent.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_serve.sh"
command -v curl >/dev/null || skip "no curl"

# stub MODE: a registry stub on 127.0.0.1 (port chosen by the kernel); sets STUB (host:port)
# and STUB_LOG ("METHOD PATH AUTHORIZATION" a line, "-" for none).
stub() {
    STUB_LOG=$WORK/stub.log
    : >"$STUB_LOG"
    "$PY" - "$WORK/stub.port" "$STUB_LOG" <<'PYEOF' >"$WORK/stub.out" 2>&1 &
import http.server, sys
port_file, log = sys.argv[1], sys.argv[2]
class H(http.server.BaseHTTPRequestHandler):
    def answer(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n:
            self.rfile.read(n)
        with open(log, "a") as f:
            f.write("%s %s %s\n" % (self.command, self.path, self.headers.get("Authorization", "-")))
        body = b'{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}'
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Basic realm="stub"')
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
    do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = answer
    def log_message(self, *a):
        pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
open(port_file + ".tmp", "w").write(str(s.server_address[1]))
import os; os.rename(port_file + ".tmp", port_file)
s.serve_forever()
PYEOF
    SERVE_PIDS="$SERVE_PIDS $!"
    for _ in $(seq 200); do [ -f "$WORK/stub.port" ] && break; sleep 0.05; done
    [ -f "$WORK/stub.port" ] || fail "the stub did not start: $(cat "$WORK/stub.out")"
    STUB=127.0.0.1:$(cat "$WORK/stub.port")
    wait_port "${STUB#*:}"
}
# auths: the Authorization values the stub received, one a line
auths() { awk '{print $3, $4}' "$STUB_LOG"; }
b64() { printf '%s' "$1" | base64; }

stub
export MSTORE_REGISTRY=reg.example:5000 MSTORE_REGISTRY_AUTH=user:secret

# The CLI: the environment's password is for reg.example:5000, not for the stub.
expect_fail 1 "HTTP 401" mstore pull --insecure "$STUB/x/y:z"
[ -s "$STUB_LOG" ] || fail "the pull never reached the stub"
grep -q Basic "$STUB_LOG" && fail "credentials for reg.example:5000 went to $STUB: $(auths)"

# The server: a client names the stub; the server's credentials stay home.
serve_start
r=$(curl -s -X POST "$SERVE/api/pull" -d "{\"model\":\"$STUB/x/y:z\",\"insecure\":true,\"stream\":false}")
contains "$r" '"error"'
grep -q Basic "$STUB_LOG" && fail "the server sent its credentials to $STUB: $(auths)"
n_before=$(wc -l <"$STUB_LOG")
[ "$n_before" -ge 2 ] || fail "the server's pull never reached the stub"

# Credentials for the stub's own host are sent: $MSTORE_REGISTRY names it ...
MSTORE_REGISTRY=$STUB expect_fail 1 "HTTP 401" mstore pull --insecure "$STUB/x/y:z"
grep -q "Basic $(b64 user:secret)" "$STUB_LOG" || fail "MSTORE_REGISTRY_AUTH was not sent to its own host: $(auths)"

# ... or its entry in credentials.json (the other entries stay unsent), through the server too.
: >"$STUB_LOG"
cat >"$MSTORE_HOME/credentials.json" <<JSON
{"reg.example:5000": "other:nothere", "$STUB": "u2:p2"}
JSON
expect_fail 1 "HTTP 401" mstore pull --insecure "$STUB/x/y:z"
grep -q "Basic $(b64 u2:p2)" "$STUB_LOG" || fail "the credentials.json entry was not sent: $(auths)"
grep -q "$(b64 other:nothere)" "$STUB_LOG" && fail "another host's entry was sent: $(auths)"
grep -q "$(b64 user:secret)" "$STUB_LOG" && fail "the environment's password was sent: $(auths)"
: >"$STUB_LOG"
r=$(curl -s -X POST "$SERVE/api/pull" -d "{\"model\":\"$STUB/x/y:z\",\"insecure\":true,\"stream\":false}")
contains "$r" '"error"'
grep -q "Basic $(b64 u2:p2)" "$STUB_LOG" || fail "the server did not send the stub's own entry: $(auths)"
serve_alive
echo "ok $TEST_NAME"
