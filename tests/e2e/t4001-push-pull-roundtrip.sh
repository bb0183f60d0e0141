#!/usr/bin/env bash
# A model pushed to a registry and pulled into a fresh store comes back with the same manifest
# digest and blobs; verify passes; a push to another repository mounts the blobs; blobs already present are not fetched again; the Docker v2
# form round-trips too; a missing model is refused and changes nothing.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_registry.sh"

registry_start
make_hf "$WORK/hf"
expect_ok mstore import "$WORK/hf" --name tiny
digest=$out
src_blobs=$(blob_digests)

# Without --insecure the client insists on https, which a loopback registry does not speak.
expect_fail 1 "https://$REG_HOST/v2/" mstore push tiny "$REG_HOST/team/tiny:v1"
expect_ok mstore push --insecure tiny "$REG_HOST/team/tiny:v1"
contains "$out" "pushed $REG_HOST/team/tiny:v1 $digest"
# Pushing again uploads nothing new and gives the same digest.
expect_ok mstore push --insecure tiny "$REG_HOST/team/tiny:v1"
contains "$out" "$digest"

# To another repository of the same registry: every blob is mounted, none uploaded.
expect_ok mstore push --insecure tiny "$REG_HOST/other/tiny:v1"
contains "$out" "$digest"
grep -q '"POST /v2/other/tiny/blobs/uploads/?mount=sha256:[0-9a-f]*&from=team/tiny' "$REG_LOG" || fail "no mount request"
! grep -q '"PUT /v2/other/tiny/blobs/' "$REG_LOG" || fail "blobs uploaded to other/tiny despite mount"

export MSTORE_HOME=$WORK/home2
expect_ok mstore pull --insecure "$REG_HOST/team/tiny:v1"
contains "$out" "pulled $REG_HOST/team/tiny:v1 $digest"
[ "$(blob_digests)" = "$src_blobs" ] || fail "pulled blobs differ from the pushed store"
expect_ok mstore verify
expect_ok mstore verify "$REG_HOST/team/tiny:v1"
expect_ok mstore list
contains "$out" "$REG_HOST/team/tiny:v1"
expect_ok mstore show "$REG_HOST/team/tiny:v1"
contains "$out" "$digest"
[ -z "$(ls "$MSTORE_HOME/tmp")" ] || fail "tmp/ not empty after a pull: $(ls -R "$MSTORE_HOME/tmp")"

# A second pull under another tag fetches no blob: the registry log would show blob GETs,
# so go through a logging proxy and count bytes.
proxy_start --log "$WORK/proxy.bytes"
expect_ok mstore push --insecure "$REG_HOST/team/tiny:v1" "$REG_HOST/team/tiny:v2"
expect_ok mstore pull --insecure "$PROXY_HOST/team/tiny:v2"
sleep 0.3
sent=$(awk '{s+=$1} END {print s+0}' "$WORK/proxy.bytes")
[ "$sent" -lt 20000 ] || fail "re-pull of stored blobs moved $sent bytes"

# $MSTORE_REGISTRY is the host for names without one; the model keeps the name as typed.
MSTORE_REGISTRY=$REG_HOST expect_ok mstore pull --insecure team/tiny:v1
expect_ok mstore list
contains "$out" "team/tiny:v1"
unset MSTORE_REGISTRY
# (Unset, the default is registry.ollama.ai: no test contacts it.) A host that cannot be one:
MSTORE_REGISTRY='bad/host' expect_fail 1 "character '/' is not allowed" mstore pull --insecure team/tiny:v1

# Docker v2 form: other media types, another digest, same blobs; pulls back and verifies.
export MSTORE_HOME=$WORK/home
expect_ok mstore push --insecure --format docker tiny "$REG_HOST/ollama/tiny:latest"
ddigest=${out##* }
[ "$ddigest" != "$digest" ] || fail "docker form has the OCI digest"
"$PY" - "http://$REG_HOST/v2/ollama/tiny/manifests/latest" <<'PYEOF' || fail "docker manifest form"
import json, sys, urllib.request
r = urllib.request.Request(sys.argv[1], headers={"Accept": "application/vnd.docker.distribution.manifest.v2+json"})
m = json.load(urllib.request.urlopen(r))
assert m["mediaType"] == "application/vnd.docker.distribution.manifest.v2+json", m["mediaType"]
assert m["config"]["mediaType"] == "application/vnd.docker.container.image.v1+json", m["config"]
PYEOF
export MSTORE_HOME=$WORK/home3
expect_ok mstore pull --insecure "$REG_HOST/ollama/tiny"
contains "$out" "$ddigest"
expect_ok mstore verify

# Refusals leave the store as it was.
before=$(store_state)
expect_fail 1 "HTTP 404" mstore pull --insecure "$REG_HOST/team/nosuch:v1"
expect_fail 1 "not found" mstore push --insecure nosuch "$REG_HOST/team/nosuch:v1"
expect_fail 2 "parallel" mstore pull --parallel 0 "$REG_HOST/team/tiny:v1"
[ "$(store_state)" = "$before" ] || fail "a refused pull changed the store"

# On a terminal, push and pull show a progress line (bytes, rate, ETA); --quiet shows none.
if command -v script >/dev/null && "$PY" -c 'import pty; pty.openpty()' 2>/dev/null; then
    export MSTORE_HOME=$WORK/home4
    unset MSTORE_NO_PROGRESS
    script -qec "$MSTORE_BIN pull --insecure $REG_HOST/team/tiny:v1" /dev/null > "$WORK/tty.out" 2>&1
    grep -q "$REG_HOST/team/tiny:v1: .* / .*/s" "$WORK/tty.out" || fail "pull showed no progress on a terminal: $(cat "$WORK/tty.out")"
    expect_ok mstore cp "$REG_HOST/team/tiny:v1" tiny:v1
    script -qec "$MSTORE_BIN push --insecure tiny:v1 $REG_HOST/team/again:v1" /dev/null > "$WORK/tty.out" 2>&1
    grep -q "$REG_HOST/team/again:v1: .* / .*/s" "$WORK/tty.out" || fail "push showed no progress on a terminal: $(cat "$WORK/tty.out")"
    script -qec "$MSTORE_BIN push --insecure --quiet tiny:v1 $REG_HOST/team/again:v2" /dev/null > "$WORK/tty.out" 2>&1
    grep -q "/s" "$WORK/tty.out" && fail "push --quiet showed progress: $(cat "$WORK/tty.out")"
    export MSTORE_NO_PROGRESS=1
fi
echo "ok $TEST_NAME"
