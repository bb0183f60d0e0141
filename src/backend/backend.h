/* backend.h: the seam between a decoder and the device that runs it; the whole surface of
 * src/backend.
 *
 * A decoder (src/runtime) never touches device memory. It asks a backend for buffers and for
 * weights, then describes each forward pass as a sequence of ops over them and hands the whole
 * sequence to backend_run. The backend owns everything the ops touch:
 *   buffers   activations, KV cache, logits: f32 or f16 elements, zeroed at creation, alive until
 *             backend_buf_free / backend_close. The CPU backend gives host memory; a GPU backend
 *             gives device memory the host never sees.
 *   weights   backend_tensor views of the mmapped blobs, as the device reads them: the CPU uses
 *             the mapping in place; a GPU imports the mapping (no copy) or uploads it once.
 *   scratch   whatever its kernels need (quantized activations, attention rows), sized once by
 *             backend_reserve, so that a forward pass allocates nothing.
 *
 * Invariants:
 *   1. backend_run executes the ops in order, as if one after another; a GPU backend records
 *      them into one submission and does not wait for it. Only backend_read waits, and it is
 *      the one way results reach the host: a decoder reads the logits and nothing else.
 *   2. Every op's arithmetic is defined below, per kind. The CPU backend is the definition (its
 *      results are bit for bit those of the CPU decoder before this seam existed); another
 *      backend meets it within the tolerance its tests state. On every backend a row's result
 *      depends only on that row's inputs, bit for bit: not on n, on the other rows, or on where
 *      the row falls in the op (runtime.h's batching rests on it; test_vulkan and
 *      test_runtime_batch check it on the GPU).
 *   3. A weight type a backend cannot run is refused at backend_weight_import, with a message
 *      naming the tensor and its type, never at run time and never with wrong output.
 *   4. Fields of backend_op past those of the nine original kinds (window, scale, w_offset, ids,
 *      wts, n_expert, ...) are zero unless set, and zero keeps the original arithmetic.
 *
 * Implementations: src/cpu (always present), src/vulkan, src/metal; backend_open picks one by
 * name. New decoders use only this header; new devices implement backend_impl below. */
#ifndef MSTORE_BACKEND_H
#define MSTORE_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "format/format.h"   /* GGML_TYPE_*: the ids of weight types */

/* A weight as a view into host memory: what a weight provider (src/runtime's) fills from the
 * mapped blobs, and what backend_weight_import reads. It is the seam's type, so that the
 * devices below compile without the store, the tokenizer or the decoder. */
typedef struct backend_tensor {
    const char *name;     /* canonical name, "model.layers.0.self_attn.q_proj.weight" */
    int type;             /* GGML_TYPE_F32, _F16, _BF16, _Q8_0, _Q4_0, ... */
    int n_dims;           /* 1..4 */
    uint64_t shape[4];    /* Hugging Face order: shape[n_dims-1] is the contiguous row */
    const void *data;     /* view into a read-only mapping; valid until the weights close */
    uint64_t nbytes;
    /* BACKEND_TYPE_MLX only (import.h's combined blob): `data` holds each row's codes as one
     * little-endian bit stream of cols * bits bits; each group of group_size weights along the
     * row has one scale (and for affine formats one bias): scales / biases are [rows][cols /
     * group_size] of scale_dtype (an st_dtype). w = scale * q + bias (affine), else the fp
     * format's code times its scale (src/quant/quant.h). */
    const char *quant_type;   /* "int4", "int8", "nvfp4", "mxfp8", ...; NULL for ggml types */
    int bits, group_size, scale_dtype;
    const void *scales, *biases;
    /* The whole read-only mapping that data (and scales, biases) lie in: page-aligned, so that a
     * device that imports host memory can take the mapping once and use the tensor in place. */
    const void *map;
    uint64_t map_nbytes;
} backend_tensor;

/* The type id of MLX-quantized tensors: past every ggml type id. */
#define BACKEND_TYPE_MLX 64

typedef struct backend backend;

/* Element types of buffers. I32 holds expert ids (MOE_ROUTE's output, MATMUL_ID's input). */
enum { BACKEND_F32 = 0, BACKEND_F16 = 1, BACKEND_I32 = 2 };

/* A buffer the backend owns. `host` is set by backends whose memory the host can address (the
 * CPU): decoders must not use it; it is there for the backend's own ops and for tests. */
