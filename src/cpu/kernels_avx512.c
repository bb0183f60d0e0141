/* kernels_avx512.c: the AVX-512 path (F, BW, DQ, VL; built with those flags on x86-64 only and
 * called only after cpu.c checked the CPU). Tiled kernels of rows x tokens for the types that
 * dominate real models (Q4_0, Q8_0, Q4_K, Q5_K, Q6_K, F16, F32); every other type keeps the AVX2 dot
 * product.
 *
 * All are float kernels: 16-lane FMA accumulators per (row, token) over chunks of CPU_GEMM_KC
 * columns, summed once at the end. Block-quantized weights are dequantized exactly (a 4- to
 * 8-bit integer times an f16-derived scale fits f32's 24 bits) and meet f32 activations, not
 * the 16-bit ones of the other paths: on a CPU without VNNI a 16-lane FMA does 16
 * multiply-adds per instruction, where vpmaddwd + conversion + FMA per block do ~10, and the
 * activations are not rounded at all.
 *   decode (one token): a tile of 8 rows (4 for K-quants) dequantizes each block in registers
 *     (Q4_0: a 16-entry table (n - 8) * d per block and two vpermps on the nibbles) and does
 *     its FMAs, prefetching the next tile;
 *   prefill: each 8-row x 512-column chunk is dequantized once into an f32 panel, then tiles of
 *     4 rows x 6 tokens (24 accumulators) pass over it.
 * Both add the same products in the same order, so a (row, token) never depends on the tile:
 * these kernels are also this path's dot products, and decode equals prefill bit for bit. */
#include "cpu/kernels.h"
#include "cpu/kquant_int.h"   /* K-quant layouts */

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__) && \
    defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>

#define AI static inline __attribute__((always_inline))

static inline __mmask16 first(int n) { return (__mmask16)(n >= 16 ? 0xffff : (1u << n) - 1); }

/* The f16 d_w of n blocks of `bytes` (18 or 34) bytes from `w`, as f32, into d[0, n) (d has 8
 * floats of slack past n). One vpermt2w picks the scales of 8 Q4_0 or 4 Q8_0 blocks out of the
 * 128 bytes at their start: a gather of 16 would cost ~20 uops and stall on its slowest line.
 * Never reads past the n blocks (the last group's loads are masked). */
AI void block_dws(float *d, const uint8_t *w, int bytes, int n)
{
    const int g = bytes == CPU_Q4_0_BYTES ? 8 : 4;
    /* word k (of the 64 in lo:hi) holds block k's scale: k = 9 i (18-byte blocks) or 17 i */
    const __m512i idx = bytes == CPU_Q4_0_BYTES ? _mm512_setr_epi32(9 << 16, 27 << 16 | 18, 45 << 16 | 36, 63 << 16 | 54,
                                                                 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
                                               : _mm512_setr_epi32(17 << 16, 51 << 16 | 34, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                                                 0, 0, 0, 0, 0);

    for (int b = 0; b < n; b += g) {
        const uint8_t *p = w + (size_t)b * bytes;
        __m512i lo, hi;
        if (n - b >= g) {
            lo = _mm512_loadu_si512(p);
            hi = _mm512_loadu_si512(p + 64);
        } else {
            int left = (n - b) * bytes;   /* < 128 */
            __mmask64 mlo = left >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << left) - 1);
            __mmask64 mhi = left <= 64 ? 0 : (((__mmask64)1 << (left - 64)) - 1);
            lo = _mm512_maskz_loadu_epi8(mlo, p);
            hi = _mm512_maskz_loadu_epi8(mhi, p + 64);
        }
        _mm256_storeu_ps(d + b, _mm256_cvtph_ps(_mm512_castsi512_si128(_mm512_permutex2var_epi16(lo, idx, hi))));
    }
}

/* ---------------------------------------------------------------- float weights */

/* MR rows x MT tokens over columns [k0, k0 + kc) (kc a multiple of 16) of w: f32 rows, or f16
 * (F16 = 1), `wst` elements apart, starting at column k0. The 16-lane accumulators continue
 * from acc[r * 6 + t] (or from 0 when `start`); when `last`, the masked `tail` columns after
 * kc are added and each sum goes to y[t * ldy + r], else the accumulators go back to acc. One
 * reduction per (row, token), so chunking never changes the arithmetic. */
AI void float_tile(const int MR, const int MT, const int F16, float *y, size_t ldy, const float *x, size_t ldx,
                   const void *w, size_t wst, int k0, int kc, int start, int last, int tail, __m512 *acc)
{
    __m512 c[4][6];

    #pragma GCC unroll 6
    for (int r = 0; r < MR; r++)
        #pragma GCC unroll 6
        for (int t = 0; t < MT; t++)
            c[r][t] = start ? _mm512_setzero_ps() : acc[r * 6 + t];
#define FLOAT_STEP(k, LX, LW)                                   \
    do {                                                        \
        __m512 xv[6];                                           \
        _Pragma("GCC unroll 6") for (int t = 0; t < MT; t++)    \
            xv[t] = LX(x + (size_t)t * ldx + k0 + (k));         \
        _Pragma("GCC unroll 6") for (int r = 0; r < MR; r++) {  \
            __m512 wv = LW((size_t)r * wst + (k));              \
            _Pragma("GCC unroll 6") for (int t = 0; t < MT; t++) \
                c[r][t] = _mm512_fmadd_ps(wv, xv[t], c[r][t]);  \
        }                                                       \
    } while (0)
#define LX_FULL(p) _mm512_loadu_ps(p)
#define LW_FULL(o) (F16 ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)w + (o)))) \
                        : _mm512_loadu_ps((const float *)w + (o)))
