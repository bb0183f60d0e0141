/* kernels_vnni.h: the VNNI paths' kernels, one source built more than once (included only by
 * kernels_vnni512.c and kernels_vnni_emul.c, which define VNNI_NAME, VNNI_PATH (the cpu_path to
 * define) and VNNI_BASE_PATH (the path it builds on) first, and by kernels_avxvnni8.c, which
 * defines only the -int8 path's names, kernels_vnni8.h):
 *   avx512vnni  vpdpwssd on 512-bit registers (-mavx512vnni), over the AVX-512 table;
 *   vnni-emul   the same code with vpdpwssd emulated exactly by plain C vector arithmetic, over the
 *               scalar table: it builds and runs on any CPU, so the logic of the kernels is tested
 *               where the instruction is missing.
 * (The 16-bit avxvnni path is not this code: its 512-bit vectors split over 256-bit registers ran
 * at a twentieth of avx2's speed; avxvnni is kernels_avx2_gemm.c with vpdpwssd, kernels_avxvnni.c.)
 * vpdpwssd is exact integer arithmetic (products of 16-bit pairs added to 32-bit lanes, wrapping),
 * and every float operation below is written out (no contraction: the project builds with
 * -std=c11, where -ffp-contract is off), so the two give the same results bit for bit.
 *
 * Types: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q6_K, MXFP4, with the 16-bit activations of cpu_q16 (the
 * accuracy of the scalar path; 8-bit activations were measured past the project's 1e-2 logit
 * bound, cpu_int.h). The arithmetic of a (token, row), whatever the kernel that computes it:
 *   the row's blocks of 32 go in groups of 16, block i of a group in lane i; per block the exact
 *   integer dot product isum of its weight codes (offsets removed: q - 8, q - 16, q - 32) with the
 *   activation codes, then, in lane i, in this order:
 *       acc = fma((float)isum, a * dx, acc)       a: the block's weight scale, dx the activations'
 *       acc = fma(b, s, acc)                      Q4_1, Q5_1 (b = m), Q4_K (b = -dmin * min)
 *   Q6_K has two scales per block (sub-blocks of 16): isum over elements 0-15 with a_lo, then over
 *   16-31 with a_hi, each one fma as above. Lanes past the row's last block add nothing. The
 *   result is the 16 lanes summed as a tree (8 + 8, 4 + 4, 2 + 2, 1 + 1).
 * This is not the f32 arithmetic of the avx512 path (exact f32 dequantization, f32 activations),
 * nor the scalar one (one running float sum): each path is tested against its own row dot bit for
 * bit and against the float64 definition within rounding.
 *
 * Two kernels meet it:
 *   decode (up to VNNI_DEC_MULTI tokens, a pass of several sequences' next ones; also the row
 *     dot): act_quantize lays the codes of blocks 2m, 2m + 1 side by
 *     side (0-15 of both, then 16-31), the weights of the pair are widened the same way, and two
 *     vpdpwssd leave block 2m's partial sums in lanes 0-7 and 2m + 1's in 8-15; three levels of a
 *     transposing add tree give the 16 block sums of a group;
 *   prefill: the activations of each token are laid out by act_quantize as, per group, 16 steps of
 *     16 lanes of 32-bit pairs (lane i = block i's elements 2k, 2k + 1), and a panel of 8 rows
 *     holds the weight codes the same way, so 16 vpdpwssd per (row, token, group) leave the 16
 *     block sums in their lanes with no reduction at all. */
#include <stddef.h>
#include <stdlib.h>

#include "cpu/kernels.h"
#include "cpu/kquant_int.h"

/* Matmuls of up to this many tokens (a pass of several sequences' next ones) run as decode, each
 * weight row read from memory once and from L1 for the other tokens, unpacked once per two
 * tokens: a panel costs more to fill than so few tokens gain from it. On the 1.1B Q4_0, 2
 * threads of a Zen 4, decode's aggregate at 2 / 4 / 6 / 8 sequences: 59 / 60 / 56 / 56 t/s this
 * way, 20 / 37 / 52 / 60 through the panels (BENCHMARKS.md). The AMX paths keep their tiles for
 * the types they take. */
#define VNNI_DEC_MULTI 6

/* Q4_0 where panel_row_q4_0 fills its panels: from 5 tokens on they are faster (matmul_bench Q4_0
 * 2048 x 2048, 2 threads: 5 / 6 tokens 75 / 81 GMAC/s as decode, 88 / 99 through the panels;
 * 2 tokens 80 against 55; 4 tokens even there, but mstore bench --parallel 4 lost 15% so). */
#if defined(__AVX512BW__)
#define VNNI_DEC_MULTI_Q4_0 4
#else
#define VNNI_DEC_MULTI_Q4_0 VNNI_DEC_MULTI
#endif

/* The most tokens a matmul runs as decode: act_layout lays them out for it and gemm_kind takes
 * that kernel by the same count. */
static inline int dec_multi(int q4_0)
{
    return q4_0 ? VNNI_DEC_MULTI_Q4_0 : VNNI_DEC_MULTI;
}

#if defined(__AVX512F__) || defined(__AVX2__) || defined(__FMA__) || defined(__F16C__)
#include <immintrin.h>
#endif
#include <math.h>

#define AI static inline __attribute__((always_inline))

typedef int16_t v32s16 __attribute__((vector_size(64)));
typedef int32_t v16s32 __attribute__((vector_size(64)));
typedef uint32_t v16u32 __attribute__((vector_size(64)));
typedef float v16f __attribute__((vector_size(64)));
typedef float v8f __attribute__((vector_size(32)));
typedef float v4f __attribute__((vector_size(16)));
typedef uint8_t v16u8 __attribute__((vector_size(16)));
typedef uint8_t v32u8 __attribute__((vector_size(32)));
typedef int8_t v32s8 __attribute__((vector_size(32)));
typedef long long v8ll __attribute__((vector_size(64)));
typedef long long v4ll __attribute__((vector_size(32)));

AI v16s32 ld_s32(const void *p)
{
    v16s32 v;
    memcpy(&v, p, sizeof v);
    return v;
}

AI v32s16 ld_s16(const void *p)
{
    v32s16 v;
    memcpy(&v, p, sizeof v);
    return v;
}

