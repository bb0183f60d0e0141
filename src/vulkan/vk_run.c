/* vk_run.c: backend_impl for Vulkan: buffers, weights, and a forward pass recorded into one
 * command buffer (vulkan.h's invariants). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vulkan/vulkan_int.h"

static const char *describe(void *vctx)
{
    return ((vk_ctx *)vctx)->desc;
}

static int reserve(void *vctx, const backend_limits *l)
{
    vk_ctx *c = vctx;

    c->max_rows = l->max_rows;
    c->max_cols = l->max_cols;
    c->n_ctx = l->n_ctx;
    c->heads = l->heads;
    return 0;
}

/* ---------------------------------------------------------------- buffers */

static int buf_new(void *vctx, backend_buf *buf)
{
    vk_ctx *c = vctx;
    size_t elt = buf->dtype == BACKEND_F16 ? 2 : 4;
    vk_mem *m;
    int rc;

    if (buf->n > (SIZE_MAX - 8) / elt)
        return ms_err(MS_ENOMEM, "out of memory");
    if (!(m = calloc(1, sizeof *m)))
        return ms_err(MS_ENOMEM, "out of memory");
    if ((rc = vk_mem_new(c, m, (buf->n * elt + 3) & ~(size_t)3, 0, "a buffer")) < 0) {
        free(m);
        return rc;
    }
    if (m->host) {
        memset(m->host, 0, m->size);
    } else {
        VkCommandBuffer cmd;
        if ((rc = vk_oneshot_begin(c, &cmd)) < 0) {
            vk_mem_free(c, m);
            free(m);
            return rc;
        }
        c->f.vkCmdFillBuffer(cmd, m->buf, 0, VK_WHOLE_SIZE, 0);
        c->setup++;
        if ((rc = vk_oneshot_end(c, cmd)) < 0) {
            vk_mem_free(c, m);
            free(m);
            return rc;
        }
    }
    buf->dev = m;
    return 0;
}

static void buf_free(void *vctx, backend_buf *buf)
{
    vk_ctx *c = vctx;

    if (!buf->dev)
        return;
    /* a run in flight may still use it */
    for (int i = 0; i < VK_FRAMES; i++)
        vk_frame_wait(c, i);
    vk_mem_free(c, buf->dev);
    free(buf->dev);
    buf->dev = NULL;
}

/* ---------------------------------------------------------------- weights */

static int vt_of(const runtime_tensor *t)
{
    if (t->type == RUNTIME_TYPE_MLX) {
        if (!t->quant_type || !t->biases || t->group_size <= 0 || t->group_size % 32 ||
            (t->scale_dtype != ST_F32 && t->scale_dtype != ST_F16 && t->scale_dtype != ST_BF16))
            return -1;
        return strcmp(t->quant_type, "int4") == 0 ? VK_T_MLX4 : strcmp(t->quant_type, "int8") == 0 ? VK_T_MLX8 : -1;
    }
    switch (t->type) {
    case GGML_TYPE_F32:
        return VK_T_F32;
    case GGML_TYPE_F16:
        return VK_T_F16;
    case GGML_TYPE_BF16:
        return VK_T_BF16;
    case GGML_TYPE_Q8_0:
        return VK_T_Q8_0;
    case GGML_TYPE_Q4_0:
        return VK_T_Q4_0;
    case GGML_TYPE_Q4_1:
        return VK_T_Q4_1;
    case GGML_TYPE_Q5_0:
        return VK_T_Q5_0;
    case GGML_TYPE_Q5_1:
        return VK_T_Q5_1;
    case GGML_TYPE_Q4_K:
        return VK_T_Q4_K;
    case GGML_TYPE_Q5_K:
        return VK_T_Q5_K;
    case GGML_TYPE_Q6_K:
        return VK_T_Q6_K;
    default:
        return -1;
    }
}

