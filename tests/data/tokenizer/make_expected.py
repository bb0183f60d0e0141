#!/usr/bin/env python3
"""make_expected.py: expected token ids from llama.cpp's llama-tokenize, for test_tokenizer.c
and tests/e2e/t5011-tokenize-llama-cpp.sh.

usage: make_expected.py LLAMA_TOKENIZE VOCAB_DIR
  LLAMA_TOKENIZE  llama.cpp's llama-tokenize binary (built beside the project, never committed)
  VOCAB_DIR       ../shared/models/vocab (llama.cpp's ggml-vocab-*.gguf files)

For every vocab and every string in STRINGS below, runs
  llama-tokenize -m VOCAB -f FILE --ids --log-disable --no-escape [--no-parse-special]
(BOS added when the vocab adds it), and writes <vocab>.json beside this script:
  {"vocab": FILE, "llama_cpp": VERSION, "cases": [{"text" | "text_hex", "parse_special", "ids"}]}
"text_hex" replaces "text" for byte strings that are not UTF-8.
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

STRINGS = [
    "Hello world", " Hello world", "Hello World!", "hello, WORLD... ok?",
    "   leading spaces", "trailing spaces   ", "tabs\tand\t\ttabs", "a  b   c    d",
    "\n", "\n\n\n", " \n \n ", "line one\nline two\r\nline three\r",
    "I'm sure you're right, they'll say it's John's and we'd've known",
    "DON'T SHOUT, I'LL HEAR", "it''s 'quoted' words'",
    "0 1 12 123 1234 12345 123456 3.14159 -42 1e10 0x1F 1,000,000",
    "int main(void) { return printf(\"%d\\n\", a[i] + b->c); }",
    "def f(x):\n    return x ** 2  # square\n\n\tpass",
    "<html><body class=\"x\">&amp;</body></html>",
    "if (a != b && c <= d || e >= f) { x += 1; y -= 2; }",
    "caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u00c5ngstr\u00f6m stra\u00dfe",
    "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3067\u3059\u3002\u4e2d\u6587\u5b57\u7b26",
    "\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8",
    "\u0627\u0644\u0639\u0631\u0628\u064a\u0629 \u05e2\u05d1\u05e8\u05d9\u05ea \u0440\u0443\u0441\u0441\u043a\u0438\u0439 \u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac",
    "emoji \U0001f642\U0001f680\U0001f469\u200d\U0001f4bb \u2764\ufe0f flags \U0001f1eb\U0001f1f7",
    "e\u0301 a\u0308 combining marks \u0915\u094d\u0937",
    "\u3000ideographic\u3000space\u00a0nbsp\u2003em\u2009thin",
    "\u2460\u2461 \u00bd \u2167 \u0661\u0662\u0663 \uff11\uff12\uff13 superscript\u00b2",
    "\u201cquotes\u201d \u2018single\u2019 \u2014 dash \u2026 ellipsis \u00ab\u00bb",
    "\uff21\uff22\uff23 \uff41\uff42\uff43 \uff01\uff1f",
    "$100 + 50% = <x> ^ ~y | `z` @user #tag",
    "a.b,c;d:e!f?g", "___init___ __main__ --flag=value",
    "<s> </s> <unk>", "<|endoftext|> text", "<|user|>\nhi<|end|>\n<|assistant|>",
    "<\uff5cbegin\u2581of\u2581sentence\uff5c>hi", "\u2581already\u2581escaped",
    "x" * 300, "ab" * 100 + " " + "\u00e9" * 50,
    "   \n\t  \n", "Hello\u200bworld", "zero\u0000byte",
]
BYTES = [b"bad \xff\xfe utf8 \xc3", b"\xed\xa0\x80 surrogate \xc0\x80 overlong"]
# WordPiece (bert vocabs) only: what its normalizer and pre-tokenizer look at.
STRINGS_WPM = [
    "[CLS] [SEP] [MASK] [UNK] [PAD] [cls]", "\u00c0\u00c9\u00ce\u00d5\u00dc \u00e0\u00e9\u00ee\u00f5\u00fc \u0130stanbul \u01c5 \u1e9e \u03a3\u0391\u03a3",
    "ﬁne ﬂower \u212b \u2126 \u00b5 \u1f80", "tab\tnew\nline\rcr\u0085nel\u000bvt\u000cff",
    "soft\u00adhyphen zero\u200cwidth bom\ufeffx rtl\u200fmark priv\ue000ate",
    "don't stop\u2014now!!! (really?) [x] {y} <z> a/b\\c a_b a-b a'b",
    "$5 + 3 = 8 ^ 2 ~ 4 | 5 ` 6 \u00a7 \u00b6 \u00a9 \u00ae \u2122 \u20ac \u00a3 \u00a5",
    "\u4f60\u597d\u4e16\u754c abc\u6f22\u5b57def \u3042\u3044\u3046 \u30a2\u30a4 \uac00\ub098 \U00020000\U0002b820\U0002b920",
    "supercalifragilisticexpialidocious antidisestablishmentarianism pneumonoultramicroscopic",
    "x" * 99 + " " + "y" * 100 + " " + "z" * 101,
    "12,345.67 1st 2nd 3rd 4th 10km 3.14e-10 0xdeadbeef",
    "\U0001f600 \U0001f44d\U0001f3fd \u2603 \u2665\ufe0f a\U0001f600b",
]


def ids_of(tool, vocab, data, parse_special):
    with tempfile.NamedTemporaryFile(delete=False) as f:
        f.write(data)
        path = f.name
    try:
        cmd = [tool, "-m", vocab, "-f", path, "--ids", "--log-disable", "--no-escape"]
        if not parse_special:
            cmd.append("--no-parse-special")
        out = subprocess.run(cmd, capture_output=True, check=True).stdout.decode()
    finally:
        os.unlink(path)
    line = [l for l in out.splitlines() if l.startswith("[")][-1]
    return json.loads(line)


def main():
    tool, vdir = sys.argv[1], sys.argv[2]
    # llama-tokenize has no --version; say what it was instead (edit when built from a git tree)
    version = os.environ.get("LLAMA_CPP_VERSION", "llama-tokenize at " + os.path.realpath(tool))
    for name in sorted(os.listdir(vdir)):
        if not name.endswith(".gguf"):
            continue
        cases = []
        for s in STRINGS + BYTES + (STRINGS_WPM if "bert" in name else []):
            data = s if isinstance(s, bytes) else s.encode("utf-8")
            if b"\0" in data:   # neither a file name argv nor llama-tokenize's C string keeps a NUL
                continue
            for ps in (False, True):
                c = {"parse_special": ps, "ids": ids_of(tool, os.path.join(vdir, name), data, ps)}
                try:
                    c = {"text": data.decode("utf-8"), **c}
                except UnicodeDecodeError:
                    c = {"text_hex": data.hex(), **c}
                cases.append(c)
        with open(os.path.join(HERE, name.replace(".gguf", ".json")), "w", encoding="utf-8") as f:
            f.write('{"vocab": %s,\n "llama_cpp": %s,\n "cases": [\n' % (json.dumps(name), json.dumps(version)))
            f.write(",\n".join("  " + json.dumps(c, ensure_ascii=False) for c in cases))
            f.write("\n]}\n")
        print(name, len(cases), "cases")


if __name__ == "__main__":
    main()
