#!/usr/bin/env bash
# A blob altered in the registry's storage makes the pull fail with a digest mismatch naming
# the blob; nothing is stored under its name, no model name appears, and the good blobs that
# did arrive are only unreferenced files for gc.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_registry.sh"

registry_start
make_layout "$WORK/lay" v1 4 2
expect_ok mstore pull --from "$WORK/lay" m:v1
expect_ok mstore push --insecure m:v1 "$REG_HOST/t/m:v1"
bad=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["layers"][1]["digest"])' \
    "$(ls "$WORK"/lay/blobs/sha256/* | while read -r f; do grep -l '"layers"' "$f" 2>/dev/null || true; done | head -1)")
hex=${bad#sha256:}
data=$REG_ROOT/docker/registry/v2/blobs/sha256/${hex:0:2}/$hex/data
[ -f "$data" ] || fail "registry blob file not found: $data"
# Same size, one byte changed: only the digest can tell.
flip_byte "$data" 1000

export MSTORE_HOME=$WORK/home2
expect_fail 1 "digest mismatch" mstore pull --insecure "$REG_HOST/t/m:v1"
contains "$err" "$bad"
[ ! -e "$MSTORE_HOME/blobs/sha256-$hex" ] || fail "tampered blob stored under its name"
expect_ok mstore list
case "$out" in *t/m*) fail "a failed pull added a name: $out" ;; esac
expect_ok mstore verify
# The parts of the bad blob are dropped: a rerun must not resume from them.
[ -z "$(ls "$MSTORE_HOME/tmp/pull" 2>/dev/null | grep "$hex" || true)" ] || fail "bad parts kept"
expect_fail 1 "digest mismatch" mstore pull --insecure "$REG_HOST/t/m:v1"
echo "ok $TEST_NAME"
