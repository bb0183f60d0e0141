/* model.c: the llama-family decoder (RUNTIME_ARCHS): Llama 2/3, TinyLlama, Mistral, llama2.c story
 * models, Qwen 2 / Qwen 3, Gemma 3 and Phi-3, which differ only where marked [qwen2] / [qwen3] /
 * [gemma] / [phi3]; and their mixtures of experts (Mixtral, Qwen2-MoE with its shared expert,
 * Qwen3-MoE), whose FFN is record_moe's. [gemma]: norms after attention and FFN as well, GeGLU,
 * embeddings scaled by sqrt(dim), local (sliding) and global layers, a logit softcap. [phi3]: q, k, v
 * and gate, up fused in one tensor each (viewed as rows), longrope scaling. [gpt-oss]: biases on q, k,
 * v, o, the router and every expert; attention sinks; even layers windowed; YaRN rope; the experts'
 * clamped SwiGLU (SWIGLU_OAI) with the router's softmax over its top-k.
 *   x = embed[tokens]
 *   per layer: q = Wq . n(x) + bq, k = Wk . n(x) + bk, v = Wv . n(x) + bv    biases: [qwen2]
 *              q = n_head(q), k = n_head(k)   per-head RMSNorm over head_dim     QK-norm: [qwen3]
 *              x += Wo . attn(rope(q), rope(k), v)                          n = RMSNorm
 *              x += W2 . (silu(W1 . n(x)) * (W3 . n(x)))      MoE: the top-k experts' sum
 *   attention of a layer with a sliding window sees only the last `window` positions (Mistral)
 *   logits = lm_head . n(x_last)            (lm_head absent: tied to embed_tokens)
 * Written once, against the backend seam (backend/backend.h): every buffer is the backend's, sized
 * at open for n_batch tokens and the KV cache for n_ctx positions, so a forward pass allocates
 * nothing. Each chunk of up to n_batch tokens is recorded as one op sequence and run at once; only
 * the logits are read back. The encoders (bert, nomic-bert) are encoder.c's: opening one here hands
 * it the weights and the backend, and runtime_embed dispatches to it; a decoder whose model names a
 * pooling embeds here, from the normed hidden rows (decoder_embed). */
#include <assert.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "quant/quant.h"
#include "runtime/runtime_int.h"

typedef struct layer {
    const backend_weight *wq, *wk, *wv, *wo, *w1, *w2, *w3;
    const backend_weight *attn_norm, *ffn_norm;
    const backend_weight *post_attn_norm, *post_ffn_norm;   /* [gemma] after attention and FFN */
    const backend_weight *bq, *bk, *bv;      /* NULL when the model has no q/k/v biases */
    const backend_weight *q_norm, *k_norm;   /* [head_dim]; NULL without QK-norm */
    const backend_weight *bo;                /* the output projection's bias, or NULL */
    /* [gpt-oss] attention sinks [heads], the router's bias [n_experts] and each expert's biases
     * ([n_experts][rows] F32 each); NULL for the other models */
    const backend_weight *sinks, *router_b, *ex_gate_b, *ex_up_b, *ex_down_b;
    /* MoE (w1, w2, w3 NULL): the router [n_experts][dim], the packs [n_experts][rows][cols], and
     * qwen2moe's shared expert with its gate (NULL when absent) */
    const backend_weight *router, *ex_gate, *ex_up, *ex_down;
    const backend_weight *sh_gate, *sh_up, *sh_down, *sh_gate_inp;
    backend_tensor sh_gate_row;   /* a 1-D shared_expert_gate seen as a [1][dim] matrix (a view) */
    backend_tensor fused[5];      /* [phi3] q, k, v rows of qkv_proj; gate, up rows of gate_up_proj (views) */
    /* [deepseek2] MLA: q's low-rank pair and its norm (wq_a NULL: wq alone), the latent and k_pe
     * rows of kv_a_proj_with_mqa (views in mla_view), the latent's norm, the absorbed per-head packs
     * built at open (mla_pack, bind_mla_packs) and the router's selection bias (NULL: none) */
    const backend_weight *wq_a, *q_a_norm, *wq_b, *kv_lat, *kv_pe, *kv_norm, *mla_qk, *mla_vo, *sel_bias;
    backend_tensor mla_view[2], mla_pack[2];
    char mla_name[2][64];
    int window;   /* attention sees the last `window` positions (0: all) */
} layer;

/* One sequence's KV cache: `past` positions of it filled; `len` elements of the pool (of each of
 * kc and vc) from `base`, laid out for `ctx` positions (0: it holds none). */
typedef struct kv_seq {
    size_t base, len;
    int ctx, past;
} kv_seq;

/* One layer's part of one sequence's KV cache: `slots` rows of kv_dim from element `off` of kc
 * and vc. A layer with a window keeps a ring of window + n_batch - 1 slots (`ring`, position p
 * in slot p % ring) when that is shorter than the sequence's context: its cache never grows
 * past what attention reads. */
typedef struct kv_part {
    size_t off;
    int slots, ring;
} kv_part;

struct runtime_model {
    runtime_weights *w;
    runtime_config c;
    backend *be;
    int n_ctx, n_batch, kv_f16;
    /* n_seq sequences, each with its own cache (kvs[s]). The caches share one pool of kv_cap
     * elements in each of kc and vc (n_seq caches of n_ctx positions at open); sequence s's layer
     * l's part is kv[s * n_layers + l] (seq_layout). max_ctx: the most one sequence may take (the
     * pool's, at most the model's). kv_mu guards the table's changes (runtime_seq_set_ctx); a
     * pass reads only its own sequences' entries. */
    int n_seq, max_ctx;
    kv_seq *kvs;
    size_t kv_cap;
    kv_part *kv;
    pthread_mutex_t kv_mu;
    /* The pass being recorded: n_step sequences, each n rows of it in order from row 0 (their
     * logits rows 0.. of `logits`, in the same order); runtime_embed's packing leaves it empty */
    runtime_seq_item step[RUNTIME_MAX_SEQ];
    int n_step;
    int32_t *toks;         /* the pass's tokens (n_batch), runtime_embed's packed ones too */
    runtime__batcher *bt;
    layer *layers;
    const backend_weight *embed, *lm_head, *out_norm;
    backend_buf *kc, *vc;        /* each layer's kv_slots rows of kv_dim, f32 or f16 */
    backend_buf *x, *xb, *q, *k, *v, *att, *hb, *hb2, *logits;
    backend_buf *r_logits, *r_wts, *r_ids, *eh, *eh2, *eo, *sh, *sh_g;   /* MoE: NULL for a dense model */
    /* [deepseek2] MLA: q's low-rank rows, the latent, k_pe, q absorbed, the heads' values; the
     * absorbed packs of every layer (bind_mla_packs), of mla_type (F32 when every source is, else
     * F16), and one layer's in f32 while they are built */
    backend_buf *qa, *lat, *kpe, *qatt, *mo;
    uint8_t *mla_mem;
    int mla_type;
    float *mla_tmp;
    backend_seq seq;
    double *freqs;
    double *freqs_local;   /* the window layers' (Gemma 3: base rope_local_theta, unscaled) */
    /* [phi3] longrope: freqs are for a context on the side of rope_orig_ctx that n_ctx is on,
     * freqs_alt (NULL: the model lacks those factors) for one on the other (seq_freqs) */
    double *freqs_alt;
    runtime_encoder *enc;  /* an encoder (bert, nomic-bert): encoder.c runs it; the rest above unused */
    float *rows;           /* a decoder that embeds: n_batch hidden rows read back, and pooling's */
    double *acc;           /* sums (dim) */
    /* runtime_embed's packed batch (pk_n sequences; 0: a plain forward): sequence i is rows
     * pk_start[i] .. + pk_len[i], each from position 0; their tokens in toks */
    int pk_start[32], pk_len[32], pk_n;
    int embed_runs;        /* forwards of the last runtime_embed (runtime__model_embed_runs) */
    int embed_normalize;   /* the call's: 0 for runtime_embed_pooled */
};

/* Sequences a decoder packs into one forward at most (each costs a few ops per layer). */
#define EMBED_MAX_SEQS 32

/* Ops recorded per layer at most, besides each sequence's rope, cache writes and attention
 * (OPS_PER_SEQ), and around the layers (embedding, head) besides each sequence's final norm. */
#define OPS_PER_LAYER 40
#define OPS_PER_SEQ 7
#define OPS_OUTSIDE 8

/* The attention's geometry: MLA attends with one kv head of n_rot + kv_lora_rank over cache rows
 * [k_pe | latent] (values: the same rows); the other models with their own heads. */
static int att_kv_heads(const runtime_config *c) { return c->kv_lora_rank ? 1 : c->n_kv_heads; }
static int att_head_dim(const runtime_config *c) { return c->kv_lora_rank ? c->n_rot + c->kv_lora_rank : c->head_dim; }

int runtime__expect_matrix(const backend_weight **out, backend *be, const runtime_weights *w, const char *name,
                           uint64_t rows, uint64_t cols)
{
    const backend_tensor *t = runtime_weights_find(w, name);
    uint64_t row_bytes;
    int rc;

    *out = NULL;
    if (!t)
        return ms_err(MS_ENOTFOUND, "tensor '%s' not found", name);
    if (t->n_dims != 2 || t->shape[0] != rows || t->shape[1] != cols) {
        if (t->n_dims == 1 && (rc = backend_weight_import(out, be, t)) < 0)   /* the type's refusal first */
            return rc;
        return ms_err(MS_EINVALID, "tensor '%s': shape [%llu, %llu] (%d dims), expected [%llu, %llu]", name,
                      (unsigned long long)t->shape[0], (unsigned long long)(t->n_dims > 1 ? t->shape[1] : 0),
                      t->n_dims, (unsigned long long)rows, (unsigned long long)cols);
    }
    if ((rc = backend_weight_import(out, be, t)) < 0)
        return rc;
    if (t->type == BACKEND_TYPE_MLX)   /* codes, scales and groups were checked by weights.c */
        return 0;
    if (ggml_row_nbytes(&row_bytes, t->type, cols) < 0 || row_bytes * rows != t->nbytes)
        return ms_err(MS_EINVALID, "tensor '%s': %llu bytes, expected %llu rows of %llu", name,
                      (unsigned long long)t->nbytes, (unsigned long long)rows, (unsigned long long)row_bytes);
    return 0;
}

/* A norm (or bias) vector of `dim` F32, F16 or BF16 values; the backend keeps it as f32. */
int runtime__expect_vec(const backend_weight **out, backend *be, const runtime_weights *w, const char *name, int dim)
{
    const backend_tensor *t = runtime_weights_find(w, name);

    *out = NULL;
    if (!t)
        return ms_err(MS_ENOTFOUND, "tensor '%s' not found", name);
    if (t->n_dims != 1 || t->shape[0] != (uint64_t)dim ||
        (t->type != GGML_TYPE_F32 && t->type != GGML_TYPE_F16 && t->type != GGML_TYPE_BF16))
        return ms_err(MS_EINVALID, "tensor '%s': expected a vector of %d F32/F16/BF16 values", name, dim);
    return backend_weight_import(out, be, t);
}

static int expect_matrix(const backend_weight **out, runtime_model *m, const char *name, uint64_t rows, uint64_t cols)
{
    return runtime__expect_matrix(out, m->be, m->w, name, rows, cols);
}

static int expect_norm(const backend_weight **out, runtime_model *m, const char *name, int dim)
{
    return runtime__expect_vec(out, m->be, m->w, name, dim);
}

