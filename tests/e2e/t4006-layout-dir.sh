#!/usr/bin/env bash
# push --to DIR writes an OCI image layout (oci-layout, index.json with ref.name = the name,
# blobs/sha256/<hex>); pull --from DIR reads it back, verifying every blob; a damaged blob
# is refused and nothing is stored.
. "$(dirname "$0")/lib.sh"

make_hf "$WORK/hf"
expect_ok mstore import "$WORK/hf" --name tiny
digest=$out
src_blobs=$(ls "$MSTORE_HOME/blobs" | sort)
expect_ok mstore push tiny --to "$WORK/oci"
contains "$out" "$digest"
expect_ok mstore push tiny --to "$WORK/oci"          # again: same entry, not a second one
"$PY" - "$WORK/oci" "$digest" <<'PYEOF' || fail "layout content"
import hashlib, json, os, sys
d, digest = sys.argv[1], sys.argv[2]
assert json.load(open(d + "/oci-layout")) == {"imageLayoutVersion": "1.0.0"}
idx = json.load(open(d + "/index.json"))
assert len(idx["manifests"]) == 1, idx
m = idx["manifests"][0]
assert m["digest"] == digest and m["annotations"]["org.opencontainers.image.ref.name"] == "tiny:latest", m
for f in os.listdir(d + "/blobs/sha256"):
    assert hashlib.sha256(open(d + "/blobs/sha256/" + f, "rb").read()).hexdigest() == f, f
PYEOF
[ "$(ls "$WORK/oci/blobs/sha256" | sort | sed 's/^/sha256-/')" = "$src_blobs" ] || fail "layout blobs differ"

export MSTORE_HOME=$WORK/home2
expect_ok mstore pull --from "$WORK/oci" tiny
contains "$out" "$digest"
[ "$(ls "$MSTORE_HOME/blobs" | sort)" = "$src_blobs" ] || fail "pulled blobs differ"
expect_ok mstore verify

export MSTORE_HOME=$WORK/home3
mkdir -p "$MSTORE_HOME"
victim=$(ls -S "$WORK/oci/blobs/sha256" | head -1)
flip_byte "$WORK/oci/blobs/sha256/$victim" 100
expect_ok mstore list
before=$(store_state)
expect_fail 1 "sha256:$victim" mstore pull --from "$WORK/oci" tiny
contains "$err" "mismatch"
[ ! -e "$MSTORE_HOME/blobs/sha256-$victim" ] || fail "damaged blob stored"
expect_ok mstore list
case "$out" in *tiny*) fail "a refused pull added a name" ;; esac
expect_fail 1 "no manifest with" mstore pull --from "$WORK/oci" tiny:other
echo "ok $TEST_NAME"
