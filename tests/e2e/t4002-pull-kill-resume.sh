#!/usr/bin/env bash
# A pull killed (SIGKILL) midway leaves no name and no half blob under blobs/; run again, it
# continues from the bytes already on disk (it moves fewer bytes than the model's size) and
# ends with the same store as an uninterrupted pull.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_registry.sh"

registry_start
make_layout "$WORK/lay" v1 64 1          # one 64 MB blob: the case a resume matters for
expect_ok mstore pull --from "$WORK/lay" big:v1
digest=${out##* }
want_blobs=$(blob_digests)
expect_ok mstore push --insecure big:v1 "$REG_HOST/t/big:v1"
# A blob this big goes up in chunks (PATCH with Content-Range), then a closing PUT.
[ "$(grep -c '"PATCH /v2/t/big/blobs/uploads/' "$REG_LOG")" -ge 2 ] || fail "no chunked upload"

# Slow the transfer (8 MB/s per connection) so that the kill lands in the middle.
proxy_start --rate 8000000
slow=$PROXY_HOST
export MSTORE_HOME=$WORK/pull
"$MSTORE_BIN" pull --insecure "$slow/t/big:v1" >/dev/null 2>&1 &
pid=$!
sleep 3
kill -9 "$pid"
wait "$pid" 2>/dev/null || true
partial=$(find "$MSTORE_HOME/tmp/pull" -name '*.partial' -size +1M | head -1)
[ -n "$partial" ] || fail "no partial download in tmp/pull after the kill"
have=$(stat -c %s "$partial")
expect_ok mstore list
case "$out" in *big*) fail "a killed pull left a name: $out" ;; esac
[ "$(blob_digests | grep -c "${digest#sha256:}" || true)" -eq 0 ] || fail "manifest stored by a killed pull"
expect_ok mstore verify

# Rerun through a counting proxy: only the missing bytes travel.
proxy_start --log "$WORK/resume.bytes"
expect_ok mstore pull --insecure "$PROXY_HOST/t/big:v1"
contains "$out" "$digest"
sleep 0.3
sent=$(awk '{s+=$1} END {print s+0}' "$WORK/resume.bytes")
total=$((64 << 20))
[ "$sent" -lt $((total - have + 1000000)) ] || fail "resume moved $sent bytes; $have were already on disk"
[ "$(blob_digests)" = "$want_blobs" ] || fail "resumed store differs from the source store"
expect_ok mstore verify
[ -z "$(ls "$MSTORE_HOME/tmp")" ] || fail "tmp/ not empty after the resumed pull: $(ls -R "$MSTORE_HOME/tmp")"

# Killed at several points, each rerun continuing the last: the end is the same store.
export MSTORE_HOME=$WORK/pull2
for delay in 0.05 0.3 1 2 4; do
    "$MSTORE_BIN" pull --insecure "$slow/t/big:v1" >/dev/null 2>&1 &
    pid=$!
    sleep "$delay"
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    [ -d "$MSTORE_HOME" ] || continue
    expect_ok mstore verify
done
expect_ok mstore pull --insecure "$REG_HOST/t/big:v1"
contains "$out" "$digest"
[ "$(blob_digests)" = "$want_blobs" ] || fail "store after kills and rerun differs"
expect_ok mstore verify
echo "ok $TEST_NAME"