/* Optional vector `kind` of layer l: *out stays NULL when absent and `required` is 0. */
static int layer_vec(const backend_weight **out, runtime_model *m, int l, const char *kind, int len, int required)
{
    char name[128];

    *out = NULL;
    snprintf(name, sizeof name, "model.layers.%d.self_attn.%s", l, kind);
    if (!required && !runtime_weights_find(m->w, name))
        return 0;
    return expect_norm(out, m, name, len);
}

/* q/k/v biases (qwen2 and gpt-oss have them, a llama may), gpt-oss's output bias and sinks, and
 * QK-norm (qwen3 has it). Each architecture's own tensors are required, so that a misnamed import
 * fails at open instead of running wrong. */
static int bind_qwen(runtime_model *m, layer *L, int l)
{
    const runtime_config *c = &m->c;
    int q_dim = c->n_heads * c->head_dim, kv_dim = c->n_kv_heads * c->head_dim, rc;
    int qkv_bias = strncmp(c->architecture, "qwen2", 5) == 0 || c->gptoss;
    int qwen3 = strncmp(c->architecture, "qwen3", 5) == 0;

    if ((rc = layer_vec(&L->bo, m, l, "o_proj.bias", c->dim, c->gptoss)) < 0 ||
        (rc = layer_vec(&L->sinks, m, l, "sinks.weight", c->n_heads, c->gptoss)) < 0 ||
        (rc = layer_vec(&L->bq, m, l, "q_proj.bias", q_dim, qkv_bias)) < 0 ||
        (rc = layer_vec(&L->bk, m, l, "k_proj.bias", kv_dim, qkv_bias)) < 0 ||
        (rc = layer_vec(&L->bv, m, l, "v_proj.bias", kv_dim, qkv_bias)) < 0 ||
        (rc = layer_vec(&L->q_norm, m, l, "q_norm.weight", c->head_dim, qwen3 || c->gemma)) < 0 ||
        (rc = layer_vec(&L->k_norm, m, l, "k_norm.weight", c->head_dim, qwen3)) < 0)
        return rc;
    if (!L->q_norm != !L->k_norm)
        return ms_err(MS_EINVALID, "layer %d: self_attn.q_norm and self_attn.k_norm come together; one is missing", l);
    return 0;
}

/* An expert pack [n_experts][rows][cols] of layer l (model.layers.L.<kind>.weight). */
static int expect_pack(const backend_weight **out, runtime_model *m, int l, const char *kind, uint64_t rows,
                       uint64_t cols)
{
    const backend_tensor *t;
    uint64_t n_exp = (uint64_t)m->c.n_experts, row_bytes;
    char name[128];
    int rc;

    *out = NULL;
    snprintf(name, sizeof name, "model.layers.%d.%s.weight", l, kind);
    if (!(t = runtime_weights_find(m->w, name)))
        return ms_err(MS_ENOTFOUND, "tensor '%s' not found (an MoE model needs its expert packs)", name);
    if (t->n_dims != 3 || t->shape[0] != n_exp || t->shape[1] != rows || t->shape[2] != cols)
        return ms_err(MS_EINVALID, "tensor '%s': shape [%llu, %llu, %llu] (%d dims), expected [%llu, %llu, %llu]", name,
                      (unsigned long long)t->shape[0], (unsigned long long)t->shape[1],
                      (unsigned long long)t->shape[2], t->n_dims, (unsigned long long)n_exp,
                      (unsigned long long)rows, (unsigned long long)cols);
    if ((rc = backend_weight_import(out, m->be, t)) < 0)
        return rc;
    if (t->type != BACKEND_TYPE_MLX &&
        (ggml_row_nbytes(&row_bytes, t->type, cols) < 0 || row_bytes * rows * n_exp != t->nbytes))
        return ms_err(MS_EINVALID, "tensor '%s': %llu bytes, expected %llu experts of %llu rows of %llu", name,
                      (unsigned long long)t->nbytes, (unsigned long long)n_exp, (unsigned long long)rows,
                      (unsigned long long)row_bytes);
    return 0;
}

/* [gpt-oss] The biases of layer l's experts: model.layers.L.<kind>.bias, F32 [n_experts][rows]. */
static int expect_pack_bias(const backend_weight **out, runtime_model *m, int l, const char *kind, uint64_t rows)
{
    const backend_tensor *t;
    char name[128];

    snprintf(name, sizeof name, "model.layers.%d.%s.bias", l, kind);
    if (!(t = runtime_weights_find(m->w, name)))
        return ms_err(MS_ENOTFOUND, "tensor '%s' not found (gpt-oss's experts have biases)", name);
    if (t->type != GGML_TYPE_F32)
        return ms_err(MS_EUNSUPPORTED, "tensor '%s': type %s; expert biases are run as F32 only", name,
                      ggml_type_name(t->type) ? ggml_type_name(t->type) : "?");
    return runtime__expect_matrix(out, m->be, m->w, name, (uint64_t)m->c.n_experts, rows);
}

/* The router, the three expert packs and, when the file has one, the shared expert and its gate. */
static int bind_moe(runtime_model *m, layer *L, int l)
{
    const runtime_config *c = &m->c;
    const backend_tensor *g;
    uint64_t eff = (uint64_t)c->expert_ffn_dim, dim = (uint64_t)c->dim, sff = (uint64_t)c->shared_ffn_dim;
    char name[128];
    int rc;

    snprintf(name, sizeof name, "model.layers.%d.mlp.gate.weight", l);
    if ((rc = expect_matrix(&L->router, m, name, (uint64_t)c->n_experts, dim)) < 0 ||
        (rc = expect_pack(&L->ex_gate, m, l, "mlp.experts.gate_proj", eff, dim)) < 0 ||
        (rc = expect_pack(&L->ex_up, m, l, "mlp.experts.up_proj", eff, dim)) < 0 ||
        (rc = expect_pack(&L->ex_down, m, l, "mlp.experts.down_proj", dim, eff)) < 0)
        return rc;
    snprintf(name, sizeof name, "model.layers.%d.mlp.gate.e_score_correction.bias", l);
    if (c->moe_route >= BACKEND_ROUTE_SOFTMAX_GROUPED && runtime_weights_find(m->w, name) &&
        (rc = expect_norm(&L->sel_bias, m, name, c->n_experts)) < 0)   /* [deepseek2] V3's */
        return rc;
    if (c->gptoss) {
        snprintf(name, sizeof name, "model.layers.%d.mlp.gate.bias", l);
        if ((rc = expect_norm(&L->router_b, m, name, c->n_experts)) < 0 ||
            (rc = expect_pack_bias(&L->ex_gate_b, m, l, "mlp.experts.gate_proj", eff)) < 0 ||
            (rc = expect_pack_bias(&L->ex_up_b, m, l, "mlp.experts.up_proj", eff)) < 0 ||
            (rc = expect_pack_bias(&L->ex_down_b, m, l, "mlp.experts.down_proj", dim)) < 0)
            return rc;
    }
    snprintf(name, sizeof name, "model.layers.%d.mlp.shared_experts.gate_proj.weight", l);
    if (!runtime_weights_find(m->w, name)) {
        if (strcmp(c->architecture, "qwen2moe") == 0)
            return ms_err(MS_ENOTFOUND, "tensor '%s' not found (qwen2moe has a shared expert)", name);
        return 0;
    }
    if (!sff)
        return ms_err(MS_EINVALID, "layer %d has a shared expert but the config gives no shared expert size", l);
    if ((rc = expect_matrix(&L->sh_gate, m, name, sff, dim)) < 0)
        return rc;
    snprintf(name, sizeof name, "model.layers.%d.mlp.shared_experts.up_proj.weight", l);
    if ((rc = expect_matrix(&L->sh_up, m, name, sff, dim)) < 0)
        return rc;
    snprintf(name, sizeof name, "model.layers.%d.mlp.shared_experts.down_proj.weight", l);
    if ((rc = expect_matrix(&L->sh_down, m, name, dim, sff)) < 0)
        return rc;
    if (c->kv_lora_rank)   /* [deepseek2] its shared experts are added ungated */
        return 0;
    snprintf(name, sizeof name, "model.layers.%d.mlp.shared_expert_gate.weight", l);
    if (!(g = runtime_weights_find(m->w, name)))
        return ms_err(MS_ENOTFOUND, "tensor '%s' not found (the shared expert's gate)", name);
    if (g->n_dims == 1 && g->shape[0] == dim) {   /* GGUF keeps it as a vector: the same bytes as [1][dim] */
        L->sh_gate_row = *g;
        L->sh_gate_row.n_dims = 2;
        L->sh_gate_row.shape[0] = 1;
        L->sh_gate_row.shape[1] = dim;
        return backend_weight_import(&L->sh_gate_inp, m->be, &L->sh_gate_row);
    }
    return expect_matrix(&L->sh_gate_inp, m, name, 1, dim);
}

/* Every op kind this model will record, asked of the backend at open (backend_supports). */
static int check_ops(runtime_model *m)
{
    const runtime_config *c = &m->c;
    backend_op_kind need[16];
    size_t n = 0;

    if (c->sliding_window || c->attn_scale != 0)
        need[n++] = BACKEND_OP_ATTENTION_WINDOW;
    if (c->norm_offset != 0)
        need[n++] = BACKEND_OP_RMS_NORM_OFFSET;
    if (c->gemma) {
        need[n++] = BACKEND_OP_GEGLU;
        need[n++] = BACKEND_OP_SCALE;
    }
    if (c->final_softcap != 0)
        need[n++] = BACKEND_OP_SOFTCAP;
    if (c->gptoss) {
        need[n++] = BACKEND_OP_ATTENTION_SINKS;
        need[n++] = BACKEND_OP_ADD_ROW_ID;
        need[n++] = BACKEND_OP_SWIGLU_OAI;
    }
    if (c->kv_lora_rank) {
        need[n++] = BACKEND_OP_MATMUL_HEADS;
        need[n++] = BACKEND_OP_STORE_ROWS;
        need[n++] = BACKEND_OP_ATTENTION_WINDOW;   /* its score scale */
    }
    if (c->moe_route >= BACKEND_ROUTE_SOFTMAX_GROUPED)
        need[n++] = BACKEND_OP_MOE_ROUTE_GROUPED;
    if (c->n_experts) {
        need[n++] = BACKEND_OP_MOE_ROUTE;
        need[n++] = BACKEND_OP_MATMUL_ID;
        need[n++] = BACKEND_OP_MOE_SUM;
        if (c->shared_ffn_dim)
            need[n++] = BACKEND_OP_GATED_ADD;
    }
    for (size_t i = 0; i < n; i++)
        if (!backend_supports(m->be, need[i]))
            return ms_err(MS_EUNSUPPORTED, "architecture %s needs op %s, which device %s does not run",
                          c->architecture, backend_op_name(need[i]), backend_describe(m->be));
    return 0;
}

/* Rows r0 .. r0 + rows of matrix t as a matrix of its own: a view into the same bytes. */
static backend_tensor row_view(const backend_tensor *t, uint64_t r0, uint64_t rows)
{
    backend_tensor v = *t;
    uint64_t cols = t->shape[1], row_bytes = 0;

    v.shape[0] = rows;
    if (t->type == BACKEND_TYPE_MLX) {
        uint64_t g = (cols / (uint64_t)t->group_size) * st_dtype_size(t->scale_dtype), code = cols * t->bits / 8;
        v.data = (const uint8_t *)t->data + r0 * code;
        v.scales = (const uint8_t *)t->scales + r0 * g;
        if (t->biases)
            v.biases = (const uint8_t *)t->biases + r0 * g;
        v.nbytes = rows * (code + g * (t->biases ? 2 : 1));
        return v;
    }
    ggml_row_nbytes(&row_bytes, t->type, cols);
    v.data = (const uint8_t *)t->data + r0 * row_bytes;
    v.nbytes = rows * row_bytes;
    return v;
}

