#!/usr/bin/env bash
# Several processes opening the same fresh store at once all succeed. (Switching a new
# index.db to WAL is refused with "database is locked" without SQLite's busy handler; found
# as a flaky two-pulls-into-a-new-home test.) The race is narrow, so many rounds.
. "$(dirname "$0")/lib.sh"

for round in $(seq 60); do
    home="$WORK/h$round"
    pids=""
    for k in 1 2 3 4 5 6 7 8; do
        "$MSTORE_BIN" --home "$home" list >/dev/null 2>"$WORK/err.$round.$k" &
        pids="$pids $!"
    done
    for p in $pids; do
        wait "$p" || fail "round $round: $(cat "$WORK"/err.$round.*)"
    done
done
echo "ok $TEST_NAME"
