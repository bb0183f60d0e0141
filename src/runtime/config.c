/* config.c: model hyper-parameters from the config blob (import.h's JSON) or from GGUF metadata
 * (turned into that same JSON by gguf_config_json, src/format), checked before anything is
 * sized from them. Architecture names resolve through src/format's one table (gguf_arch_decoder).
 * Architectures: llama (Llama 2/3, Mistral, TinyLlama), qwen2 (q/k/v biases) and qwen3 (QK-norm,
 * head_dim free of hidden / heads). GGUF keeps llama's Q/K rows permuted for adjacent-pair rope;
 * llama.cpp runs qwen2/qwen3 with NEOX rope (halves), so their rows are HF's and not permuted. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "runtime/runtime.h"

#define LIMIT_DIM (1 << 17)
#define LIMIT_LAYERS 1024
#define LIMIT_VOCAB (1 << 22)
#define LIMIT_CTX RUNTIME_CTX_MAX

static int unsupported(const char *arch)
{
    /* ollama's registry serves its own conversion of gpt-oss under another name and layout */
    if (strcmp(arch, "gptoss") == 0)
        return ms_err(MS_EUNSUPPORTED, "architecture 'gptoss' (ollama's own conversion of gpt-oss: fused attn_qkv / "
                      "ffn_gate_up_exps, MXFP4 in Hugging Face's nibble order) is not supported yet; a GGUF of gpt-oss "
                      "as llama.cpp converts it (architecture 'gpt-oss') runs");
    return ms_err(MS_EUNSUPPORTED, "architecture '%s' is not supported; supported: " RUNTIME_ARCHS, arch);
}

static int check_int(const char *key, long long v, long long lo, long long hi, int *out)
{
    if (v < lo || v > hi)
        return ms_err(MS_EINVALID, "%s: %lld out of range [%lld, %lld]", key, v, lo, hi);
    *out = (int)v;
    return 0;
}

