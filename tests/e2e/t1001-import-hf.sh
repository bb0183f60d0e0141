#!/usr/bin/env bash
# A Hugging Face safetensors directory imports into one blob per tensor plus config,
# tokenizer, template and generation-config layers; re-importing stores nothing new.
. "$(dirname "$0")/lib.sh"

make_hf "$WORK/single"
make_hf "$WORK/sharded" --shards 3
make_hf "$WORK/bf16" --dtype BF16 --seed 2

expect_ok mstore import "$WORK/single" --name tiny
digest=$out
case "$digest" in sha256:????????????????????????????????????????????????????????????????) ;; *) fail "digest: $digest" ;; esac
nblobs=$(ls "$MSTORE_HOME/blobs" | wc -l)
# 21 tensors (2 layers) + config + tokenizer + tokenizer config + template + generation config + manifest
[ "$nblobs" -eq 27 ] || fail "expected 27 blobs, have $nblobs"
[ -z "$(ls "$MSTORE_HOME/tmp")" ] || fail "tmp/ not empty after import"

# Re-importing the same directory gives the same manifest and writes nothing.
expect_ok mstore import "$WORK/single" --name tiny:again
[ "$out" = "$digest" ] || fail "re-import gave $out, first import gave $digest"
[ "$(ls "$MSTORE_HOME/blobs" | wc -l)" -eq 27 ] || fail "re-import wrote new blobs"
# The same tensors in shards: the same tensor blobs; only the config (which names the source
# directory) and the manifest are new.
expect_ok mstore import "$WORK/sharded" --name tiny:sharded
[ "$(ls "$MSTORE_HOME/blobs" | wc -l)" -eq 29 ] || fail "sharded import wrote tensor blobs again"

expect_ok mstore import "$WORK/bf16" --name example.com/team/tiny-bf16:v1
expect_ok mstore list
contains "$out" "tiny:latest"
contains "$out" "tiny:sharded"
contains "$out" "example.com/team/tiny-bf16:v1"
contains "$out" "${digest:7:12}"

expect_ok mstore show tiny
contains "$out" "architecture           llama"
contains "$out" "layers                 2"
contains "$out" "$digest"
expect_ok mstore show tiny --tensors
contains "$out" "model.layers.1.mlp.down_proj.weight"
line=$(printf '%s\n' "$out" | grep ' model.layers.0.self_attn.k_proj.weight ')
contains "$line" "F32"
contains "$line" "[8, 16]"
expect_ok mstore show example.com/team/tiny-bf16:v1 --tensors --json
contains "$out" '"dtype": "BF16"'
contains "$out" '"architecture": "llama"'
"$PY" -c 'import json,sys; d=json.load(sys.stdin); assert len(d["tensors"]) == 21, len(d["tensors"])' <<<"$out" \
    || fail "show --json does not list 21 tensors"

# Each tensor blob is a safetensors file whose data is the source bytes, aligned to 64.
"$PY" - "$WORK/single/model.safetensors" "$MSTORE_HOME/blobs" <<'PYEOF' || fail "blob bytes differ from the source"
import json, os, struct, sys
src = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", src[:8])[0]
hdr = json.loads(src[8:8 + n]); hdr.pop("__metadata__", None)
want = {k: src[8 + n + v["data_offsets"][0]: 8 + n + v["data_offsets"][1]] for k, v in hdr.items()}
found = set()
for f in os.listdir(sys.argv[2]):
    b = open(os.path.join(sys.argv[2], f), "rb").read()
    if len(b) < 8: continue
    m = struct.unpack("<Q", b[:8])[0]
    if m > len(b) - 8: continue
    try: h = json.loads(b[8:8 + m])
    except Exception: continue
    if not isinstance(h, dict): continue
    for k, v in h.items():
        if k in want:   # the BF16 model has tensors of the same names: match by bytes
            assert (8 + m) % 64 == 0 and v["data_offsets"][0] % 64 == 0, "unaligned"
            if b[8 + m + v["data_offsets"][0]: 8 + m + v["data_offsets"][1]] == want[k]:
                found.add(k)
assert found == set(want), sorted(set(want) - found)
PYEOF
echo "ok $TEST_NAME"
