#!/usr/bin/env python3
"""mkfixture.py: model fixtures for the end-to-end tests, written with the standard library only.

  mkfixture.py hf DIR [--shards N] [--dtype F32|F16|BF16] [--layers L] [--dim D] [--seed S]
      a Hugging Face llama-style directory: config.json, model.safetensors (or N shards with
      model.safetensors.index.json), tokenizer.json, tokenizer_config.json (with a chat
      template) and generation_config.json. Values are deterministic in the seed.
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
    with open(os.path.join(args.dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    if args.shards <= 1:
        with open(os.path.join(args.dir, "model.safetensors"), "wb") as f:
            f.write(safetensors_bytes(tensors, {"format": "mlx"}))
    else:
        per = (len(tensors) + args.shards - 1) // args.shards
        wm = {}
        for s in range(args.shards):
            part = tensors[s * per:(s + 1) * per]
            fn = "model-%05d-of-%05d.safetensors" % (s + 1, args.shards)
            with open(os.path.join(args.dir, fn), "wb") as f:
                f.write(safetensors_bytes(part, {"format": "mlx"}))
            for t in part:
                wm[t[0]] = fn
        with open(os.path.join(args.dir, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": sum(len(t[3]) for t in tensors)}, "weight_map": wm}, f, indent=2)
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
    args = ap.parse_args()
    {"hf": hf, "random": rand, "mlx": mlx}[args.cmd](args)


if __name__ == "__main__":
    main()
