#!/usr/bin/env bash
# logprobs (issue 39 item 6) through ollama-js and openai-node and curl, greedy on stories260K:
# /v1/chat/completions (logprobs, top_logprobs), /v1/completions (logprobs: N), /api/generate
# and /api/chat (logprobs, top_logprobs), streamed and not. Each token's logprob is the largest
# of its alternatives (greedy), the alternatives' probabilities sum to at most 1, the tokens
# (and their bytes) join to the answer's text, each stream chunk's tokens to that chunk's text,
# and a streamed answer reports what the whole one does. The numbers are those of
# tests/reference/ref_forward.py (float64, apart from src/runtime) for "Once upon a time"
# (BOS 403 407 261 378): the log-softmax of the model's logits, whatever the temperature.
# Bad values are refused with 400 naming the field.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_serve.sh"
S260K=$MODELS/stories260K/stories260K.gguf
[ -f "$S260K" ] || skip "$S260K not found (set MSTORE_TEST_MODELS)"
npm_clients
expect_ok mstore import "$S260K" --name stories:260k --quiet
# The reference: per greedy step the chosen token's text and logprob and the 5 best, decoded
# from the GGUF's own vocab. Tolerance 1e-4: the runtime's logits are float32 (a relative error
# of about 1e-7 an operation, summed over dot products of 64 to 172 terms through 5 layers);
# measured differences are about 3e-6, while reporting another distribution (after temperature,
# or without the max subtracted in float) moves them by 1e-2 or more.
export REF=null
if "$PY" -c 'import numpy' 2>/dev/null; then
    REF=$("$PY" - "$S260K" <<'PYEOF') || fail "ref_forward.py --logprobs"
import json, os, re, subprocess, sys
src = os.environ['MSTORE_SRC']
sys.path.insert(0, os.path.join(src, 'tests', 'reference'))
import ref_forward as rf
out = subprocess.run([sys.executable, os.path.join(src, 'tests', 'reference', 'ref_forward.py'), sys.argv[1],
                      '--prompt', '1,403,407,261,378', '--steps', '12', '--logprobs', '5'],
                     check=True, capture_output=True).stdout
steps = json.loads(out)['prompts'][0]['logprobs']
vocab = rf.Gguf(sys.argv[1]).kv['tokenizer.ggml.tokens']
def text(t):
    piece = vocab[t]
    b = re.fullmatch(rb'<0x([0-9A-Fa-f]{2})>', piece)
    return (bytes([int(b.group(1), 16)]) if b else piece.replace('\u2581'.encode(), b' ')).decode('utf-8', 'replace')
print(json.dumps([{'token': text(s['token']), 'logprob': s['logprob'],
                   'top': [[text(i), lp] for i, lp in s['top']]} for s in steps]))
PYEOF
else
    echo "note: no numpy; logprobs are checked against each other, not the float64 reference" >&2
fi
serve_start
export SERVE

node - <<'JS' >"$WORK/node.out" 2>&1 || fail "node: $(cat "$WORK/node.out")"
const { Ollama } = require('ollama');
const OpenAI = require('openai');
const assert = require('assert');
const o = new Ollama({ host: process.env.SERVE });
const oa = new OpenAI({ baseURL: process.env.SERVE + '/v1', apiKey: 'unused', maxRetries: 0 });
const REF = JSON.parse(process.env.REF);
const TOL = 1e-4;
const M = 'stories:260k', P = 'Once upon a time', N = 12;
const eq = (got, want, what) => assert.strictEqual(got, want, `${what}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
const near = (got, want, what) => assert(Math.abs(got - want) <= TOL, `${what}: got ${got}, want ${want} (reference)`);

// One answer's list of {token, logprob, bytes, top_logprobs}: greedy, so the chosen token is the
// first and likeliest alternative; k alternatives; joined they spell text; `ref`: the prompt is
// the reference's, compare the numbers.
function check(list, text, k, ref, what) {
  assert(Array.isArray(list) && list.length > 0, `${what}: no logprobs: ${JSON.stringify(list)}`);
  eq(Buffer.concat(list.map((e) => Buffer.from(e.bytes))).toString('utf8'), text, `${what}: bytes joined`);
  eq(list.map((e) => e.token).join(''), text, `${what}: tokens joined`);
  list.forEach((e, i) => {
    const w = `${what} token ${i}`;
    assert(e.logprob <= 0, `${w}: logprob ${e.logprob} > 0`);
    eq(e.top_logprobs.length, k, `${w}: alternatives`);
    if (k) {
      eq(e.logprob, Math.max(...e.top_logprobs.map((a) => a.logprob)), `${w}: chosen vs the best alternative`);
      eq(e.top_logprobs[0].token, e.token, `${w}: first alternative`);
    }
    for (let a = 1; a < k; a++)
      assert(e.top_logprobs[a].logprob <= e.top_logprobs[a - 1].logprob, `${w}: alternatives not best first`);
    const sum = e.top_logprobs.reduce((s, a) => s + Math.exp(a.logprob), 0);
    assert(sum <= 1 + 1e-9, `${w}: alternatives' probabilities sum to ${sum}`);
    e.top_logprobs.forEach((a) => eq(Buffer.from(a.bytes).toString('utf8'), a.token, `${w}: alternative bytes`));
    if (ref && REF) {
      eq(e.token, REF[i].token, `${w}: token`);
      near(e.logprob, REF[i].logprob, `${w}: logprob`);
      e.top_logprobs.forEach((a, x) => {
        eq(a.token, REF[i].top[x][0], `${w}: alternative ${x}`);
        near(a.logprob, REF[i].top[x][1], `${w}: alternative ${x} logprob`);
      });
    }
  });
}
const strip = (l) => l.map(({ token, logprob, bytes, top_logprobs }) => ({ token, logprob, bytes, top_logprobs }));

