#!/usr/bin/env python3
"""make_corpus.py: write the small seed inputs under tests/fuzz/corpus/<target>/ (run from
anywhere; the files are checked in, this script is how they were made). Every seed is built
here from the formats' specifications, none is copied from a model."""
import json
import os
import struct

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
SP = "\u2581"


def put(target, name, data):
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# ---------------------------------------------------------------- GGUF
def gstr(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


T_U32, T_I32, T_F32, T_BOOL, T_STR, T_ARR, T_U64 = 4, 5, 6, 7, 8, 9, 10


def kv(key, t, v):
    out = gstr(key) + struct.pack("<I", t)
    if t == T_U32:
        out += struct.pack("<I", v)
    elif t == T_I32:
        out += struct.pack("<i", v)
    elif t == T_F32:
        out += struct.pack("<f", v)
    elif t == T_BOOL:
        out += struct.pack("<B", v)
    elif t == T_STR:
        out += gstr(v)
    elif t == T_ARR:
        et, items = v
        out += struct.pack("<IQ", et, len(items))
        for it in items:
            if et == T_STR:
                out += gstr(it)
            elif et == T_F32:
                out += struct.pack("<f", it)
            elif et == T_I32:
                out += struct.pack("<i", it)
    return out


def gguf(kvs, tensors=(), align=32):
    """tensors: (name, ggml type, dims, data bytes); F32 = 0."""
    hdr = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)) + b"".join(kvs)
    off, infos, blobs = 0, b"", []
    for name, typ, dims, data in tensors:
        infos += gstr(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        infos += struct.pack("<IQ", typ, off)
        pad = (-len(data)) % align
        blobs.append(data + b"\0" * pad)
        off += len(data) + pad
    hdr += infos
    hdr += b"\0" * ((-len(hdr)) % align)
    return hdr + b"".join(blobs)


f32 = lambda *xs: b"".join(struct.pack("<f", x) for x in xs)

LLAMA_KV = [
    kv("general.architecture", T_STR, "llama"),
    kv("general.name", T_STR, "seed"),
    kv("llama.embedding_length", T_U32, 8),
    kv("llama.block_count", T_U32, 1),
    kv("llama.attention.head_count", T_U32, 2),
    kv("llama.attention.head_count_kv", T_U32, 1),
    kv("llama.feed_forward_length", T_U32, 16),
    kv("llama.context_length", T_U32, 64),
    kv("llama.rope.dimension_count", T_U32, 4),
    kv("llama.attention.layer_norm_rms_epsilon", T_F32, 1e-5),
    kv("llama.rope.freq_base", T_F32, 10000.0),
    kv("llama.rope.scaling.type", T_STR, "linear"),
    kv("llama.rope.scaling.factor", T_F32, 2.0),
]
SPM_TOKENS = ["<unk>", "<s>", "</s>", "<0x0A>", SP, "a", "b", "ab", SP + "a", "<|end|>"]
SPM_KV = [
    kv("tokenizer.ggml.model", T_STR, "llama"),
    kv("tokenizer.ggml.tokens", T_ARR, (T_STR, SPM_TOKENS)),
    kv("tokenizer.ggml.scores", T_ARR, (T_F32, [0, 0, 0, 0, -1, -2, -3, -1.5, -1.2, 0])),
    kv("tokenizer.ggml.token_type", T_ARR, (T_I32, [2, 3, 3, 6, 1, 1, 1, 1, 1, 3])),
    kv("tokenizer.ggml.bos_token_id", T_U32, 1),
    kv("tokenizer.ggml.eos_token_id", T_U32, 2),
    kv("tokenizer.ggml.add_bos_token", T_BOOL, 1),
]
BPE_KV = [
    kv("tokenizer.ggml.model", T_STR, "gpt2"),
    kv("tokenizer.ggml.pre", T_STR, "llama-bpe"),
    kv("tokenizer.ggml.tokens", T_ARR, (T_STR, ["a", "b", "c", "ab", "bc", "\u0120", "\u0120a", "<|eot_id|>"])),
    kv("tokenizer.ggml.merges", T_ARR, (T_STR, ["b c", "a b", "\u0120 a"])),
    kv("tokenizer.ggml.token_type", T_ARR, (T_I32, [1, 1, 1, 1, 1, 1, 1, 3])),
    kv("tokenizer.ggml.eos_token_id", T_U32, 7),
]
# WordPiece in the GGUF converter's form: "▁" starts a word, continuation pieces are bare
WPM_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", SP + "hello", SP + "world", "s", SP + "!", SP + "caf", "\u00e9",
              SP + "\u4e2d", SP + "1", "2", SP + "x", "x"]
