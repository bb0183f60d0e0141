#!/usr/bin/env bash
# A CNCF ModelPack artifact (artifactType application/vnd.cncf.model.manifest.v1+json, config
# application/vnd.cncf.model.config.v1+json with format gguf) whose weight is the GGUF as a raw
# layer: the pull splits it into the tensor blobs of a plain import of the file (the GGUF not
# kept), greedy text as the file's, export byte for byte, a push sends the received manifest
# back with the same digest. Raw GGUF shards are the one model, and push back as they came; a
# ModelPack of safetensors without a model directory's config.json is kept as received.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_registry.sh"

S260K=$MODELS/stories260K/stories260K.gguf
[ -f "$S260K" ] || skip "stories260K not found under $MODELS"
GGUF_DIGEST="sha256:$(sha256sum "$S260K" | cut -d' ' -f1)"
registry_start

expect_ok mstore import "$S260K" --name plain --quiet
expect_ok mstore run plain --raw "Once upon a time" --temp 0 -n 8
want=$out
blobs_plain=$(blob_digests)

modelpack_model "$WORK/mp" gguf "$S260K"
mdigest=$(curl_push "$WORK/mp" mp/s260k v1)
M="$REG_HOST/mp/s260k:v1"
expect_ok mstore pull --insecure "$M"
contains "$out" "pulled $M $mdigest"
contains "$out" "split the GGUF into"
[ ! -e "$MSTORE_HOME/blobs/sha256-${GGUF_DIGEST#sha256:}" ] || fail "the whole GGUF blob is still stored"
for d in $(comm -13 <(echo "$blobs_plain") <(blob_digests)); do
    [ "$(head -c1 "$MSTORE_HOME/blobs/sha256-${d#sha256:}")" = "{" ] || fail "the pull stored a blob of its own: $d"
done
expect_ok mstore run "$M" --raw "Once upon a time" --temp 0 -n 8
[ "$out" = "$want" ] || fail "the ModelPack model answers '$out', the file '$want'"
expect_ok mstore export "$M" --gguf "$WORK/back.gguf"
cmp -s "$S260K" "$WORK/back.gguf" || fail "exported GGUF differs"
expect_ok mstore push --insecure "$M" "$REG_HOST/other/s260k:v1"
contains "$out" "$mdigest"
got=$(curl -sSf "http://$REG_HOST/v2/other/s260k/blobs/$GGUF_DIGEST" | sha256sum | cut -d' ' -f1)
[ "sha256:$got" = "$GGUF_DIGEST" ] || fail "the registry's GGUF blob hashes to sha256:$got"
if command -v skopeo >/dev/null; then
    skopeo inspect --tls-verify=false --raw "docker://$REG_HOST/other/s260k:v1" >"$WORK/raw.json" 2>"$WORK/skopeo.log" ||
        fail "skopeo inspect: $(cat "$WORK/skopeo.log")"
    contains "$(cat "$WORK/raw.json")" "application/vnd.cncf.model.weight.v1.raw"
    contains "$(cat "$WORK/raw.json")" "application/vnd.cncf.model.manifest.v1+json"
fi

# Shards of a split GGUF, one raw layer each: the one model.
mkdir -p "$WORK/sh"
"$PY" "$(dirname "$0")/mkfixture.py" ggufsplit "$S260K" "$WORK/sh/model" 2 || fail "ggufsplit failed"
modelpack_model "$WORK/mps" gguf "$WORK/sh/model-00001-of-00002.gguf,$WORK/sh/model-00002-of-00002.gguf"
sdigest=$(curl_push "$WORK/mps" mp/split v1)
expect_ok mstore pull --insecure "$REG_HOST/mp/split:v1"
expect_ok mstore run "$REG_HOST/mp/split:v1" --raw "Once upon a time" --temp 0 -n 8
[ "$out" = "$want" ] || fail "the sharded ModelPack model answers '$out', the file '$want'"
expect_ok mstore push --insecure "$REG_HOST/mp/split:v1" "$REG_HOST/other/split:v1"
contains "$out" "$sdigest"

# format safetensors without the config.json of a model directory: nothing to import, so stored as
# received (the weight layer kept).
"$PY" "$(dirname "$0")/mkfixture.py" random "$WORK/model.safetensors" 1
modelpack_model "$WORK/mpst" safetensors "$WORK/model.safetensors"
curl_push "$WORK/mpst" mp/st v1 >/dev/null
expect_ok mstore pull --insecure "$REG_HOST/mp/st:v1"
[ -e "$MSTORE_HOME/blobs/sha256-$(sha256sum "$WORK/model.safetensors" | cut -d' ' -f1)" ] ||
    fail "the safetensors weight layer was not kept"
expect_ok mstore verify
echo "ok $TEST_NAME"
