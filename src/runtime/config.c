/* config.c: model hyper-parameters from GGUF metadata (<arch>.* keys) or from the config blob
 * (import.h's JSON), checked before anything is sized from them.
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
#define LIMIT_CTX (1 << 22)

static const char *const supported[] = { "llama", "qwen2", "qwen3" };

static int unsupported(const char *arch)
{
    return ms_err(MS_EUNSUPPORTED, "architecture '%s' is not supported; supported: llama, qwen2, qwen3", arch);
}

static int arch_supported(const char *arch)
{
    for (size_t i = 0; i < sizeof supported / sizeof supported[0]; i++)
        if (strcmp(arch, supported[i]) == 0)
            return 1;
    return 0;
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
    if (!(c->rms_eps > 0 && c->rms_eps < 1))
        return ms_err(MS_EINVALID, "rms norm epsilon %g out of range (0, 1)", c->rms_eps);
    if (!(c->rope_theta > 1))
        return ms_err(MS_EINVALID, "rope theta %g out of range (1, inf)", c->rope_theta);
    if (c->rope_scaling != RUNTIME_ROPE_NONE && !(c->rope_factor >= 1 && c->rope_factor < 1e6))
        return ms_err(MS_EINVALID, "rope scaling factor %g out of range [1, 1e6)", c->rope_factor);
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
    return ms_err(MS_EUNSUPPORTED, "rope scaling '%s' is not supported; supported: linear, llama3", type);
}

/* ---------------------------------------------------------------- GGUF */

static int g_int(const gguf_file *g, const char *key, int required, long long lo, long long hi, int *out)
{
    uint64_t v = 0;
    int rc = gguf_get_uint(g, key, &v);

    if (rc == MS_ENOTFOUND && !required)
        return 0;
    if (rc < 0)
        return rc;
    return check_int(key, v > (uint64_t)hi ? hi + 1 : (long long)v, lo, hi, out);
}

/* An absent key keeps the default in *out (the getter clears its out parameter on entry). */
static int g_float(const gguf_file *g, const char *key, double *out)
{
    double v;
    int rc = gguf_get_float(g, key, &v);

    if (rc == 0)
        *out = v;
    return rc == MS_ENOTFOUND ? 0 : rc;
}

/* "<arch>.<suffix>" into buf: GGUF names every hyper-parameter after the architecture. */
static const char *akey(char *buf, size_t len, const runtime_config *c, const char *suffix)
{
    snprintf(buf, len, "%s.%s", c->architecture, suffix);
    return buf;
}

int runtime_config_from_gguf(runtime_config *c, const gguf_file *g)
{
    const char *s;
    size_t len;
    uint32_t et;
    uint64_t n_vocab = 0;
    char type[32] = "", k[96];
    int rc;

    memset(c, 0, sizeof *c);
    c->bos_id = c->eos_id = -1;
    c->rms_eps = 1e-5;
    c->rope_theta = 10000.0;
    if ((rc = gguf_get_str(g, "general.architecture", &s, &len)) < 0)
        return rc;
    if (len >= sizeof c->architecture)
        len = sizeof c->architecture - 1;
    memcpy(c->architecture, s, len);
    c->architecture[len] = '\0';
    if (!arch_supported(c->architecture))
        return unsupported(c->architecture);
    /* GGUF's llama Q/K rows are permuted for adjacent-pair rope; qwen's are not (NEOX) */
    c->rope_interleaved = strcmp(c->architecture, "llama") == 0;
#define K(suffix) akey(k, sizeof k, c, suffix)
    if ((rc = g_int(g, K("embedding_length"), 1, 1, LIMIT_DIM, &c->dim)) < 0 ||
        (rc = g_int(g, K("block_count"), 1, 1, LIMIT_LAYERS, &c->n_layers)) < 0 ||
        (rc = g_int(g, K("attention.head_count"), 1, 1, 4096, &c->n_heads)) < 0 ||
        (rc = g_int(g, K("attention.head_count_kv"), 0, 1, 4096, &c->n_kv_heads)) < 0 ||
        (rc = g_int(g, K("attention.key_length"), 0, 1, 1024, &c->head_dim)) < 0 ||
        (rc = g_int(g, K("feed_forward_length"), 1, 1, LIMIT_DIM * 8, &c->ffn_dim)) < 0 ||
        (rc = g_int(g, K("context_length"), 1, 1, LIMIT_CTX, &c->ctx_len)) < 0 ||
        (rc = g_int(g, K("rope.dimension_count"), 0, 2, 1024, &c->n_rot)) < 0 ||
        (rc = g_int(g, K("rope.scaling.original_context_length"), 0, 1, LIMIT_CTX, &c->rope_orig_ctx)) < 0 ||
        (rc = g_int(g, "tokenizer.ggml.bos_token_id", 0, 0, LIMIT_VOCAB, &c->bos_id)) < 0 ||
        (rc = g_int(g, "tokenizer.ggml.eos_token_id", 0, 0, LIMIT_VOCAB, &c->eos_id)) < 0 ||
        (rc = g_float(g, K("attention.layer_norm_rms_epsilon"), &c->rms_eps)) < 0 ||
        (rc = g_float(g, K("rope.freq_base"), &c->rope_theta)) < 0 ||
        (rc = g_float(g, K("rope.scaling.factor"), &c->rope_factor)) < 0)
        return rc;
    rc = gguf_get_str(g, K("rope.scaling.type"), &s, &len);
    if (rc == 0) {
        snprintf(type, sizeof type, "%.*s", (int)(len < 31 ? len : 31), s);
    } else if (rc != MS_ENOTFOUND) {
        return rc;
    }
    if ((rc = scaling_kind(c, type)) < 0)
        return rc;
    /* the vocab is the tokenizer's; llama.vocab_size is optional in GGUF */
    rc = gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n_vocab);
    if (rc == MS_ENOTFOUND) {
        if ((rc = g_int(g, K("vocab_size"), 1, 1, LIMIT_VOCAB, &c->vocab_size)) < 0)
            return rc;
    } else if (rc < 0) {
        return rc;
    } else if ((rc = check_int("tokenizer.ggml.tokens count", (long long)(n_vocab > LIMIT_VOCAB ? LIMIT_VOCAB + 1 : n_vocab),
                               1, LIMIT_VOCAB, &c->vocab_size)) < 0) {
        return rc;
    }
