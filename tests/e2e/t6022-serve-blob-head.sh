#!/usr/bin/env bash
# HEAD /api/blobs/:digest looks for the file and does not re-hash it (anyone who can name a
# digest could otherwise keep the server reading whole blobs): a stored blob whose bytes were
# damaged, its size unchanged, still answers 200. The bytes are checked where they are used: a
# create from it refuses it naming the digest it got, with nothing created, and drops the damaged
# upload, so the next HEAD answers 404, the client uploads again, and the create succeeds.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_serve.sh"
S260K=$MODELS/stories260K/stories260K.gguf
[ -f "$S260K" ] || skip "stories260K not found under $MODELS"
command -v curl >/dev/null || skip "no curl"
serve_start
d=sha256:$(sha256sum "$S260K" | cut -d' ' -f1)
blob=$MSTORE_HOME/blobs/sha256-${d#sha256:}
head_code() { curl -s -o /dev/null -w '%{http_code}' -I "$SERVE/api/blobs/$d"; }
upload() { curl -s -o /dev/null -w '%{http_code}' -X POST --data-binary @"$S260K" "$SERVE/api/blobs/$d"; }
create() { curl -s -o "$WORK/r" -w '%{http_code}' -X POST --data-binary \
    "{\"model\": \"up\", \"stream\": false, \"files\": {\"stories.gguf\": \"$d\"}}" "$SERVE/api/create"; }

[ "$(head_code)" = 404 ] || fail "HEAD before the upload"
[ "$(upload)" = 201 ] || fail "upload"
[ "$(head_code)" = 200 ] || fail "HEAD after the upload"
size=$(stat -c %s "$blob")
chmod u+w "$blob"
flip_byte "$blob" 100000
chmod a-w "$blob"
[ "$(stat -c %s "$blob")" = "$size" ] || fail "the damage changed the size"
[ "$(head_code)" = 200 ] || fail "HEAD of a damaged blob of the right size re-hashed it (answered $(head_code), want 200)"
state=$(store_state)
code=$(create)
[ "$code" = 400 ] || fail "create from the damaged blob: HTTP $code $(cat "$WORK/r")"
grep -q "stories.gguf: digest mismatch: expected $d, got sha256:" "$WORK/r" || fail "create: $(cat "$WORK/r")"
expect_ok mstore list
case "$out" in *up:latest*) fail "a refused create named a model: $out" ;; esac
[ ! -e "$blob" ] || fail "the damaged upload stays: the client's HEAD would find it again"
[ "$(head_code)" = 404 ] || fail "HEAD after the damaged blob went"
[ "$(upload)" = 201 ] || fail "upload again"
code=$(create)
[ "$code" = 200 ] || fail "create after the new upload: HTTP $code $(cat "$WORK/r")"
expect_ok mstore run up "Once upon a time" -n 4
expect_ok mstore verify
serve_alive
echo "ok $TEST_NAME"