#define LX_TAIL(p) _mm512_maskz_loadu_ps(m, p)
#define LW_TAIL(o) (F16 ? _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, (const uint16_t *)w + (o))) \
                        : _mm512_maskz_loadu_ps(m, (const float *)w + (o)))
    for (int k = 0; k < kc; k += 16) {
        /* a long row's decode (kernels.h), a line a step; written out, since through
         * cpu_dec_prefetch_l2 gcc 12 left no prefetch in this loop (objdump: no prefetcht1) */
        if (MR == 1 && MT == 1 && cpu_dec_long((size_t)kc * sizeof(float)) && (!F16 || !(k & 31)))
            _mm_prefetch((const char *)w + (size_t)k * (F16 ? 2 : 4) + CPU_DEC_L2_AHEAD, _MM_HINT_T1);
        FLOAT_STEP(k, LX_FULL, LW_FULL);
    }
    if (!last) {
        #pragma GCC unroll 6
        for (int r = 0; r < MR; r++)
            #pragma GCC unroll 6
            for (int t = 0; t < MT; t++)
                acc[r * 6 + t] = c[r][t];
        return;
    }
    if (tail) {
        __mmask16 m = first(tail);
        FLOAT_STEP(kc, LX_TAIL, LW_TAIL);
    }
#undef FLOAT_STEP
#undef LX_FULL
#undef LW_FULL
#undef LX_TAIL
#undef LW_TAIL
    #pragma GCC unroll 6
    for (int r = 0; r < MR; r++)
        #pragma GCC unroll 6
        for (int t = 0; t < MT; t++)
            y[(size_t)t * ldy + r] = _mm512_reduce_add_ps(c[r][t]);
}

/* One Q4_0 block as f32: lanes (n - 8) * d looked up by the nibbles (vpermps reads the low 4
 * bits of each index, so the low nibble needs no mask). */
AI void q4_0_block(__m512 *lo, __m512 *hi, const uint8_t *blk, float d)
{
    const __m512 iota = _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7);
    __m512 table = _mm512_mul_ps(iota, _mm512_set1_ps(d));
    __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(blk + 2)));

    *lo = _mm512_permutexvar_ps(v, table);
    *hi = _mm512_permutexvar_ps(_mm512_srli_epi32(v, 4), table);
}

AI void q8_0_block(__m512 *lo, __m512 *hi, const uint8_t *blk, float d)
{
    __m512 dv = _mm512_set1_ps(d);

    *lo = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(blk + 2)))), dv);
    *hi = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(blk + 18)))), dv);
}

enum { K_F32, K_F16, K_Q4_0, K_Q8_0, K_Q4_K, K_Q5_K, K_Q6_K };

/* ---------------------------------------------------------------- K-quants as f32
 *
 * Q4_K, Q5_K and Q6_K (the bulk of Q4_K_M and Q5_K_M models) get the float treatment of Q4_0: each
 * super-block of 256 is dequantized exactly the same way in registers (decode) or into the
 * panel (prefill), and meets f32 activations with the same FMAs in element order. */

static inline int kq_bytes(int kind)
{
    return kind == K_Q4_K ? CPU_Q4_K_BYTES : kind == K_Q5_K ? CPU_Q5_K_BYTES : CPU_Q6_K_BYTES;
}

/* Q4_K: w = a[j] * nibble + b[j] for sub-block j, a = d * scale, b = -(dmin * min). The 6-bit
 * scales and mins (cpu_scale_min_k4's packing) are unpacked four at a time in 32-bit words, then
 * converted and scaled as vectors: the scalar unpacking cost as much as the block's FMAs. */
AI void q4k_scales(float *a, float *b, const uint8_t *p)
{
    uint32_t l0 = cpu_rd32(p + 4), l1 = cpu_rd32(p + 8), l2 = cpu_rd32(p + 12);
    uint64_t sc = (uint64_t)(l0 & 0x3f3f3f3fu) | (uint64_t)((l2 & 0x0f0f0f0fu) | ((l0 >> 2) & 0x30303030u)) << 32;
    uint64_t mn = (uint64_t)(l1 & 0x3f3f3f3fu) | (uint64_t)(((l2 >> 4) & 0x0f0f0f0fu) | ((l1 >> 2) & 0x30303030u)) << 32;
    __m256 d = _mm256_set1_ps(_cvtsh_ss(cpu_rd16(p))), dmin = _mm256_set1_ps(_cvtsh_ss(cpu_rd16(p + 2)));

    _mm256_storeu_ps(a, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)sc)))));
    _mm256_storeu_ps(b, _mm256_sub_ps(_mm256_setzero_ps(),
                                      _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(
                                                              _mm_cvtsi64_si128((long long)mn))))));
}

