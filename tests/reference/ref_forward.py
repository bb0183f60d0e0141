#!/usr/bin/python3
"""ref_forward.py: a float64 reference forward of a llama / qwen2 / qwen3 GGUF model, to judge
the C runtime; also their mixtures of experts (Mixtral as llama with experts, qwen2moe, qwen3moe),
gemma3, phi3, gpt-oss (see Model.oss_moe and the attention in Model.step) and DeepSeek V2 / V3
(llama.cpp's deepseek2: MLA attention in its plain, unabsorbed form, Model.ds_layer; the MoE with
softmax or sigmoid gating, exp_probs_b and group-limited routing, Model.ds_moe).

Everything here is written from the published formats, independent of src/runtime:
  - a GGUF v2/v3 reader (metadata, tensor infos, data section at the aligned header end);
  - dequantization of F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, the K-quants Q2_K, Q3_K,
    Q4_K, Q5_K, Q6_K and IQ4_NL, IQ4_XS (ggml block layouts, see dequant_k below), MXFP4;
  - the forward in float64: RMSNorm, GQA attention with a KV cache, SwiGLU, tied or separate
    output head; RoPE on adjacent pairs for llama (GGUF stores llama's Q/K rows permuted for it),
    on halves (NEOX) for qwen2/qwen3 as llama.cpp runs them; qwen2's q/k/v biases; qwen3's
    QK-norm (RMSNorm of each head of q and k, before rope) and head_dim = <arch>.attention.key_length.

Usage:
  ref_forward.py MODEL.gguf --prompt 1,403,407 [--prompt ...] [--steps N] [--logits] [--logprobs N]
                 [--self-check]   (deepseek2: also the absorbed MLA attention, asserted equal)
  ref_forward.py MODEL.gguf --prompt ... --embed mean|cls|last   (a decoder used for embeddings)
                 [--frequency-penalty F] [--presence-penalty P] [--repeat-last-n N] > out.json
Prints JSON: {"model", "sha256", "prompts": [{"tokens", "greedy", "logits"?, "top5"}]}.
"greedy" is N tokens chosen by argmax, each fed back in; "logits" are the logits after the
prompt's last token (the first step); "logprobs" (--logprobs N) each greedy step's chosen token
with its log-softmax and the N best tokens. Needs numpy (use /usr/bin/python3 on Debian/Ubuntu).
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


KVALUES_IQ4 = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113], dtype=np.float64)
K_BYTES = {10: 84, 11: 110, 12: 144, 13: 176, 14: 210, 23: 136}


def scale_min_k4(sc):
    """Q4_K / Q5_K: 8 (scale, min) pairs of 6 bits packed in 12 bytes -> two [nb, 8] arrays."""
    sc = sc.astype(np.int64)
    s = np.empty((sc.shape[0], 8), np.int64)
    m = np.empty((sc.shape[0], 8), np.int64)
    s[:, :4], m[:, :4] = sc[:, 0:4] & 63, sc[:, 4:8] & 63
    s[:, 4:] = (sc[:, 8:12] & 15) | ((sc[:, 0:4] >> 6) << 4)
    m[:, 4:] = (sc[:, 8:12] >> 4) | ((sc[:, 4:8] >> 6) << 4)
    return s, m


def dequant_k(buf, off, t, n):
    """Super-blocks of 256 weights (IQ4_NL: blocks of 32). Byte layouts, all little endian:
    Q2_K  u8 scales[16] (lo nibble scale, hi nibble min, per 16) | qs[64] 2-bit | f16 d | f16 dmin
    Q3_K  hmask[32] | qs[64] 2-bit | scales[12] (16 x 6 bits, minus 32) | f16 d; q = lo2 - (hbit ? 0 : 4)
    Q4_K  f16 d | f16 dmin | scales[12] (8 x (6-bit scale, 6-bit min)) | qs[128] nibbles
    Q5_K  f16 d | f16 dmin | scales[12] | qh[32] (5th bits) | qs[128]
    Q6_K  ql[128] | qh[64] | i8 scales[16] | f16 d; q = 6 bits - 32
    IQ4_XS f16 d | u16 scales_h | scales_l[4] | qs[128]; 8 scales of 6 bits minus 32, values KVALUES
    Within a 128 (Q2/Q3/Q6) or 64 (Q4/Q5) element span, the 2/4-bit fields of byte l at shift s
    give element l + 32 * (s / bits)."""
    if t == 20:
        nb = n // 32
        b = np.frombuffer(buf, dtype=np.uint8, count=nb * 18, offset=off).reshape(nb, 18)
        d = f16(b[:, 0:2].tobytes()).reshape(nb, 1)
        q = np.concatenate([b[:, 2:] & 15, b[:, 2:] >> 4], axis=1)
        return (KVALUES_IQ4[q] * d).reshape(-1)
    bs = K_BYTES[t]
    nb = n // 256
    b = np.frombuffer(buf, dtype=np.uint8, count=nb * bs, offset=off).reshape(nb, bs).astype(np.int64)
    y = np.empty((nb, 256))

    def h(lo):
        return f16(b[:, lo:lo + 2].astype(np.uint8).tobytes()).reshape(nb, 1)
    if t == 10:
        sc, qs, d, dmin = b[:, 0:16], b[:, 16:80], h(80), h(82)
        for half in range(2):
            for j in range(4):
                q = (qs[:, 32 * half:32 * half + 32] >> (2 * j)) & 3
                for k in range(2):
                    i = 8 * half + 2 * j + k
                    e = 128 * half + 32 * j + 16 * k
                    y[:, e:e + 16] = d * (sc[:, i:i + 1] & 15) * q[:, 16 * k:16 * k + 16] - dmin * (sc[:, i:i + 1] >> 4)
    elif t == 11:
        hm, qs, sc, d = b[:, 0:32], b[:, 32:96], b[:, 96:108], h(108)
        for i in range(16):
            lo = (sc[:, i] & 15) if i < 8 else (sc[:, i - 8] >> 4)
            scale = (lo | (((sc[:, 8 + i % 4] >> (2 * (i // 4))) & 3) << 4)) - 32
            half, j, k = i // 8, (i % 8) // 2, i % 2
            q = (qs[:, 32 * half + 16 * k:32 * half + 16 * k + 16] >> (2 * j)) & 3
            hb = (hm[:, 16 * k:16 * k + 16] >> (4 * half + j)) & 1
            e = 128 * half + 32 * j + 16 * k
            y[:, e:e + 16] = d * scale.reshape(nb, 1) * (q - 4 * (1 - hb))
    elif t in (12, 13):
        d, dmin = h(0), h(2)
        s, m = scale_min_k4(b[:, 4:16])
        qs = b[:, 16:144] if t == 12 else b[:, 48:176]
        for j in range(4):
            for k in range(2):
                q = (qs[:, 32 * j:32 * j + 32] >> (4 * k)) & 15
                if t == 13:
                    q = q + ((b[:, 16:48] >> (2 * j + k)) & 1) * 16
                i = 2 * j + k
                y[:, 32 * i:32 * i + 32] = d * s[:, i:i + 1] * q - dmin * m[:, i:i + 1]
    elif t == 14:
        ql, qh, d = b[:, 0:128], b[:, 128:192], h(208)
        sc = b[:, 192:208].astype(np.uint8).view(np.int8).astype(np.int64)
        for half in range(2):
            for j in range(4):
                lo = ql[:, 64 * half + 32 * (j % 2):64 * half + 32 * (j % 2) + 32]
                lo = (lo & 15) if j < 2 else (lo >> 4)
                q = (lo | (((qh[:, 32 * half:32 * half + 32] >> (2 * j)) & 3) << 4)) - 32
                for k in range(2):
                    e = 128 * half + 32 * j + 16 * k
                    y[:, e:e + 16] = d * sc[:, 8 * half + 2 * j + k:8 * half + 2 * j + k + 1] * q[:, 16 * k:16 * k + 16]
    elif t == 23:
        d, sh, sl, qs = h(0), b[:, 2] | (b[:, 3] << 8), b[:, 4:8], b[:, 8:136]
        for i in range(8):
            ls = ((sl[:, i // 2] >> (4 * (i % 2))) & 15) | (((sh >> (2 * i)) & 3) << 4)
            q = np.concatenate([qs[:, 16 * i:16 * i + 16] & 15, qs[:, 16 * i:16 * i + 16] >> 4], axis=1)
            y[:, 32 * i:32 * i + 32] = d * (ls - 32).reshape(nb, 1) * KVALUES_IQ4[q]
    return y.reshape(-1)


# MXFP4 (ggml type 39), gpt-oss's experts: 32 weights in 17 bytes, u8 e (E8M0) then qs[16]; weight
# j = KV[qs[j] & 15] * d, weight j + 16 = KV[qs[j] >> 4] * d, d = 2^(e - 128): ggml keeps the E2M1
# values doubled (0 .. 12) and the E8M0 scale halved, so the product is the format's own value
KVALUES_MXFP4 = np.array([0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12], dtype=np.float64)


def dequant(buf, off, t, n):
    if t == 39:
        nb = n // 32
        b = np.frombuffer(buf, dtype=np.uint8, count=nb * 17, offset=off).reshape(nb, 17)
        d = np.exp2(b[:, 0].astype(np.float64) - 128).reshape(nb, 1)
        q = np.concatenate([b[:, 1:] & 15, b[:, 1:] >> 4], axis=1)
        return (KVALUES_MXFP4[q] * d).reshape(-1)
    if t in K_BYTES or t == 20:
        return dequant_k(buf, off, t, n)
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


class Model:
    def __init__(self, g, n_ctx=4096):
        kv = g.kv
        self.arch = arch = kv['general.architecture'].decode()
        if arch not in ('llama', 'qwen2', 'qwen3', 'qwen2moe', 'qwen3moe', 'gemma3', 'phi3', 'gpt-oss', 'deepseek2'):
            raise SystemExit("architecture '%s' is not supported" % arch)
        a = arch + '.'
        self.dim = kv[a + 'embedding_length']
        self.n_layers = kv[a + 'block_count']
        self.n_heads = kv[a + 'attention.head_count']
        self.n_kv = kv.get(a + 'attention.head_count_kv', self.n_heads)
        self.hd = kv.get(a + 'attention.key_length', self.dim // self.n_heads)
        self.n_rot = kv.get(a + 'rope.dimension_count', self.hd)
        self.eps = kv.get(a + 'attention.layer_norm_rms_epsilon', 1e-5)
        self.neox = arch not in ('llama', 'deepseek2')
        # MoE (HF MixtralSparseMoeBlock / Qwen2MoeSparseMoeBlock / Qwen3MoeSparseMoeBlock): softmax
        # over the router logits, the top k, renormalized (Mixtral, and Qwen3-MoE as llama.cpp runs
        # it: norm_topk_prob) or not (Qwen2-MoE); qwen2moe adds sigmoid(gate . x) * shared(x)
        self.n_exp = kv.get(a + 'expert_count', 0)
        self.n_used = kv.get(a + 'expert_used_count', 0)
        self.moe_norm = bool(kv.get(a + 'expert_weights_norm', arch != 'qwen2moe'))
        theta = kv.get(a + 'rope.freq_base', 10000.0)
        self.freqs = theta ** (-np.arange(0, self.n_rot, 2, dtype=np.float64) / self.n_rot)
        # Gemma 3 (HF Gemma3TextModel, as llama.cpp runs its GGUF, whose norms already hold 1 + w):
        # embeddings times sqrt(dim); layers l with (l + 1) % 6 != 0 attend within the last
        # `sliding_window` positions with rope base 10000 (unscaled), the others globally with
        # freq_base; a norm after attention and after the FFN; GeGLU with tanh gelu; QK-norm
        self.gemma = arch == 'gemma3'
        # Mistral (HF MistralModel with sliding_window): every layer within the window
        self.window = kv.get(a + 'attention.sliding_window', 0)
        self.freqs_local = 10000.0 ** (-np.arange(0, self.n_rot, 2, dtype=np.float64) / self.n_rot)
        self.softcap = kv.get(a + 'final_logit_softcapping', 0.0)
        # Llama 3.1's rope_freqs and Phi-3 128k's longrope: per-frequency divisors. Longrope, as
        # llama.cpp runs it, takes the long factors when the context (--n-ctx) exceeds the
        # original one, else the short, and scales cos and sin by attn_factor
        t = g.tensor
        self.mscale = 1.0
        if 'rope_freqs.weight' in g.tensors:
            self.freqs = self.freqs / t('rope_freqs.weight')
        if 'rope_factors_long.weight' in g.tensors:
            orig = kv[a + 'rope.scaling.original_context_length']
            f = t('rope_factors_long.weight' if n_ctx > orig else 'rope_factors_short.weight')
            self.freqs = self.freqs / f
            self.mscale = kv.get(a + 'rope.scaling.attn_factor', 1.0)
        st = kv.get(a + 'rope.scaling.type', b'none').decode()
        if st == 'linear':
            self.freqs /= kv[a + 'rope.scaling.factor']
        elif st == 'yarn':
            self.yarn(kv[a + 'rope.scaling.factor'], kv[a + 'rope.scaling.original_context_length'], theta)
        elif st not in ('none', ''):
            raise SystemExit('rope scaling %s not implemented in the reference' % st)
        # gpt-oss (HF GptOssForCausalLM as llama.cpp runs it): biases on q, k, v and the output
        # projection, a sink logit per head, even layers within the sliding window, the MoE of
        # oss_moe after post_attention_norm
        self.oss = arch == 'gpt-oss'
        self.ds = arch == 'deepseek2'
        self.check = False   # deepseek2 --self-check
        if self.ds:
            self.ds_init(kv, a, st)
        t = g.tensor
        self.embed = t('token_embd.weight')
        self.head = t('output.weight') if 'output.weight' in g.tensors else self.embed
        self.out_norm = t('output_norm.weight')
        self.layers = []
        opt = ('attn_q.bias', 'attn_k.bias', 'attn_v.bias', 'attn_q_norm.weight', 'attn_k_norm.weight')
        for i in range(self.n_layers):
            p = 'blk.%d.' % i
            if self.ds:
                self.layers.append({n[len(p):-len('.weight')] if n.endswith('.weight') else n[len(p):]: t(n)
                                    for n in g.tensors if n.startswith(p)})
                continue
            if self.oss:
                self.layers.append({k: t(p + k) for k in (
                    'attn_norm.weight', 'attn_q.weight', 'attn_q.bias', 'attn_k.weight', 'attn_k.bias', 'attn_v.weight',
                    'attn_v.bias', 'attn_output.weight', 'attn_output.bias', 'attn_sinks.weight',
                    'post_attention_norm.weight', 'ffn_gate_inp.weight', 'ffn_gate_inp.bias', 'ffn_gate_exps.weight',
                    'ffn_gate_exps.bias', 'ffn_up_exps.weight', 'ffn_up_exps.bias', 'ffn_down_exps.weight',
                    'ffn_down_exps.bias')})
                continue
            if arch == 'phi3':   # HF Phi3: qkv_proj rows q | k | v, gate_up_proj rows gate | up
                qkv, gu = t(p + 'attn_qkv.weight'), t(p + 'ffn_up.weight')
                qd, kd, ff = self.n_heads * self.hd, self.n_kv * self.hd, gu.shape[0] // 2
                self.layers.append({'attn_norm': t(p + 'attn_norm.weight'), 'attn_q': qkv[:qd],
                                    'attn_k': qkv[qd:qd + kd], 'attn_v': qkv[qd + kd:],
                                    'attn_output': t(p + 'attn_output.weight'), 'ffn_norm': t(p + 'ffn_norm.weight'),
                                    'ffn_gate': gu[:ff], 'ffn_up': gu[ff:], 'ffn_down': t(p + 'ffn_down.weight')})
                continue
            ffn = ('ffn_gate_inp', 'ffn_gate_exps', 'ffn_up_exps', 'ffn_down_exps') if self.n_exp else (
                'ffn_gate', 'ffn_up', 'ffn_down')
            L = {k: t(p + k + '.weight') for k in (
                'attn_norm', 'attn_q', 'attn_k', 'attn_v', 'attn_output', 'ffn_norm') + ffn}
            L.update({k: t(p + k) for k in opt if p + k in g.tensors})
            L.update({k: t(p + k + '.weight') for k in ('post_attention_norm', 'post_ffw_norm')
                      if p + k + '.weight' in g.tensors})
            L.update({k: t(p + k + '.weight') for k in ('ffn_gate_inp_shexp', 'ffn_gate_shexp', 'ffn_up_shexp',
                                                         'ffn_down_shexp') if p + k + '.weight' in g.tensors})
            self.layers.append(L)
        self.reset()

    def yarn(self, factor, orig_ctx, base, beta_fast=32.0, beta_slow=1.0):
        """YaRN as ggml's rope computes it (ext_factor 1, attn_factor 1): per pair i of the n_rot
        dims, theta = pos * freq_i * ((1 - mix_i) / factor + mix_i), a ramp between extrapolation
        (mix 1, the high frequencies) and interpolation (mix 0) over the pairs between ggml's
        corr dims (floor / ceil of the dims whose wavelength turns beta_fast / beta_slow times
        in orig_ctx, clamped to 0 .. n_rot - 1); cos and sin times 1 + 0.1 ln(factor)."""
        def corr_dim(beta):
            return self.n_rot * np.log(orig_ctx / (beta * 2 * np.pi)) / (2 * np.log(base))
        low = max(0.0, np.floor(corr_dim(beta_fast)))
        high = min(self.n_rot - 1.0, np.ceil(corr_dim(beta_slow)))
        ramp = np.clip((np.arange(self.n_rot // 2) - low) / max(0.001, high - low), 0.0, 1.0)
        mix = 1.0 - ramp
        self.freqs = self.freqs * ((1.0 - mix) / factor + mix)
        self.mscale *= 1.0 + 0.1 * np.log(factor)
        self.yarn_dims = (low, high)

    def oss_moe(self, L, h):
        """gpt-oss's MoE: the n_used largest router logits (W x + b), their softmax as weights;
        each expert's SwiGLU with gate clamped above at 7, up clamped to [-7, 7] and shifted by
        1, sigmoid(1.702 g) for the gate's activation, biases on all three."""
        r = L['ffn_gate_inp.weight'] @ h + L['ffn_gate_inp.bias']
        top = np.argsort(-r, kind='stable')[:self.n_used]
        w = np.exp(r[top] - r[top].max())
        w /= w.sum()
        out = np.zeros(self.dim)
        for wi, e in zip(w, top):
            gt = np.minimum(L['ffn_gate_exps.weight'][e] @ h + L['ffn_gate_exps.bias'][e], 7.0)
            u = np.clip(L['ffn_up_exps.weight'][e] @ h + L['ffn_up_exps.bias'][e], -7.0, 7.0)
            act = gt / (1.0 + np.exp(-1.702 * gt)) * (u + 1.0)
            out += wi * (L['ffn_down_exps.weight'][e] @ act + L['ffn_down_exps.bias'][e])
        return out

    def reset(self):
        self.lat = [[] for _ in range(self.n_layers)]   # deepseek2: (normed ckv, roped k_pe) per position
        self.kc = [[] for _ in range(self.n_layers)]
        self.vc = [[] for _ in range(self.n_layers)]
        self.pos = 0

    def norm(self, x, w):
        return x / np.sqrt(np.mean(x * x) + self.eps) * w

    def rope(self, v, n_heads, norm=None, freqs=None):
        v = v.reshape(n_heads, self.hd).copy()
        if norm is not None:   # qwen3: each head normalized over head_dim
            v = v / np.sqrt(np.mean(v * v, axis=1, keepdims=True) + self.eps) * norm
        a = self.pos * (self.freqs if freqs is None else freqs)
        c, s = self.mscale * np.cos(a), self.mscale * np.sin(a)
        half = self.n_rot // 2
        i0 = np.arange(half) if self.neox else np.arange(0, self.n_rot, 2)
        i1 = i0 + half if self.neox else i0 + 1
        x0, x1 = v[:, i0].copy(), v[:, i1].copy()
        v[:, i0] = x0 * c - x1 * s
        v[:, i1] = x0 * s + x1 * c
        return v

    @staticmethod
    def swiglu(wg, wu, wd, h):
        gt = wg @ h
        return wd @ (gt / (1.0 + np.exp(-gt)) * (wu @ h))

    def moe(self, L, h):
        r = L['ffn_gate_inp'] @ h
        p = np.exp(r - r.max())
        p /= p.sum()
        top = np.argsort(-p, kind='stable')[:self.n_used]
        w = p[top] / p[top].sum() if self.moe_norm else p[top]
        out = sum(wi * self.swiglu(L['ffn_gate_exps'][e], L['ffn_up_exps'][e], L['ffn_down_exps'][e], h)
                  for wi, e in zip(w, top))
        if 'ffn_gate_shexp' in L:
            g = float(L['ffn_gate_inp_shexp'].reshape(-1) @ h)
            out = out + self.swiglu(L['ffn_gate_shexp'], L['ffn_up_shexp'], L['ffn_down_shexp'], h) / (1.0 + np.exp(-g))
        return out

    def step(self, tok):
        x = self.embed[tok].copy()
        if self.gemma:
            x *= np.sqrt(self.dim)
        group = self.n_heads // self.n_kv
        for i, L in enumerate(self.layers):
            if self.oss:
                x = self.oss_layer(i, L, x)
                continue
            if self.ds:
                x = self.ds_layer(i, L, x)
                continue
            local = self.window > 0 and (not self.gemma or (i + 1) % 6 != 0)
            fr = self.freqs_local if local and self.gemma else None
            h = self.norm(x, L['attn_norm'])
            q, k, v = L['attn_q'] @ h, L['attn_k'] @ h, L['attn_v'] @ h
            if 'attn_q.bias' in L:
                q, k, v = q + L['attn_q.bias'], k + L['attn_k.bias'], v + L['attn_v.bias']
            q = self.rope(q, self.n_heads, L.get('attn_q_norm.weight'), fr)
            k = self.rope(k, self.n_kv, L.get('attn_k_norm.weight'), fr)
            v = v.reshape(self.n_kv, self.hd)
            self.kc[i].append(k)
            self.vc[i].append(v)
            K, V = np.stack(self.kc[i]), np.stack(self.vc[i])  # [pos, kv, hd]
            if local:   # the last `window` positions, this one included
                K, V = K[-self.window:], V[-self.window:]
            out = np.empty((self.n_heads, self.hd))
            for hh in range(self.n_heads):
                sc = K[:, hh // group, :] @ q[hh] / np.sqrt(self.hd)
                sc = np.exp(sc - sc.max())
                sc /= sc.sum()
                out[hh] = sc @ V[:, hh // group, :]
            o = L['attn_output'] @ out.reshape(-1)
            x = x + (self.norm(o, L['post_attention_norm']) if self.gemma else o)
            h = self.norm(x, L['ffn_norm'])
            if self.gemma:
                gt, u = L['ffn_gate'] @ h, L['ffn_up'] @ h
                gl = 0.5 * gt * (1 + np.tanh(np.sqrt(2 / np.pi) * (gt + 0.044715 * gt ** 3)))
                x = x + self.norm(L['ffn_down'] @ (gl * u), L['post_ffw_norm'])
            else:
                x = x + (self.moe(L, h) if self.n_exp else self.swiglu(L['ffn_gate'], L['ffn_up'], L['ffn_down'], h))
        self.pos += 1
        self.hidden = self.norm(x, self.out_norm)   # the final normed hidden state (--embed pools it)
        logits = self.head @ self.hidden
        return self.softcap * np.tanh(logits / self.softcap) if self.softcap else logits


def _oss_layer(self, i, L, x):
    """One gpt-oss layer: attention with biases, YaRN rope, the window on even layers and each
    head's sink (a logit that joins the softmax's max and denominator with no value), then the MoE."""
    group = self.n_heads // self.n_kv
    h = self.norm(x, L['attn_norm.weight'])
    q = L['attn_q.weight'] @ h + L['attn_q.bias']
    k = L['attn_k.weight'] @ h + L['attn_k.bias']
    v = L['attn_v.weight'] @ h + L['attn_v.bias']
    q, k = self.rope(q, self.n_heads), self.rope(k, self.n_kv)
    self.kc[i].append(k)
    self.vc[i].append(v.reshape(self.n_kv, self.hd))
    K, V = np.stack(self.kc[i]), np.stack(self.vc[i])  # [pos, kv, hd]
    if self.window > 0 and i % 2 == 0:   # the last `window` positions, this one included
        K, V = K[-self.window:], V[-self.window:]
    out = np.empty((self.n_heads, self.hd))
    for hh in range(self.n_heads):
        sc = K[:, hh // group, :] @ q[hh] / np.sqrt(self.hd)
        sink = L['attn_sinks.weight'][hh]
        mx = max(sc.max(), sink)
        e = np.exp(sc - mx)
        out[hh] = (e / (e.sum() + np.exp(sink - mx))) @ V[:, hh // group, :]
    x = x + L['attn_output.weight'] @ out.reshape(-1) + L['attn_output.bias']
    return x + self.oss_moe(L, self.norm(x, L['post_attention_norm.weight']))


Model.oss_layer = _oss_layer


def _ds_init(self, kv, a, st):
    """DeepSeek V2 / V3 hyperparameters. YaRN (ggml's, through yarn()) on the qk_rope dims with no
    magnitude on cos and sin: llama.cpp passes attn_factor 1 / (1 + 0.1 ln(factor)), cancelling the
    1 + 0.1 ln(factor) ggml's rope multiplies in; instead kq_scale = mscale^2 / sqrt(nope + rope),
    mscale = 1 + yarn_log_multiplier ln(factor) (HF's yarn_get_mscale(factor, mscale_all_dim)^2)."""
    self.mscale = 1.0
    if a + 'attention.key_length_mla' in kv:   # mainline llama.cpp's MLA layout: the model's sizes here
        self.hd = kv[a + 'attention.key_length_mla']
        kv = dict(kv)
        kv[a + 'attention.value_length'] = kv[a + 'attention.value_length_mla']
    factor = kv[a + 'rope.scaling.factor'] if st == 'yarn' else 1.0
    ms = 1.0 + kv.get(a + 'rope.scaling.yarn_log_multiplier', 0.0) * np.log(factor)
    self.kq_scale = ms * ms / np.sqrt(self.hd)
    self.q_lora = kv.get(a + 'attention.q_lora_rank', 0)
    self.kv_lora = kv[a + 'attention.kv_lora_rank']
    self.v_hd = kv.get(a + 'attention.value_length', self.hd)
    self.nope = self.hd - self.n_rot
    self.n_dense = kv.get(a + 'leading_dense_block_count', 0)
    self.gating = kv.get(a + 'expert_gating_func', 1)
    self.w_scale = kv.get(a + 'expert_weights_scale', 1.0)
    self.moe_norm = bool(kv.get(a + 'expert_weights_norm', False))
    self.n_groups = kv.get(a + 'expert_group_count', 1)
    self.n_groups_used = kv.get(a + 'expert_group_used_count', 0)
    self.check_err = 0.0


def _ds_rope(self, v):
    """Rope on adjacent pairs (2i, 2i + 1) of the last axis (n_rot wide), llama.cpp's NORM type."""
    v = v.copy()
    ang = self.pos * self.freqs
    c, s = np.cos(ang), np.sin(ang)
    x0, x1 = v[..., 0::2].copy(), v[..., 1::2].copy()
    v[..., 0::2] = x0 * c - x1 * s
    v[..., 1::2] = x0 * s + x1 * c
    return v


def _ds_layer(self, i, L, x):
    """One DeepSeek V2 / V3 layer as HF's modeling_deepseek computes it (as llama.cpp runs it):
    q = W_qb rmsnorm(W_qa xn) (V2-Lite: W_q xn), per head [q_nope | q_pe]; W_kva xn = [ckv | k_pe];
    per head [k_nope | v] = W_kvb rmsnorm(ckv); rope on every q_pe and on the one k_pe all heads
    share; scores (q_nope . k_nope + q_pe . k_pe) kq_scale, causal softmax, the v's summed. With
    self.check, also the absorbed (MLA) form: q_nope W_k_h . ckv + q_pe . k_pe, W_v_h (sum p ckv),
    its largest relative difference from the plain form kept in self.check_err."""
    H, nope, nr, vd, kl = self.n_heads, self.nope, self.n_rot, self.v_hd, self.kv_lora
    xn = self.norm(x, L['attn_norm'])
    if 'attn_q_a' in L:
        q = L['attn_q_b'] @ self.norm(L['attn_q_a'] @ xn, L['attn_q_a_norm'])
    else:
        q = L['attn_q'] @ xn
    q = q.reshape(H, nope + nr)
    q_nope, q_pe = q[:, :nope], self.ds_rope(q[:, nope:])
    kva = L['attn_kv_a_mqa'] @ xn
    ckv, k_pe = self.norm(kva[:kl], L['attn_kv_a_norm']), self.ds_rope(kva[kl:])
    if 'attn_kv_b' in L:
        W = L['attn_kv_b'].reshape(H, nope + vd, kl)
    else:   # mainline's split: k_b [H][kv_lora][nope] (transposed), v_b [H][v][kv_lora]
        W = np.concatenate([L['attn_k_b'].transpose(0, 2, 1), L['attn_v_b']], axis=1)
    kvh = W @ ckv                      # [H][nope + v]
    self.kc[i].append(np.concatenate([kvh[:, :nope], np.broadcast_to(k_pe, (H, nr))], axis=1))
    self.vc[i].append(kvh[:, nope:])
    self.lat[i].append((ckv, k_pe))
    K, V = np.stack(self.kc[i]), np.stack(self.vc[i])   # [pos][H][nope + rope], [pos][H][v]
    qh = np.concatenate([q_nope, q_pe], axis=1)
    out = np.empty((H, vd))
    for hh in range(H):
        sc = K[:, hh, :] @ qh[hh] * self.kq_scale
        sc = np.exp(sc - sc.max())
        out[hh] = (sc / sc.sum()) @ V[:, hh, :]
    if self.check:
        C = np.stack([c for c, _ in self.lat[i]])
        P = np.stack([k for _, k in self.lat[i]])
        for hh in range(H):
            sc = (C @ (q_nope[hh] @ W[hh, :nope]) + P @ q_pe[hh]) * self.kq_scale
            sc = np.exp(sc - sc.max())
            o = W[hh, nope:] @ ((sc / sc.sum()) @ C)
            self.check_err = max(self.check_err, float(np.abs(o - out[hh]).max() / np.abs(out[hh]).max()))
    x = x + L['attn_output'] @ out.reshape(-1)
    h = self.norm(x, L['ffn_norm'])
    if i < self.n_dense:
        return x + self.swiglu(L['ffn_gate'], L['ffn_up'], L['ffn_down'], h)
    return x + self.ds_moe(L, h)


def _ds_moe(self, L, h):
    """DeepSeek's MoE: p = softmax (gating 1, V2) or sigmoid (gating 2, V3) of the router logits;
    selection scores s = p + exp_probs_b (V3's e_score_correction_bias) when present; with G > 1
    groups of consecutive experts and K > 0 used: each group scored by its max s (softmax, HF V2's
    group_limited_greedy) or the sum of its two largest (sigmoid, HF V3's noaux_tc), the K best
    groups kept (ties to the lower index); the n_used largest s among them (ties to the lower id);
    weights p of those, / their sum if expert_weights_norm, times expert_weights_scale; plus the
    shared expert."""
    r = L['ffn_gate_inp'] @ h
    if self.gating == 2:
        p = 1.0 / (1.0 + np.exp(-r))
    else:
        p = np.exp(r - r.max())
        p /= p.sum()
    s = p + L['exp_probs_b.bias'] if 'exp_probs_b.bias' in L else p
    sel = s
    G, K = self.n_groups, self.n_groups_used
    if G > 1 and K > 0:
        g = s.reshape(G, -1)
        gs = g.max(axis=1) if self.gating != 2 else np.sort(g, axis=1)[:, -min(2, g.shape[1]):].sum(axis=1)
        keep = np.zeros(G, bool)
        keep[np.argsort(-gs, kind='stable')[:K]] = True
        sel = np.where(np.repeat(keep, g.shape[1]), s, -np.inf)
    top = np.argsort(-sel, kind='stable')[:self.n_used]
    w = p[top]
    if self.moe_norm:
        w = w / w.sum()
    w = w * self.w_scale
    out = sum(wi * self.swiglu(L['ffn_gate_exps'][e], L['ffn_up_exps'][e], L['ffn_down_exps'][e], h)
              for wi, e in zip(w, top))
    return out + self.swiglu(L['ffn_gate_shexp'], L['ffn_up_shexp'], L['ffn_down_shexp'], h)


Model.ds_init = _ds_init
Model.ds_rope = _ds_rope
Model.ds_layer = _ds_layer
Model.ds_moe = _ds_moe


def penalized(logits, seen, args):
    """OpenAI's frequency and presence penalties, written from its definition, over the last
    repeat_last_n tokens seen (the prompt's and the answer's), as llama.cpp windows them:
    logit[t] -= count[t] * frequency + (count[t] > 0) * presence. Greedy only, so no temperature."""
    if not (args.frequency_penalty or args.presence_penalty) or args.repeat_last_n <= 0:
        return logits
    out = logits.copy()
    counts = {}
    for t in seen[-args.repeat_last_n:]:
        counts[t] = counts.get(t, 0) + 1
    for t, c in counts.items():
        out[t] -= c * args.frequency_penalty + args.presence_penalty
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('model')
    ap.add_argument('--prompt', action='append', required=True, help='comma-separated token ids')
    ap.add_argument('--steps', type=int, default=32)
    ap.add_argument('--logits', action='store_true', help='include the first-step logits')
    ap.add_argument('--frequency-penalty', type=float, default=0.0,
                    help="OpenAI's: subtract count x F from the logit of each token in the window")
    ap.add_argument('--presence-penalty', type=float, default=0.0,
                    help="OpenAI's: subtract P from the logit of each token in the window")
    ap.add_argument('--repeat-last-n', type=int, default=64,
                    help='the penalties\' window: the last N tokens, prompt included (llama.cpp\'s); 0 = none')
    ap.add_argument('--logprobs', type=int, default=None, metavar='N',
                    help='per greedy step, the log-softmax (of the penalized logits) of the chosen token '
                         'and the N best [id, logprob], ties by lower id')
    ap.add_argument('--n-ctx', type=int, default=4096, help='the context the model runs with (longrope picks '
                    'its factors by it)')
    ap.add_argument('--embed', choices=('mean', 'cls', 'last'),
                    help='instead: each prompt\'s embedding, the final normed hidden states pooled (mean of '
                    'every position, the first, the last) and L2-normalized, as {"embeddings": [[...], ...]}')
    ap.add_argument('--self-check', action='store_true',
                    help='deepseek2: on the first prompt also compute the absorbed (MLA) attention and assert it '
                    'equals the plain form to 1e-9 relative')
    args = ap.parse_args()
    g = Gguf(args.model)
    m = Model(g, args.n_ctx)
    if args.self_check:
        if not m.ds:
            raise SystemExit('--self-check: deepseek2 only')
        m.check = True
    if args.embed:
        out = []
        for p in args.prompt:
            m.reset()
            hs = []
            for t in [int(x) for x in p.split(',')]:
                m.step(t)
                hs.append(m.hidden)
            v = np.mean(hs, axis=0) if args.embed == 'mean' else hs[0] if args.embed == 'cls' else hs[-1]
            out.append([float('%.9g' % e) for e in v / max(np.linalg.norm(v), 1e-12)])
        json.dump({'reference': 'tests/reference/ref_forward.py --embed (float64)', 'embeddings': out}, sys.stdout)
        sys.stdout.write('\n')
        return
    res = {'model': os.path.basename(args.model), 'sha256': hashlib.sha256(g.buf).hexdigest(),
           'reference': 'tests/reference/ref_forward.py (float64)', 'prompts': []}
    for p in args.prompt:
        toks = [int(x) for x in p.split(',')]
        m.reset()
        for t in toks:
            logits = m.step(t)
        first = logits.copy()
        greedy, margin, lps = [], float('inf'), []
        for _ in range(args.steps):
            logits = penalized(logits, toks + greedy, args)
            nxt = int(np.argmax(logits))
            if args.logprobs is not None:
                mx = float(np.max(logits))
                lp = logits - (mx + float(np.log(np.sum(np.exp(logits - mx)))))
                best = sorted(range(len(lp)), key=lambda i: (-lp[i], i))[:args.logprobs]
                lps.append({'token': nxt, 'logprob': float(lp[nxt]),
                            'top': [[int(i), float(lp[i])] for i in best]})
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
        if args.frequency_penalty or args.presence_penalty:
            e['penalties'] = {'frequency_penalty': args.frequency_penalty,
                              'presence_penalty': args.presence_penalty, 'repeat_last_n': args.repeat_last_n}
        if args.logprobs is not None:
            e['logprobs'] = lps
        if args.logits:
            e['logits'] = [float('%.9g' % v) for v in first]
        res['prompts'].append(e)
        if m.check:
            m.check = False
            sys.stderr.write('self-check: absorbed vs plain MLA attention, max relative difference %.3g\n'
                             % m.check_err)
            assert m.check_err <= 1e-9, m.check_err
    json.dump(res, sys.stdout, indent=None, separators=(',', ':'))
    sys.stdout.write('\n')


if __name__ == '__main__':
    main()
