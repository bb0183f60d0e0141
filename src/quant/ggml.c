/* ggml.c: dequantizers for GGUF's block types, written from the block layouts ggml defines
 * (ggml-common.h) and its reference dequantize_row_* functions, element for element.
 *
 * Blocks are read with memcpy: a GGUF tensor's rows need not be aligned for the f16 fields. */
#include <string.h>

#include "quant/quant.h"

#define QK_K 256

int quant__ggml_dequantize(int type, const uint8_t *blocks, size_t n, float *out);

static const int8_t kvalues_iq4nl[16] = { -127, -104, -83, -65, -49, -35, -22, -10,
                                          1, 13, 25, 38, 53, 69, 89, 113 };
/* ggml's MXFP4 values are E2M1 doubled, with the E8M0 scale halved to match. */
static const int8_t kvalues_mxfp4[16] = { 0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12 };

static float h(const uint8_t *p)
{
    float f;
    quant_to_f32(&f, p, ST_F16, 1);
    return f;
}

static void q4_0(const uint8_t *b, float *y)   /* d f16, qs[16] */
{
    float d = h(b);
    for (int j = 0; j < 16; j++) {
        y[j] = (float)((b[2 + j] & 0xf) - 8) * d;
        y[j + 16] = (float)((b[2 + j] >> 4) - 8) * d;
    }
}

static void q4_1(const uint8_t *b, float *y)   /* d, m f16, qs[16] */
{
    float d = h(b), m = h(b + 2);
    for (int j = 0; j < 16; j++) {
        y[j] = (float)(b[4 + j] & 0xf) * d + m;
        y[j + 16] = (float)(b[4 + j] >> 4) * d + m;
    }
}

static void q5(const uint8_t *b, float *y, int with_min)   /* d [, m] f16, qh[4], qs[16] */
{
    float d = h(b), m = with_min ? h(b + 2) : 0.0f;
    const uint8_t *p = b + (with_min ? 4 : 2), *qs = p + 4;
    uint32_t qh;

    memcpy(&qh, p, 4);
    for (int j = 0; j < 16; j++) {
        int x0 = (qs[j] & 0xf) | (int)(((qh >> j) << 4) & 0x10);
        int x1 = (qs[j] >> 4) | (int)((qh >> (j + 12)) & 0x10);
        if (with_min) {
            y[j] = (float)x0 * d + m;
            y[j + 16] = (float)x1 * d + m;
        } else {
            y[j] = (float)(x0 - 16) * d;
            y[j + 16] = (float)(x1 - 16) * d;
        }
    }
}

static void q8_0(const uint8_t *b, float *y)   /* d f16, qs[32] i8 */
{
    float d = h(b);
    for (int j = 0; j < 32; j++)
        y[j] = (float)(int8_t)b[2 + j] * d;
}

static void q2_k(const uint8_t *b, float *y)   /* scales[16], qs[64], d, dmin f16 */
{
    const uint8_t *sc = b, *q = b + 16;
    float d = h(b + 80), dmin = h(b + 82);
    int is = 0;

    for (int n = 0; n < QK_K; n += 128) {
        for (int shift = 0; shift < 8; shift += 2) {
            for (int half = 0; half < 2; half++) {
                uint8_t s = sc[is++];
                float dl = d * (float)(s & 0xf), ml = dmin * (float)(s >> 4);
                for (int l = 0; l < 16; l++)
                    *y++ = dl * (float)((q[l + 16 * half] >> shift) & 3) - ml;
            }
        }
        q += 32;
    }
}

