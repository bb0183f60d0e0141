#!/usr/bin/env bash
# The store fingerprint that the refusal tests compare does not depend on how long the test
# has run: a name listed "just now" and the same name "2 minutes ago" (its modified time moved
# back in the index, as a slow run would see it) give the same fingerprint.
. "$(dirname "$0")/lib.sh"

make_hf "$WORK/hf"
expect_ok mstore import "$WORK/hf" --name tiny
expect_ok mstore list
contains "$out" "just now"
before=$(store_state)
"$PY" - "$MSTORE_HOME/index.db" <<'PYEOF' || fail "could not age the name"
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute("UPDATE names SET modified_at = modified_at - 150")
db.commit()
PYEOF
expect_ok mstore list
contains "$out" "2 minutes ago"
[ "$(store_state)" = "$before" ] || fail "the fingerprint changed with the model's age alone"
echo "ok $TEST_NAME"