static int weight_new(void *vctx, backend_weight *w)
{
    vk_ctx *c = vctx;
    const runtime_tensor *t = w->t;
    uint64_t cols = t->shape[t->n_dims - 1], rows = t->n_dims > 1 ? t->shape[0] : 1, row_bytes = 0, lo, hi;
    vk_weight *vw;
    int vt = vt_of(t), rc;

    if (t->n_dims == 1 && t->type != GGML_TYPE_F32 && t->type != GGML_TYPE_F16 && t->type != GGML_TYPE_BF16)
        return ms_err(MS_EINVALID, "tensor '%s': expected a vector of F32/F16/BF16 values", t->name);
    if (vt < 0) {
        const char *tn = t->type == RUNTIME_TYPE_MLX ? (t->quant_type ? t->quant_type : "mlx ?")
                         : ggml_type_name(t->type)   ? ggml_type_name(t->type)
                                                     : "?";
        return ms_err(MS_EUNSUPPORTED,
                      "tensor '%s': type %s is not supported by the vulkan backend; supported: "
                      "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, MLX int4 and int8 (affine)",
                      t->name, tn);
    }
    if (t->type == RUNTIME_TYPE_MLX)
        row_bytes = cols * (uint64_t)t->bits / 8;
    else if (ggml_row_nbytes(&row_bytes, t->type, cols) < 0)
        return ms_err(MS_EINVALID, "tensor '%s': %llu columns do not fill whole blocks", t->name,
                      (unsigned long long)cols);
    if (row_bytes * rows > c->max_range || row_bytes * rows > UINT32_MAX - 64)
        return ms_err(MS_EINVALID, "tensor '%s': %llu bytes, past the %llu bytes one binding of %s can address",
                      t->name, (unsigned long long)(row_bytes * rows), (unsigned long long)c->max_range,
                      c->props.deviceName);
    if (!(vw = calloc(1, sizeof *vw)))
        return ms_err(MS_ENOMEM, "out of memory");
    vw->vt = vt;
    vw->row_bytes = (uint32_t)row_bytes;
    lo = (uintptr_t)t->data;
    hi = lo + row_bytes * rows;
    if (t->type == RUNTIME_TYPE_MLX) {
        uint64_t ssz = st_dtype_size((st_dtype)t->scale_dtype), sbytes = rows * (cols / (uint64_t)t->group_size) * ssz;
        uint64_t s = (uintptr_t)t->scales, b = (uintptr_t)t->biases;
        vw->s_row_bytes = (uint32_t)((cols / (uint64_t)t->group_size) * ssz);
        vw->gs = (uint32_t)t->group_size;
        vw->stype = t->scale_dtype == ST_F16 ? 1 : t->scale_dtype == ST_BF16 ? 2 : 0;
        lo = lo < s ? lo : s;
        lo = lo < b ? lo : b;
        hi = hi > s + sbytes ? hi : s + sbytes;
        hi = hi > b + sbytes ? hi : b + sbytes;
        if ((rc = vk_weight_region(c, &vw->reg, t, lo, hi)) < 0)
            goto fail;
        vw->scales_off = s - (uintptr_t)vw->reg->base;
        vw->scales_end = vw->scales_off + sbytes;
        vw->biases_off = b - (uintptr_t)vw->reg->base;
        vw->biases_end = vw->biases_off + sbytes;
    } else if ((rc = vk_weight_region(c, &vw->reg, t, lo, hi)) < 0) {
        goto fail;
    }
    vw->data_off = (uintptr_t)t->data - (uintptr_t)vw->reg->base;
    vw->data_end = vw->data_off + row_bytes * rows;
    w->dev = vw;
    return 0;
fail:
    free(vw);
    return rc;
}

static void weight_free(void *vctx, backend_weight *w)
{
    (void)vctx;
    free(w->dev); /* its region belongs to the context */
}

/* ---------------------------------------------------------------- recording */

/* One binding: the buffer from an aligned offset, and what remains in elements or bytes. */
typedef struct binding {
    VkDescriptorBufferInfo info;
    uint32_t rem;
} binding;

