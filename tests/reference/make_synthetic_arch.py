#!/usr/bin/env python3
"""make_synthetic_arch.py: write a small GGUF v3 of an MoE or Gemma 3 model with random weights.

The architectures past llama / qwen (make_synthetic_qwen.py writes those), with tensors named and
shaped as llama.cpp loads them (ne[0] the row; numpy shape = reversed ne):
  mixtral   general.architecture llama with llama.expert_count / expert_used_count; per layer
            ffn_gate_inp [n_expert][dim] (the router) and the packs ffn_{gate,up}_exps
            [n_expert][ff][dim], ffn_down_exps [n_expert][dim][ff] instead of ffn_gate/up/down
  qwen3moe  the same packs with qwen3moe.expert_feed_forward_length, plus qwen3's QK-norm
  qwen2moe  qwen2's q/k/v biases, the packs, and a shared expert: ffn_{gate,up,down}_shexp of
            qwen2moe.expert_shared_feed_forward_length and its gate ffn_gate_inp_shexp [dim]
  mistral   llama with llama.attention.sliding_window (every layer in the window, as HF's Mistral
            with sliding_window set; llama.cpp ignores the key)
  phi3      fused attn_qkv [q + 2 kv][dim] and ffn_up [2 ff][dim] (gate rows, then up rows), NEOX
            rope, phi3.attention.sliding_window (HF and llama.cpp window every layer)
            --longrope ORIG: Phi-3's 128k form, as convert_hf_to_gguf writes it: rope_factors_long
            and rope_factors_short [n_rot / 2] (F32, per-frequency divisors), phi3.rope.scaling.
            original_context_length ORIG and phi3.rope.scaling.attn_factor sqrt(1 + ln(ctx /
            ORIG) / ln(ORIG))
  --rope-freqs (mistral, mixtral): Llama 3.1's rope_freqs.weight [n_rot / 2] divisors
  gpt-oss   OpenAI's MoE (llama.cpp's "gpt-oss"): biases on q, k, v, attn_output, the router
            ffn_gate_inp and every expert pack (ffn_{gate,up}_exps.bias [n_expert][ff],
            ffn_down_exps.bias [n_expert][dim]); attn_sinks.weight [heads] (F32); post_attention_norm
            before the MoE; no rope.dimension_count (head_dim); gpt-oss.attention.sliding_window
            (even layers); YaRN: rope.freq_base 150000, rope.scaling.type yarn, .factor 32,
            .original_context_length --yarn-orig (default 768: with n_rot 32 and base 150000 the
            corr dims are floor(1.80) = 1 and ceil(6.45) = 7, both inside 0 .. 15 and neither what
            rounding to nearest gives, so a mistake in either rounding or in the ramp shows; below
            ~201 the low one would clamp to 0). Sizes by default:
            dim 96, 4 heads of 32 (q 128 != dim), 2 kv heads, ff 64, 8 experts with 4 used, 4 layers,
            window 4. Expert gate/up rows are scaled so that the clamp at 7 bites on some tokens,
            the sinks are of the scores' size; the generator prints how often the clamp is hit.
            --dtype mxfp4: ggml's MXFP4 (type 39) for the three expert packs, Q8_0 for every other
            matrix (embedding, attention, router, output); biases, norms and sinks F32
  deepseek2 DeepSeek V2 / V3 (llama.cpp's "deepseek2"), as convert_hf_to_gguf writes DeepseekV2/V3 (by
            default the layout with attn_kv_b, b4748's; --ds-layout below): MLA attention per layer
            attn_q_a [q_lora][dim], attn_q_a_norm [q_lora], attn_q_b [heads (nope + rope)][q_lora]
            (--q-lora 0: V2-Lite's attn_q [heads (nope + rope)][dim] instead), attn_kv_a_mqa
            [kv_lora + rope][dim] (the compressed kv, then the one k_pe all heads share),
            attn_kv_a_norm [kv_lora], attn_kv_b [heads (nope + v)][kv_lora] (per head k_nope rows,
            then v rows), attn_output [dim][heads v]; the first --dense layers a SwiGLU of --dense-ffn
            (feed_forward_length), the others an MoE: router ffn_gate_inp [n_exp][dim] (F32), packs
            ffn_{gate,up}_exps [n_exp][eff][dim], ffn_down_exps [n_exp][dim][eff], a shared expert
            ffn_{gate,up}_shexp [eff n_shared][dim], ffn_down_shexp [dim][eff n_shared], and with
            --gating sigmoid (V3, the default) exp_probs_b.bias [n_exp] (F32, 0.3 N: the size of the
            sigmoid scores' spread, so that it changes some choices), expert_weights_norm true,
            expert_weights_scale 2.5; --gating softmax (V2): no bias, norm false, scale 1 (or
            --expert-scale); --groups G --groups-used K (default 4, 2; 1 1 = no group limit):
            expert_group_count / expert_group_used_count. Rope on qk_rope dims, freq_base 10000,
            YaRN factor --yarn-factor (40) over --yarn-orig (default 4096, DeepSeek's: with n_rot 16
            the corr dims are floor(2.62) = 2 and ceil(5.63) = 6, inside 0 .. 7, the low one not
            what rounding to nearest gives), rope.scaling.yarn_log_multiplier 0.1 (= 0.1
            mscale_all_dim). Sizes by default: dim 64, 4 heads, qk_nope 16, qk_rope 16, v_head 24
            (!= nope), q_lora 32, kv_lora 32, 3 layers of which 1 dense (ff 96), 8 experts with 2
            used, expert ff 32, 1 shared expert, context_length 4096 (every row a multiple of 32).
            The generator prints the corr dims and, on random unit-RMS inputs to the routers, how
            often the group limit and the bias change the chosen experts.
            ik_llama.cpp decides "lite" (no q_lora) by n_layer 26 / 27: keep --q-lora > 0 for it.
            --ds-layout mainline: as llama.cpp writes DeepSeek since its MLA change: attn_k_b
            [heads][kv_lora][qk_nope] (each head's k rows of kv_b, transposed) and attn_v_b
            [heads][v_head][kv_lora] instead of attn_kv_b (the same weights for the same seed;
            with --dtype q8_0 k_b stays F32 when qk_nope is not a multiple of 32), head_count_kv 1,
            key_length kv_lora + rope, value_length kv_lora, and the model's under
            attention.key_length_mla / value_length_mla.
            --hf DIR: also the model as Hugging Face ships it (DeepseekV3 / V2 config.json, one
            tensor per expert, mlp.gate.e_score_correction_bias), the same matrices (F32, as the
            other archs' --hf; with either --ds-layout the same directory: kv_b_proj unsplit).
  gemma3    four norms per layer (attn_norm, post_attention_norm, ffn_norm, post_ffw_norm),
            QK-norm, gemma3.attention.sliding_window; no output.weight (tied); use --layers 6 or
            more for a global layer (llama.cpp: every 6th)
Weights: numpy default_rng(seed) normal, std 1/sqrt(cols) for matrices, 1 for the embedding (gemma3: 1/sqrt(dim)),
1 + 0.1 N for norms (gemma3's GGUF holds 1 + w, as convert_hf_to_gguf writes it), 0.1 N for biases; the router's
rows are scaled by 3 so that routing is decisive (a near tie between two experts would make the
choice depend on rounding). --dtype q8_0 stores every 2-D and 3-D .weight but the router as Q8_0
(ggml's block: f16 d = max|x| / 127, 32 int8 round(x / d)). Tokenizer keys are copied from --vocab.

  make_synthetic_arch.py --arch qwen3moe --vocab stories260K.gguf -o qwen3moe-f32.gguf
  make_synthetic_arch.py --arch gpt-oss --dtype mxfp4 --vocab stories260K.gguf -o gpt-oss-mxfp4.gguf
  make_synthetic_arch.py --arch deepseek2 --dtype q8_0 --vocab stories260K.gguf -o deepseek2-q8_0.gguf
"""
import argparse
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_synthetic_qwen import read_tokenizer_kv, s, U32, F32, STR  # noqa: E402

