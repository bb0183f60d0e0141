/* test_metal.c: the Metal host (src/metal) where there is no Metal.
 *
 * On Linux, src/metal/CMakeLists.txt builds this test with the host's sources and
 * MSTORE_METAL_MOCK: the Objective-C runtime and Metal entry points of src/metal/mtl_rt.h are
 * defined below by a mock that makes small fake objects and records every message sent. The
 * tests check what the host asks of Metal: each blob mapping wrapped by
 * newBufferWithBytesNoCopy exactly once (page-aligned, whole pages, no deallocator), a forward
 * pass encoded as one command buffer and one encoder with the planned pipelines in order, their
 * threadgroup sizes those of the MSL, committed once, and waited for only by the read. The mock
 * runs no kernel: the arithmetic of the kernels is test_vulkan's (the same SPIR-V); that the MSL
 * computes the same on a real Apple GPU has not been checked by this project.
 *
 * Everywhere, and without the mock: `metal` names a clear error off macOS. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "backend/backend.h"
#include "util/util.h"

START_TEST(metal_off_macos_is_a_clear_error)
{
#ifdef __APPLE__
    printf("skipped: this is macOS\n");
#else
    backend *b = NULL;
    ck_assert_int_eq(backend_open(&b, "metal", NULL), MS_EUNSUPPORTED);
    ck_assert_ptr_null(b);
    ck_assert_str_eq(ms_err_msg(), "device 'metal': Metal exists only on macOS");
#endif
}
END_TEST

#ifdef MSTORE_METAL_MOCK
#include "gpu/gpu.h"
#include "metal/metal_int.h"

/* ---------------------------------------------------------------- the mock runtime */

typedef struct mobj {
    const char *cls;      /* "MTLDevice", "MTLBuffer", ... */
    void *mem;            /* buffers: their bytes */
    uint64_t len;
    int owns_mem, refs, committed;
    const char *text;     /* NSString: its text; library: its source */
    int kernel;           /* library, function, pipeline: the gpu_kernel of its source; -1 none */
} mobj;

#define MAX_OBJS 4096
#define MAX_LOG 8192
static mobj objs[MAX_OBJS];
static int n_objs;

typedef struct msg {
    const char *sel;
    mobj *to;
    mobj *obj;            /* an object argument (setBuffer:, setComputePipelineState:) */
    const void *ptr;      /* NoCopy's pointer */
    uint64_t a, b, c;     /* NoCopy: length, options, deallocator; setBuffer: offset, index */
    gpu_push pc;          /* setBytes: */
    MTLSize groups, threads;
} msg;
static msg log_[MAX_LOG];
static int n_log;

static int no_device, fail_library;
static uint64_t max_buffer = (uint64_t)1 << 32;

static mobj *obj_new(const char *cls)
{
    ck_assert_int_lt(n_objs, MAX_OBJS);
    mobj *o = &objs[n_objs++];
    memset(o, 0, sizeof *o);
    o->cls = cls;
    o->refs = 1;
    o->kernel = -1;
    return o;
}

static msg *note(SEL s, id to)
{
    ck_assert_int_lt(n_log, MAX_LOG);
    msg *m = &log_[n_log++];
    memset(m, 0, sizeof *m);
    m->sel = (const char *)s;
    m->to = (mobj *)to;
    return m;
}

static void mock_reset(void)
{
    for (int i = 0; i < n_objs; i++)
        if (objs[i].owns_mem)
            free(objs[i].mem);
    n_objs = n_log = 0;
    no_device = fail_library = 0;
    max_buffer = (uint64_t)1 << 32;
}

/* A selector is its interned name, so the log can say which message it was. */
SEL sel_registerName(const char *name)
{
    static char *names[128];
    static int n;
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0)
            return (SEL)names[i];
    ck_assert_int_lt(n, 128);
    names[n] = strdup(name);
    return (SEL)names[n++];
}

id objc_getClass(const char *name)
{
    static mobj cls[4];
    ck_assert_str_eq(name, "NSString");
    cls[0].cls = "class NSString";
    return (id)&cls[0];
}

static int pools;
void *objc_autoreleasePoolPush(void)
{
    return (void *)(intptr_t)++pools;
}
void objc_autoreleasePoolPop(void *p)
{
    ck_assert_int_eq((int)(intptr_t)p, pools);
    pools--;
}

id MTLCreateSystemDefaultDevice(void)
{
    return no_device ? NULL : (id)obj_new("MTLDevice");
}

#define IS(s, n) (strcmp((const char *)(s), n) == 0)