WPM_KV = [
    kv("tokenizer.ggml.model", T_STR, "bert"),
    kv("tokenizer.ggml.pre", T_STR, "bert-bge"),
    kv("tokenizer.ggml.tokens", T_ARR, (T_STR, WPM_TOKENS)),
    kv("tokenizer.ggml.token_type", T_ARR, (T_I32, [3, 3, 3, 3] + [1] * (len(WPM_TOKENS) - 4))),
    kv("tokenizer.ggml.unknown_token_id", T_U32, 1),
    kv("tokenizer.ggml.seperator_token_id", T_U32, 3),
    kv("tokenizer.ggml.padding_token_id", T_U32, 0),
    kv("tokenizer.ggml.cls_token_id", T_U32, 2),
]
TENSORS = [("token_embd.weight", 0, [8, 2], f32(*range(16))), ("output_norm.weight", 0, [8], f32(*([1.0] * 8))),
           ("empty", 0, [0], b"")]

put("fuzz_gguf", "llama-tiny.gguf", gguf(LLAMA_KV + SPM_KV, TENSORS))
put("fuzz_gguf", "align64.gguf", gguf([kv("general.alignment", T_U32, 64)], TENSORS[:1], 64))
put("fuzz_gguf", "nested-array.gguf", gguf([kv("a.arr", T_ARR, (T_I32, [1, -2, 3])),
                                           kv("a.strs", T_ARR, (T_STR, ["", "x", "yz"]))]))
put("fuzz_config", "llama.gguf", gguf(LLAMA_KV + SPM_KV[:2]))
put("fuzz_config", "qwen3-moe.gguf", gguf([
    kv("general.architecture", T_STR, "qwen3moe"), kv("qwen3moe.embedding_length", T_U32, 16),
    kv("qwen3moe.block_count", T_U32, 2), kv("qwen3moe.attention.head_count", T_U32, 4),
    kv("qwen3moe.attention.key_length", T_U32, 8), kv("qwen3moe.feed_forward_length", T_U32, 32),
    kv("qwen3moe.context_length", T_U32, 128), kv("qwen3moe.expert_count", T_U32, 4),
    kv("qwen3moe.expert_used_count", T_U32, 2), kv("qwen3moe.vocab_size", T_U32, 100)]))
put("fuzz_config", "bert.gguf", gguf([
    kv("general.architecture", T_STR, "bert"), kv("bert.embedding_length", T_U32, 16),
    kv("bert.block_count", T_U32, 2), kv("bert.attention.head_count", T_U32, 4),
    kv("bert.feed_forward_length", T_U32, 32), kv("bert.context_length", T_U32, 64),
    kv("bert.attention.layer_norm_epsilon", T_F32, 1e-12), kv("bert.pooling_type", T_U32, 1),
    kv("bert.attention.causal", T_BOOL, 0), kv("bert.vocab_size", T_U32, 100)]))
put("fuzz_tokenizer", "spm.gguf", gguf(SPM_KV))
put("fuzz_tokenizer", "bpe.gguf", gguf(BPE_KV))
put("fuzz_tokenizer", "wpm.gguf", gguf(WPM_KV))

