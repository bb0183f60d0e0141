/* mtl_host.c: backend_impl for Metal (metal.h's invariants): the device, buffers, weights wrapped
 * in place, and a forward pass encoded into one command buffer from src/gpu's plan.
 *
 * Written against Apple's documented Metal API through the Objective-C runtime (mtl_rt.h). It has
 * been compiled and run against a recording mock on Linux (tests/unit/test_metal.c), never on a
 * real Metal device by this project's CI. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "metal/metal_int.h"

/* A binding offset's alignment: Metal asks offsets of device buffers to be multiples of the
 * element type's size (at most 16); 256 also suits constant-space use and costs nothing. */
#define MTL_ALIGN 256

static void sels_init(mtl_sels *s)
{
#define X(f, n) s->f = sel_registerName(n);
    MTL_SELS(X)
#undef X
}

static void release(const mtl_ctx *c, id o)
{
    if (o)
        mtl_send_v(o, c->s.release);
}

/* An NSString's text into the error message's buffer (bounded), or `dflt`. */
static const char *str_of(const mtl_ctx *c, id nsstr, char *buf, size_t n, const char *dflt)
{
    const char *p = nsstr ? mtl_send_p(nsstr, c->s.UTF8String) : NULL;

    snprintf(buf, n, "%s", p ? p : dflt);
    return buf;
}

static const char *err_text(const mtl_ctx *c, id err, char *buf, size_t n)
{
    return str_of(c, err ? mtl_send(err, c->s.localizedDescription) : NULL, buf, n, "no reason given");
}

/* ---------------------------------------------------------------- device */

static int mem_new(mtl_ctx *c, mtl_buf *m, uint64_t size, const char *what);

/* Every function that receives autoreleased objects (names, errors, command buffers) runs inside
 * its own pool: mstore has no run loop to drain one. */
static int ctx_open(mtl_ctx *c)
{
    char name[128];
    long page = sysconf(_SC_PAGESIZE);
    void *pool;
    int rc;

    sels_init(&c->s);
    if (!(c->dev = MTLCreateSystemDefaultDevice()))
        return ms_err(MS_EUNSUPPORTED, "metal: no Metal device (MTLCreateSystemDefaultDevice returned nil)");
    c->page = page > 0 ? (uint64_t)page : 16384;
    c->unified = mtl_send_b(c->dev, c->s.hasUnifiedMemory) ? 1 : 0;
    c->max_buffer = mtl_send_u(c->dev, c->s.maxBufferLength);
    c->lim.align = MTL_ALIGN;
    c->lim.max_range = c->max_buffer < UINT32_MAX ? c->max_buffer : UINT32_MAX;
    if (!(c->queue = mtl_send(c->dev, c->s.newCommandQueue)))
        return ms_err(MS_EIO, "metal: cannot create a command queue");
    if ((rc = mem_new(c, &c->dummy, 16, "a dummy binding")) < 0)
        return rc;
    pool = objc_autoreleasePoolPush();
    str_of(c, mtl_send(c->dev, c->s.name), name, sizeof name, "?");
    objc_autoreleasePoolPop(pool);
    snprintf(c->desc, sizeof c->desc, "metal: %s (%s memory, weights wrapped in place)", name,
             c->unified ? "unified" : "discrete");
    return 0;
}

/* Wait for frame i's command buffer, if one is in flight. MS_EIO naming Metal's reason. */
static int frame_wait(mtl_ctx *c, int i)
{
    mtl_frame *fr = &c->frames[i];
    char why[256];
    int rc = 0;

    if (!fr->cmd)
        return 0;
    mtl_send_v(fr->cmd, c->s.waitUntilCompleted);
    c->waits++;
    if (mtl_send_u(fr->cmd, c->s.status) != MTL_CB_COMPLETED) {
        void *pool = objc_autoreleasePoolPush();
        rc = ms_err(MS_EIO, "metal: the command buffer failed: %s",
                    err_text(c, mtl_send(fr->cmd, c->s.error), why, sizeof why));
        objc_autoreleasePoolPop(pool);
    }
    release(c, fr->cmd);
    fr->cmd = NULL;
    return rc;
}

