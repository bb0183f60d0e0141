/* quant.c: MLX's quantization formats (affine 2-8 bits, mxfp4, nvfp4, mxfp8), float
 * conversions and the format table; ggml's block types are in ggml.c.
 *
 * Affine quantization, as MLX computes it (mlx/backend/cpu/quantized.cpp, and the same steps in
 * ops.cpp's fallback), per group, in float32:
 *   n_bins = 2^bits - 1; min, max over the group
 *   scale  = max((max - min) / n_bins, 1e-7), negated unless |min| > |max|
 *   edge   = |min| > |max| ? min : max               the extreme of larger magnitude
 *   q0     = rint(edge / scale)
 *   if q0 != 0: scale = edge / q0, bias = edge       else bias = 0
 *   q      = clamp(rint((w - bias) / scale), 0, n_bins)
 * The "edge" step makes the larger extreme exact (q = 0) and zero exact too (q = -q0), at the
 * price of a scale up to half a step smaller than (max - min) / n_bins, so the other extreme may
 * be clipped: every element is within |scale| / 2 of its dequantized value except the clipped
 * ones (q == n_bins), which are within |scale|. The scale is negative when the larger extreme is
 * the max (then q = 0 is the max). rint rounds half to even, as MLX's round does. MLX then
 * casts scale and bias to the weight's dtype; the caller does that (quant_from_f32).
 *
 * fp modes, as MLX's fp_quantize does (from memory of ops.cpp; checked against the OCP MX and
 * NVFP4 definitions): amax over the group, s = amax / maxval (6 for E2M1, 448 for E4M3).
 *   nvfp4: the scale is s rounded to E4M3; w is divided by that scale.
 *   mxfp4, mxfp8: the scale is 2^e with e = rint(log2(s)) (e = 0 for an all-zero group), stored
 *   as e + 127; w is divided by 2^e. Because e is rounded, not ceiled, |w| / 2^e may exceed
 *   maxval by up to sqrt(2): those saturate (E2M1 to +-6, E4M3 to +-448).
 *   E2M1 codes are the nearest of the 16 values (first in code order on a tie), E4M3 codes are
 *   rounded to nearest even. */
#include <math.h>
#include <string.h>
#include <strings.h>

#include "quant/quant.h"

#define NO_GGML (-1)

static const quant_format formats[] = {
    { "int2", QUANT_AFFINE, 2, 0, 1, ST_F32, NO_GGML },
    { "int3", QUANT_AFFINE, 3, 0, 1, ST_F32, NO_GGML },
    { "int4", QUANT_AFFINE, 4, 0, 1, ST_F32, NO_GGML },
    { "int5", QUANT_AFFINE, 5, 0, 1, ST_F32, NO_GGML },
    { "int6", QUANT_AFFINE, 6, 0, 1, ST_F32, NO_GGML },
    { "int8", QUANT_AFFINE, 8, 0, 1, ST_F32, NO_GGML },
    { "mxfp4", QUANT_MXFP4, 4, 32, 0, ST_U8, NO_GGML },
    { "nvfp4", QUANT_NVFP4, 4, 16, 0, ST_F8_E4M3, NO_GGML },
    { "mxfp8", QUANT_MXFP8, 8, 32, 0, ST_U8, NO_GGML },
    { "F32", QUANT_FLOAT, 32, 1, 0, ST_F32, GGML_TYPE_F32 },
    { "F16", QUANT_FLOAT, 16, 1, 0, ST_F32, GGML_TYPE_F16 },
    { "BF16", QUANT_FLOAT, 16, 1, 0, ST_F32, GGML_TYPE_BF16 },
    { "Q4_0", QUANT_GGML, 0, 32, 0, ST_F32, GGML_TYPE_Q4_0 },
    { "Q4_1", QUANT_GGML, 0, 32, 0, ST_F32, GGML_TYPE_Q4_1 },
    { "Q5_0", QUANT_GGML, 0, 32, 0, ST_F32, GGML_TYPE_Q5_0 },
    { "Q5_1", QUANT_GGML, 0, 32, 0, ST_F32, GGML_TYPE_Q5_1 },
    { "Q8_0", QUANT_GGML, 0, 32, 0, ST_F32, GGML_TYPE_Q8_0 },
    { "Q2_K", QUANT_GGML, 0, 256, 0, ST_F32, GGML_TYPE_Q2_K },
    { "Q3_K", QUANT_GGML, 0, 256, 0, ST_F32, GGML_TYPE_Q3_K },
    { "Q4_K", QUANT_GGML, 0, 256, 0, ST_F32, GGML_TYPE_Q4_K },
    { "Q5_K", QUANT_GGML, 0, 256, 0, ST_F32, GGML_TYPE_Q5_K },
    { "Q6_K", QUANT_GGML, 0, 256, 0, ST_F32, GGML_TYPE_Q6_K },
    { "Q8_K", QUANT_GGML, 0, 256, 0, ST_F32, GGML_TYPE_Q8_K },
    { "IQ4_NL", QUANT_GGML, 0, 32, 0, ST_F32, GGML_TYPE_IQ4_NL },
    { "IQ4_XS", QUANT_GGML, 0, 256, 0, ST_F32, GGML_TYPE_IQ4_XS },
    { "MXFP4", QUANT_GGML, 0, 32, 0, ST_F32, GGML_TYPE_MXFP4 },
};