# ---------------------------------------------------------------- safetensors
def safetensors(tensors, meta=None):
    hdr, data = {}, b""
    if meta:
        hdr["__metadata__"] = meta
    for name, dtype, shape, raw in tensors:
        hdr[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * ((-len(h)) % 8)
    return struct.pack("<Q", len(h)) + h + data


put("fuzz_safetensors", "two.safetensors", safetensors(
    [("a.weight", "F32", [2, 2], f32(1, 2, 3, 4)), ("b.bias", "F16", [3], b"\0\x3c" * 3)], {"format": "pt"}))
put("fuzz_safetensors", "dtypes.safetensors", safetensors(
    [("u8", "U8", [4], b"abcd"), ("bf", "BF16", [1, 1], b"\x80\x3f"), ("e", "I64", [0, 3], b""),
     ("b", "BOOL", [2], b"\1\0"), ("f8", "F8_E4M3", [2], b"\1\2")]))
put("fuzz_safetensors", "empty-header.safetensors", struct.pack("<Q", 8) + b"{}      ")

# ---------------------------------------------------------------- manifest and names
D = "sha256:" + "ab" * 32
manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.mstore.model.config.v1+json", "digest": D, "size": 120},
            "layers": [{"mediaType": "application/vnd.ollama.image.tensor", "digest": "sha256:" + "0f" * 32,
                        "size": 4096, "name": "blk.0.attn_q.weight"},
                       {"mediaType": "application/vnd.ollama.image.template", "digest": D, "size": 10}]}
put("fuzz_manifest", "oci.json", json.dumps(manifest))
manifest["mediaType"] = "application/vnd.docker.distribution.manifest.v2+json"
manifest["config"]["mediaType"] = "application/vnd.docker.container.image.v1+json"
put("fuzz_manifest", "docker.json", json.dumps(manifest, indent=1))
put("fuzz_manifest", "name-full", "registry.example.com:5000/team/model-x:v1.2")
put("fuzz_manifest", "name-short", "tinyllama")

# ---------------------------------------------------------------- config blob
cfg = {"architecture": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
       "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 256, "max_position_embeddings": 512,
       "rms_norm_eps": 1e-6, "rope_theta": 500000.0, "bos_token_id": 1, "eos_token_id": [2, 3],
       "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                        "original_max_position_embeddings": 256},
       "source": {"format": "safetensors", "size": 1000}}
put("fuzz_config", "llama3.json", json.dumps(cfg))
put("fuzz_config", "gemma3.json", json.dumps({
    "architecture": "gemma3_text", "hidden_size": 32, "num_hidden_layers": 6, "num_attention_heads": 2,
    "head_dim": 16, "intermediate_size": 64, "vocab_size": 300, "max_position_embeddings": 1024,
    "final_logit_softcapping": 30.0, "hf_config": {"sliding_window_pattern": 6, "rope_local_base_freq": 10000.0,
                                                   "query_pre_attn_scalar": 16, "sliding_window": 512}}))
put("fuzz_config", "phi3-longrope.json", json.dumps({
    "architecture": "phi3", "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 4,
    "intermediate_size": 64, "vocab_size": 300, "max_position_embeddings": 4096,
    "rope_scaling": {"type": "longrope", "long_factor": [1.0, 1.5, 2.0, 4.0], "short_factor": [1.0, 1.0, 1.1, 1.2],
                     "attention_factor": 1.2},
    "hf_config": {"original_max_position_embeddings": 1024}}))
put("fuzz_config", "qwen2moe.json", json.dumps({
    "architecture": "qwen2_moe", "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 4,
    "intermediate_size": 64, "vocab_size": 300, "max_position_embeddings": 1024,
    "hf_config": {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 16,
                  "shared_expert_intermediate_size": 32, "use_sliding_window": False, "norm_topk_prob": False}}))

put("fuzz_config", "nomic-bert.json", json.dumps({
    "architecture": "nomic_bert", "vocab_size": 300, "pooling_type": 2,
    "hf_config": {"n_embd": 32, "n_layer": 1, "n_head": 4, "n_inner": 64, "n_positions": 128,
                  "layer_norm_epsilon": 1e-12, "rotary_emb_base": 1000, "causal": False}}))

