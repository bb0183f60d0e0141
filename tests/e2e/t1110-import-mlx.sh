#!/usr/bin/env bash
# MLX-quantized directories (as mlx-lm's convert writes them) import into one combined blob per
# quantized tensor and one pack per layer of experts; bad input is refused, the store unchanged.
. "$(dirname "$0")/lib.sh"


make_mlx "$WORK/q4" --shards 2 --override model.layers.0.mlp.down_proj=8/64 --override lm_head=false
expect_ok mstore import "$WORK/q4" --name q4
expect_ok mstore show q4 --tensors --verbose
contains "$out" "source quantization    affine, 4 bits, group size 32, 2 per-module overrides"
line=$(printf '%s\n' "$out" | grep ' model.layers.0.mlp.down_proj.weight ')
contains "$line" "int8"
contains "$line" "[64, 128]"
line=$(printf '%s\n' "$out" | grep ' model.layers.1.mlp.down_proj.weight.scale ')
contains "$line" "F16"
contains "$line" "[64, 4]"
contains "$(printf '%s\n' "$out" | grep ' lm_head.weight ')" "F16"
# GGUF has no MLX affine types: export says that, not that a weight is an expert pack.
expect_fail 1 "quantization (group size 32) has no GGUF equivalent" mstore export q4 --gguf "$WORK/q4.gguf"
case "$err" in *"expert pack"*) fail "export of an MLX-quantized weight blames an expert pack: $err" ;; esac
[ ! -e "$WORK/q4.gguf" ] || fail "a refused export left $WORK/q4.gguf"
expect_ok mstore show q4 --json
contains "$out" '"format": "mlx"'
contains "$out" '"int4": 14'
contains "$out" '"int8": 1'

# The combined blob holds the source triplet's bytes, renamed .scale/.bias, with its metadata.
"$PY" - "$WORK/q4" "$MSTORE_HOME/blobs" <<'PYEOF' || fail "combined blobs differ from the source triplets"
import json, os, struct, sys
src = {}
for f in os.listdir(sys.argv[1]):
    if not f.endswith(".safetensors"): continue
    b = open(os.path.join(sys.argv[1], f), "rb").read(); n = struct.unpack("<Q", b[:8])[0]
    for k, v in json.loads(b[8:8 + n]).items():
        if k != "__metadata__": src[k] = b[8 + n + v["data_offsets"][0]: 8 + n + v["data_offsets"][1]]
seen = 0
for f in os.listdir(sys.argv[2]):
    b = open(os.path.join(sys.argv[2], f), "rb").read()
    if len(b) < 8: continue
    n = struct.unpack("<Q", b[:8])[0]
    if n > len(b) - 8: continue
    try: h = json.loads(b[8:8 + n])
    except Exception: continue
    if not isinstance(h, dict) or "__metadata__" not in h or "quant_type" not in h["__metadata__"]: continue
    meta = h.pop("__metadata__")
    w = [k for k in h if k.endswith(".weight")][0]
    base = w[:-len(".weight")]
    assert meta["group_size"] == ("64" if base == "model.layers.0.mlp.down_proj" else "32"), (w, meta)
    for ours, theirs in ((w, w), (w + ".scale", base + ".scales"), (w + ".bias", base + ".biases")):
        v = h[ours]
        assert b[8 + n + v["data_offsets"][0]: 8 + n + v["data_offsets"][1]] == src[theirs], ours
    seen += 1
assert seen == 15, seen
PYEOF

# Expert packs: stacked switch_mlp and per-expert modules, one blob per layer and kind.
make_mlx "$WORK/moe" --moe 4
make_mlx "$WORK/moe2" --moe 3 --moe-form experts
expect_ok mstore import "$WORK/moe" --name moe
expect_ok mstore import "$WORK/moe2" --name moe2
"$PY" - "$MSTORE_HOME/blobs" <<'PYEOF' || fail "expert packs are not one blob per layer"
import json, os, struct, sys
names = set(); packs = {}
for f in os.listdir(sys.argv[1]):
    b = open(os.path.join(sys.argv[1], f), "rb").read()
    try: j = json.loads(b)
    except Exception: j = None
    if isinstance(j, dict) and "layers" in j:
        names |= {l.get("name") for l in j["layers"]}
        continue
    n = struct.unpack("<Q", b[:8])[0] if len(b) >= 8 else 1 << 62
    if n > len(b) - 8: continue
    try: h = json.loads(b[8:8 + n])
    except Exception: continue
    if isinstance(h, dict): packs[f] = h
