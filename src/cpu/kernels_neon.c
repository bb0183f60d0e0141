/* kernels_neon.c: the AArch64 paths: plain NEON (Advanced SIMD, every AArch64 CPU has it),
 * neon-dotprod (SDOT, FEAT_DotProd) and neon-i8mm (USDOT and, for prefill tiles, SMMLA and
 * USMMLA, FEAT_I8MM). cpu.c offers the last two only when getauxval(AT_HWCAP / AT_HWCAP2) says
 * the CPU has them; the instructions are enabled per function (target attributes), so nothing
 * else in this file or the library can use them.
 *
 * Float weights (F32, F16, BF16): four 4-lane FMA accumulators, summed in a fixed order; only
 * the float additions differ from kernels_scalar.c. Block weights (Q8_0, Q4_0, and Q4_K, Q6_K,
 * MXFP4 as entries of the same tables): the integer block sums are exact on every variant and the
 * float steps are the scalar ones, so these dot products equal the scalar path's bit for bit.
 *
 * SDOT and USDOT multiply 8-bit numbers; the activations are 16-bit (cpu_int.h says why 8 bits
 * were refused). They are split exactly: q = 256 * h + l with h = q >> 8 in [-128, 127] and
 * l = q & 255 in [0, 255]. USDOT takes l unsigned as it is; SDOT takes l - 128 (signed) and the
 * 128 * sum(w) it leaves out is added back through a third SDOT against ones. The sum of the
 * three is the integer the scalar loop computes, to the last bit. */
#include "cpu/kernels.h"
#include "cpu/kquant_int.h"

#if defined(__aarch64__) && defined(__ARM_NEON)
#include <arm_neon.h>

/* arm_neon.h declares SDOT and USDOT under arch=armv8.2-a (+dotprod, +i8mm); a function calling
 * them must enable at least as much. Every CPU with SDOT implements ARMv8.2-A. */
#define DOTPROD __attribute__((target("arch=armv8.2-a+dotprod")))
#define I8MM    __attribute__((target("arch=armv8.2-a+dotprod+i8mm")))

/* The four accumulators in a fixed order, then the lanes in a fixed order. */
static inline float hsum4(float32x4_t s0, float32x4_t s1, float32x4_t s2, float32x4_t s3)
{
    float32x4_t s = vaddq_f32(vaddq_f32(s0, s1), vaddq_f32(s2, s3));

    return (vgetq_lane_f32(s, 0) + vgetq_lane_f32(s, 1)) + (vgetq_lane_f32(s, 2) + vgetq_lane_f32(s, 3));
}

static float dot_f32(const float *a, const float *b, int n)
{
    float32x4_t s0 = vdupq_n_f32(0), s1 = s0, s2 = s0, s3 = s0;
    int i = 0;
    float s;

    for (; i + 16 <= n; i += 16) {
        s0 = vfmaq_f32(s0, vld1q_f32(a + i), vld1q_f32(b + i));
        s1 = vfmaq_f32(s1, vld1q_f32(a + i + 4), vld1q_f32(b + i + 4));
        s2 = vfmaq_f32(s2, vld1q_f32(a + i + 8), vld1q_f32(b + i + 8));
        s3 = vfmaq_f32(s3, vld1q_f32(a + i + 12), vld1q_f32(b + i + 12));
    }
    for (; i + 4 <= n; i += 4)
        s0 = vfmaq_f32(s0, vld1q_f32(a + i), vld1q_f32(b + i));
    s = hsum4(s0, s1, s2, s3);
    for (; i < n; i++)
        s += a[i] * b[i];
    return s;
}

/* f16 -> f32 widening is exact (FCVTL), so it equals cpu_f16 on every input. */
static float dot_f32_f16(const float *a, const uint16_t *b, int n)
{
    float32x4_t s0 = vdupq_n_f32(0), s1 = s0, s2 = s0, s3 = s0;
    int i = 0;
    float s;

    for (; i + 16 <= n; i += 16) {
        float16x8_t h0 = vreinterpretq_f16_u16(vld1q_u16(b + i)), h1 = vreinterpretq_f16_u16(vld1q_u16(b + i + 8));
        s0 = vfmaq_f32(s0, vld1q_f32(a + i), vcvt_f32_f16(vget_low_f16(h0)));
        s1 = vfmaq_f32(s1, vld1q_f32(a + i + 4), vcvt_high_f32_f16(h0));
        s2 = vfmaq_f32(s2, vld1q_f32(a + i + 8), vcvt_f32_f16(vget_low_f16(h1)));
        s3 = vfmaq_f32(s3, vld1q_f32(a + i + 12), vcvt_high_f32_f16(h1));
    }
    for (; i + 4 <= n; i += 4)
        s0 = vfmaq_f32(s0, vld1q_f32(a + i), vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(b + i))));
    s = hsum4(s0, s1, s2, s3);
    for (; i < n; i++)
        s += a[i] * cpu_f16(b[i]);
    return s;
}

