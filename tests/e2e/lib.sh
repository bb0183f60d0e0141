# lib.sh: sourced by every end-to-end test. Gives each test a fresh store and helpers that
# assert exit codes, output and an unchanged store after a refusal.
set -eu

: "${MSTORE_BIN:?MSTORE_BIN must point at the built mstore (ctest sets it)}"
: "${MSTORE_SRC:=$(cd "$(dirname "$0")/../.." && pwd)}"
PY=${MSTORE_PYTHON:-/usr/bin/python3}
[ -x "$PY" ] || PY=python3
TEST_NAME=$(basename "$0" .sh)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/mstore-e2e-XXXXXX")
export MSTORE_HOME="$WORK/home"
export MSTORE_NO_PROGRESS=1
MODELS=${MSTORE_TEST_MODELS:-$MSTORE_SRC/../shared/models}
trap 'rm -rf "$WORK"' EXIT

fail() { echo "FAIL $TEST_NAME: $*" >&2; exit 1; }
skip() { echo "SKIP $TEST_NAME: $*" >&2; exit 77; }
mstore() { "$MSTORE_BIN" "$@"; }

# run CMD...: runs it, keeping status in $rc, stdout in $out, stderr in $err.
run() {
    set +e
    "$@" >"$WORK/.out" 2>"$WORK/.err"
    rc=$?
    set -e
    out=$(cat "$WORK/.out")
    err=$(cat "$WORK/.err")
}
expect_ok() { run "$@"; [ "$rc" -eq 0 ] || fail "'$*' exited $rc: $err"; }
# expect_fail STATUS SUBSTRING CMD...: must exit STATUS and say SUBSTRING on stderr.
expect_fail() {
    local want=$1 msg=$2
    shift 2
    run "$@"
    [ "$rc" -eq "$want" ] || fail "'$*' exited $rc, want $want (stderr: $err)"
    case "$err" in *"$msg"*) ;; *) fail "'$*': stderr lacks '$msg': $err" ;; esac
}
contains() { case "$1" in *"$2"*) ;; *) fail "expected '$2' in: $1" ;; esac; }
# flip_byte FILE OFFSET: overwrite one byte with one that differs from it (an 'X' written over
# random bytes left them intact once in 256 runs)
flip_byte() {
    local was byte=X
    was=$(dd if="$1" bs=1 skip="$2" count=1 status=none | od -An -c | tr -d ' ')
    [ "$was" = X ] && byte=Y
    printf '%s' "$byte" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}

# A fingerprint of the store: blob names, index rows. Compare before and after a refusal.
store_state() {
    {
        ls "$MSTORE_HOME/blobs" 2>/dev/null || true
        ls "$MSTORE_HOME/tmp" 2>/dev/null || true
        # The MODIFIED column says "just now", then "N minutes ago": a slow run crosses that
        # line between two fingerprints, so every form of it is cut.
        "$MSTORE_BIN" list 2>/dev/null | sed -E 's/ +(just now|[0-9]+ (minute|hour|day)s? ago)$//' || true
    } | sha256sum
}

# make_hf DIR [args]: a Hugging Face model directory written by the tests' own writer.
make_hf() { "$PY" "$MSTORE_SRC/tests/e2e/mkfixture.py" hf "$@"; }
make_mlx() { "$PY" "$MSTORE_SRC/tests/e2e/mkfixture.py" mlx "$@"; }