typedef struct backend_buf {
    size_t n;          /* elements */
    int dtype;         /* BACKEND_F32 or BACKEND_F16 */
    void *host;        /* CPU backend: the elements */
    void *dev;         /* device backends: their handle */
} backend_buf;

/* A weight the backend can read: the tensor it came from, and the backend's form of it. */
typedef struct backend_weight {
    const backend_tensor *t;   /* borrowed: valid while the weights are open */
    const float *vec;          /* CPU backend, 1-D weights: f32 values (a view, or a copy) */
    void *dev;                 /* device backends: their handle */
} backend_weight;

/* A place in a buffer: element `off` of `buf`. */
typedef struct backend_ref {
    backend_buf *buf;
    size_t off;
} backend_ref;

static inline backend_ref backend_at(backend_buf *buf, size_t off)
{
    backend_ref r = { buf, off };
    return r;
}

/* ---------------------------------------------------------------- ops
 * Shapes are row-major; `n` counts rows (usually tokens). Every src / dst is f32 unless said. */
typedef enum backend_op_kind {
    BACKEND_OP_EMBED,      /* dst[t][cols] = row tokens[t] of w (any weight type), t < n */
    BACKEND_OP_RMS_NORM,   /* dst[r][cols] = src[r] / sqrt(mean(src[r]^2) + eps) * w[cols], r < n;
                              dst may equal src. The mean is summed in double. */
    BACKEND_OP_MATMUL,     /* dst[t][rows] = src[t][cols] . w[rows][cols]^T, t < n */
    BACKEND_OP_ADD_ROW,    /* dst[t][cols] += w[cols] (a bias), t < n */
    BACKEND_OP_ROPE,       /* rotate dst[t][heads][head_dim] in place, t at position pos0 + t */
    BACKEND_OP_STORE,      /* dst[i] = src[i], i < n, converted to dst's dtype (f16: round to
                              nearest even) */
    BACKEND_OP_ATTENTION,  /* causal GQA attention, below */
    BACKEND_OP_SWIGLU,     /* dst[i] = silu(dst[i]) * src[i], i < n */
    BACKEND_OP_ADD,        /* dst[i] += src[i], i < n */
    /* ---- past the nine above: a backend runs them only where backend_supports says so */
    BACKEND_OP_MOE_ROUTE,  /* router logits to expert ids and weights, below */
    BACKEND_OP_MATMUL_ID,  /* a matmul through the experts `ids` selects, below */
    BACKEND_OP_MOE_SUM,    /* dst[t][cols] += sum_s wts[t][s] * src[t][s][cols], t < n, s < n_used; the sum over
                              s in order, in float */
    BACKEND_OP_GATED_ADD,  /* dst[t][cols] += sigmoid(gate[t]) * src[t][cols], t < n (gate: n floats at `wts`);
                              sigmoid(g) = 1 / (1 + expf(-g)) */
    BACKEND_OP_GEGLU,      /* dst[i] = gelu_tanh(dst[i]) * src[i], i < n; gelu_tanh(x) = 0.5 x (1 + tanhf(
                              0.7978845608 (x + 0.044715 x^3))), in float */
    BACKEND_OP_SCALE,      /* dst[i] *= scale, i < n */
    BACKEND_OP_SOFTCAP,    /* dst[i] = scale * tanhf(dst[i] / scale), i < n (logit soft-capping) */
    /* Encoders (BERT, nomic-bert): */
    BACKEND_OP_LAYER_NORM, /* dst[r][cols] = (src[r] - mean) / sqrt(var + eps) * w[cols] + w2[cols], r < n;
                              var the mean of squared deviations; mean and var summed in double, the
                              rest in float; w2 (the bias) may be NULL: none. dst may equal src. */
    BACKEND_OP_GELU,       /* dst[i] = 0.5 x (1 + erff(x / sqrt(2))), i < n, in float (BERT's exact GELU) */
    /* gpt-oss: */
    BACKEND_OP_ADD_ROW_ID, /* dst[t][s][rows] += w[ids[t][s]][rows], t < n, s < n_used: each slot's expert's bias
                              (w: [n_expert][rows] F32, a 2-D weight; rows = shape[1]) */
    BACKEND_OP_SWIGLU_OAI, /* g = fminf(dst[i], limit), u = fminf(fmaxf(src[i], -limit), limit);
                              dst[i] = g / (1 + expf(-alpha g)) * (u + 1), i < n, in float (gpt-oss's
                              clamped SwiGLU: alpha 1.702, limit 7) */
    /* DeepSeek V2/V3's multi-head latent attention (MLA): */
    BACKEND_OP_MATMUL_HEADS, /* dst[t][h][rows] = src[t][h][cols] . w[h][rows][cols]^T, t < n, h < heads: one
                              matrix per head (w a 3-D pack [heads][rows][cols], any weight type; each
                              product MATMUL's arithmetic). MLA's absorbed projections. */
    BACKEND_OP_STORE_ROWS, /* dst[t * stride + i] = src[t][i], t < n, i < cols (cols <= stride), converted
                              as STORE: rows written into wider rows (MLA's cache rows [k_pe | latent]) */
    /* Never in a sequence: parameters of the original kinds, asked for with backend_supports. */
    BACKEND_OP_ATTENTION_WINDOW,   /* ATTENTION with window, scale or ring set */
    BACKEND_OP_RMS_NORM_OFFSET,    /* RMS_NORM with w_offset set */
    BACKEND_OP_ATTENTION_BIDIR,    /* ATTENTION with bidir set (an encoder) */
    BACKEND_OP_ATTENTION_SINKS,    /* ATTENTION with sinks set (with or without window, scale, ring) */
    BACKEND_OP_MOE_ROUTE_GROUPED,  /* MOE_ROUTE with a grouped route (DeepSeek's) */
    BACKEND_OP_COUNT
} backend_op_kind;

