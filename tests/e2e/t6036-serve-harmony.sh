#!/usr/bin/env bash
# gpt-oss's harmony format through the server: the analysis channel is the reasoning (ollama's
# thinking, OpenAI's reasoning_content), final and preambles are content, a commentary message to
# a recipient is a tool call, and no marker reaches the content, on /api/chat, /api/generate and
# /v1/chat/completions, streamed and not, through curl, ollama-js and openai-node. stories260K
# knows no harmony, so a JSON string constant (structured output, `format`) makes it write the
# messages: its answer is that JSON string, the opening quote landing in the first header, the
# closing one (with the white space the JSON grammar lets follow it) after the last message, as
# content. Its vocab has no harmony tokens: the markers are plain text here, which the splitter
# reads the same (tests/unit/test_tokenizer.c checks that a harmony vocab decodes its marker
# tokens as text and stops at <|return|> and <|call|>). The template ("harmony") is
# harmony-shaped and reads reasoning_effort and tools, as gpt-oss's does. The splitter's own
# cases (markers cut across feeds, truncation, unknown channels) are tests/unit/test_think.c's.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_serve.sh"
S260K=$MODELS/stories260K/stories260K.gguf
[ -f "$S260K" ] || skip "$S260K not found (set MSTORE_TEST_MODELS)"
npm_clients
expect_ok mstore import "$S260K" --name stories:260k --quiet
cat >"$WORK/Modelfile.harmony" <<'MF'
FROM stories:260k
TEMPLATE """<|start|>system<|message|>Reasoning: {{ reasoning_effort | default('medium') }}<|end|>{%- if tools %}<|start|>developer<|message|>{{ tools | tojson }}<|end|>{%- endif %}{%- for m in messages %}<|start|>{{ m.role }}{% if m.role == 'assistant' %}<|channel|>final{% endif %}<|message|>{{ m.content }}<|end|>{%- endfor %}{%- if add_generation_prompt %}<|start|>assistant{%- endif %}"""
MF
expect_ok mstore create harmony -f "$WORK/Modelfile.harmony"
serve_start
export SERVE

"$PY" - <<'PYEOF' || fail "curl checks failed"
import json, os, subprocess

SERVE = os.environ["SERVE"]
OPTS = {"temperature": 0, "seed": 1, "num_predict": 300}
MSGS = [{"role": "user", "content": "Once upon a time"}]
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "the weather",
                                           "parameters": {"type": "object", "properties": {}}}}]
THINK = "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>Answer."
CALL = "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{}<|call|>"
PRE = ("<|channel|>commentary<|message|>Checking.<|end|><|start|>assistant to=functions.get_weather"
       "<|channel|>commentary json<|message|>{}<|call|>")


def const(s):
    return {"type": "string", "const": s}


def post(path, body):
    out = subprocess.run(["curl", "-sS", "-w", "\n%{http_code}", "-H", "Content-Type: application/json", "-d",
                          json.dumps(body), SERVE + path], capture_output=True, text=True, check=True).stdout
    text, code = out.rsplit("\n", 1)
    objs = []
    for line in text.splitlines():
        line = line[6:] if line.startswith("data: ") else line
        if line.strip() and line != "[DONE]":
            objs.append(json.loads(line))
    return int(code), objs


def ok(path, body, stream):
    code, objs = post(path, dict(body, stream=stream))
    assert code == 200, (path, body, code, objs)
    return objs


def chat(stream, fmt, **kw):
    """(thinking or None, content, [(name, arguments)]) of an /api/chat answer"""
    objs = ok("/api/chat", dict(model="harmony", messages=MSGS, options=OPTS, format=const(fmt), **kw), stream)
    th = [o["message"]["thinking"] for o in objs if "thinking" in o["message"]]
    calls = [(c["function"]["name"], c["function"]["arguments"]) for o in objs
             for c in o["message"].get("tool_calls") or []]
    return ("".join(th) if th else None), "".join(o["message"]["content"] for o in objs), calls


