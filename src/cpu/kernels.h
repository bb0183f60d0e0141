/* kernels.h: the fast paths of the CPU backend, shared by cpu.c and the SIMD kernel files only.
 *
 * runtime_int.h's cpu_kernels holds one dot product per row (the definition every path must
 * meet). A path may add, per weight type:
 *   gemm     many rows against many tokens (one token in decode), register-blocked over rows and
 *            tokens so that weights are loaded and widened once per tile, not once per token.
 * Each (token, row) gets exactly the arithmetic of the path's dot[type], in the same order: a
 * prefill in one batch, in chunks or token by token gives the same logits bit for bit. (A
 * last-bit difference upstream would flip the rounding of some 16-bit activation and show
 * up as a 3e-5 relative jump, so "close" is not enough.) */
#ifndef MSTORE_CPU_KERNELS_H
#define MSTORE_CPU_KERNELS_H

#include "cpu/cpu_int.h"

/* Columns per chunk of a prefill GEMM: a chunk of rows is dequantized once (a panel that stays
 * in L1) and every token tile passes over it. A multiple of 16 and of QK. */
#define CPU_GEMM_KC 512

/* Share i of n of the weights of the panel after the one a gemm is working on (rows rb .. rb +
 * pr - 1 of n_rows, `ws` bytes apart, panels of `chunk` bytes of each row): the same rows' chunk
 * at byte `next`, or, once a row holds no more (next >= ws) and no tokens remain that bring the
 * rows round again (more_tok 0), the next rows' first chunk. A panel is a run of a few hundred
 * bytes to 2 KB in each of its rows, a row apart, on which the hardware prefetcher barely
 * starts: panel fills waited on memory until the tiles of the panel before asked for it
 * (BENCHMARKS.md, session 7). A hint only: nothing is read, and the arithmetic is unchanged. */
static inline void cpu_prefetch_panel(const uint8_t *w, size_t ws, int rb, int pr, int n_rows, size_t next, size_t chunk,
                                     int more_tok, int i, int n)
{
    int r0 = rb;

    if (next >= ws) {
        if (more_tok || rb + pr >= n_rows)
            return;
        r0 = rb + pr, next = 0;
    }
    int nr = n_rows - r0 < pr ? n_rows - r0 : pr;
    size_t bytes = next + chunk <= ws ? chunk : ws - next;
    for (int r = r0 + nr * i / n; r < r0 + nr * (i + 1) / n; r++)
        for (size_t l = 0; l < bytes; l += 64)
            __builtin_prefetch(w + (size_t)r * ws + next + l, 0, 3);
}

/* A batch of activations: token t's at x + t * stride, as the kernel's type takes them
 * (cpu_q16 blocks for block types, unless the path's f32_act says f32; f32 for float types). */
typedef struct cpu_act {
    const uint8_t *x;
    size_t stride;
} cpu_act;

/* y[t * ldy + r] = x[t] . w[r] for t < n_tok, r < n_rows; w rows `w_stride` bytes apart. For each
 * (t, r) exactly the value dot[type] of the same path gives, whatever n_tok and n_rows. */
typedef void (*cpu_gemm_fn)(float *y, size_t ldy, const cpu_act *a, int n_tok, const uint8_t *w, size_t w_stride,
                           int n_rows, int cols);

typedef struct cpu_fast {
    cpu_gemm_fn gemm[GGML_TYPE_COUNT];   /* NULL: tiles of dot[type] */
    /* 1: this block type's gemm and dot[type] take f32 activations, not cpu_q16 blocks */
    unsigned char f32_act[GGML_TYPE_COUNT];
    /* NULL: block types take cpu_q16 blocks, token after token. Else the path lays out its 16-bit
     * activations itself (the VNNI paths, kernels_vnni.h): act_bytes(n_tok, cols) bytes per token
     * (at most (cols / QK + 16) cpu_q16 blocks' worth), written by act_quantize for one token of a
     * matmul of n_tok against weights of `type`, with the codes of cpu_quantize_q16. The path's
     * dot[type] for those types takes the layout of a one-token matmul of that type. */
    size_t (*act_bytes)(int n_tok, int cols);
    void (*act_quantize)(uint8_t *dst, const float *x, int type, int n_tok, int cols);
} cpu_fast;