/* Derived fields and the relations the decoder relies on. */
static int finish(runtime_config *c)
{
    if (c->head_dim == 0)
        c->head_dim = c->dim / c->n_heads;
    if (c->n_kv_heads == 0)
        c->n_kv_heads = c->n_heads;
    if (c->n_rot == 0)
        c->n_rot = c->head_dim;
    if (c->n_heads % c->n_kv_heads)
        return ms_err(MS_EINVALID, "head count %d is not a multiple of the kv head count %d", c->n_heads,
                      c->n_kv_heads);
    if (c->head_dim <= 0 || c->head_dim > 1024 || (long long)c->head_dim * c->n_heads > LIMIT_DIM)
        return ms_err(MS_EINVALID, "head_dim %d out of range [1, 1024] (dim %d, %d heads)", c->head_dim,
                      c->dim, c->n_heads);
    if (c->n_rot <= 0 || c->n_rot > c->head_dim || c->n_rot % 2)
        return ms_err(MS_EINVALID, "rope dimension count %d: expected an even number in [2, %d]", c->n_rot,
                      c->head_dim);
    if (c->n_experts < 0 || c->n_experts > 1024 || c->n_experts_used < 0 || c->n_experts_used > c->n_experts ||
        (c->n_experts > 0 && c->n_experts_used == 0))
        return ms_err(MS_EINVALID, "experts: %d used of %d, expected 1 <= used <= experts <= 1024", c->n_experts_used,
                      c->n_experts);
    if (c->n_experts > 0 && c->expert_ffn_dim == 0)
        c->expert_ffn_dim = c->ffn_dim;
    if (c->kv_lora_rank > 0) {   /* [deepseek2] MLA: the attention runs over the latent and k_pe */
        int per = c->n_experts / (c->n_group > 1 ? c->n_group : 1);
        if (c->n_rot >= c->head_dim || c->kv_lora_rank > 8192 || c->n_rot + c->kv_lora_rank > 8192 ||
            c->v_head_dim <= 0 || c->v_head_dim > 1024 || c->q_lora_rank < 0 || c->q_lora_rank > LIMIT_DIM)
            return ms_err(MS_EINVALID, "multi-head latent attention: kv_lora_rank %d, q_lora_rank %d, v_head_dim %d, "
                          "key length %d with %d rotated: expected 0 < kv_lora_rank + rotated <= 8192, 0 < "
                          "v_head_dim <= 1024 and a key longer than its rotated part", c->kv_lora_rank,
                          c->q_lora_rank, c->v_head_dim, c->head_dim, c->n_rot);
        if (c->n_dense_lead < 0 || c->n_dense_lead > c->n_layers || c->n_group < 0 || c->topk_group < 0 ||
            (c->n_experts && c->n_group > 1 &&
             (c->n_experts % c->n_group || c->topk_group < 1 || c->topk_group > c->n_group ||
              c->topk_group * per < c->n_experts_used)))
            return ms_err(MS_EINVALID, "deepseek2 routing: %d experts in %d groups, %d groups used, %d experts used, "
                          "%d leading dense layers: expected groups that divide the experts and hold the experts "
                          "used", c->n_experts, c->n_group, c->topk_group, c->n_experts_used, c->n_dense_lead);
        if (!(c->moe_scale > 0 && c->moe_scale < 1e4))
            return ms_err(MS_EINVALID, "routed_scaling_factor %g out of range (0, 1e4)", c->moe_scale);
    }
    if (c->sliding_window < 0 || c->swa_pattern < 0)
        return ms_err(MS_EINVALID, "sliding window %d / pattern %d: expected >= 0", c->sliding_window, c->swa_pattern);
    if (c->rope_local_theta == 0)
        c->rope_local_theta = c->rope_theta;
    if (c->pooling < 0)   /* none given: sentence-transformers' default for an encoder */
        c->pooling = c->encoder ? 1 : 0;
    if (c->encoder && c->head_dim * c->n_heads != c->dim)
        return ms_err(MS_EINVALID, "num_attention_heads: %d heads of %d do not make hidden_size %d (an encoder's "
                      "heads split its hidden size)", c->n_heads, c->head_dim, c->dim);
    if (c->encoder && !(c->norm_eps > 0 && c->norm_eps < 1))
        return ms_err(MS_EINVALID, "layer_norm_eps: %g out of range (0, 1)", c->norm_eps);
    if (!(c->rms_eps > 0 && c->rms_eps < 1))
        return ms_err(MS_EINVALID, "rms norm epsilon %g out of range (0, 1)", c->rms_eps);
    /* isfinite: a GGUF float can be inf or NaN, which every comparison above lets through one way */
    if (!(c->rope_theta > 1) || !isfinite(c->rope_theta))
        return ms_err(MS_EINVALID, "rope theta %g out of range (1, inf)", c->rope_theta);
    if (!(c->rope_local_theta > 1) || !isfinite(c->rope_local_theta))
        return ms_err(MS_EINVALID, "local rope theta (rope_local_base_freq) %g out of range (1, inf)",
                      c->rope_local_theta);
    if (!(c->final_softcap >= 0) || !isfinite(c->final_softcap) || !isfinite(c->attn_scale))
        return ms_err(MS_EINVALID, "final logit soft-capping %g / attention scale %g: expected finite and >= 0",
                      c->final_softcap, c->attn_scale);
    if (c->rope_n_factors && c->rope_n_factors != c->n_rot / 2)
        return ms_err(MS_EINVALID, "longrope: %d long and short factors for %d rotated pairs", c->rope_n_factors,
                      c->n_rot / 2);
    if (c->rope_scaling == RUNTIME_ROPE_LONGROPE &&
        !(c->rope_orig_ctx > 1 && c->rope_attn_factor >= 0 && c->rope_attn_factor < 100))
        return ms_err(MS_EINVALID, "longrope scaling: needs original_max_position_embeddings (%d) > 1 and an "
                      "attention factor (%g) in [0, 100)", c->rope_orig_ctx, c->rope_attn_factor);
    if (c->rope_scaling != RUNTIME_ROPE_NONE && c->rope_scaling != RUNTIME_ROPE_LONGROPE &&
        !(c->rope_factor >= 1 && c->rope_factor < 1e6))
        return ms_err(MS_EINVALID, "rope scaling factor %g out of range [1, 1e6)", c->rope_factor);
    if (c->rope_scaling == RUNTIME_ROPE_YARN) {
        if (!(c->rope_orig_ctx > 1) || !(c->yarn_beta_fast > c->yarn_beta_slow && c->yarn_beta_slow > 0) ||
            !(c->yarn_beta_fast < 1e6) || !(c->yarn_mscale >= 0 && c->yarn_mscale < 100))
            return ms_err(MS_EINVALID, "yarn rope scaling: needs original_max_position_embeddings (%d) > 1, "
                          "0 < beta_slow (%g) < beta_fast (%g) and an attention factor (%g) in [0, 100)",
                          c->rope_orig_ctx, c->yarn_beta_slow, c->yarn_beta_fast, c->yarn_mscale);
        /* ggml scales cos and sin, so q and k both carry mscale: scores carry its square */
        double a = c->attn_scale != 0 ? c->attn_scale : 1.0 / sqrt((double)c->head_dim);
        c->attn_scale = a * c->yarn_mscale * c->yarn_mscale;
    }
    if (c->rope_scaling == RUNTIME_ROPE_LLAMA3 &&
        !(c->rope_low_freq_factor > 0 && c->rope_high_freq_factor > c->rope_low_freq_factor && c->rope_orig_ctx > 0))
        return ms_err(MS_EINVALID, "llama3 rope scaling: needs 0 < low_freq_factor (%g) < high_freq_factor (%g) "
                      "and original_max_position_embeddings (%d) > 0", c->rope_low_freq_factor,
                      c->rope_high_freq_factor, c->rope_orig_ctx);
    return 0;
}