id mtl_send(id o, SEL s)
{
    mobj *to = (mobj *)o;
    note(s, o);
    if (IS(s, "alloc"))
        return (id)obj_new("NSString");
    if (IS(s, "name")) {
        mobj *n = obj_new("NSString");
        n->text = "Mock GPU";
        return (id)n;
    }
    if (IS(s, "newCommandQueue"))
        return (id)obj_new("MTLCommandQueue");
    if (IS(s, "commandBuffer"))
        return (id)obj_new("MTLCommandBuffer");
    if (IS(s, "computeCommandEncoder"))
        return (id)obj_new("MTLComputeCommandEncoder");
    if (IS(s, "retain")) {
        to->refs++;
        return o;
    }
    if (IS(s, "error") || IS(s, "localizedDescription"))
        return NULL;
    ck_abort_msg("mock: unexpected message %s", (const char *)s);
    return NULL;
}

void mtl_send_v(id o, SEL s)
{
    mobj *to = (mobj *)o;
    note(s, o);
    if (IS(s, "release"))
        to->refs--;
    else if (IS(s, "commit"))
        to->committed = 1;
    else if (!IS(s, "endEncoding") && !IS(s, "waitUntilCompleted"))
        ck_abort_msg("mock: unexpected message %s", (const char *)s);
}

const void *mtl_send_p(id o, SEL s)
{
    mobj *to = (mobj *)o;
    note(s, o);
    if (IS(s, "UTF8String"))
        return to->text;
    if (IS(s, "contents"))
        return to->mem;
    ck_abort_msg("mock: unexpected message %s", (const char *)s);
    return NULL;
}

NSUInteger mtl_send_u(id o, SEL s)
{
    mobj *to = (mobj *)o;
    note(s, o);
    if (IS(s, "maxBufferLength"))
        return max_buffer;
    if (IS(s, "recommendedMaxWorkingSetSize"))
        return (NSUInteger)8 << 30;
    if (IS(s, "maxTotalThreadsPerThreadgroup"))
        return 1024;
    if (IS(s, "status"))
        return to->committed ? MTL_CB_COMPLETED : 0;
    if (IS(s, "length"))
        return to->len;
    ck_abort_msg("mock: unexpected message %s", (const char *)s);
    return 0;
}

mtl_BOOL mtl_send_b(id o, SEL s)
{
    note(s, o);
    ck_assert(IS(s, "hasUnifiedMemory"));
    return 1;
}

id mtl_send_o(id o, SEL s, id a)
{
    mobj *f;
    note(s, o)->obj = (mobj *)a;
    ck_assert(IS(s, "newFunctionWithName:"));
    ck_assert_str_eq(((mobj *)a)->text, "main0");
    f = obj_new("MTLFunction");
    f->kernel = ((mobj *)o)->kernel;
    return (id)f;
}

id mtl_send_cstr(id o, SEL s, const char *a)
{
    note(s, o);
    ck_assert(IS(s, "initWithUTF8String:"));
    ((mobj *)o)->text = a;
    return o;
}

id mtl_send_o_err(id o, SEL s, id a, id *err)
{
    mobj *p;
    note(s, o)->obj = (mobj *)a;
    ck_assert(IS(s, "newComputePipelineStateWithFunction:error:"));
    *err = NULL;
    p = obj_new("MTLComputePipelineState");
    p->kernel = ((mobj *)a)->kernel;
    return (id)p;
}

id mtl_send_o_o_err(id o, SEL s, id a, id b, id *err)
{
    mobj *l;
    note(s, o)->obj = (mobj *)a;
    ck_assert(IS(s, "newLibraryWithSource:options:error:"));
    ck_assert_ptr_null(b);
    *err = NULL;
    if (fail_library)
        return NULL;
    l = obj_new("MTLLibrary");
    l->text = ((mobj *)a)->text;
    for (int k = 0; k < GPU_K_COUNT; k++)
        if (mtl_msl_table[k].text == l->text)
            l->kernel = k;
    ck_assert_int_ge(l->kernel, 0);
    return (id)l;
}

id mtl_send_u_u(id o, SEL s, NSUInteger a, NSUInteger b)
{
    mobj *buf;
    msg *m = note(s, o);
    ck_assert(IS(s, "newBufferWithLength:options:"));
    m->a = a;
    m->b = b;
    buf = obj_new("MTLBuffer");
    buf->mem = malloc(a);
    memset(buf->mem, 0xab, a); /* Metal promises no zeroes: the host must clear what it needs */
    buf->len = a;
    buf->owns_mem = 1;
    return (id)buf;
}

