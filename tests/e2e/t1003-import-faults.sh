#!/usr/bin/env bash
# An unwritable home and a full disk fail cleanly: no blob under a final name, no index change.
. "$(dirname "$0")/lib.sh"

make_hf "$WORK/m" --dim 64

# A home that cannot be created (its parent is a file).
echo x > "$WORK/file"
expect_fail 1 "$WORK/file/home" mstore --home "$WORK/file/home" import "$WORK/m" --name m

# A full disk, simulated with RLIMIT_FSIZE (ulimit -f, in 512-byte blocks): the first tensor
# blob bigger than 16 KB fails to write.
expect_ok mstore import "$WORK/m" --name seed
before=$(ls "$MSTORE_HOME/blobs" | sort)
make_hf "$WORK/m2" --dim 64 --seed 7
set +e
(ulimit -f 32; trap '' XFSZ; exec "$MSTORE_BIN" import "$WORK/m2" --name m2) >"$WORK/o" 2>"$WORK/e"
rc=$?
set -e
[ "$rc" -eq 1 ] || fail "full disk: exit $rc, $(cat "$WORK/e")"
grep -q "File too large" "$WORK/e" || fail "full disk: message: $(cat "$WORK/e")"
after=$(ls "$MSTORE_HOME/blobs" | sort)
# Blobs written before the failure are whole (verify passes) and unnamed (gc removes them).
expect_ok mstore verify
expect_fail 1 "not found" mstore show m2
expect_ok mstore gc
[ "$(ls "$MSTORE_HOME/blobs" | sort)" = "$before" ] || fail "gc left the failed import's blobs"
[ -z "$(ls "$MSTORE_HOME/tmp")" ] || fail "tmp/ not empty"
: "$after"
echo "ok $TEST_NAME"