static int scaling_kind(runtime_config *c, const char *type)
{
    if (!type || !*type || strcmp(type, "none") == 0 || strcmp(type, "default") == 0) {
        c->rope_scaling = RUNTIME_ROPE_NONE;
        return 0;
    }
    if (strcmp(type, "linear") == 0) {
        c->rope_scaling = RUNTIME_ROPE_LINEAR;
        return 0;
    }
    if (strcmp(type, "llama3") == 0) {
        c->rope_scaling = RUNTIME_ROPE_LLAMA3;
        return 0;
    }
    if (strcmp(type, "longrope") == 0 || strcmp(type, "su") == 0) {   /* Phi-3 128k ("su": its first name) */
        c->rope_scaling = RUNTIME_ROPE_LONGROPE;
        return 0;
    }
    if (strcmp(type, "yarn") == 0) {
        c->rope_scaling = RUNTIME_ROPE_YARN;
        return 0;
    }
    return ms_err(MS_EUNSUPPORTED, "rope scaling '%s' is not supported; supported: linear, llama3, longrope, yarn",
                  type);
}

/* ---------------------------------------------------------------- config blob */

static int j_int(json_t *o, const char *key, int required, long long lo, long long hi, int *out)
{
    json_t *v = json_object_get(o, key);

    if (!v || json_is_null(v)) {
        if (required)
            return ms_err(MS_EINVALID, "%s: missing", key);
        return 0;
    }
    if (json_is_array(v) && json_array_size(v) > 0)   /* eos_token_id may be a list */
        v = json_array_get(v, 0);
    if (!json_is_integer(v))
        return ms_err(MS_EINVALID, "%s: expected an integer", key);
    return check_int(key, json_integer_value(v), lo, hi, out);
}

static int j_num(json_t *o, const char *key, double *out)
{
    json_t *v = json_object_get(o, key);

    if (!v || json_is_null(v))
        return 0;
    if (!json_is_number(v))
        return ms_err(MS_EINVALID, "%s: expected a number", key);
    *out = json_number_value(v);
    return 0;
}

/* The MoE and window fields: the import's own keys, else what config.json said (hf_config). */
/* A new object of `keys`, each the config's own value, else what config.json said (hf_config);
 * absent or null in both: left out. NULL when out of memory. */
static json_t *json_gather(json_t *o, const char *const *keys, size_t n)
{
    json_t *hf = json_object_get(o, "hf_config"), *m = json_object();

    for (size_t i = 0; m && i < n; i++) {
        json_t *v = json_object_get(o, keys[i]);
        if ((!v || json_is_null(v)) && json_is_object(hf))
            v = json_object_get(hf, keys[i]);
        if (v && !json_is_null(v))
            json_object_set(m, keys[i], v);
    }
    return m;
}

