#!/usr/bin/env bash
# The Vulkan backend from the command line, on whatever Vulkan device there is (CI: lavapipe):
# mstore devices lists it; run --device vulkan gives the CPU's greedy text on the
# stories260K models from the store; bench --device vulkan works with one submit per forward;
# auto never takes a software device; a missing driver is a clear error for --device vulkan
# and the CPU for auto.
. "$(dirname "$0")/lib.sh"
src="$MODELS/stories260K"
[ -f "$src/stories260K.gguf" ] || skip "$src/stories260K.gguf not found (set MSTORE_TEST_MODELS)"

expect_ok mstore devices
contains "$out" "cpu"
devices=$out
case "$devices" in
*" vulkan "*) ;;
*) skip "no Vulkan device: $(printf '%s' "$devices" | tail -n 1)" ;;
esac
expect_ok mstore devices --help
contains "$out" "host import"

for f in stories260K s260k-f16 s260k-mixed; do
    expect_ok mstore import "$src/$f.gguf" --name "s:$f"
    for prompt in "Once upon a time" "I believe the meaning of life is"; do
        run env MSTORE_DEVICE=cpu "$MSTORE_BIN" run "s:$f" "$prompt" --temp 0 -n 24
        [ "$rc" -eq 0 ] || fail "cpu run of $f: $err"
        want=$out
        run "$MSTORE_BIN" run "s:$f" "$prompt" --temp 0 -n 24 --device vulkan
        [ "$rc" -eq 0 ] || fail "vulkan run of $f: $err"
        [ "$out" = "$want" ] || fail "$f, '$prompt': vulkan text differs:
vulkan: $out
cpu:    $want"
    done
done

# bench: one submit per forward (runs == submits) and no more host waits than forwards.
expect_ok mstore bench s:stories260K --device vulkan --verbose -p 16 -n 8 -r 1
contains "$out" "device vulkan"
contains "$out" "tg8"
counts=$(printf '%s\n' "$err" | sed -n 's/.*vulkan: \([0-9]*\) runs, \([0-9]*\) submits, \([0-9]*\) host waits.*/\1 \2 \3/p')
[ -n "$counts" ] || fail "bench --verbose printed no counts: $err"
set -- $counts
[ "$1" -eq "$2" ] || fail "$1 runs took $2 submits"
[ "$3" -le "$1" ] || fail "$1 runs took $3 host waits"

# A discrete GPU's paths (logits copied back, not read through a mapping) keep one submit and at
# most one wait a forward: the copy rides in the run's own command buffer.
run env MSTORE_VULKAN_DISCRETE=1 "$MSTORE_BIN" bench s:stories260K --device vulkan --verbose -p 16 -n 8 -r 1
[ "$rc" -eq 0 ] || fail "bench on the discrete paths: $err"
contains "$err" "as a discrete GPU"
counts=$(printf '%s\n' "$err" | sed -n 's/.*vulkan: \([0-9]*\) runs, \([0-9]*\) submits, \([0-9]*\) host waits.*/\1 \2 \3/p')
set -- $counts
[ "$1" -eq "$2" ] || fail "discrete paths: $1 runs took $2 submits"
[ "$3" -le "$1" ] || fail "discrete paths: $1 runs took $3 host waits"

# MSTORE_VULKAN_PROFILE=1: device time by kernel from timestamps, every waited-for run timed.
run env MSTORE_VULKAN_PROFILE=1 "$MSTORE_BIN" bench s:stories260K --device vulkan --verbose -p 16 -n 8 -r 1
[ "$rc" -eq 0 ] || fail "bench with the profile: $err"
runs=$(printf '%s\n' "$err" | sed -n 's/.*vulkan: \([0-9]*\) runs, .*/\1/p')
timed=$(printf '%s\n' "$err" | sed -n 's/.*vulkan profile: .*: \([0-9]*\) runs timed.*/\1/p')
[ -n "$timed" ] || fail "no profile printed: $err"
[ "$timed" = "$runs" ] || fail "$runs runs, $timed timed"
printf '%s\n' "$err" | grep -q "vulkan profile: mv_0 .* dispatches" || fail "no matvec in the profile: $err"
printf '%s\n' "$err" | grep -q "vulkan profile: norm .* dispatches" || fail "no norm in the profile: $err"

# auto never picks a software implementation; a hardware GPU it takes.
expect_ok mstore bench s:stories260K --device auto -p 4 -n 2 -r 1
if printf '%s\n' "$devices" | grep -q " vulkan .* \(discrete\|integrated\|virtual\) \| \(discrete\|integrated\|virtual\) .* vulkan "; then
    contains "$out" "device vulkan"
else
    contains "$out" "device cpu"
fi

# No driver: --device vulkan fails clearly; auto says why (with --verbose) and runs on the CPU.
export VK_ICD_FILENAMES="$WORK/none.json" VK_DRIVER_FILES="$WORK/none.json"
expect_fail 1 "vulkan" mstore bench s:stories260K --device vulkan -p 4 -n 2 -r 1
expect_ok mstore bench s:stories260K --device auto --verbose -p 4 -n 2 -r 1
contains "$out" "device cpu"
contains "$err" "device vulkan:"
expect_fail 1 "vulkan" mstore run s:stories260K "Once" -n 2 --device vulkan
unset VK_ICD_FILENAMES VK_DRIVER_FILES
expect_fail 1 "device 'tpu': unknown; expected auto, cpu, vulkan or metal" mstore run s:stories260K "Once" --device tpu
expect_fail 1 "unknown" env MSTORE_DEVICE=bogus "$MSTORE_BIN" bench s:stories260K -p 4 -n 2 -r 1
echo "ok $TEST_NAME"
