#!/bin/sh
# t0007: the store is the one gate (DESIGN: "one way to open a stored model, one write
# transaction"). Every verb reads a model through store_model_open and writes through
# store_txn; this proves from the sources that no module outside src/store bypasses them:
# nothing else includes sqlite3.h, takes the store's write lock, opens a blob batch, commits a
# manifest by hand, resolves a name or loads a manifest itself, and only src/format reads or
# writes a tensor blob's __metadata__ (format/tensor_blob.c is its one codec). A new bypass fails this test, naming the file and line.
. "$(dirname "$0")/lib.sh"

cd "$MSTORE_SRC"
[ -d src/store ] && [ -d cli ] || skip "no source tree at $MSTORE_SRC"

# check WHAT PATTERN ALLOWED_DIR...: no line of src/ or cli/ outside ALLOWED_DIR matches.
check() {
    what=$1 pattern=$2
    shift 2
    hits=$(grep -rnE --include='*.c' --include='*.h' "$pattern" src cli | while IFS= read -r line; do
        ok=0
        for dir in "$@"; do
            case "$line" in "$dir"/*) ok=1 ;; esac
        done
        [ "$ok" -eq 1 ] || printf '%s\n' "$line"
    done)
    [ -z "$hits" ] || fail "$what outside $*:
$hits"
}

check "SQLite" 'sqlite3[_.h]|store_db\(' src/store
check "the write lock" 'store_write_(begin|end)\(' src/store
check "a blob batch" 'blob_batch_[a-z]+\(' src/store src/blob
# blob files by path: everything else names a blob by digest through store.h's blob calls
check "a blob's file" '\bblob_(open|path|intact|intact_each|put_file|exists)\(' src/store src/blob
check "a hand-made commit" 'store_model_commit\(' src/store
check "name resolution" 'store_name_resolve\(|store_manifest_(load|bytes)\(' src/store
check "safetensors __metadata__" 'st_meta(_at|_count)?\(|st_writer_meta\(' src/format
echo "ok: only src/store touches the index, the lock and batches; only src/format the tensor metadata"