/* Phi-3's fused qkv_proj [q + 2 kv][dim] and gate_up_proj [2 ffn][dim], split into views (no copy). */
static int bind_phi3(runtime_model *m, layer *L, int l)
{
    const runtime_config *c = &m->c;
    uint64_t q_dim = (uint64_t)c->n_heads * c->head_dim, kv_dim = (uint64_t)c->n_kv_heads * c->head_dim;
    uint64_t ff = (uint64_t)c->ffn_dim;
    const backend_weight *fw;
    const backend_tensor *t;
    char name[128];
    int rc;

    snprintf(name, sizeof name, "model.layers.%d.self_attn.qkv_proj.weight", l);
    if ((rc = expect_matrix(&fw, m, name, q_dim + 2 * kv_dim, (uint64_t)c->dim)) < 0)
        return rc;
    t = fw->t;
    L->fused[0] = row_view(t, 0, q_dim);
    L->fused[1] = row_view(t, q_dim, kv_dim);
    L->fused[2] = row_view(t, q_dim + kv_dim, kv_dim);
    snprintf(name, sizeof name, "model.layers.%d.mlp.gate_up_proj.weight", l);
    if ((rc = expect_matrix(&fw, m, name, 2 * ff, (uint64_t)c->dim)) < 0)
        return rc;
    t = fw->t;
    L->fused[3] = row_view(t, 0, ff);
    L->fused[4] = row_view(t, ff, ff);
    if ((rc = backend_weight_import(&L->wq, m->be, &L->fused[0])) < 0 ||
        (rc = backend_weight_import(&L->wk, m->be, &L->fused[1])) < 0 ||
        (rc = backend_weight_import(&L->wv, m->be, &L->fused[2])) < 0 ||
        (rc = backend_weight_import(&L->w1, m->be, &L->fused[3])) < 0 ||
        (rc = backend_weight_import(&L->w3, m->be, &L->fused[4])) < 0)
        return rc;
    return 0;
}

/* ---------------------------------------------------------------- [deepseek2] MLA
 * Attention over the latent, as DeepSeek's absorbed form computes it: the cache row of a position
 * is [k_pe | c] (c = n(Wkv_a . x), the latent); head h's score is q_nope . Wk_h c + q_pe . k_pe =
 * [q_pe | Wk_h^T q_nope] . [k_pe | c], and its value Wv_h (sum_j p_j c_j). Wk_h, Wv_h are head h's
 * rows of kv_b_proj. Both absorptions are per-head matrices (MATMUL_HEADS), built once at open
 * (mla_qk, mla_vo: F16, or F32 for an F32 model); the attention is one MQA over the cache with values the same rows (the k_pe
 * part of its output meets zero columns of mla_vo). */

/* The f32 pack `src` as a 3-D weight of m->mla_type at `dst`, named after its source. F16 rounds
 * once: exact for an F16 source, and for a quantized one far below its own steps. */
static int mla_pack_import(const backend_weight **out, runtime_model *m, layer *L, int i, const char *what,
                           const float *src, uint8_t *dst, uint64_t heads, uint64_t rows, uint64_t cols)
{
    backend_tensor *t = &L->mla_pack[i];
    size_t n = heads * rows * cols;
    int rc;

    if (m->mla_type == GGML_TYPE_F16 && (rc = quant_from_f32(dst, ST_F16, src, n)) < 0)
        return rc;
    if (m->mla_type == GGML_TYPE_F32)
        memcpy(dst, src, n * sizeof *src);
    snprintf(L->mla_name[i], sizeof L->mla_name[i], "%s (absorbed)", what);
    memset(t, 0, sizeof *t);
    t->name = L->mla_name[i];
    t->type = m->mla_type;
    t->n_dims = 3;
    t->shape[0] = heads;
    t->shape[1] = rows;
    t->shape[2] = cols;
    t->data = dst;
    t->nbytes = n * (m->mla_type == GGML_TYPE_F16 ? 2 : 4);
    return backend_weight_import(out, m->be, t);
}

/* Layer l's absorbed packs, into qk ([heads][n_rot + kv_lora][qk_nope + n_rot]: the identity on q_pe,
 * moved first, then Wk_h^T) and vo ([heads][v_head_dim][n_rot + kv_lora]: zero on k_pe, then Wv_h),
 * from kv_b_proj [heads * (qk_nope + v_head_dim)][kv_lora], or from a later converter's split
 * k_b_proj [heads][kv_lora][qk_nope] and v_b_proj [heads][v_head_dim][kv_lora]. */
static int bind_mla_packs(runtime_model *m, layer *L, int l, uint8_t *dst)
{
    const runtime_config *c = &m->c;
    uint64_t H = (uint64_t)c->n_heads, R = (uint64_t)c->n_rot, N = (uint64_t)c->head_dim - R;
    uint64_t C = (uint64_t)c->kv_lora_rank, V = (uint64_t)c->v_head_dim, AR = R + C, QC = N + R;
    const backend_tensor *kv, *kb = NULL, *vb = NULL;
    float *row, *qk = m->mla_tmp, *vo = m->mla_tmp + H * AR * QC;
    size_t elt = m->mla_type == GGML_TYPE_F16 ? 2 : 4;
    char name[128];
    int rc = 0;

    snprintf(name, sizeof name, "model.layers.%d.self_attn.kv_b_proj.weight", l);
    if (!(kv = runtime_weights_find(m->w, name))) {
        snprintf(name, sizeof name, "model.layers.%d.self_attn.k_b_proj.weight", l);
        kb = runtime_weights_find(m->w, name);
        snprintf(name, sizeof name, "model.layers.%d.self_attn.v_b_proj.weight", l);
        vb = runtime_weights_find(m->w, name);
        if (!kb || !vb)
            return ms_err(MS_ENOTFOUND, "tensor 'model.layers.%d.self_attn.kv_b_proj.weight' not found (nor k_b_proj "
                          "and v_b_proj): MLA needs it", l);
        if (kb->n_dims != 3 || kb->shape[0] != H || kb->shape[1] != C || kb->shape[2] != N)
            return ms_err(MS_EINVALID, "tensor '%s': expected shape [%llu, %llu, %llu]", kb->name,
                          (unsigned long long)H, (unsigned long long)C, (unsigned long long)N);
        if (vb->n_dims != 3 || vb->shape[0] != H || vb->shape[1] != V || vb->shape[2] != C)
            return ms_err(MS_EINVALID, "tensor '%s': expected shape [%llu, %llu, %llu]", vb->name,
                          (unsigned long long)H, (unsigned long long)V, (unsigned long long)C);
    } else if (kv->n_dims != 2 || kv->shape[0] != H * (N + V) || kv->shape[1] != C) {
        return ms_err(MS_EINVALID, "tensor '%s': shape [%llu, %llu] (%d dims), expected [%llu, %llu]", kv->name,
                      (unsigned long long)kv->shape[0], (unsigned long long)(kv->n_dims > 1 ? kv->shape[1] : 0),
                      kv->n_dims, (unsigned long long)(H * (N + V)), (unsigned long long)C);
    }
    if (!(row = malloc((C > N ? C : N) * sizeof *row)))
        return ms_err(MS_ENOMEM, "out of memory");
    memset(qk, 0, H * AR * QC * sizeof *qk);
    memset(vo, 0, H * V * AR * sizeof *vo);
    for (uint64_t h = 0; h < H && rc == 0; h++) {
        float *q = qk + h * AR * QC, *v = vo + h * V * AR;
        for (uint64_t r = 0; r < R; r++)
            q[r * QC + N + r] = 1.0f;
        for (uint64_t d = 0; d < (kv ? N : C) && rc == 0; d++) {   /* kv: row d of head h; kb: its row d = latent d */
            if ((rc = backend_tensor_row(row, kv ? kv : kb, kv ? h * (N + V) + d : h * C + d)) < 0)
                break;
            for (uint64_t j = 0; j < (kv ? C : N); j++) {
                if (kv)
                    q[(R + j) * QC + d] = row[j];
                else
                    q[(R + d) * QC + j] = row[j];
            }
        }
        for (uint64_t j = 0; j < V && rc == 0; j++) {
            if ((rc = backend_tensor_row(row, kv ? kv : vb, kv ? h * (N + V) + N + j : h * V + j)) < 0)
                break;
            memcpy(v + j * AR + R, row, C * sizeof *row);
        }
    }
    free(row);
    if (rc < 0)
        return ms_err_ctx("layer %d: absorbing kv_b_proj", l);
    if ((rc = mla_pack_import(&L->mla_qk, m, L, 0, kv ? kv->name : kb->name, qk, dst, H, AR, QC)) < 0 ||
        (rc = mla_pack_import(&L->mla_vo, m, L, 1, kv ? kv->name : vb->name, vo, dst + H * AR * QC * elt, H, V,
                              AR)) < 0)
        return rc;
    return 0;
}

/* The packs' type: F32 when every layer's source (kv_b_proj, else k_b_proj and v_b_proj) is F32,
 * else F16 (half the bytes a decoded token reads through them). */
static int mla_pack_type(const runtime_model *m)
{
    static const char *const kinds[] = { "kv_b_proj", "k_b_proj", "v_b_proj" };
    const backend_tensor *t;
    char name[128];

    for (int l = 0; l < m->c.n_layers; l++)
        for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
            snprintf(name, sizeof name, "model.layers.%d.self_attn.%s.weight", l, kinds[i]);
            t = runtime_weights_find(m->w, name);
            if (t && t->type != GGML_TYPE_F32)
                return GGML_TYPE_F16;
        }
    return GGML_TYPE_F32;
}

/* Floats of one layer's two absorbed packs. */
static size_t mla_pack_floats(const runtime_config *c)
{
    size_t H = (size_t)c->n_heads, AR = (size_t)c->n_rot + c->kv_lora_rank, QC = (size_t)c->head_dim;

    return H * AR * QC + H * (size_t)c->v_head_dim * AR;
}

/* Layer l's attention tensors: q (low-rank or not), kv_a split into the latent's and k_pe's rows,
 * the norms, the packs. */
static int bind_mla(runtime_model *m, layer *L, int l)
{
    const runtime_config *c = &m->c;
    uint64_t q_dim = (uint64_t)c->n_heads * c->head_dim, C = (uint64_t)c->kv_lora_rank, R = (uint64_t)c->n_rot;
    size_t per = mla_pack_floats(c) * (m->mla_type == GGML_TYPE_F16 ? 2 : 4);
    const backend_weight *kva;
    char name[128];
    int rc;

#define MAT(field, kind, rows, cols)                                                    \
    snprintf(name, sizeof name, "model.layers.%d.self_attn.%s.weight", l, kind);        \
    if ((rc = expect_matrix(&L->field, m, name, rows, cols)) < 0)                       \
        return rc;
#define NORM(field, kind, len)                                                          \
    snprintf(name, sizeof name, "model.layers.%d.self_attn.%s.weight", l, kind);        \
    if ((rc = expect_norm(&L->field, m, name, len)) < 0)                                \
        return rc;
    if (c->q_lora_rank) {
        MAT(wq_a, "q_a_proj", (uint64_t)c->q_lora_rank, (uint64_t)c->dim)
        NORM(q_a_norm, "q_a_layernorm", c->q_lora_rank)
        MAT(wq_b, "q_b_proj", q_dim, (uint64_t)c->q_lora_rank)
    } else {
        MAT(wq, "q_proj", q_dim, (uint64_t)c->dim)
    }
    MAT(wo, "o_proj", (uint64_t)c->dim, (uint64_t)c->n_heads * c->v_head_dim)
    NORM(kv_norm, "kv_a_layernorm", c->kv_lora_rank)
    MAT(kv_lat, "kv_a_proj_with_mqa", C + R, (uint64_t)c->dim)   /* checked whole, then seen as two */
#undef MAT
#undef NORM
    kva = L->kv_lat;
    L->mla_view[0] = row_view(kva->t, 0, C);
    L->mla_view[1] = row_view(kva->t, C, R);
    if ((rc = backend_weight_import(&L->kv_lat, m->be, &L->mla_view[0])) < 0 ||
        (rc = backend_weight_import(&L->kv_pe, m->be, &L->mla_view[1])) < 0)
        return rc;
    return bind_mla_packs(m, L, l, m->mla_mem + (size_t)l * per);
}

