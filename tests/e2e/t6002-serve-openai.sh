#!/usr/bin/env bash
# mstore serve through openai-node, the OpenAI client people use: chat completions and
# completions, streamed (server-sent events) and not, equal `mstore run --temp 0`; /v1/models;
# errors in OpenAI's shape (the client raises its typed errors from them).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_serve.sh"
S260K=$MODELS/stories260K/stories260K.gguf
[ -f "$S260K" ] || skip "stories260K not found under $MODELS"
npm_clients
expect_ok mstore import "$S260K" --name stories:260k --quiet
chatml_fixture
expect_ok mstore run stories:260k "Once upon a time" --temp 0 -n 20
export WANT_GEN=$out
expect_ok mstore run chatml "Once upon a time" --temp 0 -n 16
export WANT_CHAT=$out
serve_start
export SERVE

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
  const st = await c.completions.create({ model: 'stories:260k', prompt: 'Once upon a time', temperature: 0, max_tokens: 20, stop: ['Lily'] });
  eq(st.choices[0].text, process.env.WANT_GEN.split('Lily')[0], 'stop');
  eq(st.choices[0].finish_reason, 'stop', 'stop finish_reason');
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
