#!/usr/bin/env bash
# serve_bench.sh GGUF [N_TOKENS] [REPS]: mstore serve against mstore run on one model.
#   - time to first token (TTFT) and decode tokens/s through ollama's /api/generate and
#     /api/chat and OpenAI's /v1/chat/completions and /v1/completions (streamed, the real npm
#     clients ollama and openai), beside `mstore run` (first byte on stdout; its --verbose rate)
#   - requests/s of GET /api/tags with wrk (Debian's wrk), 2 threads, 16 connections, 10 s
#   - the server's RSS with the model loaded, before and after 16 concurrent streaming chats
# Needs MSTORE_BIN, node + npm (installs ollama and openai under $BENCH_DIR), wrk for the tags rate.
set -eu
GGUF=$1
N=${2:-64}
REPS=${3:-5}
MSTORE_BIN=${MSTORE_BIN:-build/mstore}
BENCH_DIR=${BENCH_DIR:-$(mktemp -d)}
export MSTORE_HOME=$BENCH_DIR/home MSTORE_NO_PROGRESS=1
mkdir -p "$BENCH_DIR"
"$MSTORE_BIN" import "$GGUF" --name bench:model --quiet >/dev/null
[ -f "$BENCH_DIR/npm/node_modules/openai/package.json" ] ||
    npm install --prefix "$BENCH_DIR/npm" --no-audit --no-fund --loglevel=error ollama@0.6 openai@6 >/dev/null
export NODE_PATH=$BENCH_DIR/npm/node_modules
PROMPT="Once upon a time"

echo "== mstore run ($REPS runs, $N tokens, temp 0)"
for i in $(seq "$REPS"); do
    python3 - "$MSTORE_BIN" "$N" "$PROMPT" <<'PY'
import subprocess, sys, time
t0 = time.time()
p = subprocess.Popen([sys.argv[1], "run", "bench:model", sys.argv[3], "--temp", "0", "-n", sys.argv[2], "--verbose"],
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
first = p.stdout.read(1)
t1 = time.time()
rest = p.stdout.read(); err = p.stderr.read().decode(); p.wait()
rate = [l.split()[2] for l in err.splitlines() if l.startswith("eval rate")][0]
print("run  ttft_ms %.1f  tok_s %s" % ((t1 - t0) * 1e3, rate))
PY
done

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$MSTORE_BIN" serve --listen 127.0.0.1:$PORT >"$BENCH_DIR/serve.log" 2>&1 &
SPID=$!
trap 'kill $SPID 2>/dev/null || true' EXIT
for _ in $(seq 100); do curl -s "http://127.0.0.1:$PORT/api/version" >/dev/null && break; sleep 0.1; done
export SERVE=http://127.0.0.1:$PORT N REPS PROMPT
rss() { awk '/VmRSS|VmHWM/{printf "%s %s %s  ", $1, $2, $3}' /proc/$SPID/status; echo; }
echo "== server RSS before any load: $(rss)"
echo "== mstore serve (model loaded by a first request, then $REPS streamed requests per API)"
node - <<'JS'
const { Ollama } = require('ollama');
const OpenAI = require('openai');
const o = new Ollama({ host: process.env.SERVE });
const c = new OpenAI({ baseURL: process.env.SERVE + '/v1', apiKey: 'x', maxRetries: 0 });
const N = Number(process.env.N), REPS = Number(process.env.REPS), P = process.env.PROMPT;
const msgs = [{ role: 'user', content: P }];
async function measure(name, start) {
  const rows = [];
  for (let r = 0; r < REPS; r++) {
    const t0 = performance.now();
    let first = 0, n = 0;
    for await (const text of await start()) {
      if (!text) continue;
      if (!first) first = performance.now();
      n++;
    }
    const t1 = performance.now();
    rows.push({ ttft: first - t0, toks: (n - 1) / ((t1 - first) / 1000) });
  }
  rows.sort((a, b) => a.ttft - b.ttft);
  const med = rows[Math.floor(rows.length / 2)];
  const toks = rows.map(r => r.toks).sort((a, b) => a - b)[Math.floor(rows.length / 2)];
  console.log(`${name.padEnd(22)} ttft_ms ${med.ttft.toFixed(1)}  tok_s ${toks.toFixed(1)}  (median of ${REPS})`);
}
async function* map(it, f) { for await (const x of it) yield f(x); }
(async () => {
  await o.generate({ model: 'bench:model', prompt: P, stream: false, options: { num_predict: 1 } });   // load
  const opt = { temperature: 0, num_predict: N };
  await measure('/api/generate', async () => map(await o.generate({ model: 'bench:model', prompt: P, stream: true, options: opt }), p => p.response));
  await measure('/api/chat', async () => map(await o.chat({ model: 'bench:model', messages: msgs, stream: true, options: opt }), p => p.message.content));
  await measure('/v1/chat/completions', async () => map(await c.chat.completions.create({ model: 'bench:model', messages: msgs, temperature: 0, max_tokens: N, stream: true }), ch => ch.choices[0] && ch.choices[0].delta.content));
  await measure('/v1/completions', async () => map(await c.completions.create({ model: 'bench:model', prompt: P, temperature: 0, max_tokens: N, stream: true }), ch => ch.choices[0] && ch.choices[0].text));
})().catch(e => { console.error(e); process.exit(1); });
JS
echo "== server RSS with the model loaded: $(rss)"
node - <<'JS'
const { Ollama } = require('ollama');
(async () => {
  const t0 = performance.now();
  await Promise.all(Array.from({ length: 16 }, async () => {
    const o = new Ollama({ host: process.env.SERVE });
    for await (const p of await o.chat({ model: 'bench:model', stream: true, messages: [{ role: 'user', content: process.env.PROMPT }],
                                         options: { temperature: 0, num_predict: Number(process.env.N) } })) { }
  }));
  console.log(`16 concurrent streamed chats of ${process.env.N} tokens: ${((performance.now() - t0) / 1000).toFixed(2)} s`);
})();
JS
echo "== server RSS after 16 concurrent clients: $(rss)"
if command -v wrk >/dev/null; then
    echo "== wrk GET /api/tags (2 threads, 16 connections, 10 s)"
    wrk -t2 -c16 -d10s "$SERVE/api/tags" | grep -E "Requests/sec|Latency|requests in"
fi
