/* gpu.c: the plan of each backend.h op as a dispatch of the GLSL kernels (gpu.h), shared by the
 * Vulkan and Metal hosts. Moved out of src/vulkan/vk_run.c unchanged in arithmetic, so that a
 * second host encodes exactly what the first does. */
#include <math.h>
#include <string.h>

#include "gpu/gpu.h"
#include "util/util.h"

uint32_t gpu_kernel_threads(gpu_kernel k)
{
    if (k >= GPU_K_MI)
        return 128;   /* matmul.comp, GEMM 2 */
    if (k < GPU_K_MM)
        return 128;   /* matmul.comp, GEMM 0 */
    if (k < GPU_K_EMBED)
        return 256;   /* matmul.comp, GEMM 1 */
    if (k < GPU_K_NORM)
        return 64;    /* embed.comp */
    switch (k) {
    case GPU_K_NORM:
        return 256;
    case GPU_K_ROPE:
        return 64;
    case GPU_K_ELEM:
        return 256;
    default:
        return 64;    /* attention.comp */
    }
}

/* ---------------------------------------------------------------- weights */

static int vt_of(const backend_tensor *t)
{
    if (t->type == BACKEND_TYPE_MLX) {
        if (!t->quant_type || !t->biases || t->group_size <= 0 || t->group_size % 32 ||
            (t->scale_dtype != ST_F32 && t->scale_dtype != ST_F16 && t->scale_dtype != ST_BF16))
            return -1;
        return strcmp(t->quant_type, "int4") == 0 ? GPU_T_MLX4 : strcmp(t->quant_type, "int8") == 0 ? GPU_T_MLX8 : -1;
    }
    switch (t->type) {
    case GGML_TYPE_F32:
        return GPU_T_F32;
    case GGML_TYPE_F16:
        return GPU_T_F16;
    case GGML_TYPE_BF16:
        return GPU_T_BF16;
    case GGML_TYPE_Q8_0:
        return GPU_T_Q8_0;
    case GGML_TYPE_Q4_0:
        return GPU_T_Q4_0;
    case GGML_TYPE_Q4_1:
        return GPU_T_Q4_1;
    case GGML_TYPE_Q5_0:
        return GPU_T_Q5_0;
    case GGML_TYPE_Q5_1:
        return GPU_T_Q5_1;
    case GGML_TYPE_Q4_K:
        return GPU_T_Q4_K;
    case GGML_TYPE_Q5_K:
        return GPU_T_Q5_K;
    case GGML_TYPE_Q6_K:
        return GPU_T_Q6_K;
    case GGML_TYPE_MXFP4:
        return GPU_T_MXFP4;
    default:
        return -1;
    }
}

int gpu_weight_layout(gpu_weight *w, uint64_t *lo, uint64_t *hi, const backend_tensor *t, uint64_t max_range,
                      const char *dev)
{
    uint64_t cols = t->shape[t->n_dims - 1], rows = 1, row_bytes = 0;
    int vt = vt_of(t);

    /* every dimension but the last counts rows: an expert pack [n_expert][rows][cols] is
     * n_expert * rows rows, one expert's contiguous (MATMUL_ID offsets the row by the expert) */
    for (int i = 0; i + 1 < t->n_dims; i++)
        rows *= t->shape[i];

    memset(w, 0, sizeof *w);
    if (t->n_dims == 1 && t->type != GGML_TYPE_F32 && t->type != GGML_TYPE_F16 && t->type != GGML_TYPE_BF16)
        return ms_err(MS_EINVALID, "tensor '%s': expected a vector of F32/F16/BF16 values", t->name);
    if (vt < 0) {
        const char *tn = t->type == BACKEND_TYPE_MLX ? (t->quant_type ? t->quant_type : "mlx ?")
                         : ggml_type_name(t->type)   ? ggml_type_name(t->type)
                                                     : "?";
        return ms_err(MS_EUNSUPPORTED,
                      "tensor '%s': type %s is not supported by the %s backend; supported: "
                      "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, MXFP4, MLX int4 and int8 "
                      "(affine)",
                      t->name, tn, dev);
    }
    if (t->type == BACKEND_TYPE_MLX)
        row_bytes = cols * (uint64_t)t->bits / 8;
    else if (ggml_row_nbytes(&row_bytes, t->type, cols) < 0)
        return ms_err(MS_EINVALID, "tensor '%s': %llu columns do not fill whole blocks", t->name,
                      (unsigned long long)cols);
    if (row_bytes * rows > max_range || row_bytes * rows > UINT32_MAX - 64)
        return ms_err(MS_EINVALID, "tensor '%s': %llu bytes, past the %llu bytes one binding of the %s device can address",
                      t->name, (unsigned long long)(row_bytes * rows), (unsigned long long)max_range, dev);
    w->vt = vt;
    w->row_bytes = (uint32_t)row_bytes;
    *lo = (uintptr_t)t->data;
    *hi = *lo + row_bytes * rows;
    if (t->type == BACKEND_TYPE_MLX) {
        uint64_t ssz = st_dtype_size((st_dtype)t->scale_dtype), sbytes = rows * (cols / (uint64_t)t->group_size) * ssz;
        uint64_t s = (uintptr_t)t->scales, b = (uintptr_t)t->biases;
        w->s_row_bytes = (uint32_t)((cols / (uint64_t)t->group_size) * ssz);
        w->gs = (uint32_t)t->group_size;
        w->stype = t->scale_dtype == ST_F16 ? 1 : t->scale_dtype == ST_BF16 ? 2 : 0;
        *lo = *lo < s ? *lo : s;
        *lo = *lo < b ? *lo : b;
        *hi = *hi > s + sbytes ? *hi : s + sbytes;
        *hi = *hi > b + sbytes ? *hi : b + sbytes;
        w->scales_end = sbytes; /* a length until placed */
    }
    w->data_end = row_bytes * rows;
    return 0;
}

