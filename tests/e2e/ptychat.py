#!/usr/bin/env python3
"""ptychat.py: drive an interactive `mstore run` through a pseudo-terminal.

usage: ptychat.py OUT.json -- COMMAND...   (input lines on stdin, one per turn)

Starts COMMAND on a pty (so that it sees a terminal), waits for each ">>> " prompt, types the
next line, and records what the program wrote in reply. After the last line it closes the
terminal's input (Ctrl-D) unless the last line was /bye. Writes {"turns": [{"input", "output"}],
"stderr": ..., "status": ...} to OUT.json; stderr goes to a pipe, not the pty.
"""
import json
import os
import pty
import select
import subprocess
import sys
import time

PROMPT = b">>> "


def read_until_prompt(fd, proc, timeout=120):
    buf = b""
    end = time.time() + timeout
    while time.time() < end:
        r, _, _ = select.select([fd], [], [], 0.2)
        if r:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                return buf, True
            if not chunk:
                return buf, True
            buf += chunk
            if buf.endswith(PROMPT):
                return buf[: -len(PROMPT)], False
        elif proc.poll() is not None:
            return buf, True
    raise SystemExit("ptychat: timed out waiting for the prompt; got %r" % buf[-400:])


def main():
    out_path = sys.argv[1]
    cmd = sys.argv[sys.argv.index("--") + 1:]
    lines = sys.stdin.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    master, slave = pty.openpty()
    proc = subprocess.Popen(cmd, stdin=slave, stdout=slave, stderr=subprocess.PIPE, close_fds=True)
    os.close(slave)
    turns = []
    banner, ended = read_until_prompt(master, proc)
    for line in lines:
        if ended:
            break
        os.write(master, line.encode() + b"\n")
        text, ended = read_until_prompt(master, proc)
        text = text.replace(b"\r\n", b"\n")
        echo = line.encode() + b"\n"
        if text.startswith(echo):   # the terminal echoes what was typed
            text = text[len(echo):]
        turns.append({"input": line, "output": text.decode("utf-8", "replace")})
    if not ended:
        os.write(master, b"\x04")   # Ctrl-D: end of input
    try:
        status = proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        status = -9
    err = proc.stderr.read().decode("utf-8", "replace")
    os.close(master)
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump({"banner": banner.decode("utf-8", "replace"), "turns": turns, "stderr": err,
                   "status": status}, f, indent=1)


if __name__ == "__main__":
    main()
