#!/usr/bin/env python3
"""ref_embed.py: a float64 reference of a BERT-family encoder GGUF (bert, nomic-bert), to judge
the runtime's embeddings by. Written from Hugging Face's BertModel / NomicBertModel and
sentence-transformers' Pooling and Normalize, not from the C:
  x = LayerNorm(word[t] + token_type[0] + position[p])          (nomic-bert: no position rows)
  per layer: q, k, v = x Wq^T + bq, ...                        (nomic-bert: Wqkv split, no biases,
             rope on q and k, NEOX halves: pairs (i, i + d/2), angle p * base^(-2i/d))
             a = softmax(q k^T / sqrt(head_dim)) v per head, every position seeing every other
             x = LayerNorm(x + a Wo^T + bo)
             x = LayerNorm(x + f(x))   bert: gelu(x W1^T + b1) W2^T + b2, gelu exact (erf);
                                       nomic-bert: (silu(x Wg^T) * (x Wu^T)) W2^T
  embedding = pool(x) / ||pool(x)||, pool: mean of the rows, row 0 (cls) or the last row.
Each sequence runs alone (positions from 0). Reads F32 and F16 tensors.

  ref_embed.py MODEL.gguf --seq 101,7592,102 [--seq ...] [--pooling mean|cls|last]
prints {"dim": D, "pooling": "mean", "embeddings": [[...], ...]} (the model's pooling unless
--pooling overrides it).
"""
import argparse
import json
import math
import struct
import sys

import numpy as np

SCAL = {0: 'B', 1: 'b', 2: 'H', 3: 'h', 4: 'I', 5: 'i', 6: 'f', 7: 'B', 10: 'Q', 11: 'q', 12: 'd'}
POOL = {1: 'mean', 2: 'cls', 3: 'last'}


def read_gguf(path):
    b = open(path, 'rb').read()
    if b[:4] != b'GGUF':
        sys.exit('%s: not a GGUF file' % path)
    n_t, n_kv = struct.unpack_from('<QQ', b, 8)
    p = 24

    def string(p):
        n = struct.unpack_from('<Q', b, p)[0]
        return b[p + 8:p + 8 + n].decode('utf-8', 'replace'), p + 8 + n

    def value(t, p):
        if t == 8:
            return string(p)
        if t == 9:
            et, n = struct.unpack_from('<IQ', b, p)
            p += 12
            out = []
            for _ in range(n):
                v, p = value(et, p)
                out.append(v)
            return out, p
        f = '<' + SCAL[t]
        return struct.unpack_from(f, b, p)[0], p + struct.calcsize(f)

    kv = {}
    for _ in range(n_kv):
        k, p = string(p)
        t = struct.unpack_from('<I', b, p)[0]
        if k in ('tokenizer.ggml.tokens', 'tokenizer.ggml.token_type', 'tokenizer.ggml.scores'):
            _, p = value(t, p + 4)   # parsed past, not kept
            continue
        kv[k], p = value(t, p + 4)
    infos = []
    for _ in range(n_t):
        name, p = string(p)
        nd = struct.unpack_from('<I', b, p)[0]
        ne = struct.unpack_from('<%dQ' % nd, b, p + 4)
        t, off = struct.unpack_from('<IQ', b, p + 4 + 8 * nd)
        p += 4 + 8 * nd + 12
        infos.append((name, ne, t, off))
    align = kv.get('general.alignment', 32)
    base = (p + align - 1) // align * align
    ts = {}
    for name, ne, t, off in infos:
        shape = tuple(reversed(ne))
        n = int(np.prod(shape))
        if t == 0:
            x = np.frombuffer(b, '<f4', n, base + off)
        elif t == 1:
            x = np.frombuffer(b, '<f2', n, base + off)
        else:
            sys.exit('%s: tensor %s: type %d (only F32 and F16 are read)' % (path, name, t))
        ts[name] = x.astype(np.float64).reshape(shape)
    return kv, ts


def layer_norm(x, w, b, eps):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


ERF = np.frompyfunc(math.erf, 1, 1)


def gelu(x):
    return 0.5 * x * (1.0 + ERF(x / math.sqrt(2.0)).astype(np.float64))