static int bind_tensors(runtime_model *m)
{
    const runtime_config *c = &m->c;
    int phi3 = strcmp(c->architecture, "phi3") == 0;
    uint64_t q_dim = (uint64_t)c->n_heads * c->head_dim, kv_dim = (uint64_t)c->n_kv_heads * c->head_dim;
    char name[128];
    int rc;

    if ((rc = expect_matrix(&m->embed, m, "model.embed_tokens.weight", c->vocab_size, c->dim)) < 0)
        return rc;
    m->lm_head = m->embed;   /* tied unless the file has its own head */
    if (runtime_weights_find(m->w, "lm_head.weight") &&
        (rc = expect_matrix(&m->lm_head, m, "lm_head.weight", c->vocab_size, c->dim)) < 0)
        return rc;
    if ((rc = expect_norm(&m->out_norm, m, "model.norm.weight", c->dim)) < 0)
        return rc;
    for (int l = 0; l < c->n_layers; l++) {
        layer *L = &m->layers[l];
#define MAT(field, kind, rows, cols)                                                    \
        snprintf(name, sizeof name, "model.layers.%d.%s.weight", l, kind);             \
        if ((rc = expect_matrix(&L->field, m, name, rows, cols)) < 0)                  \
            return rc;
        if (phi3) {
            if ((rc = bind_phi3(m, L, l)) < 0)
                return rc;
        } else if (c->kv_lora_rank) {   /* [deepseek2] */
            if ((rc = bind_mla(m, L, l)) < 0)
                return rc;
        } else {
            MAT(wq, "self_attn.q_proj", q_dim, c->dim)
            MAT(wk, "self_attn.k_proj", kv_dim, c->dim)
            MAT(wv, "self_attn.v_proj", kv_dim, c->dim)
        }
        if (!c->kv_lora_rank) {
            MAT(wo, "self_attn.o_proj", c->dim, q_dim)
        }
        if (c->n_experts && l >= c->n_dense_lead) {   /* [deepseek2] its first layers are dense */
            if ((rc = bind_moe(m, L, l)) < 0)
                return rc;
        } else {
            if (!phi3) {
                MAT(w1, "mlp.gate_proj", c->ffn_dim, c->dim)
                MAT(w3, "mlp.up_proj", c->ffn_dim, c->dim)
            }
            MAT(w2, "mlp.down_proj", c->dim, c->ffn_dim)
        }
#undef MAT
        snprintf(name, sizeof name, "model.layers.%d.input_layernorm.weight", l);
        if ((rc = expect_norm(&L->attn_norm, m, name, c->dim)) < 0)
            return rc;
        snprintf(name, sizeof name, "model.layers.%d.post_attention_layernorm.weight", l);
        if ((rc = expect_norm(c->gemma ? &L->post_attn_norm : &L->ffn_norm, m, name, c->dim)) < 0)
            return rc;
        if (c->gemma) {   /* post_attention_layernorm is gemma's norm after attention, not before the FFN */
            snprintf(name, sizeof name, "model.layers.%d.pre_feedforward_layernorm.weight", l);
            if ((rc = expect_norm(&L->ffn_norm, m, name, c->dim)) < 0)
                return rc;
            snprintf(name, sizeof name, "model.layers.%d.post_feedforward_layernorm.weight", l);
            if ((rc = expect_norm(&L->post_ffn_norm, m, name, c->dim)) < 0)
                return rc;
        }
        if ((rc = bind_qwen(m, L, l)) < 0)
            return rc;
    }
    return 0;
}

/* A vector of `n` F32 rope divisors, tensor `name` (NULL when absent). */
static int rope_divisors(const float **out, runtime_model *m, const char *name, int n)
{
    const backend_tensor *t = runtime_weights_find(m->w, name);

    *out = NULL;
    if (!t)
        return 0;
    if (t->type != GGML_TYPE_F32 || t->n_dims != 1 || t->shape[0] != (uint64_t)n)
        return ms_err(MS_EINVALID, "tensor '%s': expected %d F32 values", name, n);
    for (int i = 0; i < n; i++) {   /* read through memcpy: the blob need not align floats */
        float f;
        memcpy(&f, (const uint8_t *)t->data + (size_t)i * sizeof f, sizeof f);
        if (!(f >= 1e-3f && f < 1e6f))
            return ms_err(MS_EINVALID, "tensor '%s': value %d is %g, expected a divisor in [0.001, 1e6)", name, i, f);
    }
    *out = t->data;
    return 0;
}

/* Per-frequency divisors of freqs: Llama 3.1's rope_freqs (model.rope_freqs, format/gguf_names.c)
 * and Phi-3's longrope factors, long for a context past the original one (use_long), else short. */
static int apply_rope_divisors(runtime_model *m, double *freqs, int use_long)
{
    const runtime_config *c = &m->c;
    int half = c->n_rot / 2, rc;
    const char *name = use_long ? "rope_factors_long.weight" : "rope_factors_short.weight";
    const float *f;
    float buf;

    if ((rc = rope_divisors(&f, m, "model.rope_freqs.weight", half)) < 0)
        return rc;
    for (int i = 0; f && i < half; i++) {
        memcpy(&buf, (const uint8_t *)f + (size_t)i * sizeof buf, sizeof buf);
        freqs[i] /= buf;
    }
    if (c->rope_scaling != RUNTIME_ROPE_LONGROPE)
        return 0;
    if ((rc = rope_divisors(&f, m, name, half)) < 0)
        return rc;
    if (!f && c->rope_n_factors == half)
        f = use_long ? c->rope_long : c->rope_short;
    if (!f)
        return ms_err(MS_EINVALID, "longrope scaling: neither tensor '%s' nor the config's %s_factor list", name,
                      use_long ? "long" : "short");
    for (int i = 0; i < half; i++) {
        memcpy(&buf, (const uint8_t *)f + (size_t)i * sizeof buf, sizeof buf);
        freqs[i] /= buf;
    }
    return 0;
}

/* The rope frequencies of sequence seq (its context decides Phi-3's longrope factors). */
static const double *seq_freqs(const runtime_model *m, int seq)
{
    const runtime_config *c = &m->c;

    if (c->rope_scaling == RUNTIME_ROPE_LONGROPE &&
        (m->kvs[seq].ctx > c->rope_orig_ctx) != (m->n_ctx > c->rope_orig_ctx))
        return m->freqs_alt;
    return m->freqs;
}

/* Longrope scales cos and sin of q and k by the attention factor: scores by its square, which
 * ATTENTION's score scale carries (set before the ops are checked). */
static void longrope_scale(runtime_model *m)
{
    runtime_config *c = &m->c;
    double a = c->rope_attn_factor, base;

    if (c->rope_scaling != RUNTIME_ROPE_LONGROPE)
        return;
    if (a == 0)
        a = c->ctx_len > c->rope_orig_ctx ? sqrt(1 + log((double)c->ctx_len / c->rope_orig_ctx) / log(c->rope_orig_ctx))
                                          : 1.0;
    base = c->attn_scale != 0 ? c->attn_scale : 1.0 / sqrt((double)c->head_dim);
    if (a != 1.0)
        c->attn_scale = base * a * a;
}

/* The window layer l attends within (0: all positions): every layer's (Mistral), or Gemma 3's
 * local layers, all but each swa_pattern-th. */
static int layer_window(const runtime_config *c, int l)
{
    if (!c->sliding_window || (c->swa_pattern > 0 && (l + 1) % c->swa_pattern == 0))
        return 0;
    return c->sliding_window;
}

/* The elements (of each of kc, vc) a sequence of ctx positions takes; with `parts`, its layers'
 * parts laid out from element `base` (kv_part). */
static size_t seq_layout(const runtime_model *m, int ctx, size_t base, kv_part *parts)
{
    size_t kv_dim = (size_t)att_kv_heads(&m->c) * att_head_dim(&m->c), off = base;

    for (int l = 0; l < m->c.n_layers; l++) {
        int window = m->layers[l].window, slots = ctx, ring = 0;
        if (window > 0 && window + m->n_batch - 1 < ctx)
            slots = ring = window + m->n_batch - 1;
        if (parts)
            parts[l] = (kv_part){ .off = off, .slots = slots, .ring = ring };
        off += (size_t)slots * kv_dim;
    }
    return off - base;
}

/* The pool: n_seq caches of n_ctx positions, one after another; max_ctx the longest context
 * whose cache fits it whole (seq_layout grows with ctx: a binary search), at most the model's. */
static int kv_pool_layout(runtime_model *m)
{
    size_t per;
    int lo = m->n_ctx, hi = m->c.ctx_len;

    for (int l = 0; l < m->c.n_layers; l++)
        m->layers[l].window = layer_window(&m->c, l);
    per = seq_layout(m, m->n_ctx, 0, NULL);
    m->kv_cap = per * (size_t)m->n_seq;
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        if (seq_layout(m, mid, 0, NULL) <= m->kv_cap)
            lo = mid;
        else
            hi = mid - 1;
    }
    m->max_ctx = lo;
    if (!(m->kv = calloc((size_t)m->n_seq * (size_t)m->c.n_layers, sizeof *m->kv)))
        return ms_err(MS_ENOMEM, "out of memory");
    for (int s = 0; s < m->n_seq; s++) {
        m->kvs[s].base = (size_t)s * per;
        m->kvs[s].len = seq_layout(m, m->n_ctx, m->kvs[s].base, &m->kv[(size_t)s * m->c.n_layers]);
        m->kvs[s].ctx = m->n_ctx;
    }
    return 0;
}

/* Layer l's part of sequence seq's cache. */
static const kv_part *seq_part(const runtime_model *m, int seq, int l)
{
    return &m->kv[(size_t)seq * m->c.n_layers + l];
}

