/* vk_run.c: backend_impl for Vulkan: buffers, weights, and a forward pass recorded into one
 * command buffer (vulkan.h's invariants). */
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
    gpu_limits_reserve(&((vk_ctx *)vctx)->lim, l);
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
    /* a run recorded or in flight may still use it */
    vk_flush(c);
    for (int i = 0; i < VK_FRAMES; i++)
        vk_frame_wait(c, i);
    vk_mem_free(c, buf->dev);
    free(buf->dev);
    buf->dev = NULL;
}

/* ---------------------------------------------------------------- weights */

static int weight_new(void *vctx, backend_weight *w)
{
    vk_ctx *c = vctx;
    const backend_tensor *t = w->t;
    gpu_weight *gw;
    vk_region *reg;
    uint64_t lo, hi;
    int rc;

    if (!(gw = calloc(1, sizeof *gw)))
        return ms_err(MS_ENOMEM, "out of memory");
    if ((rc = gpu_weight_layout(gw, &lo, &hi, t, c->lim.max_range, "vulkan")) < 0 ||
        (rc = vk_weight_region(c, &reg, t, lo, hi)) < 0) {
        free(gw);
        return rc;
    }
    gw->region = reg;
    gw->region_size = reg->m.size;
    gpu_weight_place(gw, t, reg->base);
    w->dev = gw;
    return 0;
}

static void weight_free(void *vctx, backend_weight *w)
{
    (void)vctx;
    free(w->dev); /* its region belongs to the context */
}

/* ---------------------------------------------------------------- recording
 * What each op dispatches is src/gpu's plan (gpu.h); here it becomes a descriptor set, a barrier
 * where needed, push constants and vkCmdDispatch. */

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

/* Before an op that writes `w` (and `w2` unless VK_NULL_HANDLE) and reads rd[0..n): a barrier if
 * it depends on the ops since the last one; then note its accesses. */
static void order(vk_ctx *c, VkCommandBuffer cmd, hazards *h, VkBuffer w, VkBuffer w2, const VkBuffer *rd, int n)
{
    int need = in(h->wr, h->n_wr, w) || in(h->rd, h->n_rd, w) || h->n_wr + 2 > TRACK || h->n_rd + n > TRACK;

    if (w2 != VK_NULL_HANDLE)
        need = need || in(h->wr, h->n_wr, w2) || in(h->rd, h->n_rd, w2);
    for (int i = 0; i < n && !need; i++)
        need = in(h->wr, h->n_wr, rd[i]);
    if (need)
        barrier(c, cmd, h);
    h->wr[h->n_wr++] = w;
    if (w2 != VK_NULL_HANDLE)
        h->wr[h->n_wr++] = w2;
    for (int i = 0; i < n; i++)
        h->rd[h->n_rd++] = rd[i];
}

/* A finished run's timestamps, added to the profile: each dispatch is charged the time from the
 * timestamp before it to the one after (overlapping dispatches share theirs). */
static void profile_add(vk_ctx *c, vk_frame *fr)
{
    uint32_t n = fr->n_q;
    uint64_t *ts = n >= 2 ? malloc(n * sizeof *ts) : NULL;

    fr->n_q = 0;
    if (ts && c->f.vkGetQueryPoolResults(c->dev, fr->qp, 0, n, n * sizeof *ts, ts, sizeof *ts,
                                         VK_QUERY_RESULT_64_BIT) == VK_SUCCESS) {
        for (uint32_t i = 1; i < n; i++) {
            double ns = (double)((ts[i] - ts[i - 1]) & c->ts_mask) * c->ts_ns;
            c->prof_ns[fr->qk[i]] += ns;
            c->prof_n[fr->qk[i]]++;
            c->prof_run_ns += ns;
        }
        c->prof_runs++;
    }
    free(ts);
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
    if (r != VK_SUCCESS)
        return ms_err(MS_EIO, "vulkan: the device failed (%d)", (int)r);
    if (c->prof)
        profile_add(c, fr);
    return 0;
}

int vk_flush(vk_ctx *c)
{
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1};
    vk_frame *fr;

    if (c->last < 0 || !(fr = &c->frames[c->last])->recording)
        return 0;
    fr->recording = 0;
    si.pCommandBuffers = &fr->cmd;
    if (c->f.vkEndCommandBuffer(fr->cmd) != VK_SUCCESS || c->f.vkQueueSubmit(c->queue, 1, &si, fr->fence) != VK_SUCCESS)
        return ms_err(MS_EIO, "vulkan: the submission failed");
    fr->pending = 1;
    c->submits++;
    return 0;
}