void gpu_weight_place(gpu_weight *w, const backend_tensor *t, const void *base)
{
    uint64_t data_n = w->data_end, s_n = w->scales_end;

    w->data_off = (uintptr_t)t->data - (uintptr_t)base;
    w->data_end = w->data_off + data_n;
    if (w->vt == GPU_T_MLX4 || w->vt == GPU_T_MLX8) {
        w->scales_off = (uintptr_t)t->scales - (uintptr_t)base;
        w->scales_end = w->scales_off + s_n;
        w->biases_off = (uintptr_t)t->biases - (uintptr_t)base;
        w->biases_end = w->biases_off + s_n;
    }
}

/* ---------------------------------------------------------------- checks */

void gpu_limits_reserve(gpu_limits *g, const backend_limits *l)
{
    g->max_rows = l->max_rows;
    g->max_cols = l->max_cols;
    g->n_ctx = l->n_ctx;
    g->heads = l->heads;
}

int gpu_supports(backend_op_kind kind)
{
    /* every kind backend.h defines has a plan below */
    return (unsigned)kind < BACKEND_OP_COUNT;
}

static int is_float_type(int type)
{
    return type == GGML_TYPE_F32 || type == GGML_TYPE_F16 || type == GGML_TYPE_BF16;
}

/* gpt-oss's ops: the weights they index are read as vec_ld reads a norm weight (common.glsl). */
static int check_gpt_oss(const backend_op *op)
{
    if (op->kind == BACKEND_OP_ATTENTION && op->sinks) {
        const backend_tensor *t = op->sinks->t;
        if (op->bidir)
            return ms_err(MS_ERROR, "bidirectional attention with sinks");
        if (t->n_dims != 1 || !is_float_type(t->type) || t->shape[0] < (uint64_t)op->heads)
            return ms_err(MS_ERROR, "attention sinks '%s': expected a vector of %d F32/F16/BF16 values", t->name,
                          op->heads);
    }
    if (op->kind == BACKEND_OP_ADD_ROW_ID) {
        const backend_tensor *t = op->w->t;
        if (t->n_dims != 2 || !is_float_type(t->type) || t->shape[0] != (uint64_t)op->n_expert ||
            t->shape[1] != (uint64_t)op->rows || op->n_used < 1)
            return ms_err(MS_ERROR, "add_row_id of '%s': expected an F32/F16/BF16 [%d][%d] weight, %d slots", t->name,
                          op->n_expert, op->rows, op->n_used);
        /* the element kernel indexes dst[n][n_used][rows] with one 32-bit index */
        if ((uint64_t)op->n * op->n_used * op->rows > UINT32_MAX)
            return ms_err(MS_ERROR, "add_row_id of %d rows x %d slots x %d: past 2^32 elements", op->n, op->n_used,
                          op->rows);
    }
    return 0;
}

/* DeepSeek's ops (MLA): MATMUL_HEADS through matmul_id's kernel, STORE_ROWS, the grouped routes. */
static int check_deepseek(const gpu_limits *l, const backend_op *op)
{
    if (op->kind == BACKEND_OP_MATMUL_HEADS) {
        const backend_tensor *t = op->w->t;
        uint64_t pairs = (uint64_t)op->n * op->heads, rb = ((uint64_t)op->rows + GPU_MV_ROWS - 1) / GPU_MV_ROWS;
        if (t->n_dims != 3 || t->shape[0] != (uint64_t)op->heads || t->shape[1] != (uint64_t)op->rows ||
            t->shape[2] != (uint64_t)op->cols || op->heads < 1)
            return ms_err(MS_ERROR, "matmul_heads of '%s': expected a [%d][%d][%d] pack", t->name, op->heads,
                          op->rows, op->cols);
        /* a flat grid of (token, head, row block) workgroups; dst and src indexed in 32 bits */
        if (op->n > l->max_rows || pairs * rb > (uint64_t)65535 * 65535 ||
            pairs * (uint64_t)(op->rows > op->cols ? op->rows : op->cols) > UINT32_MAX)
            return ms_err(MS_ERROR, "matmul_heads of %d rows x %d heads x %d columns into %d: past the reserved %d rows",
                          op->n, op->heads, op->cols, op->rows, l->max_rows);
    }
    if (op->kind == BACKEND_OP_STORE_ROWS &&
        (op->n < 0 || op->cols < 0 || op->cols > op->stride || (uint64_t)op->n * op->stride > UINT32_MAX / 2))
        return ms_err(MS_ERROR, "store_rows of %d rows x %d columns into rows of %d", op->n, op->cols, op->stride);
    if (op->kind == BACKEND_OP_MOE_ROUTE && op->route >= BACKEND_ROUTE_SOFTMAX_GROUPED) {
        int g = op->n_group > 1 ? op->n_group : 1, per = op->n_expert / g;
        int cand = g > 1 && op->topk_group < g ? op->topk_group * per : op->n_expert;
        if (op->route > BACKEND_ROUTE_SIGMOID_GROUPED || op->n_expert > 1024 || op->n_used < 1 ||
            op->n_used > cand || op->topk_group < 0)
            return ms_err(MS_ERROR,
                          "moe_route (grouped) of %d of %d experts in %d groups, %d kept (the kernel takes at most "
                          "1024 experts)",
                          op->n_used, op->n_expert, op->n_group, op->topk_group);
        if (op->w && (op->w->t->n_dims != 1 || !is_float_type(op->w->t->type) ||
                      op->w->t->shape[0] < (uint64_t)op->n_expert))
            return ms_err(MS_ERROR, "moe_route selection bias '%s': expected a vector of %d F32/F16/BF16 values",
                          op->w->t->name, op->n_expert);
    }
    return 0;
}

