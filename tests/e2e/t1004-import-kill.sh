#!/usr/bin/env bash
# An import killed (SIGKILL) at any point leaves a consistent store: verify passes, the name
# is either absent or complete, and gc cleans the leftovers.
. "$(dirname "$0")/lib.sh"

make_hf "$WORK/big" --dim 512 --layers 4
for delay in 0.00 0.01 0.02 0.05 0.1 0.2 0.4; do
    rm -rf "$MSTORE_HOME"
    "$MSTORE_BIN" import "$WORK/big" --name big >/dev/null 2>&1 &
    pid=$!
    sleep "$delay"
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    [ -d "$MSTORE_HOME" ] || continue
    expect_ok mstore verify
    if mstore show big >/dev/null 2>&1; then
        expect_ok mstore verify big
    fi
    expect_ok mstore gc
    [ -z "$(ls "$MSTORE_HOME/tmp" 2>/dev/null)" ] || fail "tmp/ not clean after gc (delay $delay)"
    expect_ok mstore import "$WORK/big" --name big
    expect_ok mstore verify big
done
echo "ok $TEST_NAME"
