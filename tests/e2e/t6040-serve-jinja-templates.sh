#!/usr/bin/env bash
# Jinja chat templates, byte for byte: the 17 templates of tests/reference/templates (llama.cpp's,
# from the models' tokenizer_config.json), each in a stories260K GGUF's tokenizer.chat_template,
# rendered by `mstore serve`'s POST /apply-template for several conversations (system and turns;
# turns only; one message; tools with an assistant's call and the tool's result), with and
# without add_generation_prompt, and by npm @huggingface/jinja over the same context: the
# prompts must be the same bytes. Where @huggingface/jinja fails on a case the case is skipped
# (counted and named); mstore may refuse only where Python's jinja2 raises too (a 400 naming the
# template's line) or tools are given to a template that never reads them (as chat refuses them).
# Where Python's jinja2 is installed, every case it renders must also be its bytes. The clock strftime_now reads is fixed (SOURCE_DATE_EPOCH).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_serve.sh"
S260K=$MODELS/stories260K/stories260K.gguf
[ -f "$S260K" ] || skip "stories260K not found under $MODELS"
command -v curl >/dev/null || skip "no curl"
MK=${MSTORE_BUILD:-$(dirname "$MSTORE_BIN")}/test_chat
[ -x "$MK" ] || skip "test_chat (the fixture writer) not built"
TPL=$MSTORE_SRC/tests/reference/templates
command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 ||
    skip "node and npm are not installed (tests/run.sh installs nodejs and npm)"
HF_DIR=${MSTORE_BUILD:-$WORK}/npm-jinja
mkdir -p "$HF_DIR"
(
    flock 9
    [ -f "$HF_DIR/node_modules/@huggingface/jinja/package.json" ] ||
        npm install --prefix "$HF_DIR" --no-audit --no-fund --loglevel=error @huggingface/jinja@0.5 >"$WORK/npm.log" 2>&1
) 9>"$HF_DIR.lock" || fail "npm install @huggingface/jinja failed: $(tail -5 "$WORK/npm.log")"
export NODE_PATH=$HF_DIR/node_modules SOURCE_DATE_EPOCH=1721995200

