#!/usr/bin/env bash
# Every verb answers --help; unknown verbs and options are usage errors (exit 2).
. "$(dirname "$0")/lib.sh"

expect_ok mstore --help
contains "$out" "usage: mstore"
for verb in $(mstore --help | awk '/^commands:/{on=1; next} /^$/{on=0} on{print $1}'); do
    expect_ok mstore "$verb" --help
    contains "$out" "usage: mstore $verb"
done
expect_ok mstore --version
contains "$out" "mstore "
expect_fail 2 "unknown command 'frobnicate'" mstore frobnicate
expect_fail 2 "unknown option '--bogus'" mstore --bogus list
expect_fail 2 "needs PATH and --name NAME" mstore import
expect_fail 2 "unknown option '--nope'" mstore list --nope
expect_fail 2 "unexpected argument 'extra'" mstore list extra
# An empty store lists nothing but the header.
expect_ok mstore list
[ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] || fail "empty store lists rows: $out"
echo "ok $TEST_NAME"