/* The avx2 path's gemms (kernels_avx2_gemm.c): Q8_0, Q4_0, Q4_K and Q6_K on 16-bit activations in
 * its own layout (act_quantize), F16 and F32 on f32 ones; NULL when not compiled in. The row dots
 * they equal are the avx2 table's (kernels_avx2.c) for those types. */
const cpu_fast *cpu_fast_avx2(void);
float cpu_avx2_dot_q8_0(const void *x, const void *w, int n);
float cpu_avx2_dot_q4_0(const void *x, const void *w, int n);
float cpu_avx2_dot_q4_k(const void *x, const void *w, int n);
float cpu_avx2_dot_q6_k(const void *x, const void *w, int n);
float cpu_avx2_dot_f16(const void *x, const void *w, int n);
float cpu_avx2_dot_f32(const void *x, const void *w, int n);

/* The AVX-512 path (F, BW, DQ, VL): NULL when not compiled in. Its dot table starts as the
 * AVX2 one (F16C, FMA) with the AVX-512 kernels put over it, so it needs both. */
const cpu_kernels *cpu_kernels_avx512(void);
const cpu_fast *cpu_fast_avx512(void);
const cpu_fast *cpu_fast_get(void);

/* The VNNI paths (kernels_vnni.h): NULL when not compiled in. avx512vnni builds on the AVX-512
 * path, avxvnni on AVX2, vnni-emul (vpdpwssd emulated in C, any CPU) on the scalar one. */
const cpu_kernels *cpu_kernels_avx512vnni(void);
const cpu_fast *cpu_fast_avx512vnni(void);
const cpu_kernels *cpu_kernels_avxvnni(void);
const cpu_fast *cpu_fast_avxvnni(void);
const cpu_kernels *cpu_kernels_vnni_emul(void);
const cpu_fast *cpu_fast_vnni_emul(void);
/* The int8 VNNI paths (kernels_vnni8.h, vpdpbusd on 8-bit activations; by name only). */
const cpu_kernels *cpu_kernels_avx512vnni8(void);
const cpu_fast *cpu_fast_avx512vnni8(void);
const cpu_kernels *cpu_kernels_avxvnni8(void);
const cpu_fast *cpu_fast_avxvnni8(void);
const cpu_kernels *cpu_kernels_vnni8_emul(void);
const cpu_fast *cpu_fast_vnni8_emul(void);
/* The AMX paths (kernels_amx.h: prefill on AMX-INT8 tiles; by name only): amx-int8 with the int8
 * paths' arithmetic, amx with avx512vnni's. Both need the CPU's AMX-TILE and AMX-INT8 and the
 * kernel's leave to use the tile state (cpu.c asks); the -emul ones run anywhere. */
const cpu_kernels *cpu_kernels_amx8(void);
const cpu_fast *cpu_fast_amx8(void);
const cpu_kernels *cpu_kernels_amx8_emul(void);
const cpu_fast *cpu_fast_amx8_emul(void);
const cpu_kernels *cpu_kernels_amx16(void);
const cpu_fast *cpu_fast_amx16(void);
const cpu_kernels *cpu_kernels_amx16_emul(void);
const cpu_fast *cpu_fast_amx16_emul(void);

/* The AArch64 paths (kernels_neon.c): NULL when not compiled in. dotprod needs SDOT, i8mm both
 * SDOT and USDOT; cpu.c checks the CPU before using either. */
const cpu_kernels *cpu_kernels_neon(void);
const cpu_kernels *cpu_kernels_neon_dotprod(void);
const cpu_kernels *cpu_kernels_neon_i8mm(void);
const cpu_fast *cpu_fast_neon_i8mm(void);   /* SMMLA gemm tiles for Q8_0 and Q4_0 */

#endif
