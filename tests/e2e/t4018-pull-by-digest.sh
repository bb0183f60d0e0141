#!/usr/bin/env bash
# OCI references by digest: pull HOST/NS/NAME@sha256:<hex> (stored under the tag
# "sha256-<hex>") and HOST/NS/NAME:TAG@sha256:<hex> (stored under TAG); show, cp, run and rm
# of such a reference find the model only when it is that version; pull --from DIR by digest;
# a push to a reference by digest publishes exactly that manifest. A registry that answers a
# digest with other bytes is refused and the store is unchanged. Before, every one of these
# failed with "character '@' is not allowed".
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_registry.sh"
command -v curl >/dev/null || skip "no curl"

registry_start
make_layout "$WORK/lay" v1 1 2
lay_digest=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["manifests"][0]["digest"])' "$WORK/lay/index.json")
export MSTORE_HOME=$WORK/src
expect_ok mstore pull --from "$WORK/lay" "m@$lay_digest"
contains "$out" "pulled m:sha256-${lay_digest#sha256:} $lay_digest"
expect_fail 1 "no manifest with digest sha256:$(printf '0%.0s' $(seq 64))" \
    mstore pull --from "$WORK/lay" "m@sha256:$(printf '0%.0s' $(seq 64))"
expect_ok mstore cp "m@$lay_digest" m:v1
expect_ok mstore push --insecure m:v1 "$REG_HOST/t/m:v1"
D=${out##* }
[ "$D" = "$lay_digest" ] || fail "push changed the manifest: $D, want $lay_digest"

export MSTORE_HOME=$WORK/dst
expect_ok mstore pull --insecure "$REG_HOST/t/m@$D"
contains "$out" "pulled $REG_HOST/t/m:sha256-${D#sha256:} $D"
grep -q "GET /v2/t/m/manifests/$D" "$REG_LOG" || fail "the manifest was not fetched by digest"
expect_ok mstore list
contains "$out" "$REG_HOST/t/m:sha256-${D#sha256:}"
expect_ok mstore show "$REG_HOST/t/m@$D"
contains "$out" "$D"
expect_ok mstore pull --insecure "$REG_HOST/t/m:v1@$D"
contains "$out" "pulled $REG_HOST/t/m:v1 $D"
expect_ok mstore cp "$REG_HOST/t/m:v1@$D" copy:v1
expect_ok mstore verify

# Another version under the same name: the reference by digest does not find it.
other=sha256:$(printf '1%.0s' $(seq 64))
before=$(store_state)
expect_fail 1 "is version $D, not $other" mstore show "$REG_HOST/t/m:v1@$other"
expect_fail 1 "is version $D, not $other" mstore cp "$REG_HOST/t/m:v1@$other" copy:v2
expect_fail 1 "is version $D, not $other" mstore rm "$REG_HOST/t/m:v1@$other"
expect_fail 1 "HTTP 404: MANIFEST_UNKNOWN" mstore pull --insecure "$REG_HOST/t/m@$other"
[ "$(store_state)" = "$before" ] || fail "a refused reference changed the store"
expect_ok mstore rm "$REG_HOST/t/m:v1@$D"

# A push to a reference by digest: the manifest goes up by digest, when it is that version.
expect_ok mstore push --insecure copy:v1 "$REG_HOST/t/pinned@$D"
grep -q "PUT /v2/t/pinned/manifests/$D" "$REG_LOG" || fail "the manifest was not put by digest"
expect_fail 1 "the manifest to push is $D, not $other" mstore push --insecure copy:v1 "$REG_HOST/t/pinned@$other"

# A host that answers a digest with other bytes.
"$PY" - "$WORK/stub.port" <<'PYEOF' >"$WORK/stub.out" 2>&1 &
import http.server, os, sys
body = b'{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json"}'
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "application/vnd.oci.image.manifest.v1+json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
open(sys.argv[1] + ".tmp", "w").write(str(s.server_address[1]))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
s.serve_forever()
PYEOF
REG_PIDS="$REG_PIDS $!"
for _ in $(seq 200); do [ -f "$WORK/stub.port" ] && break; sleep 0.05; done
[ -f "$WORK/stub.port" ] || fail "the stub did not start: $(cat "$WORK/stub.out")"
wait_port "$(cat "$WORK/stub.port")"
before=$(store_state)
expect_fail 1 "not to the digest asked for" mstore pull --insecure "127.0.0.1:$(cat "$WORK/stub.port")/t/m@$D"
[ "$(store_state)" = "$before" ] || fail "a refused pull changed the store"

# run by digest.
S=$MODELS/stories260K/s260k-f16.gguf
if [ -f "$S" ]; then
    export MSTORE_HOME=$WORK/src
    expect_ok mstore import "$S" --name s --quiet
    expect_ok mstore push --insecure s "$REG_HOST/t/s:f16"
    SD=${out##* }
    export MSTORE_HOME=$WORK/run
    expect_ok mstore pull --insecure "$REG_HOST/t/s@$SD"
    expect_ok mstore run "$REG_HOST/t/s@$SD" "Once upon a time" --temp 0 -n 4
    [ -n "$out" ] || fail "run by digest printed nothing"
else
    echo "note: $S not found, run is not checked" >&2
fi
echo "ok $TEST_NAME"
