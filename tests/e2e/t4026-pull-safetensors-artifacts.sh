#!/usr/bin/env bash
# Safetensors artifacts: a Hugging Face directory (two shards, index, tokenizer) packaged as Docker
# Model Runner writes it now (config v0.2, a layer per file), as it wrote it before (config v0.1,
# the other files in one config tar) and as a CNCF ModelPack (format safetensors). Each pull puts
# the directory back together and imports it: the same tensor blobs as `mstore import DIR` (the
# safetensors files themselves not kept), greedy text as the directory's. A push of the
# manifest as received is refused, saying why; `--format oci` pushes. A file path that leaves
# the directory, or two layers of one path, refuse the pull with the index unchanged.
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
expect_fail 1 "push with --format oci" mstore push --insecure "$REG_HOST/st/dmr2:v1" "$REG_HOST/back/dmr2:v1"
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