static int alloc_buffers(runtime_model *m)
{
    const runtime_config *c = &m->c;
    size_t q_dim = (size_t)c->n_heads * c->head_dim, kv_dim = (size_t)c->n_kv_heads * c->head_dim;
    size_t nb = (size_t)m->n_batch, kv_n, att_n = nb * c->n_heads * (size_t)att_head_dim(c);
    size_t ffn = (size_t)(c->shared_ffn_dim > c->ffn_dim ? c->shared_ffn_dim : c->ffn_dim);
    int kv_type = m->kv_f16 ? BACKEND_F16 : BACKEND_F32, rc;
    backend *be = m->be;

    kv_n = m->kv_cap;
    if (att_n < nb * q_dim)   /* MLA's heads are wider than q's */
        att_n = nb * q_dim;
    if ((rc = backend_buf_new(&m->kc, be, kv_n, kv_type, "k cache")) < 0 ||
        /* MLA's values are the k cache's rows: no v cache */
        (rc = backend_buf_new(&m->vc, be, c->kv_lora_rank ? 1 : kv_n, kv_type, "v cache")) < 0 ||
        (rc = backend_buf_new(&m->x, be, nb * c->dim, BACKEND_F32, "x")) < 0 ||
        (rc = backend_buf_new(&m->xb, be, nb * c->dim, BACKEND_F32, "xb")) < 0 ||
        (rc = backend_buf_new(&m->q, be, nb * q_dim, BACKEND_F32, "q")) < 0 ||
        (rc = backend_buf_new(&m->att, be, att_n, BACKEND_F32, "attention")) < 0 ||
        (rc = backend_buf_new(&m->k, be, nb * kv_dim, BACKEND_F32, "k")) < 0 ||
        (rc = backend_buf_new(&m->v, be, nb * kv_dim, BACKEND_F32, "v")) < 0 ||
        (rc = backend_buf_new(&m->hb, be, nb * ffn, BACKEND_F32, "ffn gate")) < 0 ||
        (rc = backend_buf_new(&m->hb2, be, nb * ffn, BACKEND_F32, "ffn up")) < 0 ||
        (rc = backend_buf_new(&m->logits, be, (size_t)c->vocab_size * m->n_seq, BACKEND_F32, "logits")) < 0)
        return ms_err_ctx("context %d, batch %d, %d sequences", m->n_ctx, m->n_batch, m->n_seq);
    if (c->n_experts) {
        size_t nk = nb * (size_t)c->n_experts_used;
        if ((rc = backend_buf_new(&m->r_logits, be, nb * c->n_experts, BACKEND_F32, "router logits")) < 0 ||
            (rc = backend_buf_new(&m->r_wts, be, nk, BACKEND_F32, "expert weights")) < 0 ||
            (rc = backend_buf_new(&m->r_ids, be, nk, BACKEND_I32, "expert ids")) < 0 ||
            (rc = backend_buf_new(&m->eh, be, nk * c->expert_ffn_dim, BACKEND_F32, "expert gate")) < 0 ||
            (rc = backend_buf_new(&m->eh2, be, nk * c->expert_ffn_dim, BACKEND_F32, "expert up")) < 0 ||
            (rc = backend_buf_new(&m->eo, be, nk * c->dim, BACKEND_F32, "expert out")) < 0 ||
            (rc = backend_buf_new(&m->sh, be, nb * c->dim, BACKEND_F32, "shared expert out")) < 0 ||
            (rc = backend_buf_new(&m->sh_g, be, nb, BACKEND_F32, "shared expert gate")) < 0)
            return ms_err_ctx("context %d, batch %d", m->n_ctx, m->n_batch);
    }
    if (c->kv_lora_rank) {
        size_t ql = (size_t)(c->q_lora_rank ? c->q_lora_rank : 1), floats = mla_pack_floats(c);
        if ((rc = backend_buf_new(&m->qa, be, nb * ql, BACKEND_F32, "q latent")) < 0 ||
            (rc = backend_buf_new(&m->lat, be, nb * c->kv_lora_rank, BACKEND_F32, "kv latent")) < 0 ||
            (rc = backend_buf_new(&m->kpe, be, nb * c->n_rot, BACKEND_F32, "k_pe")) < 0 ||
            (rc = backend_buf_new(&m->qatt, be, att_n, BACKEND_F32, "q absorbed")) < 0 ||
            (rc = backend_buf_new(&m->mo, be, nb * c->n_heads * c->v_head_dim, BACKEND_F32, "heads' values")) < 0)
            return ms_err_ctx("context %d, batch %d", m->n_ctx, m->n_batch);
        size_t bytes = floats * c->n_layers * ((m->mla_type = mla_pack_type(m)) == GGML_TYPE_F16 ? 2 : 4);
        if (!(m->mla_mem = malloc(bytes)) || !(m->mla_tmp = malloc(floats * sizeof *m->mla_tmp)))
            return ms_err(MS_ENOMEM, "out of memory for the absorbed MLA projections (%zu MiB)", bytes >> 20);
    }
    return 0;
}

static int model_setup(runtime_model *m, const runtime_opts *o)
{
    const runtime_config *c = &m->c;
    int q_dim = c->n_heads * c->head_dim, max_cols, use_long, rc;
    backend_opts bo = { .n_threads = o ? o->n_threads : 0, .verbose = o ? o->verbose : 0 };

    m->n_ctx = runtime_config_ctx(c, o ? o->n_ctx : 0);
    if (m->n_ctx > c->ctx_len)
        return ms_err(MS_EINVALID, "context %d exceeds the model's context length %d", m->n_ctx, c->ctx_len);
    m->n_batch = o && o->n_batch > 0 ? o->n_batch : 128;
    if (m->n_batch > m->n_ctx)
        m->n_batch = m->n_ctx;
    m->kv_f16 = o ? o->kv_f16 != 0 : 0;
    m->n_seq = o && o->n_seq > 0 ? o->n_seq : 1;
    if (m->n_seq > RUNTIME_MAX_SEQ)
        return ms_err(MS_EINVALID, "%d sequences: at most %d", m->n_seq, RUNTIME_MAX_SEQ);
    m->kvs = calloc((size_t)m->n_seq, sizeof *m->kvs);
    m->toks = malloc((size_t)m->n_batch * sizeof *m->toks);
    if (!m->kvs || !m->toks)
        return ms_err(MS_ENOMEM, "out of memory");
    if ((rc = runtime__batcher_new(&m->bt, m->n_seq)) < 0 || (rc = backend_open(&m->be, o ? o->device : NULL, &bo)) < 0)
        return rc;
    if (c->encoder)
        return runtime__encoder_new(&m->enc, m->be, m->w, c, m->n_ctx, m->n_batch);
    if (c->pooling != RUNTIME_POOL_NONE) {   /* a decoder that embeds (Qwen3-Embedding) */
        m->rows = malloc((size_t)m->n_batch * c->dim * sizeof *m->rows);
        m->acc = malloc((size_t)c->dim * sizeof *m->acc);
        if (!m->rows || !m->acc)
            return ms_err(MS_ENOMEM, "out of memory");
    }
    max_cols = c->dim > q_dim ? c->dim : q_dim;
    if (c->ffn_dim > max_cols)
        max_cols = c->ffn_dim;
    if (c->n_experts) {   /* an expert's rows and columns, and the router's width, go through the same scratch */
        if (c->expert_ffn_dim > max_cols)
            max_cols = c->expert_ffn_dim;
        if (c->shared_ffn_dim > max_cols)
            max_cols = c->shared_ffn_dim;
        if (c->n_experts > max_cols)
            max_cols = c->n_experts;
    }
    if (c->kv_lora_rank) {   /* [deepseek2] every width MLA's matmuls read or (per head) write */
        int w[] = { c->q_lora_rank, c->kv_lora_rank, att_head_dim(c), c->n_heads * c->v_head_dim, c->v_head_dim };
        for (size_t i = 0; i < sizeof w / sizeof w[0]; i++)
            if (w[i] > max_cols)
                max_cols = w[i];
    }
    backend_limits lim = { .max_rows = m->n_batch, .max_cols = max_cols, .n_ctx = m->n_ctx, .heads = c->n_heads };
    if (c->kv_lora_rank) {   /* [deepseek2] the absorbed packs: [n_rot + kv_lora][key], [v_head][n_rot + kv_lora] */
        lim.head_cols = att_head_dim(c) > c->head_dim ? att_head_dim(c) : c->head_dim;
        if (c->v_head_dim > lim.head_cols)
            lim.head_cols = c->v_head_dim;
    }
    /* a packed embedding batch: a rope pair and an attention per sequence and layer */
    m->seq.cap = (size_t)c->n_layers * (OPS_PER_LAYER + OPS_PER_SEQ * (size_t)m->n_seq +
                                        (c->pooling != RUNTIME_POOL_NONE ? 3 * EMBED_MAX_SEQS : 0)) +
                 OPS_OUTSIDE + (size_t)m->n_seq;
    m->seq.ops = calloc(m->seq.cap, sizeof *m->seq.ops);
    m->layers = calloc((size_t)c->n_layers, sizeof *m->layers);
    /* the three sets of rope frequencies in one allocation: freqs, freqs_local, freqs_alt */
    m->freqs = calloc(3 * ((size_t)c->n_rot / 2 + 1), sizeof *m->freqs);
    if (!m->seq.ops || !m->layers || !m->freqs)
        return ms_err(MS_ENOMEM, "out of memory");
    m->freqs_local = m->freqs + c->n_rot / 2 + 1;
    longrope_scale(m);
    if ((rc = kv_pool_layout(m)) < 0)
        return rc;
    lim.n_ctx = m->max_ctx;   /* attention's bound: any one sequence's context */
    if ((rc = check_ops(m)) < 0 || (rc = backend_reserve(m->be, &lim)) < 0 || (rc = alloc_buffers(m)) < 0 ||
        (rc = bind_tensors(m)) < 0)
        return rc;
    free(m->mla_tmp);   /* the packs are built */
    m->mla_tmp = NULL;
    runtime_rope_freqs(m->freqs, c);
    {   /* Gemma 3's window layers: their own base, no scaling (HF: rope_local_base_freq) */
        runtime_config lc = *c;
        lc.rope_theta = c->rope_local_theta;
        if (c->swa_pattern > 0)
            lc.rope_scaling = RUNTIME_ROPE_NONE;
        runtime_rope_freqs(m->freqs_local, &lc);
    }
    use_long = m->n_ctx > c->rope_orig_ctx;
    if ((rc = apply_rope_divisors(m, m->freqs, use_long)) < 0)
        return rc;
    if (c->rope_scaling == RUNTIME_ROPE_LONGROPE) {   /* for a sequence sized across rope_orig_ctx */
        m->freqs_alt = m->freqs_local + c->n_rot / 2 + 1;
        runtime_rope_freqs(m->freqs_alt, c);
        if (apply_rope_divisors(m, m->freqs_alt, !use_long) < 0)   /* lacking: runtime_seq_set_ctx refuses */
            m->freqs_alt = NULL;
    }
    return 0;
}

static int model_open(runtime_model **out, runtime_weights *w, const runtime_opts *o)
{
    runtime_model *m = calloc(1, sizeof *m);
    int rc;

    *out = NULL;
    if (!m) {
        runtime_weights_close(w);
        return ms_err(MS_ENOMEM, "out of memory");
    }
    pthread_mutex_init(&m->kv_mu, NULL);
    m->w = w;
    m->c = *runtime_weights_config(w);
    if ((rc = model_setup(m, o)) < 0) {
        runtime_model_close(m);
        return rc;
    }
    *out = m;
    return 0;
}

int runtime_model_open_gguf(runtime_model **out, const char *path, const runtime_opts *o)
{
    runtime_weights *w;
    int rc;

    *out = NULL;
    if ((rc = runtime_weights_open_gguf(&w, path)) < 0)
        return rc;
    if ((rc = model_open(out, w, o)) < 0)
        return ms_err_ctx("%s", path);
    return 0;
}

int runtime_model_open_store(runtime_model **out, store *s, const model_name *name, const runtime_opts *o)
{
    runtime_weights *w;
    char shown[600];
    int rc;

    *out = NULL;
    if ((rc = runtime_weights_open_store(&w, s, name)) < 0)
        return rc;
    if ((rc = model_open(out, w, o)) < 0) {
        name_display(shown, sizeof shown, name);
        return ms_err_ctx("%s", shown);
    }
    return 0;
}

int runtime_model_open(runtime_model **out, store_model *sm, const runtime_opts *o)
{
    runtime_weights *w;
    int rc;

    *out = NULL;
    if ((rc = runtime_weights_open_model(&w, sm)) < 0)
        return rc;
    if ((rc = model_open(out, w, o)) < 0)
        return ms_err_ctx("%s", store_model_shown(sm));
    return 0;
}