/* Bind elements [off, off + need) of `m` (elt bytes each); MS_ERROR when the range falls outside
 * the buffer or past what one binding can address. */
static int bind_mem(const vk_ctx *c, binding *b, const vk_mem *m, uint64_t off, uint64_t need, uint64_t elt)
{
    uint64_t byte = off * elt, base = byte / c->align * c->align, end = (byte + need * elt + 3) & ~(uint64_t)3;

    if (end > m->size)
        return ms_err(MS_ERROR, "vulkan: an op reaches byte %llu of a buffer of %llu", (unsigned long long)end,
                      (unsigned long long)m->size);
    if (end - base > c->max_range)
        return ms_err(MS_ERROR, "vulkan: an op spans %llu bytes, past the %llu one binding can address",
                      (unsigned long long)(end - base), (unsigned long long)c->max_range);
    b->info.buffer = m->buf;
    b->info.offset = base;
    b->info.range = end - base;
    b->rem = (uint32_t)((byte - base) / elt);
    return 0;
}

static int bind_ref(const vk_ctx *c, binding *b, backend_ref r, uint64_t need)
{
    if (!r.buf)
        return ms_err(MS_ERROR, "vulkan: an op lacks a buffer");
    return bind_mem(c, b, r.buf->dev, r.off, need, r.buf->dtype == BACKEND_F16 ? 2 : 4);
}

/* Bytes [lo, hi) of a weight's region, remainder in bytes. */
static int bind_weight(const vk_ctx *c, binding *b, const vk_weight *w, uint64_t lo, uint64_t hi)
{
    return bind_mem(c, b, &w->reg->m, lo, hi - lo, 1);
}

/* Tracks the buffers written and read since the last barrier, so that independent dispatches
 * (the q, k, v matmuls of a layer) run without one between them. */
#define TRACK 16
typedef struct hazards {
    VkBuffer wr[TRACK], rd[TRACK];
    int n_wr, n_rd;
} hazards;

static int in(const VkBuffer *set, int n, VkBuffer b)
{
    for (int i = 0; i < n; i++)
        if (set[i] == b)
            return 1;
    return 0;
}

static void barrier(vk_ctx *c, VkCommandBuffer cmd, hazards *h)
{
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                          .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT};

    c->f.vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                              VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
    h->n_wr = h->n_rd = 0;
}

/* Before an op that writes `w` and reads rd[0..n): a barrier if it depends on the ops since the
 * last one; then note its accesses. */
static void order(vk_ctx *c, VkCommandBuffer cmd, hazards *h, VkBuffer w, const VkBuffer *rd, int n)
{
    int need = in(h->wr, h->n_wr, w) || in(h->rd, h->n_rd, w) || h->n_wr >= TRACK || h->n_rd + n > TRACK;

    for (int i = 0; i < n && !need; i++)
        need = in(h->wr, h->n_wr, rd[i]);
    if (need)
        barrier(c, cmd, h);
    h->wr[h->n_wr++] = w;
    for (int i = 0; i < n; i++)
        h->rd[h->n_rd++] = rd[i];
}

/* A grid of `groups` workgroups, rows of at most 65535. */
static void grid(uint32_t groups, uint32_t *x, uint32_t *y)
{
    *x = groups < 65535 ? (groups ? groups : 1) : 65535;
    *y = (groups + *x - 1) / *x;
    if (!*y)
        *y = 1;
}

int vk_frame_wait(vk_ctx *c, int i)
{
    vk_frame *fr = &c->frames[i];
    VkResult r;

    if (!fr->pending)
        return 0;
    r = c->f.vkWaitForFences(c->dev, 1, &fr->fence, VK_TRUE, UINT64_MAX);
    c->waits++;
    fr->pending = 0;
    c->f.vkResetFences(c->dev, 1, &fr->fence);
    return r == VK_SUCCESS ? 0 : ms_err(MS_EIO, "vulkan: the device failed (%d)", (int)r);
}