/* ggml.c */
int quant__ggml_dequantize(int type, const uint8_t *blocks, size_t n, float *out);

const quant_format *quant_format_find(const char *name)
{
    if (!name)
        return NULL;
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++) {
        int ggml = formats[i].ggml_type != NO_GGML;
        if (ggml ? strcasecmp(name, formats[i].name) == 0 : strcmp(name, formats[i].name) == 0)
            return &formats[i];
    }
    return NULL;
}

const char *quant_affine_name(int bits)
{
    static const char *const names[] = { [2] = "int2", [3] = "int3", [4] = "int4",
                                         [5] = "int5", [6] = "int6", [8] = "int8" };
    return bits >= 0 && bits <= 8 ? names[bits] : NULL;
}

int quant_group_valid(const quant_format *f, int group_size)
{
    if (f->mode == QUANT_AFFINE)
        return group_size == 32 || group_size == 64 || group_size == 128;
    return group_size == f->group_size;
}

/* ---------------------------------------------------------------- floats */

/* f16 and bf16 are util.h's ms_f16_to_f32 and kin. */

float quant_e4m3_to_f32(uint8_t v)
{
    int e = (v >> 3) & 0xf, m = v & 7;
    float a;

    if (e == 15 && m == 7)
        return NAN;
    a = e == 0 ? ldexpf((float)m, -9) : ldexpf(1.0f + (float)m / 8.0f, e - 7);
    return (v & 0x80) ? -a : a;
}

uint8_t quant_f32_to_e4m3(float f)
{
    uint8_t sign = signbit(f) ? 0x80 : 0;
    float a = fabsf(f);
    int ex, code;

    if (isnan(f))
        return 0x7f;
    if (a >= 448.0f)
        return sign | 0x7e;
    if (a < 0.015625f)   /* subnormal: multiples of 2^-9; 8 * 2^-9 is the code of the least normal */
        return sign | (uint8_t)rintf(ldexpf(a, 9));
    frexpf(a, &ex);
    code = (int)rintf(ldexpf(a, 4 - ex)) - 8 + ((ex - 1 + 7) << 3);   /* mantissa carry moves e up */
    return sign | (uint8_t)(code > 0x7e ? 0x7e : code);
}

float quant_e8m0_to_f32(uint8_t e) { return e == 255 ? NAN : ldexpf(1.0f, (int)e - 127); }

int quant_to_f32(float *out, const void *src, st_dtype dtype, size_t n)
{
    const uint8_t *p = src;

    for (size_t i = 0; i < n; i++) {
        uint16_t h;
        switch (dtype) {
        case ST_F32: memcpy(&out[i], p + 4 * i, 4); break;
        case ST_F16: memcpy(&h, p + 2 * i, 2); out[i] = ms_f16_to_f32(h); break;
        case ST_BF16: memcpy(&h, p + 2 * i, 2); out[i] = ms_bf16_to_f32(h); break;
        case ST_F8_E4M3: out[i] = quant_e4m3_to_f32(p[i]); break;
        case ST_F8_E5M2: out[i] = ms_f16_to_f32((uint16_t)(p[i] << 8)); break;
        default: return ms_err(MS_EINVALID, "dtype %s is not a float type", st_dtype_name(dtype));
        }
    }
    return 0;
}

int quant_from_f32(void *dst, st_dtype dtype, const float *src, size_t n)
{
    uint8_t *p = dst;

    for (size_t i = 0; i < n; i++) {
        uint16_t h;
        switch (dtype) {
        case ST_F32: memcpy(p + 4 * i, &src[i], 4); break;
        case ST_F16: h = ms_f32_to_f16(src[i]); memcpy(p + 2 * i, &h, 2); break;
        case ST_BF16: h = ms_f32_to_bf16(src[i]); memcpy(p + 2 * i, &h, 2); break;
        default: return ms_err(MS_EINVALID, "cannot write dtype %s (F32, F16 or BF16)", st_dtype_name(dtype));
        }
    }
    return 0;
}

