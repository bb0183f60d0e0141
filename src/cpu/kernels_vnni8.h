/* kernels_vnni8.h: the int8 VNNI paths, included at the end of kernels_vnni.h (so that they share
 * its vectors, its scale loaders and its add tree) when the includer defines VNNI8_NAME and
 * VNNI8_PATH:
 *   avx512vnni-int8  vpdpbusd on 512-bit registers;
 *   avxvnni-int8     vpdpbusd on two 256-bit halves;
 *   vnni-int8-emul   vpdpbusd emulated exactly in C: any CPU, the same bits.
 *
 * What ggml does: activations in 8-bit blocks (cpu_quantize_q8: x ~= dx * q, |q| <= 127), so one
 * vpdpbusd does 64 multiply-adds where vpdpwssd does 32. It is an opt-in (MSTORE_CPU names it,
 * "auto" never does): rounding each activation to 8 bits moves the first-step logits of
 * s260k-mixed and of a synthetic Q4_0 model about 1e-2 from the float64 reference, where the
 * default paths stay near 1e-5 (BENCHMARKS.md has both beside llama.cpp's own error).
 *
 * The arithmetic of a (token, row) is that of kernels_vnni.h with 8-bit activation codes: blocks
 * of 32 in groups of 16, block i in lane i; per block the exact integer sum of its weight codes
 * with the activation codes, then acc = fma((float)isum, a * dx, acc) (Q6_K: once per half, with
 * a and a2), then acc = fma(b, s, acc) for the offset types; the 16 lanes summed as a tree.
 * vpdpbusd multiplies unsigned bytes by signed ones, so the weights go in as unsigned codes u
 * (Q8_0: q + 128; Q4_0: the nibble; Q5_0: the 5-bit code; Q6_K: the 6-bit code) and their offset
 * comes off the integer sum: sum((u - o) x) = sum(u x) - o * sum(x), o a power of two (128, 8,
 * 16, 32), exact in 32 bits.
 *
 * Layouts (one vnni8_group per 16 blocks of a token):
 *   decode (one token; also the row dot), by the weights' type (act8_quantize is told it):
 *     xp[m] = block 2m's 32 codes then block 2m + 1's, and a pair of weight blocks the same way,
 *     so one vpdpbusd leaves block 2m's partial sums in lanes 0-7 and 2m + 1's in 8-15
 *     (sum_pairs finishes them; Q6_K stops a level early for its two halves); Q4_0 and Q4_1 take
 *     xq, Q4_K xk, which fit one load of their packed nibbles per 4 blocks (quad_sums);
 *   prefill: xt[k][i] = block i's codes 4k .. 4k + 3, and a panel of 8 rows the same way, so 8
 *     vpdpbusd per (row, token, group) leave the block sums in their lanes. */

/* Inlined where the instructions are real; the emulation, which exists for tests, is left to the
 * compiler's judgement (forced inlining of its wide generic vectors doubles its compile time). */
#if (defined(__AVX512VNNI__) && defined(__AVX512F__)) || defined(__AVXVNNI__)
#define AI8 AI
#else
#define AI8 static inline
#endif

typedef uint8_t v64u8 __attribute__((vector_size(64)));
typedef int8_t v64s8 __attribute__((vector_size(64)));

#if !(defined(__AVX512VNNI__) && defined(__AVX512F__)) && !defined(__AVXVNNI__)
/* the emulation: byte j of each lane, a zero-extended, b sign-extended; each product fits 16
 * bits and their sum 18, added modulo 2^32 as the instruction does. Out of line: inlined into
 * every unrolled tile it tripled the compile time of vnni-int8-emul, which exists for tests. */
static __attribute__((noinline)) v16s32 dpbusd_emul(v16s32 acc, v64u8 a, v64s8 b)
{
    v16u32 ua = (v16u32)a, r = (v16u32)acc;
    v16s32 sb = (v16s32)b;
    for (int j = 0; j < 4; j++) {
        v16s32 wa = (v16s32)((ua >> (8 * j)) & 255), xb = (v16s32)((v16u32)sb << (24 - 8 * j)) >> 24;
        r += (v16u32)(wa * xb);
    }
    return (v16s32)r;
}
#endif

/* acc + sum of the four products of unsigned a bytes and signed b bytes in each 32-bit lane,
 * modulo 2^32: vpdpbusd. */
