#!/usr/bin/env bash
# verify names a corrupted blob and exits 1; gc removes only unreferenced blobs.
. "$(dirname "$0")/lib.sh"

make_hf "$WORK/m"
expect_ok mstore import "$WORK/m" --name m
expect_ok mstore verify
contains "$out" "all ok"
expect_ok mstore verify m

# blob put / cat round trip; a put blob is unreferenced, so gc takes it.
printf 'some bytes' > "$WORK/f"
expect_ok mstore blob put "$WORK/f"
d=$out
[ "$d" = "sha256:$(sha256sum "$WORK/f" | cut -d' ' -f1)" ] || fail "blob put printed $d"
expect_ok mstore blob cat "$d"
[ "$out" = "some bytes" ] || fail "blob cat printed $out"
expect_fail 1 "not of the form sha256" mstore blob cat sha256:../../etc/passwd
expect_ok mstore gc --dry-run
contains "$out" "would remove $d"
[ -e "$MSTORE_HOME/blobs/sha256-${d#sha256:}" ] || fail "dry run removed a blob"
expect_ok mstore gc
contains "$out" "removed 1 blob"
[ ! -e "$MSTORE_HOME/blobs/sha256-${d#sha256:}" ] || fail "gc kept an unreferenced blob"
expect_ok mstore verify m

# Corrupt one tensor blob: verify (all, and by name) fails naming it.
victim=$(ls "$MSTORE_HOME/blobs" | head -1)
chmod u+w "$MSTORE_HOME/blobs/$victim"
flip_byte "$MSTORE_HOME/blobs/$victim" 20
expect_fail 1 "sha256:${victim#sha256-}" mstore verify
contains "$err" "corrupt"
expect_fail 1 "sha256:${victim#sha256-}" mstore verify m
# A missing blob is named too.
rm -f "$MSTORE_HOME/blobs/$victim"
expect_fail 1 "missing" mstore verify m
echo "ok $TEST_NAME"