def rope_neox(x, heads, hd, base):
    n = x.shape[0]
    x = x.reshape(n, heads, hd).copy()
    half = hd // 2
    freq = base ** (-2.0 * np.arange(half) / hd)
    ang = np.arange(n)[:, None] * freq[None, :]
    c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    x0, x1 = x[:, :, :half].copy(), x[:, :, half:].copy()
    x[:, :, :half] = x0 * c - x1 * s
    x[:, :, half:] = x0 * s + x1 * c
    return x.reshape(n, heads * hd)


def encode(kv, ts, arch, ids):
    g = lambda k, d=None: kv.get('%s.%s' % (arch, k), d)  # noqa: E731
    dim, layers, heads = g('embedding_length'), g('block_count'), g('attention.head_count')
    eps, hd, nomic = g('attention.layer_norm_epsilon', 1e-12), dim // heads, arch == 'nomic-bert'
    n = len(ids)
    x = ts['token_embd.weight'][ids] + ts['token_types.weight'][0]
    if not nomic:
        x = x + ts['position_embd.weight'][:n]
    x = layer_norm(x, ts['token_embd_norm.weight'], ts['token_embd_norm.bias'], eps)
    for i in range(layers):
        t = lambda k: ts['blk.%d.%s' % (i, k)]  # noqa: E731
        if nomic:
            qkv = x @ t('attn_qkv.weight').T
            q, k, v = qkv[:, :dim], qkv[:, dim:2 * dim], qkv[:, 2 * dim:]
            base = g('rope.freq_base', 10000.0)
            q, k = rope_neox(q, heads, hd, base), rope_neox(k, heads, hd, base)
        else:
            q = x @ t('attn_q.weight').T + t('attn_q.bias')
            k = x @ t('attn_k.weight').T + t('attn_k.bias')
            v = x @ t('attn_v.weight').T + t('attn_v.bias')
        att = np.zeros((n, dim))
        for h in range(heads):
            sl = slice(h * hd, (h + 1) * hd)
            sc = q[:, sl] @ k[:, sl].T / math.sqrt(hd)
            sc = np.exp(sc - sc.max(axis=1, keepdims=True))
            sc /= sc.sum(axis=1, keepdims=True)
            att[:, sl] = sc @ v[:, sl]
        o = att @ t('attn_output.weight').T
        if not nomic:
            o = o + t('attn_output.bias')
        x = layer_norm(x + o, t('attn_output_norm.weight'), t('attn_output_norm.bias'), eps)
        if nomic:
            gt = x @ t('ffn_gate.weight').T
            f = (gt / (1.0 + np.exp(-gt))) * (x @ t('ffn_up.weight').T)
            f = f @ t('ffn_down.weight').T
        else:
            f = gelu(x @ t('ffn_up.weight').T + t('ffn_up.bias')) @ t('ffn_down.weight').T + t('ffn_down.bias')
        x = layer_norm(x + f, t('layer_output_norm.weight'), t('layer_output_norm.bias'), eps)
    return x


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('model')
    ap.add_argument('--seq', action='append', required=True, help='comma-separated token ids')
    ap.add_argument('--pooling', choices=('mean', 'cls', 'last'))
    a = ap.parse_args()
    kv, ts = read_gguf(a.model)
    arch = kv['general.architecture']
    if arch not in ('bert', 'nomic-bert'):
        sys.exit('%s: architecture %s: not an encoder this reference runs' % (a.model, arch))
    pooling = a.pooling or POOL.get(kv.get('%s.pooling_type' % arch, 1), 'mean')
    out = []
    for sq in a.seq:
        ids = [int(t) for t in sq.split(',')]
        x = encode(kv, ts, arch, ids)
        v = x.mean(axis=0) if pooling == 'mean' else x[0] if pooling == 'cls' else x[-1]
        v = v / max(np.linalg.norm(v), 1e-12)
        out.append([float('%.9g' % e) for e in v])
    json.dump({'dim': len(out[0]), 'pooling': pooling, 'reference': 'tests/reference/ref_embed.py (float64)',
               'embeddings': out}, sys.stdout)
    sys.stdout.write('\n')


if __name__ == '__main__':
    main()
