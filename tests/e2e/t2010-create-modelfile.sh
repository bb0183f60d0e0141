#!/usr/bin/env bash
# mstore create NAME -f Modelfile: the shared Modelfile from ollama's tests (FROM a GGUF beside
# it, seed 42, top_p 0.9, stop foo / bar) gives a model that runs as its base does with those
# flags and shares every weight blob; FROM a stored model writes only the new layers; show
# prints the parts back; stop strings end the answer; bad Modelfiles are refused naming the
# line, with the store unchanged.
. "$(dirname "$0")/lib.sh"

TINY=$MODELS/llama-2-tiny-random
S260K=$MODELS/stories260K/stories260K.gguf
[ -f "$TINY/llama-2-tiny-random.Modelfile" ] || skip "llama-2-tiny-random not found under $MODELS"
[ -f "$S260K" ] || skip "stories260K not found under $MODELS"

expect_ok mstore import "$TINY/llama-2-tiny-random.gguf" --name base --quiet
expect_ok mstore show base --tensors
base_tensors=$(printf '%s\n' "$out" | awk '/^Tensors/ {t=1; next} t {print $1, $NF}')
blobs_before=$(ls "$MSTORE_HOME/blobs" | wc -l)
expect_ok mstore create tiny -f "$TINY/llama-2-tiny-random.Modelfile" --quiet
expect_ok mstore show tiny --tensors
tiny_tensors=$(printf '%s\n' "$out" | awk '/^Tensors/ {t=1; next} t {print $1, $NF}')
[ -n "$base_tensors" ] && [ "$tiny_tensors" = "$base_tensors" ] || fail "tensor blobs differ from the base's"
# The same config; new: the params layer and the manifest only.
new=$(( $(ls "$MSTORE_HOME/blobs" | wc -l) - blobs_before ))
[ "$new" -eq 2 ] || fail "create wrote $new blobs, want 2 (params layer, manifest)"
expect_ok mstore show tiny --parameters
contains "$out" "seed                           42"
contains "$out" "top_p                          0.9"
contains "$out" 'stop                           "foo"'
contains "$out" 'stop                           "bar"'
expect_ok mstore show tiny --modelfile
contains "$out" "FROM tiny:latest"
contains "$out" "PARAMETER seed                           42"
# Runs with its seed and top_p: as the base with those flags (and not as with another seed).
expect_ok mstore run tiny "Hello" -n 12
tiny_out=$out
expect_ok mstore run base "Hello" -n 12 --seed 42 --top-p 0.9
[ "$tiny_out" = "$out" ] || fail "tiny '$tiny_out' != base with --seed 42 --top-p 0.9 '$out'"
case "$tiny_out" in *foo*|*bar*) fail "a stop word was printed: $tiny_out" ;; esac
expect_ok mstore run tiny "Hello" -n 12 --seed 7
[ "$out" != "$tiny_out" ] || fail "--seed 7 did not win over the Modelfile's seed"

# FROM a stored model, with a Go template, a system prompt, and a stop string that the greedy
# answer to the rendering contains ("...a small box. It is...").
expect_ok mstore import "$S260K" --name s --quiet
expect_ok mstore run s --raw $'S: Be kind.\nU: Once upon a time\nA:' --temp 0 -n 20
full=$out
case "$full" in *" box"*) ;; *) fail "the greedy answer '$full' has no ' box' to stop at" ;; esac
cat >"$WORK/Modelfile" <<'MF'
# stories with a template
FROM s
PARAMETER temperature 0
PARAMETER num_predict 20
PARAMETER stop " box"
SYSTEM Be kind.
TEMPLATE """{{ if .System }}S: {{ .System }}
{{ end }}U: {{ .Prompt }}
A:"""
LICENSE """MIT, for the test"""
MESSAGE user Hi
MF
blobs_before=$(ls "$MSTORE_HOME/blobs" | wc -l)
expect_ok mstore create story -f "$WORK/Modelfile"
new=$(( $(ls "$MSTORE_HOME/blobs" | wc -l) - blobs_before ))
[ "$new" -eq 6 ] || fail "create FROM a stored model wrote $new blobs, want 6 (template, system, params, license, messages, manifest)"
expect_ok mstore run story "Once upon a time"
[ "$out" = "${full%% box*}" ] || fail "stop ' box': got '$out', want '${full%% box*}'"
expect_ok mstore show story --system
[ "$out" = "Be kind." ] || fail "show --system: '$out'"
expect_ok mstore show story --license
[ "$out" = "MIT, for the test" ] || fail "show --license: '$out'"
expect_ok mstore show story --template
contains "$out" "U: {{ .Prompt }}"
expect_ok mstore show story --modelfile
contains "$out" 'MESSAGE user "Hi"'

# Refusals: the line, and nothing written.
state=$(store_state)
bad() {   # bad WANT_MESSAGE TEXT
    printf '%s\n' "$2" >"$WORK/Bad"
    expect_fail 1 "$1" mstore create broken -f "$WORK/Bad"
    [ "$(store_state)" = "$state" ] || fail "a refused create changed the store ($1)"
}
bad "Bad:2: unknown instruction 'FORM'" $'FROM s\nFORM s'
bad "Bad: no FROM line" $'SYSTEM hi\nPARAMETER seed 1'
bad "Bad:3: FROM 'nosuch': no such file or directory" $'# c\n\nFROM nosuch'
bad "Bad:2: TEMPLATE does not parse: template line 1: 'if' has no 'end'" $'FROM s\nTEMPLATE "{{ if .System }}x"'
bad "Bad:3: ADAPTER: LoRA adapters are not supported yet" $'FROM s\n\nADAPTER ./lora.gguf'
bad "Bad:2: PARAMETER: unknown parameter 'tempreature'" $'FROM s\nPARAMETER tempreature 0.5'
bad "Bad:2: PARAMETER seed: expected an integer from -1 to 9007199254740992; '4.5' is not an integer" $'FROM s\nPARAMETER seed 4.5'
# PARAMETER has the bounds of every other reader of the option table
bad "Bad:3: PARAMETER temperature: expected a number from 0 to 100; '300' is too large" $'FROM s\nPARAMETER seed 1\nPARAMETER temperature 300'
bad "Bad:2: PARAMETER num_ctx: expected an integer from 0 to 4194304; '-1' is too small" $'FROM s\nPARAMETER num_ctx -1'
bad "Bad:2: unterminated \"\"\"" $'FROM s\nSYSTEM """never closed'
bad "Bad:2: MESSAGE: role 'bot'" $'FROM s\nMESSAGE bot hi'
expect_fail 1 "No such file" mstore create broken -f "$WORK/none"
[ "$(store_state)" = "$state" ] || fail "a missing Modelfile changed the store"
echo "PASS $TEST_NAME"