id mtl_send_p_u_u_o(id o, SEL s, void *p, NSUInteger a, NSUInteger b, id c)
{
    mobj *buf;
    msg *m = note(s, o);
    ck_assert(IS(s, "newBufferWithBytesNoCopy:length:options:deallocator:"));
    m->ptr = p;
    m->a = a;
    m->b = b;
    m->c = (uint64_t)(uintptr_t)c;
    buf = obj_new("MTLBuffer");
    buf->mem = p;
    buf->len = a;
    return (id)buf;
}

void mtl_send_v_o(id o, SEL s, id a)
{
    note(s, o)->obj = (mobj *)a;
    ck_assert(IS(s, "setComputePipelineState:"));
}

void mtl_send_v_o_u_u(id o, SEL s, id a, NSUInteger b, NSUInteger c)
{
    msg *m = note(s, o);
    ck_assert(IS(s, "setBuffer:offset:atIndex:"));
    m->obj = (mobj *)a;
    m->a = b;
    m->b = c;
}

void mtl_send_v_p_u_u(id o, SEL s, const void *p, NSUInteger a, NSUInteger b)
{
    msg *m = note(s, o);
    ck_assert(IS(s, "setBytes:length:atIndex:"));
    ck_assert_uint_eq(a, sizeof(gpu_push));
    memcpy(&m->pc, p, sizeof m->pc);
    m->b = b;
}

void mtl_send_v_sz_sz(id o, SEL s, MTLSize a, MTLSize b)
{
    msg *m = note(s, o);
    ck_assert(IS(s, "dispatchThreadgroups:threadsPerThreadgroup:"));
    m->groups = a;
    m->threads = b;
}

static int count(const char *sel)
{
    int n = 0;
    for (int i = 0; i < n_log; i++)
        n += strcmp(log_[i].sel, sel) == 0;
    return n;
}

/* ---------------------------------------------------------------- fixtures */

typedef struct host {
    const backend_impl *impl;
    void *ctx;
} host;

static host host_open(void)
{
    host h;
    backend_limits l = {.max_rows = 8, .max_cols = 256, .n_ctx = 16, .heads = 4};
    mock_reset();
    ck_assert_msg(metal_backend_new(&h.impl, &h.ctx, NULL, 1) == 0, "%s", ms_err_msg());
    ck_assert_int_eq(h.impl->reserve(h.ctx, &l), 0);
    return h;
}

static backend_buf *buf_new(host *h, size_t n, int dtype)
{
    backend_buf *b = calloc(1, sizeof *b);
    b->n = n;
    b->dtype = dtype;
    ck_assert_int_eq(h->impl->buf_new(h->ctx, b), 0);
    return b;
}

static size_t page(void)
{
    return (size_t)sysconf(_SC_PAGESIZE);
}

/* An anonymous mapping of `n` bytes (not whole pages), as a blob's mapping is. */
static uint8_t *map_new(size_t n)
{
    uint8_t *m = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(m, MAP_FAILED);
    for (size_t i = 0; i < n / 4; i++)
        ((float *)m)[i] = (float)(i % 7) * 0.125f;
    return m;
}

static backend_tensor tensor_at(const char *name, int type, uint8_t *map, size_t map_n, size_t off, int rows,
                                int cols)
{
    uint64_t rb;
    ck_assert_int_eq(ggml_row_nbytes(&rb, type, (uint64_t)cols), 0);
    backend_tensor t = {.name = name,
                        .type = type,
                        .n_dims = rows ? 2 : 1,
                        .shape = {rows ? (uint64_t)rows : (uint64_t)cols, (uint64_t)cols},
                        .data = map + off,
                        .nbytes = rb * (rows ? rows : 1),
                        .map = map,
                        .map_nbytes = map_n};
    return t;
}

/* ---------------------------------------------------------------- tests */