BOOL = 7


def q4_k(x):
    """Rows of x (last dim a multiple of 256) as ggml Q4_K bytes: per super-block of 256, f16 d and
    dmin, 8 sub-blocks of 32 with a 6-bit scale and min each (x ~ d * sc * q - dmin * m, q in
    0..15), packed as ggml's get_scale_min_k4 reads them, then 128 bytes of nibbles (byte l of each
    64-element span: element l low, l + 32 high). A plain min/max fit, not llama.cpp's search."""
    b = x.reshape(-1, 8, 32).astype(np.float64)
    lo = np.minimum(b.min(axis=2), 0.0)
    scale, mins = (b.max(axis=2) - lo) / 15.0, -lo
    d = scale.max(axis=1) / 63.0
    dmin = mins.max(axis=1) / 63.0
    d16, dm16 = d.astype('<f2'), dmin.astype('<f2')
    df, dmf = d16.astype(np.float64), dm16.astype(np.float64)
    sc = np.clip(np.round(scale / np.where(df > 0, df, 1)[:, None]), 0, 63).astype(np.int64)
    m = np.clip(np.round(mins / np.where(dmf > 0, dmf, 1)[:, None]), 0, 63).astype(np.int64)
    step = df[:, None] * sc
    q = np.clip(np.round((b + (dmf[:, None] * m)[:, :, None]) / np.where(step > 0, step, 1)[:, :, None]), 0, 15)
    q = q.astype(np.uint8)
    n = b.shape[0]
    out = np.zeros((n, 144), np.uint8)
    out[:, 0:2] = d16.view(np.uint8).reshape(-1, 2)
    out[:, 2:4] = dm16.view(np.uint8).reshape(-1, 2)
    packed = np.zeros((n, 12), np.int64)
    for j in range(4):
        packed[:, j] = sc[:, j] | ((sc[:, j + 4] >> 4) << 6)
        packed[:, j + 4] = m[:, j] | ((m[:, j + 4] >> 4) << 6)
        packed[:, j + 8] = (sc[:, j + 4] & 15) | ((m[:, j + 4] & 15) << 4)
    out[:, 4:16] = packed.astype(np.uint8)
    for c in range(4):
        out[:, 16 + 32 * c:48 + 32 * c] = q[:, 2 * c, :] | (q[:, 2 * c + 1, :] << 4)
    return out.tobytes()


def q8_0(x):
    """Rows of x (last dim a multiple of 32) as ggml Q8_0 bytes."""
    b = x.reshape(-1, 32).astype(np.float32)
    amax = np.abs(b).max(axis=1)
    d = amax / 127.0
    idv = np.where(d > 0, 1.0 / np.where(d > 0, d, 1), 0)
    q = np.round(b * idv[:, None]).astype(np.int8)
    out = np.empty((b.shape[0], 34), np.uint8)
    out[:, 0:2] = d.astype('<f2').view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q.view(np.uint8)
    return out.tobytes()


# MXFP4 (ggml type 39): per 32 weights, u8 e (E8M0) then 16 bytes of nibbles (element j low,
# j + 16 high); weight = KV_MXFP4[nibble] * 2^(e - 128) (ggml's E2M1 values doubled, d halved)
KV_MXFP4 = np.array([0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12], dtype=np.float64)


def mxfp4(x):
    """Rows of x (last dim a multiple of 32) as ggml MXFP4 bytes: e the smallest exponent with
    max|w| / d <= 12 (nothing clips), each weight the nearest of the 16 values (ties to the lower
    index)."""
    b = x.reshape(-1, 32).astype(np.float64)
    amax = np.abs(b).max(axis=1)
    e = np.where(amax > 0, np.ceil(np.log2(np.where(amax > 0, amax, 1) / 12.0)) + 128, 0)
    e = np.clip(e, 0, 255)
    d = np.exp2(e - 128)
    q = np.abs(b[:, :, None] / d[:, None, None] - KV_MXFP4[None, None, :]).argmin(axis=2).astype(np.uint8)
    out = np.empty((b.shape[0], 17), np.uint8)
    out[:, 0] = e.astype(np.uint8)
    out[:, 1:] = q[:, :16] | (q[:, 16:] << 4)
    return out.tobytes()


def mxfp4_dequant(raw):
    b = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 17)
    d = np.exp2(b[:, 0].astype(np.float64) - 128)[:, None]
    q = np.concatenate([b[:, 1:] & 15, b[:, 1:] >> 4], axis=1)
    return (KV_MXFP4[q] * d).reshape(-1)


def dequant_stored(raw, ty, x):
    """What the file holds, as float64 (for gpt_oss_note's statistics)."""
    if ty == 8:
        b = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 34)
        d = b[:, 0:2].copy().view('<f2').astype(np.float64)
        return (b[:, 2:].view(np.int8).astype(np.float64) * d).reshape(x.shape)
    if ty == 39:
        return mxfp4_dequant(raw).reshape(x.shape)
    return np.frombuffer(raw, dtype='<f4').astype(np.float64).reshape(x.shape)


# gpt-oss's scales, chosen so that on the synthetic model the features under test are all
# exercised: expert gate/up rows ('x') at 3.5 / sqrt(dim) put |g|, |u| past the clamp at 7 on a few
# per cent of the units; down rows ('X') at 0.3 / sqrt(ff) keep the MoE's output near the
# attention's; sinks ('k') N(1, 1), the size of the scores (q.k / sqrt(hd) with YaRN's mscale^2 =
# 1.81 on them); biases ('c') 0.5 N, large enough to move routing and scores
OSS_KINDS = {
    'x': lambda rng, shape: 3.5 * rng.standard_normal(shape) / np.sqrt(shape[-1]),
    'X': lambda rng, shape: 0.3 * rng.standard_normal(shape) / np.sqrt(shape[-1]),
    'k': lambda rng, shape: 1.0 + rng.standard_normal(shape),
    'c': lambda rng, shape: 0.5 * rng.standard_normal(shape),
}