static float dot_f32_bf16(const float *a, const uint16_t *b, int n)
{
    float32x4_t s0 = vdupq_n_f32(0), s1 = s0, s2 = s0, s3 = s0;
    int i = 0;
    float s;

    for (; i + 16 <= n; i += 16) {
        uint16x8_t h0 = vld1q_u16(b + i), h1 = vld1q_u16(b + i + 8);
        s0 = vfmaq_f32(s0, vld1q_f32(a + i), vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h0), 16)));
        s1 = vfmaq_f32(s1, vld1q_f32(a + i + 4), vreinterpretq_f32_u32(vshll_high_n_u16(h0, 16)));
        s2 = vfmaq_f32(s2, vld1q_f32(a + i + 8), vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h1), 16)));
        s3 = vfmaq_f32(s3, vld1q_f32(a + i + 12), vreinterpretq_f32_u32(vshll_high_n_u16(h1, 16)));
    }
    for (; i + 4 <= n; i += 4)
        s0 = vfmaq_f32(s0, vld1q_f32(a + i), vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(b + i), 16)));
    s = hsum4(s0, s1, s2, s3);
    for (; i < n; i++)
        s += a[i] * cpu_bf16(b[i]);
    return s;
}

/* Rows of F16 / BF16 weights are 2-byte aligned in a GGUF (offsets are multiples of 32), so the
 * uint16_t loads are fine; F32 rows likewise. */
static float w_f32(const void *x, const void *w, int n)
{
    return dot_f32(x, w, n);
}
static float w_f16(const void *x, const void *w, int n)
{
    return dot_f32_f16(x, w, n);
}
static float w_bf16(const void *x, const void *w, int n)
{
    return dot_f32_bf16(x, w, n);
}

/* y += a * x as a multiply then an add (the scalar path's arithmetic: no fused rounding). */
static void axpy_f32(float *y, float a, const float *x, int n)
{
    int i = 0;

    for (; i + 4 <= n; i += 4)
        vst1q_f32(y + i, vaddq_f32(vld1q_f32(y + i), vmulq_n_f32(vld1q_f32(x + i), a)));
    for (; i < n; i++)
        y[i] += a * x[i];
}

static void axpy_f16(float *y, float a, const uint16_t *x, int n)
{
    int i = 0;

    for (; i + 4 <= n; i += 4) {
        float32x4_t xf = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(x + i)));
        vst1q_f32(y + i, vaddq_f32(vld1q_f32(y + i), vmulq_n_f32(xf, a)));
    }
    for (; i < n; i++)
        y[i] += a * cpu_f16(x[i]);
}

/* The scalar conversion: its NaN and overflow results are the documented ones. */
static void f32_to_f16(uint16_t *y, const float *x, int n)
{
    for (int i = 0; i < n; i++)
        y[i] = cpu_f32_to_f16(x[i]);
}

/* ---------------------------------------------------------------- block weights */

/* Q4_0's 16 bytes as 32 signed codes, q - 8: low nibbles (elements 0..15), high (16..31). */
static inline void q4_0_codes(int8x16_t *lo, int8x16_t *hi, const uint8_t *qs)
{
    uint8x16_t b = vld1q_u8(qs);
    int8x16_t eight = vdupq_n_s8(8);

    *lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(b, vdupq_n_u8(15))), eight);
    *hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(b, 4)), eight);
}

/* sum w[j] * x[j] over 16 elements, w 8-bit, x 16-bit: widening multiply-accumulate. */
static inline int32x4_t mla16(int32x4_t acc, int8x16_t w, const int16_t *x)
{
    int16x8_t w0 = vmovl_s8(vget_low_s8(w)), w1 = vmovl_high_s8(w);
    int16x8_t x0 = vld1q_s16(x), x1 = vld1q_s16(x + 8);

    acc = vmlal_s16(acc, vget_low_s16(w0), vget_low_s16(x0));
    acc = vmlal_high_s16(acc, w0, x0);
    acc = vmlal_s16(acc, vget_low_s16(w1), vget_low_s16(x1));
    return vmlal_high_s16(acc, w1, x1);
}

/* The scalar float step of every block type here: s += sumi * (d * dx). */
static inline float block_acc(float s, int32_t sumi, const uint8_t *p, const cpu_q16 *xb)
{
    return s + (float)sumi * (cpu_f16(cpu_rd16(p)) * xb->d);
}

