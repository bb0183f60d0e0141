#!/usr/bin/env bash
# A Docker Model Runner artifact (OCI manifest, DMR config v0.1 with context_size, the GGUF as
# application/vnd.docker.ai.gguf.v3, license and Jinja chat template layers), staged in a
# loopback registry with curl: the pull splits the GGUF into tensor blobs shared with a plain
# import of the same file (no whole-GGUF blob kept), the model runs as that import does, with
# the artifact's context size and chat template; export gives the GGUF back byte for byte; a push
# sends the received manifest back with the same digest. A config with a context_size outside
# num_ctx's bounds is refused, leaving the store as it was.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_registry.sh"

S260K=$MODELS/stories260K/stories260K.gguf
[ -f "$S260K" ] || skip "stories260K not found under $MODELS"
GGUF_DIGEST="sha256:$(sha256sum "$S260K" | cut -d' ' -f1)"
registry_start

printf '%s' "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '
' + message['content'] + '<|im_end|>' + '
' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant
' }}{% endif %}" >"$WORK/chatml.jinja"
dmr_model "$WORK/dmr" "$S260K" 64 "$WORK/chatml.jinja" "MIT License, for the test"
mdigest=$(curl_push "$WORK/dmr" ai/s260k latest)

expect_ok mstore pull --insecure "$REG_HOST/ai/s260k"
contains "$out" "pulled $REG_HOST/ai/s260k:latest $mdigest"
contains "$out" "split the GGUF into"
[ ! -e "$MSTORE_HOME/blobs/sha256-${GGUF_DIGEST#sha256:}" ] || fail "the whole GGUF blob is still stored"
expect_ok mstore verify
M="$REG_HOST/ai/s260k"
expect_ok mstore show "$M"
contains "$out" "llama"

# The same tensors as a plain import of the file: the blobs are shared, none written twice.
before=$(ls "$MSTORE_HOME/blobs" | wc -l)
expect_ok mstore import "$S260K" --name plain --quiet
after=$(ls "$MSTORE_HOME/blobs" | wc -l)
[ $((after - before)) -le 2 ] || fail "import of the same GGUF wrote $((after - before)) new blobs (config and manifest expected)"
expect_ok mstore export "$M" --gguf "$WORK/back.gguf"
cmp -s "$S260K" "$WORK/back.gguf" || fail "exported GGUF differs from the pulled one"

# Greedy text as the imported file's, within the artifact's context of 64 tokens: a raw prompt
# of 5 tokens and 8 new ones fits; asking for 80 stops at the context.
expect_ok mstore run plain --raw "Once upon a time" --temp 0 -n 8
plain_out=$out
expect_ok mstore run "$M" --raw "Once upon a time" --temp 0 -n 8
[ "$out" = "$plain_out" ] || fail "pulled model answers '$out', the imported file '$plain_out'"
expect_ok mstore show "$M" --parameters
contains "$out" "num_ctx"
contains "$out" "64"
expect_ok mstore run "$M" --raw "Once upon a time" --temp 0 -n 80 --verbose
contains "$err" "the context of 64 tokens is full"
expect_ok mstore run plain --raw "Once upon a time" --temp 0 -n 80 --verbose
contains "$err" "eval count:           80 token(s)"

# The artifact's Jinja template is the model's chat template (ChatML), and its license is shown.
expect_ok mstore show "$M" --template
contains "$out" "<|im_start|>"
expect_ok mstore run "$M" "Once upon a time" -n 2 --verbose
contains "$err" "chat template:        chatml"
expect_ok mstore show "$M" --license
contains "$out" "MIT License, for the test"

# Push back: the manifest as received, same digest; the registry gets the GGUF blob again.
expect_ok mstore push --insecure "$M" "$REG_HOST/other/s260k:v1"
contains "$out" "$mdigest"
got=$(curl -sSf "http://$REG_HOST/v2/other/s260k/blobs/$GGUF_DIGEST" | sha256sum | cut -d' ' -f1)
[ "sha256:$got" = "$GGUF_DIGEST" ] || fail "the registry's GGUF blob hashes to sha256:$got"
mt=$(curl -sSf -H 'Accept: application/vnd.oci.image.manifest.v1+json' \
    "http://$REG_HOST/v2/other/s260k/manifests/v1" | "$PY" -c 'import json, sys; print(json.load(sys.stdin)["config"]["mediaType"])')
[ "$mt" = "application/vnd.docker.ai.model.config.v0.1+json" ] || fail "pushed config media type: $mt"
[ ! -e "$MSTORE_HOME/blobs/sha256-${GGUF_DIGEST#sha256:}" ] || fail "the rebuilt GGUF blob stayed in the store"
expect_ok mstore verify

# A context_size num_ctx cannot take: refused naming the field; no name, no new blob kept.
dmr_model "$WORK/bad" "$S260K" '-5'
curl_push "$WORK/bad" ai/bad latest >/dev/null
expect_ok mstore list
list_before=$out
blobs_before=$(blob_digests)
expect_fail 1 "config.context_size: expected an integer from 1 to" mstore pull --insecure "$REG_HOST/ai/bad"
expect_ok mstore list
[ "$out" = "$list_before" ] || fail "a refused pull changed the list: $out"
# the config it downloaded stays, verified, as any downloaded blob does for a retry; gc takes it
cfg=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["config"]["digest"])' "$WORK/bad/manifest.json")
left=$(comm -13 <(echo "$blobs_before") <(blob_digests))
[ -z "$left" ] || [ "$left" = "$cfg" ] || fail "a refused pull left blobs: $left"
expect_ok mstore gc
[ "$(blob_digests)" = "$blobs_before" ] || fail "gc left blobs of the refused pull"
expect_ok mstore verify
echo "ok $TEST_NAME"
