#!/usr/bin/env bash
# On a full disk, rm and gc still free space: the store keeps <home>/reserve, which they give up
# when SQLite cannot write (index.db-shm, the WAL pages of the change) and make again once blobs
# are gone. `list` still works (read-only), and an import says the disk is full. Runs on a small
# tmpfs (the tests run as root; skipped where mounting is not allowed). Before, rm, gc and list
# all failed with "disk I/O error" and nothing could be freed.
. "$(dirname "$0")/lib.sh"
s260="$MODELS/stories260K/stories260K.gguf"
tiny="$MODELS/llama-2-tiny-random/llama-2-tiny-random.gguf"
[ -f "$s260" ] && [ -f "$tiny" ] || skip "test models not found (set MSTORE_TEST_MODELS)"
[ "$(id -u)" -eq 0 ] || skip "needs root to mount a small tmpfs (runs as root in CI)"
mkdir "$WORK/mnt"
mount -t tmpfs -o size=24m tmpfs "$WORK/mnt" 2>/dev/null || skip "cannot mount a tmpfs here (not privileged)"
trap 'umount "$WORK/mnt" 2>/dev/null || true; rm -rf "$WORK"' EXIT
export MSTORE_HOME=$WORK/mnt/home

avail() { df --output=avail -k "$WORK/mnt" | tail -1 | tr -d ' '; }
# fill: take every free byte with a file (64 KiB blocks, then single pages for the rest).
fill() {
    dd if=/dev/zero of="$WORK/mnt/fill$1" bs=64k status=none 2>/dev/null || true
    dd if=/dev/zero of="$WORK/mnt/fill$1-tail" bs=4k status=none 2>/dev/null || true
    [ "$(avail)" -eq 0 ] || fail "the disk is not full: $(avail) KiB free"
}
blobs() { ls "$MSTORE_HOME/blobs" | wc -l; }

expect_ok mstore import "$s260" --name s
n_s=$(blobs)
expect_ok mstore import "$tiny" --name t
fill 1

expect_ok mstore list
contains "$out" "s:latest"
contains "$out" "t:latest"
before=$(store_state)
expect_fail 1 "disk is full" mstore import "$s260" --name u
[ "$(store_state)" = "$before" ] || fail "a refused import changed the store"

expect_ok mstore rm t
contains "$out" "deleted 't'"
[ "$(blobs)" -eq "$n_s" ] || fail "rm on a full disk left t's blobs: $(blobs) blobs, want $n_s"
[ "$(avail)" -gt 1000 ] || fail "rm freed nothing: $(avail) KiB free"
[ -f "$MSTORE_HOME/reserve" ] || fail "the reserve was not made again after space was freed"
expect_ok mstore list
case "$out" in *t:latest*) fail "t still listed: $out" ;; esac
expect_ok mstore verify

# gc alone: an unreferenced blob (a model whose name went while gc could not run).
rm -f "$WORK"/mnt/fill*
expect_ok mstore import "$tiny" --name t
"$PY" - "$MSTORE_HOME/index.db" <<'PYEOF'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
c.execute("DELETE FROM names WHERE model = 't'")
c.commit()
PYEOF
fill 2
expect_ok mstore gc
contains "$out" "removed"
[ "$(blobs)" -eq "$n_s" ] || fail "gc on a full disk left blobs: $(blobs), want $n_s"
[ "$(avail)" -gt 1000 ] || fail "gc freed nothing: $(avail) KiB free"
expect_ok mstore verify
rm -f "$WORK"/mnt/fill*
expect_ok mstore run s "Once upon" --temp 0 -n 4
echo "ok $TEST_NAME"
