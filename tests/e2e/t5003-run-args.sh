#!/usr/bin/env bash
# mstore run's arguments (issue 18 item 26): several words make one prompt, a prompt starting
# with '-' goes after --, the default seed differs between runs started together, a full context
# is said on stderr, and --system without a template warns instead of vanishing.
. "$(dirname "$0")/lib.sh"
src="$MODELS/stories260K/stories260K.gguf"
[ -f "$src" ] || skip "$src not found (set MSTORE_TEST_MODELS)"
expect_ok mstore import "$src" --name stories:260k

expect_ok mstore run stories:260k "Once upon a time" --temp 0 -n 12
one=$out
expect_ok mstore run stories:260k Once upon a time --temp 0 -n 12
[ "$out" = "$one" ] || fail "several words: '$out' != one argument: '$one'"
expect_ok mstore run stories:260k --temp 0 -n 12 -- Once upon a time
[ "$out" = "$one" ] || fail "words after --: '$out' != '$one'"
expect_ok mstore run stories:260k --temp 0 -n 4 -- "-Once upon"
expect_ok mstore run stories:260k --temp 0 -n 4 --raw -- "-Once upon"
expect_fail 2 "after --" mstore run stories:260k --temp 0 -n 4 -Once
# A flag past its bound is refused as every reader of the option table refuses it.
expect_fail 2 "--temp: expected a number from 0 to 100; '300' is too large" mstore run stories:260k --temp 300 Once
expect_fail 2 "--top-k: expected an integer from 0 to 16777216; '1.5' is not an integer" mstore run stories:260k --top-k 1.5 Once
expect_ok mstore run --gguf "$src" --temp 0 -n 12 Once upon a time
[ "$out" = "$one" ] || fail "--gguf with several words: '$out'"

# Two runs started at once without --seed sample differently (the seed is random, not the second).
"$MSTORE_BIN" run stories:260k "Once upon a time" --temp 1.5 --top-k 0 --top-p 1 --min-p 0 -n 48 >"$WORK/a" &
"$MSTORE_BIN" run stories:260k "Once upon a time" --temp 1.5 --top-k 0 --top-p 1 --min-p 0 -n 48 >"$WORK/b"
wait
cmp -s "$WORK/a" "$WORK/b" && fail "two unseeded runs gave the same 48 sampled tokens: $(cat "$WORK/a")"

# A full context is said, not silent.
expect_ok mstore run stories:260k "Once upon a time" --temp 0 -n 100 --ctx 16
contains "$err" "the context of 16 tokens is full"
[ -n "$out" ] || fail "nothing generated before the context filled"
# --system without a template (or with --raw) warns.
expect_ok mstore run stories:260k "Once upon a time" --system "Be nice." --temp 0 -n 12
contains "$err" "--system is ignored: the model has no chat template"
[ "$out" = "$one" ] || fail "--system changed a template-less run: '$out'"
echo "ok $TEST_NAME"