AI8 v16s32 dpbusd(v16s32 acc, v64u8 a, v64s8 b)
{
#if defined(__AVX512VNNI__) && defined(__AVX512F__)
    return (v16s32)_mm512_dpbusd_epi32((__m512i)acc, (__m512i)a, (__m512i)b);
#elif defined(__AVXVNNI__)
    v8ll c = (v8ll)acc, x = (v8ll)a, y = (v8ll)b;
    __m256i lo = _mm256_dpbusd_avx_epi32((__m256i)__builtin_shufflevector(c, c, 0, 1, 2, 3),
                                         (__m256i)__builtin_shufflevector(x, x, 0, 1, 2, 3),
                                         (__m256i)__builtin_shufflevector(y, y, 0, 1, 2, 3));
    __m256i hi = _mm256_dpbusd_avx_epi32((__m256i)__builtin_shufflevector(c, c, 4, 5, 6, 7),
                                         (__m256i)__builtin_shufflevector(x, x, 4, 5, 6, 7),
                                         (__m256i)__builtin_shufflevector(y, y, 4, 5, 6, 7));
    return (v16s32)__builtin_shufflevector((v4ll)lo, (v4ll)hi, 0, 1, 2, 3, 4, 5, 6, 7);
#else
    return dpbusd_emul(acc, a, b);
#endif
}

/* log2 of the offset o of a kind's unsigned codes; -1 when it has none. */
static inline int off_shift(int kind)
{
    return kind == V_Q8_0 ? 7 : kind == V_Q4_0 ? 3 : kind == V_Q5_0 ? 4 : kind == V_Q6_K ? 5 : -1;
}

/* Block bi's 32 unsigned weight codes in element order. */
AI8 v32u8 unpack8(const int kind, const uint8_t *row, int bi)
{
    v32u8 u;

    switch (kind) {
    case V_Q8_0:
        memcpy(&u, row + (size_t)bi * CPU_Q8_0_BYTES + 2, 32);
        return u ^ 0x80;
    case V_Q4_0:
    case V_Q4_1: {
        v16u8 q;
        memcpy(&q, row + (size_t)bi * (kind == V_Q4_0 ? CPU_Q4_0_BYTES : CPU_Q4_1_BYTES) + (kind == V_Q4_0 ? 2 : 4), 16);
        return __builtin_shufflevector(q & 15, q >> 4, IOTA32);
    }
    case V_Q5_0:
    case V_Q5_1: {
        const int q5_1 = kind == V_Q5_1;
        const uint8_t *p = row + (size_t)bi * (q5_1 ? CPU_Q5_1_BYTES : CPU_Q5_0_BYTES);
        const uint8_t *qs = p + (q5_1 ? 8 : 6);
        uint32_t qh = cpu_rd32(p + (q5_1 ? 4 : 2));
        uint8_t c[QK];
        for (int j = 0; j < QK / 2; j++) {
            c[j] = (uint8_t)((qs[j] & 15) | ((qh >> j) & 1) << 4);
            c[j + QK / 2] = (uint8_t)((qs[j] >> 4) | ((qh >> (j + 16)) & 1) << 4);
        }
        memcpy(&u, c, sizeof u);
        return u;
    }
    case V_Q4_K: {
        const int j = bi % 8;
        memcpy(&u, row + (size_t)(bi / 8) * CPU_Q4_K_BYTES + 16 + 32 * (j / 2), 32);
        return j % 2 ? u >> 4 : u & 15;
    }
    default: { /* V_Q6_K */
        const uint8_t *p = row + (size_t)(bi / 8) * CPU_Q6_K_BYTES;
        int j = bi % 8, h = j / 4, jj = j % 4;
        v32u8 l, hb;
        memcpy(&l, p + 64 * h + 32 * (jj % 2), 32);
        memcpy(&hb, p + 128 + 32 * h, 32);
        l = (jj / 2 ? l >> 4 : l) & 15;
        hb = (hb >> (2 * jj)) & 3;
        return l | (v32u8)(hb << 4);
    }
    }
}

#define IOTA64                                                                                                      \
    IOTA32, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, \
        58, 59, 60, 61, 62, 63

