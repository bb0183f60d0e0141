/* encoder.c: the BERT-family encoders, bert (all-MiniLM, bge, mxbai) and nomic-bert (nomic-embed-
 * text), which differ only where marked [bert] / [nomic]; and the pooling every embedding goes
 * through. Post-norm blocks, as Hugging Face's BertModel and llama.cpp's build_bert:
 *   x = LN(tok[t] + type[0] + pos[p])        [bert] pos: a learned row per position; [nomic] none
 *   per layer: q, k, v = Wq.x + bq, ...      [nomic] one fused Wqkv, no biases, rope (NEOX halves)
 *              x = LN(x + Wo . attn(q, k, v) + bo)    attention bidirectional, within a sequence
 *              x = LN(x + W2 . f(x) + b2)    [bert] f = gelu(W1.x + b1)  [nomic] silu(Wg.x) * (Wu.x)
 *   embedding = normalize(pool(x rows of the sequence))
 * Token types are all 0 (llama.cpp's choice: one "sentence A"). Written against the backend seam
 * like the decoder: the sequences of one batch are packed row after row, every matmul runs over
 * all the rows at once, attention runs one op per sequence (positions restart at 0 in each), and
 * one backend_run per batch; only the rows pooling needs are read back. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime_int.h"

/* Sequences one forward holds at most: each costs a few ops per layer (attention, rope). */
#define MAX_SEQS 256
#define OPS_PER_LAYER 24
#define OPS_PER_SEQ_LAYER 3
#define OPS_OUTSIDE 8

typedef struct enc_layer {
    const backend_weight *wq, *wk, *wv, *wo, *bq, *bk, *bv, *bo;
    const backend_weight *up, *up_b, *gate, *down, *down_b;
    const backend_weight *attn_ln, *attn_ln_b, *out_ln, *out_ln_b;
    backend_tensor qkv[3];   /* [nomic] the q, k, v rows of Wqkv (views) */
} enc_layer;

struct runtime_encoder {
    runtime_config c;
    backend *be;
    const runtime_weights *w;
    int nomic, n_rows, n_ctx, n_batch;
    int runs;         /* forwards (backend_run) of the last runtime_embed */
    int normalize;    /* the call's: 0 for runtime_embed_pooled */
    enc_layer *layers;
    const backend_weight *tok, *pos, *types, *emb_ln, *emb_ln_b;
    backend_buf *x, *xb, *q, *k, *v, *att, *hb, *hb2;
    backend_seq seq;
    double *freqs;
    int32_t *ids;     /* 0 .. n_rows - 1: position ids, and (from its start) token type 0 */
    int32_t *toks;    /* the batch's tokens, packed */
    int32_t *zeros;   /* n_rows token types, all 0 */
    float *rows;      /* the hidden rows read back: n_rows x dim */
    double *acc;      /* dim: pooling's sums */
};

/* "tensor 'embeddings.token_type_embeddings.weight' (GGUF token_types.weight)": the name as both
 * a Hugging Face directory and a GGUF file have it. */
static int missing(const runtime_encoder *e, const char *name)
{
    char gguf[256];

    if (gguf_name_from_hf(gguf, sizeof gguf, e->c.architecture, name) < 0)
        snprintf(gguf, sizeof gguf, "?");
    return ms_err(MS_EINVALID, "tensor '%s' (GGUF %s) not found: %s needs it", name, gguf, e->c.architecture);
}

static int mat(const backend_weight **out, runtime_encoder *e, const char *name, uint64_t rows, uint64_t cols)
{
    *out = NULL;
    if (!runtime_weights_find(e->w, name))
        return missing(e, name);
    return runtime__expect_matrix(out, e->be, e->w, name, rows, cols);
}

static int vec(const backend_weight **out, runtime_encoder *e, const char *name, int len)
{
    *out = NULL;
    if (!runtime_weights_find(e->w, name))
        return missing(e, name);
    return runtime__expect_vec(out, e->be, e->w, name, len);
}

/* Layer l's tensor `kind` (+ ".weight" / ".bias"), under the architecture's layer prefix. */
static const char *lname(char *buf, size_t len, const runtime_encoder *e, int l, const char *kind)
{
    snprintf(buf, len, "%s%d.%s", e->nomic ? "encoder.layers." : "encoder.layer.", l, kind);
    return buf;
}

/* Rows r0 .. r0 + rows of a float or ggml-block matrix: a view into the same bytes. */
static backend_tensor row_view(const backend_tensor *t, uint64_t r0, uint64_t rows)
{
    backend_tensor v = *t;
    uint64_t row_bytes = 0;

    ggml_row_nbytes(&row_bytes, t->type, t->shape[1]);
    v.shape[0] = rows;
    v.data = (const uint8_t *)t->data + r0 * row_bytes;
    v.nbytes = rows * row_bytes;
    return v;
}

