#!/usr/bin/env bash
# mstore run with chat templates: a one-shot prompt is rendered with the model's template
# (stories260K rewritten with Qwen 2's ChatML template by the GGUF writer: test_chat's fixture
# mode), --system and --raw; with no prompt on a terminal (a pty here) an interactive chat that
# keeps its KV cache between turns (only the new turn is prefilled), stops at end-of-turn
# tokens, and has /set parameter (penalties included), /set system, /clear, /?, /bye like ollama.
. "$(dirname "$0")/lib.sh"

S260K=$MODELS/stories260K/stories260K.gguf
[ -f "$S260K" ] || skip "stories260K not found under $MODELS"
MKGGUF=${MSTORE_BUILD:-$(dirname "$MSTORE_BIN")}/test_chat
[ -x "$MKGGUF" ] || skip "test_chat (the fixture writer) not built"
"$PY" -c 'import pty; pty.openpty()' 2>/dev/null ||
    skip "this machine has no pseudo-terminals (is devpts mounted?): the interactive chat needs one"
# ptychat types a line once it sees the prompt; libedit may still be switching the terminal to
# raw mode then (a doubled echo): these turns read lines plainly. t5202 drives the line editor.
export MSTORE_NO_EDIT=1
chat() {   # chat OUT.json ARGS... < lines
    local o=$1
    shift
    "$PY" "$MSTORE_SRC/tests/e2e/ptychat.py" "$o" -- "$MSTORE_BIN" run "$@"
}
jq_() { "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]), end="")' "$@"; }

MSTORE_CHAT_WRITE_GGUF=$WORK/chatml.gguf "$MKGGUF" || fail "could not write the ChatML GGUF"
# The same with "." (id 426 in this vocab) as end of generation: answers stop before a period.
MSTORE_CHAT_WRITE_GGUF=$WORK/chatml-eos.gguf MSTORE_CHAT_EOS=426 "$MKGGUF" || fail "could not write the eos GGUF"
expect_ok mstore import "$S260K" --name s260k --quiet
expect_ok mstore import "$WORK/chatml.gguf" --name chatml --quiet
expect_ok mstore import "$WORK/chatml-eos.gguf" --name chatml-eos --quiet

# One-shot: the template is applied (same as sending its rendering raw), --system too.
RENDERED=$'<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nOnce upon a time<|im_end|>\n<|im_start|>assistant\n'
expect_ok mstore run chatml "Once upon a time" --temp 0 -n 12 --verbose
templated=$out
contains "$err" "chat template:        chatml"
expect_ok mstore run s260k --raw "$RENDERED" --temp 0 -n 12
[ "$out" = "$templated" ] || fail "templated '$templated' != raw rendering '$out'"
expect_ok mstore run chatml --raw "Once upon a time" --temp 0 -n 12
[ "$out" != "$templated" ] || fail "--raw still applied the template"
expect_ok mstore run chatml --system "Be nice." "Hi" --temp 0 -n 12
sys_out=$out
expect_ok mstore run s260k --raw $'<|im_start|>system\nBe nice.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n' --temp 0 -n 12
[ "$out" = "$sys_out" ] || fail "--system: '$sys_out' != '$out'"
# Same through --gguf; a model without template runs raw, as before.
expect_ok mstore run --gguf "$WORK/chatml.gguf" "Once upon a time" --temp 0 -n 12
[ "$out" = "$templated" ] || fail "--gguf: '$out'"
expect_ok mstore run s260k "Once upon a time" --temp 0 -n 12
raw_s260k=$out
expect_ok mstore run s260k --temp 0 -n 5 </dev/null   # no prompt, no terminal: from BOS, no chat
[ -n "$out" ] || fail "no output from BOS"

# Interactive: turns, cache reuse, commands.
printf '%s\n' "Once upon a time" "The cat sat" "/set parameter num_predict 3" "Hi" "/clear" \
    "Once upon a time" "/set parameter temperature abc" "/set parameter bogus 1" "/set system Be nice." "Hi" \
    "/?" "/foo" "/bye" >"$WORK/in"
chat "$WORK/c.json" chatml --temp 0 -n 12 --verbose <"$WORK/in"
[ "$(jq_ "$WORK/c.json" 'd["status"]')" = 0 ] || fail "chat exited $(jq_ "$WORK/c.json" 'd["status"]')"
turn() { jq_ "$WORK/c.json" "d['turns'][$1]['output']"; }   # $(...) drops the trailing "\n\n"
counts=$(jq_ "$WORK/c.json" '" ".join(l.split()[3] for l in d["stderr"].splitlines() if l.startswith("prompt eval count"))')
evals=$(jq_ "$WORK/c.json" '" ".join(l.split()[2] for l in d["stderr"].splitlines() if l.startswith("eval count"))')
set -- $counts
[ $# -eq 5 ] || fail "expected 5 answers with stats, got prompt counts '$counts'"
first=$1 second=$2 third=$3 after_clear=$4 after_system=$5
# The first answer is the one-shot answer; the second turn prefills only its own tokens.
[ "$(turn 0)" = "$templated" ] || fail "first chat answer '$(turn 0)' != one-shot '$templated'"
[ "$second" -lt "$first" ] || fail "turn 2 prefilled $second tokens, turn 1 $first: the cache was not reused"
[ "$third" -lt "$first" ] || fail "turn 3 prefilled $third tokens: the cache was not reused"
[ "$(echo $evals | cut -d' ' -f3)" = 3 ] || fail "num_predict 3: eval counts '$evals'"
contains "$(turn 2)" "Set parameter 'num_predict' to '3'"
contains "$(turn 4)" "Cleared session context"
# After /clear the same question costs the same prompt as at the start.
[ "$after_clear" = "$first" ] || fail "after /clear: $after_clear tokens, at the start: $first"
contains "$(turn 6)" "Couldn't set parameter: temperature: expected a number from 0 to 100; 'abc' is not a number"
contains "$(turn 7)" "unknown parameter 'bogus'"
contains "$(turn 8)" "Set system message."
# A new system prompt changes the rendering's start: the whole conversation is prefilled again.
[ "$after_system" -gt "$first" ] || fail "after /set system: only $after_system tokens prefilled"
contains "$(turn 10)" "Available Commands"
contains "$(turn 11)" "Unknown command '/foo'"

# End-of-turn tokens stop an answer (not printed); the chat goes on; Ctrl-D ends it with 0.
printf '%s\n' "Once upon a time" "More" >"$WORK/in2"
chat "$WORK/e.json" chatml-eos --temp 0 -n 40 --verbose <"$WORK/in2"
[ "$(jq_ "$WORK/e.json" 'd["status"]')" = 0 ] || fail "eos chat exited $(jq_ "$WORK/e.json" 'd["status"]')"
a1=$(jq_ "$WORK/e.json" "d['turns'][0]['output']")
expect_ok mstore run chatml-eos "Once upon a time" --temp 0 -n 40
[ "$a1" = "$out" ] || fail "eos chat answer '$a1' != one-shot '$out'"
case "$(mstore run chatml "Once upon a time" --temp 0 -n 40)" in "$a1."*) ;; *) fail "'$a1' does not stop before a period" ;; esac
case "$a1" in *.*) fail "the end token '.' was printed: '$a1'" ;; esac
e1=$(jq_ "$WORK/e.json" '[l.split()[2] for l in d["stderr"].splitlines() if l.startswith("eval count")][0]')
[ "$e1" -lt 40 ] || fail "the answer did not stop at the end token ($e1 tokens)"
[ "$(jq_ "$WORK/e.json" 'len(d["turns"])')" = 2 ] || fail "the chat did not go on after an end token"