/* Blocks bi and bj of a row side by side (bj may repeat bi: its activations are zero then). */
AI8 v64u8 unpack_pair8(const int kind, const uint8_t *row, int bi, int bj)
{
    switch (kind) {
    case V_Q4_0: {
        v16u8 p, q;
        memcpy(&p, row + (size_t)bi * CPU_Q4_0_BYTES + 2, 16);
        memcpy(&q, row + (size_t)bj * CPU_Q4_0_BYTES + 2, 16);
        v32u8 c = __builtin_shufflevector(p, q, IOTA32), lo = c & 15, hi = c >> 4;
        return __builtin_shufflevector(lo, hi, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 32, 33, 34, 35, 36,
                                       37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 16, 17, 18, 19, 20, 21, 22, 23, 24,
                                       25, 26, 27, 28, 29, 30, 31, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60,
                                       61, 62, 63);
    }
    case V_Q4_K:
        if (bj == bi + 1 && bi % 2 == 0) { /* the two nibbles of the same 32 bytes */
            v32u8 q;
            memcpy(&q, row + (size_t)(bi / 8) * CPU_Q4_K_BYTES + 16 + 32 * (bi % 8 / 2), 32);
            return __builtin_shufflevector(q & 15, q >> 4, IOTA64);
        }
        break;
    default:
        break;
    }
    return __builtin_shufflevector(unpack8(kind, row, bi), unpack8(kind, row, bj), IOTA64);
}

/* ---------------------------------------------------------------- activations */

typedef struct vnni8_group {
    union {
        int8_t xp[8][64]; /* decode of the other types */
        int8_t xq[8][64]; /* decode of Q4_0 and Q4_1 (quad_sums) */
        int8_t xk[8][64]; /* decode of Q4_K (quad_sums) */
        int32_t xt[8][16]; /* prefill */
        int8_t xa[16][32]; /* prefill on the AMX paths (kernels_amx.h): block i's codes in order */
    };
    float dx[16], s[16];
    int32_t xs[16], xs_lo[16], xs_hi[16]; /* sums of each block's codes: all 32, 0-15, 16-31 */
} vnni8_group;

static size_t act8_bytes(int n_tok, int cols)
{
    (void)n_tok;
    return (size_t)(cols / QK + 15) / 16 * sizeof(vnni8_group);
}

/* One token, laid out for decode (n_tok 1) or prefill (xt, or xa where `plain`); codes of
 * cpu_quantize_q8. */
static void act8_layout(uint8_t *dst, const float *x, int type, int n_tok, int cols, int plain)
{
    int nb = cols / QK;

    for (int g0 = 0; g0 < nb; g0 += 16) {
        vnni8_group *g = (vnni8_group *)(void *)dst + g0 / 16;
        cpu_q16 tmp[16];
        int n = nb - g0 < 16 ? nb - g0 : 16;

        memset(tmp, 0, sizeof tmp);
        cpu_quantize_q8(tmp, x + (size_t)g0 * QK, n * QK);
        for (int i = 0; i < 16; i++) {
            int8_t c[QK];
            int lo = 0, hi = 0;
            for (int j = 0; j < QK; j++) {
                c[j] = (int8_t)tmp[i].q[j];
                if (j < QK / 2)
                    lo += c[j];
                else
                    hi += c[j];
            }
            if (n_tok == 1 && (type == GGML_TYPE_Q4_0 || type == GGML_TYPE_Q4_1)) {
                memcpy(g->xq[2 * (i / 4)] + 16 * (i % 4), c, QK / 2);
                memcpy(g->xq[2 * (i / 4) + 1] + 16 * (i % 4), c + QK / 2, QK / 2);
            } else if (n_tok == 1 && type == GGML_TYPE_Q4_K) {
                memcpy(g->xk[2 * (i / 4) + i % 2] + 32 * (i % 4 / 2), c, QK);
            } else if (n_tok == 1) {
                memcpy(g->xp[i / 2] + 32 * (i % 2), c, QK);
            } else if (plain) {
                memcpy(g->xa[i], c, QK);
            } else
                for (int k = 0; k < 8; k++)
                    memcpy(&g->xt[k][i], c + 4 * k, 4);
            g->dx[i] = tmp[i].d;
            g->s[i] = tmp[i].s;
            g->xs[i] = lo + hi;
            g->xs_lo[i] = lo;
            g->xs_hi[i] = hi;
        }
    }
}

static void act8_quantize(uint8_t *dst, const float *x, int type, int n_tok, int cols)
{
    act8_layout(dst, x, type, n_tok, cols, 0);
}

/* ---------------------------------------------------------------- decode and the row dot */

/* The integer block sums with the weights' offset taken off: isum - (xs << sh). */
AI8 v16s32 unoffset(const int kind, v16s32 isum, const int32_t *xs)
{
    const int sh = off_shift(kind);

    return sh < 0 ? isum : isum - (ld_s32(xs) << sh);
}