/* Q6_K: the 16 scales times d. */
AI void q6k_scales(float *s, const uint8_t *p)
{
    __m512 d = _mm512_set1_ps(_cvtsh_ss(cpu_rd16(p + 208)));

    _mm512_storeu_ps(s, _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
                                             _mm_loadu_si128((const __m128i *)(p + 192))))));
}

/* Elements 64j .. 64j + 63 of a Q4_K super-block: sub-block 2j is the low nibbles of qs[32j ..
 * 32j + 31], sub-block 2j + 1 their high nibbles. A 16-entry table per sub-block, as Q4_0. */
AI void q4k_chunk(__m512 out[4], const uint8_t *p, int j, const float *a, const float *b)
{
    const __m512 iota = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    __m512 t0 = _mm512_fmadd_ps(iota, _mm512_set1_ps(a[2 * j]), _mm512_set1_ps(b[2 * j]));
    __m512 t1 = _mm512_fmadd_ps(iota, _mm512_set1_ps(a[2 * j + 1]), _mm512_set1_ps(b[2 * j + 1]));
    const uint8_t *qs = p + 16 + 32 * j;
    __m512i v0 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)qs));
    __m512i v1 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(qs + 16)));

    out[0] = _mm512_permutexvar_ps(v0, t0);
    out[1] = _mm512_permutexvar_ps(v1, t0);
    out[2] = _mm512_permutexvar_ps(_mm512_srli_epi32(v0, 4), t1);
    out[3] = _mm512_permutexvar_ps(_mm512_srli_epi32(v1, 4), t1);
}

/* Q5_K's fifth bits: qh[l] (l < 32) as 32-bit lanes, shifted left 4, so that bit s of qh moves
 * to bit 4 by one right shift of s. Once per super-block. */
AI void q5k_high(__m512i h[2], const uint8_t *p)
{
    h[0] = _mm512_slli_epi32(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(p + 16))), 4);
    h[1] = _mm512_slli_epi32(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(p + 32))), 4);
}

/* Elements 64j .. 64j + 63 of a Q5_K super-block: as Q4_K (qs at 48), with bit 2j or 2j + 1 of
 * qh[l] above the nibble: a 32-entry table per sub-block through vpermt2ps, whose index is the
 * nibble (ternlog takes bits 0-3 from it, bit 4 and up from the shifted qh; vpermt2ps reads
 * bits 0-4 only). */
AI void q5k_chunk(__m512 out[4], const uint8_t *p, int j, const float *a, const float *b, const __m512i h[2])
{
    const __m512 iota = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512 iota16 = _mm512_add_ps(iota, _mm512_set1_ps(16));
    const __m512i m4 = _mm512_set1_epi32(15);
    __m512 a0 = _mm512_set1_ps(a[2 * j]), b0 = _mm512_set1_ps(b[2 * j]);
    __m512 a1 = _mm512_set1_ps(a[2 * j + 1]), b1 = _mm512_set1_ps(b[2 * j + 1]);
    __m512 t0 = _mm512_fmadd_ps(iota, a0, b0), t0h = _mm512_fmadd_ps(iota16, a0, b0);
    __m512 t1 = _mm512_fmadd_ps(iota, a1, b1), t1h = _mm512_fmadd_ps(iota16, a1, b1);
    const uint8_t *qs = p + 48 + 32 * j;
    __m512i v0 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)qs));
    __m512i v1 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(qs + 16)));

    out[0] = _mm512_permutex2var_ps(t0, _mm512_ternarylogic_epi32(v0, _mm512_srli_epi32(h[0], 2 * j), m4, 0xE4), t0h);
    out[1] = _mm512_permutex2var_ps(t0, _mm512_ternarylogic_epi32(v1, _mm512_srli_epi32(h[1], 2 * j), m4, 0xE4), t0h);
    out[2] = _mm512_permutex2var_ps(
        t1, _mm512_ternarylogic_epi32(_mm512_srli_epi32(v0, 4), _mm512_srli_epi32(h[0], 2 * j + 1), m4, 0xE4), t1h);
    out[3] = _mm512_permutex2var_ps(
        t1, _mm512_ternarylogic_epi32(_mm512_srli_epi32(v1, 4), _mm512_srli_epi32(h[1], 2 * j + 1), m4, 0xE4), t1h);
}

/* Elements 128h + 64k .. 128h + 64k + 63 of a Q6_K super-block (k < 2), in order: the low (k = 0)
 * or high nibbles of ql[64h .. 64h + 63], two bits of qh above them (bits 0 and 2, or 4 and 6),
 * minus 32, as 64 bytes at once; then each 16 as f32 times s (q6k_scales: one per 16). */
