/* backend_cpu.c: the CPU behind backend.h: buffers are host memory, weights are the mmapped
 * tensors themselves, and each op calls the kernel function of cpu.c that the decoder called
 * before the seam existed, with the same arguments, so results are the same bit for bit. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cpu/kquant_int.h"

typedef struct cpu_ctx {
    cpu_pool *pool;
    void *mm_scratch;
    float *att_scratch;
    float *id_in, *id_out;   /* MATMUL_ID: the rows routed to one expert, gathered, and its results */
    int *id_rows;            /* which (token, slot) each gathered row is */
    void *heads_scratch;     /* MATMUL_HEADS: each thread's gathered rows, results, activations */
    backend_tensor *heads;   /* MATMUL_HEADS: the pack seen as one matrix per head (limits.heads of them) */
    int max_rows, max_cols, n_ctx;
    char desc[96];
} cpu_ctx;

/* A weight the kernels cannot read where it lies: a vector that is not aligned F32 (converted to
 * f32), or a float matrix whose elements are not aligned to their size (GGUF general.alignment
 * 1, odd safetensors offsets), which the kernels would load through misaligned pointers. */
typedef struct cpu_weight {
    backend_tensor t;   /* the original, with data pointing at `copy` */
    void *copy;
} cpu_weight;

static const backend_tensor *tensor_of(const backend_weight *w)
{
    return w->dev ? &((const cpu_weight *)w->dev)->t : w->t;
}

static const char *describe(void *vctx) { return ((cpu_ctx *)vctx)->desc; }

static int reserve(void *vctx, const backend_limits *l)
{
    cpu_ctx *c = vctx;

    MS_FREE_ALL(c->mm_scratch, c->att_scratch, c->id_in, c->id_out, c->id_rows, c->heads_scratch, c->heads);
    c->mm_scratch = malloc(cpu_matmul_scratch(l->max_rows, l->max_cols));
    /* + 1: head_cols 0 (no MLA) may size it 0, which malloc may answer with NULL */
    c->heads_scratch = malloc(cpu_matmul_heads_scratch(l->max_rows, l->head_cols, l->head_cols,
                                                       cpu_pool_threads(c->pool)) + 1);
    c->heads = malloc((size_t)l->heads * sizeof *c->heads);
    c->att_scratch = malloc(cpu_attention_scratch(l->n_ctx, cpu_pool_threads(c->pool)));
    /* a token selects an expert at most once, so one expert gets at most max_rows rows */
    c->id_in = malloc((size_t)l->max_rows * (size_t)l->max_cols * sizeof(float));
    c->id_out = malloc((size_t)l->max_rows * (size_t)l->max_cols * sizeof(float));
    c->id_rows = malloc((size_t)l->max_rows * sizeof(int));
    if (!c->mm_scratch || !c->att_scratch || !c->id_in || !c->id_out || !c->id_rows || !c->heads_scratch || !c->heads)
        return ms_err(MS_ENOMEM, "out of memory for scratch (%d rows of %d columns, context %d)", l->max_rows,
                      l->max_cols, l->n_ctx);
    c->max_rows = l->max_rows;
    c->max_cols = l->max_cols;
    c->n_ctx = l->n_ctx;
    return 0;
}

static int buf_new(void *vctx, backend_buf *buf)
{
    size_t elt = buf->dtype == BACKEND_F16 ? 2 : 4;

    (void)vctx;
    if (buf->n > SIZE_MAX / elt)
        return ms_err(MS_ENOMEM, "out of memory");
    buf->host = calloc(1, buf->n ? buf->n * elt : 1);
    return buf->host ? 0 : ms_err(MS_ENOMEM, "out of memory");
}

static void buf_free(void *vctx, backend_buf *buf)
{
    (void)vctx;
    free(buf->host);
}

static int vector_new(backend_weight *w)
{
    const backend_tensor *t = w->t;
    cpu_weight *cw;

    if (t->type != GGML_TYPE_F32 && t->type != GGML_TYPE_F16 && t->type != GGML_TYPE_BF16)
        return ms_err(MS_EINVALID, "tensor '%s': expected a vector of F32/F16/BF16 values", t->name);
    if (t->type == GGML_TYPE_F32 && ((uintptr_t)t->data & 3) == 0) {
        w->vec = t->data;
        return 0;
    }
    if (!(cw = calloc(1, sizeof *cw)) || !(cw->copy = malloc((size_t)t->shape[0] * sizeof(float)))) {
        free(cw);
        return ms_err(MS_ENOMEM, "out of memory");
    }
    backend_tensor row = *t;   /* a 1 x n matrix, so that the embedding-row converter reads it */
    row.n_dims = 2;
    row.shape[0] = 1;
    row.shape[1] = t->shape[0];
    cpu_tensor_row(cw->copy, &row, 0);
    cw->t = *t;
    cw->t.type = GGML_TYPE_F32;
    cw->t.data = cw->copy;
    cw->t.nbytes = t->shape[0] * sizeof(float);
    w->vec = cw->copy;
    w->dev = cw;
    return 0;
}

