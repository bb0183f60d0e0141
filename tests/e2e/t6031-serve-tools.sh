#!/usr/bin/env bash
# Tool calling through the clients and frameworks people use (issue 33), on stories260K (vocab
# 512) and llama-2-tiny-random (vocab 32000) given ollama's qwen2.5 template (tools and their
# calls in <tool_call> tags), greedy and seeded. openai-node: tool_choice "required" and a
# named function, streamed and not, give tool_calls (finish_reason "tool_calls") whose
# arguments parse and validate with ajv against the tool's parameters ($defs included); the
# streamed deltas reassemble by index (the id and name on a call's first delta, the argument
# fragments concatenated) into the calls the whole answer has. tool_choice "none" gives no
# calls; "auto" a well-formed answer either way. A conversation with an assistant's tool calls
# and the tool's result is taken on both APIs. ollama-js chat with tools (the tiny models may
# answer in text: well-formed either way). LangChain JS: ChatOpenAI bindTools with tool_choice
# gives an AIMessage with tool_calls; ChatOllama bindTools a well-formed AIMessage. A model whose
# template renders no tools is refused (400) naming that. logprobs beside tools are the content's
# tokens only (none beside forced calls).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_serve.sh"
S260K=$MODELS/stories260K/stories260K.gguf
TINY=$MODELS/llama-2-tiny-random/llama-2-tiny-random.gguf
[ -f "$S260K" ] && [ -f "$TINY" ] || skip "$S260K or $TINY not found (set MSTORE_TEST_MODELS)"
npm_frameworks
expect_ok mstore import "$S260K" --name stories:260k --quiet
expect_ok mstore import "$TINY" --name tiny:random --quiet
# ollama's qwen2.5 template (library/qwen2.5), which renders .Tools and .ToolCalls.
cat >"$WORK/qwen.tmpl" <<'TMPL'
{{- if .Messages }}
{{- if or .System .Tools }}<|im_start|>system
{{- if .System }}
{{ .System }}
{{- end }}
{{- if .Tools }}

# Tools

You may call one or more functions to assist with the user query.

You are provided with function signatures within <tools></tools> XML tags:
<tools>
{{- range .Tools }}
{"type": "function", "function": {{ .Function }}}
{{- end }}
</tools>

For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:
<tool_call>
{"name": <function-name>, "arguments": <args-json-object>}
</tool_call>
{{- end }}<|im_end|>
{{ end }}
{{- range $i, $_ := .Messages }}
{{- $last := eq (len (slice $.Messages $i)) 1 -}}
{{- if eq .Role "user" }}<|im_start|>user
{{ .Content }}<|im_end|>
{{ else if eq .Role "assistant" }}<|im_start|>assistant
{{ if .Content }}{{ .Content }}
{{- else if .ToolCalls }}<tool_call>
{{ range .ToolCalls }}{"name": "{{ .Function.Name }}", "arguments": {{ .Function.Arguments }}}
{{ end }}</tool_call>
{{- end }}{{ if not $last }}<|im_end|>
{{ end }}
{{- else if eq .Role "tool" }}<|im_start|>user
<tool_response>
{{ .Content }}
</tool_response><|im_end|>
{{ end }}
{{- if and (ne .Role "assistant") $last }}<|im_start|>assistant
{{ end }}
{{- end }}
{{- else }}
{{- if .System }}<|im_start|>system
{{ .System }}<|im_end|>
{{ end }}{{ if .Prompt }}<|im_start|>user
{{ .Prompt }}<|im_end|>
{{ end }}<|im_start|>assistant
{{ end }}{{ .Response }}{{ if .Response }}<|im_end|>{{ end }}
TMPL
for m in stories:260k tiny:random; do
    printf 'FROM %s\nTEMPLATE """%s"""\n' "$m" "$(cat "$WORK/qwen.tmpl")" >"$WORK/Modelfile"
    expect_ok mstore create "qwen-${m%%:*}" -f "$WORK/Modelfile"
done
serve_start
export SERVE

