/* kernels_avx2_gemm.c: the avx2 path's gemms and the row dots they must equal, for
 * the types that dominate real models: Q8_0, Q4_0, Q4_K, Q6_K, MXFP4 with 16-bit activations, F16 and
 * F32 with f32 ones. Built with -mavx2 -mfma -mf16c on x86-64 only, called only after cpu.c found
 * them (the avx2 path's table, kernels_avx2.c, holds them beside the rest).
 *
 * Block types: kernels_vnni.h's design on eight 32-bit lanes, vpmaddwd + vpaddd standing for
 * vpdpwssd (the same exact integers). Activations keep cpu_quantize_q16's codes (the scalar path's
 * accuracy). The arithmetic of a (token, row), whatever the kernel that computes it:
 *   the row's blocks of 32 go in groups of 8 (a K-quant group is one super-block: its eight
 *   sub-blocks of 32), block i of a group in lane i; per block the exact integer dot product
 *   isum of its weight codes (offsets removed: q - 8, q - 32) with the activation codes, then in
 *   lane i, in this order:
 *       acc = fma((float)isum, a * dx, acc)      a: the block's weight scale, dx the activations'
 *       acc = fma(b, s, acc)                     Q4_K only: b = -dmin * min, s = dx * sum(codes)
 *   Q6_K has two scales per block (sub-blocks of 16): isum over elements 0-15 with a, then over
 *   16-31 with a2, one fma each. Lanes past the row's last block add nothing. The result is the
 *   8 lanes summed as a tree (4 + 4, 2 + 2, 1 + 1).
 * Two kernels meet it:
 *   decode (one token; also the row dot): activations in element order; per block two vpmaddwd
 *     leave 8 partial sums, and a transposing add tree turns 8 blocks' partials into the 8 block
 *     sums of a group;
 *   prefill: act_quantize lays each token out per group as 16 steps of 8 lanes of 32-bit pairs
 *     (lane i = block i's elements 2k, 2k + 1) and a panel of RB rows holds the weight codes the
 *     same way, so 16 vpmaddwd + vpaddd per (row, token, group) leave the 8 block sums in their
 *     lanes with no reduction at all. 4 rows x 2 tokens of accumulators, 2 activation vectors, a
 *     weight vector and a product: 12 of the 16 ymm registers.
 * Without VNNI a 256-bit FMA does 8 multiply-adds; vpmaddwd does 16, so on this class the integer
 * kernel has twice the f32 one's peak (the reverse of AVX-512 without VNNI, kernels_avx512.c).
 *
 * Float types: f32 FMAs on 8 lanes in four chains a row (its chunks of CPU_GEMM_KC columns in turn,
 * the order under "float weights" below); prefill dequantizes each chunk of 8 rows once into an
 * f32 panel and 4 rows x 3 tokens of accumulators pass over it, carrying the chunk's chain. */
#include "cpu/kernels.h"
#include "cpu/kquant_int.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>

#define AI static inline __attribute__((always_inline))

/* kernels_avxvnni.c builds the block types again with A2_VNNI defined (the avxvnni path): its
 * functions are then static, for that file's table, and the float types stay avx2's. */
#if defined(A2_VNNI)
#define A2_API static
#define A2_FN(name) vnni_##name
#else
#define A2_API
#define A2_FN(name) cpu_avx2_##name
#endif

/* acc + the products of a's and b's 16-bit pairs, each pair's two added first: vpmaddwd + vpaddd,
 * or one vpdpwssd where the CPU has it (the avxvnni path). Both are exact 32-bit integer sums
 * (wrapping alike), so the two paths give the same bits. */
AI __m256i dpwssd(__m256i acc, __m256i a, __m256i b)
{
#if defined(A2_VNNI) && defined(__AVX512VNNI__) && defined(__AVX512VL__)
    return _mm256_dpwssd_epi32(acc, a, b);   /* avxvnni-evex: the EVEX encoding, for tests */
#elif defined(A2_VNNI) && defined(__AVXVNNI__)
    return _mm256_dpwssd_avx_epi32(acc, a, b);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b));
#endif
}

enum { A_Q8_0, A_Q4_0, A_Q4_K, A_Q6_K, A_MXFP4 };

/* ---------------------------------------------------------------- activations */

/* Matmuls of up to DEC_MULTI tokens run as decode does (decode_multi): what a pass of several
 * sequences' next tokens is (runtime.h), where the panel of the prefill kernel would cost more
 * to fill than its few tokens gain from it. */
#define DEC_MULTI 8

/* A token's activations for 8 blocks (zero past the row's last block), the size of 8 cpu_q16:
 *   decode (a matmul of up to DEC_MULTI tokens, and the row dot): q[i] = block i's codes in order
 *     (for Q4_0, s[i] holds the codes' sum as an int32 instead);
 *   prefill: xt[k][i] = block i's codes 2k, 2k + 1 (a 32-bit pair). */
typedef struct a2_group {
    union {
        int16_t q[8][QK];
        int32_t xt[16][8];
    };
    float dx[8], s[8];
} a2_group;

_Static_assert(sizeof(a2_group) == 8 * sizeof(cpu_q16), "a group is the size of 8 cpu_q16 blocks");

A2_API size_t A2_FN(act_bytes)(int n_tok, int cols)
{
    (void)n_tok;
    return (size_t)(cols / QK + 7) / 8 * sizeof(a2_group);   /* >= cols / QK cpu_q16 blocks */
}

/* One token of the types above (the others take plain cpu_q16 blocks: their table entries say so). */
A2_API void A2_FN(act_quantize)(uint8_t *dst, const float *x, int type, int n_tok, int cols)
{
    int nb = cols / QK;

    for (int g0 = 0; g0 < nb; g0 += 8) {
        a2_group *g = (a2_group *)(void *)dst + g0 / 8;
        cpu_q16 tmp[8];
        int n = nb - g0 < 8 ? nb - g0 : 8;

        memset(tmp, 0, sizeof tmp);
        cpu_quantize_q16(tmp, x + (size_t)g0 * QK, n * QK);
        for (int i = 0; i < 8; i++) {
            if (n_tok <= DEC_MULTI) {
                memcpy(g->q[i], tmp[i].q, sizeof tmp[i].q);
            } else {
                int32_t pair[16];
                memcpy(pair, tmp[i].q, sizeof pair);
                for (int k = 0; k < 16; k++)
                    g->xt[k][i] = pair[k];
            }
            g->dx[i] = tmp[i].d;
            g->s[i] = tmp[i].s;
            if (n_tok <= DEC_MULTI && type == GGML_TYPE_Q4_0) { /* decode takes the codes' sum instead (group_dot) */
                int32_t sum = cpu_q16_sum(&tmp[i]);
                memcpy(&g->s[i], &sum, sizeof sum);
            }
        }
    }
}