/* The integer block sums of a group of Q4_0, Q4_1 or Q4_K blocks (few instructions per block:
 * decode is bound by them, not by memory) into lanes 0 .. 15 in block order. Q4_0 and Q4_1: the
 * 16-byte nibble arrays of 4 blocks side by side;
 * the low nibbles meet xq[2Q] (codes 0-15 of each block) and the high ones xq[2Q + 1] (16-31),
 * both in one accumulator whose lanes 4i .. 4i + 3 are block 4Q + i's. Q4_K: 64 bytes are four
 * sub-blocks, low nibbles 4Q and 4Q + 2, high ones 4Q + 1 and 4Q + 3, against xk. */
AI8 v16s32 quad_sums(const int kind, const int FULL, const vnni8_group *xg, const uint8_t *row, int g0, int n)
{
    v16s32 p[8];

    if (kind == V_Q4_0 || kind == V_Q4_1) {
        const size_t bytes = kind == V_Q4_0 ? CPU_Q4_0_BYTES : CPU_Q4_1_BYTES, at = kind == V_Q4_0 ? 2 : 4;
#pragma GCC unroll 4
        for (int q = 0; q < 4; q++) {
            if (!FULL && 4 * q >= n) {
                p[q] = (v16s32){0};
                continue;
            }
            v16u8 b[4];
            for (int i = 0; i < 4; i++) /* past the row's end: block 4q again, against zero codes */
                memcpy(&b[i], row + (size_t)(g0 + (FULL || 4 * q + i < n ? 4 * q + i : 4 * q)) * bytes + at, 16);
            v64u8 v = __builtin_shufflevector(__builtin_shufflevector(b[0], b[1], IOTA32),
                                              __builtin_shufflevector(b[2], b[3], IOTA32), IOTA64);
            v64s8 xl, xh;
            memcpy(&xl, xg->xq[2 * q], sizeof xl);
            memcpy(&xh, xg->xq[2 * q + 1], sizeof xh);
            p[q] = dpbusd(dpbusd((v16s32){0}, v & 15, xl), v >> 4, xh);
        }
        /* lanes 4i .. 4i + 3 of p[q] -> lane 4q + i: two levels of a transposing add tree */
        return hadd_pairs(hadd_pairs(p[0], p[1]), hadd_pairs(p[2], p[3]));
    }
    /* V_Q4_K: n is 8 or 16 (whole super-blocks) */
#pragma GCC unroll 4
    for (int q = 0; q < 4; q++) {
        if (!FULL && 4 * q >= n) {
            p[2 * q] = p[2 * q + 1] = (v16s32){0};
            continue;
        }
        v64u8 v;
        v64s8 xl, xh;
        memcpy(&v, row + (size_t)((g0 + 4 * q) / 8) * CPU_Q4_K_BYTES + 16 + 64 * (q % 2), sizeof v);
        memcpy(&xl, xg->xk[2 * q], sizeof xl);
        memcpy(&xh, xg->xk[2 * q + 1], sizeof xh);
        p[2 * q] = dpbusd((v16s32){0}, v & 15, xl);
        p[2 * q + 1] = dpbusd((v16s32){0}, v >> 4, xh);
    }
    /* sum_pairs puts blocks 4Q, 4Q + 2, 4Q + 1, 4Q + 3 in lanes 4Q .. 4Q + 3 */
    v16s32 r = sum_pairs(p);
    return __builtin_shufflevector(r, r, 0, 2, 1, 3, 4, 6, 5, 7, 8, 10, 9, 11, 12, 14, 13, 15);
}

/* The half sums of a group of Q6_K blocks (8 or 16: whole super-blocks): lane i of *lo the sum
 * over block i's codes 0-15, of *hi over 16-31. Per half super-block one load of the low bits
 * (blocks 4h and 4h + 1 in the low nibbles, 4h + 2 and 4h + 3 in the high ones, as in xp) and
 * one of the high bits; each vpdpbusd lane covers 4 codes, so a block's halves are its lanes
 * 0-3 and 4-7, and the add tree stops one level short of sum_pairs. */