AI void q6k_quad(__m512 out[4], const uint8_t *p, int h, int k, const float *s)
{
    __m512i q = _mm512_loadu_si512(p + 64 * h);
    __m256i hh = _mm256_loadu_si256((const __m256i *)(p + 128 + 32 * h));
    __m512i hb = _mm512_inserti64x4(_mm512_castsi256_si512(hh), _mm256_srli_epi16(hh, 2), 1);

    if (k) {
        q = _mm512_srli_epi16(q, 4);
        hb = _mm512_srli_epi16(hb, 4);
    }
    q = _mm512_and_si512(q, _mm512_set1_epi8(15));
    hb = _mm512_slli_epi16(_mm512_and_si512(hb, _mm512_set1_epi8(3)), 4);
    q = _mm512_sub_epi8(_mm512_or_si512(q, hb), _mm512_set1_epi8(32));
    s += 8 * h + 4 * k;
    out[0] = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm512_castsi512_si128(q))), _mm512_set1_ps(s[0]));
    out[1] = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm512_extracti32x4_epi32(q, 1))),
                           _mm512_set1_ps(s[1]));
    out[2] = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm512_extracti32x4_epi32(q, 2))),
                           _mm512_set1_ps(s[2]));
    out[3] = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm512_extracti32x4_epi32(q, 3))),
                           _mm512_set1_ps(s[3]));
}

/* One super-block of 256 as f32 into dst (panel fill). */
static void kq_superblock(int kind, float *dst, const uint8_t *p)
{
    __m512 o[4];

    if (kind == K_Q4_K || kind == K_Q5_K) {
        float a[8], b[8];
        __m512i h[2];
        q4k_scales(a, b, p);
        if (kind == K_Q5_K)
            q5k_high(h, p);
        for (int j = 0; j < 4; j++) {
            if (kind == K_Q5_K)
                q5k_chunk(o, p, j, a, b, h);
            else
                q4k_chunk(o, p, j, a, b);
            for (int i = 0; i < 4; i++)
                _mm512_store_ps(dst + 64 * j + 16 * i, o[i]);
        }
        return;
    }
    float sc[16];
    q6k_scales(sc, p);
    for (int g = 0; g < 4; g++) {
        q6k_quad(o, p, g / 2, g % 2, sc);
        for (int i = 0; i < 4; i++)
            _mm512_store_ps(dst + 64 * g + 16 * i, o[i]);
    }
}

/* Decode of MR K-quant rows against one token: per super-block the rows' scales, then per 64
 * elements four x vectors shared by the rows and four FMAs a row, in element order (the order
 * float_tile takes over the panel). Prefetches the next row tile as block_rows1 does. */
AI void kq_rows1(const int MR, const int kind, float *y, const float *x, const uint8_t *w, size_t ws, int cols)
{
    const int bytes = kq_bytes(kind);
    __m512 c[4];

    #pragma GCC unroll 4
    for (int r = 0; r < MR; r++)
        c[r] = _mm512_setzero_ps();
    for (int b = 0; b < cols / QK_K; b++) {
        const float *xb = x + QK_K * b;
        _Alignas(64) float a[4][16], m[4][8];   /* Q4_K, Q5_K: a, b; Q6_K: a holds the 16 scales */
        __m512i hq[4][2];                        /* Q5_K: q5k_high */
        #pragma GCC unroll 4
        for (int r = 0; r < MR; r++) {
            const uint8_t *p = w + (size_t)r * ws + (size_t)b * bytes;
            for (int l = 0; l < bytes; l += 64)
                _mm_prefetch((const char *)p + MR * ws + l, _MM_HINT_T0);
            if (kind == K_Q4_K || kind == K_Q5_K)
                q4k_scales(a[r], m[r], p);   /* Q5_K packs its scales as Q4_K does */
            else
                q6k_scales(a[r], p);
            if (kind == K_Q5_K)
                q5k_high(hq[r], p);
        }
        for (int g = 0; g < 4; g++) {   /* elements 64g ..: Q4_K chunk g, Q6_K q6k_quad(g / 2, g % 2) */
            __m512 xv[4];
            #pragma GCC unroll 4
            for (int i = 0; i < 4; i++)
                xv[i] = _mm512_loadu_ps(xb + 64 * g + 16 * i);
            #pragma GCC unroll 4
            for (int r = 0; r < MR; r++) {
                const uint8_t *p = w + (size_t)r * ws + (size_t)b * bytes;
                __m512 o[4];
                if (kind == K_Q4_K) {
                    q4k_chunk(o, p, g, a[r], m[r]);
                } else if (kind == K_Q5_K) {
                    q5k_chunk(o, p, g, a[r], m[r], hq[r]);
                } else {
                    q6k_quad(o, p, g / 2, g % 2, a[r]);
                }
                #pragma GCC unroll 4
                for (int i = 0; i < 4; i++)
                    c[r] = _mm512_fmadd_ps(o[i], xv[i], c[r]);
            }
        }
    }
    #pragma GCC unroll 4
    for (int r = 0; r < MR; r++)
        y[r] = _mm512_reduce_add_ps(c[r]);
}