/* MOE_ROUTE's normalizations (backend_op.route). */
enum {
    /* p = softmax(src[t][0..n_expert)) (in float, max subtracted, summed in double); the n_used
     * experts of largest p in descending order, ties to the lower id: ids[t][s]; dst[t][s] = p of
     * that expert. Mixtral's and Qwen-MoE's routing (HF: softmax, then top-k). */
    BACKEND_ROUTE_SOFTMAX_TOPK = 0,
    /* as above, then dst[t][s] /= sum over s of dst[t][s]: Mixtral (top-k then softmax is the
     * same up to rounding) and Qwen3-MoE with norm_topk_prob. */
    BACKEND_ROUTE_SOFTMAX_TOPK_NORM = 1,
    /* DeepSeek's routing (MOE_ROUTE_GROUPED). p = softmax as above (V2), or sigmoid: p[e] =
     * 1 / (1 + expf(-src[t][e])) (V3); the selection score sel[e] = p[e] + bias[e] (op->w: a vector of
     * n_expert values, NULL: none) in float. With n_group > 1, the experts split into n_group equal
     * runs; a run's score is the max of its sel (softmax: V2's group_limited_greedy) or the sum of its
     * two largest sel (sigmoid: V3's noaux_tc); only the topk_group best runs (ties to the lower
     * index) stay candidates. ids[t][s]: the n_used candidates of largest sel in descending order,
     * ties to the lower id; dst[t][s] = p (not sel) of that expert, divided by their sum (in double)
     * when norm is set, then times scale. */
    BACKEND_ROUTE_SOFTMAX_GROUPED = 2,
    BACKEND_ROUTE_SIGMOID_GROUPED = 3,
};

