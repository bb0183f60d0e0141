#!/usr/bin/env bash
# An ollama-style model (Docker v2 manifest, ollama's ConfigV2, one whole-GGUF layer beside
# template and params layers), pushed into a loopback registry with curl: the pull splits the
# GGUF into tensor blobs (no whole-GGUF blob left in the store), the model shows and runs,
# export gives the GGUF back byte for byte, and a push to another repository sends the same
# manifest digest, rebuilding the GGUF blob. A second pull of a model with the same GGUF
# downloads only the new small layers. The name without a host comes from $MSTORE_REGISTRY.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_registry.sh"

S260K=$MODELS/stories260K/stories260K.gguf
[ -f "$S260K" ] || skip "stories260K not found under $MODELS"
GGUF_DIGEST="sha256:$(sha256sum "$S260K" | cut -d' ' -f1)"
registry_start

# {{ .Prompt }} wrapped in markers no chat family has: only the Go template renders it.
printf '%s' '{{ if .System }}SYS {{ .System }}
{{ end }}Q: {{ .Prompt }}
A:{{ .Response }}' >"$WORK/tmpl"
ollama_model "$WORK/ol" "$S260K" "$WORK/tmpl" '{"temperature":0,"num_predict":12}' "Be brief."
mdigest=$(curl_push "$WORK/ol" library/s260k latest)

MSTORE_REGISTRY=$REG_HOST expect_ok mstore pull --insecure s260k
contains "$out" "pulled s260k:latest $mdigest"
contains "$out" "split the GGUF into"
contains "$out" "downloaded 5 blobs"
[ ! -e "$MSTORE_HOME/blobs/sha256-${GGUF_DIGEST#sha256:}" ] || fail "the whole GGUF blob is still stored"
expect_ok mstore verify
expect_ok mstore show s260k
contains "$out" "llama"
case "$out" in *amd64*) fail "show reports the Docker config's architecture: $out" ;; esac

# The same tensors as a plain import of the file: the blobs are shared, none written twice.
before=$(ls "$MSTORE_HOME/blobs" | wc -l)
expect_ok mstore import "$S260K" --name plain --quiet
after=$(ls "$MSTORE_HOME/blobs" | wc -l)
[ $((after - before)) -le 2 ] || fail "import of the same GGUF wrote $((after - before)) new blobs (config and manifest expected)"

# Byte for byte back.
expect_ok mstore export s260k --gguf "$WORK/back.gguf"
cmp -s "$S260K" "$WORK/back.gguf" || fail "exported GGUF differs from the pulled one"

# Runs (the runtime needs the config from the GGUF header).
expect_ok mstore run s260k --raw "Once upon a time" --temp 0 -n 8
[ -n "$out" ] || fail "no output"
expect_ok mstore run plain --raw "Once upon a time" --temp 0 -n 8
plain_out=$out
expect_ok mstore run s260k --raw "Once upon a time" --temp 0 -n 8
[ "$out" = "$plain_out" ] || fail "pulled model answers '$out', the imported file '$plain_out'"

# Its template, params and system prompt: the answer is the file's answer to the rendering
# ollama would send, greedy (temperature 0) and 12 tokens long (num_predict); a flag still wins.
expect_ok mstore run plain --raw $'SYS Be brief.\nQ: Once upon a time\nA:' --temp 0 -n 12
want=$out
want_brief=$out
expect_ok mstore run s260k "Once upon a time" --verbose
[ "$out" = "$want" ] || fail "templated run '$out' != raw rendering '$want'"
contains "$err" "chat template:        ollama"
contains "$err" "eval count:           12 token(s)"
expect_ok mstore run s260k "Once upon a time" -n 3 --verbose
contains "$err" "eval count:           3 token(s)"
expect_ok mstore run plain --raw $'SYS Be nice.\nQ: Once upon a time\nA:' --temp 0 -n 12
want=$out
expect_ok mstore run s260k "Once upon a time" --system "Be nice."
[ "$out" = "$want" ] || fail "--system run '$out' != raw rendering '$want'"
expect_ok mstore show s260k --parameters
contains "$out" "num_predict"
expect_ok mstore show s260k --system
[ "$out" = "Be brief." ] || fail "show --system: '$out'"
expect_ok mstore show s260k --template
contains "$out" "Q: {{ .Prompt }}"
expect_ok mstore show s260k
contains "$out" "pulled manifest        $mdigest"

# run of a model not in the store: without a terminal it says how to pull it; on one it
# asks, and pulls from $MSTORE_REGISTRY when told yes, then runs.
HOME1=$MSTORE_HOME
export MSTORE_HOME=$WORK/home-run
MSTORE_REGISTRY=$REG_HOST expect_fail 1 "pull it from $REG_HOST with: mstore pull s260k" mstore run s260k "Hi" </dev/null
expect_ok mstore list
[ -z "$(printf '%s' "$out" | grep s260k || true)" ] || fail "run without a terminal pulled"
MSTORE_REGISTRY=$REG_HOST "$PY" - "$MSTORE_BIN" >"$WORK/pty.out" <<'PYEOF' || fail "pty run failed: $(cat "$WORK/pty.out")"
import os, pty, select, sys, time
pid, fd = pty.fork()
if pid == 0:
    os.execv(sys.argv[1], [sys.argv[1], "run", "--insecure", "s260k", "Once upon a time"])
buf, answered, end = b"", False, time.time() + 120
while time.time() < end:
    r, _, _ = select.select([fd], [], [], 0.2)
    if r:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        buf += chunk
    if not answered and b"[y/N]" in buf:
        os.write(fd, b"y\n")
        answered = True