static float w_q8_0(const void *x, const void *w, int n)
{
    const cpu_q16 *xq = x;
    const uint8_t *p = w;
    float s = 0.0f;

    for (int b = 0; b < n / QK; b++, p += CPU_Q8_0_BYTES) {
        int32x4_t acc = vdupq_n_s32(0);
        acc = mla16(acc, vld1q_s8((const int8_t *)p + 2), xq[b].q);
        acc = mla16(acc, vld1q_s8((const int8_t *)p + 18), xq[b].q + 16);
        s = block_acc(s, vaddvq_s32(acc), p, &xq[b]);
    }
    return s;
}

static float w_q4_0(const void *x, const void *w, int n)
{
    const cpu_q16 *xq = x;
    const uint8_t *p = w;
    float s = 0.0f;

    for (int b = 0; b < n / QK; b++, p += CPU_Q4_0_BYTES) {
        int32x4_t acc = vdupq_n_s32(0);
        int8x16_t lo, hi;
        q4_0_codes(&lo, &hi, p + 2);
        acc = mla16(acc, lo, xq[b].q);
        acc = mla16(acc, hi, xq[b].q + 16);
        s = block_acc(s, vaddvq_s32(acc), p, &xq[b]);
    }
    return s;
}

/* 16 activations split into their high bytes (q >> 8, signed) and low bytes (q & 255). */
static inline void split16(int8x16_t *h, uint8x16_t *l, const int16_t *x)
{
    int16x8_t x0 = vld1q_s16(x), x1 = vld1q_s16(x + 8);

    *h = vcombine_s8(vshrn_n_s16(x0, 8), vshrn_n_s16(x1, 8));
    *l = vreinterpretq_u8_s8(vcombine_s8(vmovn_s16(x0), vmovn_s16(x1)));
}

/* SDOT: sum w * q = 256 * (h . w) + ((l - 128) . w) + 128 * (1 . w), each term exact in int32
 * (|sum| <= 32 * 127 * 32768). */
DOTPROD static inline int32x4_t sdot16(int32x4_t acc, int8x16_t w, const int16_t *x)
{
    int8x16_t h;
    uint8x16_t l;
    int32x4_t z = vdupq_n_s32(0), th, tl, tw;

    split16(&h, &l, x);
    th = vdotq_s32(z, h, w);
    tl = vdotq_s32(z, vreinterpretq_s8_u8(veorq_u8(l, vdupq_n_u8(0x80))), w);
    tw = vdotq_s32(z, vdupq_n_s8(1), w);
    return vaddq_s32(acc, vaddq_s32(vaddq_s32(vshlq_n_s32(th, 8), tl), vshlq_n_s32(tw, 7)));
}

DOTPROD static float w_q8_0_dot(const void *x, const void *w, int n)
{
    const cpu_q16 *xq = x;
    const uint8_t *p = w;
    float s = 0.0f;

    for (int b = 0; b < n / QK; b++, p += CPU_Q8_0_BYTES) {
        int32x4_t acc = vdupq_n_s32(0);
        acc = sdot16(acc, vld1q_s8((const int8_t *)p + 2), xq[b].q);
        acc = sdot16(acc, vld1q_s8((const int8_t *)p + 18), xq[b].q + 16);
        s = block_acc(s, vaddvq_s32(acc), p, &xq[b]);
    }
    return s;
}

DOTPROD static float w_q4_0_dot(const void *x, const void *w, int n)
{
    const cpu_q16 *xq = x;
    const uint8_t *p = w;
    float s = 0.0f;

    for (int b = 0; b < n / QK; b++, p += CPU_Q4_0_BYTES) {
        int32x4_t acc = vdupq_n_s32(0);
        int8x16_t lo, hi;
        q4_0_codes(&lo, &hi, p + 2);
        acc = sdot16(acc, lo, xq[b].q);
        acc = sdot16(acc, hi, xq[b].q + 16);
        s = block_acc(s, vaddvq_s32(acc), p, &xq[b]);
    }
    return s;
}

/* USDOT (FEAT_I8MM): the low bytes go in unsigned, so sum w * q = 256 * (h . w) + (l . w). */
I8MM static inline int32x4_t usdot16(int32x4_t acc, int8x16_t w, const int16_t *x)
{
    int8x16_t h;
    uint8x16_t l;
    int32x4_t z = vdupq_n_s32(0);

    split16(&h, &l, x);
    return vaddq_s32(acc, vaddq_s32(vshlq_n_s32(vdotq_s32(z, h, w), 8), vusdotq_s32(z, l, w)));
}

I8MM static float w_q8_0_i8mm(const void *x, const void *w, int n)
{
    const cpu_q16 *xq = x;
    const uint8_t *p = w;
    float s = 0.0f;

    for (int b = 0; b < n / QK; b++, p += CPU_Q8_0_BYTES) {
        int32x4_t acc = vdupq_n_s32(0);
        acc = usdot16(acc, vld1q_s8((const int8_t *)p + 2), xq[b].q);
        acc = usdot16(acc, vld1q_s8((const int8_t *)p + 18), xq[b].q + 16);
        s = block_acc(s, vaddvq_s32(acc), p, &xq[b]);
    }
    return s;
}

