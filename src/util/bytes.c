/* bytes.c: half-precision conversions and the grow-array helper (util.h). The little-endian
 * loads and stores are inline in util.h: they sit in every parser's inner loop. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

float ms_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff;

    if (e == 0)   /* zero or subnormal: m * 2^-24 exactly */
        return bits_f32(sign | f32_bits(ldexpf((float)m, -24)));
    if (e == 31)
        return bits_f32(sign | 0x7f800000u | (m << 13));
    return bits_f32(sign | ((e + 112) << 23) | (m << 13));
}

uint16_t ms_f32_to_f16(float f)
{
    uint32_t u = f32_bits(f), sign = (u >> 16) & 0x8000;
    float a = fabsf(f);
    int ex;

    if (isnan(f))
        return (uint16_t)(sign | 0x7e00);
    if (a >= 65520.0f)   /* rounds past the largest half (65504) */
        return (uint16_t)(sign | 0x7c00);
    if (a < 6.103515625e-05f)   /* below the smallest normal: multiples of 2^-24, rint is half-even */
        return (uint16_t)(sign | (uint32_t)rintf(ldexpf(a, 24)));
    frexpf(a, &ex);   /* a = fr * 2^ex, fr in [0.5, 1): exponent ex - 1 */
    {
        uint32_t m = (uint32_t)rintf(ldexpf(a, 11 - ex)) - 1024;   /* 10 mantissa bits, half-even */
        uint32_t e = (uint32_t)(ex - 1 + 15);
        return (uint16_t)(sign | ((e << 10) + m));   /* m == 1024 carries into the exponent */
    }
}

float ms_bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

uint16_t ms_f32_to_bf16(float f)
{
    uint32_t u = f32_bits(f);

    if (isnan(f))   /* keep it a NaN: rounding could carry a quiet NaN's payload into inf */
        return (uint16_t)((u >> 16) | 0x40);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);   /* round half to even */
}

int ms_grow(void *arr, size_t *cap, size_t need, size_t elem)
{
    size_t ncap = *cap ? *cap : 16, nbytes;
    void *p;

    if (need <= *cap)
        return 0;
    while (ncap < need) {
        if (ms_mul(&ncap, ncap, 2) < 0)
            return ms_err(MS_ENOMEM, "out of memory for %zu elements of %zu bytes", need, elem);
    }
    if (elem == 0 || ms_mul(&nbytes, ncap, elem) < 0)
        return ms_err(MS_ENOMEM, "out of memory for %zu elements of %zu bytes", need, elem);
    memcpy(&p, arr, sizeof p);
    if (!(p = realloc(p, nbytes)))
        return ms_err(MS_ENOMEM, "out of memory for %zu elements of %zu bytes", need, elem);
    memcpy(arr, &p, sizeof p);
    *cap = ncap;
    return 0;
}
