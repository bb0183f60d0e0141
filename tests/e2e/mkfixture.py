#!/usr/bin/env python3
"""mkfixture.py: model fixtures for the end-to-end tests, written with the standard library only.

  mkfixture.py hf DIR [--shards N] [--dtype F32|F16|BF16] [--layers L] [--dim D] [--seed S]
                  [--arch llama|qwen2|qwen3] [--tokenizer-from VOCAB.gguf [--merges-as-pairs]]
      a Hugging Face llama-style directory: config.json, model.safetensors (or N shards with
      model.safetensors.index.json), tokenizer.json, tokenizer_config.json (with a chat
      template) and generation_config.json. Values are deterministic in the seed.
      --arch qwen2 adds q/k/v biases, qwen3 per-head q/k norms (head_dim 2 * dim / heads) and
      tied embeddings (no lm_head), with Qwen's config.json fields.
      --tokenizer-from writes tokenizer.json and tokenizer_config.json converted from a GGUF
      vocab (see tokenizer_json_from_gguf) and sizes the vocab to it; --merges-as-pairs writes
      the merges as ["a", "b"] pairs (newer tokenizers) instead of "a b" strings.
  mkfixture.py tokjson VOCAB.gguf DIR [--merges-as-pairs]
      only tokenizer.json and tokenizer_config.json, converted from a GGUF vocab.
  mkfixture.py random FILE SIZE_MB [--seed S]
      SIZE_MB of deterministic pseudo-random bytes.
  mkfixture.py mlx DIR [--bits B] [--group-size G] [--mode affine|mxfp4] [--shards N] [--layers L]
                   [--dim D] [--moe E] [--moe-form switch|experts] [--override MODULE=BITS/GROUP|false]
                   [--omit TENSOR] [--seed S]
      an MLX-quantized directory as mlx-lm's convert writes it: linear and embedding weights as
      X.weight (U32 codes), X.scales, X.biases (F16; no biases for mxfp4), norms in F16, and
      config.json "quantization" with the defaults and per-module overrides. --moe E gives every
      layer E experts: stacked (mlp.switch_mlp.*) or one module each (mlp.experts.N.* plus
      mlp.shared_experts.*). --omit drops a tensor (for refusal tests).
  mkfixture.py ggufsplit FILE.gguf PREFIX N [--count C] [--tensors-count T]
      FILE split as llama.cpp's gguf-split --split-max-tensors writes it: PREFIX-0000i-of-0000N.gguf,
      the first with all the metadata, each with split.no (u16), split.count (u16) and
      split.tensors.count (i32) appended, the tensors dealt out in file order, N about equal
      parts. --count / --tensors-count write other values there (for refusal tests).
"""
import argparse
import json
import os
import random
import struct


def safetensors_bytes(tensors, metadata=None):
    """tensors: list of (name, dtype, shape, bytes); data packed contiguously, as HF writes."""
    header, off = {}, 0
    if metadata:
        header["__metadata__"] = metadata
    for name, dtype, shape, data in tensors:
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + len(data)]}
        off += len(data)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(t[3] for t in tensors)


def write_model(d, cfg, tensors, shards, fmt):
    """config.json, and the tensors in model.safetensors or `shards` files with their index."""
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    if shards <= 1:
        with open(os.path.join(d, "model.safetensors"), "wb") as f:
            f.write(safetensors_bytes(tensors, {"format": fmt}))
        return
    per = (len(tensors) + shards - 1) // shards
    wm = {}
    for s in range(shards):
        part = tensors[s * per:(s + 1) * per]
        fn = "model-%05d-of-%05d.safetensors" % (s + 1, shards)
        with open(os.path.join(d, fn), "wb") as f:
            f.write(safetensors_bytes(part, {"format": fmt}))
        for t in part:
            wm[t[0]] = fn
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": sum(len(t[3]) for t in tensors)}, "weight_map": wm}, f, indent=2)