I8MM static float w_q4_0_i8mm(const void *x, const void *w, int n)
{
    const cpu_q16 *xq = x;
    const uint8_t *p = w;
    float s = 0.0f;

    for (int b = 0; b < n / QK; b++, p += CPU_Q4_0_BYTES) {
        int32x4_t acc = vdupq_n_s32(0);
        int8x16_t lo, hi;
        q4_0_codes(&lo, &hi, p + 2);
        acc = usdot16(acc, lo, xq[b].q);
        acc = usdot16(acc, hi, xq[b].q + 16);
        s = block_acc(s, vaddvq_s32(acc), p, &xq[b]);
    }
    return s;
}

/* ---------------------------------------------------------------- i8mm gemm (SMMLA) */

/* SMMLA multiplies a 2x8 matrix of signed bytes by an 8x2 one into a 2x2 matrix of int32 sums:
 * with two tokens' activation bytes as the rows of the first and two weight rows' codes as the
 * columns of the second, one instruction does the 32 multiply-adds that take SDOT or USDOT two.
 * The 16-bit activations are split as for USDOT, the high bytes through SMMLA and the low ones,
 * unsigned, through USMMLA. Each (token, row) gets the integer its row dot (usdot16) computes,
 * then the same float steps in the same order, so the same bits. Prefill only: in decode there is
 * one token, and half of each SMMLA would be wasted, so a lone token (or row) takes the row dot. */

/* Pairs of weight rows unpacked at a time. Each pair of tokens is split into SMMLA's rows once
 * per MM_PAIRS pairs: 8 pairs (10 KB of unpacked weights, well inside any ARM64 L1) split them
 * half as often as 4 did. Not measured: no ARM64 machine yet (BENCHMARKS.md). */
#define MM_PAIRS  8
#define MM_BLOCKS (CPU_GEMM_KC / QK)    /* blocks per column chunk */

/* One block of two weight rows: v[k] holds both rows' elements 8k .. 8k + 7, SMMLA's columns. */
typedef struct mm_wpair {
    int8x16_t v[4];
    float32x4_t d;                     /* the rows' scales, as the output lanes take them */
} mm_wpair;

/* One block of two tokens' activations, split: high bytes h, low bytes l, as SMMLA's rows. */
typedef struct mm_xpair {
    int8x16_t h[4];
    uint8x16_t l[4];
    float32x4_t d;
} mm_xpair;

/* A block's 32 codes as signed bytes: elements 0 .. 15 in c[0], 16 .. 31 in c[1]. */
static inline void block_codes(int8x16_t c[2], const uint8_t *p, int type)
{
    if (type == GGML_TYPE_Q8_0) {
        c[0] = vld1q_s8((const int8_t *)p + 2);
        c[1] = vld1q_s8((const int8_t *)p + 18);
    } else {
        q4_0_codes(&c[0], &c[1], p + 2);
    }
}

static inline int8x16_t zip64(int8x16_t a, int8x16_t b, int hi)
{
    int64x2_t a64 = vreinterpretq_s64_s8(a), b64 = vreinterpretq_s64_s8(b);

    return vreinterpretq_s8_s64(hi ? vzip2q_s64(a64, b64) : vzip1q_s64(a64, b64));
}

/* Rows p0 and p1's block; lanes of d: (t0, r0), (t0, r1), (t1, r0), (t1, r1). */
static void mm_wpair_pack(mm_wpair *o, const uint8_t *p0, const uint8_t *p1, int type)
{
    int8x16_t c0[2], c1[2];
    float d0 = cpu_f16(cpu_rd16(p0)), d1 = cpu_f16(cpu_rd16(p1));

    block_codes(c0, p0, type);
    block_codes(c1, p1, type);
    for (int k = 0; k < 4; k++)
        o->v[k] = zip64(c0[k / 2], c1[k / 2], k % 2);
    o->d = (float32x4_t){ d0, d1, d0, d1 };
}

static void mm_xpair_pack(mm_xpair *o, const cpu_q16 *x0, const cpu_q16 *x1)
{
    for (int half = 0; half < 2; half++) {
        int8x16_t h0, h1;
        uint8x16_t l0, l1;
        split16(&h0, &l0, x0->q + 16 * half);
        split16(&h1, &l1, x1->q + 16 * half);
        o->h[2 * half] = zip64(h0, h1, 0);
        o->h[2 * half + 1] = zip64(h0, h1, 1);
        o->l[2 * half] = vreinterpretq_u8_s8(zip64(vreinterpretq_s8_u8(l0), vreinterpretq_s8_u8(l1), 0));
        o->l[2 * half + 1] = vreinterpretq_u8_s8(zip64(vreinterpretq_s8_u8(l0), vreinterpretq_s8_u8(l1), 1));
    }
    o->d = (float32x4_t){ x0->d, x0->d, x1->d, x1->d };
}