START_TEST(every_mapping_is_wrapped_without_copy_once)
{
    host h = host_open();
    size_t pg = page(), na = 3 * pg + 100, nb = pg + 8;
    uint8_t *ma = map_new(na), *mb = map_new(nb);
    static float loose[64 * 4];
    backend_tensor t[4];
    backend_weight w[4];
    int before;

    t[0] = tensor_at("a.0.weight", GGML_TYPE_F32, ma, na, 64, 8, 64);
    t[1] = tensor_at("a.1.weight", GGML_TYPE_Q8_0, ma, na, pg + 32, 16, 64);
    t[2] = tensor_at("b.0.weight", GGML_TYPE_F16, mb, nb, 0, 0, 256);
    t[3] = tensor_at("loose.weight", GGML_TYPE_F32, (uint8_t *)loose, 0, 0, 4, 64);
    t[3].map = NULL; /* memory that is no blob mapping */
    before = count("newBufferWithLength:options:");
    for (int i = 0; i < 4; i++) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].t = &t[i];
        ck_assert_msg(h.impl->weight_new(h.ctx, &w[i]) == 0, "%s", ms_err_msg());
    }
    /* two mappings, two wraps: each once, whole, in whole pages, no copy, no deallocator */
    ck_assert_int_eq(count("newBufferWithBytesNoCopy:length:options:deallocator:"), 2);
    for (int i = 0, seen = 0; i < n_log; i++) {
        msg *m = &log_[i];
        if (strcmp(m->sel, "newBufferWithBytesNoCopy:length:options:deallocator:") != 0)
            continue;
        ck_assert_ptr_eq(m->ptr, seen++ ? (void *)mb : (void *)ma);
        ck_assert_uint_eq(m->a, m->ptr == ma ? 4 * pg : 2 * pg);
        ck_assert_uint_eq(m->a % pg, 0);
        ck_assert_uint_eq((uintptr_t)m->ptr % pg, 0);
        ck_assert_uint_eq(m->b, MTL_RESOURCE_SHARED);
        ck_assert_uint_eq(m->c, 0);
    }
    /* the tensors of one mapping share its buffer, at their offsets */
    ck_assert_ptr_eq(((gpu_weight *)w[0].dev)->region, ((gpu_weight *)w[1].dev)->region);
    ck_assert_uint_eq(((gpu_weight *)w[1].dev)->data_off, pg + 32);
    /* only the loose tensor is copied */
    ck_assert_int_eq(count("newBufferWithLength:options:") - before, 1);
    ck_assert_int_eq(memcmp(((mobj *)((mtl_region *)((gpu_weight *)w[3].dev)->region)->buf)->mem, loose, sizeof loose), 0);
    for (int i = 0; i < 4; i++)
        h.impl->weight_free(h.ctx, &w[i]);
    h.impl->close(h.ctx);
    munmap(ma, na);
    munmap(mb, nb);
}
END_TEST

START_TEST(mapping_past_the_largest_buffer_is_wrapped_in_windows)
{
    host h;
    size_t pg = page(), n = 8 * pg;
    uint8_t *m = map_new(n);
    backend_tensor t;
    backend_weight w = {0};

    h = host_open();
    max_buffer = 4 * pg; /* after open: the host reads it per weight from its context */
    ((mtl_ctx *)h.ctx)->max_buffer = max_buffer;
    t = tensor_at("big.weight", GGML_TYPE_F32, m, n, 5 * pg + 16, 4, 64);
    w.t = &t;
    ck_assert_msg(h.impl->weight_new(h.ctx, &w) == 0, "%s", ms_err_msg());
    ck_assert_int_eq(count("newBufferWithBytesNoCopy:length:options:deallocator:"), 1);
    for (int i = 0; i < n_log; i++) {
        if (strcmp(log_[i].sel, "newBufferWithBytesNoCopy:length:options:deallocator:") == 0) {
            ck_assert_ptr_eq(log_[i].ptr, m + 5 * pg);
            ck_assert_uint_eq(log_[i].a, pg);
        }
    }
    ck_assert_uint_eq(((gpu_weight *)w.dev)->data_off, 16);
    h.impl->weight_free(h.ctx, &w);
    h.impl->close(h.ctx);
    munmap(m, n);
}
END_TEST

