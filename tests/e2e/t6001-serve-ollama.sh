#!/usr/bin/env bash
# mstore serve through ollama-js, the client people use: generate and chat, streamed and not, at
# temperature 0 give exactly `mstore run --temp 0`'s text; list, show, ps, copy, delete, version;
# a continuing chat reuses the KV cache of its first turn; keep_alive 0 unloads.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_serve.sh"
S260K=$MODELS/stories260K/stories260K.gguf
[ -f "$S260K" ] || skip "stories260K not found under $MODELS"
command -v curl >/dev/null || skip "no curl"
npm_clients
expect_ok mstore import "$S260K" --name stories:260k --quiet
chatml_fixture

expect_ok mstore run stories:260k "Once upon a time" --temp 0 -n 24
export WANT_GEN=$out
expect_ok mstore run chatml "Once upon a time" --temp 0 -n 16
export WANT_CHAT=$out
expect_ok mstore run chatml --system "Be nice." "Hi" --temp 0 -n 16
export WANT_SYS=$out
# one session: the prompt caching below is that of one cache (t6050 has several)
serve_start --parallel 1
export SERVE

node - <<'JS' >"$WORK/node.out" 2>&1 || fail "ollama-js: $(cat "$WORK/node.out")"
const { Ollama } = require('ollama');
const assert = require('assert');
const o = new Ollama({ host: process.env.SERVE });
const eq = (got, want, what) => assert.strictEqual(got, want, `${what}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
(async () => {
  const opts = { temperature: 0, num_predict: 24 };
  // generate, not streamed and streamed
  const g = await o.generate({ model: 'stories:260k', prompt: 'Once upon a time', stream: false, options: opts });
  eq(g.response, process.env.WANT_GEN, 'generate');
  eq(g.done, true, 'generate done');
  eq(g.done_reason, 'length', 'generate done_reason');
  eq(g.eval_count, 24, 'generate eval_count');
  eq(g.prompt_eval_count, 5, 'generate prompt_eval_count');
  assert(g.total_duration > 0 && g.eval_duration > 0, 'durations');
  let text = '', last;
  for await (const part of await o.generate({ model: 'stories:260k', prompt: 'Once upon a time', stream: true, options: opts })) {
    text += part.response; last = part;
  }
  eq(text, process.env.WANT_GEN, 'generate streamed');
  eq(last.done, true, 'last part done');
  // chat on a model with a ChatML template, as `mstore run` renders it
  const msgs = [{ role: 'user', content: 'Once upon a time' }];
  const c = await o.chat({ model: 'chatml', messages: msgs, stream: false, options: { temperature: 0, num_predict: 16 } });
  eq(c.message.role, 'assistant', 'chat role');
  eq(c.message.content, process.env.WANT_CHAT, 'chat');
  text = '';
  for await (const part of await o.chat({ model: 'chatml', messages: msgs, stream: true, options: { temperature: 0, num_predict: 16 } }))
    text += part.message.content;
  eq(text, process.env.WANT_CHAT, 'chat streamed');
  const s = await o.chat({ model: 'chatml', messages: [{ role: 'system', content: 'Be nice.' }, { role: 'user', content: 'Hi' }],
                           stream: false, options: { temperature: 0, num_predict: 16 } });
  eq(s.message.content, process.env.WANT_SYS, 'chat with a system message');
  // A prompt that extends the one before it prefills only what it adds (an editor completing
  // as the user types). The tokens of "Once upon a time" begin those of the longer prompt.
  await o.generate({ model: 'stories:260k', prompt: 'Once upon a time', stream: false, options: { num_predict: 0 } });
  const ext = await o.generate({ model: 'stories:260k', prompt: 'Once upon a time, there was a cat', stream: false, options: opts });
  eq(ext.prompt_eval_count, 6, 'extended prompt: tokens prefilled');
  await o.generate({ model: 'stories:260k', prompt: 'Something else', stream: false, options: { num_predict: 0 } });
  const cold = await o.generate({ model: 'stories:260k', prompt: 'Once upon a time, there was a cat', stream: false, options: opts });
  eq(cold.prompt_eval_count, 10, 'the same prompt after another: all but the BOS they share prefilled');
  eq(ext.response, cold.response, 'extended prompt with and without the reused cache');
  // A second chat turn answers the same as the conversation sent cold (the cache is reused when
  // the first answer tokenizes as it was generated; here it need not).
  const t1 = await o.chat({ model: 'chatml', messages: msgs, stream: false, options: { temperature: 0, num_predict: 16 } });
  const turn2 = msgs.concat([{ role: 'assistant', content: t1.message.content }, { role: 'user', content: 'The end' }]);
  const t2 = await o.chat({ model: 'chatml', messages: turn2, stream: false, options: { temperature: 0, num_predict: 8 } });
  await o.generate({ model: 'chatml', prompt: 'Something else entirely', stream: false, options: { num_predict: 1 } });
  const t2b = await o.chat({ model: 'chatml', messages: turn2, stream: false, options: { temperature: 0, num_predict: 8 } });
  eq(t2b.message.content, t2.message.content, 'turn 2 after turn 1 and cold');
  // stop strings end the answer before them
  const st = await o.generate({ model: 'stories:260k', prompt: 'Once upon a time', stream: false, options: { temperature: 0, num_predict: 24, stop: ['Lily'] } });
  eq(st.response, process.env.WANT_GEN.split('Lily')[0], 'stop string');
  eq(st.done_reason, 'stop', 'stop done_reason');
  // list, show, ps, copy, delete, version
  const names = (await o.list()).models.map(m => m.name).sort();
  eq(JSON.stringify(names), JSON.stringify(['chatml:latest', 'stories:260k']), 'list');
  const sh = await o.show({ model: 'stories:260k' });
  eq(sh.details.family, 'llama', 'show family');
  eq(sh.model_info['llama.block_count'], 5, 'show block_count');
  const shc = await o.show({ model: 'chatml' });
  assert(shc.template.includes('<|im_start|>'), 'show template');
  const ps = (await o.ps()).models.map(m => m.name).sort();
  eq(JSON.stringify(ps), JSON.stringify(['chatml:latest', 'stories:260k']), 'ps');
  await o.copy({ source: 'stories:260k', destination: 'copied:v1' });
  assert((await o.list()).models.some(m => m.name === 'copied:v1'), 'copy');
  const gc = await o.generate({ model: 'copied:v1', prompt: 'Once upon a time', stream: false, options: opts });
  eq(gc.response, process.env.WANT_GEN, 'generate on the copy');
  await o.delete({ model: 'copied:v1' });
  assert(!(await o.list()).models.some(m => m.name === 'copied:v1'), 'delete');
  await assert.rejects(o.delete({ model: 'copied:v1' }), e => e.status_code === 404, 'delete twice');
  await assert.rejects(o.generate({ model: 'nosuch', prompt: 'x', stream: false }),
                       e => e.status_code === 404 && /nosuch.*not found/.test(e.error), 'unknown model');
  eq(typeof (await o.version()).version, 'string', 'version');
  // keep_alive 0 with no prompt unloads
  const u = await o.generate({ model: 'stories:260k', prompt: '', keep_alive: 0 });
  eq(u.done_reason, 'unload', 'unload');
  for (let i = 0; i < 50 && (await o.ps()).models.some(m => m.name === 'stories:260k'); i++)
    await new Promise(r => setTimeout(r, 100));
  assert(!(await o.ps()).models.some(m => m.name === 'stories:260k'), 'still loaded after keep_alive 0');
  console.log('node ok');
})().catch(e => { console.error(e); process.exit(1); });
JS
contains "$(cat "$WORK/node.out")" "node ok"
# the store is what the API said
expect_ok mstore list
case "$out" in *copied*) fail "deleted model still listed: $out" ;; esac
serve_alive
echo "ok $TEST_NAME"