/* ---------------------------------------------------------------- the weight blocks */

static inline size_t block_bytes(int kind)
{
    return kind == A_Q8_0 ? CPU_Q8_0_BYTES : kind == A_Q4_0 ? CPU_Q4_0_BYTES : kind == A_MXFP4 ? CPU_MXFP4_BYTES : 0;
}

/* Block bi of a row as 16-bit codes, offsets removed: elements 0-15 in *lo, 16-31 in *hi. K-quant
 * blocks are the sub-blocks of 32 of each super-block, in order. */
AI void codes(const int kind, const uint8_t *row, int bi, __m256i *lo, __m256i *hi)
{
    const __m128i m4 = _mm_set1_epi8(15);

    switch (kind) {
    case A_Q8_0: {
        const uint8_t *p = row + (size_t)bi * CPU_Q8_0_BYTES + 2;
        *lo = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(const void *)p));
        *hi = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(const void *)(p + 16)));
        return;
    }
    case A_Q4_0: {
        /* the 16 bytes widened once: each 16-bit lane holds both nibbles of one byte */
        __m256i v = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(const void *)(row + (size_t)bi * CPU_Q4_0_BYTES + 2)));
        const __m256i eight = _mm256_set1_epi16(8);
        *lo = _mm256_sub_epi16(_mm256_and_si256(v, _mm256_set1_epi16(15)), eight);
        *hi = _mm256_sub_epi16(_mm256_srli_epi16(v, 4), eight);
        return;
    }
    case A_MXFP4: {
        /* Q4_0's nibble order (j, j + 16), each nibble looked up in the doubled E2M1 code book */
        const __m128i kv = _mm_loadu_si128((const __m128i *)(const void *)cpu_mxfp4_values);
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(row + (size_t)bi * CPU_MXFP4_BYTES + 1));
        *lo = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(kv, _mm_and_si128(v, m4)));
        *hi = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(kv, _mm_and_si128(_mm_srli_epi16(v, 4), m4)));
        return;
    }
    case A_Q4_K: {
        int j = bi % 8;
        const uint8_t *q = row + (size_t)(bi / 8) * CPU_Q4_K_BYTES + 16 + 32 * (j / 2);
        __m128i v0 = _mm_loadu_si128((const __m128i *)(const void *)q);
        __m128i v1 = _mm_loadu_si128((const __m128i *)(const void *)(q + 16));
        if (j % 2) {
            v0 = _mm_srli_epi16(v0, 4);
            v1 = _mm_srli_epi16(v1, 4);
        }
        *lo = _mm256_cvtepu8_epi16(_mm_and_si128(v0, m4));
        *hi = _mm256_cvtepu8_epi16(_mm_and_si128(v1, m4));
        return;
    }
    default: { /* A_Q6_K: elements 128h + 32jj + l, l < 32, of the super-block (kquant_scalar.c) */
        const uint8_t *p = row + (size_t)(bi / 8) * CPU_Q6_K_BYTES;
        int j = bi % 8, h = j / 4, jj = j % 4;
        __m256i l = _mm256_loadu_si256((const __m256i *)(const void *)(p + 64 * h + 32 * (jj % 2)));
        __m256i hb = _mm256_loadu_si256((const __m256i *)(const void *)(p + 128 + 32 * h));
        if (jj / 2)
            l = _mm256_srli_epi16(l, 4);
        l = _mm256_and_si256(l, _mm256_set1_epi8(15));
        /* bits 2jj, 2jj + 1 of each byte to bits 4, 5 in one shift: what the 16-bit shift carries in
         * from the neighbouring byte lands outside the mask */
        hb = jj < 2 ? _mm256_slli_epi16(hb, 4 - 2 * jj) : jj == 3 ? _mm256_srli_epi16(hb, 2) : hb;
        hb = _mm256_and_si256(hb, _mm256_set1_epi8(0x30));
        l = _mm256_sub_epi8(_mm256_or_si256(l, hb), _mm256_set1_epi8(32));
        *lo = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(l));
        *hi = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(l, 1));
        return;
    }
    }
}

/* The scales of blocks g0 .. g0 + n - 1 of a row into lanes 0 .. n - 1 (0 past them): a, and b
 * (Q4_K) or a2 (Q6_K). K-quant groups are whole super-blocks (n = 8). */
AI void group_scales(const int kind, const uint8_t *row, int g0, int n, __m256 *a, __m256 *b, __m256 *a2)
{
    *b = *a2 = _mm256_setzero_ps();
    if (kind == A_Q4_0 || kind == A_Q8_0) {
        const uint8_t *p = row + (size_t)g0 * block_bytes(kind);
        const int bb = (int)block_bytes(kind);

        /* eight loads, as for Q8_0, not one vpgatherdd: QEMU 7.2's TCG, on which CI runs this path
         * (tests/x86.sh), gave wrong lanes for the gather as soon as a second thread ran, where a
         * real CPU, and qemu with one thread, agreed with the row dot */
        uint16_t h[8] = {0};
        for (int i = 0; i < n; i++)
            h[i] = cpu_rd16(p + i * bb);
        *a = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)h));
        return;
    }
    if (kind == A_MXFP4) {   /* E8M0 bytes: each scale exact (cpu_mxfp4_scale), 0 past the n blocks */
        float d[8] = {0};
        for (int i = 0; i < n; i++)
            d[i] = cpu_mxfp4_scale(row[(size_t)(g0 + i) * CPU_MXFP4_BYTES]);
        *a = _mm256_loadu_ps(d);
        return;
    }
    if (kind == A_Q4_K) {
        /* cpu_scale_min_k4's 6-bit fields, eight at a time in a 64-bit word */
        const uint8_t *p = row + (size_t)(g0 / 8) * CPU_Q4_K_BYTES;
        uint32_t l0 = cpu_rd32(p + 4), l1 = cpu_rd32(p + 8), l2 = cpu_rd32(p + 12);
        uint64_t sc = (uint64_t)(l0 & 0x3f3f3f3fu) | (uint64_t)((l2 & 0x0f0f0f0fu) | ((l0 >> 2) & 0x30303030u)) << 32;
        uint64_t mn = (uint64_t)(l1 & 0x3f3f3f3fu) | (uint64_t)(((l2 >> 4) & 0x0f0f0f0fu) | ((l1 >> 2) & 0x30303030u))
                                                        << 32;
        __m256 d = _mm256_set1_ps(_cvtsh_ss(cpu_rd16(p))), dmin = _mm256_set1_ps(_cvtsh_ss(cpu_rd16(p + 2)));
        *a = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)sc))));
        *b = _mm256_sub_ps(_mm256_setzero_ps(),
                           _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)mn)))));
        return;
    }
    /* A_Q6_K: a = d * sc[2j], a2 = d * sc[2j + 1] */
    const uint8_t *p = row + (size_t)(g0 / 8) * CPU_Q6_K_BYTES;
    __m128i sc = _mm_loadu_si128((const __m128i *)(const void *)(p + 192));
    __m256 d = _mm256_set1_ps(_cvtsh_ss(cpu_rd16(p + 208)));
    __m128i ev = _mm_shuffle_epi8(sc, _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15));
    *a = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(ev)));
    *a2 = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(ev, 8))));
}

