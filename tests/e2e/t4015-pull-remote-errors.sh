#!/usr/bin/env bash
# What a host answers is not echoed: a pull from a loopback service that is no registry (an
# error page holding a secret) reports the HTTP status only; a registry's own error JSON gives
# its code and message, escaped and cut, never its other fields. Through `mstore serve` the
# error field says no more. `mstore serve --no-remote-pull` refuses (403) a pull or push to a
# host the client names, before connecting to it, and still pulls from $MSTORE_REGISTRY.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_registry.sh"
. "$(dirname "$0")/lib_serve.sh"
command -v curl >/dev/null || skip "no curl"

# The stub answers by repository: page/* a 404 HTML page, oci/* a registry error JSON with a
# control byte and a long message, ok200/* a 200 that is no JSON. STUB_LOG: one path a line.
STUB_LOG=$WORK/stub.log
: >"$STUB_LOG"
"$PY" - "$WORK/stub.port" "$STUB_LOG" <<'PYEOF' >"$WORK/stub.out" 2>&1 &
import http.server, json, os, sys
port_file, log = sys.argv[1], sys.argv[2]
SECRET = "db_password=hunter2"
class H(http.server.BaseHTTPRequestHandler):
    def answer(self):
        with open(log, "a") as f:
            f.write("%s %s\n" % (self.command, self.path))
        repo = self.path.split("/")[2] if self.path.startswith("/v2/") and self.path.count("/") > 2 else ""
        if repo == "oci":
            status, ctype = 404, "application/json"
            body = json.dumps({"errors": [{"code": "MANIFEST_UNKNOWN", "message": "no \x1b[31mred\" here " + "A" * 3000,
                                           "detail": SECRET}], "extra": SECRET}).encode()
        elif repo == "ok200":
            status, ctype, body = 200, "application/vnd.oci.image.manifest.v1+json", ('{"' + SECRET + '\n').encode()
        else:
            status, ctype, body = 404, "text/html", ("<html><body>" + SECRET + "</body></html>").encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
    do_GET = do_HEAD = do_POST = do_PUT = answer
    def log_message(self, *a):
        pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
open(port_file + ".tmp", "w").write(str(s.server_address[1]))
os.rename(port_file + ".tmp", port_file)
s.serve_forever()
PYEOF
SERVE_PIDS="$SERVE_PIDS $!"
for _ in $(seq 200); do [ -f "$WORK/stub.port" ] && break; sleep 0.05; done
[ -f "$WORK/stub.port" ] || fail "the stub did not start: $(cat "$WORK/stub.out")"
STUB=127.0.0.1:$(cat "$WORK/stub.port")
wait_port "${STUB#*:}"
nosecret() { case "$1" in *hunter2*) fail "the remote body was echoed: $1" ;; esac; }

before=$(store_state)
expect_fail 1 "HTTP 404" mstore pull --insecure "$STUB/page/x:z"
nosecret "$err"
expect_fail 1 "HTTP 404: MANIFEST_UNKNOWN: no \\x1b[31mred\\x22 here AAA" mstore pull --insecure "$STUB/oci/x:z"
nosecret "$err"
[ "${#err}" -lt 600 ] || fail "the registry's message was not cut: ${#err} bytes"
case "$err" in *$'\x1b'*) fail "a control byte reached the terminal" ;; esac
expect_fail 1 "not valid json" mstore pull --insecure "$STUB/ok200/x:z"
nosecret "$err"
[ "$(store_state)" = "$before" ] || fail "a refused pull changed the store"

# The server's error field, streamed or not.
serve_start
for repo in page oci ok200; do
    r=$(curl -s -X POST "$SERVE/api/pull" -d "{\"model\":\"$STUB/$repo/x:z\",\"insecure\":true,\"stream\":false}")
    contains "$r" '"error"'
    nosecret "$r"
    r=$(curl -s -X POST "$SERVE/api/pull" -d "{\"model\":\"$STUB/$repo/x:z\",\"insecure\":true}")
    contains "$r" '"error"'
    nosecret "$r"
done
contains "$r" "not valid json"

# --no-remote-pull: a host the client names is refused before any connection; the host
# $MSTORE_REGISTRY names (or a name without a host) is still pulled from.
kill "$SERVE_PID"
make_layout "$WORK/layout" v1 1 1
expect_ok mstore pull --from "$WORK/layout" "$STUB/mine/m:v1"
MSTORE_REGISTRY=127.0.0.1:1 serve_start --no-remote-pull
: >"$STUB_LOG"
code=$(curl -s -o "$WORK/r" -w '%{http_code}' -X POST "$SERVE/api/pull" -d "{\"model\":\"$STUB/page/x:z\",\"insecure\":true}")
[ "$code" = 403 ] || fail "pull of a client-named host answered $code: $(cat "$WORK/r")"
contains "$(cat "$WORK/r")" "--no-remote-pull"
code=$(curl -s -o "$WORK/r" -w '%{http_code}' -X POST "$SERVE/api/push" -d "{\"model\":\"$STUB/mine/m:v1\",\"insecure\":true}")
[ "$code" = 403 ] || fail "push to a client-named host answered $code: $(cat "$WORK/r")"
[ -s "$STUB_LOG" ] && fail "the refused requests reached the host: $(cat "$STUB_LOG")"
kill "$SERVE_PID"
MSTORE_REGISTRY=$STUB serve_start --no-remote-pull
for model in page/x:z "$STUB/page/x:z"; do
    code=$(curl -s -o "$WORK/r" -w '%{http_code}' -X POST "$SERVE/api/pull" -d "{\"model\":\"$model\",\"insecure\":true,\"stream\":false}")
    [ "$code" = 404 ] || fail "pull of $model from \$MSTORE_REGISTRY answered $code: $(cat "$WORK/r")"
done
grep -q "GET /v2/page/x/manifests/z" "$STUB_LOG" || fail "the server did not pull from \$MSTORE_REGISTRY"
serve_alive
echo "ok $TEST_NAME"