AI v16f ld_f(const void *p)
{
    v16f v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* acc + sum of the two 16-bit products in each 32-bit lane, modulo 2^32: vpdpwssd. */
AI v16s32 dpwssd(v16s32 acc, v32s16 a, v32s16 b)
{
#if defined(__AVX512VNNI__) && defined(__AVX512F__)
    return (v16s32)_mm512_dpwssd_epi32((__m512i)acc, (__m512i)a, (__m512i)b);
#elif defined(__AVXVNNI__)
    v8ll c = (v8ll)acc, x = (v8ll)a, y = (v8ll)b;
    __m256i lo = _mm256_dpwssd_avx_epi32((__m256i)__builtin_shufflevector(c, c, 0, 1, 2, 3),
                                         (__m256i)__builtin_shufflevector(x, x, 0, 1, 2, 3),
                                         (__m256i)__builtin_shufflevector(y, y, 0, 1, 2, 3));
    __m256i hi = _mm256_dpwssd_avx_epi32((__m256i)__builtin_shufflevector(c, c, 4, 5, 6, 7),
                                         (__m256i)__builtin_shufflevector(x, x, 4, 5, 6, 7),
                                         (__m256i)__builtin_shufflevector(y, y, 4, 5, 6, 7));
    return (v16s32)__builtin_shufflevector((v4ll)lo, (v4ll)hi, 0, 1, 2, 3, 4, 5, 6, 7);
#else
    /* the emulation: each 32-bit lane holds two 16-bit values (low one first); sign-extend both,
     * multiply (a product of two int16 fits int32), and add modulo 2^32 as the instruction does */
    v16s32 va = (v16s32)a, vb = (v16s32)b;
    v16s32 ae = (v16s32)((v16u32)va << 16) >> 16, be = (v16s32)((v16u32)vb << 16) >> 16;
    v16s32 ao = va >> 16, bo = vb >> 16;
    return (v16s32)((v16u32)acc + (v16u32)(ae * be) + (v16u32)(ao * bo));
#endif
}

/* a * b + c rounded once. */
AI v16f fmav(v16f a, v16f b, v16f c)
{
#if defined(__AVX512F__)
    return (v16f)_mm512_fmadd_ps((__m512)a, (__m512)b, (__m512)c);
#elif defined(__FMA__) && defined(__AVX__)
    v8f lo = (v8f)_mm256_fmadd_ps((__m256)__builtin_shufflevector(a, a, 0, 1, 2, 3, 4, 5, 6, 7),
                                  (__m256)__builtin_shufflevector(b, b, 0, 1, 2, 3, 4, 5, 6, 7),
                                  (__m256)__builtin_shufflevector(c, c, 0, 1, 2, 3, 4, 5, 6, 7));
    v8f hi = (v8f)_mm256_fmadd_ps((__m256)__builtin_shufflevector(a, a, 8, 9, 10, 11, 12, 13, 14, 15),
                                  (__m256)__builtin_shufflevector(b, b, 8, 9, 10, 11, 12, 13, 14, 15),
                                  (__m256)__builtin_shufflevector(c, c, 8, 9, 10, 11, 12, 13, 14, 15));
    return __builtin_shufflevector(lo, hi, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
#else
    v16f r;
    for (int i = 0; i < 16; i++)
        r[i] = fmaf(a[i], b[i], c[i]);
    return r;
#endif
}

AI float hsum(v16f v)
{
    v8f a = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7) +
            __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
    v4f b = __builtin_shufflevector(a, a, 0, 1, 2, 3) + __builtin_shufflevector(a, a, 4, 5, 6, 7);
    float c0 = b[0] + b[2], c1 = b[1] + b[3];
    return c0 + c1;
}

AI float f16(const uint8_t *p)
{
#if defined(__F16C__)
    return _cvtsh_ss(cpu_rd16(p)); /* exact, as cpu_f16 */
#else
    return cpu_f16(cpu_rd16(p));
#endif
}

typedef uint16_t v32u16 __attribute__((vector_size(64)));
typedef uint16_t v16u16 __attribute__((vector_size(32)));
typedef uint16_t v8u16 __attribute__((vector_size(16)));

/* 16 f16 values as f32 (exact). */
AI v16f f16x16(v16u16 h)
{
#if defined(__AVX512F__)
    return (v16f)_mm512_cvtph_ps((__m256i)h);
#elif defined(__F16C__)
    v8f lo = (v8f)_mm256_cvtph_ps((__m128i)__builtin_shufflevector(h, h, 0, 1, 2, 3, 4, 5, 6, 7));
    v8f hi = (v8f)_mm256_cvtph_ps((__m128i)__builtin_shufflevector(h, h, 8, 9, 10, 11, 12, 13, 14, 15));
    return __builtin_shufflevector(lo, hi, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
#else
    v16f r;
    for (int i = 0; i < 16; i++)
        r[i] = cpu_f16(h[i]);
    return r;
#endif
}

/* bytes widened to 16 bits: zero- or sign-extended (one vpmovzxbw / vpmovsxbw where AVX512BW) */
AI v32s16 zx8(v32u8 c)
{
#if defined(__AVX512BW__)
    return (v32s16)_mm512_cvtepu8_epi16((__m256i)c);
#else
    return __builtin_convertvector(c, v32s16);
#endif
}

AI v32s16 sx8(v32s8 c)
{
#if defined(__AVX512BW__)
    return (v32s16)_mm512_cvtepi8_epi16((__m256i)c);
#else
    return __builtin_convertvector(c, v32s16);
#endif
}

/* 16 bytes widened to 32-bit lanes (gcc 12 turns __builtin_convertvector's 4x widening into
 * byte extracts) */
typedef int8_t v16s8 __attribute__((vector_size(16)));

AI v16f zx8f(v16u8 c)
{
#if defined(__AVX512F__)
    return __builtin_convertvector((v16s32)_mm512_cvtepu8_epi32((__m128i)c), v16f);
#else
    return __builtin_convertvector(__builtin_convertvector(c, v16s32), v16f);
#endif
}

AI v16f sx8f(v16s8 c)
{
#if defined(__AVX512F__)
    return __builtin_convertvector((v16s32)_mm512_cvtepi8_epi32((__m128i)c), v16f);
#else
    return __builtin_convertvector(__builtin_convertvector(c, v16s32), v16f);
#endif
}

/* ---------------------------------------------------------------- the weight blocks */

enum { V_Q8_0, V_Q4_0, V_Q4_1, V_Q5_0, V_Q5_1, V_Q4_K, V_Q6_K, V_MXFP4 };

static inline int has_offset(int kind)
{
    return kind == V_Q4_1 || kind == V_Q5_1 || kind == V_Q4_K;
}

/* An MXFP4 block's 16 bytes of codes looked up in the code book: elements 0-15 (the low nibbles)
 * in *l, 16-31 (the high ones) in *h. A byte shuffle does the lookup where the build has one; the
 * emulation's portable build looks each code up in turn. */
AI void mxfp4_codes(const uint8_t *p, v16s8 *l, v16s8 *h)
{
    v16u8 q;

    memcpy(&q, p, 16);
#if defined(__SSSE3__)
    const __m128i kv = _mm_loadu_si128((const __m128i *)(const void *)cpu_mxfp4_values);
    *l = (v16s8)_mm_shuffle_epi8(kv, (__m128i)(q & 15));
    *h = (v16s8)_mm_shuffle_epi8(kv, (__m128i)(q >> 4));
#else
    for (int j = 0; j < 16; j++) {
        (*l)[j] = cpu_mxfp4_values[q[j] & 15];
        (*h)[j] = cpu_mxfp4_values[q[j] >> 4];
    }
#endif
}

/* Block bi (of 32 weights) of a row: its codes in element order, offsets removed, and its scale a
 * (and b, or Q6_K's second scale a2; 0 where the type has none). K-quant blocks are the eight
 * sub-blocks of 32 (Q4_K) or pairs of sub-blocks of 16 (Q6_K) of each super-block, in order
 * (kquant_scalar.c gives where their bits sit). */
AI v32s16 unpack(const int kind, const uint8_t *row, int bi, float *a, float *b, float *a2)
{
    v32s16 w;

    *b = *a2 = 0.0f;
    switch (kind) {
    case V_Q8_0: {
        const uint8_t *p = row + (size_t)bi * CPU_Q8_0_BYTES;
        v32s8 q;
        memcpy(&q, p + 2, 32);
        *a = f16(p);
        return __builtin_convertvector(q, v32s16);
    }
    case V_Q4_0:
    case V_Q4_1: {
        const int bytes = kind == V_Q4_0 ? CPU_Q4_0_BYTES : CPU_Q4_1_BYTES;
        const uint8_t *p = row + (size_t)bi * bytes;
        v16u8 q;
        memcpy(&q, p + (kind == V_Q4_0 ? 2 : 4), 16);
        v32u8 c = __builtin_shufflevector(q & 15, q >> 4, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17,
                                          18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31);
        *a = f16(p);
        w = __builtin_convertvector(c, v32s16);
        if (kind == V_Q4_0)
            return w - 8;
        *b = f16(p + 2);
        return w;
    }
    case V_Q5_0:
    case V_Q5_1: {
        /* rare in real models: element by element */
        const int q5_1 = kind == V_Q5_1;
        const uint8_t *p = row + (size_t)bi * (q5_1 ? CPU_Q5_1_BYTES : CPU_Q5_0_BYTES);
        const uint8_t *qs = p + (q5_1 ? 8 : 6);
        uint32_t qh = cpu_rd32(p + (q5_1 ? 4 : 2));
        int off = q5_1 ? 0 : 16;
        int16_t c[QK];
        for (int j = 0; j < QK / 2; j++) {
            c[j] = (int16_t)(((qs[j] & 15) | (int)((qh >> j) & 1) << 4) - off);
            c[j + QK / 2] = (int16_t)(((qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4) - off);
        }
        memcpy(&w, c, sizeof w);
        *a = f16(p);
        if (q5_1)
            *b = f16(p + 2);
        return w;
    }
    case V_MXFP4: {
        /* Q4_0's nibble order, each nibble looked up in the doubled E2M1 code book (kquant_int.h) */
        const uint8_t *p = row + (size_t)bi * CPU_MXFP4_BYTES;
        v16s8 l, h;
        mxfp4_codes(p + 1, &l, &h);
        *a = cpu_mxfp4_scale(p[0]);
        return __builtin_convertvector(__builtin_shufflevector(l, h, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14,
                                                               15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28,
                                                               29, 30, 31),
                                       v32s16);
    }
    case V_Q4_K: {
        const uint8_t *p = row + (size_t)(bi / 8) * CPU_Q4_K_BYTES;
        int j = bi % 8, sc, m;
        v32u8 q;
        memcpy(&q, p + 16 + 32 * (j / 2), 32);
        q = j % 2 ? q >> 4 : q & 15;
        cpu_scale_min_k4(j, p + 4, &sc, &m);
        *a = f16(p) * (float)sc;
        *b = -(f16(p + 2) * (float)m);
        return __builtin_convertvector(q, v32s16);
    }
    default: { /* V_Q6_K */
        const uint8_t *p = row + (size_t)(bi / 8) * CPU_Q6_K_BYTES;
        int j = bi % 8, h = j / 4, jj = j % 4;
        float d = f16(p + 208);
        v32u8 l, hb;
        memcpy(&l, p + 64 * h + 32 * (jj % 2), 32);
        memcpy(&hb, p + 128 + 32 * h, 32);
        l = (jj / 2 ? l >> 4 : l) & 15;
        hb = (hb >> (2 * jj)) & 3;
        *a = d * (float)(int8_t)p[192 + 2 * j];
        *a2 = d * (float)(int8_t)p[192 + 2 * j + 1];
        return __builtin_convertvector(l | (v32u8)(hb << 4), v32s16) - 32;
    }
    }
}

/* ---------------------------------------------------------------- activations */

/* A token's activations, per group of 16 blocks (zero past the last block), in one of two
 * layouts of the same size as 16 cpu_q16 blocks:
 *   decode (a matmul of one token, and the row dot): pair m of blocks 2m, 2m + 1 as
 *     xp[m][0] = codes 0-15 of both, xp[m][1] = codes 16-31 of both (see decode below);
 *   prefill: xt[k][i] = block i's codes 2k, 2k + 1 (a 32-bit pair), so that lane i of a
 *     vpdpwssd meets block i only. */
typedef struct vnni_group {
    union {
        int16_t xp[8][2][32];
        int32_t xt[16][16];
        struct { /* prefill on the AMX paths (kernels_amx.h): block i's codes in order, split */
            int8_t h[16][32]; /* high bytes, signed */
            uint8_t l[16][32]; /* low bytes */
        } xa;
    };
    float dx[16];
    union {
        float s[16];    /* d * the codes' sum, for the types with an offset */
        int32_t xs[16]; /* Q4_0's layout: the codes' sum, so that decode adds 8 * x back in integers */
    };
} vnni_group;

#if defined(VNNI_NAME)   /* the 16-bit path's activations (kernels_avxvnni8.c builds only -int8) */
static size_t act_bytes(int n_tok, int cols)
{
    (void)n_tok;
    return (size_t)(cols / QK + 15) / 16 * sizeof(vnni_group);
}

/* One token, laid out for decode (up to VNNI_DEC_MULTI tokens and not `plain`) or prefill (xt,
 * or xa where `plain`); the codes are cpu_quantize_q16's. */
static void act_layout(uint8_t *dst, const float *x, int type, int n_tok, int cols, int plain)
{
    int nb = cols / QK;

    for (int g0 = 0; g0 < nb; g0 += 16) {
        vnni_group *g = (vnni_group *)(void *)dst + g0 / 16;
        cpu_q16 tmp[16];
        int n = nb - g0 < 16 ? nb - g0 : 16;

        memset(tmp, 0, sizeof tmp);
        cpu_quantize_q16(tmp, x + (size_t)g0 * QK, n * QK);
        for (int i = 0; i < 16; i++) {
            if (n_tok <= dec_multi(type == GGML_TYPE_Q4_0) && !plain) {
                memcpy(g->xp[i / 2][0] + 16 * (i % 2), tmp[i].q, 16 * sizeof(int16_t));
                memcpy(g->xp[i / 2][1] + 16 * (i % 2), tmp[i].q + 16, 16 * sizeof(int16_t));
            } else if (plain) {
                for (int j = 0; j < QK; j++) { /* q = 256 h + l */
                    g->xa.h[i][j] = (int8_t)(tmp[i].q[j] >> 8);
                    g->xa.l[i][j] = (uint8_t)(tmp[i].q[j] & 255);
                }
            } else {
                int32_t pair[16];
                memcpy(pair, tmp[i].q, sizeof pair);
                for (int k = 0; k < 16; k++)
                    g->xt[k][i] = pair[k];
            }
            g->dx[i] = tmp[i].d;
            if (type == GGML_TYPE_Q4_0)
                g->xs[i] = cpu_q16_sum(&tmp[i]);
            else
                g->s[i] = tmp[i].s;
        }
    }
}

static void act_quantize(uint8_t *dst, const float *x, int type, int n_tok, int cols)
{
    act_layout(dst, x, type, n_tok, cols, 0);
}
#endif

/* ---------------------------------------------------------------- decode and the row dot */

/* Bytes of 16 blocks of a row (K-quants: two super-blocks). */
static inline size_t group_bytes(int kind)
{
    switch (kind) {
    case V_Q8_0:
        return 16 * CPU_Q8_0_BYTES;
    case V_Q4_0:
        return 16 * CPU_Q4_0_BYTES;
    case V_Q4_1:
        return 16 * CPU_Q4_1_BYTES;
    case V_Q5_0:
        return 16 * CPU_Q5_0_BYTES;
    case V_Q5_1:
        return 16 * CPU_Q5_1_BYTES;
    case V_Q4_K:
        return 2 * CPU_Q4_K_BYTES;
    case V_MXFP4:
        return 16 * CPU_MXFP4_BYTES;
    default:
        return 2 * CPU_Q6_K_BYTES;
    }
}

/* The scales of blocks g0 .. g0 + n - 1 of a row into lanes 0 .. n - 1 (0 past them). */
AI void group_scales(const int kind, const uint8_t *row, int g0, int n, v16f *a, v16f *b, v16f *a2)
{
    _Alignas(64) float fa[16] = {0}, fb[16] = {0};

    if (n == 16 && (kind == V_Q4_0 || kind == V_Q8_0)) {
        /* the f16 scales picked out of 128-byte spans by one word shuffle each (8 Q4_0 blocks
         * of 18 bytes: words 9i; 4 Q8_0 blocks of 34: words 17i), never past the 16 blocks */
        const uint8_t *p = row + (size_t)g0 * (kind == V_Q4_0 ? CPU_Q4_0_BYTES : CPU_Q8_0_BYTES);
        v32u16 w[8];
        v8u16 h0, h1;
        if (kind == V_Q4_0) {
            for (int i = 0; i < 4; i++)
                memcpy(&w[i], p + 144 * (i / 2) + 64 * (i % 2), 64);
            h0 = __builtin_shufflevector(w[0], w[1], 0, 9, 18, 27, 36, 45, 54, 63);
            h1 = __builtin_shufflevector(w[2], w[3], 0, 9, 18, 27, 36, 45, 54, 63);
        } else {
            for (int i = 0; i < 8; i++)
                memcpy(&w[i], p + 136 * (i / 2) + 64 * (i % 2), 64);
            h0 = __builtin_shufflevector(__builtin_shufflevector(w[0], w[1], 0, 17, 34, 51),
                                         __builtin_shufflevector(w[2], w[3], 0, 17, 34, 51), 0, 1, 2, 3, 4, 5, 6, 7);
            h1 = __builtin_shufflevector(__builtin_shufflevector(w[4], w[5], 0, 17, 34, 51),
                                         __builtin_shufflevector(w[6], w[7], 0, 17, 34, 51), 0, 1, 2, 3, 4, 5, 6, 7);
        }
        *a = f16x16(__builtin_shufflevector(h0, h1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
        *b = *a2 = (v16f){0};
        return;
    }

    if (kind == V_Q4_K) {
        /* cpu_scale_min_k4's 6-bit fields, eight at a time in 64-bit words, then in vectors: the
         * same products as fa[j] = d * sc[j] one by one, without the scalar loop decode paid */
        uint64_t sc[2] = {0, 0}, mn[2] = {0, 0};
        float d[2] = {0, 0}, dmin[2] = {0, 0};
        for (int i = 0; i < n / 8; i++) { /* super-blocks: g0 is a multiple of 8 */
            const uint8_t *p = row + (size_t)(g0 / 8 + i) * CPU_Q4_K_BYTES;
            uint32_t l0 = cpu_rd32(p + 4), l1 = cpu_rd32(p + 8), l2 = cpu_rd32(p + 12);
            d[i] = f16(p);
            dmin[i] = f16(p + 2);
            sc[i] = (uint64_t)(l0 & 0x3f3f3f3fu) | (uint64_t)((l2 & 0x0f0f0f0fu) | ((l0 >> 2) & 0x30303030u)) << 32;
            mn[i] = (uint64_t)(l1 & 0x3f3f3f3fu) | (uint64_t)(((l2 >> 4) & 0x0f0f0f0fu) | ((l1 >> 2) & 0x30303030u))
                                                       << 32;
        }
        typedef uint64_t v2u64 __attribute__((vector_size(16)));
        v16u8 scb = (v16u8)(v2u64){sc[0], sc[1]}, mnb = (v16u8)(v2u64){mn[0], mn[1]};
        v16f dv = {d[0], d[0], d[0], d[0], d[0], d[0], d[0], d[0], d[1], d[1], d[1], d[1], d[1], d[1], d[1], d[1]};
        v16f mv = {dmin[0], dmin[0], dmin[0], dmin[0], dmin[0], dmin[0], dmin[0], dmin[0],
                   dmin[1], dmin[1], dmin[1], dmin[1], dmin[1], dmin[1], dmin[1], dmin[1]};
        *a = dv * zx8f(scb);
        *b = -(mv * zx8f(mnb));
        *a2 = (v16f){0};
        return;
    }
    if (kind == V_Q6_K) {
        /* the int8 scales of a super-block alternate: sub-block 2j's (a), then 2j + 1's (a2) */
        v16s8 s[2] = {{0}, {0}};
        float d[2] = {0, 0};
        for (int i = 0; i < n / 8; i++) {
            const uint8_t *p = row + (size_t)(g0 / 8 + i) * CPU_Q6_K_BYTES;
            d[i] = f16(p + 208);
            memcpy(&s[i], p + 192, sizeof s[i]);
        }
        v16f dv = {d[0], d[0], d[0], d[0], d[0], d[0], d[0], d[0], d[1], d[1], d[1], d[1], d[1], d[1], d[1], d[1]};
        v16s8 ev = __builtin_shufflevector(s[0], s[1], 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        v16s8 od = __builtin_shufflevector(s[0], s[1], 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
        *a = dv * sx8f(ev);
        *a2 = dv * sx8f(od);
        *b = (v16f){0};
        return;
    }

    if (kind == V_MXFP4) { /* E8M0 bytes, each scale exact */
        for (int i = 0; i < n; i++)
            fa[i] = cpu_mxfp4_scale(row[(size_t)(g0 + i) * CPU_MXFP4_BYTES]);
        *a = ld_f(fa);
        *b = *a2 = (v16f){0};
        return;
    }
    const size_t bytes = group_bytes(kind) / 16;
    const uint8_t *p = row + (size_t)g0 * bytes;
    for (int i = 0; i < n; i++, p += bytes) {
        fa[i] = f16(p);
        if (has_offset(kind))
            fb[i] = f16(p + 2);
    }
    *a = ld_f(fa);
    *b = ld_f(fb);
    *a2 = (v16f){0};
}

#define IOTA32 \
    0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31

/* Blocks bi and bj of a row as the decode pair: lo = codes 0-15 of bi then of bj, hi = codes
 * 16-31 of both (bj may repeat bi: its activations are zero then). */
AI void unpack_pair(const int kind, const uint8_t *row, int bi, int bj, v32s16 *lo, v32s16 *hi)
{
    float a, b, a2;

    switch (kind) {
    case V_Q8_0: {
        const uint8_t *p = row + (size_t)bi * CPU_Q8_0_BYTES + 2, *q = row + (size_t)bj * CPU_Q8_0_BYTES + 2;
        v16u8 p0, p1, q0, q1;
        memcpy(&p0, p, 16);
        memcpy(&p1, p + 16, 16);
        memcpy(&q0, q, 16);
        memcpy(&q1, q + 16, 16);
        *lo = sx8((v32s8)__builtin_shufflevector(p0, q0, IOTA32));
        *hi = sx8((v32s8)__builtin_shufflevector(p1, q1, IOTA32));
        return;
    }
    case V_Q4_0: {
        v16u8 p, q;
        memcpy(&p, row + (size_t)bi * CPU_Q4_0_BYTES + 2, 16);
        memcpy(&q, row + (size_t)bj * CPU_Q4_0_BYTES + 2, 16);
        v32u8 c = __builtin_shufflevector(p, q, IOTA32);
        *lo = zx8(c & 15); /* n, not n - 8: group_dot takes 8 * sum x off the block's sum */
        *hi = zx8(c >> 4);
        return;
    }
    case V_MXFP4: {
        v16s8 pl, ph, ql, qh;
        mxfp4_codes(row + (size_t)bi * CPU_MXFP4_BYTES + 1, &pl, &ph);
        mxfp4_codes(row + (size_t)bj * CPU_MXFP4_BYTES + 1, &ql, &qh);
        *lo = sx8(__builtin_shufflevector(pl, ql, IOTA32));
        *hi = sx8(__builtin_shufflevector(ph, qh, IOTA32));
        return;
    }
    case V_Q4_K:
        if (bj == bi + 1 && bi % 2 == 0) { /* the two nibbles of the same 32 bytes */
            v32u8 q;
            memcpy(&q, row + (size_t)(bi / 8) * CPU_Q4_K_BYTES + 16 + 32 * (bi % 8 / 2), 32);
            v32u8 l = q & 15, h = q >> 4;
            *lo = zx8(__builtin_shufflevector(l, h, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 32, 33, 34,
                                              35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47));
            *hi = zx8(__builtin_shufflevector(l, h, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 48,
                                              49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63));
            return;
        }
        break;
    default:
        break;
    }
    v32s16 u = unpack(kind, row, bi, &a, &b, &a2), v = unpack(kind, row, bj, &a, &b, &a2);
    *lo = __builtin_shufflevector(u, v, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 32, 33, 34, 35, 36, 37,
                                  38, 39, 40, 41, 42, 43, 44, 45, 46, 47);
    *hi = __builtin_shufflevector(u, v, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 48, 49, 50, 51,
                                  52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63);
}

/* Lanes 2i and 2i + 1 of a, then of b, added: one level of a transposing add tree (lanes 0-7
 * from a, 8-15 from b). */
AI v16s32 hadd_pairs(v16s32 a, v16s32 b)
{
    return __builtin_shufflevector(a, b, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30) +
           __builtin_shufflevector(a, b, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
}

/* v[m] (m < 8): lanes 0-7 partial sums of block 2m, 8-15 of block 2m + 1 -> lane i the sum of
 * block i: the last three levels of a transposing add tree. */
AI v16s32 sum_pairs(const v16s32 v[8])
{
    v16s32 b[4], c[2];

    for (int i = 0; i < 4; i++)
        b[i] =
            __builtin_shufflevector(v[2 * i], v[2 * i + 1], 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27) +
            __builtin_shufflevector(v[2 * i], v[2 * i + 1], 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31);
    for (int i = 0; i < 2; i++)
        c[i] =
            __builtin_shufflevector(b[2 * i], b[2 * i + 1], 0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24, 25, 28, 29) +
            __builtin_shufflevector(b[2 * i], b[2 * i + 1], 2, 3, 6, 7, 10, 11, 14, 15, 18, 19, 22, 23, 26, 27, 30, 31);
    return hadd_pairs(c[0], c[1]);
}

/* One group of a row against T tokens (1 or 2; decode layout: token t's groups at x[t], this one
 * x[t] + g0 / 16); n blocks (16 in FULL groups, whose loop unrolls with no bound checks). Per
 * pair of blocks two vpdpwssd per token (codes 0-15 of both, then 16-31) leave block 2m's sum in
 * lanes 0-7 and 2m + 1's in 8-15; Q6_K keeps the halves apart for its two scales. Two tokens
 * share each unpacking (it costs more than a token's two vpdpwssd), each token's sums and float
 * steps the same as alone, so the results are bit for bit; Q6_K takes one token at a time, its
 * split halves would take twice the registers. */
AI void group_dot(const int kind, const int FULL, const int T, v16f acc[], const vnni_group *const x[],
                  const uint8_t *row, int g0, int n)
{
    v16s32 p[2][8], p2[8];
    v16f a, b, a2;

#pragma GCC unroll 8
    for (int m = 0; m < 8; m++) {
        v32s16 lo, hi;
        if (!FULL && 2 * m >= n) {
#pragma GCC unroll 2
            for (int t = 0; t < T; t++)
                p[t][m] = (v16s32){0};
            p2[m] = (v16s32){0};
            continue;
        }
        unpack_pair(kind, row, g0 + 2 * m, g0 + (FULL || 2 * m + 1 < n ? 2 * m + 1 : 2 * m), &lo, &hi);
        if (kind == V_Q6_K) {
            const vnni_group *xg = x[0] + g0 / 16;
            p[0][m] = dpwssd((v16s32){0}, lo, ld_s16(xg->xp[m][0]));
            p2[m] = dpwssd((v16s32){0}, hi, ld_s16(xg->xp[m][1]));
        } else {
#pragma GCC unroll 2
            for (int t = 0; t < T; t++) {
                const vnni_group *xg = x[t] + g0 / 16;
                p[t][m] = dpwssd(dpwssd((v16s32){0}, lo, ld_s16(xg->xp[m][0])), hi, ld_s16(xg->xp[m][1]));
            }
        }
    }
    group_scales(kind, row, g0, FULL ? 16 : n, &a, &b, &a2);
#pragma GCC unroll 2
    for (int t = 0; t < T; t++) {
        const vnni_group *xg = x[t] + g0 / 16;
        v16f dx = ld_f(xg->dx);
        v16s32 isum = sum_pairs(p[t]);
        if (kind == V_Q4_0) /* sum (n - 8) x = sum n x - 8 sum x, exactly (a6e3f31 did it for avx2) */
            isum -= ld_s32(xg->xs) << 3;
        acc[t] = fmav(__builtin_convertvector(isum, v16f), a * dx, acc[t]);
        if (kind == V_Q6_K)
            acc[t] = fmav(__builtin_convertvector(sum_pairs(p2), v16f), a2 * dx, acc[t]);
        if (has_offset(kind))
            acc[t] = fmav(b, ld_f(xg->s), acc[t]);
    }
}

/* Decode streams a matrix once, row after row. Where unpacking takes long next to the bytes (the
 * 4- to 6-bit types), one core left to the hardware prefetcher keeps too few lines in flight:
 * asking now for the lines DEC_AHEAD bytes past the group about to be read took Q4_0 decode from
 * 25-27 to 29-31 t/s on one thread of the AMD EPYC, and 44-45 -> 48-51 (int8) and 35-37 -> 43-44
 * (16-bit) on two (BENCHMARKS.md, session 6). Q8_0, nearer the memory's pace, got no faster
 * (its 16-bit decode slower), so it is left alone. Rows long enough that their activations crowd
 * L1 (kernels.h, CPU_DEC_LONG_X; counted as 16-bit codes, so the int8 paths switch at the same
 * length) take every type's lines further ahead into L2 instead. */
#define DEC_AHEAD 4096

AI void prefetch_group(const int kind, const uint8_t *row, int g0, int nb)
{
    const size_t gb = group_bytes(kind);
    const uint8_t *p = row + (size_t)g0 / 16 * gb;

    if (cpu_dec_long((size_t)nb * QK * 2)) {   /* a long row, every type */
        cpu_dec_prefetch_l2(p, gb);
        return;
    }
    if (kind == V_Q8_0)
        return;
    for (size_t l = 0; l < gb; l += 64)
        __builtin_prefetch(p + DEC_AHEAD + l, 0, 3);
}

/* One row against T tokens (group_dot's T), y[t] token t's sum: row_dot's, bit for bit. */
AI void row_dots(const int kind, const int T, const vnni_group *const x[], const uint8_t *row, int nb, float *const y[])
{
    v16f acc[2] = {{0}, {0}};
    int g0 = 0;

    for (; g0 + 16 <= nb; g0 += 16) {
        prefetch_group(kind, row, g0, nb);
        group_dot(kind, 1, T, acc, x, row, g0, 16);
    }
    if (g0 < nb)
        group_dot(kind, 0, T, acc, x, row, g0, nb - g0);
#pragma GCC unroll 2
    for (int t = 0; t < T; t++)
        *y[t] = hsum(acc[t]);
}

AI float row_dot(const int kind, const vnni_group *x, const uint8_t *row, int nb)
{
    float y, *yp = &y;

    row_dots(kind, 1, &x, row, nb, &yp);
    return y;
}

/* ---------------------------------------------------------------- prefill */

#define RB 8 /* rows per panel */
#define TB 64 /* tokens whose float accumulators stay live across the groups */

/* cpu_prefetch_panel for the group gemms: panels of one group (16 blocks) of pr rows, group g
 * now; its next group starts past the row's end after the last one. */
AI void prefetch_panel(const int kind, const uint8_t *w, size_t ws, int rb, int pr, int n_rows, int g, int more_tok,
                       int i, int n)
{
    const size_t gb = group_bytes(kind);

    cpu_prefetch_panel(w, ws, rb, pr, n_rows, (size_t)(g + 1) * gb, gb, more_tok, i, n);
}

#if defined(VNNI_NAME)
typedef struct vnni_panel {
    int32_t wt[RB][16][16]; /* [r][k][i]: row r, block i's weight codes 2k, 2k + 1 */
    float a[RB][16], b[RB][16], a2[RB][16];
} vnni_panel;

static _Thread_local _Alignas(64) vnni_panel panel;
#endif
static _Thread_local _Alignas(64) float facc[RB][TB][16];

#if defined(VNNI_NAME)

#if defined(__AVX512BW__)
/* y[i]: in each 128-bit half, row i of an 8 x 8 matrix of 16-bit words; after, y[m] holds column
 * m of each half's matrix (word m of rows 0-7): words, pairs of them, then quads interleaved. */
AI void transpose8_words(__m256i y[8])
{
    __m256i a[8], b[8];

    for (int i = 0; i < 4; i++) {
        a[2 * i] = _mm256_unpacklo_epi16(y[2 * i], y[2 * i + 1]);
        a[2 * i + 1] = _mm256_unpackhi_epi16(y[2 * i], y[2 * i + 1]);
    }
    for (int j = 0; j < 2; j++) {
        b[4 * j] = _mm256_unpacklo_epi32(a[4 * j], a[4 * j + 2]);
        b[4 * j + 1] = _mm256_unpackhi_epi32(a[4 * j], a[4 * j + 2]);
        b[4 * j + 2] = _mm256_unpacklo_epi32(a[4 * j + 1], a[4 * j + 3]);
        b[4 * j + 3] = _mm256_unpackhi_epi32(a[4 * j + 1], a[4 * j + 3]);
    }
    for (int m = 0; m < 8; m++)
        y[m] = m % 2 ? _mm256_unpackhi_epi64(b[m / 2], b[4 + m / 2]) : _mm256_unpacklo_epi64(b[m / 2], b[4 + m / 2]);
}

/* Lane i of w: bytes q0 | q1 << 8. lo lane i: q0's and q1's low nibbles as a pair of 16-bit codes
 * (the low one first), hi lane i: their high nibbles. */
AI void nibble_pairs(__m512i w, __m512i *lo, __m512i *hi)
{
    const __m512i m_lo = _mm512_set1_epi32(0x0000000f), m_hi = _mm512_set1_epi32(0x000f0000);

    *lo = _mm512_or_si512(_mm512_and_si512(w, m_lo), _mm512_and_si512(_mm512_slli_epi32(w, 8), m_hi));
    *hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(w, 4), m_lo),
                          _mm512_and_si512(_mm512_slli_epi32(w, 4), m_hi));
}

/* Q4_0, a whole group of one row (16 blocks from p) straight into panel row r, with no block
 * widened on its own and no 16 x 16 transpose of 32-bit lanes after (what the loop below does,
 * and what a pass of a few sequences' tokens spent about half its time on). Block i's 16 bytes of
 * nibbles are 8 byte pairs: pair m holds codes 2m, 2m + 1 (low nibbles) and 16 + 2m, 17 + 2m
 * (high nibbles), i.e. the panel's steps m and 8 + m. So the 16 x 8 matrix of byte pairs is
 * transposed as 16-bit words (blocks i and 8 + i in the two halves of a ymm, an 8 x 8 transpose
 * in each half), and each column (pair m of the 16 blocks) widened to 32-bit lanes gives both
 * steps with shifts and masks: the same codes, offset 8 removed, as unpack and the loop. */
AI void panel_row_q4_0(const uint8_t *p, int r)
{
    const __m512i eight = _mm512_set1_epi16(8);
    __m256i y[8];

    for (int i = 0; i < 16; i++)
        panel.a[r][i] = f16(p + (size_t)i * CPU_Q4_0_BYTES);
    memset(panel.b[r], 0, sizeof panel.b[r]);
    memset(panel.a2[r], 0, sizeof panel.a2[r]);
    for (int i = 0; i < 8; i++)
        y[i] = _mm256_inserti128_si256(
            _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)(p + i * CPU_Q4_0_BYTES + 2))),
            _mm_loadu_si128((const __m128i *)(const void *)(p + (i + 8) * CPU_Q4_0_BYTES + 2)), 1);
    transpose8_words(y);
    for (int m = 0; m < 8; m++) { /* pair m of blocks 0-7 and 8-15 */
        __m512i lo, hi;
        nibble_pairs(_mm512_cvtepu16_epi32(y[m]), &lo, &hi); /* lane i: bytes 2m, 2m + 1 of block i */
        _mm512_store_si512(panel.wt[r][m], _mm512_sub_epi16(lo, eight));
        _mm512_store_si512(panel.wt[r][8 + m], _mm512_sub_epi16(hi, eight));
    }
}

/* Q4_K, the same way: a group is two super-blocks, whose eight 32-byte runs of nibbles (run c of
 * super-block s: sub-blocks 8s + 2c, low nibbles, and 8s + 2c + 1, high) are transposed as 16-bit
 * words, so that a column holds byte pair m of every run; its low and high nibbles are the two
 * sub-blocks' codes of step m, interleaved into lanes 2C, 2C + 1. The scales: unpack's products,
 * 16 at a time. */
AI void panel_row_q4_k(const uint8_t *p, int r)
{
    const __m512i ia = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i ib = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    const uint8_t *p1 = p + CPU_Q4_K_BYTES;
    uint8_t sc[16], mn[16];
    __m256i y[8];

    for (int i = 0; i < 16; i++) {
        int scv, mv;
        cpu_scale_min_k4(i % 8, (i < 8 ? p : p1) + 4, &scv, &mv);
        sc[i] = (uint8_t)scv, mn[i] = (uint8_t)mv;
    }
    __m512 d = _mm512_mask_blend_ps(0xff00, _mm512_set1_ps(f16(p)), _mm512_set1_ps(f16(p1)));
    __m512 dmin = _mm512_mask_blend_ps(0xff00, _mm512_set1_ps(f16(p + 2)), _mm512_set1_ps(f16(p1 + 2)));
    __m512 scf = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)sc)));
    __m512 mf = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)mn)));
    _mm512_store_ps(panel.a[r], _mm512_mul_ps(d, scf));
    _mm512_store_ps(panel.b[r], _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(_mm512_mul_ps(dmin, mf)),
                                                                     _mm512_set1_epi32((int)0x80000000u))));
    memset(panel.a2[r], 0, sizeof panel.a2[r]);
    for (int c = 0; c < 8; c++)
        y[c] = _mm256_loadu_si256((const __m256i *)(const void *)((c < 4 ? p : p1) + 16 + 32 * (c % 4)));
    transpose8_words(y);
    for (int m = 0; m < 8; m++) { /* pairs m (low half) and 8 + m (high half) of runs 0-7 */
        __m512i lo, hi;
        nibble_pairs(_mm512_cvtepu16_epi32(y[m]), &lo, &hi);
        _mm512_store_si512(panel.wt[r][m], _mm512_permutex2var_epi32(lo, ia, hi));
        _mm512_store_si512(panel.wt[r][8 + m], _mm512_permutex2var_epi32(lo, ib, hi));
    }
}
#endif

