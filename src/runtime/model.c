/* model.c: the llama-family decoder: Llama 2/3, TinyLlama, Mistral, llama2.c story models, and
 * Qwen 2 / Qwen 3, which differ only where marked [qwen2] / [qwen3].
 *   x = embed[tokens]
 *   per layer: q = Wq . n(x) + bq, k = Wk . n(x) + bk, v = Wv . n(x) + bv    biases: [qwen2]
 *              q = n_head(q), k = n_head(k)   per-head RMSNorm over head_dim     QK-norm: [qwen3]
 *              x += Wo . attn(rope(q), rope(k), v)                          n = RMSNorm
 *              x += W2 . (silu(W1 . n(x)) * (W3 . n(x)))
 *   logits = lm_head . n(x_last)            (lm_head absent: tied to embed_tokens)
 * Every buffer is sized at open for n_batch tokens and the KV cache for n_ctx positions, so a
 * forward pass allocates nothing. Prefill runs up to n_batch tokens per matmul. */
#include <stdio.h>
#include <stdlib.h>

#include "runtime/kquant_int.h"

typedef struct layer {
    const runtime_tensor *wq, *wk, *wv, *wo, *w1, *w2, *w3;
    const float *attn_norm, *ffn_norm;
    const float *bq, *bk, *bv;      /* NULL when the model has no q/k/v biases */
    const float *q_norm, *k_norm;   /* [head_dim]; NULL without QK-norm */
} layer;

struct runtime_model {
    runtime_weights *w;
    runtime_config c;
    runtime_pool *pool;
    const runtime_backend *be;
    int n_ctx, n_batch, kv_f16, n_past;
    layer *layers;
    const runtime_tensor *embed, *lm_head;
    const float *out_norm;
    float *norm_copies;          /* norms that are not aligned F32 in the file, as f32 */
    float *vec_copies;           /* the same for biases and QK-norms: per layer q, k, v, qn, kn */
    void *kc, *vc;               /* [n_layers][n_ctx][kv_dim] */
    size_t kv_elt;
    float *x, *xb, *q, *k, *v, *att, *hb, *hb2;
    void *mm_scratch;
    float *att_scratch;
    double *freqs;
};

static int expect_matrix(const runtime_tensor **out, const runtime_weights *w, const char *name, uint64_t rows,
                         uint64_t cols)
{
    const runtime_tensor *t = runtime_weights_find(w, name);
    uint64_t row_bytes;

    *out = t;
    if (!t)
        return ms_err(MS_ENOTFOUND, "tensor '%s' not found", name);
    if (!runtime_type_supported(t->type))
        return ms_err(MS_EUNSUPPORTED, "tensor '%s': type %s is not supported; supported: F32, F16, BF16, "
                      "Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, MLX int2..int8, "
                      "mxfp4, nvfp4, mxfp8", name, ggml_type_name(t->type) ? ggml_type_name(t->type) : "?");
    if (t->n_dims != 2 || t->shape[0] != rows || t->shape[1] != cols)
        return ms_err(MS_EINVALID, "tensor '%s': shape [%llu, %llu] (%d dims), expected [%llu, %llu]", name,
                      (unsigned long long)t->shape[0], (unsigned long long)(t->n_dims > 1 ? t->shape[1] : 0),
                      t->n_dims, (unsigned long long)rows, (unsigned long long)cols);
    if (t->type == RUNTIME_TYPE_MLX)   /* codes, scales and groups were checked by weights.c */
        return 0;
    if (ggml_row_nbytes(&row_bytes, t->type, cols) < 0 || row_bytes * rows != t->nbytes)
        return ms_err(MS_EINVALID, "tensor '%s': %llu bytes, expected %llu rows of %llu", name,
                      (unsigned long long)t->nbytes, (unsigned long long)rows, (unsigned long long)row_bytes);
    return 0;
}

