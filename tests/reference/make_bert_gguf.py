#!/usr/bin/env python3
"""make_bert_gguf.py: write a small BERT-family encoder (bert or nomic-bert) as GGUF v3 with random
F32 weights, and optionally the same model as a Hugging Face directory.

Tensors and keys as llama.cpp b4748 loads them (src/llama-model.cpp, LLM_ARCH_BERT / NOMIC_BERT;
numpy shape = reversed ne):
  token_embd [vocab][dim], token_types [2][dim], token_embd_norm.{weight,bias} [dim]
  bert:   position_embd [ctx][dim]; per layer attn_{q,k,v}.{weight,bias}, attn_output.{weight,bias},
          attn_output_norm.{weight,bias}, ffn_up.{weight,bias} [ffn][dim], ffn_down.{weight,bias},
          layer_output_norm.{weight,bias}
  nomic-bert: no position_embd (rope, NEOX halves, <arch>.rope.freq_base); per layer attn_qkv
          [3 dim][dim] (q, k, v rows), attn_output, attn_output_norm, ffn_up, ffn_gate [ffn][dim],
          ffn_down, layer_output_norm; no biases but the norms'
  keys: <arch>.context_length, embedding_length, block_count, feed_forward_length,
        attention.head_count, attention.layer_norm_epsilon, attention.causal (false), pooling_type
        (1 mean, 2 cls, 3 last); tokenizer.* copied from --vocab (the bge WordPiece vocab).
Weights: numpy default_rng(seed) normal: 1/sqrt(cols) for matrices, 1 for the word embedding,
0.5 for position and token-type rows, 1 + 0.1 N for norm weights, 0.1 N for biases.

--hf-dir DIR also writes DIR/config.json (BertModel / NomicBertModel's), DIR/model.safetensors
(the same values under Hugging Face's names), DIR/tokenizer.json (WordPiece, its vocabulary the
GGUF's with llama.cpp's phantom spaces undone: "\u2581word" -> "word", "piece" -> "##piece"),
DIR/modules.json and DIR/1_Pooling/config.json (sentence-transformers; the pooling as --pooling).

  make_bert_gguf.py --vocab ggml-vocab-bert-bge.gguf --out bert.gguf [--arch bert|nomic-bert]
      [--seed N] [--ctx 64] [--pooling mean|cls|last] [--hf-dir DIR]
"""
import argparse
import json
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_synthetic_qwen import read_tokenizer_kv, s, U32, F32, STR  # noqa: E402

BOOL = 7
POOL = {'mean': 1, 'cls': 2, 'last': 3}


def gguf_strings(raw):
    """The strings of a raw GGUF string array value (u32 type, u64 count, strings)."""
    n = struct.unpack_from('<Q', raw, 4)[0]
    p, out = 12, []
    for _ in range(n):
        ln = struct.unpack_from('<Q', raw, p)[0]
        out.append(raw[p + 8:p + 8 + ln].decode('utf-8'))
        p += 8 + ln
    return out


