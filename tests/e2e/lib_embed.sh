# lib_embed.sh: sourced after lib.sh by the embedding tests. A small random-weight BERT on the
# bge WordPiece vocab (tests/reference/make_bert_gguf.py, context 64 so that truncation takes a
# few words), imported as "bert"; and `vec`, which checks what the surfaces answered.
BGE_VOCAB=$MODELS/vocab/ggml-vocab-bert-bge.gguf
MAKE_BERT=$MSTORE_SRC/tests/reference/make_bert_gguf.py
BERT_CTX=64

# bert_fixture [make_bert_gguf.py options]: writes $WORK/bert.gguf and imports it as "bert".
bert_fixture() {
    [ -f "$BGE_VOCAB" ] || skip "the bert-bge vocab not found under $MODELS/vocab"
    [ -f "$MAKE_BERT" ] || skip "tests/reference/make_bert_gguf.py (the encoder work) is not here"
    "$PY" -c 'import numpy' 2>/dev/null || skip "python3-numpy is not installed"
    "$PY" "$MAKE_BERT" --vocab "$BGE_VOCAB" --out "$WORK/bert.gguf" --ctx "$BERT_CTX" --seed 7 "$@" \
        >"$WORK/make_bert.log" 2>&1 || fail "make_bert_gguf.py: $(tail -5 "$WORK/make_bert.log")"
    expect_ok mstore import "$WORK/bert.gguf" --name bert --quiet
}

# vec CHECK ARGS...: the embedding checks, in Python, on JSON answers saved in files:
#   vec same A.json B.json          the embeddings of A and B are equal, component for component
#   vec unit A.json                 every vector has length 1 (within 1e-5)
#   vec pooled RAW.json UNIT.json   RAW's vectors are not of length 1, and scaled to it are UNIT's
#                                   (within 1e-6): ollama's older endpoint answers them unnormalized
#   vec prefix FULL.json D.json N   D's vectors are FULL's first N components renormalized
#   vec count A.json N              N vectors
#   vec tokens A.json N             prompt_eval_count (or usage.prompt_tokens) is N
# A file is any of the answers: {"embeddings"}, {"embedding"}, OpenAI's {"data"} with float
# lists or base64 (decoded as little-endian float32).
vec() {
    "$PY" - "$@" <<'PYEOF' || fail "vec $*"
import base64, json, math, struct, sys

def load(path):
    with open(path) as f:
        j = json.load(f)
    if "embeddings" in j:
        return j, j["embeddings"]
    if "embedding" in j:
        return j, [j["embedding"]]
    rows = []
    for i, d in enumerate(j["data"]):
        assert d["object"] == "embedding" and d["index"] == i, d
        e = d["embedding"]
        if isinstance(e, str):
            raw = base64.b64decode(e, validate=True)
            e = list(struct.unpack("<%df" % (len(raw) // 4), raw))
        rows.append(e)
    return j, rows

def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]

op, args = sys.argv[1], sys.argv[2:]
if op == "same":
    _, a = load(args[0])
    _, b = load(args[1])
    assert len(a) == len(b), (len(a), len(b))
    for i, (x, y) in enumerate(zip(a, b)):
        assert len(x) == len(y), (i, len(x), len(y))
        # float32 values on every surface: JSON decimals and base64 name the same floats
        bad = [k for k in range(len(x)) if f32(x[k]) != f32(y[k])]
        assert not bad, "vector %d differs at %d: %r vs %r" % (i, bad[0], x[bad[0]], y[bad[0]])
elif op == "unit":
    _, a = load(args[0])
    for i, x in enumerate(a):
        n = math.sqrt(sum(v * v for v in x))
        assert abs(n - 1) < 1e-5, (i, n)
elif op == "pooled":
    _, raw = load(args[0])
    _, unit = load(args[1])
    assert len(raw) == len(unit), (len(raw), len(unit))
    for i, (x, y) in enumerate(zip(raw, unit)):
        n = math.sqrt(sum(v * v for v in x))
        assert abs(n - 1) > 1e-3, "vector %d has length %r: normalized" % (i, n)
        for k in range(len(x)):
            assert abs(x[k] / n - y[k]) < 1e-6, (i, k, x[k] / n, y[k])
elif op == "prefix":
    _, full = load(args[0])
    _, d = load(args[1])
    n = int(args[2])
    assert len(full) == len(d)
    for i, (x, y) in enumerate(zip(full, d)):
        assert len(y) == n, (i, len(y))
        s = math.sqrt(sum(v * v for v in x[:n]))
        for k in range(n):
            assert abs(x[k] / s - y[k]) < 1e-6, (i, k, x[k] / s, y[k])
elif op == "count":
    _, a = load(args[0])
    assert len(a) == int(args[1]), (len(a), args[1])
elif op == "tokens":
    j, _ = load(args[0])
    got = j["prompt_eval_count"] if "prompt_eval_count" in j else j["usage"]["prompt_tokens"]
    assert got == int(args[1]), (got, args[1])
else:
    sys.exit("vec: unknown check " + op)
PYEOF
}

# ntokens NAME TEXT: how many tokens `mstore tokenize` gives TEXT (specials included).
ntokens() {
    expect_ok mstore tokenize "$1" "$2"
    printf '%s\n' "$out" | wc -w
}