#undef K
    return finish(c);
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

static int json_fill(runtime_config *c, json_t *o)
{
    json_t *arch = json_object_get(o, "architecture"), *rs = json_object_get(o, "rope_scaling");
    json_t *inter = json_object_get(o, "rope_interleaved");
    int rc;

    if (!json_is_string(arch))
        return ms_err(MS_EINVALID, "architecture: missing or not a string");
    snprintf(c->architecture, sizeof c->architecture, "%s", json_string_value(arch));
    if (!arch_supported(json_string_value(arch)))
        return unsupported(json_string_value(arch));
    if ((rc = j_int(o, "hidden_size", 1, 1, LIMIT_DIM, &c->dim)) < 0 ||
        (rc = j_int(o, "num_hidden_layers", 1, 1, LIMIT_LAYERS, &c->n_layers)) < 0 ||
        (rc = j_int(o, "num_attention_heads", 1, 1, 4096, &c->n_heads)) < 0 ||
        (rc = j_int(o, "num_key_value_heads", 0, 1, 4096, &c->n_kv_heads)) < 0 ||
        (rc = j_int(o, "head_dim", 0, 1, 1024, &c->head_dim)) < 0 ||
        (rc = j_int(o, "intermediate_size", 1, 1, LIMIT_DIM * 8, &c->ffn_dim)) < 0 ||
        (rc = j_int(o, "vocab_size", 1, 1, LIMIT_VOCAB, &c->vocab_size)) < 0 ||
        (rc = j_int(o, "max_position_embeddings", 1, 1, LIMIT_CTX, &c->ctx_len)) < 0 ||
        (rc = j_int(o, "bos_token_id", 0, 0, LIMIT_VOCAB, &c->bos_id)) < 0 ||
        (rc = j_int(o, "eos_token_id", 0, 0, LIMIT_VOCAB, &c->eos_id)) < 0 ||
        (rc = j_num(o, "rms_norm_eps", &c->rms_eps)) < 0 || (rc = j_num(o, "rope_theta", &c->rope_theta)) < 0)
        return rc;
    if (inter && !json_is_boolean(inter))
        return ms_err(MS_EINVALID, "rope_interleaved: expected true or false");
    c->rope_interleaved = json_is_true(inter);
    if (rs && !json_is_null(rs)) {
        json_t *t = json_object_get(rs, "rope_type");
        if (!json_is_object(rs) || !json_is_string(t))
            return ms_err(MS_EINVALID, "rope_scaling: expected an object with a string rope_type");
        if ((rc = scaling_kind(c, json_string_value(t))) < 0 || (rc = j_num(rs, "factor", &c->rope_factor)) < 0 ||
            (rc = j_num(rs, "low_freq_factor", &c->rope_low_freq_factor)) < 0 ||
            (rc = j_num(rs, "high_freq_factor", &c->rope_high_freq_factor)) < 0 ||
            (rc = j_int(rs, "original_max_position_embeddings", 0, 1, LIMIT_CTX, &c->rope_orig_ctx)) < 0)
            return ms_err_ctx("rope_scaling");
    }
    return finish(c);
}

int runtime_config_from_json(runtime_config *c, const char *json, size_t len, const char *what)
{
    json_error_t e;
    json_t *o = json_loadb(json, len, 0, &e);
    int rc;

    memset(c, 0, sizeof *c);
    c->bos_id = c->eos_id = -1;
    c->rms_eps = 1e-5;
    c->rope_theta = 10000.0;
    if (!o || !json_is_object(o)) {
        json_decref(o);
        return ms_err(MS_EINVALID, "%s: config is not a JSON object (%s, line %d)", what, o ? "not an object" : e.text,
                      e.line);
    }
    rc = json_fill(c, o);
    json_decref(o);
    return rc < 0 ? ms_err_ctx("%s: config", what) : 0;
}

/* Rope angular frequencies: theta^(-2i/n_rot), with the config's scaling. */
void runtime_rope_freqs(double *freqs, const runtime_config *c)
{
    double lo_wavelen = 0, hi_wavelen = 0;

    if (c->rope_scaling == RUNTIME_ROPE_LLAMA3) {
        lo_wavelen = c->rope_orig_ctx / c->rope_low_freq_factor;
        hi_wavelen = c->rope_orig_ctx / c->rope_high_freq_factor;
    }
    for (int i = 0; i < c->n_rot / 2; i++) {
        double f = pow(c->rope_theta, -2.0 * i / c->n_rot);

        if (c->rope_scaling == RUNTIME_ROPE_LINEAR) {
            f /= c->rope_factor;
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