for L in (0, 1):
    for p in ("model.layers.%d.mlp.experts" % L, "model.layers.%d.mlp.shared_experts" % L):
        assert p in names, p
assert not any("switch_mlp" in (n or "") for n in names), names
# mlx-lm's stacked switch_mlp is the store's mlp.experts, as a GGUF import names it
sw = [h for h in packs.values() if "model.layers.1.mlp.experts.up_proj.weight" in h][0]
assert len([k for k in sw if k != "__metadata__"]) == 9, sw.keys()
assert sw["__metadata__"]["quant_type:model.layers.1.mlp.experts.up_proj.weight"] == "int4"
assert sw["__metadata__"]["group_size:model.layers.1.mlp.experts.up_proj.weight"] == "32"
ex = [h for h in packs.values() if "model.layers.0.mlp.experts.2.down_proj.weight.bias" in h][0]
assert len([k for k in ex if k != "__metadata__"]) == 3 * 3 * 3, len(ex)
PYEOF

make_mlx "$WORK/fp4" --mode mxfp4
expect_ok mstore import "$WORK/fp4" --name fp4
expect_ok mstore show fp4 --tensors
contains "$(printf '%s\n' "$out" | grep ' model.embed_tokens.weight.scale ')" "U8"
contains "$(printf '%s\n' "$out" | grep ' model.embed_tokens.weight ')" "mxfp4"

# Refusals: the message names the file and the field; nothing changes.
before=$(store_state)
refuse() {   # refuse SUBSTRING DIR
    expect_fail 1 "$1" mstore import "$2" --name bad
    [ "$(store_state)" = "$before" ] || fail "store changed after refusing $2"
}
cfg() {   # cfg DIR PYTHON-STATEMENT-ON-q: edit config.json's quantization
    "$PY" - "$1/config.json" "$2" <<'PYEOF'
import json, sys
c = json.load(open(sys.argv[1])); q = c["quantization"]
exec(sys.argv[2])
c["quantization"] = q; c.pop("quantization_config", None)
json.dump(c, open(sys.argv[1], "w"))
PYEOF
}
cp -r "$WORK/q4" "$WORK/bits7"; cfg "$WORK/bits7" 'q["bits"] = 7'
refuse "bits7/config.json: quantization.bits: 7 is not one of 2, 3, 4, 5, 6, 8" "$WORK/bits7"
cp -r "$WORK/q4" "$WORK/g48"; cfg "$WORK/g48" 'q["group_size"] = 48'
refuse "g48/config.json: quantization.group_size: 48 is not allowed" "$WORK/g48"
cp -r "$WORK/q4" "$WORK/nobits"; cfg "$WORK/nobits" 'del q["bits"]'
refuse "nobits/config.json: quantization.bits: missing" "$WORK/nobits"
cp -r "$WORK/q4" "$WORK/g64"; cfg "$WORK/g64" 'q["group_size"] = 64; q["bits"] = 8'
refuse "group_size 64 does not divide the input dimension 32" "$WORK/g64"
cp -r "$WORK/q4" "$WORK/bits8"; cfg "$WORK/bits8" 'q["bits"] = 8'
refuse "'model.embed_tokens.scales': shape [64, 2], expected" "$WORK/bits8"
make_mlx "$WORK/noscales" --omit model.layers.1.self_attn.q_proj.scales
refuse "model.safetensors: tensor 'model.layers.1.self_attn.q_proj.weight' holds packed codes (U32) but its scales tensor is missing" "$WORK/noscales"
make_mlx "$WORK/nobias" --omit model.layers.1.self_attn.q_proj.biases
refuse "needs 'model.layers.1.self_attn.q_proj.biases', which is missing" "$WORK/nobias"
cp -r "$WORK/q4" "$WORK/noshard"; rm "$WORK/noshard/model-00002-of-00002.safetensors"
refuse "shard named by model.safetensors.index.json is missing" "$WORK/noshard"
expect_fail 1 "already quantized" mstore import "$WORK/q4" --name bad --quantize int4
echo "ok $TEST_NAME"