static int weight_new(void *vctx, backend_weight *w)
{
    const backend_tensor *t = w->t;
    size_t align = t->type == GGML_TYPE_F32 ? 4 : t->type == GGML_TYPE_F16 || t->type == GGML_TYPE_BF16 ? 2 : 1;
    cpu_weight *cw;

    (void)vctx;
    if (t->n_dims == 1)
        return vector_new(w);
    if (!cpu_type_supported(t->type))
        return ms_err(MS_EUNSUPPORTED, "tensor '%s': type %s is not supported; supported: F32, F16, BF16, "
                      "Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4, "
                      "MLX int2..int8, mxfp4, nvfp4, mxfp8",
                      t->name, ggml_type_name(t->type) ? ggml_type_name(t->type) : "?");
    if (((uintptr_t)t->data & (align - 1)) == 0)
        return 0;
    if (!(cw = calloc(1, sizeof *cw)) || !(cw->copy = malloc(t->nbytes ? t->nbytes : 1))) {
        free(cw);
        return ms_err(MS_ENOMEM, "tensor '%s': out of memory for an aligned copy of %llu bytes", t->name,
                      (unsigned long long)t->nbytes);
    }
    memcpy(cw->copy, t->data, t->nbytes);
    cw->t = *t;
    cw->t.data = cw->copy;
    w->dev = cw;
    return 0;
}

static void weight_free(void *vctx, backend_weight *w)
{
    cpu_weight *cw = w->dev;

    (void)vctx;
    if (cw)
        free(cw->copy);
    free(cw);
}

static float *f32(backend_ref r) { return (float *)r.buf->host + r.off; }
static int32_t *i32(backend_ref r) { return (int32_t *)r.buf->host + r.off; }

/* Expert e of a pack [n_expert][rows][cols] as a 2-D tensor: a view of its rows, no copy. */
static backend_tensor expert_view(const backend_tensor *pack, int e)
{
    backend_tensor v = *pack;
    uint64_t rows = pack->shape[1], cols = pack->shape[2], row_bytes = 0;

    v.n_dims = 2;
    v.shape[0] = rows;
    v.shape[1] = cols;
    v.shape[2] = 0;
    if (pack->type == BACKEND_TYPE_MLX) {
        uint64_t groups = rows * (cols / (uint64_t)pack->group_size), ssz = st_dtype_size(pack->scale_dtype);
        uint64_t codes = rows * cols * (uint64_t)pack->bits / 8;
        v.data = (const uint8_t *)pack->data + (uint64_t)e * codes;
        v.scales = (const uint8_t *)pack->scales + (uint64_t)e * groups * ssz;
        if (pack->biases)
            v.biases = (const uint8_t *)pack->biases + (uint64_t)e * groups * ssz;
        v.nbytes = codes + groups * ssz * (pack->biases ? 2 : 1);
        return v;
    }
    ggml_row_nbytes(&row_bytes, pack->type, cols);
    v.data = (const uint8_t *)pack->data + (uint64_t)e * rows * row_bytes;
    v.nbytes = rows * row_bytes;
    return v;
}

/* For each expert that some (token, slot) selected: gather those rows, one matmul on a view of
 * the expert's rows, scatter the results. Experts nobody selected are never touched. */
static void matmul_id(cpu_ctx *c, const backend_op *op)
{
    const backend_tensor *pack = tensor_of(op->w);
    const int32_t *ids = i32(op->ids);
    const float *src = f32(op->src);
    float *dst = f32(op->dst);
    size_t cols = (size_t)op->cols, rows = (size_t)op->rows;

    for (int e = 0; e < op->n_expert; e++) {
        int cnt = 0;
        for (int t = 0; t < op->n; t++)
            for (int s = 0; s < op->n_used; s++)
                if (ids[(size_t)t * op->n_used + s] == e) {
                    int r = t * op->n_used + s;
                    memcpy(c->id_in + (size_t)cnt * cols, src + (op->src_bcast ? (size_t)t : (size_t)r) * cols,
                           cols * sizeof(float));
                    c->id_rows[cnt++] = r;
                }
        if (!cnt)
            continue;
        backend_tensor v = expert_view(pack, e);
        cpu_matmul(c->pool, c->id_out, c->id_in, cnt, &v, c->mm_scratch);
        for (int i = 0; i < cnt; i++)
            memcpy(dst + (size_t)c->id_rows[i] * rows, c->id_out + (size_t)i * rows, rows * sizeof(float));
    }
}

