#!/usr/bin/env python3
"""make_synthetic_qwen.py: write a small qwen3 / qwen2 / llama GGUF v3 with random F32 weights.

The model the runtime tests run after llama.cpp's llama-quantize turned it into K-quants (which
need rows that are multiples of 256, hence the defaults). Written from the GGUF format:
  "GGUF" | u32 3 | u64 n_tensors | u64 n_kv | kv* | tensor infos* | pad to 32 | data (32-aligned)
  tensor info = string name | u32 n_dims | u64 ne[n_dims] (ne[0] the row) | u32 type | u64 offset

Architectures, as llama.cpp loads them:
  qwen3  q/k norms blk.N.attn_q_norm / attn_k_norm [head_dim], no q/k/v biases; head_dim is
         qwen3.attention.key_length and need not be embedding_length / head_count
  qwen2  blk.N.attn_{q,k,v}.bias, no QK-norm, head_dim = embedding_length / head_count
  llama  neither
Weights: numpy default_rng(seed) normal, std 1/sqrt(cols) for matrices (so activations stay
O(1) and the logits spread), std 1 for the embedding, 1 + 0.1 N for every norm (so that a norm
applied to the wrong vector shows), 0.1 N for biases. All F32. Tokenizer keys (tokenizer.*) are
copied from --vocab (the tests use stories260K.gguf, 512 tokens).

  make_synthetic_qwen.py --arch qwen3 --vocab stories260K.gguf -o synthetic-qwen3-f32.gguf
"""
import argparse
import struct
import sys

import numpy as np

U32, F32, STR, ARR, U64 = 4, 6, 8, 9, 10
SCAL = {0: 'B', 1: 'b', 2: 'H', 3: 'h', 4: 'I', 5: 'i', 6: 'f', 7: 'B', 10: 'Q', 11: 'q', 12: 'd'}


def read_tokenizer_kv(path):
    """[(key, type, raw value bytes)] of the tokenizer.* keys, copied byte for byte."""
    b = open(path, 'rb').read()
    if b[:4] != b'GGUF':
        sys.exit('%s: not a GGUF file' % path)
    pos = 24
    n_kv = struct.unpack_from('<Q', b, 16)[0]

    def skip(t, p):
        if t == STR:
            return p + 8 + struct.unpack_from('<Q', b, p)[0]
        if t == ARR:
            et, n = struct.unpack_from('<IQ', b, p)
            p += 12
            if et in SCAL:
                return p + n * struct.calcsize('<' + SCAL[et])
            for _ in range(n):
                p = skip(et, p)
            return p
        return p + struct.calcsize('<' + SCAL[t])

    out = []
    for _ in range(n_kv):
        klen = struct.unpack_from('<Q', b, pos)[0]
        key = b[pos + 8:pos + 8 + klen].decode()
        pos += 8 + klen
        t = struct.unpack_from('<I', b, pos)[0]
        end = skip(t, pos + 4)
        if key.startswith('tokenizer.'):
            out.append((key, t, b[pos + 4:end]))
        pos = end
    return out