/* Decode: MR rows of a block type against one token, the operations of float_tile over a
 * dequantized panel (two FMAs per block into one accumulator per row, one reduction at the
 * end) without the panel. The f16 scales of up to DEC_BLOCKS blocks of every row are read
 * first (block_dws), so that the per-block work reads d from L1. Each row-block also
 * prefetches the same place MR rows on: the next tile's lines are in flight while this one
 * computes. Without it the hardware prefetcher, which follows one stream per page, sees
 * MR streams interleaved 18 or 34 bytes at a time and lags (decode of the 1.1B Q4_0 went
 * from 12-15 to 18-23 t/s with this and block_dws, same run). */
#define DEC_BLOCKS 256
AI void block_rows1(const int MR, const int q4, float *y, const float *x, const uint8_t *w, size_t ws, int cols)
{
    const int bytes = q4 ? CPU_Q4_0_BYTES : CPU_Q8_0_BYTES;
    _Alignas(64) float d[8][DEC_BLOCKS + 8];
    __m512 c[8];

    #pragma GCC unroll 8
    for (int r = 0; r < MR; r++)
        c[r] = _mm512_setzero_ps();
    for (int p0 = 0; p0 < cols; p0 += DEC_BLOCKS * QK) {
        int pb = (cols - p0) / QK < DEC_BLOCKS ? (cols - p0) / QK : DEC_BLOCKS;
        #pragma GCC unroll 8
        for (int r = 0; r < MR; r++)
            block_dws(d[r], w + (size_t)r * ws + (size_t)(p0 / QK) * bytes, bytes, pb);
        for (int b = 0; b < pb; b++) {
            const float *xb = x + p0 + QK * b;
            __m512 xl = _mm512_loadu_ps(xb), xh = _mm512_loadu_ps(xb + 16);
            #pragma GCC unroll 8
            for (int r = 0; r < MR; r++) {
                const uint8_t *blk = w + (size_t)r * ws + (size_t)(p0 / QK + b) * bytes;
                __m512 wl, wh;
                _mm_prefetch((const char *)blk + MR * ws, _MM_HINT_T0);   /* the next tile's rows */
                if (q4)
                    q4_0_block(&wl, &wh, blk, d[r][b]);
                else
                    q8_0_block(&wl, &wh, blk, d[r][b]);
                c[r] = _mm512_fmadd_ps(wl, xl, c[r]);
                c[r] = _mm512_fmadd_ps(wh, xh, c[r]);
            }
        }
    }
    #pragma GCC unroll 8
    for (int r = 0; r < MR; r++)
        y[r] = _mm512_reduce_add_ps(c[r]);
}

/* Prefill blocking: RB rows x TB tokens of accumulators live in `acc` while the columns pass
 * in chunks of CPU_GEMM_KC; each chunk of RB rows is dequantized once into `panel` for the TB
 * tokens. The panel (16 KB) and a 6-token slice of x (12 KB) stay in L1. Both are static so
 * that a forward pass allocates nothing. */
#define RB 8
#define TB 66   /* 11 tiles of 6 tokens: a 64-token prompt dequantizes each chunk once */
/* Panel rows 2 KB + one line apart: x's token rows are often 4 KB multiples apart and fill
 * ways of one L1 set already; panel rows at 2 KB would pile onto the same sets. */
#define PSTRIDE (CPU_GEMM_KC + 16)
static _Thread_local _Alignas(64) float panel[RB * PSTRIDE];
static _Thread_local __m512 acc[RB / 4][TB / 6][24];

static void panel_fill(int kind, const uint8_t *w, size_t ws, int nr, int k0, int kc, int tail)
{
    for (int r = 0; r < nr; r++) {
        const uint8_t *row = w + (size_t)r * ws;
        float *dst = panel + (size_t)r * PSTRIDE;
        if (kind == K_F32) {
            const float *src = (const float *)(const void *)row + k0;
            for (int k = 0; k < kc; k += 16)
                _mm512_store_ps(dst + k, _mm512_loadu_ps(src + k));
            if (tail)
                _mm512_store_ps(dst + kc, _mm512_maskz_loadu_ps(first(tail), src + kc));
            continue;
        }
        if (kind == K_F16) {
            const uint16_t *src = (const uint16_t *)(const void *)row + k0;
            for (int k = 0; k < kc; k += 16)
                _mm512_store_ps(dst + k, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(src + k))));
            if (tail)
                _mm512_store_ps(dst + kc, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(first(tail), src + kc)));
            continue;
        }
        if (kind == K_Q4_K || kind == K_Q5_K || kind == K_Q6_K) {
            size_t bytes = (size_t)kq_bytes(kind);
            for (int b = 0; b < kc / QK_K; b++)
                kq_superblock(kind, dst + QK_K * b, row + (size_t)(k0 / QK_K + b) * bytes);
            continue;
        }
        int bytes = kind == K_Q4_0 ? CPU_Q4_0_BYTES : CPU_Q8_0_BYTES;
        for (int b = 0; b < kc / QK; b++) {
            const uint8_t *blk = row + (size_t)(k0 / QK + b) * bytes;
            __m512 lo, hi;
            if (kind == K_Q4_0)
                q4_0_block(&lo, &hi, blk, _cvtsh_ss(cpu_rd16(blk)));
            else
                q8_0_block(&lo, &hi, blk, _cvtsh_ss(cpu_rd16(blk)));
            _mm512_store_ps(dst + QK * b, lo);
            _mm512_store_ps(dst + QK * b + 16, hi);
        }
    }
}