def gpt_oss_layer(p, a, dim, q_dim, kv_dim):
    E, ff = a.experts, a.ffn
    return [(p + 'attn_norm.weight', (dim,), 'n'),
            (p + 'attn_q.weight', (q_dim, dim), 'm'), (p + 'attn_q.bias', (q_dim,), 'c'),
            (p + 'attn_k.weight', (kv_dim, dim), 'm'), (p + 'attn_k.bias', (kv_dim,), 'c'),
            (p + 'attn_v.weight', (kv_dim, dim), 'm'), (p + 'attn_v.bias', (kv_dim,), 'c'),
            (p + 'attn_output.weight', (dim, q_dim), 'm'), (p + 'attn_output.bias', (dim,), 'c'),
            (p + 'attn_sinks.weight', (a.heads,), 'k'), (p + 'post_attention_norm.weight', (dim,), 'n'),
            (p + 'ffn_gate_inp.weight', (E, dim), 'r'), (p + 'ffn_gate_inp.bias', (E,), 'c'),
            (p + 'ffn_gate_exps.weight', (E, ff, dim), 'x'), (p + 'ffn_gate_exps.bias', (E, ff), 'c'),
            (p + 'ffn_up_exps.weight', (E, ff, dim), 'x'), (p + 'ffn_up_exps.bias', (E, ff), 'c'),
            (p + 'ffn_down_exps.weight', (E, dim, ff), 'X'), (p + 'ffn_down_exps.bias', (E, dim), 'c')]


