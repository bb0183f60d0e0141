/* gguf_config.c: GGUF metadata -> the config blob's model fields (import.h's config contract):
 * the one reader of a GGUF file's hyper-parameters. `mstore import` stores what it returns (plus
 * the quantization summary and the source's file, digest and size); `run --gguf` hands the same
 * object to the runtime's config reader, so a GGUF file runs the same whether it was imported
 * first or not.
 *
 * Keys are "<arch>.<name>" under the file's own architecture name (general.architecture, or
 * "unknown"). A key that is absent gives JSON null (or the default llama.cpp applies); a key that
 * is present must have a usable type and a finite value, else the whole file is refused, naming
 * the key: a file that says nonsense is not stored under a config that quietly says otherwise. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "format/format.h"

#define ARCH_MAX 128

typedef struct reader {
    const gguf_file *g;
    const char *arch;
    json_t *c;
} reader;

static const char *akey(char *buf, size_t len, const char *arch, const char *name)
{
    snprintf(buf, len, "%s.%s", arch, name);
    return buf;
}

/* Set c[field] = v (a new reference; NULL, as jansson gives for invalid UTF-8, sets nothing). */
static void set(json_t *c, const char *field, json_t *v)
{
    if (v)
        json_object_set_new(c, field, v);
}

/* An unsigned integer key into *out; 0 when present, 1 when absent, <0 on a bad value. */
static int get_uint(const gguf_file *g, const char *key, json_int_t *out)
{
    uint64_t v;
    int rc = gguf_get_uint(g, key, &v);

    if (rc == MS_ENOTFOUND)
        return 1;
    if (rc < 0)
        return rc;
    if (v > INT64_MAX)
        return ms_err(MS_EINVALID, "kv '%s': %llu out of range [0, %lld]", key, (unsigned long long)v,
                      (long long)INT64_MAX);
    *out = (json_int_t)v;
    return 0;
}

/* c[field] = "<arch>.<name>" as an integer, or null when absent (a field already set is kept). */
static int put_uint(reader *r, const char *field, const char *name)
{
    char k[256];
    json_int_t v = 0;   /* set when rc == 0; gcc 12 for aarch64 cannot see that */
    int rc = get_uint(r->g, akey(k, sizeof k, r->arch, name), &v);

    if (rc < 0)
        return rc;
    if (rc == 0)
        set(r->c, field, json_integer(v));
    else if (!json_object_get(r->c, field))
        set(r->c, field, json_null());
    return 0;
}

/* A float key into *out; 0 when present, 1 when absent, <0 on a bad value. JSON has no inf or
 * NaN, and no hyper-parameter may be one: refused, in the runtime's words for the field. */
static int get_float(const gguf_file *g, const char *key, const char *what, double *out)
{
    double v;
    int rc = gguf_get_float(g, key, &v);

    if (rc == MS_ENOTFOUND)
        return 1;
    if (rc < 0)
        return rc;
    if (!isfinite(v))
        return ms_err(MS_EINVALID, "kv '%s': %s %g out of range (not a finite number)", key, what, v);
    *out = v;
    return 0;
}

/* The rope scaling object, or null. A scaling type other than "none" is copied with its factor
 * and original context. Phi-3 128k: convert_hf_to_gguf keeps longrope's factors as tensors
 * (they stay tensors in the store too) and writes no scaling type; llama.cpp applies those
 * tensors whatever the type says, so their presence means longrope. attn_factor is kept
 * wherever the file gives it: longrope scales attention by it. */