static size_t align_up(size_t v, size_t a)
{
    return (v + a - 1) / a * a;
}

/* Bytes of host-written parameters the ops need: token ids and rope tables. */
static size_t params_size(const vk_ctx *c, const backend_op *ops, size_t n_ops)
{
    size_t s = 0;

    for (size_t i = 0; i < n_ops; i++) {
        if (ops[i].kind == BACKEND_OP_EMBED)
            s += align_up((size_t)ops[i].n * 4, c->align);
        else if (ops[i].kind == BACKEND_OP_ROPE)
            s += align_up((size_t)ops[i].n * (size_t)(ops[i].n_rot / 2) * 8, c->align);
    }
    return s;
}

static int frame_prepare(vk_ctx *c, vk_frame *fr, size_t n_ops, size_t params)
{
    int rc;

    if (params > fr->params.size) {
        vk_mem_free(c, &fr->params);
        if ((rc = vk_mem_new(c, &fr->params, align_up(params, 1u << 16), 1, "run parameters")) < 0)
            return rc;
    }
    if (n_ops > fr->pool_sets || !fr->pool) {
        uint32_t sets = (uint32_t)align_up(n_ops, 256);
        VkDescriptorPoolSize ps = {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, sets * 5};
        VkDescriptorPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                                         .maxSets = sets,
                                         .poolSizeCount = 1,
                                         .pPoolSizes = &ps};
        if (fr->pool)
            c->f.vkDestroyDescriptorPool(c->dev, fr->pool, NULL);
        fr->pool = VK_NULL_HANDLE;
        if (c->f.vkCreateDescriptorPool(c->dev, &pi, NULL, &fr->pool) != VK_SUCCESS)
            return ms_err(MS_ENOMEM, "vulkan: cannot create a descriptor pool of %u sets", sets);
        fr->pool_sets = sets;
    } else {
        c->f.vkResetDescriptorPool(c->dev, fr->pool, 0);
    }
    return 0;
}

/* The checks the CPU backend makes (its reserve limits), and those a device needs: an op past
 * them is the caller's bug, refused before anything is recorded. */
static int check_op(const vk_ctx *c, const backend_op *op)
{
    if (op->kind == BACKEND_OP_MATMUL && (op->n > c->max_rows || op->cols > c->max_cols))
        return ms_err(MS_ERROR, "matmul of %d rows x %d columns: past the reserved %d x %d", op->n, op->cols,
                      c->max_rows, c->max_cols);
    if (op->kind == BACKEND_OP_ATTENTION &&
        (op->pos0 + op->n > c->n_ctx || op->head_dim > 256 || op->kv_heads <= 0 || op->heads % op->kv_heads))
        return ms_err(MS_ERROR, "attention to position %d (context %d), head_dim %d (at most 256), %d/%d heads",
                      op->pos0 + op->n, c->n_ctx, op->head_dim, op->heads, op->kv_heads);
    if (op->kind == BACKEND_OP_ROPE && (op->n_rot > 1024 || op->n_rot > op->head_dim))
        return ms_err(MS_ERROR, "rope of %d dims in heads of %d", op->n_rot, op->head_dim);
    if (op->kind == BACKEND_OP_EMBED)
        for (int t = 0; t < op->n; t++)
            if (op->tokens[t] < 0 || (uint64_t)op->tokens[t] >= op->w->t->shape[0])
                return ms_err(MS_ERROR, "embedding of token %d: outside the %llu rows", op->tokens[t],
                              (unsigned long long)op->w->t->shape[0]);
    return 0;
}

typedef struct rec {
    vk_ctx *c;
    vk_frame *fr;
    hazards h;
    size_t p_off; /* next free byte of the params */
    const backend_op *rope_prev;
    size_t rope_off; /* its table */
} rec;

