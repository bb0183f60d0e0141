/* mlx_matmul.c: row dot products of MLX-quantized weights (BACKEND_TYPE_MLX, runtime.h).
 *
 * Affine (int2 .. int8): w = scale_g * q + bias_g, so over a group g
 *     sum_i w_i x_i = scale_g * sum_i q_i x_i + bias_g * sum_i x_i,
 * and with x in cpu_q16 blocks of 32 (groups of 32, 64, 128 hold whole blocks) each block costs
 * one integer sum of codes times 16-bit activations plus its stored block sum: a real quantized
 * dot product for every bit width. 4 and 8 bits read whole nibbles and bytes (AVX2 when the
 * path allows); 2, 3, 5, 6 bits take the code at bit i * bits of the row's stream.
 * fp formats (mxfp4, nvfp4, mxfp8): the generic path. A few groups at a time are dequantized by
 * src/quant into a stack buffer and dotted with the f32 activations. */
#include <math.h>
#include <stdlib.h>
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
int cpu_mlx_wants_q16(const backend_tensor *w) { return w->biases != NULL; }

/* sum over the 32 codes of block `b` (codes b*32 .. b*32+31 of the row) times xq; the path's
 * own int4 / int8 block sums where it has them (NEON) */
static int block_sum(const cpu_path *k, const uint8_t *codes, int bits, int b, const int16_t *xq,
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

static float dot_affine(const backend_tensor *w, uint64_t row, const cpu_q16 *x, int cols)
{
    uint64_t row_bytes = (uint64_t)cols * (uint64_t)w->bits / 8;
    const uint8_t *codes = (const uint8_t *)w->data + row * row_bytes;
    size_t ng = (size_t)(cols / w->group_size), bpg = (size_t)(w->group_size / QK);
    const cpu_path *k = cpu_path_get();
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

static float dot_fp(const backend_tensor *w, uint64_t row, const float *x, int cols)
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

float cpu_mlx_dot(const backend_tensor *w, uint64_t row, const void *x, int cols)
{
    return cpu_mlx_wants_q16(w) ? dot_affine(w, row, x, cols) : dot_fp(w, row, x, cols);
}

/* ---------------------------------------------------------------- matmul (cpu.c's hook: MLX weights
 * carry their own scales, biases and group size, which a path's type table cannot take). Rows are
 * split over the pool's threads in tiles of 16 that stay in cache while every token of the batch
 * passes over them; activations are quantized once per matmul. */

typedef struct mlx_job {
    float *y;
    const uint8_t *x;
    size_t x_stride;
    const backend_tensor *w;
    int n_tok, rows, cols;
} mlx_job;

#define ROW_TILE 16

static void mlx_task(void *ctx, int ith, int nth)
{
    const mlx_job *j = ctx;
    int chunk = (j->rows + nth - 1) / nth, r0 = ith * chunk, r1 = r0 + chunk < j->rows ? r0 + chunk : j->rows;

    for (int rt = r0; rt < r1; rt += ROW_TILE) {
        int re = rt + ROW_TILE < r1 ? rt + ROW_TILE : r1;
        for (int t = 0; t < j->n_tok; t++) {
            const uint8_t *x = j->x + (size_t)t * j->x_stride;
            float *y = j->y + (size_t)t * (size_t)j->rows;
            for (int r = rt; r < re; r++)
                y[r] = cpu_mlx_dot(j->w, (uint64_t)r, x, j->cols);
        }
    }
}

void cpu_mlx_matmul(cpu_pool *p, float *y, const float *x, int n_tok, const backend_tensor *w, void *scratch)
{
    mlx_job j = { .y = y, .w = w, .n_tok = n_tok, .rows = (int)w->shape[0], .cols = (int)w->shape[w->n_dims - 1] };

    if (cpu_mlx_wants_q16(w)) {
        int nb = j.cols / QK;
        for (int t = 0; t < n_tok; t++)
            cpu_quantize_q16((cpu_q16 *)scratch + (size_t)t * nb, x + (size_t)t * j.cols, j.cols);
        j.x = scratch;
        j.x_stride = (size_t)nb * sizeof(cpu_q16);
    } else {
        j.x = (const uint8_t *)x;
        j.x_stride = (size_t)j.cols * sizeof(float);
    }
    cpu_pool_run(p, mlx_task, &j);
}

float cpu_mlx_dot_row(const backend_tensor *w, uint64_t row, const float *x)
{
    int cols = (int)w->shape[w->n_dims - 1];
    cpu_q16 *xq;
    float r;

    if (!cpu_mlx_wants_q16(w))
        return cpu_mlx_dot(w, row, x, cols);
    xq = malloc((size_t)(cols / QK) * sizeof *xq);   /* tests only */
    if (!xq)
        return NAN;
    cpu_quantize_q16(xq, x, cols);
    r = cpu_mlx_dot(w, row, xq, cols);
    free(xq);
    return r;
}
