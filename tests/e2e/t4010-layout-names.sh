#!/usr/bin/env bash
# A layout directory keys its entries by the full name: pushing b:latest leaves a:latest's
# entry alone, and pull --from DIR a gives a. Pushes of different names into one directory at
# the same time all survive (the directory is locked around index.json's update). A killed
# push's temp files (<hex>.<pid>.tmp of a pid that is gone) are removed by the next push.
. "$(dirname "$0")/lib.sh"

make_hf "$WORK/a"
make_hf "$WORK/b" --seed 9
expect_ok mstore import "$WORK/a" --name a
da=$out
expect_ok mstore import "$WORK/b" --name b
db=$out
expect_ok mstore push a --to "$WORK/oci"
expect_ok mstore push b --to "$WORK/oci"
"$PY" - "$WORK/oci" <<'PYEOF' || fail "index.json lacks one of the names"
import json, sys
idx = json.load(open(sys.argv[1] + "/index.json"))
names = sorted(m["annotations"]["org.opencontainers.image.ref.name"] for m in idx["manifests"])
assert names == ["a:latest", "b:latest"], names
PYEOF
export MSTORE_HOME=$WORK/home2
expect_ok mstore pull --from "$WORK/oci" a
contains "$out" "$da"
expect_ok mstore pull --from "$WORK/oci" b
contains "$out" "$db"
expect_ok mstore verify

# 3 rounds of 12 names pushed at once into one fresh directory: every name must be listed.
for round in 1 2 3; do
    pids=""
    for i in $(seq 1 12); do
        mstore cp a "t$i:r$round" >/dev/null
        mstore push "t$i:r$round" --to "$WORK/race$round" >/dev/null 2>"$WORK/race.err.$i" &
        pids="$pids $!"
    done
    for p in $pids; do wait "$p" || fail "a concurrent push failed: $(cat "$WORK"/race.err.*)"; done
    n=$("$PY" -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["manifests"]))' "$WORK/race$round/index.json")
    [ "$n" -eq 12 ] || fail "round $round: $n of 12 concurrently pushed names are in index.json"
done

dead=4194305   # above Linux's pid_max: no such process
layer=$(ls "$WORK/oci/blobs/sha256" | head -1)
echo junk > "$WORK/oci/blobs/sha256/$layer.$dead.tmp"
echo mine > "$WORK/oci/blobs/sha256/$layer.$$.tmp"   # a live pid: spared
expect_ok mstore push a --to "$WORK/oci"
[ ! -e "$WORK/oci/blobs/sha256/$layer.$dead.tmp" ] || fail "a dead push's temp file was left"
[ -e "$WORK/oci/blobs/sha256/$layer.$$.tmp" ] || fail "a live push's temp file was removed"
echo "ok $TEST_NAME"