AI void panel_fill(const int kind, const uint8_t *w, size_t ws, int nr, int g0, int nb)
{
    int n = nb - g0 < 16 ? nb - g0 : 16;

    for (int r = 0; r < RB; r++) {
#if defined(__AVX512BW__)
        if (kind == V_Q4_0 && r < nr && n == 16) {
            panel_row_q4_0(w + (size_t)r * ws + (size_t)g0 * CPU_Q4_0_BYTES, r);
            continue;
        }
        if (kind == V_Q4_K && r < nr && n == 16) {
            panel_row_q4_k(w + (size_t)r * ws + (size_t)(g0 / 8) * CPU_Q4_K_BYTES, r);
            continue;
        }
#endif
        _Alignas(64) int32_t t[16][16];
        for (int i = 0; i < 16; i++) {
            if (r >= nr || i >= n) {
                memset(t[i], 0, sizeof t[i]);
                panel.a[r][i] = panel.b[r][i] = panel.a2[r][i] = 0.0f;
                continue;
            }
            v32s16 c = unpack(kind, w + (size_t)r * ws, g0 + i, &panel.a[r][i], &panel.b[r][i], &panel.a2[r][i]);
            memcpy(t[i], &c, sizeof c);
        }
        for (int k = 0; k < 16; k++)
            for (int i = 0; i < 16; i++)
                panel.wt[r][k][i] = t[i][k];
    }
}

