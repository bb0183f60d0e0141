/* kernels_scalar.c: the portable path, and the arithmetic every other path must match.
 *
 * Block layouts (ggml's, 32 weights per block, all little endian):
 *   Q4_0  f16 d | u8 qs[16]                 w[j] = ((qs[j] & 15) - 8) * d, w[j+16] = ((qs[j] >> 4) - 8) * d
 *   Q4_1  f16 d | f16 m | u8 qs[16]         w = q * d + m
 *   Q5_0  f16 d | u32 qh | u8 qs[16]        q = nibble | bit j (or j+16) of qh << 4; w = (q - 16) * d
 *   Q5_1  f16 d | f16 m | u32 qh | qs[16]   w = q * d + m
 *   Q8_0  f16 d | i8 qs[32]                 w = q * d
 * Activations are quantized to 16-bit cpu_q16 blocks (x ~= dx * qx) and each block's integer dot product
 * is scaled once: sum_j w[j] x[j] ~= d dx sum_j q[j] qx[j] (+ m * s for the offset types). */
#include <float.h>
#include <math.h>

#include "cpu/kernels.h"
#include "cpu/kquant_int.h"
#include "quant/quant.h"

float cpu_f16_to_f32(uint16_t h) { return cpu_f16(h); }

uint16_t cpu_f32_to_f16(float f)
{
    uint32_t x, sign, mant, rem, h;
    float a;

    memcpy(&x, &f, 4);
    sign = (x >> 16) & 0x8000;
    x &= 0x7fffffff;
    if (x >= 0x7f800000)   /* inf stays inf; nan stays a (quiet) nan */
        return (uint16_t)(sign | 0x7c00 | (x > 0x7f800000 ? 0x200 : 0));
    if (x >= 0x477ff000)   /* >= 65520 rounds past the largest half, 65504 */
        return (uint16_t)(sign | 0x7c00);
    if (x < 0x38800000) {  /* below 2^-14: a half subnormal, round(a * 2^24), exact scaling */
        memcpy(&a, &x, 4);
        return (uint16_t)(sign | (uint32_t)rintf(a * 16777216.0f));
    }
    mant = x & 0x7fffff;
    h = ((x >> 23) - 127 + 15) << 10 | mant >> 13;
    rem = mant & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1)))
        h++;   /* a carry into the exponent is the right result */
    return (uint16_t)(sign | h);
}

/* roundf (half away from zero) without a libm call, exactly: truncation and the fraction
 * v - trunc(v) are exact for |v| < 2^23. */
static inline int round_half_away(float v)
{
    int t = (int)v;
    float f = v - (float)t;

    return t + (f >= 0.5f) - (f <= -0.5f);
}

/* Blocks of codes in [-qmax, qmax]: cpu_quantize_q16 and cpu_quantize_q8. */
static void quantize_blocks(cpu_q16 *out, const float *x, int n, float qmax)
{
    for (int b = 0; b < n / QK; b++) {
        const float *xb = x + b * QK;
        float amax = 0.0f, d, id;
        int sum = 0, finite = 1;

        for (int j = 0; j < QK; j++) {
            float a = fabsf(xb[j]);
            amax = a > amax ? a : amax;   /* fmaxf without the call; a NaN is skipped the same way */
            finite &= a <= FLT_MAX;       /* false for NaN and infinities */
        }
        if (!finite) {
            /* Converting NaN or infinity to int is undefined. A block holding one gives NaN scales
             * and zero codes, so every dot product it enters is NaN, as the float one would be,
             * and the decoder reports non-finite logits instead of running on garbage. */
            memset(out[b].q, 0, sizeof out[b].q);
            out[b].d = out[b].s = NAN;
            continue;
        }
        d = amax / qmax;
        id = d != 0.0f ? 1.0f / d : 0.0f;
        for (int j = 0; j < QK; j++) {
            int q = round_half_away(xb[j] * id);
            out[b].q[j] = (int16_t)q;
            sum += q;
        }
        out[b].d = d;
        out[b].s = d * (float)sum;
    }
}

void cpu_quantize_q16(cpu_q16 *out, const float *x, int n) { quantize_blocks(out, x, n, 32767.0f); }

void cpu_quantize_q8(cpu_q16 *out, const float *x, int n) { quantize_blocks(out, x, n, 127.0f); }

