#!/usr/bin/env bash
# Continuous batching (issue 35): requests to one model run at once, their tokens decoded in
# shared passes, and every answer is exactly the one it gets alone. On stories260K with
# --parallel 4, through ollama-js and openai-node:
#   - 8 greedy requests of mixed prompt and answer lengths at once (4 run, 4 wait their turn),
#     streamed and not, over both APIs, one streamed request aborted after 8 parts: each answer
#     equals the same request's answer alone; the aborted one is a prefix of it;
#   - 3 long streams running, a 4th request admitted once each has streamed 5 parts: all four
#     equal their answers alone;
#   - per-session prompt caching: a prompt, another, the first again: the first finds its
#     session's cache (1 prompt token run);
#   - bad --parallel / MSTORE_NUM_PARALLEL values are refused; /api/ps counts every KV cache.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_serve.sh"
stories_fixture

expect_fail 2 "--parallel" mstore serve --parallel 0
expect_fail 2 "--parallel" mstore serve --parallel 65
MSTORE_NUM_PARALLEL=x expect_fail 2 "MSTORE_NUM_PARALLEL" mstore serve
expect_ok mstore serve --help
contains "$out" "--parallel N"

serve_start --parallel 4 --ctx 512
export SERVE
node - <<'JS' >"$WORK/node.out" 2>&1 || fail "batching: $(cat "$WORK/node.out")"
const { Ollama } = require('ollama');
const OpenAI = require('openai');
const assert = require('assert');
const model = 'stories:260k';
const prompts = ['Once upon a time', 'The cat', 'Lily and Ben went to the park to play with a big red ball',
  'One day', 'Tom had a little dog that liked to run', 'Sue', 'The sun was warm and the birds sang in the trees', 'Max'];
const lens = [64, 16, 48, 32, 96, 24, 40, 56];
// how request i goes: 0 ollama streamed, 1 openai completions streamed, 2 ollama not streamed
const how = (i) => i % 3;
async function ask(i, prompt, n, abortAfter, onPart) {
  let text = '', parts = 0;
  if (how(i) === 1) {
    const c = new OpenAI({ baseURL: process.env.SERVE + '/v1', apiKey: 'x', maxRetries: 0 });
    const s = await c.completions.create({ model, prompt, temperature: 0, max_tokens: n, stream: true });
    try {
      for await (const ch of s) {
        text += ch.choices[0].text || ''; parts++;
        if (onPart) onPart(parts);
        if (abortAfter && parts >= abortAfter) { s.controller.abort(); break; }
      }
    } catch (e) { if (!abortAfter) throw e; }
    return text;
  }
  const o = new Ollama({ host: process.env.SERVE });
  if (how(i) === 2)
    return (await o.generate({ model, prompt, raw: true, stream: false, options: { temperature: 0, num_predict: n } })).response;
  const s = await o.generate({ model, prompt, raw: true, stream: true, options: { temperature: 0, num_predict: n } });
  try {
    for await (const p of s) {
      text += p.response; parts++;
      if (onPart) onPart(parts);
      if (abortAfter && parts >= abortAfter) { s.abort(); break; }
    }
  } catch (e) { if (!abortAfter) throw e; }
  return text;
}
(async () => {
  // alone, one after another
  const alone = [];
  for (let i = 0; i < 8; i++) alone.push(await ask(i, prompts[i], lens[i]));
  for (let i = 0; i < 8; i++) assert(alone[i].length > 0, `request ${i} alone: empty answer`);
  // all eight at once; request 4 (openai, streamed) aborted after 8 parts
  const got = await Promise.all(prompts.map((p, i) => ask(i, p, lens[i], i === 4 ? 8 : 0)));
  for (let i = 0; i < 8; i++) {
    if (i === 4) {
      assert(got[i].length > 0 && alone[i].startsWith(got[i]) && got[i].length < alone[i].length,
             `aborted request: ${JSON.stringify(got[i])} is not a proper prefix of ${JSON.stringify(alone[i])}`);
      continue;
    }
    assert.strictEqual(got[i], alone[i], `request ${i} ("${prompts[i]}") at once differs from alone`);
  }
  // three long streams; a fourth admitted once each has streamed 5 parts
  const longIdx = [0, 1, 3], n = 200, late = 6;
  const longAlone = [];
  for (const i of longIdx) longAlone.push(await ask(i, prompts[i], n));
  const lateAlone = await ask(late, prompts[late], 40);
  let ready = 0, release;
  const allReady = new Promise((r) => { release = r; });
  const streams = longIdx.map((i) => ask(i, prompts[i], n, 0, (k) => { if (k === 5 && ++ready === longIdx.length) release(); }));
  await allReady;
  const lateGot = await ask(late, prompts[late], 40);
  const longGot = await Promise.all(streams);
  assert.strictEqual(lateGot, lateAlone, 'the request admitted mid-stream differs from alone');
  longIdx.forEach((i, k) => assert.strictEqual(longGot[k], longAlone[k], `stream ${i} changed when a request joined`));
  // per-session caching: A, B, A: the second A finds A's session
  const o = new Ollama({ host: process.env.SERVE });
  const A = 'Once upon a time, there was a cat named', B = 'Something else entirely';
  await o.generate({ model, prompt: A, stream: false, options: { num_predict: 0 } });
  await o.generate({ model, prompt: B, stream: false, options: { num_predict: 0 } });
  const again = await o.generate({ model, prompt: A, stream: false, options: { num_predict: 1 } });
  assert.strictEqual(again.prompt_eval_count, 1, 'A after B: its session still holds A');
  const ps = await o.ps();
  assert.strictEqual(ps.models.length, 1, 'one load: ' + JSON.stringify(ps));
  console.log('size ' + ps.models[0].size);
  console.log('node ok');
})().catch(e => { console.error(e); process.exit(1); });
JS
contains "$(cat "$WORK/node.out")" "node ok"
# /api/ps counts four KV caches of 512 positions: stories260K has 5 layers, 4 kv heads of 8 (f32)
size=$(sed -n 's/^size //p' "$WORK/node.out")
kv=$((4 * 2 * 5 * 512 * 4 * 8 * 4))
[ "$size" -gt "$kv" ] || fail "/api/ps size $size does not count the 4 KV caches ($kv bytes)"
grep -q "cancelled (client gone)" "$SERVE_LOG" || fail "the aborted request was not cancelled: $(cat "$SERVE_LOG")"
serve_alive
echo "ok $TEST_NAME"
