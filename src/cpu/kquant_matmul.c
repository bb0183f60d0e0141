/* kquant_matmul.c: the matmul, dot and row lookup of the types in kquant_int.h, entered from one
 * hook in cpu.c. Rows are split over the pool's threads in tiles of 16 that stay in cache while
 * every token of the batch passes over them; activations are quantized once per matmul. */
#include <math.h>
#include <stdlib.h>

#include "quant/quant.h"
#include "cpu/kernels.h"
#include "cpu/kquant_int.h"

int cpu_ext_type(int type)
{
    return type == RUNTIME_TYPE_MLX || cpu_kq_dot_scalar(type) != NULL;
}

/* The dot of the selected path: on x86 AVX2 whenever cpu.c chose a SIMD path (they all imply
 * AVX2); on AArch64 the NEON one where there is one. */
static cpu_dot_fn kq_dot(int type)
{
    const cpu_kernels *k = cpu_kernels_get();
    cpu_dot_fn f = NULL;

    if (k != cpu_kernels_scalar() && k != cpu_kernels_vnni_emul())   /* vnni-emul runs where AVX2 may not */
        f = strncmp(k->name, "neon", 4) == 0 ? cpu_kq_dot_neon(k, type) : cpu_kq_dot_avx2(type);

    return f ? f : cpu_kq_dot_scalar(type);
}

static int wants_q16(const runtime_tensor *w)
{
    return w->type != RUNTIME_TYPE_MLX || cpu_mlx_wants_q16(w);
}

typedef struct ext_job {
    float *y;
    const uint8_t *x;
    size_t x_stride;
    const runtime_tensor *w;
    size_t w_stride;
    int n_tok, rows, cols;
    cpu_dot_fn dot;   /* NULL: MLX */
} ext_job;

#define ROW_TILE 16

static void ext_task(void *ctx, int ith, int nth)
{
    const ext_job *j = ctx;
    int chunk = (j->rows + nth - 1) / nth, r0 = ith * chunk, r1 = r0 + chunk < j->rows ? r0 + chunk : j->rows;
    const uint8_t *wd = j->w->data;

    for (int rt = r0; rt < r1; rt += ROW_TILE) {
        int re = rt + ROW_TILE < r1 ? rt + ROW_TILE : r1;
        for (int t = 0; t < j->n_tok; t++) {
            const uint8_t *x = j->x + (size_t)t * j->x_stride;
            float *y = j->y + (size_t)t * (size_t)j->rows;
            for (int r = rt; r < re; r++)
                y[r] = j->dot ? j->dot(x, wd + (size_t)r * j->w_stride, j->cols)
                              : cpu_mlx_dot(j->w, (uint64_t)r, x, j->cols);
        }
    }
}

void cpu_ext_matmul(cpu_pool *p, float *y, const float *x, int n_tok, const runtime_tensor *w, void *scratch)
{
    ext_job j = { .y = y, .w = w, .n_tok = n_tok, .rows = (int)w->shape[0], .cols = (int)w->shape[w->n_dims - 1] };
    uint64_t row_bytes = 0;

    if (w->type != RUNTIME_TYPE_MLX) {
        ggml_row_nbytes(&row_bytes, w->type, (uint64_t)j.cols);
        j.w_stride = (size_t)row_bytes;
        j.dot = kq_dot(w->type);
    }
    if (wants_q16(w)) {
        int nb = j.cols / QK;
        for (int t = 0; t < n_tok; t++)
            cpu_quantize_q16((cpu_q16 *)scratch + (size_t)t * nb, x + (size_t)t * j.cols, j.cols);
        j.x = scratch;
        j.x_stride = (size_t)nb * sizeof(cpu_q16);
    } else {
        j.x = (const uint8_t *)x;
        j.x_stride = (size_t)j.cols * sizeof(float);
    }
    cpu_pool_run(p, ext_task, &j);
}

float cpu_ext_dot_row(const runtime_tensor *w, uint64_t row, const float *x)
{
    int cols = (int)w->shape[w->n_dims - 1];
    uint64_t row_bytes = 0;
    cpu_q16 *xq;
    float r;

    if (!wants_q16(w))
        return cpu_mlx_dot(w, row, x, cols);
    xq = malloc((size_t)(cols / QK) * sizeof *xq);   /* tests only */
    if (!xq)
        return NAN;
    cpu_quantize_q16(xq, x, cols);
    if (w->type == RUNTIME_TYPE_MLX) {
        r = cpu_mlx_dot(w, row, xq, cols);
    } else {
        ggml_row_nbytes(&row_bytes, w->type, (uint64_t)cols);
        r = kq_dot(w->type)(xq, (const uint8_t *)w->data + row * row_bytes, cols);
    }
    free(xq);
    return r;
}

void cpu_ext_tensor_row(float *out, const runtime_tensor *w, uint64_t row)
{
    uint64_t cols = w->shape[w->n_dims - 1], row_bytes = 0;

    if (w->type == RUNTIME_TYPE_MLX) {
        size_t ng = (size_t)(cols / (uint64_t)w->group_size), ss = st_dtype_size((st_dtype)w->scale_dtype);
        /* the format and group were checked at open, so this cannot fail */
        quant_dequantize_row(w->quant_type, (const uint8_t *)w->data + row * (cols * (uint64_t)w->bits / 8),
                             (const uint8_t *)w->scales + row * ng * ss,
                             w->biases ? (const uint8_t *)w->biases + row * ng * ss : NULL,
                             (st_dtype)w->scale_dtype, w->group_size, (size_t)cols, out);
        return;
    }
    if (!cpu_ext_type(w->type)) {
        cpu_tensor_row(out, w, row);
        return;
    }
    ggml_row_nbytes(&row_bytes, w->type, cols);
    quant_dequantize_row(ggml_type_name(w->type), (const uint8_t *)w->data + row * row_bytes, NULL, NULL, ST_F32, 0,
                         (size_t)cols, out);
}