/* The decode step of a one-layer llama: the ops a decoder records, as one backend_run. */
START_TEST(a_forward_is_one_command_buffer_and_only_the_read_waits)
{
    host h = host_open();
    enum { D = 64, HEADS = 4, KV = 2, HD = 16, F = 128, V = 32 };
    size_t pg = page(), n = 64 * pg;
    uint8_t *m = map_new(n);
    backend_tensor te = tensor_at("tok_embd", GGML_TYPE_Q8_0, m, n, 0, V, D);
    backend_tensor tn = tensor_at("norm", GGML_TYPE_F32, m, n, 4 * pg, 0, D);
    backend_tensor tq = tensor_at("q", GGML_TYPE_Q4_0, m, n, 5 * pg, HEADS * HD, D);
    backend_tensor tk = tensor_at("k", GGML_TYPE_F16, m, n, 8 * pg, KV * HD, D);
    backend_tensor tu = tensor_at("up", GGML_TYPE_Q6_K, m, n, 12 * pg, F, 256);
    backend_weight we = {.t = &te}, wn = {.t = &tn}, wq = {.t = &tq}, wk = {.t = &tk}, wu = {.t = &tu};
    backend_weight *ws[] = {&we, &wn, &wq, &wk, &wu};
    backend_buf *x = buf_new(&h, D, BACKEND_F32), *y = buf_new(&h, D, BACKEND_F32);
    backend_buf *q = buf_new(&h, HEADS * HD, BACKEND_F32), *k = buf_new(&h, KV * HD, BACKEND_F32);
    backend_buf *kc = buf_new(&h, 16 * KV * HD, BACKEND_F16), *vc = buf_new(&h, 16 * KV * HD, BACKEND_F16);
    backend_buf *g = buf_new(&h, F, BACKEND_F32), *u = buf_new(&h, F, BACKEND_F32), *big = buf_new(&h, 256, BACKEND_F32);
    backend_op ops[16];
    backend_seq s = {.ops = ops, .cap = 16};
    static const double freqs[HD / 2] = {1.0, 0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125};
    int32_t tok = 7;
    float out[D];
    int first, n_dispatch = 0;
    static const int want[] = {GPU_K_EMBED + GPU_T_Q8_0, GPU_K_NORM, GPU_K_MV + GPU_T_Q4_0, GPU_K_MV + GPU_T_F16,
                               GPU_K_ROPE, GPU_K_ELEM, GPU_K_ELEM, GPU_K_ATT_F16, GPU_K_ELEM, GPU_K_MV + GPU_T_Q6_K,
                               GPU_K_ELEM};

    for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++)
        ck_assert_msg(h.impl->weight_new(h.ctx, ws[i]) == 0, "%s", ms_err_msg());
    ck_assert_int_eq(count("newBufferWithBytesNoCopy:length:options:deallocator:"), 1);
    /* buffers are cleared by the host (the mock fills new ones with 0xab) */
    ck_assert_float_eq(((float *)((mtl_buf *)x->dev)->host)[0], 0.0f);

    backend_seq_embed(&s, backend_at(x, 0), &we, &tok, 1, D);
    backend_seq_rms_norm(&s, backend_at(y, 0), backend_at(x, 0), &wn, 1, D, 1e-5f);
    backend_seq_matmul(&s, backend_at(q, 0), backend_at(y, 0), &wq, 1);
    backend_seq_matmul(&s, backend_at(k, 0), backend_at(y, 0), &wk, 1);
    backend_seq_rope(&s, backend_at(q, 0), 1, HEADS, HD, HD, 3, freqs, 0);
    backend_seq_store(&s, backend_at(kc, 3 * KV * HD), backend_at(k, 0), KV * HD);
    backend_seq_store(&s, backend_at(vc, 3 * KV * HD), backend_at(k, 0), KV * HD);
    backend_seq_attention(&s, backend_at(y, 0), backend_at(q, 0), backend_at(kc, 0), backend_at(vc, 0), 1, 3, HEADS,
                          KV, HD);
    backend_seq_add(&s, backend_at(x, 0), backend_at(y, 0), D);
    backend_seq_matmul(&s, backend_at(g, 0), backend_at(big, 0), &wu, 1);
    backend_seq_swiglu(&s, backend_at(g, 0), backend_at(u, 0), F);
    ck_assert(!s.overflow);

    first = n_log;
    ck_assert_msg(h.impl->run(h.ctx, s.ops, s.n) == 0, "%s", ms_err_msg());
    ck_assert_int_eq(count("commandBuffer"), 1);
    ck_assert_int_eq(count("computeCommandEncoder"), 1);
    ck_assert_int_eq(count("endEncoding"), 1);
    ck_assert_int_eq(count("commit"), 1);
    ck_assert_int_eq(count("waitUntilCompleted"), 0);
    ck_assert_int_eq(pools, 0);
    /* the pipelines in the order of the ops, each dispatch after its push constants at buffer 0 */
    for (int i = first, pipe = -1, have_pc = 0, bound = 0; i < n_log; i++) {
        msg *mm = &log_[i];
        if (strcmp(mm->sel, "setComputePipelineState:") == 0)
            pipe = mm->obj->kernel;
        if (strcmp(mm->sel, "setBytes:length:atIndex:") == 0) {
            ck_assert_uint_eq(mm->b, 0);
            have_pc = 1;
        }
        if (strcmp(mm->sel, "setBuffer:offset:atIndex:") == 0) {
            ck_assert(mm->b >= 1 && mm->b <= 5);
            ck_assert_uint_eq(mm->a % 256, 0);
            bound |= 1u << mm->b;
        }
        if (strcmp(mm->sel, "dispatchThreadgroups:threadsPerThreadgroup:") != 0)
            continue;
        ck_assert_int_lt(n_dispatch, (int)(sizeof want / sizeof want[0]));
        ck_assert_msg(pipe == want[n_dispatch], "dispatch %d: kernel %s, expected %s", n_dispatch,
                      pipe >= 0 ? mtl_msl_table[pipe].name : "none", mtl_msl_table[want[n_dispatch]].name);
        ck_assert(have_pc);
        ck_assert_msg(bound == 0x3e, "dispatch %d: bindings 1..5 not all set (%#x)", n_dispatch, bound);
        bound = 0;
        ck_assert_uint_eq(mm->threads.width, gpu_kernel_threads((gpu_kernel)pipe));
        ck_assert_uint_eq(mm->threads.height * mm->threads.depth, 1);
        have_pc = 0;
        n_dispatch++;
    }
    ck_assert_int_eq(n_dispatch, (int)(sizeof want / sizeof want[0]));
    /* the push constants are the plan's: the q matmul reads 64 columns into 64 rows, GPU_MV_ROWS a group */
    for (int i = first, nd = 0; i < n_log; i++) {
        if (strcmp(log_[i].sel, "setBytes:length:atIndex:") == 0 && nd++ == 2) {
            ck_assert_uint_eq(log_[i].pc.rows, HEADS * HD);
            ck_assert_uint_eq(log_[i].pc.cols, D);
        }
        if (strcmp(log_[i].sel, "dispatchThreadgroups:threadsPerThreadgroup:") == 0 && nd == 3)
            ck_assert_uint_eq(log_[i].groups.width, HEADS * HD / GPU_MV_ROWS);
    }
    /* the read waits, once per command buffer in flight, and copies from the shared buffer */
    ((float *)((mtl_buf *)x->dev)->host)[5] = 2.5f; /* as if the GPU had written it */
    ck_assert_int_eq(h.impl->read(h.ctx, out, backend_at(x, 0), D), 0);
    ck_assert_int_eq(count("waitUntilCompleted"), 1);
    ck_assert_float_eq(out[5], 2.5f);
    /* a second forward: one more command buffer; pipelines are not compiled again */
    first = count("newLibraryWithSource:options:error:");
    ck_assert_int_eq(h.impl->run(h.ctx, s.ops, s.n), 0);
    ck_assert_int_eq(count("commit"), 2);
    ck_assert_int_eq(count("newLibraryWithSource:options:error:"), first);
    ck_assert_int_eq(count("waitUntilCompleted"), 1);
    ck_assert_int_eq(h.impl->read(h.ctx, out, backend_at(x, 0), D), 0);
    ck_assert_int_eq(count("waitUntilCompleted"), 2);

    for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++)
        h.impl->weight_free(h.ctx, ws[i]);
    backend_buf *bufs[] = {x, y, q, k, kc, vc, g, u, big};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        h.impl->buf_free(h.ctx, bufs[i]);
        free(bufs[i]);
    }
    h.impl->close(h.ctx);
    /* every object the host made or retained was released: command buffers, buffers, pipelines */
    for (int i = 0; i < n_objs; i++)
        if (strcmp(objs[i].cls, "MTLComputeCommandEncoder") != 0 && strcmp(objs[i].cls, "NSString") != 0 &&
            strcmp(objs[i].cls, "MTLCommandBuffer") != 0)
            ck_assert_msg(objs[i].refs == 0, "%s left with %d references", objs[i].cls, objs[i].refs);
        else if (strcmp(objs[i].cls, "MTLCommandBuffer") == 0) /* autoreleased, and retained once */
            ck_assert_int_eq(objs[i].refs, 1);
    munmap(m, n);
}
END_TEST