static void ctx_close(void *vctx)
{
    mtl_ctx *c = vctx;

    if (!c)
        return;
    if (c->verbose && c->runs)
        fprintf(stderr, "mstore: metal: %lu runs, %lu command buffers, %lu host waits; %lu weight regions wrapped "
                        "in place, %lu copied\n",
                c->runs, c->commits, c->waits, c->nocopy, c->copies);
    for (int i = 0; i < MTL_FRAMES; i++) {
        frame_wait(c, i);
        release(c, c->frames[i].params.buf);
    }
    for (int k = 0; k < GPU_K_COUNT; k++)
        release(c, c->pipes[k]);
    for (size_t i = 0; i < c->n_regions; i++) {
        release(c, c->regions[i]->buf);
        free(c->regions[i]);
    }
    free(c->regions);
    release(c, c->dummy.buf);
    release(c, c->queue);
    release(c, c->dev);
    free(c);
}

static const char *describe(void *vctx)
{
    return ((mtl_ctx *)vctx)->desc;
}

static int reserve(void *vctx, const backend_limits *l)
{
    gpu_limits_reserve(&((mtl_ctx *)vctx)->lim, l);
    return 0;
}

/* ---------------------------------------------------------------- buffers */

/* A zeroed shared-storage buffer of `size` bytes. */
static int mem_new(mtl_ctx *c, mtl_buf *m, uint64_t size, const char *what)
{
    size = size ? size : 4;
    if (size > c->max_buffer)
        return ms_err(MS_ENOMEM, "metal: %s of %llu bytes is past the device's largest buffer (%llu)", what,
                      (unsigned long long)size, (unsigned long long)c->max_buffer);
    if (!(m->buf = mtl_send_u_u(c->dev, c->s.newBufferLength, size, MTL_RESOURCE_SHARED)))
        return ms_err(MS_ENOMEM, "metal: cannot allocate %s of %llu bytes", what, (unsigned long long)size);
    m->host = (void *)mtl_send_p(m->buf, c->s.contents);
    m->size = size;
    memset(m->host, 0, size);
    return 0;
}

static int buf_new(void *vctx, backend_buf *buf)
{
    mtl_ctx *c = vctx;
    size_t elt = buf->dtype == BACKEND_F16 ? 2 : 4;
    mtl_buf *m;
    int rc;

    if (buf->n > (SIZE_MAX - 8) / elt)
        return ms_err(MS_ENOMEM, "out of memory");
    if (!(m = calloc(1, sizeof *m)))
        return ms_err(MS_ENOMEM, "out of memory");
    if ((rc = mem_new(c, m, (buf->n * elt + 3) & ~(size_t)3, "a buffer")) < 0) {
        free(m);
        return rc;
    }
    buf->dev = m;
    return 0;
}

static void buf_free(void *vctx, backend_buf *buf)
{
    mtl_ctx *c = vctx;

    if (!buf->dev)
        return;
    for (int i = 0; i < MTL_FRAMES; i++) /* a run in flight may still use it */
        frame_wait(c, i);
    release(c, ((mtl_buf *)buf->dev)->buf);
    free(buf->dev);
    buf->dev = NULL;
}

/* ---------------------------------------------------------------- weights */

static int region_add(mtl_ctx *c, mtl_region *r)
{
    return gpu_region_add(&c->regions, &c->n_regions, &c->cap_regions, r);
}

/* Wrap [base, base + nbytes) (page-aligned, whole pages) without a copy. */
static int region_wrap(mtl_ctx *c, mtl_region *r)
{
    r->buf = mtl_send_p_u_u_o(c->dev, c->s.newBufferNoCopy, (void *)(uintptr_t)r->base, r->nbytes,
                              MTL_RESOURCE_SHARED, NULL);
    r->nocopy = 1;
    c->nocopy++;
    return r->buf ? 0 : ms_err(MS_EIO, "metal: cannot wrap %llu bytes of a blob mapping as a buffer",
                               (unsigned long long)r->nbytes);
}

/* The region tensor t's bytes [lo, hi) lie in: its blob mapping, wrapped once and shared by every
 * tensor in it; where the mapping is larger than one buffer may be, a page-aligned window of it
 * around the tensor (still no copy); memory that is not a mapping (tests' tensors): a copy. */
