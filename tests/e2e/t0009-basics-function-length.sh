#!/bin/sh
# t0009: no function in src/ or cli/ is over 100 lines (issue 32). A function body is what lies
# between a '{' and a '}' at the start of a line, as clang-format lays out every definition here;
# a longer one fails this test, naming the file, the line and the length. Split it into steps
# with names of their own.
. "$(dirname "$0")/lib.sh"

cd "$MSTORE_SRC"
[ -d src ] && [ -d cli ] || skip "no source tree at $MSTORE_SRC"

long=$(find src cli -name '*.c' -o -name '*.h' | sort | while IFS= read -r f; do
    awk -v f="$f" '/^\{/ { start = FNR } /^\}/ { if (start && FNR - start - 1 > 100) printf "%s:%d: %d lines\n", f, start, FNR - start - 1; start = 0 }' "$f"
done)
[ -z "$long" ] || fail "functions over 100 lines:
$long"
n=$(find src cli -name '*.c' -o -name '*.h' | xargs cat | grep -c '^{')
[ "$n" -gt 1000 ] || fail "found only $n function bodies: the layout this test reads has changed"
echo "ok: $n functions, none over 100 lines"
