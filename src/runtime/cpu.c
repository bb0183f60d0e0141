/* cpu.c: the CPU backend: path selection, and the backend operations built on the row kernels.
 * Matmuls split the weight rows across the pool's threads; attention splits (token, head)
 * pairs. Everything else is cheap next to the matmuls and runs on the calling thread. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <strings.h>

#include "runtime/runtime_int.h"
#include "runtime/kquant_int.h"   /* K-quants, IQ4, MLX: their own matmul, hooked below */

static const rt_kernels *selected;
static pthread_once_t select_once = PTHREAD_ONCE_INIT;

static int cpu_has_avx2(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    return rt_kernels_avx2() && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
           __builtin_cpu_supports("f16c");
#else
    return 0;
#endif
}

int runtime_cpu_select(const char *path)
{
    if (!path || !*path || strcasecmp(path, "auto") == 0) {
        selected = cpu_has_avx2() ? rt_kernels_avx2() : rt_kernels_scalar();
        return 0;
    }
    if (strcasecmp(path, "scalar") == 0) {
        selected = rt_kernels_scalar();
        return 0;
    }
    if (strcasecmp(path, "avx2") == 0) {
        if (!cpu_has_avx2())
            return ms_err(MS_EUNSUPPORTED, "cpu path 'avx2': not supported by this cpu or build");
        selected = rt_kernels_avx2();
        return 0;
    }
    return ms_err(MS_EINVALID, "cpu path '%s': unknown; expected auto, scalar or avx2", path);
}

static void select_default(void)
{
    /* a bad $MSTORE_CPU falls back to auto rather than failing every later call */
    if (!selected && runtime_cpu_select(getenv("MSTORE_CPU")) < 0)
        runtime_cpu_select(NULL);
}

const rt_kernels *rt_kernels_get(void)
{
    pthread_once(&select_once, select_default);
    return selected;
}

const char *runtime_cpu_name(void) { return rt_kernels_get()->name; }

static int is_block_type(int type)
{
    return type == GGML_TYPE_Q8_0 || type == GGML_TYPE_Q4_0 || type == GGML_TYPE_Q4_1 ||
           type == GGML_TYPE_Q5_0 || type == GGML_TYPE_Q5_1;
}

int runtime_type_supported(int type)
{
    return type == GGML_TYPE_F32 || type == GGML_TYPE_F16 || type == GGML_TYPE_BF16 || is_block_type(type) ||
           rt_ext_type(type);
}

size_t runtime_matmul_scratch(int n_tok, int cols)
{
    return (size_t)n_tok * (size_t)(cols / QK + 1) * sizeof(rt_q16);
}

size_t runtime_attention_scratch(int n_ctx, int n_threads)
{
    return (size_t)n_ctx * (size_t)n_threads * sizeof(float);
}

/* ---------------------------------------------------------------- matmul */

typedef struct mm_job {
    float *y;
    const uint8_t *x, *w;
    size_t x_stride, w_stride;   /* bytes per activation row / weight row */
    int n_tok, rows, cols;
    rt_dot_fn dot;
} mm_job;

#define ROW_TILE 16

static void mm_task(void *ctx, int ith, int nth)
{
    const mm_job *j = ctx;
    int chunk = (j->rows + nth - 1) / nth, r0 = ith * chunk, r1 = r0 + chunk;

    if (r1 > j->rows)
        r1 = j->rows;
    /* a tile of weight rows stays in cache while every token passes over it */
    for (int rt = r0; rt < r1; rt += ROW_TILE) {
        int re = rt + ROW_TILE < r1 ? rt + ROW_TILE : r1;
        for (int t = 0; t < j->n_tok; t++) {
            const uint8_t *x = j->x + (size_t)t * j->x_stride;
            float *y = j->y + (size_t)t * (size_t)j->rows;
            for (int r = rt; r < re; r++)
                y[r] = j->dot(x, j->w + (size_t)r * j->w_stride, j->cols);
        }
    }
}