static int put_rope_scaling(reader *r)
{
    const char *s;
    size_t len;
    json_int_t v = 0;   /* set when rc == 0; gcc 12 for aarch64 cannot see that */
    double f = 0;
    char k[256];
    int rc, typed, factors;
    json_t *rs;

    rc = gguf_get_str(r->g, akey(k, sizeof k, r->arch, "rope.scaling.type"), &s, &len);
    if (rc < 0 && rc != MS_ENOTFOUND)
        return rc;
    typed = rc == 0 && !(len == 4 && memcmp(s, "none", 4) == 0);
    factors = gguf_tensor_find(r->g, "rope_factors_long.weight") || gguf_tensor_find(r->g, "rope_factors_short.weight");
    if (!typed && !factors) {
        set(r->c, "rope_scaling", json_null());
        return 0;
    }
    if (!(rs = json_object()))
        return ms_err(MS_ENOMEM, "out of memory");
    set(r->c, "rope_scaling", rs);
    set(rs, "rope_type", factors ? json_string("longrope") : json_stringn(s, len));
    if (typed && !factors && (rc = get_float(r->g, akey(k, sizeof k, r->arch, "rope.scaling.factor"),
                                             "rope scaling factor", &f)) <= 0) {
        if (rc < 0)
            return rc;
        set(rs, "factor", json_real(f));
    }
    if ((rc = get_uint(r->g, akey(k, sizeof k, r->arch, "rope.scaling.original_context_length"), &v)) < 0)
        return rc;
    if (rc == 0)
        set(rs, "original_max_position_embeddings", json_integer(v));
    if ((rc = get_float(r->g, akey(k, sizeof k, r->arch, "rope.scaling.attn_factor"), "rope attention factor", &f)) < 0)
        return rc;
    if (rc == 0)
        set(rs, "attn_factor", json_real(f));
    return 0;
}

/* tokenizer: {kind, model, pre} from tokenizer.ggml.*, or null (only described, never sized
 * from: a key of another type reads as absent). */
static void put_tokenizer(reader *r)
{
    const char *s, *pre;
    size_t len, plen;
    json_t *t;

    if (gguf_get_str(r->g, "tokenizer.ggml.model", &s, &len) < 0 || !(t = json_object())) {
        set(r->c, "tokenizer", json_null());
        return;
    }
    set(t, "kind", json_string(len == 5 && !memcmp(s, "llama", 5) ? "spm" : len == 4 && !memcmp(s, "gpt2", 4) ? "bpe" : "other"));
    set(t, "model", json_stringn(s, len));
    set(t, "pre", gguf_get_str(r->g, "tokenizer.ggml.pre", &pre, &plen) == 0 ? json_stringn(pre, plen) : json_null());
    set(r->c, "tokenizer", t);
}

static int put_tokens(reader *r)
{
    static const char *const ids[][2] = { { "bos_token_id", "tokenizer.ggml.bos_token_id" },
                                          { "eos_token_id", "tokenizer.ggml.eos_token_id" } };
    uint32_t et;
    uint64_t count;
    json_int_t v = 0;   /* set when rc == 0; gcc 12 for aarch64 cannot see that */
    int rc;

    /* the vocab is the tokenizer's; <arch>.vocab_size is optional in GGUF */
    if ((rc = gguf_get_arr(r->g, "tokenizer.ggml.tokens", &et, &count)) == 0)
        set(r->c, "vocab_size", json_integer((json_int_t)(count > INT64_MAX ? INT64_MAX : count)));
    else if (rc != MS_ENOTFOUND)
        return rc;
    else if ((rc = put_uint(r, "vocab_size", "vocab_size")) < 0)
        return rc;
    for (size_t i = 0; i < 2; i++) {
        if ((rc = get_uint(r->g, ids[i][1], &v)) < 0)
            return rc;
        set(r->c, ids[i][0], rc == 0 ? json_integer(v) : json_null());
    }
    return 0;
}

/* Embeddings, each only when the file says: <arch>.pooling_type (llama.cpp's enum
 * llama_pooling_type: 0 none, 1 mean, 2 cls, 3 last, 4 rank) as pooling_type,
 * <arch>.attention.layer_norm_epsilon as layer_norm_eps, <arch>.attention.causal as
 * causal_attention (the encoders': false). */