/* Dispatch kernel k with bindings b[5] (dst, src, W, A, B: common.glsl's 1..5; no buffer:
 * the dummy). */
static int dispatch(rec *r, vk_kernel k, binding *b, vk_push *pc, uint32_t gx, uint32_t gy, VkBuffer wr,
                    const VkBuffer *rd, int n_rd)
{
    vk_ctx *c = r->c;
    VkCommandBuffer cmd = r->fr->cmd;
    VkDescriptorSetAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                      .descriptorPool = r->fr->pool,
                                      .descriptorSetCount = 1,
                                      .pSetLayouts = &c->dsl};
    VkWriteDescriptorSet ws[5];
    VkDescriptorSet set;
    VkPipeline pipe;
    int rc;

    if ((rc = vk_pipeline_get(c, &pipe, k)) < 0)
        return rc;
    if (c->f.vkAllocateDescriptorSets(c->dev, &ai, &set) != VK_SUCCESS)
        return ms_err(MS_EIO, "vulkan: out of descriptor sets");
    for (uint32_t i = 0; i < 5; i++) {
        if (!b[i].info.buffer)
            b[i].info = (VkDescriptorBufferInfo){c->dummy.buf, 0, VK_WHOLE_SIZE};
        ws[i] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                                       .dstSet = set,
                                       .dstBinding = i + 1,
                                       .descriptorCount = 1,
                                       .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                       .pBufferInfo = &b[i].info};
    }
    c->f.vkUpdateDescriptorSets(c->dev, 5, ws, 0, NULL);
    order(c, cmd, &r->h, wr, rd, n_rd);
    pc->wg_x = gx;
    c->f.vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipe);
    c->f.vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, c->layout, 0, 1, &set, 0, NULL);
    c->f.vkCmdPushConstants(cmd, c->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof *pc, pc);
    c->f.vkCmdDispatch(cmd, gx, gy, 1);
    return 0;
}

static int dispatch_groups(rec *r, vk_kernel k, binding *b, vk_push *pc, uint64_t groups, VkBuffer wr,
                           const VkBuffer *rd, int n_rd)
{
    uint32_t gx, gy;

    if (groups > (uint64_t)65535 * 65535)
        return ms_err(MS_ERROR, "vulkan: an op of %llu workgroups", (unsigned long long)groups);
    grid((uint32_t)groups, &gx, &gy);
    return dispatch(r, k, b, pc, gx, gy, wr, rd, n_rd);
}

/* Bindings 2..4 of a matrix: its bytes, and for MLX its scales and biases. */
static int bind_matrix(const vk_ctx *c, binding *b, vk_push *pc, const vk_weight *w)
{
    int rc;

    if ((rc = bind_weight(c, &b[2], w, w->data_off, w->data_end)) < 0)
        return rc;
    pc->w_off = b[2].rem;
    pc->row_bytes = w->row_bytes;
    if (w->vt == VK_T_MLX4 || w->vt == VK_T_MLX8) {
        if ((rc = bind_weight(c, &b[3], w, w->scales_off, w->scales_end)) < 0 ||
            (rc = bind_weight(c, &b[4], w, w->biases_off, w->biases_end)) < 0)
            return rc;
        pc->a_off = b[3].rem;
        pc->b_off = b[4].rem;
        pc->s_row_bytes = w->s_row_bytes;
        pc->gs = w->gs;
        pc->stype = w->stype;
    }
    return 0;
}

static VkBuffer vb(backend_ref r)
{
    return ((vk_mem *)r.buf->dev)->buf;
}