# No template: the user's messages bare, as ollama renders them, with a warning; --raw: the
# text simply continues.
printf '%s\n' "Once upon a time" >"$WORK/in3"
chat "$WORK/p.json" s260k --temp 0 -n 8 <"$WORK/in3"
contains "$(jq_ "$WORK/p.json" 'd["stderr"]')" "the model has no chat template: the user's messages are the bare prompt"
chat "$WORK/r.json" s260k --raw --temp 0 -n 12 <"$WORK/in3"
[ "$(jq_ "$WORK/r.json" "d['turns'][0]['output']")" = "$raw_s260k" ] || fail "raw chat: $(jq_ "$WORK/r.json" "d['turns'][0]['output']")"
# /set parameter reaches the penalties (issue 39 item 6): the answer is the flags' answer.
printf '%s\n' "/set parameter frequency_penalty 0.75" "/set parameter presence_penalty 0.5" "Once upon a time" >"$WORK/in4"
chat "$WORK/q.json" s260k --raw --temp 0 -n 32 <"$WORK/in4"
contains "$(jq_ "$WORK/q.json" "d['turns'][1]['output']")" "Set parameter 'presence_penalty' to '0.5'"
expect_ok mstore run s260k --raw "Once upon a time" --temp 0 -n 32 --frequency-penalty 0.75 --presence-penalty 0.5
[ "$(jq_ "$WORK/q.json" "d['turns'][2]['output']")" = "$out" ] || fail "/set penalties: '$(jq_ "$WORK/q.json" "d['turns'][2]['output']")' != flags: '$out'"
expect_ok mstore run s260k --raw "Once upon a time" --temp 0 -n 32
[ "$(jq_ "$WORK/q.json" "d['turns'][2]['output']")" != "$out" ] || fail "/set penalties changed nothing"
echo "ok $TEST_NAME"
