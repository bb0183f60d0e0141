#!/usr/bin/env bash
# /api/show's "capabilities" (Open WebUI and the ollama CLI read them) says what a model can do
# with what mstore builds, and each claim agrees with what the server then does: "completion"
# for an architecture the runtime runs (and generate answers), none for one it does not (and
# generate refuses it); no "insert" even for a template that takes .Suffix, while generate
# refuses suffix; "tools" exactly for a template that renders tools (chat then takes them, and
# refuses them for the others); "embedding" only for an embedding model (e2e t6024), never for
# these decoders; never vision; "thinking" for none of these templates (t6034 has one).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_serve.sh"
S260K=$MODELS/stories260K/stories260K.gguf
[ -f "$S260K" ] || skip "stories260K not found under $MODELS"
command -v curl >/dev/null || skip "no curl"
npm_clients
expect_ok mstore import "$S260K" --name stories:260k --quiet
# The same file claiming an architecture no decoder runs ("llama" -> "mamba" in its metadata).
"$PY" - "$S260K" "$WORK/mamba.gguf" <<'PYEOF'
import sys
d = open(sys.argv[1], "rb").read()
arch = b"general.architecture\x08\x00\x00\x00\x05\x00\x00\x00\x00\x00\x00\x00"
assert d.count(arch + b"llama") == 1
d = d.replace(arch + b"llama", arch + b"mamba").replace(b"llama.", b"mamba.")
open(sys.argv[2], "wb").write(d)
PYEOF
expect_ok mstore import "$WORK/mamba.gguf" --name mamba --quiet
# A fill-in-the-middle template (as code models have): .Suffix is there, generate refuses suffix.
cat >"$WORK/Modelfile" <<'MF'
FROM stories:260k
TEMPLATE """{{ if .Suffix }}<PRE> {{ .Prompt }} <SUF>{{ .Suffix }} <MID>{{ else }}{{ .Prompt }}{{ end }}"""
MF
expect_ok mstore create fim -f "$WORK/Modelfile"
# A template that renders tools and their calls: ollama's qwen2.5 (tests/data/gotmpl-tools).
printf 'FROM stories:260k\nTEMPLATE """%s"""\n' "$(cat "$MSTORE_SRC/tests/data/gotmpl-tools/qwen2.5.gotmpl")" >"$WORK/Modelfile.tools"
expect_ok mstore create toolish -f "$WORK/Modelfile.tools"
serve_start
export SERVE

caps() { # caps MODEL: the capabilities array, as JSON
    curl -s -X POST --data-binary "{\"model\": \"$1\"}" "$SERVE/api/show" |
        "$PY" -c 'import json, sys; print(json.dumps(json.load(sys.stdin)["capabilities"]))'
}
c=$(caps stories:260k) || fail "show stories:260k has no capabilities"
[ "$c" = '["completion"]' ] || fail "stories:260k capabilities: $c"
c=$(caps mamba) || fail "show mamba has no capabilities"
[ "$c" = '[]' ] || fail "an architecture no decoder runs claims: $c"
c=$(caps fim) || fail "show fim has no capabilities"
[ "$c" = '["completion"]' ] || fail "fim capabilities (suffix is refused by generate): $c"
c=$(caps toolish) || fail "show toolish has no capabilities"
[ "$c" = '["completion", "tools"]' ] || fail "toolish capabilities: $c"

# Each claim agrees with what the server does.
code=$(curl -s -o "$WORK/r" -w '%{http_code}' -X POST --data-binary \
    '{"model": "mamba", "prompt": "hi", "stream": false}' "$SERVE/api/generate")
[ "$code" = 500 ] && grep -q "architecture 'mamba' is not supported" "$WORK/r" || fail "generate on mamba: $code $(cat "$WORK/r")"
code=$(curl -s -o "$WORK/r" -w '%{http_code}' -X POST --data-binary \
    '{"model": "fim", "prompt": "def f(", "suffix": "return 1", "stream": false}' "$SERVE/api/generate")
[ "$code" = 400 ] && grep -q '"suffix: not supported' "$WORK/r" || fail "generate with suffix: $code $(cat "$WORK/r")"
code=$(curl -s -o "$WORK/r" -w '%{http_code}' -X POST --data-binary \
    '{"model": "fim", "messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function", "function": {"name": "f"}}], "stream": false}' \
    "$SERVE/api/chat")
[ "$code" = 400 ] && grep -q '"error":"fim: the model.s template.* does not support tools' "$WORK/r" ||
    fail "chat with tools, template without: $code $(cat "$WORK/r")"
code=$(curl -s -o "$WORK/r" -w '%{http_code}' -X POST --data-binary \
    '{"model": "toolish", "messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function", "function": {"name": "f"}}], "stream": false, "options": {"num_predict": 4}}' \
    "$SERVE/api/chat")
[ "$code" = 200 ] || fail "chat with tools, template with: $code $(cat "$WORK/r")"

node - <<'JS' >"$WORK/node.out" 2>&1 || fail "ollama-js: $(cat "$WORK/node.out")"
const { Ollama } = require('ollama');
const assert = require('assert');
const o = new Ollama({ host: process.env.SERVE });
(async () => {
  const s = await o.show({ model: 'stories:260k' });
  assert.deepStrictEqual(s.capabilities, ['completion'], `capabilities: ${JSON.stringify(s.capabilities)}`);
  const g = await o.generate({ model: 'stories:260k', prompt: 'Once upon a time', stream: false, options: { num_predict: 4 } });
  assert.strictEqual(g.eval_count, 4, 'completion works');
  console.log('node ok');
})().catch(e => { console.error(e); process.exit(1); });
JS
contains "$(cat "$WORK/node.out")" "node ok"
serve_alive
echo "ok $TEST_NAME"