/* Tokens in tiles of 6 (MT made a constant per case) over MR rows. */
AI void float_rows(const int MR, const int F16, float *y, size_t ldy, const float *x, size_t ldx, int n_tok,
                   const void *w, size_t wst, int k0, int kc, int start, int last, int tail, __m512 (*acc_t)[24],
                   int acc_r)
{
    for (int t = 0; t < n_tok; t += 6) {
        float *yt = y + (size_t)t * ldy;
        const float *xt = x + (size_t)t * ldx;
        __m512 *a = acc_t[t / 6] + acc_r * 6;
        switch (n_tok - t < 6 ? n_tok - t : 6) {
        case 6: float_tile(MR, 6, F16, yt, ldy, xt, ldx, w, wst, k0, kc, start, last, tail, a); break;
        case 5: float_tile(MR, 5, F16, yt, ldy, xt, ldx, w, wst, k0, kc, start, last, tail, a); break;
        case 4: float_tile(MR, 4, F16, yt, ldy, xt, ldx, w, wst, k0, kc, start, last, tail, a); break;
        case 3: float_tile(MR, 3, F16, yt, ldy, xt, ldx, w, wst, k0, kc, start, last, tail, a); break;
        case 2: float_tile(MR, 2, F16, yt, ldy, xt, ldx, w, wst, k0, kc, start, last, tail, a); break;
        default: float_tile(MR, 1, F16, yt, ldy, xt, ldx, w, wst, k0, kc, start, last, tail, a); break;
        }
    }
}

/* Matmuls of up to DEC_MULTI tokens of float weights, DEC_MULTI_Q of quantized ones (a pass of
 * several sequences' next tokens) run as decode, a tile of rows read from memory once and from
 * L1 for its later tokens: a panel costs more to fill than so few tokens gain from it. On the
 * 1.1B model, 2 threads of a Zen 4, decode's aggregate at 2 / 4 / 8 sequences: F16 26 / 46 / 59
 * t/s this way, 14 / 23 / 35 through the panels; Q4_0 39 / 41 / 42 against 22 / 36 / 49, whose
 * f32 dequantization per token the panel shares past 4 (BENCHMARKS.md). */
#define DEC_MULTI   8
#define DEC_MULTI_Q 4

/* Decode of every row for each of n_tok tokens: tiles of 8 (block types) or 4 (K-quants) rows,
 * then single rows. The type is a constant in each caller, so the tile kernels specialize. */
AI void block_decode(const int q4, float *y, size_t ldy, const float *x, size_t ldx, int n_tok, const uint8_t *w,
                     size_t ws, int n_rows, int cols)
{
    int r = 0;

    for (; r + 8 <= n_rows; r += 8)
        for (int t = 0; t < n_tok; t++)
            block_rows1(8, q4, y + (size_t)t * ldy + r, x + (size_t)t * ldx, w + (size_t)r * ws, ws, cols);
    for (; r < n_rows; r++)
        for (int t = 0; t < n_tok; t++)
            block_rows1(1, q4, y + (size_t)t * ldy + r, x + (size_t)t * ldx, w + (size_t)r * ws, ws, cols);
}

AI void kq_decode(const int kind, float *y, size_t ldy, const float *x, size_t ldx, int n_tok, const uint8_t *w,
                  size_t ws, int n_rows, int cols)
{
    int r = 0;

    for (; r + 4 <= n_rows; r += 4)
        for (int t = 0; t < n_tok; t++)
            kq_rows1(4, kind, y + (size_t)t * ldy + r, x + (size_t)t * ldx, w + (size_t)r * ws, ws, cols);
    for (; r < n_rows; r++)
        for (int t = 0; t < n_tok; t++)
            kq_rows1(1, kind, y + (size_t)t * ldy + r, x + (size_t)t * ldx, w + (size_t)r * ws, ws, cols);
}

/* MR float rows (f16 or f32, `we` elements apart) for n_tok tokens, straight from the weights in
 * chunks of up to 6 tokens: the first chunk reads the rows from memory, the next from L1. */
