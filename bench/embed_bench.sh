#!/usr/bin/env bash
# embed_bench.sh [REPS] [THREADS]: embeddings per second for one batch of 64 short strings, mstore
# against llama.cpp's llama-embedding, on the same random-weight BERT GGUF of all-MiniLM-L6's
# shape (dim 384, 6 layers, 12 heads, FFN 1536, context 512, mean pooling, the bge vocab;
# tests/reference/make_bert_gguf.py).
#   mstore: POST /api/embed with the 64 strings to a warm `mstore serve` (one request first to
#     load the model); the time is the response's total_duration, which counts tokenizing, the
#     forward passes, pooling and the JSON.
#   llama.cpp: llama-embedding -f (one string a line) -c 512 -b 512 -ub 512; the time is its
#     "prompt eval time" (the forward passes only: its load and tokenizing are outside).
# Both at THREADS threads (default 2); REPS runs each (default 5), alternated; medians printed.
# Needs MSTORE_BIN, LLAMA_EMBEDDING (the llama-embedding binary), MSTORE_TEST_MODELS (the bge
# vocab), python3 with numpy, curl.
set -eu
REPS=${1:-5}
THREADS=${2:-2}
MSTORE_BIN=${MSTORE_BIN:-build/mstore}
LLAMA_EMBEDDING=${LLAMA_EMBEDDING:?set LLAMA_EMBEDDING to llama.cpp\'s llama-embedding binary}
MODELS=${MSTORE_TEST_MODELS:-../shared/models}
BENCH_DIR=${BENCH_DIR:-$(mktemp -d)}
SRC=$(cd "$(dirname "$0")/.." && pwd)
export MSTORE_HOME=$BENCH_DIR/home MSTORE_NO_PROGRESS=1
mkdir -p "$BENCH_DIR"
GGUF=$BENCH_DIR/minilm-shape.gguf
[ -f "$GGUF" ] || python3 "$SRC/tests/reference/make_bert_gguf.py" --vocab "$MODELS/vocab/ggml-vocab-bert-bge.gguf" \
    --out "$GGUF" --dim 384 --layers 6 --heads 12 --ffn 1536 --ctx 512 --pooling mean --seed 7 >/dev/null
"$MSTORE_BIN" import "$GGUF" --name bench:embed --quiet >/dev/null
python3 - "$BENCH_DIR" <<'PY'
import json, sys
subjects = ["The cat", "A small boat", "Our new neighbour", "The old library", "Every morning the train",
            "This recipe", "The river near the village", "Her favourite song"]
verbs = ["sleeps on the warm windowsill.", "drifts slowly across the lake.", "plays the piano at night.",
         "opens late on Sundays.", "leaves before sunrise.", "needs two eggs and some flour.",
         "floods every spring.", "reminds me of summer."]
texts = ["%s %s" % (s, v) for s in subjects for v in verbs][:64]
open(sys.argv[1] + "/texts.txt", "w").write("\n".join(texts) + "\n")
json.dump({"model": "bench:embed", "input": texts}, open(sys.argv[1] + "/req.json", "w"))
PY
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$MSTORE_BIN" serve --listen "127.0.0.1:$PORT" --threads "$THREADS" >"$BENCH_DIR/serve.log" 2>&1 &
SPID=$!
trap 'kill $SPID 2>/dev/null || true' EXIT
for _ in $(seq 100); do curl -s "http://127.0.0.1:$PORT/api/version" >/dev/null && break; sleep 0.1; done
curl -s -d @"$BENCH_DIR/req.json" "http://127.0.0.1:$PORT/api/embed" >/dev/null   # load
: >"$BENCH_DIR/mstore.s"
: >"$BENCH_DIR/llama.s"
for _ in $(seq "$REPS"); do
    curl -s -d @"$BENCH_DIR/req.json" "http://127.0.0.1:$PORT/api/embed" |
        python3 -c 'import json, sys; d = json.load(sys.stdin); print(d["total_duration"] / 1e9, d["prompt_eval_count"])' \
            >>"$BENCH_DIR/mstore.s"
    "$LLAMA_EMBEDDING" -m "$GGUF" -f "$BENCH_DIR/texts.txt" -c 512 -b 512 -ub 512 -t "$THREADS" \
        --embd-output-format array >/dev/null 2>"$BENCH_DIR/llama.err"
    sed -n 's/.*prompt eval time = *\([0-9.]*\) ms \/ *\([0-9]*\) tokens.*/\1 \2/p' "$BENCH_DIR/llama.err" |
        awk '{print $1 / 1000, $2}' >>"$BENCH_DIR/llama.s"
done
python3 - "$BENCH_DIR" <<'PY'
import statistics, sys
d = sys.argv[1]
for who in ("mstore", "llama"):
    rows = [tuple(map(float, l.split())) for l in open("%s/%s.s" % (d, who)) if l.strip()]
    t = statistics.median(r[0] for r in rows)
    print("%-7s 64 strings (%d tokens): median %.3f s over %d runs (%s), %.0f embeddings/s" % (
        who, int(rows[0][1]), t, len(rows), ", ".join("%.3f" % r[0] for r in rows), 64 / t))
PY
