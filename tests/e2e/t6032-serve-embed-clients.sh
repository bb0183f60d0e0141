#!/usr/bin/env bash
# Embeddings through the npm clients people use: ollama-js `embed` (a string, a list,
# dimensions, truncate false refused), openai-node `embeddings.create` (float, and its default
# base64, which the client decodes itself into float32), and LangChain's OllamaEmbeddings
# (embedDocuments, embedQuery). Each gives `mstore embed`'s vectors for the same texts.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_serve.sh"
. "$(dirname "$0")/lib_embed.sh"
bert_fixture
npm_frameworks

T1="hello world"
T2="Ünïcödé café, 你好! 3.14"
expect_ok mstore embed bert "$T1" "$T2"
export WANT=$out
expect_ok mstore embed bert --dimensions 8 "$T1" "$T2"
export WANT8=$out
export T1 T2 LONG
LONG=$(printf 'hello %.0s' $(seq 100))
serve_start
export SERVE

node - <<'JS' >"$WORK/node.out" 2>&1 || fail "npm clients: $(cat "$WORK/node.out")"
const { Ollama } = require('ollama');
const OpenAI = require('openai');
const { OllamaEmbeddings } = require('@langchain/ollama');
const assert = require('assert');
const want = JSON.parse(process.env.WANT), want8 = JSON.parse(process.env.WANT8);
const texts = [process.env.T1, process.env.T2];
// every surface answers float32 values: JSON decimals and base64 name the same floats
const same = (got, exp, what) => {
  assert.strictEqual(got.length, exp.length, `${what}: ${got.length} vectors, want ${exp.length}`);
  got.forEach((v, i) => {
    assert.strictEqual(v.length, exp[i].length, `${what}[${i}]: length ${v.length}, want ${exp[i].length}`);
    for (let k = 0; k < v.length; k++)
      assert.strictEqual(Math.fround(v[k]), Math.fround(exp[i][k]), `${what}[${i}][${k}]: ${v[k]} vs ${exp[i][k]}`);
  });
};
(async () => {
  // ollama-js
  const o = new Ollama({ host: process.env.SERVE });
  const e1 = await o.embed({ model: 'bert', input: texts[0] });
  same(e1.embeddings, [want.embeddings[0]], 'ollama-js embed string');
  assert.strictEqual(e1.model, 'bert');
  const e2 = await o.embed({ model: 'bert', input: texts });
  same(e2.embeddings, want.embeddings, 'ollama-js embed list');
  assert.strictEqual(e2.prompt_eval_count, want.prompt_eval_count, 'prompt_eval_count');
  const e8 = await o.embed({ model: 'bert', input: texts, dimensions: 8 });
  same(e8.embeddings, want8.embeddings, 'ollama-js embed dimensions');
  await assert.rejects(o.embed({ model: 'bert', input: process.env.LONG, truncate: false }),
                       (e) => /input 0 has 102 tokens, past the context of 64/.test(e.message), 'truncate false');
  await assert.rejects(o.embed({ model: 'stories-absent', input: 'x' }), (e) => e.status_code === 404, 'unknown model');
  // the older endpoint: the pooled vector before its normalization, as ollama answers there
  const old = await o.embeddings({ model: 'bert', prompt: texts[0] });
  const norm = Math.hypot(...old.embedding);
  assert.ok(Math.abs(norm - 1) > 1e-3, `ollama-js embeddings: length ${norm}, normalized`);
  old.embedding.forEach((x, k) => assert.ok(Math.abs(x / norm - want.embeddings[0][k]) < 1e-6,
                                            `ollama-js embeddings[${k}]: ${x / norm} vs ${want.embeddings[0][k]}`));

  // openai-node: float asked for, then its default (base64, decoded by the client)
  const ai = new OpenAI({ baseURL: process.env.SERVE + '/v1', apiKey: 'unused' });
  const f = await ai.embeddings.create({ model: 'bert', input: texts, encoding_format: 'float' });
  same(f.data.map((d) => d.embedding), want.embeddings, 'openai float');
  assert.strictEqual(f.usage.prompt_tokens, want.prompt_eval_count, 'usage.prompt_tokens');
  const b = await ai.embeddings.create({ model: 'bert', input: texts });
  same(b.data.map((d) => Array.from(d.embedding)), want.embeddings, 'openai base64 (the default)');
  const b8 = await ai.embeddings.create({ model: 'bert', input: texts, dimensions: 8 });
  same(b8.data.map((d) => Array.from(d.embedding)), want8.embeddings, 'openai dimensions');
  await assert.rejects(ai.embeddings.create({ model: 'nosuch', input: 'x' }), (e) => e.status === 404, 'openai 404');

  // LangChain
  const lc = new OllamaEmbeddings({ model: 'bert', baseUrl: process.env.SERVE });
  same(await lc.embedDocuments(texts), want.embeddings, 'LangChain embedDocuments');
  same([await lc.embedQuery(texts[1])], [want.embeddings[1]], 'LangChain embedQuery');
  console.log('ok');
})().catch((e) => { console.error(e); process.exit(1); });
JS
contains "$(cat "$WORK/node.out")" "ok"
serve_alive
