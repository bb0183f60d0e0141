/* cpu_int.h: helpers shared by the .c files of src/cpu only (and its unit tests). */
#ifndef MSTORE_CPU_INT_H
#define MSTORE_CPU_INT_H

#include <string.h>

#include "cpu/cpu.h"

#define QK 32   /* elements per block of every supported block type */

/* Activations quantized for integer dot products: x[i] ~= d * q[i]; s = d * sum(q), which
 * Q4_1/Q5_1 need for their offset term (m * sum(x)). 16 bits, not ggml's 8: with 8-bit
 * activations (rounding error up to amax/254 per element) the first-step logits of
 * s260k-mixed and of a synthetic Q4_0 model drift 1.04e-2 and 1.15e-2 from the float64
 * reference, past the 1e-2 the issue allows; at 16 bits they stay at f32 rounding level. */
typedef struct cpu_q16 {
    float d, s;
    int16_t q[QK];
} cpu_q16;

/* The integer sum of a block's codes: what Q4_0's decode takes 8 times off its block sums. */
static inline int32_t cpu_q16_sum(const cpu_q16 *b)
{
    int32_t sum = 0;

    for (int j = 0; j < QK; j++)
        sum += b->q[j];
    return sum;
}

/* One row dot product. Float weights: x is float[n]. Block weights: x is cpu_q16[n / QK], or the
 * path's own layout (CPU_ACT_PATH below). */
typedef float (*cpu_dot_fn)(const void *x, const void *w, int n);

/* A batch of activations: token t's at x + t * stride, in the format the weight type's entry
 * names (cpu_type_traits.act). */
typedef struct cpu_act {
    const uint8_t *x;
    size_t stride;
} cpu_act;

/* y[t * ldy + r] = x[t] . w[r] for t < n_tok, r < n_rows; w rows `w_stride` bytes apart. For each
 * (t, r) exactly the value the same entry's dot gives, whatever n_tok and n_rows (kernels.h). */
typedef void (*cpu_gemm_fn)(float *y, size_t ldy, const cpu_act *a, int n_tok, const uint8_t *w, size_t w_stride,
                           int n_rows, int cols);

/* What a weight type's dot and gemm take as activations. */
enum cpu_act_format {
    CPU_ACT_Q16 = 1,   /* cpu_q16 blocks, token after token (cpu_quantize_q16) */
    CPU_ACT_F32,       /* the f32 activations as given */
    CPU_ACT_PATH,      /* the path's own layout: its act_bytes and act_quantize */
};

/* One weight type on one path, the CPU's counterpart of ggml's type_traits_cpu. An entry with a
 * NULL dot is the base path's entry (cpu_path.base), whole: dot, gemm and activations always
 * come from one path, since they must agree bit for bit. */
typedef struct cpu_type_traits {
    cpu_dot_fn dot;       /* one row: the definition of this path's arithmetic for the type */
    cpu_gemm_fn gemm;     /* many rows x many tokens; NULL: tiles of dot */
    unsigned char act;   /* enum cpu_act_format */
} cpu_type_traits;

/* A kernel path: every kernel one instruction set gives, as constant data. Each file compiled for
 * an instruction set defines its paths as initialized constants (no code runs to build them), so
 * cpu.c can read which exist and decide from cpuid / hwcaps alone, before any of their code runs,
 * whether this CPU may call them. Anything left NULL (a type entry, a function) is the base path's;
 * cpu.c resolves the chain once. */