int gpu_op_check(const gpu_limits *l, const backend_op *op)
{
    if (check_gpt_oss(op) < 0 || check_deepseek(l, op) < 0)
        return MS_ERROR;
    if (op->kind == BACKEND_OP_MATMUL && (op->n > l->max_rows || op->cols > l->max_cols))
        return ms_err(MS_ERROR, "matmul of %d rows x %d columns: past the reserved %d x %d", op->n, op->cols,
                      l->max_rows, l->max_cols);
    if (op->kind == BACKEND_OP_ATTENTION &&
        (op->pos0 + op->n > l->n_ctx || op->head_dim > GPU_ATT_HEAD_DIM || op->kv_heads <= 0 ||
         op->heads % op->kv_heads))
        return ms_err(MS_ERROR, "attention to position %d (context %d), head_dim %d (at most %d), %d/%d heads",
                      op->pos0 + op->n, l->n_ctx, op->head_dim, GPU_ATT_HEAD_DIM, op->heads, op->kv_heads);
    if (op->kind == BACKEND_OP_ATTENTION && op->bidir && (op->window || op->ring || op->pos0))
        return ms_err(MS_ERROR, "bidirectional attention with a window, a ring or a start position");
    if (op->kind == BACKEND_OP_ATTENTION && op->ring && (op->window <= 0 || op->ring < op->window + op->n - 1))
        return ms_err(MS_ERROR, "attention over a ring of %d slots: %d tokens in a window of %d need %d", op->ring,
                      op->n, op->window, op->window + op->n - 1);
    if (op->kind == BACKEND_OP_MOE_ROUTE && op->route < BACKEND_ROUTE_SOFTMAX_GROUPED &&
        (op->n_expert > 256 || op->n_used < 1 || op->n_used > op->n_expert))
        return ms_err(MS_ERROR, "moe_route of %d of %d experts (the kernel takes at most 256)", op->n_used,
                      op->n_expert);
    if (op->kind == BACKEND_OP_MATMUL_ID &&
        (op->n > l->max_rows || op->cols > l->max_cols || op->n_used < 1 || (uint64_t)op->n * op->n_used > 65535 ||
         (op->rows + GPU_MV_ROWS - 1) / GPU_MV_ROWS > 65535))
        return ms_err(MS_ERROR, "matmul_id of %d rows x %d slots x %d columns into %d: past the reserved %d x %d",
                      op->n, op->n_used, op->cols, op->rows, l->max_rows, l->max_cols);
    if (op->kind == BACKEND_OP_ROPE && (op->n_rot > 1024 || op->n_rot > op->head_dim))
        return ms_err(MS_ERROR, "rope of %d dims in heads of %d", op->n_rot, op->head_dim);
    if (op->kind == BACKEND_OP_EMBED)
        for (int t = 0; t < op->n; t++)
            if (op->tokens[t] < 0 || (uint64_t)op->tokens[t] >= op->w->t->shape[0])
                return ms_err(MS_ERROR, "embedding of token %d: outside the %llu rows", op->tokens[t],
                              (unsigned long long)op->w->t->shape[0]);
    return 0;
}

static size_t align_up(size_t v, size_t a)
{
    return (v + a - 1) / a * a;
}

size_t gpu_params_size(const gpu_limits *l, const backend_op *ops, size_t n_ops)
{
    size_t s = 0;

    for (size_t i = 0; i < n_ops; i++) {
        if (ops[i].kind == BACKEND_OP_EMBED)
            s += align_up((size_t)ops[i].n * 4, l->align);
        else if (ops[i].kind == BACKEND_OP_ROPE)
            s += align_up((size_t)ops[i].n * (size_t)(ops[i].n_rot / 2) * 8, l->align);
    }
    return s;
}

/* ---------------------------------------------------------------- bindings */

/* Bind elements [off, off + need) (elt bytes each) of something of `size` bytes: the binding
 * starts at an aligned byte offset and *rem is what remains in elements. MS_ERROR when the
 * range falls outside or past what one binding can address. */
static int bind_range(const gpu_limits *l, gpu_bind *b, uint32_t *rem, uint64_t size, uint64_t off, uint64_t need,
                      uint64_t elt)
{
    uint64_t byte = off * elt, base = byte / l->align * l->align, end = (byte + need * elt + 3) & ~(uint64_t)3;

    if (end > size)
        return ms_err(MS_ERROR, "gpu: an op reaches byte %llu of a buffer of %llu", (unsigned long long)end,
                      (unsigned long long)size);
    if (end - base > l->max_range)
        return ms_err(MS_ERROR, "gpu: an op spans %llu bytes, past the %llu one binding can address",
                      (unsigned long long)(end - base), (unsigned long long)l->max_range);
    b->offset = base;
    b->range = end - base;
    *rem = (uint32_t)((byte - base) / elt);
    return 0;
}

static int bind_ref(const gpu_limits *l, gpu_bind *b, uint32_t *rem, backend_ref r, uint64_t need)
{
    uint64_t elt = r.buf && r.buf->dtype == BACKEND_F16 ? 2 : 4;

    if (!r.buf)
        return ms_err(MS_ERROR, "gpu: an op lacks a buffer");
    b->kind = GPU_B_BUF;
    b->buf = r.buf;
    /* the bytes a host allocates for a buffer (backend_buf_new): whole words */
    return bind_range(l, b, rem, (r.buf->n * elt + 3) & ~(uint64_t)3, r.off, need, elt);
}