static void q3_k(const uint8_t *b, float *y)   /* hmask[32], qs[64], scales[12], d f16 */
{
    const uint8_t *hm = b, *q = b + 32;
    float d = h(b + 108);
    uint32_t aux[4], tmp;
    int8_t sc[16];
    uint8_t m = 1;
    int is = 0;

    memcpy(aux, b + 96, 12);
    tmp = aux[2];
    aux[2] = ((aux[0] >> 4) & 0x0f0f0f0f) | (((tmp >> 4) & 0x03030303) << 4);
    aux[3] = ((aux[1] >> 4) & 0x0f0f0f0f) | (((tmp >> 6) & 0x03030303) << 4);
    aux[0] = (aux[0] & 0x0f0f0f0f) | (((tmp >> 0) & 0x03030303) << 4);
    aux[1] = (aux[1] & 0x0f0f0f0f) | (((tmp >> 2) & 0x03030303) << 4);
    memcpy(sc, aux, 16);
    for (int n = 0; n < QK_K; n += 128) {
        for (int shift = 0; shift < 8; shift += 2) {
            for (int half = 0; half < 2; half++) {
                float dl = d * (float)(sc[is++] - 32);
                for (int l = 16 * half; l < 16 * half + 16; l++)
                    *y++ = dl * (float)((int)((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
            }
            m <<= 1;
        }
        q += 32;
    }
}

static void scale_min_k4(int j, const uint8_t *q, uint8_t *d, uint8_t *m)
{
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (uint8_t)((q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* Q4_K: d, dmin f16, scales[12], qs[128]; Q5_K adds qh[32] before qs. */
static void q45_k(const uint8_t *b, float *y, int five)
{
    float d = h(b), dmin = h(b + 2);
    const uint8_t *scales = b + 4, *qh = b + 16, *ql = b + (five ? 48 : 16);
    uint8_t u1 = 1, u2 = 2;

    for (int j = 0, is = 0; j < QK_K; j += 64, is += 2) {
        uint8_t sc, mn;
        float d1, m1, d2, m2;
        scale_min_k4(is, scales, &sc, &mn);
        d1 = d * sc;
        m1 = dmin * mn;
        scale_min_k4(is + 1, scales, &sc, &mn);
        d2 = d * sc;
        m2 = dmin * mn;
        for (int l = 0; l < 32; l++)
            *y++ = d1 * (float)((ql[l] & 0xf) + (five && (qh[l] & u1) ? 16 : 0)) - m1;
        for (int l = 0; l < 32; l++)
            *y++ = d2 * (float)((ql[l] >> 4) + (five && (qh[l] & u2) ? 16 : 0)) - m2;
        ql += 32;
        u1 = (uint8_t)(u1 << 2);
        u2 = (uint8_t)(u2 << 2);
    }
}

static void q6_k(const uint8_t *b, float *y)   /* ql[128], qh[64], scales[16] i8, d f16 */
{
    const uint8_t *ql = b, *qh = b + 128;
    const int8_t *sc = (const int8_t *)(b + 192);
    float d = h(b + 208);

    for (int n = 0; n < QK_K; n += 128) {
        for (int l = 0; l < 32; l++) {
            int is = l / 16;
            int q1 = (int)((ql[l] & 0xf) | (((qh[l] >> 0) & 3) << 4)) - 32;
            int q2 = (int)((ql[l + 32] & 0xf) | (((qh[l] >> 2) & 3) << 4)) - 32;
            int q3 = (int)((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
            int q4 = (int)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
            y[l] = d * (float)sc[is] * (float)q1;
            y[l + 32] = d * (float)sc[is + 2] * (float)q2;
            y[l + 64] = d * (float)sc[is + 4] * (float)q3;
            y[l + 96] = d * (float)sc[is + 6] * (float)q4;
        }
        y += 128;
        ql += 64;
        qh += 32;
        sc += 8;
    }
}

static void q8_k(const uint8_t *b, float *y)   /* d f32, qs[256] i8, bsums[16] i16 */
{
    float d;
    memcpy(&d, b, 4);
    for (int j = 0; j < QK_K; j++)
        y[j] = d * (float)(int8_t)b[4 + j];
}

static void iq4_nl(const uint8_t *b, float *y)   /* d f16, qs[16] */
{
    float d = h(b);
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)kvalues_iq4nl[b[2 + j] & 0xf];
        y[j + 16] = d * (float)kvalues_iq4nl[b[2 + j] >> 4];
    }
}

static void iq4_xs(const uint8_t *b, float *y)   /* d f16, scales_h u16, scales_l[4], qs[128] */
{
    float d = h(b);
    uint16_t sh;
    const uint8_t *sl = b + 4, *qs = b + 8;

    memcpy(&sh, b + 2, 2);
    for (int ib = 0; ib < QK_K / 32; ib++) {
        int ls = ((sl[ib / 2] >> 4 * (ib % 2)) & 0xf) | (((sh >> 2 * ib) & 3) << 4);
        float dl = d * (float)(ls - 32);
        for (int j = 0; j < 16; j++) {
            y[j] = dl * (float)kvalues_iq4nl[qs[j] & 0xf];
            y[j + 16] = dl * (float)kvalues_iq4nl[qs[j] >> 4];
        }
        y += 32;
        qs += 16;
    }
}

static void mxfp4(const uint8_t *b, float *y)   /* e E8M0, qs[16] */
{
    float d = b[0] == 255 ? quant_e8m0_to_f32(255) : quant_e8m0_to_f32(b[0]) * 0.5f;
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)kvalues_mxfp4[b[1 + j] & 0xf];
        y[j + 16] = d * (float)kvalues_mxfp4[b[1 + j] >> 4];
    }
}

int quant__ggml_dequantize(int type, const uint8_t *blocks, size_t n, float *out)
{
    uint32_t elems, bytes;
    int rc;

    if ((rc = ggml_type_info(type, &elems, &bytes)) < 0)
        return rc;
    if (type == GGML_TYPE_F32 || type == GGML_TYPE_F16 || type == GGML_TYPE_BF16)
        return quant_to_f32(out, blocks, type == GGML_TYPE_F32 ? ST_F32 : type == GGML_TYPE_F16 ? ST_F16 : ST_BF16, n);
    for (size_t i = 0; i < n / elems; i++) {
        const uint8_t *b = blocks + i * bytes;
        float *y = out + i * elems;
        switch (type) {
        case GGML_TYPE_Q4_0: q4_0(b, y); break;
        case GGML_TYPE_Q4_1: q4_1(b, y); break;
        case GGML_TYPE_Q5_0: q5(b, y, 0); break;
        case GGML_TYPE_Q5_1: q5(b, y, 1); break;
        case GGML_TYPE_Q8_0: q8_0(b, y); break;
        case GGML_TYPE_Q2_K: q2_k(b, y); break;
        case GGML_TYPE_Q3_K: q3_k(b, y); break;
        case GGML_TYPE_Q4_K: q45_k(b, y, 0); break;
        case GGML_TYPE_Q5_K: q45_k(b, y, 1); break;
        case GGML_TYPE_Q6_K: q6_k(b, y); break;
        case GGML_TYPE_Q8_K: q8_k(b, y); break;
        case GGML_TYPE_IQ4_NL: iq4_nl(b, y); break;
        case GGML_TYPE_IQ4_XS: iq4_xs(b, y); break;
        case GGML_TYPE_MXFP4: mxfp4(b, y); break;
        default: return ms_err(MS_EUNSUPPORTED, "no dequantizer for ggml type %s", ggml_type_name(type));
        }
    }
    return 0;
}