static int json_fill_moe(runtime_config *c, json_t *o)
{
    static const char *const keys[] = { "num_experts", "num_experts_per_tok", "moe_intermediate_size",
                                        "shared_expert_intermediate_size", "sliding_window", "norm_topk_prob" };
    json_t *hf = json_object_get(o, "hf_config"), *m = json_gather(o, keys, sizeof keys / sizeof keys[0]), *norm;
    int rc;

    if (!m)
        return ms_err(MS_ENOMEM, "out of memory");
    if (!json_object_get(m, "num_experts") && json_is_object(hf) && json_object_get(hf, "num_local_experts"))
        json_object_set(m, "num_experts", json_object_get(hf, "num_local_experts"));
    if (!json_object_get(m, "num_experts") && json_is_object(hf) && json_object_get(hf, "n_routed_experts"))
        json_object_set(m, "num_experts", json_object_get(hf, "n_routed_experts"));   /* DeepSeek's name */
    rc = j_int(m, "num_experts", 0, 0, 1024, &c->n_experts);
    if (rc == 0 && c->n_experts > 0)
        rc = j_int(m, "num_experts_per_tok", 0, 0, 1024, &c->n_experts_used);
    if (rc == 0)
        rc = j_int(m, "moe_intermediate_size", 0, 1, LIMIT_DIM * 8, &c->expert_ffn_dim);
    if (rc == 0)
        rc = j_int(m, "shared_expert_intermediate_size", 0, 0, LIMIT_DIM * 8, &c->shared_ffn_dim);
    if (rc == 0)
        rc = j_int(m, "sliding_window", 0, 0, LIMIT_CTX, &c->sliding_window);
    /* Qwen 2 configs carry a sliding_window that use_sliding_window false switches off */
    if (rc == 0 && json_is_object(hf) && json_is_false(json_object_get(hf, "use_sliding_window")))
        c->sliding_window = 0;
    norm = json_object_get(m, "norm_topk_prob");
    /* Mixtral always renormalizes; Qwen-MoE as norm_topk_prob says (a GGUF's
     * <arch>.expert_weights_norm, gguf_config_json). Without the key, llama.cpp's choice: all
     * but qwen2moe renormalize */
    c->moe_norm = norm ? json_is_true(norm)
                       : strcmp(c->architecture, "qwen2moe") != 0 && strcmp(c->architecture, "deepseek2") != 0;
    json_decref(m);
    return rc;
}

/* Gemma 3 from config.json (hf_config): the window pattern, the local rope base, the score
 * scale, soft-capping; its norms are (1 + w) unless the weights came from a GGUF file. */
static int json_fill_gemma(runtime_config *c, json_t *o)
{
    json_t *hf = json_object_get(o, "hf_config"), *src = json_object_get(o, "source");
    const char *fmt = json_string_value(json_object_get(src, "format"));
    double qpas = 0;
    int rc;

    c->gemma = 1;
    c->swa_pattern = 6;
    c->rope_local_theta = 10000.0;
    c->norm_offset = fmt && strcmp(fmt, "gguf") == 0 ? 0.0 : 1.0;
    if (c->n_layers == 62)   /* as for a GGUF file: the 27B scales by 1/sqrt(dim / heads) */
        c->attn_scale = 1.0 / sqrt((double)c->dim / c->n_heads);
    if ((rc = j_num(o, "final_logit_softcapping", &c->final_softcap)) < 0)
        return rc;
    if (!json_is_object(hf))
        return 0;
    if ((rc = j_int(hf, "sliding_window_pattern", 0, 1, LIMIT_LAYERS, &c->swa_pattern)) < 0 ||
        (rc = j_num(hf, "rope_local_base_freq", &c->rope_local_theta)) < 0 ||
        (rc = j_num(hf, "query_pre_attn_scalar", &qpas)) < 0 ||
        (rc = j_num(hf, "final_logit_softcapping", &c->final_softcap)) < 0)
        return rc;
    if (qpas < 0 || c->final_softcap < 0)
        return ms_err(MS_EINVALID, "query_pre_attn_scalar %g / final_logit_softcapping %g: expected >= 0", qpas,
                      c->final_softcap);
    if (qpas > 0)
        c->attn_scale = 1.0 / sqrt(qpas);
    return 0;
}

/* `n` factors of a longrope list into out: each a number in [1e-3, 1e6) (divisors of a frequency). */
static int factor_list(float *out, json_t *a, const char *key, size_t n)
{
    if (!json_is_array(a) || json_array_size(a) != n)
        return ms_err(MS_EINVALID, "%s: expected a list of %zu numbers, one per rotated pair", key, n);
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(a, i);
        double f = json_number_value(v);
        if (!json_is_number(v) || !(f >= 1e-3 && f < 1e6))
            return ms_err(MS_EINVALID, "%s[%zu]: expected a number in [0.001, 1e6)", key, i);
        out[i] = (float)f;
    }
    return 0;
}

/* Phi-3's longrope: original_max_position_embeddings in rope_scaling or, as Phi-3's config.json
 * has it, at the top of config.json; attention_factor (Hugging Face's override) or attn_factor (a
 * GGUF import's); the long and short factors when config.json lists them (a GGUF import keeps
 * them as tensors). */