#endif

/* Out of line where the instructions are real: inlined into the panel loop, gcc merged the two
 * row tiles into 8 x 4 accumulators and spilled them (its clones keep MT constant). */
#if (defined(__AVX512VNNI__) && defined(__AVX512F__)) || defined(__AVXVNNI__)
#define TILE_ATTR static __attribute__((noinline))
#else
#define TILE_ATTR AI
#endif

#if defined(VNNI_NAME)

/* 4 panel rows from r0 x MT tokens (group pointers xg[t]) over steps [k0, k0 + nk): the block sums
 * in lanes, folded into facc with scales `sa` (panel.a or panel.a2). */
TILE_ATTR void tile(const int MT, const int kind, int r0, const vnni_group *const *xg, int t0, int k0, int nk,
                    const float (*sa)[16], int offset)
{
    v16s32 c[4][4];

#pragma GCC unroll 4
    for (int r = 0; r < 4; r++)
#pragma GCC unroll 4
        for (int t = 0; t < MT; t++)
            c[r][t] = (v16s32){0};
    for (int k = k0; k < k0 + nk; k++) {
        v32s16 xv[4] = {{0}}; /* all set for t < MT: gcc 12 cannot tell in the out-of-line tile */
#pragma GCC unroll 4
        for (int t = 0; t < MT; t++) {
            xv[t] = ld_s16(xg[t]->xt[k]);
#if defined(__AVX512VNNI__) && defined(__AVX512F__)
            /* in a register: folded into each vpdpwssd it was loaded 4 times, 20 loads per 16
             * (Q6_K's two half-length passes ran slower so) */
            if (kind != V_Q6_K)
                __asm__("" : "+v"(xv[t]));
#endif
        }
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++) {
            v32s16 wv = ld_s16(panel.wt[r0 + r][k]);
#pragma GCC unroll 4
            for (int t = 0; t < MT; t++)
                c[r][t] = dpwssd(c[r][t], wv, xv[t]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++) {
        v16f a = ld_f(sa[r0 + r]), b = ld_f(panel.b[r0 + r]);
#pragma GCC unroll 4
        for (int t = 0; t < MT; t++) {
            float *f = facc[r0 + r][t0 + t];
            v16f acc = fmav(__builtin_convertvector(c[r][t], v16f), a * ld_f(xg[t]->dx), ld_f(f));
            if (has_offset(kind) && offset)
                acc = fmav(b, ld_f(xg[t]->s), acc);
            memcpy(f, &acc, sizeof acc);
        }
    }
    (void)kind;
}

AI void tiles(const int kind, int r0, const vnni_group *const *xg, int t0, int mt)
{
    const int q6 = kind == V_Q6_K;

    switch (mt) {
    case 4:
        tile(4, kind, r0, xg, t0, 0, q6 ? 8 : 16, panel.a, 1);
        if (q6)
            tile(4, kind, r0, xg, t0, 8, 8, panel.a2, 0);
        break;
    case 3:
        tile(3, kind, r0, xg, t0, 0, q6 ? 8 : 16, panel.a, 1);
        if (q6)
            tile(3, kind, r0, xg, t0, 8, 8, panel.a2, 0);
        break;
    case 2:
        tile(2, kind, r0, xg, t0, 0, q6 ? 8 : 16, panel.a, 1);
        if (q6)
            tile(2, kind, r0, xg, t0, 8, 8, panel.a2, 0);
        break;
    default:
        tile(1, kind, r0, xg, t0, 0, q6 ? 8 : 16, panel.a, 1);
        if (q6)
            tile(1, kind, r0, xg, t0, 8, 8, panel.a2, 0);
        break;
    }
}

AI void gemm_kind(const int kind, float *y, size_t ldy, const cpu_act *act, int n_tok, const uint8_t *w, size_t ws,
                  int n_rows, int cols)
{
    int nb = cols / QK, ng = (nb + 15) / 16;

    if (n_tok <= dec_multi(kind == V_Q4_0)) {   /* rows outside: a row's bytes from L1 for its later tokens */
#define XT(t) ((const vnni_group *)(const void *)(act->x + (size_t)(t) * act->stride))
        for (int r = 0; r < n_rows; r++) {
            const uint8_t *row = w + (size_t)r * ws;
            int t = 0;
            for (; kind != V_Q6_K && t + 2 <= n_tok; t += 2)   /* tokens in pairs: one unpacking for two */
                row_dots(kind, 2, (const vnni_group *const[]){XT(t), XT(t + 1)}, row, nb,
                         (float *const[]){&y[(size_t)t * ldy + r], &y[(size_t)(t + 1) * ldy + r]});
            for (; t < n_tok; t++)
                y[(size_t)t * ldy + r] = row_dot(kind, XT(t), row, nb);
        }
#undef XT
        return;
    }
    for (int rb = 0; rb < n_rows; rb += RB) {
        int nr = n_rows - rb < RB ? n_rows - rb : RB;
        const uint8_t *wb = w + (size_t)rb * ws;
        for (int t0 = 0; t0 < n_tok; t0 += TB) {
            int nt = n_tok - t0 < TB ? n_tok - t0 : TB;
            for (int r = 0; r < RB; r++) /* the nt tokens' accumulators only: a pass of a few sequences'
                                         * tokens zeroed all TB, 32 KB per 8 rows, 9% of its time */
                memset(facc[r], 0, (size_t)nt * sizeof facc[r][0]);
            for (int g = 0; g < ng; g++) {
                panel_fill(kind, wb, ws, nr, 16 * g, nb);
                for (int t = 0; t < nt; t += 4) {
                    const vnni_group *xg[4];
                    int mt = nt - t < 4 ? nt - t : 4;
                    prefetch_panel(kind, w, ws, rb, RB, n_rows, g, t0 + TB < n_tok, t / 4, (nt + 3) / 4);
                    for (int i = 0; i < mt; i++)
                        xg[i] = (const vnni_group *)(const void *)(act->x + (size_t)(t0 + t + i) * act->stride) + g;
                    tiles(kind, 0, xg, t, mt);
                    if (nr > 4)
                        tiles(kind, 4, xg, t, mt);
                }
            }
            for (int t = 0; t < nt; t++)
                for (int r = 0; r < nr; r++)
                    y[(size_t)(t0 + t) * ldy + rb + r] = hsum(ld_f(facc[r][t]));
        }
    }
}

#define VNNI_TYPE(name, kind)                                                                                          \
    static void gemm_##name(float *y, size_t ldy, const cpu_act *a, int n_tok, const uint8_t *w, size_t ws, int n_rows, \
                            int cols)                                                                                  \
    {                                                                                                                  \
        gemm_kind(kind, y, ldy, a, n_tok, w, ws, n_rows, cols);                                                        \
    }                                                                                                                  \
    static float dot_##name(const void *x, const void *w, int n)                                                       \
    {                                                                                                                  \
        return row_dot(kind, x, w, n / QK);                                                                            \
    }
