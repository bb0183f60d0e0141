#!/usr/bin/env bash
# Safetensors artifacts: a Hugging Face directory (two shards, index, tokenizer) packaged as Docker
# Model Runner writes it now (config v0.2, a layer per file), as it wrote it before (config v0.1,
# the other files in one config tar) and as a CNCF ModelPack (format safetensors). Each pull puts
# the directory back together and imports it: the same tensor blobs as `mstore import DIR` (the
# safetensors files themselves not kept, only their headers), greedy text as the directory's. A
# push of the manifest as received sends the same digest, the files rebuilt byte for byte;
# `--format oci` sends the store's own form. A path into another directory, or a hidden file, is
# left out; two layers of one path refuse the pull with the index unchanged.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_registry.sh"

VOCAB=$MODELS/vocab/ggml-vocab-gpt-2.gguf
[ -f "$VOCAB" ] || skip "$VOCAB not found"
registry_start

make_hf "$WORK/hf" --tokenizer-from "$VOCAB" --layers 2 --dim 32 --shards 2
expect_ok mstore import "$WORK/hf" --name direct --quiet
expect_ok mstore run direct "some prompt" --raw --temp 0 -n 8 --seed 1
want=$out
tensors() { mstore show "$1" --tensors | awk '/^Tensors/ { t = 1 } t && $NF ~ /^sha256:/ { print $NF }' | sort; }
want_tensors=$(tensors direct)
[ -n "$want_tensors" ] || fail "show --tensors listed no blob"

# a packager that takes every file (as modctl does) brings the hidden ones too: left out
printf '*.safetensors filter=lfs diff=lfs merge=lfs -text\n' >"$WORK/hf/.gitattributes"
for kind in dmr2 dmr1 modelpack; do
    hf_artifact "$WORK/$kind" "$WORK/hf" "$kind"
    mdigest=$(curl_push "$WORK/$kind" "st/$kind" v1)
    M="$REG_HOST/st/$kind:v1"
    expect_ok mstore pull --insecure "$M"
    contains "$out" "pulled $M $mdigest"
    got=$(tensors "$M") || fail "$kind: show --tensors failed"
    [ "$got" = "$want_tensors" ] || fail "$kind: the pulled model's tensor blobs are not the import's: $(mstore show "$M" 2>&1)"
    for f in "$WORK"/hf/*.safetensors; do
        [ ! -e "$MSTORE_HOME/blobs/sha256-$(sha256sum "$f" | cut -d' ' -f1)" ] || fail "$kind: $f is still stored whole"
    done
    expect_ok mstore run "$M" "some prompt" --raw --temp 0 -n 8 --seed 1
    [ "$out" = "$want" ] || fail "$kind: the pulled model answers '$out', the directory '$want'"
    [ -z "$(ls "$MSTORE_HOME/tmp" | grep -v '^pull$' || true)" ] || fail "$kind: tmp/ not empty: $(ls "$MSTORE_HOME/tmp")"
done
# Pushed as received, each to a fresh repository: the same manifest digest, and the safetensors
# files written again from their headers and the tensor blobs, byte for byte.
for kind in dmr2 dmr1 modelpack; do
    mdigest="sha256:$(sha256sum "$WORK/$kind/manifest.json" | cut -d' ' -f1)"
    expect_ok mstore push --insecure "$REG_HOST/st/$kind:v1" "$REG_HOST/back/$kind:v1"
    contains "$out" "$mdigest"
    for f in "$WORK"/hf/*.safetensors; do
        d="sha256:$(sha256sum "$f" | cut -d' ' -f1)"
        got=$(curl -sSf "http://$REG_HOST/v2/back/$kind/blobs/$d" | sha256sum | cut -d' ' -f1)
        [ "sha256:$got" = "$d" ] || fail "$kind: the registry's copy of $f hashes to sha256:$got"
        [ ! -e "$MSTORE_HOME/blobs/sha256-${d#sha256:}" ] || fail "$kind: the rebuilt $f is still stored after the push"
    done
done
# A file with bytes after its last tensor is no header + tensor blobs: it stays stored whole, and
# the push sends it as it is.
cp -r "$WORK/hf" "$WORK/hf-tail"
printf 'trailing' >>"$WORK/hf-tail/model-00002-of-00002.safetensors"
hf_artifact "$WORK/tail" "$WORK/hf-tail" dmr2
mdigest=$(curl_push "$WORK/tail" st/tail v1)
expect_ok mstore pull --insecure "$REG_HOST/st/tail:v1"
tail_digest=$(sha256sum "$WORK/hf-tail/model-00002-of-00002.safetensors" | cut -d' ' -f1)
[ -e "$MSTORE_HOME/blobs/sha256-$tail_digest" ] || fail "the file with trailing bytes was not kept whole"
expect_ok mstore run "$REG_HOST/st/tail:v1" "some prompt" --raw --temp 0 -n 8 --seed 1
[ "$out" = "$want" ] || fail "tail: the pulled model answers '$out', the directory '$want'"
expect_ok mstore push --insecure "$REG_HOST/st/tail:v1" "$REG_HOST/back/tail:v1"
contains "$out" "$mdigest"
[ -e "$MSTORE_HOME/blobs/sha256-$tail_digest" ] || fail "the push released a file the model keeps"

expect_ok mstore push --insecure --format oci "$REG_HOST/st/dmr2:v1" "$REG_HOST/back/oci:v1"
expect_ok mstore pull --insecure "$REG_HOST/back/oci:v1"
expect_ok mstore run "$REG_HOST/back/oci:v1" "some prompt" --raw --temp 0 -n 8 --seed 1
[ "$out" = "$want" ] || fail "the store's own form pushed and pulled back answers '$out', the directory '$want'"

# A path out of the directory, and one path twice: refused, nothing named.
"$PY" - "$WORK/dmr2/manifest.json" "$WORK/evil/manifest.json" "$WORK/twice/manifest.json" <<'PYEOF'
import json, os, shutil, sys
src, evil, twice = sys.argv[1:4]
for out, change in ((evil, "../../../escape.json"), (twice, "config.json")):
    os.makedirs(os.path.dirname(out), exist_ok=True)
    m = json.load(open(src))
    for l in m["layers"]:
        if l["annotations"]["org.cncf.model.filepath"] == "tokenizer_config.json":
            l["annotations"]["org.cncf.model.filepath"] = change
    open(out, "w").write(json.dumps(m))
    shutil.copy(os.path.join(os.path.dirname(src), "blobs.txt"), os.path.dirname(out))
    for f in os.listdir(os.path.dirname(src)):
        if len(f) == 64:
            shutil.copy(os.path.join(os.path.dirname(src), f), os.path.dirname(out))
PYEOF
curl_push "$WORK/twice" st/twice v1 >/dev/null
listed=$(mstore list)
expect_fail 1 "is in the artifact twice" mstore pull --insecure "$REG_HOST/st/twice:v1"
[ "$(mstore list)" = "$listed" ] || fail "a refused pull changed the index"
curl_push "$WORK/evil" st/evil v1 >/dev/null
# a path into another directory is left out, as the importer reads the top level only: the
# pull goes on without that file and nothing is written outside the store
expect_ok mstore pull --insecure "$REG_HOST/st/evil:v1"
[ ! -e "$MSTORE_HOME/../escape.json" ] && [ ! -e "$WORK/escape.json" ] || fail "a file was written outside the store"
expect_ok mstore verify
echo "ok $TEST_NAME"
