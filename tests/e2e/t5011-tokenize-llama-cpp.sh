#!/usr/bin/env bash
# mstore tokenize on vocab-only imports of every llama.cpp test vocab (SPM and byte-level BPE)
# gives exactly the ids llama.cpp's llama-tokenize gave for our own strings
# (tests/data/tokenizer, see its README), with and without --parse-special.
. "$(dirname "$0")/lib.sh"

[ -d "$MODELS/vocab" ] || skip "vocab GGUFs not found under $MODELS"
for json in "$MSTORE_SRC"/tests/data/tokenizer/ggml-vocab-*.json; do
    v=$(basename "$json" .json)
    [ -f "$MODELS/vocab/$v.gguf" ] || skip "$v.gguf not found"
    expect_ok mstore import "$MODELS/vocab/$v.gguf" --name "$v" --quiet
done
"$PY" - "$MSTORE_BIN" "$MSTORE_SRC/tests/data/tokenizer" <<'PYEOF' || fail "mstore tokenize disagrees with llama-tokenize"
import glob, json, os, subprocess, sys
mstore, data = sys.argv[1], sys.argv[2]
total = bad = 0
for path in sorted(glob.glob(os.path.join(data, "ggml-vocab-*.json"))):
    d = json.load(open(path, encoding="utf-8"))
    name = d["vocab"][: -len(".gguf")]
    for c in d["cases"]:
        text = bytes.fromhex(c["text_hex"]) if "text_hex" in c else c["text"].encode("utf-8")
        cmd = [mstore, "tokenize", name] + (["--parse-special"] if c["parse_special"] else []) + ["--", text]
        r = subprocess.run(cmd, capture_output=True)
        got = [int(x) for x in r.stdout.split()] if r.returncode == 0 else r.stderr.decode()
        total += 1
        if got != c["ids"]:
            bad += 1
            print("%s %r parse_special=%s:\n  llama.cpp %s\n  mstore    %s" % (name, text[:50], c["parse_special"],
                                                                       c["ids"], got), file=sys.stderr)
print("agree on %d of %d cases" % (total - bad, total))
sys.exit(1 if bad or total < 400 else 0)
PYEOF
echo "ok $TEST_NAME"
