/* kernels.h: the fast paths of the CPU backend, shared by cpu.c and the SIMD kernel files only.
 *
 * cpu_int.h's cpu_path holds, per weight type, one dot product per row (the definition every
 * path must meet) and may add a gemm: many rows against many tokens (one token in decode),
 * register-blocked over rows and tokens so that weights are loaded and widened once per tile, not
 * once per token.
 * Each (token, row) gets exactly the arithmetic of the entry's dot, in the same order: a
 * prefill in one batch, in chunks or token by token gives the same logits bit for bit. (A
 * last-bit difference upstream would flip the rounding of some 16-bit activation and show
 * up as a 3e-5 relative jump, so "close" is not enough.) */
#ifndef MSTORE_CPU_KERNELS_H
#define MSTORE_CPU_KERNELS_H

#include "cpu/cpu_int.h"

/* Columns per chunk of a prefill GEMM: a chunk of rows is dequantized once (a panel that stays
 * in L1) and every token tile passes over it. A multiple of 16 and of QK. */
#define CPU_GEMM_KC 512

/* Decode (one token's pass, row after row) of rows whose activations take CPU_DEC_LONG_X bytes or
 * more: they no longer stay in L1 beside the weights streaming past them, and with the hardware
 * prefetcher alone one thread read such rows at about half its rate on shorter ones (a Zen 4: F16
 * rows of 5632 columns, 16-bit activation codes of 11008; BENCHMARKS.md, "Decode of long rows").
 * The decode kernels then ask for the weights' lines CPU_DEC_L2_AHEAD bytes ahead, into L2. At
 * 16 KB exactly (block rows of 8192 columns, F16 rows of 4096) Q8_0 gained 40-60%, Q4_0 10-20%,
 * F16 nothing beyond the noise; shorter rows mostly lost from it and go as before. */
#define CPU_DEC_LONG_X 16384
#define CPU_DEC_L2_AHEAD 8192

/* Whether a decode row whose token's activations take x_bytes is such a long one. */
static inline int cpu_dec_long(size_t x_bytes)
{
    return x_bytes >= CPU_DEC_LONG_X;
}

/* A long row's decode: the lines of [p, p + bytes) asked for CPU_DEC_L2_AHEAD bytes on, into L2. */
static inline void cpu_dec_prefetch_l2(const void *p, size_t bytes)
{
    for (size_t l = 0; l < bytes; l += 64)
        __builtin_prefetch((const char *)p + CPU_DEC_L2_AHEAD + l, 0, 2);
}

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

/* The paths, as constant data (cpu_int.h). A path whose code this build lacks (another
 * architecture) is still defined, with built = 0. cpu.c decides from the CPU's features which of
 * them may run, before it calls anything in them.
 *   scalar          portable C: the arithmetic the others are tested against
 *   avx2            AVX2, FMA, F16C (kernels_avx2.c, kquant_avx2.c)
 *   avx512          AVX-512 F/BW/DQ/VL over avx2 (kernels_avx512.c): f32 activations, float tiles
 *   avx512vnni      vpdpwssd on 512-bit registers over avx512 (kernels_vnni512.c, kernels_vnni.h)
 *   avxvnni         avx2's block types with vpdpwssd (VEX) for vpmaddwd + vpaddd, over avx2: its
 *                   bits (kernels_avxvnni.c); avxvnni-evex the same code on AVX512-VNNI, for tests
 *   vnni-emul       kernels_vnni.h with vpdpwssd emulated in C, over scalar: any CPU
 *   *-int8          kernels_vnni8.h: 8-bit activations (vpdpbusd), by name only
 *   amx-int8, amx   kernels_amx.h: prefill on AMX tiles with the int8 / 16-bit VNNI arithmetic
 *   neon, neon-dotprod, neon-i8mm   kernels_neon.c (AArch64; SDOT; SDOT + USDOT + SMMLA) */
extern const cpu_path cpu_path_scalar, cpu_path_avx2, cpu_path_avx512;
extern const cpu_path cpu_path_avx512vnni, cpu_path_avxvnni, cpu_path_avxvnni_evex, cpu_path_vnni_emul;
extern const cpu_path cpu_path_avx512vnni8, cpu_path_avxvnni8, cpu_path_vnni8_emul;
extern const cpu_path cpu_path_amx8, cpu_path_amx8_emul, cpu_path_amx16, cpu_path_amx16_emul;
extern const cpu_path cpu_path_neon, cpu_path_neon_dotprod, cpu_path_neon_i8mm;

/* kernels_avx2_gemm.c's entries of the avx2 path (x86-64 only): Q8_0, Q4_0, Q4_K, Q6_K, MXFP4 on 16-bit
 * activations in its own layout (cpu_avx2_act_*), F16 and F32 on f32 ones; each dot is the one
 * its gemm equals. */
#define CPU_AVX2_TYPES(X) X(q8_0) X(q4_0) X(q4_k) X(q6_k) X(mxfp4) X(f16) X(f32)
#define CPU_AVX2_DECLARE(t)                                                                                          \
    float cpu_avx2_dot_##t(const void *x, const void *w, int n);                                                 \
    void cpu_avx2_gemm_##t(float *y, size_t ldy, const cpu_act *a, int n_tok, const uint8_t *w, size_t w_stride, \
                           int n_rows, int cols);
CPU_AVX2_TYPES(CPU_AVX2_DECLARE)
#undef CPU_AVX2_DECLARE
size_t cpu_avx2_act_bytes(int n_tok, int cols);
void cpu_avx2_act_quantize(uint8_t *dst, const float *x, int type, int n_tok, int cols);

/* A path this build has no code for: its name, nothing else (built = 0). */
#define CPU_PATH_ABSENT(var, nm) const cpu_path var = { .name = nm }

#endif
