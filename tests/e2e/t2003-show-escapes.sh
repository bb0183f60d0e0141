#!/usr/bin/env bash
# Strings from a model's files reach the terminal escaped: an architecture and a tensor name
# holding terminal escape sequences (clear screen, set the window title, a C1 CSI) print as
# \xNN in show and show --tensors, as \u escapes in show --json.
. "$(dirname "$0")/lib.sh"

make_hf "$WORK/hf"
"$PY" - "$WORK/hf" <<'PYEOF'
import json, struct, sys
d = sys.argv[1]
c = json.load(open(d + "/config.json"))
c["model_type"] = "llama\u001b[2J\u001b]0;owned\u0007\u009b31m"
json.dump(c, open(d + "/config.json", "w"))
p = d + "/model.safetensors"
b = open(p, "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
h["extra\u001b[31m.weight"] = h.pop("model.norm.weight")
hb = json.dumps(h).encode()
data = b[8 + n:]
hb += b" " * (-(8 + len(hb)) % 64)   # keep the data section 64-byte aligned
open(p, "wb").write(struct.pack("<Q", len(hb)) + hb + data)
PYEOF
expect_ok mstore import "$WORK/hf" --name esc
no_raw() {   # no_raw WHAT TEXT: TEXT holds no ESC, BEL or C1 CSI byte
    if printf '%s' "$2" | LC_ALL=C grep -q "$(printf '[\033\007]\|\302\233')"; then fail "$1 printed a raw control character"; fi
}
expect_ok mstore show esc
no_raw show "$out"
contains "$out" 'llama\x1b[2J\x1b]0;owned\x07\xc2\x9b31m'
expect_ok mstore show esc --tensors
no_raw "show --tensors" "$out"
contains "$out" 'extra\x1b[31m.weight'
expect_ok mstore show esc --json
no_raw "show --json" "$out"
contains "$out" 'llama\u001B[2J'
echo "ok $TEST_NAME"
