#!/usr/bin/python3
"""ref_forward.py: a float64 reference forward of a llama GGUF model, to judge the C runtime.

Everything here is written from the published formats, independent of src/runtime:
  - a GGUF v2/v3 reader (metadata, tensor infos, data section at the aligned header end);
  - dequantization of F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 (ggml block layouts);
  - the llama forward in float64: RMSNorm, GQA attention with a KV cache, RoPE on adjacent pairs
    (GGUF stores llama's Q/K rows permuted for it), SwiGLU, tied or separate output head.

Usage:
  ref_forward.py MODEL.gguf --prompt 1,403,407 [--prompt ...] [--steps N] [--logits] > out.json
Prints JSON: {"model", "sha256", "prompts": [{"tokens", "greedy", "logits"?, "top5"}]}.
"greedy" is N tokens chosen by argmax, each fed back in; "logits" are the logits after the
prompt's last token (the first step). Needs numpy (use /usr/bin/python3 on Debian/Ubuntu).
"""
import argparse
import hashlib
import json
import os
import struct
import sys

import numpy as np

SCALAR = {0: '<B', 1: '<b', 2: '<H', 3: '<h', 4: '<I', 5: '<i', 6: '<f', 7: '<?', 10: '<Q', 11: '<q', 12: '<d'}
T_STR, T_ARR = 8, 9


class Gguf:
    def __init__(self, path):
        self.buf = open(path, 'rb').read()
        self.pos = 0
        if self.buf[:4] != b'GGUF':
            raise SystemExit('%s: not a GGUF file' % path)
        self.pos = 4
        version = self.take('<I')
        if version not in (2, 3):
            raise SystemExit('%s: GGUF version %d' % (path, version))
        n_tensors, n_kv = self.take('<Q'), self.take('<Q')
        self.kv = {}
        for _ in range(n_kv):
            key = self.string().decode('utf-8')
            self.kv[key] = self.value(self.take('<I'))
        infos = []
        for _ in range(n_tensors):
            name = self.string().decode('utf-8')
            nd = self.take('<I')
            ne = [self.take('<Q') for _ in range(nd)]
            infos.append((name, ne, self.take('<I'), self.take('<Q')))
        align = self.kv.get('general.alignment', 32)
        base = (self.pos + align - 1) // align * align
        self.tensors = {name: (ne, t, base + off) for (name, ne, t, off) in infos}

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.buf, self.pos)[0]
        self.pos += struct.calcsize(fmt)
        return v

    def string(self):
        n = self.take('<Q')
        s = self.buf[self.pos:self.pos + n]
        self.pos += n
        return s

    def value(self, t):
        if t == T_STR:
            return self.string()
        if t == T_ARR:
            et, n = self.take('<I'), self.take('<Q')
            return [self.value(et) for _ in range(n)]
        return self.take(SCALAR[t])

    def tensor(self, name):
        """The tensor as float64, numpy shape = reversed ne (rows, cols)."""
        ne, t, off = self.tensors[name]
        n = int(np.prod(ne))
        shape = tuple(reversed(ne))
        return dequant(self.buf, off, t, n).reshape(shape)


def f16(raw):
    return np.frombuffer(raw, dtype='<f2').astype(np.float64)


def dequant(buf, off, t, n):
    if t == 0:
        return np.frombuffer(buf, dtype='<f4', count=n, offset=off).astype(np.float64)
    if t == 1:
        return np.frombuffer(buf, dtype='<f2', count=n, offset=off).astype(np.float64)
    if t == 30:  # BF16: the upper half of an f32
        u = np.frombuffer(buf, dtype='<u2', count=n, offset=off).astype(np.uint32) << 16
        return u.view(np.float32).astype(np.float64)
    bsz = {8: 34, 2: 18, 3: 20, 6: 22, 7: 24}[t]
    nb = n // 32
    b = np.frombuffer(buf, dtype=np.uint8, count=nb * bsz, offset=off).reshape(nb, bsz)
    d = f16(b[:, 0:2].tobytes()).reshape(nb, 1)
    if t == 8:  # Q8_0: d, 32 x int8
        return (b[:, 2:].view(np.int8).astype(np.float64) * d).reshape(-1)
    if t in (3, 7):
        m = f16(b[:, 2:4].tobytes()).reshape(nb, 1)
    if t == 2:
        qs, qh = b[:, 2:18], None
    elif t == 3:
        qs, qh = b[:, 4:20], None
    elif t == 6:
        qh, qs = b[:, 2:6], b[:, 6:22]
    else:
        qh, qs = b[:, 4:8], b[:, 8:24]
    # elements 0..15 are the low nibbles, 16..31 the high nibbles
    q = np.concatenate([qs & 15, qs >> 4], axis=1).astype(np.int64)
    if qh is not None:
        bits = np.frombuffer(qh.tobytes(), dtype='<u4').astype(np.int64).reshape(nb, 1)
        q |= ((bits >> np.arange(32)) & 1) << 4
    if t == 2:
        return ((q - 8) * d).reshape(-1)
    if t == 6:
        return ((q - 16) * d).reshape(-1)
    return (q * d + m).reshape(-1)