/* ---------------------------------------------------------------- bit streams */

/* Code i of a little-endian bit stream of `bits`-bit codes held in u32 words. */
static uint32_t code_get(const uint8_t *words, size_t i, int bits)
{
    size_t bit = i * (size_t)bits, w = bit / 32;
    unsigned shift = (unsigned)(bit % 32);
    uint32_t lo, hi = 0;

    memcpy(&lo, words + 4 * w, 4);
    lo >>= shift;
    if (shift + (unsigned)bits > 32) {
        memcpy(&hi, words + 4 * (w + 1), 4);
        lo |= hi << (32 - shift);
    }
    return lo & ((1u << bits) - 1);
}

/* The words must be zeroed first. */
static void code_put(uint32_t *words, size_t i, int bits, uint32_t q)
{
    size_t bit = i * (size_t)bits, w = bit / 32;
    unsigned shift = (unsigned)(bit % 32);

    words[w] |= q << shift;
    if (shift + (unsigned)bits > 32)
        words[w + 1] |= q >> (32 - shift);
}

/* ---------------------------------------------------------------- affine */

int quant_affine_quantize(uint32_t *packed, float *scales, float *biases, const float *w, size_t n, int bits,
                          int group_size)
{
    float n_bins = (float)((1u << bits) - 1);

    if (!quant_affine_name(bits) || (group_size != 32 && group_size != 64 && group_size != 128))
        return ms_err(MS_EINVALID, "affine quantization needs bits in 2,3,4,5,6,8 and group size 32, 64 or 128 "
                      "(have bits %d, group size %d)", bits, group_size);
    if (n % (size_t)group_size || (n * (size_t)bits) % 32)
        return ms_err(MS_EINVALID, "%zu weights do not fill whole groups of %d", n, group_size);
    memset(packed, 0, n * (size_t)bits / 32 * 4);
    for (size_t g = 0; g < n / (size_t)group_size; g++) {
        const float *x = w + g * (size_t)group_size;
        float lo = INFINITY, hi = -INFINITY, scale, edge, q0, bias = 0.0f;
        int mask;

        for (int j = 0; j < group_size; j++) {
            lo = fminf(lo, x[j]);
            hi = fmaxf(hi, x[j]);
        }
        mask = fabsf(lo) > fabsf(hi);
        scale = fmaxf((hi - lo) / n_bins, 1e-7f);
        scale = mask ? scale : -scale;
        edge = mask ? lo : hi;
        q0 = rintf(edge / scale);
        if (q0 != 0.0f) {
            scale = edge / q0;
            bias = edge;
        }
        for (int j = 0; j < group_size; j++) {
            float q = rintf((x[j] - bias) / scale);
            q = fminf(fmaxf(q, 0.0f), n_bins);
            code_put(packed, g * (size_t)group_size + (size_t)j, bits, (uint32_t)q);
        }
        scales[g] = scale;
        biases[g] = bias;
    }
    return 0;
}

/* ---------------------------------------------------------------- fp modes */

static const float e2m1[16] = { 0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
                                -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f };

static uint32_t e2m1_nearest(float x)
{
    uint32_t best = 0;
    float d = INFINITY;

    for (uint32_t k = 0; k < 16; k++)
        if (fabsf(x - e2m1[k]) < d) {
            d = fabsf(x - e2m1[k]);
            best = k;
        }
    return best;
}

int quant_fp_quantize(uint32_t *packed, uint8_t *scales, const float *w, size_t n, const quant_format *f)
{
    size_t gs = (size_t)f->group_size;
    float maxval = f->bits == 4 ? 6.0f : 448.0f;

    if (f->mode != QUANT_MXFP4 && f->mode != QUANT_NVFP4 && f->mode != QUANT_MXFP8)
        return ms_err(MS_EINVALID, "%s is not an fp quantization mode", f->name);
    if (n % gs)
        return ms_err(MS_EINVALID, "%zu weights do not fill whole groups of %zu", n, gs);
    memset(packed, 0, n * (size_t)f->bits / 32 * 4);
    for (size_t g = 0; g < n / gs; g++) {
        const float *x = w + g * gs;
        float amax = 0.0f, s, div;

        for (size_t j = 0; j < gs; j++)
            amax = fmaxf(amax, fabsf(x[j]));
        s = amax / maxval;
        if (f->mode == QUANT_NVFP4) {
            scales[g] = quant_f32_to_e4m3(s);
            div = quant_e4m3_to_f32(scales[g]);
        } else {
            int e = s == 0.0f ? 0 : (int)rintf(log2f(s));
            e = e < -127 ? -127 : e > 127 ? 127 : e;
            scales[g] = (uint8_t)(e + 127);
            div = ldexpf(1.0f, e);
        }
        for (size_t j = 0; j < gs; j++) {
            float v = div == 0.0f ? 0.0f : x[j] / div;
            uint32_t q = f->bits == 4 ? e2m1_nearest(v) : quant_f32_to_e4m3(v);
            code_put(packed, g * gs + j, f->bits, q);
        }
    }
    return 0;
}