/* [nomic] Wqkv [3 dim][dim], split at open into three row views (no copy, no new op). */
static int bind_qkv(runtime_encoder *e, enc_layer *L, int l)
{
    uint64_t dim = (uint64_t)e->c.dim;
    const backend_weight *fw;
    char name[160];
    int rc;

    if ((rc = mat(&fw, e, lname(name, sizeof name, e, l, "attn.Wqkv.weight"), 3 * dim, dim)) < 0)
        return rc;
    if (fw->t->type == BACKEND_TYPE_MLX)
        return ms_err(MS_EUNSUPPORTED, "tensor '%s': an MLX-quantized fused qkv is not supported", name);
    for (int i = 0; i < 3; i++)
        L->qkv[i] = row_view(fw->t, (uint64_t)i * dim, dim);
    if ((rc = backend_weight_import(&L->wq, e->be, &L->qkv[0])) < 0 ||
        (rc = backend_weight_import(&L->wk, e->be, &L->qkv[1])) < 0 ||
        (rc = backend_weight_import(&L->wv, e->be, &L->qkv[2])) < 0)
        return rc;
    return 0;
}

static int bind_layer(runtime_encoder *e, enc_layer *L, int l)
{
    uint64_t dim = (uint64_t)e->c.dim, ff = (uint64_t)e->c.ffn_dim;
    char n[160];
    int rc;

#define MAT(field, kind, rows, cols)                                                   \
    if ((rc = mat(&L->field, e, lname(n, sizeof n, e, l, kind), rows, cols)) < 0)     \
        return rc;
#define VEC(field, kind, len)                                                          \
    if ((rc = vec(&L->field, e, lname(n, sizeof n, e, l, kind), (int)(len))) < 0)     \
        return rc;
    if (e->nomic) {
        if ((rc = bind_qkv(e, L, l)) < 0)
            return rc;
        MAT(wo, "attn.out_proj.weight", dim, dim)
        VEC(attn_ln, "norm1.weight", dim) VEC(attn_ln_b, "norm1.bias", dim)
        MAT(up, "mlp.fc11.weight", ff, dim)
        MAT(gate, "mlp.fc12.weight", ff, dim)
        MAT(down, "mlp.fc2.weight", dim, ff)
        VEC(out_ln, "norm2.weight", dim) VEC(out_ln_b, "norm2.bias", dim)
        return 0;
    }
    MAT(wq, "attention.self.query.weight", dim, dim) VEC(bq, "attention.self.query.bias", dim)
    MAT(wk, "attention.self.key.weight", dim, dim) VEC(bk, "attention.self.key.bias", dim)
    MAT(wv, "attention.self.value.weight", dim, dim) VEC(bv, "attention.self.value.bias", dim)
    MAT(wo, "attention.output.dense.weight", dim, dim) VEC(bo, "attention.output.dense.bias", dim)
    VEC(attn_ln, "attention.output.LayerNorm.weight", dim) VEC(attn_ln_b, "attention.output.LayerNorm.bias", dim)
    MAT(up, "intermediate.dense.weight", ff, dim) VEC(up_b, "intermediate.dense.bias", ff)
    MAT(down, "output.dense.weight", dim, ff) VEC(down_b, "output.dense.bias", dim)
    VEC(out_ln, "output.LayerNorm.weight", dim) VEC(out_ln_b, "output.LayerNorm.bias", dim)
#undef MAT
#undef VEC
    return 0;
}

/* token_types [n_types][dim] with n_types >= 1 (BERT's type_vocab_size: 2, nomic's 2, some 1). */
static int bind_types(runtime_encoder *e)
{
    const char *name = "embeddings.token_type_embeddings.weight";
    const backend_tensor *t = runtime_weights_find(e->w, name);

    if (!t)
        return missing(e, name);
    if (t->n_dims != 2 || t->shape[0] < 1 || t->shape[0] > 1024)
        return ms_err(MS_EINVALID, "tensor '%s': expected [n_types][%d] with 1 to 1024 types", name, e->c.dim);
    return runtime__expect_matrix(&e->types, e->be, e->w, name, t->shape[0], (uint64_t)e->c.dim);
}

