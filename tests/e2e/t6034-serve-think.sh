#!/usr/bin/env bash
# Thinking (issue 39 part 6): ollama's think and OpenAI's reasoning_effort / reasoning.effort
# split the answer's reasoning (<think> ... </think>) into `thinking` / `reasoning_content`,
# through curl, ollama-js and openai-node, streamed and not. stories260K never writes <think>
# itself, so the thinking model here ("thinker") has a Modelfile TEMPLATE that opens the block
# in the prompt ("<think>\n", as DeepSeek-R1's templates do) and writes an empty block when
# thinking is off (as Qwen3's enable_thinking=false does); it writes a past message's .Thinking
# between the tags, which is what makes ollama (and mstore) say the model thinks. The expected
# texts come from two models that are not thinking models ("ref-on", "ref-off") whose
# templates render the very same prompts: their greedy answers, split by this test as the
# tags say (the reasoning runs to the end: stories260K writes no "</think>"), are what
# thinker's answers must split into. "q3" carries Qwen3's Jinja template (cut down): it thinks,
# renders the empty block with thinking off, and, its model writing no <think>, answers all
# content as plain ChatML ("chatml", "chatml-off") does. With thinking on, logprobs are the
# content's tokens only (a string constant as the `format` makes the model close the block). The splitter's own cases (tags cut across tokens, text
# before the tag, a lone "<") are tests/unit/test_think.c's.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_serve.sh"
S260K=$MODELS/stories260K/stories260K.gguf
[ -f "$S260K" ] || skip "$S260K not found (set MSTORE_TEST_MODELS)"
npm_clients
expect_ok mstore import "$S260K" --name stories:260k --quiet
msgs='{{- range .Messages }}{{ if eq .Role "user" }}User: {{ .Content }}
{{ else if eq .Role "assistant" }}Assistant: '
printf 'FROM stories:260k\nTEMPLATE """%s{{ if .Thinking }}<think>{{ .Thinking }}</think>{{ end }}{{ .Content }}
{{ end }}{{ end }}Assistant: {{ if and .IsThinkSet (not .Think) }}<think>\n\n</think>\n\n{{ else }}<think>\n{{ end }}"""\n' \
    "$msgs" >"$WORK/Modelfile.thinker"
printf 'FROM stories:260k\nTEMPLATE """%s{{ .Content }}\n{{ end }}{{ end }}Assistant: <think>\n"""\n' "$msgs" \
    >"$WORK/Modelfile.on"
printf 'FROM stories:260k\nTEMPLATE """%s{{ .Content }}\n{{ end }}{{ end }}Assistant: <think>\n\n</think>\n\n"""\n' \
    "$msgs" >"$WORK/Modelfile.off"
expect_ok mstore create thinker -f "$WORK/Modelfile.thinker"
expect_ok mstore create ref-on -f "$WORK/Modelfile.on"
expect_ok mstore create ref-off -f "$WORK/Modelfile.off"
# Qwen3's Jinja template, cut to what it does with thinking: past answers lose their block, and
# enable_thinking=false writes an empty one; the model writes no <think>, so all is content. Its
# references: Qwen 2.5's ChatML (no thinking) and a Go template that writes the empty block.
cat >"$WORK/Modelfile.q3" <<'MF'
FROM stories:260k
TEMPLATE """{%- for message in messages %}{{- '<|im_start|>' + message.role + '\n' }}{%- if message.role == 'assistant' and '</think>' in message.content %}{{- message.content.split('</think>')[-1].lstrip('\n') }}{%- else %}{{- message.content }}{%- endif %}{{- '<|im_end|>\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\n\n</think>\n\n' }}{%- endif %}{%- endif %}"""
MF
cat >"$WORK/Modelfile.chatml" <<'MF'
FROM stories:260k
TEMPLATE """{%- for message in messages %}{{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %}"""
MF
printf 'FROM stories:260k\nTEMPLATE """{{- range .Messages }}<|im_start|>{{ .Role }}\n{{ .Content }}<|im_end|>\n{{ end }}<|im_start|>assistant\n<think>\n\n</think>\n\n"""\n' \
    >"$WORK/Modelfile.chatml-off"
expect_ok mstore create q3 -f "$WORK/Modelfile.q3"
expect_ok mstore create chatml -f "$WORK/Modelfile.chatml"
expect_ok mstore create chatml-off -f "$WORK/Modelfile.chatml-off"
serve_start
export SERVE

"$PY" - <<'PYEOF' || fail "curl checks failed"
import json, os, subprocess, sys

SERVE = os.environ["SERVE"]
OPTS = {"temperature": 0, "seed": 1, "num_predict": 24}
MSGS = [{"role": "user", "content": "Once upon a time"}]


def post(path, body, stream=False):
    """(status, [objects]) of a request through curl: the body, or the stream's objects."""
    out = subprocess.run(["curl", "-sS", "-w", "\n%{http_code}", "-H", "Content-Type: application/json", "-d",
                          json.dumps(body), SERVE + path], capture_output=True, text=True, check=True).stdout
    text, code = out.rsplit("\n", 1)
    objs = []
    for line in text.splitlines():
        line = line[6:] if line.startswith("data: ") else line
        if line.strip() and line != "[DONE]":
            objs.append(json.loads(line))
    return int(code), objs


def ok(path, body, stream=False):
    body = dict(body, stream=stream)
    code, objs = post(path, body)
    assert code == 200, (path, body, code, objs)
    return objs


def chat(model, stream=False, **kw):
    """(thinking, content) of an /api/chat answer; None for a field never present."""
    objs = ok("/api/chat", dict(model=model, messages=MSGS, options=OPTS, **kw), stream)
    th = [o["message"]["thinking"] for o in objs if "thinking" in o["message"]]
    return ("".join(th) if th else None), "".join(o["message"]["content"] for o in objs)


def generate(model, stream=False, **kw):
    objs = ok("/api/generate", dict(model=model, prompt="Once upon a time", options=OPTS, **kw), stream)
    th = [o["thinking"] for o in objs if "thinking" in o]
    return ("".join(th) if th else None), "".join(o["response"] for o in objs)


def v1(model, stream=False, **kw):
    body = dict(model=model, messages=MSGS, temperature=0, seed=1, max_tokens=24, **kw)
    objs = ok("/v1/chat/completions", body, stream)
    if stream:
        parts = [c["delta"] for o in objs for c in o["choices"]]
        th = [d["reasoning_content"] for d in parts if "reasoning_content" in d]
        return ("".join(th) if th else None), "".join(d.get("content") or "" for d in parts)
    m = objs[0]["choices"][0]["message"]
    return m.get("reasoning_content"), m["content"]


def split(answer):
    """The reasoning of an answer that begins inside an open <think> block, as ollama's parser
    reads it: white space after the tag dropped, then up to "</think>" (there is none here)."""
    assert "</think>" not in answer, answer
    return answer.lstrip(" \t\r\n")


# the references: the same prompts, answered by models that do not think
_, on = chat("ref-on")
_, off = chat("ref-off")
_, gen_on = generate("ref-on")
assert split(on) and off and split(gen_on), (on, off, gen_on)
want_on = (split(on), "")
# a thinking model thinks unless told not to (ollama's default): unset, true, streamed or not
for stream in (False, True):
    for kw in ({}, {"think": True}):
        got = chat("thinker", stream, **kw)
        assert got == want_on, ("chat", stream, kw, got, want_on)
    got = generate("thinker", stream, think=True)
    assert got == (split(gen_on), ""), ("generate", stream, got, gen_on)
    # think false: the template writes the empty block, the answer is all content (no thinking)
    assert chat("thinker", stream, think=False) == (None, off), chat("thinker", stream, think=False)
    # OpenAI: any effort thinks, "none" does not, unset thinks as ollama does
    for kw in ({"reasoning_effort": "high"}, {"reasoning": {"effort": "low"}}, {}):
        got = v1("thinker", stream, **kw)
        assert got == want_on, ("v1", stream, kw, got, want_on)
    assert v1("thinker", stream, reasoning_effort="none") == (None, off)
    # a model that does not think answers as it always did when think is false or unset
    assert chat("ref-on", stream, think=False) == (None, on)
    assert v1("ref-on", stream) == (None, on)

# Qwen3's template: it thinks (no block in the answer: all content, as the plain ChatML renders
# the same prompt); thinking off renders the empty block
_, q_on = chat("chatml")
_, q_off = chat("chatml-off")
assert q_on and q_off and q_on != q_off, (q_on, q_off)
for stream in (False, True):
    for kw in ({}, {"think": True}):
        assert chat("q3", stream, **kw) == (None, q_on), (stream, kw, chat("q3", stream, **kw))
    assert chat("q3", stream, think=False) == (None, q_off)
    assert v1("q3", stream, reasoning_effort="none") == (None, q_off)
    assert v1("q3", stream, reasoning_effort="medium") == (None, q_on)

# an earlier answer's reasoning, sent back as ollama's clients do, is rendered where the template
# puts .Thinking: the same prompt as the reference's with the block written into the content
hist = [MSGS[0], {"role": "assistant", "content": "The end.", "thinking": "A short one."},
        {"role": "user", "content": "Again"}]
ref_hist = [MSGS[0], {"role": "assistant", "content": "<think>A short one.</think>The end."}, hist[2]]
objs = ok("/api/chat", dict(model="ref-on", messages=ref_hist, options=OPTS))
want = objs[0]["message"]["content"]
objs = ok("/api/chat", dict(model="thinker", messages=hist, options=OPTS, think=True))
assert (objs[0]["message"].get("thinking"), objs[0]["message"]["content"]) == (split(want), ""), (objs, want)

# refusals, in ollama's words where it has them
for path, body, want in [
    ("/api/chat", {"model": "ref-on", "messages": MSGS, "think": True}, '"ref-on" does not support thinking'),
    ("/api/generate", {"model": "stories:260k", "prompt": "x", "think": True},
     '"stories:260k" does not support thinking'),
    ("/v1/chat/completions", {"model": "ref-on", "messages": MSGS, "reasoning_effort": "medium"},
     '"ref-on" does not support thinking'),
    ("/api/chat", {"model": "thinker", "messages": MSGS, "think": "high"}, 'think value "high" is not supported'),
    ("/api/chat", {"model": "thinker", "messages": MSGS, "think": 1}, "think: expected"),
    ("/v1/chat/completions", {"model": "thinker", "messages": MSGS, "reasoning_effort": "max"},
     "reasoning_effort: expected"),
    ("/v1/chat/completions", {"model": "thinker", "messages": MSGS, "reasoning": {"effort": 3}},
     "reasoning.effort: expected"),
    ("/v1/completions", {"model": "thinker", "prompt": "x", "reasoning_effort": "low"}, "not supported on /v1/completions"),
]:
    for stream in (False, True):
        code, objs = post(path, dict(body, stream=stream))
        msg = repr(objs)  # the messages with their quotes unescaped
        assert code == 400 and want in msg, (path, body, stream, code, msg)

# thinking off, the same model gives logprobs
for stream in (False, True):
    objs = ok("/api/chat", dict(model="thinker", messages=MSGS, options=OPTS, think=False, logprobs=True), stream)
    assert "".join(t["token"] for o in objs for t in o.get("logprobs") or []) == \
        "".join(o["message"]["content"] for o in objs), objs

# thinking on: the logprobs are the content's tokens only. stories260K never closes the block
# itself, so a JSON string constant (structured output) makes it write '"</think>Once upon"':
# '"' is the reasoning, 'Once upon"' the content, and the tag's tokens belong to neither.
CONST = {"type": "string", "const": "</think>Once upon"}
for stream in (False, True):
    objs = ok("/api/chat", dict(model="thinker", messages=MSGS, options=dict(OPTS, num_predict=40), logprobs=True,
                                format=CONST), stream)
    content = "".join(o["message"]["content"] for o in objs)
    assert content.startswith('Once upon"'), objs
    assert "".join(o["message"].get("thinking") or "" for o in objs) == '"', objs
    assert "".join(t["token"] for o in objs for t in o.get("logprobs") or []) == content, objs
    objs = ok("/v1/chat/completions", dict(model="thinker", messages=MSGS, temperature=0, max_tokens=40, logprobs=True,
                                           reasoning_effort="low",
                                           response_format={"type": "json_schema",
                                                            "json_schema": {"name": "c", "schema": CONST}}), stream)
    ch = [o["choices"][0] for o in objs]
    content = "".join((c.get("delta") or c.get("message") or {}).get("content") or "" for c in ch)
    assert content.startswith('Once upon"'), objs
    assert "".join(t["token"] for c in ch for t in ((c.get("logprobs") or {}).get("content") or [])) == content, objs
# a thinking model that writes no <think> (q3): all of it is content, and so are the logprobs
for stream in (False, True):
    objs = ok("/api/chat", dict(model="q3", messages=MSGS, options=OPTS, logprobs=True), stream)
    content = "".join(o["message"]["content"] for o in objs)
    assert content and "".join(t["token"] for o in objs for t in o.get("logprobs") or []) == content, objs

# /api/show: "thinking" for the model whose template thinks, not for the others
for model, thinks in (("thinker", True), ("q3", True), ("ref-on", False), ("chatml", False), ("stories:260k", False)):
    code, objs = post("/api/show", {"model": model})
    assert code == 200 and ("thinking" in objs[0]["capabilities"]) == thinks, (model, objs[0]["capabilities"])
print("curl checks ok")
PYEOF

# the clients people use: ollama-js's think and thinking, openai-node's reasoning_effort and
# reasoning_content, streamed and not, against the references read through the same clients
node - <<'JS' >"$WORK/node.out" 2>&1 || fail "node: $(cat "$WORK/node.out")"
const { Ollama } = require('ollama');
const OpenAI = require('openai');
const assert = require('assert');

const o = new Ollama({ host: process.env.SERVE });
const oa = new OpenAI({ baseURL: process.env.SERVE + '/v1', apiKey: 'unused', maxRetries: 0 });
const messages = [{ role: 'user', content: 'Once upon a time' }];
const options = { temperature: 0, seed: 1, num_predict: 24 };
const lstrip = s => s.replace(/^[ \t\r\n]+/, '');

(async () => {
  const on = (await o.chat({ model: 'ref-on', messages, options })).message.content;
  const off = (await o.chat({ model: 'ref-off', messages, options })).message.content;
  assert(lstrip(on).length > 0 && off.length > 0, 'the references answer');

  let r = await o.chat({ model: 'thinker', messages, options, think: true });
  assert.strictEqual(r.message.thinking, lstrip(on));
  assert.strictEqual(r.message.content, '');
  let th = '', ct = '';
  for await (const part of await o.chat({ model: 'thinker', messages, options, think: true, stream: true })) {
    th += part.message.thinking || '';
    ct += part.message.content;
  }
  assert.strictEqual(th, lstrip(on));
  assert.strictEqual(ct, '');
  r = await o.chat({ model: 'thinker', messages, options, think: false });
  assert.strictEqual(r.message.content, off);
  assert(!r.message.thinking, 'no thinking when think is false');
  const g = await o.generate({ model: 'thinker', prompt: 'Once upon a time', options, think: true });
  const gref = await o.generate({ model: 'ref-on', prompt: 'Once upon a time', options });
  assert.strictEqual(g.thinking, lstrip(gref.response));
  await assert.rejects(o.chat({ model: 'ref-on', messages, think: true }), /"ref-on" does not support thinking/);
  const show = await o.show({ model: 'thinker' });
  assert(show.capabilities.includes('thinking'), JSON.stringify(show.capabilities));

  const req = { model: 'thinker', messages, temperature: 0, seed: 1, max_tokens: 24 };
  let c = await oa.chat.completions.create({ ...req, reasoning_effort: 'high' });
  assert.strictEqual(c.choices[0].message.reasoning_content, lstrip(on));
  assert.strictEqual(c.choices[0].message.content, '');
  th = ''; ct = '';
  for await (const chunk of await oa.chat.completions.create({ ...req, reasoning_effort: 'low', stream: true })) {
    const d = (chunk.choices[0] || {}).delta || {};
    th += d.reasoning_content || '';
    ct += d.content || '';
  }
  assert.strictEqual(th, lstrip(on));
  assert.strictEqual(ct, '');
  c = await oa.chat.completions.create({ ...req, reasoning_effort: 'none' });
  assert.strictEqual(c.choices[0].message.content, off);
  assert.strictEqual(c.choices[0].message.reasoning_content, undefined);
  console.log('clients ok');
})().catch(e => { console.error(e.stack || e); process.exit(1); });
JS
grep -q "clients ok" "$WORK/node.out" || fail "node: $(cat "$WORK/node.out")"
echo "PASS $TEST_NAME"