(async () => {
  // ollama-js /api/generate: no template (stories260K has none), so the reference's prompt
  const g = { model: M, prompt: P, options: { temperature: 0, num_predict: N }, logprobs: true, top_logprobs: 5 };
  const r = await o.generate(g);
  check(r.logprobs, r.response, 5, true, 'ollama generate');
  let text = '', lps = [];
  for await (const p of await o.generate({ ...g, stream: true })) {
    text += p.response;
    if (!p.done) check(p.logprobs, p.response, 5, false, 'ollama generate chunk');
    lps.push(...(p.logprobs || []));
  }
  eq(text, r.response, 'ollama generate streamed text');
  assert.deepStrictEqual(lps, r.logprobs, 'ollama generate: streamed logprobs differ');
  // the distribution is the model's, before temperature: a sampled first token reports the same
  // alternatives as the greedy one
  const s = await o.generate({ ...g, options: { temperature: 1.5, top_k: 3, seed: 7, num_predict: 1 } });
  assert.deepStrictEqual(s.logprobs[0].top_logprobs, r.logprobs[0].top_logprobs, 'sampled vs greedy alternatives');

  // ollama-js /api/chat (the chat renders "user: ...": the numbers are not the reference's)
  const c = { model: M, messages: [{ role: 'user', content: P }], options: { temperature: 0, num_predict: N },
    logprobs: true, top_logprobs: 3 };
  const rc = await o.chat(c);
  check(rc.logprobs, rc.message.content, 3, false, 'ollama chat');
  text = '', lps = [];
  for await (const p of await o.chat({ ...c, stream: true })) {
    text += p.message.content;
    if (!p.done) check(p.logprobs, p.message.content, 3, false, 'ollama chat chunk');
    lps.push(...(p.logprobs || []));
  }
  eq(text, rc.message.content, 'ollama chat streamed text');
  assert.deepStrictEqual(lps, rc.logprobs, 'ollama chat: streamed logprobs differ');
  const none = await o.generate({ ...g, logprobs: false, top_logprobs: 0 });
  eq(none.logprobs, undefined, 'logprobs: false');

  // openai-node /v1/chat/completions
  const q = { model: M, messages: [{ role: 'user', content: P }], temperature: 0, max_tokens: N, logprobs: true,
    top_logprobs: 4 };
  const oc = await oa.chat.completions.create(q);
  check(oc.choices[0].logprobs.content, oc.choices[0].message.content, 4, false, 'openai chat');
  eq(oc.choices[0].message.content, rc.message.content, 'openai chat vs ollama chat');
  text = '', lps = [];
  for await (const ch of await oa.chat.completions.create({ ...q, stream: true })) {
    const d = ch.choices[0];
    if (d.delta.content) {
      text += d.delta.content;
      check(d.logprobs.content, d.delta.content, 4, false, 'openai chat chunk');
      lps.push(...d.logprobs.content);
    }
  }
  eq(text, oc.choices[0].message.content, 'openai chat streamed text');
  assert.deepStrictEqual(lps, oc.choices[0].logprobs.content, 'openai chat: streamed logprobs differ');
  const z = await oa.chat.completions.create({ ...q, top_logprobs: 0 });
  check(z.choices[0].logprobs.content, z.choices[0].message.content, 0, false, 'openai chat top_logprobs 0');
  const off = await oa.chat.completions.create({ ...q, logprobs: false, top_logprobs: undefined });
  eq(off.choices[0].logprobs, null, 'openai chat logprobs: false');

  // openai-node /v1/completions: the legacy shape, the reference's prompt
  const k = { model: M, prompt: P, temperature: 0, max_tokens: N, logprobs: 5 };
  const oq = await oa.completions.create(k);
  const L = oq.choices[0].logprobs, t = oq.choices[0].text;
  eq(L.tokens.join(''), t, 'completions tokens joined');
  eq(t, r.response, 'completions vs ollama generate');
  let chars = 0;
  L.tokens.forEach((tok, i) => {
    const w = `completions token ${i}`;
    eq(L.token_logprobs[i], r.logprobs[i].logprob, `${w}: logprob vs ollama's`);
    eq(L.text_offset[i], chars, `${w}: text_offset`);
    chars += [...tok].length;
    const alt = L.top_logprobs[i];
    assert(Object.keys(alt).length <= 5 && Object.keys(alt).length > 0, `${w}: ${JSON.stringify(alt)}`);
    eq(alt[tok], L.token_logprobs[i], `${w}: chosen among the alternatives`);
    eq(Math.max(...Object.values(alt)), L.token_logprobs[i], `${w}: chosen is the best`);
    assert(Object.values(alt).reduce((s, v) => s + Math.exp(v), 0) <= 1 + 1e-9, `${w}: sum`);
    if (REF) near(L.token_logprobs[i], REF[i].logprob, `${w}: logprob`);
  });
  text = '', lps = [];
  for await (const ch of await oa.completions.create({ ...k, stream: true })) {
    const d = ch.choices[0];
    if (d.text) {
      text += d.text;
      eq(d.logprobs.tokens.join(''), d.text, 'completions chunk tokens');
      lps.push(...d.logprobs.token_logprobs);
    }
  }
  eq(text, t, 'completions streamed text');
  assert.deepStrictEqual(lps, L.token_logprobs, 'completions: streamed logprobs differ');
  const z0 = await oa.completions.create({ ...k, logprobs: 0 });
  eq(z0.choices[0].logprobs.token_logprobs.length, z0.choices[0].logprobs.tokens.length, 'logprobs 0: chosen only');
  assert(z0.choices[0].logprobs.top_logprobs.every((a) => Object.keys(a).length === 0), 'logprobs 0: no alternatives');
  console.log('ok');
})().catch((e) => { console.error(e); process.exit(1); });
JS