VNNI_TYPE(q8_0, V_Q8_0)
VNNI_TYPE(q4_0, V_Q4_0)
VNNI_TYPE(q4_1, V_Q4_1)
VNNI_TYPE(q5_0, V_Q5_0)
VNNI_TYPE(q5_1, V_Q5_1)
VNNI_TYPE(q4_k, V_Q4_K)
VNNI_TYPE(q6_k, V_Q6_K)
VNNI_TYPE(mxfp4, V_MXFP4)
#undef VNNI_TYPE
#endif

/* The int8 paths have no MXFP4 kernel: its dot on plain cpu_q16 blocks, named in their table
 * (kernels_vnni8.h) because the entry they would inherit, the 16-bit path's or the avx2 path's
 * own, reads another activation layout, and a table's entries all take the activations of the
 * path that resolves them (cpu.c). */
#if defined(__AVX2__)
#define VNNI_MXFP4 CPU_Q16(cpu_kq_avx2_dot_mxfp4, NULL)
#else
#define VNNI_MXFP4 CPU_Q16(cpu_kq_dot_mxfp4, NULL)
#endif

/* Over VNNI_BASE_PATH (avx512, avx2 or scalar): the eight types above, on this file's activation
 * layout; the float types and the other K-quants stay the base's. */
#if defined(VNNI_NAME)
const cpu_path VNNI_PATH = {
    .name = VNNI_NAME,
    .base = &VNNI_BASE_PATH,
    .built = 1,
    .type = {
        [GGML_TYPE_Q8_0] = CPU_OWN(dot_q8_0, gemm_q8_0), [GGML_TYPE_Q4_0] = CPU_OWN(dot_q4_0, gemm_q4_0),
        [GGML_TYPE_Q4_1] = CPU_OWN(dot_q4_1, gemm_q4_1), [GGML_TYPE_Q5_0] = CPU_OWN(dot_q5_0, gemm_q5_0),
        [GGML_TYPE_Q5_1] = CPU_OWN(dot_q5_1, gemm_q5_1), [GGML_TYPE_Q4_K] = CPU_OWN(dot_q4_k, gemm_q4_k),
        [GGML_TYPE_Q6_K] = CPU_OWN(dot_q6_k, gemm_q6_k), [GGML_TYPE_MXFP4] = CPU_OWN(dot_mxfp4, gemm_mxfp4),
    },
    .act_bytes = act_bytes,
    .act_quantize = act_quantize,
};
#endif

#if defined(VNNI8_NAME)
#include "cpu/kernels_vnni8.h"
#endif