node - <<'JS' >"$WORK/node.out" 2>&1 || fail "node: $(cat "$WORK/node.out")"
const { Ollama } = require('ollama');
const OpenAI = require('openai');
const Ajv2020 = require('ajv/dist/2020');
const addFormats = require('ajv-formats');
const { ChatOllama } = require('@langchain/ollama');
const { ChatOpenAI } = require('@langchain/openai');
const { tool } = require('@langchain/core/tools');
const { z } = require('zod');
const assert = require('assert');

const o = new Ollama({ host: process.env.SERVE });
const oa = new OpenAI({ baseURL: process.env.SERVE + '/v1', apiKey: 'unused', maxRetries: 0 });
const ajv = new Ajv2020({ allErrors: true, allowUnionTypes: true });
addFormats(ajv);
const eq = (got, want, what) => assert.strictEqual(got, want, `${what}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);

// Three tools: an enum and a bounded string; integer ranges and a nullable field; an array of
// $defs objects with a date format and a pattern (the server moves $defs into the call's root).
const TOOLS = [
  { type: 'function', function: { name: 'get_weather', description: 'The weather in a city.', parameters: {
      type: 'object',
      properties: { city: { type: 'string', minLength: 1, maxLength: 10 }, unit: { enum: ['celsius', 'fahrenheit'] } },
      required: ['city', 'unit'], additionalProperties: false } } },
  { type: 'function', function: { name: 'add', description: 'Adds two numbers.', parameters: {
      type: 'object',
      properties: { a: { type: 'integer', minimum: -100, maximum: 100 }, b: { type: 'integer', minimum: 0, maximum: 9 },
                    note: { type: ['string', 'null'], maxLength: 5 } },
      required: ['a', 'b', 'note'], additionalProperties: false } } },
  { type: 'function', function: { name: 'plan_trip', description: 'Plans a trip.', parameters: {
      $defs: { leg: { type: 'object', properties: { day: { type: 'string', format: 'date' }, to: { type: 'string', pattern: '^[A-Z]{3}$' } },
                      required: ['day', 'to'], additionalProperties: false } },
      type: 'object',
      properties: { legs: { type: 'array', items: { $ref: '#/$defs/leg' }, minItems: 1, maxItems: 2 } },
      required: ['legs'], additionalProperties: false } } },
];
const PARAMS = Object.fromEntries(TOOLS.map(t => [t.function.name, ajv.compile(t.function.parameters)]));
// A call as a client reads it: a known tool, arguments that parse and validate.
function callOk(name, args, what) {
  assert(PARAMS[name], `${what}: unknown tool ${JSON.stringify(name)}`);
  const v = typeof args === 'string' ? JSON.parse(args) : args;
  if (!PARAMS[name](v)) throw new Error(`${what}: ${name} arguments: ${ajv.errorsText(PARAMS[name].errors)}: ${JSON.stringify(args)}`);
  return v;
}
// The validators reject what breaks the parameters.
assert.throws(() => callOk('add', '{"a":101,"b":1,"note":null}', 'range'));
assert.throws(() => callOk('plan_trip', '{"legs":[{"day":"2026-02-30x","to":"NYC"}]}', 'date'));
assert.throws(() => callOk('plan_trip', '{"legs":[]}', 'minItems'));
assert.throws(() => callOk('get_weather', '{"city":"Rome","unit":"kelvin"}', 'enum'));
callOk('plan_trip', '{"legs":[{"day":"2026-02-28","to":"NYC"}]}', 'valid');

const failures = [];
let checked = 0;
async function check(what, fn) {
  try { await fn(); checked++; } catch (e) { failures.push(`${what}: ${e.stack || e}`); }
}
// A streamed chat completion reassembled as a client does: content, and calls by index (the id
// and name on a call's first delta, then argument fragments).
async function streamed(req) {
  let content = '', finish = null;
  const calls = [];
  for await (const ch of await oa.chat.completions.create({ ...req, stream: true })) {
    if (!ch.choices.length) continue;
    const d = ch.choices[0].delta;
    content += d.content || '';
    for (const tc of d.tool_calls || []) {
      assert(Number.isInteger(tc.index), `a tool call delta without an index: ${JSON.stringify(tc)}`);
      if (!calls[tc.index]) {
        assert(typeof tc.id === 'string' && tc.id.length > 0, `call ${tc.index}'s first delta has no id: ${JSON.stringify(tc)}`);
        assert(tc.function && typeof tc.function.name === 'string', `call ${tc.index}'s first delta has no name: ${JSON.stringify(tc)}`);
        calls[tc.index] = { id: tc.id, type: tc.type, function: { name: tc.function.name, arguments: '' } };
      } else if (tc.id) eq(tc.id, calls[tc.index].id, 'a later delta changes the id');
      calls[tc.index].function.arguments += (tc.function && tc.function.arguments) || '';
    }
    finish = ch.choices[0].finish_reason || finish;
  }
  assert(!calls.includes(undefined), `call indexes skip: ${JSON.stringify(calls)}`);
  return { content, calls, finish };
}
function callsOk(calls, what, only) {
  assert(Array.isArray(calls) && calls.length >= 1, `${what}: no tool_calls: ${JSON.stringify(calls)}`);
  const ids = new Set();
  for (const c of calls) {
    eq(c.type, 'function', `${what}: type`);
    assert(typeof c.id === 'string' && c.id && !ids.has(c.id), `${what}: ids: ${JSON.stringify(calls)}`);
    ids.add(c.id);
    if (only) eq(c.function.name, only, `${what}: the named tool`);
    callOk(c.function.name, c.function.arguments, what);
  }
}