/* ---------------------------------------------------------------- dequantize */

static int dequant_mlx(const quant_format *f, const uint8_t *packed, const uint8_t *scales, const uint8_t *biases,
                       st_dtype sdt, int group_size, size_t n, float *out)
{
    size_t gs = (size_t)group_size, ssz = st_dtype_size(sdt);
    int rc;

    for (size_t g = 0; g < n / gs; g++) {
        float s, b = 0.0f;
        if (f->mode == QUANT_AFFINE) {
            if ((rc = quant_to_f32(&s, scales + g * ssz, sdt, 1)) < 0 ||
                (rc = quant_to_f32(&b, biases + g * ssz, sdt, 1)) < 0)
                return rc;
        } else {
            s = f->mode == QUANT_NVFP4 ? quant_e4m3_to_f32(scales[g]) : quant_e8m0_to_f32(scales[g]);
        }
        for (size_t j = 0; j < gs; j++) {
            size_t i = g * gs + j;
            uint32_t q = code_get(packed, i, f->bits);
            if (f->mode == QUANT_AFFINE)
                out[i] = s * (float)q + b;
            else if (f->bits == 4)
                out[i] = e2m1[q] * s;
            else
                out[i] = quant_e4m3_to_f32((uint8_t)q) * s;
        }
    }
    return 0;
}

int quant_dequantize_row(const char *quant_type, const void *packed, const void *scales, const void *biases,
                         st_dtype scale_dtype, int group_size, size_t n, float *out)
{
    const quant_format *f = quant_format_find(quant_type);

    if (!f)
        return ms_err(MS_EINVALID, "unknown quant type '%s'", quant_type ? quant_type : "(null)");
    if (f->mode == QUANT_GGML || f->mode == QUANT_FLOAT) {
        if (n % (size_t)f->group_size)
            return ms_err(MS_EINVALID, "%s: %zu elements are not whole blocks of %d", f->name, n, f->group_size);
        return quant__ggml_dequantize(f->ggml_type, packed, n, out);
    }
    if (!quant_group_valid(f, group_size))
        return ms_err(MS_EINVALID, "%s: group size %d not allowed", f->name, group_size);
    if (n % (size_t)group_size)
        return ms_err(MS_EINVALID, "%s: %zu elements are not whole groups of %d", f->name, n, group_size);
    if (f->mode == QUANT_AFFINE) {
        if (scale_dtype != ST_F32 && scale_dtype != ST_F16 && scale_dtype != ST_BF16)
            return ms_err(MS_EINVALID, "%s: scale dtype %s, expected F32, F16 or BF16", f->name,
                          st_dtype_name(scale_dtype));
        if (!biases)
            return ms_err(MS_EINVALID, "%s: affine dequantization needs biases", f->name);
    } else if (scale_dtype != f->scale_dtype && !(f->mode == QUANT_NVFP4 && scale_dtype == ST_U8)) {
        /* nvfp4 scales are E4M3 bits; MLX itself saves them as uint8, so U8 is read the same */
        return ms_err(MS_EINVALID, "%s: scale dtype %s, expected %s", f->name, st_dtype_name(scale_dtype),
                      st_dtype_name(f->scale_dtype));
    }
    return dequant_mlx(f, packed, scales, biases, scale_dtype, group_size, n, out);
}

/* ---------------------------------------------------------------- error */

void quant_error_add(quant_error *e, const float *ref, const float *deq, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        double d = (double)ref[i] - (double)deq[i];
        if (fabs(d) > e->max_abs)
            e->max_abs = fabs(d);
        e->sum_sq_err += d * d;
        e->sum_sq_ref += (double)ref[i] * (double)ref[i];
    }
    e->n += n;
}

double quant_error_rms_rel(const quant_error *e)
{
    return e->sum_sq_ref > 0 ? sqrt(e->sum_sq_err / e->sum_sq_ref) : 0.0;
}