/* A norm (or bias) vector as f32: a view when the file holds aligned F32, else converted into `copy`. */
static int expect_norm(const float **out, const runtime_weights *w, const char *name, int dim, float *copy)
{
    const runtime_tensor *t = runtime_weights_find(w, name);

    *out = NULL;
    if (!t)
        return ms_err(MS_ENOTFOUND, "tensor '%s' not found", name);
    if (t->n_dims != 1 || t->shape[0] != (uint64_t)dim ||
        (t->type != GGML_TYPE_F32 && t->type != GGML_TYPE_F16 && t->type != GGML_TYPE_BF16))
        return ms_err(MS_EINVALID, "tensor '%s': expected a vector of %d F32/F16/BF16 values", name, dim);
    if (t->type == GGML_TYPE_F32 && ((uintptr_t)t->data & 3) == 0) {
        *out = t->data;
        return 0;
    }
    runtime_tensor row = *t;
    row.n_dims = 2;
    row.shape[0] = 1;
    row.shape[1] = (uint64_t)dim;
    runtime_tensor_row(copy, &row, 0);
    *out = copy;
    return 0;
}

/* Optional vector `kind` of layer l: *out stays NULL when absent and `required` is 0. */
static int layer_vec(const float **out, runtime_model *m, int l, const char *kind, int len, float *copy, int required)
{
    char name[128];

    *out = NULL;
    snprintf(name, sizeof name, "model.layers.%d.self_attn.%s", l, kind);
    if (!required && !runtime_weights_find(m->w, name))
        return 0;
    return expect_norm(out, m->w, name, len, copy);
}

/* q/k/v biases (qwen2 has them, a llama may) and QK-norm (qwen3 has it). Each architecture's own
 * tensors are required, so that a misnamed import fails at open instead of running wrong. */
static int bind_qwen(runtime_model *m, layer *L, int l)
{
    const runtime_config *c = &m->c;
    int q_dim = c->n_heads * c->head_dim, kv_dim = c->n_kv_heads * c->head_dim, rc;
    int qwen2 = strcmp(c->architecture, "qwen2") == 0, qwen3 = strcmp(c->architecture, "qwen3") == 0;
    float *v = m->vec_copies + (size_t)l * (q_dim + 2 * kv_dim + 2 * c->head_dim);

    if ((rc = layer_vec(&L->bq, m, l, "q_proj.bias", q_dim, v, qwen2)) < 0 ||
        (rc = layer_vec(&L->bk, m, l, "k_proj.bias", kv_dim, v + q_dim, qwen2)) < 0 ||
        (rc = layer_vec(&L->bv, m, l, "v_proj.bias", kv_dim, v + q_dim + kv_dim, qwen2)) < 0 ||
        (rc = layer_vec(&L->q_norm, m, l, "q_norm.weight", c->head_dim, v + q_dim + 2 * kv_dim, qwen3)) < 0 ||
        (rc = layer_vec(&L->k_norm, m, l, "k_norm.weight", c->head_dim, v + q_dim + 2 * kv_dim + c->head_dim,
                        qwen3)) < 0)
        return rc;
    if (!L->q_norm != !L->k_norm)
        return ms_err(MS_EINVALID, "layer %d: self_attn.q_norm and self_attn.k_norm come together; one is missing", l);
    return 0;
}

