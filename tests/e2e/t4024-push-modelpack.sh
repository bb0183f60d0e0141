#!/usr/bin/env bash
# `mstore push --format modelpack --to DIR`: the CNCF ModelPack form (artifactType, config v1,
# the GGUF in an uncompressed tar layer with the filepath annotation). Unpacked as a container
# runtime unpacks an image volume, the layer holds model.gguf byte-identical to `mstore export`;
# the same model gives the same manifest digest twice (no times in the tar or the config).
. "$(dirname "$0")/lib.sh"

S260K=$MODELS/stories260K/stories260K.gguf
[ -f "$S260K" ] || skip "stories260K not found under $MODELS"
expect_ok mstore import "$S260K" --name s260k --quiet
expect_ok mstore push --format modelpack s260k --to "$WORK/lay"
pushed=$(echo "$out" | awk '{print $3}')
expect_ok mstore push --format modelpack s260k --to "$WORK/lay2"
contains "$out" "$pushed"
expect_ok mstore export s260k --gguf "$WORK/exp.gguf"
"$PY" - "$WORK/lay" "$pushed" "$WORK/x" <<'PYEOF' || fail "the ModelPack layout is not as expected"
import json, sys, tarfile, os
lay, want, x = sys.argv[1:4]
blob = lambda d: os.path.join(lay, "blobs", "sha256", d.split(":")[1])
idx = json.load(open(os.path.join(lay, "index.json")))
assert idx["manifests"][0]["digest"] == want, idx
m = json.load(open(blob(want)))
assert m["artifactType"] == "application/vnd.cncf.model.manifest.v1+json", m
assert m["config"]["mediaType"] == "application/vnd.cncf.model.config.v1+json", m
l = m["layers"][0]
assert l["mediaType"] == "application/vnd.cncf.model.weight.v1.tar", l
assert l["annotations"]["org.cncf.model.filepath"] == "model.gguf", l
c = json.load(open(blob(m["config"]["digest"])))
assert c["config"]["format"] == "gguf" and c["config"]["architecture"] == "llama", c
assert c["modelfs"] == {"type": "layers", "diffIds": [l["digest"]]}, c
with tarfile.open(blob(l["digest"])) as t:
    ms = t.getmembers()
    assert [(i.name, i.mtime, i.isreg()) for i in ms] == [("model.gguf", 0, True)], ms
    t.extractall(x)
PYEOF
cmp -s "$WORK/exp.gguf" "$WORK/x/model.gguf" || fail "the tar layer's GGUF differs from mstore export"
expect_ok mstore verify
echo "ok $TEST_NAME"