/* A transposing add tree (exact integers, so the order of the additions does not matter), in two
 * steps so that a caller can take the first as its pairs of blocks come and keep fewer registers
 * live: pair_lanes(a, b) holds a's and b's lane sums in halves; quad_lanes of four such gives lane
 * i = the sum of the i-th vector's 8 lanes. */
AI __m256i pair_lanes(__m256i a, __m256i b)
{
    return _mm256_add_epi32(_mm256_unpacklo_epi32(a, b), _mm256_unpackhi_epi32(a, b));
}

AI __m256i half_lanes(__m256i a, __m256i b)
{
    return _mm256_add_epi32(_mm256_unpacklo_epi64(a, b), _mm256_unpackhi_epi64(a, b));
}

AI __m256i last_lanes(__m256i t0, __m256i t1)
{
    return _mm256_add_epi32(_mm256_permute2x128_si256(t0, t1, 0x20), _mm256_permute2x128_si256(t0, t1, 0x31));
}

AI __m256i quad_lanes(const __m256i s[4])
{
    return last_lanes(half_lanes(s[0], s[1]), half_lanes(s[2], s[3]));
}

/* The 8 lanes as a tree: (4 + 4, 2 + 2, 1 + 1). */
AI float hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));

    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* ---------------------------------------------------------------- decode and the row dot */

/* Bytes of 8 blocks of a row (K-quants: one super-block). */
static inline size_t group_bytes(int kind)
{
    return kind == A_Q4_K ? CPU_Q4_K_BYTES : kind == A_Q6_K ? CPU_Q6_K_BYTES : 8 * block_bytes(kind);
}

/* Decode streams a matrix once, row after row; asking for the lines DEC_AHEAD bytes on keeps more
 * of them in flight than the hardware prefetcher does behind the unpacking (kernels_vnni.h). */
#define DEC_AHEAD 2048

/* One group of a row against one token (decode layout), n blocks (8 in FULL groups). */
AI __m256 group_dot(const int kind, const int FULL, __m256 acc, const a2_group *xg, const uint8_t *row, int g0, int n)
{
    __m256i p[8], s[4];
    __m256 a, b, a2;

    if (kind == A_Q4_K) {
        /* sub-blocks 2m and 2m + 1 share 32 bytes (low and high nibbles): each half of them widened
         * once, both sub-blocks taken from it (the same codes as codes(), fewer shuffles), their
         * sums folded into a pair at once */
        const uint8_t *q = row + (size_t)(g0 / 8) * CPU_Q4_K_BYTES + 16;
        const __m256i m15 = _mm256_set1_epi16(15);
#pragma GCC unroll 4
        for (int i = 0; i < 8; i += 2) {
            __m256i v0 = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(const void *)(q + 16 * i)));
            __m256i v1 = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(const void *)(q + 16 * i + 16)));
            __m256i e = dpwssd(
                _mm256_madd_epi16(_mm256_and_si256(v0, m15), _mm256_loadu_si256((const __m256i *)(const void *)xg->q[i])),
                _mm256_and_si256(v1, m15), _mm256_loadu_si256((const __m256i *)(const void *)(xg->q[i] + 16)));
            __m256i o = dpwssd(_mm256_madd_epi16(_mm256_srli_epi16(v0, 4),
                                                 _mm256_loadu_si256((const __m256i *)(const void *)xg->q[i + 1])),
                               _mm256_srli_epi16(v1, 4),
                               _mm256_loadu_si256((const __m256i *)(const void *)(xg->q[i + 1] + 16)));
            s[i / 2] = pair_lanes(e, o);
        }
        group_scales(kind, row, g0, 8, &a, &b, &a2);
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(quad_lanes(s)), _mm256_mul_ps(a, _mm256_loadu_ps(xg->dx)), acc);
        return _mm256_fmadd_ps(b, _mm256_loadu_ps(xg->s), acc);
    }
    if (kind == A_Q6_K) {
        /* the two halves' sums of two blocks at a time folded into pairs at once: the 16 partial
         * vectors of a group would not fit the 16 ymm registers */
        __m256i s2[4];
#pragma GCC unroll 4
        for (int i = 0; i < 8; i += 2) {
            __m256i lo0, hi0, lo1, hi1;
            codes(kind, row, g0 + i, &lo0, &hi0);
            codes(kind, row, g0 + i + 1, &lo1, &hi1);
            s[i / 2] = pair_lanes(
                _mm256_madd_epi16(lo0, _mm256_loadu_si256((const __m256i *)(const void *)xg->q[i])),
                _mm256_madd_epi16(lo1, _mm256_loadu_si256((const __m256i *)(const void *)xg->q[i + 1])));
            s2[i / 2] = pair_lanes(
                _mm256_madd_epi16(hi0, _mm256_loadu_si256((const __m256i *)(const void *)(xg->q[i] + 16))),
                _mm256_madd_epi16(hi1, _mm256_loadu_si256((const __m256i *)(const void *)(xg->q[i + 1] + 16))));
        }
        group_scales(kind, row, g0, 8, &a, &b, &a2);
        __m256 dx = _mm256_loadu_ps(xg->dx);
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(quad_lanes(s)), _mm256_mul_ps(a, dx), acc);
        return _mm256_fmadd_ps(_mm256_cvtepi32_ps(quad_lanes(s2)), _mm256_mul_ps(a2, dx), acc);
    }
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) {
        __m256i lo, hi;
        if (!FULL && i >= n) {
            p[i] = _mm256_setzero_si256();
        } else {
            if (kind == A_Q4_0) { /* the nibbles as they are: the - 8 is taken once per group below */
                __m256i v = _mm256_cvtepu8_epi16(
                    _mm_loadu_si128((const __m128i *)(const void *)(row + (size_t)(g0 + i) * CPU_Q4_0_BYTES + 2)));
                lo = _mm256_and_si256(v, _mm256_set1_epi16(15));
                hi = _mm256_srli_epi16(v, 4);
            } else {
                codes(kind, row, g0 + i, &lo, &hi);
            }
            p[i] = dpwssd(_mm256_madd_epi16(lo, _mm256_loadu_si256((const __m256i *)(const void *)xg->q[i])), hi,
                          _mm256_loadu_si256((const __m256i *)(const void *)(xg->q[i] + 16)));
        }
        if (i % 2)
            s[i / 2] = pair_lanes(p[i - 1], p[i]);
    }
    group_scales(kind, row, g0, FULL ? 8 : n, &a, &b, &a2);
    __m256 dx = _mm256_loadu_ps(xg->dx);
    __m256i isum = quad_lanes(s);
    if (kind == A_Q4_0) /* sum (n - 8) x = sum n x - 8 sum x, exactly; the decode layout holds sum x in s */
        isum = _mm256_sub_epi32(isum, _mm256_slli_epi32(_mm256_loadu_si256((const __m256i *)(const void *)xg->s), 3));
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(a, dx), acc);
}