static float dot_f32(const float *a, const float *b, int n)
{
    float s = 0.0f;

    for (int i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

static float dot_f32_f16(const float *a, const uint16_t *b, int n)
{
    float s = 0.0f;

    for (int i = 0; i < n; i++)
        s += a[i] * cpu_f16(b[i]);
    return s;
}

static void axpy_f32(float *y, float a, const float *x, int n)
{
    for (int i = 0; i < n; i++)
        y[i] += a * x[i];
}

static void axpy_f16(float *y, float a, const uint16_t *x, int n)
{
    for (int i = 0; i < n; i++)
        y[i] += a * cpu_f16(x[i]);
}

static void f32_to_f16(uint16_t *y, const float *x, int n)
{
    for (int i = 0; i < n; i++)
        y[i] = cpu_f32_to_f16(x[i]);
}

static float w_f32(const void *x, const void *w, int n) { return dot_f32(x, w, n); }

static float w_f16(const void *x, const void *w, int n)
{
    const uint8_t *p = w;
    const float *a = x;
    float s = 0.0f;

    for (int i = 0; i < n; i++)
        s += a[i] * cpu_f16(cpu_rd16(p + 2 * i));
    return s;
}

static float w_bf16(const void *x, const void *w, int n)
{
    const uint8_t *p = w;
    const float *a = x;
    float s = 0.0f;

    for (int i = 0; i < n; i++)
        s += a[i] * cpu_bf16(cpu_rd16(p + 2 * i));
    return s;
}

static float w_q8_0(const void *x, const void *w, int n)
{
    const cpu_q16 *xq = x;
    const uint8_t *p = w;
    float s = 0.0f;

    for (int b = 0; b < n / QK; b++, p += CPU_Q8_0_BYTES) {
        int sumi = 0;

        for (int j = 0; j < QK; j++)
            sumi += (int8_t)p[2 + j] * xq[b].q[j];
        s += (float)sumi * (cpu_f16(cpu_rd16(p)) * xq[b].d);
    }
    return s;
}

/* Shared by the 4- and 5-bit types: qs at `qs`, high bits `qh` (0 for 4-bit), offset `off`
 * subtracted from each q (8 or 16 for the _0 types, 0 for the _1 types). */
static int block_dot(const uint8_t *qs, uint32_t qh, int off, const int16_t *xq)
{
    int sumi = 0;

    for (int j = 0; j < QK / 2; j++) {
        int lo = (qs[j] & 15) | (int)((qh >> j) & 1) << 4;
        int hi = (qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
        sumi += (lo - off) * xq[j] + (hi - off) * xq[j + QK / 2];
    }
    return sumi;
}

static float w_q4_0(const void *x, const void *w, int n)
{
    const cpu_q16 *xq = x;
    const uint8_t *p = w;
    float s = 0.0f;

    for (int b = 0; b < n / QK; b++, p += CPU_Q4_0_BYTES)
        s += (float)block_dot(p + 2, 0, 8, xq[b].q) * (cpu_f16(cpu_rd16(p)) * xq[b].d);
    return s;
}

static float w_q4_1(const void *x, const void *w, int n)
{
    const cpu_q16 *xq = x;
    const uint8_t *p = w;
    float s = 0.0f;

    for (int b = 0; b < n / QK; b++, p += CPU_Q4_1_BYTES)
        s += (float)block_dot(p + 4, 0, 0, xq[b].q) * (cpu_f16(cpu_rd16(p)) * xq[b].d) +
             cpu_f16(cpu_rd16(p + 2)) * xq[b].s;
    return s;
}

static float w_q5_0(const void *x, const void *w, int n)
{
    const cpu_q16 *xq = x;
    const uint8_t *p = w;
    float s = 0.0f;

    for (int b = 0; b < n / QK; b++, p += CPU_Q5_0_BYTES)
        s += (float)block_dot(p + 6, cpu_rd32(p + 2), 16, xq[b].q) * (cpu_f16(cpu_rd16(p)) * xq[b].d);
    return s;
}

static float w_q5_1(const void *x, const void *w, int n)
{
    const cpu_q16 *xq = x;
    const uint8_t *p = w;
    float s = 0.0f;

    for (int b = 0; b < n / QK; b++, p += CPU_Q5_1_BYTES)
        s += (float)block_dot(p + 8, cpu_rd32(p + 4), 0, xq[b].q) * (cpu_f16(cpu_rd16(p)) * xq[b].d) +
             cpu_f16(cpu_rd16(p + 2)) * xq[b].s;
    return s;
}

/* The scalar path: every type and function is set here, so every other path's chain ends in a
 * full table. */
const cpu_path cpu_path_scalar = {
    .name = "scalar",
    .built = 1,
    .type = {
        [GGML_TYPE_F32] = CPU_F32(w_f32, NULL), [GGML_TYPE_F16] = CPU_F32(w_f16, NULL),
        [GGML_TYPE_BF16] = CPU_F32(w_bf16, NULL), [GGML_TYPE_Q8_0] = CPU_Q16(w_q8_0, NULL),
        [GGML_TYPE_Q4_0] = CPU_Q16(w_q4_0, NULL), [GGML_TYPE_Q4_1] = CPU_Q16(w_q4_1, NULL),
        [GGML_TYPE_Q5_0] = CPU_Q16(w_q5_0, NULL), [GGML_TYPE_Q5_1] = CPU_Q16(w_q5_1, NULL),
        [GGML_TYPE_Q2_K] = CPU_Q16(cpu_kq_dot_q2_k, NULL), [GGML_TYPE_Q3_K] = CPU_Q16(cpu_kq_dot_q3_k, NULL),
        [GGML_TYPE_Q4_K] = CPU_Q16(cpu_kq_dot_q4_k, NULL), [GGML_TYPE_Q5_K] = CPU_Q16(cpu_kq_dot_q5_k, NULL),
        [GGML_TYPE_Q6_K] = CPU_Q16(cpu_kq_dot_q6_k, NULL), [GGML_TYPE_IQ4_NL] = CPU_Q16(cpu_kq_dot_iq4_nl, NULL),
        [GGML_TYPE_IQ4_XS] = CPU_Q16(cpu_kq_dot_iq4_xs, NULL), [GGML_TYPE_MXFP4] = CPU_Q16(cpu_kq_dot_mxfp4, NULL),
    },
    .dot_f32 = dot_f32,
    .dot_f32_f16 = dot_f32_f16,
    .axpy_f32 = axpy_f32,
    .axpy_f16 = axpy_f16,
    .f32_to_f16 = f32_to_f16,
};

/* One row of an F32, F16, BF16 or 32-block type (cpu_tensor_row's share); the arithmetic is the
 * definition of each layout. */
static void row_basic(float *out, const backend_tensor *w, uint64_t row)
{
    uint64_t cols = w->shape[w->n_dims - 1];
    const uint8_t *p;

    switch (w->type) {
    case GGML_TYPE_F32:
        memcpy(out, (const float *)w->data + row * cols, cols * sizeof(float));
        return;
    case GGML_TYPE_F16:
        p = (const uint8_t *)w->data + row * cols * 2;
        for (uint64_t i = 0; i < cols; i++)
            out[i] = cpu_f16(cpu_rd16(p + 2 * i));
        return;
    case GGML_TYPE_BF16:
        p = (const uint8_t *)w->data + row * cols * 2;
        for (uint64_t i = 0; i < cols; i++)
            out[i] = cpu_bf16(cpu_rd16(p + 2 * i));
        return;
    default:
        break;
    }
    for (uint64_t b = 0; b < cols / QK; b++) {
        float *o = out + b * QK;
        int bytes = w->type == GGML_TYPE_Q8_0 ? CPU_Q8_0_BYTES : w->type == GGML_TYPE_Q4_0 ? CPU_Q4_0_BYTES
                    : w->type == GGML_TYPE_Q4_1 ? CPU_Q4_1_BYTES : w->type == GGML_TYPE_Q5_0 ? CPU_Q5_0_BYTES
                    : CPU_Q5_1_BYTES;
        float d, m = 0.0f;
        uint32_t qh = 0;
        const uint8_t *qs;
        int off = 0;

        p = (const uint8_t *)w->data + (row * (cols / QK) + b) * (uint64_t)bytes;
        d = cpu_f16(cpu_rd16(p));
        if (w->type == GGML_TYPE_Q8_0) {
            for (int j = 0; j < QK; j++)
                o[j] = (float)(int8_t)p[2 + j] * d;
            continue;
        }
        switch (w->type) {
        case GGML_TYPE_Q4_0: qs = p + 2; off = 8; break;
        case GGML_TYPE_Q4_1: qs = p + 4; m = cpu_f16(cpu_rd16(p + 2)); break;
        case GGML_TYPE_Q5_0: qs = p + 6; qh = cpu_rd32(p + 2); off = 16; break;
        default: qs = p + 8; qh = cpu_rd32(p + 4); m = cpu_f16(cpu_rd16(p + 2)); break;
        }
        for (int j = 0; j < QK / 2; j++) {
            int lo = (qs[j] & 15) | (int)((qh >> j) & 1) << 4;
            int hi = (qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
            o[j] = (float)(lo - off) * d + m;
            o[j + QK / 2] = (float)(hi - off) * d + m;
        }
    }
}

void cpu_tensor_row(float *out, const backend_tensor *w, uint64_t row)
{
    uint64_t cols = w->shape[w->n_dims - 1], row_bytes = 0;

    if (w->type == BACKEND_TYPE_MLX) {
        size_t ng = (size_t)(cols / (uint64_t)w->group_size), ss = st_dtype_size((st_dtype)w->scale_dtype);
        /* the format and group were checked at open, so this cannot fail */
        quant_dequantize_row(w->quant_type, (const uint8_t *)w->data + row * (cols * (uint64_t)w->bits / 8),
                             (const uint8_t *)w->scales + row * ng * ss,
                             w->biases ? (const uint8_t *)w->biases + row * ng * ss : NULL,
                             (st_dtype)w->scale_dtype, w->group_size, (size_t)cols, out);
        return;
    }
    switch (w->type) {
    case GGML_TYPE_Q2_K: case GGML_TYPE_Q3_K: case GGML_TYPE_Q4_K: case GGML_TYPE_Q5_K: case GGML_TYPE_Q6_K:
    case GGML_TYPE_IQ4_NL: case GGML_TYPE_IQ4_XS: case GGML_TYPE_MXFP4:
        ggml_row_nbytes(&row_bytes, w->type, cols);
        quant_dequantize_row(ggml_type_name(w->type), (const uint8_t *)w->data + row * row_bytes, NULL, NULL, ST_F32,
                             0, (size_t)cols, out);
        return;
    default:
        row_basic(out, w, row);
    }
}
