#!/usr/bin/env bash
# Reasoning effort (issue 39 part 1): a Jinja template that reads reasoning_effort, as gpt-oss's
# does, gets OpenAI's reasoning_effort / reasoning.effort and ollama's think "low" .. "high" as
# that variable. "effort" is stories260K with a template that writes "Reasoning: <effort>" when
# the variable is defined; /apply-template shows the prompt itself, and the chat answers must be
# the greedy answers of references whose templates write the same line as plain text. A template
# that reads no reasoning_effort refuses ollama's levels by name, as ollama refuses them for a
# model other than gpt-oss; boolean think behaves as before.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_serve.sh"
S260K=$MODELS/stories260K/stories260K.gguf
[ -f "$S260K" ] || skip "$S260K not found (set MSTORE_TEST_MODELS)"
command -v curl >/dev/null || skip "no curl"
expect_ok mstore import "$S260K" --name stories:260k --quiet
turns='{%- for m in messages %}{{ m.role }}: {{ m.content }}
{% endfor %}'
printf 'FROM stories:260k\nTEMPLATE """%s{%% if reasoning_effort is defined %%}Reasoning: {{ reasoning_effort }}\n{%% endif %%}assistant:"""\n' \
    "$turns" >"$WORK/Modelfile.effort"
expect_ok mstore create effort -f "$WORK/Modelfile.effort"
for level in low high; do
    printf 'FROM stories:260k\nTEMPLATE """%sReasoning: %s\nassistant:"""\n' "$turns" "$level" >"$WORK/Modelfile.$level"
    expect_ok mstore create "ref-$level" -f "$WORK/Modelfile.$level"
done
printf 'FROM stories:260k\nTEMPLATE """%sassistant:"""\n' "$turns" >"$WORK/Modelfile.none"
expect_ok mstore create ref-none -f "$WORK/Modelfile.none"
serve_start
export SERVE

"$PY" - <<'PYEOF' || fail "the checks failed (above)"
import json, os, subprocess

SERVE = os.environ["SERVE"]
MSGS = [{"role": "user", "content": "Once upon a time"}]
OPTS = {"temperature": 0, "seed": 1, "num_predict": 16}


def post(path, body):
    """(status, body as an object) of a request through curl"""
    out = subprocess.run(["curl", "-sS", "-w", "\n%{http_code}", "-H", "Content-Type: application/json", "-d",
                          json.dumps(body), SERVE + path], capture_output=True, text=True, check=True).stdout
    text, code = out.rsplit("\n", 1)
    return int(code), json.loads(text)


def ok(path, body):
    code, obj = post(path, body)
    assert code == 200, (path, body, code, obj)
    return obj


# the prompt itself: OpenAI's field (and reasoning.effort) through /apply-template
for kw, line in (({"reasoning_effort": "minimal"}, "Reasoning: minimal\n"), ({"reasoning_effort": "high"}, "Reasoning: high\n"),
                 ({"reasoning": {"effort": "medium"}}, "Reasoning: medium\n"), ({}, ""), ({"reasoning_effort": "none"}, "")):
    got = ok("/apply-template", dict(model="effort", messages=MSGS, **kw))["prompt"]
    assert got == "user: Once upon a time\n" + line + "assistant:", (kw, got)


def chat(model, **kw):
    return ok("/api/chat", dict(model=model, messages=MSGS, options=OPTS, stream=False, **kw))["message"]


def v1(model, **kw):
    obj = ok("/v1/chat/completions", dict(model=model, messages=MSGS, temperature=0, seed=1, max_tokens=16, **kw))
    return obj["choices"][0]["message"]


want = {level: chat("ref-" + level)["content"] for level in ("low", "high", "none")}
assert len(set(want.values())) == 3, want  # the line changes the answer: the checks below can fail
for level in ("low", "high"):
    got = chat("effort", think=level)
    assert got["content"] == want[level] and not got.get("thinking"), (level, got, want[level])
    got = v1("effort", reasoning_effort=level)
    assert got["content"] == want[level] and not got.get("reasoning_content"), (level, got, want[level])
# unset and false: no level, as before
assert chat("effort")["content"] == want["none"]
assert chat("effort", think=False)["content"] == want["none"]

for path, body, msg in [
    ("/api/chat", {"model": "effort", "messages": MSGS, "think": "extreme"}, 'think: expected true, false, "low"'),
    ("/api/chat", {"model": "effort", "messages": MSGS, "think": "minimal"}, 'think: expected true, false, "low"'),
    ("/v1/chat/completions", {"model": "effort", "messages": MSGS, "reasoning_effort": "max"}, "reasoning_effort: expected"),
    ("/apply-template", {"model": "effort", "messages": MSGS, "reasoning_effort": 2}, "reasoning_effort: expected"),
    # a template that reads no reasoning_effort and does not think: ollama's levels and true are refused
    ("/api/chat", {"model": "ref-none", "messages": MSGS, "think": "low"}, 'think value "low" is not supported for this model'),
    ("/api/generate", {"model": "ref-none", "prompt": "x", "think": "high"}, 'think value "high" is not supported for this model'),
    ("/api/chat", {"model": "effort", "messages": MSGS, "think": True}, '"effort" does not support thinking'),
]:
    code, obj = post(path, dict(body, stream=False))
    text = json.dumps(obj)
    assert code == 400 and json.dumps(msg)[1:-1] in text, (path, body, code, text)
print("effort checks ok")
PYEOF
echo "PASS $TEST_NAME"