static size_t align_up(size_t v, size_t a)
{
    return (v + a - 1) / a * a;
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
    if (c->prof && n_ops + 1 > fr->q_cap) {
        uint32_t cap = (uint32_t)align_up(n_ops + 1, 256);
        VkQueryPoolCreateInfo qi = {
            .sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO, .queryType = VK_QUERY_TYPE_TIMESTAMP, .queryCount = cap};
        gpu_kernel *qk = realloc(fr->qk, cap * sizeof *qk);
        if (!qk)
            return ms_err(MS_ENOMEM, "out of memory");
        fr->qk = qk;
        if (fr->qp)
            c->f.vkDestroyQueryPool(c->dev, fr->qp, NULL);
        fr->qp = VK_NULL_HANDLE;
        fr->q_cap = 0;
        if (c->f.vkCreateQueryPool(c->dev, &qi, NULL, &fr->qp) != VK_SUCCESS)
            return ms_err(MS_ENOMEM, "vulkan: cannot create a query pool of %u timestamps", cap);
        fr->q_cap = cap;
    }
    return 0;
}

static void timestamp(vk_ctx *c, vk_frame *fr, gpu_kernel k)
{
    if (!c->prof || fr->n_q >= fr->q_cap)
        return;
    c->f.vkCmdWriteTimestamp(fr->cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, fr->qp, fr->n_q);
    fr->qk[fr->n_q++] = k;
}

typedef struct rec {
    vk_ctx *c;
    vk_frame *fr;
    hazards h;
    gpu_plan p;
} rec;

static VkBuffer vb(const backend_buf *b)
{
    return ((const vk_mem *)b->dev)->buf;
}

/* Record one planned dispatch: bindings 1..5 (no buffer: the dummy). */
static int dispatch(rec *r, gpu_dispatch *d)
{
    vk_ctx *c = r->c;
    VkCommandBuffer cmd = r->fr->cmd;
    VkDescriptorSetAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                      .descriptorPool = r->fr->pool,
                                      .descriptorSetCount = 1,
                                      .pSetLayouts = &c->dsl};
    VkDescriptorBufferInfo info[5];
    VkWriteDescriptorSet ws[5];
    VkBuffer rd[3];
    VkDescriptorSet set;
    VkPipeline pipe;
    int rc;

    if ((rc = vk_pipeline_get(c, &pipe, d->k)) < 0)
        return rc;
    if (c->f.vkAllocateDescriptorSets(c->dev, &ai, &set) != VK_SUCCESS)
        return ms_err(MS_EIO, "vulkan: out of descriptor sets");
    for (uint32_t i = 0; i < 5; i++) {
        const gpu_bind *b = &d->b[i];
        switch (b->kind) {
        case GPU_B_BUF:
            info[i] = (VkDescriptorBufferInfo){vb(b->buf), b->offset, b->range};
            break;
        case GPU_B_WEIGHT:
            info[i] = (VkDescriptorBufferInfo){((vk_region *)b->w->region)->m.buf, b->offset, b->range};
            break;
        case GPU_B_PARAMS:
            info[i] = (VkDescriptorBufferInfo){r->fr->params.buf, b->offset, b->range};
            break;
        default:
            info[i] = (VkDescriptorBufferInfo){c->dummy.buf, 0, VK_WHOLE_SIZE};
        }
        ws[i] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                                       .dstSet = set,
                                       .dstBinding = i + 1,
                                       .descriptorCount = 1,
                                       .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                       .pBufferInfo = &info[i]};
    }
    c->f.vkUpdateDescriptorSets(c->dev, 5, ws, 0, NULL);
    for (int i = 0; i < d->n_rd; i++)
        rd[i] = vb(d->rd[i]);
    order(c, cmd, &r->h, vb(d->wr), d->wr2 ? vb(d->wr2) : VK_NULL_HANDLE, rd, d->n_rd);
    c->f.vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipe);
    c->f.vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, c->layout, 0, 1, &set, 0, NULL);
    c->f.vkCmdPushConstants(cmd, c->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof d->pc, &d->pc);
    c->f.vkCmdDispatch(cmd, d->gx, d->gy, 1);
    timestamp(c, r->fr, d->k);
    return 0;
}

static int record_op(rec *r, const backend_op *op)
{
    gpu_dispatch d;
    int n, rc;

    if ((rc = gpu_plan_op(&r->p, op, &d, &n)) < 0)
        return rc;
    return n ? dispatch(r, &d) : 0;
}