/* An encoder block's own ops (issue 34) through the Metal host: the plans gpu.c shares with
 * Vulkan, where test_vulkan runs them. LAYER_NORM with its bias at buffer(5) (the bias's bytes,
 * a page past the weight's in the same mapping) and without one (mode 1, buffer(5) the dummy),
 * GELU as the element kernel's mode 10, and bidirectional ATTENTION as attention's mode 1. */
START_TEST(an_encoder_block_s_ops_are_encoded_as_planned)
{
    host h = host_open();
    enum { D = 64, N = 3, HEADS = 4, HD = 16 };
    size_t pg = page(), n = 4 * pg;
    uint8_t *m = map_new(n);
    backend_tensor tw = tensor_at("ln.weight", GGML_TYPE_F32, m, n, 0, 0, D);
    backend_tensor tb = tensor_at("ln.bias", GGML_TYPE_F32, m, n, pg, 0, D);
    backend_weight ww = {.t = &tw}, wb = {.t = &tb};
    backend_buf *x = buf_new(&h, N * D, BACKEND_F32), *y = buf_new(&h, N * D, BACKEND_F32);
    backend_buf *k = buf_new(&h, N * D, BACKEND_F32), *v = buf_new(&h, N * D, BACKEND_F32);
    backend_op ops[4];
    backend_seq s = {.ops = ops, .cap = 4};
    static const struct {
        int kernel;
        uint32_t mode;
    } want[] = {{GPU_K_NORM, 2}, {GPU_K_NORM, 1}, {GPU_K_ELEM, 10}, {GPU_K_ATT_F32, 1}};
    struct {
        mobj *obj;
        uint64_t off;
    } bound[6];
    gpu_push pc;
    int first, nd = 0, pipe = -1;

    ck_assert(h.impl->supports(h.ctx, BACKEND_OP_LAYER_NORM) && h.impl->supports(h.ctx, BACKEND_OP_GELU) &&
              h.impl->supports(h.ctx, BACKEND_OP_ATTENTION_BIDIR));
    ck_assert_msg(h.impl->weight_new(h.ctx, &ww) == 0, "%s", ms_err_msg());
    ck_assert_msg(h.impl->weight_new(h.ctx, &wb) == 0, "%s", ms_err_msg());
    backend_seq_layer_norm(&s, backend_at(y, 0), backend_at(x, 0), &ww, &wb, N, D, 1e-12f);
    backend_seq_layer_norm(&s, backend_at(x, 0), backend_at(x, 0), &ww, NULL, N, D, 1e-5f);
    backend_seq_gelu(&s, backend_at(y, 0), N * D);
    backend_seq_attention_bidir(&s, backend_at(x, 0), backend_at(y, 0), backend_at(k, 0), backend_at(v, 0), N, HEADS,
                                HEADS, HD, 0.0f);
    first = n_log;
    ck_assert_msg(h.impl->run(h.ctx, s.ops, s.n) == 0, "%s", ms_err_msg());
    memset(bound, 0, sizeof bound);
    memset(&pc, 0, sizeof pc);
    for (int i = first; i < n_log; i++) {
        msg *mm = &log_[i];
        if (strcmp(mm->sel, "setComputePipelineState:") == 0)
            pipe = mm->obj->kernel;
        else if (strcmp(mm->sel, "setBytes:length:atIndex:") == 0)
            pc = mm->pc;
        else if (strcmp(mm->sel, "setBuffer:offset:atIndex:") == 0) {
            bound[mm->b].obj = mm->obj;
            bound[mm->b].off = mm->a;
        } else if (strcmp(mm->sel, "dispatchThreadgroups:threadsPerThreadgroup:") == 0) {
            ck_assert_int_lt(nd, 4);
            ck_assert_msg(pipe == want[nd].kernel && pc.mode == want[nd].mode, "dispatch %d: kernel %d mode %u", nd,
                          pipe, pc.mode);
            if (nd == 0) {   /* the bias: a page past the weight in the one buffer of their mapping */
                ck_assert_ptr_eq(bound[5].obj, bound[3].obj);
                ck_assert_uint_eq(bound[5].off + pc.b_off, bound[3].off + pc.w_off + pg);
                ck_assert_uint_eq(pc.stype, GGML_TYPE_F32);
            }
            if (nd == 1)
                ck_assert_ptr_ne(bound[5].obj, bound[3].obj);
            if (nd == 3)
                ck_assert_uint_eq((uint64_t)mm->groups.width * mm->groups.height, N * HEADS);
            nd++;
        }
    }
    ck_assert_int_eq(nd, 4);
    /* a window with bidir is refused before anything is encoded */
    ops[3].window = 2;
    first = count("commandBuffer");
    ck_assert_int_eq(h.impl->run(h.ctx, s.ops, s.n), MS_ERROR);
    ck_assert_int_eq(count("commandBuffer"), first);

    h.impl->weight_free(h.ctx, &ww);
    h.impl->weight_free(h.ctx, &wb);
    backend_buf *bufs[] = {x, y, k, v};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        h.impl->buf_free(h.ctx, bufs[i]);
        free(bufs[i]);
    }
    h.impl->close(h.ctx);
    munmap(m, n);
}
END_TEST