_, status = os.waitpid(pid, 0)
sys.stdout.write(buf.decode("utf-8", "replace"))
sys.exit(0 if answered and os.WEXITSTATUS(status) == 0 else 1)
PYEOF
contains "$(cat "$WORK/pty.out")" "Pull it from $REG_HOST? [y/N]"
contains "$(tr -d '\r' <"$WORK/pty.out")" "$want_brief"
expect_ok mstore list
contains "$out" "s260k:latest"
export MSTORE_HOME=$HOME1

# Push back: the manifest as received, same digest; the registry gets the GGUF blob again.
expect_ok mstore push --insecure s260k "$REG_HOST/other/s260k:v1"
contains "$out" "$mdigest"
got=$(curl -sSf "http://$REG_HOST/v2/other/s260k/blobs/$GGUF_DIGEST" | sha256sum | cut -d' ' -f1)
[ "sha256:$got" = "$GGUF_DIGEST" ] || fail "the registry's GGUF blob hashes to sha256:$got"
[ ! -e "$MSTORE_HOME/blobs/sha256-${GGUF_DIGEST#sha256:}" ] || fail "the rebuilt GGUF blob stayed in the store"
expect_ok mstore verify

# mstore's own Docker v2 form (config blob an mstore config under the Docker media type), pulled
# into a fresh home: runs as the imported model does; pushed back with the same digest.
expect_ok mstore push --insecure --format docker plain "$REG_HOST/dock/plain:v1"
ddigest=${out##* }
HOME1=$MSTORE_HOME
export MSTORE_HOME=$WORK/home-docker
expect_ok mstore pull --insecure "$REG_HOST/dock/plain:v1"
contains "$out" "pulled $REG_HOST/dock/plain:v1 $ddigest"
expect_ok mstore show "$REG_HOST/dock/plain:v1"
contains "$out" "llama"
expect_ok mstore run "$REG_HOST/dock/plain:v1" --raw "Once upon a time" --temp 0 -n 8
[ "$out" = "$plain_out" ] || fail "docker-form model answers '$out', the imported file '$plain_out'"
expect_ok mstore push --insecure "$REG_HOST/dock/plain:v1" "$REG_HOST/dock/again:v1"
contains "$out" "$ddigest"
expect_ok mstore verify
export MSTORE_HOME=$HOME1

# A second model with the same GGUF and other params: only the new small blobs come down.
proxy_start --log "$WORK/proxy.bytes"
ollama_model "$WORK/ol2" "$S260K" "$WORK/tmpl" '{"temperature":0,"num_predict":5}'
m2=$(curl_push "$WORK/ol2" library/s260k v2)
MSTORE_REGISTRY=$PROXY_HOST expect_ok mstore pull --insecure s260k:v2
contains "$out" "pulled s260k:v2 $m2"
contains "$out" "split by an earlier pull"
contains "$out" "downloaded 2 blobs"
sleep 0.3
sent=$(awk '{s+=$1} END {print s+0}' "$WORK/proxy.bytes")
[ "$sent" -lt 100000 ] || fail "second pull moved $sent bytes (the GGUF is $(stat -c %s "$S260K"))"
expect_ok mstore export s260k:v2 --gguf "$WORK/back2.gguf"
cmp -s "$S260K" "$WORK/back2.gguf" || fail "second model's export differs"

# The earlier split is reused only when every blob of it is intact: with one tensor blob
# damaged in place, a third model of the same GGUF downloads and splits it again, which repairs
# the blob (verify passes after).
tb=$("$PY" -c 'import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
print(c.execute("SELECT blob_digest FROM tensors ORDER BY nbytes DESC LIMIT 1").fetchone()[0])' "$MSTORE_HOME/index.db")
flip_byte "$MSTORE_HOME/blobs/sha256-${tb#sha256:}" 100
run "$MSTORE_BIN" verify
[ "$rc" -ne 0 ] || fail "verify passed a damaged tensor blob"
contains "$out$err" "${tb#sha256:}"
ollama_model "$WORK/ol3" "$S260K" "$WORK/tmpl" '{"temperature":0,"num_predict":6}'
m3=$(curl_push "$WORK/ol3" library/s260k v3)
MSTORE_REGISTRY=$REG_HOST expect_ok mstore pull --insecure s260k:v3
contains "$out" "pulled s260k:v3 $m3"
contains "$out" "split the GGUF into"
expect_ok mstore verify

# A GGUF layer altered in the registry's storage is refused before any split: no tensor blob,
# no name, the store as it was.
F16=$MODELS/stories260K/s260k-f16.gguf
[ -f "$F16" ] || skip "s260k-f16.gguf not found under $MODELS"
ollama_model "$WORK/bad" "$F16"
curl_push "$WORK/bad" library/bad latest >/dev/null
hex=$(head -1 "$WORK/bad/blobs.txt")
hex=${hex#sha256:}
flip_byte "$REG_ROOT/docker/registry/v2/blobs/sha256/${hex:0:2}/$hex/data" 100000
ls "$MSTORE_HOME/blobs" >"$WORK/blobs.before"
expect_ok mstore list
list_before=$out
MSTORE_REGISTRY=$REG_HOST expect_fail 1 "digest mismatch" mstore pull --insecure bad
contains "$err" "$hex"
expect_ok mstore list
[ "$out" = "$list_before" ] || fail "a refused pull changed the names: $out"
# Only the small config blob that arrived intact may be new (an unreferenced file for gc).
new=$(ls "$MSTORE_HOME/blobs" | comm -13 "$WORK/blobs.before" -)
[ "$(printf '%s' "$new" | grep -c . || true)" -le 1 ] || fail "a refused pull stored blobs: $new"
[ ! -e "$MSTORE_HOME/blobs/sha256-$hex" ] || fail "the tampered GGUF is stored"

echo "PASS $TEST_NAME"
