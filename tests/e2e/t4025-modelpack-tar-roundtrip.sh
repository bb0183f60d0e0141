#!/usr/bin/env bash
# ModelPack weights in uncompressed tar layers (application/vnd.cncf.model.weight.v1.tar), through a
# loopback registry:
#   - another tool's archive (pax headers, a time, owner names, "./" path, 10 KiB record padding):
#     the pull splits the GGUF inside into the tensor blobs of a plain import (neither the tar nor
#     the GGUF kept, only its few-KiB frame), greedy text as the file's, and a push sends the
#     received manifest back with the same digest, the tar rebuilt byte for byte;
#   - mstore's own `push --format modelpack` to the registry: skopeo sees the format's media
#     types, `skopeo copy` to an OCI layout holds model.gguf as `mstore export` writes it, and a
#     pull of it stores nothing new;
#   - hostile archives (a link, a path outside, a bad checksum, a cut, two files) are refused
#     naming the entry, the index unchanged.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_registry.sh"

S260K=$MODELS/stories260K/stories260K.gguf
[ -f "$S260K" ] || skip "stories260K not found under $MODELS"
registry_start

expect_ok mstore import "$S260K" --name plain --quiet
expect_ok mstore run plain --raw "Once upon a time" --temp 0 -n 8
want=$out
blobs_plain=$(blob_digests)

# Another tool's tar.
cp "$S260K" "$WORK/model.gguf"
modelpack_model "$WORK/mpt" gguf "$WORK/model.gguf" tar
mdigest=$(curl_push "$WORK/mpt" mp/tar v1)
tar_digest=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["layers"][0]["digest"])' "$WORK/mpt/manifest.json")
M="$REG_HOST/mp/tar:v1"
expect_ok mstore pull --insecure "$M"
contains "$out" "pulled $M $mdigest"
contains "$out" "split the GGUF into"
[ ! -e "$MSTORE_HOME/blobs/sha256-${tar_digest#sha256:}" ] || fail "the tar blob is still stored"
new=$(comm -13 <(echo "$blobs_plain") <(blob_digests))
for d in $new; do
    f="$MSTORE_HOME/blobs/sha256-${d#sha256:}"
    [ "$(head -c1 "$f")" = "{" ] && continue
    # the frame: the archive less the GGUF's bytes
    [ "$(stat -c %s "$f")" -lt 65536 ] || fail "the pull stored a large blob of its own: $d"
done
expect_ok mstore run "$M" --raw "Once upon a time" --temp 0 -n 8
[ "$out" = "$want" ] || fail "the tar ModelPack model answers '$out', the file '$want'"
expect_ok mstore export "$M" --gguf "$WORK/back.gguf"
cmp -s "$S260K" "$WORK/back.gguf" || fail "exported GGUF differs"
expect_ok mstore push --insecure "$M" "$REG_HOST/other/tar:v1"
contains "$out" "$mdigest"
got=$(curl -sSf "http://$REG_HOST/v2/other/tar/blobs/$tar_digest" | sha256sum | cut -d' ' -f1)
[ "sha256:$got" = "$tar_digest" ] || fail "the registry's tar blob hashes to sha256:$got"
[ ! -e "$MSTORE_HOME/blobs/sha256-${tar_digest#sha256:}" ] || fail "the rebuilt tar is still stored after the push"
[ -z "$(ls "$MSTORE_HOME/tmp" | grep -v '^pull$' || true)" ] || fail "tmp/ not empty: $(ls "$MSTORE_HOME/tmp")"