/* s += sumi * (d_w * d_x) for the four (token, row) pairs: block_acc's steps, lane by lane. */
I8MM static inline float32x4_t mm_block(float32x4_t s, const mm_xpair *x, const mm_wpair *w)
{
    int32x4_t h = vdupq_n_s32(0), l = h;

    for (int k = 0; k < 4; k++) {
        h = vmmlaq_s32(h, x->h[k], w->v[k]);
        l = vusmmlaq_s32(l, x->l[k], w->v[k]);
    }
    return vaddq_f32(s, vmulq_f32(vcvtq_f32_s32(vaddq_s32(vshlq_n_s32(h, 8), l)), vmulq_f32(w->d, x->d)));
}

I8MM static void gemm_i8mm(float *y, size_t ldy, const cpu_act *a, int n_tok, const uint8_t *w, size_t w_stride,
                           int n_rows, int cols, int type)
{
    const int nb = cols / QK, bb = type == GGML_TYPE_Q8_0 ? CPU_Q8_0_BYTES : CPU_Q4_0_BYTES;
    const int even_rows = n_rows & ~1, even_tok = n_tok & ~1;
    cpu_dot_fn dot = type == GGML_TYPE_Q8_0 ? w_q8_0_i8mm : w_q4_0_i8mm;
    mm_wpair wp[MM_PAIRS][MM_BLOCKS];
    mm_xpair xp[MM_BLOCKS];

    for (int r0 = 0; r0 < even_rows; r0 += 2 * MM_PAIRS) {
        int np = (even_rows - r0) / 2 < MM_PAIRS ? (even_rows - r0) / 2 : MM_PAIRS;
        for (int b0 = 0; b0 < nb; b0 += MM_BLOCKS) {
            int kb = nb - b0 < MM_BLOCKS ? nb - b0 : MM_BLOCKS;
            for (int i = 0; i < np; i++) {
                const uint8_t *p0 = w + (size_t)(r0 + 2 * i) * w_stride + (size_t)b0 * bb;
                for (int b = 0; b < kb; b++)
                    mm_wpair_pack(&wp[i][b], p0 + (size_t)b * bb, p0 + w_stride + (size_t)b * bb, type);
            }
            for (int t = 0; t < even_tok; t += 2) {
                const cpu_q16 *x0 = (const cpu_q16 *)(const void *)(a->x + (size_t)t * a->stride) + b0;
                const cpu_q16 *x1 = (const cpu_q16 *)(const void *)(a->x + (size_t)(t + 1) * a->stride) + b0;
                for (int b = 0; b < kb; b++)
                    mm_xpair_pack(&xp[b], x0 + b, x1 + b);
                for (int i = 0; i < np; i++) {
                    /* the running sums cross the chunks in y, as floats: the row dot's order */
                    float *y0 = y + (size_t)t * ldy + r0 + 2 * i, *y1 = y0 + ldy;
                    float32x4_t s = b0 ? (float32x4_t){ y0[0], y0[1], y1[0], y1[1] } : vdupq_n_f32(0);
                    for (int b = 0; b < kb; b++)
                        s = mm_block(s, &xp[b], &wp[i][b]);
                    y0[0] = vgetq_lane_f32(s, 0);
                    y0[1] = vgetq_lane_f32(s, 1);
                    y1[0] = vgetq_lane_f32(s, 2);
                    y1[1] = vgetq_lane_f32(s, 3);
                }
            }
        }
    }
    for (int t = 0; t < n_tok; t++) {
        const uint8_t *x = a->x + (size_t)t * a->stride;
        for (int r = t < even_tok ? even_rows : 0; r < n_rows; r++)
            y[(size_t)t * ldy + r] = dot(x, w + (size_t)r * w_stride, cols);
    }
}

static void gemm_q8_0_i8mm(float *y, size_t ldy, const cpu_act *a, int n_tok, const uint8_t *w, size_t w_stride,
                           int n_rows, int cols)
{
    gemm_i8mm(y, ldy, a, n_tok, w, w_stride, n_rows, cols, GGML_TYPE_Q8_0);
}

static void gemm_q4_0_i8mm(float *y, size_t ldy, const cpu_act *a, int n_tok, const uint8_t *w, size_t w_stride,
                           int n_rows, int cols)
{
    gemm_i8mm(y, ldy, a, n_tok, w, w_stride, n_rows, cols, GGML_TYPE_Q4_0);
}

/* ---------------------------------------------------------------- K-quants (kquant_int.h) */

