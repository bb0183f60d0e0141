#!/usr/bin/env bash
# Structured outputs through the clients and frameworks people use (issue 33): ollama-js
# `format` (a JSON Schema, and "json") on generate and chat, openai-node `response_format`
# (json_schema strict, json_object) on chat completions and completions, streamed and not, and
# LangChain JS `withStructuredOutput` over ChatOllama and ChatOpenAI (method jsonSchema, at the
# server's /v1), each with a zod schema and a JSON Schema, on stories260K (vocab 512) and
# llama-2-tiny-random (vocab 32000), greedy and seeded. Every finished answer (done_reason /
# finish_reason "stop") parses and validates with ajv (draft 2020, ajv-formats) against its
# schema: nesting, arrays with minItems / maxItems, enums, anyOf, recursive $ref into $defs,
# nullable types, integer ranges, date and uuid formats, patterns. Streamed and whole answers
# agree, and a request without a format is free text again. Answers that cannot finish (see
# below) are checked cut at the token limit instead. Schema keywords the grammar does not
# build are refused with 400 naming them, on both APIs.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_serve.sh"
S260K=$MODELS/stories260K/stories260K.gguf
TINY=$MODELS/llama-2-tiny-random/llama-2-tiny-random.gguf
[ -f "$S260K" ] && [ -f "$TINY" ] || skip "$S260K or $TINY not found (set MSTORE_TEST_MODELS)"
npm_frameworks
expect_ok mstore import "$S260K" --name stories:260k --quiet
expect_ok mstore import "$TINY" --name tiny:random --quiet
expect_ok mstore run stories:260k "Once upon a time" --temp 0 -n 24
export WANT_GEN=$out
serve_start
export SERVE

node - <<'JS' >"$WORK/node.out" 2>&1 || fail "node: $(cat "$WORK/node.out")"
const { Ollama } = require('ollama');
const OpenAI = require('openai');
const Ajv2020 = require('ajv/dist/2020');
const addFormats = require('ajv-formats');
const { ChatOllama } = require('@langchain/ollama');
const { ChatOpenAI } = require('@langchain/openai');
const { z } = require('zod');
const assert = require('assert');