def v1(stream, fmt, **kw):
    body = dict(model="harmony", messages=MSGS, temperature=0, seed=1, max_tokens=300,
                response_format={"type": "json_schema", "json_schema": {"name": "h", "schema": const(fmt)}}, **kw)
    objs = ok("/v1/chat/completions", body, stream)
    if not stream:
        m = objs[0]["choices"][0]["message"]
        calls = [(c["function"]["name"], c["function"]["arguments"]) for c in m.get("tool_calls") or []]
        return m.get("reasoning_content"), m["content"] or "", calls, objs[0]["choices"][0]["finish_reason"]
    parts = [c["delta"] for o in objs for c in o["choices"]]
    th = [d["reasoning_content"] for d in parts if "reasoning_content" in d]
    calls, names = {}, {}
    for d in parts:
        for c in d.get("tool_calls") or []:
            f = c.get("function") or {}
            if f.get("name"):
                names[c["index"]] = f["name"]
            calls[c["index"]] = calls.get(c["index"], "") + (f.get("arguments") or "")
    reasons = [c["finish_reason"] for o in objs for c in o["choices"] if c.get("finish_reason")]
    return (("".join(th) if th else None), "".join(d.get("content") or "" for d in parts),
            [(names[i], calls[i]) for i in sorted(calls)], reasons[-1])


def no_markers(*texts):
    for t in texts:
        assert "<|" not in (t or ""), t


for stream in (False, True):
    # the analysis is the thinking, think unset, true or false, as ollama's harmony parser has it
    # (gpt-oss reasons whatever think says: false only leaves the template's effort line out)
    for kw in ({}, {"think": True}, {"think": False}, {"think": "high"}):
        th, ct, calls = chat(stream, THINK, **kw)
        assert th == "Think." and ct.startswith('Answer."') and not calls, (stream, kw, th, ct, calls)
    # tool calls, the recipient after the channel and after the role (with a preamble)
    th, ct, calls = chat(stream, CALL, tools=TOOLS)
    assert calls == [("get_weather", {})] and ct.strip('" \n') == "" and th is None, (stream, th, ct, calls)
    th, ct, calls = chat(stream, PRE, tools=TOOLS)
    assert calls == [("get_weather", {})] and ct.rstrip() == 'Checking."', (stream, th, ct, calls)
    # /api/generate applies the template: the same split
    objs = ok("/api/generate", dict(model="harmony", prompt="Once upon a time", options=OPTS, format=const(THINK)),
              stream)
    th, resp = "".join(o.get("thinking") or "" for o in objs), "".join(o["response"] for o in objs)
    assert th == "Think." and resp.startswith('Answer."'), (stream, th, resp)
    no_markers(resp)
    # OpenAI: reasoning_content, effort levels reach the template, calls with finish_reason tool_calls
    for kw in ({}, {"reasoning_effort": "high"}, {"reasoning_effort": "none"}):
        th, ct, calls, why = v1(stream, THINK, **kw)
        assert th == "Think." and ct.startswith('Answer."') and not calls and why == "stop", (stream, kw, th, ct)
    th, ct, calls, why = v1(stream, PRE, tools=TOOLS)
    assert ct.rstrip() == 'Checking."' and calls == [("get_weather", "{}")] and why == "tool_calls", (stream, th, ct, calls)
    no_markers(th, ct)

# logprobs: the content's tokens, none of the markers' or the reasoning's (a token that a
# marker and the content share is the content's: stories260K spells "<|message|>" in pieces)
for stream in (False, True):
    objs = ok("/api/chat", dict(model="harmony", messages=MSGS, options=OPTS, format=const(THINK), logprobs=True),
              stream)
    content = "".join(o["message"]["content"] for o in objs)
    toks = "".join(t["token"] for o in objs for t in o.get("logprobs") or [])
    assert content.startswith('Answer."') and toks.endswith(content) and "Think" not in toks, (stream, toks, content)
    assert len(toks) - len(content) < len("<|message|>"), (stream, toks, content)

# a forced call is a grammar over the whole answer, which harmony's is not: refused, not ignored
code, objs = post("/v1/chat/completions", dict(model="harmony", messages=MSGS, tools=TOOLS, tool_choice="required"))
assert code == 400 and "harmony" in repr(objs), (code, objs)
# /api/show: the harmony template thinks (through reasoning_effort and its analysis channel) and takes tools
code, objs = post("/api/show", {"model": "harmony"})
assert code == 200 and {"thinking", "tools"} <= set(objs[0]["capabilities"]), objs[0]["capabilities"]
print("curl checks ok")
PYEOF

