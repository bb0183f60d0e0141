#!/usr/bin/env bash
# mstore run --think / --hidethinking (issue 39 part 6), as ollama's CLI: a model whose template
# thinks shows its reasoning under "Thinking..." and "...done thinking." before the answer, by
# default and with --think; --hidethinking prints the answer alone; --think=false renders the
# template with thinking off; --think for a model that cannot think fails saying so. stories260K
# writes no <think> itself: "thinker"'s template opens the block in the prompt (as DeepSeek-R1's
# does), and two models that do not think render the same prompts ("ref-on", "ref-off"): their
# greedy answers are what thinker's must show, as reasoning and as answer.
. "$(dirname "$0")/lib.sh"
S260K=$MODELS/stories260K/stories260K.gguf
[ -f "$S260K" ] || skip "$S260K not found (set MSTORE_TEST_MODELS)"
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
args=("Once upon a time" --temp 0 -n 20)
expect_ok mstore run ref-on "${args[@]}"
on=$out
expect_ok mstore run ref-off "${args[@]}"
off=$out
[ -n "$on" ] && [ -n "$off" ] || fail "the references answered nothing"
# the reasoning is the reference's answer without the white space after "<think>" (there is no
# "</think>": the answer is empty); stdout is not a terminal, so nothing is dimmed
want=$("$PY" -c 'import sys; print("Thinking...\n" + sys.argv[1].lstrip(" \t\r\n") + "\n...done thinking.\n\n")' "$on")
for flag in "" --think; do
    expect_ok mstore run thinker "${args[@]}" $flag
    [ "$out" = "$want" ] || fail "run thinker $flag:
got:  $out
want: $want"
done
expect_ok mstore run thinker "${args[@]}" --hidethinking
[ -z "$out" ] || fail "--hidethinking printed: $out"
expect_ok mstore run thinker "${args[@]}" --think=false
[ "$out" = "$off" ] || fail "--think=false: got '$out', want '$off'"
# a model that does not think answers as before unless asked to think
expect_ok mstore run ref-on "${args[@]}" --think=false
[ "$out" = "$on" ] || fail "ref-on --think=false: got '$out', want '$on'"
expect_fail 1 "ref-on does not support thinking" mstore run ref-on "${args[@]}" --think
expect_fail 1 "does not support thinking with --raw" mstore run thinker "${args[@]}" --think --raw
# the interactive chat's /set nothink and /set think, as ollama's (a pty: ptychat.py)
if "$PY" -c 'import pty; pty.openpty()' 2>/dev/null; then
    printf '%s\n' "/set nothink" "Once upon a time" "/clear" "/set think" "Once upon a time" "/bye" >"$WORK/in"
    MSTORE_NO_EDIT=1 "$PY" "$MSTORE_SRC/tests/e2e/ptychat.py" "$WORK/c.json" -- "$MSTORE_BIN" run thinker \
        --temp 0 -n 20 <"$WORK/in"
    turn() { "$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["turns"][int(sys.argv[2])]["output"].replace("\r\n", "\n"), end="")' "$WORK/c.json" "$1"; }
    contains "$(turn 0)" "Set 'nothink' mode."
    [ "$(turn 1)" = "$off" ] || fail "/set nothink: got '$(turn 1)', want '$off'"
    contains "$(turn 3)" "Set 'think' mode."
    # on a terminal the reasoning is dimmed (SGR 2, reset after it)
    contains "$(turn 4)" $'Thinking...\n\033[2m'
    [ "$(turn 4 | sed 's/\x1b\[[02]m//g')" = "$want" ] || fail "/set think: got '$(turn 4)', want '$want'"
    printf '%s\n' "/set think" "/bye" >"$WORK/in"
    MSTORE_NO_EDIT=1 "$PY" "$MSTORE_SRC/tests/e2e/ptychat.py" "$WORK/c.json" -- "$MSTORE_BIN" run ref-on <"$WORK/in"
    contains "$(turn 0)" "error: model does not support thinking"
fi
# gpt-oss's harmony: run parts its answer as the server does (tests/e2e/t6036): the analysis under
# "Thinking..." (not at all with --think=false or --hidethinking), the final message as the
# answer, a call printed as one, and never a marker. stories260K writes the messages because a JSON
# string constant (--format) makes it: the quotes of that string are content around them.
cat >"$WORK/Modelfile.harmony" <<'MF'
FROM stories:260k
TEMPLATE """{%- for m in messages %}<|start|>{{ m.role }}{% if m.role == "assistant" %}<|channel|>final{% endif %}<|message|>{{ m.content }}<|end|>{%- endfor %}{%- if add_generation_prompt %}<|start|>assistant{%- endif %}"""
MF
expect_ok mstore create harmony -f "$WORK/Modelfile.harmony"
say='<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>Answer.'
fmt=$("$PY" -c 'import json,sys; print(json.dumps({"type": "string", "const": sys.argv[1]}))' "$say")
hargs=("Once upon a time" --temp 0 -n 200 --format "$fmt")
expect_ok mstore run harmony "${hargs[@]}"
case $out in *"<|"*) fail "a harmony marker reached the output: $out" ;; esac
# the opening quote is in the first header (dropped with it), the closing one follows the answer,
# with whatever white space the JSON grammar let the model add after it
out=${out%"${out##*[![:space:]]}"}
[ "$out" = $'Thinking...\nThink.\n...done thinking.\n\nAnswer."' ] || fail "run harmony: got '$out'"
for flag in --think=false --hidethinking; do
    expect_ok mstore run harmony "${hargs[@]}" $flag
    out=${out%"${out##*[![:space:]]}"}
    [ "$out" = 'Answer."' ] || fail "run harmony $flag: got '$out'"
done
say='<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{}<|call|>'
fmt=$("$PY" -c 'import json,sys; print(json.dumps({"type": "string", "const": sys.argv[1]}))' "$say")
expect_ok mstore run harmony "Once upon a time" --temp 0 -n 200 --format "$fmt"
contains "$out" "[call get_weather] {}"
case $out in *"<|"*) fail "a harmony marker reached the output: $out" ;; esac
echo "PASS $TEST_NAME"