def tensors(a, n_vocab):
    """[(gguf name, hf name, numpy shape, kind)]; kind m matrix, e embedding, p small rows, n norm, b bias."""
    dim, ff, nomic = a.dim, a.ffn, a.arch == 'nomic-bert'
    ts = [('token_embd.weight', 'embeddings.word_embeddings.weight', (n_vocab, dim), 'e'),
          ('token_types.weight', 'embeddings.token_type_embeddings.weight', (2, dim), 'p')]
    if not nomic:
        ts.append(('position_embd.weight', 'embeddings.position_embeddings.weight', (a.ctx, dim), 'p'))
    ln = 'emb_ln' if nomic else 'embeddings.LayerNorm'
    ts += [('token_embd_norm.weight', ln + '.weight', (dim,), 'n'), ('token_embd_norm.bias', ln + '.bias', (dim,), 'b')]
    for i in range(a.layers):
        g = 'blk.%d.' % i
        if nomic:
            h = 'encoder.layers.%d.' % i
            ts += [(g + 'attn_qkv.weight', h + 'attn.Wqkv.weight', (3 * dim, dim), 'm'),
                   (g + 'attn_output.weight', h + 'attn.out_proj.weight', (dim, dim), 'm'),
                   (g + 'attn_output_norm.weight', h + 'norm1.weight', (dim,), 'n'),
                   (g + 'attn_output_norm.bias', h + 'norm1.bias', (dim,), 'b'),
                   (g + 'ffn_up.weight', h + 'mlp.fc11.weight', (ff, dim), 'm'),
                   (g + 'ffn_gate.weight', h + 'mlp.fc12.weight', (ff, dim), 'm'),
                   (g + 'ffn_down.weight', h + 'mlp.fc2.weight', (dim, ff), 'm'),
                   (g + 'layer_output_norm.weight', h + 'norm2.weight', (dim,), 'n'),
                   (g + 'layer_output_norm.bias', h + 'norm2.bias', (dim,), 'b')]
            continue
        h = 'encoder.layer.%d.' % i
        for gg, hh in (('attn_q', 'attention.self.query'), ('attn_k', 'attention.self.key'),
                       ('attn_v', 'attention.self.value'), ('attn_output', 'attention.output.dense')):
            ts += [(g + gg + '.weight', h + hh + '.weight', (dim, dim), 'm'), (g + gg + '.bias', h + hh + '.bias', (dim,), 'b')]
        ts += [(g + 'attn_output_norm.weight', h + 'attention.output.LayerNorm.weight', (dim,), 'n'),
               (g + 'attn_output_norm.bias', h + 'attention.output.LayerNorm.bias', (dim,), 'b'),
               (g + 'ffn_up.weight', h + 'intermediate.dense.weight', (ff, dim), 'm'),
               (g + 'ffn_up.bias', h + 'intermediate.dense.bias', (ff,), 'b'),
               (g + 'ffn_down.weight', h + 'output.dense.weight', (dim, ff), 'm'),
               (g + 'ffn_down.bias', h + 'output.dense.bias', (dim,), 'b'),
               (g + 'layer_output_norm.weight', h + 'output.LayerNorm.weight', (dim,), 'n'),
               (g + 'layer_output_norm.bias', h + 'output.LayerNorm.bias', (dim,), 'b')]
    return ts


def values(ts, seed):
    rng = np.random.default_rng(seed)
    out = []
    for gname, hname, shape, kind in ts:
        if kind == 'm':
            x = rng.standard_normal(shape) / np.sqrt(shape[-1])
        elif kind == 'e':
            x = rng.standard_normal(shape)
        elif kind == 'p':
            x = 0.5 * rng.standard_normal(shape)
        elif kind == 'n':
            x = 1.0 + 0.1 * rng.standard_normal(shape)
        else:
            x = 0.1 * rng.standard_normal(shape)
        out.append((gname, hname, x.astype('<f4')))
    return out


def write_gguf(path, kv, vals):
    data, infos, off = [], [], 0
    for name, _, x in vals:
        raw = x.tobytes()
        shape = x.shape
        infos.append(s(name) + struct.pack('<I', len(shape)) + struct.pack('<%dQ' % len(shape), *reversed(shape)) +
                     struct.pack('<IQ', 0, off))
        pad = (32 - len(raw) % 32) % 32
        data.append(raw + b'\0' * pad)
        off += len(raw) + pad
    head = b'GGUF' + struct.pack('<IQQ', 3, len(vals), len(kv))
    head += b''.join(s(k) + struct.pack('<I', t) + v for (k, t, v) in kv) + b''.join(infos)
    head += b'\0' * ((32 - len(head) % 32) % 32)
    with open(path, 'wb') as f:
        f.write(head + b''.join(data))


def write_safetensors(path, vals):
    header, blobs, off = {}, [], 0
    for _, name, x in vals:
        raw = x.tobytes()
        header[name] = {'dtype': 'F32', 'shape': list(x.shape), 'data_offsets': [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header, separators=(',', ':')).encode()
    h += b' ' * ((8 - len(h) % 8) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(h)) + h + b''.join(blobs))