void runtime_model_close(runtime_model *m)
{
    if (!m)
        return;
    runtime__encoder_free(m->enc);
    backend_close(m->be);   /* its buffers and weights with it */
    runtime_weights_close(m->w);
    runtime__batcher_free(m->bt);
    pthread_mutex_destroy(&m->kv_mu);
    /* m->freqs holds freqs_local and freqs_alt too */
    MS_FREE_ALL(m->rows, m->acc, m->kvs, m->kv, m->toks, m->layers, m->seq.ops, m->freqs, m->mla_mem, m->mla_tmp,
                m);
}

void runtime_model_reset(runtime_model *m) { m->kvs[0].past = 0; }
void runtime_seq_reset(runtime_model *m, int seq)
{
    assert(seq >= 0 && seq < m->n_seq);
    m->kvs[seq].past = 0;
}

/* Positions past n need no clearing: attention reads only 0 .. n_past + t, and the next forward
 * overwrites from n. */
int runtime_seq_truncate(runtime_model *m, int seq, int n)
{
    int past;

    assert(seq >= 0 && seq < m->n_seq);
    past = m->kvs[seq].past;
    if (n < 0 || n > past)
        return ms_err(MS_EINVALID, "truncate to %d positions: the cache holds %d", n, past);
    for (int l = 0; m->kv && l < m->c.n_layers; l++) {   /* a ring must still hold the window before position n */
        const kv_part *P = seq_part(m, seq, l);
        int first = n - m->layers[l].window + 1 > 0 ? n - m->layers[l].window + 1 : 0;
        if (P->ring && first < past - P->ring)
            return ms_err(MS_EINVALID, "truncate to %d positions: layer %d's window cache of %d slots no longer "
                          "holds position %d", n, l, P->ring, first);
    }
    m->kvs[seq].past = n;
    return 0;
}
int runtime_model_truncate(runtime_model *m, int n) { return runtime_seq_truncate(m, 0, n); }
int runtime_seq_n_past(const runtime_model *m, int seq)
{
    assert(seq >= 0 && seq < m->n_seq);
    return m->kvs[seq].past;
}
int runtime_model_n_past(const runtime_model *m) { return m->kvs[0].past; }

/* The lowest element of the pool where `need` elements are held by no sequence but seq (whose
 * own room is being given up), or SIZE_MAX when no gap is that wide. Candidates: the pool's
 * start and the end of every other sequence's cache. */
static size_t kv_room(const runtime_model *m, int seq, size_t need)
{
    size_t best = SIZE_MAX;

    for (int i = -1; i < m->n_seq; i++) {
        size_t at = i < 0 ? 0 : m->kvs[i].base + m->kvs[i].len;
        int free_here = (i < 0 || (i != seq && m->kvs[i].len)) && at + need <= m->kv_cap && at < best;
        for (int j = 0; free_here && j < m->n_seq; j++)
            if (j != seq && m->kvs[j].len && at < m->kvs[j].base + m->kvs[j].len && m->kvs[j].base < at + need)
                free_here = 0;
        if (free_here)
            best = at;
    }
    return best;
}

int runtime_seq_set_ctx(runtime_model *m, int seq, int n_ctx)
{
    const runtime_config *c = &m->c;
    size_t need, at;
    int rc = 0;

    assert(seq >= 0 && seq < m->n_seq);
    if (m->enc)
        return ms_err(MS_EUNSUPPORTED, "%s is an embedding model: it keeps no KV cache", c->architecture);
    if (n_ctx < 0 || n_ctx > m->max_ctx)
        return ms_err(MS_ETOOBIG, "a context of %d tokens: one sequence of this load takes at most %d", n_ctx,
                      m->max_ctx);
    if (n_ctx && c->rope_scaling == RUNTIME_ROPE_LONGROPE && !m->freqs_alt &&
        (n_ctx > c->rope_orig_ctx) != (m->n_ctx > c->rope_orig_ctx))
        return ms_err(MS_EUNSUPPORTED, "a context of %d tokens needs the model's %s longrope factors, which it lacks",
                      n_ctx, n_ctx > c->rope_orig_ctx ? "long" : "short");
    pthread_mutex_lock(&m->kv_mu);
    if (n_ctx != m->kvs[seq].ctx) {
        need = seq_layout(m, n_ctx, 0, NULL);
        if (n_ctx == 0) {
            at = 0;
        } else if ((at = kv_room(m, seq, need)) == SIZE_MAX) {
            size_t held = 0;
            for (int i = 0; i < m->n_seq; i++)
                held += i == seq ? 0 : m->kvs[i].len;
            rc = ms_err(MS_EBUSY, "no room in the KV cache for a context of %d tokens: the other sequences hold "
                        "%d%% of it", n_ctx, (int)(held * 100 / m->kv_cap));
        }
        if (rc == 0) {
            m->kvs[seq].base = at;
            m->kvs[seq].len = seq_layout(m, n_ctx, at, &m->kv[(size_t)seq * c->n_layers]);
            m->kvs[seq].ctx = n_ctx;
            m->kvs[seq].past = 0;
        }
    }
    pthread_mutex_unlock(&m->kv_mu);
    return rc;
}
int runtime_seq_n_ctx(const runtime_model *m, int seq)
{
    assert(seq >= 0 && seq < m->n_seq);
    return m->enc ? m->n_ctx : m->kvs[seq].ctx;
}
int runtime_model_max_ctx(const runtime_model *m) { return m->enc ? m->n_ctx : m->max_ctx; }
int runtime_model_n_seq(const runtime_model *m) { return m->n_seq; }
int runtime__model_n_batch(const runtime_model *m) { return m->n_batch; }
runtime__batcher *runtime__model_batcher(runtime_model *m) { return m->bt; }
int runtime_model_n_ctx(const runtime_model *m) { return m->n_ctx; }
const runtime_config *runtime_model_config(const runtime_model *m) { return &m->c; }
const runtime_weights *runtime_model_weights(const runtime_model *m) { return m->w; }
const char *runtime_model_device(const runtime_model *m) { return backend_describe(m->be); }
uint64_t runtime_model_kv_nbytes(const runtime_model *m)
{
    size_t row = (size_t)att_kv_heads(&m->c) * att_head_dim(&m->c);   /* elements of one row of kc */

    /* the pool's rows (an encoder keeps none) */
    return m->kv_cap / row * runtime_config_kv_row_nbytes(&m->c, m->kv_f16);
}

int runtime_config_ctx(const runtime_config *c, int n_ctx)
{
    return n_ctx > 0 ? n_ctx : c->ctx_len < 4096 ? c->ctx_len : 4096;
}

uint64_t runtime_config_kv_row_nbytes(const runtime_config *c, int kv_f16)
{
    /* MLA keeps one cache, its rows both keys and values */
    return (c->kv_lora_rank ? 1ull : 2ull) * (uint64_t)att_kv_heads(c) * (uint64_t)att_head_dim(c) * (kv_f16 ? 2 : 4);
}

/* x += sum over the k experts the router picks of w_e * W2_e . (silu(W1_e . xb) * (W3_e . xb)),
 * plus sigmoid(g . xb) * shared(xb) where there is a shared expert. xb = n(x), already there. */
static void record_moe(runtime_model *m, const layer *L, int n)
{
    const runtime_config *c = &m->c;
    backend_seq *s = &m->seq;
    int k = c->n_experts_used;
    backend_ref x = backend_at(m->x, 0), xb = backend_at(m->xb, 0), ids = backend_at(m->r_ids, 0);
    backend_ref eh = backend_at(m->eh, 0), eh2 = backend_at(m->eh2, 0), eo = backend_at(m->eo, 0);

    backend_seq_matmul(s, backend_at(m->r_logits, 0), xb, L->router, n);
    if (L->router_b)   /* [gpt-oss] */
        backend_seq_add_row(s, backend_at(m->r_logits, 0), L->router_b, n, c->n_experts);
    /* gpt-oss's softmax over the top-k logits is the renormalized top-k of the full softmax */
    if (c->moe_route >= BACKEND_ROUTE_SOFTMAX_GROUPED)   /* [deepseek2] */
        backend_seq_moe_route_grouped(s, backend_at(m->r_wts, 0), ids, backend_at(m->r_logits, 0), n, c->n_experts, k,
                                      c->moe_route, L->sel_bias, c->n_group, c->topk_group, c->moe_norm,
                                      (float)c->moe_scale);
    else
        backend_seq_moe_route(s, backend_at(m->r_wts, 0), ids, backend_at(m->r_logits, 0), n, c->n_experts, k,
                              c->moe_norm ? BACKEND_ROUTE_SOFTMAX_TOPK_NORM : BACKEND_ROUTE_SOFTMAX_TOPK);
    backend_seq_matmul_id(s, eh, xb, L->ex_gate, ids, n, k, 1);
    backend_seq_matmul_id(s, eh2, xb, L->ex_up, ids, n, k, 1);
    if (c->gptoss) {
        backend_seq_add_row_id(s, eh, L->ex_gate_b, ids, n, k);
        backend_seq_add_row_id(s, eh2, L->ex_up_b, ids, n, k);
        backend_seq_swiglu_oai(s, eh, eh2, n * k * c->expert_ffn_dim, 1.702f, 7.0f);
    } else {
        backend_seq_swiglu(s, eh, eh2, n * k * c->expert_ffn_dim);
    }
    backend_seq_matmul_id(s, eo, eh, L->ex_down, ids, n, k, 0);
    if (L->ex_down_b)
        backend_seq_add_row_id(s, eo, L->ex_down_b, ids, n, k);
    if (L->sh_gate) {   /* [qwen2moe] from xb, before x changes */
        backend_ref hb = backend_at(m->hb, 0), hb2 = backend_at(m->hb2, 0), sh = backend_at(m->sh, 0);
        backend_seq_matmul(s, hb, xb, L->sh_gate, n);
        backend_seq_matmul(s, hb2, xb, L->sh_up, n);
        backend_seq_swiglu(s, hb, hb2, n * c->shared_ffn_dim);
        backend_seq_matmul(s, sh, hb, L->sh_down, n);
        if (L->sh_gate_inp) {
            backend_seq_matmul(s, backend_at(m->sh_g, 0), xb, L->sh_gate_inp, n);
            backend_seq_gated_add(s, x, sh, backend_at(m->sh_g, 0), n, c->dim);
        } else {   /* [deepseek2] */
            backend_seq_add(s, x, sh, n * c->dim);
        }
    }
    backend_seq_moe_sum(s, x, eo, backend_at(m->r_wts, 0), n, k, c->dim);
}

/* Attention of one sequence's n tokens, rows r0.. of the pass, at positions pos.. : q, k roped, k
 * and v into the layer's cache of that sequence (a ring wraps), att = attention over that cache. */
static void record_attention(runtime_model *m, const layer *L, int seq, size_t r0, int n, int pos,
                             const double *freqs)
{
    const runtime_config *c = &m->c;
    backend_seq *s = &m->seq;
    int hd = c->head_dim, q_dim = c->n_heads * hd, kv_dim = c->n_kv_heads * hd;
    const kv_part *P = seq_part(m, seq, (int)(L - m->layers));
    size_t layer_kv = P->off;
    int slot = P->ring ? pos % P->ring : pos, n1 = P->ring && slot + n > P->ring ? P->ring - slot : n;
    backend_ref q = backend_at(m->q, r0 * q_dim), k = backend_at(m->k, r0 * kv_dim), v = backend_at(m->v, r0 * kv_dim);

    backend_seq_rope(s, q, n, c->n_heads, hd, c->n_rot, pos, freqs, c->rope_interleaved);
    backend_seq_rope(s, k, n, c->n_kv_heads, hd, c->n_rot, pos, freqs, c->rope_interleaved);
    backend_seq_store(s, backend_at(m->kc, layer_kv + (size_t)slot * kv_dim), k, n1 * kv_dim);
    backend_seq_store(s, backend_at(m->vc, layer_kv + (size_t)slot * kv_dim), v, n1 * kv_dim);
    if (n1 < n) {   /* the chunk wraps around the ring: the rest from slot 0 */
        backend_seq_store(s, backend_at(m->kc, layer_kv), backend_at(m->k, (r0 + n1) * kv_dim), (n - n1) * kv_dim);
        backend_seq_store(s, backend_at(m->vc, layer_kv), backend_at(m->v, (r0 + n1) * kv_dim), (n - n1) * kv_dim);
    }
    backend_seq_attention_sinks(s, backend_at(m->att, r0 * q_dim), q, backend_at(m->kc, layer_kv),
                                backend_at(m->vc, layer_kv), n, pos, c->n_heads, c->n_kv_heads, hd, L->window,
                                (float)c->attn_scale, P->ring, L->sinks);
}