static int record_op(rec *r, const backend_op *op)
{
    vk_ctx *c = r->c;
    binding b[5];
    vk_push pc;
    const vk_weight *w = op->w ? op->w->dev : NULL;
    VkBuffer rd[3];
    uint8_t *params = r->fr->params.host;
    int rc;

    memset(b, 0, sizeof b);
    memset(&pc, 0, sizeof pc);
    pc.n = (uint32_t)op->n;
    switch (op->kind) {
    case BACKEND_OP_EMBED: {
        uint32_t nb = (uint32_t)((op->cols + 31) / 32);
        memcpy(params + r->p_off, op->tokens, (size_t)op->n * 4);
        b[1].info = (VkDescriptorBufferInfo){r->fr->params.buf, r->p_off, align_up((size_t)op->n * 4, 4)};
        r->p_off += align_up((size_t)op->n * 4, c->align);
        if ((rc = bind_ref(c, &b[0], op->dst, (uint64_t)op->n * op->cols)) < 0 || (rc = bind_matrix(c, b, &pc, w)) < 0)
            return rc;
        pc.cols = (uint32_t)op->cols;
        pc.dst_off = b[0].rem;
        return dispatch_groups(r, VK_K_EMBED + w->vt, b, &pc, ((uint64_t)op->n * nb + 63) / 64, vb(op->dst), rd, 0);
    }
    case BACKEND_OP_RMS_NORM:
        if ((rc = bind_ref(c, &b[0], op->dst, (uint64_t)op->n * op->cols)) < 0 ||
            (rc = bind_ref(c, &b[1], op->src, (uint64_t)op->n * op->cols)) < 0 ||
            (rc = bind_weight(c, &b[2], w, w->data_off, w->data_end)) < 0)
            return rc;
        pc.cols = (uint32_t)op->cols;
        pc.dst_off = b[0].rem;
        pc.src_off = b[1].rem;
        pc.w_off = b[2].rem;
        pc.wtype = (uint32_t)op->w->t->type;
        pc.eps = op->eps;
        rd[0] = vb(op->src);
        return dispatch_groups(r, VK_K_NORM, b, &pc, (uint64_t)op->n, vb(op->dst), rd, 1);
    case BACKEND_OP_MATMUL:
        if ((rc = bind_ref(c, &b[0], op->dst, (uint64_t)op->n * op->rows)) < 0 ||
            (rc = bind_ref(c, &b[1], op->src, (uint64_t)op->n * op->cols)) < 0 || (rc = bind_matrix(c, b, &pc, w)) < 0)
            return rc;
        pc.rows = (uint32_t)op->rows;
        pc.cols = (uint32_t)op->cols;
        pc.dst_off = b[0].rem;
        pc.src_off = b[1].rem;
        rd[0] = vb(op->src);
        if (op->n <= 2) /* decode: the weight is read once per token either way; no tile to fill */
            return dispatch_groups(r, VK_K_MV + w->vt, b, &pc, ((uint64_t)op->rows + 7) / 8, vb(op->dst), rd, 1);
        return dispatch(r, VK_K_MM + w->vt, b, &pc, (uint32_t)((op->rows + 63) / 64), (uint32_t)((op->n + 31) / 32),
                        vb(op->dst), rd, 1);
    case BACKEND_OP_ADD_ROW:
        if ((rc = bind_ref(c, &b[0], op->dst, (uint64_t)op->n * op->cols)) < 0 ||
            (rc = bind_weight(c, &b[2], w, w->data_off, w->data_end)) < 0)
            return rc;
        pc.n = (uint32_t)(op->n * op->cols);
        pc.cols = (uint32_t)op->cols;
        pc.dst_off = b[0].rem;
        pc.w_off = b[2].rem;
        pc.wtype = (uint32_t)op->w->t->type;
        pc.mode = 2;
        return dispatch_groups(r, VK_K_ELEM, b, &pc, (pc.n + 255u) / 256u, vb(op->dst), rd, 0);
    case BACKEND_OP_ROPE: {
        int half = op->n_rot / 2;
        const backend_op *pv = r->rope_prev;
        if (!pv || pv->n != op->n || pv->pos0 != op->pos0 || pv->n_rot != op->n_rot || pv->freqs != op->freqs) {
            /* cos and sin in double, as the CPU takes them; one table serves every head and layer */
            float *tab = (float *)(params + r->p_off);
            for (int t = 0; t < op->n; t++) {
                for (int i = 0; i < half; i++) {
                    double a = (double)(op->pos0 + t) * op->freqs[i];
                    tab[2 * ((size_t)t * half + i)] = (float)cos(a);
                    tab[2 * ((size_t)t * half + i) + 1] = (float)sin(a);
                }
            }
            r->rope_off = r->p_off;
            r->p_off += align_up((size_t)op->n * (size_t)half * 8, c->align);
            r->rope_prev = op;
        }
        if ((rc = bind_ref(c, &b[0], op->dst, (uint64_t)op->n * op->heads * op->head_dim)) < 0)
            return rc;
        b[3].info = (VkDescriptorBufferInfo){r->fr->params.buf, r->rope_off, (size_t)op->n * (size_t)half * 8 + 4};
        pc.dst_off = b[0].rem;
        pc.heads = (uint32_t)op->heads;
        pc.head_dim = (uint32_t)op->head_dim;
        pc.n_rot = (uint32_t)op->n_rot;
        pc.interleaved = (uint32_t)op->interleaved;
        if (half == 0)
            return 0;
        return dispatch_groups(r, VK_K_ROPE, b, &pc, ((uint64_t)op->n * op->heads * half + 63) / 64, vb(op->dst), rd,
                               0);
    }
    case BACKEND_OP_STORE:
        if ((rc = bind_ref(c, &b[0], op->dst, (uint64_t)op->n)) < 0 ||
            (rc = bind_ref(c, &b[1], op->src, (uint64_t)op->n)) < 0)
            return rc;
        pc.dst_off = b[0].rem;
        pc.src_off = b[1].rem;
        pc.mode = op->dst.buf->dtype == BACKEND_F16 ? 4 : 3;
        rd[0] = vb(op->src);
        return dispatch_groups(r, VK_K_ELEM, b, &pc,
                               pc.mode == 4 ? ((pc.dst_off & 1u) + pc.n + 1u) / 2u / 256u + 1u : (pc.n + 255u) / 256u,
                               vb(op->dst), rd, 1);
    case BACKEND_OP_ATTENTION: {
        uint64_t kv_need = (uint64_t)(op->pos0 + op->n) * op->kv_heads * op->head_dim;
        if ((rc = bind_ref(c, &b[0], op->dst, (uint64_t)op->n * op->heads * op->head_dim)) < 0 ||
            (rc = bind_ref(c, &b[1], op->src, (uint64_t)op->n * op->heads * op->head_dim)) < 0 ||
            (rc = bind_ref(c, &b[3], op->k, kv_need)) < 0 || (rc = bind_ref(c, &b[4], op->v, kv_need)) < 0)
            return rc;
        if (op->k.buf->dtype != op->v.buf->dtype)
            return ms_err(MS_ERROR, "vulkan: attention over k and v caches of different types");
        pc.dst_off = b[0].rem;
        pc.src_off = b[1].rem;
        pc.a_off = b[3].rem;
        pc.b_off = b[4].rem;
        pc.pos0 = (uint32_t)op->pos0;
        pc.heads = (uint32_t)op->heads;
        pc.kv_heads = (uint32_t)op->kv_heads;
        pc.head_dim = (uint32_t)op->head_dim;
        pc.scale = 1.0f / sqrtf((float)op->head_dim);
        rd[0] = vb(op->src);
        rd[1] = vb(op->k);
        rd[2] = vb(op->v);
        return dispatch_groups(r, op->k.buf->dtype == BACKEND_F16 ? VK_K_ATT_F16 : VK_K_ATT_F32, b, &pc,
                               (uint64_t)op->n * op->heads, vb(op->dst), rd, 3);
    }
    case BACKEND_OP_SWIGLU:
    case BACKEND_OP_ADD:
        if ((rc = bind_ref(c, &b[0], op->dst, (uint64_t)op->n)) < 0 ||
            (rc = bind_ref(c, &b[1], op->src, (uint64_t)op->n)) < 0)
            return rc;
        pc.dst_off = b[0].rem;
        pc.src_off = b[1].rem;
        pc.mode = op->kind == BACKEND_OP_SWIGLU ? 1 : 0;
        rd[0] = vb(op->src);
        return dispatch_groups(r, VK_K_ELEM, b, &pc, (pc.n + 255u) / 256u, vb(op->dst), rd, 1);
    default: /* the MoE, window, GeGLU, scale and soft-cap kinds: backend_run refuses them first */
        break;
    }
    return ms_err(MS_ERROR, "vulkan: op kind %d is unknown", (int)op->kind);
}

