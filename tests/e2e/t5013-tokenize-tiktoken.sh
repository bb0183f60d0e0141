#!/usr/bin/env bash
# The gpt-4o (o200k) and llama-bpe pre-tokenizers against a second implementation: OpenAI's real
# o200k_base and cl100k_base vocabularies, from npm js-tiktoken's ranks, made into byte-level BPE
# GGUFs (tests/reference/make_tiktoken_gguf.py; pre "gpt-4o", and "llama-bpe" whose regex is
# cl100k's), tokenize 2,000 generated strings each (tests/e2e/tiktoken_ref.js: letters of many
# scripts in both cases, contractions, code, numbers, whitespace runs, emoji, CJK) to exactly
# js-tiktoken's ids. npm and the GGUFs are made once per build folder, under a lock.
. "$(dirname "$0")/lib.sh"

command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 ||
    skip "node and npm are not installed (tests/run.sh installs nodejs and npm)"
DIR=${MSTORE_BUILD:-$WORK}/tiktoken
GEN=$MSTORE_SRC/tests/reference/make_tiktoken_gguf.py
# the GGUFs' names carry the generator's hash: a changed generator makes them again
TAG=$(sha256sum "$GEN" | cut -c1-12)
mkdir -p "$DIR"
(
    flock 9
    if [ ! -f "$DIR/node_modules/js-tiktoken/package.json" ]; then
        npm install --prefix "$DIR" --no-audit --no-fund --loglevel=error js-tiktoken@1.0.21 >"$WORK/npm.log" 2>&1 ||
            exit 77
    fi
    for enc in o200k_base:gpt-4o cl100k_base:llama-bpe; do
        out=$DIR/${enc%%:*}-$TAG.gguf
        [ -f "$out" ] || "$PY" "$GEN" --ranks "$DIR/node_modules/js-tiktoken/dist/ranks/${enc%%:*}.js" \
            --pre "${enc#*:}" --out "$out" >"$WORK/gen.log" 2>&1 || { cat "$WORK/gen.log" >&2; exit 1; }
    done
) 9>"$DIR.lock" || {
    [ $? -eq 77 ] && skip "npm could not install js-tiktoken (no network?): $(tail -3 "$WORK/npm.log")"
    fail "making the tiktoken GGUFs failed"
}
export NODE_PATH=$DIR/node_modules

seed=1
for enc in o200k_base:gpt-4o cl100k_base:llama-bpe; do
    gguf=$DIR/${enc%%:*}-$TAG.gguf
    node "$MSTORE_SRC/tests/e2e/tiktoken_ref.js" "${enc%%:*}" 2000 "$seed" "$WORK/texts" "$WORK/want" ||
        fail "tiktoken_ref.js ${enc%%:*} failed"
    run mstore tokenize --gguf "$gguf" --no-special --batch --verbose <"$WORK/texts"
    [ "$rc" -eq 0 ] || fail "mstore tokenize --batch on $gguf exited $rc: $err"
    # --verbose names llama.cpp's type: llama-bpe is LLAMA3
    case ${enc#*:} in llama-bpe) contains "$err" "BPE (llama3)" ;; *) contains "$err" "BPE (${enc#*:})" ;; esac
    printf '%s\n' "$out" >"$WORK/got"
    "$PY" - "$WORK/texts" "$WORK/want" "$WORK/got" "${enc%%:*}" <<'PYEOF' || fail "${enc%%:*}: mstore and js-tiktoken disagree"
import sys
texts = open(sys.argv[1], 'rb').read().split(b'\0')[:-1]
want = open(sys.argv[2]).read().split('\n')[:-1]
got = open(sys.argv[3]).read().split('\n')[:-1]
if not (len(texts) == len(want) == len(got)):
    sys.exit('%s: %d texts, %d lines from js-tiktoken, %d from mstore' % (sys.argv[4], len(texts), len(want), len(got)))
bad = [i for i in range(len(texts)) if want[i] != got[i]]
for i in bad[:5]:
    print('%s %r:\n  js-tiktoken %s\n  mstore      %s' % (sys.argv[4], texts[i].decode(), want[i], got[i]), file=sys.stderr)
print('%s: agree on %d of %d strings (%d tokens)' % (sys.argv[4], len(texts) - len(bad), len(texts),
                                                      sum(len(w.split()) for w in want)), file=sys.stderr)
sys.exit(1 if bad else 0)
PYEOF
    seed=$((seed + 1))
done
echo "ok $TEST_NAME"