AI void float_few(const int MR, const int F16, float *y, size_t ldy, const float *x, size_t ldx, int n_tok,
                  const void *w, size_t we, int kfull, int tail)
{
    for (int t = 0; t < n_tok; t += 6) {
        float *yt = y + (size_t)t * ldy;
        const float *xt = x + (size_t)t * ldx;
        switch (n_tok - t < 6 ? n_tok - t : 6) {
        case 6: float_tile(MR, 6, F16, yt, ldy, xt, ldx, w, we, 0, kfull, 1, 1, tail, NULL); break;
        case 5: float_tile(MR, 5, F16, yt, ldy, xt, ldx, w, we, 0, kfull, 1, 1, tail, NULL); break;
        case 4: float_tile(MR, 4, F16, yt, ldy, xt, ldx, w, we, 0, kfull, 1, 1, tail, NULL); break;
        case 3: float_tile(MR, 3, F16, yt, ldy, xt, ldx, w, we, 0, kfull, 1, 1, tail, NULL); break;
        case 2: float_tile(MR, 2, F16, yt, ldy, xt, ldx, w, we, 0, kfull, 1, 1, tail, NULL); break;
        default: float_tile(MR, 1, F16, yt, ldy, xt, ldx, w, we, 0, kfull, 1, 1, tail, NULL); break;
        }
    }
}

static void float_gemm(int kind, float *y, size_t ldy, const cpu_act *a, int n_tok, const uint8_t *w, size_t ws,
                       int n_rows, int cols)
{
    const float *x = (const float *)(const void *)a->x;
    size_t ldx = a->stride / sizeof(float);
    int tail = cols % 16, kfull = cols - tail;

    if (n_tok <= (kind == K_F16 || kind == K_F32 ? DEC_MULTI : DEC_MULTI_Q)) {
        /* decode: rows outside, each row streams through once, no panel */
        int r = 0, f16 = kind == K_F16;
        size_t we = ws / (f16 ? 2 : 4);
        switch (kind) {   /* one specialization of the row tiles per block type */
        case K_Q4_0: block_decode(1, y, ldy, x, ldx, n_tok, w, ws, n_rows, cols); return;
        case K_Q8_0: block_decode(0, y, ldy, x, ldx, n_tok, w, ws, n_rows, cols); return;
        case K_Q4_K: kq_decode(K_Q4_K, y, ldy, x, ldx, n_tok, w, ws, n_rows, cols); return;
        case K_Q5_K: kq_decode(K_Q5_K, y, ldy, x, ldx, n_tok, w, ws, n_rows, cols); return;
        case K_Q6_K: kq_decode(K_Q6_K, y, ldy, x, ldx, n_tok, w, ws, n_rows, cols); return;
        default: break;
        }
        /* one row after another, no software prefetch: a single sequential stream per thread.
         * Tiles of 4 rows with the next tile prefetched (four streams 4 KB apart, and four more)
         * read F16 at 12-14 t/s on the 1.1B model where this reads at 15-19 (BENCHMARKS.md).
         * One row is one chain of FMAs, about 10 t/s a thread at 2.6 GHz, yet four chains fed
         * from one prefetched stream were no faster there. */
        for (; n_tok > 1 && r + 4 <= n_rows; r += 4) {   /* several tokens: four rows share each x load */
            if (f16)
                float_few(4, 1, y + r, ldy, x, ldx, n_tok, w + (size_t)r * ws, we, kfull, tail);
            else
                float_few(4, 0, y + r, ldy, x, ldx, n_tok, w + (size_t)r * ws, we, kfull, tail);
        }
        for (; r < n_rows; r++) {
            if (f16)
                float_few(1, 1, y + r, ldy, x, ldx, n_tok, w + (size_t)r * ws, we, kfull, tail);
            else
                float_few(1, 0, y + r, ldy, x, ldx, n_tok, w + (size_t)r * ws, we, kfull, tail);
        }
        return;
    }
    for (int rb = 0; rb < n_rows; rb += RB) {
        int nr = n_rows - rb < RB ? n_rows - rb : RB;
        const uint8_t *wb = w + (size_t)rb * ws;
        for (int t0 = 0; t0 < n_tok; t0 += TB) {
            int nt = n_tok - t0 < TB ? n_tok - t0 : TB;
            float *yb = y + (size_t)t0 * ldy + rb;
            const float *xb = x + (size_t)t0 * ldx;
            for (int k0 = 0; k0 < cols; k0 += CPU_GEMM_KC) {
                int last = k0 + CPU_GEMM_KC >= cols, kc = last ? kfull - k0 : CPU_GEMM_KC, tl = last ? tail : 0;
                panel_fill(kind, wb, ws, nr, k0, kc, tl);
                /* the next panel, a share of its rows per token tile (F16 pp64 +5-10%): blocks
                 * are uniform, so a chunk's bytes are proportional to its columns */
                const size_t pnext = ws * (size_t)(k0 + CPU_GEMM_KC) / (size_t)cols;
                const size_t pchunk = ws * (size_t)CPU_GEMM_KC / (size_t)cols;
                /* token tiles outside, row tiles inside: a tile's x (6 x 2 KB) and the panel
                 * (16 KB) both stay in L1, where rows outside streamed x from L2 once per
                 * 4 rows (29 -> 40 GMAC/s a thread, F16 and Q4_0 alike) */
                for (int t = 0; t < nt; t += 6) {
                    int n6 = nt - t < 6 ? nt - t : 6, r = 0;
                    cpu_prefetch_panel(w, ws, rb, RB, n_rows, pnext, pchunk, t0 + TB < n_tok, t / 6, (nt + 5) / 6);
                    float *yt = yb + (size_t)t * ldy;
                    const float *xt = xb + (size_t)t * ldx;
                    for (; r + 4 <= nr; r += 4)
                        float_rows(4, 0, yt + r, ldy, xt, ldx, n6, panel + (size_t)r * PSTRIDE, PSTRIDE, k0, kc,
                                   k0 == 0, last, tl, acc[r / 4] + t / 6, 0);
                    for (; r < nr; r++)
                        float_rows(1, 0, yt + r, ldy, xt, ldx, n6, panel + (size_t)r * PSTRIDE, PSTRIDE, k0, kc,
                                   k0 == 0, last, tl, acc[r / 4] + t / 6, r % 4);
                }
            }
        }
    }
}

