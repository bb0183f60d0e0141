#!/usr/bin/env bash
# mstore serve's read-only /v2 answers with the artifact a model was received as: Docker Model
# Runner artifacts of stories260K (whole, and as gguf-split's shards) and a ModelPack one (the
# GGUF in another tool's tar) are pulled from a loopback registry (the store keeps them split,
# without the whole GGUF, the shards or the tar), then served: the manifest by tag is the
# received file byte for byte under its own digest (by digest both the received and the stored
# manifest answer); the GGUF, a shard and the tar, asked for, are rebuilt (one at a time, digest
# checked) and served as the original files, ranged GETs too, and stay under blobs/ until gc; a
# second home pulls the DMR model from serve and runs it as a plain import of the file does;
# skopeo inspects and copies it; a digest no received manifest names stays BLOB_UNKNOWN.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_registry.sh"
. "$(dirname "$0")/lib_serve.sh"

S260K=$MODELS/stories260K/stories260K.gguf
[ -f "$S260K" ] || skip "stories260K not found under $MODELS"
GGUF_DIGEST="sha256:$(sha256sum "$S260K" | cut -d' ' -f1)"
sha() { echo "sha256:$(sha256sum | cut -d' ' -f1)"; }
registry_start

# The two artifacts, pulled into the served home and named as the server's repositories.
export MSTORE_HOME=$WORK/src
dmr_model "$WORK/dmr" "$S260K" 64
ddigest=$(curl_push "$WORK/dmr" ai/s260k latest)
cp "$S260K" "$WORK/model.gguf"
modelpack_model "$WORK/mpt" gguf "$WORK/model.gguf" tar
tdigest=$(curl_push "$WORK/mpt" mp/tar v1)
tar_digest=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["layers"][0]["digest"])' "$WORK/mpt/manifest.json")
# a DMR artifact of the GGUF cut into shards by gguf-split: the store keeps only their headers
mkdir -p "$WORK/sh"
$PY "$(dirname "$0")/mkfixture.py" ggufsplit "$S260K" "$WORK/sh/model" 3 || fail "ggufsplit failed"
SH2=$WORK/sh/model-00002-of-00003.gguf
dmr_model "$WORK/dsh" "$WORK/sh/model-00001-of-00003.gguf,$SH2,$WORK/sh/model-00003-of-00003.gguf"
curl_push "$WORK/dsh" ai/shards latest >/dev/null
SH2_DIGEST="sha256:$(sha256sum "$SH2" | cut -d' ' -f1)"
expect_ok mstore pull --insecure "$REG_HOST/ai/s260k"
expect_ok mstore pull --insecure "$REG_HOST/ai/shards"
expect_ok mstore cp "$REG_HOST/ai/shards" library/s260k:shards
expect_ok mstore pull --insecure "$REG_HOST/mp/tar:v1"
expect_ok mstore cp "$REG_HOST/ai/s260k" library/s260k:dmr
expect_ok mstore cp "$REG_HOST/mp/tar:v1" library/s260k:tar
stored=$(mstore show library/s260k:dmr | awk '/digest/{print $2; exit}')
[ -n "$stored" ] && [ "$stored" != "$ddigest" ] || fail "stored digest '$stored' (received $ddigest)"
blob_file() { echo "$MSTORE_HOME/blobs/sha256-${1#sha256:}"; }
[ ! -e "$(blob_file "$GGUF_DIGEST")" ] || fail "the whole GGUF blob is stored after the pull"
[ ! -e "$(blob_file "$tar_digest")" ] || fail "the tar blob is stored after the pull"
serve_start
V2=$SERVE/v2/library/s260k

# Manifests: by tag the received bytes, their media type and digest; by digest either one.
curl -sSf -D "$WORK/h" -o "$WORK/m.json" "$V2/manifests/dmr" || fail "GET manifest by tag"
cmp -s "$WORK/m.json" "$WORK/dmr/manifest.json" || fail "the manifest by tag is not the received one: $(cat "$WORK/m.json")"
grep -qi "^docker-content-digest: $ddigest" "$WORK/h" || fail "Docker-Content-Digest: $(cat "$WORK/h")"
grep -qi '^content-type: application/vnd.oci.image.manifest.v1+json' "$WORK/h" || fail "Content-Type: $(cat "$WORK/h")"
[ "$(curl -sSf "$V2/manifests/$ddigest" | sha)" = "$ddigest" ] || fail "the received manifest by its digest"
[ "$(curl -sSf "$V2/manifests/$stored" | sha)" = "$stored" ] || fail "the stored manifest by its digest"
curl -sSf -o "$WORK/t.json" "$V2/manifests/tar" || fail "GET ModelPack manifest by tag"
cmp -s "$WORK/t.json" "$WORK/mpt/manifest.json" || fail "the ModelPack manifest by tag is not the received one"