/* p = softmax(logits) as MOE_ROUTE defines it: in float, the max subtracted, summed in double. */
static void route_softmax(float *p, const float *logits, int n_expert)
{
    float mx = -INFINITY;
    double sum = 0;

    for (int e = 0; e < n_expert; e++)
        mx = fmaxf(mx, logits[e]);
    for (int e = 0; e < n_expert; e++)
        sum += (p[e] = expf(logits[e] - mx));
    for (int e = 0; e < n_expert; e++)
        p[e] = (float)(p[e] / sum);
}

/* MOE_ROUTE for one token: softmax over the router logits, the n_used largest, optionally
 * renormalized (backend.h). */
static void moe_route_row(float *wts, int32_t *ids, const float *logits, int n_expert, int n_used, int route,
                          float *p)
{
    double sel = 0;

    route_softmax(p, logits, n_expert);
    for (int s = 0; s < n_used; s++) {
        int best = -1;
        for (int e = 0; e < n_expert; e++)
            if (p[e] >= 0 && (best < 0 || p[e] > p[best]))
                best = e;
        ids[s] = best;
        wts[s] = p[best];
        sel += p[best];
        p[best] = -1;   /* taken */
    }
    if (route == BACKEND_ROUTE_SOFTMAX_TOPK_NORM)
        for (int s = 0; s < n_used; s++)
            wts[s] = (float)(wts[s] / sel);
}

/* MOE_ROUTE's grouped routes (DeepSeek V2 / V3, backend.h) for one token. n_expert <= 1024 (the
 * runtime's bound on a config). */
static void moe_route_grouped_row(float *wts, int32_t *ids, const float *logits, const float *bias,
                                  const backend_op *op)
{
    float p[1024], sel[1024];
    int E = op->n_expert, G = op->n_group > 1 ? op->n_group : 1, per = E / G, keep[1024] = { 0 };
    double sum = 0;   /* of the chosen experts' p */

    if (op->route == BACKEND_ROUTE_SIGMOID_GROUPED)
        for (int e = 0; e < E; e++)
            p[e] = 1.0f / (1.0f + expf(-logits[e]));
    else
        route_softmax(p, logits, E);
    for (int e = 0; e < E; e++)
        sel[e] = bias ? p[e] + bias[e] : p[e];
    if (G > 1 && op->topk_group < G) {
        float gs[1024];
        int taken[1024] = { 0 };
        for (int g = 0; g < G; g++) {   /* a run's score: its max (softmax), its two largest summed (sigmoid) */
            float a = -INFINITY, b = -INFINITY;
            for (int e = g * per; e < (g + 1) * per; e++) {
                if (sel[e] > a) {
                    b = a;
                    a = sel[e];
                } else if (sel[e] > b) {
                    b = sel[e];
                }
            }
            gs[g] = op->route == BACKEND_ROUTE_SIGMOID_GROUPED && per > 1 ? a + b : a;
        }
        for (int k = 0; k < op->topk_group; k++) {
            int best = -1;
            for (int g = 0; g < G; g++)
                if (!taken[g] && (best < 0 || gs[g] > gs[best]))
                    best = g;
            taken[best] = 1;
            for (int e = best * per; e < (best + 1) * per; e++)
                keep[e] = 1;
        }
    } else {
        for (int e = 0; e < E; e++)
            keep[e] = 1;
    }
    for (int s = 0; s < op->n_used; s++) {
        int best = -1;
        for (int e = 0; e < E; e++)
            if (keep[e] && (best < 0 || sel[e] > sel[best]))
                best = e;
        ids[s] = best;
        wts[s] = p[best];
        sum += p[best];
        keep[best] = 0;   /* taken */
    }
    for (int s = 0; s < op->n_used; s++)
        wts[s] = (op->norm ? (float)(wts[s] / sum) : wts[s]) * op->scale;
}

