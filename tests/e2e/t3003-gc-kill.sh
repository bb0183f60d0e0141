#!/usr/bin/env bash
# rm and gc killed (SIGKILL) at any point leave a consistent store: the other model still
# verifies, and a later gc finishes the job.
. "$(dirname "$0")/lib.sh"

make_hf "$WORK/a" --dim 256 --layers 4
make_hf "$WORK/b" --dim 256 --layers 4 --seed 5
for delay in 0.00 0.005 0.01 0.02 0.05 0.1; do
    rm -rf "$MSTORE_HOME"
    expect_ok mstore import "$WORK/a" --name a
    expect_ok mstore import "$WORK/b" --name b
    "$MSTORE_BIN" rm a >/dev/null 2>&1 &
    pid=$!
    sleep "$delay"
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    expect_ok mstore verify
    expect_ok mstore verify b
    expect_ok mstore gc
    expect_ok mstore verify b
    if mstore show a >/dev/null 2>&1; then
        expect_ok mstore verify a   # the kill came before the name was removed: a is whole
    else
        # a is gone: only b's blobs are left.
        n=$(ls "$MSTORE_HOME/blobs" | wc -l)
        expect_ok mstore rm b
        [ "$(ls "$MSTORE_HOME/blobs" | wc -l)" -eq 0 ] || fail "blobs left after removing every model (delay $delay, had $n)"
    fi
done
echo "ok $TEST_NAME"
