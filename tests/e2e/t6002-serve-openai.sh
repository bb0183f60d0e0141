#!/usr/bin/env bash
# mstore serve through openai-node, the OpenAI client people use: chat completions and
# completions, streamed (server-sent events) and not, equal `mstore run --temp 0`; frequency and
# presence penalties equal the reference on every surface; /v1/models; errors in OpenAI's shape
# (the client raises its typed errors from them).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_serve.sh"
stories_fixture
chatml_fixture
expect_ok mstore run stories:260k "Once upon a time" --temp 0 -n 20
export WANT_GEN=$out
expect_ok mstore run chatml "Once upon a time" --temp 0 -n 16
export WANT_CHAT=$out
# Frequency and presence penalties (issue 39 item 6), greedy: the text is what ref_forward.py,
# written from OpenAI's definition apart from src/runtime, computes for "Once upon a time" (BOS
# 403 407 261 378) over the default window of 64, decoded from the GGUF's own vocab. run's flags,
# a Modelfile's PARAMETER, ollama's options and OpenAI's fields (below, in node) all give it,
# and it is not the text without penalties.
PEN='--frequency-penalty 0.75 --presence-penalty 0.5'
expect_ok mstore run stories:260k "Once upon a time" --temp 0 -n 32
plain=$out
expect_ok mstore run stories:260k "Once upon a time" --temp 0 -n 32 $PEN
export WANT_PEN=$out
if "$PY" -c 'import numpy' 2>/dev/null; then
    want=$("$PY" - "$S260K" <<'PYEOF') || fail "ref_forward.py with penalties"
import os, re, sys, types
sys.path.insert(0, os.path.join(os.environ['MSTORE_SRC'], 'tests', 'reference'))
import ref_forward as rf
g = rf.Gguf(sys.argv[1])
m = rf.Model(g, 4096)
args = types.SimpleNamespace(frequency_penalty=0.75, presence_penalty=0.5, repeat_last_n=64)
toks, out = [1, 403, 407, 261, 378], []
m.reset()
for t in toks:
    logits = m.step(t)
for _ in range(32):
    out.append(int(rf.np.argmax(rf.penalized(logits, toks + out, args))))
    logits = m.step(out[-1])
text = b''
for t in out:
    piece = g.kv['tokenizer.ggml.tokens'][t]
    b = re.fullmatch(rb'<0x([0-9A-Fa-f]{2})>', piece)
    text += bytes([int(b.group(1), 16)]) if b else piece.replace('\u2581'.encode(), b' ')
sys.stdout.write(text.decode())
PYEOF
    [ "$WANT_PEN" = "$want" ] || fail "penalized greedy text differs from the reference:
got:  $WANT_PEN
want: $want"
else
    echo "note: no numpy; the penalized text is checked across surfaces only" >&2
fi
[ "$WANT_PEN" != "$plain" ] || fail "the penalties did not change the greedy text: $plain"
printf 'FROM stories:260k\nPARAMETER frequency_penalty 0.75\nPARAMETER presence_penalty 0.5\n' >"$WORK/Modelfile"
expect_ok mstore create penalized -f "$WORK/Modelfile" --quiet
expect_ok mstore run penalized "Once upon a time" --temp 0 -n 32
[ "$out" = "$WANT_PEN" ] || fail "PARAMETER penalties: '$out', want '$WANT_PEN'"
expect_ok mstore rm penalized # /v1/models below lists what is left
serve_start
export SERVE
out=$(curl -s --max-time 60 "$SERVE/api/generate" -d '{"model": "stories:260k", "prompt": "Once upon a time", "stream": false,
      "options": {"temperature": 0, "num_predict": 32, "frequency_penalty": 0.75, "presence_penalty": 0.5}}' |
      "$PY" -c 'import json, sys; sys.stdout.write(json.load(sys.stdin)["response"])')
[ "$out" = "$WANT_PEN" ] || fail "ollama options penalties: '$out', want '$WANT_PEN'"