/* Group g0's lines DEC_AHEAD bytes on into L1, or a long row's (kernels.h) further on into L2. */
AI void prefetch_group(const uint8_t *row, size_t gb, int g0, int nb)
{
    const uint8_t *p = row + (size_t)g0 / 8 * gb;

    if (cpu_dec_long((size_t)nb * QK * 2))   /* 16-bit codes */
        cpu_dec_prefetch_l2(p, gb);
    else
        for (size_t l = 0; l < gb; l += 64)
            _mm_prefetch((const char *)p + DEC_AHEAD + l, _MM_HINT_T0);
}

AI float row_dot(const int kind, const a2_group *x, const uint8_t *row, int nb)
{
    const size_t gb = group_bytes(kind);
    __m256 acc = _mm256_setzero_ps();
    int g0 = 0;

    for (; g0 + 8 <= nb; g0 += 8) {
        prefetch_group(row, gb, g0, nb);
        acc = group_dot(kind, 1, acc, x + g0 / 8, row, g0, 8);
    }
    if (g0 < nb)
        acc = group_dot(kind, 0, acc, x + g0 / 8, row, g0, nb - g0);
    return hsum8(acc);
}

/* n_tok <= DEC_MULTI tokens (decode layout), row after row: each group of the row comes from memory
 * once and from L1 for the other tokens, so the weights stream once for all of them. Each (token,
 * row) is row_dot's arithmetic: the same group_dot calls in the same order. */
AI void decode_multi(const int kind, float *y, size_t ldy, const cpu_act *act, int n_tok, const uint8_t *w, size_t ws,
                     int n_rows, int nb)
{
    const size_t gb = group_bytes(kind);

    for (int r = 0; r < n_rows; r++) {
        const uint8_t *row = w + (size_t)r * ws;
        __m256 acc[DEC_MULTI];
        int g0 = 0;

        for (int t = 0; t < n_tok; t++)
            acc[t] = _mm256_setzero_ps();
        for (; g0 + 8 <= nb; g0 += 8) {
            prefetch_group(row, gb, g0, nb);
            for (int t = 0; t < n_tok; t++)
                acc[t] = group_dot(kind, 1, acc[t], (const a2_group *)(const void *)(act->x + (size_t)t * act->stride) +
                                                        g0 / 8, row, g0, 8);
        }
        for (int t = 0; g0 < nb && t < n_tok; t++)
            acc[t] = group_dot(kind, 0, acc[t], (const a2_group *)(const void *)(act->x + (size_t)t * act->stride) +
                                                    g0 / 8, row, g0, nb - g0);
        for (int t = 0; t < n_tok; t++)
            y[(size_t)t * ldy + r] = hsum8(acc[t]);
    }
}

/* ---------------------------------------------------------------- prefill */

#define RB 8  /* rows per panel */
#define TB 64 /* tokens whose float accumulators stay live across the groups */

typedef struct a2_panel {
    int32_t wt[RB][16][8]; /* [r][k][i]: row r, block i's weight codes 2k, 2k + 1 */
    float a[RB][8], b[RB][8], a2[RB][8];
} a2_panel;

static _Thread_local _Alignas(64) a2_panel panel;
static _Thread_local _Alignas(64) float facc[RB][TB][8];

/* r[i] = column i of the 8 x 8 matrix of 32-bit lanes in r. */
AI void transpose8(__m256i r[8])
{
    __m256i t[8], u[8];

    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 2; i++) {
        u[4 * i] = _mm256_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 1] = _mm256_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 2] = _mm256_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
        u[4 * i + 3] = _mm256_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
    for (int i = 0; i < 4; i++) {
        r[i] = _mm256_permute2x128_si256(u[i], u[4 + i], 0x20);
        r[4 + i] = _mm256_permute2x128_si256(u[i], u[4 + i], 0x31);
    }
}