const o = new Ollama({ host: process.env.SERVE });
const oa = new OpenAI({ baseURL: process.env.SERVE + '/v1', apiKey: 'unused', maxRetries: 0 });
const ajv = new Ajv2020({ allErrors: true, allowUnionTypes: true });
addFormats(ajv);
const eq = (got, want, what) => assert.strictEqual(got, want, `${what}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);

// A person: nesting, an array bounded both ways, enums (null among them), anyOf, a nullable
// string, integer ranges, date / uuid formats, a pattern. Strings are short so answers finish.
const PERSON = {
  type: 'object',
  properties: {
    name: { type: 'string', minLength: 1, maxLength: 8 },
    age: { type: 'integer', minimum: 0, maximum: 120 },
    pet: { enum: ['cat', 'dog', 'fish', null] },
    nick: { type: ['string', 'null'], maxLength: 6 },
    tags: { type: 'array', items: { type: 'string', maxLength: 5 }, minItems: 1, maxItems: 3 },
    born: { type: 'string', format: 'date' },
    id: { type: 'string', format: 'uuid' },
    code: { type: 'string', pattern: '^[A-Z]{2}-[0-9]{3}$' },
    home: {
      type: 'object',
      properties: { city: { type: 'string', maxLength: 8 }, floor: { type: 'integer', minimum: -2, maximum: 30 } },
      required: ['city', 'floor'], additionalProperties: false,
    },
    contact: { anyOf: [{ type: 'integer', minimum: 0, maximum: 999 }, { type: 'string', format: 'date' }, { type: 'boolean' }] },
  },
  required: ['name', 'age', 'pet', 'nick', 'tags', 'born', 'id', 'code', 'home', 'contact'],
  additionalProperties: false,
};
// A tree: $ref into $defs, recursive, with a nullable label.
const TREE = {
  $defs: {
    leaf: {
      type: 'object',
      properties: { v: { type: 'integer', minimum: -9, maximum: 9 }, label: { type: ['string', 'null'], maxLength: 4 } },
      required: ['v', 'label'], additionalProperties: false,
    },
    node: {
      type: 'object',
      properties: { leaf: { $ref: '#/$defs/leaf' }, kids: { type: 'array', maxItems: 2, items: { $ref: '#/$defs/node' } } },
      required: ['leaf', 'kids'], additionalProperties: false,
    },
  },
  type: 'object',
  properties: { root: { $ref: '#/$defs/node' }, size: { enum: ['S', 'M', 'L'] } },
  required: ['root', 'size'], additionalProperties: false,
};
const ANY_OBJECT = { type: 'object' }; // what "json" / json_object promise
const validators = new Map();
function valid(text, schema, what) {
  let v;
  try { v = JSON.parse(text); } catch (e) { throw new Error(`${what}: not JSON (${e.message}): ${JSON.stringify(text)}`); }
  if (!validators.has(schema)) validators.set(schema, ajv.compile(schema));
  const check = validators.get(schema);
  if (!check(v)) throw new Error(`${what}: ${ajv.errorsText(check.errors)}: ${text}`);
  return v;
}

// The validator itself rejects what breaks these schemas (formats asserted, not annotations).
{
  const ok = { name: 'Al', age: 3, pet: null, nick: null, tags: ['a'], born: '2020-02-29', id: '123e4567-e89b-12d3-a456-426614174000',
               code: 'AB-123', home: { city: 'X', floor: -2 }, contact: true };
  valid(JSON.stringify(ok), PERSON, 'a valid person');
  for (const [k, v] of [['born', '2020-13-01'], ['id', '123e4567'], ['code', 'ab-123'], ['age', 121], ['tags', []], ['pet', 'cow'],
                        ['contact', 'x'], ['home', { city: 'X' }], ['extra', 1]])
    assert.throws(() => valid(JSON.stringify({ ...ok, [k]: v }), PERSON, k), /PERSON|must|\//, `ajv accepted ${k}: ${JSON.stringify(v)}`);
  valid('{"root":{"leaf":{"v":1,"label":null},"kids":[{"leaf":{"v":-9,"label":"ab"},"kids":[]}]},"size":"S"}', TREE, 'a valid tree');
  assert.throws(() => valid('{"root":{"leaf":{"v":1,"label":null},"kids":[{"leaf":{"v":10,"label":"ab"},"kids":[]}]},"size":"S"}', TREE, 'deep'));
}
const failures = [];
let checked = 0;
async function check(what, fn) {
  try { await fn(); checked++; } catch (e) { failures.push(`${what}: ${e.stack || e}`); }
}

const MODELS = ['stories:260k', 'tiny:random'];
const SAMPLINGS = [{ temperature: 0, seed: 1 }, { temperature: 1, seed: 7 }];
const N = 500; // tokens: more than any answer under these schemas takes
// llama-2-tiny-random's greedy answer under TREE opens kids after kids until the token limit
// (every prompt, property order and maxItems tried): that one is checked cut, as begun right.
const recurses = (model, s) => model === 'tiny:random' && s.temperature === 0;

(async () => {
  for (const model of MODELS) for (const s of SAMPLINGS) {
    const tag = `${model} t${s.temperature}`;
    const opts = { ...s, num_predict: N };
    // ollama-js: generate with a schema, whole and streamed: the same answer
    await check(`${tag} ollama generate PERSON`, async () => {
      const g = await o.generate({ model, prompt: 'Once upon a time', format: PERSON, stream: false, options: opts });
      eq(g.done_reason, 'stop', 'done_reason');
      valid(g.response, PERSON, 'response');
      let text = '', last;
      for await (const p of await o.generate({ model, prompt: 'Once upon a time', format: PERSON, stream: true, options: opts })) {
        text += p.response; last = p;
      }
      eq(last.done_reason, 'stop', 'streamed done_reason');
      eq(text, g.response, 'streamed and whole answers');
    });
    await check(`${tag} ollama chat PERSON`, async () => {
      const c = await o.chat({ model, messages: [{ role: 'user', content: 'Describe a person.' }], format: PERSON, stream: false, options: opts });
      eq(c.done_reason, 'stop', 'done_reason');
      valid(c.message.content, PERSON, 'content');
    });
    // chat with a recursive schema, streamed
    if (recurses(model, s)) await check(`${tag} ollama chat TREE stream, cut`, async () => {
      let text = '', last;
      for await (const p of await o.chat({ model, messages: [{ role: 'user', content: 'A tree, please.' }], format: TREE, stream: true, options: { ...s, num_predict: 60 } })) {
        text += p.message.content; last = p;
      }
      eq(last.done_reason, 'length', 'done_reason');
      eq(last.eval_count, 60, 'eval_count');
      assert(/^\s*\{\s*"root"\s*:\s*\{/.test(text), `not the schema's start: ${text}`);
    }); else await check(`${tag} ollama chat TREE stream`, async () => {
      let text = '', last;
      for await (const p of await o.chat({ model, messages: [{ role: 'user', content: 'A tree, please.' }], format: TREE, stream: true, options: opts })) {
        text += p.message.content; last = p;
      }
      eq(last.done_reason, 'stop', 'done_reason');
      valid(text, TREE, 'streamed content');
    });
    // "json": any JSON object. stories260K fills its keys and values with story text and never
    // closes the object (seeds 1 to 12, 300 tokens): cut at num_predict, it has begun one.
    if (model === 'stories:260k') await check(`${tag} ollama chat json, cut`, async () => {
      const c = await o.chat({ model, messages: [{ role: 'user', content: 'hi' }], format: 'json', stream: false, options: { ...s, num_predict: 40 } });
      eq(c.done_reason, 'length', 'done_reason');
      eq(c.eval_count, 40, 'eval_count');
      assert(/^\s*\{\s*"/.test(c.message.content), `does not begin an object: ${c.message.content}`);
    }); else await check(`${tag} ollama chat json, generate json stream`, async () => {
      const c = await o.chat({ model, messages: [{ role: 'user', content: 'hi' }], format: 'json', stream: false, options: opts });
      eq(c.done_reason, 'stop', 'done_reason');
      valid(c.message.content, ANY_OBJECT, 'content');
      let text = '', last;
      for await (const p of await o.generate({ model, prompt: 'hi', format: 'json', stream: true, options: opts })) {
        text += p.response; last = p;
      }
      eq(last.done_reason, 'stop', 'generate done_reason');
      valid(text, ANY_OBJECT, 'generate streamed');
    });
    const oopts = { temperature: s.temperature, seed: s.seed, max_tokens: N };
    const strict = (name, schema) => ({ type: 'json_schema', json_schema: { name, schema, strict: true } });
    // openai-node: chat completions with a strict schema, whole; the recursive one streamed
    await check(`${tag} openai chat PERSON`, async () => {
      const r = await oa.chat.completions.create({ model, messages: [{ role: 'user', content: 'Describe a person.' }], response_format: strict('person', PERSON), ...oopts });
      eq(r.choices[0].finish_reason, 'stop', 'finish_reason');
      valid(r.choices[0].message.content, PERSON, 'content');
    });
    if (!recurses(model, s)) await check(`${tag} openai chat TREE stream`, async () => {
      let text = '', finish = null;
      for await (const ch of await oa.chat.completions.create({ model, messages: [{ role: 'user', content: 'A tree.' }], response_format: strict('tree', TREE), stream: true, ...oopts })) {
        if (ch.choices.length) { text += ch.choices[0].delta.content || ''; finish = ch.choices[0].finish_reason || finish; }
      }
      eq(finish, 'stop', 'finish_reason');
      valid(text, TREE, 'streamed content');
    });
    if (model === 'stories:260k') await check(`${tag} openai chat json_object, cut`, async () => {
      const r = await oa.chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }], response_format: { type: 'json_object' }, ...oopts, max_tokens: 40 });
      eq(r.choices[0].finish_reason, 'length', 'finish_reason');
      assert(/^\s*\{\s*"/.test(r.choices[0].message.content), `does not begin an object: ${r.choices[0].message.content}`);
    }); else await check(`${tag} openai chat json_object stream`, async () => {
      let text = '', finish = null;
      for await (const ch of await oa.chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }], response_format: { type: 'json_object' }, stream: true, ...oopts })) {
        if (ch.choices.length) { text += ch.choices[0].delta.content || ''; finish = ch.choices[0].finish_reason || finish; }
      }
      eq(finish, 'stop', 'finish_reason');
      valid(text, ANY_OBJECT, 'streamed content');
    });
    // completions: a schema streamed, json_object whole
    await check(`${tag} openai completions PERSON stream`, async () => {
      let text = '', finish = null;
      for await (const ch of await oa.completions.create({ model, prompt: 'Once upon a time', response_format: strict('person', PERSON), stream: true, ...oopts })) {
        text += ch.choices[0].text; finish = ch.choices[0].finish_reason || finish;
      }
      eq(finish, 'stop', 'finish_reason');
      valid(text, PERSON, 'streamed text');
    });
    if (model !== 'stories:260k') await check(`${tag} openai completions json_object`, async () => {
      const r = await oa.completions.create({ model, prompt: 'hi', response_format: { type: 'json_object' }, ...oopts });
      eq(r.choices[0].finish_reason, 'stop', 'finish_reason');
      valid(r.choices[0].text, ANY_OBJECT, 'text');
    });
    // LangChain: ChatOllama with a zod schema, ChatOpenAI with a JSON Schema (json_schema)
    await check(`${tag} langchain ChatOllama zod`, async () => {
      const Pet = z.object({
        name: z.string().max(8),
        kind: z.enum(['cat', 'dog']),
        legs: z.number().int().min(0).max(8),
        owner: z.string().max(6).nullable(),
        toys: z.array(z.string().max(4)).min(1).max(2),
      });
      const llm = new ChatOllama({ baseUrl: process.env.SERVE, model, temperature: s.temperature, seed: s.seed, numPredict: N });
      const r = await llm.withStructuredOutput(Pet, { includeRaw: true }).invoke('Describe a pet.');
      eq(r.raw.response_metadata.done_reason, 'stop', 'done_reason');
      valid(r.raw.content, z.toJSONSchema(Pet), 'raw content');
      assert(Pet.safeParse(r.parsed).success, `parsed: ${JSON.stringify(r.parsed)}`);
    });
    if (!recurses(model, s)) await check(`${tag} langchain ChatOllama JSON Schema`, async () => {
      const llm = new ChatOllama({ baseUrl: process.env.SERVE, model, temperature: s.temperature, seed: s.seed, numPredict: N });
      const r = await llm.withStructuredOutput(TREE, { name: 'tree', includeRaw: true }).invoke('A tree, please.');
      eq(r.raw.response_metadata.done_reason, 'stop', 'done_reason');
      valid(r.raw.content, TREE, 'raw content');
      valid(JSON.stringify(r.parsed), TREE, 'parsed');
    });
    await check(`${tag} langchain ChatOpenAI jsonSchema`, async () => {
      const llm = new ChatOpenAI({ model, apiKey: 'unused', configuration: { baseURL: process.env.SERVE + '/v1' },
                                   temperature: s.temperature, maxTokens: N, maxRetries: 0, modelKwargs: { seed: s.seed } });
      const r = await llm.withStructuredOutput({ title: 'person', ...PERSON }, { method: 'jsonSchema', includeRaw: true }).invoke('Describe a person.');
      eq(r.raw.response_metadata.finish_reason, 'stop', 'finish_reason');
      valid(r.raw.content, PERSON, 'raw content');
      valid(JSON.stringify(r.parsed), PERSON, 'parsed');
    });
    await check(`${tag} langchain ChatOpenAI zod`, async () => {
      const Order = z.object({
        item: z.enum(['tea', 'cake', 'soup']),
        qty: z.number().int().min(1).max(9),
        note: z.string().max(6).nullable(),
        extras: z.array(z.object({ name: z.string().max(5), free: z.boolean() })).max(2),
      });
      const llm = new ChatOpenAI({ model, apiKey: 'unused', configuration: { baseURL: process.env.SERVE + '/v1' },
                                   temperature: s.temperature, maxTokens: N, maxRetries: 0, modelKwargs: { seed: s.seed } });
      const r = await llm.withStructuredOutput(Order, { name: 'order', method: 'jsonSchema', includeRaw: true }).invoke('An order.');
      eq(r.raw.response_metadata.finish_reason, 'stop', 'finish_reason');
      valid(r.raw.content, z.toJSONSchema(Order), 'raw content');
      assert(Order.safeParse(r.parsed).success, `parsed: ${JSON.stringify(r.parsed)}`);
    });
  }
  // A request without a format after all these is free text again: mstore run's greedy text.
  await check('no format after formats', async () => {
    const g = await o.generate({ model: 'stories:260k', prompt: 'Once upon a time', stream: false, options: { temperature: 0, num_predict: 24 } });
    eq(g.response, process.env.WANT_GEN, 'greedy text without a format');
  });
  // Keywords the grammar does not build: 400 naming them, on both APIs.
  await check('ollama refuses not', async () => {
    await assert.rejects(o.generate({ model: 'stories:260k', prompt: 'hi', stream: false, format: { type: 'object', properties: { a: { not: { type: 'null' } } } } }),
      e => e.status_code === 400 && /schema keyword 'not' at '\/properties\/a' is not supported/.test(e.error) || assert.fail(`${e.status_code} ${e.error}`));
  });
  await check('ollama chat refuses uniqueItems', async () => {
    await assert.rejects(o.chat({ model: 'tiny:random', messages: [{ role: 'user', content: 'hi' }], stream: false, format: { type: 'array', uniqueItems: true } }),
      e => e.status_code === 400 && /schema keyword 'uniqueItems'/.test(e.error) || assert.fail(`${e.status_code} ${e.error}`));
  });
  await check('openai refuses uniqueItems', async () => {
    await assert.rejects(oa.chat.completions.create({ model: 'stories:260k', messages: [{ role: 'user', content: 'hi' }],
                                                      response_format: { type: 'json_schema', json_schema: { name: 'x', strict: true, schema: { type: 'object', properties: { a: { type: 'array', uniqueItems: true } } } } } }),
      e => e instanceof OpenAI.BadRequestError && e.status === 400 && /schema keyword 'uniqueItems' at '\/properties\/a' is not supported/.test(e.message) || assert.fail(`${e.status} ${e.message}`));
  });
  await check('openai completions refuses not', async () => {
    await assert.rejects(oa.completions.create({ model: 'tiny:random', prompt: 'hi', stream: true,
                                                 response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { not: {} } } } }),
      e => e instanceof OpenAI.BadRequestError && e.status === 400 && /schema keyword 'not'/.test(e.message) || assert.fail(`${e.status} ${e.message}`));
  });
  if (failures.length) { console.error(failures.join('\n\n')); console.error(`${failures.length} failed, ${checked} passed`); process.exit(1); }
  console.log(`node ok: ${checked} checks`);
})().catch(e => { console.error(e); process.exit(1); });
JS
contains "$(cat "$WORK/node.out")" "node ok"
cat "$WORK/node.out"
serve_alive
echo "ok $TEST_NAME"
