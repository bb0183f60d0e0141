#!/usr/bin/env python3
"""make_tiktoken_gguf.py: turn a tiktoken vocabulary (the ranks js-tiktoken ships, e.g.
node_modules/js-tiktoken/dist/ranks/o200k_base.js) into a vocab-only GGUF v3 with a byte-level
BPE tokenizer, the way Hugging Face's tiktoken converters and llama.cpp's convert_hf_to_gguf build
one from such a vocabulary:
  - token id = rank; tokens are the rank's bytes in GPT-2's byte-to-unicode spelling;
  - merges: for each token of two or more bytes, in rank order, the two parts that tiktoken's BPE
    reaches when it may only use merges of lower rank (a token whose BPE ends in more than two
    parts gets no merge: it can only be reached whole);
  - the special tokens at their ids (type control), unused ids between them as
    "<|reserved_N|>" (type unused), so that ids stay ranks;
  - tokenizer.ggml.model "gpt2", tokenizer.ggml.pre as --pre, no BOS / EOS added.

  make_tiktoken_gguf.py --ranks o200k_base.js --pre gpt-4o --out o200k.gguf

--harmony adds gpt-oss's special tokens to o200k_base (tiktoken's o200k_harmony): <|startoftext|>
199998, <|return|> 200002, <|constrain|> 200003, <|channel|> 200005, <|start|> 200006, <|end|>
200007, <|message|> 200008, <|call|> 200012, and makes <|return|> the EOS, as gpt-oss's GGUFs do.
"""
import argparse
import base64
import json
import struct

GGUF_U32, GGUF_BOOL, GGUF_STR, GGUF_ARR, GGUF_I32 = 4, 7, 8, 9, 5


def read_ranks(path):
    """js-tiktoken's ranks module: `export default {...}` (or module.exports = {...}) holding
    pat_str, special_tokens and bpe_ranks ("! OFFSET b64 b64 ..." lines, ranks OFFSET, OFFSET+1, ...)."""
    text = open(path, encoding='utf-8').read()
    d = json.loads(text[text.index('{'):text.rindex('}') + 1])
    ranks = {}
    for line in d['bpe_ranks'].split('\n'):
        if not line:
            continue
        f = line.split(' ')
        off = int(f[1])
        for i, tok in enumerate(f[2:]):
            ranks[base64.b64decode(tok)] = off + i
    return ranks, d['special_tokens']


def bpe_parts(ranks, token, max_rank):
    """tiktoken's merge loop on `token` using only merges of rank < max_rank."""
    parts = [token[i:i + 1] for i in range(len(token))]
    while len(parts) > 1:
        best, at = None, -1
        for i in range(len(parts) - 1):
            r = ranks.get(parts[i] + parts[i + 1])
            if r is not None and r < max_rank and (best is None or r < best):
                best, at = r, i
        if best is None:
            break
        parts[at:at + 2] = [parts[at] + parts[at + 1]]
    return parts


def byte_chars():
    """GPT-2's bytes_to_unicode: printable bytes stand for themselves, the rest get 256 + n."""
    keep = list(range(ord('!'), ord('~') + 1)) + list(range(0xa1, 0xad)) + list(range(0xae, 0x100))
    m, n = {}, 0
    for b in range(256):
        if b in keep:
            m[b] = chr(b)
        else:
            m[b] = chr(256 + n)
            n += 1
    return m


def gstr(s):
    b = s.encode('utf-8')
    return struct.pack('<Q', len(b)) + b


def kv_str(k, v):
    return gstr(k) + struct.pack('<I', GGUF_STR) + gstr(v)


def kv_arr(k, typ, items):
    out = gstr(k) + struct.pack('<IIQ', GGUF_ARR, typ, len(items))
    if typ == GGUF_STR:
        return out + b''.join(gstr(x) for x in items)
    return out + b''.join(struct.pack('<i', x) for x in items)


HARMONY = {'<|startoftext|>': 199998, '<|return|>': 200002, '<|constrain|>': 200003, '<|channel|>': 200005,
           '<|start|>': 200006, '<|end|>': 200007, '<|message|>': 200008, '<|call|>': 200012}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--ranks', required=True)
    ap.add_argument('--pre', required=True)
    ap.add_argument('--out', required=True)
    ap.add_argument('--harmony', action='store_true')
    a = ap.parse_args()

    ranks, special = read_ranks(a.ranks)
    if a.harmony:
        special.update(HARMONY)
    bc = byte_chars()
    n_vocab = max(list(ranks.values()) + list(special.values())) + 1
    tokens, types = [None] * n_vocab, [5] * n_vocab
    for tok, r in ranks.items():
        tokens[r] = ''.join(bc[b] for b in tok)
        types[r] = 1
    for text, r in special.items():
        tokens[r], types[r] = text, 3
    for i in range(n_vocab):
        if tokens[i] is None:
            tokens[i] = '<|reserved_%d|>' % i
    merges = []
    for tok, r in sorted(ranks.items(), key=lambda kv: kv[1]):
        if len(tok) < 2:
            continue
        parts = bpe_parts(ranks, tok, r)
        if len(parts) == 2:
            merges.append(''.join(bc[b] for b in parts[0]) + ' ' + ''.join(bc[b] for b in parts[1]))
    eot = special.get('<|endoftext|>', n_vocab - 1)
    eos = special['<|return|>'] if a.harmony else eot
    kv = [kv_str('general.architecture', 'gpt2'),
          kv_str('general.name', 'tiktoken vocab'),
          kv_str('tokenizer.ggml.model', 'gpt2'),
          kv_str('tokenizer.ggml.pre', a.pre),
          kv_arr('tokenizer.ggml.tokens', GGUF_STR, tokens),
          kv_arr('tokenizer.ggml.token_type', GGUF_I32, types),
          kv_arr('tokenizer.ggml.merges', GGUF_STR, merges),
          gstr('tokenizer.ggml.bos_token_id') + struct.pack('<II', GGUF_U32, eot),
          gstr('tokenizer.ggml.eos_token_id') + struct.pack('<II', GGUF_U32, eos),
          gstr('tokenizer.ggml.add_bos_token') + struct.pack('<IB', GGUF_BOOL, 0),
          gstr('tokenizer.ggml.add_eos_token') + struct.pack('<IB', GGUF_BOOL, 0)]
    tmp = a.out + '.tmp'
    with open(tmp, 'wb') as f:
        f.write(b'GGUF' + struct.pack('<IQQ', 3, 0, len(kv)) + b''.join(kv))
    import os
    os.replace(tmp, a.out)
    print('%s: %d tokens, %d merges, pre %s' % (a.out, n_vocab, len(merges), a.pre))


if __name__ == '__main__':
    main()