n=0
for t in "$TPL"/*.jinja; do
    name=$(basename "$t" .jinja | tr 'A-Z.' 'a-z-')
    MSTORE_CHAT_WRITE_GGUF=$WORK/$name.gguf MSTORE_CHAT_TEMPLATE=$t "$MK" || fail "could not write $name.gguf"
    expect_ok mstore import "$WORK/$name.gguf" --name "$name" --quiet
    rm -f "$WORK/$name.gguf"
    n=$((n + 1))
done
[ "$n" = 17 ] || fail "expected the 17 templates, found $n"
serve_start

# One request and one context per template, conversation and add_generation_prompt; the request
# in OpenAI's shape (a call's arguments as JSON text), the context in Hugging Face's (a dict).
"$PY" - "$TPL" "$WORK" "$SERVE" <<'PYEOF' || fail "the renders differ (above)"
import glob, json, os, subprocess, sys, urllib.request, urllib.error
tpl, work, serve = sys.argv[1:4]
convs = json.load(open(os.path.join(tpl, "conversations.json")))
# Where @huggingface/jinja and Python's jinja2 (transformers) part ways, mstore follows jinja2:
# functionary v3.1 adds a str and a dict for a tool's parameters (jinja2: TypeError).
python_refuses = {("meetkai-functionary-medium-v3.1", "tools")}
# And against Python's jinja2 itself (tests/reference/jinja2_render.py), where it is installed.
try:
    import jinja2  # noqa: F401
    have_jinja2 = True
except ImportError:
    have_jinja2 = False
same = skipped = refused = same_py = 0
bad = []
for path in sorted(glob.glob(os.path.join(tpl, "*.jinja"))):
    base = os.path.basename(path)[:-6]
    model = base.lower().replace(".", "-")
    for c in convs:
        for gen in (True, False):
            ctx = {"messages": c["messages"], "add_generation_prompt": gen, "bos_token": "<s>", "eos_token": "</s>"}
            if "tools" in c:
                ctx["tools"] = c["tools"]
            ctx_path = os.path.join(work, "ctx.json")
            json.dump(ctx, open(ctx_path, "w"))
            hf = subprocess.run(["node", os.path.join(tpl, "render_hf.js"), path, ctx_path], capture_output=True)
            msgs = []
            for m in c["messages"]:
                m = dict(m)
                if "tool_calls" in m:
                    m["tool_calls"] = [dict(tc, function=dict(tc["function"], arguments=json.dumps(tc["function"]["arguments"])))
                                       for tc in m["tool_calls"]]
                msgs.append(m)
            req = {"model": model, "messages": msgs, "add_generation_prompt": gen}
            if "tools" in c:
                req["tools"] = c["tools"]
            r = urllib.request.Request(serve + "/apply-template", data=json.dumps(req).encode(), method="POST")
            try:
                status, body = 200, json.load(urllib.request.urlopen(r, timeout=60))
            except urllib.error.HTTPError as e:
                status, body = e.code, json.load(e)
            case = "%s %s gen=%s" % (base, c["name"], gen)
            msg = body.get("error", {}).get("message", "") if status != 200 else ""
            # tools for a template that never reads them: refused, as chat completions refuse them
            if "tools" in c and "tools" not in open(path).read() and status == 400 and "does not support tools" in msg:
                refused += 1
                print("refused, the template has no place for tools: %s" % case)
                continue
            if have_jinja2:
                py = subprocess.run([sys.executable, os.path.join(tpl, "..", "jinja2_render.py"), path, ctx_path],
                                    capture_output=True)
                # jinja2 fails where llama.cpp's deepseek-r1 passes `map`'s generator to tojson
                if py.returncode == 0 and status == 200 and body.get("prompt", "").encode() != py.stdout:
                    bad.append("%s (jinja2):\n mstore %r\n jinja2 %r" % (case, body.get("prompt"), py.stdout.decode()))
                    continue
                if py.returncode == 0 and status != 200:
                    bad.append("%s: jinja2 renders, mstore answers HTTP %d %s" % (case, status, body))
                    continue
                same_py += py.returncode == 0
            if hf.returncode != 0:
                skipped += 1
                print("skip %s: @huggingface/jinja fails: %s" % (case, hf.stderr.decode().strip()[:160]))
                continue
            if status != 200:
                if (base, c["name"]) in python_refuses and status == 400 and msg.startswith("chat template line "):
                    refused += 1
                    print("refused as jinja2 refuses, %s: %s" % (case, msg))
                    continue
                bad.append("%s: HTTP %d %s" % (case, status, body))
                continue
            if body.get("prompt", "").encode() != hf.stdout:
                bad.append("%s:\n mstore %r\n hf     %r" % (case, body.get("prompt"), hf.stdout.decode()))
                continue
            same += 1
print("%d renders the same, %d skipped where @huggingface/jinja fails, %d refused; %d the same as jinja2's" %
      (same, skipped, refused, same_py))
for b in bad:
    print("DIFF " + b)
# most cases must be compared, not skipped
sys.exit(1 if bad or same < 80 else 0)
PYEOF

# A template that raises is a 400 whose message names the template's line: Gemma 2 refuses a
# system turn ("System role not supported", its line 1).
code=$(curl -s -o "$WORK/r" -w '%{http_code}' -X POST --data-binary \
    '{"model": "google-gemma-2-2b-it", "messages": [{"role": "system", "content": "x"}, {"role": "user", "content": "hi"}]}' \
    "$SERVE/apply-template")
[ "$code" = 400 ] || fail "a raising template: HTTP $code $(cat "$WORK/r")"
grep -q 'chat template line 1: System role not supported' "$WORK/r" || fail "its message: $(cat "$WORK/r")"
serve_alive