# the clients people use: ollama-js's thinking and tool_calls, openai-node's reasoning_content and
# tool_calls, streamed and not
node - <<'JS' >"$WORK/node.out" 2>&1 || fail "node: $(cat "$WORK/node.out")"
const { Ollama } = require('ollama');
const OpenAI = require('openai');
const assert = require('assert');

const o = new Ollama({ host: process.env.SERVE });
const oa = new OpenAI({ baseURL: process.env.SERVE + '/v1', apiKey: 'unused', maxRetries: 0 });
const messages = [{ role: 'user', content: 'Once upon a time' }];
const options = { temperature: 0, seed: 1, num_predict: 300 };
const konst = s => ({ type: 'string', const: s });
const THINK = '<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>Answer.';
const PRE = '<|channel|>commentary<|message|>Checking.<|end|><|start|>assistant to=functions.get_weather' +
  '<|channel|>commentary json<|message|>{}<|call|>';
const tools = [{ type: 'function', function: { name: 'get_weather', description: 'the weather',
  parameters: { type: 'object', properties: {} } } }];

(async () => {
  let r = await o.chat({ model: 'harmony', messages, options, format: konst(THINK) });
  assert.strictEqual(r.message.thinking, 'Think.');
  assert(r.message.content.startsWith('Answer."'), r.message.content);
  let th = '', ct = '', calls = [];
  for await (const part of await o.chat({ model: 'harmony', messages, options, format: konst(PRE), tools,
                                          stream: true })) {
    th += part.message.thinking || '';
    ct += part.message.content;
    calls.push(...(part.message.tool_calls || []));
  }
  assert.strictEqual(ct.trimEnd(), 'Checking."');
  assert.deepStrictEqual(calls.map(c => [c.function.name, c.function.arguments]), [['get_weather', {}]]);
  const show = await o.show({ model: 'harmony' });
  assert(show.capabilities.includes('thinking'), JSON.stringify(show.capabilities));

  const req = { model: 'harmony', messages, temperature: 0, seed: 1, max_tokens: 300 };
  const rf = s => ({ type: 'json_schema', json_schema: { name: 'h', schema: konst(s) } });
  let c = await oa.chat.completions.create({ ...req, reasoning_effort: 'low', response_format: rf(THINK) });
  assert.strictEqual(c.choices[0].message.reasoning_content, 'Think.');
  assert(c.choices[0].message.content.startsWith('Answer."'), c.choices[0].message.content);
  c = await oa.chat.completions.create({ ...req, tools, response_format: rf(PRE) });
  assert.strictEqual(c.choices[0].finish_reason, 'tool_calls');
  assert.strictEqual(c.choices[0].message.tool_calls[0].function.name, 'get_weather');
  assert.strictEqual(c.choices[0].message.tool_calls[0].function.arguments, '{}');
  th = ''; ct = ''; let name = '', args = '';
  for await (const chunk of await oa.chat.completions.create({ ...req, response_format: rf(THINK), stream: true })) {
    const d = (chunk.choices[0] || {}).delta || {};
    th += d.reasoning_content || '';
    ct += d.content || '';
  }
  assert.strictEqual(th, 'Think.');
  assert(ct.startsWith('Answer."') && !ct.includes('<|'), ct);
  for await (const chunk of await oa.chat.completions.create({ ...req, tools, response_format: rf(PRE), stream: true })) {
    const d = (chunk.choices[0] || {}).delta || {};
    for (const t of d.tool_calls || []) {
      name += (t.function || {}).name || '';
      args += (t.function || {}).arguments || '';
    }
  }
  assert.strictEqual(name, 'get_weather');
  assert.strictEqual(args, '{}');
  console.log('clients ok');
})().catch(e => { console.error(e.stack || e); process.exit(1); });
JS
grep -q "clients ok" "$WORK/node.out" || fail "node: $(cat "$WORK/node.out")"
echo "PASS $TEST_NAME"