/* Bytes [lo, hi) of a weight's region; *rem in bytes. */
static int bind_weight(const gpu_limits *l, gpu_bind *b, uint32_t *rem, const gpu_weight *w, uint64_t lo, uint64_t hi)
{
    b->kind = GPU_B_WEIGHT;
    b->w = w;
    return bind_range(l, b, rem, w->region_size, lo, hi - lo, 1);
}

/* Bindings 3..5 of a matrix: its bytes, and for MLX its scales and biases. */
static int bind_matrix(const gpu_limits *l, gpu_dispatch *d, const gpu_weight *w)
{
    int rc;

    if ((rc = bind_weight(l, &d->b[2], &d->pc.w_off, w, w->data_off, w->data_end)) < 0)
        return rc;
    d->pc.row_bytes = w->row_bytes;
    if (w->vt == GPU_T_MLX4 || w->vt == GPU_T_MLX8) {
        if ((rc = bind_weight(l, &d->b[3], &d->pc.a_off, w, w->scales_off, w->scales_end)) < 0 ||
            (rc = bind_weight(l, &d->b[4], &d->pc.b_off, w, w->biases_off, w->biases_end)) < 0)
            return rc;
        d->pc.s_row_bytes = w->s_row_bytes;
        d->pc.gs = w->gs;
        d->pc.stype = w->stype;
    }
    return 0;
}

/* Binding 3 of an expert pack for MATMUL_ID: one binding over its bytes, and for MLX its scales
 * and biases too (w_off, a_off, b_off are byte offsets in it), as bindings 4 and 5 are taken by
 * the ids. */
static int bind_pack(const gpu_limits *l, gpu_dispatch *d, const gpu_weight *w)
{
    uint64_t lo = w->data_off, hi = w->data_end;
    uint32_t rem = 0;   /* bind_weight sets it; gcc 12 for aarch64 cannot see that */
    int rc, mlx = w->vt == GPU_T_MLX4 || w->vt == GPU_T_MLX8;

    if (mlx) {
        lo = lo < w->scales_off ? lo : w->scales_off;
        lo = lo < w->biases_off ? lo : w->biases_off;
        hi = hi > w->scales_end ? hi : w->scales_end;
        hi = hi > w->biases_end ? hi : w->biases_end;
    }
    if ((rc = bind_weight(l, &d->b[2], &rem, w, lo, hi)) < 0)
        return rc;
    d->pc.w_off = rem + (uint32_t)(w->data_off - lo);
    d->pc.row_bytes = w->row_bytes;
    if (mlx) {
        d->pc.a_off = rem + (uint32_t)(w->scales_off - lo);
        d->pc.b_off = rem + (uint32_t)(w->biases_off - lo);
        d->pc.s_row_bytes = w->s_row_bytes;
        d->pc.gs = w->gs;
        d->pc.stype = w->stype;
    }
    return 0;
}

static void bind_params(gpu_bind *b, size_t off, size_t range)
{
    b->kind = GPU_B_PARAMS;
    b->offset = off;
    b->range = range;
}

/* ---------------------------------------------------------------- dispatches */

/* `groups` workgroups as a grid of rows of at most 65535. */
static int groups_grid(gpu_dispatch *d, uint64_t groups)
{
    uint32_t g;

    if (groups > (uint64_t)65535 * 65535)
        return ms_err(MS_ERROR, "gpu: an op of %llu workgroups", (unsigned long long)groups);
    g = (uint32_t)groups;
    d->gx = g < 65535 ? (g ? g : 1) : 65535;
    d->gy = (g + d->gx - 1) / d->gx;
    if (!d->gy)
        d->gy = 1;
    return 0;
}

static int plan_embed(gpu_plan *p, const backend_op *op, gpu_dispatch *d)
{
    const gpu_limits *l = p->l;
    const gpu_weight *w = op->w->dev;
    gpu_push *pc = &d->pc;
    uint32_t nb = (uint32_t)((op->cols + 31) / 32);
    int rc;

    memcpy(p->params + p->p_off, op->tokens, (size_t)op->n * 4);
    bind_params(&d->b[1], p->p_off, align_up((size_t)op->n * 4, 4));
    p->p_off += align_up((size_t)op->n * 4, l->align);
    if ((rc = bind_ref(l, &d->b[0], &pc->dst_off, op->dst, (uint64_t)op->n * op->cols)) < 0 ||
        (rc = bind_matrix(l, d, w)) < 0)
        return rc;
    pc->cols = (uint32_t)op->cols;
    d->k = GPU_K_EMBED + w->vt;
    return groups_grid(d, ((uint64_t)op->n * nb + 63) / 64);
}

/* RMS_NORM and LAYER_NORM: norm.comp's modes 0 (RMS), 1 (LayerNorm) and 2 (LayerNorm with the
 * bias at binding 5, its type in stype). */
