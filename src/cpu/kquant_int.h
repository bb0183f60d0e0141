/* kquant_int.h: weight types beyond the row-kernel tables of kernels_*.c, shared by src/runtime
 * only: ggml's K-quants (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K), IQ4_NL, IQ4_XS (kquant_scalar.c,
 * kquant_avx2.c), and MLX-quantized weights (mlx_matmul.c, type RUNTIME_TYPE_MLX).
 *
 * They come in through one hook at the top of cpu.c's matmul and dot: these files own their
 * matmul (activations as cpu_q16 blocks, rows split over the pool), so the tables, the GEMM and
 * the fast paths of kernels_*.c stay as they are. Every dot product is taken on the quantized
 * weights block by block (integer sums of weight codes times 16-bit activations, scaled once per
 * sub-block); no matrix is dequantized. Rows are dequantized only for an embedding lookup
 * (cpu_ext_tensor_row, through src/quant's dequantizers) and for MLX's fp formats (mxfp4, nvfp4,
 * mxfp8), whose dot products dequantize a few groups at a time into a stack buffer. */
#ifndef MSTORE_CPU_KQUANT_INT_H
#define MSTORE_CPU_KQUANT_INT_H

#include "cpu/cpu_int.h"

/* 1 for a type these files handle (the K-quants and IQ4 above, RUNTIME_TYPE_MLX). */
int cpu_ext_type(int type);
/* The backend matmul for those types (same contract as runtime_backend.matmul). */
void cpu_ext_matmul(cpu_pool *p, float *y, const float *x, int n_tok, const runtime_tensor *w, void *scratch);
/* x[cols] . W[row] as the matmul computes it (tests). NAN when out of memory. */
float cpu_ext_dot_row(const runtime_tensor *w, uint64_t row, const float *x);
/* Row `row` of any supported weight type as f32 (embedding lookup): ext types through
 * src/quant, the others through cpu_tensor_row. */
void cpu_ext_tensor_row(float *out, const runtime_tensor *w, uint64_t row);

/* Row dot products of the K-quant and IQ4 types, x as cpu_q16[n / QK]; NULL for other types.
 * The avx2 table is NULL when not compiled in; it is used only when cpu.c selected a SIMD path. */
cpu_dot_fn cpu_kq_dot_scalar(int type);
cpu_dot_fn cpu_kq_dot_avx2(int type);
/* Q4_K and Q6_K on the NEON path k (kernels_neon.c): the scalar arithmetic bit for bit, integer
 * sums in vectors (widening multiplies, SDOT or USDOT, by the path). NULL for other types and off
 * AArch64. */
cpu_dot_fn cpu_kq_dot_neon(const cpu_kernels *k, int type);

/* The IQ4 code book: 16 signed values. */
extern const int8_t cpu_iq4_values[16];

/* Block bytes (ggml layouts; kquant_scalar.c documents them). */
enum { CPU_Q2_K_BYTES = 84, CPU_Q3_K_BYTES = 110, CPU_Q4_K_BYTES = 144, CPU_Q5_K_BYTES = 176, CPU_Q6_K_BYTES = 210,
       CPU_IQ4_NL_BYTES = 18, CPU_IQ4_XS_BYTES = 136 };
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
float cpu_mlx_dot(const runtime_tensor *w, uint64_t row, const void *x, int cols);
int cpu_mlx_wants_q16(const runtime_tensor *w);   /* 1: affine (integer sums); 0: f32 activations */

#endif