/* Q4_K and Q6_K as kquant_scalar.c computes them, with the integer sums taken 16 lanes at a time:
 * the same integers and the same float expressions, so the same bits. Written once, for the
 * three ways of summing 16 codes against 16-bit activations (MLA: mla16, sdot16, usdot16); Q4_K's
 * codes (0 .. 15) and Q6_K's (-32 .. 31) are valid signed bytes for SDOT and USDOT. */
#define W_Q4_K(NAME, ATTR, MLA)                                                                   \
    ATTR static float NAME(const void *vx, const void *vw, int n)                                 \
    {                                                                                             \
        const cpu_q16 *x = vx;                                                                     \
        const uint8_t *p = vw;                                                                    \
        float s = 0.0f;                                                                           \
                                                                                                  \
        for (int b = 0; b < n / QK_K; b++, p += CPU_Q4_K_BYTES) {                                  \
            const uint8_t *qs = p + 16;                                                           \
            float d = cpu_f16(cpu_rd16(p)), dmin = cpu_f16(cpu_rd16(p + 2));                          \
            for (int j = 0; j < 4; j++) {                                                         \
                uint8x16_t b0 = vld1q_u8(qs + 32 * j), b1 = vld1q_u8(qs + 32 * j + 16);           \
                for (int k = 0; k < 2; k++) {                                                     \
                    const cpu_q16 *xb = &x[b * 8 + 2 * j + k];                                     \
                    int32x4_t acc = vdupq_n_s32(0);                                               \
                    int sc, m, sumi;                                                              \
                    uint8x16_t c0 = k ? vshrq_n_u8(b0, 4) : vandq_u8(b0, vdupq_n_u8(15));         \
                    uint8x16_t c1 = k ? vshrq_n_u8(b1, 4) : vandq_u8(b1, vdupq_n_u8(15));         \
                    cpu_scale_min_k4(2 * j + k, p + 4, &sc, &m);                                   \
                    acc = MLA(acc, vreinterpretq_s8_u8(c0), xb->q);                               \
                    acc = MLA(acc, vreinterpretq_s8_u8(c1), xb->q + 16);                          \
                    sumi = vaddvq_s32(acc);                                                       \
                    s += d * (float)sc * xb->d * (float)sumi - dmin * (float)m * xb->s;           \
                }                                                                                 \
            }                                                                                     \
        }                                                                                         \
        return s;                                                                                 \
    }

#define W_Q6_K(NAME, ATTR, MLA)                                                                            \
    ATTR static float NAME(const void *vx, const void *vw, int n)                                          \
    {                                                                                                      \
        const cpu_q16 *x = vx;                                                                              \
        const uint8_t *p = vw;                                                                             \
        float s = 0.0f;                                                                                    \
                                                                                                           \
        for (int b = 0; b < n / QK_K; b++, p += CPU_Q6_K_BYTES) {                                           \
            const uint8_t *ql = p, *qh = p + 128;                                                          \
            const int8_t *sc = (const int8_t *)(p + 192);                                                  \
            float d = cpu_f16(cpu_rd16(p + 208));                                                            \
            for (int h = 0; h < 2; h++)                                                                    \
                for (int j = 0; j < 4; j++) {                                                              \
                    const cpu_q16 *xb = &x[b * 8 + 4 * h + j];                                              \
                    int i = 8 * h + 2 * j, s0, s1;                                                         \
                    int8x16_t q[2];                                                                        \
                    for (int half = 0; half < 2; half++) {                                                 \
                        uint8x16_t lo = vld1q_u8(ql + 64 * h + 32 * (j % 2) + 16 * half);                  \
                        uint8x16_t hi = vld1q_u8(qh + 32 * h + 16 * half);                                 \
                        lo = j < 2 ? vandq_u8(lo, vdupq_n_u8(15)) : vshrq_n_u8(lo, 4);                     \
                        hi = vshlq_n_u8(vandq_u8(vshlq_u8(hi, vdupq_n_s8((int8_t)(-2 * j))), vdupq_n_u8(3)), \
                                        4);                                                                \
                        q[half] = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(lo, hi)), vdupq_n_s8(32));         \
                    }                                                                                      \
                    s0 = vaddvq_s32(MLA(vdupq_n_s32(0), q[0], xb->q));                                     \
                    s1 = vaddvq_s32(MLA(vdupq_n_s32(0), q[1], xb->q + 16));                                \
                    s += d * xb->d * (float)(sc[i] * s0 + sc[i + 1] * s1);                                 \
                }                                                                                          \
        }                                                                                                  \
        return s;                                                                                          \
    }

/* MXFP4 (gpt-oss's experts): the code book looked up 16 nibbles at a time by TBL; the codes
 * (-12 .. 12) are valid signed bytes for SDOT and USDOT. kquant_scalar.c's float step, the same
 * integer, so the same bits. */