static int weight_region(mtl_ctx *c, mtl_region **out, const backend_tensor *t, uint64_t lo, uint64_t hi)
{
    const uint8_t *map = t->map;
    uint64_t whole = (t->map_nbytes + c->page - 1) / c->page * c->page;
    mtl_region *r;
    int rc;

    *out = NULL;
    if (map && (uintptr_t)map % c->page == 0 && (uintptr_t)map <= lo && hi <= (uintptr_t)map + t->map_nbytes) {
        for (size_t i = 0; i < c->n_regions; i++) {
            if (c->regions[i]->nocopy && c->regions[i]->base == map && c->regions[i]->nbytes == whole) {
                *out = c->regions[i];
                return 0;
            }
        }
    }
    if (!(r = calloc(1, sizeof *r)))
        return ms_err(MS_ENOMEM, "out of memory");
    if (map && (uintptr_t)map % c->page == 0 && (uintptr_t)map <= lo && hi <= (uintptr_t)map + t->map_nbytes) {
        if (whole <= c->max_buffer) {
            r->base = map;
            r->nbytes = whole;
        } else {
            r->base = (const uint8_t *)(uintptr_t)(lo / c->page * c->page);
            r->nbytes = (hi - (uintptr_t)r->base + c->page - 1) / c->page * c->page;
        }
        rc = region_wrap(c, r);
    } else {
        mtl_buf m = {0};
        r->base = (const uint8_t *)(uintptr_t)lo;
        r->nbytes = (hi - lo + 3) & ~(uint64_t)3; /* whole words: a binding ends on one */
        if ((rc = mem_new(c, &m, r->nbytes, "a weight's copy")) == 0)
            memcpy(m.host, r->base, hi - lo);
        r->buf = m.buf;
        c->copies++;
    }
    if (rc < 0 || (rc = region_add(c, r)) < 0) {
        release(c, r->buf);
        free(r);
        return ms_err_ctx("tensor '%s'", t->name);
    }
    *out = r;
    return 0;
}

static int weight_new(void *vctx, backend_weight *w)
{
    mtl_ctx *c = vctx;
    const backend_tensor *t = w->t;
    gpu_weight *gw;
    mtl_region *reg;
    uint64_t lo, hi, max_range = c->lim.max_range;
    int rc;

    if (!(gw = calloc(1, sizeof *gw)))
        return ms_err(MS_ENOMEM, "out of memory");
    if ((rc = gpu_weight_layout(gw, &lo, &hi, t, max_range, "metal")) < 0 ||
        (rc = weight_region(c, &reg, t, lo, hi)) < 0) {
        free(gw);
        return rc;
    }
    gw->region = reg;
    gw->region_size = reg->nbytes;
    gpu_weight_place(gw, t, reg->base);
    w->dev = gw;
    return 0;
}

static void weight_free(void *vctx, backend_weight *w)
{
    (void)vctx;
    free(w->dev); /* its region belongs to the context */
}

/* ---------------------------------------------------------------- pipelines */

/* Compiled from the embedded MSL on first use: a model needs the variants of its own weight
 * types only, and each costs a compile. */
static int pipeline_get(mtl_ctx *c, id *out, gpu_kernel k)
{
    id src, lib, fn, name, err = NULL;
    char why[256];
    void *pool;
    int rc = 0;

    if ((*out = c->pipes[k]))
        return 0;
    pool = objc_autoreleasePoolPush(); /* the NSErrors */
    src = mtl_send_cstr(mtl_send(objc_getClass("NSString"), c->s.alloc), c->s.initWithUTF8String,
                        mtl_msl_table[k].text);
    name = mtl_send_cstr(mtl_send(objc_getClass("NSString"), c->s.alloc), c->s.initWithUTF8String, "main0");
    lib = src ? mtl_send_o_o_err(c->dev, c->s.newLibrary, src, NULL, &err) : NULL;
    if (!lib) {
        rc = ms_err(MS_EIO, "metal: kernel %s does not compile: %s", mtl_msl_table[k].name,
                    err_text(c, err, why, sizeof why));
        goto done;
    }
    fn = mtl_send_o(lib, c->s.newFunction, name);
    err = NULL;
    c->pipes[k] = fn ? mtl_send_o_err(c->dev, c->s.newPipeline, fn, &err) : NULL;
    release(c, fn);
    release(c, lib);
    if (!c->pipes[k]) {
        rc = ms_err(MS_EIO, "metal: no pipeline for kernel %s: %s", mtl_msl_table[k].name,
                    err_text(c, err, why, sizeof why));
        goto done;
    }
    /* the MSL's threadgroup size is the GLSL's local_size; the device must run it whole */
    if (mtl_send_u(c->pipes[k], c->s.maxThreads) < gpu_kernel_threads(k)) {
        rc = ms_err(MS_EUNSUPPORTED, "metal: kernel %s needs %u threads per threadgroup; the device runs %lu",
                    mtl_msl_table[k].name, gpu_kernel_threads(k), mtl_send_u(c->pipes[k], c->s.maxThreads));
        release(c, c->pipes[k]);
        c->pipes[k] = NULL;
        goto done;
    }
    *out = c->pipes[k];
done:
    release(c, src);
    release(c, name);
    objc_autoreleasePoolPop(pool);
    return rc;
}