static int bind_tensors(runtime_encoder *e)
{
    const runtime_config *c = &e->c;
    const char *ln = e->nomic ? "emb_ln" : "embeddings.LayerNorm";
    char name[160];
    int rc;

    if ((rc = mat(&e->tok, e, "embeddings.word_embeddings.weight", (uint64_t)c->vocab_size, (uint64_t)c->dim)) < 0 ||
        (rc = bind_types(e)) < 0)
        return rc;
    if (!e->nomic &&
        (rc = mat(&e->pos, e, "embeddings.position_embeddings.weight", (uint64_t)c->ctx_len, (uint64_t)c->dim)) < 0)
        return rc;
    snprintf(name, sizeof name, "%s.weight", ln);
    if ((rc = vec(&e->emb_ln, e, name, c->dim)) < 0)
        return rc;
    snprintf(name, sizeof name, "%s.bias", ln);
    if ((rc = vec(&e->emb_ln_b, e, name, c->dim)) < 0)
        return rc;
    for (int l = 0; l < c->n_layers; l++)
        if ((rc = bind_layer(e, &e->layers[l], l)) < 0)
            return rc;
    return 0;
}

static int check_ops(runtime_encoder *e)
{
    static const backend_op_kind need[] = { BACKEND_OP_LAYER_NORM, BACKEND_OP_GELU, BACKEND_OP_ATTENTION_BIDIR };

    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
        if (!backend_supports(e->be, need[i]))
            return ms_err(MS_EUNSUPPORTED, "architecture %s needs op %s, which device %s does not run",
                          e->c.architecture, backend_op_name(need[i]), backend_describe(e->be));
    return 0;
}

static int alloc_buffers(runtime_encoder *e)
{
    const runtime_config *c = &e->c;
    size_t nr = (size_t)e->n_rows, dim = (size_t)c->dim, ff = (size_t)c->ffn_dim;
    backend *be = e->be;
    int rc;

    if ((rc = backend_buf_new(&e->x, be, nr * dim, BACKEND_F32, "x")) < 0 ||
        (rc = backend_buf_new(&e->xb, be, nr * dim, BACKEND_F32, "xb")) < 0 ||
        (rc = backend_buf_new(&e->q, be, nr * dim, BACKEND_F32, "q")) < 0 ||
        (rc = backend_buf_new(&e->k, be, nr * dim, BACKEND_F32, "k")) < 0 ||
        (rc = backend_buf_new(&e->v, be, nr * dim, BACKEND_F32, "v")) < 0 ||
        (rc = backend_buf_new(&e->att, be, nr * dim, BACKEND_F32, "attention")) < 0 ||
        (rc = backend_buf_new(&e->hb, be, nr * ff, BACKEND_F32, "ffn up")) < 0 ||
        (rc = backend_buf_new(&e->hb2, be, nr * ff, BACKEND_F32, "ffn gate")) < 0)
        return ms_err_ctx("context %d, %d rows", e->n_ctx, e->n_rows);
    return 0;
}

int runtime__encoder_new(runtime_encoder **out, backend *be, const runtime_weights *w, const runtime_config *c,
                         int n_ctx, int n_batch)
{
    runtime_encoder *e = calloc(1, sizeof *e);
    int max_seqs, max_cols, rc;

    *out = NULL;
    if (!e)
        return ms_err(MS_ENOMEM, "out of memory");
    e->c = *c;
    e->be = be;
    e->w = w;
    e->nomic = strcmp(c->architecture, "nomic-bert") == 0;
    e->n_ctx = n_ctx;
    e->n_batch = n_batch;
    e->n_rows = n_batch > n_ctx ? n_batch : n_ctx;   /* a sequence runs whole: attention sees all of it */
    max_seqs = e->n_rows < MAX_SEQS ? e->n_rows : MAX_SEQS;
    max_cols = c->ffn_dim > c->dim ? c->ffn_dim : c->dim;
    e->seq.cap = (size_t)c->n_layers * (OPS_PER_LAYER + (size_t)OPS_PER_SEQ_LAYER * max_seqs) + 2 * (size_t)max_seqs +
                 OPS_OUTSIDE;
    e->seq.ops = calloc(e->seq.cap, sizeof *e->seq.ops);
    e->layers = calloc((size_t)c->n_layers, sizeof *e->layers);
    e->freqs = calloc((size_t)c->n_rot / 2 + 1, sizeof *e->freqs);
    e->ids = malloc((size_t)e->n_rows * sizeof *e->ids);
    e->toks = malloc((size_t)e->n_rows * sizeof *e->toks);
    e->zeros = calloc((size_t)e->n_rows, sizeof *e->zeros);
    e->rows = malloc((size_t)e->n_rows * c->dim * sizeof *e->rows);
    e->acc = malloc((size_t)c->dim * sizeof *e->acc);
    if (!e->seq.ops || !e->layers || !e->freqs || !e->ids || !e->toks || !e->zeros || !e->rows || !e->acc) {
        runtime__encoder_free(e);
        return ms_err(MS_ENOMEM, "out of memory");
    }
    for (int i = 0; i < e->n_rows; i++)
        e->ids[i] = i;
    runtime_rope_freqs(e->freqs, c);
    backend_limits lim = { .max_rows = e->n_rows, .max_cols = max_cols, .n_ctx = e->n_rows, .heads = c->n_heads };
    if ((rc = check_ops(e)) < 0 || (rc = backend_reserve(be, &lim)) < 0 || (rc = alloc_buffers(e)) < 0 ||
        (rc = bind_tensors(e)) < 0) {
        runtime__encoder_free(e);
        return rc;
    }
    *out = e;
    return 0;
}

