#!/usr/bin/env bash
# The interactive chat edits lines with libedit (issue 18 item 27): the up arrow recalls the
# previous message instead of printing ^[[A, and """ starts a message of several lines as in
# ollama. Keys are typed only once the terminal is in the editor's raw mode (no timing).
. "$(dirname "$0")/lib.sh"
S260K=$MODELS/stories260K/stories260K.gguf
[ -f "$S260K" ] || skip "stories260K not found under $MODELS"
"$PY" -c 'import pty; pty.openpty()' 2>/dev/null || skip "no pseudo-terminals (is devpts mounted?)"
MKGGUF=${MSTORE_BUILD:-$(dirname "$MSTORE_BIN")}/test_chat
[ -x "$MKGGUF" ] || skip "test_chat (the fixture writer) not built"
MSTORE_CHAT_WRITE_GGUF=$WORK/chatml.gguf "$MKGGUF" || fail "could not write the ChatML GGUF"
expect_ok mstore import "$WORK/chatml.gguf" --name chatml --quiet
expect_ok mstore run chatml "Once upon a time" --temp 0 -n 8
once=$out
expect_ok mstore run chatml $'One\nTwo' --temp 0 -n 8
multi=$out

TERM=xterm "$PY" - "$MSTORE_BIN" >"$WORK/edit.json" 2>"$WORK/edit.err" <<'PYEOF' || fail "pty driver: $(cat "$WORK/edit.err")"
import json, os, pty, select, subprocess, sys, termios, time
master, slave = pty.openpty()
p = subprocess.Popen([sys.argv[1], "run", "chatml", "--temp", "0", "-n", "8", "--verbose"], stdin=slave, stdout=slave,
                     stderr=subprocess.PIPE, close_fds=True)
os.close(slave)
buf = b""
def until(pred, what, limit=120):
    global buf
    end = time.time() + limit
    while time.time() < end:
        if pred():
            return
        r, _, _ = select.select([master], [], [], 0.05)
        if r:
            buf += os.read(master, 65536)
    raise SystemExit("timed out waiting for %s; got %r" % (what, buf[-300:]))
def raw():   # the editor reads keys one by one: canonical mode is off
    return not (termios.tcgetattr(master)[3] & termios.ICANON)
last = 0   # where the output stood when keys were last typed: a prompt counts only after it
def typed(keys, prompt=b">>> "):
    global buf, last
    until(lambda: buf.endswith(prompt) and len(buf) - len(prompt) >= last and raw(), "the prompt in raw mode")
    last = len(buf)
    os.write(master, keys)
typed(b"Once upon a time\r")
typed(b"\x1b[A\r")                   # up arrow: the message before, again
typed(b"/clear\r")
typed(b'"""One\r')                   # several lines, one message
typed(b'Two"""\r', prompt=b"... ")
until(lambda: buf.endswith(b">>> ") and len(buf) - 4 >= last and raw(), "the last answer")
os.write(master, b"/bye\r")
st = p.wait(timeout=60)
print(json.dumps({"out": buf.decode("utf-8", "replace").replace("\r\n", "\n"), "status": st,
                  "stderr": p.stderr.read().decode()}))
PYEOF
jq_() { "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]), end="")' "$@"; }
[ "$(jq_ "$WORK/edit.json" 'd["status"]')" = 0 ] || fail "chat exited $(jq_ "$WORK/edit.json" 'd["status"]')"
out=$(jq_ "$WORK/edit.json" 'd["out"]')
case "$out" in *'^[[A'*|*$'\x1b[A'*) fail "the up arrow was printed, not recalled: $out" ;; esac
# typed once, recalled once: the editor shows the line twice, each followed by an answer
[ "$(grep -c '^>>> Once upon a time$' <<<"$out")" = 1 ] || fail "transcript: $out"
[ "$(grep -c 'Once upon a time$' <<<"$out")" = 2 ] || fail "the up arrow did not recall the line: $out"
contains "$out" "Once upon a time
$once"
counts=$(jq_ "$WORK/edit.json" '" ".join(l.split()[3] for l in d["stderr"].splitlines() if l.startswith("prompt eval count"))')
set -- $counts
[ $# -eq 3 ] || fail "expected 3 answers, got prompt counts '$counts'"
# """ joined two lines into one message, answered as run answers that message
contains "$out" '... Two"""
'"$multi"
echo "ok $TEST_NAME"
