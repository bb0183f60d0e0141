/* kernels_neon.c: the AArch64 paths: plain NEON (Advanced SIMD, every AArch64 CPU has it),
 * neon-dotprod (SDOT, FEAT_DotProd) and neon-i8mm (USDOT, FEAT_I8MM). cpu.c offers the last two
 * only when getauxval(AT_HWCAP / AT_HWCAP2) says the CPU has them; the instructions are enabled
 * per function (target attributes), so nothing else in this file or the library can use them.
 *
 * Float weights (F32, F16, BF16): four 4-lane FMA accumulators, summed in a fixed order; only
 * the float additions differ from kernels_scalar.c. Block weights (Q8_0, Q4_0, and Q4_K, Q6_K
 * through kquant_matmul.c's hook): the integer block sums are exact on every variant and the
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

/* f16 -> f32 widening is exact (FCVTL), so it equals rt_f16 on every input. */
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
        s += a[i] * rt_f16(b[i]);
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
        s += a[i] * rt_bf16(b[i]);
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
        y[i] += a * rt_f16(x[i]);
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
static inline float block_acc(float s, int32_t sumi, const uint8_t *p, const rt_q16 *xb)
{
    return s + (float)sumi * (rt_f16(rt_rd16(p)) * xb->d);
}

static float w_q8_0(const void *x, const void *w, int n)
{
    const rt_q16 *xq = x;
    const uint8_t *p = w;
    float s = 0.0f;

    for (int b = 0; b < n / QK; b++, p += RT_Q8_0_BYTES) {
        int32x4_t acc = vdupq_n_s32(0);
        acc = mla16(acc, vld1q_s8((const int8_t *)p + 2), xq[b].q);
        acc = mla16(acc, vld1q_s8((const int8_t *)p + 18), xq[b].q + 16);
        s = block_acc(s, vaddvq_s32(acc), p, &xq[b]);
    }
    return s;
}

static float w_q4_0(const void *x, const void *w, int n)
{
    const rt_q16 *xq = x;
    const uint8_t *p = w;
    float s = 0.0f;

    for (int b = 0; b < n / QK; b++, p += RT_Q4_0_BYTES) {
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
    const rt_q16 *xq = x;
    const uint8_t *p = w;
    float s = 0.0f;

    for (int b = 0; b < n / QK; b++, p += RT_Q8_0_BYTES) {
        int32x4_t acc = vdupq_n_s32(0);
        acc = sdot16(acc, vld1q_s8((const int8_t *)p + 2), xq[b].q);
        acc = sdot16(acc, vld1q_s8((const int8_t *)p + 18), xq[b].q + 16);
        s = block_acc(s, vaddvq_s32(acc), p, &xq[b]);
    }
    return s;
}

DOTPROD static float w_q4_0_dot(const void *x, const void *w, int n)
{
    const rt_q16 *xq = x;
    const uint8_t *p = w;
    float s = 0.0f;

    for (int b = 0; b < n / QK; b++, p += RT_Q4_0_BYTES) {
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
    const rt_q16 *xq = x;
    const uint8_t *p = w;
    float s = 0.0f;

    for (int b = 0; b < n / QK; b++, p += RT_Q8_0_BYTES) {
        int32x4_t acc = vdupq_n_s32(0);
        acc = usdot16(acc, vld1q_s8((const int8_t *)p + 2), xq[b].q);
        acc = usdot16(acc, vld1q_s8((const int8_t *)p + 18), xq[b].q + 16);
        s = block_acc(s, vaddvq_s32(acc), p, &xq[b]);
    }
    return s;
}

I8MM static float w_q4_0_i8mm(const void *x, const void *w, int n)
{
    const rt_q16 *xq = x;
    const uint8_t *p = w;
    float s = 0.0f;

    for (int b = 0; b < n / QK; b++, p += RT_Q4_0_BYTES) {
        int32x4_t acc = vdupq_n_s32(0);
        int8x16_t lo, hi;
        q4_0_codes(&lo, &hi, p + 2);
        acc = usdot16(acc, lo, xq[b].q);
        acc = usdot16(acc, hi, xq[b].q + 16);
        s = block_acc(s, vaddvq_s32(acc), p, &xq[b]);
    }
    return s;
}

/* ---------------------------------------------------------------- K-quants (kquant_int.h) */

/* Q4_K and Q6_K as kquant_scalar.c computes them, with the integer sums taken 16 lanes at a time:
 * the same integers and the same float expressions, so the same bits. */
static float w_q4_k(const void *vx, const void *vw, int n)
{
    const rt_q16 *x = vx;
    const uint8_t *p = vw;
    float s = 0.0f;

    for (int b = 0; b < n / QK_K; b++, p += RT_Q4_K_BYTES) {
        const uint8_t *qs = p + 16;
        float d = rt_f16(rt_rd16(p)), dmin = rt_f16(rt_rd16(p + 2));
        for (int j = 0; j < 4; j++) {
            uint8x16_t b0 = vld1q_u8(qs + 32 * j), b1 = vld1q_u8(qs + 32 * j + 16);
            for (int k = 0; k < 2; k++) {
                const rt_q16 *xb = &x[b * 8 + 2 * j + k];
                int32x4_t acc = vdupq_n_s32(0);
                int sc, m, sumi;
                uint8x16_t c0 = k ? vshrq_n_u8(b0, 4) : vandq_u8(b0, vdupq_n_u8(15));
                uint8x16_t c1 = k ? vshrq_n_u8(b1, 4) : vandq_u8(b1, vdupq_n_u8(15));
                rt_scale_min_k4(2 * j + k, p + 4, &sc, &m);
                acc = mla16(acc, vreinterpretq_s8_u8(c0), xb->q);
                acc = mla16(acc, vreinterpretq_s8_u8(c1), xb->q + 16);
                sumi = vaddvq_s32(acc);
                s += d * (float)sc * xb->d * (float)sumi - dmin * (float)m * xb->s;
            }
        }
    }
    return s;
}

static float w_q6_k(const void *vx, const void *vw, int n)
{
    const rt_q16 *x = vx;
    const uint8_t *p = vw;
    float s = 0.0f;

    for (int b = 0; b < n / QK_K; b++, p += RT_Q6_K_BYTES) {
        const uint8_t *ql = p, *qh = p + 128;
        const int8_t *sc = (const int8_t *)(p + 192);
        float d = rt_f16(rt_rd16(p + 208));
        for (int h = 0; h < 2; h++)
            for (int j = 0; j < 4; j++) {
                const rt_q16 *xb = &x[b * 8 + 4 * h + j];
                int i = 8 * h + 2 * j, s0, s1;
                int8x16_t q[2];
                for (int half = 0; half < 2; half++) {
                    uint8x16_t lo = vld1q_u8(ql + 64 * h + 32 * (j % 2) + 16 * half);
                    uint8x16_t hi = vld1q_u8(qh + 32 * h + 16 * half);
                    lo = j < 2 ? vandq_u8(lo, vdupq_n_u8(15)) : vshrq_n_u8(lo, 4);
                    hi = vshlq_n_u8(vandq_u8(vshlq_u8(hi, vdupq_n_s8((int8_t)(-2 * j))), vdupq_n_u8(3)), 4);
                    q[half] = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(lo, hi)), vdupq_n_s8(32));
                }
                s0 = vaddvq_s32(mla16(vdupq_n_s32(0), q[0], xb->q));
                s1 = vaddvq_s32(mla16(vdupq_n_s32(0), q[1], xb->q + 16));
                s += d * xb->d * (float)(sc[i] * s0 + sc[i + 1] * s1);
            }
    }
    return s;
}