class Llama:
    def __init__(self, g):
        kv = g.kv
        arch = kv['general.architecture'].decode()
        if arch != 'llama':
            raise SystemExit("architecture '%s' is not supported" % arch)
        self.dim = kv['llama.embedding_length']
        self.n_layers = kv['llama.block_count']
        self.n_heads = kv['llama.attention.head_count']
        self.n_kv = kv.get('llama.attention.head_count_kv', self.n_heads)
        self.hd = self.dim // self.n_heads
        self.n_rot = kv.get('llama.rope.dimension_count', self.hd)
        self.eps = kv.get('llama.attention.layer_norm_rms_epsilon', 1e-5)
        theta = kv.get('llama.rope.freq_base', 10000.0)
        self.freqs = theta ** (-np.arange(0, self.n_rot, 2, dtype=np.float64) / self.n_rot)
        st = kv.get('llama.rope.scaling.type', b'none').decode()
        if st == 'linear':
            self.freqs /= kv['llama.rope.scaling.factor']
        elif st not in ('none', ''):
            raise SystemExit('rope scaling %s not implemented in the reference' % st)
        t = g.tensor
        self.embed = t('token_embd.weight')
        self.head = t('output.weight') if 'output.weight' in g.tensors else self.embed
        self.out_norm = t('output_norm.weight')
        self.layers = []
        for i in range(self.n_layers):
            p = 'blk.%d.' % i
            self.layers.append({k: t(p + k + '.weight') for k in (
                'attn_norm', 'attn_q', 'attn_k', 'attn_v', 'attn_output', 'ffn_norm', 'ffn_gate', 'ffn_up', 'ffn_down')})
        self.reset()

    def reset(self):
        self.kc = [[] for _ in range(self.n_layers)]
        self.vc = [[] for _ in range(self.n_layers)]
        self.pos = 0

    def norm(self, x, w):
        return x / np.sqrt(np.mean(x * x) + self.eps) * w

    def rope(self, v, n_heads):
        v = v.reshape(n_heads, self.hd).copy()
        a = self.pos * self.freqs
        c, s = np.cos(a), np.sin(a)
        x0, x1 = v[:, 0:self.n_rot:2].copy(), v[:, 1:self.n_rot:2].copy()
        v[:, 0:self.n_rot:2] = x0 * c - x1 * s
        v[:, 1:self.n_rot:2] = x0 * s + x1 * c
        return v

    def step(self, tok):
        x = self.embed[tok].copy()
        group = self.n_heads // self.n_kv
        for i, L in enumerate(self.layers):
            h = self.norm(x, L['attn_norm'])
            q = self.rope(L['attn_q'] @ h, self.n_heads)
            k = self.rope(L['attn_k'] @ h, self.n_kv)
            v = (L['attn_v'] @ h).reshape(self.n_kv, self.hd)
            self.kc[i].append(k)
            self.vc[i].append(v)
            K, V = np.stack(self.kc[i]), np.stack(self.vc[i])  # [pos, kv, hd]
            out = np.empty((self.n_heads, self.hd))
            for hh in range(self.n_heads):
                sc = K[:, hh // group, :] @ q[hh] / np.sqrt(self.hd)
                sc = np.exp(sc - sc.max())
                sc /= sc.sum()
                out[hh] = sc @ V[:, hh // group, :]
            x = x + L['attn_output'] @ out.reshape(-1)
            h = self.norm(x, L['ffn_norm'])
            gt = L['ffn_gate'] @ h
            x = x + L['ffn_down'] @ (gt / (1.0 + np.exp(-gt)) * (L['ffn_up'] @ h))
        self.pos += 1
        return self.head @ self.norm(x, self.out_norm)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('model')
    ap.add_argument('--prompt', action='append', required=True, help='comma-separated token ids')
    ap.add_argument('--steps', type=int, default=32)
    ap.add_argument('--logits', action='store_true', help='include the first-step logits')
    args = ap.parse_args()
    g = Gguf(args.model)
    m = Llama(g)
    res = {'model': os.path.basename(args.model), 'sha256': hashlib.sha256(g.buf).hexdigest(),
           'reference': 'tests/reference/ref_forward.py (float64)', 'prompts': []}
    for p in args.prompt:
        toks = [int(x) for x in p.split(',')]
        m.reset()
        for t in toks:
            logits = m.step(t)
        first = logits.copy()
        greedy, margin = [], float('inf')
        for _ in range(args.steps):
            nxt = int(np.argmax(logits))
            top2 = np.partition(logits, -2)[-2:]
            margin = min(margin, float(abs(top2[1] - top2[0])))
            greedy.append(nxt)
            if len(greedy) < args.steps:
                logits = m.step(nxt)
        top = np.argsort(-first)[:5]
        # min_margin: the smallest gap between the best and second-best logit over the greedy
        # steps; a small one means a near tie that f32 (or quantized) arithmetic may flip
        e = {'tokens': toks, 'greedy': greedy, 'min_margin': margin,
             'top5': [[int(i), float(first[i])] for i in top]}
        if args.logits:
            e['logits'] = [float('%.9g' % v) for v in first]
        res['prompts'].append(e)
    json.dump(res, sys.stdout, indent=None, separators=(',', ':'))
    sys.stdout.write('\n')


if __name__ == '__main__':
    main()