#define W_MXFP4(NAME, ATTR, MLA)                                                                      \
    ATTR static float NAME(const void *vx, const void *vw, int n)                                     \
    {                                                                                                 \
        const cpu_q16 *x = vx;                                                                         \
        const uint8_t *p = vw;                                                                        \
        int8x16_t table = vld1q_s8(cpu_mxfp4_values);                                                 \
        float s = 0.0f;                                                                               \
                                                                                                      \
        for (int b = 0; b < n / QK; b++, p += CPU_MXFP4_BYTES) {                                       \
            uint8x16_t q = vld1q_u8(p + 1);                                                           \
            int32x4_t acc = vdupq_n_s32(0);                                                           \
            acc = MLA(acc, vqtbl1q_s8(table, vandq_u8(q, vdupq_n_u8(15))), x[b].q);                    \
            acc = MLA(acc, vqtbl1q_s8(table, vshrq_n_u8(q, 4)), x[b].q + 16);                          \
            s += cpu_mxfp4_scale(p[0]) * x[b].d * (float)vaddvq_s32(acc);                              \
        }                                                                                             \
        return s;                                                                                     \
    }

W_Q4_K(w_q4_k, , mla16)
W_Q4_K(w_q4_k_dot, DOTPROD, sdot16)
W_Q4_K(w_q4_k_i8mm, I8MM, usdot16)
W_Q6_K(w_q6_k, , mla16)
W_Q6_K(w_q6_k_dot, DOTPROD, sdot16)
W_Q6_K(w_q6_k_i8mm, I8MM, usdot16)
W_MXFP4(w_mxfp4, , mla16)
W_MXFP4(w_mxfp4_dot, DOTPROD, sdot16)
W_MXFP4(w_mxfp4_i8mm, I8MM, usdot16)
#undef W_Q4_K
#undef W_Q6_K
#undef W_MXFP4

/* ---------------------------------------------------------------- MLX affine int4 / int8 */

/* An int4 block's 16 bytes as its 32 codes in element order (byte l: 2l low, 2l + 1 high). */
static inline void mlx4_codes(uint8x16_t *e0, uint8x16_t *e1, const uint8_t *c)
{
    uint8x16_t v = vld1q_u8(c), lo = vandq_u8(v, vdupq_n_u8(15)), hi = vshrq_n_u8(v, 4);

    *e0 = vzip1q_u8(lo, hi);
    *e1 = vzip2q_u8(lo, hi);
}

/* 16 unsigned codes (<= 255) times 16 activations, widened to 16 bits: exact in int32 (a block's
 * sum is at most 32 * 255 * 32768). */
static inline int32x4_t mla16u(int32x4_t acc, uint8x16_t w, const int16_t *x)
{
    int16x8_t w0 = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(w))), w1 = vreinterpretq_s16_u16(vmovl_high_u8(w));
    int16x8_t x0 = vld1q_s16(x), x1 = vld1q_s16(x + 8);

    acc = vmlal_s16(acc, vget_low_s16(w0), vget_low_s16(x0));
    acc = vmlal_high_s16(acc, w0, x0);
    acc = vmlal_s16(acc, vget_low_s16(w1), vget_low_s16(x1));
    return vmlal_high_s16(acc, w1, x1);
}

static int32_t mlx_block4(const uint8_t *c, const int16_t *x)
{
    uint8x16_t e0, e1;

    mlx4_codes(&e0, &e1, c);
    return vaddvq_s32(mla16u(mla16u(vdupq_n_s32(0), e0, x), e1, x + 16));
}

static int32_t mlx_block8(const uint8_t *c, const int16_t *x)
{
    return vaddvq_s32(mla16u(mla16u(vdupq_n_s32(0), vld1q_u8(c), x), vld1q_u8(c + 16), x + 16));
}

/* int4 codes (0 .. 15) are valid signed bytes: SDOT and USDOT take them as Q4_0's codes. */
DOTPROD static int32_t mlx_block4_dot(const uint8_t *c, const int16_t *x)
{
    uint8x16_t e0, e1;

    mlx4_codes(&e0, &e1, c);
    return vaddvq_s32(sdot16(sdot16(vdupq_n_s32(0), vreinterpretq_s8_u8(e0), x), vreinterpretq_s8_u8(e1), x + 16));
}

I8MM static int32_t mlx_block4_i8mm(const uint8_t *c, const int16_t *x)
{
    uint8x16_t e0, e1;

    mlx4_codes(&e0, &e1, c);
    return vaddvq_s32(usdot16(usdot16(vdupq_n_s32(0), vreinterpretq_s8_u8(e0), x), vreinterpretq_s8_u8(e1), x + 16));
}

/* int8 codes (0 .. 255) are unsigned bytes. With q = 256 * h + l as in split16, sum c * q is
 * 256 * (c . h) + (c . l), and c . l is UDOT's (both unsigned). SDOT takes c . h as
 * (c - 128) . h + 128 * (1 . h); USDOT (i8mm) takes it directly. Every term is exact in int32
 * (|sum| <= 32 * 255 * 32768). */