const MODELS = ['qwen-stories', 'qwen-tiny'];
const SAMPLINGS = [{ temperature: 0, seed: 1 }, { temperature: 1, seed: 5 }];
const ASK = [{ role: 'user', content: 'What is the weather in Rome?' }];
const N = 300;

(async () => {
  for (const model of MODELS) for (const s of SAMPLINGS) {
    const tag = `${model} t${s.temperature}`;
    const req = { model, messages: ASK, tools: TOOLS, temperature: s.temperature, seed: s.seed, max_tokens: N };
    for (const [choice, only] of [['required', null], [{ type: 'function', function: { name: 'plan_trip' } }, 'plan_trip']]) {
      const what = `${tag} tool_choice ${JSON.stringify(choice)}`;
      let whole;
      await check(`${what}`, async () => {
        const r = await oa.chat.completions.create({ ...req, tool_choice: choice });
        eq(r.choices[0].finish_reason, 'tool_calls', 'finish_reason');
        const m = r.choices[0].message;
        eq(m.role, 'assistant', 'role');
        assert(m.content === null || m.content === '', `content beside forced calls: ${JSON.stringify(m.content)}`);
        callsOk(m.tool_calls, what, only);
        whole = m.tool_calls;
      });
      await check(`${what} stream`, async () => {
        const r = await streamed({ ...req, tool_choice: choice });
        eq(r.finish, 'tool_calls', 'finish_reason');
        eq(r.content, '', 'content beside forced calls');
        callsOk(r.calls, `${what} stream`, only);
        // the same seed, the same calls (ids are per response)
        if (whole) eq(JSON.stringify(r.calls.map(c => c.function)), JSON.stringify(whole.map(c => c.function)), 'streamed and whole calls');
      });
    }
    await check(`${tag} tool_choice none`, async () => {
      const r = await oa.chat.completions.create({ ...req, tool_choice: 'none', max_tokens: 40 });
      assert(!r.choices[0].message.tool_calls || r.choices[0].message.tool_calls.length === 0,
             `calls under "none": ${JSON.stringify(r.choices[0].message)}`);
      assert(['stop', 'length'].includes(r.choices[0].finish_reason), `finish_reason ${r.choices[0].finish_reason}`);
      eq(typeof r.choices[0].message.content, 'string', 'content');
      const st = await streamed({ ...req, tool_choice: 'none', max_tokens: 40 });
      eq(st.calls.length, 0, 'streamed calls under "none"');
      eq(st.content, r.choices[0].message.content, 'streamed and whole content under "none"');
    });
    // auto: a call or text, each well-formed (a tiny model's unforced calls need not validate)
    await check(`${tag} tool_choice auto`, async () => {
      const r = await oa.chat.completions.create({ ...req, max_tokens: 60 });
      const c = r.choices[0];
      if (c.message.tool_calls && c.message.tool_calls.length) {
        eq(c.finish_reason, 'tool_calls', 'finish_reason with calls');
        for (const tc of c.message.tool_calls) { eq(typeof tc.function.name, 'string', 'name'); JSON.parse(tc.function.arguments); }
      } else {
        assert(['stop', 'length'].includes(c.finish_reason), `finish_reason ${c.finish_reason}`);
        eq(typeof c.message.content, 'string', 'content');
      }
    });
  }
  // logprobs beside tools: the content's tokens, none of the calls'
  for (const model of MODELS) {
    await check(`${model} logprobs with tools`, async () => {
      const base = { model, messages: ASK, tools: TOOLS, temperature: 0, logprobs: true };
      const forced = await oa.chat.completions.create({ ...base, tool_choice: 'required', max_tokens: N });
      eq(forced.choices[0].finish_reason, 'tool_calls', 'finish_reason');
      eq(((forced.choices[0].logprobs || {}).content || []).length, 0, 'logprobs beside forced calls');
      let n = 0;
      for await (const ch of await oa.chat.completions.create({ ...base, tool_choice: 'required', max_tokens: N, stream: true }))
        n += ((ch.choices[0] && ch.choices[0].logprobs || {}).content || []).length;
      eq(n, 0, 'streamed logprobs beside forced calls');
      const r = await oa.chat.completions.create({ ...base, tool_choice: 'auto', max_tokens: 30 });
      const c = r.choices[0];
      eq(((c.logprobs || {}).content || []).map(t => t.token).join(''), c.message.content || '', 'auto: logprobs of the content');
      let text = '', toks = '';
      for await (const ch of await oa.chat.completions.create({ ...base, tool_choice: 'auto', max_tokens: 30, stream: true })) {
        const d = ch.choices[0] || {};
        text += (d.delta && d.delta.content) || '';
        toks += ((d.logprobs || {}).content || []).map(t => t.token).join('');
      }
      eq(toks, text, 'auto streamed: logprobs of the content');
      eq(text, c.message.content || '', 'auto: streamed and whole content');
    });
  }
  // A conversation with the assistant's call and the tool's result, on both APIs.
  const call = { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Rome","unit":"celsius"}' } };
  for (const model of MODELS) {
    await check(`${model} openai tool result`, async () => {
      const r = await oa.chat.completions.create({ model, tools: TOOLS, temperature: 0, max_tokens: 20, messages: [
        ...ASK, { role: 'assistant', content: null, tool_calls: [call] },
        { role: 'tool', tool_call_id: 'call_1', content: '{"temp": 21}' }] });
      assert(['stop', 'length', 'tool_calls'].includes(r.choices[0].finish_reason), `finish_reason ${r.choices[0].finish_reason}`);
      // the call and its result were rendered into the prompt: more tokens than the question alone
      const q = await oa.chat.completions.create({ model, tools: TOOLS, temperature: 0, max_tokens: 1, messages: ASK });
      assert(r.usage.prompt_tokens > q.usage.prompt_tokens + 10, `prompt with the result: ${r.usage.prompt_tokens} tokens, without: ${q.usage.prompt_tokens}`);
    });
    await check(`${model} ollama tool result`, async () => {
      const r = await o.chat({ model, tools: TOOLS, stream: false, options: { temperature: 0, num_predict: 20 }, messages: [
        ...ASK, { role: 'assistant', content: '', tool_calls: [{ function: { name: 'get_weather', arguments: { city: 'Rome', unit: 'celsius' } } }] },
        { role: 'tool', tool_name: 'get_weather', content: '{"temp": 21}' }] });
      eq(r.done, true, 'done');
      eq(r.message.role, 'assistant', 'role');
      eq(typeof r.message.content, 'string', 'content');
    });
    // ollama-js chat with tools: the model chooses; its answer is well-formed either way
    for (const stream of [false, true]) await check(`${model} ollama chat tools stream=${stream}`, async () => {
      const opts = { temperature: 1, seed: 3, num_predict: 60 };
      let msg, last;
      if (stream) {
        msg = { content: '', tool_calls: [] };
        for await (const p of await o.chat({ model, tools: TOOLS, messages: ASK, stream: true, options: opts })) {
          msg.content += p.message.content; msg.tool_calls.push(...(p.message.tool_calls || [])); last = p;
        }
      } else {
        last = await o.chat({ model, tools: TOOLS, messages: ASK, stream: false, options: opts });
        msg = last.message;
      }
      eq(last.done, true, 'done');
      assert(['stop', 'length'].includes(last.done_reason), `done_reason ${last.done_reason}`);
      eq(typeof msg.content, 'string', 'content');
      for (const tc of msg.tool_calls || []) {
        eq(typeof tc.function.name, 'string', 'name');
        assert(tc.function.arguments && typeof tc.function.arguments === 'object', `arguments: ${JSON.stringify(tc)}`);
      }
    });
  }
  // LangChain: ChatOpenAI bindTools with tool_choice; ChatOllama bindTools
  const addTool = tool(async ({ a, b }) => String(a + b), {
    name: 'add', description: 'Adds two numbers.',
    schema: z.object({ a: z.number().int().min(-100).max(100), b: z.number().int().min(0).max(9), note: z.string().max(5).nullable() }),
  });
  for (const model of MODELS) for (const s of SAMPLINGS) {
    const tag = `${model} t${s.temperature}`;
    const llm = new ChatOpenAI({ model, apiKey: 'unused', configuration: { baseURL: process.env.SERVE + '/v1' },
                                 temperature: s.temperature, maxTokens: N, maxRetries: 0, modelKwargs: { seed: s.seed } });
    await check(`${tag} langchain ChatOpenAI bindTools named`, async () => {
      const m = await llm.bindTools([addTool, TOOLS[0]], { tool_choice: 'add' }).invoke('Add 2 and 3.');
      assert(m.tool_calls.length >= 1, `no tool_calls: ${JSON.stringify(m)}`);
      for (const tc of m.tool_calls) { eq(tc.name, 'add', 'name'); callOk('add', tc.args, 'args'); assert(tc.id, 'id'); }
      eq(m.response_metadata.finish_reason, 'tool_calls', 'finish_reason');
      eq(m.invalid_tool_calls.length, 0, 'invalid_tool_calls');
    });
    await check(`${tag} langchain ChatOpenAI bindTools required stream`, async () => {
      let acc;
      for await (const ch of await llm.bindTools([addTool, TOOLS[0]], { tool_choice: 'required' }).stream('Weather or sums?'))
        acc = acc ? acc.concat(ch) : ch;
      assert(acc.tool_calls.length >= 1, `no tool_calls: ${JSON.stringify(acc)}`);
      for (const tc of acc.tool_calls) callOk(tc.name, tc.args, 'args');
    });
  }
  for (const model of MODELS) await check(`${model} langchain ChatOllama bindTools`, async () => {
    const llm = new ChatOllama({ baseUrl: process.env.SERVE, model, temperature: 0, numPredict: 40 });
    const m = await llm.bindTools([addTool]).invoke('Add 2 and 3.');
    eq(typeof m.content, 'string', 'content');
    assert(Array.isArray(m.tool_calls), 'tool_calls');
    for (const tc of m.tool_calls) { eq(typeof tc.name, 'string', 'name'); eq(typeof tc.args, 'object', 'args'); }
  });
  // a template that renders no tools: refused, named
  await check('tools on a model without them', async () => {
    await assert.rejects(oa.chat.completions.create({ model: 'stories:260k', messages: ASK, tools: TOOLS, tool_choice: 'required' }),
      e => e instanceof OpenAI.BadRequestError && /does not support tools/.test(e.message) || assert.fail(`${e.status} ${e.message}`));
    await assert.rejects(o.chat({ model: 'tiny:random', messages: ASK, tools: TOOLS, stream: false }),
      e => e.status_code === 400 && /does not support tools/.test(e.error) || assert.fail(`${e.status_code} ${e.error}`));
  });
  if (failures.length) { console.error(failures.join('\n\n')); console.error(`${failures.length} failed, ${checked} passed`); process.exit(1); }
  console.log(`node ok: ${checked} checks`);
})().catch(e => { console.error(e); process.exit(1); });
JS
contains "$(cat "$WORK/node.out")" "node ok"
cat "$WORK/node.out"
serve_alive
echo "ok $TEST_NAME"