# Blobs: a ranged GET rebuilds the GGUF, whose bytes then come as the file's.
part=$(curl -sSf -r 100-1099 "$V2/blobs/$GGUF_DIGEST" | sha)
[ "$part" = "$(dd if="$S260K" bs=100 skip=1 count=10 2>/dev/null | sha)" ] || fail "Range 100-1099 of the GGUF"
[ -e "$(blob_file "$GGUF_DIGEST")" ] || fail "the rebuilt GGUF is not under blobs/"
curl -sSf -o "$WORK/g.gguf" "$V2/blobs/$GGUF_DIGEST" || fail "GET the GGUF blob"
cmp -s "$WORK/g.gguf" "$S260K" || fail "the served GGUF differs from the file"
curl -sSf -o "$WORK/t.tar" "$V2/blobs/$tar_digest" || fail "GET the tar blob"
cmp -s "$WORK/t.tar" "$WORK/mpt/${tar_digest#sha256:}" || fail "the served tar differs from the received one"
[ ! -e "$(blob_file "$SH2_DIGEST")" ] || fail "a shard is stored after the pull"
curl -sSf -o "$WORK/sh2.gguf" "$V2/blobs/$SH2_DIGEST" || fail "GET a shard blob"
cmp -s "$WORK/sh2.gguf" "$SH2" || fail "the served shard differs from the file"
# gc removes the rebuilt blobs (no manifest names them); two requests at once rebuild one again.
expect_ok mstore gc
[ ! -e "$(blob_file "$GGUF_DIGEST")" ] || fail "gc left the rebuilt GGUF"
[ ! -e "$(blob_file "$tar_digest")" ] || fail "gc left the rebuilt tar"
curl -sSf -o "$WORK/a.gguf" "$V2/blobs/$GGUF_DIGEST" & a=$!
curl -sSf -o "$WORK/b.gguf" "$V2/blobs/$GGUF_DIGEST" & b=$!
wait "$a" || fail "the first of two GETs at once"
wait "$b" || fail "the second of two GETs at once"
cmp -s "$WORK/a.gguf" "$S260K" && cmp -s "$WORK/b.gguf" "$S260K" || fail "two GETs at once got other bytes"
expect_ok mstore verify
# a digest no manifest names: unknown, nothing rebuilt
nosuch=$(echo nosuch | sha)
code=$(curl -s -o "$WORK/e.json" -w '%{http_code}' "$V2/blobs/$nosuch")
[ "$code" = 404 ] || fail "an unknown blob answered $code"
contains "$(cat "$WORK/e.json")" "BLOB_UNKNOWN"
[ -z "$(ls "$MSTORE_HOME/tmp" | grep -v '^pull$' || true)" ] || fail "tmp/ not empty: $(ls "$MSTORE_HOME/tmp")"

# Another home pulls the DMR artifact from serve: the received digest, and the text of the file.
expect_ok mstore gc
export MSTORE_HOME=$WORK/plain
expect_ok mstore import "$S260K" --name plain --quiet
expect_ok mstore run plain --raw "Once upon a time" --temp 0 -n 8
want=$out
export MSTORE_HOME=$WORK/fresh
M=127.0.0.1:$SERVE_PORT/library/s260k:dmr
expect_ok mstore pull --insecure "$M"
contains "$out" "$ddigest"
expect_ok mstore verify
expect_ok mstore run "$M" --raw "Once upon a time" --temp 0 -n 8
[ "$out" = "$want" ] || fail "pulled from serve, the model answers '$out', the file '$want'"
expect_ok mstore pull --insecure "127.0.0.1:$SERVE_PORT/library/s260k:tar"
contains "$out" "$tdigest"

if command -v skopeo >/dev/null; then
    skopeo inspect --raw --tls-verify=false "docker://127.0.0.1:$SERVE_PORT/library/s260k:dmr" >"$WORK/raw" ||
        fail "skopeo inspect --raw failed"
    cmp -s "$WORK/raw" "$WORK/dmr/manifest.json" || fail "skopeo's raw manifest is not the received one"
    skopeo copy --src-tls-verify=false "docker://127.0.0.1:$SERVE_PORT/library/s260k:dmr" "oci:$WORK/oci:dmr" \
        >"$WORK/skopeo.log" 2>&1 || fail "skopeo copy: $(cat "$WORK/skopeo.log")"
    cmp -s "$WORK/oci/blobs/sha256/${GGUF_DIGEST#sha256:}" "$S260K" || fail "skopeo's copy holds another GGUF"
else
    echo "note: skopeo not installed, its inspect and copy are not checked" >&2
fi
echo "ok $TEST_NAME"