def gpt_oss_note(a, t):
    """Print (stderr) how often, on inputs of the size the model sees (unit-RMS rows), the clamp
    at 7 bites (on the stored, possibly quantized, weights), and layer 0's sinks, so that a change
    of scales that makes either feature idle does not go unnoticed."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((256, a.dim))
    g_hit = u_hit = n = 0
    for i in range(a.layers):
        p = 'blk.%d.' % i
        h = x * t[p + 'post_attention_norm.weight']
        g = np.einsum('efd,td->tef', t[p + 'ffn_gate_exps.weight'], h) + t[p + 'ffn_gate_exps.bias']
        u = np.einsum('efd,td->tef', t[p + 'ffn_up_exps.weight'], h) + t[p + 'ffn_up_exps.bias']
        g_hit += int((g > 7).sum())
        u_hit += int((np.abs(u) > 7).sum())
        n += g.size
    sys.stderr.write('gpt-oss: on random unit-RMS inputs the clamp bites on %.2f%% of gate and %.2f%% of up '
                     'units; sinks %s\n' % (100.0 * g_hit / n, 100.0 * u_hit / n,
                                           ' '.join('%.2f' % v for v in t['blk.0.attn_sinks.weight'])))


def deepseek2_hp(a):
    """deepseek2.* keys (without the prefix), as convert_hf_to_gguf writes DeepseekV2/V3."""
    main = a.ds_layout == 'mainline'   # the cache's geometry as the head, the model's under *_mla
    hp = [('context_length', U32, a.ctx), ('embedding_length', U32, a.dim), ('block_count', U32, a.layers),
          ('feed_forward_length', U32, a.dense_ffn), ('attention.head_count', U32, a.heads),
          ('attention.head_count_kv', U32, 1 if main else a.heads),
          ('attention.key_length', U32, a.kv_lora + a.qk_rope if main else a.qk_nope + a.qk_rope),
          ('attention.value_length', U32, a.kv_lora if main else a.v_head), ('rope.dimension_count', U32, a.qk_rope),
          ('rope.freq_base', F32, 10000.0), ('attention.layer_norm_rms_epsilon', F32, 1e-6)]
    if main:
        hp += [('attention.key_length_mla', U32, a.qk_nope + a.qk_rope), ('attention.value_length_mla', U32, a.v_head)]
    if a.q_lora:
        hp.append(('attention.q_lora_rank', U32, a.q_lora))
    hp += [('attention.kv_lora_rank', U32, a.kv_lora), ('leading_dense_block_count', U32, a.dense),
           ('expert_count', U32, a.experts), ('expert_used_count', U32, a.used),
           ('expert_feed_forward_length', U32, a.ffn), ('expert_shared_count', U32, a.shared),
           ('expert_weights_scale', F32, a.expert_scale), ('expert_weights_norm', BOOL, a.gating == 'sigmoid'),
           ('expert_gating_func', U32, 2 if a.gating == 'sigmoid' else 1),
           ('expert_group_count', U32, a.groups), ('expert_group_used_count', U32, a.groups_used),
           ('rope.scaling.type', STR, 'yarn'), ('rope.scaling.factor', F32, a.yarn_factor),
           ('rope.scaling.original_context_length', U32, a.yarn_orig),
           ('rope.scaling.yarn_log_multiplier', F32, 0.1)]
    return hp


def deepseek2_layer(p, i, a):
    dim, H, nope, rope, vh = a.dim, a.heads, a.qk_nope, a.qk_rope, a.v_head
    ts = [(p + 'attn_norm.weight', (dim,), 'n')]
    if a.q_lora:
        ts += [(p + 'attn_q_a.weight', (a.q_lora, dim), 'm'), (p + 'attn_q_a_norm.weight', (a.q_lora,), 'n'),
               (p + 'attn_q_b.weight', (H * (nope + rope), a.q_lora), 'm')]
    else:
        ts.append((p + 'attn_q.weight', (H * (nope + rope), dim), 'm'))
    ts += [(p + 'attn_kv_a_mqa.weight', (a.kv_lora + rope, dim), 'm'), (p + 'attn_kv_a_norm.weight', (a.kv_lora,), 'n'),
           (p + 'attn_kv_b.weight', (H * (nope + vh), a.kv_lora), 'm'), (p + 'attn_output.weight', (dim, H * vh), 'm'),
           (p + 'ffn_norm.weight', (dim,), 'n')]
    if i < a.dense:
        return ts + [(p + 'ffn_gate.weight', (a.dense_ffn, dim), 'm'), (p + 'ffn_down.weight', (dim, a.dense_ffn), 'm'),
                     (p + 'ffn_up.weight', (a.dense_ffn, dim), 'm')]
    E, ff, sh = a.experts, a.ffn, a.ffn * a.shared
    ts.append((p + 'ffn_gate_inp.weight', (E, dim), 'r'))
    if a.gating == 'sigmoid':
        ts.append((p + 'exp_probs_b.bias', (E,), 'B'))
    return ts + [(p + 'ffn_gate_exps.weight', (E, ff, dim), 'm'), (p + 'ffn_down_exps.weight', (E, dim, ff), 'm'),
                 (p + 'ffn_up_exps.weight', (E, ff, dim), 'm'), (p + 'ffn_gate_shexp.weight', (sh, dim), 'm'),
                 (p + 'ffn_down_shexp.weight', (dim, sh), 'm'), (p + 'ffn_up_shexp.weight', (sh, dim), 'm')]


def deepseek2_route(a, p, b):
    """The experts chosen for router probabilities p [tokens][n_exp] and bias b (or None), with
    and without the group limit, as sets (see ref_forward.py's Model.ds_moe)."""
    s = p + b if b is not None else p
    G, K, E = a.groups, a.groups_used, a.experts
    plain = [frozenset(np.argsort(-r, kind='stable')[:a.used]) for r in s]
    if G <= 1 or K <= 0:
        return plain, plain
    grouped = []
    for r in s:
        g = r.reshape(G, E // G)
        gs = g.max(axis=1) if a.gating == 'softmax' else np.sort(g, axis=1)[:, -2:].sum(axis=1)
        keep = np.argsort(-gs, kind='stable')[:K]
        m = np.full(E, -np.inf)
        for k in keep:
            m[k * (E // G):(k + 1) * (E // G)] = r[k * (E // G):(k + 1) * (E // G)]
        grouped.append(frozenset(np.argsort(-m, kind='stable')[:a.used]))
    return grouped, plain


def deepseek2_note(a, t):
    """Print (stderr) the YaRN corr dims and, on random unit-RMS inputs to each MoE layer's router,
    how often the group limit (and exp_probs_b) change the chosen experts."""
    def corr_dim(beta):
        return a.qk_rope * np.log(a.yarn_orig / (beta * 2 * np.pi)) / (2 * np.log(10000.0))
    lo, hi = corr_dim(32.0), corr_dim(1.0)
    sys.stderr.write('deepseek2: yarn corr dims %.3f .. %.3f -> %d .. %d (n_rot / 2 - 1 = %d)\n'
                     % (lo, hi, max(0, np.floor(lo)), min(a.qk_rope - 1, np.ceil(hi)), a.qk_rope // 2 - 1))
    rng = np.random.default_rng(1)
    x = rng.standard_normal((256, a.dim))
    n = n_grp = n_bias = 0
    for i in range(a.dense, a.layers):
        p = 'blk.%d.' % i
        r = (x * t[p + 'ffn_norm.weight']) @ t[p + 'ffn_gate_inp.weight'].T
        if a.gating == 'sigmoid':
            pr = 1 / (1 + np.exp(-r))
        else:
            pr = np.exp(r - r.max(axis=1, keepdims=True))
            pr /= pr.sum(axis=1, keepdims=True)
        b = t.get(p + 'exp_probs_b.bias')
        grouped, plain = deepseek2_route(a, pr, b)
        n += len(plain)
        n_grp += sum(g != q for g, q in zip(grouped, plain))
        if b is not None:
            n_bias += sum(g != q for g, q in zip(deepseek2_route(a, pr, None)[0], grouped))
    sys.stderr.write('deepseek2: on %d random router inputs the group limit (%d of %d groups) changes the chosen '
                     'experts on %.1f%%, exp_probs_b on %.1f%%\n'
                     % (n, a.groups_used, a.groups, 100.0 * n_grp / n, 100.0 * n_bias / n))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--arch', choices=('mixtral', 'qwen3moe', 'qwen2moe', 'gemma3', 'mistral', 'phi3', 'gpt-oss',
                                       'deepseek2'),
                    required=True)
    ap.add_argument('--dim', type=int, default=None, help='128 (gpt-oss: 96, deepseek2: 64)')
    ap.add_argument('--layers', type=int, default=None, help='2 (gpt-oss: 4, deepseek2: 3)')
    ap.add_argument('--heads', type=int, default=4)
    ap.add_argument('--kv-heads', type=int, default=2)
    ap.add_argument('--head-dim', type=int, default=32)
    ap.add_argument('--ffn', type=int, default=None,
                    help='expert ffn (MoE) or ffn (gemma3): 128 (gpt-oss: 64, deepseek2: 32)')
    ap.add_argument('--shared-ffn', type=int, default=192)
    ap.add_argument('--experts', type=int, default=8)
    ap.add_argument('--used', type=int, default=None, help='2 (gpt-oss: 4)')
    ap.add_argument('--window', type=int, default=None, help='sliding window: 8 (gpt-oss: 4)')
    ap.add_argument('--yarn-orig', type=int, default=None,
                    help='gpt-oss, deepseek2: rope.scaling.original_context_length (768; deepseek2: 4096)')
    ap.add_argument('--ctx', type=int, default=None, help='context_length: 256 (deepseek2: 4096)')
    ds = ap.add_argument_group('deepseek2')
    ds.add_argument('--q-lora', type=int, default=32, help='q_lora_rank; 0: V2-Lite\'s attn_q')
    ds.add_argument('--kv-lora', type=int, default=32)
    ds.add_argument('--qk-nope', type=int, default=16)
    ds.add_argument('--qk-rope', type=int, default=16)
    ds.add_argument('--v-head', type=int, default=24)
    ds.add_argument('--dense', type=int, default=1, help='leading_dense_block_count')
    ds.add_argument('--dense-ffn', type=int, default=96, help='feed_forward_length of the dense layers')
    ds.add_argument('--shared', type=int, default=1, help='expert_shared_count')
    ds.add_argument('--gating', choices=('softmax', 'sigmoid'), default='sigmoid')
    ds.add_argument('--expert-scale', type=float, default=None, help='expert_weights_scale (sigmoid 2.5, softmax 1)')
    ds.add_argument('--groups', type=int, default=4, help='expert_group_count')
    ds.add_argument('--groups-used', type=int, default=2, help='expert_group_used_count')
    ds.add_argument('--ds-layout', choices=('kvb', 'mainline'), default='kvb',
                    help="kvb: attn_kv_b as llama.cpp b4748 writes it; mainline: attn_k_b [heads][kv_lora][qk_nope] "
                         "and attn_v_b [heads][v_head][kv_lora] with the *_mla keys, as llama.cpp writes it since "
                         "its MLA change (the same weights: k_b, v_b are kv_b's rows of each head)")
    ds.add_argument('--yarn-factor', type=float, default=40.0)
    ap.add_argument('--softcap', type=float, default=0, help='gemma3 final_logit_softcapping (0: none)')
    ap.add_argument('--dtype', choices=('f32', 'q8_0', 'q4_k', 'mxfp4'), default='f32',
                    help='q4_k: every row length must be a multiple of 256 (--dim 256 --ffn 256 --head-dim 64); '
                    'mxfp4 (gpt-oss): the expert packs MXFP4, the other matrices Q8_0')
    ap.add_argument('--longrope', type=int, default=0, help='phi3: original context of the longrope factors')
    ap.add_argument('--rope-freqs', action='store_true', help='llama: a rope_freqs.weight tensor')
    ap.add_argument('--seed', type=int, default=11)
    ap.add_argument('--vocab', required=True)
    ap.add_argument('-o', '--out', required=True)
    ap.add_argument('--hf', help='gemma3, mixtral, qwen3moe, qwen2moe: also write the same model as a Hugging Face directory (config.json, '
                    'model.safetensors with HF names; norms hold w, not 1 + w)')
    ap.add_argument('--multimodal', action='store_true',
                    help='with --hf (gemma3): the directory as a Gemma3ForConditionalGeneration checkpoint ships: '
                    'the text model under language_model.model.*, config.json with a text_config that states only '
                    'what differs from Gemma3TextConfig\'s defaults, a vision_config, and vision tower and projector '
                    'tensors the text model does not use')
    ap.add_argument('--mlx', type=int, default=0, metavar='GROUP',
                    help='with --hf (MoE): the directory as mlx-lm writes a 4-bit model: every matrix (experts stacked '
                    'into switch_mlp, the routers, embeddings, lm_head, the shared expert and its gate) as U32 codes '
                    'with F16 .scales and .biases in groups of GROUP, config.json "quantization"; the GGUF (and so '
                    'the float64 reference) holds the values those dequantize to, in F32')
    a = ap.parse_args()
    oss, dsk = a.arch == 'gpt-oss', a.arch == 'deepseek2'
    for k, dflt, dflt_oss, dflt_ds in (('dim', 128, 96, 64), ('layers', 2, 4, 3), ('ffn', 128, 64, 32), ('used', 2, 4, 2),
                                       ('window', 8, 4, 8), ('yarn_orig', 768, 768, 4096), ('ctx', 256, 256, 4096)):
        if getattr(a, k) is None:
            setattr(a, k, dflt_ds if dsk else dflt_oss if oss else dflt)
    if dsk:
        if a.expert_scale is None:
            a.expert_scale = 2.5 if a.gating == 'sigmoid' else 1.0
        if a.experts % max(a.groups, 1) or a.groups_used > a.groups or a.used > a.experts:
            sys.exit('deepseek2: --groups must divide --experts, --groups-used <= --groups')
        if a.dtype not in ('f32', 'q8_0'):
            sys.exit('deepseek2: --dtype f32 or q8_0')
    if a.dtype == 'mxfp4' and not oss:
        sys.exit('--dtype mxfp4: gpt-oss only')
    if oss and a.dtype == 'q4_k':
        sys.exit('gpt-oss: --dtype f32, q8_0 (every matrix but the router) or mxfp4')
    arch = 'llama' if a.arch in ('mixtral', 'mistral') else a.arch
    dim, hd, moe = a.dim, a.head_dim, a.arch not in ('gemma3', 'mistral', 'phi3')
    if arch == 'llama' and hd * a.heads != dim:
        sys.exit('mixtral: --head-dim must be dim / heads')
    tok = read_tokenizer_kv(a.vocab)
    n_vocab = [struct.unpack_from('<Q', v, 4)[0] for (k, t, v) in tok if k == 'tokenizer.ggml.tokens'][0]
    q_dim, kv_dim = a.heads * hd, a.kv_heads * hd
    kv = [('general.architecture', STR, s(arch)), ('general.name', STR, s('synthetic-' + a.arch)),
          ('general.alignment', U32, struct.pack('<I', 32)),
          ('general.file_type', U32, struct.pack('<I', {'f32': 0, 'q8_0': 7, 'q4_k': 15, 'mxfp4': 38}[a.dtype]))]
    hp = [('context_length', U32, a.ctx), ('embedding_length', U32, dim), ('block_count', U32, a.layers),
          ('feed_forward_length', U32, a.ffn), ('attention.head_count', U32, a.heads),
          ('attention.head_count_kv', U32, a.kv_heads), ('attention.key_length', U32, hd),
          ('attention.value_length', U32, hd), ('rope.dimension_count', U32, hd),
          ('rope.freq_base', F32, 10000.0 if arch == 'llama' else 1000000.0),
          ('attention.layer_norm_rms_epsilon', F32, 1e-6)]
    if dsk:
        hp = deepseek2_hp(a)
    if oss:   # convert_hf_to_gguf writes no rope.dimension_count for gpt-oss; YaRN as the real model
        hp = [x for x in hp
              if x[0] not in ('rope.dimension_count', 'rope.freq_base', 'attention.layer_norm_rms_epsilon')]
        hp += [('rope.freq_base', F32, 150000.0), ('attention.layer_norm_rms_epsilon', F32, 1e-5),
               ('rope.scaling.type', STR, 'yarn'), ('rope.scaling.factor', F32, 32.0),
               ('rope.scaling.original_context_length', U32, a.yarn_orig)]
    if moe and not dsk:
        hp += [('expert_count', U32, a.experts), ('expert_used_count', U32, a.used)]
        if arch != 'llama':
            hp.append(('expert_feed_forward_length', U32, a.ffn))
        if arch == 'qwen2moe':
            hp.append(('expert_shared_feed_forward_length', U32, a.shared_ffn))
    if a.arch in ('gemma3', 'mistral', 'phi3', 'gpt-oss'):
        hp.append(('attention.sliding_window', U32, a.window))
        if a.softcap:
            hp.append(('final_logit_softcapping', F32, a.softcap))
    if a.longrope:
        if a.arch != 'phi3':
            sys.exit('--longrope: phi3 only')
        hp += [('rope.scaling.original_context_length', U32, a.longrope),
               ('rope.scaling.attn_factor', F32, float(np.sqrt(1 + np.log(a.ctx / a.longrope) / np.log(a.longrope))))]
    for k, t, v in hp:
        kv.append(('%s.%s' % (arch, k), t, s(v) if t == STR else struct.pack({U32: '<I', F32: '<f', BOOL: '<?'}[t], v)))
    kv += tok
    # (name, numpy shape, kind): m matrix, r router, e embedding, n norm, b bias
    nk = 'n'   # gemma3 too: llama.cpp's converter stores its (1 + w) norms as 1 + w
    ts = [('token_embd.weight', (n_vocab, dim), 'e')]
    if a.longrope:   # divisors >= 1, as the published factors are
        ts += [('rope_factors_long.weight', (hd // 2,), 'f'), ('rope_factors_short.weight', (hd // 2,), 'f')]
    if a.rope_freqs:
        if arch != 'llama':
            sys.exit('--rope-freqs: llama (mistral, mixtral) only')
        ts.append(('rope_freqs.weight', (hd // 2,), 'f'))
    for i in range(a.layers):
        p = 'blk.%d.' % i
        if oss:
            ts += gpt_oss_layer(p, a, dim, q_dim, kv_dim)
            continue
        if dsk:
            ts += deepseek2_layer(p, i, a)
            continue
        if arch == 'phi3':   # fused: qkv rows q | k | v; ffn_up rows gate | up
            ts += [(p + 'attn_norm.weight', (dim,), 'n'), (p + 'attn_qkv.weight', (q_dim + 2 * kv_dim, dim), 'm'),
                   (p + 'attn_output.weight', (dim, q_dim), 'm'), (p + 'ffn_norm.weight', (dim,), 'n'),
                   (p + 'ffn_up.weight', (2 * a.ffn, dim), 'm'), (p + 'ffn_down.weight', (dim, a.ffn), 'm')]
            continue
        ts += [(p + 'attn_norm.weight', (dim,), nk), (p + 'attn_q.weight', (q_dim, dim), 'm'),
               (p + 'attn_k.weight', (kv_dim, dim), 'm'), (p + 'attn_v.weight', (kv_dim, dim), 'm')]
        if arch == 'qwen2moe':
            ts += [(p + 'attn_q.bias', (q_dim,), 'b'), (p + 'attn_k.bias', (kv_dim,), 'b'),
                   (p + 'attn_v.bias', (kv_dim,), 'b')]
        if arch in ('qwen3moe', 'gemma3'):
            ts += [(p + 'attn_q_norm.weight', (hd,), nk), (p + 'attn_k_norm.weight', (hd,), nk)]
        ts += [(p + 'attn_output.weight', (dim, q_dim), 'm'), (p + 'ffn_norm.weight', (dim,), nk)]
        if arch == 'gemma3':
            ts += [(p + 'post_attention_norm.weight', (dim,), nk), (p + 'post_ffw_norm.weight', (dim,), nk),
                   (p + 'ffn_gate.weight', (a.ffn, dim), 'm'), (p + 'ffn_down.weight', (dim, a.ffn), 'm'),
                   (p + 'ffn_up.weight', (a.ffn, dim), 'm')]
            continue
        if not moe:
            ts += [(p + 'ffn_gate.weight', (a.ffn, dim), 'm'), (p + 'ffn_down.weight', (dim, a.ffn), 'm'),
                   (p + 'ffn_up.weight', (a.ffn, dim), 'm')]
            continue
        E = a.experts
        ts += [(p + 'ffn_gate_inp.weight', (E, dim), 'r'), (p + 'ffn_gate_exps.weight', (E, a.ffn, dim), 'm'),
               (p + 'ffn_down_exps.weight', (E, dim, a.ffn), 'm'), (p + 'ffn_up_exps.weight', (E, a.ffn, dim), 'm')]
        if arch == 'qwen2moe':
            ts += [(p + 'ffn_gate_inp_shexp.weight', (dim,), 'r'),
                   (p + 'ffn_gate_shexp.weight', (a.shared_ffn, dim), 'm'),
                   (p + 'ffn_down_shexp.weight', (dim, a.shared_ffn), 'm'),
                   (p + 'ffn_up_shexp.weight', (a.shared_ffn, dim), 'm')]
    ts.append(('output_norm.weight', (dim,), nk))
    if arch != 'gemma3':
        ts.append(('output.weight', (n_vocab, dim), 'm'))
    rng = np.random.default_rng(a.seed)
    if a.mlx and (not a.hf or not moe or a.dtype != 'f32'):
        sys.exit('--mlx: with --hf, an MoE arch and --dtype f32')
    data, infos, off, hf, stored = [], [], 0, {}, {}
    mlxq = {}   # name -> (codes, scales, biases) of a matrix quantized for --mlx
    for name, shape, kind in ts:
        if kind == 'm':
            x = rng.standard_normal(shape) / np.sqrt(shape[-1])
        elif kind == 'r':
            x = 3 * rng.standard_normal(shape) / np.sqrt(shape[-1])
        elif kind == 'e':   # gemma3 scales it by sqrt(dim): small, so the last token does not drown the rest
            x = rng.standard_normal(shape) / (np.sqrt(dim) if arch == 'gemma3' else 1)
        elif kind == 'n':
            x = 1.0 + 0.1 * rng.standard_normal(shape)
        elif kind == 'f':
            x = 1.0 + 7.0 * rng.random(shape)
        elif kind == 'B':   # deepseek2's exp_probs_b: the size of the sigmoid scores' spread
            x = 0.3 * rng.standard_normal(shape)
        elif kind in OSS_KINDS:
            x = OSS_KINDS[kind](rng, shape)
        else:
            x = 0.1 * rng.standard_normal(shape)
        if a.mlx and kind in ('m', 'r', 'e'):   # rows quantized as they are: Q/K permutations commute
            mlxq[name] = mlx_quant(x.reshape(-1, shape[-1]), a.mlx)
            x = mlx_dequant(*mlxq[name], a.mlx).reshape(shape)
        hf[name] = x
        if a.dtype == 'mxfp4' and kind in ('x', 'X'):
            raw, ty = mxfp4(x), 39
        elif a.dtype == 'mxfp4' and kind in ('m', 'e', 'r'):
            raw, ty = q8_0(x), 8
        elif a.dtype == 'q8_0' and kind in ('m', 'e', 'x', 'X'):
            raw, ty = q8_0(x), 8
        elif a.dtype == 'q4_k' and kind in ('m', 'e'):
            if shape[-1] % 256:
                sys.exit('%s: q4_k needs rows of a multiple of 256, not %d' % (name, shape[-1]))
            raw, ty = q4_k(x), 12
        else:
            raw, ty = x.astype('<f4').tobytes(), 0
        parts = [(name, shape, raw, ty)]
        if dsk and a.ds_layout == 'mainline' and name.endswith('attn_kv_b.weight'):
            W = x.reshape(a.heads, a.qk_nope + a.v_head, a.kv_lora)
            kb, vb = np.ascontiguousarray(W[:, :a.qk_nope].transpose(0, 2, 1)), np.ascontiguousarray(W[:, a.qk_nope:])
            parts = []
            for nm, y in ((name.replace('attn_kv_b', 'attn_k_b'), kb), (name.replace('attn_kv_b', 'attn_v_b'), vb)):
                q8 = a.dtype == 'q8_0' and y.shape[-1] % 32 == 0   # k_b's rows of qk_nope may be too short
                parts.append((nm, y.shape, q8_0(y) if q8 else y.astype('<f4').tobytes(), 8 if q8 else 0))
                stored[nm] = dequant_stored(parts[-1][2], parts[-1][3], y)
        for nm, shp, rw, tp in parts:
            infos.append(s(nm) + struct.pack('<I', len(shp)) + struct.pack('<%dQ' % len(shp), *reversed(shp)) +
                         struct.pack('<IQ', tp, off))
            pad = (32 - len(rw) % 32) % 32
            data.append(rw + b'\0' * pad)
            off += len(rw) + pad
        if oss or dsk:
            stored[name] = dequant_stored(raw, ty, x)
    head = b'GGUF' + struct.pack('<IQQ', 3, len(infos), len(kv))
    head += b''.join(s(k) + struct.pack('<I', t) + v for (k, t, v) in kv) + b''.join(infos)
    head += b'\0' * ((32 - len(head) % 32) % 32)
    with open(a.out, 'wb') as f:
        f.write(head + b''.join(data))
    if oss:
        gpt_oss_note(a, stored)
    if dsk:
        deepseek2_note(a, stored)
    if a.hf:
        write_hf(a, hf, n_vocab, mlxq)


def mlx_quant(x, group):
    """4-bit affine, per row in groups: q = round((x - bias) / scale) in 0..15, with scale and bias
    rounded to F16 first, so that scale * q + bias in exact arithmetic is what the store holds."""
    g = x.reshape(x.shape[0], -1, group)
    lo, hi = g.min(axis=2, keepdims=True), g.max(axis=2, keepdims=True)
    scale = np.maximum((hi - lo) / 15, 1e-4).astype(np.float16)
    bias = lo.astype(np.float16)
    q = np.clip(np.rint((g - bias.astype(np.float64)) / scale.astype(np.float64)), 0, 15).astype(np.uint32)
    return q.reshape(x.shape), scale[..., 0], bias[..., 0]


def mlx_dequant(q, scale, bias, group):
    g = q.reshape(q.shape[0], -1, group).astype(np.float64)
    return (g * scale[..., None].astype(np.float64) + bias[..., None].astype(np.float64)).reshape(q.shape)


def mlx_pack(q):
    """Eight 4-bit codes per U32, the first in the low bits, as MLX packs them."""
    q = q.reshape(q.shape[0], -1, 8).astype(np.uint32)
    return (q << (4 * np.arange(8, dtype=np.uint32))).sum(axis=2, dtype=np.uint32)


HF_NAMES = {'attn_norm': 'input_layernorm', 'post_attention_norm': 'post_attention_layernorm',
            'ffn_norm': 'pre_feedforward_layernorm', 'post_ffw_norm': 'post_feedforward_layernorm',
            'attn_q': 'self_attn.q_proj', 'attn_k': 'self_attn.k_proj', 'attn_v': 'self_attn.v_proj',
            'attn_output': 'self_attn.o_proj', 'attn_q_norm': 'self_attn.q_norm', 'attn_k_norm': 'self_attn.k_norm',
            'ffn_gate': 'mlp.gate_proj', 'ffn_up': 'mlp.up_proj', 'ffn_down': 'mlp.down_proj'}


def write_hf(a, tensors, n_vocab, mlxq):
    """Gemma 3 as Hugging Face ships it: norm weights w with the model computing (1 + w), so each
    is the GGUF's value minus 1; Q/K rows as they are (gemma rotates halves in both). The MoE
    models: write_hf_moe."""
    import json
    if a.arch in ('mixtral', 'qwen3moe', 'qwen2moe'):
        return write_hf_moe(a, tensors, n_vocab, mlxq)
    if a.arch == 'deepseek2':
        return write_hf_deepseek(a, tensors, n_vocab)
    if a.arch != 'gemma3':
        sys.exit('--hf: gemma3, mixtral, qwen3moe, qwen2moe, deepseek2 only')
    os.makedirs(a.hf, exist_ok=True)
    out = {}
    for name, x in tensors.items():
        if name == 'token_embd.weight':
            out['model.embed_tokens.weight'] = x
        elif name == 'output_norm.weight':
            out['model.norm.weight'] = x - 1
        else:
            _, i, kind, _ = name.split('.')
            out['model.layers.%s.%s.weight' % (i, HF_NAMES[kind])] = x - 1 if kind.endswith('norm') else x
    cfg = {'architectures': ['Gemma3ForCausalLM'], 'model_type': 'gemma3_text', 'hidden_size': a.dim,
           'num_hidden_layers': a.layers, 'num_attention_heads': a.heads, 'num_key_value_heads': a.kv_heads,
           'head_dim': a.head_dim, 'intermediate_size': a.ffn, 'vocab_size': n_vocab,
           'max_position_embeddings': a.ctx, 'rms_norm_eps': 1e-6, 'rope_theta': 1000000.0,
           'rope_local_base_freq': 10000.0, 'sliding_window': a.window, 'sliding_window_pattern': 6,
           'query_pre_attn_scalar': a.head_dim, 'hidden_activation': 'gelu_pytorch_tanh',
           'final_logit_softcapping': a.softcap or None, 'tie_word_embeddings': True, 'rope_scaling': None,
           'bos_token_id': 1, 'eos_token_id': 2}
    if a.multimodal:
        defaults = {'vocab_size': 262208, 'hidden_size': 2304, 'intermediate_size': 9216, 'num_hidden_layers': 26,
                    'num_attention_heads': 8, 'num_key_value_heads': 4, 'head_dim': 256, 'max_position_embeddings': 131072,
                    'rms_norm_eps': 1e-6, 'tie_word_embeddings': True, 'rope_theta': 1000000.0,
                    'query_pre_attn_scalar': 256, 'sliding_window': 4096, 'final_logit_softcapping': None,
                    'rope_scaling': None, 'rope_local_base_freq': 10000.0, 'sliding_window_pattern': 6,
                    'hidden_activation': 'gelu_pytorch_tanh'}
        text = {k: v for k, v in cfg.items()
                if k not in ('architectures', 'bos_token_id', 'eos_token_id') and defaults.get(k, object()) != v}
        text['model_type'] = 'gemma3_text'
        cfg = {'architectures': ['Gemma3ForConditionalGeneration'], 'model_type': 'gemma3',
               'bos_token_id': 1, 'eos_token_id': [2, 106], 'image_token_index': 262144, 'mm_tokens_per_image': 4,
               'text_config': text,
               'vision_config': {'model_type': 'siglip_vision_model', 'hidden_size': 16, 'image_size': 32,
                                 'patch_size': 16, 'num_hidden_layers': 1, 'num_attention_heads': 2,
                                 'intermediate_size': 32}}
        out = {('language_model.' + k): v for k, v in out.items()}
        rng = np.random.default_rng(5)
        out['vision_tower.vision_model.embeddings.patch_embedding.weight'] = rng.standard_normal((16, 3, 16, 16)).astype(np.float32)
        out['multi_modal_projector.mm_input_projection_weight'] = rng.standard_normal((16, a.dim)).astype(np.float32)
    write_safetensors(os.path.join(a.hf, 'model.safetensors'), out)
    with open(os.path.join(a.hf, 'config.json'), 'w') as f:
        json.dump(cfg, f, indent=1)


def write_hf_deepseek(a, tensors, n_vocab):
    """DeepSeek V3 (--gating sigmoid) or V2 (softmax) as Hugging Face ships it: DeepseekV3Config's
    keys, one tensor per expert (mlp.experts.E.*), mlp.shared_experts.*, V3's
    mlp.gate.e_score_correction_bias; the same matrices as the GGUF (llama.cpp's converter does not
    permute deepseek2's rope rows: HF's rope de-interleaves them itself)."""
    import json
    os.makedirs(a.hf, exist_ok=True)   # either --ds-layout: Hugging Face has kv_b_proj, the matrix k_b / v_b split
    names = {'attn_norm': 'input_layernorm', 'ffn_norm': 'post_attention_layernorm', 'attn_q': 'self_attn.q_proj',
             'attn_q_a': 'self_attn.q_a_proj', 'attn_q_a_norm': 'self_attn.q_a_layernorm',
             'attn_q_b': 'self_attn.q_b_proj', 'attn_kv_a_mqa': 'self_attn.kv_a_proj_with_mqa',
             'attn_kv_a_norm': 'self_attn.kv_a_layernorm', 'attn_kv_b': 'self_attn.kv_b_proj',
             'attn_output': 'self_attn.o_proj', 'ffn_gate': 'mlp.gate_proj', 'ffn_up': 'mlp.up_proj',
             'ffn_down': 'mlp.down_proj', 'ffn_gate_inp': 'mlp.gate', 'ffn_gate_shexp': 'mlp.shared_experts.gate_proj',
             'ffn_up_shexp': 'mlp.shared_experts.up_proj', 'ffn_down_shexp': 'mlp.shared_experts.down_proj'}
    experts = {'ffn_gate_exps': 'gate_proj', 'ffn_up_exps': 'up_proj', 'ffn_down_exps': 'down_proj'}
    glob = {'token_embd.weight': 'model.embed_tokens.weight', 'output_norm.weight': 'model.norm.weight',
            'output.weight': 'lm_head.weight'}
    out = {}
    for name, x in tensors.items():
        if name in glob:
            out[glob[name]] = x
            continue
        _, i, kind, _ = name.split('.')
        p = 'model.layers.%s.' % i
        if kind == 'exp_probs_b':
            out[p + 'mlp.gate.e_score_correction_bias'] = x
        elif kind in experts:
            for e in range(x.shape[0]):
                out[p + 'mlp.experts.%d.%s.weight' % (e, experts[kind])] = x[e]
        else:
            out[p + names[kind] + '.weight'] = x
    v3 = a.gating == 'sigmoid'
    cfg = {'architectures': ['DeepseekV3ForCausalLM' if v3 else 'DeepseekV2ForCausalLM'],
           'model_type': 'deepseek_v3' if v3 else 'deepseek_v2', 'hidden_size': a.dim,
           'intermediate_size': a.dense_ffn, 'moe_intermediate_size': a.ffn, 'num_hidden_layers': a.layers,
           'num_attention_heads': a.heads, 'num_key_value_heads': a.heads, 'n_shared_experts': a.shared,
           'n_routed_experts': a.experts, 'num_experts_per_tok': a.used, 'routed_scaling_factor': a.expert_scale,
           'n_group': a.groups, 'topk_group': a.groups_used, 'topk_method': 'noaux_tc' if v3 else 'group_limited_greedy',
           'scoring_func': 'sigmoid' if v3 else 'softmax', 'norm_topk_prob': v3, 'first_k_dense_replace': a.dense,
           'q_lora_rank': a.q_lora or None, 'kv_lora_rank': a.kv_lora, 'qk_nope_head_dim': a.qk_nope,
           'qk_rope_head_dim': a.qk_rope, 'v_head_dim': a.v_head, 'rope_theta': 10000.0,
           'rope_scaling': {'type': 'yarn', 'factor': a.yarn_factor, 'original_max_position_embeddings': a.yarn_orig,
                            'beta_fast': 32, 'beta_slow': 1, 'mscale': 1.0, 'mscale_all_dim': 1.0},
           'rms_norm_eps': 1e-6, 'max_position_embeddings': a.ctx, 'vocab_size': n_vocab, 'bos_token_id': 1,
           'eos_token_id': 2, 'tie_word_embeddings': False}
    write_safetensors(os.path.join(a.hf, 'model.safetensors'), out)
    with open(os.path.join(a.hf, 'config.json'), 'w') as f:
        json.dump(cfg, f, indent=1)


def write_safetensors(path, out):
    import json
    hdr, blobs, off = {}, [], 0
    dtypes = {np.dtype(np.uint32): ('U32', '<u4'), np.dtype(np.float16): ('F16', '<f2')}
    for name in sorted(out):
        st, le = dtypes.get(out[name].dtype, ('F32', '<f4'))
        raw = out[name].astype(le).tobytes()
        hdr[name] = {'dtype': st, 'shape': list(out[name].shape), 'data_offsets': [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(hdr).encode()
    h += b' ' * ((8 - len(h) % 8) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(h)) + h + b''.join(blobs))


def write_hf_moe(a, tensors, n_vocab, mlxq):
    """The MoE models as Hugging Face ships them, one tensor per expert: Mixtral's
    block_sparse_moe.{gate, experts.E.w1 (gate) / w3 (up) / w2 (down)}, Qwen-MoE's mlp.{gate,
    experts.E.{gate,up,down}_proj}, Qwen2-MoE's mlp.shared_expert.* and shared_expert_gate [1][dim].
    Mixtral's Q and K rows are un-permuted: convert_hf_to_gguf permutes them for llama.cpp's
    adjacent-pair rope, Hugging Face rotates halves. With --mlx, as mlx-lm writes the model: the
    experts stacked as {block_sparse_moe,mlp}.switch_mlp.{gate,up,down}_proj, every matrix in
    codes / scales / biases."""
    import json
    os.makedirs(a.hf, exist_ok=True)
    mix = a.arch == 'mixtral'
    blk = 'block_sparse_moe' if mix else 'mlp'
    names = {'attn_norm': 'input_layernorm', 'ffn_norm': 'post_attention_layernorm',
             'attn_q': 'self_attn.q_proj', 'attn_k': 'self_attn.k_proj', 'attn_v': 'self_attn.v_proj',
             'attn_output': 'self_attn.o_proj', 'attn_q_norm': 'self_attn.q_norm',
             'attn_k_norm': 'self_attn.k_norm', 'ffn_gate_inp': blk + '.gate',
             'ffn_gate_shexp': 'mlp.shared_expert.gate_proj', 'ffn_up_shexp': 'mlp.shared_expert.up_proj',
             'ffn_down_shexp': 'mlp.shared_expert.down_proj', 'ffn_gate_inp_shexp': 'mlp.shared_expert_gate'}
    experts = {'ffn_gate_exps': 'w1' if mix else 'gate_proj', 'ffn_up_exps': 'w3' if mix else 'up_proj',
               'ffn_down_exps': 'w2' if mix else 'down_proj'}

    def unpermute(w, n_head):   # inverse of convert_hf_to_gguf's LlamaModel.permute
        return w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)
    out = {}

    def put(hf_name, name, x, perm=None):   # x as HF has it; with --mlx, the codes of name
        if name not in mlxq:
            out[hf_name] = x
            return
        q, sc, bi = mlxq[name]
        lead = x.shape[:-1]
        q = q.reshape(x.shape)
        sc, bi = sc.reshape(*lead, -1), bi.reshape(*lead, -1)
        if perm:
            q, sc, bi = perm(q), perm(sc), perm(bi)
        base = hf_name[:-len('.weight')]
        out[hf_name] = mlx_pack(q.reshape(-1, x.shape[-1])).reshape(*lead, -1)
        out[base + '.scales'], out[base + '.biases'] = sc, bi
    for name, x in tensors.items():
        if name == 'token_embd.weight':
            put('model.embed_tokens.weight', name, x)
        elif name == 'output_norm.weight':
            out['model.norm.weight'] = x
        elif name == 'output.weight':
            put('lm_head.weight', name, x)
        else:
            _, i, kind, suffix = name.split('.')
            pre = 'model.layers.%s.' % i
            if kind in experts and a.mlx:
                put(pre + '%s.switch_mlp.%s.weight' % (blk, {'w1': 'gate_proj', 'w3': 'up_proj', 'w2': 'down_proj'}
                                                        .get(experts[kind], experts[kind])), name, x)
                continue
            if kind in experts:
                for e in range(x.shape[0]):
                    out[pre + '%s.experts.%d.%s.weight' % (blk, e, experts[kind])] = x[e]
                continue
            perm = None
            if mix and kind in ('attn_q', 'attn_k'):
                perm = lambda w, n=a.heads if kind == 'attn_q' else a.kv_heads: unpermute(w, n)
                x = perm(x)
            if kind == 'ffn_gate_inp_shexp':
                x = x.reshape(1, -1)
            if suffix == 'weight':
                put(pre + names[kind] + '.' + suffix, name, x, perm)
            else:
                out[pre + names[kind] + '.' + suffix] = x
    write_safetensors(os.path.join(a.hf, 'model.safetensors'), out)
    cfg = {'hidden_size': a.dim, 'num_hidden_layers': a.layers, 'num_attention_heads': a.heads,
           'num_key_value_heads': a.kv_heads, 'head_dim': a.head_dim, 'vocab_size': n_vocab,
           'max_position_embeddings': a.ctx, 'rms_norm_eps': 1e-6, 'tie_word_embeddings': False,
           'rope_scaling': None, 'bos_token_id': 1, 'eos_token_id': 2, 'num_experts_per_tok': a.used}
    if mix:
        cfg.update({'architectures': ['MixtralForCausalLM'], 'model_type': 'mixtral', 'intermediate_size': a.ffn,
                    'num_local_experts': a.experts, 'rope_theta': 10000.0, 'sliding_window': None})
    else:
        cfg.update({'architectures': ['Qwen3MoeForCausalLM' if a.arch == 'qwen3moe' else 'Qwen2MoeForCausalLM'],
                    'model_type': 'qwen3_moe' if a.arch == 'qwen3moe' else 'qwen2_moe',
                    'intermediate_size': a.ffn, 'moe_intermediate_size': a.ffn, 'num_experts': a.experts,
                    'norm_topk_prob': a.arch == 'qwen3moe', 'rope_theta': 1000000.0, 'decoder_sparse_step': 1,
                    'mlp_only_layers': [], 'use_sliding_window': False, 'sliding_window': None})
        if a.arch == 'qwen2moe':
            cfg['shared_expert_intermediate_size'] = a.shared_ffn
    if a.mlx:
        cfg['quantization'] = cfg['quantization_config'] = {'group_size': a.mlx, 'bits': 4}
    with open(os.path.join(a.hf, 'config.json'), 'w') as f:
        json.dump(cfg, f, indent=1)


if __name__ == '__main__':
    main()
