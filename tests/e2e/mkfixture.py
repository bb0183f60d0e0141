#!/usr/bin/env python3
"""mkfixture.py: model fixtures for the end-to-end tests, written with the standard library only.

  mkfixture.py hf DIR [--shards N] [--dtype F32|F16|BF16] [--layers L] [--dim D] [--seed S]
      a Hugging Face llama-style directory: config.json, model.safetensors (or N shards with
      model.safetensors.index.json), tokenizer.json, tokenizer_config.json (with a chat
      template) and generation_config.json. Values are deterministic in the seed.
  mkfixture.py random FILE SIZE_MB [--seed S]
      SIZE_MB of deterministic pseudo-random bytes.
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
    names = [("model.embed_tokens.weight", (vocab, d)), ("model.norm.weight", (d,)), ("lm_head.weight", (vocab, d))]
    for i in range(L):
        p = "model.layers.%d." % i
        names += [(p + "input_layernorm.weight", (d,)), (p + "post_attention_layernorm.weight", (d,)),
                  (p + "self_attn.q_proj.weight", (d, d)), (p + "self_attn.k_proj.weight", (d // 2, d)),
                  (p + "self_attn.v_proj.weight", (d // 2, d)), (p + "self_attn.o_proj.weight", (d, d)),
                  (p + "mlp.gate_proj.weight", (ff, d)), (p + "mlp.up_proj.weight", (ff, d)),
                  (p + "mlp.down_proj.weight", (d, ff))]
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
    with open(os.path.join(args.dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    if args.shards <= 1:
        with open(os.path.join(args.dir, "model.safetensors"), "wb") as f:
            f.write(safetensors_bytes(tensors, {"format": "pt"}))
    else:
        per = (len(tensors) + args.shards - 1) // args.shards
        wm = {}
        for s in range(args.shards):
            part = tensors[s * per:(s + 1) * per]
            fn = "model-%05d-of-%05d.safetensors" % (s + 1, args.shards)
            with open(os.path.join(args.dir, fn), "wb") as f:
                f.write(safetensors_bytes(part, {"format": "pt"}))
            for t in part:
                wm[t[0]] = fn
        with open(os.path.join(args.dir, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": sum(len(t[3]) for t in tensors)}, "weight_map": wm}, f, indent=2)
    tok = {"version": "1.0", "model": {"type": "BPE", "vocab": {"<s>": 1, "</s>": 2}, "merges": []}}
    with open(os.path.join(args.dir, "tokenizer.json"), "w") as f:
        json.dump(tok, f)
    with open(os.path.join(args.dir, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": "<s>", "eos_token": "</s>",
                   "chat_template": "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"}, f)
    with open(os.path.join(args.dir, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": 1, "eos_token_id": 2}, f)


def rand(args):
    rng = random.Random(args.seed)
    with open(args.file, "wb") as f:
        for _ in range(args.size_mb):
            f.write(rng.randbytes(1 << 20))


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
    r = sub.add_parser("random")
    r.add_argument("file")
    r.add_argument("size_mb", type=int)
    r.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    {"hf": hf, "random": rand}[args.cmd](args)


if __name__ == "__main__":
    main()