START_TEST(a_kernel_that_does_not_compile_fails_the_run_uncommitted)
{
    host h = host_open();
    backend_buf *x = buf_new(&h, 64, BACKEND_F32), *y = buf_new(&h, 64, BACKEND_F32);
    backend_op ops[1];
    backend_seq s = {.ops = ops, .cap = 1};

    fail_library = 1;
    backend_seq_add(&s, backend_at(x, 0), backend_at(y, 0), 64);
    ck_assert_int_eq(h.impl->run(h.ctx, s.ops, s.n), MS_EIO);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "metal: kernel elementwise does not compile"));
    ck_assert_int_eq(count("commit"), 0);
    ck_assert_int_eq(pools, 0);
    h.impl->buf_free(h.ctx, x);
    h.impl->buf_free(h.ctx, y);
    free(x);
    free(y);
    h.impl->close(h.ctx);
}
END_TEST

START_TEST(types_the_kernels_cannot_run_are_refused_by_name)
{
    host h = host_open();
    size_t n = page();
    uint8_t *m = map_new(n);
    backend_tensor t = tensor_at("blk.0.ffn_up.weight", GGML_TYPE_IQ4_NL, m, n, 0, 4, 32);
    backend_weight w = {.t = &t};

    ck_assert_int_eq(h.impl->weight_new(h.ctx, &w), MS_EUNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "tensor 'blk.0.ffn_up.weight': type IQ4_NL is not supported by the metal backend"));
    ck_assert_int_eq(count("newBufferWithBytesNoCopy:length:options:deallocator:"), 0);
    h.impl->close(h.ctx);
    munmap(m, n);
}
END_TEST

