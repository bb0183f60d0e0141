#!/usr/bin/env bash
# POST /api/create, ollama's create API, over the library code `mstore create -f` runs: from a
# stored model with a template, a system prompt and parameters it gives the very manifest the
# same Modelfile gives (one digest), streamed as {"status"} objects ending in "success" (one
# object with stream false); /api/show shows the parts and generate answers with them (the
# model's system prompt, temperature, num_predict and stop). From an uploaded GGUF blob
# ("files"), through curl and the real ollama-js client. Refusals before the stream, with the
# store unchanged: an unknown base 404, a bad or unknown parameter 400 naming it, adapters,
# quantize, a path as "from", a blob not uploaded.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_serve.sh"
S260K=$MODELS/stories260K/stories260K.gguf
[ -f "$S260K" ] || skip "stories260K not found under $MODELS"
command -v curl >/dev/null || skip "no curl"
npm_clients
expect_ok mstore import "$S260K" --name s --quiet

# What the CLI makes of the same parts (t2010's story: the greedy answer stops before " box").
TEMPLATE=$'{{ if .System }}S: {{ .System }}\n{{ end }}U: {{ .Prompt }}\nA:'
cat >"$WORK/Modelfile" <<'MF'
FROM s
PARAMETER temperature 0
PARAMETER num_predict 20
PARAMETER stop " box"
SYSTEM Be kind.
TEMPLATE """{{ if .System }}S: {{ .System }}
{{ end }}U: {{ .Prompt }}
A:"""
MF
expect_ok mstore create cli-story -f "$WORK/Modelfile"
export CLI_DIGEST=$out
expect_ok mstore run cli-story "Once upon a time"
export WANT=$out
[ -n "$WANT" ] || fail "the CLI's model answered nothing"
expect_ok mstore run s --raw "Once upon a time" --temp 0 -n 12
export WANT_RAW=$out
serve_start
export SERVE TEMPLATE
S256=$(sha256sum "$S260K" | cut -d' ' -f1)
export GGUF_DIGEST=sha256:$S256

post() { # post PATH JSON: sets code, body
    body=$(curl -s -o /dev/stdout -w '\n%{http_code}' -X POST --data-binary "$2" "$SERVE$1")
    code=${body##*$'\n'}
    body=${body%$'\n'*}
}

# curl, streamed (the default): status objects, the last "success"
req=$("$PY" -c 'import json, os; print(json.dumps({"model": "api-story", "from": "s", "system": "Be kind.",
  "template": os.environ["TEMPLATE"], "parameters": {"temperature": 0, "num_predict": 20, "stop": [" box"]}}))')
post /api/create "$req"
[ "$code" = 200 ] || fail "create: HTTP $code $body"
printf '%s\n' "$body" | "$PY" -c '
import json, sys
lines = [json.loads(l) for l in sys.stdin if l.strip()]
assert all(set(l) == {"status"} for l in lines), lines
assert lines[-1] == {"status": "success"}, lines
assert len(lines) > 2, lines' || fail "create stream: $body"
expect_ok mstore show api-story --modelfile
contains "$out" "FROM api-story:latest"
# the same parts make the same manifest as the Modelfile: one code path
expect_ok mstore list
contains "$out" "api-story:latest"
api_id=$(printf '%s\n' "$out" | awk '$1 == "api-story:latest" {print $2}')
case "$CLI_DIGEST" in "sha256:$api_id"*) ;; *) fail "API manifest $api_id != the CLI's $CLI_DIGEST" ;; esac

# stream false: one object
post /api/create '{"model": "plain", "from": "s", "stream": false, "parameters": {"num_predict": 12, "temperature": 0}}'
[ "$code" = 200 ] && [ "$body" = '{"status":"success"}' ] || fail "create stream false: HTTP $code $body"

# Refusals before anything is written, the store unchanged.
state=$(store_state)
bad() { # bad CODE SUBSTRING JSON
    post /api/create "$3"
    [ "$code" = "$1" ] || fail "$3: HTTP $code, want $1: $body"
    contains "$body" "$2"
    [ "$(store_state)" = "$state" ] || fail "a refused create changed the store ($3)"
}
bad 404 "model 'nosuch:latest' not found" '{"model": "x", "from": "nosuch"}'
bad 400 '"error":"parameters.tempreature: unknown parameter"' '{"model": "x", "from": "s", "parameters": {"tempreature": 1}}'
bad 400 'parameters.temperature: expected a number from 0 to 100; 300 is too large' \
    '{"model": "x", "from": "s", "parameters": {"temperature": 300}}'
bad 400 'parameters.seed: expected an integer' '{"model": "x", "from": "s", "parameters": {"seed": 4.5}}'
bad 400 'parameters.stop[0]: expected a non-empty string' '{"model": "x", "from": "s", "parameters": {"stop": [1]}}'
bad 400 'adapters: LoRA adapters are not supported yet' \
    "{\"model\": \"x\", \"from\": \"s\", \"adapters\": {\"lora.gguf\": \"$GGUF_DIGEST\"}}"