static int plan_norm(gpu_plan *p, const backend_op *op, gpu_dispatch *d)
{
    const gpu_limits *l = p->l;
    const gpu_weight *w = op->w->dev;
    gpu_push *pc = &d->pc;
    int rc;

    if ((rc = bind_ref(l, &d->b[0], &pc->dst_off, op->dst, (uint64_t)op->n * op->cols)) < 0 ||
        (rc = bind_ref(l, &d->b[1], &pc->src_off, op->src, (uint64_t)op->n * op->cols)) < 0 ||
        (rc = bind_weight(l, &d->b[2], &pc->w_off, w, w->data_off, w->data_end)) < 0)
        return rc;
    if (op->kind == BACKEND_OP_LAYER_NORM && op->w2) {
        const gpu_weight *b = op->w2->dev;
        if ((rc = bind_weight(l, &d->b[4], &pc->b_off, b, b->data_off, b->data_end)) < 0)
            return rc;
        pc->stype = (uint32_t)op->w2->t->type;
    }
    pc->mode = op->kind == BACKEND_OP_RMS_NORM ? 0 : op->w2 ? 2 : 1;
    pc->cols = (uint32_t)op->cols;
    pc->wtype = (uint32_t)op->w->t->type;
    pc->eps = op->eps;
    pc->scale = op->w_offset; /* RMS_NORM: Gemma's (1 + w): 1; else 0 */
    d->rd[d->n_rd++] = op->src.buf;
    d->k = GPU_K_NORM;
    return groups_grid(d, (uint64_t)op->n);
}

static int plan_matmul(gpu_plan *p, const backend_op *op, gpu_dispatch *d)
{
    const gpu_limits *l = p->l;
    const gpu_weight *w = op->w->dev;
    gpu_push *pc = &d->pc;
    int rc;

    if ((rc = bind_ref(l, &d->b[0], &pc->dst_off, op->dst, (uint64_t)op->n * op->rows)) < 0 ||
        (rc = bind_ref(l, &d->b[1], &pc->src_off, op->src, (uint64_t)op->n * op->cols)) < 0 ||
        (rc = bind_matrix(l, d, w)) < 0)
        return rc;
    pc->rows = (uint32_t)op->rows;
    pc->cols = (uint32_t)op->cols;
    d->rd[d->n_rd++] = op->src.buf;
    /* Either kernel adds a row in matmul.comp's one order, so this choice by the pass's token
     * count changes no bit of any row (a sequence's, whoever shares its pass). */
    if (op->n <= 2) { /* decode: the weight is read once per token either way; no tile to fill */
        d->k = GPU_K_MV + w->vt;
        return groups_grid(d, ((uint64_t)op->rows + GPU_MV_ROWS - 1) / GPU_MV_ROWS);
    }
    d->k = GPU_K_MM + w->vt;
    d->gx = (uint32_t)((op->rows + GPU_MM_ROWS - 1) / GPU_MM_ROWS);
    d->gy = (uint32_t)((op->n + GPU_MM_TOKENS - 1) / GPU_MM_TOKENS);
    return 0;
}

static int plan_add_row(gpu_plan *p, const backend_op *op, gpu_dispatch *d)
{
    const gpu_limits *l = p->l;
    const gpu_weight *w = op->w->dev;
    gpu_push *pc = &d->pc;
    int rc;

    if ((rc = bind_ref(l, &d->b[0], &pc->dst_off, op->dst, (uint64_t)op->n * op->cols)) < 0 ||
        (rc = bind_weight(l, &d->b[2], &pc->w_off, w, w->data_off, w->data_end)) < 0)
        return rc;
    pc->n = (uint32_t)(op->n * op->cols);
    pc->cols = (uint32_t)op->cols;
    pc->wtype = (uint32_t)op->w->t->type;
    pc->mode = 2;
    d->k = GPU_K_ELEM;
    return groups_grid(d, (pc->n + 255u) / 256u);
}

static int plan_rope(gpu_plan *p, const backend_op *op, gpu_dispatch *d)
{
    const gpu_limits *l = p->l;
    gpu_push *pc = &d->pc;
    int half = op->n_rot / 2;
    const backend_op *pv = p->rope_prev;
    int rc;

    if (!pv || pv->n != op->n || pv->pos0 != op->pos0 || pv->n_rot != op->n_rot || pv->freqs != op->freqs) {
        /* cos and sin in double, as the CPU takes them; one table serves every head and layer */
        float *tab = (float *)(p->params + p->p_off);
        for (int t = 0; t < op->n; t++) {
            for (int i = 0; i < half; i++) {
                double a = (double)(op->pos0 + t) * op->freqs[i];
                tab[2 * ((size_t)t * half + i)] = (float)cos(a);
                tab[2 * ((size_t)t * half + i) + 1] = (float)sin(a);
            }
        }
        p->rope_off = p->p_off;
        p->p_off += align_up((size_t)op->n * (size_t)half * 8, l->align);
        p->rope_prev = op;
    }
    if ((rc = bind_ref(l, &d->b[0], &pc->dst_off, op->dst, (uint64_t)op->n * op->heads * op->head_dim)) < 0)
        return rc;
    bind_params(&d->b[3], p->rope_off, (size_t)op->n * (size_t)half * 8 + 4);
    pc->heads = (uint32_t)op->heads;
    pc->head_dim = (uint32_t)op->head_dim;
    pc->n_rot = (uint32_t)op->n_rot;
    pc->interleaved = (uint32_t)op->interleaved;
    d->k = GPU_K_ROPE;
    return groups_grid(d, ((uint64_t)op->n * op->heads * half + 63) / 64);
}

static int plan_store(gpu_plan *p, const backend_op *op, gpu_dispatch *d)
{
    const gpu_limits *l = p->l;
    gpu_push *pc = &d->pc;
    int rc;

    if ((rc = bind_ref(l, &d->b[0], &pc->dst_off, op->dst, (uint64_t)op->n)) < 0 ||
        (rc = bind_ref(l, &d->b[1], &pc->src_off, op->src, (uint64_t)op->n)) < 0)
        return rc;
    pc->mode = op->dst.buf->dtype == BACKEND_F16 ? 4 : 3;
    d->rd[d->n_rd++] = op->src.buf;
    d->k = GPU_K_ELEM;
    return groups_grid(d, pc->mode == 4 ? ((pc->dst_off & 1u) + pc->n + 1u) / 2u / 256u + 1u
                                        : (pc->n + 255u) / 256u);
}

