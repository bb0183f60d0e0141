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

# Export of a model that did not come from GGUF is a clear error, not a broken file.
expect_fail 1 "not implemented yet" mstore export keep --gguf "$WORK/x.gguf"
[ ! -e "$WORK/x.gguf" ] || fail "a failed export left a file"
expect_fail 1 "not found" mstore export nosuch --gguf "$WORK/x.gguf"
echo "ok $TEST_NAME"
