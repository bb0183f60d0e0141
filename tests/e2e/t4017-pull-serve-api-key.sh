#!/usr/bin/env bash
# `mstore pull` from a `mstore serve` that requires MSTORE_API_KEY: refused (HTTP 401) without
# a credential or with a wrong one, and pulled, every digest verified, with the key as a
# "token" entry for the server's host in credentials.json (sent as Authorization: Bearer).
# Before, pull had no way to send the key.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_registry.sh"
. "$(dirname "$0")/lib_serve.sh"

export MSTORE_HOME=$WORK/src
make_layout "$WORK/lay" v1 1 2
expect_ok mstore pull --from "$WORK/lay" m:v1
want=${out##* }
MSTORE_API_KEY=k3y-s3cret serve_start
SERVE_AUTH=k3y-s3cret
host=127.0.0.1:$SERVE_PORT

export MSTORE_HOME=$WORK/dst
mkdir -p "$MSTORE_HOME"
expect_fail 1 "HTTP 401" mstore pull --insecure "$host/library/m:v1"
cat >"$MSTORE_HOME/credentials.json" <<JSON
{"$host": {"token": "wrong"}}
JSON
expect_fail 1 "HTTP 401" mstore pull --insecure "$host/library/m:v1"
case "$err" in *wrong*) fail "the token was shown: $err" ;; esac
before=$(store_state)
cat >"$MSTORE_HOME/credentials.json" <<JSON
{"auths": {"$host": {"token": "k3y-s3cret"}}}
JSON
expect_ok mstore pull --insecure "$host/library/m:v1"
contains "$out" "$want"
expect_ok mstore verify
[ "$(store_state)" != "$before" ] || fail "the pull stored nothing"
# the key is for that host only: MSTORE_REGISTRY_AUTH and other entries do not stand in for it
cat >"$MSTORE_HOME/credentials.json" <<JSON
{"127.0.0.1:1": {"token": "k3y-s3cret"}}
JSON
expect_fail 1 "HTTP 401" mstore pull --insecure "$host/library/m:v1"
serve_alive
echo "ok $TEST_NAME"