static int put_encoder(reader *r)
{
    json_int_t v = 0;   /* set when rc == 0 */
    double f = 0;
    char k[256];
    int rc, causal;

    if ((rc = get_uint(r->g, akey(k, sizeof k, r->arch, "pooling_type"), &v)) < 0)
        return rc;
    if (rc == 0 && v > 4)
        return ms_err(MS_EINVALID, "kv '%s': %lld out of range [0, 4] (none, mean, cls, last, rank)", k, (long long)v);
    if (rc == 0)
        set(r->c, "pooling_type", json_integer(v));
    /* absent from a decoder's file: its config stays as it was before encoders */
    if ((rc = get_float(r->g, akey(k, sizeof k, r->arch, "attention.layer_norm_epsilon"), "layer norm epsilon",
                        &f)) < 0)
        return rc;
    if (rc == 0)
        set(r->c, "layer_norm_eps", json_real(f));
    if ((rc = gguf_get_bool(r->g, akey(k, sizeof k, r->arch, "attention.causal"), &causal)) == 0)
        set(r->c, "causal_attention", json_boolean(causal));
    else if (rc != MS_ENOTFOUND)
        return rc;
    return 0;
}

/* deepseek2: its MLA sizes and routing under config.json's names (DeepSeek V2 / V3), the YaRN
 * score factor (yarn_log_multiplier = 0.1 mscale_all_dim) into rope_scaling. */
static int put_deepseek(reader *r)
{
    static const char *const ints[][2] = {
        { "q_lora_rank", "attention.q_lora_rank" },       { "kv_lora_rank", "attention.kv_lora_rank" },
        { "v_head_dim", "attention.value_length" },       { "first_k_dense_replace", "leading_dense_block_count" },
        { "n_shared_experts", "expert_shared_count" },    { "n_group", "expert_group_count" },
        { "topk_group", "expert_group_used_count" },      { "expert_gating_func", "expert_gating_func" },
    };
    json_t *rs = json_object_get(r->c, "rope_scaling");
    json_int_t v = 0;   /* set when rc == 0 */
    double f = 0;
    char k[256];
    int rc;

    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if ((rc = put_uint(r, ints[i][0], ints[i][1])) < 0)
            return rc;
    /* mainline llama.cpp's converter since its MLA change writes the cache's geometry as the head
     * (one kv head, key kv_lora + rope, value kv_lora) and the model's under *_mla */
    if ((rc = get_uint(r->g, akey(k, sizeof k, r->arch, "attention.key_length_mla"), &v)) < 0)
        return rc;
    if (rc == 0) {
        set(r->c, "head_dim", json_integer(v));
        set(r->c, "num_key_value_heads", json_incref(json_object_get(r->c, "num_attention_heads")));
        if ((rc = put_uint(r, "v_head_dim", "attention.value_length_mla")) < 0)
            return rc;
    }
    if ((rc = get_float(r->g, akey(k, sizeof k, r->arch, "expert_weights_scale"), "expert weights scale", &f)) < 0)
        return rc;
    if (rc == 0)
        set(r->c, "routed_scaling_factor", json_real(f));
    if ((rc = get_float(r->g, akey(k, sizeof k, r->arch, "rope.scaling.yarn_log_multiplier"), "yarn log multiplier",
                        &f)) < 0)
        return rc;
    if (rc == 0 && json_is_object(rs))
        set(rs, "mscale_all_dim", json_real(f / 0.1));
    return 0;
}

