#!/usr/bin/env bash
# `mstore push --format dmr`: a stored model as a Docker Model Runner artifact (OCI manifest,
# config v0.1, the GGUF that export writes as application/vnd.docker.ai.gguf.v3, the license and
# the Jinja chat template): skopeo reads the media types, the config has what DMR's has (format,
# quantization, architecture, parameters, size, gguf metadata, context_size from num_ctx),
# a pull back gives the same greedy text and GGUF, the rebuilt GGUF blob is not kept in the
# store, and the same model pushes to the same digest again. `--to DIR` writes the same manifest
# into an OCI layout.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_registry.sh"

S260K=$MODELS/stories260K/stories260K.gguf
[ -f "$S260K" ] || skip "stories260K not found under $MODELS"
GGUF_DIGEST="sha256:$(sha256sum "$S260K" | cut -d' ' -f1)"
registry_start

# The model to push: a DMR artifact of stories260K with a Jinja template, a license and a context
# of 64, pulled (so the store holds its tensors, not the GGUF).
printf '%s' "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '
' + message['content'] + '<|im_end|>' + '
' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant
' }}{% endif %}" >"$WORK/chatml.jinja"
dmr_model "$WORK/src" "$S260K" 64 "$WORK/chatml.jinja" "MIT License, for the test"
curl_push "$WORK/src" ai/src latest >/dev/null
expect_ok mstore pull --insecure "$REG_HOST/ai/src"
M="$REG_HOST/ai/src"
expect_ok mstore run "$M" --raw "Once upon a time" --temp 0 -n 8
want=$out

expect_ok mstore push --insecure --format dmr "$M" "$REG_HOST/dmr/s260k:v1"
pushed=$(echo "$out" | awk '{print $3}')
[ ! -e "$MSTORE_HOME/blobs/sha256-${GGUF_DIGEST#sha256:}" ] || fail "the rebuilt GGUF blob stayed in the store"
expect_ok mstore verify

if command -v skopeo >/dev/null; then
    skopeo inspect --tls-verify=false --raw "docker://$REG_HOST/dmr/s260k:v1" >"$WORK/raw.json" 2>"$WORK/skopeo.log" ||
        fail "skopeo inspect: $(cat "$WORK/skopeo.log")"
    cp "$WORK/raw.json" "$WORK/manifest.json"
else
    curl -sSf -H 'Accept: application/vnd.oci.image.manifest.v1+json' \
        "http://$REG_HOST/v2/dmr/s260k/manifests/v1" >"$WORK/manifest.json" || fail "manifest GET failed"
fi
[ "sha256:$(sha256sum "$WORK/manifest.json" | cut -d' ' -f1)" = "$pushed" ] || fail "the registry's manifest is not the one pushed"
"$PY" - "$WORK/manifest.json" "$GGUF_DIGEST" "http://$REG_HOST/v2/dmr/s260k/blobs/" <<'PYEOF' || fail "the DMR manifest or config is not as expected"
import json, sys, urllib.request
m = json.load(open(sys.argv[1]))
assert m["mediaType"] == "application/vnd.oci.image.manifest.v1+json", m
assert m["config"]["mediaType"] == "application/vnd.docker.ai.model.config.v0.1+json", m
types = [l["mediaType"] for l in m["layers"]]
assert types == ["application/vnd.docker.ai.gguf.v3", "application/vnd.docker.ai.license",
                 "application/vnd.docker.ai.chat.template.jinja"], types
assert m["layers"][0]["digest"] == sys.argv[2], m["layers"][0]
paths = [l["annotations"]["org.cncf.model.filepath"] for l in m["layers"]]
assert paths == ["model.gguf", "LICENSE", "template.jinja"], paths
get = lambda d: urllib.request.urlopen(sys.argv[3] + d).read()
c = json.loads(get(m["config"]["digest"]))
cc = c["config"]
assert cc["format"] == "gguf" and cc["architecture"] == "llama" and cc["quantization"] == "F32", cc
assert cc["context_size"] == 64, cc
assert cc["gguf"]["llama.block_count"] == "5" and cc["gguf"]["general.architecture"] == "llama", cc["gguf"]
assert cc["parameters"].endswith("K") and cc["size"].endswith("MB"), cc
assert c["rootfs"] == {"type": "rootfs", "diff_ids": [sys.argv[2]]}, c
assert b"MIT License, for the test" == get(m["layers"][1]["digest"])
assert b"<|im_start|>" in get(m["layers"][2]["digest"])
PYEOF

# Pushed again: the same manifest (nothing in it changes between pushes).
expect_ok mstore push --insecure --format dmr "$M" "$REG_HOST/dmr/s260k:v2"
contains "$out" "$pushed"

# Pulled back into another home: the same text, the same GGUF.
export MSTORE_HOME=$WORK/home2
expect_ok mstore pull --insecure "$REG_HOST/dmr/s260k:v1"
contains "$out" "$pushed"
expect_ok mstore run "$REG_HOST/dmr/s260k:v1" --raw "Once upon a time" --temp 0 -n 8
[ "$out" = "$want" ] || fail "pulled back, the model answers '$out', before '$want'"
expect_ok mstore show "$REG_HOST/dmr/s260k:v1" --license
contains "$out" "MIT License, for the test"
expect_ok mstore export "$REG_HOST/dmr/s260k:v1" --gguf "$WORK/back.gguf"
cmp -s "$S260K" "$WORK/back.gguf" || fail "pulled back, the model exports another GGUF"

# An OCI layout directory gets the same manifest.
expect_ok mstore push --format dmr "$REG_HOST/dmr/s260k:v1" --to "$WORK/lay"
contains "$out" "$pushed"
[ -f "$WORK/lay/blobs/sha256/${GGUF_DIGEST#sha256:}" ] || fail "the layout lacks the GGUF blob"
[ ! -e "$MSTORE_HOME/blobs/sha256-${GGUF_DIGEST#sha256:}" ] || fail "the rebuilt GGUF blob stayed in the store"
expect_ok mstore verify
echo "ok $TEST_NAME"
