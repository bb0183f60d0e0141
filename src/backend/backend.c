/* backend.c: choosing a device, and the bookkeeping every backend shares: the buffers and weights
 * it made (freed together at close) and the op-sequence builders. The devices themselves are in
 * src/cpu, src/vulkan, src/metal behind backend_impl. */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "backend/backend.h"
#include "cpu/cpu.h"
#include "util/util.h"
#ifdef MSTORE_HAVE_VULKAN
#include "vulkan/vulkan.h"
#endif
#ifdef MSTORE_HAVE_METAL
#include "metal/metal.h"
#endif

struct backend {
    const backend_impl *impl;
    void *ctx;
    backend_buf **bufs;
    size_t n_bufs, cap_bufs;
    backend_weight **weights;
    size_t n_weights, cap_weights;
    int reserved;   /* backend_reserve succeeded: the scratch every run uses exists */
};

/* The devices this build knows, in the order "auto" tries them. A device that is not built in
 * has no open function. */
typedef int (*open_fn)(const backend_impl **impl, void **ctx, const backend_opts *o, int by_name);

static int open_cpu(const backend_impl **impl, void **ctx, const backend_opts *o, int by_name)
{
    (void)by_name;
    return cpu_backend_new(impl, ctx, o);
}

#ifdef MSTORE_HAVE_VULKAN
#define OPEN_VULKAN vulkan_backend_new
#else
#define OPEN_VULKAN NULL
#endif

#ifdef MSTORE_HAVE_METAL
#define OPEN_METAL metal_backend_new
#else
#define OPEN_METAL NULL
#endif
/* Why a device without an open function is absent. */
#if defined(__APPLE__)
#define NO_METAL "not built into this mstore"
#else
#define NO_METAL "Metal exists only on macOS"
#endif

static const struct {
    const char *name;
    open_fn open;
    const char *absent;
} devices[] = {
    { "vulkan", OPEN_VULKAN, "not built into this mstore" },
    { "metal", OPEN_METAL, NO_METAL },
    { "cpu", open_cpu, NULL },
};
#define N_DEVICES (sizeof devices / sizeof devices[0])

static int open_named(backend *b, const char *name, const backend_opts *o)
{
    for (size_t i = 0; i < N_DEVICES; i++) {
        if (strcasecmp(name, devices[i].name) != 0)
            continue;
        if (!devices[i].open)
            return ms_err(MS_EUNSUPPORTED, "device '%s': %s", devices[i].name, devices[i].absent);
        return devices[i].open(&b->impl, &b->ctx, o, 1);
    }
    return ms_err(MS_EINVALID, "device '%s': unknown; expected auto, cpu, vulkan or metal", name);
}

/* "auto": each GPU in turn, asked not to take a software implementation; the CPU when none opens.
 * With `verbose`, one line says why each GPU was passed over. */
static int open_auto(backend *b, const backend_opts *o)
{
    for (size_t i = 0; i < N_DEVICES; i++) {
        if (strcmp(devices[i].name, "cpu") == 0)
            return open_cpu(&b->impl, &b->ctx, o, 0);
        if (!devices[i].open) {
            if (o && o->verbose)
                fprintf(stderr, "mstore: device %s: %s\n", devices[i].name, devices[i].absent);
            continue;
        }
        if (devices[i].open(&b->impl, &b->ctx, o, 0) == 0)
            return 0;
        if (o && o->verbose)
            fprintf(stderr, "mstore: device %s: %s; using the next\n", devices[i].name, ms_err_msg());
    }
    return ms_err(MS_EUNSUPPORTED, "no device could be opened");
}

int backend_open(backend **out, const char *device, const backend_opts *o)
{
    backend *b = calloc(1, sizeof *b);
    const char *env = getenv("MSTORE_DEVICE");
    int rc;

    *out = NULL;
    if (!b)
        return ms_err(MS_ENOMEM, "out of memory");
    if ((!device || !*device || strcasecmp(device, "auto") == 0) && env && *env)
        device = env;
    if (!device || !*device || strcasecmp(device, "auto") == 0)
        rc = open_auto(b, o);
    else
        rc = open_named(b, device, o);
    if (rc < 0) {
        free(b);
        return rc;
    }
    if (o && o->verbose)
        fprintf(stderr, "mstore: device %s\n", b->impl->describe(b->ctx));
    *out = b;
    return 0;
}

const char *backend_name(const backend *b) { return b->impl->name; }
const char *backend_describe(const backend *b) { return b->impl->describe(b->ctx); }