static int build(reader *r)
{
    static const char *const ints[][2] = {
        { "hidden_size", "embedding_length" },
        { "num_hidden_layers", "block_count" },
        { "num_attention_heads", "attention.head_count" },
        { "num_key_value_heads", "attention.head_count_kv" },
        { "head_dim", "attention.key_length" },
        { "intermediate_size", "feed_forward_length" },
        { "max_position_embeddings", "context_length" },
        { "sliding_window", "attention.sliding_window" },
        { "num_experts", "expert_count" },
        { "num_experts_per_tok", "expert_used_count" },
        { "moe_intermediate_size", "expert_feed_forward_length" },
        { "shared_expert_intermediate_size", "expert_shared_feed_forward_length" },
        { "rope_dimension_count", "rope.dimension_count" },
    };
    static const struct { const char *field, *name, *what; double dflt; } floats[] = {
        { "rms_norm_eps", "attention.layer_norm_rms_epsilon", "rms norm epsilon", 1e-5 },
        { "rope_theta", "rope.freq_base", "rope theta", 10000.0 },
    };
    const char *decoder = gguf_arch_decoder(r->arch);
    json_int_t heads, hidden;
    double f = 0;
    char k[256];
    int rc, norm;

    set(r->c, "architecture", json_string(r->arch));
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if ((rc = put_uint(r, ints[i][0], ints[i][1])) < 0)
            return rc;
    /* gemma: only when the file sets it */
    if ((rc = get_float(r->g, akey(k, sizeof k, r->arch, "final_logit_softcapping"), "final logit soft-capping", &f)) < 0)
        return rc;
    if (rc == 0)
        set(r->c, "final_logit_softcapping", json_real(f));
    /* Defaults as llama.cpp applies them: kv heads = heads, head_dim = hidden / heads. */
    heads = json_integer_value(json_object_get(r->c, "num_attention_heads"));
    hidden = json_integer_value(json_object_get(r->c, "hidden_size"));
    if (json_is_null(json_object_get(r->c, "num_key_value_heads")) && heads)
        set(r->c, "num_key_value_heads", json_integer(heads));
    if (json_is_null(json_object_get(r->c, "head_dim")) && heads) {
        /* hidden / heads is the head size only where it divides: else nothing says what it is */
        if (hidden % heads)
            return ms_err(MS_EINVALID, "kv '%s': %lld heads do not divide %s.embedding_length %lld (and no %s.attention."
                          "key_length gives the head size)", akey(k, sizeof k, r->arch, "attention.head_count"),
                          (long long)heads, r->arch, (long long)hidden, r->arch);
        set(r->c, "head_dim", json_integer(hidden / heads));
    }
    for (size_t i = 0; i < sizeof floats / sizeof floats[0]; i++) {
        if ((rc = get_float(r->g, akey(k, sizeof k, r->arch, floats[i].name), floats[i].what, &f)) < 0)
            return rc;
        set(r->c, floats[i].field, json_real(rc == 0 ? f : floats[i].dflt));
    }
    if ((rc = put_rope_scaling(r)) < 0)
        return rc;
    /* llama.cpp rotates adjacent pairs (its "normal" rope) for the llama family, whose Q/K rows
     * convert_hf_to_gguf permutes, and for deepseek2 (HF's rope on interleaved pairs, unpermuted);
     * the other families keep HF's halves ("neox"). */
    set(r->c, "rope_interleaved",
        json_boolean(decoder && (strcmp(decoder, "llama") == 0 || strcmp(decoder, "deepseek2") == 0)));
    if (decoder && strcmp(decoder, "deepseek2") == 0 && (rc = put_deepseek(r)) < 0)
        return rc;
    /* MoE routing: <arch>.expert_weights_norm, when the file says, overrides the family's
     * default (the runtime's: all but qwen2moe renormalize the top-k weights) */
    if ((rc = gguf_get_bool(r->g, akey(k, sizeof k, r->arch, "expert_weights_norm"), &norm)) == 0)
        set(r->c, "norm_topk_prob", json_boolean(norm));
    else if (rc != MS_ENOTFOUND)
        return rc;
    set(r->c, "tie_word_embeddings", json_boolean(!gguf_tensor_find(r->g, "output.weight")));
    if ((rc = put_encoder(r)) < 0)
        return rc;
    if ((rc = put_tokens(r)) < 0)
        return rc;
    put_tokenizer(r);
    set(r->c, "source", json_pack("{s:s}", "format", "gguf"));
    return 0;
}

int gguf_config_json(json_t **out, const gguf_file *g)
{
    char arch[ARCH_MAX] = "unknown";
    const char *s;
    size_t len;
    reader r = { g, arch, json_object() };
    int rc;

    *out = NULL;
    if (!r.c)
        return ms_err(MS_ENOMEM, "out of memory");
    if (gguf_get_str(g, "general.architecture", &s, &len) == 0 && len < sizeof arch) {
        memcpy(arch, s, len);
        arch[len] = '\0';
    }
    if ((rc = build(&r)) < 0) {
        json_decref(r.c);
        return rc;
    }
    *out = r.c;
    return 0;
}
