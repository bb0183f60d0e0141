#!/usr/bin/env bash
# push reads every byte it sends: a stored blob whose bytes no longer hash to its name (a
# flipped byte, same size) fails a push into a layout directory (no file left under the blob's
# name, no temp file, no index entry) and a push to a registry (no manifest published). A
# layout directory holding a damaged copy of a blob (right size, wrong bytes) gets it replaced
# by the next push. `run` of a model whose blob was truncated says which blob is damaged.
# Before, push copied the damaged bytes, exited 0, and never replaced a file of the right size.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_registry.sh"
command -v curl >/dev/null || skip "no curl"

registry_start
make_layout "$WORK/lay" v1 2 2
expect_ok mstore pull --from "$WORK/lay" m:v1
victim=$(ls -S "$MSTORE_HOME/blobs" | head -1)
hex=${victim#sha256-}

# A good push, then a copy of it whose blob is damaged in place: the next push repairs it.
expect_ok mstore push m:v1 --to "$WORK/good"
cp -r "$WORK/good" "$WORK/rotten"
chmod u+w "$WORK/rotten/blobs/sha256/$hex"
flip_byte "$WORK/rotten/blobs/sha256/$hex" 1000
expect_ok mstore push m:v1 --to "$WORK/rotten"
[ "$(sha256sum <"$WORK/rotten/blobs/sha256/$hex" | cut -d' ' -f1)" = "$hex" ] ||
    fail "push left the damaged copy in the layout directory"

# Bit rot in the store.
chmod u+w "$MSTORE_HOME/blobs/$victim"
flip_byte "$MSTORE_HOME/blobs/$victim" 1000
expect_fail 1 "blob sha256:$hex is damaged" mstore push m:v1 --to "$WORK/out"
[ ! -e "$WORK/out/blobs/sha256/$hex" ] || fail "the damaged bytes were written under the blob's name"
ls "$WORK/out/blobs/sha256" | grep -q tmp && fail "a temp file was left: $(ls "$WORK/out/blobs/sha256")"
[ -e "$WORK/out/index.json" ] && fail "index.json was written after a failed push: $(cat "$WORK/out/index.json")"
# ... into a directory that holds an intact copy already: nothing needs the damaged bytes
expect_ok mstore push m:v1 --to "$WORK/good"
[ "$(sha256sum <"$WORK/good/blobs/sha256/$hex" | cut -d' ' -f1)" = "$hex" ] ||
    fail "the intact copy in the layout directory was overwritten"

expect_fail 1 "blob sha256:$hex is damaged" mstore push --insecure m:v1 "$REG_HOST/t/m:v1"
code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Accept: application/vnd.oci.image.manifest.v1+json' \
    "http://$REG_HOST/v2/t/m/manifests/v1")
[ "$code" = 404 ] || fail "the registry has a manifest after a failed push (HTTP $code)"
grep -q "PUT /v2/t/m/blobs/uploads/.*digest=sha256:$hex" "$REG_LOG" &&
    fail "the damaged blob's upload was committed"

# run: a blob whose size disagrees with the manifest is named.
S=$MODELS/stories260K/s260k-f16.gguf
if [ -f "$S" ]; then
    export MSTORE_HOME=$WORK/runhome
    expect_ok mstore import "$S" --name s --quiet
    big=$(ls -S "$MSTORE_HOME/blobs" | head -1)
    chmod u+w "$MSTORE_HOME/blobs/$big"
    truncate -s 100 "$MSTORE_HOME/blobs/$big"
    expect_fail 1 "blob sha256:${big#sha256-} has 100 bytes" mstore run s "Once" -n 2
    contains "$err" "damaged"
else
    echo "note: $S not found, run is not checked" >&2
fi
echo "ok $TEST_NAME"
