#!/usr/bin/env bash
# Ctrl-C stops a generation cleanly (exit 130, no crash); bench prints llama-bench style rows.
. "$(dirname "$0")/lib.sh"
src="$MODELS/stories260K/stories260K.gguf"
[ -f "$src" ] || skip "$src not found (set MSTORE_TEST_MODELS)"
expect_ok mstore import "$src" --name stories

"$MSTORE_BIN" run stories "Once upon a time" --temp 1 --seed 1 -n 2000 --ctx 2048 >"$WORK/o" 2>"$WORK/e" &
pid=$!
sleep 0.5
kill -INT "$pid"
set +e
wait "$pid"
rc=$?
set -e
[ "$rc" -eq 130 ] || [ "$rc" -eq 0 ] || fail "SIGINT: exit $rc ($(cat "$WORK/e"))"
grep -qi "sanitizer\|segmentation" "$WORK/e" && fail "SIGINT: $(cat "$WORK/e")"

expect_ok mstore bench stories -p 16 -n 8 -r 2 --threads 1
contains "$out" "pp16"
contains "$out" "tg8"
contains "$out" "t/s"
expect_fail 2 "-p" mstore bench stories -p abc
expect_fail 2 "-n" mstore bench stories -n -3
expect_fail 1 "not found" mstore bench nosuch
# --parallel: N sequences from N threads, one row per N (which passes they share is the
# machine's timing; test_runtime_batch checks the sharing itself)
expect_ok mstore bench stories -p 4 -n 4 -r 1 --threads 1 --parallel 1,3
contains "$out" "parallel  1  pp4"
contains "$out" "parallel  3  pp4"
contains "$out" "per sequence"
expect_fail 2 "'1,0' is not a list" mstore bench stories --parallel 1,0
expect_fail 2 "one at a time" mstore bench stories --parallel 2 --format json
# a kernel path that does not exist is an error naming the valid ones, never a silent fallback
MSTORE_CPU=avx9000 expect_fail 1 "MSTORE_CPU 'avx9000': unknown; expected auto, avx512vnni, avx512, avxvnni, avx2, neon-i8mm, neon-dotprod, neon, scalar, vnni-emul, avxvnni-evex, avx512vnni-int8, avxvnni-int8, vnni-int8-emul, amx-int8, amx-int8-emul, amx, amx-emul" \
    mstore bench stories -p 4 -n 2 -r 1
MSTORE_CPU=avx9000 expect_fail 1 "MSTORE_CPU 'avx9000': unknown" mstore run stories "Once" -n 2
MSTORE_CPU=avx9000 expect_fail 1 "MSTORE_CPU 'avx9000': unknown" mstore devices
MSTORE_CPU=scalar expect_ok mstore bench stories -p 4 -n 2 -r 1   # every build and CPU has it
contains "$out$err" "device cpu scalar,"
echo "ok $TEST_NAME"
