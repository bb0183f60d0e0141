#!/usr/bin/env bash
# Bad input is refused with a message naming the file and field; the store is unchanged.
. "$(dirname "$0")/lib.sh"

make_hf "$WORK/good"
expect_ok mstore import "$WORK/good" --name good
before=$(store_state)

refuse() {   # refuse SUBSTRING DIR [NAME]
    expect_fail 1 "$1" mstore import "$2" --name "${3:-bad}"
    [ "$(store_state)" = "$before" ] || fail "store changed after refusing $2"
}

# Bad names: usage of the name, not the file.
refuse "name '../x'" "$WORK/good" "../x"
refuse "name 'a:b:c'" "$WORK/good" "a:b:c"

# Missing config.json.
cp -r "$WORK/good" "$WORK/noconfig"; rm "$WORK/noconfig/config.json"
refuse "noconfig/config.json: missing" "$WORK/noconfig"

# config.json that is not JSON.
cp -r "$WORK/good" "$WORK/badjson"; echo '{"model_type": ' > "$WORK/badjson/config.json"
refuse "badjson/config.json: line" "$WORK/badjson"

# Truncated safetensors: cut inside the data.
cp -r "$WORK/good" "$WORK/trunc"; truncate -s 3000 "$WORK/trunc/model.safetensors"
refuse "model.safetensors" "$WORK/trunc"

# Header size that lies (larger than the file).
cp -r "$WORK/good" "$WORK/liar"
"$PY" -c 'import struct,sys; f=open(sys.argv[1],"r+b"); f.write(struct.pack("<Q", 1<<40))' "$WORK/liar/model.safetensors"
refuse "model.safetensors: header size" "$WORK/liar"

# Offsets past the end of the data: rewrite one data_offsets end inside the header.
cp -r "$WORK/good" "$WORK/past"
"$PY" - "$WORK/past/model.safetensors" <<'PYEOF'
import json, struct, sys
p = sys.argv[1]; b = bytearray(open(p, "rb").read())
n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
h["model.norm.weight"]["data_offsets"][1] += 10**9
h["model.norm.weight"]["shape"] = [(h["model.norm.weight"]["data_offsets"][1] - h["model.norm.weight"]["data_offsets"][0]) // 4]
nh = json.dumps(h, separators=(",", ":")).encode()
open(p, "wb").write(struct.pack("<Q", len(nh)) + nh + bytes(b[8 + n:]))
PYEOF
refuse "model.norm.weight" "$WORK/past"

# Sharded: an index naming an absent shard, and a tensor in two shards.
make_hf "$WORK/shards" --shards 2
rm "$WORK/shards/model-00002-of-00002.safetensors"
refuse "model-00002-of-00002.safetensors: shard named by model.safetensors.index.json is missing" "$WORK/shards"
make_hf "$WORK/dup" --shards 2
"$PY" - "$WORK/dup" <<'PYEOF'
import json, os, struct, sys
d = sys.argv[1]
a = open(os.path.join(d, "model-00001-of-00002.safetensors"), "rb").read()
n = struct.unpack("<Q", a[:8])[0]; h = json.loads(a[8:8 + n]); h.pop("__metadata__")
name = sorted(h)[0]; t = h[name]
data = a[8 + n + t["data_offsets"][0]: 8 + n + t["data_offsets"][1]]
p = os.path.join(d, "model-00002-of-00002.safetensors"); b = open(p, "rb").read()
m = struct.unpack("<Q", b[:8])[0]; g = json.loads(b[8:8 + m]); body = b[8 + m:]
g[name] = {"dtype": t["dtype"], "shape": t["shape"], "data_offsets": [len(body), len(body) + len(data)]}
gh = json.dumps(g, separators=(",", ":")).encode()
open(p, "wb").write(struct.pack("<Q", len(gh)) + gh + body + data)
PYEOF
refuse "appears in more than one shard" "$WORK/dup"

# Not a model at all.
echo "hello" > "$WORK/notamodel"
refuse "notamodel: magic 0x6c6c6568: not a GGUF file" "$WORK/notamodel"
refuse "nothere" "$WORK/nothere"

# Unknown names are clear errors for every verb that takes one.
expect_fail 1 "not found" mstore show nosuch
expect_fail 1 "not found" mstore rm nosuch
expect_fail 1 "not found" mstore cp nosuch other
[ "$(store_state)" = "$before" ] || fail "store changed after refusing unknown names"
echo "ok $TEST_NAME"