def s(x):
    x = x.encode()
    return struct.pack('<Q', len(x)) + x


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--arch', choices=('qwen3', 'qwen2', 'llama'), default='qwen3')
    ap.add_argument('--dim', type=int, default=256)
    ap.add_argument('--layers', type=int, default=2)
    ap.add_argument('--heads', type=int, default=4)
    ap.add_argument('--kv-heads', type=int, default=2)
    ap.add_argument('--head-dim', type=int, default=0, help='qwen3 only; default dim / heads')
    ap.add_argument('--ffn', type=int, default=512)
    ap.add_argument('--ctx', type=int, default=256)
    ap.add_argument('--tie', action='store_true', help='no output.weight')
    ap.add_argument('--seed', type=int, default=7)
    ap.add_argument('--pooling-type', type=int, help='<arch>.pooling_type (an embedding model: 1 mean, 2 cls, 3 last)')
    ap.add_argument('--vocab', required=True)
    ap.add_argument('-o', '--out', required=True)
    a = ap.parse_args()
    arch, dim, hd = a.arch, a.dim, a.head_dim or a.dim // a.heads
    if arch != 'qwen3' and hd * a.heads != dim:
        sys.exit('--head-dim must be dim / heads for %s' % arch)
    tok = read_tokenizer_kv(a.vocab)
    n_vocab = [struct.unpack_from('<Q', v, 4)[0] for (k, t, v) in tok if k == 'tokenizer.ggml.tokens'][0]
    q_dim, kv_dim = a.heads * hd, a.kv_heads * hd
    kv = [('general.architecture', STR, s(arch)), ('general.name', STR, s('synthetic-' + arch)),
          ('general.alignment', U32, struct.pack('<I', 32)), ('general.file_type', U32, struct.pack('<I', 0))]
    for k, t, v in (('context_length', U32, a.ctx), ('embedding_length', U32, dim), ('block_count', U32, a.layers),
                    ('feed_forward_length', U32, a.ffn), ('attention.head_count', U32, a.heads),
                    ('attention.head_count_kv', U32, a.kv_heads), ('attention.key_length', U32, hd),
                    ('attention.value_length', U32, hd), ('rope.dimension_count', U32, hd),
                    ('rope.freq_base', F32, 1000000.0 if arch != 'llama' else 10000.0),
                    ('attention.layer_norm_rms_epsilon', F32, 1e-6)):
        kv.append(('%s.%s' % (arch, k), t, struct.pack('<I' if t == U32 else '<f', v)))
    if a.pooling_type is not None:
        kv.append(('%s.pooling_type' % arch, U32, struct.pack('<I', a.pooling_type)))
    kv += tok
    # (name, numpy shape = reversed ne, kind): m matrix, e embedding, n norm, b bias
    ts = [('token_embd.weight', (n_vocab, dim), 'e')]
    for i in range(a.layers):
        p = 'blk.%d.' % i
        ts += [(p + 'attn_norm.weight', (dim,), 'n'), (p + 'attn_q.weight', (q_dim, dim), 'm'),
               (p + 'attn_k.weight', (kv_dim, dim), 'm'), (p + 'attn_v.weight', (kv_dim, dim), 'm')]
        if arch == 'qwen2':
            ts += [(p + 'attn_q.bias', (q_dim,), 'b'), (p + 'attn_k.bias', (kv_dim,), 'b'),
                   (p + 'attn_v.bias', (kv_dim,), 'b')]
        if arch == 'qwen3':
            ts += [(p + 'attn_q_norm.weight', (hd,), 'n'), (p + 'attn_k_norm.weight', (hd,), 'n')]
        ts += [(p + 'attn_output.weight', (dim, q_dim), 'm'), (p + 'ffn_norm.weight', (dim,), 'n'),
               (p + 'ffn_gate.weight', (a.ffn, dim), 'm'), (p + 'ffn_down.weight', (dim, a.ffn), 'm'),
               (p + 'ffn_up.weight', (a.ffn, dim), 'm')]
    ts.append(('output_norm.weight', (dim,), 'n'))
    if not a.tie:
        ts.append(('output.weight', (n_vocab, dim), 'm'))
    rng = np.random.default_rng(a.seed)
    data, infos, off = [], [], 0
    for name, shape, kind in ts:
        if kind == 'm':
            x = rng.standard_normal(shape) / np.sqrt(shape[-1])
        elif kind == 'e':
            x = rng.standard_normal(shape)
        elif kind == 'n':
            x = 1.0 + 0.1 * rng.standard_normal(shape)
        else:
            x = 0.1 * rng.standard_normal(shape)
        raw = x.astype('<f4').tobytes()
        infos.append(s(name) + struct.pack('<I', len(shape)) + struct.pack('<%dQ' % len(shape), *reversed(shape)) +
                     struct.pack('<IQ', 0, off))
        pad = (32 - len(raw) % 32) % 32
        data.append(raw + b'\0' * pad)
        off += len(raw) + pad
    head = b'GGUF' + struct.pack('<IQQ', 3, len(ts), len(kv))
    head += b''.join(s(k) + struct.pack('<I', t) + v for (k, t, v) in kv) + b''.join(infos)
    head += b'\0' * ((32 - len(head) % 32) % 32)
    with open(a.out, 'wb') as f:
        f.write(head + b''.join(data))


if __name__ == '__main__':
    main()