rt_dot_fn rt_kq_dot_neon(int type)
{
    return type == GGML_TYPE_Q4_K ? w_q4_k : type == GGML_TYPE_Q6_K ? w_q6_k : NULL;
}

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

/* int4 codes (0 .. 15) are valid signed bytes: SDOT and USDOT take them as Q4_0's codes. int8
 * codes (0 .. 255) are not, and stay on the widening loop above. */
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

/* Q4_1, Q5_0, Q5_1 stay on the scalar row dots; the tables are filled from the scalar one
 * once, under cpu.c's selection (pthread_once), before any kernel runs. */
static rt_kernels neon, neon_dot, neon_i8mm;

static void fill(rt_kernels *out, const char *name, rt_dot_fn q8_0, rt_dot_fn q4_0,
                 int32_t (*mlx4)(const uint8_t *, const int16_t *))
{
    rt_kernels k = *rt_kernels_scalar();

    k.name = name;
    k.dot[GGML_TYPE_F32] = w_f32;
    k.dot[GGML_TYPE_F16] = w_f16;
    k.dot[GGML_TYPE_BF16] = w_bf16;
    k.dot[GGML_TYPE_Q8_0] = q8_0;
    k.dot[GGML_TYPE_Q4_0] = q4_0;
    k.dot_f32 = dot_f32;
    k.dot_f32_f16 = dot_f32_f16;
    k.axpy_f32 = axpy_f32;
    k.axpy_f16 = axpy_f16;
    k.f32_to_f16 = f32_to_f16;
    k.mlx_block4 = mlx4;
    k.mlx_block8 = mlx_block8;
    *out = k;
}

const rt_kernels *rt_kernels_neon(void)
{
    if (!neon.name)
        fill(&neon, "neon", w_q8_0, w_q4_0, mlx_block4);
    return &neon;
}

const rt_kernels *rt_kernels_neon_dotprod(void)
{
    if (!neon_dot.name)
        fill(&neon_dot, "neon-dotprod", w_q8_0_dot, w_q4_0_dot, mlx_block4_dot);
    return &neon_dot;
}

const rt_kernels *rt_kernels_neon_i8mm(void)
{
    if (!neon_i8mm.name)
        fill(&neon_i8mm, "neon-i8mm", w_q8_0_i8mm, w_q4_0_i8mm, mlx_block4_i8mm);
    return &neon_i8mm;
}

#else

rt_dot_fn rt_kq_dot_neon(int type)
{
    (void)type;
    return NULL;
}

const rt_kernels *rt_kernels_neon(void)
{
    return NULL;
}
const rt_kernels *rt_kernels_neon_dotprod(void)
{
    return NULL;
}
const rt_kernels *rt_kernels_neon_i8mm(void)
{
    return NULL;
}

#endif