static int bind_tensors(runtime_model *m)
{
    const runtime_config *c = &m->c;
    uint64_t q_dim = (uint64_t)c->n_heads * c->head_dim, kv_dim = (uint64_t)c->n_kv_heads * c->head_dim;
    char name[128];
    int rc;

    if ((rc = expect_matrix(&m->embed, m->w, "model.embed_tokens.weight", c->vocab_size, c->dim)) < 0)
        return rc;
    m->lm_head = m->embed;   /* tied unless the file has its own head */
    if (runtime_weights_find(m->w, "lm_head.weight") &&
        (rc = expect_matrix(&m->lm_head, m->w, "lm_head.weight", c->vocab_size, c->dim)) < 0)
        return rc;
    if ((rc = expect_norm(&m->out_norm, m->w, "model.norm.weight", c->dim, m->norm_copies)) < 0)
        return rc;
    for (int l = 0; l < c->n_layers; l++) {
        layer *L = &m->layers[l];
        float *copies = m->norm_copies + (size_t)(1 + 2 * l) * c->dim;
#define MAT(field, kind, rows, cols)                                                    \
        snprintf(name, sizeof name, "model.layers.%d.%s.weight", l, kind);             \
        if ((rc = expect_matrix(&L->field, m->w, name, rows, cols)) < 0)               \
            return rc;
        MAT(wq, "self_attn.q_proj", q_dim, c->dim)
        MAT(wk, "self_attn.k_proj", kv_dim, c->dim)
        MAT(wv, "self_attn.v_proj", kv_dim, c->dim)
        MAT(wo, "self_attn.o_proj", c->dim, q_dim)
        MAT(w1, "mlp.gate_proj", c->ffn_dim, c->dim)
        MAT(w2, "mlp.down_proj", c->dim, c->ffn_dim)
        MAT(w3, "mlp.up_proj", c->ffn_dim, c->dim)
#undef MAT
        snprintf(name, sizeof name, "model.layers.%d.input_layernorm.weight", l);
        if ((rc = expect_norm(&L->attn_norm, m->w, name, c->dim, copies)) < 0)
            return rc;
        snprintf(name, sizeof name, "model.layers.%d.post_attention_layernorm.weight", l);
        if ((rc = expect_norm(&L->ffn_norm, m->w, name, c->dim, copies + c->dim)) < 0)
            return rc;
        if ((rc = bind_qwen(m, L, l)) < 0)
            return rc;
    }
    return 0;
}

/* Llama 3 GGUFs carry the rope scaling as per-frequency divisors in rope_freqs.weight. */
static int apply_rope_freqs(runtime_model *m)
{
    const runtime_tensor *t = runtime_weights_find(m->w, "rope_freqs.weight");
    int half = m->c.n_rot / 2;
    float *f = NULL;

    if (!t)
        return 0;
    if (t->type != GGML_TYPE_F32 || t->n_dims != 1 || t->shape[0] != (uint64_t)half)
        return ms_err(MS_EINVALID, "tensor 'rope_freqs.weight': expected %d F32 values", half);
    f = malloc((size_t)half * sizeof *f);
    if (!f)
        return ms_err(MS_ENOMEM, "out of memory");
    memcpy(f, t->data, (size_t)half * sizeof *f);
    for (int i = 0; i < half; i++)
        m->freqs[i] /= f[i];
    free(f);
    return 0;
}

static void *alloc_or_fail(size_t n, int *failed)
{
    void *p = calloc(1, n ? n : 1);

    if (!p)
        *failed = 1;
    return p;
}