static int plan_attention(gpu_plan *p, const backend_op *op, gpu_dispatch *d)
{
    const gpu_limits *l = p->l;
    gpu_push *pc = &d->pc;
    int rc;

    /* a ring holds position p at slot p % ring: the slots read are below min(ring, positions) */
    uint64_t slots = (uint64_t)(op->pos0 + op->n);
    if (op->ring > 0 && (uint64_t)op->ring < slots)
        slots = (uint64_t)op->ring;
    uint64_t kv_need = slots * op->kv_heads * op->head_dim;
    if ((rc = bind_ref(l, &d->b[0], &pc->dst_off, op->dst, (uint64_t)op->n * op->heads * op->head_dim)) < 0 ||
        (rc = bind_ref(l, &d->b[1], &pc->src_off, op->src, (uint64_t)op->n * op->heads * op->head_dim)) < 0 ||
        (rc = bind_ref(l, &d->b[3], &pc->a_off, op->k, kv_need)) < 0 ||
        (rc = bind_ref(l, &d->b[4], &pc->b_off, op->v, kv_need)) < 0)
        return rc;
    if (op->k.buf->dtype != op->v.buf->dtype)
        return ms_err(MS_ERROR, "gpu: attention over k and v caches of different types");
    pc->pos0 = (uint32_t)op->pos0;
    pc->heads = (uint32_t)op->heads;
    pc->kv_heads = (uint32_t)op->kv_heads;
    pc->head_dim = (uint32_t)op->head_dim;
    pc->scale = op->scale != 0 ? op->scale : 1.0f / sqrtf((float)op->head_dim);
    pc->rows = (uint32_t)(op->window > 0 ? op->window : 0);
    pc->cols = (uint32_t)(op->ring > 0 ? op->ring : 0);
    pc->mode = op->bidir ? 1 : 0;   /* every token sees all pos0 + n positions */
    if (op->sinks) {                 /* mode bit 2: sinks[heads] at binding 3, read as a vector */
        const gpu_weight *s = op->sinks->dev;
        if ((rc = bind_weight(l, &d->b[2], &pc->w_off, s, s->data_off, s->data_end)) < 0)
            return rc;
        pc->wtype = (uint32_t)op->sinks->t->type;
        pc->mode |= 2;
    }
    d->rd[d->n_rd++] = op->src.buf;
    d->rd[d->n_rd++] = op->k.buf;
    d->rd[d->n_rd++] = op->v.buf;
    d->k = op->k.buf->dtype == BACKEND_F16 ? GPU_K_ATT_F16 : GPU_K_ATT_F32;
    return groups_grid(d, (uint64_t)op->n * op->heads);
}

static int plan_pairwise(gpu_plan *p, const backend_op *op, gpu_dispatch *d)
{
    const gpu_limits *l = p->l;
    gpu_push *pc = &d->pc;
    int rc;

    if ((rc = bind_ref(l, &d->b[0], &pc->dst_off, op->dst, (uint64_t)op->n)) < 0 ||
        (rc = bind_ref(l, &d->b[1], &pc->src_off, op->src, (uint64_t)op->n)) < 0)
        return rc;
    /* the element kernel's modes: 0 add, 1 swiglu, 5 geglu, 11 swiglu_oai (alpha in scale, limit in eps) */
    pc->mode = op->kind == BACKEND_OP_SWIGLU       ? 1
               : op->kind == BACKEND_OP_GEGLU      ? 5
               : op->kind == BACKEND_OP_SWIGLU_OAI ? 11
                                                   : 0;
    pc->scale = op->alpha;
    pc->eps = op->limit;
    d->rd[d->n_rd++] = op->src.buf;
    d->k = GPU_K_ELEM;
    return groups_grid(d, (pc->n + 255u) / 256u);
}

/* SCALE, SOFTCAP and GELU: in place over dst[0 .. n). */
static int plan_scale(gpu_plan *p, const backend_op *op, gpu_dispatch *d)
{
    const gpu_limits *l = p->l;
    gpu_push *pc = &d->pc;
    int rc;

    if ((rc = bind_ref(l, &d->b[0], &pc->dst_off, op->dst, (uint64_t)op->n)) < 0)
        return rc;
    /* the element kernel's modes: 6 scale, 7 softcap, 10 gelu */
    pc->mode = op->kind == BACKEND_OP_SCALE ? 6 : op->kind == BACKEND_OP_SOFTCAP ? 7 : 10;
    pc->scale = op->scale;
    d->k = GPU_K_ELEM;
    return groups_grid(d, (pc->n + 255u) / 256u);
}

static int plan_weighted_sum(gpu_plan *p, const backend_op *op, gpu_dispatch *d)
{
    const gpu_limits *l = p->l;
    gpu_push *pc = &d->pc;
    int sum = op->kind == BACKEND_OP_MOE_SUM;
    uint64_t n_src = (uint64_t)op->n * (sum ? op->n_used : 1) * op->cols;
    int rc;

    if ((rc = bind_ref(l, &d->b[0], &pc->dst_off, op->dst, (uint64_t)op->n * op->cols)) < 0 ||
        (rc = bind_ref(l, &d->b[1], &pc->src_off, op->src, n_src)) < 0 ||
        (rc = bind_ref(l, &d->b[3], &pc->a_off, op->wts, (uint64_t)op->n * (sum ? op->n_used : 1))) < 0)
        return rc;
    pc->n = (uint32_t)(op->n * op->cols);
    pc->cols = (uint32_t)op->cols;
    pc->rows = (uint32_t)(sum ? op->n_used : 1);
    pc->mode = sum ? 9 : 8;
    d->rd[d->n_rd++] = op->src.buf;
    d->rd[d->n_rd++] = op->wts.buf;
    d->k = GPU_K_ELEM;
    return groups_grid(d, (pc->n + 255u) / 256u);
}

