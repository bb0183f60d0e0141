#!/usr/bin/env bash
# Corrupt GGUF files are refused naming the file and field; nothing is stored.
. "$(dirname "$0")/lib.sh"
src="$MODELS/stories260K/stories260K.gguf"
[ -f "$src" ] || skip "$src not found (set MSTORE_TEST_MODELS)"

make_hf "$WORK/hf"
expect_ok mstore import "$WORK/hf" --name keep
before=$(store_state)

patch() {   # patch FILE OFFSET HEXBYTES
    printf "$(echo "$3" | sed 's/../\\x&/g')" | dd of="$1" bs=1 seek="$2" conv=notrunc 2>/dev/null
}
refuse() {   # refuse SUBSTRING FILE
    expect_fail 1 "$1" mstore import "$2" --name bad
    contains "$err" "$(basename "$2")"
    [ "$(store_state)" = "$before" ] || fail "store changed after refusing $2 ($1)"
}

cp "$src" "$WORK/magic.gguf"; patch "$WORK/magic.gguf" 0 58475546
refuse "magic 0x46554758: not a GGUF file" "$WORK/magic.gguf"
cp "$src" "$WORK/version.gguf"; patch "$WORK/version.gguf" 4 63000000
refuse "version 99" "$WORK/version.gguf"
cp "$src" "$WORK/ntensors.gguf"; patch "$WORK/ntensors.gguf" 8 ffffffffffffff7f
refuse "n_tensors" "$WORK/ntensors.gguf"
cp "$src" "$WORK/nkv.gguf"; patch "$WORK/nkv.gguf" 16 ffffffffffffff7f
refuse "n_kv" "$WORK/nkv.gguf"
cp "$src" "$WORK/keylen.gguf"; patch "$WORK/keylen.gguf" 24 ffffffffffffff00
refuse "exceeds" "$WORK/keylen.gguf"
head -c 100000 "$src" > "$WORK/truncated.gguf"
refuse "truncated.gguf" "$WORK/truncated.gguf"
head -c 1000000 "$src" > "$WORK/shortdata.gguf"
refuse "past end of file" "$WORK/shortdata.gguf"

# A safetensors import exports to a GGUF that imports again; an architecture GGUF export does
# not know is a clear error that leaves no file.
expect_ok mstore export keep --gguf "$WORK/keep.gguf"
case "$out" in *identical*) fail "a generated GGUF claimed to be identical" ;; esac
expect_ok mstore import "$WORK/keep.gguf" --name keep-gguf
expect_ok mstore show keep-gguf --tensors
contains "$out" "model.layers.1.self_attn.k_proj.weight"
make_hf "$WORK/neox"
sed -i 's/"model_type": "llama"/"model_type": "gpt_neox"/' "$WORK/neox/config.json"
expect_ok mstore import "$WORK/neox" --name neox
expect_fail 1 "architecture 'gpt_neox' is not supported" mstore export neox --gguf "$WORK/x.gguf"
[ ! -e "$WORK/x.gguf" ] || fail "a failed export left a file"
ls "$WORK" | grep -q partial && fail "a failed export left a partial file"
expect_fail 1 "not found" mstore export nosuch --gguf "$WORK/x.gguf"
echo "ok $TEST_NAME"
