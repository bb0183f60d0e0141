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
  gemma3    four norms per layer (attn_norm, post_attention_norm, ffn_norm, post_ffw_norm),
            QK-norm, gemma3.attention.sliding_window; no output.weight (tied); use --layers 6 or
            more for a global layer (llama.cpp: every 6th)
Weights: numpy default_rng(seed) normal, std 1/sqrt(cols) for matrices, 1 for the embedding (gemma3: 1/sqrt(dim)),
1 + 0.1 N for norms (gemma3's GGUF holds 1 + w, as convert_hf_to_gguf writes it), 0.1 N for biases; the router's
rows are scaled by 3 so that routing is decisive (a near tie between two experts would make the
choice depend on rounding). --dtype q8_0 stores every 2-D and 3-D .weight but the router as Q8_0
(ggml's block: f16 d = max|x| / 127, 32 int8 round(x / d)). Tokenizer keys are copied from --vocab.

  make_synthetic_arch.py --arch qwen3moe --vocab stories260K.gguf -o qwen3moe-f32.gguf
"""
import argparse
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_synthetic_qwen import read_tokenizer_kv, s, U32, F32, STR  # noqa: E402

BOOL = 7


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


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--arch', choices=('mixtral', 'qwen3moe', 'qwen2moe', 'gemma3', 'mistral', 'phi3'), required=True)
    ap.add_argument('--dim', type=int, default=128)
    ap.add_argument('--layers', type=int, default=2)
    ap.add_argument('--heads', type=int, default=4)
    ap.add_argument('--kv-heads', type=int, default=2)
    ap.add_argument('--head-dim', type=int, default=32)
    ap.add_argument('--ffn', type=int, default=128, help='expert ffn (MoE) or ffn (gemma3)')
    ap.add_argument('--shared-ffn', type=int, default=192)
    ap.add_argument('--experts', type=int, default=8)
    ap.add_argument('--used', type=int, default=2)
    ap.add_argument('--window', type=int, default=8, help='gemma3 sliding window')
    ap.add_argument('--ctx', type=int, default=256)
    ap.add_argument('--softcap', type=float, default=0, help='gemma3 final_logit_softcapping (0: none)')
    ap.add_argument('--dtype', choices=('f32', 'q8_0'), default='f32')
    ap.add_argument('--seed', type=int, default=11)
    ap.add_argument('--vocab', required=True)
    ap.add_argument('-o', '--out', required=True)
    ap.add_argument('--hf', help='gemma3: also write the same model as a Hugging Face directory (config.json, '
                    'model.safetensors with HF names; norms hold w, not 1 + w)')
    a = ap.parse_args()
    arch = 'llama' if a.arch in ('mixtral', 'mistral') else a.arch
    dim, hd, moe = a.dim, a.head_dim, a.arch not in ('gemma3', 'mistral', 'phi3')
    if arch == 'llama' and hd * a.heads != dim:
        sys.exit('mixtral: --head-dim must be dim / heads')
    tok = read_tokenizer_kv(a.vocab)
    n_vocab = [struct.unpack_from('<Q', v, 4)[0] for (k, t, v) in tok if k == 'tokenizer.ggml.tokens'][0]
    q_dim, kv_dim = a.heads * hd, a.kv_heads * hd
    kv = [('general.architecture', STR, s(arch)), ('general.name', STR, s('synthetic-' + a.arch)),
          ('general.alignment', U32, struct.pack('<I', 32)),
          ('general.file_type', U32, struct.pack('<I', 0 if a.dtype == 'f32' else 7))]
    hp = [('context_length', U32, a.ctx), ('embedding_length', U32, dim), ('block_count', U32, a.layers),
          ('feed_forward_length', U32, a.ffn), ('attention.head_count', U32, a.heads),
          ('attention.head_count_kv', U32, a.kv_heads), ('attention.key_length', U32, hd),
          ('attention.value_length', U32, hd), ('rope.dimension_count', U32, hd),
          ('rope.freq_base', F32, 10000.0 if arch == 'llama' else 1000000.0),
          ('attention.layer_norm_rms_epsilon', F32, 1e-6)]
    if moe:
        hp += [('expert_count', U32, a.experts), ('expert_used_count', U32, a.used)]
        if arch != 'llama':
            hp.append(('expert_feed_forward_length', U32, a.ffn))
        if arch == 'qwen2moe':
            hp.append(('expert_shared_feed_forward_length', U32, a.shared_ffn))
    if a.arch in ('gemma3', 'mistral', 'phi3'):
        hp.append(('attention.sliding_window', U32, a.window))
        if a.softcap:
            hp.append(('final_logit_softcapping', F32, a.softcap))
    for k, t, v in hp:
        kv.append(('%s.%s' % (arch, k), t, struct.pack('<I' if t == U32 else '<f', v)))
    kv += tok
    # (name, numpy shape, kind): m matrix, r router, e embedding, n norm, b bias
    nk = 'n'   # gemma3 too: llama.cpp's converter stores its (1 + w) norms as 1 + w
    ts = [('token_embd.weight', (n_vocab, dim), 'e')]
    for i in range(a.layers):
        p = 'blk.%d.' % i
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
    data, infos, off, hf = [], [], 0, {}
    for name, shape, kind in ts:
        if kind == 'm':
            x = rng.standard_normal(shape) / np.sqrt(shape[-1])
        elif kind == 'r':
            x = 3 * rng.standard_normal(shape) / np.sqrt(shape[-1])
        elif kind == 'e':   # gemma3 scales it by sqrt(dim): small, so the last token does not drown the rest
            x = rng.standard_normal(shape) / (np.sqrt(dim) if arch == 'gemma3' else 1)
        elif kind == 'n':
            x = 1.0 + 0.1 * rng.standard_normal(shape)
        else:
            x = 0.1 * rng.standard_normal(shape)
        hf[name] = x
        if a.dtype == 'q8_0' and kind in ('m', 'e'):
            raw, ty = q8_0(x), 8
        else:
            raw, ty = x.astype('<f4').tobytes(), 0
        infos.append(s(name) + struct.pack('<I', len(shape)) + struct.pack('<%dQ' % len(shape), *reversed(shape)) +
                     struct.pack('<IQ', ty, off))
        pad = (32 - len(raw) % 32) % 32
        data.append(raw + b'\0' * pad)
        off += len(raw) + pad
    head = b'GGUF' + struct.pack('<IQQ', 3, len(ts), len(kv))
    head += b''.join(s(k) + struct.pack('<I', t) + v for (k, t, v) in kv) + b''.join(infos)
    head += b'\0' * ((32 - len(head) % 32) % 32)
    with open(a.out, 'wb') as f:
        f.write(head + b''.join(data))
    if a.hf:
        write_hf(a, hf, n_vocab)


HF_NAMES = {'attn_norm': 'input_layernorm', 'post_attention_norm': 'post_attention_layernorm',
            'ffn_norm': 'pre_feedforward_layernorm', 'post_ffw_norm': 'post_feedforward_layernorm',
            'attn_q': 'self_attn.q_proj', 'attn_k': 'self_attn.k_proj', 'attn_v': 'self_attn.v_proj',
            'attn_output': 'self_attn.o_proj', 'attn_q_norm': 'self_attn.q_norm', 'attn_k_norm': 'self_attn.k_norm',
            'ffn_gate': 'mlp.gate_proj', 'ffn_up': 'mlp.up_proj', 'ffn_down': 'mlp.down_proj'}


def write_hf(a, tensors, n_vocab):
    """Gemma 3 as Hugging Face ships it: norm weights w with the model computing (1 + w), so each
    is the GGUF's value minus 1; Q/K rows as they are (gemma rotates halves in both)."""
    import json
    if a.arch != 'gemma3':
        sys.exit('--hf: gemma3 only')
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
    hdr, blobs, off = {}, [], 0
    for name in sorted(out):
        raw = out[name].astype('<f4').tobytes()
        hdr[name] = {'dtype': 'F32', 'shape': list(out[name].shape), 'data_offsets': [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(hdr).encode()
    h += b' ' * ((8 - len(h) % 8) % 8)
    with open(os.path.join(a.hf, 'model.safetensors'), 'wb') as f:
        f.write(struct.pack('<Q', len(h)) + h + b''.join(blobs))
    cfg = {'architectures': ['Gemma3ForCausalLM'], 'model_type': 'gemma3_text', 'hidden_size': a.dim,
           'num_hidden_layers': a.layers, 'num_attention_heads': a.heads, 'num_key_value_heads': a.kv_heads,
           'head_dim': a.head_dim, 'intermediate_size': a.ffn, 'vocab_size': n_vocab,
           'max_position_embeddings': a.ctx, 'rms_norm_eps': 1e-6, 'rope_theta': 1000000.0,
           'rope_local_base_freq': 10000.0, 'sliding_window': a.window, 'sliding_window_pattern': 6,
           'query_pre_attn_scalar': a.head_dim, 'hidden_activation': 'gelu_pytorch_tanh',
           'final_logit_softcapping': a.softcap or None, 'tie_word_embeddings': True, 'rope_scaling': None,
           'bos_token_id': 1, 'eos_token_id': 2}
    with open(os.path.join(a.hf, 'config.json'), 'w') as f:
        json.dump(cfg, f, indent=1)


if __name__ == '__main__':
    main()
