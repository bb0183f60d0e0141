#!/usr/bin/env bash
# 16 streaming chats at once on stories260K (one load shared by all, requests queued on the
# model): every one completes with the text `mstore run --temp 0` gives for its own prompt, and
# the server holds one copy of the model.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_serve.sh"
S260K=$MODELS/stories260K/stories260K.gguf
[ -f "$S260K" ] || skip "stories260K not found under $MODELS"
npm_clients
chatml_fixture
prompts=("Once upon a time" "The cat sat" "Lily and Ben" "One day a dog")
want=()
for p in "${prompts[@]}"; do
    expect_ok mstore run chatml "$p" --temp 0 -n 32
    want+=("$out")
done
export PROMPTS_JSON WANTS_JSON
PROMPTS_JSON=$("$PY" -c 'import json,sys; print(json.dumps(sys.argv[1:]))' "${prompts[@]}")
WANTS_JSON=$("$PY" -c 'import json,sys; print(json.dumps(sys.argv[1:]))' "${want[@]}")
serve_start
export SERVE
node - <<'JS' >"$WORK/node.out" 2>&1 || fail "16 chats: $(cat "$WORK/node.out")"
const { Ollama } = require('ollama');
const OpenAI = require('openai');
const assert = require('assert');
const prompts = JSON.parse(process.env.PROMPTS_JSON), wants = JSON.parse(process.env.WANTS_JSON);
(async () => {
  const one = async (i) => {
    const k = i % prompts.length, msgs = [{ role: 'user', content: prompts[k] }];
    let text = '', parts = 0;
    if (i % 2 === 0) {   // half through ollama-js, half through openai-node, each its own client
      const o = new Ollama({ host: process.env.SERVE });
      for await (const p of await o.chat({ model: 'chatml', messages: msgs, stream: true, options: { temperature: 0, num_predict: 32 } })) {
        text += p.message.content; parts++;
      }
    } else {
      const c = new OpenAI({ baseURL: process.env.SERVE + '/v1', apiKey: 'x', maxRetries: 0 });
      for await (const ch of await c.chat.completions.create({ model: 'chatml', messages: msgs, temperature: 0, max_tokens: 32, stream: true })) {
        text += ch.choices[0].delta.content || ''; parts++;
      }
    }
    assert.strictEqual(text, wants[k], `chat ${i} ("${prompts[k]}")`);
    assert(parts > 5, `chat ${i}: ${parts} parts, not streamed`);
  };
  await Promise.all(Array.from({ length: 16 }, (_, i) => one(i)));
  const ps = await new Ollama({ host: process.env.SERVE }).ps();
  assert.strictEqual(ps.models.length, 1, 'one load for all: ' + JSON.stringify(ps));
  console.log('node ok');
})().catch(e => { console.error(e); process.exit(1); });
JS
contains "$(cat "$WORK/node.out")" "node ok"
[ "$(grep -c 'generated, length' "$SERVE_LOG")" = 16 ] || fail "not 16 generations in the log: $(cat "$SERVE_LOG")"
serve_alive
echo "ok $TEST_NAME"