/* Rows [0, nr) of the panel from group g0 of w (zero past the rows and blocks). */
AI void panel_fill(const int kind, const uint8_t *w, size_t ws, int nr, int g0, int nb)
{
    int n = nb - g0 < 8 ? nb - g0 : 8;

    for (int r = 0; r < RB; r++) {
        __m256i lo[8], hi[8], a, b, a2;
        if (r >= nr) {
            memset(panel.wt[r], 0, sizeof panel.wt[r]);
            memset(panel.a[r], 0, sizeof panel.a[r]);
            memset(panel.b[r], 0, sizeof panel.b[r]);
            memset(panel.a2[r], 0, sizeof panel.a2[r]);
            continue;
        }
        const uint8_t *row = w + (size_t)r * ws;
        for (int i = 0; i < 8; i++) {
            if (i < n)
                codes(kind, row, g0 + i, &lo[i], &hi[i]);
            else
                lo[i] = hi[i] = _mm256_setzero_si256();
        }
        transpose8(lo);
        transpose8(hi);
        for (int k = 0; k < 8; k++) {
            _mm256_store_si256((__m256i *)(void *)panel.wt[r][k], lo[k]);
            _mm256_store_si256((__m256i *)(void *)panel.wt[r][8 + k], hi[k]);
        }
        __m256 fa, fb, fa2;
        group_scales(kind, row, g0, n, &fa, &fb, &fa2);
        _mm256_store_ps(panel.a[r], fa);
        _mm256_store_ps(panel.b[r], fb);
        _mm256_store_ps(panel.a2[r], fa2);
        (void)a, (void)b, (void)a2;
    }
}

/* 4 panel rows from r0 x MT tokens (group pointers xg[t]) over steps [K0, K0 + NK): the block sums
 * in lanes, folded into facc with the scales `sa` (panel.a or panel.a2), and b * s where `offset`.
 * The steps unroll whole, so that the accumulators stay in place (a rolled loop left gcc copying
 * each one every step), and each weight vector is loaded once into a register for its MT uses. */
AI void tile_k(const int MT, const int K0, const int NK, int r0, const a2_group *const *xg, int t0,
               const float (*sa)[8], int offset)
{
    __m256i c[4][2];

#pragma GCC unroll 4
    for (int r = 0; r < 4; r++)
#pragma GCC unroll 2
        for (int t = 0; t < MT; t++)
            c[r][t] = _mm256_setzero_si256();
#pragma GCC unroll 16
    for (int k = K0; k < K0 + NK; k++) {
        __m256i xv[2];
#pragma GCC unroll 2
        for (int t = 0; t < MT; t++)
            xv[t] = _mm256_loadu_si256((const __m256i *)(const void *)xg[t]->xt[k]);
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++) {
            __m256i wv = _mm256_load_si256((const __m256i *)(const void *)panel.wt[r0 + r][k]);
            if (MT > 1)
                __asm__("" : "+x"(wv)); /* in a register: folded into each vpmaddwd it was loaded MT times */
#pragma GCC unroll 2
            for (int t = 0; t < MT; t++) {
                c[r][t] = dpwssd(c[r][t], wv, xv[t]);
                /* one running sum: unrolled, gcc reassociated the exact integer adds into a tree
                 * of all 16 products per accumulator and spilled them */
                __asm__("" : "+x"(c[r][t]));
            }
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++) {
        __m256 a = _mm256_load_ps(sa[r0 + r]), b = _mm256_load_ps(panel.b[r0 + r]);
#pragma GCC unroll 2
        for (int t = 0; t < MT; t++) {
            float *f = facc[r0 + r][t0 + t];
            __m256 acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(c[r][t]), _mm256_mul_ps(a, _mm256_loadu_ps(xg[t]->dx)),
                                         _mm256_load_ps(f));
            if (offset)
                acc = _mm256_fmadd_ps(b, _mm256_loadu_ps(xg[t]->s), acc);
            _mm256_store_ps(f, acc);
        }
    }
}

/* Out of line, one copy per shape (inlined into the panel loop, gcc may merge the row tiles and
 * spill, as it did with kernels_vnni.h's). */
#define TILE(name, MT, K0, NK)                                                                                      \
    static __attribute__((noinline)) void name(int r0, const a2_group *const *xg, int t0, const float (*sa)[8],      \
                                               int offset)                                                           \
    {                                                                                                               \
        tile_k(MT, K0, NK, r0, xg, t0, sa, offset);                                                                 \
    }
TILE(tile2, 2, 0, 16)
TILE(tile1, 1, 0, 16)
TILE(tile2_lo, 2, 0, 8)
TILE(tile1_lo, 1, 0, 8)
TILE(tile2_hi, 2, 8, 8)
TILE(tile1_hi, 1, 8, 8)
#undef TILE

/* The tiles of one group: Q6_K's two halves with their scales; Q4_K's b * s once. */
AI void tiles(const int kind, int r0, const a2_group *const *xg, int t0, int mt)
{
    if (kind == A_Q6_K) {
        if (mt == 2) {
            tile2_lo(r0, xg, t0, panel.a, 0);
            tile2_hi(r0, xg, t0, panel.a2, 0);
        } else {
            tile1_lo(r0, xg, t0, panel.a, 0);
            tile1_hi(r0, xg, t0, panel.a2, 0);
        }
    } else if (mt == 2) {
        tile2(r0, xg, t0, panel.a, kind == A_Q4_K);
    } else {
        tile1(r0, xg, t0, panel.a, kind == A_Q4_K);
    }
}

AI void gemm_kind(const int kind, float *y, size_t ldy, const cpu_act *act, int n_tok, const uint8_t *w, size_t ws,
                  int n_rows, int cols)
{
    int nb = cols / QK, ng = (nb + 7) / 8;
    const size_t gb = group_bytes(kind);

    if (n_tok == 1) {
        for (int r = 0; r < n_rows; r++)
            y[r] = row_dot(kind, (const a2_group *)(const void *)act->x, w + (size_t)r * ws, nb);
        return;
    }
    if (n_tok <= DEC_MULTI) {
        decode_multi(kind, y, ldy, act, n_tok, w, ws, n_rows, nb);
        return;
    }
    for (int rb = 0; rb < n_rows; rb += RB) {
        int nr = n_rows - rb < RB ? n_rows - rb : RB;
        const uint8_t *wb = w + (size_t)rb * ws;
        for (int t0 = 0; t0 < n_tok; t0 += TB) {
            int nt = n_tok - t0 < TB ? n_tok - t0 : TB;
            for (int r = 0; r < RB; r++) /* the nt tokens' accumulators only (kernels_vnni.h) */
                memset(facc[r], 0, (size_t)nt * sizeof facc[r][0]);
            for (int g = 0; g < ng; g++) {
                panel_fill(kind, wb, ws, nr, 8 * g, nb);
                for (int t = 0; t < nt; t += 2) {
                    const a2_group *xg[2];
                    int mt = nt - t < 2 ? nt - t : 2;
                    cpu_prefetch_panel(w, ws, rb, RB, n_rows, (size_t)(g + 1) * gb, gb, t0 + TB < n_tok, t / 2,
                                      (nt + 1) / 2);
                    for (int i = 0; i < mt; i++)
                        xg[i] = (const a2_group *)(const void *)(act->x + (size_t)(t0 + t + i) * act->stride) + g;
                    tiles(kind, 0, xg, t, mt);
                    if (nr > 4)
                        tiles(kind, 4, xg, t, mt);
                }
            }
            for (int t = 0; t < nt; t++)
                for (int r = 0; r < nr; r++)
                    y[(size_t)(t0 + t) * ldy + rb + r] = hsum8(_mm256_load_ps(facc[r][t]));
        }
    }
}

