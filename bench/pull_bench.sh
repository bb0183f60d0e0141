#!/usr/bin/env bash
# pull_bench.sh [SIZE_MB] [LAYERS]: pull a SIZE_MB model (default 1024, in 4 layers) from a
# loopback docker-registry and compare with `curl -o` of the same blobs, in one run:
#   mstore pull (--parallel 4, verified, stored)   vs   curl -o one blob after another
#   and 4 curls at once, and curl -o followed by sha256sum (the verification mstore does).
# Usage: MSTORE_BIN=build/mstore bench/pull_bench.sh
MSTORE_SRC=$(cd "$(dirname "$0")/.." && pwd)
export MSTORE_SRC
: "${MSTORE_BIN:=$MSTORE_SRC/build/mstore}"
export MSTORE_BIN
. "$MSTORE_SRC/tests/e2e/lib.sh"
. "$MSTORE_SRC/tests/e2e/lib_registry.sh"
size_mb=${1:-1024}
layers=${2:-4}

now() { date +%s.%N; }
registry_start
make_layout "$WORK/lay" v1 "$size_mb" "$layers"
mstore pull --from "$WORK/lay" bench:v1 >/dev/null
mstore push --insecure bench:v1 "$REG_HOST/b/bench:v1" >/dev/null
digests=$("$PY" -c 'import json,sys
d = sys.argv[1]
md = json.load(open(d + "/index.json"))["manifests"][0]["digest"]
m = json.load(open(d + "/blobs/sha256/" + md[7:]))
print(" ".join([m["config"]["digest"]] + [l["digest"] for l in m["layers"]]))' "$WORK/lay")
rm -rf "$WORK/lay"
sync

export MSTORE_HOME=$WORK/pulled
t0=$(now)
mstore pull --insecure --quiet "$REG_HOST/b/bench:v1" >/dev/null
t1=$(now)
mstore verify >/dev/null
# Again, with everything stored: what remains is the re-hash of each stored blob (a pull only
# skips intact bytes), on the pull's threads.
t8=$(now)
mstore pull --insecure --quiet "$REG_HOST/b/bench:v1" >/dev/null
t9=$(now)

mkdir -p "$WORK/curl"
t2=$(now)
for d in $digests; do
    curl -sf -o "$WORK/curl/${d#sha256:}" "http://$REG_HOST/v2/b/bench/blobs/$d"
done
t3=$(now)
rm -rf "$WORK/curl" && mkdir -p "$WORK/curl"
t4=$(now)
pids=""
for d in $digests; do
    curl -sf -o "$WORK/curl/${d#sha256:}" "http://$REG_HOST/v2/b/bench/blobs/$d" & pids="$pids $!"
done
for p in $pids; do wait "$p"; done
t5=$(now)
# The same bytes hashed too: what a client that checks digests, as mstore does, must add.
rm -rf "$WORK/curl" && mkdir -p "$WORK/curl"
t6=$(now)
for d in $digests; do
    curl -sf -o "$WORK/curl/${d#sha256:}" "http://$REG_HOST/v2/b/bench/blobs/$d"
done
(cd "$WORK/curl" && sha256sum * >/dev/null)
t7=$(now)

"$PY" - "$size_mb" "$t0" "$t1" "$t2" "$t3" "$t4" "$t5" "$t6" "$t7" "$t8" "$t9" <<'PYEOF'
import sys
mb = float(sys.argv[1]); t = [float(x) for x in sys.argv[2:]]
pull, seq, par, hashed, again = t[1] - t[0], t[3] - t[2], t[5] - t[4], t[7] - t[6], t[9] - t[8]
print("size                 %.0f MB" % mb)
print("mstore pull          %.2f s  %.0f MB/s" % (pull, mb / pull))
print("mstore pull again    %.2f s  %.0f MB/s   (all stored: the re-hash)" % (again, mb / again))
print("curl -o sequential   %.2f s  %.0f MB/s   ratio pull/curl %.2f" % (seq, mb / seq, pull / seq))
print("curl -o 4 at once    %.2f s  %.0f MB/s   ratio pull/curl %.2f" % (par, mb / par, pull / par))
print("curl -o + sha256sum  %.2f s  %.0f MB/s   ratio pull/curl %.2f" % (hashed, mb / hashed, pull / hashed))
PYEOF