typedef struct backend_op {
    backend_op_kind kind;
    backend_ref dst, src;
    const backend_weight *w;
    const backend_weight *w2;         /* LAYER_NORM: the bias, or NULL */
    int n, rows, cols;
    float eps;                        /* RMS_NORM */
    const int32_t *tokens;            /* EMBED: n ids, valid until backend_run returns */
    /* ROPE: `freqs` holds n_rot / 2 angular frequencies (the decoder computes them: runtime_rope_freqs), valid while the
     * model is open; angles are taken in double, as pos * freq in float is off by ~1e-4 rad at
     * position 4000. interleaved: pairs (2i, 2i+1); else (i, i + n_rot/2). n_rot <= 1024. */
    const double *freqs;
    int heads, kv_heads, head_dim, n_rot, pos0, interleaved;
    /* ATTENTION: dst[t][heads * head_dim] from q = src[t][heads * head_dim] and the caches k, v
     * ([positions][kv_heads * head_dim], both f32 or both f16; refs to position 0 of one layer), which hold
     * positions 0 .. pos0 + n - 1. Query head h reads kv head h / (heads / kv_heads); token t
     * sees positions 0 .. pos0 + t. scores = q.k / sqrt(head_dim), softmax, sum of p * v.
     * window > 0 (sliding-window attention): token t sees only positions max(0, pos0 + t -
     * window + 1) .. pos0 + t, the last `window` (HF's and llama.cpp's convention). scale != 0:
     * scores = q.k * scale instead of / sqrt(head_dim) (Gemma's query_pre_attn_scalar).
     * bidir 1 (an encoder; window and ring 0): token t sees every position 0 .. pos0 + n - 1,
     * not only those up to its own; the caches then need hold only those positions, so a batch
     * of packed sequences runs one ATTENTION op per sequence, each with pos0 0 and k, v at that
     * sequence's first row.
     * ring > 0 (with window > 0 only): the caches hold `ring` slots and position p lies in slot
     * p % ring, so a window layer's cache stays at window + n_batch - 1 slots however long the
     * context; ring >= window + n - 1 keeps every position the n tokens see. A backend that runs
     * ATTENTION_WINDOW runs rings too.
     * sinks (gpt-oss; a vector of `heads` F32 values): each head's softmax has one more logit,
     * sinks[h], that takes part in the max and the denominator and adds no value:
     * p_j = exp(s_j - M) / (sum_i exp(s_i - M) + exp(sinks[h] - M)), M = max(max_i s_i, sinks[h]). */
    backend_ref k, v;
    int window, ring, bidir;
    const backend_weight *sinks;
    float scale;   /* ATTENTION (above), SCALE, SOFTCAP */
    /* RMS_NORM: w_offset is added to each weight: dst = src / rms * (w[c] + w_offset); Gemma's
     * (1 + w) norms use 1, every other model 0. The sum w[c] + w_offset is in float. */
    float w_offset;
    /* MoE. MOE_ROUTE: src = router logits [n][n_expert]; writes ids [n][n_used] (I32) and
     * dst = weights [n][n_used] (f32), normalized as `route` says.
     * MATMUL_ID: w is an expert pack [n_expert][rows][cols] (a 3-D tensor, any weight type, rows
     * of one expert contiguous); for t < n, s < n_used: dst[t][s][rows] = x . w[ids[t][s]]^T with
     * x = src[t][s][cols], or x = src[t][cols] when src_bcast is 1 (the same input for every
     * slot: gate and up). Each product's arithmetic is MATMUL's on the expert's rows; only the
     * selected experts' rows are read.
     * MOE_SUM: src [n][n_used][cols], wts [n][n_used]. GATED_ADD: wts [n]. */
    backend_ref ids, wts;
    int n_expert, n_used, route, src_bcast;
    float alpha, limit;   /* SWIGLU_OAI */
    /* MOE_ROUTE's grouped routes (w: the selection bias or NULL); STORE_ROWS' dst row stride */
    int n_group, topk_group, norm, stride;
} backend_op;

/* A sequence of ops, filled by the decoder into storage it sized (cap) at open. */
typedef struct backend_seq {
    backend_op *ops;
    size_t n, cap;
    int overflow;   /* set when an op did not fit: backend_run then refuses the sequence */
} backend_seq;

/* Append one op to `s` (the sequence must have room: its capacity is the decoder's sum). */
void backend_seq_embed(backend_seq *s, backend_ref dst, const backend_weight *w, const int32_t *tokens, int n,
                       int cols);
void backend_seq_rms_norm(backend_seq *s, backend_ref dst, backend_ref src, const backend_weight *w, int n, int cols,
                          float eps);
void backend_seq_matmul(backend_seq *s, backend_ref dst, backend_ref src, const backend_weight *w, int n);
void backend_seq_add_row(backend_seq *s, backend_ref dst, const backend_weight *w, int n, int cols);
void backend_seq_rope(backend_seq *s, backend_ref dst, int n, int heads, int head_dim, int n_rot, int pos0,
                      const double *freqs, int interleaved);
void backend_seq_store(backend_seq *s, backend_ref dst, backend_ref src, int n);
void backend_seq_attention(backend_seq *s, backend_ref dst, backend_ref q, backend_ref k, backend_ref v, int n,
                           int pos0, int heads, int kv_heads, int head_dim);
void backend_seq_swiglu(backend_seq *s, backend_ref dst, backend_ref src, int n);
void backend_seq_add(backend_seq *s, backend_ref dst, backend_ref src, int n);
/* Attention with a window (0: none), a score scale (0: 1 / sqrt(head_dim)) and caches that are
 * rings of `ring` slots (0: position p at row p). */