/* MATMUL_HEADS: the pack's heads as matrices of their own, one pool pass over them all. */
static void matmul_heads(cpu_ctx *c, const backend_op *op)
{
    const backend_tensor *pack = tensor_of(op->w);

    for (int h = 0; h < op->heads; h++)
        c->heads[h] = expert_view(pack, h);
    cpu_matmul_heads(c->pool, f32(op->dst), f32(op->src), op->n, op->heads, c->heads, c->heads_scratch);
}

static void run_moe_op(cpu_ctx *c, const backend_op *op)
{
    float *d = f32(op->dst);

    switch (op->kind) {
    case BACKEND_OP_MOE_ROUTE:
        for (int t = 0; t < op->n && op->route >= BACKEND_ROUTE_SOFTMAX_GROUPED; t++)
            moe_route_grouped_row(d + (size_t)t * op->n_used, i32(op->ids) + (size_t)t * op->n_used,
                                  f32(op->src) + (size_t)t * op->n_expert, op->w ? op->w->vec : NULL, op);
        for (int t = 0; t < op->n && op->route < BACKEND_ROUTE_SOFTMAX_GROUPED; t++)
            moe_route_row(d + (size_t)t * op->n_used, i32(op->ids) + (size_t)t * op->n_used,
                          f32(op->src) + (size_t)t * op->n_expert, op->n_expert, op->n_used, op->route, c->id_out);
        break;
    case BACKEND_OP_MATMUL_ID:
        matmul_id(c, op);
        break;
    case BACKEND_OP_MATMUL_HEADS:
        matmul_heads(c, op);
        break;
    case BACKEND_OP_MOE_SUM:
        for (int t = 0; t < op->n; t++) {
            const float *w = f32(op->wts) + (size_t)t * op->n_used, *src = f32(op->src);
            for (int i = 0; i < op->cols; i++) {
                float acc = 0;
                for (int s = 0; s < op->n_used; s++)
                    acc += w[s] * src[((size_t)t * op->n_used + s) * op->cols + i];
                d[(size_t)t * op->cols + i] += acc;
            }
        }
        break;
    case BACKEND_OP_GATED_ADD:
        for (int t = 0; t < op->n; t++) {
            float g = 1.0f / (1.0f + expf(-f32(op->wts)[t]));
            for (int i = 0; i < op->cols; i++)
                d[(size_t)t * op->cols + i] += g * f32(op->src)[(size_t)t * op->cols + i];
        }
        break;
    case BACKEND_OP_GEGLU:
        for (int i = 0; i < op->n; i++) {
            float x = d[i];
            d[i] = 0.5f * x * (1.0f + tanhf(0.7978845608f * (x + 0.044715f * x * x * x))) * f32(op->src)[i];
        }
        break;
    case BACKEND_OP_SCALE:
        for (int i = 0; i < op->n; i++)
            d[i] *= op->scale;
        break;
    case BACKEND_OP_SOFTCAP:
        for (int i = 0; i < op->n; i++)
            d[i] = op->scale * tanhf(d[i] / op->scale);
        break;
    case BACKEND_OP_SWIGLU_OAI:
        cpu_swiglu_oai(c->pool, d, f32(op->src), (size_t)op->n, op->alpha, op->limit);
        break;
    case BACKEND_OP_ADD_ROW_ID: {
        const float *b = tensor_of(op->w)->data;   /* F32 [n_expert][rows], the runtime checked; maybe a copy */
        for (int r = 0; r < op->n * op->n_used; r++)
            cpu_add(d + (size_t)r * op->rows, b + (size_t)i32(op->ids)[r] * op->rows, (size_t)op->rows);
        break;
    }
    default:
        break;
    }
}

