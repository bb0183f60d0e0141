/* cpu.h: the CPU backend and its kernels; the whole surface of src/cpu.
 *
 * The backend (backend_impl "cpu") runs backend.h's ops on host memory with a persistent thread
 * pool. Kernel paths are chosen at run time from the CPU's features: a portable scalar path, AVX2
 * (FMA, F16C) and AVX-512 (F, BW, DQ, VL) on x86-64, NEON, NEON with SDOT (dotprod) and NEON
 * with SDOT and USDOT (i8mm) on AArch64; $MSTORE_CPU forces one. Every path gives, for each
 * (token, row), the arithmetic of its own row dot product in the same order, so a prefill in one
 * batch, in chunks or token by token gives the same logits bit for bit.
 *
 * Weight types kept as stored: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K,
 * Q5_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4 (ggml block layouts) and MLX-quantized weights (BACKEND_TYPE_MLX).
 * Quantized weights are used block by block; no matrix is ever dequantized whole.
 *
 * The op functions below are the backend's ops on host pointers, for tests and benchmarks. */
#ifndef MSTORE_CPU_H
#define MSTORE_CPU_H

#include "backend/backend.h"

/* The CPU backend for backend_open. MS_ENOMEM, MS_EIO. */
int cpu_backend_new(const backend_impl **impl_out, void **ctx_out, const backend_opts *o);

/* Kernel paths: avx512vnni, avx512, avxvnni, avx2, neon-i8mm, neon-dotprod, neon, scalar, and by
 * name only vnni-emul (the VNNI kernels with the instruction emulated exactly in C: any CPU),
 * avxvnni-evex (avxvnni's code on AVX512-VNNI, for tests) and the 8-bit-activation paths
 * avx512vnni-int8, avxvnni-int8, vnni-int8-emul, amx-int8 (prefill on AMX tiles) and
 * amx-int8-emul, and amx / amx-emul (avx512vnni's arithmetic on AMX tiles). "auto" picks the best
 * of those before them the CPU supports, or the one $MSTORE_CPU names. MS_EUNSUPPORTED when the
 * CPU lacks the path, MS_EINVALID for a bad name (the message lists the valid ones); a bad
 * $MSTORE_CPU is the same error. */
int cpu_path_select(const char *path);
const char *cpu_path_name(void);   /* the selected path's name */
/* 0, or the error cpu_path_select would give for $MSTORE_CPU (cpu_backend_new refuses to open). */
int cpu_path_check_env(void);

/* 1 when matmul supports weights of this type (ggml id or BACKEND_TYPE_MLX). */
int cpu_type_supported(int type);

typedef struct cpu_pool cpu_pool;
/* A pool of n_threads - 1 persistent workers (the caller is thread 0). n_threads <= 0: all
 * cores. MS_ENOMEM, MS_EIO. */
int cpu_pool_new(cpu_pool **out, int n_threads);
int cpu_pool_threads(const cpu_pool *p);
void cpu_pool_free(cpu_pool *p);   /* NULL is fine */

/* The ops (backend.h gives their arithmetic). Shapes: row-major, n_tok rows of activations. */
/* y[n_tok][rows] = x[n_tok][cols] . W[rows][cols]^T; `scratch` holds cpu_matmul_scratch(n_tok, cols). */
void cpu_matmul(cpu_pool *p, float *y, const float *x, int n_tok, const backend_tensor *w, void *scratch);
size_t cpu_matmul_scratch(int n_tok, int cols);
/* n matmuls of the same x, as cpu_matmul each, in one pass of the pool: x is quantized once and
 * the threads split the matrices' rows end to end (Q, K and V; gate and up). The weights must
 * be cpu_matmul_fusable with each other. */
void cpu_matmul_n(cpu_pool *p, int n, float *const *ys, const float *x, int n_tok, const backend_tensor *const *ws,
                  void *scratch);
int cpu_matmul_fusable(const backend_tensor *a, const backend_tensor *b);
/* One matrix per head (MATMUL_HEADS): y[t][h][rows] = x[t][h][cols] . ws[h]^T, t < n_tok, h < heads,
 * each ws[h] a [rows][cols] matrix of the same type and shape. One pass of the pool: the heads
 * split among the threads, each product cpu_matmul's arithmetic on one thread (so a decoded
 * token's many small products cost one dispatch, not one each). `scratch` holds
 * cpu_matmul_heads_scratch(n_tok, rows, cols, threads) bytes. */