void backend_close(backend *b)
{
    if (!b)
        return;
    for (size_t i = 0; i < b->n_weights; i++) {
        b->impl->weight_free(b->ctx, b->weights[i]);
        free(b->weights[i]);
    }
    for (size_t i = 0; i < b->n_bufs; i++) {
        if (b->bufs[i]) {
            b->impl->buf_free(b->ctx, b->bufs[i]);
            free(b->bufs[i]);
        }
    }
    b->impl->close(b->ctx);
    MS_FREE_ALL(b->weights, b->bufs, b);
}

int backend_reserve(backend *b, const backend_limits *l)
{
    int rc;

    assert(b && l && l->max_rows > 0 && l->max_cols > 0 && l->n_ctx > 0 && l->heads > 0);
    if ((rc = b->impl->reserve(b->ctx, l)) == 0)
        b->reserved = 1;
    return rc;
}

/* Room for one more pointer in a grow-array. */
static int grow(void ***arr, size_t n, size_t *cap)
{
    if (n < *cap)
        return 0;
    size_t ncap = *cap ? 2 * *cap : 16;
    void **p = realloc(*arr, ncap * sizeof *p);
    if (!p)
        return ms_err(MS_ENOMEM, "out of memory");
    *arr = p;
    *cap = ncap;
    return 0;
}

int backend_buf_new(backend_buf **out, backend *b, size_t n, int dtype, const char *what)
{
    backend_buf *buf = calloc(1, sizeof *buf);
    int rc;

    assert(dtype == BACKEND_F32 || dtype == BACKEND_F16 || dtype == BACKEND_I32);
    *out = NULL;
    if (!buf || grow((void ***)&b->bufs, b->n_bufs, &b->cap_bufs) < 0) {
        free(buf);
        return ms_err(MS_ENOMEM, "out of memory for buffer '%s'", what);
    }
    buf->n = n;
    buf->dtype = dtype;
    if ((rc = b->impl->buf_new(b->ctx, buf)) < 0) {
        free(buf);
        return ms_err_ctx("buffer '%s' (%zu elements)", what, n);
    }
    b->bufs[b->n_bufs++] = buf;
    *out = buf;
    return 0;
}

void backend_buf_free(backend *b, backend_buf *buf)
{
    if (!buf)
        return;
    for (size_t i = 0; i < b->n_bufs; i++) {
        if (b->bufs[i] == buf) {
            b->impl->buf_free(b->ctx, buf);
            free(buf);
            b->bufs[i] = b->bufs[--b->n_bufs];
            return;
        }
    }
}

int backend_weight_import(const backend_weight **out, backend *b, const backend_tensor *t)
{
    backend_weight *w;
    int rc;

    *out = NULL;
    for (size_t i = 0; i < b->n_weights; i++) {   /* tied embeddings: one import serves both uses */
        if (b->weights[i]->t == t) {
            *out = b->weights[i];
            return 0;
        }
    }
    w = calloc(1, sizeof *w);
    if (!w || grow((void ***)&b->weights, b->n_weights, &b->cap_weights) < 0) {
        free(w);
        return ms_err(MS_ENOMEM, "out of memory");
    }
    w->t = t;
    if ((rc = b->impl->weight_new(b->ctx, w)) < 0) {
        free(w);
        return rc;
    }
    b->weights[b->n_weights++] = w;
    *out = w;
    return 0;
}

int backend_tensor_row(float *out, const backend_tensor *t, uint64_t row)
{
    if (!cpu_type_supported(t->type))
        return ms_err(MS_EUNSUPPORTED, "tensor '%s': type %s cannot be read as rows", t->name,
                      ggml_type_name(t->type) ? ggml_type_name(t->type) : "?");
    cpu_tensor_row(out, t, row);
    return 0;
}

int backend_run(backend *b, const backend_seq *s)
{
    /* The contract's order (backend.h): reserve sizes the scratch, then sequences run. */
    assert(b && s && b->reserved);
    if (s->overflow)
        return ms_err(MS_ERROR, "internal error: more ops than the sequence's capacity of %zu", s->cap);
    for (size_t i = 0; i < s->n; i++) {   /* the decoder asked at open; this keeps a slip from running wrong */
        const backend_op *op = &s->ops[i];
        int att_ex = op->kind == BACKEND_OP_ATTENTION && (op->window || op->scale != 0 || op->ring);
        /* a bidirectional op's scale is part of ATTENTION_BIDIR: an encoder asks for that kind alone */
        backend_op_kind k = op->kind == BACKEND_OP_ATTENTION && op->bidir             ? BACKEND_OP_ATTENTION_BIDIR
                          : op->kind == BACKEND_OP_ATTENTION && op->sinks            ? BACKEND_OP_ATTENTION_SINKS
                          : att_ex                                                  ? BACKEND_OP_ATTENTION_WINDOW
                          : op->kind == BACKEND_OP_RMS_NORM && op->w_offset != 0 ? BACKEND_OP_RMS_NORM_OFFSET
                          : op->kind == BACKEND_OP_MOE_ROUTE && op->route >= BACKEND_ROUTE_SOFTMAX_GROUPED
                              ? BACKEND_OP_MOE_ROUTE_GROUPED
                              : op->kind;
        if (!backend_supports(b, k))
            return ms_err(MS_EUNSUPPORTED, "op %s is not supported by device %s", backend_op_name(k),
                          b->impl->describe(b->ctx));
    }
    return b->impl->run(b->ctx, s->ops, s->n);
}