def values(rng, n, dtype):
    if dtype == "F32":
        return struct.pack("<%df" % n, *[rng.uniform(-1, 1) for _ in range(n)])
    if dtype == "F16":
        return struct.pack("<%de" % n, *[rng.uniform(-1, 1) for _ in range(n)])
    if dtype == "BF16":
        f = struct.pack("<%df" % n, *[rng.uniform(-1, 1) for _ in range(n)])
        return b"".join(f[i + 2:i + 4] for i in range(0, len(f), 4))
    raise SystemExit("unknown dtype " + dtype)


def hf(args):
    rng = random.Random(args.seed)
    d, ff, vocab, L = args.dim, args.dim * 2, 32, args.layers
    meta = gguf_meta(args.tokenizer_from) if args.tokenizer_from else None
    if meta:
        vocab = len(meta["tokenizer.ggml.tokens"])
    # qwen3: head_dim is its own field (here twice hidden / heads, as Qwen3's are not hidden / heads)
    hd = 2 * d // 4 if args.arch == "qwen3" else d // 4
    q, kv = 4 * hd, 2 * hd
    tied = args.arch == "qwen3"
    names = [("model.embed_tokens.weight", (vocab, d)), ("model.norm.weight", (d,))]
    if not tied:
        names.append(("lm_head.weight", (vocab, d)))
    for i in range(L):
        p = "model.layers.%d." % i
        names += [(p + "input_layernorm.weight", (d,)), (p + "post_attention_layernorm.weight", (d,)),
                  (p + "self_attn.q_proj.weight", (q, d)), (p + "self_attn.k_proj.weight", (kv, d)),
                  (p + "self_attn.v_proj.weight", (kv, d)), (p + "self_attn.o_proj.weight", (d, q)),
                  (p + "mlp.gate_proj.weight", (ff, d)), (p + "mlp.up_proj.weight", (ff, d)),
                  (p + "mlp.down_proj.weight", (d, ff))]
        if args.arch == "qwen2":
            names += [(p + "self_attn.q_proj.bias", (q,)), (p + "self_attn.k_proj.bias", (kv,)),
                      (p + "self_attn.v_proj.bias", (kv,))]
        if args.arch == "qwen3":
            names += [(p + "self_attn.q_norm.weight", (hd,)), (p + "self_attn.k_norm.weight", (hd,))]
    tensors = []
    for name, shape in names:
        n = 1
        for s in shape:
            n *= s
        tensors.append((name, args.dtype, shape, values(rng, n, args.dtype)))
    os.makedirs(args.dir, exist_ok=True)
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": d,
           "intermediate_size": ff, "num_hidden_layers": L, "num_attention_heads": 4,
           "num_key_value_heads": 2, "vocab_size": vocab, "max_position_embeddings": 128,
           "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": False,
           "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "float32"}
    if args.arch != "llama":
        cfg.update({"architectures": ["Qwen3ForCausalLM" if args.arch == "qwen3" else "Qwen2ForCausalLM"],
                    "model_type": args.arch, "head_dim": hd, "rope_theta": 1000000.0, "rms_norm_eps": 1e-6,
                    "tie_word_embeddings": tied, "use_sliding_window": False, "sliding_window": None})
    if meta:
        cfg["bos_token_id"] = meta.get("tokenizer.ggml.bos_token_id")
        cfg["eos_token_id"] = meta.get("tokenizer.ggml.eos_token_id")
    write_model(args.dir, cfg, tensors, args.shards, "pt")
    if meta:
        write_tokenizer_json(args.dir, meta, args.merges_as_pairs)
        with open(os.path.join(args.dir, "generation_config.json"), "w") as f:
            json.dump({"bos_token_id": cfg["bos_token_id"], "eos_token_id": cfg["eos_token_id"]}, f)
        return
    tok = {"version": "1.0", "model": {"type": "BPE", "vocab": {"<s>": 1, "</s>": 2}, "merges": []}}
    with open(os.path.join(args.dir, "tokenizer.json"), "w") as f:
        json.dump(tok, f)
    with open(os.path.join(args.dir, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": "<s>", "eos_token": "</s>",
                   "chat_template": "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"}, f)
    with open(os.path.join(args.dir, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": 1, "eos_token_id": 2}, f)



# ---------------------------------------------------------------- tokenizer.json from a GGUF vocab

def gguf_meta(path):
    """The key/value metadata of a GGUF file (v2/v3), as a dict; arrays as lists."""
    with open(path, "rb") as f:
        data = f.read()
    pos = 0

    def take(n):
        nonlocal pos
        if pos + n > len(data):
            raise SystemExit("%s: truncated GGUF" % path)
        pos += n
        return data[pos - n:pos]

    scalar = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}

    def value(t):
        if t == 8:
            n, = struct.unpack("<Q", take(8))
            return take(n).decode("utf-8")
        if t == 9:
            et, n = struct.unpack("<IQ", take(12))
            return [value(et) for _ in range(n)]
        return struct.unpack(scalar[t], take(struct.calcsize(scalar[t])))[0]

    magic, _version, _n_tensors, n_kv = struct.unpack("<4sIQQ", take(24))
    if magic != b"GGUF":
        raise SystemExit("%s: not a GGUF file" % path)
    meta = {}
    for _ in range(n_kv):
        n, = struct.unpack("<Q", take(8))
        key = take(n).decode("utf-8")
        t, = struct.unpack("<I", take(4))
        meta[key] = value(t)
    return meta


# The pre-tokenizer regexes llama.cpp (src/llama-vocab.cpp) runs for each tokenizer.ggml.pre,
# as data. A Hugging Face tokenizer.json holds them as Split pre-tokenizers (behavior Isolated);
# GPT-2's regex is implied by ByteLevel(use_regex=true), and a lone \p{N} / \p{N}+ is what the
# Digits pre-tokenizer does, so those are written in those forms, as the hub's files have them.
PRE_REGEXES = {
    "deepseek-llm": [
        "[\r\n]",
        "\\s?[A-Za-z\u00b5\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u01ba\u01bc-\u01bf\u01c4-\u0293\u0295-"
        "\u02af\u0370-\u0373\u0376\u0377\u037b-\u037d\u037f\u0386\u0388-\u038a\u038c\u038e-\u03a1"
        "\u03a3-\u03f5\u03f7-\u0481\u048a-\u052f\u0531-\u0556\u10a0-\u10c5\u13a0-\u13f5\u13f8-"
        "\u13fd\u1c90-\u1cba\u1cbd-\u1cbf\u1d00-\u1d2b\u1d6b-\u1d77\u1d79-\u1d9a\u1e00-\u1f15"
        "\u1f18-\u1f1d\u1f20-\u1f45\u1f48-\u1f4d\u1f50-\u1f57\u1f59\u1f5b\u1f5d\u1f5f-\u1f7d"
        "\u1f80-\u1fb4\u1fb6-\u1fbc\u1fbe\u1fc2-\u1fc4\u1fc6-\u1fcc\u1fd0-\u1fd3\u1fd6-\u1fdb"
        "\u1fe0-\u1fec\u1ff2-\u1ff4\u1ff6-\u1ffc\u2102\u2107\u210a-\u2113\u2115\u2119-\u211d\u2124"
        "\u2126\u2128\u212a-\u212d\u212f-\u2134\u2139\u213c-\u213f\u2145-\u2149\u214e\u2183\u2184"
        "\u2c00-\u2c7b\u2c7e-\u2ce4\u2ceb-\u2cee\u2cf2\u2cf3\ua640-\ua66d\ua680-\ua69b\ua722-"
        "\ua76f\ua771-\ua787\ua78b-\ua78e\uab70-\uabbf\ufb00-\ufb06\ufb13-\ufb17\uff21-\uff3a"
        "\uff41-\uff5a\U00010400-\U0001044f\U000104b0-\U000104d3\U000104d8-\U000104fb\U00010c80-"
        "\U00010cb2\U00010cc0-\U00010cf2\U000118a0-\U000118df\U0001e900-\U0001e943]+",
        "\\s?[!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002]+",
        "\\s+$",
        "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+",
        "\\p{N}+",
    ],
    "deepseek-coder": ["[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+", "\\p{N}"],
    "llama-bpe": ["(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
                  "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"],
    "qwen2": ["(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
              "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"],
}


def byte_level_pre_tokenizer(pre):
    if pre in ("gpt-2", "default", None):
        return {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    seq = []
    for r in PRE_REGEXES[pre]:
        if r in ("\\p{N}", "\\p{N}+"):
            seq.append({"type": "Digits", "individual_digits": r == "\\p{N}"})
        else:
            seq.append({"type": "Split", "pattern": {"Regex": r}, "behavior": "Isolated", "invert": False})
    seq.append({"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False})
    return {"type": "Sequence", "pretokenizers": seq}


def spm_merges(tokens, types, scores):
    """Merges of a SentencePiece BPE vocab the way transformers' SentencePieceExtractor derives
    them: for each normal piece, every split into two pieces of the vocab, ordered by the merged
    piece's score (highest first), then by the ids of the two halves."""
    ids = {}
    for i, t in enumerate(tokens):
        ids[t] = i
    found = []
    for i, t in enumerate(tokens):
        if types[i] != 1 or len(t) < 2:
            continue
        local = [(t[:k], t[k:]) for k in range(1, len(t))
                 if t[:k] in ids and t[k:] in ids and types[ids[t[:k]]] == 1 and types[ids[t[k:]]] == 1]
        local.sort(key=lambda m: (ids[m[0]], ids[m[1]]))
        found += [(scores[i], m) for m in local]
    found.sort(key=lambda e: -e[0])   # stable: ties keep the order above
    return [m for _, m in found]


def tokenizer_json_from_gguf(meta, merges_as_pairs=False):
    """(tokenizer.json, tokenizer_config.json) holding the GGUF's vocab as Hugging Face does:
    byte-level BPE for tokenizer.ggml.model "gpt2", SentencePiece-style BPE with byte fallback
    for "llama", WordPiece for "bert". Control tokens become special added tokens, user-defined
    ones non-special added tokens, unused ids are left out (holes), as llama.cpp's converter
    reads them back."""
    model = meta["tokenizer.ggml.model"]
    if model == "bert":
        return wordpiece_json_from_gguf(meta)
    tokens = meta["tokenizer.ggml.tokens"]
    types = meta.get("tokenizer.ggml.token_type", [1] * len(tokens))
    bos, eos = meta.get("tokenizer.ggml.bos_token_id"), meta.get("tokenizer.ggml.eos_token_id")
    unk = meta.get("tokenizer.ggml.unknown_token_id")
    add_bos = meta.get("tokenizer.ggml.add_bos_token", model == "llama")
    add_eos = meta.get("tokenizer.ggml.add_eos_token", False)
    vocab, added = {}, []
    for i, (t, ty) in enumerate(zip(tokens, types)):
        if ty == 5:
            continue
        if ty in (3, 4) or (ty == 2 and model == "llama"):
            added.append({"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": ty == 4, "special": ty != 4})
        if ty != 4 or model == "gpt2":
            vocab[t] = i
    if model == "gpt2":
        merges = [m.split(" ", 1) for m in meta["tokenizer.ggml.merges"]]
        bpe = {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
               "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False}
        tok = {"normalizer": None, "pre_tokenizer": byte_level_pre_tokenizer(meta.get("tokenizer.ggml.pre")),
               "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}}
    elif model == "llama":
        merges = spm_merges(tokens, types, meta["tokenizer.ggml.scores"])
        bpe = {"type": "BPE", "dropout": None, "unk_token": tokens[unk if unk is not None else 0],
               "continuing_subword_prefix": None, "end_of_word_suffix": None, "fuse_unk": True,
               "byte_fallback": True, "ignore_merges": False}
        tok = {"normalizer": {"type": "Sequence", "normalizers": [
                   {"type": "Prepend", "prepend": "\u2581"},
                   {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
               "pre_tokenizer": None,
               "decoder": {"type": "Sequence", "decoders": [
                   {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
                   {"type": "ByteFallback"}, {"type": "Fuse"},
                   {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}}
    else:
        raise SystemExit("tokenizer.ggml.model %r: no tokenizer.json form written" % model)
    bpe["vocab"] = vocab
    bpe["merges"] = merges if merges_as_pairs else [a + " " + b for a, b in merges]
    single = [{"Sequence": {"id": "A", "type_id": 0}}]
    pair = [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}]
    specials = {}
    for flag, tid, at in ((add_bos, bos, 0), (add_eos, eos, None)):
        if flag and tid is not None:
            e = {"SpecialToken": {"id": tokens[tid], "type_id": 0}}
            single.insert(len(single) if at is None else at, e)
            pair.insert(len(pair) if at is None else at, e)
            specials[tokens[tid]] = {"id": tokens[tid], "ids": [tid], "tokens": [tokens[tid]]}
    post = ({"type": "TemplateProcessing", "single": single, "pair": pair, "special_tokens": specials}
            if specials else {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True})
    out = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
           "normalizer": tok["normalizer"], "pre_tokenizer": tok["pre_tokenizer"], "post_processor": post,
           "decoder": tok["decoder"], "model": bpe}
    cfg = {"add_bos_token": bool(add_bos), "add_eos_token": bool(add_eos), "clean_up_tokenization_spaces": False,
           "model_max_length": 4096, "tokenizer_class": "LlamaTokenizerFast" if model == "llama" else "PreTrainedTokenizerFast"}
    for key, tid in (("bos_token", bos), ("eos_token", eos), ("unk_token", unk)):
        if tid is not None and 0 <= tid < len(tokens):
            cfg[key] = tokens[tid]
    return out, cfg


def wordpiece_json_from_gguf(meta):
    """BERT's tokenizer.json (bge's normalizer, pre-tokenizer and template) from a "bert" GGUF:
    the converter's phantom-space form undone ("\u2581x" -> "x", "[X]" kept, "y" -> "##y").
    llama.cpp has no word limit, so max_input_chars_per_word is set above any test word (BERT's
    own files say 100)."""
    tokens = meta["tokenizer.ggml.tokens"]
    types = meta.get("tokenizer.ggml.token_type", [1] * len(tokens))
    cls = meta.get("tokenizer.ggml.cls_token_id", meta.get("tokenizer.ggml.bos_token_id", 101))
    sep = meta.get("tokenizer.ggml.seperator_token_id", meta.get("tokenizer.ggml.eos_token_id", 102))
    unk = meta.get("tokenizer.ggml.unknown_token_id", 100)

    def hf_text(t):
        if t.startswith("\u2581"):
            return t[1:]
        return t if t.startswith("[") and t.endswith("]") else "##" + t
    texts = [hf_text(t) for t in tokens]
    added = [{"id": i, "content": texts[i], "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i, ty in enumerate(types) if ty == 3]
    single = [{"SpecialToken": {"id": texts[cls], "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
              {"SpecialToken": {"id": texts[sep], "type_id": 0}}]
    out = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
           "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                          "strip_accents": None, "lowercase": True},
           "pre_tokenizer": {"type": "BertPreTokenizer"},
           "post_processor": {"type": "TemplateProcessing", "single": single, "pair": single + single[1:],
                              "special_tokens": {texts[i]: {"id": texts[i], "ids": [i], "tokens": [texts[i]]}
                                                 for i in (cls, sep)}},
           "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
           "model": {"type": "WordPiece", "unk_token": texts[unk], "continuing_subword_prefix": "##",
                     "max_input_chars_per_word": 1000000, "vocab": {t: i for i, t in enumerate(texts)}}}
    cfg = {"do_lower_case": True, "model_max_length": 512, "tokenizer_class": "BertTokenizer",
           "cls_token": texts[cls], "sep_token": texts[sep], "unk_token": texts[unk]}
    return out, cfg


def write_tokenizer_json(d, meta, merges_as_pairs):
    tok, cfg = tokenizer_json_from_gguf(meta, merges_as_pairs)
    with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False)
    with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, ensure_ascii=False, indent=1)


def tokjson(args):
    os.makedirs(args.dir, exist_ok=True)
    write_tokenizer_json(args.dir, gguf_meta(args.vocab), args.merges_as_pairs)

def mlx_affine(w, bits, group):
    """MLX's affine quantization (in doubles; bit-exactness with MLX is not needed here)."""
    n_bins = (1 << bits) - 1
    codes, scales, biases = [], [], []
    for g in range(0, len(w), group):
        x = w[g:g + group]
        lo, hi = min(x), max(x)
        mask = abs(lo) > abs(hi)
        scale = max((hi - lo) / n_bins, 1e-7)
        scale = scale if mask else -scale
        edge = lo if mask else hi
        q0 = round(edge / scale)
        bias = 0.0
        if q0 != 0:
            scale, bias = edge / q0, edge
        codes += [min(max(round((v - bias) / scale), 0), n_bins) for v in x]
        scales.append(scale)
        biases.append(bias)
    return codes, scales, biases


E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


def mlx_mxfp4(w):
    import math
    codes, scales = [], []
    for g in range(0, len(w), 32):
        x = w[g:g + 32]
        s = max(abs(v) for v in x) / 6.0
        e = 0 if s == 0 else max(-127, min(127, round(math.log2(s))))
        scales.append(e + 127)
        codes += [min(range(16), key=lambda k: abs(v / 2.0 ** e - E2M1[k])) for v in x]
    return codes, scales


def pack_codes(codes, bits):
    big = 0
    for i, q in enumerate(codes):
        big |= q << (i * bits)
    return big.to_bytes(len(codes) * bits // 8, "little")


def mlx(args):
    rng = random.Random(args.seed)
    d, ff, vocab, L, E = args.dim, args.dim * 2, 64, args.layers, args.moe
    overrides = {}
    for o in args.override:
        mod, val = o.split("=")
        overrides[mod] = False if val == "false" else {"bits": int(val.split("/")[0]),
                                                       "group_size": int(val.split("/")[1])}
    names = [("model.embed_tokens", (vocab, d)), ("model.norm.weight", (d,)), ("lm_head", (vocab, d))]
    for i in range(L):
        p = "model.layers.%d." % i
        names += [(p + "input_layernorm.weight", (d,)), (p + "post_attention_layernorm.weight", (d,)),
                  (p + "self_attn.q_proj", (d, d)), (p + "self_attn.k_proj", (d // 2, d)),
                  (p + "self_attn.v_proj", (d // 2, d)), (p + "self_attn.o_proj", (d, d))]
        if E and args.moe_form == "switch":
            names += [(p + "mlp.gate", (E, d)), (p + "mlp.switch_mlp.gate_proj", (E, ff, d)),
                      (p + "mlp.switch_mlp.up_proj", (E, ff, d)), (p + "mlp.switch_mlp.down_proj", (E, d, ff))]
        elif E:
            names += [(p + "mlp.gate", (E, d))]
            for e in [str(k) for k in range(E)]:
                names += [(p + "mlp.experts.%s.gate_proj" % e, (ff, d)), (p + "mlp.experts.%s.up_proj" % e, (ff, d)),
                          (p + "mlp.experts.%s.down_proj" % e, (d, ff))]
            names += [(p + "mlp.shared_experts.gate_proj", (ff, d)), (p + "mlp.shared_experts.up_proj", (ff, d)),
                      (p + "mlp.shared_experts.down_proj", (d, ff))]
        else:
            names += [(p + "mlp.gate_proj", (ff, d)), (p + "mlp.up_proj", (ff, d)), (p + "mlp.down_proj", (d, ff))]
    tensors = []
    for name, shape in names:
        n = 1
        for s in shape:
            n *= s
        w = [rng.uniform(-1, 1) for _ in range(n)]
        if name.endswith(".weight"):   # a norm: kept in float
            tensors.append((name, "F16", shape, struct.pack("<%de" % n, *w)))
            continue
        o = overrides.get(name)
        if o is False:
            tensors.append((name + ".weight", "F16", shape, struct.pack("<%de" % n, *w)))
            continue
        bits = o["bits"] if o else args.bits
        group = o["group_size"] if o else args.group_size
        cols = shape[-1]
        qshape = tuple(shape[:-1]) + (cols * bits // 32,)
        sshape = tuple(shape[:-1]) + (cols // group,)
        if args.mode == "mxfp4" and not o:
            codes, sc = mlx_mxfp4(w)
            tensors += [(name + ".weight", "U32", qshape, pack_codes(codes, 4)),
                        (name + ".scales", "U8", sshape, bytes(sc))]
            continue
        codes, sc, bi = mlx_affine(w, bits, group)
        tensors += [(name + ".weight", "U32", qshape, pack_codes(codes, bits)),
                    (name + ".scales", "F16", sshape, struct.pack("<%de" % len(sc), *sc)),
                    (name + ".biases", "F16", sshape, struct.pack("<%de" % len(bi), *bi))]
    tensors = [t for t in tensors if t[0] not in args.omit]
    os.makedirs(args.dir, exist_ok=True)
    q = {"group_size": args.group_size, "bits": args.bits}
    if args.mode != "affine":
        q["mode"] = args.mode
    q.update(overrides)
    cfg = {"architectures": ["Qwen3MoeForCausalLM" if E else "LlamaForCausalLM"],
           "model_type": "qwen3_moe" if E else "llama", "hidden_size": d, "intermediate_size": ff,
           "num_hidden_layers": L, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": vocab,
           "max_position_embeddings": 128, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
           "tie_word_embeddings": False, "bos_token_id": 1, "eos_token_id": 2, "quantization": q,
           "quantization_config": q}
    if E:
        cfg.update({"num_experts": E, "num_experts_per_tok": 2, "moe_intermediate_size": ff})
    write_model(args.dir, cfg, tensors, args.shards, "mlx")
    with open(os.path.join(args.dir, "tokenizer.json"), "w") as f:
        json.dump({"version": "1.0", "model": {"type": "BPE", "vocab": {"<s>": 1, "</s>": 2}, "merges": []}}, f)
    with open(os.path.join(args.dir, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": "<s>", "eos_token": "</s>",
                   "chat_template": "{% for m in messages %}{{ m['content'] }}{% endfor %}"}, f)
    with open(os.path.join(args.dir, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": 1, "eos_token_id": 2}, f)


def rand(args):
    rng = random.Random(args.seed)
    with open(args.file, "wb") as f:
        for _ in range(args.size_mb):
            f.write(rng.randbytes(1 << 20))


def ggufsplit(args):
    with open(args.file, "rb") as f:
        data = f.read()
    pos = 24
    version, n_tensors, n_kv = struct.unpack_from("<IQQ", data, 4)
    fixed = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

    def skip(t, pos):
        if t == 8:
            return pos + 8 + struct.unpack_from("<Q", data, pos)[0]
        if t == 9:
            et, n = struct.unpack_from("<IQ", data, pos)
            pos += 12
            if et in fixed:
                return pos + n * fixed[et]
            for _ in range(n):
                pos = skip(et, pos)
            return pos
        return pos + fixed[t]

    kvs, align = [], 32
    for _ in range(n_kv):
        start = pos
        n, = struct.unpack_from("<Q", data, pos)
        key = data[pos + 8:pos + 8 + n].decode()
        t, = struct.unpack_from("<I", data, pos + 8 + n)
        pos = skip(t, pos + 12 + n)
        if key == "general.alignment":
            align = struct.unpack_from("<I", data, pos - 4)[0]
        kvs.append(data[start:pos])
    infos = []
    for _ in range(n_tensors):
        start = pos
        n, = struct.unpack_from("<Q", data, pos)
        nd, = struct.unpack_from("<I", data, pos + 8 + n)
        pos += 12 + n + 8 * nd + 4
        off, = struct.unpack_from("<Q", data, pos)
        pos += 8
        infos.append((data[start:pos - 8], off))
    base = (pos + align - 1) // align * align
    ends = sorted(o for _, o in infos)[1:] + [len(data) - base]
    size = {o: e - o for o, e in zip(sorted(o for _, o in infos), ends)}

    def kv(key, t, fmt, v):
        k = key.encode()
        return struct.pack("<Q", len(k)) + k + struct.pack("<I", t) + struct.pack(fmt, v)

    per = (n_tensors + args.n - 1) // args.n
    for i in range(args.n):
        part = infos[i * per:(i + 1) * per]
        meta = (kvs if i == 0 else []) + [kv("split.no", 2, "<H", i),
                                           kv("split.count", 2, "<H", args.count if args.count is not None else args.n),
                                           kv("split.tensors.count", 5, "<i",
                                              args.tensors_count if args.tensors_count is not None else n_tensors)]
        head, body, off = bytearray(), bytearray(), 0
        head += b"GGUF" + struct.pack("<IQQ", version, len(part), len(meta)) + b"".join(meta)
        for info, o in part:
            head += info + struct.pack("<Q", off)
            chunk = data[base + o:base + o + size[o]]
            chunk += b"\0" * (-len(chunk) % align)
            body += chunk
            off += len(chunk)
        head += b"\0" * (-len(head) % align)
        with open("%s-%05d-of-%05d.gguf" % (args.prefix, i + 1, args.n), "wb") as f:
            f.write(head + body)


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("hf")
    a.add_argument("dir")
    a.add_argument("--shards", type=int, default=1)
    a.add_argument("--dtype", default="F32")
    a.add_argument("--layers", type=int, default=2)
    a.add_argument("--dim", type=int, default=16)
    a.add_argument("--seed", type=int, default=1)
    a.add_argument("--arch", default="llama", choices=["llama", "qwen2", "qwen3"])
    a.add_argument("--tokenizer-from", default=None)
    a.add_argument("--merges-as-pairs", action="store_true")
    k = sub.add_parser("tokjson")
    k.add_argument("vocab")
    k.add_argument("dir")
    k.add_argument("--merges-as-pairs", action="store_true")
    r = sub.add_parser("random")
    r.add_argument("file")
    r.add_argument("size_mb", type=int)
    r.add_argument("--seed", type=int, default=1)
    x = sub.add_parser("mlx")
    x.add_argument("dir")
    x.add_argument("--bits", type=int, default=4)
    x.add_argument("--group-size", type=int, default=32)
    x.add_argument("--mode", default="affine", choices=["affine", "mxfp4"])
    x.add_argument("--shards", type=int, default=1)
    x.add_argument("--layers", type=int, default=2)
    x.add_argument("--dim", type=int, default=64)
    x.add_argument("--moe", type=int, default=0)
    x.add_argument("--moe-form", default="switch", choices=["switch", "experts"])
    x.add_argument("--override", action="append", default=[])
    x.add_argument("--omit", action="append", default=[])
    x.add_argument("--seed", type=int, default=1)
    g = sub.add_parser("ggufsplit")
    g.add_argument("file")
    g.add_argument("prefix")
    g.add_argument("n", type=int)
    g.add_argument("--count", type=int, default=None)
    g.add_argument("--tensors-count", type=int, default=None)
    args = ap.parse_args()
    {"hf": hf, "random": rand, "mlx": mlx, "tokjson": tokjson, "ggufsplit": ggufsplit}[args.cmd](args)


if __name__ == "__main__":
    main()