AI8 void q6k_half_sums(const int FULL, const vnni8_group *xg, const uint8_t *row, int g0, int n, v16s32 *lo, v16s32 *hi)
{
    v16s32 p[8], q[4], r[2];

#pragma GCC unroll 4
    for (int m = 0; m < 8; m += 2) {
        const int s = m / 4, h = m / 2 % 2;
        if (!FULL && 8 * s >= n) {
            p[m] = p[m + 1] = (v16s32){0};
            continue;
        }
        const uint8_t *sb = row + (size_t)(g0 / 8 + s) * CPU_Q6_K_BYTES;
        v64u8 v;
        v16u16 hb;
        v64s8 x0, x1;
        memcpy(&v, sb + 64 * h, sizeof v);
        memcpy(&hb, sb + 128 + 32 * h, sizeof hb);
        memcpy(&x0, xg->xp[m], sizeof x0);
        memcpy(&x1, xg->xp[m + 1], sizeof x1);
        /* bits 2jj, 2jj + 1 of the high bytes to bits 4-5 for block 4h + jj (16-bit shifts:
         * what crosses a byte is masked off) */
        v64u8 t01 = (v64u8)__builtin_shufflevector(hb << 4, hb << 2, IOTA32) & 0x30;
        v64u8 t23 = (v64u8)__builtin_shufflevector(hb, hb >> 2, IOTA32) & 0x30;
        p[m] = dpbusd((v16s32){0}, (v & 15) | t01, x0);
        p[m + 1] = dpbusd((v16s32){0}, (v >> 4) | t23, x1);
    }
    /* p[m] lanes: 0-3 block 2m's low half, 4-7 its high half, 8-15 block 2m + 1's */
    for (int k = 0; k < 4; k++)
        q[k] = hadd_pairs(p[2 * k], p[2 * k + 1]);
    for (int k = 0; k < 2; k++)
        r[k] = hadd_pairs(q[2 * k], q[2 * k + 1]);
    /* r[k] lane 2i + e: half e of block 8k + i */
    *lo = __builtin_shufflevector(r[0], r[1], 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    *hi = __builtin_shufflevector(r[0], r[1], 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
}

AI8 v16f group_dot8(const int kind, const int FULL, v16f acc, const vnni8_group *xg, const uint8_t *row, int g0, int n)
{
    v16f a, b, a2;
    v16s32 isum;

    if (kind == V_Q6_K) {
        v16s32 lo, hi;
        q6k_half_sums(FULL, xg, row, g0, n, &lo, &hi);
        group_scales(kind, row, g0, FULL ? 16 : n, &a, &b, &a2);
        v16f dx = ld_f(xg->dx);
        acc = fmav(__builtin_convertvector(unoffset(kind, lo, xg->xs_lo), v16f), a * dx, acc);
        return fmav(__builtin_convertvector(unoffset(kind, hi, xg->xs_hi), v16f), a2 * dx, acc);
    }
    if (kind == V_Q4_0 || kind == V_Q4_1 || kind == V_Q4_K) {
        isum = quad_sums(kind, FULL, xg, row, g0, n);
    } else {
        v16s32 p[8];
#pragma GCC unroll 8
        for (int m = 0; m < 8; m++) {
            if (!FULL && 2 * m >= n) {
                p[m] = (v16s32){0};
                continue;
            }
            v64u8 w = unpack_pair8(kind, row, g0 + 2 * m, g0 + (FULL || 2 * m + 1 < n ? 2 * m + 1 : 2 * m));
            v64s8 x;
            memcpy(&x, xg->xp[m], sizeof x);
            p[m] = dpbusd((v16s32){0}, w, x);
        }
        isum = sum_pairs(p);
    }
    group_scales(kind, row, g0, FULL ? 16 : n, &a, &b, &a2);
    acc = fmav(__builtin_convertvector(unoffset(kind, isum, xg->xs), v16f), a * ld_f(xg->dx), acc);
    if (has_offset(kind))
        acc = fmav(b, ld_f(xg->s), acc);
    return acc;
}

AI8 float row_dot8(const int kind, const vnni8_group *x, const uint8_t *row, int nb)
{
    v16f acc = {0};
    int g0 = 0;

    for (; g0 + 16 <= nb; g0 += 16) {
        prefetch_group(kind, row, g0, nb);
        acc = group_dot8(kind, 1, acc, x + g0 / 16, row, g0, 16);
    }
    if (g0 < nb)
        acc = group_dot8(kind, 0, acc, x + g0 / 16, row, g0, nb - g0);
    return hsum(acc);
}

/* ---------------------------------------------------------------- prefill */

typedef struct vnni8_panel {
    int32_t wt[RB][8][16]; /* [r][k][i]: row r, block i's weight codes 4k .. 4k + 3 */
    float a[RB][16], b[RB][16], a2[RB][16];
} vnni8_panel;

static _Thread_local _Alignas(64) vnni8_panel panel8;

/* v[m] = blocks 2m, 2m + 1 side by side (lane j: block 2m + j / 8, dword j % 8) -> o[k] lane i =
 * block i's dword k. Three levels each swap a bit of the vector index with one of the lane
 * index, then one permute puts the lanes in block order. */
AI8 void transpose8(v16s32 o[8], const v16s32 v[8])
{
    v16s32 s[8], t[8];

    /* vector bit 0 <-> lane bit 0 */
    for (int a = 0; a < 8; a += 2) {
        s[a] = __builtin_shufflevector(v[a], v[a + 1], 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30);
        s[a + 1] = __builtin_shufflevector(v[a], v[a + 1], 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31);
    }
    /* vector bit 1 <-> lane bit 1 */
    for (int a = 0; a < 8; a += 4)
        for (int c = 0; c < 2; c++) {
            t[a + c] = __builtin_shufflevector(s[a + c], s[a + c + 2], 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13,
                                               28, 29);
            t[a + c + 2] = __builtin_shufflevector(s[a + c], s[a + c + 2], 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27,
                                                   14, 15, 30, 31);
        }
    /* vector bit 2 <-> lane bit 2 */
    for (int c = 0; c < 4; c++) {
        s[c] = __builtin_shufflevector(t[c], t[c + 4], 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
        s[c + 4] = __builtin_shufflevector(t[c], t[c + 4], 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
    }
    /* now vector index = dword, lane bits (l3 a2 a1 a0) with block = 2a + l3: block order */
    for (int k = 0; k < 8; k++)
        o[k] = __builtin_shufflevector(s[k], s[k], 0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
}

/* A whole group of Q4_0 or Q4_1 blocks in the prefill layout, o[k] lane i = block i's codes
 * 4k .. 4k + 3: those are the low nibbles of its dword k (k < 4) or the high ones of dword k - 4,
 * so the 16 x 4 dwords of nibbles need one transpose, not the 16 x 8 of unpacked codes. */
AI8 void panel8_q4(v16s32 o[8], const uint8_t *row, int g0, size_t bytes, size_t at)
{
    v16s32 q[4], t[4];

    for (int c = 0; c < 4; c++) { /* q[c] lane 4b + k: block 4c + b's dword k */
        v16u8 b[4];
        for (int i = 0; i < 4; i++)
            memcpy(&b[i], row + (size_t)(g0 + 4 * c + i) * bytes + at, 16);
        q[c] = (v16s32)__builtin_shufflevector(__builtin_shufflevector(b[0], b[1], IOTA32),
                                               __builtin_shufflevector(b[2], b[3], IOTA32), IOTA64);
        /* t[c] lane 4k + b */
        t[c] = __builtin_shufflevector(q[c], q[c], 0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    }
    /* o[k] 128-bit quarter c = t[c]'s quarter k: a 4 x 4 transpose of quarters */
    v16s32 u0 = __builtin_shufflevector(t[0], t[1], 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
    v16s32 u1 = __builtin_shufflevector(t[0], t[1], 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
    v16s32 u2 = __builtin_shufflevector(t[2], t[3], 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
    v16s32 u3 = __builtin_shufflevector(t[2], t[3], 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
    v16s32 d[4];
    d[0] = __builtin_shufflevector(u0, u2, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
    d[1] = __builtin_shufflevector(u1, u3, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
    d[2] = __builtin_shufflevector(u0, u2, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
    d[3] = __builtin_shufflevector(u1, u3, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
    for (int k = 0; k < 4; k++) {
        o[k] = (v16s32)((v64u8)d[k] & 15);
        o[k + 4] = (v16s32)((v64u8)d[k] >> 4);
    }
}

/* Blocks g0 .. g0 + n - 1 of a row in the prefill layout: o[k] lane i = block i's codes 4k .. 4k + 3
 * (0 past the n blocks). */
AI8 void panel8_row(const int kind, const uint8_t *row, int g0, int n, v16s32 o[8])
{
    v16s32 v[8];

    if ((kind == V_Q4_0 || kind == V_Q4_1) && n == 16) {
        panel8_q4(o, row, g0, kind == V_Q4_0 ? CPU_Q4_0_BYTES : CPU_Q4_1_BYTES, kind == V_Q4_0 ? 2 : 4);
        return;
    }
    for (int m = 0; m < 8; m++)
        v[m] = 2 * m >= n ? (v16s32){0}
                          : (v16s32)unpack_pair8(kind, row, g0 + 2 * m, g0 + (2 * m + 1 < n ? 2 * m + 1 : 2 * m));
    transpose8(o, v);
}

AI8 void panel8_fill(const int kind, const uint8_t *w, size_t ws, int nr, int g0, int nb)
{
    int n = nb - g0 < 16 ? nb - g0 : 16;

    for (int r = 0; r < RB; r++) {
        v16s32 o[8];
        v16f a, b, a2;
        if (r >= nr) {
            memset(panel8.wt[r], 0, sizeof panel8.wt[r]);
            memset(panel8.a[r], 0, sizeof panel8.a[r]);
            memset(panel8.b[r], 0, sizeof panel8.b[r]);
            memset(panel8.a2[r], 0, sizeof panel8.a2[r]);
            continue;
        }
        const uint8_t *row = w + (size_t)r * ws;
        panel8_row(kind, row, g0, n, o);
        memcpy(panel8.wt[r], o, sizeof o);
        group_scales(kind, row, g0, n, &a, &b, &a2);
        memcpy(panel8.a[r], &a, sizeof a);
        memcpy(panel8.b[r], &b, sizeof b);
        memcpy(panel8.a2[r], &a2, sizeof a2);
    }
}

/* out of line where the instructions are real, as tile() */
#if (defined(__AVX512VNNI__) && defined(__AVX512F__)) || defined(__AVXVNNI__)
#define TILE8_ATTR TILE_ATTR
#else
#define TILE8_ATTR AI8
#endif

/* 4 panel rows from r0 x MT tokens over steps [k0, k0 + nk): the block sums, unoffset by the
 * activation sums xs (xs, xs_lo or xs_hi by offsetof), folded into facc with scales sa. */
TILE8_ATTR void tile8(const int MT, const int kind, int r0, const vnni8_group *const *xg, int t0, int k0, int nk,
                      const float (*sa)[16], size_t xs_at, int offset)
{
    v16s32 c[4][4] = {{{0}}};

    /* the weights' offset comes off by starting each sum at -(xs << sh): the same integer
     * modulo 2^32 as unoffset(), one subtraction fewer per (row, token) */
#pragma GCC unroll 4
    for (int t = 0; t < MT; t++) {
        v16s32 init = unoffset(kind, (v16s32){0}, (const int32_t *)(const void *)((const uint8_t *)xg[t] + xs_at));
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++)
            c[r][t] = init;
    }
    for (int k = k0; k < k0 + nk; k++) {
        v64s8 xv[4] = {{0}}; /* as in tile() */
#pragma GCC unroll 4
        for (int t = 0; t < MT; t++) {
            memcpy(&xv[t], xg[t]->xt[k], sizeof xv[t]);
#if defined(__AVX512VNNI__) && defined(__AVX512F__)
            /* in a register: folded into each vpdpbusd it was loaded 4 times, 20 loads per 16
             * (Q6_K's two half-length passes ran slower so) */
            if (kind != V_Q6_K)
                __asm__("" : "+v"(xv[t]));
#endif
        }
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++) {
            v64u8 wv;
            memcpy(&wv, panel8.wt[r0 + r][k], sizeof wv);
#pragma GCC unroll 4
            for (int t = 0; t < MT; t++)
                c[r][t] = dpbusd(c[r][t], wv, xv[t]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++) {
        v16f a = ld_f(sa[r0 + r]), b = ld_f(panel8.b[r0 + r]);
#pragma GCC unroll 4
        for (int t = 0; t < MT; t++) {
            float *f = facc[r0 + r][t0 + t];
            v16f acc = fmav(__builtin_convertvector(c[r][t], v16f), a * ld_f(xg[t]->dx), ld_f(f));
            if (has_offset(kind) && offset)
                acc = fmav(b, ld_f(xg[t]->s), acc);
            memcpy(f, &acc, sizeof acc);
        }
    }
}

AI8 void tiles8(const int kind, int r0, const vnni8_group *const *xg, int t0, int mt)
{
#define TILES8(MT)                                                                     \
    if (kind == V_Q6_K) {                                                              \
        tile8(MT, kind, r0, xg, t0, 0, 4, panel8.a, offsetof(vnni8_group, xs_lo), 0);  \
        tile8(MT, kind, r0, xg, t0, 4, 4, panel8.a2, offsetof(vnni8_group, xs_hi), 0); \
    } else {                                                                           \
        tile8(MT, kind, r0, xg, t0, 0, 8, panel8.a, offsetof(vnni8_group, xs), 1);     \
    }
    switch (mt) {
    case 4:
        TILES8(4);
        break;
    case 3:
        TILES8(3);
        break;
    case 2:
        TILES8(2);
        break;
    default:
        TILES8(1);
        break;
    }
#undef TILES8
}

AI8 void gemm8_kind(const int kind, float *y, size_t ldy, const cpu_act *act, int n_tok, const uint8_t *w, size_t ws,
                    int n_rows, int cols)
{
    int nb = cols / QK, ng = (nb + 15) / 16;

    if (n_tok == 1) {
        for (int r = 0; r < n_rows; r++)
            y[r] = row_dot8(kind, (const vnni8_group *)(const void *)act->x, w + (size_t)r * ws, nb);
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
                panel8_fill(kind, wb, ws, nr, 16 * g, nb);
                for (int t = 0; t < nt; t += 4) {
                    const vnni8_group *xg[4];
                    int mt = nt - t < 4 ? nt - t : 4;
                    prefetch_panel(kind, w, ws, rb, RB, n_rows, g, t0 + TB < n_tok, t / 4, (nt + 3) / 4);
                    for (int i = 0; i < mt; i++)
                        xg[i] = (const vnni8_group *)(const void *)(act->x + (size_t)(t0 + t + i) * act->stride) + g;
                    tiles8(kind, 0, xg, t, mt);
                    if (nr > 4)
                        tiles8(kind, 4, xg, t, mt);
                }
            }
            for (int t = 0; t < nt; t++)
                for (int r = 0; r < nr; r++)
                    y[(size_t)(t0 + t) * ldy + rb + r] = hsum(ld_f(facc[r][t]));
        }
    }
}

#define VNNI8_TYPE(name, kind)                                                                              \
    static void gemm8_##name(float *y, size_t ldy, const cpu_act *a, int n_tok, const uint8_t *w, size_t ws, \
                             int n_rows, int cols)                                                          \
    {                                                                                                       \
        gemm8_kind(kind, y, ldy, a, n_tok, w, ws, n_rows, cols);                                            \
    }                                                                                                       \
    static float dot8_##name(const void *x, const void *w, int n)                                           \
    {                                                                                                       \
        return row_dot8(kind, x, w, n / QK);                                                                \
    }
VNNI8_TYPE(q8_0, V_Q8_0)
VNNI8_TYPE(q4_0, V_Q4_0)
VNNI8_TYPE(q4_1, V_Q4_1)
VNNI8_TYPE(q5_0, V_Q5_0)
VNNI8_TYPE(q5_1, V_Q5_1)
VNNI8_TYPE(q4_k, V_Q4_K)
VNNI8_TYPE(q6_k, V_Q6_K)
#undef VNNI8_TYPE

/* Over VNNI_BASE_PATH, as the 16-bit VNNI path, with 8-bit activations. */
const cpu_path VNNI8_PATH = {
    .name = VNNI8_NAME,
    .base = &VNNI_BASE_PATH,
    .built = 1,
    .type = {
        [GGML_TYPE_Q8_0] = CPU_OWN(dot8_q8_0, gemm8_q8_0), [GGML_TYPE_Q4_0] = CPU_OWN(dot8_q4_0, gemm8_q4_0),
        [GGML_TYPE_Q4_1] = CPU_OWN(dot8_q4_1, gemm8_q4_1), [GGML_TYPE_Q5_0] = CPU_OWN(dot8_q5_0, gemm8_q5_0),
        [GGML_TYPE_Q5_1] = CPU_OWN(dot8_q5_1, gemm8_q5_1), [GGML_TYPE_Q4_K] = CPU_OWN(dot8_q4_k, gemm8_q4_k),
        [GGML_TYPE_Q6_K] = CPU_OWN(dot8_q6_k, gemm8_q6_k), [GGML_TYPE_MXFP4] = VNNI_MXFP4,
    },
    .act_bytes = act8_bytes,
    .act_quantize = act8_quantize,
};

#if defined(AMX8_NAME)
#include "cpu/kernels_amx.h"
#endif
