#!/usr/bin/env bash
# A GGUF split into shards as llama.cpp's gguf-split writes them (split.no / split.count /
# split.tensors.count): `mstore import` of the first shard finds the rest and stores the one
# model, and a Docker Model Runner artifact of one application/vnd.docker.ai.gguf.v3 layer per
# shard pulls into that same model: its tensor blobs are those of the unsplit file imported (no
# new tensor blob, no shard kept), export gives the unsplit file back byte for byte, greedy text
# as the unsplit file's. Refused, naming the shard and key, with nothing named and no new blob
# left after gc: a shard missing, a shard of another model, a lying split.count. Of the shards
# only their headers are kept, so a push of the received manifest writes them again.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_registry.sh"

S260K=$MODELS/stories260K/stories260K.gguf
F16=$MODELS/stories260K/s260k-f16.gguf
[ -f "$S260K" ] || skip "stories260K not found under $MODELS"
[ -f "$F16" ] || skip "s260k-f16 not found under $MODELS"
MK="$PY $(dirname "$0")/mkfixture.py"

mkdir -p "$WORK/sh" "$WORK/f16"
$MK ggufsplit "$S260K" "$WORK/sh/model" 3 || fail "ggufsplit failed"
$MK ggufsplit "$F16" "$WORK/f16/model" 3 || fail "ggufsplit failed"
SH1=$WORK/sh/model-00001-of-00003.gguf SH2=$WORK/sh/model-00002-of-00003.gguf SH3=$WORK/sh/model-00003-of-00003.gguf

# The unsplit file first: the blobs every later store must share.
expect_ok mstore import "$S260K" --name plain --quiet
expect_ok mstore run plain --raw "Once upon a time" --temp 0 -n 8
plain_out=$out
blobs_plain=$(blob_digests)

# Local import of the first shard: the same tensors, header and config but for the file name.
expect_ok mstore import "$SH1" --name local --quiet
# every blob not already stored by the unsplit import is JSON (configs, manifests, params): no tensor
only_json() {   # WHAT [headers]: no new blob but JSON (and, with `headers`, the shards' GGUF headers)
    local d f
    for d in $(comm -13 <(echo "$blobs_plain") <(blob_digests)); do
        f="$MSTORE_HOME/blobs/sha256-${d#sha256:}"
        [ "$(head -c1 "$f")" = "{" ] && continue
        [ "${2:-}" = headers ] && [ "$(head -c4 "$f")" = GGUF ] && [ "$(stat -c %s "$f")" -lt 65536 ] && continue
        fail "$1 stored a blob of its own: $d"
    done
}
only_json "the split import"
expect_ok mstore export local --gguf "$WORK/local.gguf"
cmp -s "$S260K" "$WORK/local.gguf" || fail "the split import exports another file"
expect_ok mstore run local --raw "Once upon a time" --temp 0 -n 8
[ "$out" = "$plain_out" ] || fail "split import answers '$out', the unsplit file '$plain_out'"
expect_fail 1 "does not end in -00001-of-00003.gguf" mstore import "$SH2" --name second

# The DMR artifact of the three shards, pulled.
registry_start
dmr_model "$WORK/dmr" "$SH1,$SH2,$SH3" 64
mdigest=$(curl_push "$WORK/dmr" ai/s260k-split latest)
M="$REG_HOST/ai/s260k-split"
expect_ok mstore pull --insecure "$M"
contains "$out" "pulled $M:latest $mdigest"
for f in "$SH1" "$SH2" "$SH3"; do
    d=$(sha256sum "$f" | cut -d' ' -f1)
    [ ! -e "$MSTORE_HOME/blobs/sha256-$d" ] || fail "shard $f is still stored"
done
only_json "the pull" headers
expect_ok mstore verify
expect_ok mstore export "$M" --gguf "$WORK/back.gguf"
cmp -s "$S260K" "$WORK/back.gguf" || fail "the pulled shards export another file than the unsplit one"
expect_ok mstore run "$M" --raw "Once upon a time" --temp 0 -n 8
[ "$out" = "$plain_out" ] || fail "pulled shards answer '$out', the unsplit file '$plain_out'"
expect_ok mstore show "$M" --parameters
contains "$out" "64"
# Pushed as received: the same manifest, each shard written again from its kept header and the
# tensor blobs, byte for byte, and released after.
expect_ok mstore push --insecure "$M" "$REG_HOST/other/s260k-split:v1"
contains "$out" "$mdigest"
for f in "$SH1" "$SH2" "$SH3"; do
    d=sha256:$(sha256sum "$f" | cut -d' ' -f1)
    got=$(curl -sSf "http://$REG_HOST/v2/other/s260k-split/blobs/$d" | sha256sum | cut -d' ' -f1)
    [ "sha256:$got" = "$d" ] || fail "the registry's copy of shard $f hashes to sha256:$got"
    [ ! -e "$MSTORE_HOME/blobs/sha256-${d#sha256:}" ] || fail "shard $f is still stored after the push"