static int run(void *vctx, const backend_op *ops, size_t n_ops)
{
    vk_ctx *c = vctx;
    vk_frame *fr = &c->frames[c->cur];
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &fr->cmd};
    rec r = {.c = c, .fr = fr};
    int rc;

    for (size_t i = 0; i < n_ops; i++)
        if ((rc = check_op(c, &ops[i])) < 0)
            return rc;
    if (n_ops == 0)
        return 0;
    /* the frame's last run must be done before its command buffer and params are reused */
    if ((rc = vk_frame_wait(c, c->cur)) < 0 || (rc = frame_prepare(c, fr, n_ops, params_size(c, ops, n_ops))) < 0)
        return rc;
    if (c->f.vkBeginCommandBuffer(fr->cmd, &bi) != VK_SUCCESS)
        return ms_err(MS_EIO, "vulkan: cannot begin a command buffer");
    barrier(c, fr->cmd, &r.h); /* after the previous run (and set-up work) */
    for (size_t i = 0; i < n_ops; i++) {
        if ((rc = record_op(&r, &ops[i])) < 0) {
            c->f.vkEndCommandBuffer(fr->cmd);
            return rc;
        }
    }
    if (c->f.vkEndCommandBuffer(fr->cmd) != VK_SUCCESS || c->f.vkQueueSubmit(c->queue, 1, &si, fr->fence) != VK_SUCCESS)
        return ms_err(MS_EIO, "vulkan: the submission failed");
    fr->pending = 1;
    c->last = c->cur;
    c->cur = (c->cur + 1) % VK_FRAMES;
    c->runs++;
    c->submits++;
    return 0;
}