bad 400 "quantize: quantizing on create is not supported yet ('q4_K_M'" '{"model": "x", "from": "s", "quantize": "q4_K_M"}'
bad 400 'from or files: required' '{"model": "x", "system": "hi"}'
bad 400 'model: required' '{"from": "s"}'
bad 400 "from: name '$S260K'" "{\"model\": \"x\", \"from\": \"$S260K\"}"
bad 400 'template: TEMPLATE does not parse' '{"model": "x", "from": "s", "template": "{{ if .System }}"}'
bad 400 'messages[0].role: expected' '{"model": "x", "from": "s", "messages": [{"role": "bot", "content": "hi"}]}'
bad 400 "files: 'stories.gguf': blob $GGUF_DIGEST is not in the store; upload it first" \
    "{\"model\": \"x\", \"files\": {\"stories.gguf\": \"$GGUF_DIGEST\"}}"
bad 400 "files: '../x.gguf': expected a file name" "{\"model\": \"x\", \"files\": {\"../x.gguf\": \"$GGUF_DIGEST\"}}"

# Upload the GGUF as ollama's clients do (HEAD, then POST), then create from it with ollama-js.
code=$(curl -s -o /dev/null -w '%{http_code}' -I "$SERVE/api/blobs/$GGUF_DIGEST")
[ "$code" = 404 ] || fail "HEAD of a blob not uploaded: $code"
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST --data-binary @"$S260K" "$SERVE/api/blobs/$GGUF_DIGEST")
[ "$code" = 201 ] || fail "blob upload: HTTP $code"

node - <<'JS' >"$WORK/node.out" 2>&1 || fail "ollama-js: $(cat "$WORK/node.out")"
const { Ollama } = require('ollama');
const assert = require('assert');
const o = new Ollama({ host: process.env.SERVE });
const eq = (got, want, what) => assert.strictEqual(got, want, `${what}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
(async () => {
  // from a stored model, streamed: the statuses end in success
  const statuses = [];
  for await (const p of await o.create({ model: 'js-story', from: 's', system: 'Be kind.', template: process.env.TEMPLATE,
                                         parameters: { temperature: 0, num_predict: 20, stop: [' box'] }, stream: true }))
    statuses.push(p.status);
  eq(statuses[statuses.length - 1], 'success', 'last status');
  const sh = await o.show({ model: 'js-story' });
  eq(sh.system, 'Be kind.', 'show system');
  eq(sh.template, process.env.TEMPLATE, 'show template');
  assert(/^temperature +0/m.test(sh.parameters) && /^num_predict +20$/m.test(sh.parameters) &&
         /^stop +" box"$/m.test(sh.parameters), `show parameters: ${sh.parameters}`);
  assert(sh.modelfile.includes('SYSTEM "Be kind."'), `show modelfile: ${sh.modelfile}`);
  // generate uses the model's system prompt, temperature, num_predict and stop
  const g = await o.generate({ model: 'js-story', prompt: 'Once upon a time', stream: false });
  eq(g.response, process.env.WANT, 'generate on the created model');
  eq(g.done_reason, 'stop', 'stopped at " box"');
  // the request's options still win over the model's
  const g2 = await o.generate({ model: 'js-story', prompt: 'Once upon a time', stream: false, options: { num_predict: 3 } });
  eq(g2.eval_count, 3, 'options.num_predict over the model parameter');
  // from the uploaded GGUF ("files"), not streamed: one object
  const r = await o.create({ model: 'from-blob', files: { 'stories.gguf': process.env.GGUF_DIGEST }, stream: false });
  eq(r.status, 'success', 'create from files');
  const gb = await o.generate({ model: 'from-blob', prompt: 'Once upon a time', raw: true, stream: false,
                                options: { temperature: 0, num_predict: 12 } });
  eq(gb.response, process.env.WANT_RAW, 'generate on the model made from the blob');
  await assert.rejects(o.create({ model: 'y', from: 's', parameters: { top_k: -1 } }),
                       e => e.status_code === 400 && /parameters\.top_k/.test(e.error), 'bad parameter through ollama-js');
  await assert.rejects(o.create({ model: 'y', from: 'nosuch' }), e => e.status_code === 404, 'unknown base through ollama-js');
  console.log('node ok');
})().catch(e => { console.error(e); process.exit(1); });
JS
contains "$(cat "$WORK/node.out")" "node ok"
# the model made from the blob is the GGUF imported: the same tensor blobs as s
expect_ok mstore show from-blob --tensors
blob_tensors=$(printf '%s\n' "$out" | awk '/^Tensors/ {t=1; next} t {print $1, $NF}')
expect_ok mstore show s --tensors
[ -n "$blob_tensors" ] && [ "$blob_tensors" = "$(printf '%s\n' "$out" | awk '/^Tensors/ {t=1; next} t {print $1, $NF}')" ] ||
    fail "the model made from the uploaded GGUF has other tensor blobs than its import"
expect_ok mstore verify
serve_alive
echo "ok $TEST_NAME"
