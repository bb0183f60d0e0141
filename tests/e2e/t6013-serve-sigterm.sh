#!/usr/bin/env bash
# SIGTERM stops `mstore serve` while work runs (issue 40 item 5): two pulls stalled in the middle
# of a blob (one streamed, one not) and a generation. The server stops accepting, cancels the
# transfers at their next step (even a stalled one: the registry here never sends the rest) and
# the generation at its next token, and exits; nothing half-received is adopted into the store.
# The stall would otherwise last MSTORE_REGISTRY_STALL_SECONDS (an hour here) per attempt; the
# bound on the exit is generous, the stop itself takes about a second.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_serve.sh"
S260K=$MODELS/stories260K/stories260K.gguf
[ -f "$S260K" ] || skip "stories260K not found under $MODELS"
command -v curl >/dev/null || skip "no curl"
expect_ok mstore import "$S260K" --name stories:260k --quiet

# A registry that serves a manifest, then half of its layer, then nothing: a stalled transfer.
# Each blob request it has begun to answer is written to $WORK/stalled.
REG_PORT=$(free_port)
"$PY" - "$REG_PORT" "$WORK/stalled" <<'PYEOF' &
import hashlib, http.server, json, os, sys, time
dig = lambda b: "sha256:" + hashlib.sha256(b).hexdigest()
config = json.dumps({"model_format": "gguf", "model_family": "llama"}).encode()
repos = {}  # each repository its own layer: two pulls must not wait on one partial blob
def repo(name):
    if name not in repos:
        layer = os.urandom(1 << 20)
        manifest = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
            "config": {"mediaType": "application/vnd.docker.container.image.v1+json", "digest": dig(config), "size": len(config)},
            "layers": [{"mediaType": "application/vnd.ollama.image.model", "digest": dig(layer), "size": len(layer)}]}).encode()
        repos[name] = (manifest, layer)
    return repos[name]
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def send(self, body, ctype, head):
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Docker-Content-Digest", dig(body))
        self.end_headers()
        if not head:
            self.wfile.write(body)
    def do_HEAD(self): self.do_GET(head=True)
    def do_GET(self, head=False):
        p = self.path
        if p == "/v2/":
            return self.send(b"{}", "application/json", head)
        name = p[len("/v2/"):].split("/manifests/")[0].split("/blobs/")[0]
        manifest, layer = repo(name)
        if "/manifests/" in p:
            return self.send(manifest, "application/vnd.docker.distribution.manifest.v2+json", head)
        if p.endswith("/blobs/" + dig(config)):
            return self.send(config, "application/octet-stream", head)
        if p.endswith("/blobs/" + dig(layer)):
            self.send_response(200)
            self.send_header("Content-Length", str(len(layer)))
            self.end_headers()
            if not head:
                self.wfile.write(layer[: len(layer) // 2])
                self.wfile.flush()
                with open(sys.argv[2], "a") as f:
                    f.write(p + "\n")
                time.sleep(3600)  # the rest never comes
            return
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()
http.server.ThreadingHTTPServer.daemon_threads = True
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
PYEOF
SERVE_PIDS="$SERVE_PIDS $!"
wait_port "$REG_PORT"

MSTORE_REGISTRY_STALL_SECONDS=3600 serve_start
curl -s --max-time 600 "$SERVE/api/pull" -d '{"model": "127.0.0.1:'"$REG_PORT"'/library/stall:latest", "insecure": true}' \
    >"$WORK/pull1.out" 2>&1 &
curl -s --max-time 600 "$SERVE/api/pull" -d '{"model": "127.0.0.1:'"$REG_PORT"'/library/stall2:latest", "insecure": true, "stream": false}' \
    >"$WORK/pull2.out" 2>&1 &
# both pulls are in the middle of the layer (a generous bound: this waits for a state)
for _ in $(seq 600); do
    [ -f "$WORK/stalled" ] && [ "$(grep -c . "$WORK/stalled")" -ge 2 ] && break
    sleep 0.1
done
[ "$(grep -c . "$WORK/stalled" 2>/dev/null)" -ge 2 ] || fail "the pulls did not reach the layer: $(cat "$WORK/pull1.out" "$WORK/pull2.out" "$SERVE_LOG")"
curl -s --max-time 600 "$SERVE/api/generate" -d '{"model": "stories:260k", "prompt": "Once upon a time", "stream": false, "options": {"num_predict": -1}}' \
    >"$WORK/gen.out" 2>&1 &

kill -TERM "$SERVE_PID"
for _ in $(seq 1200); do kill -0 "$SERVE_PID" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$SERVE_PID" 2>/dev/null; then
    fail "the server did not exit in 120 s after SIGTERM: $(cat "$SERVE_LOG")"
fi
wait "$SERVE_PID" || fail "the server exited $? after SIGTERM: $(cat "$SERVE_LOG")"
contains "$(cat "$SERVE_LOG")" "mstore: stopping"

# nothing of the half-received layers was adopted (the whole config blob may be), no new name,
# a sound store
for d in $(sed 's|.*/blobs/sha256:||' "$WORK/stalled"); do
    [ ! -e "$MSTORE_HOME/blobs/sha256-$d" ] || fail "a half-received layer is in the store: sha256:$d"
done
expect_ok mstore list
case "$out" in *stall*) fail "a stalled pull left a name: $out" ;; esac
expect_ok mstore verify
echo "ok $TEST_NAME"