/* ---------------------------------------------------------------- encoding */

/* One planned dispatch into the encoder. A serial compute encoder (Metal's default) runs its
 * dispatches as if one after another and tracks the hazards between them, so the plan's
 * written / read buffers are not needed here (a concurrent encoder with barriers where they say
 * would let independent matmuls overlap: not done). */
static int encode(mtl_ctx *c, id enc, const mtl_frame *fr, const gpu_dispatch *d, id *last_pipe)
{
    MTLSize groups = {d->gx, d->gy, 1}, threads = {gpu_kernel_threads(d->k), 1, 1};
    id pipe;
    int rc;

    if ((rc = pipeline_get(c, &pipe, d->k)) < 0)
        return rc;
    if (pipe != *last_pipe)
        mtl_send_v_o(enc, c->s.setPipeline, pipe);
    *last_pipe = pipe;
    mtl_send_v_p_u_u(enc, c->s.setBytes, &d->pc, sizeof d->pc, 0);
    for (int i = 0; i < 5; i++) {
        const gpu_bind *b = &d->b[i];
        id buf = NULL;
        if (b->kind == GPU_B_BUF)
            buf = ((const mtl_buf *)b->buf->dev)->buf;
        else if (b->kind == GPU_B_WEIGHT)
            buf = ((const mtl_region *)b->w->region)->buf;
        else if (b->kind == GPU_B_PARAMS)
            buf = fr->params.buf;
        /* an unused binding gets the dummy, as in src/vulkan: the MSL may still declare it, and
         * Metal's validation layer refuses a declared buffer left unbound */
        mtl_send_v_o_u_u(enc, c->s.setBuffer, buf ? buf : c->dummy.buf, buf ? b->offset : 0, (NSUInteger)i + 1);
    }
    mtl_send_v_sz_sz(enc, c->s.dispatch, groups, threads);
    return 0;
}

static int run(void *vctx, const backend_op *ops, size_t n_ops)
{
    mtl_ctx *c = vctx;
    mtl_frame *fr = &c->frames[c->cur];
    const gpu_limits *l = &c->lim;
    gpu_plan p = {.l = l};
    size_t params;
    id cmd, enc, last_pipe = NULL;
    void *pool;
    int rc = 0;

    for (size_t i = 0; i < n_ops; i++)
        if ((rc = gpu_op_check(l, &ops[i])) < 0)
            return rc;
    if (n_ops == 0)
        return 0;
    /* the frame's last run must be done before its params are rewritten (a third run without a
     * read between: prefill chunks) */
    if ((rc = frame_wait(c, c->cur)) < 0)
        return rc;
    params = gpu_params_size(l, ops, n_ops);
    if (params > fr->params.size) {
        release(c, fr->params.buf);
        memset(&fr->params, 0, sizeof fr->params);
        if ((rc = mem_new(c, &fr->params, (params + 65535) & ~(size_t)65535, "run parameters")) < 0)
            return rc;
    }
    p.params = fr->params.host;
    /* commandBuffer and computeCommandEncoder are autoreleased: the pool ends with this call, and
     * the command buffer is retained until backend_read waits for it */
    pool = objc_autoreleasePoolPush();
    if (!(cmd = mtl_send(c->queue, c->s.commandBuffer)) || !(enc = mtl_send(cmd, c->s.computeCommandEncoder))) {
        rc = ms_err(MS_EIO, "metal: cannot create a command buffer");
        goto done;
    }
    for (size_t i = 0; i < n_ops && rc == 0; i++) {
        gpu_dispatch d;
        int n;
        if ((rc = gpu_plan_op(&p, &ops[i], &d, &n)) == 0 && n)
            rc = encode(c, enc, fr, &d, &last_pipe);
    }
    mtl_send_v(enc, c->s.endEncoding);
    if (rc < 0) /* never committed: released with the pool */
        goto done;
    fr->cmd = mtl_send(cmd, c->s.retain);
    mtl_send_v(cmd, c->s.commit);
    c->cur = (c->cur + 1) % MTL_FRAMES;
    c->runs++;
    c->commits++;
done:
    objc_autoreleasePoolPop(pool);
    return rc;
}

