#!/usr/bin/env bash
# Pulling a model again from a registry re-downloads each blob whose stored copy does not hash
# to its name (a flipped byte: same size; a truncation: another size), and only those: verify
# is clean after, and the intact blobs are not fetched again. Before, the pull skipped every
# blob that merely existed and the damage stayed.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_registry.sh"

registry_start
make_layout "$WORK/lay" v1 4 3
expect_ok mstore pull --from "$WORK/lay" m:v1
expect_ok mstore push --insecure m:v1 "$REG_HOST/t/m:v1"
expect_ok mstore pull --insecure "$REG_HOST/t/m:v1"
contains "$out" "downloaded 0 blobs"

# The two largest blobs (layers): one flipped, one truncated.
set -- $(ls -S "$MSTORE_HOME/blobs" | head -2)
flip=$1 cut=$2
chmod u+w "$MSTORE_HOME/blobs/$flip" "$MSTORE_HOME/blobs/$cut"
flip_byte "$MSTORE_HOME/blobs/$flip" 1000
truncate -s 1000 "$MSTORE_HOME/blobs/$cut"
expect_fail 1 "is corrupt" mstore verify

gets_before=$(grep -c 'GET /v2/t/m/blobs/' "$REG_LOG" || true)
expect_ok mstore pull --insecure "$REG_HOST/t/m:v1"
contains "$out" "downloaded 2 blobs"
expect_ok mstore verify
gets=$(grep 'GET /v2/t/m/blobs/' "$REG_LOG" | tail -n +$((gets_before + 1)))
contains "$gets" "${flip#sha256-}"
contains "$gets" "${cut#sha256-}"
[ "$(echo "$gets" | grep -c 'GET /v2/t/m/blobs/')" -le 2 ] || fail "intact blobs fetched again: $gets"
expect_ok mstore pull --insecure "$REG_HOST/t/m:v1"
contains "$out" "downloaded 0 blobs"
echo "ok $TEST_NAME"