#define BLOCK_TYPE(name, kind)                                                                                         \
    A2_API void A2_FN(gemm_##name)(float *y, size_t ldy, const cpu_act *a, int n_tok, const uint8_t *w, size_t ws,  \
                                   int n_rows, int cols)                                                               \
    {                                                                                                                  \
        gemm_kind(kind, y, ldy, a, n_tok, w, ws, n_rows, cols);                                                        \
    }                                                                                                                  \
    A2_API float A2_FN(dot_##name)(const void *x, const void *w, int n)                                            \
    {                                                                                                                  \
        return row_dot(kind, x, w, n / QK);                                                                            \
    }
BLOCK_TYPE(q8_0, A_Q8_0)
BLOCK_TYPE(q4_0, A_Q4_0)
BLOCK_TYPE(q4_k, A_Q4_K)
BLOCK_TYPE(q6_k, A_Q6_K)
BLOCK_TYPE(mxfp4, A_MXFP4)
#undef BLOCK_TYPE

/* ---------------------------------------------------------------- float weights */
#if !defined(A2_VNNI)

enum { F_F32, F_F16 };

/* The arithmetic of a (token, row) of F16 or F32 weights, whatever the kernel: the row's chunks of
 * CPU_GEMM_KC columns go to four chains in turn (chunk i to chain i % 4), each chain a run of
 * 8-lane FMAs in column order (a last partial vector zero-padded), and
 *     y = hsum8((c0 + c1) + (c2 + c3)).
 * Decode reads a row as one sequential stream, and at each chunk's end the next chain starts
 * without waiting for the last FMA of the one before. It used to take four rows at once (four
 * chains of FMAs, but four streams), and ran at 0.59-0.80x llama.cpp's AVX2 decode; one row with one
 * chain waits on each FMA's latency. Chains of 32-column pieces in turn decode faster still on one
 * thread (a chunk's chain here is 64 dependent FMAs), but read the activations of the prefill tiles
 * and the weights of the few-token path in short runs: laid out by chain, the prefill kept its
 * speed, the path for 2-16 tokens did not (BENCHMARKS.md). Prefill carries each chain in memory
 * from one of its chunks to the next, as it carried its one accumulator before. */
#define FCHAINS 4

/* Lanes [0, n) set, for the partial last vector of a row (n < 8). */
AI __m256i first(int n)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* Row r's 8 weights at column k: from the f32 panel (SRC_PANEL: rows `wst` floats apart, the
 * partial last vector stored zero-padded), or straight from the f16 or f32 weights. */
enum { SRC_PANEL, SRC_F16, SRC_F32 };

AI __m256 load_w(const int SRC, const void *w, size_t wst, int r, int k)
{
    if (SRC == SRC_PANEL)
        return _mm256_load_ps((const float *)w + (size_t)r * wst + k);
    if (SRC == SRC_F16)
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)((const uint16_t *)w + (size_t)r * wst + k)));
    return _mm256_loadu_ps((const float *)w + (size_t)r * wst + k);
}

AI __m256 load_w_tail(const int SRC, const void *w, size_t wst, int r, int k, int tail)
{
    if (SRC == SRC_PANEL)
        return _mm256_load_ps((const float *)w + (size_t)r * wst + k);
    if (SRC == SRC_F16) {
        uint16_t h[8] = {0};
        memcpy(h, (const uint16_t *)w + (size_t)r * wst + k, (size_t)tail * 2);
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)h));
    }
    return _mm256_maskload_ps((const float *)w + (size_t)r * wst + k, first(tail));
}

/* The row's partial last vector (m columns) into acc[r * 3 + t]: out of line, so that its masks
 * take none of the 16 registers from the loop before it (with them in, gcc loaded one token's
 * activations four times a step: 25% slower prefill). */
static __attribute__((noinline)) void float_tail(int MR, int MT, int SRC, __m256 *acc, const float *x, size_t ldx,
                                                 const void *w, size_t wst, int kx, int v, int m)
{
    for (int t = 0; t < MT; t++) {
        __m256 xv = _mm256_maskload_ps(x + (size_t)t * ldx + kx + v, first(m));
        for (int r = 0; r < MR; r++) {
            acc[r * 3 + t] = _mm256_fmadd_ps(load_w_tail(SRC, w, wst, r, v, m), xv, acc[r * 3 + t]);
        }
    }
}

/* Chain ch of a tile, MR rows x MT tokens, over columns [k, k + n) (of x from kx + k): from acc[ch *
 * 12 + r * 3 + t] (from 0 when `start`, the chain's first chunk) back to it. */
