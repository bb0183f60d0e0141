#!/usr/bin/env bash
# mstore serve and registries: ollama-js pulls from a loopback Debian docker-registry through
# the server with streamed progress, and pushes back; the server's own read-only /v2/ serves
# `mstore pull` into a fresh home and `skopeo copy` into an OCI layout, every digest verified,
# blobs with Range.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_registry.sh"
. "$(dirname "$0")/lib_serve.sh"
S260K=$MODELS/stories260K/stories260K.gguf
[ -f "$S260K" ] || skip "stories260K not found under $MODELS"
command -v curl >/dev/null || skip "no curl"
npm_clients
registry_start

# A 24 MB model (random layers) and stories260K in the registry, from a first store.
export MSTORE_HOME=$WORK/src
make_layout "$WORK/layout" v1 24 3
expect_ok mstore pull --from "$WORK/layout" big:v1
big_digest=${out##* }
expect_ok mstore push --insecure big:v1 "$REG_HOST/team/big:v1"
expect_ok mstore import "$S260K" --name stories:260k --quiet
s_digest=$(mstore show stories:260k | awk '/digest/{print $2; exit}')
expect_ok mstore push --insecure stories:260k "$REG_HOST/library/stories:260k"
# what the pull must fetch: config + layers
export WANT_TOTAL=$("$PY" -c 'import json,sys; m=json.load(open(sys.argv[1])); print(m["config"]["size"] + sum(l["size"] for l in m["layers"]))' \
    "$MSTORE_HOME/blobs/sha256-${big_digest#sha256:}")

# The server on a fresh home pulls both through ollama-js.
export MSTORE_HOME=$WORK/home
serve_start
export SERVE REG_HOST
node - <<'JS' >"$WORK/node.out" 2>&1 || fail "ollama-js pull: $(cat "$WORK/node.out")"
const { Ollama } = require('ollama');
const assert = require('assert');
const o = new Ollama({ host: process.env.SERVE });
(async () => {
  const seen = [];
  for await (const p of await o.pull({ model: process.env.REG_HOST + '/team/big:v1', insecure: true, stream: true }))
    seen.push(p);
  const statuses = seen.map(p => p.status);
  assert.strictEqual(statuses[0], 'pulling manifest', JSON.stringify(statuses));
  assert.strictEqual(statuses[statuses.length - 1], 'success', JSON.stringify(statuses));
  const dl = seen.filter(p => p.status === 'downloading');
  assert(dl.length >= 1, 'no progress objects: ' + JSON.stringify(statuses));
  for (let i = 1; i < dl.length; i++) assert(dl[i].completed >= dl[i - 1].completed, 'progress went back');
  const last = dl[dl.length - 1];
  assert.strictEqual(last.total, Number(process.env.WANT_TOTAL), 'total');
  assert.strictEqual(last.completed, last.total, 'completed');
  // not streamed; a model that is not there is an error object
  const r = await o.pull({ model: process.env.REG_HOST + '/library/stories:260k', insecure: true, stream: false });
  assert.strictEqual(r.status, 'success');
  await assert.rejects(o.pull({ model: process.env.REG_HOST + '/library/nosuch:v1', insecure: true, stream: false }),
                       e => e.status_code === 404, 'missing model');
  // what was pulled runs
  const g = await o.generate({ model: process.env.REG_HOST + '/library/stories:260k', prompt: 'Once upon a time', stream: false, options: { temperature: 0, num_predict: 8 } });
  assert(g.response.startsWith(', there was a little girl'), g.response);
  // push back under another name, through the server
  await o.copy({ source: process.env.REG_HOST + '/library/stories:260k', destination: process.env.REG_HOST + '/mirror/stories:again' });
  const pushed = [];
  for await (const p of await o.push({ model: process.env.REG_HOST + '/mirror/stories:again', insecure: true, stream: true }))
    pushed.push(p.status);
  assert.strictEqual(pushed[pushed.length - 1], 'success', JSON.stringify(pushed));
  console.log('node ok');
})().catch(e => { console.error(e); process.exit(1); });
JS
contains "$(cat "$WORK/node.out")" "node ok"
expect_ok mstore verify
grep -q '"GET /v2/mirror/stories/manifests/again' "$REG_LOG" || grep -q 'PUT /v2/mirror/stories/manifests/again' "$REG_LOG" ||
    fail "the push did not reach the registry"

# The server's /v2/ as a registry: mstore pull into a fresh home, every digest verified.
export MSTORE_HOME=$WORK/src
kill "$SERVE_PID"
serve_start
export MSTORE_HOME=$WORK/fresh
expect_ok mstore pull --insecure "127.0.0.1:$SERVE_PORT/library/stories:260k"
contains "$out" "$s_digest"
expect_ok mstore verify
expect_ok mstore run "127.0.0.1:$SERVE_PORT/library/stories:260k" "Once upon a time" --temp 0 -n 8
contains "$out" ", there was a little girl"
expect_ok mstore pull --insecure "127.0.0.1:$SERVE_PORT/library/big:v1"
contains "$out" "$big_digest"
expect_fail 1 "" mstore pull --insecure "127.0.0.1:$SERVE_PORT/library/nosuch:v1"

# skopeo copies it into an OCI layout; mstore pulls that layout back: the same digest.
if command -v skopeo >/dev/null; then
    skopeo copy --src-tls-verify=false "docker://127.0.0.1:$SERVE_PORT/library/stories:260k" "oci:$WORK/oci:260k" \
        >"$WORK/skopeo.log" 2>&1 || fail "skopeo copy: $(cat "$WORK/skopeo.log")"
    export MSTORE_HOME=$WORK/fromoci
    expect_ok mstore pull --from "$WORK/oci" stories:260k
    contains "$out" "$s_digest"
    expect_ok mstore verify
    skopeo inspect --raw --tls-verify=false "docker://127.0.0.1:$SERVE_PORT/library/stories:260k" >"$WORK/raw" ||
        fail "skopeo inspect --raw failed"
    [ "sha256:$(sha256sum <"$WORK/raw" | cut -d' ' -f1)" = "$s_digest" ] || fail "the manifest bytes served differ from the stored ones"
else
    echo "note: skopeo not installed, its copy is not checked" >&2
fi

# Catalog, tags, Range.
c=$(curl -s "$SERVE/v2/_catalog")
contains "$c" '"library/stories"'
contains "$c" '"library/big"'
contains "$(curl -s "$SERVE/v2/library/stories/tags/list")" '"tags":["260k"]'
blob=$(ls "$WORK/src/blobs" | head -1)
full=$(curl -s "$SERVE/v2/library/stories/blobs/${blob/-/:}" | sha256sum | cut -d' ' -f1)
[ "sha256-$full" = "$blob" ] || fail "blob bytes do not hash to the digest"
part=$(curl -s -r 3-9 -D "$WORK/h" "$SERVE/v2/library/stories/blobs/${blob/-/:}" | od -An -tx1 | tr -d ' \n')
[ "$part" = "$(dd if="$WORK/src/blobs/$blob" bs=1 skip=3 count=7 2>/dev/null | od -An -tx1 | tr -d ' \n')" ] ||
    fail "Range 3-9 gave $part"
grep -qi '^content-range: bytes 3-9/' "$WORK/h" || fail "no Content-Range: $(cat "$WORK/h")"
grep -q ' 206 ' "$WORK/h" || fail "Range answered $(head -1 "$WORK/h")"
echo "ok $TEST_NAME"