# ---------------------------------------------------------------- tokenizer.json
bl = {"added_tokens": [{"id": 5, "content": "<|end|>", "special": True}, {"id": 6, "content": "<U>", "special": False}],
      "normalizer": None, "pre_tokenizer": {"type": "ByteLevel", "use_regex": True},
      "post_processor": {"type": "ByteLevel"}, "decoder": {"type": "ByteLevel"},
      "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "c": 2, "ab": 3, "bc": 4, "\u0120": 7, "\u0120a": 8},
                "merges": ["b c", "a b", "\u0120 a"]}}
put("fuzz_tokenizer", "bytelevel.json", json.dumps(bl))
put("fuzz_tokenizer", "bytelevel-config.json", json.dumps(bl).encode() + b"\0" + json.dumps(
    {"add_bos_token": True, "bos_token": "<|end|>", "eos_token": {"content": "<|end|>"}}).encode())
spm = {"added_tokens": [{"id": 0, "content": "<unk>", "special": True}, {"id": 1, "content": "<s>", "special": True},
                        {"id": 2, "content": "</s>", "special": True}],
       "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": SP},
                                                          {"type": "Replace", "pattern": {"String": " "}, "content": SP}]},
       "pre_tokenizer": None,
       "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                                                   {"Sequence": {"id": "A", "type_id": 0}}],
                          "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
       "decoder": {"type": "Sequence", "decoders": [{"type": "ByteFallback"}]},
       "model": {"type": "BPE", "byte_fallback": True, "unk_token": "<unk>",
                 "vocab": {"<unk>": 0, "<s>": 1, "</s>": 2, "<0x0A>": 3, SP: 4, "a": 5, "b": 6, "c": 7, "ab": 8,
                           "bc": 9, SP + "a": 10},
                 "merges": [["b", "c"], ["a", "b"], [SP, "a"]]}}
put("fuzz_tokenizer", "spm.json", json.dumps(spm))
split = dict(bl)
split["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": "\\p{N}{1,3}"}, "behavior": "Isolated", "invert": False},
    {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False}]}
put("fuzz_tokenizer", "split.json", json.dumps(split))
# o200k's (gpt-4o) and DeepSeek V3's Split regexes, as their tokenizer.json files write them
UPPER, LOWER = "[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]", "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]"
CONTR = "(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
O200K = ("[^\\r\\n\\p{L}\\p{N}]?" + UPPER + "*" + LOWER + "+" + CONTR + "|[^\\r\\n\\p{L}\\p{N}]?" + UPPER + "+" +
         LOWER + "*" + CONTR + "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")
DSV3 = ["\\p{N}{1,3}", "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
        "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+|"
        " ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"]
for name, res in (("split-o200k.json", [O200K]), ("split-deepseek-v3.json", DSV3)):
    d = dict(bl)
    d["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": r}, "behavior": "Isolated", "invert": False} for r in res] + [
        {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False}]}
    put("fuzz_tokenizer", name, json.dumps(d))
wp = {"added_tokens": [{"id": i, "content": c, "special": True} for i, c in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]"])],
      "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True, "strip_accents": None,
                     "lowercase": True},
      "pre_tokenizer": {"type": "BertPreTokenizer"},
      "post_processor": {"type": "TemplateProcessing",
                         "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                                    {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
                         "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [2], "tokens": ["[CLS]"]},
                                            "[SEP]": {"id": "[SEP]", "ids": [3], "tokens": ["[SEP]"]}}},
      "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
      "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##", "max_input_chars_per_word": 8,
                "vocab": {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "hello": 4, "world": 5, "##s": 6, "!": 7,
                          "caf": 8, "##\u00e9": 9, "\u4e2d": 10, "1": 11, "##2": 12, "x": 13, "##x": 14}}}
