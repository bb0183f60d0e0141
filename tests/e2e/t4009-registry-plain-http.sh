#!/usr/bin/env bash
# A registry that speaks plain HTTP, reached without --insecure, is named as such with the
# option that allows it (not OpenSSL's "wrong version number"), for pull and for push.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_registry.sh"

registry_start
make_hf "$WORK/hf"
expect_ok mstore import "$WORK/hf" --name tiny
expect_fail 1 "the registry speaks plain HTTP, not HTTPS (--insecure allows plain HTTP)" \
    mstore pull "$REG_HOST/team/tiny:v1"
case "$err" in *"wrong version number"*) fail "OpenSSL's message shown: $err" ;; esac
expect_fail 1 "--insecure allows plain HTTP" mstore push tiny "$REG_HOST/team/tiny:v1"
expect_ok mstore push --insecure tiny "$REG_HOST/team/tiny:v1"
echo "ok $TEST_NAME"