/* ADD_ROW_ID: the element kernel's mode 12 over dst[n][n_used][rows]; the bias of slot (t, s) is row
 * ids[t][s] of w, read as a vector (binding 3, wtype), the ids at binding 4. */
static int plan_add_row_id(gpu_plan *p, const backend_op *op, gpu_dispatch *d)
{
    const gpu_limits *l = p->l;
    const gpu_weight *w = op->w->dev;
    gpu_push *pc = &d->pc;
    uint64_t pairs = (uint64_t)op->n * op->n_used;
    int rc;

    if ((rc = bind_ref(l, &d->b[0], &pc->dst_off, op->dst, pairs * op->rows)) < 0 ||
        (rc = bind_weight(l, &d->b[2], &pc->w_off, w, w->data_off, w->data_end)) < 0 ||
        (rc = bind_ref(l, &d->b[3], &pc->a_off, op->ids, pairs)) < 0)
        return rc;
    pc->n = (uint32_t)(pairs * op->rows);
    pc->cols = (uint32_t)op->rows;
    pc->n_rot = (uint32_t)op->n_expert;
    pc->wtype = (uint32_t)op->w->t->type;
    pc->mode = 12;
    d->rd[d->n_rd++] = op->ids.buf;
    d->k = GPU_K_ELEM;
    return groups_grid(d, ((uint64_t)pc->n + 255) / 256);
}

static int plan_moe_route(gpu_plan *p, const backend_op *op, gpu_dispatch *d)
{
    const gpu_limits *l = p->l;
    gpu_push *pc = &d->pc;
    int rc;

    if ((rc = bind_ref(l, &d->b[0], &pc->dst_off, op->dst, (uint64_t)op->n * op->n_used)) < 0 ||
        (rc = bind_ref(l, &d->b[1], &pc->src_off, op->src, (uint64_t)op->n * op->n_expert)) < 0 ||
        (rc = bind_ref(l, &d->b[3], &pc->a_off, op->ids, (uint64_t)op->n * op->n_used)) < 0)
        return rc;
    pc->rows = (uint32_t)op->n_used;
    pc->cols = (uint32_t)op->n_expert;
    pc->mode = (uint32_t)op->route;
    if (op->route >= BACKEND_ROUTE_SOFTMAX_GROUPED) {
        /* DeepSeek's: heads n_group, kv_heads topk_group, n_rot norm, scale; interleaved 1: the
         * selection bias, a vector at binding 3 (w_off, wtype) */
        pc->heads = (uint32_t)(op->n_group > 1 ? op->n_group : 1);
        pc->kv_heads = (uint32_t)op->topk_group;
        pc->n_rot = (uint32_t)(op->norm != 0);
        pc->scale = op->scale;
        if (op->w) {
            const gpu_weight *b = op->w->dev;
            if ((rc = bind_weight(l, &d->b[2], &pc->w_off, b, b->data_off, b->data_end)) < 0)
                return rc;
            pc->wtype = (uint32_t)op->w->t->type;
            pc->interleaved = 1;
        }
    }
    d->wr2 = op->ids.buf;
    d->rd[d->n_rd++] = op->src.buf;
    d->k = GPU_K_ROUTE;
    return groups_grid(d, ((uint64_t)op->n + 63) / 64);
}

static int plan_matmul_id(gpu_plan *p, const backend_op *op, gpu_dispatch *d)
{
    const gpu_limits *l = p->l;
    const gpu_weight *w = op->w->dev;
    gpu_push *pc = &d->pc;
    uint64_t pairs = (uint64_t)op->n * op->n_used;
    int rc;

    /* push constants past matmul's: pos0 = the ids' offset, heads = n_used, interleaved =
     * src_bcast, n_rot = n_expert */
    if ((rc = bind_ref(l, &d->b[0], &pc->dst_off, op->dst, pairs * op->rows)) < 0 ||
        (rc = bind_ref(l, &d->b[1], &pc->src_off, op->src, (op->src_bcast ? (uint64_t)op->n : pairs) * op->cols)) <
            0 ||
        (rc = bind_ref(l, &d->b[3], &pc->pos0, op->ids, pairs)) < 0 || (rc = bind_pack(l, d, w)) < 0)
        return rc;
    pc->rows = (uint32_t)op->rows;
    pc->cols = (uint32_t)op->cols;
    pc->heads = (uint32_t)op->n_used;
    pc->interleaved = (uint32_t)(op->src_bcast != 0);
    pc->n_rot = (uint32_t)op->n_expert;
    d->rd[d->n_rd++] = op->src.buf;
    d->rd[d->n_rd++] = op->ids.buf;
    d->k = GPU_K_MI + w->vt;
    d->gx = (uint32_t)((op->rows + GPU_MV_ROWS - 1) / GPU_MV_ROWS);
    d->gy = (uint32_t)pairs;
    return 0;
}

/* MATMUL_HEADS: matmul_id's kernel (GEMM 2) with mode 1: the matrix of pair (t, h) is head h of
 * the pack (no ids), over a flat grid of (pair, row block) workgroups, as n * heads passes 65535
 * in a prefill of a 128-head model. */