static int json_fill_longrope(runtime_config *c, json_t *o, json_t *rs)
{
    json_t *hf = json_object_get(o, "hf_config"), *lf = json_object_get(rs, "long_factor");
    size_t n;
    int rc;

    if (!c->rope_orig_ctx && json_is_object(hf) &&
        (rc = j_int(hf, "original_max_position_embeddings", 0, 1, LIMIT_CTX, &c->rope_orig_ctx)) < 0)
        return rc;
    if ((rc = j_num(rs, "attention_factor", &c->rope_attn_factor)) < 0 ||
        (rc = j_num(rs, "attn_factor", &c->rope_attn_factor)) < 0)
        return rc;
    if (!lf || json_is_null(lf))
        return 0;
    n = json_array_size(lf);
    if (n < 1 || n > RUNTIME_ROPE_MAX_FACTORS)
        return ms_err(MS_EINVALID, "long_factor: expected a list of 1 to %d numbers", RUNTIME_ROPE_MAX_FACTORS);
    if ((rc = factor_list(c->rope_long, lf, "long_factor", n)) < 0 ||
        (rc = factor_list(c->rope_short, json_object_get(rs, "short_factor"), "short_factor", n)) < 0)
        return rc;
    c->rope_n_factors = (int)n;
    return 0;
}

/* YaRN's band and magnitude: beta_fast / beta_slow (32 and 1 unless the config says), and the
 * magnitude: Hugging Face's attention_factor as given, else (a GGUF's attn_factor, 1 when absent)
 * times 1 + 0.1 ln(factor), as ggml's rope computes it. */
static int json_fill_yarn(runtime_config *c, json_t *rs)
{
    double hf = 0, gguf = 1;
    int rc;

    c->yarn_beta_fast = 32;
    c->yarn_beta_slow = 1;
    if ((rc = j_num(rs, "beta_fast", &c->yarn_beta_fast)) < 0 || (rc = j_num(rs, "beta_slow", &c->yarn_beta_slow)) < 0 ||
        (rc = j_num(rs, "attention_factor", &hf)) < 0 || (rc = j_num(rs, "attn_factor", &gguf)) < 0)
        return rc;
    /* a factor out of range gives a NaN here, but finish() refuses it first, as for every scaling */
    c->yarn_mscale = hf > 0 ? hf : gguf * (1.0 + 0.1 * log(c->rope_factor));
    return 0;
}

/* DeepSeek V2 / V3 from config.json's names (json_fill_deepseek gathers them). The key is
 * qk_nope_head_dim + qk_rope_head_dim, the rotated part last, turned on interleaved pairs as
 * llama.cpp does (HF's rope de-interleaves them: the same rotation). The scores' scale: YaRN's
 * mscale = 1 + 0.1 mscale_all_dim ln(factor), squared, as llama.cpp and Hugging Face apply it; cos
 * and sin keep magnitude 1 (llama.cpp's attn_factor cancels ggml's own; HF's ratio of mscale to
 * mscale_all_dim is 1 in every DeepSeek config, and refused otherwise). */