static void run_op(cpu_ctx *c, const backend_op *op)
{
    switch (op->kind) {
    case BACKEND_OP_EMBED:
        for (int t = 0; t < op->n; t++)
            cpu_tensor_row(f32(op->dst) + (size_t)t * op->cols, tensor_of(op->w), (uint64_t)op->tokens[t]);
        break;
    case BACKEND_OP_RMS_NORM:
        cpu_rms_norm(f32(op->dst), f32(op->src), op->w->vec, op->n, op->cols, op->eps, op->w_offset);
        break;
    case BACKEND_OP_MATMUL:
        cpu_matmul(c->pool, f32(op->dst), f32(op->src), op->n, tensor_of(op->w), c->mm_scratch);
        break;
    case BACKEND_OP_ADD_ROW:
        for (int t = 0; t < op->n; t++)
            cpu_add(f32(op->dst) + (size_t)t * op->cols, op->w->vec, (size_t)op->cols);
        break;
    case BACKEND_OP_ROPE:
        cpu_rope(f32(op->dst), op->n, op->heads, op->head_dim, op->n_rot, op->pos0, op->freqs, op->interleaved);
        break;
    case BACKEND_OP_STORE:
        if (op->dst.buf->dtype == BACKEND_F16)
            cpu_path_get()->f32_to_f16((uint16_t *)op->dst.buf->host + op->dst.off, f32(op->src), op->n);
        else
            memcpy(f32(op->dst), f32(op->src), (size_t)op->n * sizeof(float));
        break;
    case BACKEND_OP_STORE_ROWS:
        for (int t = 0; t < op->n; t++) {
            size_t at = (size_t)t * op->stride;
            if (op->dst.buf->dtype == BACKEND_F16)
                cpu_path_get()->f32_to_f16((uint16_t *)op->dst.buf->host + op->dst.off + at,
                                           f32(op->src) + (size_t)t * op->cols, op->cols);
            else
                memcpy(f32(op->dst) + at, f32(op->src) + (size_t)t * op->cols, (size_t)op->cols * sizeof(float));
        }
        break;
    case BACKEND_OP_ATTENTION: {
        int f16 = op->k.buf->dtype == BACKEND_F16;
        size_t elt = f16 ? 2 : 4;
        const uint8_t *k = (const uint8_t *)op->k.buf->host + op->k.off * elt;
        const uint8_t *v = (const uint8_t *)op->v.buf->host + op->v.off * elt;
        if (op->bidir)
            cpu_attention_bidir(c->pool, f32(op->dst), f32(op->src), k, v, f16, op->n, op->heads, op->kv_heads,
                                op->head_dim, c->att_scratch, c->n_ctx, op->scale);
        else
            cpu_attention_sinks(c->pool, f32(op->dst), f32(op->src), k, v, f16, op->n, op->pos0, op->heads,
                                op->kv_heads, op->head_dim, c->att_scratch, c->n_ctx, op->window, op->scale, op->ring,
                                op->sinks ? op->sinks->vec : NULL);
        break;
    }
    case BACKEND_OP_LAYER_NORM:
        cpu_layer_norm(f32(op->dst), f32(op->src), op->w->vec, op->w2 ? op->w2->vec : NULL, op->n, op->cols, op->eps);
        break;
    case BACKEND_OP_GELU:
        cpu_gelu(f32(op->dst), (size_t)op->n);
        break;
    default:
        run_moe_op(c, op);
        break;
    case BACKEND_OP_SWIGLU:
        cpu_swiglu(c->pool, f32(op->dst), f32(op->src), (size_t)op->n);
        break;
    case BACKEND_OP_ADD:
        cpu_add(f32(op->dst), f32(op->src), (size_t)op->n);
        break;
    }
}

#define FUSE_MAX 4   /* matmuls in one cpu_matmul_n: Q, K, V; gate, up */

/* How many ops from i on run as one cpu_matmul_n: matmuls of the same source rows (Q, K and V;
 * gate and up) into other buffers, of weights that fuse. 1 for any other op. */
static size_t matmul_run(const backend_op *ops, size_t n_ops, size_t i)
{
    const backend_op *a = &ops[i];
    size_t n = 1;

    if (a->kind != BACKEND_OP_MATMUL || a->dst.buf == a->src.buf)
        return 1;
    while (i + n < n_ops && n < FUSE_MAX) {
        const backend_op *b = &ops[i + n];
        if (b->kind != BACKEND_OP_MATMUL || b->src.buf != a->src.buf || b->src.off != a->src.off || b->n != a->n ||
            b->dst.buf == a->src.buf || !cpu_matmul_fusable(tensor_of(a->w), tensor_of(b->w)))
            break;
        for (size_t k = 0; k < n; k++)   /* outputs written side by side must not meet */
            if (ops[i + k].dst.buf == b->dst.buf)
                return n;
        n++;
    }
    return n;
}

static void run_matmuls(cpu_ctx *c, const backend_op *ops, size_t n)
{
    float *ys[FUSE_MAX];
    const backend_tensor *ws[FUSE_MAX];

    for (size_t i = 0; i < n; i++) {
        ys[i] = f32(ops[i].dst);
        ws[i] = tensor_of(ops[i].w);
    }
    cpu_matmul_n(c->pool, (int)n, ys, f32(ops[0].src), ops[0].n, ws, c->mm_scratch);
}

/* The limits reserve() sized the scratch for: a sequence past them is the decoder's bug, refused
 * before any op runs. */