void runtime__encoder_free(runtime_encoder *e)
{
    if (!e)
        return;
    MS_FREE_ALL(e->seq.ops, e->layers, e->freqs, e->ids, e->toks, e->zeros, e->rows, e->acc, e);
}

/* One layer over the n packed rows; sequence s is rows start[s] .. start[s] + len[s]. */
static void record_layer(runtime_encoder *e, const enc_layer *L, int n, const int *start, const int *len, int n_seqs)
{
    const runtime_config *c = &e->c;
    backend_seq *s = &e->seq;
    int dim = c->dim, hd = c->head_dim;
    float eps = (float)c->norm_eps;
    backend_ref x = backend_at(e->x, 0), xb = backend_at(e->xb, 0), q = backend_at(e->q, 0);
    backend_ref k = backend_at(e->k, 0), v = backend_at(e->v, 0), att = backend_at(e->att, 0);
    backend_ref hb = backend_at(e->hb, 0), hb2 = backend_at(e->hb2, 0);

    backend_seq_matmul(s, q, x, L->wq, n);
    backend_seq_matmul(s, k, x, L->wk, n);
    backend_seq_matmul(s, v, x, L->wv, n);
    if (L->bq) {   /* [bert] */
        backend_seq_add_row(s, q, L->bq, n, dim);
        backend_seq_add_row(s, k, L->bk, n, dim);
        backend_seq_add_row(s, v, L->bv, n, dim);
    }
    for (int i = 0; i < n_seqs; i++) {
        size_t off = (size_t)start[i] * dim;
        if (e->nomic) {   /* each sequence from position 0 */
            backend_seq_rope(s, backend_at(e->q, off), len[i], c->n_heads, hd, c->n_rot, 0, e->freqs, 0);
            backend_seq_rope(s, backend_at(e->k, off), len[i], c->n_kv_heads, hd, c->n_rot, 0, e->freqs, 0);
        }
        backend_seq_attention_bidir(s, backend_at(e->att, off), backend_at(e->q, off), backend_at(e->k, off),
                                    backend_at(e->v, off), len[i], c->n_heads, c->n_kv_heads, hd, 0);
    }
    backend_seq_matmul(s, xb, att, L->wo, n);
    if (L->bo)
        backend_seq_add_row(s, xb, L->bo, n, dim);
    backend_seq_add(s, xb, x, n * dim);
    backend_seq_layer_norm(s, x, xb, L->attn_ln, L->attn_ln_b, n, dim, eps);

    backend_seq_matmul(s, hb, x, L->up, n);
    if (e->nomic) {   /* silu(gate) * up, into hb2 */
        backend_seq_matmul(s, hb2, x, L->gate, n);
        backend_seq_swiglu(s, hb2, hb, n * c->ffn_dim);
        backend_seq_matmul(s, xb, hb2, L->down, n);
    } else {
        backend_seq_add_row(s, hb, L->up_b, n, c->ffn_dim);
        backend_seq_gelu(s, hb, n * c->ffn_dim);
        backend_seq_matmul(s, xb, hb, L->down, n);
        backend_seq_add_row(s, xb, L->down_b, n, dim);
    }
    backend_seq_add(s, xb, x, n * dim);
    backend_seq_layer_norm(s, x, xb, L->out_ln, L->out_ln_b, n, dim, eps);
}

/* n_seqs sequences (the first is sequence `first` of the caller's) as one forward, their vectors
 * into out (a row per sequence). */
