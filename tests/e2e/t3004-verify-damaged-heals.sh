#!/usr/bin/env bash
# A damaged blob is not "already stored": writing the same bytes again replaces it (blob.h
# invariant 3). Re-importing the file, importing it under another name and pulling the model
# again from a layout directory each heal what `verify` reported; export then gives the source
# bytes back. A flipped byte (same size: found only by re-hashing) and a truncation (found by
# the size) are both healed. Before, all three kept the damaged file and verify stayed failing.
. "$(dirname "$0")/lib.sh"
src="$MODELS/stories260K/stories260K.gguf"
[ -f "$src" ] || skip "$src not found (set MSTORE_TEST_MODELS)"
want=$(sha256sum <"$src")

# damage_all: flip one byte of every blob (same size), and truncate the largest.
damage_all() {
    local f big
    for f in "$MSTORE_HOME"/blobs/sha256-*; do
        chmod u+w "$f"
        "$PY" - "$f" <<'PYEOF'
import os, sys
p = sys.argv[1]
n = os.path.getsize(p)
with open(p, "r+b") as f:
    f.seek(n // 2)
    b = f.read(1)
    f.seek(n // 2)
    f.write(bytes([b[0] ^ 0x40]))
PYEOF
    done
    big=$(ls -S "$MSTORE_HOME/blobs" | head -1)
    truncate -s -7 "$MSTORE_HOME/blobs/$big"
    expect_fail 1 "is corrupt" mstore verify
}
# healed: verify is clean, every blob is 0444 (it came in like any blob), export is the source.
healed() {
    expect_ok mstore verify
    [ -z "$(find "$MSTORE_HOME/blobs" -type f ! -perm 0444)" ] || fail "$1: a replaced blob is writable"
    [ -z "$(ls "$MSTORE_HOME/tmp")" ] || fail "$1: files left in tmp/: $(ls "$MSTORE_HOME/tmp")"
    rm -f "$WORK/out.gguf"
    expect_ok mstore export "$2" --gguf "$WORK/out.gguf"
    [ "$(sha256sum <"$WORK/out.gguf")" = "$want" ] || fail "$1: export differs from the source"
}

expect_ok mstore import "$src" --name s
n_blobs=$(ls "$MSTORE_HOME/blobs" | wc -l)

damage_all
expect_ok mstore import "$src" --name s
healed "re-import" s

damage_all
expect_ok mstore import "$src" --name other
healed "import under another name" other
[ "$(ls "$MSTORE_HOME/blobs" | wc -l)" -eq "$n_blobs" ] || fail "healing stored blobs twice"

expect_ok mstore run s "Once" --temp 0 -n 8
text=$out
expect_ok mstore push s --to "$WORK/oci"
damage_all
expect_ok mstore pull --from "$WORK/oci" s
healed "pull from a layout" s
expect_ok mstore run s "Once" --temp 0 -n 8
[ "$out" = "$text" ] || fail "run after the pull differs: '$out' vs '$text'"
echo "ok $TEST_NAME"