static void cpu_matmul(runtime_pool *p, float *y, const float *x, int n_tok, const runtime_tensor *w,
                       void *scratch)
{
    if (rt_ext_type(w->type)) {   /* kquant_*.c, mlx_*.c */
        rt_ext_matmul(p, y, x, n_tok, w, scratch);
        return;
    }
    const rt_kernels *k = rt_kernels_get();
    mm_job j = { .y = y, .w = w->data, .n_tok = n_tok, .cols = (int)w->shape[w->n_dims - 1],
                 .rows = (int)w->shape[0], .dot = k->dot[w->type] };
    uint64_t row_bytes = 0;

    ggml_row_nbytes(&row_bytes, w->type, (uint64_t)j.cols);
    j.w_stride = (size_t)row_bytes;
    if (is_block_type(w->type)) {
        rt_q16 *xq = scratch;
        int nb = j.cols / QK;
        for (int t = 0; t < n_tok; t++)
            rt_quantize_q16(xq + (size_t)t * nb, x + (size_t)t * j.cols, j.cols);
        j.x = scratch;
        j.x_stride = (size_t)nb * sizeof(rt_q16);
    } else {
        j.x = (const uint8_t *)x;
        j.x_stride = (size_t)j.cols * sizeof(float);
    }
    rt_pool_run(p, mm_task, &j);
}

float runtime_dot_row(const runtime_tensor *w, uint64_t row, const float *x)
{
    if (rt_ext_type(w->type))   /* kquant_*.c, mlx_*.c */
        return rt_ext_dot_row(w, row, x);
    const rt_kernels *k = rt_kernels_get();
    int cols = (int)w->shape[w->n_dims - 1];
    uint64_t row_bytes = 0;
    const uint8_t *wr;
    float r;

    ggml_row_nbytes(&row_bytes, w->type, (uint64_t)cols);
    wr = (const uint8_t *)w->data + row * row_bytes;
    if (!is_block_type(w->type))
        return k->dot[w->type](x, wr, cols);
    rt_q16 *xq = malloc((size_t)(cols / QK) * sizeof *xq);   /* tests only */
    if (!xq)
        return NAN;
    rt_quantize_q16(xq, x, cols);
    r = k->dot[w->type](xq, wr, cols);
    free(xq);
    return r;
}

/* ---------------------------------------------------------------- elementwise */

static void cpu_rms_norm(float *y, const float *x, const float *w, int n_tok, int dim, float eps)
{
    for (int t = 0; t < n_tok; t++) {
        const float *xt = x + (size_t)t * dim;
        float *yt = y + (size_t)t * dim;
        double ss = 0.0;
        float sc;

        for (int i = 0; i < dim; i++)
            ss += (double)xt[i] * xt[i];
        sc = (float)(1.0 / sqrt(ss / dim + eps));
        for (int i = 0; i < dim; i++)
            yt[i] = xt[i] * sc * w[i];
    }
}

void runtime_rope_freqs(double *freqs, const runtime_config *c)
{
    double lo_wavelen = 0, hi_wavelen = 0;

    if (c->rope_scaling == RUNTIME_ROPE_LLAMA3) {
        lo_wavelen = c->rope_orig_ctx / c->rope_low_freq_factor;
        hi_wavelen = c->rope_orig_ctx / c->rope_high_freq_factor;
    }
    for (int i = 0; i < c->n_rot / 2; i++) {
        double f = pow(c->rope_theta, -2.0 * i / c->n_rot);

        if (c->rope_scaling == RUNTIME_ROPE_LINEAR) {
            f /= c->rope_factor;
        } else if (c->rope_scaling == RUNTIME_ROPE_LLAMA3) {
            /* Llama 3.1: long wavelengths are slowed by `factor`, short ones kept, and the band
             * between blends the two linearly in ctx / wavelength */
            double wavelen = 2.0 * M_PI / f;
            if (wavelen > lo_wavelen) {
                f /= c->rope_factor;
            } else if (wavelen >= hi_wavelen) {
                double smooth = (c->rope_orig_ctx / wavelen - c->rope_low_freq_factor) /
                                (c->rope_high_freq_factor - c->rope_low_freq_factor);
                f = (1.0 - smooth) * f / c->rope_factor + smooth * f;
            }
        }
        freqs[i] = f;
    }
}

