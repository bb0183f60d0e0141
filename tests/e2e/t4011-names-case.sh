#!/usr/bin/env bash
# Names match whatever their case, as ollama and Docker treat them: Tiny and tiny are one
# model locally (show, a second import, rm), and a push of Team/Tiny reaches the registry as
# team/tiny instead of failing on the upper case ("start upload: HTTP 404").
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_registry.sh"

make_hf "$WORK/hf"
expect_ok mstore import "$WORK/hf" --name Tiny
digest=$out
expect_ok mstore show tiny
contains "$out" "$digest"
expect_ok mstore import "$WORK/hf" --name TINY:Latest
expect_ok mstore list
[ "$(echo "$out" | grep -ci '^tiny:latest')" -eq 1 ] || fail "one model listed twice by case: $out"
contains "$out" "TINY:Latest"

registry_start
expect_ok mstore push --insecure tiny "$REG_HOST/Team/Tiny:v1"
grep -q '"PUT /v2/team/tiny/manifests/v1' "$REG_LOG" || fail "the manifest did not go to team/tiny"
export MSTORE_HOME=$WORK/home2
expect_ok mstore pull --insecure "$REG_HOST/TEAM/tiny:v1"
contains "$out" "$digest"
export MSTORE_HOME=$WORK/home
expect_ok mstore rm tInY
expect_ok mstore list
case "$out" in *[Tt][Ii][Nn][Yy]*) fail "rm tInY left the model: $out" ;; esac
echo "ok $TEST_NAME"