AI void float_chain(const int MR, const int MT, const int SRC, const float *x, size_t ldx, const void *w, size_t wst,
                    int kx, int k, int n, int ch, int start, __m256 *acc)
{
    __m256 c[4][3];
    int v = k, end = k + n - n % 8;

#pragma GCC unroll 4
    for (int r = 0; r < MR; r++)
#pragma GCC unroll 3
        for (int t = 0; t < MT; t++)
            c[r][t] = start ? _mm256_setzero_ps() : acc[ch * 12 + r * 3 + t];
    for (; v < end; v += 8) {
        __m256 xv[3];
#pragma GCC unroll 3
        for (int t = 0; t < MT; t++)
            xv[t] = _mm256_loadu_ps(x + (size_t)t * ldx + kx + v);
#pragma GCC unroll 4
        for (int r = 0; r < MR; r++) {
            __m256 wv = load_w(SRC, w, wst, r, v);
#pragma GCC unroll 3
            for (int t = 0; t < MT; t++)
                c[r][t] = _mm256_fmadd_ps(wv, xv[t], c[r][t]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < MR; r++)
#pragma GCC unroll 3
        for (int t = 0; t < MT; t++)
            acc[ch * 12 + r * 3 + t] = c[r][t];
    if (n % 8)
        float_tail(MR, MT, SRC, acc + ch * 12, x, ldx, w, wst, kx, v, n % 8);
}

AI float chains_sum(__m256 c0, __m256 c1, __m256 c2, __m256 c3)
{
    return hsum8(_mm256_add_ps(_mm256_add_ps(c0, c1), _mm256_add_ps(c2, c3)));
}

/* A tile's sums to y[t * ldy + r]; chains past a row's nch chunks (a row of under four) are 0. */
AI void chains_store(const int MR, const int MT, float *y, size_t ldy, const __m256 *acc, int nch)
{
    __m256 z = _mm256_setzero_ps();

    for (int r = 0; r < MR; r++)
        for (int t = 0; t < MT; t++) {
            int i = r * 3 + t;
            y[(size_t)t * ldy + r] = chains_sum(acc[i], nch > 1 ? acc[12 + i] : z, nch > 2 ? acc[24 + i] : z,
                                                nch > 3 ? acc[36 + i] : z);
        }
}

/* Chunks of a row of `cols` columns, up to FCHAINS. */
AI int row_chains(int cols)
{
    int n = (cols + CPU_GEMM_KC - 1) / CPU_GEMM_KC;

    return n < FCHAINS ? n : FCHAINS;
}

/* The whole row for MR rows x MT tokens, chain after chain, into y[t * ldy + r]. */
AI void float_tile(const int MR, const int MT, const int SRC, float *y, size_t ldy, const float *x, size_t ldx,
                   const void *w, size_t wst, int cols)
{
    const size_t eb = SRC == SRC_F16 ? 2 : 4;
    __m256 acc[FCHAINS * 12];

    for (int k = 0; k < cols; k += CPU_GEMM_KC) {
        int n = cols - k < CPU_GEMM_KC ? cols - k : CPU_GEMM_KC;
        if (MR == 1 && MT == 1 && SRC != SRC_PANEL && cpu_dec_long((size_t)cols * sizeof(float)))
            cpu_dec_prefetch_l2((const uint8_t *)w + (size_t)k * eb, (size_t)n * eb);   /* decode */
        float_chain(MR, MT, SRC, x, ldx, w, wst, 0, k, n, k / CPU_GEMM_KC % FCHAINS, k < FCHAINS * CPU_GEMM_KC, acc);
    }
    chains_store(MR, MT, y, ldy, acc, row_chains(cols));
}

#define FRB 8  /* rows per float panel */
#define FTB 66 /* tokens per block: 22 tiles of 3 */
/* Panel rows 2 KB + one line apart (kernels_avx512.c: x's rows often fill one L1 set already). */
#define PSTRIDE (CPU_GEMM_KC + 16)
static _Thread_local _Alignas(64) float fpanel[FRB * PSTRIDE];
static _Thread_local __m256 facc3[FRB / 4][FTB / 3][FCHAINS * 12];

static void fpanel_fill(int kind, const uint8_t *w, size_t ws, int nr, int k0, int kc, int tail)
{
    for (int r = 0; r < nr; r++) {
        float *dst = fpanel + (size_t)r * PSTRIDE;
        if (kind == F_F32) {
            const float *src = (const float *)(const void *)(w + (size_t)r * ws) + k0;
            for (int k = 0; k < kc; k += 8)
                _mm256_store_ps(dst + k, _mm256_loadu_ps(src + k));
            if (tail)
                _mm256_store_ps(dst + kc, _mm256_maskload_ps(src + kc, first(tail)));
        } else {
            const uint16_t *src = (const uint16_t *)(const void *)(w + (size_t)r * ws) + k0;
            for (int k = 0; k < kc; k += 8)
                _mm256_store_ps(dst + k, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(src + k))));
            if (tail)
                _mm256_store_ps(dst + kc, load_w_tail(SRC_F16, src, 0, 0, kc, tail));
        }
    }
}

/* One tile of MR panel rows x MT tokens: chunk [k0, k0 + n) into chain ch of acc, and the sums of
 * the nch chains to y after the row's last chunk. */
AI void panel_tile(const int MR, const int MT, float *y, size_t ldy, const float *x, size_t ldx, const float *pw,
                   int k0, int n, int ch, int start, int nch, int last, __m256 *acc)
{
    float_chain(MR, MT, SRC_PANEL, x, ldx, pw, PSTRIDE, k0, 0, n, ch, start, acc);
    if (last)
        chains_store(MR, MT, y, ldy, acc, nch);
}

/* Tokens in tiles of 3 over MR panel rows, each tile's chains in acc_t[tile] (row acc_r of its 4). */
AI void float_rows(const int MR, float *y, size_t ldy, const float *x, size_t ldx, int n_tok, const float *pw, int k0,
                   int n, int nch, int last, __m256 (*acc_t)[FCHAINS * 12], int acc_r)
{
    int ch = k0 / CPU_GEMM_KC % FCHAINS, start = k0 < FCHAINS * CPU_GEMM_KC;

    for (int t = 0; t < n_tok; t += 3) {
        float *yt = y + (size_t)t * ldy;
        const float *xt = x + (size_t)t * ldx;
        __m256 *a = acc_t[t / 3] + acc_r * 3;
        switch (n_tok - t < 3 ? n_tok - t : 3) {
        case 3: panel_tile(MR, 3, yt, ldy, xt, ldx, pw, k0, n, ch, start, nch, last, a); break;
        case 2: panel_tile(MR, 2, yt, ldy, xt, ldx, pw, k0, n, ch, start, nch, last, a); break;
        default: panel_tile(MR, 1, yt, ldy, xt, ldx, pw, k0, n, ch, start, nch, last, a); break;
        }
    }
}