int backend_read(backend *b, float *dst, backend_ref src, size_t n)
{
    assert(b && dst && src.buf);
    if (src.buf->dtype != BACKEND_F32 || src.off > src.buf->n || n > src.buf->n - src.off)
        return ms_err(MS_EINVALID, "read of %zu elements at %zu: outside the buffer of %zu", n, src.off, src.buf->n);
    return b->impl->read(b->ctx, dst, src, n);
}

int backend_devices(backend_device_info **out, size_t *n_out, char *why, size_t why_len)
{
    backend_device_info *d = calloc(1, sizeof *d);
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);

    *out = NULL;
    *n_out = 0;
    if (!d)
        return ms_err(MS_ENOMEM, "out of memory");
    /* a bad $MSTORE_CPU is refused here as by run and bench, not listed as the best path */
    int rc = cpu_path_select("auto");
    if (rc < 0) {
        free(d);
        return rc;
    }
    snprintf(d->name, sizeof d->name, "cpu (%s)", cpu_path_name());
    snprintf(d->kind, sizeof d->kind, "cpu");
    snprintf(d->api, sizeof d->api, "cpu");
    d->memory = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
    d->host_import = 1;
    *out = d;
    *n_out = 1;
    if (why && why_len)
        snprintf(why, why_len, "no GPU backend is built into this mstore");
#ifdef MSTORE_HAVE_VULKAN
    if (why && why_len)
        *why = 0;
    if (vulkan_devices_list(out, n_out, why, why_len) < 0) {
        free(*out);
        *out = NULL;
        *n_out = 0;
        return MS_ENOMEM;
    }
#endif
#ifdef MSTORE_HAVE_METAL
    if (metal_devices_list(out, n_out, NULL, 0) < 0) {
        free(*out);
        *out = NULL;
        *n_out = 0;
        return MS_ENOMEM;
    }
#endif
    return 0;
}

/* ---------------------------------------------------------------- op sequences */

/* The decoder sized the sequence for its own ops at open, so running out is its bug: the op goes
 * to a sink, and backend_run refuses the sequence instead of running part of it. */
/* Record one op, its unnamed fields zero; past the capacity, mark the sequence as overflowed. */
static void push(backend_seq *s, backend_op op)
{
    if (s->n < s->cap)
        s->ops[s->n++] = op;
    else
        s->overflow = 1;
}

void backend_seq_embed(backend_seq *s, backend_ref dst, const backend_weight *w, const int32_t *tokens, int n,
                       int cols)
{
    push(s, (backend_op){ .kind = BACKEND_OP_EMBED, .dst = dst, .w = w, .tokens = tokens, .n = n, .cols = cols });
}

void backend_seq_rms_norm(backend_seq *s, backend_ref dst, backend_ref src, const backend_weight *w, int n, int cols,
                          float eps)
{
    push(s, (backend_op){ .kind = BACKEND_OP_RMS_NORM, .dst = dst, .src = src, .w = w, .n = n, .cols = cols,
                          .eps = eps });
}

void backend_seq_matmul(backend_seq *s, backend_ref dst, backend_ref src, const backend_weight *w, int n)
{
    push(s, (backend_op){ .kind = BACKEND_OP_MATMUL, .dst = dst, .src = src, .w = w, .n = n,
                          .rows = (int)w->t->shape[0], .cols = (int)w->t->shape[w->t->n_dims - 1] });
}

void backend_seq_add_row(backend_seq *s, backend_ref dst, const backend_weight *w, int n, int cols)
{
    push(s, (backend_op){ .kind = BACKEND_OP_ADD_ROW, .dst = dst, .w = w, .n = n, .cols = cols });
}