void backend_seq_attention_ex(backend_seq *s, backend_ref dst, backend_ref q, backend_ref k, backend_ref v, int n,
                              int pos0, int heads, int kv_heads, int head_dim, int window, float scale, int ring);
void backend_seq_rms_norm_ex(backend_seq *s, backend_ref dst, backend_ref src, const backend_weight *w, int n, int cols,
                             float eps, float w_offset);
void backend_seq_moe_route(backend_seq *s, backend_ref wts_dst, backend_ref ids, backend_ref logits, int n,
                           int n_expert, int n_used, int route);
/* `w` is the expert pack; rows and cols are one expert's (shape[1], shape[2]). */
void backend_seq_matmul_id(backend_seq *s, backend_ref dst, backend_ref src, const backend_weight *w, backend_ref ids,
                           int n, int n_used, int src_bcast);
void backend_seq_moe_sum(backend_seq *s, backend_ref dst, backend_ref src, backend_ref wts, int n, int n_used,
                         int cols);
void backend_seq_gated_add(backend_seq *s, backend_ref dst, backend_ref src, backend_ref gate, int n, int cols);
void backend_seq_geglu(backend_seq *s, backend_ref dst, backend_ref src, int n);
void backend_seq_scale(backend_seq *s, backend_ref dst, int n, float scale);
void backend_seq_softcap(backend_seq *s, backend_ref dst, int n, float cap);
/* `b` may be NULL (no bias). */
void backend_seq_layer_norm(backend_seq *s, backend_ref dst, backend_ref src, const backend_weight *w,
                            const backend_weight *b, int n, int cols, float eps);
void backend_seq_gelu(backend_seq *s, backend_ref dst, int n);
/* ATTENTION with bidir set: q, k, v hold the n rows of one sequence (position 0 at k, v); scale 0:
 * 1 / sqrt(head_dim). */
void backend_seq_attention_bidir(backend_seq *s, backend_ref dst, backend_ref q, backend_ref k, backend_ref v, int n,
                                 int heads, int kv_heads, int head_dim, float scale);
/* attention_ex with attention sinks: `sinks` is a vector weight of `heads` F32 values. */
void backend_seq_attention_sinks(backend_seq *s, backend_ref dst, backend_ref q, backend_ref k, backend_ref v, int n,
                                 int pos0, int heads, int kv_heads, int head_dim, int window, float scale, int ring,
                                 const backend_weight *sinks);
/* `w` is [n_expert][rows] F32; dst is [n][n_used][rows] (a MATMUL_ID's output). */
void backend_seq_add_row_id(backend_seq *s, backend_ref dst, const backend_weight *w, backend_ref ids, int n,
                            int n_used);
void backend_seq_swiglu_oai(backend_seq *s, backend_ref dst, backend_ref src, int n, float alpha, float limit);
/* MOE_ROUTE with BACKEND_ROUTE_SOFTMAX_GROUPED or _SIGMOID_GROUPED; `bias` may be NULL. */
void backend_seq_moe_route_grouped(backend_seq *s, backend_ref wts_dst, backend_ref ids, backend_ref logits, int n,
                                   int n_expert, int n_used, int route, const backend_weight *bias, int n_group,
                                   int topk_group, int norm, float scale);
/* `w` is the pack [heads][rows][cols]; src [n][heads][cols], dst [n][heads][rows]. */
void backend_seq_matmul_heads(backend_seq *s, backend_ref dst, backend_ref src, const backend_weight *w, int n);
void backend_seq_store_rows(backend_seq *s, backend_ref dst, backend_ref src, int n, int cols, int stride);

/* ---------------------------------------------------------------- using a backend */

typedef struct backend_opts {
    int n_threads;   /* CPU: worker threads, <= 0 all cores */
    int verbose;     /* 1: say on stderr which device was chosen, and why others were not */
} backend_opts;

/* Open a backend by device name: "cpu", "vulkan", "metal", or "auto" / NULL ($MSTORE_DEVICE
 * when set, else a hardware GPU when there is one, else the CPU; a software GPU (lavapipe) only
 * when asked for by name). MS_EINVALID for an unknown name; MS_EUNSUPPORTED when the named
 * device is missing or not built in, saying why. */