put("fuzz_tokenizer", "wordpiece.json", json.dumps(wp))
bp = dict(wp, post_processor={"type": "BertProcessing", "sep": ["[SEP]", 3], "cls": ["[CLS]", 2]})
put("fuzz_tokenizer", "wordpiece-bertproc-config.json", json.dumps(bp).encode() + b"\0" + json.dumps(
    {"cls_token": "[CLS]", "sep_token": "[SEP]", "unk_token": "[UNK]", "pad_token": "[PAD]"}).encode())

# ---------------------------------------------------------------- registry responses
# first byte: 0 headers, 1 challenge, 2 token, 3 error body, 4 url origin, 5 ranges sidecar, 6 tar
put("fuzz_registry", "headers", b"\0HTTP/1.1 100 Continue\r\n\r\nHTTP/2 206 \r\nDocker-Content-Digest: " + D.encode() +
    b"\r\nLocation: https://r.example/v2/x/blobs/uploads/abc?_state=1\r\ncontent-range: bytes 0-9/100\r\n"
    b"WWW-Authenticate: Bearer realm=\"https://auth.example/token\",service=\"r\"\r\n\r\n")
put("fuzz_registry", "challenge-bearer",
    b"\1Bearer realm=\"https://auth.example/token\",service=\"registry.example\",scope=\"repository:a/b:pull,push\"")
put("fuzz_registry", "challenge-basic", b"\1Basic realm=\"Registry \\\"Realm\\\"\"")
put("fuzz_registry", "token", b"\2" + json.dumps({"token": "abc.def", "expires_in": 300}).encode())
put("fuzz_registry", "token-access", b"\2" + json.dumps({"access_token": "xyz"}).encode())
put("fuzz_registry", "error-body", b"\3" + json.dumps({"errors": [{"code": "MANIFEST_UNKNOWN",
                                                                   "message": "manifest unknown\x1b[31m"}]}).encode())
put("fuzz_registry", "origin", b"\4HTTPS://Registry.Example:443/v2/a/blobs/uploads/1?x=y")
put("fuzz_registry", "origin-v6", b"\4http://[::1]/v2/")
blob, part = 150, 64
put("fuzz_registry", "ranges", b"\5" + struct.pack("<QQ", blob, part) + b"MSPULL1\n" +
    struct.pack("<QQQ", blob, part, 3) + struct.pack("<QQQ", 64, 10, 22))
# 6: a tar archive (registry/tar.c); the second byte's low bit asks for a frame
import io as _io
import tarfile as _tarfile


def _tar(fmt, entries):
    b = _io.BytesIO()
    with _tarfile.open(fileobj=b, mode="w", format=fmt) as t:
        for name, payload in entries:
            i = _tarfile.TarInfo(name)
            i.size = len(payload)
            t.addfile(i, _io.BytesIO(payload))
    return b.getvalue()


put("fuzz_registry", "tar-pax", b"\6\0" + _tar(_tarfile.PAX_FORMAT, [("./model.gguf", b"GGUF" + b"\0" * 60)]))
put("fuzz_registry", "tar-gnu-long", b"\6\0" + _tar(_tarfile.GNU_FORMAT, [("d/" * 60 + "config.json", b"{}")]))
_t = _tar(_tarfile.USTAR_FORMAT, [("model.gguf", b"GGUF" + b"\0" * 596)])
put("fuzz_registry", "tar-frame", b"\6\1" + _t[:512] + _t[512 + 600:])

# ---------------------------------------------------------------- Go templates
put("fuzz_gotmpl", "chatml.tmpl", "{{- range .Messages }}<|im_start|>{{ .Role }}\n{{ .Content }}<|im_end|>\n"
    "{{ end }}<|im_start|>assistant\n")
put("fuzz_gotmpl", "llama3.tmpl", "{{ if .System }}<|start_header_id|>system<|end_header_id|>\n\n{{ .System }}"
    "<|eot_id|>{{ end }}{{ if .Prompt }}<|start_header_id|>user<|end_header_id|>\n\n{{ .Prompt }}<|eot_id|>"
    "{{ end }}<|start_header_id|>assistant<|end_header_id|>\n\n{{ .Response }}<|eot_id|>")