void backend_seq_rope(backend_seq *s, backend_ref dst, int n, int heads, int head_dim, int n_rot, int pos0,
                      const double *freqs, int interleaved)
{
    push(s, (backend_op){ .kind = BACKEND_OP_ROPE, .dst = dst, .n = n, .heads = heads, .head_dim = head_dim,
                          .n_rot = n_rot, .pos0 = pos0, .freqs = freqs, .interleaved = interleaved });
}

void backend_seq_store(backend_seq *s, backend_ref dst, backend_ref src, int n)
{
    push(s, (backend_op){ .kind = BACKEND_OP_STORE, .dst = dst, .src = src, .n = n });
}

void backend_seq_attention(backend_seq *s, backend_ref dst, backend_ref q, backend_ref k, backend_ref v, int n,
                           int pos0, int heads, int kv_heads, int head_dim)
{
    push(s, (backend_op){ .kind = BACKEND_OP_ATTENTION, .dst = dst, .src = q, .k = k, .v = v, .n = n, .pos0 = pos0,
                          .heads = heads, .kv_heads = kv_heads, .head_dim = head_dim });
}

void backend_seq_swiglu(backend_seq *s, backend_ref dst, backend_ref src, int n)
{
    push(s, (backend_op){ .kind = BACKEND_OP_SWIGLU, .dst = dst, .src = src, .n = n });
}

void backend_seq_add(backend_seq *s, backend_ref dst, backend_ref src, int n)
{
    push(s, (backend_op){ .kind = BACKEND_OP_ADD, .dst = dst, .src = src, .n = n });
}

void backend_seq_attention_ex(backend_seq *s, backend_ref dst, backend_ref q, backend_ref k, backend_ref v, int n,
                              int pos0, int heads, int kv_heads, int head_dim, int window, float scale, int ring)
{
    backend_seq_attention(s, dst, q, k, v, n, pos0, heads, kv_heads, head_dim);
    if (!s->overflow) {
        s->ops[s->n - 1].window = window;
        s->ops[s->n - 1].scale = scale;
        s->ops[s->n - 1].ring = ring;
    }
}

void backend_seq_rms_norm_ex(backend_seq *s, backend_ref dst, backend_ref src, const backend_weight *w, int n, int cols,
                             float eps, float w_offset)
{
    backend_seq_rms_norm(s, dst, src, w, n, cols, eps);
    if (!s->overflow)
        s->ops[s->n - 1].w_offset = w_offset;
}

void backend_seq_moe_route(backend_seq *s, backend_ref wts_dst, backend_ref ids, backend_ref logits, int n,
                           int n_expert, int n_used, int route)
{
    push(s, (backend_op){ .kind = BACKEND_OP_MOE_ROUTE, .dst = wts_dst, .ids = ids, .src = logits, .n = n,
                          .n_expert = n_expert, .n_used = n_used, .route = route });
}

void backend_seq_matmul_id(backend_seq *s, backend_ref dst, backend_ref src, const backend_weight *w, backend_ref ids,
                           int n, int n_used, int src_bcast)
{
    push(s, (backend_op){ .kind = BACKEND_OP_MATMUL_ID, .dst = dst, .src = src, .w = w, .ids = ids, .n = n,
                          .n_used = n_used, .src_bcast = src_bcast, .n_expert = (int)w->t->shape[0],
                          .rows = (int)w->t->shape[1], .cols = (int)w->t->shape[2] });
}

void backend_seq_moe_sum(backend_seq *s, backend_ref dst, backend_ref src, backend_ref wts, int n, int n_used,
                         int cols)
{
    push(s, (backend_op){ .kind = BACKEND_OP_MOE_SUM, .dst = dst, .src = src, .wts = wts, .n = n, .n_used = n_used,
                          .cols = cols });
}

void backend_seq_gated_add(backend_seq *s, backend_ref dst, backend_ref src, backend_ref gate, int n, int cols)
{
    push(s, (backend_op){ .kind = BACKEND_OP_GATED_ADD, .dst = dst, .src = src, .wts = gate, .n = n, .cols = cols });
}

void backend_seq_geglu(backend_seq *s, backend_ref dst, backend_ref src, int n)
{
    push(s, (backend_op){ .kind = BACKEND_OP_GEGLU, .dst = dst, .src = src, .n = n });
}

void backend_seq_scale(backend_seq *s, backend_ref dst, int n, float scale)
{
    push(s, (backend_op){ .kind = BACKEND_OP_SCALE, .dst = dst, .n = n, .scale = scale });
}

void backend_seq_softcap(backend_seq *s, backend_ref dst, int n, float cap)
{
    push(s, (backend_op){ .kind = BACKEND_OP_SOFTCAP, .dst = dst, .n = n, .scale = cap });
}