static int read_buf(void *vctx, float *dst, backend_ref src, size_t n)
{
    mtl_ctx *c = vctx;
    const mtl_buf *m = src.buf->dev;
    int rc;

    for (int i = 0; i < MTL_FRAMES; i++)
        if ((rc = frame_wait(c, i)) < 0)
            return rc;
    if ((src.off + n) * sizeof(float) > m->size)
        return ms_err(MS_ERROR, "metal: a read of %zu floats at %zu, past a buffer of %llu bytes", n, src.off,
                      (unsigned long long)m->size);
    memcpy(dst, (const float *)m->host + src.off, n * sizeof(float));
    return 0;
}

/* The same kernels and plans as the Vulkan backend: every op kind backend.h defines. */
static int supports(void *vctx, backend_op_kind kind)
{
    (void)vctx;
    return gpu_supports(kind);
}

static const backend_impl mtl_impl = {
    .name = "metal",
    .describe = describe,
    .reserve = reserve,
    .buf_new = buf_new,
    .buf_free = buf_free,
    .weight_new = weight_new,
    .weight_free = weight_free,
    .run = run,
    .read = read_buf,
    .close = ctx_close,
    .supports = supports,
};

/* ---------------------------------------------------------------- opening */

int metal_backend_new(const backend_impl **impl_out, void **ctx_out, const backend_opts *o, int by_name)
{
    mtl_ctx *c;
    int rc;

    *impl_out = NULL;
    *ctx_out = NULL;
    if (!by_name)
        return ms_err(MS_EUNSUPPORTED, "metal: taken only when asked for by name (--device metal): this host "
                                       "has not been run on a Mac by mstore's CI");
    if (!(c = calloc(1, sizeof *c)))
        return ms_err(MS_ENOMEM, "out of memory");
    if ((rc = ctx_open(c)) < 0) {
        ctx_close(c);
        return rc;
    }
    c->verbose = o && o->verbose;
    *impl_out = &mtl_impl;
    *ctx_out = c;
    return 0;
}

int metal_devices_list(backend_device_info **list, size_t *n, char *why, size_t why_len)
{
    mtl_ctx c;
    backend_device_info *p, *d;
    char name[128];
    void *pool;

    memset(&c, 0, sizeof c);
    sels_init(&c.s);
    if (!(c.dev = MTLCreateSystemDefaultDevice())) {
        if (why && why_len)
            snprintf(why, why_len, "metal: no Metal device");
        return 0;
    }
    if (!(p = realloc(*list, (*n + 1) * sizeof *p))) {
        release(&c, c.dev);
        return ms_err(MS_ENOMEM, "out of memory");
    }
    *list = p;
    d = &p[(*n)++];
    memset(d, 0, sizeof *d);
    pool = objc_autoreleasePoolPush();
    snprintf(d->name, sizeof d->name, "%s", str_of(&c, mtl_send(c.dev, c.s.name), name, sizeof name, "?"));
    objc_autoreleasePoolPop(pool);
    snprintf(d->kind, sizeof d->kind, "%s", mtl_send_b(c.dev, c.s.hasUnifiedMemory) ? "integrated" : "discrete");
    snprintf(d->api, sizeof d->api, "metal");
    d->memory = mtl_send_u(c.dev, c.s.recommendedMaxWorkingSetSize);
    d->host_import = 1; /* newBufferWithBytesNoCopy */
    release(&c, c.dev);
    return 0;
}