void cpu_matmul_heads(cpu_pool *p, float *y, const float *x, int n_tok, int heads, const backend_tensor *ws,
                      void *scratch);
size_t cpu_matmul_heads_scratch(int n_tok, int rows, int cols, int n_threads);
/* y = x / rms(x) * (w + w_offset), token by token (w_offset: Gemma's (1 + w) norms 1, else 0). */
void cpu_rms_norm(float *y, const float *x, const float *w, int n_tok, int dim, float eps, float w_offset);
/* LayerNorm, token by token: y = (x - mean) / sqrt(var + eps) * w + b (b NULL: none); mean and
 * var in double. y may equal x. */
void cpu_layer_norm(float *y, const float *x, const float *w, const float *b, int n_tok, int dim, float eps);
void cpu_gelu(float *x, size_t n);   /* x = 0.5 x (1 + erf(x / sqrt 2)) */
void cpu_rope(float *x, int n_tok, int n_heads, int head_dim, int n_rot, int pos0, const double *freqs,
              int interleaved);
/* `scratch` holds cpu_attention_scratch(n_ctx, threads) bytes; k, v are [n_ctx][n_kv*hd]. */
void cpu_attention(cpu_pool *p, float *out, const float *q, const void *k, const void *v, int kv_f16, int n_tok,
                   int pos0, int n_heads, int n_kv_heads, int head_dim, float *scratch, int n_ctx);
/* The same with ATTENTION's window (0: none), score scale (0: 1 / sqrt(head_dim)) and ring (0: none;
 * else k, v hold `ring` slots, position p in slot p % ring). */
void cpu_attention_window(cpu_pool *p, float *out, const float *q, const void *k, const void *v, int kv_f16,
                          int n_tok, int pos0, int n_heads, int n_kv_heads, int head_dim, float *scratch, int n_ctx,
                          int window, float scale, int ring);
/* cpu_attention_window with attention sinks: sinks[h] (NULL: none) is one more logit in head h's
 * softmax, which adds no value (backend.h's ATTENTION). */
void cpu_attention_sinks(cpu_pool *p, float *out, const float *q, const void *k, const void *v, int kv_f16, int n_tok,
                         int pos0, int n_heads, int n_kv_heads, int head_dim, float *scratch, int n_ctx, int window,
                         float scale, int ring, const float *sinks);
/* An encoder's attention over one sequence: every token sees all n_tok rows of k, v (position 0
 * first); scale 0: 1 / sqrt(head_dim). */
void cpu_attention_bidir(cpu_pool *p, float *out, const float *q, const void *k, const void *v, int kv_f16, int n_tok,
                         int n_heads, int n_kv_heads, int head_dim, float *scratch, int n_ctx, float scale);
size_t cpu_attention_scratch(int n_ctx, int n_threads);
void cpu_softmax(float *x, int n);
void cpu_swiglu(cpu_pool *p, float *gate, const float *up, size_t n);   /* gate = silu(gate) * up */
void cpu_add(float *y, const float *x, size_t n);                         /* y += x */
/* gpt-oss's clamped SwiGLU (backend.h's SWIGLU_OAI): gate = clamp(gate) * sigmoid(alpha * gate) * (up + 1). */
void cpu_swiglu_oai(cpu_pool *p, float *gate, const float *up, size_t n, float alpha, float limit);

/* Row `row` of a 2-D tensor of any supported weight type as f32, into out[cols] (embedding
 * lookup; K-quants, IQ4, MXFP4 and MLX through src/quant's dequantizers). */
void cpu_tensor_row(float *out, const backend_tensor *w, uint64_t row);
/* One dot product through the current path (tests): x[cols] . W[row]. Quantized types quantize x
 * to 16-bit blocks first, as matmul does. */
float cpu_dot_row(const backend_tensor *w, uint64_t row, const float *x);

/* f16 <-> f32, round to nearest even. */
float cpu_f16_to_f32(uint16_t h);
uint16_t cpu_f32_to_f16(float f);

#endif