static int run(void *vctx, const backend_op *ops, size_t n_ops)
{
    vk_ctx *c = vctx;
    vk_frame *fr = &c->frames[c->cur];
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    const gpu_limits *l = &c->lim;
    rec r = {.c = c, .fr = fr, .p = {.l = l}};
    int rc;

    for (size_t i = 0; i < n_ops; i++)
        if ((rc = gpu_op_check(l, &ops[i])) < 0)
            return rc;
    if (n_ops == 0)
        return 0;
    /* the run recorded last goes to the device now; this frame's last run must be done before
     * its command buffer and params are reused */
    if ((rc = vk_flush(c)) < 0 || (rc = vk_frame_wait(c, c->cur)) < 0 ||
        (rc = frame_prepare(c, fr, n_ops, gpu_params_size(l, ops, n_ops))) < 0)
        return rc;
    r.p.params = fr->params.host;
    if (c->f.vkBeginCommandBuffer(fr->cmd, &bi) != VK_SUCCESS)
        return ms_err(MS_EIO, "vulkan: cannot begin a command buffer");
    barrier(c, fr->cmd, &r.h); /* after the previous run (and set-up work) */
    if (c->prof) {
        c->f.vkCmdResetQueryPool(fr->cmd, fr->qp, 0, fr->q_cap);
        fr->n_q = 0;
        timestamp(c, fr, GPU_K_COUNT);
    }
    for (size_t i = 0; i < n_ops; i++) {
        if ((rc = record_op(&r, &ops[i])) < 0) {
            c->f.vkEndCommandBuffer(fr->cmd);
            fr->n_q = 0;
            return rc;
        }
    }
    fr->recording = 1; /* submitted by the next run or read (vk_flush) */
    c->last = c->cur;
    c->cur = (c->cur + 1) % VK_FRAMES;
    c->runs++;
    return 0;
}

/* Copy [off, off + bytes) of m into the read-back buffer, after everything before it in cmd. */
static void record_readback(vk_ctx *c, VkCommandBuffer cmd, const vk_mem *m, size_t off, size_t bytes)
{
    VkMemoryBarrier before = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                              .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                              .dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT},
                    after = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                             .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                             .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
    VkBufferCopy cp = {off, 0, bytes};

    c->f.vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                              VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &before, 0, NULL, 0, NULL);
    c->f.vkCmdCopyBuffer(cmd, m->buf, c->readback.buf, 1, &cp);
    c->f.vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &after, 0, NULL, 0,
                              NULL);
}

static int wait_all(vk_ctx *c)
{
    int rc;

    for (int i = 0; i < VK_FRAMES; i++)
        if ((rc = vk_frame_wait(c, i)) < 0)
            return rc;
    return 0;
}

/* Host-visible memory (lavapipe, integrated GPUs) is read through its mapping once the run is
 * done. Elsewhere the copy into the read-back buffer is appended to the run still being recorded,
 * so a forward costs one submit and one wait there too; a read with no such run (a second read of
 * the same results) takes a one-shot copy. */
static int read_buf(void *vctx, float *dst, backend_ref src, size_t n)
{
    vk_ctx *c = vctx;
    vk_mem *m = src.buf->dev;
    size_t bytes = n * sizeof(float);
    VkCommandBuffer cmd;
    int rc;

    if (m->host) {
        if ((rc = vk_flush(c)) < 0 || (rc = wait_all(c)) < 0)
            return rc;
        memcpy(dst, (const float *)m->host + src.off, bytes);
        return 0;
    }
    if (bytes > c->readback.size) { /* the runs already submitted may still copy into it */
        if ((rc = wait_all(c)) < 0)
            return rc;
        vk_mem_free(c, &c->readback);
        if ((rc = vk_mem_new(c, &c->readback, align_up(bytes, 1u << 16), 1, "the read-back buffer")) < 0)
            return rc;
    }
    if (c->last >= 0 && c->frames[c->last].recording) {
        record_readback(c, c->frames[c->last].cmd, m, src.off * sizeof(float), bytes);
        if ((rc = vk_flush(c)) < 0 || (rc = wait_all(c)) < 0)
            return rc;
    } else {
        if ((rc = wait_all(c)) < 0 || (rc = vk_oneshot_begin(c, &cmd)) < 0)
            return rc;
        record_readback(c, cmd, m, src.off * sizeof(float), bytes);
        c->submits++;
        c->waits++;
        if ((rc = vk_oneshot_end(c, cmd)) < 0)
            return rc;
    }
    memcpy(dst, c->readback.host, bytes);
    return 0;
}

/* The kernels run every op kind backend.h defines (src/gpu plans each). */
static int supports(void *vctx, backend_op_kind kind)
{
    (void)vctx;
    return gpu_supports(kind);
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
    .supports = supports,
};
