/* kquant_scalar.c: row dot products of ggml's K-quants, IQ4 types and MXFP4, the portable definition
 * that kquant_avx2.c must meet (the same integer sums; only float additions are reordered).
 *
 * Layouts (super-blocks of QK_K = 256 weights unless said; all little endian; f16 scalars):
 *   Q2_K   u8 scales[16] | u8 qs[64] | d | dmin          16 sub-blocks of 16:
 *          w = d * (scales[i] & 15) * q - dmin * (scales[i] >> 4), q 2 bits
 *   Q3_K   u8 hmask[32] | u8 qs[64] | u8 scales[12] | d  16 sub-blocks of 16, 6-bit scales - 32
 *          (cpu_q3k_scales): w = d * s[i] * (q2 - (hmask bit ? 0 : 4))
 *   Q4_K   d | dmin | u8 scales[12] | u8 qs[128]         8 sub-blocks of 32 (cpu_scale_min_k4):
 *          w = d * sc[i] * q - dmin * m[i], q 4 bits
 *   Q5_K   d | dmin | u8 scales[12] | u8 qh[32] | u8 qs[128]   as Q4_K, q = nibble | qh bit << 4
 *   Q6_K   u8 ql[128] | u8 qh[64] | i8 scales[16] | d    16 sub-blocks of 16: w = d * s[i] * (q - 32),
 *          q = 4 bits of ql | 2 bits of qh << 4
 *   IQ4_NL d | u8 qs[16]                                  blocks of 32: w = d * values[nibble]
 *   IQ4_XS d | u16 scales_h | u8 scales_l[4] | u8 qs[128] 8 sub-blocks of 32, 6-bit scales - 32:
 *          w = d * (ls - 32) * values[nibble]
 *   MXFP4  u8 e | u8 qs[16]                               blocks of 32 (gpt-oss's experts): w = 2^(e - 128)
 *          * mxfp4_values[nibble], e E8M0 (255 NaN), the values E2M1 doubled (kquant_int.h)
 * Where the bits sit. Q2_K, Q3_K and Q6_K go in halves of 128 weights; in half h, element
 * 128h + 32j + l (j < 4, l < 32) takes bits 2j..2j+1 of qs[32h + l] (Q2_K, Q3_K, with hmask[l]
 * bit 4h + j for Q3_K), and for Q6_K the low nibble (j < 2) or high nibble (j >= 2) of
 * ql[64h + 32(j % 2) + l] with bits 2j..2j+1 of qh[32h + l]. Its sub-block is 8h + 2j + l / 16.
 * Q4_K, Q5_K go in chunks of 64: element 64j + 32k + l is nibble k of qs[32j + l] (and bit
 * 2j + k of qh[l]), sub-block 2j + k. IQ4 and MXFP4 blocks of 32: element l is the low nibble of
 * qs[l], element 16 + l the high one.
 *
 * Activations come as cpu_q16 blocks of 32 (x = dx * qx, s = dx * sum qx): a 32-weight span
 * (one sub-block, or two of 16) meets exactly one activation block, so each span costs one
 * integer dot product, and the min terms use the activation block sums. */
#include "cpu/kquant_int.h"

const int8_t cpu_iq4_values[16] = { -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113 };
const int8_t cpu_mxfp4_values[16] = { 0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12 };

/* sum over 16 of q[l] * x[l] */
static int sum16(const int8_t *q, const int16_t *x)
{
    int s = 0;

    for (int l = 0; l < 16; l++)
        s += q[l] * x[l];
    return s;
}

static int xsum16(const int16_t *x)
{
    int s = 0;

    for (int l = 0; l < 16; l++)
        s += x[l];
    return s;
}

float cpu_kq_dot_q2_k(const void *vx, const void *vw, int n)
{
    const cpu_q16 *x = vx;
    const uint8_t *p = vw;
    float s = 0.0f;

    for (int b = 0; b < n / QK_K; b++, p += CPU_Q2_K_BYTES) {
        const uint8_t *sc = p, *qs = p + 16;
        float d = cpu_f16(cpu_rd16(p + 80)), dmin = cpu_f16(cpu_rd16(p + 82));
        for (int h = 0; h < 2; h++)
            for (int j = 0; j < 4; j++) {
                const cpu_q16 *xb = &x[b * 8 + 4 * h + j];
                int8_t q[32];
                int i = 8 * h + 2 * j;
                for (int l = 0; l < 32; l++)
                    q[l] = (int8_t)((qs[32 * h + l] >> (2 * j)) & 3);
                s += xb->d * (d * (float)((sc[i] & 15) * sum16(q, xb->q) + (sc[i + 1] & 15) * sum16(q + 16, xb->q + 16)) -
                              dmin * (float)((sc[i] >> 4) * xsum16(xb->q) + (sc[i + 1] >> 4) * xsum16(xb->q + 16)));
            }
    }
    return s;
}

float cpu_kq_dot_q3_k(const void *vx, const void *vw, int n)
{
    const cpu_q16 *x = vx;
    const uint8_t *p = vw;
    float s = 0.0f;

    for (int b = 0; b < n / QK_K; b++, p += CPU_Q3_K_BYTES) {
        const uint8_t *hm = p, *qs = p + 32;
        float d = cpu_f16(cpu_rd16(p + 108));
        int sc[16];
        cpu_q3k_scales(sc, p + 96);
        for (int h = 0; h < 2; h++)
            for (int j = 0; j < 4; j++) {
                const cpu_q16 *xb = &x[b * 8 + 4 * h + j];
                int8_t q[32];
                int i = 8 * h + 2 * j;
                for (int l = 0; l < 32; l++)
                    q[l] = (int8_t)(((qs[32 * h + l] >> (2 * j)) & 3) - ((hm[l] >> (4 * h + j)) & 1 ? 0 : 4));
                s += d * xb->d * (float)(sc[i] * sum16(q, xb->q) + sc[i + 1] * sum16(q + 16, xb->q + 16));
            }
    }
    return s;
}

