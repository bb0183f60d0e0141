#!/usr/bin/env bash
# Behind a proxy that cuts every connection after 3 MB, a pull still completes: each part
# resumes from its last byte with a Range request.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_registry.sh"

registry_start
make_layout "$WORK/lay" v1 20 2
expect_ok mstore pull --from "$WORK/lay" m:v1
digest=${out##* }
want_blobs=$(blob_digests)
expect_ok mstore push --insecure m:v1 "$REG_HOST/t/m:v1"

proxy_start --drop-after 3000000 --log "$WORK/proxy.bytes"
export MSTORE_HOME=$WORK/home2
expect_ok mstore pull --insecure "$PROXY_HOST/t/m:v1"
contains "$out" "$digest"
[ "$(blob_digests)" = "$want_blobs" ] || fail "blobs differ"
expect_ok mstore verify
sleep 0.3
[ "$(wc -l <"$WORK/proxy.bytes")" -ge 7 ] || fail "the proxy dropped too few connections to mean anything"
echo "ok $TEST_NAME"