node - <<'JS' >"$WORK/node.out" 2>&1 || fail "openai-node: $(cat "$WORK/node.out")"
const OpenAI = require('openai');
const assert = require('assert');
const c = new OpenAI({ baseURL: process.env.SERVE + '/v1', apiKey: 'unused', maxRetries: 0 });
const eq = (got, want, what) => assert.strictEqual(got, want, `${what}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
(async () => {
  const msgs = [{ role: 'user', content: 'Once upon a time' }];
  const r = await c.chat.completions.create({ model: 'chatml', messages: msgs, temperature: 0, max_tokens: 16 });
  eq(r.object, 'chat.completion', 'object');
  eq(r.choices[0].message.content, process.env.WANT_CHAT, 'chat');
  eq(r.choices[0].finish_reason, 'length', 'finish_reason');
  eq(r.usage.completion_tokens, 16, 'usage.completion_tokens');
  assert(r.usage.prompt_tokens > 10, 'usage.prompt_tokens');
  let text = '', chunks = 0, usage = null, finish = null;
  const stream = await c.chat.completions.create({ model: 'chatml', messages: msgs, temperature: 0, max_tokens: 16,
                                                  stream: true, stream_options: { include_usage: true } });
  for await (const ch of stream) {
    chunks++;
    if (ch.usage) usage = ch.usage;
    if (ch.choices.length) {
      text += ch.choices[0].delta.content || '';
      if (ch.choices[0].finish_reason) finish = ch.choices[0].finish_reason;
    }
  }
  eq(text, process.env.WANT_CHAT, 'chat streamed');
  eq(finish, 'length', 'streamed finish_reason');
  assert(chunks > 10, `only ${chunks} chunks: not streamed`);
  eq(usage && usage.completion_tokens, 16, 'streamed usage');
  // content as an array of text parts
  const parts = await c.chat.completions.create({ model: 'chatml', messages: [{ role: 'user', content: [{ type: 'text', text: 'Once upon ' }, { type: 'text', text: 'a time' }] }], temperature: 0, max_tokens: 16 });
  eq(parts.choices[0].message.content, process.env.WANT_CHAT, 'text parts');
  // completions continue the prompt raw
  const cp = await c.completions.create({ model: 'stories:260k', prompt: 'Once upon a time', temperature: 0, max_tokens: 20 });
  eq(cp.choices[0].text, process.env.WANT_GEN, 'completion');
  text = '';
  for await (const ch of await c.completions.create({ model: 'stories:260k', prompt: 'Once upon a time', temperature: 0, max_tokens: 20, stream: true }))
    text += ch.choices[0].text;
  eq(text, process.env.WANT_GEN, 'completion streamed');
  // with stream_options.include_usage the last chunk has no choices and the usage (LangChain
  // and the AI SDK ask for it to count tokens)
  text = ''; usage = null;
  for await (const ch of await c.completions.create({ model: 'stories:260k', prompt: 'Once upon a time', temperature: 0,
                                                      max_tokens: 20, stream: true, stream_options: { include_usage: true } })) {
    if (ch.usage) { usage = ch.usage; eq(ch.choices.length, 0, 'the usage chunk has no choices'); }
    else text += ch.choices[0].text;
  }
  eq(text, process.env.WANT_GEN, 'completion streamed with usage');
  eq(usage && usage.completion_tokens, 20, 'completion streamed usage');
  assert(usage.prompt_tokens > 0 && usage.total_tokens === usage.prompt_tokens + 20, 'completion usage totals');
  const st = await c.completions.create({ model: 'stories:260k', prompt: 'Once upon a time', temperature: 0, max_tokens: 20, stop: ['Lily'] });
  eq(st.choices[0].text, process.env.WANT_GEN.split('Lily')[0], 'stop');
  eq(st.choices[0].finish_reason, 'stop', 'stop finish_reason');
  const pen = { model: 'stories:260k', prompt: 'Once upon a time', temperature: 0, max_tokens: 32,
                frequency_penalty: 0.75, presence_penalty: 0.5 };
  eq((await c.completions.create(pen)).choices[0].text, process.env.WANT_PEN, 'penalties');
  text = '';
  for await (const ch of await c.completions.create({ ...pen, stream: true }))
    text += ch.choices[0].text;
  eq(text, process.env.WANT_PEN, 'penalties streamed');
  await assert.rejects(c.chat.completions.create({ model: 'chatml', messages: msgs, logprobs: true, top_logprobs: 21 }),
                       e => e instanceof OpenAI.BadRequestError && /top_logprobs: expected an integer/.test(e.message),
                       'top_logprobs 21 refused');
  // models
  const ids = [];
  for await (const m of c.models.list()) ids.push(m.id);
  eq(JSON.stringify(ids.sort()), JSON.stringify(['chatml:latest', 'stories:260k']), 'models');
  eq((await c.models.retrieve('stories:260k')).id, 'stories:260k', 'models.retrieve');
  // errors, as the client types them
  await assert.rejects(c.chat.completions.create({ model: 'nosuch', messages: msgs }),
                       e => e instanceof OpenAI.NotFoundError && /not found/.test(e.message), 'unknown model');
  await assert.rejects(c.chat.completions.create({ model: 'chatml', messages: msgs, tools: [{ type: 'function', function: { name: 'f' } }] }),
                       e => e instanceof OpenAI.BadRequestError && /tools/.test(e.message), 'tools refused');
  await assert.rejects(c.chat.completions.create({ model: 'chatml', messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'data:,' } }] }] }),
                       e => e instanceof OpenAI.BadRequestError && /image_url/.test(e.message), 'images refused');
  await assert.rejects(c.chat.completions.create({ model: 'chatml', messages: msgs, temperature: 'hot' }),
                       e => e instanceof OpenAI.BadRequestError && /temperature/.test(e.message), 'wrong type');
  console.log('node ok');
})().catch(e => { console.error(e); process.exit(1); });
JS
contains "$(cat "$WORK/node.out")" "node ok"
serve_alive
echo "ok $TEST_NAME"
