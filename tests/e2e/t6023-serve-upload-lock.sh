#!/usr/bin/env bash
# An upload to POST /api/blobs/:digest does not hold the store's lock while its bytes arrive: with
# a client that sent 3 bytes of a declared megabyte and stays connected, `mstore rm` of another
# model and `mstore gc` complete (they take the lock exclusive); the upload then finishes, lands
# and is found. A gc that must wait for the lock says whose it is ("waiting for the store's
# lock ... held by pid N (...)") instead of waiting silently, and goes on when it is released.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_serve.sh"
S260K=$MODELS/stories260K/stories260K.gguf
[ -f "$S260K" ] || skip "stories260K not found under $MODELS"
[ -r /proc/locks ] || skip "no /proc/locks"
expect_ok mstore import "$S260K" --name a --quiet
expect_ok mstore cp a b
serve_start

"$PY" - "$SERVE_PORT" "$MSTORE_BIN" "$MSTORE_HOME" <<'PYEOF' || fail "an idle upload held up rm / gc"
import hashlib, os, socket, subprocess, sys, time
port, mstore, home = int(sys.argv[1]), sys.argv[2], sys.argv[3]
body = bytes(range(256)) * 4096                     # 1 MiB
d = "sha256:" + hashlib.sha256(body).hexdigest()
tmp = os.path.join(home, "tmp")
before = set(os.listdir(tmp))
s = socket.create_connection(("127.0.0.1", port))
s.sendall(b"POST /api/blobs/%s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\n\r\n" % (d.encode(), len(body)))
s.sendall(body[:3])
# the server has the first bytes once its temp file exists (bounded wait, not a timing guess)
for _ in range(600):
    if set(os.listdir(tmp)) - before:
        break
    time.sleep(0.05)
else:
    sys.exit("30 s after 3 bytes, no temp file of the upload in tmp/")
def run(*args):
    try:
        r = subprocess.run([mstore, *args], capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        sys.exit("'mstore %s' still waits after 120 s while an upload is idle" % " ".join(args))
    assert r.returncode == 0, (args, r.returncode, r.stderr)
    return r
r = run("rm", "b")
assert "deleted 'b'" in r.stdout, r.stdout
run("gc")
assert set(os.listdir(tmp)) - before, "gc removed the temp file of an upload in progress"
s.sendall(body[3:])
reply = s.recv(4096)
assert reply.startswith(b"HTTP/1.1 201"), reply
s.close()
assert os.path.exists(os.path.join(home, "blobs", "sha256-" + d[7:])), "the finished upload is not stored"
PYEOF
expect_ok mstore list
case "$out" in *b:latest*) fail "b still listed: $out" ;; esac
contains "$out" "a:latest"

# Whose lock gc waits for: held here (shared, as an import holds it) by this python process.
"$PY" - "$MSTORE_BIN" "$MSTORE_HOME" <<'PYEOF' || fail "gc waiting for the lock"
import fcntl, os, select, subprocess, sys
mstore, home = sys.argv[1], sys.argv[2]
lock = open(os.path.join(home, "lock"), "rb")
fcntl.flock(lock, fcntl.LOCK_SH)
p = subprocess.Popen([mstore, "gc"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
ready, _, _ = select.select([p.stderr], [], [], 120)
if not ready:
    p.kill()
    sys.exit("gc waited 120 s for the lock without a word")
line = p.stderr.readline()
want = "mstore: waiting for the store's lock at %s/lock, held by pid %d (" % (home, os.getpid())
assert line.startswith(want), "gc said %r, want %r..." % (line, want)
assert "python" in line, line
assert p.poll() is None, "gc did not wait for the lock"
fcntl.flock(lock, fcntl.LOCK_UN)
out, err = p.communicate(timeout=120)
assert p.returncode == 0, (p.returncode, err)
assert out.startswith("removed "), out
PYEOF
serve_alive
echo "ok $TEST_NAME"