static int read_buf(void *vctx, float *dst, backend_ref src, size_t n)
{
    vk_ctx *c = vctx;
    vk_mem *m = src.buf->dev, stage = {0};
    VkCommandBuffer cmd;
    int rc;

    for (int i = 0; i < VK_FRAMES; i++)
        if ((rc = vk_frame_wait(c, i)) < 0)
            return rc;
    if (m->host) { /* host-visible device memory: the wait above was the only one */
        memcpy(dst, (const float *)m->host + src.off, n * sizeof(float));
        return 0;
    }
    if ((rc = vk_mem_new(c, &stage, n * sizeof(float), 1, "a read-back")) < 0 || (rc = vk_oneshot_begin(c, &cmd)) < 0)
        goto done;
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                          .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT};
    VkBufferCopy cp = {src.off * sizeof(float), 0, n * sizeof(float)};
    c->f.vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &mb, 0,
                              NULL, 0, NULL);
    c->f.vkCmdCopyBuffer(cmd, m->buf, stage.buf, 1, &cp);
    c->submits++;
    c->waits++;
    if ((rc = vk_oneshot_end(c, cmd)) == 0)
        memcpy(dst, stage.host, n * sizeof(float));
done:
    vk_mem_free(c, &stage);
    return rc;
}

const backend_impl vk_impl = {
    .name = "vulkan",
    .describe = describe,
    .reserve = reserve,
    .buf_new = buf_new,
    .buf_free = buf_free,
    .weight_new = weight_new,
    .weight_free = weight_free,
    .run = run,
    .read = read_buf,
    .close = vk_ctx_close,
};
