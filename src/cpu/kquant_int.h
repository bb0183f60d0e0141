/* kquant_int.h: weight types beyond the block types of kernels_*.c, shared within src/cpu (and
 * its unit tests) only: ggml's K-quants (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K), IQ4_NL, IQ4_XS, MXFP4
 * (kquant_scalar.c, kquant_avx2.c), and MLX-quantized weights (mlx_matmul.c, type BACKEND_TYPE_MLX).
 *
 * The K-quant and IQ4 row dots are entries of the paths' type tables like any block type's
 * (cpu_int.h); MLX weights, which carry their own scales and group size, come in through one hook
 * at the top of cpu.c's matmul and dot. Every dot product is taken on the quantized
 * weights block by block (integer sums of weight codes times 16-bit activations, scaled once per
 * sub-block); no matrix is dequantized. Rows are dequantized only for an embedding lookup
 * (cpu_tensor_row, through src/quant's dequantizers) and for MLX's fp formats (mxfp4, nvfp4,
 * mxfp8), whose dot products dequantize a few groups at a time into a stack buffer. */
#ifndef MSTORE_CPU_KQUANT_INT_H
#define MSTORE_CPU_KQUANT_INT_H

#include "cpu/cpu_int.h"

/* The K-quant, IQ4 and MXFP4 row dots, x as cpu_q16[n / QK]: kquant_scalar.c's (the scalar path's
 * entries, the definition) and kquant_avx2.c's (the avx2 path's; x86-64 only, compiled with a
 * target attribute, called only on a path cpu.c allowed). The NEON ones are kernels_neon.c's. */
#define CPU_KQ_DOTS(X) X(q2_k) X(q3_k) X(q4_k) X(q5_k) X(q6_k) X(iq4_nl) X(iq4_xs) X(mxfp4)
#define CPU_KQ_DECLARE(t)                                       \
    float cpu_kq_dot_##t(const void *x, const void *w, int n); \
    float cpu_kq_avx2_dot_##t(const void *x, const void *w, int n);
CPU_KQ_DOTS(CPU_KQ_DECLARE)
#undef CPU_KQ_DECLARE

/* MLX-quantized weights (mlx_matmul.c, BACKEND_TYPE_MLX): their matmul (activations as cpu_q16
 * blocks for the affine formats, f32 for the fp ones; rows split over the pool), and one row's
 * dot as that matmul computes it (tests; NAN when out of memory). */
void cpu_mlx_matmul(cpu_pool *p, float *y, const float *x, int n_tok, const backend_tensor *w, void *scratch);
float cpu_mlx_dot_row(const backend_tensor *w, uint64_t row, const float *x);

/* The IQ4 code book: 16 signed values. */
extern const int8_t cpu_iq4_values[16];
/* ggml's MXFP4 code book: E2M1's values doubled ({0, 0.5, 1, 1.5, 2, 3, 4, 6} and their negatives,
 * times 2), so that they are integers; the block scale is halved to match (cpu_mxfp4_scale). */
extern const int8_t cpu_mxfp4_values[16];

/* An MXFP4 block's scale from its E8M0 byte: 2^(e - 128) (E8M0's 2^(e - 127), halved for the
 * doubled code book), built from its bits, so exact for every e: e = 0 and 1 give the subnormals
 * 2^-128 and 2^-127; e = 255, E8M0's NaN, gives NaN (as src/quant's dequantizer does), so a
 * block that holds it makes its row's dot product NaN rather than some finite value. */
static inline float cpu_mxfp4_scale(uint8_t e)
{
    uint32_t bits = e == 255 ? 0x7fc00000u : e >= 2 ? (uint32_t)(e - 1) << 23 : 0x00200000u << e;
    float d;

    memcpy(&d, &bits, 4);
    return d;
}

/* Block bytes (ggml layouts; kquant_scalar.c documents them). */
enum { CPU_Q2_K_BYTES = 84, CPU_Q3_K_BYTES = 110, CPU_Q4_K_BYTES = 144, CPU_Q5_K_BYTES = 176, CPU_Q6_K_BYTES = 210,
       CPU_IQ4_NL_BYTES = 18, CPU_IQ4_XS_BYTES = 136, CPU_MXFP4_BYTES = 17 };
#define QK_K 256

/* Q4_K / Q5_K: sub-block j's 6-bit scale and min from the 12 packed bytes. */
static inline void cpu_scale_min_k4(int j, const uint8_t *q, int *sc, int *m)
{
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 15) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

/* Q3_K: the 16 signed 6-bit scales from 12 bytes: low nibbles in bytes 0..7 (scales 0..7 low,
 * 8..15 high nibble), the top two bits in bytes 8..11 (scale i at bits 2 * (i / 4) of byte 8 + i % 4). */
static inline void cpu_q3k_scales(int out[16], const uint8_t *s)
{
    for (int i = 0; i < 16; i++) {
        int lo = i < 8 ? s[i] & 15 : s[i - 8] >> 4, hi = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
        out[i] = (lo | hi << 4) - 32;
    }
}

/* MLX (mlx_matmul.c): dot of x (cpu_q16 blocks for affine formats, f32 for the fp formats) with
 * row `row` of `w`. */
float cpu_mlx_dot(const backend_tensor *w, uint64_t row, const void *x, int cols);
int cpu_mlx_wants_q16(const backend_tensor *w);   /* 1: affine (integer sums); 0: f32 activations */

#endif