/* The same for runtime_embed's packed sequences (no layer a ring: runtime_embed packs only then):
 * each sequence roped from position 0, every row's k, v at the same row of the cache, and one
 * causal attention per sequence over its own rows, as if it ran alone. */
static void record_packed_attention(runtime_model *m, const layer *L, int n, const double *freqs)
{
    const runtime_config *c = &m->c;
    backend_seq *s = &m->seq;
    int hd = c->head_dim, q_dim = c->n_heads * hd, kv_dim = c->n_kv_heads * hd;
    size_t layer_kv = seq_part(m, 0, (int)(L - m->layers))->off;   /* sequence 0's cache */

    for (int i = 0; i < m->pk_n; i++) {
        size_t r = (size_t)m->pk_start[i];
        backend_seq_rope(s, backend_at(m->q, r * q_dim), m->pk_len[i], c->n_heads, hd, c->n_rot, 0, freqs,
                         c->rope_interleaved);
        backend_seq_rope(s, backend_at(m->k, r * kv_dim), m->pk_len[i], c->n_kv_heads, hd, c->n_rot, 0, freqs,
                         c->rope_interleaved);
    }
    backend_seq_store(s, backend_at(m->kc, layer_kv), backend_at(m->k, 0), n * kv_dim);
    backend_seq_store(s, backend_at(m->vc, layer_kv), backend_at(m->v, 0), n * kv_dim);
    for (int i = 0; i < m->pk_n; i++) {
        size_t r = (size_t)m->pk_start[i];
        backend_seq_attention_sinks(s, backend_at(m->att, r * q_dim), backend_at(m->q, r * q_dim),
                                    backend_at(m->kc, layer_kv + r * kv_dim), backend_at(m->vc, layer_kv + r * kv_dim),
                                    m->pk_len[i], 0, c->n_heads, c->n_kv_heads, hd, L->window, (float)c->attn_scale, 0,
                                    L->sinks);
    }
}

/* [deepseek2] MLA's attention of the pass's n rows, xb = n(x) already there, into xb = Wo . heads'
 * values (see bind_mla_packs): q, the latent (normed) and k_pe from xb; q absorbed per head; per
 * sequence q_pe and k_pe roped, [k_pe | latent] into the cache, one attention of one kv head over
 * it, values the same rows; each head's value from its latent sum; then Wo. */
static void record_mla(runtime_model *m, const layer *L, int n)
{
    const runtime_config *c = &m->c;
    backend_seq *s = &m->seq;
    int H = c->n_heads, R = c->n_rot, C = c->kv_lora_rank, ahd = att_head_dim(c);
    float eps = (float)c->rms_eps;
    float scale = c->attn_scale != 0 ? (float)c->attn_scale : 1.0f / sqrtf((float)c->head_dim);
    backend_ref xb = backend_at(m->xb, 0), q = backend_at(m->q, 0), qa = backend_at(m->qa, 0);

    if (L->wq_a) {
        backend_seq_matmul(s, qa, xb, L->wq_a, n);
        backend_seq_rms_norm(s, qa, qa, L->q_a_norm, n, c->q_lora_rank, eps);
        backend_seq_matmul(s, q, qa, L->wq_b, n);
    } else {
        backend_seq_matmul(s, q, xb, L->wq, n);
    }
    backend_seq_matmul(s, backend_at(m->lat, 0), xb, L->kv_lat, n);
    backend_seq_rms_norm(s, backend_at(m->lat, 0), backend_at(m->lat, 0), L->kv_norm, n, C, eps);
    backend_seq_matmul(s, backend_at(m->kpe, 0), xb, L->kv_pe, n);
    backend_seq_matmul_heads(s, backend_at(m->qatt, 0), q, L->mla_qk, n);
    for (int i = 0, r = 0; i < m->n_step; r += m->step[i++].n) {
        int seq = m->step[i].seq, ni = m->step[i].n, pos = m->kvs[seq].past;
        size_t kv = seq_part(m, seq, (int)(L - m->layers))->off + (size_t)pos * ahd;   /* MLA layers have no ring */
        backend_ref qr = backend_at(m->qatt, (size_t)r * H * ahd), kpe = backend_at(m->kpe, (size_t)r * R);
        backend_seq_rope(s, qr, ni, H, ahd, R, pos, seq_freqs(m, seq), c->rope_interleaved);
        backend_seq_rope(s, kpe, ni, 1, R, R, pos, seq_freqs(m, seq), c->rope_interleaved);
        backend_seq_store_rows(s, backend_at(m->kc, kv), kpe, ni, R, ahd);
        backend_seq_store_rows(s, backend_at(m->kc, kv + (size_t)R), backend_at(m->lat, (size_t)r * C), ni, C, ahd);
        kv = seq_part(m, seq, (int)(L - m->layers))->off;
        backend_seq_attention_ex(s, backend_at(m->att, (size_t)r * H * ahd), qr, backend_at(m->kc, kv),
                                 backend_at(m->kc, kv), ni, pos, H, 1, ahd, 0, scale, 0);
    }
    backend_seq_matmul_heads(s, backend_at(m->mo, 0), backend_at(m->att, 0), L->mla_vo, n);
    backend_seq_matmul(s, xb, backend_at(m->mo, 0), L->wo, n);
}

/* The attention of the pass's n rows, xb = n(x) already there, into xb (the multi-head models:
 * q, k, v, each sequence's attention over its cache, the output projection). */
static void record_mha(runtime_model *m, const layer *L, int n)
{
    const runtime_config *c = &m->c;
    backend_seq *s = &m->seq;
    int dim = c->dim, hd = c->head_dim, q_dim = c->n_heads * hd, kv_dim = c->n_kv_heads * hd;
    float eps = (float)c->rms_eps, off = (float)c->norm_offset;
    backend_ref xb = backend_at(m->xb, 0), q = backend_at(m->q, 0);
    backend_ref k = backend_at(m->k, 0), v = backend_at(m->v, 0), att = backend_at(m->att, 0);
    int local = L->window && c->gemma;   /* gpt-oss: one rope for all */

    backend_seq_matmul(s, q, xb, L->wq, n);
    backend_seq_matmul(s, k, xb, L->wk, n);
    backend_seq_matmul(s, v, xb, L->wv, n);
    if (L->bq)   /* [qwen2] */
        backend_seq_add_row(s, q, L->bq, n, q_dim);
    if (L->bk)
        backend_seq_add_row(s, k, L->bk, n, kv_dim);
    if (L->bv)
        backend_seq_add_row(s, v, L->bv, n, kv_dim);
    if (L->q_norm) {   /* [qwen3, gemma] each head's q and k are rows of head_dim */
        backend_seq_rms_norm_ex(s, q, q, L->q_norm, n * c->n_heads, hd, eps, off);
        backend_seq_rms_norm_ex(s, k, k, L->k_norm, n * c->n_kv_heads, hd, eps, off);
    }
    if (m->pk_n)   /* runtime_embed's packed sequences */
        record_packed_attention(m, L, n, local ? m->freqs_local : seq_freqs(m, 0));
    for (int i = 0, r = 0; i < m->n_step; r += m->step[i++].n)
        record_attention(m, L, m->step[i].seq, (size_t)r, m->step[i].n, m->kvs[m->step[i].seq].past,
                         local ? m->freqs_local : seq_freqs(m, m->step[i].seq));
    backend_seq_matmul(s, xb, att, L->wo, n);
    if (L->bo)   /* [gpt-oss] */
        backend_seq_add_row(s, xb, L->bo, n, dim);
    if (L->post_attn_norm)   /* [gemma] */
        backend_seq_rms_norm_ex(s, xb, xb, L->post_attn_norm, n, dim, eps, off);
}

/* One layer of the pass's n rows: x += attn(n(x)); x += ffn(n(x)). */
static void record_layer(runtime_model *m, int l, int n)
{
    const runtime_config *c = &m->c;
    const layer *L = &m->layers[l];
    backend_seq *s = &m->seq;
    int dim = c->dim;
    float eps = (float)c->rms_eps, off = (float)c->norm_offset;
    backend_ref x = backend_at(m->x, 0), xb = backend_at(m->xb, 0);
    backend_ref hb = backend_at(m->hb, 0), hb2 = backend_at(m->hb2, 0);

    backend_seq_rms_norm_ex(s, xb, x, L->attn_norm, n, dim, eps, off);
    if (c->kv_lora_rank)   /* [deepseek2] */
        record_mla(m, L, n);
    else
        record_mha(m, L, n);
    backend_seq_add(s, x, xb, n * dim);

    backend_seq_rms_norm_ex(s, xb, x, L->ffn_norm, n, dim, eps, off);
    if (L->router) {
        record_moe(m, L, n);
        return;
    }
    backend_seq_matmul(s, hb, xb, L->w1, n);
    backend_seq_matmul(s, hb2, xb, L->w3, n);
    if (c->gemma)
        backend_seq_geglu(s, hb, hb2, n * c->ffn_dim);
    else
        backend_seq_swiglu(s, hb, hb2, n * c->ffn_dim);
    backend_seq_matmul(s, xb, hb, L->w2, n);
    if (L->post_ffn_norm)   /* [gemma] */
        backend_seq_rms_norm_ex(s, xb, xb, L->post_ffn_norm, n, dim, eps, off);
    backend_seq_add(s, x, xb, n * dim);
}

/* The pass's n rows (n <= n_batch) through every layer as one op sequence: m->step's sequences
 * (each at its own positions; their caches grow by their rows), or runtime_embed's packing. With
 * hn > 0, the final hidden states (after the output norm) of rows h0 .. h0 + hn into m->rows (a
 * decoder that embeds). Each step item with logits gets its last row's logits, through row i of
 * m->logits (i counting those items). */