/* One token: a row at a time, so that a thread reads its rows as one sequential stream. */
AI void float_decode(const int SRC, float *y, const float *x, const uint8_t *w, size_t ws, int n_rows, int cols)
{
    size_t we = ws / (SRC == SRC_F16 ? 2 : 4);

    for (int r = 0; r < n_rows; r++)
        float_tile(1, 1, SRC, y + r, 1, x, 0, w + (size_t)r * ws, we, cols);
}

/* MR rows x MT tokens straight from the weights over whole rows, for 2 .. FLOAT_FEW tokens (several
 * sequences' next ones, a short prompt chunk), where a panel would cost more to fill than its few
 * tokens gain: the tile's rows stay in L1 for the next token tile, so the weights stream once.
 * On the 1.1B F16, 2 threads: 8 tokens 55 t/s this way against 36 through the panel, 16 tokens
 * 62 against 50. */
#define FLOAT_FEW 16
AI void float_few_rows(const int MR, const int SRC, float *y, size_t ldy, const float *x, size_t ldx, int n_tok,
                       const uint8_t *w, size_t we, int cols)
{
    for (int t = 0; t < n_tok; t += 3) {
        float *yt = y + (size_t)t * ldy;
        const float *xt = x + (size_t)t * ldx;
        switch (n_tok - t < 3 ? n_tok - t : 3) {
        case 3: float_tile(MR, 3, SRC, yt, ldy, xt, ldx, w, we, cols); break;
        case 2: float_tile(MR, 2, SRC, yt, ldy, xt, ldx, w, we, cols); break;
        default: float_tile(MR, 1, SRC, yt, ldy, xt, ldx, w, we, cols); break;
        }
    }
}

AI void float_few(const int SRC, float *y, size_t ldy, const float *x, size_t ldx, int n_tok, const uint8_t *w,
                  size_t ws, int n_rows, int cols)
{
    size_t we = ws / (SRC == SRC_F16 ? 2 : 4);
    int r = 0;

    for (; r + 4 <= n_rows; r += 4)
        float_few_rows(4, SRC, y + r, ldy, x, ldx, n_tok, w + (size_t)r * ws, we, cols);
    for (; r < n_rows; r++)
        float_few_rows(1, SRC, y + r, ldy, x, ldx, n_tok, w + (size_t)r * ws, we, cols);
}

static void float_gemm(int kind, float *y, size_t ldy, const cpu_act *a, int n_tok, const uint8_t *w, size_t ws,
                       int n_rows, int cols)
{
    const float *x = (const float *)(const void *)a->x;
    size_t ldx = a->stride / sizeof(float);
    int tail = cols % 8, kfull = cols - tail, nch = row_chains(cols);

    if (n_tok == 1) {
        if (kind == F_F16)
            float_decode(SRC_F16, y, x, w, ws, n_rows, cols);
        else
            float_decode(SRC_F32, y, x, w, ws, n_rows, cols);
        return;
    }
    if (n_tok <= FLOAT_FEW) {
        if (kind == F_F16)
            float_few(SRC_F16, y, ldy, x, ldx, n_tok, w, ws, n_rows, cols);
        else
            float_few(SRC_F32, y, ldy, x, ldx, n_tok, w, ws, n_rows, cols);
        return;
    }
    for (int rb = 0; rb < n_rows; rb += FRB) {
        int nr = n_rows - rb < FRB ? n_rows - rb : FRB;
        const uint8_t *wb = w + (size_t)rb * ws;
        for (int t0 = 0; t0 < n_tok; t0 += FTB) {
            int nt = n_tok - t0 < FTB ? n_tok - t0 : FTB;
            float *yb = y + (size_t)t0 * ldy + rb;
            const float *xb = x + (size_t)t0 * ldx;
            for (int k0 = 0; k0 < cols; k0 += CPU_GEMM_KC) {
                int last = k0 + CPU_GEMM_KC >= cols, kc = last ? kfull - k0 : CPU_GEMM_KC, tl = last ? tail : 0;
                const size_t pnext = ws * (size_t)(k0 + CPU_GEMM_KC) / (size_t)cols;
                const size_t pchunk = ws * (size_t)CPU_GEMM_KC / (size_t)cols;
                fpanel_fill(kind, wb, ws, nr, k0, kc, tl);
                /* token tiles outside, row tiles inside: a tile's x and the panel stay in L1 */
                for (int t = 0; t < nt; t += 3) {
                    int n3 = nt - t < 3 ? nt - t : 3, r = 0;
                    cpu_prefetch_panel(w, ws, rb, FRB, n_rows, pnext, pchunk, t0 + FTB < n_tok, t / 3, (nt + 2) / 3);
                    float *yt = yb + (size_t)t * ldy;
                    const float *xt = xb + (size_t)t * ldx;
                    for (; r + 4 <= nr; r += 4)
                        float_rows(4, yt + r, ldy, xt, ldx, n3, fpanel + (size_t)r * PSTRIDE, k0, kc + tl, nch, last,
                                   facc3[r / 4] + t / 3, 0);
                    for (; r < nr; r++)
                        float_rows(1, yt + r, ldy, xt, ldx, n3, fpanel + (size_t)r * PSTRIDE, k0, kc + tl, nch, last,
                                   facc3[r / 4] + t / 3, r % 4);
                }
            }
        }
    }
}

void cpu_avx2_gemm_f32(float *y, size_t ldy, const cpu_act *a, int n_tok, const uint8_t *w, size_t ws, int n_rows,
                     int cols)
{
    float_gemm(F_F32, y, ldy, a, n_tok, w, ws, n_rows, cols);
}

void cpu_avx2_gemm_f16(float *y, size_t ldy, const cpu_act *a, int n_tok, const uint8_t *w, size_t ws, int n_rows,
                     int cols)
{
    float_gemm(F_F16, y, ldy, a, n_tok, w, ws, n_rows, cols);
}

/* x is f32: one row is a 1 x 1 gemm. */
float cpu_avx2_dot_f32(const void *x, const void *w, int n)
{
    cpu_act a = { .x = x, .stride = 0 };
    float y;

    cpu_avx2_gemm_f32(&y, 1, &a, 1, w, 0, 1, n);
    return y;
}

float cpu_avx2_dot_f16(const void *x, const void *w, int n)
{
    cpu_act a = { .x = x, .stride = 0 };
    float y;

    cpu_avx2_gemm_f16(&y, 1, &a, 1, w, 0, 1, n);
    return y;
}

#endif /* !A2_VNNI */

#endif
