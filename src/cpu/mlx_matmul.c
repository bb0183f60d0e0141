/* mlx_matmul.c: row dot products of MLX-quantized weights (RUNTIME_TYPE_MLX, runtime.h).
 *
 * Affine (int2 .. int8): w = scale_g * q + bias_g, so over a group g
 *     sum_i w_i x_i = scale_g * sum_i q_i x_i + bias_g * sum_i x_i,
 * and with x in cpu_q16 blocks of 32 (groups of 32, 64, 128 hold whole blocks) each block costs
 * one integer sum of codes times 16-bit activations plus its stored block sum: a real quantized
 * dot product for every bit width. 4 and 8 bits read whole nibbles and bytes (AVX2 when the
 * path allows); 2, 3, 5, 6 bits take the code at bit i * bits of the row's stream.
 * fp formats (mxfp4, nvfp4, mxfp8): the generic path. A few groups at a time are dequantized by
 * src/quant into a stack buffer and dotted with the f32 activations. */
#include <string.h>

#include "quant/quant.h"
#include "cpu/kquant_int.h"

#define FP_CHUNK 512   /* weights dequantized at a time by the generic path (2 KiB of stack) */

static float scale_at(const void *base, int dtype, size_t i)
{
    const uint8_t *p = base;
    float f;

    switch (dtype) {
    case ST_F16: return cpu_f16(cpu_rd16(p + 2 * i));
    case ST_BF16: return cpu_bf16(cpu_rd16(p + 2 * i));
    default: memcpy(&f, p + 4 * i, 4); return f;
    }
}

/* Affine formats, and only they, have biases (weights.c checks that at open). */
int cpu_mlx_wants_q16(const runtime_tensor *w) { return w->biases != NULL; }

/* sum over the 32 codes of block `b` (codes b*32 .. b*32+31 of the row) times xq; the path's
 * own int4 / int8 block sums where it has them (NEON) */
static int block_sum(const cpu_kernels *k, const uint8_t *codes, int bits, int b, const int16_t *xq,
                     uint64_t row_bytes)
{
    int s = 0;

    if (bits == 4 && k->mlx_block4)
        return k->mlx_block4(codes + 16 * b, xq);
    if (bits == 8 && k->mlx_block8)
        return k->mlx_block8(codes + 32 * b, xq);
    if (bits == 4) {
        const uint8_t *c = codes + 16 * b;
        for (int l = 0; l < 16; l++)
            s += (c[l] & 15) * xq[2 * l] + (c[l] >> 4) * xq[2 * l + 1];
        return s;
    }
    if (bits == 8) {
        const uint8_t *c = codes + 32 * b;
        for (int l = 0; l < 32; l++)
            s += c[l] * xq[l];
        return s;
    }
    for (int l = 0; l < 32; l++) {
        uint64_t bit = (uint64_t)(32 * b + l) * (uint64_t)bits, byte = bit / 8;
        unsigned v = codes[byte] | (byte + 1 < row_bytes ? (unsigned)codes[byte + 1] << 8 : 0u);
        s += (int)((v >> (bit % 8)) & ((1u << bits) - 1)) * xq[l];
    }
    return s;
}

static float dot_affine(const runtime_tensor *w, uint64_t row, const cpu_q16 *x, int cols)
{
    uint64_t row_bytes = (uint64_t)cols * (uint64_t)w->bits / 8;
    const uint8_t *codes = (const uint8_t *)w->data + row * row_bytes;
    size_t ng = (size_t)(cols / w->group_size), bpg = (size_t)(w->group_size / QK);
    const cpu_kernels *k = cpu_kernels_get();
    float s = 0.0f;

    for (size_t g = 0; g < ng; g++) {
        float sq = 0.0f, sx = 0.0f;
        for (size_t b = g * bpg; b < (g + 1) * bpg; b++) {
            sq += x[b].d * (float)block_sum(k, codes, w->bits, (int)b, x[b].q, row_bytes);
            sx += x[b].s;
        }
        s += scale_at(w->scales, w->scale_dtype, row * ng + g) * sq + scale_at(w->biases, w->scale_dtype, row * ng + g) * sx;
    }
    return s;
}

static float dot_fp(const runtime_tensor *w, uint64_t row, const float *x, int cols)
{
    float buf[FP_CHUNK], s = 0.0f;
    size_t ng = (size_t)(cols / w->group_size), ss = st_dtype_size((st_dtype)w->scale_dtype);
    const uint8_t *codes = (const uint8_t *)w->data + row * ((uint64_t)cols * (uint64_t)w->bits / 8);
    const uint8_t *scales = (const uint8_t *)w->scales + row * ng * ss;
    int chunk = FP_CHUNK - FP_CHUNK % w->group_size;

    for (int c0 = 0; c0 < cols; c0 += chunk) {
        int n = cols - c0 < chunk ? cols - c0 : chunk;
        /* format, group and dtype were checked at open: this cannot fail */
        quant_dequantize_row(w->quant_type, codes + (size_t)c0 * (size_t)w->bits / 8,
                             scales + (size_t)(c0 / w->group_size) * ss, NULL, (st_dtype)w->scale_dtype, w->group_size,
                             (size_t)n, buf);
        for (int i = 0; i < n; i++)
            s += buf[i] * x[c0 + i];
    }
    return s;
}

float cpu_mlx_dot(const runtime_tensor *w, uint64_t row, const void *x, int cols)
{
    return cpu_mlx_wants_q16(w) ? dot_affine(w, row, x, cols) : dot_fp(w, row, x, cols);
}