START_TEST(auto_never_takes_metal_and_no_device_is_a_clear_error)
{
    const backend_impl *impl;
    void *ctx;

    mock_reset();
    ck_assert_int_eq(metal_backend_new(&impl, &ctx, NULL, 0), MS_EUNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "only when asked for by name"));
    ck_assert_int_eq(n_objs, 0);
    no_device = 1;
    ck_assert_int_eq(metal_backend_new(&impl, &ctx, NULL, 1), MS_EUNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "no Metal device"));
    no_device = 0;
    ck_assert_int_eq(metal_backend_new(&impl, &ctx, NULL, 1), 0);
    ck_assert_str_eq(impl->describe(ctx), "metal: Mock GPU (unified memory, weights wrapped in place)");
    impl->close(ctx);
}
END_TEST

/* The host's threadgroup sizes are the kernels' own (the MSL keeps the GLSL's local_size), and the
 * embedded MSL is in gpu_kernel's order. */
START_TEST(threadgroup_sizes_and_order_are_the_msl_s)
{
    static const char *const types[] = {"0", "1", "30", "8", "2", "3", "6", "7", "12", "13", "14", "68", "72", "39"};
    char want[64], line[96];

    for (int k = 0; k < GPU_K_COUNT; k++) {
        if (k < GPU_K_NORM)
            snprintf(want, sizeof want, "%s_%s", k < GPU_K_MM ? "mv" : k < GPU_K_EMBED ? "mm" : "embed",
                     types[k % GPU_T_COUNT]);
        else if (k >= GPU_K_MI)
            snprintf(want, sizeof want, "mi_%s", types[k - GPU_K_MI]);
        else
            snprintf(want, sizeof want, "%s",
                     (const char *[]){"norm", "rope", "elementwise", "att_f32", "att_f16", "route"}[k - GPU_K_NORM]);
        ck_assert_str_eq(mtl_msl_table[k].name, want);
        ck_assert_uint_eq(strlen(mtl_msl_table[k].text), mtl_msl_table[k].len);
        snprintf(line, sizeof line, "gl_WorkGroupSize [[maybe_unused]] = uint3(%uu, 1u, 1u);",
                 gpu_kernel_threads((gpu_kernel)k));
        ck_assert_msg(strstr(mtl_msl_table[k].text, line), "%s: no '%s'", want, line);
    }
}
END_TEST
#endif

Suite *metal_suite(void)
{
    Suite *s = suite_create("metal");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, metal_off_macos_is_a_clear_error);
#ifdef MSTORE_METAL_MOCK
    tcase_add_test(tc, every_mapping_is_wrapped_without_copy_once);
    tcase_add_test(tc, mapping_past_the_largest_buffer_is_wrapped_in_windows);
    tcase_add_test(tc, a_forward_is_one_command_buffer_and_only_the_read_waits);
    tcase_add_test(tc, an_encoder_block_s_ops_are_encoded_as_planned);
    tcase_add_test(tc, a_kernel_that_does_not_compile_fails_the_run_uncommitted);
    tcase_add_test(tc, types_the_kernels_cannot_run_are_refused_by_name);
    tcase_add_test(tc, auto_never_takes_metal_and_no_device_is_a_clear_error);
    tcase_add_test(tc, threadgroup_sizes_and_order_are_the_msl_s);
#else
    printf("test_metal: the Metal host's mock tests run only where it is built with the mock (Linux with "
           "glslc and spirv-cross)\n");
#endif
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(metal_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