int backend_open(backend **out, const char *device, const backend_opts *o);
const char *backend_name(const backend *b);   /* "cpu", "vulkan", ... */
/* A line describing the device ("cpu avx512, 2 threads", "vulkan: NVIDIA H100 (discrete)"). */
const char *backend_describe(const backend *b);
void backend_close(backend *b);   /* frees every buffer and weight it made; NULL is fine */

/* Sizes the scratch of every op that can follow: at most max_rows rows per op, at most max_cols
 * columns per matmul, at most n_ctx positions and `heads` query heads per attention; head_cols:
 * the most rows or columns of one head's matrix in a MATMUL_HEADS (0: none follows), of at most
 * `heads` heads. MS_ENOMEM. */
typedef struct backend_limits {
    int max_rows, max_cols, n_ctx, heads, head_cols;
} backend_limits;
int backend_reserve(backend *b, const backend_limits *l);

/* A zeroed buffer of n elements of dtype. MS_ENOMEM (naming `what`). Freed by backend_close, or
 * earlier by backend_buf_free. */
int backend_buf_new(backend_buf **out, backend *b, size_t n, int dtype, const char *what);
void backend_buf_free(backend *b, backend_buf *buf);   /* NULL is fine */

/* The backend's form of weight `t`: a matrix for MATMUL / EMBED, a vector (1-D F32, F16 or BF16)
 * for RMS_NORM / ADD_ROW. MS_EUNSUPPORTED naming the tensor and its type when this backend cannot
 * run it; MS_EINVALID for a shape it cannot hold; MS_ENOMEM. Freed by backend_close. */
int backend_weight_import(const backend_weight **out, backend *b, const backend_tensor *t);

/* Row `row` of matrix t (rows of its last dimension; any type the CPU runs) as f32, as EMBED reads
 * a row: for weights a decoder derives at open (MLA's absorbed packs). MS_EUNSUPPORTED naming the
 * tensor and its type otherwise. */
int backend_tensor_row(float *out, const backend_tensor *t, uint64_t row);

/* 1 when this backend runs ops of `kind`. The nine original kinds (EMBED .. ADD) always; the
 * others only where the device's `supports` says so. A decoder asks at open for every kind it
 * will record, so that a model is refused with a message naming op and device, never mid-run. */
int backend_supports(backend *b, backend_op_kind kind);
const char *backend_op_name(backend_op_kind kind);   /* "matmul_id", ... */

/* Run the ops of `s` in order (invariant 1). MS_EIO when the device fails. */
int backend_run(backend *b, const backend_seq *s);
/* Wait for every op run so far, then copy n f32 elements at `src` into dst. MS_EIO. */
int backend_read(backend *b, float *dst, backend_ref src, size_t n);

/* ---------------------------------------------------------------- devices */

typedef struct backend_device_info {
    char name[128];      /* "NVIDIA H100 80GB HBM3", "llvmpipe (LLVM 15.0.6, 256 bits)" */
    char kind[16];       /* "cpu", "discrete", "integrated", "virtual", "software" */
    char api[16];        /* "cpu", "vulkan", "metal" */
    uint64_t memory;     /* bytes of device-local memory (CPU: physical memory) */
    int host_import;     /* 1: can use mmapped host memory in place */
} backend_device_info;

/* Every device this build can see, CPU first; *n_out entries in *out (free()). A device API
 * that is missing (no Vulkan loader) is skipped; `why` (may be NULL) gets one line saying so.
 * MS_ENOMEM. */
int backend_devices(backend_device_info **out, size_t *n_out, char *why, size_t why_len);

/* ---------------------------------------------------------------- implementing a backend */

/* What a device provides. `ctx` is the device's own state, made by its open function. */
typedef struct backend_impl {
    const char *name;
    const char *(*describe)(void *ctx);
    int (*reserve)(void *ctx, const backend_limits *l);
    int (*buf_new)(void *ctx, backend_buf *buf);   /* buf->n, dtype set: fill host or dev, zeroed */
    void (*buf_free)(void *ctx, backend_buf *buf);
    int (*weight_new)(void *ctx, backend_weight *w);   /* w->t set: fill vec or dev */
    void (*weight_free)(void *ctx, backend_weight *w);
    int (*run)(void *ctx, const backend_op *ops, size_t n_ops);
    int (*read)(void *ctx, float *dst, backend_ref src, size_t n);
    void (*close)(void *ctx);
    int (*supports)(void *ctx, backend_op_kind kind);   /* NULL: only EMBED .. ADD */
} backend_impl;

#endif