DOTPROD static int32_t mlx_block8_dot(const uint8_t *c, const int16_t *x)
{
    int32x4_t th = vdupq_n_s32(0), t1 = th;
    uint32x4_t tl = vdupq_n_u32(0);

    for (int half = 0; half < 2; half++) {
        uint8x16_t cv = vld1q_u8(c + 16 * half), l;
        int8x16_t h;
        split16(&h, &l, x + 16 * half);
        th = vdotq_s32(th, vreinterpretq_s8_u8(veorq_u8(cv, vdupq_n_u8(0x80))), h);
        t1 = vdotq_s32(t1, vdupq_n_s8(1), h);
        tl = vdotq_u32(tl, cv, l);
    }
    th = vaddq_s32(th, vshlq_n_s32(t1, 7));
    return vaddvq_s32(vaddq_s32(vshlq_n_s32(th, 8), vreinterpretq_s32_u32(tl)));
}

I8MM static int32_t mlx_block8_i8mm(const uint8_t *c, const int16_t *x)
{
    int32x4_t th = vdupq_n_s32(0);
    uint32x4_t tl = vdupq_n_u32(0);

    for (int half = 0; half < 2; half++) {
        uint8x16_t cv = vld1q_u8(c + 16 * half), l;
        int8x16_t h;
        split16(&h, &l, x + 16 * half);
        th = vusdotq_s32(th, cv, h);
        tl = vdotq_u32(tl, cv, l);
    }
    return vaddvq_s32(vaddq_s32(vshlq_n_s32(th, 8), vreinterpretq_s32_u32(tl)));
}

/* Q4_1, Q5_0, Q5_1, the IQ4 types and the K-quants other than Q4_K and Q6_K stay the scalar path's. */
#define NEON_PATH(var, nm, basep, q8_0, q4_0, gq8_0, gq4_0, q4_k, q6_k, mxfp4, mlx4, mlx8)                   \
    const cpu_path var = {                                                                                    \
        .name = nm,                                                                                           \
        .base = basep,                                                                                        \
        .built = 1,                                                                                           \
        .type = { [GGML_TYPE_F32] = CPU_F32(w_f32, NULL), [GGML_TYPE_F16] = CPU_F32(w_f16, NULL),             \
                  [GGML_TYPE_BF16] = CPU_F32(w_bf16, NULL), [GGML_TYPE_Q8_0] = CPU_Q16(q8_0, gq8_0),         \
                  [GGML_TYPE_Q4_0] = CPU_Q16(q4_0, gq4_0), [GGML_TYPE_Q4_K] = CPU_Q16(q4_k, NULL),           \
                  [GGML_TYPE_Q6_K] = CPU_Q16(q6_k, NULL), [GGML_TYPE_MXFP4] = CPU_Q16(mxfp4, NULL) },        \
        .dot_f32 = dot_f32,                                                                                   \
        .dot_f32_f16 = dot_f32_f16,                                                                           \
        .axpy_f32 = axpy_f32,                                                                                 \
        .axpy_f16 = axpy_f16,                                                                                 \
        .f32_to_f16 = f32_to_f16,                                                                             \
        .mlx_block4 = mlx4,                                                                                   \
        .mlx_block8 = mlx8,                                                                                   \
    }
NEON_PATH(cpu_path_neon, "neon", &cpu_path_scalar, w_q8_0, w_q4_0, NULL, NULL, w_q4_k, w_q6_k, w_mxfp4, mlx_block4,
          mlx_block8);
NEON_PATH(cpu_path_neon_dotprod, "neon-dotprod", &cpu_path_neon, w_q8_0_dot, w_q4_0_dot, NULL, NULL, w_q4_k_dot,
          w_q6_k_dot, w_mxfp4_dot, mlx_block4_dot, mlx_block8_dot);
/* neon-i8mm's prefill: SMMLA tiles for Q8_0 and Q4_0 (its other types: tiles of row dots). The
 * activations stay cpu_q16 blocks. */
NEON_PATH(cpu_path_neon_i8mm, "neon-i8mm", &cpu_path_neon_dotprod, w_q8_0_i8mm, w_q4_0_i8mm, gemm_q8_0_i8mm,
          gemm_q4_0_i8mm, w_q4_k_i8mm, w_q6_k_i8mm, w_mxfp4_i8mm, mlx_block4_i8mm, mlx_block8_i8mm);
#undef NEON_PATH

#else

CPU_PATH_ABSENT(cpu_path_neon, "neon");
CPU_PATH_ABSENT(cpu_path_neon_dotprod, "neon-dotprod");
CPU_PATH_ABSENT(cpu_path_neon_i8mm, "neon-i8mm");

#endif