put("fuzz_gotmpl", "vars.tmpl", "{{- $last := len .Messages }}{{ range $i, $m := .Messages }}"
    "{{ if eq $m.Role \"user\" }}[INST] {{ $m.Content }}{{ else if and (eq $m.Role \"assistant\") "
    "(not (eq $i 0)) }}{{ slice $m.Content 0 1 }}{{ end }}{{- end }}{{/* comment */}}")
put("fuzz_gotmpl", "printf-nested.tmpl", '{{ $x := "ab" }}{{ range $i, $m := .Messages }}{{ range $.Messages }}'
    '{{ $x = printf "%s%d%q" $x $i .Role }}{{ end }}{{ end }}{{ len $x }}{{ index .Messages 0 }}')
put("fuzz_gotmpl", "jinja.tmpl", "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}{% endfor %}")
# Jinja as Hugging Face chat templates write it (the statements, filters and whitespace control)
put("fuzz_jinja", "turns.jinja", "{{- bos_token }}{%- for m in messages %}\n    {%- if m.role == 'system' %}"
    "<<SYS>>{{ m.content | trim }}<</SYS>>\n    {%- elif loop.last and add_generation_prompt %}[INST] {{ m['content'] }} [/INST]"
    "\n    {%- else %}{{ m.role | upper ~ ': ' ~ m.content }}{{ eos_token if m.role == 'assistant' }}\n    {%- endif %}"
    "\n{%- endfor %}")
put("fuzz_jinja", "tools.jinja", "{%- if tools is defined and tools %}{% for t in tools %}{{ t | tojson(indent=4) }}\n"
    "{% endfor %}{% endif %}{% for m in messages if m.role != 'x' %}{% if m.tool_calls is defined %}"
    "{% for c in m.tool_calls %}{{ c.function.name }}({{ c.function.arguments | tojson }}){% endfor %}"
    "{% elif m.role == 'tool' %}<r name={{ m.name }}>{{ m.content }}</r>{% else %}{{ m.content }}{% endif %}"
    "{% else %}empty{% endfor %}")
put("fuzz_jinja", "features.jinja", "{% set ns = namespace(a=[], n=0) %}{% for k, v in {'x': 1, 'y': [2]}.items() %}"
    "{% set ns.a = ns.a + [k] %}{% set ns.n = ns.n + loop.index0 %}{% endfor %}{{ ns.a[::-1] | join('-') }}"
    "{% macro f(x=1) %}{{ caller() if caller is defined }}{{ x ~ 'y' }}{% endmacro %}{% call f(2) %}c{% endcall %}"
    "{{ 'a b'.split() | map('upper') | list }}{{ {'k': none}.get('k') is none }}{# c #}{% filter lower %}A{% endfilter %}"
    "{{ (7 // 2, 2 ** 3, -1 % 5) }}{{ 'ab'[1:] if 'a' in 'ab' else raise_exception('no') }}{{ strftime_now('%Y') }}")

# ---------------------------------------------------------------- Modelfile and params
put("fuzz_modelfile", "Modelfile", 'FROM ./model.gguf\nPARAMETER temperature 0.7\nPARAMETER top_k 20\n'
    'PARAMETER stop "<|im_end|>"\nPARAMETER stop </s>\nSYSTEM """You are\nterse."""\n'
    'TEMPLATE "{{ .Prompt }}"\nLICENSE MIT\nMESSAGE user hi\nMESSAGE assistant hello\n# comment\n')
put("fuzz_modelfile", "params.json", json.dumps({"temperature": 0.2, "top_k": 5, "top_p": 0.9, "min_p": 0.1,
                                                 "repeat_penalty": 1.1, "repeat_last_n": 32, "seed": 7,
                                                 "num_predict": -1, "num_ctx": 4096, "stop": ["</s>", "USER:"],
                                                 "mirostat": 2}))