#define GEMM(name, kind)                                                                                       \
    static void name(float *y, size_t ldy, const cpu_act *a, int n_tok, const uint8_t *w, size_t ws, int n_rows, \
                     int cols)                                                                                 \
    {                                                                                                          \
        float_gemm(kind, y, ldy, a, n_tok, w, ws, n_rows, cols);                                               \
    }
GEMM(gemm_f32, K_F32)
GEMM(gemm_f16, K_F16)
GEMM(gemm_q4_0, K_Q4_0)
GEMM(gemm_q8_0, K_Q8_0)
GEMM(gemm_q4_k, K_Q4_K)
GEMM(gemm_q5_k, K_Q5_K)
GEMM(gemm_q6_k, K_Q6_K)
#undef GEMM

/* ---------------------------------------------------------------- one row: this path's dots */

/* x is f32 for all four types (CPU_ACT_F32): one row is a 1 x 1 gemm. */
#define DOT(name, gemm)                                                             \
    static float name(const void *x, const void *w, int n)                        \
    {                                                                             \
        cpu_act a = { .x = x, .stride = 0 };                                       \
        float y;                                                                  \
        gemm(&y, 1, &a, 1, w, 0, 1, n);                                           \
        return y;                                                                 \
    }
DOT(dot_q4_0, gemm_q4_0)
DOT(dot_q8_0, gemm_q8_0)
DOT(dot_f16, gemm_f16)
DOT(dot_f32w, gemm_f32)
DOT(dot_q4_k, gemm_q4_k)
DOT(dot_q5_k, gemm_q5_k)
DOT(dot_q6_k, gemm_q6_k)
#undef DOT

/* Attention's dots (q . k over head_dim, any length): short rows, so two plain accumulators and
 * a masked tail, without the tile machinery. Both prefill and decode use these. */
AI float attn_dot(const int F16, const float *a, const void *b, int n)
{
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    int i = 0;

#define LDB(off, m) (F16 ? _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, (const uint16_t *)b + (off))) \
                         : _mm512_maskz_loadu_ps(m, (const float *)b + (off)))
    for (; i + 32 <= n; i += 32) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), LDB(i, 0xffff), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), LDB(i + 16, 0xffff), s1);
    }
    for (; i < n; i += 16) {
        __mmask16 m = first(n - i);
        s0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), LDB(i, m), s0);
    }
#undef LDB
    return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

static float dot_f32(const float *a, const float *b, int n) { return attn_dot(0, a, b, n); }
static float dot_f32_f16(const float *a, const uint16_t *b, int n) { return attn_dot(1, a, b, n); }

/* Its own dots_f32, since dot_f32 is its own (cpu_int.h: the same sums as the per-key calls). */
static void dots_f32(float *s, const float *q, const float *k, size_t ks, int m, int n)
{
    for (int i = 0; i < m; i++)
        s[i] = attn_dot(0, q, k + (size_t)i * ks, n);
}

/* Over avx2: the types and attention dots below are this file's; the rest, axpys_f32 among them
 * (axpy_f32 is avx2's), are avx2's. */
const cpu_path cpu_path_avx512 = {
    .name = "avx512",
    .base = &cpu_path_avx2,
    .built = 1,
    .type = {
        [GGML_TYPE_Q4_0] = CPU_F32(dot_q4_0, gemm_q4_0), [GGML_TYPE_Q8_0] = CPU_F32(dot_q8_0, gemm_q8_0),
        [GGML_TYPE_F16] = CPU_F32(dot_f16, gemm_f16), [GGML_TYPE_F32] = CPU_F32(dot_f32w, gemm_f32),
        [GGML_TYPE_Q4_K] = CPU_F32(dot_q4_k, gemm_q4_k), [GGML_TYPE_Q5_K] = CPU_F32(dot_q5_k, gemm_q5_k),
        [GGML_TYPE_Q6_K] = CPU_F32(dot_q6_k, gemm_q6_k),
    },
    .dot_f32 = dot_f32,
    .dot_f32_f16 = dot_f32_f16,
    .dots_f32 = dots_f32,
};

#else

CPU_PATH_ABSENT(cpu_path_avx512, "avx512");

#endif