static int check_op(const cpu_ctx *c, const backend_op *op)
{
    if (op->kind == BACKEND_OP_MATMUL && (op->n > c->max_rows || op->cols > c->max_cols))
        return ms_err(MS_ERROR, "matmul of %d rows x %d columns: past the reserved %d x %d", op->n, op->cols,
                      c->max_rows, c->max_cols);
    if (op->kind == BACKEND_OP_ATTENTION && op->k.buf->dtype != op->v.buf->dtype)
        return ms_err(MS_ERROR, "attention: the k and v caches differ in element type");
    if (op->kind == BACKEND_OP_MATMUL_ID && (op->n > c->max_rows || op->cols > c->max_cols || op->rows > c->max_cols))
        return ms_err(MS_ERROR, "matmul_id of %d rows x %d columns into %d: past the reserved %d x %d", op->n, op->cols,
                      op->rows, c->max_rows, c->max_cols);
    if (op->kind == BACKEND_OP_MOE_ROUTE && (op->n_expert > c->max_cols || op->n_used > op->n_expert))
        return ms_err(MS_ERROR, "moe_route of %d of %d experts: past the reserved %d", op->n_used, op->n_expert,
                      c->max_cols);
    if (op->kind == BACKEND_OP_ATTENTION && op->bidir && (op->window || op->ring || op->pos0))
        return ms_err(MS_ERROR, "bidirectional attention with a window, a ring or a start position");
    if (op->kind == BACKEND_OP_ATTENTION && op->ring && (op->window <= 0 || op->ring < op->window + op->n - 1))
        return ms_err(MS_ERROR, "attention over a ring of %d slots: %d tokens in a window of %d need %d", op->ring,
                      op->n, op->window, op->window + op->n - 1);
    if (op->kind == BACKEND_OP_ATTENTION && op->pos0 + op->n > c->n_ctx)
        return ms_err(MS_ERROR, "attention to position %d: past the reserved context of %d", op->pos0 + op->n,
                      c->n_ctx);
    return 0;
}

static int run(void *vctx, const backend_op *ops, size_t n_ops)
{
    cpu_ctx *c = vctx;
    int rc;

    for (size_t i = 0; i < n_ops; i++)
        if ((rc = check_op(c, &ops[i])) < 0)
            return rc;
    for (size_t i = 0; i < n_ops;) {
        size_t n = matmul_run(ops, n_ops, i);
        if (n > 1)
            run_matmuls(c, ops + i, n);
        else
            run_op(c, &ops[i]);
        i += n;
    }
    return 0;
}

static int read_buf(void *vctx, float *dst, backend_ref src, size_t n)
{
    (void)vctx;
    memcpy(dst, f32(src), n * sizeof(float));
    return 0;
}

static void close_ctx(void *vctx)
{
    cpu_ctx *c = vctx;

    if (!c)
        return;
    cpu_pool_free(c->pool);
    MS_FREE_ALL(c->mm_scratch, c->att_scratch, c->id_in, c->id_out, c->id_rows, c->heads_scratch, c->heads,
                c);
}

/* Every kind backend.h defines. */
static int supports(void *vctx, backend_op_kind kind)
{
    (void)vctx;
    return (unsigned)kind < BACKEND_OP_COUNT;
}

static const backend_impl cpu_impl = {
    .name = "cpu",
    .describe = describe,
    .reserve = reserve,
    .buf_new = buf_new,
    .buf_free = buf_free,
    .weight_new = weight_new,
    .weight_free = weight_free,
    .run = run,
    .read = read_buf,
    .close = close_ctx,
    .supports = supports,
};

int cpu_backend_new(const backend_impl **impl_out, void **ctx_out, const backend_opts *o)
{
    cpu_ctx *c = calloc(1, sizeof *c);
    int rc;

    *impl_out = NULL;
    *ctx_out = NULL;
    if ((rc = cpu_path_check_env()) < 0) {   /* a bad MSTORE_CPU stops `run` and `bench` here */
        free(c);
        return rc;
    }
    if (!c)
        return ms_err(MS_ENOMEM, "out of memory");
    if ((rc = cpu_pool_new(&c->pool, o ? o->n_threads : 0)) < 0) {
        free(c);
        return rc;
    }
    snprintf(c->desc, sizeof c->desc, "cpu %s, %d threads", cpu_path_name(), cpu_pool_threads(c->pool));
    *impl_out = &cpu_impl;
    *ctx_out = c;
    return 0;
}