void backend_seq_layer_norm(backend_seq *s, backend_ref dst, backend_ref src, const backend_weight *w,
                            const backend_weight *b, int n, int cols, float eps)
{
    push(s, (backend_op){ .kind = BACKEND_OP_LAYER_NORM, .dst = dst, .src = src, .w = w, .w2 = b, .n = n,
                          .cols = cols, .eps = eps });
}

void backend_seq_gelu(backend_seq *s, backend_ref dst, int n)
{
    push(s, (backend_op){ .kind = BACKEND_OP_GELU, .dst = dst, .n = n });
}

void backend_seq_attention_bidir(backend_seq *s, backend_ref dst, backend_ref q, backend_ref k, backend_ref v, int n,
                                 int heads, int kv_heads, int head_dim, float scale)
{
    backend_seq_attention(s, dst, q, k, v, n, 0, heads, kv_heads, head_dim);
    if (!s->overflow) {
        s->ops[s->n - 1].scale = scale;
        s->ops[s->n - 1].bidir = 1;
    }
}

void backend_seq_attention_sinks(backend_seq *s, backend_ref dst, backend_ref q, backend_ref k, backend_ref v, int n,
                                 int pos0, int heads, int kv_heads, int head_dim, int window, float scale, int ring,
                                 const backend_weight *sinks)
{
    backend_seq_attention_ex(s, dst, q, k, v, n, pos0, heads, kv_heads, head_dim, window, scale, ring);
    if (!s->overflow)
        s->ops[s->n - 1].sinks = sinks;
}

void backend_seq_add_row_id(backend_seq *s, backend_ref dst, const backend_weight *w, backend_ref ids, int n,
                            int n_used)
{
    push(s, (backend_op){ .kind = BACKEND_OP_ADD_ROW_ID, .dst = dst, .w = w, .ids = ids, .n = n, .n_used = n_used,
                          .n_expert = (int)w->t->shape[0], .rows = (int)w->t->shape[1] });
}

void backend_seq_swiglu_oai(backend_seq *s, backend_ref dst, backend_ref src, int n, float alpha, float limit)
{
    push(s, (backend_op){ .kind = BACKEND_OP_SWIGLU_OAI, .dst = dst, .src = src, .n = n, .alpha = alpha,
                          .limit = limit });
}

void backend_seq_moe_route_grouped(backend_seq *s, backend_ref wts_dst, backend_ref ids, backend_ref logits, int n,
                                   int n_expert, int n_used, int route, const backend_weight *bias, int n_group,
                                   int topk_group, int norm, float scale)
{
    push(s, (backend_op){ .kind = BACKEND_OP_MOE_ROUTE, .dst = wts_dst, .ids = ids, .src = logits, .n = n,
                          .n_expert = n_expert, .n_used = n_used, .route = route, .w = bias, .n_group = n_group,
                          .topk_group = topk_group, .norm = norm, .scale = scale });
}

void backend_seq_matmul_heads(backend_seq *s, backend_ref dst, backend_ref src, const backend_weight *w, int n)
{
    push(s, (backend_op){ .kind = BACKEND_OP_MATMUL_HEADS, .dst = dst, .src = src, .w = w, .n = n,
                          .heads = (int)w->t->shape[0], .rows = (int)w->t->shape[1], .cols = (int)w->t->shape[2] });
}

void backend_seq_store_rows(backend_seq *s, backend_ref dst, backend_ref src, int n, int cols, int stride)
{
    push(s, (backend_op){ .kind = BACKEND_OP_STORE_ROWS, .dst = dst, .src = src, .n = n, .cols = cols,
                          .stride = stride });
}

/* ---------------------------------------------------------------- capabilities */

static const char *const op_names[BACKEND_OP_COUNT] = {
    "embed", "rms_norm", "matmul", "add_row", "rope", "store", "attention", "swiglu", "add",
    "moe_route", "matmul_id", "moe_sum", "gated_add", "geglu", "scale", "softcap", "layer_norm", "gelu",
    "add_row_id", "swiglu_oai", "matmul_heads", "store_rows", "attention with a window",
    "rms_norm with a weight offset", "bidirectional attention", "attention with sinks", "grouped moe_route",
};

const char *backend_op_name(backend_op_kind kind)
{
    return (unsigned)kind < BACKEND_OP_COUNT ? op_names[kind] : "?";
}

int backend_supports(backend *b, backend_op_kind kind)
{
    if ((unsigned)kind >= BACKEND_OP_COUNT)
        return 0;
    if (kind <= BACKEND_OP_ADD)
        return 1;
    return b->impl->supports ? b->impl->supports(b->ctx, kind) : 0;
}