static int json_fill_deepseek_keys(runtime_config *c, json_t *o, json_t *rs)
{
    const char *scoring = json_string_value(json_object_get(o, "scoring_func"));
    int shared = 0, gating = 0, nope = 0, rope = 0, rc;
    double all_dim = 0, ms = -1;

    c->moe_scale = 1.0;
    c->rope_interleaved = 1;
    if ((rc = j_int(o, "qk_nope_head_dim", 0, 1, 1024, &nope)) < 0 ||
        (rc = j_int(o, "qk_rope_head_dim", 0, 2, 1024, &rope)) < 0)
        return rc;
    if (nope && rope) {   /* config.json's: the import's head_dim (hidden / heads) is not the key's */
        c->head_dim = nope + rope;
        c->n_rot = rope;
    }
    if (!c->head_dim)
        return ms_err(MS_EINVALID, "head_dim (a GGUF's attention.key_length): missing; an MLA key is not hidden / heads");
    if ((rc = j_int(o, "q_lora_rank", 0, 0, LIMIT_DIM, &c->q_lora_rank)) < 0 ||
        (rc = j_int(o, "kv_lora_rank", 1, 1, 8192, &c->kv_lora_rank)) < 0 ||
        (rc = j_int(o, "v_head_dim", 1, 1, 1024, &c->v_head_dim)) < 0 ||
        (rc = j_int(o, "first_k_dense_replace", 0, 0, LIMIT_LAYERS, &c->n_dense_lead)) < 0 ||
        (rc = j_int(o, "n_shared_experts", 0, 0, 1024, &shared)) < 0 ||
        (rc = j_int(o, "n_group", 0, 0, 1024, &c->n_group)) < 0 ||
        (rc = j_int(o, "topk_group", 0, 0, 1024, &c->topk_group)) < 0 ||
        (rc = j_int(o, "expert_gating_func", 0, 0, 2, &gating)) < 0 ||
        (rc = j_num(o, "routed_scaling_factor", &c->moe_scale)) < 0)
        return rc;
    if (scoring && strcmp(scoring, "softmax") != 0 && strcmp(scoring, "sigmoid") != 0)
        return ms_err(MS_EUNSUPPORTED, "scoring_func '%s': expected softmax or sigmoid", scoring);
    /* a GGUF's expert_gating_func: 1 softmax, 2 sigmoid; absent (DeepSeek V2's files): softmax */
    c->moe_route = gating == 2 || (scoring && strcmp(scoring, "sigmoid") == 0) ? BACKEND_ROUTE_SIGMOID_GROUPED
                                                                                : BACKEND_ROUTE_SOFTMAX_GROUPED;
    c->shared_ffn_dim = shared * c->expert_ffn_dim;
    if (json_is_object(rs) && ((rc = j_num(rs, "mscale_all_dim", &all_dim)) < 0 || (rc = j_num(rs, "mscale", &ms)) < 0))
        return rc;
    if (ms >= 0 && ms != all_dim)   /* HF would scale the rope part of q and k alone */
        return ms_err(MS_EUNSUPPORTED, "rope_scaling: mscale %g differs from mscale_all_dim %g", ms, all_dim);
    if (c->rope_scaling == RUNTIME_ROPE_YARN) {
        double m = 1.0 + 0.1 * all_dim * log(c->rope_factor);
        if (!(m > 0 && m < 100))
            return ms_err(MS_EINVALID, "rope_scaling: mscale_all_dim %g gives a score scale %g out of range", all_dim, m);
        c->yarn_mscale = 1.0;
        c->attn_scale = m * m / sqrt((double)c->head_dim);
    }
    return 0;
}

/* DeepSeek's keys, at the top (a GGUF's, which gguf_config_json turns into config.json's names) or
 * in hf_config (a Hugging Face import's). */
static int json_fill_deepseek(runtime_config *c, json_t *top, json_t *rs)
{
    static const char *const keys[] = { "q_lora_rank", "kv_lora_rank", "v_head_dim", "first_k_dense_replace",
                                        "n_shared_experts", "n_group", "topk_group", "expert_gating_func",
                                        "routed_scaling_factor", "scoring_func", "qk_nope_head_dim",
                                        "qk_rope_head_dim" };
    json_t *o = json_gather(top, keys, sizeof keys / sizeof keys[0]);
    int rc;

    if (!o)
        return ms_err(MS_ENOMEM, "out of memory");
    rc = json_fill_deepseek_keys(c, o, rs);
    json_decref(o);
    return rc;
}

/* An encoder's config: NomicBertModel's config.json names its sizes as GPT-2 does (n_embd, ...),
 * which the import keeps in hf_config; each fills the field an import left null. Then the
 * LayerNorm epsilon (the config's, else config.json's layer_norm_eps / layer_norm_epsilon, else
 * BertConfig's 1e-12) and whether attention is causal (an encoder's is not). */
static int json_fill_encoder(runtime_config *c, json_t *o)
{
    static const char *const syn[][2] = { { "hidden_size", "n_embd" },           { "num_hidden_layers", "n_layer" },
                                          { "num_attention_heads", "n_head" },    { "intermediate_size", "n_inner" },
                                          { "max_position_embeddings", "n_positions" } };
    json_t *hf = json_object_get(o, "hf_config"), *v;
    int rc;

    c->encoder = 1;
    c->norm_eps = 1e-12;
    for (size_t i = 0; json_is_object(hf) && i < sizeof syn / sizeof syn[0]; i++) {
        v = json_object_get(o, syn[i][0]);
        if ((!v || json_is_null(v)) && (v = json_object_get(hf, syn[i][1])) != NULL)
            json_object_set(o, syn[i][0], v);
    }
    if (json_is_object(hf) && json_is_number(json_object_get(hf, "rotary_emb_base")))   /* read as rope_theta below */
        json_object_set(o, "rope_theta", json_object_get(hf, "rotary_emb_base"));
    if (json_is_object(hf) && ((rc = j_num(hf, "layer_norm_eps", &c->norm_eps)) < 0 ||
                               (rc = j_num(hf, "layer_norm_epsilon", &c->norm_eps)) < 0))
        return rc;
    if ((rc = j_num(o, "layer_norm_eps", &c->norm_eps)) < 0)
        return rc;
    if (json_is_true(json_object_get(o, "causal_attention")) ||
        (json_is_object(hf) && json_is_true(json_object_get(hf, "causal"))))
        return ms_err(MS_EUNSUPPORTED, "causal_attention: %s with causal attention is not supported", c->architecture);
    return 0;
}