static int model_setup(runtime_model *m, const runtime_opts *o)
{
    const runtime_config *c = &m->c;
    size_t q_dim = (size_t)c->n_heads * c->head_dim, kv_dim = (size_t)c->n_kv_heads * c->head_dim;
    size_t nb, max_cols, kv_n;
    int rc, failed = 0, n_threads;

    m->n_ctx = o && o->n_ctx > 0 ? o->n_ctx : (c->ctx_len < 4096 ? c->ctx_len : 4096);
    if (m->n_ctx > c->ctx_len)
        return ms_err(MS_EINVALID, "context %d exceeds the model's context length %d", m->n_ctx, c->ctx_len);
    m->n_batch = o && o->n_batch > 0 ? o->n_batch : 128;
    if (m->n_batch > m->n_ctx)
        m->n_batch = m->n_ctx;
    m->kv_f16 = o ? o->kv_f16 != 0 : 0;
    m->kv_elt = m->kv_f16 ? 2 : 4;
    m->be = runtime_backend_cpu();
    if ((rc = runtime_pool_new(&m->pool, o ? o->n_threads : 0)) < 0)
        return rc;
    n_threads = runtime_pool_threads(m->pool);
    nb = (size_t)m->n_batch;
    max_cols = (size_t)c->dim > q_dim ? (size_t)c->dim : q_dim;
    if ((size_t)c->ffn_dim > max_cols)
        max_cols = (size_t)c->ffn_dim;
    kv_n = (size_t)c->n_layers * (size_t)m->n_ctx * kv_dim;
    m->layers = alloc_or_fail((size_t)c->n_layers * sizeof *m->layers, &failed);
    m->norm_copies = alloc_or_fail((size_t)(2 * c->n_layers + 1) * c->dim * sizeof(float), &failed);
    m->vec_copies = alloc_or_fail((size_t)c->n_layers * (q_dim + 2 * kv_dim + 2 * (size_t)c->head_dim) * sizeof(float),
                                  &failed);
    m->kc = alloc_or_fail(kv_n * m->kv_elt, &failed);
    m->vc = alloc_or_fail(kv_n * m->kv_elt, &failed);
    m->x = alloc_or_fail(nb * c->dim * sizeof(float), &failed);
    m->xb = alloc_or_fail(nb * c->dim * sizeof(float), &failed);
    m->q = alloc_or_fail(nb * q_dim * sizeof(float), &failed);
    m->att = alloc_or_fail(nb * q_dim * sizeof(float), &failed);
    m->k = alloc_or_fail(nb * kv_dim * sizeof(float), &failed);
    m->v = alloc_or_fail(nb * kv_dim * sizeof(float), &failed);
    m->hb = alloc_or_fail(nb * c->ffn_dim * sizeof(float), &failed);
    m->hb2 = alloc_or_fail(nb * c->ffn_dim * sizeof(float), &failed);
    m->mm_scratch = alloc_or_fail(runtime_matmul_scratch(m->n_batch, (int)max_cols), &failed);
    m->att_scratch = alloc_or_fail(runtime_attention_scratch(m->n_ctx, n_threads), &failed);
    m->freqs = alloc_or_fail((size_t)c->n_rot / 2 * sizeof(double), &failed);
    if (failed)
        return ms_err(MS_ENOMEM, "out of memory for buffers (context %d, batch %d)", m->n_ctx, m->n_batch);
    if ((rc = bind_tensors(m)) < 0)
        return rc;
    runtime_rope_freqs(m->freqs, c);
    return apply_rope_freqs(m);
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

void runtime_model_close(runtime_model *m)
{
    if (!m)
        return;
    runtime_pool_free(m->pool);
    runtime_weights_close(m->w);
    free(m->layers);
    free(m->norm_copies);
    free(m->vec_copies);
    free(m->kc);
    free(m->vc);
    free(m->x);
    free(m->xb);
    free(m->q);
    free(m->att);
    free(m->k);
    free(m->v);
    free(m->hb);
    free(m->hb2);
    free(m->mm_scratch);
    free(m->att_scratch);
    free(m->freqs);
    free(m);
}

void runtime_model_reset(runtime_model *m) { m->n_past = 0; }
int runtime_model_n_past(const runtime_model *m) { return m->n_past; }
int runtime_model_n_ctx(const runtime_model *m) { return m->n_ctx; }
const runtime_config *runtime_model_config(const runtime_model *m) { return &m->c; }
const runtime_weights *runtime_model_weights(const runtime_model *m) { return m->w; }
uint64_t runtime_model_kv_nbytes(const runtime_model *m)
{
    return 2ull * (uint64_t)m->c.n_layers * (uint64_t)m->n_ctx * (uint64_t)m->c.n_kv_heads * m->c.head_dim * m->kv_elt;
}

static void add_bias(const runtime_backend *be, runtime_model *m, int n, const layer *L)
{
    size_t q_dim = (size_t)m->c.n_heads * m->c.head_dim, kv_dim = (size_t)m->c.n_kv_heads * m->c.head_dim;

    for (int t = 0; t < n; t++) {
        if (L->bq)
            be->add(m->q + t * q_dim, L->bq, q_dim);
        if (L->bk)
            be->add(m->k + t * kv_dim, L->bk, kv_dim);
        if (L->bv)
            be->add(m->v + t * kv_dim, L->bv, kv_dim);
    }
}

/* n tokens (n <= n_batch) at positions n_past.. through every layer; x holds the result. */
static void forward_batch(runtime_model *m, const int32_t *tokens, int n)
{
    const runtime_config *c = &m->c;
    const runtime_backend *be = m->be;
    int dim = c->dim, hd = c->head_dim, kv_dim = c->n_kv_heads * hd, pos = m->n_past;
    size_t layer_kv = (size_t)m->n_ctx * kv_dim;

    for (int t = 0; t < n; t++)
        rt_ext_tensor_row(m->x + (size_t)t * dim, m->embed, (uint64_t)tokens[t]);
    for (int l = 0; l < c->n_layers; l++) {
        const layer *L = &m->layers[l];
        uint8_t *kc = (uint8_t *)m->kc + (l * layer_kv + (size_t)pos * kv_dim) * m->kv_elt;
        uint8_t *vc = (uint8_t *)m->vc + (l * layer_kv + (size_t)pos * kv_dim) * m->kv_elt;

        be->rms_norm(m->xb, m->x, L->attn_norm, n, dim, (float)c->rms_eps);
        be->matmul(m->pool, m->q, m->xb, n, L->wq, m->mm_scratch);
        be->matmul(m->pool, m->k, m->xb, n, L->wk, m->mm_scratch);
        be->matmul(m->pool, m->v, m->xb, n, L->wv, m->mm_scratch);
        add_bias(be, m, n, L);
        if (L->q_norm) {   /* each head's q and k are rows of head_dim */
            be->rms_norm(m->q, m->q, L->q_norm, n * c->n_heads, hd, (float)c->rms_eps);
            be->rms_norm(m->k, m->k, L->k_norm, n * c->n_kv_heads, hd, (float)c->rms_eps);
        }
        be->rope(m->q, n, c->n_heads, hd, c->n_rot, pos, m->freqs, c->rope_interleaved);
        be->rope(m->k, n, c->n_kv_heads, hd, c->n_rot, pos, m->freqs, c->rope_interleaved);
        if (m->kv_f16) {
            rt_kernels_get()->f32_to_f16((uint16_t *)kc, m->k, n * kv_dim);
            rt_kernels_get()->f32_to_f16((uint16_t *)vc, m->v, n * kv_dim);
        } else {
            memcpy(kc, m->k, (size_t)n * kv_dim * sizeof(float));
            memcpy(vc, m->v, (size_t)n * kv_dim * sizeof(float));
        }
        be->attention(m->pool, m->att, m->q, (uint8_t *)m->kc + l * layer_kv * m->kv_elt,
                      (uint8_t *)m->vc + l * layer_kv * m->kv_elt, m->kv_f16, n, pos, c->n_heads, c->n_kv_heads,
                      hd, m->att_scratch, m->n_ctx);
        be->matmul(m->pool, m->xb, m->att, n, L->wo, m->mm_scratch);
        be->add(m->x, m->xb, (size_t)n * dim);

        be->rms_norm(m->xb, m->x, L->ffn_norm, n, dim, (float)c->rms_eps);
        be->matmul(m->pool, m->hb, m->xb, n, L->w1, m->mm_scratch);
        be->matmul(m->pool, m->hb2, m->xb, n, L->w3, m->mm_scratch);
        be->swiglu(m->pool, m->hb, m->hb2, (size_t)n * c->ffn_dim);
        be->matmul(m->pool, m->xb, m->hb, n, L->w2, m->mm_scratch);
        be->add(m->x, m->xb, (size_t)n * dim);
    }
    m->n_past += n;
}

int runtime_forward(runtime_model *m, const int32_t *tokens, int n, float *logits)
{
    const runtime_config *c = &m->c;

    if (n <= 0)
        return ms_err(MS_EINVALID, "forward: no tokens");
    if (n > m->n_ctx - m->n_past)
        return ms_err(MS_EINVALID, "%d tokens after %d exceed the context of %d tokens", n, m->n_past, m->n_ctx);
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= c->vocab_size)
            return ms_err(MS_EINVALID, "token %d at index %d out of range [0, %d)", tokens[i], i, c->vocab_size);
    for (int done = 0; done < n;) {
        int chunk = n - done < m->n_batch ? n - done : m->n_batch;
        forward_batch(m, tokens + done, chunk);
        done += chunk;
        if (done == n && logits) {
            const float *last = m->x + (size_t)(chunk - 1) * c->dim;
            m->be->rms_norm(m->xb, last, m->out_norm, 1, c->dim, (float)c->rms_eps);
            m->be->matmul(m->pool, logits, m->xb, 1, m->lm_head, m->mm_scratch);
        }
    }
    return 0;
}
