#!/bin/sh
# vulkan_rss.sh: peak resident memory of `mstore run --device vulkan` (through $MSTORE_DEVICE)
# on the 1.1B Q4_0 synthetic llama, against the bound the Vulkan backend promises: the model
# file + the KV cache + 15%, i.e. the weights are not copied (they are imported in place); and
# its first 16 greedy tokens, which must be the CPU's. Not a timed test: a measurement for
# BENCHMARKS.md, on whatever Vulkan device there is (lavapipe counts device memory as RSS, so
# there the bound is at its strictest).
#   usage: bench/vulkan_rss.sh [MSTORE_BIN]   (default: build/mstore)
# The model is generated once into $VK_RSS_DIR (default /tmp/mstore-vulkan-rss).
set -eu
cd "$(dirname "$0")/.."
BIN=${1:-build/mstore}
DIR=${VK_RSS_DIR:-/tmp/mstore-vulkan-rss}
MODELS=${MSTORE_TEST_MODELS:-../shared/models}
GGUF=$DIR/llama-1b-q4_0.gguf
CTX=2048
mkdir -p "$DIR"
if [ ! -f "$GGUF" ]; then
    /usr/bin/python3 "$MODELS/../tools/make_synthetic_gguf.py" --preset llama-1b --dtype q4_0 \
        --vocab "$MODELS/vocab/ggml-vocab-llama-spm.gguf" -o "$GGUF.tmp"
    mv "$GGUF.tmp" "$GGUF"
fi
export MSTORE_HOME="$DIR/home" MSTORE_NO_PROGRESS=1
"$BIN" import "$GGUF" --name synthetic:1b-q4_0 --quiet >/dev/null

# file bytes, and the f32 KV cache: 2 x layers x ctx x kv_heads x head_dim x 4
file=$(stat -c %s "$GGUF")
kv=$("$BIN" show synthetic:1b-q4_0 --json | /usr/bin/python3 -c '
import json, sys
c = json.load(sys.stdin)["config"]
hd = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
print(2 * c["num_hidden_layers"] * '"$CTX"' * c["num_key_value_heads"] * hd * 4)')
bound=$(( (file + kv) * 115 / 100 ))

run() {   # run DEVICE: prints the text on stdout; peak RSS (KiB) in $DIR/rss.DEVICE
    MSTORE_DEVICE=$1 /usr/bin/time -f %M -o "$DIR/rss.$1" \
        "$BIN" run synthetic:1b-q4_0 "Once upon a time" --raw --temp 0 -n 16 --ctx $CTX
}
cpu_text=$(run cpu)
vk_text=$(run vulkan)
for d in cpu vulkan; do
    rss=$(( $(cat "$DIR/rss.$d") * 1024 ))
    echo "$d: peak RSS $((rss >> 20)) MiB (file $((file >> 20)) MiB + KV $((kv >> 20)) MiB + 15% = $((bound >> 20)) MiB)"
done
rss=$(( $(cat "$DIR/rss.vulkan") * 1024 ))
status=0
if [ "$rss" -gt "$bound" ]; then
    echo "FAIL: vulkan peak RSS $rss bytes > bound $bound"
    status=1
fi
if [ "$cpu_text" != "$vk_text" ]; then
    printf 'FAIL: the first 16 greedy tokens differ\n  cpu:    %s\n  vulkan: %s\n' "$cpu_text" "$vk_text"
    status=1
else
    echo "same 16 greedy tokens as the CPU: $(printf '%s' "$vk_text" | head -c 120)"
fi
exit $status
