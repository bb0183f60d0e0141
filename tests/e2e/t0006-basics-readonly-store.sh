#!/usr/bin/env bash
# A store this process cannot write (another user's store with mode 0555, a read-only file
# system) still lists, shows, runs, tokenizes, verifies, exports elsewhere and serves, and
# leaves no trace in it (no lock, tmp/, -wal or -shm); the writing verbs say the store is
# read-only; an index too old to read without migrating names what is needed. The tests run
# as root, whom file modes do not stop: the reads run as nobody (setpriv), and a read-only
# tmpfs mount covers root. Before, every verb wanted write access and failed.
. "$(dirname "$0")/lib.sh"
src="$MODELS/stories260K/stories260K.gguf"
[ -f "$src" ] || skip "$src not found (set MSTORE_TEST_MODELS)"
[ "$(id -u)" -eq 0 ] || skip "needs root to make a store another user's (runs as root in CI)"
command -v setpriv >/dev/null || skip "no setpriv (util-linux)"
id nobody >/dev/null 2>&1 || skip "no user nobody"

# nobody may not reach the build (a checkout under /root): it runs a copy in $WORK, which is
# made world-readable below (mstore links only system libraries).

expect_ok mstore import "$src" --name s
expect_ok mstore run s "Once upon" --temp 0 -n 12
text=$out
expect_ok mstore tokenize s "Once upon a time"
tokens=$out

# Root's store, mode 0555 / 0444, read by nobody. $WORK is 0700 from mktemp.
chmod 0755 "$WORK"
mkdir -m 0755 "$WORK/bin"
install -m 0755 "$MSTORE_BIN" "$WORK/bin/mstore"
setpriv --reuid=nobody --regid=nogroup --clear-groups "$WORK/bin/mstore" --help >/dev/null 2>&1 ||
    fail "nobody cannot run a world-readable copy of mstore in $WORK/bin"
chmod -R a-w "$MSTORE_HOME"
mkdir -m 0777 "$WORK/out"
nob() { setpriv --reuid=nobody --regid=nogroup --clear-groups "$WORK/bin/mstore" "$@"; }
snapshot() { (cd "$MSTORE_HOME" && find . -printf '%p %s %m\n' | sort); }
before=$(snapshot)

expect_ok nob list
contains "$out" "s:latest"
case "$err" in *note*) fail "list of a read-only store says: $err" ;; esac
expect_ok nob show s
contains "$out" "llama"
expect_ok nob run s "Once upon" --temp 0 -n 12
[ "$out" = "$text" ] || fail "run as nobody: '$out', want '$text'"
expect_ok nob tokenize s "Once upon a time"
[ "$out" = "$tokens" ] || fail "tokenize as nobody differs"
expect_ok nob verify
expect_ok nob export s --gguf "$WORK/out/s.gguf"
[ "$(sha256sum <"$WORK/out/s.gguf")" = "$(sha256sum <"$src")" ] || fail "export as nobody differs"

port=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
# exec: $! must be the server itself. Backgrounding the nob function forked a shell whose kill
# left setpriv's mstore serving, as nobody, after the test had ended.
(exec setpriv --reuid=nobody --regid=nogroup --clear-groups "$WORK/bin/mstore" serve --listen "127.0.0.1:$port") >"$WORK/serve.log" 2>&1 &
spid=$!
trap 'kill $spid 2>/dev/null || true; wait $spid 2>/dev/null || true; rm -rf "$WORK"' EXIT
tags=""
for _ in $(seq 100); do
    tags=$(curl -sf "http://127.0.0.1:$port/api/tags" 2>/dev/null) && break
    sleep 0.1
done
contains "$tags" '"s:latest"'
curl -sf "http://127.0.0.1:$port/v2/s/manifests/latest" -o "$WORK/out/m.json" || fail "serve /v2 manifest: $(cat "$WORK/serve.log")"
# a blob upload is a write: refused, saying why
up=$(curl -s -X POST --data-binary x "http://127.0.0.1:$port/api/blobs/sha256:$(printf x | sha256sum | cut -d' ' -f1)")
contains "$up" "read-only"
kill $spid; wait $spid 2>/dev/null || true
pgrep -f "serve --listen 127.0.0.1:$port" >/dev/null && fail "mstore serve on port $port still runs after the test stopped it"

# Writing verbs: refused, naming the reason; nothing changed.
expect_fail 1 "the store is read-only" nob rm s
expect_fail 1 "the store is read-only" nob gc
expect_fail 1 "the store is read-only" nob cp s t
expect_fail 1 "the store is read-only" nob blob put "$WORK/out/m.json"   # a writer like any other
expect_fail 1 "read-only" nob import "$WORK/out/s.gguf" --name t
[ "$(snapshot)" = "$before" ] || fail "reading a read-only store changed it: $(diff <(echo "$before") <(snapshot))"

# An index older than this mstore cannot be migrated without write access: say so.
cp -a "$MSTORE_HOME" "$WORK/old"
chmod u+w "$WORK/old" "$WORK/old/index.db"
"$PY" -c 'import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute("PRAGMA user_version=0"); c.commit()' "$WORK/old/index.db"
chmod a-w "$WORK/old" "$WORK/old/index.db"
MSTORE_HOME=$WORK/old expect_fail 1 "older than this mstore" nob list
contains "$err" "write access"
# But schema 1 (the mstore before registry_blobs joined the schema) reads as it is: that
# migration added nothing reading needs.
chmod u+w "$WORK/old" "$WORK/old/index.db"
"$PY" -c 'import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute("DROP TABLE registry_blobs"); c.execute("PRAGMA user_version=1"); c.commit()' "$WORK/old/index.db"
chmod a-w "$WORK/old" "$WORK/old/index.db"
MSTORE_HOME=$WORK/old expect_ok nob list
contains "$out" "s:latest"
MSTORE_HOME=$WORK/old expect_ok nob show s

# A read-only file system: root too gets a read-only store.
chmod -R u+w "$MSTORE_HOME"
mkdir "$WORK/mnt"
if mount -t tmpfs -o size=16m tmpfs "$WORK/mnt" 2>/dev/null; then
    trap 'umount "$WORK/mnt" 2>/dev/null || true; rm -rf "$WORK"' EXIT
    cp -a "$MSTORE_HOME" "$WORK/mnt/home"
    mount -o remount,ro "$WORK/mnt" || fail "remount read-only"
    MSTORE_HOME=$WORK/mnt/home expect_ok mstore list
    contains "$out" "s:latest"
    MSTORE_HOME=$WORK/mnt/home expect_ok mstore run s "Once upon" --temp 0 -n 12
    [ "$out" = "$text" ] || fail "run on a read-only mount differs"
    MSTORE_HOME=$WORK/mnt/home expect_fail 1 "the store is read-only" mstore rm s
    umount "$WORK/mnt"
else
    echo "note: cannot mount a tmpfs here (not privileged): the read-only mount case is not run" >&2
fi
echo "ok $TEST_NAME"