static int forward_batch(runtime_model *m, const int32_t *tokens, int n, int h0, int hn)
{
    const runtime_config *c = &m->c;
    int rc, n_logits = 0;
    size_t r = 0, vocab = (size_t)c->vocab_size;

    m->seq.n = 0;
    backend_seq_embed(&m->seq, backend_at(m->x, 0), m->embed, tokens, n, c->dim);
    if (c->gemma)   /* [gemma] embeddings times sqrt(dim), in float as llama.cpp and HF (f32) do */
        backend_seq_scale(&m->seq, backend_at(m->x, 0), n * c->dim, sqrtf((float)c->dim));
    for (int l = 0; l < c->n_layers; l++)
        record_layer(m, l, n);
    for (int i = 0; i < m->n_step; r += (size_t)m->step[i++].n)   /* each last row, normed, into row n_logits of xb */
        if (m->step[i].logits)
            backend_seq_rms_norm_ex(&m->seq, backend_at(m->xb, (size_t)n_logits++ * c->dim),
                                    backend_at(m->x, (r + (size_t)m->step[i].n - 1) * c->dim), m->out_norm, 1, c->dim,
                                    (float)c->rms_eps, (float)c->norm_offset);
    if (n_logits) {
        backend_seq_matmul(&m->seq, backend_at(m->logits, 0), backend_at(m->xb, 0), m->lm_head, n_logits);
        if (c->final_softcap != 0)
            backend_seq_softcap(&m->seq, backend_at(m->logits, 0), n_logits * c->vocab_size, (float)c->final_softcap);
    }
    if (hn > 0)
        backend_seq_rms_norm_ex(&m->seq, backend_at(m->xb, 0), backend_at(m->x, (size_t)h0 * c->dim), m->out_norm, hn,
                                c->dim, (float)c->rms_eps, (float)c->norm_offset);
    if ((rc = backend_run(m->be, &m->seq)) < 0)
        return rc;
    for (int i = 0, j = 0; i < m->n_step; i++) {
        float *lg = m->step[i].logits;
        if (lg && (rc = backend_read(m->be, lg, backend_at(m->logits, (size_t)j++ * vocab), vocab)) < 0)
            return rc;
    }
    if (hn > 0 && (rc = backend_read(m->be, m->rows, backend_at(m->xb, 0), (size_t)hn * c->dim)) < 0)
        return rc;
    for (int i = 0; i < m->n_step; i++) {
        const runtime_seq_item *it = &m->step[i];
        m->kvs[it->seq].past += it->n;
        for (int t = 0; it->logits && t < c->vocab_size; t++)   /* a sampler fed NaN picks nonsense silently */
            if (!isfinite(it->logits[t]))
                return ms_err(MS_EINVALID, "logit %d at position %d is %s: the model's weights or activations overflow",
                              t, m->kvs[it->seq].past - 1, isnan(it->logits[t]) ? "NaN" : "infinite");
    }
    return 0;
}

int runtime__model_check(const runtime_model *m, int seq, const int32_t *tokens, int n)
{
    const runtime_config *c = &m->c;

    if (m->enc)
        return ms_err(MS_EUNSUPPORTED, "%s is an embedding model: it gives embeddings (runtime_embed), not logits",
                      c->architecture);
    if (seq < 0 || seq >= m->n_seq)
        return ms_err(MS_EINVALID, "sequence %d: the model keeps %d (0 .. %d)", seq, m->n_seq, m->n_seq - 1);
    if (n <= 0)
        return ms_err(MS_EINVALID, "forward: no tokens");
    assert(tokens);
    /* The KV cache holds positions 0 .. past-1 of the sequence's context: every forward keeps it. */
    assert(m->kvs[seq].past >= 0 && m->kvs[seq].past <= m->kvs[seq].ctx);
    if (m->kvs[seq].ctx == 0)
        return ms_err(MS_EINVALID, "sequence %d holds no KV cache: its context is 0 (runtime_seq_set_ctx)", seq);
    if (n > m->kvs[seq].ctx - m->kvs[seq].past)
        return ms_err(MS_EINVALID, "%d tokens after %d exceed the context of %d tokens", n, m->kvs[seq].past,
                      m->kvs[seq].ctx);
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= c->vocab_size)
            return ms_err(MS_EINVALID, "token %d at index %d out of range [0, %d)", tokens[i], i, c->vocab_size);
    return 0;
}

int runtime__model_pass(runtime_model *m, const runtime_seq_item *items, int n_items)
{
    int n = 0, rc;

    assert(n_items > 0 && n_items <= m->n_seq);
    for (int i = 0; i < n_items; i++) {
        assert(n + items[i].n <= m->n_batch);
        memcpy(m->toks + n, items[i].tokens, (size_t)items[i].n * sizeof *m->toks);
        m->step[i] = items[i];
        n += items[i].n;
    }
    m->n_step = n_items;
    rc = forward_batch(m, m->toks, n, 0, 0);
    m->n_step = 0;
    return rc;
}

int runtime_forward(runtime_model *m, const int32_t *tokens, int n, float *logits)
{
    assert(m && logits);
    return runtime_seq_forward(m, 0, tokens, n, logits);
}

/* ---------------------------------------------------------------- embeddings */

int runtime_model_pooling(const runtime_model *m)
{
    return m->c.pooling >= RUNTIME_POOL_NONE && m->c.pooling <= RUNTIME_POOL_LAST ? m->c.pooling : RUNTIME_POOL_NONE;
}

int runtime_model_embed_dim(const runtime_model *m) { return m->c.dim; }
int runtime__model_embed_runs(const runtime_model *m) { return m->enc ? runtime__encoder_runs(m->enc) : m->embed_runs; }

/* One sequence through a decoder, from position 0 in chunks of n_batch (its attention is causal:
 * the KV cache carries the earlier chunks), pooled from the final normed hidden rows. Sequences
 * run one after another; packing them would need causal attention per sequence. */
static int decoder_embed(runtime_model *m, const int32_t *tokens, int n, float *out)
{
    const runtime_config *c = &m->c;
    int pool = c->pooling, dim = c->dim, rc = 0;

    m->kvs[0].past = 0;
    m->step[0] = (runtime_seq_item){ .seq = 0 };
    m->n_step = 1;
    for (int j = 0; j < dim; j++)
        m->acc[j] = 0;
    for (int done = 0; done < n && rc == 0;) {
        int chunk = n - done < m->n_batch ? n - done : m->n_batch, last = done + chunk == n;
        int h0 = pool == RUNTIME_POOL_LAST ? chunk - 1 : 0;
        int hn = pool == RUNTIME_POOL_MEAN                ? chunk
                 : pool == RUNTIME_POOL_CLS ? done == 0 : last;
        m->step[0].n = chunk;
        if ((rc = forward_batch(m, tokens + done, chunk, h0, hn)) < 0)
            break;
        m->embed_runs++;
        for (size_t i = 0; i < (size_t)hn * dim; i++)
            if (!isfinite(m->rows[i]))
                rc = ms_err(MS_EINVALID, "hidden state %zu is %s: the model's weights or activations overflow", i,
                            isnan(m->rows[i]) ? "NaN" : "infinite");
        for (int r = 0; rc == 0 && r < hn; r++)
            for (int j = 0; j < dim; j++)
                m->acc[j] += m->rows[(size_t)r * dim + j];
        done += chunk;
    }
    m->n_step = 0;
    m->kvs[0].past = 0;   /* the cache is left empty, as runtime_embed promises */
    if (rc == 0)
        runtime__pool_finish(out, m->acc, n, dim, pool, m->embed_normalize);
    return rc;
}

/* n_seqs sequences of at most n_batch tokens in all as one forward from position 0
 * (record_packed_attention), every row's final normed hidden state read back and pooled. */
static int decoder_embed_packed(runtime_model *m, const int32_t *const *tokens, const int *n_tokens, int n_seqs,
                                float *out)
{
    int n = 0, dim = m->c.dim, rc;

    for (int i = 0; i < n_seqs; i++) {
        m->pk_start[i] = n;
        m->pk_len[i] = n_tokens[i];
        memcpy(m->toks + n, tokens[i], (size_t)n_tokens[i] * sizeof *m->toks);
        n += n_tokens[i];
    }
    m->pk_n = n_seqs;
    m->kvs[0].past = 0;
    rc = forward_batch(m, m->toks, n, 0, n);
    m->embed_runs++;
    m->pk_n = 0;
    m->kvs[0].past = 0;   /* the cache is left empty */
    for (size_t i = 0; rc == 0 && i < (size_t)n * dim; i++)
        if (!isfinite(m->rows[i]))
            rc = ms_err(MS_EINVALID, "hidden state %zu is %s: the model's weights or activations overflow", i,
                        isnan(m->rows[i]) ? "NaN" : "infinite");
    for (int i = 0; rc == 0 && i < n_seqs; i++)
        runtime__pool(out + (size_t)i * dim, m->acc, m->rows + (size_t)m->pk_start[i] * dim, n_tokens[i], dim,
                      m->c.pooling, m->embed_normalize);
    return rc;
}

/* embed()'s decoder part, with the model held. */
static int decoder_embed_all(runtime_model *m, const int32_t *const *tokens, const int *n_tokens, int n_seqs,
                             float *out, int normalize)
{
    const runtime_config *c = &m->c;
    /* the packed rows go into sequence 0's cache */
    int rc, packable = 1, pack_rows = m->n_batch < m->kvs[0].ctx ? m->n_batch : m->kvs[0].ctx;

    m->embed_runs = 0;
    m->embed_normalize = normalize;
    for (int l = 0; l < c->n_layers; l++)   /* MLA's attention has no packed form (record_packed_attention) */
        packable = packable && !seq_part(m, 0, l)->ring && !c->kv_lora_rank;
    for (int i = 0; i < n_seqs;) {
        int j = i + 1, rows = n_tokens[i];
        if (!packable || rows > pack_rows) {   /* alone, in chunks that the KV cache carries */
            if ((rc = decoder_embed(m, tokens[i], n_tokens[i], out + (size_t)i * c->dim)) < 0)
                return rc;
            i++;
            continue;
        }
        while (j < n_seqs && j - i < EMBED_MAX_SEQS && rows + n_tokens[j] <= pack_rows)
            rows += n_tokens[j++];
        if ((rc = decoder_embed_packed(m, tokens + i, n_tokens + i, j - i, out + (size_t)i * c->dim)) < 0)
            return rc;
        i = j;
    }
    return 0;
}

static int embed(runtime_model *m, const int32_t *const *tokens, const int *n_tokens, int n_seqs, float *out,
                 int normalize)
{
    const runtime_config *c = &m->c;
    int rc, n_ctx;

    assert(m && (n_seqs == 0 || (tokens && n_tokens && out)));
    n_ctx = m->enc ? m->n_ctx : m->kvs[0].ctx;   /* a decoder embeds through sequence 0's cache */
    if (runtime_model_pooling(m) == RUNTIME_POOL_NONE)
        return ms_err(MS_EUNSUPPORTED, "%s: cannot embed (%s)", c->architecture,
                      c->pooling == 4 ? "its pooling is rank: a reranker, which gives scores, not embeddings"
                      : c->encoder    ? "its pooling_type is none: one vector per token, which runtime_embed does not give"
                                      : "a decoder whose model names no pooling");
    for (int s = 0; s < n_seqs; s++) {
        if (n_tokens[s] <= 0)
            return ms_err(MS_EINVALID, "sequence %d is empty", s);
        if (n_tokens[s] > n_ctx)
            return ms_err(MS_EINVALID, "sequence %d: %d tokens exceeds the context of %d", s, n_tokens[s], n_ctx);
        for (int i = 0; i < n_tokens[s]; i++)
            if (tokens[s][i] < 0 || tokens[s][i] >= c->vocab_size)
                return ms_err(MS_EINVALID, "sequence %d: token %d at index %d out of range [0, %d)", s, tokens[s][i], i,
                              c->vocab_size);
    }
    runtime__batcher_hold(m->bt);   /* sequence 0's cache and the pass's buffers, alone */
    rc = m->enc ? runtime__encoder_embed(m->enc, tokens, n_tokens, n_seqs, out, normalize)
                : decoder_embed_all(m, tokens, n_tokens, n_seqs, out, normalize);
    runtime__batcher_let_go(m->bt);
    return rc;
}


int runtime_embed(runtime_model *m, const int32_t *const *tokens, const int *n_tokens, int n_seqs, float *out)
{
    return embed(m, tokens, n_tokens, n_seqs, out, 1);
}

int runtime_embed_pooled(runtime_model *m, const int32_t *const *tokens, const int *n_tokens, int n_seqs, float *out)
{
    return embed(m, tokens, n_tokens, n_seqs, out, 0);
}