static int json_fill(runtime_config *c, json_t *o)
{
    json_t *arch = json_object_get(o, "architecture"), *rs = json_object_get(o, "rope_scaling");
    json_t *inter = json_object_get(o, "rope_interleaved");
    int rc;

    if (!json_is_string(arch))
        return ms_err(MS_EINVALID, "architecture: missing or not a string");
    if (!gguf_arch_decoder(json_string_value(arch)))
        return unsupported(json_string_value(arch));
    snprintf(c->architecture, sizeof c->architecture, "%s", gguf_arch_decoder(json_string_value(arch)));
    if ((strcmp(c->architecture, "bert") == 0 || strcmp(c->architecture, "nomic-bert") == 0) &&
        (rc = json_fill_encoder(c, o)) < 0)
        return rc;
    if ((rc = j_int(o, "hidden_size", 1, 1, LIMIT_DIM, &c->dim)) < 0 ||
        (rc = j_int(o, "pooling_type", 0, 0, 4, &c->pooling)) < 0 ||
        (rc = j_int(o, "num_hidden_layers", 1, 1, LIMIT_LAYERS, &c->n_layers)) < 0 ||
        (rc = j_int(o, "num_attention_heads", 1, 1, 4096, &c->n_heads)) < 0 ||
        (rc = j_int(o, "num_key_value_heads", 0, 1, 4096, &c->n_kv_heads)) < 0 ||
        (rc = j_int(o, "head_dim", 0, 1, 1024, &c->head_dim)) < 0 ||
        (rc = j_int(o, "intermediate_size", 1, 1, LIMIT_DIM * 8, &c->ffn_dim)) < 0 ||
        (rc = j_int(o, "vocab_size", 1, 1, LIMIT_VOCAB, &c->vocab_size)) < 0 ||
        (rc = j_int(o, "max_position_embeddings", 1, 1, LIMIT_CTX, &c->ctx_len)) < 0 ||
        (rc = j_int(o, "bos_token_id", 0, 0, LIMIT_VOCAB, &c->bos_id)) < 0 ||
        (rc = j_int(o, "eos_token_id", 0, 0, LIMIT_VOCAB, &c->eos_id)) < 0 ||
        (rc = j_num(o, "rms_norm_eps", &c->rms_eps)) < 0 || (rc = j_num(o, "rope_theta", &c->rope_theta)) < 0 ||
        /* a GGUF's rope.dimension_count (gguf_config_json); config.json has no such field */
        (rc = j_int(o, "rope_dimension_count", 0, 2, 1024, &c->n_rot)) < 0)
        return rc;
    if (inter && !json_is_boolean(inter))
        return ms_err(MS_EINVALID, "rope_interleaved: expected true or false");
    c->rope_interleaved = json_is_true(inter);
    if ((rc = json_fill_moe(c, o)) < 0 || (strcmp(c->architecture, "gemma3") == 0 && (rc = json_fill_gemma(c, o)) < 0))
        return rc;
    if (strcmp(c->architecture, "gpt-oss") == 0) {   /* even layers windowed, odd ones global */
        c->gptoss = 1;
        c->swa_pattern = 2;
    }
    if (rs && !json_is_null(rs)) {
        json_t *t = json_object_get(rs, "rope_type");
        if (json_is_object(rs) && !t)   /* Phi-3 says "type" ("longrope", "su") */
            t = json_object_get(rs, "type");
        if (!json_is_object(rs) || !json_is_string(t))
            return ms_err(MS_EINVALID, "rope_scaling: expected an object with a string rope_type");
        if ((rc = scaling_kind(c, json_string_value(t))) < 0 || (rc = j_num(rs, "factor", &c->rope_factor)) < 0 ||
            (rc = j_num(rs, "low_freq_factor", &c->rope_low_freq_factor)) < 0 ||
            (rc = j_num(rs, "high_freq_factor", &c->rope_high_freq_factor)) < 0 ||
            (rc = j_int(rs, "original_max_position_embeddings", 0, 1, LIMIT_CTX, &c->rope_orig_ctx)) < 0 ||
            (c->rope_scaling == RUNTIME_ROPE_LONGROPE && (rc = json_fill_longrope(c, o, rs)) < 0) ||
            (c->rope_scaling == RUNTIME_ROPE_YARN && (rc = json_fill_yarn(c, rs)) < 0))
            return ms_err_ctx("rope_scaling");
    }
    if (strcmp(c->architecture, "deepseek2") == 0 && (rc = json_fill_deepseek(c, o, rs)) < 0)
        return rc;
    return finish(c);
}