static int embed_batch(runtime_encoder *e, const int32_t *const *tokens, const int *n_tokens, int n_seqs, int first,
                       float *out)
{
    const runtime_config *c = &e->c;
    int start[MAX_SEQS], n = 0, dim = c->dim, rc;
    backend_seq *s = &e->seq;

    for (int i = 0; i < n_seqs; i++) {
        start[i] = n;
        memcpy(e->toks + n, tokens[i], (size_t)n_tokens[i] * sizeof *e->toks);
        n += n_tokens[i];
    }
    s->n = 0;
    s->overflow = 0;
    backend_seq_embed(s, backend_at(e->x, 0), e->tok, e->toks, n, dim);
    backend_seq_embed(s, backend_at(e->xb, 0), e->types, e->zeros, n, dim);   /* token type 0 */
    backend_seq_add(s, backend_at(e->x, 0), backend_at(e->xb, 0), n * dim);
    if (e->pos) {   /* [bert] each sequence's positions from 0 */
        for (int i = 0; i < n_seqs; i++)
            backend_seq_embed(s, backend_at(e->xb, (size_t)start[i] * dim), e->pos, e->ids, n_tokens[i], dim);
        backend_seq_add(s, backend_at(e->x, 0), backend_at(e->xb, 0), n * dim);
    }
    backend_seq_layer_norm(s, backend_at(e->x, 0), backend_at(e->x, 0), e->emb_ln, e->emb_ln_b, n, dim,
                           (float)c->norm_eps);
    for (int l = 0; l < c->n_layers; l++)
        record_layer(e, &e->layers[l], n, start, n_tokens, n_seqs);
    if ((rc = backend_run(e->be, s)) < 0)
        return rc;
    for (int i = 0; i < n_seqs; i++) {   /* only the rows pooling reads */
        int r0 = c->pooling == RUNTIME_POOL_MEAN ? 0 : c->pooling == RUNTIME_POOL_CLS ? 0 : n_tokens[i] - 1;
        int nr = c->pooling == RUNTIME_POOL_MEAN ? n_tokens[i] : 1;
        if ((rc = backend_read(e->be, e->rows, backend_at(e->x, (size_t)(start[i] + r0) * dim), (size_t)nr * dim)) < 0)
            return rc;
        for (size_t j = 0; j < (size_t)nr * dim; j++)
            if (!isfinite(e->rows[j]))
                return ms_err(MS_EINVALID, "sequence %d: hidden state %zu is %s: the model's weights or activations "
                              "overflow", first + i, j, isnan(e->rows[j]) ? "NaN" : "infinite");
        runtime__pool(out + (size_t)i * dim, e->acc, e->rows, nr, dim, RUNTIME_POOL_MEAN,   /* of the rows read */
                      e->normalize);
    }
    return 0;
}

int runtime__encoder_embed(runtime_encoder *e, const int32_t *const *tokens, const int *n_tokens, int n_seqs,
                           float *out, int normalize)
{
    int rc;

    e->runs = 0;
    e->normalize = normalize;
    for (int i = 0; i < n_seqs;) {
        /* pack while the rows fit in n_batch; a sequence longer than that runs alone */
        int j = i + 1, rows = n_tokens[i];
        while (j < n_seqs && j - i < MAX_SEQS && rows + n_tokens[j] <= e->n_batch)
            rows += n_tokens[j++];
        if ((rc = embed_batch(e, tokens + i, n_tokens + i, j - i, i, out + (size_t)i * e->c.dim)) < 0)
            return rc;
        e->runs++;
        i = j;
    }
    return 0;
}

int runtime__encoder_runs(const runtime_encoder *e) { return e->runs; }

/* ---------------------------------------------------------------- pooling */

void runtime__pool_finish(float *out, double *acc, int n, int dim, int pooling, int normalize)
{
    double ss = 0, scale;

    for (int j = 0; j < dim; j++) {
        if (pooling == RUNTIME_POOL_MEAN)
            acc[j] /= n;
        ss += acc[j] * acc[j];
    }
    scale = normalize ? 1.0 / fmax(sqrt(ss), 1e-12) : 1.0;   /* ollama's normalize: a zero vector stays zero */
    for (int j = 0; j < dim; j++)
        out[j] = (float)(acc[j] * scale);
}

void runtime__pool(float *out, double *acc, const float *rows, int n, int dim, int pooling, int normalize)
{
    int r0 = pooling == RUNTIME_POOL_LAST ? n - 1 : 0, r1 = pooling == RUNTIME_POOL_MEAN ? n : r0 + 1;

    for (int j = 0; j < dim; j++)
        acc[j] = 0;
    for (int r = r0; r < r1; r++)
        for (int j = 0; j < dim; j++)
            acc[j] += rows[(size_t)r * dim + j];
    runtime__pool_finish(out, acc, r1 - r0, dim, pooling, normalize);
}
