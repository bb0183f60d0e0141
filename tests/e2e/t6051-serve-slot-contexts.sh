#!/usr/bin/env bash
# Each request's context is its own (issue 35 part 3): a load of --parallel 2 --ctx 128 keeps a
# pool of two 128-position caches, and a request's session is sized from it for the request's
# num_ctx, without a reload. Through ollama-js, on stories260K:
#   - a prompt of 156 tokens runs with num_ctx 200 (past the load's 128: the idle session gives
#     up its room), and is refused without num_ctx ("does not fit the context of 128");
#   - num_ctx 48 refuses a 60-token prompt and cuts an answer where 48 positions are full;
#   - every answer equals the one a server started with that --ctx alone gives;
#   - two requests of 200 and 48 at once (the pool holds both) and one of 128 arriving while the
#     200 streams (it waits for the room, then runs): each equals its answer alone;
#   - /api/ps shows one load of context 128 throughout (none was reloaded); a num_ctx past the
#     pool (300) reloads, and /api/ps then shows 300;
#   - a num_ctx past the model's context length (100000 > 2048) runs in 2048, as ollama clamps it.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_serve.sh"
stories_fixture

# the references: servers whose one session has that context from the start
serve_start --parallel 1 --ctx 48
REF48=$SERVE
serve_start --parallel 1 --ctx 200
REF200=$SERVE
serve_start --parallel 2 --ctx 128
export SERVE REF48 REF200
node - <<'JS' >"$WORK/node.out" 2>&1 || fail "slot contexts: $(cat "$WORK/node.out")"
const { Ollama } = require('ollama');
const assert = require('assert');
const model = 'stories:260k';
const long = 'Once upon a time there was a little girl named Lily. '.repeat(11);   // 156 tokens
const mid = 'Once upon a time there was a little girl named Lily. '.repeat(4);   // 60 tokens
const main = new Ollama({ host: process.env.SERVE });
const gen = (o, prompt, opts, onPart) => {
  const options = Object.assign({ temperature: 0 }, opts);
  if (!onPart) return o.generate({ model, prompt, raw: true, stream: false, options });
  return (async () => {
    let text = '', parts = 0;
    for await (const p of await o.generate({ model, prompt, raw: true, stream: true, options })) {
      text += p.response;
      onPart(++parts);
    }
    return { response: text };
  })();
};
const refused = async (p, why) => {
  try { await p; } catch (e) { assert(e.message.includes(why), `refused for another reason: ${e.message}`); return; }
  assert.fail(`not refused: expected "${why}"`);
};
const ctxOfLoad = async () => {
  const ps = await main.ps();
  assert.strictEqual(ps.models.length, 1, 'one load: ' + JSON.stringify(ps));
  return ps.models[0].context_length;
};
(async () => {
  // the load: two sessions of 128
  const c128 = await gen(main, 'The cat', { num_predict: 30 });
  assert.strictEqual(await ctxOfLoad(), 128);
  // alone: each context's answers from a server that has it
  const r200 = await gen(new Ollama({ host: process.env.REF200 }), long, { num_predict: 30 });
  const r48 = await gen(new Ollama({ host: process.env.REF48 }), 'Tom', { num_predict: 100 });
  assert.strictEqual(r200.prompt_eval_count, 156);
  assert(r48.prompt_eval_count + r48.eval_count <= 49, `48 positions: ${r48.prompt_eval_count} + ${r48.eval_count}`);

  // one at a time on the load of 128
  await refused(gen(main, long, { num_predict: 5 }), 'does not fit the context of 128');
  const g200 = await gen(main, long, { num_ctx: 200, num_predict: 30 });
  assert.strictEqual(g200.response, r200.response, 'num_ctx 200 differs from a server of --ctx 200');
  await refused(gen(main, mid, { num_ctx: 48, num_predict: 5 }), 'does not fit the context of 48');
  const g48 = await gen(main, 'Tom', { num_ctx: 48, num_predict: 100 });
  assert.strictEqual(g48.response, r48.response, 'num_ctx 48 differs from a server of --ctx 48');
  assert.strictEqual(g48.eval_count, r48.eval_count);
  assert.strictEqual(await ctxOfLoad(), 128, 'a request with its own num_ctx reloaded the model');

  // at once: 200 and 48 share the pool; then 128 arrives while the 200 streams and waits for room
  const [a, b] = await Promise.all([gen(main, long, { num_ctx: 200, num_predict: 30 }, () => {}),
                                    gen(main, 'Tom', { num_ctx: 48, num_predict: 100 }, () => {})]);
  assert.strictEqual(a.response, r200.response, '200 beside 48 differs from alone');
  assert.strictEqual(b.response, r48.response, '48 beside 200 differs from alone');
  let release;
  const started = new Promise((r) => { release = r; });
  const big = gen(main, long, { num_ctx: 200, num_predict: 30 }, (k) => { if (k === 5) release(); });
  await started;
  const late = await gen(main, 'The cat', { num_predict: 30 });
  assert.strictEqual((await big).response, r200.response, 'the 200 stream changed when a 128 request waited for room');
  assert.strictEqual(late.response, c128.response, 'the 128 request that waited for room differs from alone');
  assert.strictEqual(await ctxOfLoad(), 128, 'requests at once reloaded the model');

  // past the pool of 256: a reload for that context
  const g300 = await gen(main, long, { num_ctx: 300, num_predict: 30 });
  assert.strictEqual(g300.response, r200.response, 'num_ctx 300 differs (the answer fits 200 as well)');
  assert.strictEqual(await ctxOfLoad(), 300, 'num_ctx 300 past the pool did not reload');
  // past the model's context length (2048): that length, as ollama clamps it (a chat UI sends one
  // num_ctx to every model); before, the model was unloaded and the request failed with a 500
  const gBig = await gen(main, long, { num_ctx: 100000, num_predict: 30 });
  assert.strictEqual(gBig.response, r200.response, 'num_ctx 100000 differs');
  assert.strictEqual(await ctxOfLoad(), 2048, 'num_ctx 100000 was not clamped to the model\'s 2048');
  console.log('node ok');
})().catch(e => { console.error(e); process.exit(1); });
JS
contains "$(cat "$WORK/node.out")" "node ok"
serve_alive
echo "ok $TEST_NAME"