def wordpiece_vocab(tokens):
    """The GGUF's phantom-space vocabulary back in WordPiece's form (convert_hf_to_gguf's phantom() undone)."""
    out = []
    for t in tokens:
        if t.startswith('[') and t.endswith(']'):
            out.append(t)
        elif t.startswith('\u2581'):
            out.append(t[1:])
        else:
            out.append('##' + t)
    return out


def write_hf(a, vals, tok_kv, n_vocab):
    d = a.hf_dir
    os.makedirs(os.path.join(d, '1_Pooling'), exist_ok=True)
    if a.arch == 'nomic-bert':
        cfg = {'architectures': ['NomicBertModel'], 'model_type': 'nomic_bert', 'n_embd': a.dim, 'n_layer': a.layers,
               'n_head': a.heads, 'n_inner': a.ffn, 'n_positions': a.ctx, 'layer_norm_epsilon': a.eps,
               'rotary_emb_base': a.rope_base, 'rotary_emb_fraction': 1.0, 'rotary_emb_interleaved': False,
               'rotary_emb_scale_base': None, 'activation_function': 'swiglu', 'causal': False, 'prenorm': False,
               'qkv_proj_bias': False, 'mlp_fc1_bias': False, 'mlp_fc2_bias': False, 'type_vocab_size': 2,
               'vocab_size': n_vocab}
    else:
        cfg = {'architectures': ['BertModel'], 'model_type': 'bert', 'hidden_size': a.dim,
               'num_hidden_layers': a.layers, 'num_attention_heads': a.heads, 'intermediate_size': a.ffn,
               'max_position_embeddings': a.ctx, 'layer_norm_eps': a.eps, 'hidden_act': 'gelu',
               'type_vocab_size': 2, 'vocab_size': n_vocab, 'pad_token_id': 0,
               'position_embedding_type': 'absolute'}
    with open(os.path.join(d, 'config.json'), 'w') as f:
        json.dump(cfg, f, indent=1)
    write_safetensors(os.path.join(d, 'model.safetensors'), vals)
    toks = wordpiece_vocab(gguf_strings(tok_kv['tokenizer.ggml.tokens']))
    vocab = {}
    for i, t in enumerate(toks):
        vocab.setdefault(t, i)
    special = [(i, t) for i, t in enumerate(toks) if t in ('[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]')]
    cls, sep = vocab['[CLS]'], vocab['[SEP]']
    tj = {'version': '1.0', 'truncation': None, 'padding': None,
          'added_tokens': [{'id': i, 'content': t, 'single_word': False, 'lstrip': False, 'rstrip': False,
                            'normalized': False, 'special': True} for i, t in special],
          'normalizer': {'type': 'BertNormalizer', 'clean_text': True, 'handle_chinese_chars': True,
                         'strip_accents': None, 'lowercase': True},
          'pre_tokenizer': {'type': 'BertPreTokenizer'},
          'post_processor': {'type': 'TemplateProcessing',
                             'single': [{'SpecialToken': {'id': '[CLS]', 'type_id': 0}},
                                        {'Sequence': {'id': 'A', 'type_id': 0}},
                                        {'SpecialToken': {'id': '[SEP]', 'type_id': 0}}],
                             'pair': [{'SpecialToken': {'id': '[CLS]', 'type_id': 0}},
                                      {'Sequence': {'id': 'A', 'type_id': 0}},
                                      {'SpecialToken': {'id': '[SEP]', 'type_id': 0}},
                                      {'Sequence': {'id': 'B', 'type_id': 1}},
                                      {'SpecialToken': {'id': '[SEP]', 'type_id': 1}}],
                             'special_tokens': {'[CLS]': {'id': '[CLS]', 'ids': [cls], 'tokens': ['[CLS]']},
                                                '[SEP]': {'id': '[SEP]', 'ids': [sep], 'tokens': ['[SEP]']}}},
          'decoder': {'type': 'WordPiece', 'prefix': '##', 'cleanup': True},
          'model': {'type': 'WordPiece', 'unk_token': '[UNK]', 'continuing_subword_prefix': '##',
                    'max_input_chars_per_word': 100, 'vocab': vocab}}
    with open(os.path.join(d, 'tokenizer.json'), 'w', encoding='utf-8') as f:
        json.dump(tj, f, ensure_ascii=False)
    with open(os.path.join(d, 'tokenizer_config.json'), 'w') as f:
        json.dump({'do_lower_case': True, 'model_max_length': a.ctx, 'tokenizer_class': 'BertTokenizer',
                   'cls_token': '[CLS]', 'sep_token': '[SEP]', 'unk_token': '[UNK]', 'pad_token': '[PAD]',
                   'mask_token': '[MASK]'}, f, indent=1)
    with open(os.path.join(d, 'modules.json'), 'w') as f:
        json.dump([{'idx': 0, 'name': '0', 'path': '', 'type': 'sentence_transformers.models.Transformer'},
                   {'idx': 1, 'name': '1', 'path': '1_Pooling', 'type': 'sentence_transformers.models.Pooling'},
                   {'idx': 2, 'name': '2', 'path': '2_Normalize', 'type': 'sentence_transformers.models.Normalize'}],
                  f, indent=1)
    pool = {'word_embedding_dimension': a.dim, 'pooling_mode_cls_token': a.pooling == 'cls',
            'pooling_mode_mean_tokens': a.pooling == 'mean', 'pooling_mode_max_tokens': False,
            'pooling_mode_mean_sqrt_len_tokens': False, 'pooling_mode_weightedmean_tokens': False,
            'pooling_mode_lasttoken': a.pooling == 'last', 'include_prompt': True}
    with open(os.path.join(d, '1_Pooling', 'config.json'), 'w') as f:
        json.dump(pool, f, indent=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--arch', choices=('bert', 'nomic-bert'), default='bert')
    ap.add_argument('--dim', type=int, default=64)
    ap.add_argument('--layers', type=int, default=2)
    ap.add_argument('--heads', type=int, default=4)
    ap.add_argument('--ffn', type=int, default=128)
    ap.add_argument('--ctx', type=int, default=64)
    ap.add_argument('--eps', type=float, default=1e-12)
    ap.add_argument('--rope-base', type=float, default=1000.0)
    ap.add_argument('--pooling', choices=tuple(POOL), default='mean')
    ap.add_argument('--seed', type=int, default=7)
    ap.add_argument('--vocab', required=True)
    ap.add_argument('--out', '-o', required=True)
    ap.add_argument('--hf-dir')
    a = ap.parse_args()
    if a.dim % a.heads:
        sys.exit('--heads must divide --dim')
    tok = read_tokenizer_kv(a.vocab)
    tok_kv = {k: v for (k, t, v) in tok}
    n_vocab = struct.unpack_from('<Q', tok_kv['tokenizer.ggml.tokens'], 4)[0]
    arch = a.arch
    kv = [('general.architecture', STR, s(arch)), ('general.name', STR, s('synthetic-' + arch)),
          ('general.alignment', U32, struct.pack('<I', 32)), ('general.file_type', U32, struct.pack('<I', 0))]
    for k, t, v in (('context_length', U32, a.ctx), ('embedding_length', U32, a.dim), ('block_count', U32, a.layers),
                    ('feed_forward_length', U32, a.ffn), ('attention.head_count', U32, a.heads),
                    ('attention.layer_norm_epsilon', F32, a.eps), ('pooling_type', U32, POOL[a.pooling])):
        kv.append(('%s.%s' % (arch, k), t, struct.pack('<I' if t == U32 else '<f', v)))
    kv.append(('%s.attention.causal' % arch, BOOL, b'\0'))
    if arch == 'nomic-bert':
        kv.append(('%s.rope.freq_base' % arch, F32, struct.pack('<f', a.rope_base)))
    kv += tok
    vals = values(tensors(a, n_vocab), a.seed)
    write_gguf(a.out, kv, vals)
    if a.hf_dir:
        write_hf(a, vals, tok_kv, n_vocab)


if __name__ == '__main__':
    main()