done
# A shard with more zeros after its last tensor than the alignment is not header + tensors as
# export writes them: it stays stored whole, and the push still sends it as it came.
mkdir -p "$WORK/tail"
cp "$SH1" "$SH2" "$SH3" "$WORK/tail/"
TL3="$WORK/tail/$(basename "$SH3")"
head -c 64 /dev/zero >>"$TL3"
dmr_model "$WORK/dmr-tail" "$WORK/tail/$(basename "$SH1"),$WORK/tail/$(basename "$SH2"),$TL3"
tdigest=$(curl_push "$WORK/dmr-tail" ai/s260k-tail latest)
expect_ok mstore pull --insecure "$REG_HOST/ai/s260k-tail"
tl3=$(sha256sum "$TL3" | cut -d' ' -f1)
[ -e "$MSTORE_HOME/blobs/sha256-$tl3" ] || fail "the shard with a long zero tail was not kept whole"
expect_ok mstore push --insecure "$REG_HOST/ai/s260k-tail" "$REG_HOST/other/s260k-tail:v1"
contains "$out" "$tdigest"
got=$(curl -sSf "http://$REG_HOST/v2/other/s260k-tail/blobs/sha256:$tl3" | sha256sum | cut -d' ' -f1)
[ "$got" = "$tl3" ] || fail "the registry's copy of the tailed shard hashes to sha256:$got"
expect_ok mstore rm "$REG_HOST/ai/s260k-tail"
expect_ok mstore gc
# the store's own form, which a pull gives back as the same model
expect_ok mstore push --insecure --format oci "$M" "$REG_HOST/other/s260k-split:oci"
expect_ok mstore pull --insecure "$REG_HOST/other/s260k-split:oci"

# Refusals: nothing named, and gc leaves the store as it was.
expect_ok mstore list
list_before=$out
blobs_before=$(blob_digests)
refused() {   # NAME MESSAGE SHARDS...: an artifact of SHARDS pulled is refused with MESSAGE
    local name=$1 msg=$2
    shift 2
    dmr_model "$WORK/$name" "$(IFS=,; echo "$*")"
    curl_push "$WORK/$name" "ai/$name" latest >/dev/null
    expect_fail 1 "$msg" mstore pull --insecure "$REG_HOST/ai/$name"
    expect_ok mstore list
    [ "$out" = "$list_before" ] || fail "$name: a refused pull changed the list: $out"
}
refused missing "split.count is 3, but the set has 2 shards" "$SH1" "$SH2"
refused other "tensor '" "$SH1" "$WORK/f16/model-00002-of-00003.gguf" "$SH3"
refused order "split.no is 2, expected 1" "$SH1" "$SH3" "$SH2"
mkdir -p "$WORK/lie"
$MK ggufsplit "$S260K" "$WORK/lie/model" 3 --count 4 || fail "ggufsplit failed"
refused lie "split.count is 4, but the set has 3 shards" \
    "$WORK/lie/model-00001-of-00003.gguf" "$WORK/lie/model-00002-of-00003.gguf" "$WORK/lie/model-00003-of-00003.gguf"
$MK ggufsplit "$S260K" "$WORK/lie/tc" 3 --tensors-count 7 || fail "ggufsplit failed"
refused tensors "split.tensors.count is 7, but the 3 shards hold" \
    "$WORK/lie/tc-00001-of-00003.gguf" "$WORK/lie/tc-00002-of-00003.gguf" "$WORK/lie/tc-00003-of-00003.gguf"
expect_ok mstore gc
[ "$(blob_digests)" = "$blobs_before" ] || fail "gc left blobs of the refused pulls"
[ -z "$(ls "$MSTORE_HOME/tmp" | grep split)" ] || fail "a merged file stayed in tmp/"
expect_ok mstore verify

# Locally too: a shard missing beside the first.
rm "$SH3"
expect_fail 1 "model-00003-of-00003.gguf" mstore import "$SH1" --name broken
echo "ok $TEST_NAME"