# curl: a streamed chat's SSE chunks, each with its tokens, the [DONE] after
curl -sN --max-time 60 "$SERVE/v1/chat/completions" -d '{"model": "stories:260k", "stream": true, "temperature": 0,
    "max_tokens": 8, "logprobs": true, "top_logprobs": 2, "messages": [{"role": "user", "content": "Once upon a time"}]}' \
    >"$WORK/sse" || fail "curl stream"
"$PY" - "$WORK/sse" <<'PYEOF' || fail "curl stream: $(cat "$WORK/sse")"
import json, math, sys
lines = [l[6:] for l in open(sys.argv[1]).read().split('\n') if l.startswith('data: ')]
assert lines[-1] == '[DONE]', lines[-1]
n = 0
for l in lines[:-1]:
    c = json.loads(l)['choices'][0]
    text = c['delta'].get('content')
    if not text:
        continue
    toks = c['logprobs']['content']
    assert ''.join(t['token'] for t in toks) == text, (toks, text)
    for t in toks:
        assert len(t['top_logprobs']) == 2 and t['logprob'] == t['top_logprobs'][0]['logprob'], t
        assert sum(math.exp(a['logprob']) for a in t['top_logprobs']) <= 1 + 1e-9, t
        n += 1
assert n == 8, n
PYEOF

# a stop string that ends inside a token (" there" of ", there was"): the text stops where the
# stop string starts, and the tokens reported are the ones shown whole, a prefix of the text
for st in true false; do
    curl -s --max-time 60 "$SERVE/api/generate" -d '{"model": "stories:260k", "prompt": "Once upon a time",
        "stream": '$st', "options": {"temperature": 0, "num_predict": 12, "stop": ["re wa"]}, "logprobs": true}' \
        >"$WORK/stop" || fail "curl stop"
    "$PY" - "$WORK/stop" <<'PYEOF' || fail "stop string with logprobs (stream $st): $(cat "$WORK/stop")"
import json, sys
text, toks = '', ''
for l in open(sys.argv[1]):
    o = json.loads(l)
    text += o.get('response', '')
    toks += ''.join(t['token'] for t in o.get('logprobs') or [])
assert 're wa' not in text and text and toks and text.startswith(toks) and len(toks) < len(text), (text, toks)
PYEOF
done

bad() { # bad STATUS WANT URL BODY
    local got
    got=$(curl -s --max-time 20 -w ' %{http_code}' "$SERVE$3" -d "$4")
    contains "$got" "$2"
    [ "${got##* }" = "$1" ] || fail "$3 $4: status ${got##* }, want $1: $got"
}
C=/v1/chat/completions
MSG='"model": "stories:260k", "messages": [{"role": "user", "content": "hi"}]'
bad 400 'top_logprobs: expected an integer from 0 to 20' $C "{$MSG, \"logprobs\": true, \"top_logprobs\": 21}"
bad 400 'logprobs: expected true or false' $C "{$MSG, \"logprobs\": \"x\"}"
bad 400 'top_logprobs: needs logprobs: true' $C "{$MSG, \"top_logprobs\": 3}"
bad 400 'logprobs: expected an integer from 0 to 5' /v1/completions '{"model": "stories:260k", "prompt": "a", "logprobs": 6}'
bad 400 'logprobs: expected true or false' /api/generate '{"model": "stories:260k", "prompt": "a", "logprobs": "x"}'
bad 400 'top_logprobs: expected an integer from 0 to 20' /api/chat "{$MSG, \"logprobs\": true, \"top_logprobs\": 21}"
serve_alive