static int plan_matmul_heads(gpu_plan *p, const backend_op *op, gpu_dispatch *d)
{
    const gpu_limits *l = p->l;
    const gpu_weight *w = op->w->dev;
    gpu_push *pc = &d->pc;
    uint64_t pairs = (uint64_t)op->n * op->heads;
    int rc;

    if ((rc = bind_ref(l, &d->b[0], &pc->dst_off, op->dst, pairs * op->rows)) < 0 ||
        (rc = bind_ref(l, &d->b[1], &pc->src_off, op->src, pairs * op->cols)) < 0 || (rc = bind_pack(l, d, w)) < 0)
        return rc;
    pc->rows = (uint32_t)op->rows;
    pc->cols = (uint32_t)op->cols;
    pc->heads = (uint32_t)op->heads;
    pc->n_rot = (uint32_t)op->heads;
    pc->mode = 1;
    d->rd[d->n_rd++] = op->src.buf;
    d->k = GPU_K_MI + w->vt;
    return groups_grid(d, pairs * (((uint64_t)op->rows + GPU_MV_ROWS - 1) / GPU_MV_ROWS));
}

/* STORE_ROWS: the element kernel's modes 13 (f32 dst: an invocation per element) and 14 (f16 dst:
 * an invocation per u32 word of the span the rows cover, as STORE's mode 4); rows = stride. */
static int plan_store_rows(gpu_plan *p, const backend_op *op, gpu_dispatch *d)
{
    const gpu_limits *l = p->l;
    gpu_push *pc = &d->pc;
    uint64_t span = op->n > 0 ? (uint64_t)(op->n - 1) * op->stride + op->cols : 0;
    int rc;

    if ((rc = bind_ref(l, &d->b[0], &pc->dst_off, op->dst, span)) < 0 ||
        (rc = bind_ref(l, &d->b[1], &pc->src_off, op->src, (uint64_t)op->n * op->cols)) < 0)
        return rc;
    pc->rows = (uint32_t)op->stride;
    pc->cols = (uint32_t)op->cols;
    pc->mode = op->dst.buf->dtype == BACKEND_F16 ? 14 : 13;
    d->rd[d->n_rd++] = op->src.buf;
    d->k = GPU_K_ELEM;
    return groups_grid(d, pc->mode == 14 ? ((pc->dst_off & 1u) + span + 1u) / 2u / 256u + 1u
                                         : ((uint64_t)op->n * op->cols + 255u) / 256u);
}

/* One planner per op kind: each binds the op's buffers, fills the push constants and picks the
 * kernel and grid. */
typedef int (*planner)(gpu_plan *p, const backend_op *op, gpu_dispatch *d);
static const planner planners[] = {
    [BACKEND_OP_EMBED] = plan_embed,
    [BACKEND_OP_RMS_NORM] = plan_norm,
    [BACKEND_OP_MATMUL] = plan_matmul,
    [BACKEND_OP_ADD_ROW] = plan_add_row,
    [BACKEND_OP_ROPE] = plan_rope,
    [BACKEND_OP_STORE] = plan_store,
    [BACKEND_OP_ATTENTION] = plan_attention,
    [BACKEND_OP_SWIGLU] = plan_pairwise,
    [BACKEND_OP_ADD] = plan_pairwise,
    [BACKEND_OP_GEGLU] = plan_pairwise,
    [BACKEND_OP_SCALE] = plan_scale,
    [BACKEND_OP_SOFTCAP] = plan_scale,
    [BACKEND_OP_GELU] = plan_scale,
    [BACKEND_OP_LAYER_NORM] = plan_norm,
    [BACKEND_OP_GATED_ADD] = plan_weighted_sum,
    [BACKEND_OP_MOE_SUM] = plan_weighted_sum,
    [BACKEND_OP_MOE_ROUTE] = plan_moe_route,
    [BACKEND_OP_MATMUL_ID] = plan_matmul_id,
    [BACKEND_OP_ADD_ROW_ID] = plan_add_row_id,
    [BACKEND_OP_SWIGLU_OAI] = plan_pairwise,
    [BACKEND_OP_MATMUL_HEADS] = plan_matmul_heads,
    [BACKEND_OP_STORE_ROWS] = plan_store_rows,
};

static int plan(gpu_plan *p, const backend_op *op, gpu_dispatch *d, int *n_out)
{
    if ((size_t)op->kind >= sizeof planners / sizeof planners[0] || !planners[op->kind])
        return ms_err(MS_ERROR, "gpu: op kind %d is unknown", (int)op->kind);
    /* A rope over no dimensions is the identity: nothing to dispatch. */
    *n_out = op->kind == BACKEND_OP_ROPE && op->n_rot / 2 == 0 ? 0 : 1;
    if (*n_out == 0)
        return 0;
    d->pc.n = (uint32_t)op->n;
    d->wr = op->dst.buf;
    return planners[op->kind](p, op, d);
}

int gpu_plan_op(gpu_plan *p, const backend_op *op, gpu_dispatch *d, int *n_out)
{
    int rc;

    memset(d, 0, sizeof *d);
    *n_out = 0;
    if ((rc = plan(p, op, d, n_out)) < 0) {
        *n_out = 0;
        return rc;
    }
    d->pc.wg_x = d->gx;
    return 0;
}

int gpu_region_add(void *list, size_t *n, size_t *cap, void *region)
{
    void **v;
    int rc;

    if ((rc = ms_grow(list, cap, *n + 1, sizeof *v)) < 0)
        return rc;
    memcpy(&v, list, sizeof v);   /* the host's T **: pointers to objects share one representation */
    v[(*n)++] = region;
    return 0;
}