typedef struct cpu_path {
    const char *name;
    const struct cpu_path *base;   /* NULL only for scalar, which fills everything */
    int built;                     /* 0: this build has no code for it (another architecture) */
    cpu_type_traits type[GGML_TYPE_COUNT];
    float (*dot_f32)(const float *a, const float *b, int n);
    float (*dot_f32_f16)(const float *a, const uint16_t *b, int n);
    void (*axpy_f32)(float *y, float a, const float *x, int n);       /* y += a * x */
    void (*axpy_f16)(float *y, float a, const uint16_t *x, int n);
    /* Attention over m keys at once, with exactly the arithmetic of the calls they replace:
     * s[i] = dot_f32(q, k + i * ks, n), and y += s[i] * v[i * vs] for i = 0, 1, ... as axpy_f32
     * does it. NULL after resolution: cpu.c loops over dot_f32 and axpy_f32 (a call per key and
     * head, which took a quarter of a 512-token prefill). Both or neither. */
    void (*dots_f32)(float *s, const float *q, const float *k, size_t ks, int m, int n);
    void (*axpys_f32)(float *y, const float *s, const float *v, size_t vs, int m, int n);
    void (*f32_to_f16)(uint16_t *y, const float *x, int n);
    /* MLX affine int4 / int8 (mlx_matmul.c): sum over one block of 32 of code[i] * x[i], codes
     * unsigned (int4: byte l holds elements 2l low, 2l + 1 high nibble). NULL after resolution:
     * mlx_matmul.c's C loop. Exact integers, so every path gives the same sum. */
    int32_t (*mlx_block4)(const uint8_t *codes, const int16_t *x);
    int32_t (*mlx_block8)(const uint8_t *codes, const int16_t *x);
    /* For entries with CPU_ACT_PATH (the VNNI and AMX paths, kernels_vnni.h): act_bytes(n_tok, cols)
     * bytes per token (at most (cols / QK + 16) cpu_q16 blocks' worth), written by act_quantize
     * for one token of a matmul of n_tok against weights of `type`, with the codes of
     * cpu_quantize_q16 (or cpu_quantize_q8 on the int8 paths). Such a type's dot takes the layout
     * of a one-token matmul of that type. */
    size_t (*act_bytes)(int n_tok, int cols);
    void (*act_quantize)(uint8_t *dst, const float *x, int type, int n_tok, int cols);
} cpu_path;

/* Entries of a path's type table. */
#define CPU_Q16(dot, gemm) { (dot), (gemm), CPU_ACT_Q16 }
#define CPU_F32(dot, gemm) { (dot), (gemm), CPU_ACT_F32 }
#define CPU_OWN(dot, gemm) { (dot), (gemm), CPU_ACT_PATH }

/* The selected path, resolved (no NULL dot for a type the scalar path has; the attention and f16
 * functions set). Borrowed, constant for the process unless cpu_path_select changes it. */
const cpu_path *cpu_path_get(void);

/* x[n] -> blocks[n / QK]; n a multiple of QK; q = round(x / d), d = max|x| / 32767. A block with a
 * NaN or infinity gets d = s = NaN and q = 0. The same code for every path, so that paths
 * differ only in how they sum. */
void cpu_quantize_q16(cpu_q16 *out, const float *x, int n);
/* The same with 8-bit codes, q in [-127, 127], d = max|x| / 127: the activations of the int8
 * paths (kernels_vnni8.h), an explicit opt-in for their speed at ggml's accuracy. */
void cpu_quantize_q8(cpu_q16 *out, const float *x, int n);

/* Thread pool: fn(ctx, ith, nth) runs on every thread (the caller is ith 0); returns when all
 * have finished. */
typedef void (*cpu_task_fn)(void *ctx, int ith, int nth);
void cpu_pool_run(cpu_pool *p, cpu_task_fn fn, void *ctx);

static inline float cpu_f16(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
    float f;

    if (exp == 0) {
        /* zero or subnormal: mant * 2^-24 is exact in float */
        f = (float)mant * (1.0f / 16777216.0f);
        memcpy(&bits, &f, 4);
        bits |= sign;
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (mant << 13);
    } else {
        bits = sign | ((exp + 112) << 23) | (mant << 13);
    }
    memcpy(&f, &bits, 4);
    return f;
}

static inline float cpu_bf16(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;

    memcpy(&f, &bits, 4);
    return f;
}

static inline uint16_t cpu_rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static inline uint32_t cpu_rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Block sizes in bytes (ggml layouts). */
enum { CPU_Q4_0_BYTES = 18, CPU_Q4_1_BYTES = 20, CPU_Q5_0_BYTES = 22, CPU_Q5_1_BYTES = 24, CPU_Q8_0_BYTES = 34 };

#endif