# ---------------------------------------------------------------- serve: Origin, Host, request bodies
put("fuzz_serve", "origin", b"\0https://chat.example.com, http://*.lan.example:8080\nhttp://box.lan.example:8080")
put("fuzz_serve", "origin-default", b"\0\nvscode-webview://abc")
put("fuzz_serve", "host", b"\1localhost:11434")
put("fuzz_serve", "host-v6", b"\1[::ffff:127.0.0.1]:80")
put("fuzz_serve", "host-private", b"\x01172.16.0.1")
put("fuzz_serve", "body-ollama", b"\2" + json.dumps({"model": "m", "prompt": "hi", "options": {
    "temperature": 0.5, "top_k": 3, "num_ctx": 2048, "num_predict": 8, "seed": 1}}).encode())
put("fuzz_serve", "body-openai", b"\2" + json.dumps({"model": "m", "messages": [], "temperature": 1.5,
                                                       "top_p": 0.5, "max_tokens": 9, "seed": 3}).encode())
# each endpoint's body (the first byte: 3 generate, 4 chat, 5 completions, 6 chat completions, 7 create)
put("fuzz_serve", "generate", b"\3" + json.dumps({"model": "m", "prompt": "hi", "system": "s", "stream": False,
    "keep_alive": "5m", "options": {"temperature": 0.5, "stop": ["a", "b"]}}).encode())
put("fuzz_serve", "chat", b"\4" + json.dumps({"model": "m", "messages": [{"role": "system", "content": "be brief"},
    {"role": "user", "content": "hi"}], "options": {"num_ctx": 64}}).encode())
put("fuzz_serve", "completions", b"\5" + json.dumps({"model": "m", "prompt": ["Once"], "max_tokens": 8, "stop": "x",
                                                       "temperature": 1}).encode())
put("fuzz_serve", "chat-completions", b"\6" + json.dumps({"model": "m", "messages": [
    {"role": "developer", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
    {"role": "user", "content": "hi"}], "stream": True, "stream_options": {"include_usage": True}}).encode())
put("fuzz_serve", "create", b"\7" + json.dumps({"model": "m2", "from": "m", "system": "s", "template": "{{ .Prompt }}",
    "parameters": {"temperature": 0.2, "stop": ["x"]}, "messages": [{"role": "user", "content": "a"}],
    "license": ["MIT"]}).encode())
# the embedding endpoints (8 /api/embed, 9 /api/embeddings, 10 /v1/embeddings)
put("fuzz_serve", "embed", b"\x08" + json.dumps({"model": "m", "input": ["a", "b c"], "truncate": False,
    "dimensions": 4, "keep_alive": "1m", "options": {"num_ctx": 64}}).encode())
put("fuzz_serve", "embeddings", b"\x09" + json.dumps({"model": "m", "prompt": "why", "options": {"num_ctx": 8}}).encode())
put("fuzz_serve", "v1-embeddings", b"\x0a" + json.dumps({"model": "m", "input": [[101, 7592, 102], [5]],
    "encoding_format": "base64", "dimensions": 2, "user": "u"}).encode())
put("fuzz_serve", "v1-embeddings-text", b"\x0a" + json.dumps({"model": "m", "input": "x y",
    "encoding_format": "float"}).encode())
# formats and tools: a schema in each place one is read, a forced call, a call answered by a tool
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
TOOL = {"type": "function", "function": {"name": "f", "parameters": SCHEMA}}
put("fuzz_serve", "create-format", b"\7" + json.dumps({"model": "m2", "from": "m",
    "parameters": {"format": SCHEMA}}).encode())
put("fuzz_serve", "chat-format-tools", b"\4" + json.dumps({"model": "m", "format": SCHEMA, "tools": [TOOL],
    "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "",
    "tool_calls": [{"function": {"name": "f", "arguments": {"n": 1}}}]},
    {"role": "tool", "content": "2", "tool_name": "f"}]}).encode())
put("fuzz_serve", "chat-completions-tools", b"\6" + json.dumps({"model": "m", "tools": [TOOL],
    "tool_choice": {"type": "function", "function": {"name": "f"}},
    "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": SCHEMA, "strict": True}},
    "messages": [{"role": "user", "content": "hi"}]}).encode())