/* Q4_K and Q5_K (qh NULL for Q4_K). */
static float dot_q45_k(const cpu_q16 *x, const uint8_t *p, int n, int q5)
{
    float s = 0.0f;
    int bytes = q5 ? CPU_Q5_K_BYTES : CPU_Q4_K_BYTES;

    for (int b = 0; b < n / QK_K; b++, p += bytes) {
        const uint8_t *qh = p + 16, *qs = p + (q5 ? 48 : 16);
        float d = cpu_f16(cpu_rd16(p)), dmin = cpu_f16(cpu_rd16(p + 2));
        for (int j = 0; j < 4; j++)
            for (int k = 0; k < 2; k++) {
                const cpu_q16 *xb = &x[b * 8 + 2 * j + k];
                int sc, m, sumi = 0;
                cpu_scale_min_k4(2 * j + k, p + 4, &sc, &m);
                for (int l = 0; l < 32; l++) {
                    int q = (qs[32 * j + l] >> (4 * k)) & 15;
                    if (q5)
                        q |= ((qh[l] >> (2 * j + k)) & 1) << 4;
                    sumi += q * xb->q[l];
                }
                s += d * (float)sc * xb->d * (float)sumi - dmin * (float)m * xb->s;
            }
    }
    return s;
}

float cpu_kq_dot_q4_k(const void *x, const void *w, int n) { return dot_q45_k(x, w, n, 0); }
float cpu_kq_dot_q5_k(const void *x, const void *w, int n) { return dot_q45_k(x, w, n, 1); }

float cpu_kq_dot_q6_k(const void *vx, const void *vw, int n)
{
    const cpu_q16 *x = vx;
    const uint8_t *p = vw;
    float s = 0.0f;

    for (int b = 0; b < n / QK_K; b++, p += CPU_Q6_K_BYTES) {
        const uint8_t *ql = p, *qh = p + 128;
        const int8_t *sc = (const int8_t *)(p + 192);
        float d = cpu_f16(cpu_rd16(p + 208));
        for (int h = 0; h < 2; h++)
            for (int j = 0; j < 4; j++) {
                const cpu_q16 *xb = &x[b * 8 + 4 * h + j];
                int8_t q[32];
                int i = 8 * h + 2 * j;
                for (int l = 0; l < 32; l++) {
                    int lo = ql[64 * h + 32 * (j % 2) + l];
                    lo = j < 2 ? lo & 15 : lo >> 4;
                    q[l] = (int8_t)((lo | ((qh[32 * h + l] >> (2 * j)) & 3) << 4) - 32);
                }
                s += d * xb->d * (float)(sc[i] * sum16(q, xb->q) + sc[i + 1] * sum16(q + 16, xb->q + 16));
            }
    }
    return s;
}

/* One IQ4 or MXFP4 block of 32: sum of values[nibble] * x (at most 32 * 127 * 32767 in size). */
static int nl_block(const int8_t *values, const uint8_t *qs, const int16_t *x)
{
    int s = 0;

    for (int l = 0; l < 16; l++)
        s += values[qs[l] & 15] * x[l] + values[qs[l] >> 4] * x[l + 16];
    return s;
}

static int iq4_block(const uint8_t *qs, const int16_t *x) { return nl_block(cpu_iq4_values, qs, x); }

float cpu_kq_dot_iq4_nl(const void *vx, const void *vw, int n)
{
    const cpu_q16 *x = vx;
    const uint8_t *p = vw;
    float s = 0.0f;

    for (int b = 0; b < n / QK; b++, p += CPU_IQ4_NL_BYTES)
        s += cpu_f16(cpu_rd16(p)) * x[b].d * (float)iq4_block(p + 2, x[b].q);
    return s;
}

float cpu_kq_dot_iq4_xs(const void *vx, const void *vw, int n)
{
    const cpu_q16 *x = vx;
    const uint8_t *p = vw;
    float s = 0.0f;

    for (int b = 0; b < n / QK_K; b++, p += CPU_IQ4_XS_BYTES) {
        float d = cpu_f16(cpu_rd16(p));
        unsigned sh = cpu_rd16(p + 2);
        for (int i = 0; i < 8; i++) {
            int ls = ((p[4 + i / 2] >> (4 * (i % 2))) & 15) | (int)((sh >> (2 * i)) & 3) << 4;
            s += d * (float)(ls - 32) * x[b * 8 + i].d * (float)iq4_block(p + 8 + 16 * i, x[b * 8 + i].q);
        }
    }
    return s;
}

/* The block's sum is at most 32 * 12 * 32767 < 2^24, so exact as a float; d * dx is exact too
 * (d is a power of two) unless it leaves float's normal range. */
float cpu_kq_dot_mxfp4(const void *vx, const void *vw, int n)
{
    const cpu_q16 *x = vx;
    const uint8_t *p = vw;
    float s = 0.0f;

    for (int b = 0; b < n / QK; b++, p += CPU_MXFP4_BYTES)
        s += cpu_mxfp4_scale(p[0]) * x[b].d * (float)nl_block(cpu_mxfp4_values, p + 1, x[b].q);
    return s;
}
