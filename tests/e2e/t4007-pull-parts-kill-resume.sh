#!/usr/bin/env bash
# A blob of several parts downloads into one file, the parts side by side, with a sidecar
# (<hex>.ranges) of the bytes each part has. Killed (SIGKILL) midway, a rerun moves only the
# missing bytes and ends with the same store; two pulls of it at once share the file through
# its lock and both succeed.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_registry.sh"

registry_start
make_layout "$WORK/lay" v1 160 1        # one 160 MB blob: parts of 64, 64 and 32 MB
expect_ok mstore pull --from "$WORK/lay" big:v1
digest=${out##* }
want_blobs=$(blob_digests)
expect_ok mstore push --insecure big:v1 "$REG_HOST/t/big:v1"
layer=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["layers"][0]["digest"])' \
    "$MSTORE_HOME/blobs/sha256-${digest#sha256:}")
hex=${layer#sha256:}

# 8 MB/s per connection: after 3 s each of the three parts is partly there.
proxy_start --rate 8000000
slow=$PROXY_HOST
export MSTORE_HOME=$WORK/pull
"$MSTORE_BIN" pull --insecure "$slow/t/big:v1" >/dev/null 2>&1 &
pid=$!
sleep 3
kill -9 "$pid"
wait "$pid" 2>/dev/null || true
[ -f "$MSTORE_HOME/tmp/pull/$hex.partial" ] || fail "no download file after the kill: $(ls -R "$MSTORE_HOME/tmp")"
[ -f "$MSTORE_HOME/tmp/pull/$hex.ranges" ] || fail "no sidecar after the kill"
[ ! -e "$MSTORE_HOME/blobs/sha256-$hex" ] || fail "a killed pull stored the blob"
have=$("$PY" -c 'import struct,sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack_from("<Q", b, 24)[0]
print(sum(struct.unpack_from("<%dQ" % n, b, 32)))' "$MSTORE_HOME/tmp/pull/$hex.ranges")
[ "$have" -gt $((8 << 20)) ] || fail "the sidecar records only $have bytes"
expect_ok mstore verify

proxy_start --log "$WORK/resume.bytes"
expect_ok mstore pull --insecure "$PROXY_HOST/t/big:v1"
contains "$out" "$digest"
sleep 0.3
sent=$(awk '{s+=$1} END {print s+0}' "$WORK/resume.bytes")
total=$((160 << 20))
[ "$sent" -lt $((total - have + 2000000)) ] || fail "resume moved $sent bytes; the sidecar had $have"
[ "$(blob_digests)" = "$want_blobs" ] || fail "resumed store differs from the source store"
expect_ok mstore verify
[ -z "$(ls "$MSTORE_HOME/tmp")" ] || fail "tmp/ not empty after the resumed pull: $(ls -R "$MSTORE_HOME/tmp")"

# A sidecar that lies (claims every byte of a file that has none) costs a refetch, not a blob.
export MSTORE_HOME=$WORK/liar
mkdir -p "$MSTORE_HOME/tmp/pull"
"$PY" -c 'import struct,sys
open(sys.argv[1], "wb").write(b"MSPULL1\n" + struct.pack("<6Q", 160 << 20, 64 << 20, 3, 64 << 20, 64 << 20, 32 << 20))' \
    "$MSTORE_HOME/tmp/pull/$hex.ranges"
expect_ok mstore pull --insecure "$REG_HOST/t/big:v1"
[ "$(blob_digests)" = "$want_blobs" ] || fail "store after a lying sidecar differs"
expect_ok mstore verify

# Two pulls at once into one store: one downloads, the other waits on the lock, both succeed.
export MSTORE_HOME=$WORK/two
"$MSTORE_BIN" pull --insecure --parallel 3 "$REG_HOST/t/big:v1" >"$WORK/a.out" 2>"$WORK/a.err" &
a=$!
"$MSTORE_BIN" pull --insecure --parallel 2 "$REG_HOST/t/big:v1" >"$WORK/b.out" 2>"$WORK/b.err" &
b=$!
wait "$a" || fail "first pull failed: $(cat "$WORK/a.err")"
wait "$b" || fail "second pull failed: $(cat "$WORK/b.err")"
contains "$(cat "$WORK/a.out")" "$digest"
contains "$(cat "$WORK/b.out")" "$digest"
[ "$(blob_digests)" = "$want_blobs" ] || fail "blobs differ after concurrent pulls"
expect_ok mstore verify
[ -z "$(ls "$MSTORE_HOME/tmp/pull" 2>/dev/null)" ] || fail "files left in tmp/pull: $(ls "$MSTORE_HOME/tmp/pull")"
echo "ok $TEST_NAME"