static void defaults(runtime_config *c)
{
    memset(c, 0, sizeof *c);
    c->bos_id = c->eos_id = -1;
    c->pooling = -1;
    c->rms_eps = 1e-5;
    c->rope_theta = 10000.0;
}

/* A GGUF file's config is the config blob an import of it stores (gguf_config_json), read by
 * the same rules: `run --gguf FILE` and `run` of FILE imported cannot disagree. */
int runtime_config_from_gguf(runtime_config *c, const gguf_file *g)
{
    json_t *o = NULL;
    int rc;

    defaults(c);
    if ((rc = gguf_config_json(&o, g)) < 0)
        return rc;
    rc = json_fill(c, o);
    json_decref(o);
    return rc;
}

int runtime_config_from_json(runtime_config *c, const char *json, size_t len, const char *what)
{
    json_error_t e;
    json_t *o = json_loadb(json, len, 0, &e);
    int rc;

    defaults(c);
    if (!o || !json_is_object(o)) {
        json_decref(o);
        return ms_err(MS_EINVALID, "%s: config is not a JSON object (%s, line %d)", what, o ? "not an object" : e.text,
                      e.line);
    }
    rc = json_fill(c, o);
    json_decref(o);
    return rc < 0 ? ms_err_ctx("%s: config", what) : 0;
}

/* YaRN's corr dim: the pair index whose wavelength turns `n_rot_turns` times over the original context. */
static double yarn_corr_dim(const runtime_config *c, double n_rot_turns)
{
    return c->n_rot * log(c->rope_orig_ctx / (n_rot_turns * 2.0 * M_PI)) / (2.0 * log(c->rope_theta));
}

/* Rope angular frequencies: theta^(-2i/n_rot), with the config's scaling. */
void runtime_rope_freqs(double *freqs, const runtime_config *c)
{
    double lo_wavelen = 0, hi_wavelen = 0, lo = 0, hi = 0;

    if (c->rope_scaling == RUNTIME_ROPE_LLAMA3) {
        lo_wavelen = c->rope_orig_ctx / c->rope_low_freq_factor;
        hi_wavelen = c->rope_orig_ctx / c->rope_high_freq_factor;
    }
    if (c->rope_scaling == RUNTIME_ROPE_YARN) {   /* ggml_rope_yarn_corr_dims */
        lo = fmax(0.0, floor(yarn_corr_dim(c, c->yarn_beta_fast)));
        hi = fmin(c->n_rot - 1.0, ceil(yarn_corr_dim(c, c->yarn_beta_slow)));
    }
    for (int i = 0; i < c->n_rot / 2; i++) {
        double f = pow(c->rope_theta, -2.0 * i / c->n_rot);

        if (c->rope_scaling == RUNTIME_ROPE_LINEAR) {
            f /= c->rope_factor;
        } else if (c->rope_scaling == RUNTIME_ROPE_YARN) {
            /* pairs below the band keep f (extrapolation), those past it take f / factor
             * (interpolation), and the band ramps between the two */
            double y = (i - lo) / fmax(0.001, hi - lo), mix = 1.0 - fmin(1.0, fmax(0.0, y));
            f = f / c->rope_factor * (1.0 - mix) + f * mix;
        } else if (c->rope_scaling == RUNTIME_ROPE_LLAMA3) {
            /* Llama 3.1: long wavelengths are slowed by `factor`, short ones kept, and the band
             * between blends the two linearly in ctx / wavelength */
            double wavelen = 2.0 * M_PI / f;
            if (wavelen > lo_wavelen) {
                f /= c->rope_factor;
            } else if (wavelen >= hi_wavelen) {
                double smooth = (c->rope_orig_ctx / wavelen - c->rope_low_freq_factor) /
                                (c->rope_high_freq_factor - c->rope_low_freq_factor);
                f = (1.0 - smooth) * f / c->rope_factor + smooth * f;
            }
        }
        freqs[i] = f;
    }
}