static void cpu_rope(float *x, int n_tok, int n_heads, int head_dim, int n_rot, int pos0,
                     const double *freqs, int interleaved)
{
    float cs[512], sn[512];
    int half = n_rot / 2;

    for (int t = 0; t < n_tok; t++) {
        for (int i = 0; i < half && i < 512; i++) {
            double a = (double)(pos0 + t) * freqs[i];
            cs[i] = (float)cos(a);
            sn[i] = (float)sin(a);
        }
        for (int h = 0; h < n_heads; h++) {
            float *v = x + ((size_t)t * n_heads + h) * head_dim;
            for (int i = 0; i < half && i < 512; i++) {
                int a = interleaved ? 2 * i : i, b = interleaved ? 2 * i + 1 : i + half;
                float x0 = v[a], x1 = v[b];
                v[a] = x0 * cs[i] - x1 * sn[i];
                v[b] = x0 * sn[i] + x1 * cs[i];
            }
        }
    }
}

static void cpu_softmax(float *x, int n)
{
    float mx = -INFINITY, sum = 0.0f;

    for (int i = 0; i < n; i++)
        mx = fmaxf(mx, x[i]);
    for (int i = 0; i < n; i++) {
        x[i] = expf(x[i] - mx);
        sum += x[i];
    }
    for (int i = 0; i < n; i++)
        x[i] /= sum;
}

static void cpu_swiglu(float *g, const float *u, size_t n)
{
    for (size_t i = 0; i < n; i++)
        g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

static void cpu_add(float *y, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] += x[i];
}

/* ---------------------------------------------------------------- attention */

typedef struct att_job {
    float *out;
    const float *q;
    const void *k, *v;
    int kv_f16, n_tok, pos0, n_heads, n_kv_heads, head_dim, n_ctx;
    float *scratch;
} att_job;

static void att_task(void *ctx, int ith, int nth)
{
    const att_job *j = ctx;
    const rt_kernels *k = rt_kernels_get();
    int n_items = j->n_tok * j->n_heads, chunk = (n_items + nth - 1) / nth;
    int i0 = ith * chunk, i1 = i0 + chunk < n_items ? i0 + chunk : n_items;
    int hd = j->head_dim, kv_dim = j->n_kv_heads * hd, group = j->n_heads / j->n_kv_heads;
    float *sc = j->scratch + (size_t)ith * j->n_ctx, scale = 1.0f / sqrtf((float)hd);

    for (int it = i0; it < i1; it++) {
        int t = it / j->n_heads, h = it % j->n_heads, kvo = (h / group) * hd, n_pos = j->pos0 + t + 1;
        const float *q = j->q + (size_t)t * j->n_heads * hd + (size_t)h * hd;
        float *o = j->out + (size_t)t * j->n_heads * hd + (size_t)h * hd;

        for (int p = 0; p < n_pos; p++) {
            size_t off = (size_t)p * kv_dim + kvo;
            sc[p] = scale * (j->kv_f16 ? k->dot_f32_f16(q, (const uint16_t *)j->k + off, hd)
                                       : k->dot_f32(q, (const float *)j->k + off, hd));
        }
        cpu_softmax(sc, n_pos);
        memset(o, 0, (size_t)hd * sizeof *o);
        for (int p = 0; p < n_pos; p++) {
            size_t off = (size_t)p * kv_dim + kvo;
            if (j->kv_f16)
                k->axpy_f16(o, sc[p], (const uint16_t *)j->v + off, hd);
            else
                k->axpy_f32(o, sc[p], (const float *)j->v + off, hd);
        }
    }
}

static void cpu_attention(runtime_pool *p, float *out, const float *q, const void *k, const void *v,
                          int kv_f16, int n_tok, int pos0, int n_heads, int n_kv_heads, int head_dim,
                          float *scratch, int n_ctx)
{
    att_job j = { out, q, k, v, kv_f16, n_tok, pos0, n_heads, n_kv_heads, head_dim, n_ctx, scratch };

    rt_pool_run(p, att_task, &j);
}

static const runtime_backend cpu_backend = {
    .name = "cpu",
    .matmul = cpu_matmul,
    .rms_norm = cpu_rms_norm,
    .rope = cpu_rope,
    .attention = cpu_attention,
    .softmax = cpu_softmax,
    .swiglu = cpu_swiglu,
    .add = cpu_add,
};

const runtime_backend *runtime_backend_cpu(void) { return &cpu_backend; }
