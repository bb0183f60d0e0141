#!/usr/bin/env bash
# setup.sh installs only what mstore needs (test-only packages, among them docker-registry,
# whose Debian service listens on port 5000 on every interface, are tests/run.sh's), and its
# main job says what it did and leaves the README's next example working as written: it
# imports into the user's own store, not a demo store beside the build.
. "$(dirname "$0")/lib.sh"

eval "$(sed -n '/^PACKAGES="/,/"$/p' "$MSTORE_SRC/setup.sh")"
eval "$(grep '^TEST_PACKAGES="[^"]*"$' "$MSTORE_SRC/tests/run.sh")"
for p in docker-registry python3-numpy curl procps; do
    case " $(echo $PACKAGES) " in *" $p "*) fail "setup.sh installs the test-only package $p" ;; esac
    case " $TEST_PACKAGES " in *" $p "*) ;; *) fail "tests/run.sh does not install $p" ;; esac
done

src="$MODELS/stories260K/stories260K.gguf"
[ -f "$src" ] || skip "$src not found (set MSTORE_TEST_MODELS)"
readme_cmd=$(grep -o '`mstore run stories:260k "Once upon a time" --temp 0`' "$MSTORE_SRC/README.md" | head -1)
[ -n "$readme_cmd" ] || fail "the README's run example changed: update this test"
mkdir -p "$WORK/user"
run env -u MSTORE_HOME HOME="$WORK/user" PATH="$(dirname "$MSTORE_BIN"):$PATH" MSTORE_SETUP_MAIN_ONLY=1 \
    MSTORE_TEST_MODELS="$MODELS" sh "$MSTORE_SRC/setup.sh"
[ "$rc" -eq 0 ] || fail "setup.sh's main job exited $rc: $err"
contains "$out" "setup: imported $MODELS/stories260K/stories260K.gguf as stories:260k into $WORK/user/.mstore"
contains "$out" "setup:   manifest sha256:"
echo "$out" | grep -q '^Once upon a time' || fail "the run's output does not start with its prompt: $out"
# The README's next command, as written, in the same user's shell.
run env -u MSTORE_HOME HOME="$WORK/user" "$MSTORE_BIN" run stories:260k "Once upon a time" --temp 0 -n 16
[ "$rc" -eq 0 ] || fail "the README's example failed after setup: $err"
echo "ok $TEST_NAME"