# mstore's own ModelPack form, through the registry.
expect_ok mstore push --insecure --format modelpack plain "$REG_HOST/own/s260k:v1"
own=$(echo "$out" | grep -o 'sha256:[0-9a-f]*' | head -1)
if command -v skopeo >/dev/null; then
    skopeo inspect --tls-verify=false --raw "docker://$REG_HOST/own/s260k:v1" >"$WORK/raw.json" 2>"$WORK/skopeo.log" ||
        fail "skopeo inspect: $(cat "$WORK/skopeo.log")"
    contains "$(cat "$WORK/raw.json")" "application/vnd.cncf.model.manifest.v1+json"
    contains "$(cat "$WORK/raw.json")" "application/vnd.cncf.model.config.v1+json"
    contains "$(cat "$WORK/raw.json")" "application/vnd.cncf.model.weight.v1.tar"
    skopeo copy --src-tls-verify=false "docker://$REG_HOST/own/s260k:v1" "oci:$WORK/oci:v1" >"$WORK/skopeo.log" 2>&1 ||
        fail "skopeo copy: $(cat "$WORK/skopeo.log")"
    expect_ok mstore export plain --gguf "$WORK/exp.gguf"
    "$PY" - "$WORK/oci" "$WORK/x" <<'PYEOF' || fail "the copied layout's tar layer is not as expected"
import json, os, sys, tarfile
lay, x = sys.argv[1:3]
blob = lambda d: os.path.join(lay, "blobs", "sha256", d.split(":")[1])
m = json.load(open(blob(json.load(open(os.path.join(lay, "index.json")))["manifests"][0]["digest"])))
l = m["layers"][0]
assert l["mediaType"] == "application/vnd.cncf.model.weight.v1.tar", l
with tarfile.open(blob(l["digest"])) as t:
    assert [i.name for i in t.getmembers()] == ["model.gguf"]
    t.extractall(x)
PYEOF
    cmp -s "$WORK/exp.gguf" "$WORK/x/model.gguf" || fail "the layer's model.gguf differs from mstore export"
else
    echo "note: skopeo not installed, its checks skipped" >&2
fi
before=$(blob_digests)
expect_ok mstore pull --insecure "$REG_HOST/own/s260k:v1"
contains "$out" "$own"
added=$(comm -13 <(echo "$before") <(blob_digests) | wc -l)
# the manifest, the config and the frame: no tensor
[ "$added" -le 3 ] || fail "pulling mstore's own ModelPack stored $added new blobs"
expect_ok mstore run "$REG_HOST/own/s260k:v1" --raw "Once upon a time" --temp 0 -n 8
[ "$out" = "$want" ] || fail "mstore's ModelPack pulled back answers '$out', the file '$want'"

# Hostile archives: refused naming the entry, nothing named.
"$PY" - "$WORK/bad" "$S260K" <<'PYEOF'
import io, os, sys, tarfile
d, gguf = sys.argv[1:3]
os.makedirs(d, exist_ok=True)
data = open(gguf, "rb").read()
def arch(entries, fmt=tarfile.USTAR_FORMAT):
    b = io.BytesIO()
    with tarfile.open(fileobj=b, mode="w", format=fmt) as t:
        for i, payload in entries:
            t.addfile(i, io.BytesIO(payload) if payload is not None else None)
    return b.getvalue()
def reg(name, payload):
    i = tarfile.TarInfo(name); i.size = len(payload); return i, payload
link = tarfile.TarInfo("model.gguf"); link.type = tarfile.SYMTYPE; link.linkname = "/etc/passwd"
open(d + "/link.tar", "wb").write(arch([(link, None)]))
open(d + "/outside.tar", "wb").write(arch([reg("../model.gguf", data)]))
open(d + "/two.tar", "wb").write(arch([reg("model.gguf", data), reg("extra.gguf", data)]))
good = arch([reg("model.gguf", data)])
bad = bytearray(good); bad[0] ^= 0x20
open(d + "/checksum.tar", "wb").write(bytes(bad))
open(d + "/cut.tar", "wb").write(good[:512 + 1000])
PYEOF
for case in link:"of type '2'" outside:"a path outside the archive" two:"more than one file" \
    checksum:"bad checksum" cut:"runs past the end"; do
    name=${case%%:*} msg=${case#*:}
    modelpack_model "$WORK/mp-$name" gguf "$WORK/bad/$name.tar" astar
    curl_push "$WORK/mp-$name" "bad/$name" v1 >/dev/null
    listed=$(mstore list)
    expect_fail 1 "$msg" mstore pull --insecure "$REG_HOST/bad/$name:v1"
    [ "$(mstore list)" = "$listed" ] || fail "$name: a refused pull changed the index"
done
expect_ok mstore verify
echo "ok $TEST_NAME"
