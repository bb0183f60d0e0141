/* test_vulkan.c: the Vulkan backend (src/vulkan) against the CPU backend, the definition of
 * every op (backend.h invariant 2). Every op kind on random data through the seam, each
 * weight type of the matmul and the embedding, the refusals, the device choice, and whole
 * models: stories260K (f32, f16, mixed) in the store giving the CPU's greedy tokens, and
 * first-step logits within 1e-4 relative (max |gpu - cpu| / max |cpu|) on a model of every
 * weight type. Runs on any Vulkan device; CI has lavapipe (mesa-vulkan-drivers). Without the
 * Vulkan backend built in, or without a loader or device, each test says so and skips. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "backend/backend.h"
#include "cpu/cpu.h"
#include "cpu/kquant_int.h"
#include "helpers/fixture.h"
#include "runtime/runtime.h"
#include "import/import.h"
#include "quant/quant.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint32_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 32);
}
static float unif(void)
{
    return (float)rnd() / 4294967296.0f * 2.0f - 1.0f;
}

/* The vulkan backend, or NULL after printing why it cannot run here. */
static backend *open_vulkan(void)
{
    backend *b = NULL;
    int rc = backend_open(&b, "vulkan", NULL);

    if (rc == MS_EUNSUPPORTED) {
        printf("skipped: %s\n", ms_err_msg());
        return NULL;
    }
    ck_assert_msg(rc == 0, "%s", ms_err_msg());
    return b;
}

static backend *open_cpu(void)
{
    backend *b = NULL;
    backend_opts o = {.n_threads = 2};

    ck_assert_int_eq(backend_open(&b, "cpu", &o), 0);
    return b;
}

static void reserve(backend *b, int rows, int cols, int ctx)
{
    backend_limits l = {.max_rows = rows, .max_cols = cols, .n_ctx = ctx, .heads = 16};
    ck_assert_int_eq(backend_reserve(b, &l), 0);
}

/* ---------------------------------------------------------------- tensors in page-aligned memory */

/* Weights live in an anonymous mapping, as blobs do, so that the device imports them. */
typedef struct tensor {
    backend_tensor t;
    uint8_t *map;
    size_t map_n;
} tensor;

static uint8_t *map_new(tensor *x, size_t n)
{
    x->map_n = (n + 4095) & ~(size_t)4095;
    x->map = mmap(NULL, x->map_n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(x->map, MAP_FAILED);
    x->t.map = x->map;
    x->t.map_nbytes = x->map_n;
    return x->map;
}

static void tensor_free(tensor *x)
{
    if (x->map)
        munmap(x->map, x->map_n);
    x->map = NULL;
}

static int is_kquant(int type)
{
    return type == GGML_TYPE_Q4_K || type == GGML_TYPE_Q5_K || type == GGML_TYPE_Q6_K;
}
static int is_float(int type)
{
    return type == GGML_TYPE_F32 || type == GGML_TYPE_F16 || type == GGML_TYPE_BF16;
}

/* Random weights of a ggml type, with realistic block scales, `skew` bytes past a page start so
 * that unaligned tensor data is covered. */
static void make_ggml(tensor *x, int type, int rows, int cols, size_t skew)
{
    uint64_t row_bytes;
    uint8_t *buf;

    ck_assert_int_eq(ggml_row_nbytes(&row_bytes, type, (uint64_t)cols), 0);
    buf = map_new(x, row_bytes * rows + skew) + skew;
    x->t = (backend_tensor){.name = "blk.0.ffn_up.weight",
                            .type = type,
                            .n_dims = 2,
                            .shape = {(uint64_t)rows, (uint64_t)cols},
                            .data = buf,
                            .nbytes = row_bytes * rows,
                            .map = x->map,
                            .map_nbytes = x->map_n};
    if (is_float(type)) {
        for (uint64_t i = 0; i < (uint64_t)rows * cols; i++) {
            float f = unif();
            uint32_t bits;
            uint16_t h = cpu_f32_to_f16(f);
            memcpy(&bits, &f, 4);
            if (type == GGML_TYPE_F32)
                memcpy(buf + 4 * i, &f, 4);
            else if (type == GGML_TYPE_F16)
                memcpy(buf + 2 * i, &h, 2);
            else
                memcpy(buf + 2 * i, (uint16_t[]){(uint16_t)(bits >> 16)}, 2);
        }
        return;
    }
    int kq = is_kquant(type), bb = (int)(row_bytes / (uint64_t)(cols / (kq ? 256 : 32)));
    for (uint8_t *p = buf; p < buf + row_bytes * rows; p += bb) {
        uint16_t h = cpu_f32_to_f16(0.01f + 0.025f * (unif() + 1.0f));
        for (int j = 0; j < bb; j++)
            p[j] = (uint8_t)rnd();
        if (kq) {
            h = cpu_f32_to_f16((0.01f + 0.025f * (unif() + 1.0f)) / 16);
            memcpy(p + (type == GGML_TYPE_Q6_K ? 208 : 0), &h, 2);
            if (type != GGML_TYPE_Q6_K) {
                h = cpu_f32_to_f16(0.002f * (unif() + 1.0f));
                memcpy(p + 2, &h, 2);
            }
            continue;
        }
        memcpy(p, &h, 2);
        if (type == GGML_TYPE_Q4_1 || type == GGML_TYPE_Q5_1) {
            h = cpu_f32_to_f16(0.1f * unif());
            memcpy(p + 2, &h, 2);
        }
        if (type == GGML_TYPE_Q8_0)
            for (int j = 2; j < bb; j++)
                if (p[j] == 0x80)
                    p[j] = 0x81;
    }
}

/* MLX affine weights: codes, then f16 (or bf16 / f32) scales and biases, in one mapping. */
static void make_mlx(tensor *x, int bits, int group, int rows, int cols, int sdt)
{
    size_t code_bytes = (size_t)rows * cols * bits / 8, ng = (size_t)rows * (cols / group);
    size_t ssz = sdt == ST_F32 ? 4 : 2;
    uint8_t *buf = map_new(x, code_bytes + 2 * ng * ssz + 64), *sc = buf + code_bytes + 6, *bi = sc + ng * ssz + 2;

    for (size_t i = 0; i < code_bytes; i++)
        buf[i] = (uint8_t)rnd();
    for (size_t g = 0; g < ng; g++) {
        float s = 0.01f * (1.5f + unif()), b = -0.05f * (1.5f + unif());
        ck_assert_int_eq(quant_from_f32(sc + g * ssz, sdt, &s, 1), 0);
        ck_assert_int_eq(quant_from_f32(bi + g * ssz, sdt, &b, 1), 0);
    }
    x->t = (backend_tensor){.name = "blk.0.ffn_up.weight",
                            .type = BACKEND_TYPE_MLX,
                            .n_dims = 2,
                            .shape = {(uint64_t)rows, (uint64_t)cols},
                            .data = buf,
                            .nbytes = code_bytes,
                            .quant_type = bits == 4 ? "int4" : "int8",
                            .bits = bits,
                            .group_size = group,
                            .scale_dtype = sdt,
                            .scales = sc,
                            .biases = bi,
                            .map = x->map,
                            .map_nbytes = x->map_n};
}

/* A 1-D F32 / F16 / BF16 weight of random values near 1 (norm weights, biases). */
static void make_vec(tensor *x, int type, int n)
{
    uint8_t *buf = map_new(x, (size_t)n * 4 + 8) + 2 * (type != GGML_TYPE_F32);

    for (int i = 0; i < n; i++) {
        float f = 1.0f + 0.5f * unif();
        uint32_t bits;
        memcpy(&bits, &f, 4);
        if (type == GGML_TYPE_F32)
            memcpy(buf + 4 * i, &f, 4);
        else if (type == GGML_TYPE_F16)
            memcpy(buf + 2 * i, (uint16_t[]){cpu_f32_to_f16(f)}, 2);
        else
            memcpy(buf + 2 * i, (uint16_t[]){(uint16_t)(bits >> 16)}, 2);
    }
    x->t = (backend_tensor){.name = "blk.0.attn_norm.weight",
                            .type = type,
                            .n_dims = 1,
                            .shape = {(uint64_t)n},
                            .data = buf,
                            .nbytes = (uint64_t)n * (type == GGML_TYPE_F32 ? 4 : 2),
                            .map = x->map,
                            .map_nbytes = x->map_n};
}

/* ---------------------------------------------------------------- running one sequence on both */

/* A pair of backends and the buffers of a test, made alike on both. */
typedef struct pair {
    backend *be[2]; /* cpu, vulkan */
    backend_buf *buf[2][16];
    int n_buf;
    tensor vals[16]; /* the weights pair_buf filled buffers from: imported, so kept until close */
} pair;

static int pair_open(pair *p, int rows, int cols, int ctx)
{
    memset(p, 0, sizeof *p);
    if (!(p->be[1] = open_vulkan()))
        return 0;
    p->be[0] = open_cpu();
    for (int i = 0; i < 2; i++)
        reserve(p->be[i], rows, cols, ctx);
    return 1;
}

static void pair_close(pair *p)
{
    backend_close(p->be[0]);
    backend_close(p->be[1]);
    for (int i = 0; i < p->n_buf; i++)
        tensor_free(&p->vals[i]);
}

/* Buffer k on both, holding the n values `vals` through a STORE from a CPU staging buffer on the
 * CPU side and a read-back comparison on the device side. */
static int pair_buf_of(pair *p, const float *vals, size_t n, int dtype)
{
    int k = p->n_buf++;

    ck_assert_int_lt(k, 16);
    backend_buf *stage[2];
    backend_seq seq;
    backend_op ops[1];

    for (int b = 0; b < 2; b++) {
        ck_assert_int_eq(backend_buf_new(&p->buf[b][k], p->be[b], n, dtype, "test"), 0);
        ck_assert_int_eq(backend_buf_new(&stage[b], p->be[b], n, BACKEND_F32, "stage"), 0);
    }
    /* the CPU's host memory takes the values; the device's buffer gets them through an EMBED of
     * an F32 "weight" holding them as one row */
    memcpy(stage[0]->host, vals, n * sizeof *vals);
    tensor *w = &p->vals[k];
    uint8_t *m = map_new(w, n * 4);
    memcpy(m, vals, n * 4);
    w->t = (backend_tensor){.name = "values",
                            .type = GGML_TYPE_F32,
                            .n_dims = 2,
                            .shape = {1, n},
                            .data = m,
                            .nbytes = n * 4,
                            .map = w->map,
                            .map_nbytes = w->map_n};
    const backend_weight *bw;
    ck_assert_int_eq(backend_weight_import(&bw, p->be[1], &w->t), 0);
    int32_t tok = 0;
    seq = (backend_seq){.ops = ops, .cap = 1};
    backend_seq_embed(&seq, backend_at(stage[1], 0), bw, &tok, 1, (int)n);
    ck_assert_int_eq(backend_run(p->be[1], &seq), 0);
    for (int b = 0; b < 2; b++) {
        seq.n = 0;
        backend_seq_store(&seq, backend_at(p->buf[b][k], 0), backend_at(stage[b], 0), (int)n);
        ck_assert_int_eq(backend_run(p->be[b], &seq), 0);
    }
    float *back = malloc(n * sizeof *back);
    ck_assert_int_eq(backend_read(p->be[1], back, backend_at(stage[1], 0), n), 0);
    ck_assert_int_eq(memcmp(back, vals, n * sizeof *vals), 0);
    free(back);
    for (int b = 0; b < 2; b++)
        backend_buf_free(p->be[b], stage[b]);
    return k;
}

/* Buffer k on both, filled with the same random values (scale `amp`). */
static int pair_buf(pair *p, size_t n, int dtype, float amp)
{
    float *vals = malloc(n * sizeof *vals);

    for (size_t i = 0; i < n; i++)
        vals[i] = amp != 0.0f ? amp * unif() : 0.0f; /* not -0.0 */
    int k = pair_buf_of(p, vals, n, dtype);
    free(vals);
    return k;
}

/* Read n f32 elements at off of buffer k from both. */
static void pair_read(pair *p, int k, size_t off, size_t n, float *cpu, float *gpu)
{
    ck_assert_int_eq(backend_read(p->be[0], cpu, backend_at(p->buf[0][k], off), n), 0);
    ck_assert_msg(backend_read(p->be[1], gpu, backend_at(p->buf[1][k], off), n) == 0, "%s", ms_err_msg());
}

/* max |a - b| / max |b| */
static double rel_diff(const float *a, const float *b, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        num = fmax(num, fabs((double)a[i] - b[i]));
        den = fmax(den, fabs((double)b[i]));
    }
    return den > 0 ? num / den : num;
}

/* ---------------------------------------------------------------- ops */

static const int mm_types[] = {GGML_TYPE_F32,  GGML_TYPE_F16,  GGML_TYPE_BF16, GGML_TYPE_Q8_0,
                               GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1,
                               GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K, GGML_TYPE_MXFP4};
#define N_MM_TYPES (int)(sizeof mm_types / sizeof mm_types[0])
#define N_MM_CASES (N_MM_TYPES + 3) /* + MLX int4 (f16 scales), int8 (bf16 scales), int4 (f32, group 64) */

static void make_mxfp4(tensor *x, int rows, int cols, size_t skew);

static void make_case(tensor *w, int i, int rows, int cols)
{
    memset(w, 0, sizeof *w);
    if (i < N_MM_TYPES && mm_types[i] == GGML_TYPE_MXFP4)   /* its own exponents: make_ggml's would be f16 bits */
        make_mxfp4(w, rows, cols, i % 2 ? 6 : 0);
    else if (i < N_MM_TYPES)
        make_ggml(w, mm_types[i], rows, cols, i % 2 ? 6 : 0);
    else if (i == N_MM_TYPES)
        make_mlx(w, 4, 32, rows, cols, ST_F16);
    else if (i == N_MM_TYPES + 1)
        make_mlx(w, 8, 64, rows, cols, ST_BF16);
    else
        make_mlx(w, 4, 64, rows, cols, ST_F32);
}

/* A matmul case on the pair: weight case i, rows x cols; buffer *x of max_n tokens' activations
 * and *y for their outputs. 0 (said) when the device is missing. */
static int mm_open(pair *p, tensor *w, int i, int rows, int cols, int max_n, int *x, int *y)
{
    if (!pair_open(p, max_n, cols, 16))
        return 0;
    make_case(w, i, rows, cols);
    *x = pair_buf(p, (size_t)max_n * cols, BACKEND_F32, 1.0f);
    *y = pair_buf(p, (size_t)max_n * rows, BACKEND_F32, 0);
    return 1;
}

/* Tolerance of a matmul output: the CPU quantizes activations to 16-bit blocks for quantized
 * weights (error <= max|x| / 65534 per element) and both sum in float in different orders, so
 * |gpu - cpu| <= 1e-4 * sum_j |w_j| * max|x| + 1e-6 (the exact dot is within a fraction of that
 * of either; a wrong block layout is off by the size of the weights). */
START_TEST(matmul_matches_the_cpu_on_every_weight_type)
{
    /* 67 rows: not a multiple of the 16-row tile; 256 columns for the K-quants, 172 for floats
     * (a partial 32-block); token counts of the decode kernel (1, 2) and of the tiled one,
     * including a partial 16-token tile */
    static const int ns[] = {1, 2, 3, 37};
    int rows = 67, cols = _i < N_MM_TYPES && is_float(mm_types[_i]) ? 172 : 256, max_n = 37;
    pair p;
    tensor w;
    int x, y;

    if (!mm_open(&p, &w, _i, rows, cols, max_n, &x, &y))
        return;
    const backend_weight *bw[2];
    for (int b = 0; b < 2; b++)
        ck_assert_msg(backend_weight_import(&bw[b], p.be[b], &w.t) == 0, "%s", ms_err_msg());
    float *xs = malloc(sizeof(float) * max_n * cols), *row = malloc(sizeof(float) * cols);
    float *cpu = malloc(sizeof(float) * max_n * rows), *gpu = malloc(sizeof(float) * max_n * rows);
    double *wabs = malloc(sizeof(double) * rows), xmax = 0;
    ck_assert_int_eq(backend_read(p.be[0], xs, backend_at(p.buf[0][x], 0), (size_t)max_n * cols), 0);
    for (int i = 0; i < max_n * cols; i++)
        xmax = fmax(xmax, fabs(xs[i]));
    for (int r = 0; r < rows; r++) {
        cpu_tensor_row(row, &w.t, (uint64_t)r);
        wabs[r] = 0;
        for (int j = 0; j < cols; j++)
            wabs[r] += fabs(row[j]);
    }
    for (size_t c = 0; c < sizeof ns / sizeof ns[0]; c++) {
        backend_op ops[1];
        backend_seq seq = {.ops = ops, .cap = 1};
        double worst = 0;
        for (int b = 0; b < 2; b++) {
            seq.n = 0;
            backend_seq_matmul(&seq, backend_at(p.buf[b][y], 0), backend_at(p.buf[b][x], 0), bw[b], ns[c]);
            ck_assert_msg(backend_run(p.be[b], &seq) == 0, "%s", ms_err_msg());
        }
        pair_read(&p, y, 0, (size_t)ns[c] * rows, cpu, gpu);
        for (int t = 0; t < ns[c]; t++) {
            for (int r = 0; r < rows; r++) {
                double d = fabs((double)gpu[t * rows + r] - cpu[t * rows + r]), tol = 1e-4 * wabs[r] * xmax + 1e-6;
                ck_assert_msg(d <= tol, "case %d, n %d, token %d row %d: gpu %g cpu %g", _i, ns[c], t, r,
                              gpu[t * rows + r], cpu[t * rows + r]);
                worst = fmax(worst, d / tol);
            }
        }
        printf("measured: matmul case %d (%s), n %d: worst |diff| / tolerance %.3g\n", _i,
               _i < N_MM_TYPES ? ggml_type_name(mm_types[_i]) : w.t.quant_type, ns[c], worst);
    }
    free(xs);
    free(row);
    free(cpu);
    free(gpu);
    free(wabs);
    pair_close(&p);
    tensor_free(&w);
}
END_TEST

/* GPU matmul rows on the device alone: one token's row is the same bits whichever kernel the pass's
 * token count picks (matrix-vector for one or two, tiled past them) and wherever the token falls
 * in a tile: matmul.comp's one order of addition, which batching across sequences rests on
 * (test_runtime_batch). 67 rows (a partial 16-row tile), 37 tokens (a partial 16-token tile),
 * columns past one 8-block step of the tile: 300 for floats (a partial last block), else 512. */
START_TEST(matmul_rows_are_the_same_bits_in_any_pass)
{
    static const int runs[][2] = {{1, 0}, {1, 36}, {2, 0}, {2, 17}, {3, 0}, {3, 14}, {5, 30}, {20, 17}};
    int rows = 67, cols = _i < N_MM_TYPES && is_float(mm_types[_i]) ? 300 : 512, max_n = 37;
    pair p;
    tensor w;
    int x, y;

    if (!mm_open(&p, &w, _i, rows, cols, max_n, &x, &y))
        return;
    const backend_weight *bw;
    ck_assert_msg(backend_weight_import(&bw, p.be[1], &w.t) == 0, "%s", ms_err_msg());
    float *all = malloc(sizeof(float) * max_n * rows), *got = malloc(sizeof(float) * max_n * rows);
    for (int c = -1; c < (int)(sizeof runs / sizeof runs[0]); c++) {
        int n = c < 0 ? max_n : runs[c][0], t0 = c < 0 ? 0 : runs[c][1];
        backend_op ops[1];
        backend_seq seq = {.ops = ops, .cap = 1};
        backend_seq_matmul(&seq, backend_at(p.buf[1][y], 0), backend_at(p.buf[1][x], (size_t)t0 * cols), bw, n);
        ck_assert_msg(backend_run(p.be[1], &seq) == 0, "%s", ms_err_msg());
        ck_assert_int_eq(backend_read(p.be[1], c < 0 ? all : got, backend_at(p.buf[1][y], 0), (size_t)n * rows), 0);
        for (int t = 0; c >= 0 && t < n; t++)
            for (int r = 0; r < rows; r++)
                ck_assert_msg(memcmp(&got[t * rows + r], &all[(t0 + t) * rows + r], sizeof(float)) == 0,
                              "case %d: token %d row %d: %a in a pass of %d from token %d, %a in one of %d", _i,
                              t0 + t, r, got[t * rows + r], n, t0, all[(t0 + t) * rows + r], max_n);
    }
    free(all);
    free(got);
    pair_close(&p);
    tensor_free(&w);
}
END_TEST

/* EMBED dequantizes the same rows the CPU does: the same float operations per weight, so within
 * 1e-6 relative (a device may fuse d * q + m into one FMA). */
START_TEST(embedding_rows_match_the_cpu_on_every_weight_type)
{
    int rows = 40, cols = _i < N_MM_TYPES && is_float(mm_types[_i]) ? 172 : 256;
    int32_t toks[5] = {3, 0, 39, 3, 17};
    pair p;
    tensor w;

    if (!pair_open(&p, 5, cols, 16))
        return;
    make_case(&w, _i, rows, cols);
    int y = pair_buf(&p, 5 * (size_t)cols + 3, BACKEND_F32, 0);
    float *cpu = malloc(sizeof(float) * 5 * cols), *gpu = malloc(sizeof(float) * 5 * cols);
    for (int b = 0; b < 2; b++) {
        const backend_weight *bw;
        backend_op ops[1];
        backend_seq seq = {.ops = ops, .cap = 1};
        ck_assert_int_eq(backend_weight_import(&bw, p.be[b], &w.t), 0);
        backend_seq_embed(&seq, backend_at(p.buf[b][y], 3), bw, toks, 5, cols);
        ck_assert_int_eq(backend_run(p.be[b], &seq), 0);
    }
    pair_read(&p, y, 3, 5 * (size_t)cols, cpu, gpu);
    for (int i = 0; i < 5 * cols; i++)
        ck_assert_msg(fabs((double)gpu[i] - cpu[i]) <= 1e-6 * fabs(cpu[i]) + 1e-9, "case %d, element %d: %g vs %g", _i,
                      i, gpu[i], cpu[i]);
    free(cpu);
    free(gpu);
    pair_close(&p);
    tensor_free(&w);
}
END_TEST

/* RMS_NORM over F32, F16 and BF16 weights, in place and not: the device sums squares in float
 * (a tree), the CPU in double: within 1e-5 relative. ADD_ROW (a bias of each type): the same
 * one addition, so within 1e-6. */
START_TEST(rms_norm_and_add_row_match_the_cpu)
{
    static const int vt[] = {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16};
    int n = 6, cols = 200;
    pair p;
    tensor v;

    if (!pair_open(&p, n, cols, 16))
        return;
    memset(&v, 0, sizeof v);
    make_vec(&v, vt[_i], cols);
    int x = pair_buf(&p, (size_t)n * cols, BACKEND_F32, 3.0f), y = pair_buf(&p, (size_t)n * cols + 1, BACKEND_F32, 0);
    int z = pair_buf(&p, (size_t)n * cols + 1, BACKEND_F32, 3.0f);
    float *cpu = malloc(sizeof(float) * n * cols), *gpu = malloc(sizeof(float) * n * cols);
    for (int b = 0; b < 2; b++) {
        const backend_weight *bw;
        backend_op ops[3];
        backend_seq seq = {.ops = ops, .cap = 3};
        ck_assert_int_eq(backend_weight_import(&bw, p.be[b], &v.t), 0);
        backend_seq_rms_norm(&seq, backend_at(p.buf[b][y], 1), backend_at(p.buf[b][x], 0), bw, n, cols, 1e-5f);
        backend_seq_rms_norm(&seq, backend_at(p.buf[b][x], cols), backend_at(p.buf[b][x], cols), bw, n - 1, cols,
                             1e-6f);
        ck_assert_int_eq(backend_run(p.be[b], &seq), 0);
    }
    pair_read(&p, y, 1, (size_t)n * cols, cpu, gpu);
    ck_assert_msg(rel_diff(gpu, cpu, (size_t)n * cols) <= 1e-5, "out of place: %g",
                  rel_diff(gpu, cpu, (size_t)n * cols));
    pair_read(&p, x, 0, (size_t)n * cols, cpu, gpu);
    ck_assert_msg(rel_diff(gpu, cpu, (size_t)n * cols) <= 1e-5, "in place: %g", rel_diff(gpu, cpu, (size_t)n * cols));
    for (int b = 0; b < 2; b++) {
        const backend_weight *bw;
        backend_op ops[1];
        backend_seq seq = {.ops = ops, .cap = 1};
        ck_assert_int_eq(backend_weight_import(&bw, p.be[b], &v.t), 0);
        backend_seq_add_row(&seq, backend_at(p.buf[b][z], 1), bw, n, cols);
        ck_assert_int_eq(backend_run(p.be[b], &seq), 0);
    }
    pair_read(&p, z, 1, (size_t)n * cols, cpu, gpu);
    for (int i = 0; i < n * cols; i++)
        ck_assert_msg(fabs((double)gpu[i] - cpu[i]) <= 1e-6 * fabs(cpu[i]) + 1e-7, "add_row %d: %g vs %g", i, gpu[i],
                      cpu[i]);
    pair_close(&p);
    tensor_free(&v);
    free(cpu);
    free(gpu);
}
END_TEST

/* ROPE in both pair layouts, n_rot below head_dim, at position 4000: the angles come from the
 * host in double like the CPU's, so the rotation is the same four float operations: within
 * 1e-6 of the values' scale. */
START_TEST(rope_matches_the_cpu_in_both_layouts)
{
    int n = 3, heads = 4, hd = 64, n_rot = 48;
    double freqs[24];
    pair p;

    if (!pair_open(&p, n, 256, 16))
        return;
    for (int i = 0; i < n_rot / 2; i++)
        freqs[i] = pow(10000.0, -2.0 * i / n_rot);
    int x = pair_buf(&p, (size_t)n * heads * hd, BACKEND_F32, 2.0f);
    float *cpu = malloc(sizeof(float) * n * heads * hd), *gpu = malloc(sizeof(float) * n * heads * hd);
    for (int b = 0; b < 2; b++) {
        backend_op ops[2];
        backend_seq seq = {.ops = ops, .cap = 2};
        backend_seq_rope(&seq, backend_at(p.buf[b][x], 0), n, heads, hd, n_rot, 4000, freqs, _i);
        backend_seq_rope(&seq, backend_at(p.buf[b][x], 0), n, heads, hd, n_rot, 7, freqs, _i);
        ck_assert_int_eq(backend_run(p.be[b], &seq), 0);
    }
    pair_read(&p, x, 0, (size_t)n * heads * hd, cpu, gpu);
    ck_assert_msg(rel_diff(gpu, cpu, (size_t)n * heads * hd) <= 1e-6, "rope: %g",
                  rel_diff(gpu, cpu, (size_t)n * heads * hd));
    pair_close(&p);
    free(cpu);
    free(gpu);
}
END_TEST

/* STORE to f32 is a copy (exact); to f16 it rounds to nearest even: bit for bit the CPU's, at
 * odd offsets and lengths (the device writes f16 pairs as words), on values that round, tie,
 * overflow to infinity, and fall into f16 subnormals. */
START_TEST(store_converts_to_f16_bit_for_bit)
{
    static const float special[] = {1.0f,           -2.5f,   65504.0f, 65520.0f, 1e6f,     -1e6f,
                                    6.0e-8f,        3.0e-8f, 2.9e-8f,  1.0e-5f,  -6.1e-5f, 1.00048828125f,
                                    1.00146484375f, 0.0f,    -3.0e-6f, 5.96e-8f};
    /* (no -0.0: the read-back through attention adds it to +0) */
    int n = 301;
    pair p;

    if (!pair_open(&p, 4, 64, 16))
        return;
    int src = pair_buf(&p, (size_t)n, BACKEND_F32, 100.0f);
    /* specials through an ADD of zero-based buffers would not be exact; set them via EMBED */
    tensor w;
    memset(&w, 0, sizeof w);
    float *vals = (float *)map_new(&w, sizeof special);
    memcpy(vals, special, sizeof special);
    w.t = (backend_tensor){.name = "specials",
                           .type = GGML_TYPE_F32,
                           .n_dims = 2,
                           .shape = {1, 16},
                           .data = vals,
                           .nbytes = sizeof special,
                           .map = w.map,
                           .map_nbytes = w.map_n};
    int h = pair_buf(&p, (size_t)n + 8, BACKEND_F16, 0), f = pair_buf(&p, (size_t)n + 8, BACKEND_F32, 0);
    uint16_t *hc = malloc(2 * ((size_t)n + 8)), *hg = malloc(2 * ((size_t)n + 8));
    for (int b = 0; b < 2; b++) {
        const backend_weight *bw;
        int32_t tok = 0;
        backend_op ops[4];
        backend_seq seq = {.ops = ops, .cap = 4};
        ck_assert_int_eq(backend_weight_import(&bw, p.be[b], &w.t), 0);
        backend_seq_embed(&seq, backend_at(p.buf[b][src], 40), bw, &tok, 1, 16);
        backend_seq_store(&seq, backend_at(p.buf[b][h], 3), backend_at(p.buf[b][src], 0), n);
        backend_seq_store(&seq, backend_at(p.buf[b][h], 0), backend_at(p.buf[b][src], 7), 2);
        backend_seq_store(&seq, backend_at(p.buf[b][f], 5), backend_at(p.buf[b][src], 0), n);
        ck_assert_int_eq(backend_run(p.be[b], &seq), 0);
    }
    float *cpu = malloc(sizeof(float) * n), *gpu = malloc(sizeof(float) * n);
    pair_read(&p, f, 5, (size_t)n, cpu, gpu);
    ck_assert_int_eq(memcmp(cpu, gpu, sizeof(float) * n), 0);
    /* f16 buffers cannot be read through the seam: the CPU's are host memory; the device's are
     * read back through an attention over one position, whose output is v exactly */
    memcpy(hc, p.buf[0][h]->host, 2 * ((size_t)n + 8));
    {
        int q = pair_buf(&p, 2, BACKEND_F32, 1.0f), o = pair_buf(&p, (size_t)n + 8, BACKEND_F32, 0);
        int z = pair_buf(&p, (size_t)n + 8, BACKEND_F16, 0); /* zero keys: a score of 0, even for an inf value */
        backend_op ops[1];
        backend_seq seq = {.ops = ops, .cap = 1};
        /* one head of head_dim 1 over a one-position cache: softmax of one score is 1, out = v */
        for (int i = 0; i < n + 8; i++) {
            seq.n = 0;
            backend_seq_attention(&seq, backend_at(p.buf[1][o], (size_t)i), backend_at(p.buf[1][q], 0),
                                  backend_at(p.buf[1][z], (size_t)i), backend_at(p.buf[1][h], (size_t)i), 1, 0, 1, 1,
                                  1);
            ck_assert_int_eq(backend_run(p.be[1], &seq), 0);
        }
        float *out = malloc(sizeof(float) * ((size_t)n + 8));
        ck_assert_int_eq(backend_read(p.be[1], out, backend_at(p.buf[1][o], 0), (size_t)n + 8), 0);
        for (int i = 0; i < n + 8; i++) {
            hg[i] = cpu_f32_to_f16(out[i]); /* exact: out is an f16 value */
            ck_assert_msg(hg[i] == hc[i] || (isnan(out[i]) && isnan(cpu_f16_to_f32(hc[i]))),
                          "f16 element %d: device %04x cpu %04x", i, hg[i], hc[i]);
        }
        free(out);
    }
    free(hc);
    free(hg);
    free(cpu);
    free(gpu);
    pair_close(&p);
    tensor_free(&w);
}
END_TEST

/* SWIGLU (exp on the device is within a few ulp: 1e-5 relative) and ADD (one addition: exact). */
START_TEST(swiglu_and_add_match_the_cpu)
{
    int n = 1000;
    pair p;

    if (!pair_open(&p, 4, 64, 16))
        return;
    int g = pair_buf(&p, (size_t)n + 2, BACKEND_F32, 6.0f), u = pair_buf(&p, (size_t)n + 2, BACKEND_F32, 2.0f);
    int a = pair_buf(&p, (size_t)n + 2, BACKEND_F32, 2.0f);
    float *cpu = malloc(sizeof(float) * n), *gpu = malloc(sizeof(float) * n);
    for (int b = 0; b < 2; b++) {
        backend_op ops[1];
        backend_seq seq = {.ops = ops, .cap = 1};
        backend_seq_add(&seq, backend_at(p.buf[b][a], 1), backend_at(p.buf[b][u], 2), n);
        ck_assert_int_eq(backend_run(p.be[b], &seq), 0);
    }
    pair_read(&p, a, 0, (size_t)n, cpu, gpu);
    ck_assert_int_eq(memcmp(cpu, gpu, sizeof(float) * n), 0);
    for (int b = 0; b < 2; b++) {
        backend_op ops[1];
        backend_seq seq = {.ops = ops, .cap = 1};
        backend_seq_swiglu(&seq, backend_at(p.buf[b][g], 1), backend_at(p.buf[b][u], 0), n);
        ck_assert_int_eq(backend_run(p.be[b], &seq), 0);
    }
    pair_read(&p, g, 1, (size_t)n, cpu, gpu);
    for (int i = 0; i < n; i++)
        ck_assert_msg(fabs((double)gpu[i] - cpu[i]) <= 1e-5 * fabs(cpu[i]) + 1e-7, "swiglu %d: %g vs %g", i, gpu[i],
                      cpu[i]);
    pair_close(&p);
    free(cpu);
    free(gpu);
}
END_TEST

/* ATTENTION over f32 and f16 caches, grouped heads (8 query heads on 2 kv heads), decode and a
 * 5-token prefill after 130 cached positions (past two 64-position tiles of the online
 * softmax): the device rescales partial sums, the CPU normalizes once: within 1e-5 of the
 * output's scale. */
START_TEST(attention_matches_the_cpu_over_f32_and_f16_caches)
{
    int heads = 8, kv = 2, hd = 64, pos0 = 130, ctx = 160, f16 = _i;
    pair p;

    if (!pair_open(&p, 8, 512, ctx))
        return;
    int q = pair_buf(&p, (size_t)5 * heads * hd, BACKEND_F32, 1.0f);
    int kf = pair_buf(&p, (size_t)ctx * kv * hd, BACKEND_F32, 1.0f),
        vf = pair_buf(&p, (size_t)ctx * kv * hd, BACKEND_F32, 1.0f);
    int kc = pair_buf(&p, (size_t)ctx * kv * hd, f16 ? BACKEND_F16 : BACKEND_F32, 0);
    int vc = pair_buf(&p, (size_t)ctx * kv * hd, f16 ? BACKEND_F16 : BACKEND_F32, 0);
    int o = pair_buf(&p, (size_t)5 * heads * hd, BACKEND_F32, 0);
    float *cpu = malloc(sizeof(float) * 5 * heads * hd), *gpu = malloc(sizeof(float) * 5 * heads * hd);
    for (int b = 0; b < 2; b++) {
        backend_op ops[4];
        backend_seq seq = {.ops = ops, .cap = 4};
        /* scale the keys up so that the softmax is peaked and a wrong max would show */
        backend_seq_add(&seq, backend_at(p.buf[b][kf], 0), backend_at(p.buf[b][kf], 0), ctx * kv * hd);
        backend_seq_store(&seq, backend_at(p.buf[b][kc], 0), backend_at(p.buf[b][kf], 0), ctx * kv * hd);
        backend_seq_store(&seq, backend_at(p.buf[b][vc], 0), backend_at(p.buf[b][vf], 0), ctx * kv * hd);
        backend_seq_attention(&seq, backend_at(p.buf[b][o], 0), backend_at(p.buf[b][q], 0), backend_at(p.buf[b][kc], 0),
                              backend_at(p.buf[b][vc], 0), 5, pos0, heads, kv, hd);
        ck_assert_int_eq(backend_run(p.be[b], &seq), 0);
    }
    pair_read(&p, o, 0, (size_t)5 * heads * hd, cpu, gpu);
    ck_assert_msg(rel_diff(gpu, cpu, (size_t)5 * heads * hd) <= 1e-5, "prefill: %g",
                  rel_diff(gpu, cpu, (size_t)5 * heads * hd));
    for (int b = 0; b < 2; b++) {
        backend_op ops[1];
        backend_seq seq = {.ops = ops, .cap = 1};
        backend_seq_attention(&seq, backend_at(p.buf[b][o], 0), backend_at(p.buf[b][q], 0), backend_at(p.buf[b][kc], 0),
                              backend_at(p.buf[b][vc], 0), 1, 0, heads, kv, hd);
        ck_assert_int_eq(backend_run(p.be[b], &seq), 0);
    }
    pair_read(&p, o, 0, (size_t)heads * hd, cpu, gpu);
    ck_assert_msg(rel_diff(gpu, cpu, (size_t)heads * hd) <= 1e-5, "first position: %g",
                  rel_diff(gpu, cpu, (size_t)heads * hd));
    pair_close(&p);
    free(cpu);
    free(gpu);
}
END_TEST

/* ---------------------------------------------------------------- the MoE, Gemma 3 and window ops */

/* GEGLU and SOFTCAP (tanh and exp on the device: within 1e-5 relative, as SWIGLU), SCALE (one
 * multiply: exact), GATED_ADD and MOE_SUM (the same float operations in the same order, but a
 * device may fuse them: 1e-6 of the output's scale), and RMS_NORM with Gemma's weight offset of 1
 * (the float tree against the CPU's double, as RMS_NORM: 1e-5). */
START_TEST(gemma_and_moe_elementwise_ops_match_the_cpu)
{
    int n = 1000, toks = 5, used = 3, cols = 200;
    pair p;
    tensor v;

    if (!pair_open(&p, 8, 256, 16))
        return;
    int g = pair_buf(&p, (size_t)n + 2, BACKEND_F32, 4.0f), u = pair_buf(&p, (size_t)n + 2, BACKEND_F32, 2.0f);
    int sc = pair_buf(&p, (size_t)n + 2, BACKEND_F32, 60.0f), sd = pair_buf(&p, (size_t)n + 2, BACKEND_F32, 3.0f);
    int acc = pair_buf(&p, (size_t)toks * cols + 1, BACKEND_F32, 1.0f);
    int ex = pair_buf(&p, (size_t)toks * used * cols, BACKEND_F32, 2.0f);
    int wt = pair_buf(&p, (size_t)toks * used + 1, BACKEND_F32, 1.0f),
        gate = pair_buf(&p, (size_t)toks, BACKEND_F32, 4.0f);
    int x = pair_buf(&p, (size_t)toks * cols, BACKEND_F32, 3.0f), y = pair_buf(&p, (size_t)toks * cols, BACKEND_F32, 0);
    float *cpu = malloc(sizeof(float) * n), *gpu = malloc(sizeof(float) * n);
    memset(&v, 0, sizeof v);
    make_vec(&v, GGML_TYPE_F32, cols);
    for (int b = 0; b < 2; b++) {
        const backend_weight *bw;
        backend_op ops[8];
        backend_seq seq = {.ops = ops, .cap = 8};
        ck_assert_int_eq(backend_weight_import(&bw, p.be[b], &v.t), 0);
        backend_seq_geglu(&seq, backend_at(p.buf[b][g], 1), backend_at(p.buf[b][u], 0), n);
        backend_seq_softcap(&seq, backend_at(p.buf[b][sc], 2), n, 30.0f);
        backend_seq_scale(&seq, backend_at(p.buf[b][sd], 1), n, 0.125f * 3.0f);
        backend_seq_moe_sum(&seq, backend_at(p.buf[b][acc], 1), backend_at(p.buf[b][ex], 0),
                            backend_at(p.buf[b][wt], 1), toks, used, cols);
        backend_seq_gated_add(&seq, backend_at(p.buf[b][acc], 1), backend_at(p.buf[b][ex], 7),
                              backend_at(p.buf[b][gate], 0), toks, cols);
        backend_seq_rms_norm_ex(&seq, backend_at(p.buf[b][y], 0), backend_at(p.buf[b][x], 0), bw, toks, cols, 1e-6f,
                                1.0f);
        ck_assert_msg(backend_run(p.be[b], &seq) == 0, "%s", ms_err_msg());
    }
    pair_read(&p, g, 1, (size_t)n, cpu, gpu);
    for (int i = 0; i < n; i++)
        ck_assert_msg(fabs((double)gpu[i] - cpu[i]) <= 1e-5 * fabs(cpu[i]) + 1e-7, "geglu %d: %g vs %g", i, gpu[i],
                      cpu[i]);
    pair_read(&p, sc, 2, (size_t)n, cpu, gpu);
    for (int i = 0; i < n; i++)
        ck_assert_msg(fabs((double)gpu[i] - cpu[i]) <= 1e-5 * fabs(cpu[i]) + 1e-7, "softcap %d: %g vs %g", i, gpu[i],
                      cpu[i]);
    pair_read(&p, sd, 1, (size_t)n, cpu, gpu);
    ck_assert_int_eq(memcmp(cpu, gpu, sizeof(float) * n), 0);
    pair_read(&p, acc, 1, (size_t)toks * cols, cpu, gpu);
    ck_assert_msg(rel_diff(gpu, cpu, (size_t)toks * cols) <= 1e-6, "moe_sum, gated_add: %g",
                  rel_diff(gpu, cpu, (size_t)toks * cols));
    pair_read(&p, y, 0, (size_t)toks * cols, cpu, gpu);
    ck_assert_msg(rel_diff(gpu, cpu, (size_t)toks * cols) <= 1e-5, "rms_norm offset: %g",
                  rel_diff(gpu, cpu, (size_t)toks * cols));
    pair_close(&p);
    tensor_free(&v);
    free(cpu);
    free(gpu);
}
END_TEST

/* ATTENTION with a window of 40 and a score scale, over f32 and f16 caches: a 5-token prefill at
 * position 130 (the window starts inside a 64-position tile), the same over a ring of 48 slots
 * (positions at p % 48), and a decode whose window is longer than the positions: within 1e-5 of
 * the output's scale, as plain attention. */
START_TEST(attention_window_and_ring_match_the_cpu)
{
    int heads = 8, kv = 2, hd = 64, ctx = 160, f16 = _i, win = 40;
    static const struct {
        int n, pos0, ring;
    } cases[] = {{5, 130, 0}, {5, 130, 48}, {1, 10, 0}, {3, 200, 48}};
    pair p;

    if (!pair_open(&p, 8, 512, 256))
        return;
    int q = pair_buf(&p, (size_t)5 * heads * hd, BACKEND_F32, 1.0f);
    int kf = pair_buf(&p, (size_t)ctx * kv * hd, BACKEND_F32, 2.0f),
        vf = pair_buf(&p, (size_t)ctx * kv * hd, BACKEND_F32, 1.0f);
    int kc = pair_buf(&p, (size_t)ctx * kv * hd, f16 ? BACKEND_F16 : BACKEND_F32, 0);
    int vc = pair_buf(&p, (size_t)ctx * kv * hd, f16 ? BACKEND_F16 : BACKEND_F32, 0);
    int o = pair_buf(&p, (size_t)5 * heads * hd, BACKEND_F32, 0);
    float *cpu = malloc(sizeof(float) * 5 * heads * hd), *gpu = malloc(sizeof(float) * 5 * heads * hd);
    for (int b = 0; b < 2; b++) {
        backend_op ops[2];
        backend_seq seq = {.ops = ops, .cap = 2};
        backend_seq_store(&seq, backend_at(p.buf[b][kc], 0), backend_at(p.buf[b][kf], 0), ctx * kv * hd);
        backend_seq_store(&seq, backend_at(p.buf[b][vc], 0), backend_at(p.buf[b][vf], 0), ctx * kv * hd);
        ck_assert_int_eq(backend_run(p.be[b], &seq), 0);
    }
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        size_t nout = (size_t)cases[c].n * heads * hd;
        if (!cases[c].ring && cases[c].pos0 + cases[c].n > ctx)
            continue;
        for (int b = 0; b < 2; b++) {
            backend_op ops[1];
            backend_seq seq = {.ops = ops, .cap = 1};
            backend_seq_attention_ex(&seq, backend_at(p.buf[b][o], 0), backend_at(p.buf[b][q], 0),
                                     backend_at(p.buf[b][kc], 0), backend_at(p.buf[b][vc], 0), cases[c].n,
                                     cases[c].pos0, heads, kv, hd, win, 0.07f, cases[c].ring);
            ck_assert_msg(backend_run(p.be[b], &seq) == 0, "%s", ms_err_msg());
        }
        pair_read(&p, o, 0, nout, cpu, gpu);
        printf("measured: attention window case %zu (%s cache): rel %.3g\n", c, f16 ? "f16" : "f32",
               rel_diff(gpu, cpu, nout));
        ck_assert_msg(rel_diff(gpu, cpu, nout) <= 1e-5, "case %zu: %g", c, rel_diff(gpu, cpu, nout));
    }
    pair_close(&p);
    free(cpu);
    free(gpu);
}
END_TEST

/* ---------------------------------------------------------------- the encoders' ops */

/* LAYER_NORM with an F32, F16 or BF16 weight and bias of the same type, over rows of 600 (two
 * whole passes of the 256 invocations and a part) whose means lie between -25 and 40, up to 23
 * times their spread: out of place with the bias and BERT's eps of 1e-12, then in place without
 * one. The device sums in float where the CPU sums in double. RMS_NORM's bound, 1e-5 of the
 * output's scale, is the contract; the corrected two-pass mean lands within about an ulp of the
 * CPU's (an ulp of 40 is 3.8e-6, 2.2e-6 of the output's spread of ~1.7), measured at 1.4e-7 on
 * lavapipe, so the test asks 1e-6: the first pass's mean alone measured 1.7e-6 there. */
START_TEST(layer_norm_matches_the_cpu)
{
    static const int vt[] = {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16};
    static const float offset[] = {0.5f, 40.0f, -25.0f, 0.0f, 10.0f, -3.0f};
    int n = 6, cols = 600;
    pair p;
    tensor w, bias;

    if (!pair_open(&p, n, cols, 16))
        return;
    for (int b = 0; b < 2; b++)
        ck_assert(backend_supports(p.be[b], BACKEND_OP_LAYER_NORM));
    memset(&w, 0, sizeof w);
    memset(&bias, 0, sizeof bias);
    make_vec(&w, vt[_i], cols);
    make_vec(&bias, vt[_i], cols);
    float *vals = malloc(sizeof(float) * n * cols);
    for (int r = 0; r < n; r++)
        for (int c = 0; c < cols; c++)
            vals[r * cols + c] = offset[r] + 3.0f * unif();
    int x = pair_buf_of(&p, vals, (size_t)n * cols, BACKEND_F32);
    int y = pair_buf(&p, (size_t)n * cols + 1, BACKEND_F32, 0);
    float *cpu = malloc(sizeof(float) * n * cols), *gpu = malloc(sizeof(float) * n * cols);
    for (int b = 0; b < 2; b++) {
        const backend_weight *bw, *bb;
        backend_op ops[2];
        backend_seq seq = {.ops = ops, .cap = 2};
        ck_assert_int_eq(backend_weight_import(&bw, p.be[b], &w.t), 0);
        ck_assert_int_eq(backend_weight_import(&bb, p.be[b], &bias.t), 0);
        backend_seq_layer_norm(&seq, backend_at(p.buf[b][y], 1), backend_at(p.buf[b][x], 0), bw, bb, n, cols, 1e-12f);
        backend_seq_layer_norm(&seq, backend_at(p.buf[b][x], cols), backend_at(p.buf[b][x], cols), bw, NULL, n - 1,
                               cols, 1e-5f);
        ck_assert_msg(backend_run(p.be[b], &seq) == 0, "%s", ms_err_msg());
    }
    pair_read(&p, y, 1, (size_t)n * cols, cpu, gpu);
    printf("measured: layer_norm (%s weight) with bias: rel %.3g\n", ggml_type_name(vt[_i]),
           rel_diff(gpu, cpu, (size_t)n * cols));
    ck_assert_msg(rel_diff(gpu, cpu, (size_t)n * cols) <= 1e-6, "with bias: %g", rel_diff(gpu, cpu, (size_t)n * cols));
    pair_read(&p, x, 0, (size_t)n * cols, cpu, gpu);
    ck_assert_int_eq(memcmp(cpu, vals, sizeof(float) * cols), 0);   /* row 0 untouched on both */
    ck_assert_int_eq(memcmp(gpu, vals, sizeof(float) * cols), 0);
    printf("measured: layer_norm (%s weight) in place: rel %.3g\n", ggml_type_name(vt[_i]),
           rel_diff(gpu, cpu, (size_t)n * cols));
    ck_assert_msg(rel_diff(gpu, cpu, (size_t)n * cols) <= 1e-6, "in place: %g", rel_diff(gpu, cpu, (size_t)n * cols));
    pair_close(&p);
    tensor_free(&w);
    tensor_free(&bias);
    free(vals);
    free(cpu);
    free(gpu);
}
END_TEST

/* GELU in place over every x in [-8, 8] at steps of 1/4096 (both of erf_acc's ranges, the clamp
 * at 4 sqrt 2 and its seams) and a few far values, at an odd offset. dst = 0.5 x (1 + erf(x /
 * sqrt 2)): a difference e between the device's erf and glibc's erff moves it by 0.5 |x| e, so
 * |gpu - cpu| <= 0.5 |x| * 2.5e-7 + 2.5e-7 |cpu| + 1e-30 bounds the two erfs' difference by
 * 2.5e-7 (erf_acc is within 6e-8 of erf in float with an exact exp, erff within an ulp, 6e-8 near
 * 1: the rest is the device's exp) with a few ulp for the final products. */
START_TEST(gelu_matches_the_cpu)
{
    int grid = 16 * 4096 + 1, n = grid + 8;
    static const float far[] = {30.0f, -30.0f, 9.5f, -9.5f, 1e-30f, -1e-30f, 0.0f, 5.65685f};
    pair p;

    if (!pair_open(&p, 8, 256, 16))
        return;
    for (int b = 0; b < 2; b++)
        ck_assert(backend_supports(p.be[b], BACKEND_OP_GELU));
    float *vals = malloc(sizeof(float) * (n + 1));
    vals[0] = 1.0f;
    for (int i = 0; i < grid; i++)
        vals[1 + i] = -8.0f + (float)i / 4096.0f;
    memcpy(vals + 1 + grid, far, sizeof far);
    int g = pair_buf_of(&p, vals, (size_t)n + 1, BACKEND_F32);
    float *cpu = malloc(sizeof(float) * (n + 1)), *gpu = malloc(sizeof(float) * (n + 1));
    for (int b = 0; b < 2; b++) {
        backend_op ops[1];
        backend_seq seq = {.ops = ops, .cap = 1};
        backend_seq_gelu(&seq, backend_at(p.buf[b][g], 1), n);
        ck_assert_msg(backend_run(p.be[b], &seq) == 0, "%s", ms_err_msg());
    }
    pair_read(&p, g, 0, (size_t)n + 1, cpu, gpu);
    ck_assert(cpu[0] == 1.0f && gpu[0] == 1.0f);   /* before the range: untouched */
    double worst = 0, worst_def = 0;
    for (int i = 1; i <= n; i++) {
        double x = vals[i], d = fabs((double)gpu[i] - cpu[i]), bound = 0.5 * fabs(x) * 2.5e-7 + 2.5e-7 * fabs(cpu[i]);
        worst = fmax(worst, d / (bound + 1e-30));
        if (fabs(x) >= 1.0)   /* where the final products' rounding is small against 0.5 |x| */
            worst_def = fmax(worst_def, fabs(gpu[i] - 0.5 * x * (1.0 + erf(x / sqrt(2.0)))) / (0.5 * fabs(x)));
        ck_assert_msg(d <= bound + 1e-30, "gelu(%.9g): %.9g vs %.9g", x, gpu[i], cpu[i]);
    }
    printf("measured: gelu: |gpu - cpu| up to %.2f of the bound; |x| >= 1: |gpu - exact| / (0.5 |x|) up to %.3g\n",
           worst, worst_def);
    pair_close(&p);
    free(vals);
    free(cpu);
    free(gpu);
}
END_TEST

/* ATTENTION with bidir over f32 and f16 caches whose sequence starts at row 1 (the op's k, v refs
 * point there): 5 tokens (one tile of positions), and 70 (two tiles, so a token's later positions
 * come in a second tile the causal bound would have cut), with the default scale and with 0.3;
 * within 1e-5 of the output's scale, as causal attention. A window, a ring or a start position is
 * refused before anything runs. */
START_TEST(attention_bidir_matches_the_cpu)
{
    int heads = 8, kv = 2, hd = 64, ctx = 80, f16 = _i;
    static const struct {
        int n;
        float scale;
    } cases[] = {{5, 0.0f}, {70, 0.0f}, {70, 0.3f}};
    pair p;

    if (!pair_open(&p, 8, 512, ctx))
        return;
    for (int b = 0; b < 2; b++)
        ck_assert(backend_supports(p.be[b], BACKEND_OP_ATTENTION_BIDIR));
    int q = pair_buf(&p, (size_t)70 * heads * hd, BACKEND_F32, 1.0f);
    int kf = pair_buf(&p, (size_t)ctx * kv * hd, BACKEND_F32, 2.0f),
        vf = pair_buf(&p, (size_t)ctx * kv * hd, BACKEND_F32, 1.0f);
    int kc = pair_buf(&p, (size_t)ctx * kv * hd, f16 ? BACKEND_F16 : BACKEND_F32, 0);
    int vc = pair_buf(&p, (size_t)ctx * kv * hd, f16 ? BACKEND_F16 : BACKEND_F32, 0);
    int o = pair_buf(&p, (size_t)70 * heads * hd, BACKEND_F32, 0);
    float *cpu = malloc(sizeof(float) * 70 * heads * hd), *gpu = malloc(sizeof(float) * 70 * heads * hd);
    for (int b = 0; b < 2; b++) {
        backend_op ops[2];
        backend_seq seq = {.ops = ops, .cap = 2};
        backend_seq_store(&seq, backend_at(p.buf[b][kc], 0), backend_at(p.buf[b][kf], 0), ctx * kv * hd);
        backend_seq_store(&seq, backend_at(p.buf[b][vc], 0), backend_at(p.buf[b][vf], 0), ctx * kv * hd);
        ck_assert_int_eq(backend_run(p.be[b], &seq), 0);
    }
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        size_t nout = (size_t)cases[c].n * heads * hd;
        for (int b = 0; b < 2; b++) {
            backend_op ops[1];
            backend_seq seq = {.ops = ops, .cap = 1};
            backend_seq_attention_bidir(&seq, backend_at(p.buf[b][o], 0), backend_at(p.buf[b][q], 0),
                                        backend_at(p.buf[b][kc], (size_t)kv * hd),
                                        backend_at(p.buf[b][vc], (size_t)kv * hd), cases[c].n, heads, kv, hd,
                                        cases[c].scale);
            ck_assert_msg(backend_run(p.be[b], &seq) == 0, "%s", ms_err_msg());
        }
        pair_read(&p, o, 0, nout, cpu, gpu);
        printf("measured: bidirectional attention case %zu (%s cache): rel %.3g\n", c, f16 ? "f16" : "f32",
               rel_diff(gpu, cpu, nout));
        ck_assert_msg(rel_diff(gpu, cpu, nout) <= 1e-5, "case %zu: %g", c, rel_diff(gpu, cpu, nout));
    }
    for (int i = 0; i < 3; i++) {
        backend_op ops[1];
        backend_seq seq = {.ops = ops, .cap = 1};
        backend_seq_attention_bidir(&seq, backend_at(p.buf[1][o], 0), backend_at(p.buf[1][q], 0),
                                    backend_at(p.buf[1][kc], 0), backend_at(p.buf[1][vc], 0), 4, heads, kv, hd, 0.0f);
        if (i == 0)
            ops[0].window = 2;
        else if (i == 1)
            ops[0].window = 2, ops[0].ring = 8;
        else
            ops[0].pos0 = 1;
        ck_assert_int_eq(backend_run(p.be[1], &seq), MS_ERROR);
        ck_assert_ptr_nonnull(strstr(ms_err_msg(), "bidirectional"));
    }
    pair_close(&p);
    free(cpu);
    free(gpu);
}
END_TEST

/* Expert ids are I32 buffers, which backend_read does not return; the ops do not look at a
 * buffer's dtype, so the tests give them F32 buffers and read the ids' bits back. */
static void read_ids(pair *p, int k, size_t n, int32_t *cpu, int32_t *gpu)
{
    pair_read(p, k, 0, n, (float *)cpu, (float *)gpu);
}

/* MOE_ROUTE over 60 experts (two words of taken-bits), top 4, and 128 experts, top 8, both
 * normalizations: the same ids (the logits are far enough apart for float rounding not to
 * reorder them) and weights within 1e-5 relative (the device sums the softmax in float). */
START_TEST(moe_route_matches_the_cpu)
{
    static const int shapes[][2] = {{60, 4}, {128, 8}};
    int n = 7, ne = shapes[_i / 2][0], used = shapes[_i / 2][1], route = _i % 2;
    pair p;

    if (!pair_open(&p, 8, 256, 16))
        return;
    int lg = pair_buf(&p, (size_t)n * ne, BACKEND_F32, 4.0f), w = pair_buf(&p, (size_t)n * used + 3, BACKEND_F32, 0);
    int ids = pair_buf(&p, (size_t)n * used, BACKEND_F32, 0);
    for (int b = 0; b < 2; b++) {
        backend_op ops[1];
        backend_seq seq = {.ops = ops, .cap = 1};
        backend_seq_moe_route(&seq, backend_at(p.buf[b][w], 3), backend_at(p.buf[b][ids], 0),
                              backend_at(p.buf[b][lg], 0), n, ne, used, route);
        ck_assert_msg(backend_run(p.be[b], &seq) == 0, "%s", ms_err_msg());
    }
    int32_t *ic = malloc(sizeof(int32_t) * n * used), *ig = malloc(sizeof(int32_t) * n * used);
    float *cpu = malloc(sizeof(float) * n * used), *gpu = malloc(sizeof(float) * n * used);
    read_ids(&p, ids, (size_t)n * used, ic, ig);
    for (int i = 0; i < n * used; i++)
        ck_assert_msg(ic[i] == ig[i], "token %d slot %d: device expert %d, cpu %d", i / used, i % used, ig[i], ic[i]);
    pair_read(&p, w, 3, (size_t)n * used, cpu, gpu);
    for (int i = 0; i < n * used; i++)
        ck_assert_msg(fabs((double)gpu[i] - cpu[i]) <= 1e-5 * fabs(cpu[i]) + 1e-9, "weight %d: %g vs %g", i, gpu[i],
                      cpu[i]);
    free(ic);
    free(ig);
    free(cpu);
    free(gpu);
    pair_close(&p);
}
END_TEST

/* MATMUL_ID on a pack of 5 experts of 43 rows, in every weight type: 6 tokens, 2 slots each,
 * routed by MOE_ROUTE on both (the same ids, as moe_route_matches_the_cpu checks), with the
 * input shared by the slots (gate, up) and one per slot (down): each output row within
 * matmul's tolerance of the CPU's, on the rows of the expert the token chose. */
START_TEST(matmul_id_matches_the_cpu_on_every_weight_type)
{
    int ne = 5, rows = 43, cols = _i < N_MM_TYPES && is_float(mm_types[_i]) ? 172 : 256, n = 6, used = 2;
    pair p;
    tensor w;

    if (!pair_open(&p, n, cols, 16))
        return;
    make_case(&w, _i, ne * rows, cols);
    float *row = malloc(sizeof(float) * cols);
    double *wabs = malloc(sizeof(double) * ne * rows), xmax = 0;
    for (int r = 0; r < ne * rows; r++) {
        cpu_tensor_row(row, &w.t, (uint64_t)r);
        wabs[r] = 0;
        for (int j = 0; j < cols; j++)
            wabs[r] += fabs(row[j]);
    }
    w.t.n_dims = 3; /* the same bytes as a pack [ne][rows][cols] */
    w.t.shape[0] = (uint64_t)ne;
    w.t.shape[1] = (uint64_t)rows;
    w.t.shape[2] = (uint64_t)cols;
    int lg = pair_buf(&p, (size_t)n * ne, BACKEND_F32, 4.0f), wt = pair_buf(&p, (size_t)n * used, BACKEND_F32, 0);
    int ids = pair_buf(&p, (size_t)n * used + 1, BACKEND_F32, 0);
    int x = pair_buf(&p, (size_t)n * used * cols, BACKEND_F32, 1.0f);
    int y = pair_buf(&p, (size_t)n * used * rows + 2, BACKEND_F32, 0);
    float *xs = malloc(sizeof(float) * n * used * cols);
    float *cpu = malloc(sizeof(float) * n * used * rows), *gpu = malloc(sizeof(float) * n * used * rows);
    int32_t *ic = malloc(sizeof(int32_t) * (n * used + 1)), *ig = malloc(sizeof(int32_t) * (n * used + 1));
    ck_assert_int_eq(backend_read(p.be[0], xs, backend_at(p.buf[0][x], 0), (size_t)n * used * cols), 0);
    for (int i = 0; i < n * used * cols; i++)
        xmax = fmax(xmax, fabs(xs[i]));
    for (int bcast = 1; bcast >= 0; bcast--) {
        double worst = 0;
        for (int b = 0; b < 2; b++) {
            const backend_weight *bw;
            backend_op ops[2];
            backend_seq seq = {.ops = ops, .cap = 2};
            ck_assert_msg(backend_weight_import(&bw, p.be[b], &w.t) == 0, "%s", ms_err_msg());
            backend_seq_moe_route(&seq, backend_at(p.buf[b][wt], 0), backend_at(p.buf[b][ids], 1),
                                  backend_at(p.buf[b][lg], 0), n, ne, used, BACKEND_ROUTE_SOFTMAX_TOPK);
            backend_seq_matmul_id(&seq, backend_at(p.buf[b][y], 2), backend_at(p.buf[b][x], 0), bw,
                                  backend_at(p.buf[b][ids], 1), n, used, bcast);
            ck_assert_msg(backend_run(p.be[b], &seq) == 0, "%s", ms_err_msg());
        }
        read_ids(&p, ids, (size_t)n * used + 1, ic, ig);
        ck_assert_int_eq(memcmp(ic, ig, sizeof(int32_t) * (n * used + 1)), 0);
        pair_read(&p, y, 2, (size_t)n * used * rows, cpu, gpu);
        for (int i = 0; i < n * used; i++) {
            int e = ic[1 + i];
            for (int r = 0; r < rows; r++) {
                double d = fabs((double)gpu[i * rows + r] - cpu[i * rows + r]);
                double tol = 1e-4 * wabs[e * rows + r] * xmax + 1e-6;
                ck_assert_msg(d <= tol, "case %d, bcast %d, pair %d (expert %d) row %d: gpu %g cpu %g", _i, bcast, i, e,
                              r, gpu[i * rows + r], cpu[i * rows + r]);
                worst = fmax(worst, d / tol);
            }
        }
        printf("measured: matmul_id case %d (%s), src_bcast %d: worst |diff| / tolerance %.3g\n", _i,
               _i < N_MM_TYPES ? ggml_type_name(mm_types[_i]) : w.t.quant_type, bcast, worst);
    }
    free(row);
    free(wabs);
    free(xs);
    free(cpu);
    free(gpu);
    free(ic);
    free(ig);
    pair_close(&p);
    tensor_free(&w);
}
END_TEST

/* ---------------------------------------------------------------- gpt-oss's ops and MXFP4 */

/* SWIGLU_OAI with gpt-oss's alpha 1.702 and limit 7 on gates and ups in (-12, 12), so that both of
 * up's clamps and gate's upper one are taken: exp on the device, within 1e-5 relative as SWIGLU.
 * ADD_ROW_ID of an F32 [6][70] bias over the slots MOE_ROUTE picks on both (the same ids, as
 * moe_route_matches_the_cpu checks), at odd offsets: one float addition per element, so bit for
 * bit. */
START_TEST(swiglu_oai_and_add_row_id_match_the_cpu)
{
    int n = 1000, toks = 5, ne = 6, used = 3, rows = 70;
    pair p;
    tensor bias;

    if (!pair_open(&p, 8, 256, 16))
        return;
    for (int b = 0; b < 2; b++) {
        ck_assert(backend_supports(p.be[b], BACKEND_OP_SWIGLU_OAI));
        ck_assert(backend_supports(p.be[b], BACKEND_OP_ADD_ROW_ID));
    }
    memset(&bias, 0, sizeof bias);
    make_ggml(&bias, GGML_TYPE_F32, ne, rows, 0);
    bias.t.name = "blk.0.ffn_up_exps.bias";
    int g = pair_buf(&p, (size_t)n + 2, BACKEND_F32, 12.0f), u = pair_buf(&p, (size_t)n + 2, BACKEND_F32, 12.0f);
    int lg = pair_buf(&p, (size_t)toks * ne, BACKEND_F32, 4.0f), wt = pair_buf(&p, (size_t)toks * used, BACKEND_F32, 0);
    int ids = pair_buf(&p, (size_t)toks * used + 1, BACKEND_F32, 0);
    int y = pair_buf(&p, (size_t)toks * used * rows + 3, BACKEND_F32, 2.0f);
    float *cpu = malloc(sizeof(float) * toks * used * rows), *gpu = malloc(sizeof(float) * toks * used * rows);
    int32_t ic[16], ig[16];
    for (int b = 0; b < 2; b++) {
        const backend_weight *bw;
        backend_op ops[3];
        backend_seq seq = {.ops = ops, .cap = 3};
        ck_assert_msg(backend_weight_import(&bw, p.be[b], &bias.t) == 0, "%s", ms_err_msg());
        backend_seq_moe_route(&seq, backend_at(p.buf[b][wt], 0), backend_at(p.buf[b][ids], 1),
                              backend_at(p.buf[b][lg], 0), toks, ne, used, BACKEND_ROUTE_SOFTMAX_TOPK);
        backend_seq_add_row_id(&seq, backend_at(p.buf[b][y], 3), bw, backend_at(p.buf[b][ids], 1), toks, used);
        backend_seq_swiglu_oai(&seq, backend_at(p.buf[b][g], 1), backend_at(p.buf[b][u], 0), n, 1.702f, 7.0f);
        ck_assert_msg(backend_run(p.be[b], &seq) == 0, "%s", ms_err_msg());
    }
    read_ids(&p, ids, (size_t)toks * used + 1, ic, ig);
    ck_assert_int_eq(memcmp(ic, ig, sizeof(int32_t) * (toks * used + 1)), 0);
    pair_read(&p, y, 3, (size_t)toks * used * rows, cpu, gpu);
    ck_assert_int_eq(memcmp(cpu, gpu, sizeof(float) * toks * used * rows), 0);
    pair_read(&p, g, 1, (size_t)n, cpu, gpu);
    for (int i = 0; i < n; i++)
        ck_assert_msg(fabs((double)gpu[i] - cpu[i]) <= 1e-5 * fabs(cpu[i]) + 1e-7, "swiglu_oai %d: %g vs %g", i,
                      gpu[i], cpu[i]);
    pair_close(&p);
    tensor_free(&bias);
    free(cpu);
    free(gpu);
}
END_TEST

/* ATTENTION with sinks over f32 caches with F32 sinks and f16 caches with F16 sinks: sinks from
 * -inf (none) through ones below the scores to ones that take most of the weight, on 8 query heads
 * over 2 kv heads, 6 over 1 and 4 over 4; without a window, with a window of 40 and over a ring of
 * 48 slots, in 5-token prefills past two 64-position tiles and in decodes. Each (token, head)
 * within 1e-5 of its own output's scale (a sink that dominates shrinks a head's output, where a
 * check against the whole output's scale would not see a wrong denominator). A bidirectional
 * attention with sinks is refused before anything runs. */
START_TEST(attention_sinks_match_the_cpu)
{
    int hd = 64, ctx = 160, f16 = _i;
    static const struct {
        int n, pos0, window, ring, heads, kv;
        float scale;
    } cases[] = {{5, 130, 0, 0, 8, 2, 0.0f},  {5, 130, 40, 0, 8, 2, 0.07f}, {5, 130, 40, 48, 8, 2, 0.07f},
                 {1, 10, 40, 0, 4, 4, 0.0f},  {3, 200, 40, 48, 6, 1, 0.07f}, {1, 150, 0, 0, 6, 1, 0.0f},
                 {5, 0, 0, 0, 8, 2, 0.0f}};
    static const float sinks[8] = {-INFINITY, -3.0f, 0.0f, 0.5f, 1.5f, 3.0f, 6.0f, 10.0f};
    pair p;
    tensor s;

    if (!pair_open(&p, 8, 512, 256))
        return;
    for (int b = 0; b < 2; b++)
        ck_assert(backend_supports(p.be[b], BACKEND_OP_ATTENTION_SINKS));
    memset(&s, 0, sizeof s);
    make_vec(&s, f16 ? GGML_TYPE_F16 : GGML_TYPE_F32, 8);
    s.t.name = "blk.0.attn_sinks.weight";
    for (int h = 0; h < 8; h++) {
        if (f16)
            memcpy((uint8_t *)s.t.data + 2 * h, (uint16_t[]){cpu_f32_to_f16(sinks[h])}, 2);
        else
            memcpy((uint8_t *)s.t.data + 4 * h, &sinks[h], 4);
    }
    int q = pair_buf(&p, (size_t)5 * 8 * hd, BACKEND_F32, 1.0f);
    int kf = pair_buf(&p, (size_t)ctx * 4 * hd, BACKEND_F32, 2.0f), vf = pair_buf(&p, (size_t)ctx * 4 * hd,
                                                                                  BACKEND_F32, 1.0f);
    int kc = pair_buf(&p, (size_t)ctx * 4 * hd, f16 ? BACKEND_F16 : BACKEND_F32, 0);
    int vc = pair_buf(&p, (size_t)ctx * 4 * hd, f16 ? BACKEND_F16 : BACKEND_F32, 0);
    int o = pair_buf(&p, (size_t)5 * 8 * hd, BACKEND_F32, 0);
    float *cpu = malloc(sizeof(float) * 5 * 8 * hd), *gpu = malloc(sizeof(float) * 5 * 8 * hd);
    const backend_weight *bw[2];
    for (int b = 0; b < 2; b++) {
        backend_op ops[2];
        backend_seq seq = {.ops = ops, .cap = 2};
        ck_assert_msg(backend_weight_import(&bw[b], p.be[b], &s.t) == 0, "%s", ms_err_msg());
        backend_seq_store(&seq, backend_at(p.buf[b][kc], 0), backend_at(p.buf[b][kf], 0), ctx * 4 * hd);
        backend_seq_store(&seq, backend_at(p.buf[b][vc], 0), backend_at(p.buf[b][vf], 0), ctx * 4 * hd);
        ck_assert_int_eq(backend_run(p.be[b], &seq), 0);
    }
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int heads = cases[c].heads;
        size_t nout = (size_t)cases[c].n * heads * hd;
        double worst = 0;
        for (int b = 0; b < 2; b++) {
            backend_op ops[1];
            backend_seq seq = {.ops = ops, .cap = 1};
            backend_seq_attention_sinks(&seq, backend_at(p.buf[b][o], 0), backend_at(p.buf[b][q], 0),
                                        backend_at(p.buf[b][kc], 0), backend_at(p.buf[b][vc], 0), cases[c].n,
                                        cases[c].pos0, heads, cases[c].kv, hd, cases[c].window, cases[c].scale,
                                        cases[c].ring, bw[b]);
            ck_assert_msg(backend_run(p.be[b], &seq) == 0, "%s", ms_err_msg());
        }
        pair_read(&p, o, 0, nout, cpu, gpu);
        for (size_t r = 0; r < nout / hd; r++) {
            double rel = rel_diff(gpu + r * hd, cpu + r * hd, (size_t)hd);
            ck_assert_msg(rel <= 1e-5, "case %zu, token %zu head %zu: rel %g", c, r / heads, r % heads, rel);
            worst = fmax(worst, rel);
        }
        printf("measured: attention sinks case %zu (%s cache): worst head rel %.3g\n", c, f16 ? "f16" : "f32", worst);
    }
    backend_op ops[1];
    backend_seq seq = {.ops = ops, .cap = 1};
    backend_seq_attention_bidir(&seq, backend_at(p.buf[1][o], 0), backend_at(p.buf[1][q], 0),
                                backend_at(p.buf[1][kc], 0), backend_at(p.buf[1][vc], 0), 4, 8, 2, hd, 0.0f);
    ops[0].sinks = bw[1];
    ck_assert_int_eq(backend_run(p.be[1], &seq), MS_ERROR);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "sinks"));
    pair_close(&p);
    tensor_free(&s);
    free(cpu);
    free(gpu);
}
END_TEST

/* ggml MXFP4 weights (blocks of 17 bytes: an E8M0 exponent, then 16 bytes of E2M1 code pairs),
 * `skew` bytes past a page start, with exponents 116 .. 126 (scales 2^-12 .. 2^-2, gpt-oss's
 * range; no subnormal scale, which a device may flush) and every code. */
static void make_mxfp4(tensor *x, int rows, int cols, size_t skew)
{
    uint64_t row_bytes;
    uint8_t *buf;

    memset(x, 0, sizeof *x);
    ck_assert_int_eq(ggml_row_nbytes(&row_bytes, GGML_TYPE_MXFP4, (uint64_t)cols), 0);
    ck_assert_uint_eq(row_bytes, (uint64_t)cols / 32 * 17);
    buf = map_new(x, row_bytes * rows + skew) + skew;
    for (uint64_t i = 0; i < row_bytes * rows; i++)
        buf[i] = i % 17 ? (uint8_t)rnd() : (uint8_t)(116 + rnd() % 11);
    x->t = (backend_tensor){.name = "blk.0.ffn_gate_exps.weight",
                            .type = GGML_TYPE_MXFP4,
                            .n_dims = 2,
                            .shape = {(uint64_t)rows, (uint64_t)cols},
                            .data = buf,
                            .nbytes = row_bytes * rows,
                            .map = x->map,
                            .map_nbytes = x->map_n};
}

/* Row r of an MXFP4 weight through src/quant's dequantizer (ggml's, bit for bit). */
static void mxfp4_row(float *out, const tensor *w, int r)
{
    uint64_t cols = w->t.shape[w->t.n_dims - 1], row_bytes = cols / 32 * 17;

    ck_assert_int_eq(quant_dequantize_row("MXFP4", (const uint8_t *)w->t.data + row_bytes * (uint64_t)r, NULL, NULL,
                                          ST_F32, 32, (size_t)cols, out),
                     0);
}

/* sum_j w[r][j] x[j] in double over the dequantized row; *wabs gets sum_j |w[r][j]|. */
static double dot_ref(const float *wrow, const float *x, int cols, double *wabs)
{
    double s = 0, a = 0;

    for (int j = 0; j < cols; j++) {
        s += (double)wrow[j] * x[j];
        a += fabs(wrow[j]);
    }
    *wabs = a;
    return s;
}

/* MXFP4 MATMUL on the device (decode 1, 2 and the tiled 3, 37 tokens; 67 rows, 320 columns: ten
 * blocks, not a power of two) against the double-precision product of src/quant's dequantized
 * weights, within matmul_matches_the_cpu_on_every_weight_type's tolerance (the CPU backend does
 * not run MXFP4 in this branch: its matmul is another change). */
START_TEST(mxfp4_matmul_matches_the_dequantized_product)
{
    static const int ns[] = {1, 2, 3, 37};
    int rows = 67, cols = 320, max_n = 37;
    pair p;
    tensor w;

    if (!pair_open(&p, max_n, cols, 16))
        return;
    make_mxfp4(&w, rows, cols, 6);
    float *xs = malloc(sizeof(float) * max_n * cols), *wr = malloc(sizeof(float) * rows * cols);
    float *gpu = malloc(sizeof(float) * max_n * rows);
    double xmax = 0;
    for (int i = 0; i < max_n * cols; i++)
        xmax = fmax(xmax, fabs(xs[i] = unif()));
    for (int r = 0; r < rows; r++)
        mxfp4_row(wr + (size_t)r * cols, &w, r);
    int x = pair_buf_of(&p, xs, (size_t)max_n * cols, BACKEND_F32);
    int y = pair_buf(&p, (size_t)max_n * rows, BACKEND_F32, 0);
    const backend_weight *bw;
    ck_assert_msg(backend_weight_import(&bw, p.be[1], &w.t) == 0, "%s", ms_err_msg());
    for (size_t c = 0; c < sizeof ns / sizeof ns[0]; c++) {
        backend_op ops[1];
        backend_seq seq = {.ops = ops, .cap = 1};
        double worst = 0;
        backend_seq_matmul(&seq, backend_at(p.buf[1][y], 0), backend_at(p.buf[1][x], 0), bw, ns[c]);
        ck_assert_msg(backend_run(p.be[1], &seq) == 0, "%s", ms_err_msg());
        ck_assert_int_eq(backend_read(p.be[1], gpu, backend_at(p.buf[1][y], 0), (size_t)ns[c] * rows), 0);
        for (int t = 0; t < ns[c]; t++) {
            for (int r = 0; r < rows; r++) {
                double wabs, ref = dot_ref(wr + (size_t)r * cols, xs + (size_t)t * cols, cols, &wabs);
                double d = fabs(gpu[t * rows + r] - ref), tol = 1e-4 * wabs * xmax + 1e-6;
                ck_assert_msg(d <= tol, "n %d, token %d row %d: gpu %g, exact %g", ns[c], t, r, gpu[t * rows + r], ref);
                worst = fmax(worst, d / tol);
            }
        }
        printf("measured: matmul MXFP4, n %d: worst |diff| / tolerance %.3g\n", ns[c], worst);
    }
    free(xs);
    free(wr);
    free(gpu);
    pair_close(&p);
    tensor_free(&w);
}
END_TEST

/* MXFP4 MATMUL_ID on a pack of 5 experts of 43 rows, 6 tokens of 2 slots routed by MOE_ROUTE on
 * the device, with the input shared by the slots and one per slot: each output row against the
 * double product of the chosen expert's dequantized row, within matmul's tolerance. */
START_TEST(mxfp4_matmul_id_matches_the_dequantized_product)
{
    int ne = 5, rows = 43, cols = 320, n = 6, used = 2;
    pair p;
    tensor w;

    if (!pair_open(&p, n, cols, 16))
        return;
    make_mxfp4(&w, ne * rows, cols, 0);
    float *wr = malloc(sizeof(float) * ne * rows * cols), *xs = malloc(sizeof(float) * n * used * cols);
    float *gpu = malloc(sizeof(float) * n * used * rows);
    int32_t ig[13];
    double xmax = 0;
    for (int r = 0; r < ne * rows; r++)
        mxfp4_row(wr + (size_t)r * cols, &w, r);
    for (int i = 0; i < n * used * cols; i++)
        xmax = fmax(xmax, fabs(xs[i] = unif()));
    w.t.n_dims = 3; /* the same bytes as a pack [ne][rows][cols] */
    w.t.shape[0] = (uint64_t)ne;
    w.t.shape[1] = (uint64_t)rows;
    w.t.shape[2] = (uint64_t)cols;
    int lg = pair_buf(&p, (size_t)n * ne, BACKEND_F32, 4.0f), wt = pair_buf(&p, (size_t)n * used, BACKEND_F32, 0);
    int ids = pair_buf(&p, (size_t)n * used + 1, BACKEND_F32, 0);
    int x = pair_buf_of(&p, xs, (size_t)n * used * cols, BACKEND_F32);
    int y = pair_buf(&p, (size_t)n * used * rows + 2, BACKEND_F32, 0);
    const backend_weight *bw;
    ck_assert_msg(backend_weight_import(&bw, p.be[1], &w.t) == 0, "%s", ms_err_msg());
    for (int bcast = 1; bcast >= 0; bcast--) {
        backend_op ops[2];
        backend_seq seq = {.ops = ops, .cap = 2};
        double worst = 0;
        backend_seq_moe_route(&seq, backend_at(p.buf[1][wt], 0), backend_at(p.buf[1][ids], 1),
                              backend_at(p.buf[1][lg], 0), n, ne, used, BACKEND_ROUTE_SOFTMAX_TOPK);
        backend_seq_matmul_id(&seq, backend_at(p.buf[1][y], 2), backend_at(p.buf[1][x], 0), bw,
                              backend_at(p.buf[1][ids], 1), n, used, bcast);
        ck_assert_msg(backend_run(p.be[1], &seq) == 0, "%s", ms_err_msg());
        ck_assert_int_eq(backend_read(p.be[1], (float *)ig, backend_at(p.buf[1][ids], 0), (size_t)n * used + 1), 0);
        ck_assert_int_eq(backend_read(p.be[1], gpu, backend_at(p.buf[1][y], 2), (size_t)n * used * rows), 0);
        for (int i = 0; i < n * used; i++) {
            int e = ig[1 + i];
            const float *xi = xs + (size_t)(bcast ? i / used : i) * cols;
            ck_assert(e >= 0 && e < ne);
            for (int r = 0; r < rows; r++) {
                double wabs, ref = dot_ref(wr + ((size_t)e * rows + r) * cols, xi, cols, &wabs);
                double d = fabs(gpu[i * rows + r] - ref), tol = 1e-4 * wabs * xmax + 1e-6;
                ck_assert_msg(d <= tol, "bcast %d, pair %d (expert %d) row %d: gpu %g, exact %g", bcast, i, e, r,
                              gpu[i * rows + r], ref);
                worst = fmax(worst, d / tol);
            }
        }
        printf("measured: matmul_id MXFP4, src_bcast %d: worst |diff| / tolerance %.3g\n", bcast, worst);
    }
    free(wr);
    free(xs);
    free(gpu);
    pair_close(&p);
    tensor_free(&w);
}
END_TEST

/* MXFP4 EMBED: the device makes each weight as ggml does, a code's value times an exact power of
 * two, so the rows are src/quant's dequantized rows bit for bit. */
START_TEST(mxfp4_embedding_rows_are_the_dequantizer_s)
{
    int rows = 40, cols = 320;
    int32_t toks[5] = {3, 0, 39, 3, 17};
    pair p;
    tensor w;

    if (!pair_open(&p, 5, cols, 16))
        return;
    make_mxfp4(&w, rows, cols, 6);
    int y = pair_buf(&p, 5 * (size_t)cols + 3, BACKEND_F32, 0);
    float *want = malloc(sizeof(float) * 5 * cols), *gpu = malloc(sizeof(float) * 5 * cols);
    const backend_weight *bw;
    backend_op ops[1];
    backend_seq seq = {.ops = ops, .cap = 1};
    ck_assert_msg(backend_weight_import(&bw, p.be[1], &w.t) == 0, "%s", ms_err_msg());
    backend_seq_embed(&seq, backend_at(p.buf[1][y], 3), bw, toks, 5, cols);
    ck_assert_msg(backend_run(p.be[1], &seq) == 0, "%s", ms_err_msg());
    ck_assert_int_eq(backend_read(p.be[1], gpu, backend_at(p.buf[1][y], 3), 5 * (size_t)cols), 0);
    for (int t = 0; t < 5; t++)
        mxfp4_row(want + (size_t)t * cols, &w, toks[t]);
    for (int i = 0; i < 5 * cols; i++)
        ck_assert_msg(memcmp(&gpu[i], &want[i], 4) == 0, "token %d element %d: %g vs %g", i / cols, i % cols, gpu[i],
                      want[i]);
    free(want);
    free(gpu);
    pair_close(&p);
    tensor_free(&w);
}
END_TEST

/* Types the kernels do not run are refused at import, naming the tensor and the type. */
START_TEST(unsupported_types_are_refused_at_import)
{
    backend *b = open_vulkan();
    tensor w;

    if (!b)
        return;
    memset(&w, 0, sizeof w);
    make_ggml(&w, GGML_TYPE_Q8_0, 4, 64, 0);
    w.t.type = GGML_TYPE_IQ4_NL;
    const backend_weight *bw;
    ck_assert_int_eq(backend_weight_import(&bw, b, &w.t), MS_EUNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "blk.0.ffn_up.weight"));
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "IQ4_NL"));
    tensor_free(&w);
    make_mlx(&w, 4, 32, 4, 64, ST_F16);
    w.t.quant_type = "int3";
    w.t.bits = 3;
    ck_assert_int_eq(backend_weight_import(&bw, b, &w.t), MS_EUNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "int3"));
    tensor_free(&w);
    backend_close(b);
}
END_TEST

/* The device list has the CPU first, then every Vulkan device; "auto" never takes a software
 * implementation, and "vulkan" by name does. */
START_TEST(devices_are_listed_and_auto_skips_software)
{
    backend_device_info *d;
    size_t n;
    char why[256];
    int hardware = 0;
    backend *b = open_vulkan();

    if (!b)
        return;
    unsetenv("MSTORE_DEVICE");
    ck_assert_int_eq(backend_devices(&d, &n, why, sizeof why), 0);
    ck_assert_uint_ge(n, 2);
    ck_assert_str_eq(d[0].api, "cpu");
    for (size_t i = 1; i < n; i++) {
        ck_assert_str_eq(d[i].api, "vulkan");
        hardware |= strcmp(d[i].kind, "software") != 0;
    }
    free(d);
    ck_assert_str_eq(backend_name(b), "vulkan");
    backend_close(b);
    ck_assert_int_eq(backend_open(&b, "auto", NULL), 0);
    ck_assert_str_eq(backend_name(b), hardware ? "vulkan" : "cpu");
    backend_close(b);
}
END_TEST

/* ---------------------------------------------------------------- whole models */

static char *model_path(const char *rel)
{
    char *dir = fixture_models_dir(), *p;

    if (!dir)
        return NULL;
    p = ms_strdup_printf("%s/%s", dir, rel);
    free(dir);
    if (!ms_is_file(p)) {
        free(p);
        return NULL;
    }
    return p;
}

/* Multi-token prompts (tok512 ids; tests/data/runtime/README.md): "I believe the meaning of
 * life is" and the long one. */
static const int32_t P2[] = {1, 359, 329, 421, 417, 411, 360, 265, 284, 411, 303, 299, 373, 397, 431, 411, 410, 293};
static const int32_t P3[] = {1,   410, 448, 420, 275, 411, 261, 410, 449, 414, 354, 261, 430, 408, 410, 447,
                             442, 272, 420, 287, 261, 399, 278, 289, 428, 282, 420, 287, 427, 413, 263, 415,
                             417, 402, 263, 290, 421, 297, 309, 329, 259, 420, 379, 429, 294, 266};

/* The prompt through both models, then `steps` greedy tokens each fed back: the device picks
 * the CPU's tokens, and its first-step logits are within `tol` (max |gpu - cpu| / max |cpu|).
 * The prompt's ids are taken modulo the vocab (synthetic models have stories260K's 512). */
static void compare_models(runtime_model *cpu, runtime_model *gpu, const int32_t *prompt, int n, int steps, double tol,
                           const char *what)
{
    int V = runtime_model_config(cpu)->vocab_size;
    float *lc = malloc(sizeof(float) * V), *lg = malloc(sizeof(float) * V);
    int32_t *ids = malloc(sizeof(int32_t) * n);
    double rel;

    for (int i = 0; i < n; i++)
        ids[i] = prompt[i] % V;
    runtime_model_reset(cpu);
    runtime_model_reset(gpu);
    ck_assert_msg(runtime_forward(cpu, ids, n, lc) == 0, "%s", ms_err_msg());
    ck_assert_msg(runtime_forward(gpu, ids, n, lg) == 0, "%s", ms_err_msg());
    rel = rel_diff(lg, lc, (size_t)V);
    printf("measured: %s: %d-token prompt: first-step logits rel %.3g\n", what, n, rel);
    ck_assert_msg(rel <= tol, "%s: first-step logits rel %g > %g", what, rel, tol);
    for (int s = 0; s < steps; s++) {
        int32_t a = fixture_argmax(lc, V), b = fixture_argmax(lg, V);
        ck_assert_msg(a == b, "%s: greedy step %d: device %d, cpu %d", what, s, b, a);
        ck_assert_int_eq(runtime_forward(cpu, &a, 1, lc), 0);
        ck_assert_int_eq(runtime_forward(gpu, &a, 1, lg), 0);
    }
    free(lc);
    free(lg);
    free(ids);
}

/* Open a GGUF on the CPU and on the device (n_batch 16, so that the long prompt takes three
 * chunks and two runs go unread). NULL on the device side when it cannot run here. */
static runtime_model *open_gguf(const char *path, const char *device, int kv_f16)
{
    runtime_opts o = {.n_threads = 2, .n_ctx = 256, .n_batch = 16, .kv_f16 = kv_f16, .device = device};
    runtime_model *m = NULL;
    int rc = runtime_model_open_gguf(&m, path, &o);

    if (rc == MS_EUNSUPPORTED && strcmp(device, "vulkan") == 0) {
        printf("skipped: %s\n", ms_err_msg());
        return NULL;
    }
    ck_assert_msg(rc == 0, "%s: %s", path, ms_err_msg());
    return m;
}

static void compare_gguf(const char *path, int kv_f16, int steps, const char *what)
{
    runtime_model *gpu = open_gguf(path, "vulkan", kv_f16), *cpu;

    if (!gpu)
        return;
    cpu = open_gguf(path, "cpu", kv_f16);
    compare_models(cpu, gpu, P2, (int)(sizeof P2 / sizeof P2[0]), steps, 1e-4, what);
    compare_models(cpu, gpu, P3, (int)(sizeof P3 / sizeof P3[0]), steps, 1e-4, what);
    runtime_model_close(cpu);
    runtime_model_close(gpu);
}

/* stories260K, s260k-f16 (f16 KV cache too) and s260k-mixed (Q5_0, Q8_0, F16, F32), imported
 * into a store and run from it: 24 greedy tokens after each prompt, the CPU's. */
START_TEST(stories260k_from_the_store_gives_the_cpu_tokens)
{
    static const char *files[] = {"stories260K/stories260K.gguf", "stories260K/s260k-f16.gguf",
                                  "stories260K/s260k-mixed.gguf"};
    char *path = model_path(files[_i]), *home;
    ms_digest digest;
    store *s = NULL;
    model_name name;
    runtime_model *gpu = NULL, *cpu = NULL;
    import_opts io = {.quiet = 1};

    if (!path) {
        printf("skipped: %s not found under the test models\n", files[_i]);
        return;
    }
    home = fixture_tmpdir();
    ck_assert_int_eq(store_open(&s, home), 0);
    ck_assert_int_eq(name_parse(&name, "stories:test"), 0);
    ck_assert_msg(import_path(s, path, &name, &io, digest) == 0, "%s", ms_err_msg());
    for (int kv_f16 = 0; kv_f16 <= (_i == 1); kv_f16++) {
        runtime_opts o = {.n_threads = 2, .n_ctx = 256, .n_batch = 16, .kv_f16 = kv_f16, .device = "vulkan"};
        int rc = runtime_model_open_store(&gpu, s, &name, &o);
        if (rc == MS_EUNSUPPORTED) {
            printf("skipped: %s\n", ms_err_msg());
            break;
        }
        ck_assert_msg(rc == 0, "%s", ms_err_msg());
        o.device = "cpu";
        ck_assert_int_eq(runtime_model_open_store(&cpu, s, &name, &o), 0);
        compare_models(cpu, gpu, P2, (int)(sizeof P2 / sizeof P2[0]), 24, 1e-4, files[_i]);
        compare_models(cpu, gpu, P3, (int)(sizeof P3 / sizeof P3[0]), 24, 1e-4, files[_i]);
        runtime_model_close(cpu);
        runtime_model_close(gpu);
    }
    store_close(s);
    fixture_rmrf(home);
    free(path);
}
END_TEST

/* Synthetic llamas of F32, F16, Q8_0 and Q4_0 (regenerated, as test_runtime does); MLX int4 and
 * int8 (the F32 one imported with --quantize); BF16, Q4_1 and Q5_1 (the F32 one's matrices
 * converted here); the committed K-quant models (llama Q4_K, Q5_K,
 * Q6_K; qwen2 Q4_K with biases; qwen3 Q4_K, Q6_K with QK-norm). */
/* clang-format off */
static const char *const synth[] = {
    "f32", "f16", "q8_0", "q4_0", "int4", "int8", "bf16", "q4_1", "q5_1",
    "kquant/llama-q4_k.gguf", "kquant/llama-q5_k.gguf", "kquant/llama-q6_k.gguf",
    "kquant/qwen2-q4_k.gguf", "kquant/qwen3-q4_k.gguf", "kquant/qwen3-q6_k.gguf",
};
/* clang-format on */
#define N_SYNTH (int)(sizeof synth / sizeof synth[0])

static char *make_synthetic(const char *dir, const char *dt)
{
    char *tool = model_path("../tools/make_synthetic_gguf.py"), *vocab = model_path("stories260K/stories260K.gguf");
    char *out = ms_strdup_printf("%s/synthetic-%s.gguf", dir, dt), *cmd;
    int ok;

    if (!tool || !vocab || !ms_is_file("/usr/bin/python3")) {
        printf("skipped: make_synthetic_gguf.py, stories260K or /usr/bin/python3 missing\n");
        free(tool);
        free(vocab);
        free(out);
        return NULL;
    }
    cmd = ms_strdup_printf("/usr/bin/python3 '%s' --dim 64 --layers 2 --heads 4 --kv-heads 2 --ffn 192 --vocab '%s' "
                           "--seed 1234 --dtype %s -o '%s' >/dev/null 2>&1",
                           tool, vocab, dt, out);
    ok = system(cmd) == 0;
    if (!ok)
        printf("skipped: %s failed (numpy missing?)\n", cmd);
    free(cmd);
    free(tool);
    free(vocab);
    if (!ok) {
        free(out);
        return NULL;
    }
    return out;
}

/* ---------------------------------------------------------------- BF16, Q4_1, Q5_1 models */

/* f32 -> bf16, round to nearest even */
static uint16_t to_bf16(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    return (uint16_t)((b + 0x7fff + ((b >> 16) & 1)) >> 16);
}

/* One 32-weight block of Q4_1 (bits 4) or Q5_1 (bits 5): d = (max - min) / (2^bits - 1), m =
 * min, both f16; codes rounded, clamped (ggml's reference layout). */
static void quantize_block(uint8_t *out, const float *x, int bits)
{
    float lo = x[0], hi = x[0], d, id;
    int qmax = (1 << bits) - 1;
    uint32_t qh = 0;

    for (int j = 1; j < 32; j++) {
        lo = fminf(lo, x[j]);
        hi = fmaxf(hi, x[j]);
    }
    d = (hi - lo) / (float)qmax;
    id = d != 0.0f ? 1.0f / d : 0.0f;
    uint16_t hd = cpu_f32_to_f16(d), hm = cpu_f32_to_f16(lo);
    memcpy(out, &hd, 2);
    memcpy(out + 2, &hm, 2);
    uint8_t *qs = out + (bits == 5 ? 8 : 4);
    for (int j = 0; j < 16; j++) {
        int q0 = (int)lrintf((x[j] - lo) * id), q1 = (int)lrintf((x[j + 16] - lo) * id);
        q0 = q0 < 0 ? 0 : q0 > qmax ? qmax : q0;
        q1 = q1 < 0 ? 0 : q1 > qmax ? qmax : q1;
        qs[j] = (uint8_t)((q0 & 15) | ((q1 & 15) << 4));
        qh |= (uint32_t)((q0 >> 4) & 1) << j;
        qh |= (uint32_t)((q1 >> 4) & 1) << (j + 16);
    }
    if (bits == 5)
        memcpy(out + 4, &qh, 4);
}

/* The F32 GGUF at src with its 2-D matrices turned into `type` (BF16, Q4_1, Q5_1); metadata and
 * 1-D tensors as they are. */
static void retype_gguf(const char *src, const char *dst, int type)
{
    gguf_file *g;
    gguf_writer *w;
    void **bufs;
    size_t nt;

    ck_assert_msg(gguf_open(&g, src) == 0, "%s", ms_err_msg());
    ck_assert_int_eq(gguf_writer_new(&w, 3, 32), 0);
    for (size_t i = 0; i < gguf_kv_count(g); i++) {
        const uint8_t *val;
        size_t len;
        const char *key = gguf_kv_key(g, i);
        if (strcmp(key, "general.alignment") == 0)
            continue;
        gguf_kv_value(g, i, &val, &len);
        ck_assert_int_eq(gguf_writer_set_raw(w, key, gguf_kv_type(g, i), val, len), 0);
    }
    nt = gguf_tensor_count(g);
    bufs = calloc(nt, sizeof *bufs);
    for (size_t i = 0; i < nt; i++) {
        const gguf_tensor *t = gguf_tensor_at(g, i);
        uint64_t n = t->ne[0] * (t->n_dims > 1 ? t->ne[1] : 1), nbytes;
        if (t->n_dims != 2 || t->type != GGML_TYPE_F32) {
            ck_assert_int_eq(gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, t->nbytes), 0);
            continue;
        }
        ck_assert_int_eq(ggml_row_nbytes(&nbytes, type, t->ne[0]), 0);
        nbytes *= t->ne[1];
        uint8_t *out = bufs[i] = calloc(1, nbytes);
        float *x = malloc(n * sizeof *x);
        memcpy(x, t->data, n * sizeof *x);
        if (type == GGML_TYPE_BF16) {
            for (uint64_t k = 0; k < n; k++) {
                uint16_t h = to_bf16(x[k]);
                memcpy(out + 2 * k, &h, 2);
            }
        } else {
            int bits = type == GGML_TYPE_Q5_1 ? 5 : 4, bb = bits == 5 ? 24 : 20;
            for (uint64_t b = 0; b < n / 32; b++)
                quantize_block(out + b * bb, x + b * 32, bits);
        }
        free(x);
        ck_assert_int_eq(gguf_writer_add_tensor(w, t->name, type, 2, t->ne, out, nbytes), 0);
    }
    ck_assert_msg(gguf_writer_write_file(w, dst) == 0, "%s", ms_err_msg());
    gguf_writer_free(w);
    for (size_t i = 0; i < nt; i++)
        free(bufs[i]);
    free(bufs);
    gguf_close(g);
}

START_TEST(first_step_logits_match_the_cpu_on_every_weight_type)
{
    char *dir = fixture_tmpdir(), *path = NULL, msrc[4096];
    const char *what = synth[_i];

    if (strncmp(what, "kquant/", 7) == 0) {
        snprintf(msrc, sizeof msrc, "%s/tests/data/runtime/%s", getenv("MSTORE_SRC") ? getenv("MSTORE_SRC") : ".",
                 what);
        compare_gguf(msrc, 0, 8, what);
    } else if (strcmp(what, "bf16") == 0 || strcmp(what, "q4_1") == 0 || strcmp(what, "q5_1") == 0) {
        if ((path = make_synthetic(dir, "f32"))) {
            char *out = ms_strdup_printf("%s/synthetic-%s.gguf", dir, what);
            retype_gguf(path, out, what[0] == 'b' ? GGML_TYPE_BF16 : what[1] == '4' ? GGML_TYPE_Q4_1 : GGML_TYPE_Q5_1);
            compare_gguf(out, 0, 8, what);
            free(out);
        }
    } else if (strncmp(what, "int", 3) != 0) {
        if ((path = make_synthetic(dir, what)))
            compare_gguf(path, 0, 8, what);
    } else if ((path = make_synthetic(dir, "f32"))) {
        store *s = NULL;
        model_name name;
        char *home = ms_strdup_printf("%s/home", dir);
        ms_digest digest;
        import_opts io = {.quiet = 1, .quantize = what};
        runtime_model *gpu = NULL, *cpu = NULL;
        runtime_opts o = {.n_threads = 2, .n_ctx = 256, .n_batch = 16, .device = "vulkan"};
        int rc;

        ck_assert_int_eq(store_open(&s, home), 0);
        ck_assert_int_eq(name_parse(&name, "synthetic:q"), 0);
        ck_assert_msg(import_path(s, path, &name, &io, digest) == 0, "%s", ms_err_msg());
        if ((rc = runtime_model_open_store(&gpu, s, &name, &o)) == MS_EUNSUPPORTED) {
            printf("skipped: %s\n", ms_err_msg());
        } else {
            ck_assert_msg(rc == 0, "%s", ms_err_msg());
            o.device = "cpu";
            ck_assert_int_eq(runtime_model_open_store(&cpu, s, &name, &o), 0);
            compare_models(cpu, gpu, P2, (int)(sizeof P2 / sizeof P2[0]), 8, 1e-4, what);
            compare_models(cpu, gpu, P3, (int)(sizeof P3 / sizeof P3[0]), 8, 1e-4, what);
            runtime_model_close(cpu);
            runtime_model_close(gpu);
        }
        store_close(s);
        free(home);
    }
    free(path);
    fixture_rmrf(dir);
}
END_TEST

/* The architectures past llama and Qwen (tests/reference/make_synthetic_arch.py, as
 * test_runtime_archs): Mixtral, Qwen3-MoE, Qwen2-MoE (8 experts, top 2; a shared expert with its
 * gate), Gemma 3 (a window of 8 on five of six layers' pattern, GeGLU, (1 + w) norms, with and
 * without logit soft-capping), Mistral and Phi-3 with a window; F32 and Q8_0. Both prompts are
 * longer than the window (n_batch 16: the ring of a window layer wraps within the prompt): the
 * CPU's greedy tokens and first-step logits within 1e-4 relative. */
static const char *const archs[][3] = {
    {"mixtral", "f32", ""},
    {"qwen3moe", "f32", ""},
    {"qwen2moe", "f32", ""},
    {"gemma3", "f32", ""},
    {"mistral", "f32", ""},
    {"phi3", "f32", ""},
    {"mixtral", "q8_0", ""},
    {"qwen3moe", "q8_0", ""},
    {"qwen2moe", "q8_0", ""},
    {"gemma3", "q8_0", ""},
    {"mistral", "q8_0", ""},
    {"phi3", "q8_0", ""},
    {"gemma3", "f32", "--softcap 30"},
};
#define N_ARCHS (int)(sizeof archs / sizeof archs[0])

START_TEST(moe_gemma3_and_window_models_give_the_cpu_tokens)
{
    char *dir = fixture_tmpdir(), *vocab = model_path("stories260K/stories260K.gguf"), *cmd, what[64];
    char *out = ms_strdup_printf("%s/%s-%s.gguf", dir, archs[_i][0], archs[_i][1]);
    const char *src = getenv("MSTORE_SRC") ? getenv("MSTORE_SRC") : ".";

    snprintf(what, sizeof what, "%s %s%s%s", archs[_i][0], archs[_i][1], *archs[_i][2] ? " " : "", archs[_i][2]);
    if (!vocab || !ms_is_file("/usr/bin/python3")) {
        printf("skipped: stories260K or /usr/bin/python3 missing\n");
        goto done;
    }
    cmd = ms_strdup_printf("/usr/bin/python3 '%s/tests/reference/make_synthetic_arch.py' --arch %s --dtype %s %s "
                           "--vocab '%s' -o '%s' >/dev/null 2>&1",
                           src, archs[_i][0], archs[_i][1], archs[_i][2], vocab, out);
    if (system(cmd) != 0) {
        printf("skipped: %s failed (numpy missing?)\n", cmd);
        free(cmd);
        goto done;
    }
    free(cmd);
    compare_gguf(out, 0, 8, what);
done:
    free(vocab);
    free(out);
    fixture_rmrf(dir);
}
END_TEST

/* A discrete GPU's paths (weights uploaded through a staging buffer, buffers zeroed by the
 * device, logits read back by a copy), taken on this device through $MSTORE_VULKAN_DISCRETE:
 * the same tokens and logits. (Check runs each test in its own process, so the variable stays
 * here.) */
START_TEST(discrete_gpu_paths_give_the_cpu_tokens)
{
    char *path = model_path("stories260K/s260k-mixed.gguf");

    if (!path) {
        printf("skipped: stories260K/s260k-mixed.gguf not found under the test models\n");
        return;
    }
    setenv("MSTORE_VULKAN_DISCRETE", "1", 1);
    runtime_model *gpu = open_gguf(path, "vulkan", 0), *cpu;
    if (gpu) {
        /* a real discrete GPU takes these paths anyway, and its description does not add "as a discrete GPU" */
        ck_assert_ptr_nonnull(strstr(runtime_model_device(gpu), "weights uploaded"));
        ck_assert_ptr_null(strstr(runtime_model_device(gpu), "imported"));
        cpu = open_gguf(path, "cpu", 0);
        compare_models(cpu, gpu, P3, (int)(sizeof P3 / sizeof P3[0]), 16, 1e-4, "s260k-mixed, discrete paths");
        runtime_model_close(cpu);
        runtime_model_close(gpu);
    }
    unsetenv("MSTORE_VULKAN_DISCRETE");
    free(path);
}
END_TEST

/* ---------------------------------------------------------------- DeepSeek's ops (MLA) */

/* MATMUL_HEADS on a pack of 4 heads of 24 rows, in every weight type: 5 tokens, one input row per
 * (token, head), at odd offsets; each output row within matmul's tolerance of the CPU's. */
START_TEST(matmul_heads_matches_the_cpu_on_every_weight_type)
{
    int heads = 4, rows = 24, cols = _i < N_MM_TYPES && is_float(mm_types[_i]) ? 172 : 256, n = 5;
    pair p;
    tensor w;

    if (!pair_open(&p, n, cols, 16))
        return;
    for (int b = 0; b < 2; b++) {   /* the CPU sizes its per-head scratch by head_cols */
        backend_limits l = {.max_rows = n, .max_cols = cols, .n_ctx = 16, .heads = 16, .head_cols = cols};
        ck_assert_int_eq(backend_reserve(p.be[b], &l), 0);
    }
    make_case(&w, _i, heads * rows, cols);
    float *row = malloc(sizeof(float) * cols);
    double *wabs = malloc(sizeof(double) * heads * rows), xmax = 0, worst = 0;
    for (int r = 0; r < heads * rows; r++) {
        cpu_tensor_row(row, &w.t, (uint64_t)r);
        wabs[r] = 0;
        for (int j = 0; j < cols; j++)
            wabs[r] += fabs(row[j]);
    }
    w.t.n_dims = 3; /* the same bytes as a pack [heads][rows][cols] */
    w.t.shape[0] = (uint64_t)heads;
    w.t.shape[1] = (uint64_t)rows;
    w.t.shape[2] = (uint64_t)cols;
    int x = pair_buf(&p, (size_t)n * heads * cols + 1, BACKEND_F32, 1.0f);
    int y = pair_buf(&p, (size_t)n * heads * rows + 3, BACKEND_F32, 0);
    float *xs = malloc(sizeof(float) * n * heads * cols);
    float *cpu = malloc(sizeof(float) * n * heads * rows), *gpu = malloc(sizeof(float) * n * heads * rows);
    ck_assert_int_eq(backend_read(p.be[0], xs, backend_at(p.buf[0][x], 1), (size_t)n * heads * cols), 0);
    for (int i = 0; i < n * heads * cols; i++)
        xmax = fmax(xmax, fabs(xs[i]));
    for (int nn = n; nn >= 1; nn -= n - 1) {   /* a prefill of 5, then one token */
        for (int b = 0; b < 2; b++) {
            const backend_weight *bw;
            backend_op ops[1];
            backend_seq seq = {.ops = ops, .cap = 1};
            ck_assert_msg(backend_weight_import(&bw, p.be[b], &w.t) == 0, "%s", ms_err_msg());
            backend_seq_matmul_heads(&seq, backend_at(p.buf[b][y], 3), backend_at(p.buf[b][x], 1), bw, nn);
            ck_assert_msg(backend_run(p.be[b], &seq) == 0, "%s", ms_err_msg());
        }
        pair_read(&p, y, 3, (size_t)nn * heads * rows, cpu, gpu);
        for (int i = 0; i < nn * heads; i++) {
            int h = i % heads;
            for (int r = 0; r < rows; r++) {
                double d = fabs((double)gpu[i * rows + r] - cpu[i * rows + r]);
                double tol = 1e-4 * wabs[h * rows + r] * xmax + 1e-6;
                ck_assert_msg(d <= tol, "case %d, %d tokens, token %d head %d row %d: gpu %g cpu %g", _i, nn,
                              i / heads, h, r, gpu[i * rows + r], cpu[i * rows + r]);
                worst = fmax(worst, d / tol);
            }
        }
    }
    printf("measured: matmul_heads case %d (%s): worst |diff| / tolerance %.3g\n", _i,
           _i < N_MM_TYPES ? ggml_type_name(mm_types[_i]) : w.t.quant_type, worst);
    free(row);
    free(wabs);
    free(xs);
    free(cpu);
    free(gpu);
    pair_close(&p);
    tensor_free(&w);
}
END_TEST

/* STORE_ROWS of 5 rows of 7 into rows of 13 (MLA's cache rows) at an odd offset, over a buffer
 * already holding values: f32 bit for bit, and f16 bit for bit (each half of a word the rows do
 * not cover kept), the f16 buffer read back through an attention over one position of one head
 * as wide as the buffer (out = v exactly). */
START_TEST(store_rows_match_the_cpu_bit_for_bit)
{
    int n = 5, cols = 7, stride = 13, off = 3, len = 3 + 4 * 13 + 7 + 4, f16 = _i;
    pair p;

    if (!pair_open(&p, 4, 64, 16))
        return;
    int src = pair_buf(&p, (size_t)n * cols + 1, BACKEND_F32, 3.0f), old = pair_buf(&p, (size_t)len, BACKEND_F32, 1.0f);
    int d = pair_buf(&p, (size_t)len, f16 ? BACKEND_F16 : BACKEND_F32, 0);
    for (int b = 0; b < 2; b++) {
        backend_op ops[2];
        backend_seq seq = {.ops = ops, .cap = 2};
        backend_seq_store(&seq, backend_at(p.buf[b][d], 0), backend_at(p.buf[b][old], 0), len);
        backend_seq_store_rows(&seq, backend_at(p.buf[b][d], (size_t)off), backend_at(p.buf[b][src], 1), n, cols,
                               stride);
        ck_assert_msg(backend_run(p.be[b], &seq) == 0, "%s", ms_err_msg());
    }
    float *cpu = malloc(sizeof(float) * len), *gpu = malloc(sizeof(float) * len);
    if (!f16) {
        pair_read(&p, d, 0, (size_t)len, cpu, gpu);
        ck_assert_int_eq(memcmp(cpu, gpu, sizeof(float) * len), 0);
    } else {
        int q = pair_buf(&p, (size_t)len, BACKEND_F32, 1.0f), o = pair_buf(&p, (size_t)len, BACKEND_F32, 0);
        int z = pair_buf(&p, (size_t)len, BACKEND_F16, 0); /* zero keys: a score of 0 */
        backend_op ops[1];
        backend_seq seq = {.ops = ops, .cap = 1};
        backend_seq_attention(&seq, backend_at(p.buf[1][o], 0), backend_at(p.buf[1][q], 0), backend_at(p.buf[1][z], 0),
                              backend_at(p.buf[1][d], 0), 1, 0, 1, 1, len);
        ck_assert_msg(backend_run(p.be[1], &seq) == 0, "%s", ms_err_msg());
        ck_assert_int_eq(backend_read(p.be[1], gpu, backend_at(p.buf[1][o], 0), (size_t)len), 0);
        const uint16_t *hc = p.buf[0][d]->host;
        for (int i = 0; i < len; i++)
            ck_assert_msg(cpu_f32_to_f16(gpu[i]) == hc[i], "f16 element %d: device %04x cpu %04x", i,
                          cpu_f32_to_f16(gpu[i]), hc[i]);
    }
    free(cpu);
    free(gpu);
    pair_close(&p);
}
END_TEST

/* MOE_ROUTE's grouped routes (DeepSeek V2's softmax with group-limited greedy, V3's sigmoid with a
 * selection bias and groups scored by their two best), against the CPU: the same ids (the logits
 * are far enough apart for float rounding not to reorder them) and weights within 1e-5 relative
 * (the device sums in float). Each grouped case is run on the CPU without groups too, and must
 * choose differently for some token: the groups are what is tested. */
START_TEST(moe_route_grouped_matches_the_cpu)
{
    static const struct {
        int ne, used, route, bias, n_group, topk_group, norm;
        float scale;
    } cases[] = {
        {64, 6, BACKEND_ROUTE_SOFTMAX_GROUPED, 0, 8, 3, 0, 16.0f},    /* V2-lite-like */
        {256, 8, BACKEND_ROUTE_SIGMOID_GROUPED, 1, 8, 4, 1, 2.5f},    /* V3 */
        {160, 6, BACKEND_ROUTE_SOFTMAX_GROUPED, 1, 1, 1, 1, 1.0f},    /* no groups, with a bias */
        {1024, 8, BACKEND_ROUTE_SIGMOID_GROUPED, 0, 32, 5, 0, 1.0f},  /* the kernel's largest */
    };
    int c = _i, n = 9, ne = cases[c].ne, used = cases[c].used;
    pair p;
    tensor bias;

    if (!pair_open(&p, 16, 1024, 16))
        return;
    memset(&bias, 0, sizeof bias);
    make_vec(&bias, GGML_TYPE_F32, ne);
    for (int i = 0; i < ne; i++)   /* V3's correction biases: small against the sigmoids */
        ((float *)bias.t.data)[i] = 0.3f * unif();
    int lg = pair_buf(&p, (size_t)n * ne, BACKEND_F32, 4.0f), w = pair_buf(&p, (size_t)n * used + 3, BACKEND_F32, 0);
    int ids = pair_buf(&p, (size_t)n * used, BACKEND_F32, 0), ids2 = pair_buf(&p, (size_t)n * used, BACKEND_F32, 0);
    for (int b = 0; b < 2; b++) {
        const backend_weight *bw = NULL;
        backend_op ops[2];
        backend_seq seq = {.ops = ops, .cap = 2};
        if (cases[c].bias)
            ck_assert_msg(backend_weight_import(&bw, p.be[b], &bias.t) == 0, "%s", ms_err_msg());
        backend_seq_moe_route_grouped(&seq, backend_at(p.buf[b][w], 3), backend_at(p.buf[b][ids], 0),
                                      backend_at(p.buf[b][lg], 0), n, ne, used, cases[c].route, bw, cases[c].n_group,
                                      cases[c].topk_group, cases[c].norm, cases[c].scale);
        if (b == 0)   /* the same route without groups, on the CPU */
            backend_seq_moe_route_grouped(&seq, backend_at(p.buf[b][ids2], 0), backend_at(p.buf[b][ids2], 0),
                                          backend_at(p.buf[b][lg], 0), n, ne, used, cases[c].route, bw, 1, 1,
                                          cases[c].norm, cases[c].scale);
        ck_assert_msg(backend_supports(p.be[b], BACKEND_OP_MOE_ROUTE_GROUPED), "grouped routes unsupported");
        ck_assert_msg(backend_run(p.be[b], &seq) == 0, "%s", ms_err_msg());
    }
    int32_t *ic = malloc(sizeof(int32_t) * n * used), *ig = malloc(sizeof(int32_t) * n * used);
    float *cpu = malloc(sizeof(float) * n * used), *gpu = malloc(sizeof(float) * n * used);
    read_ids(&p, ids, (size_t)n * used, ic, ig);
    for (int i = 0; i < n * used; i++)
        ck_assert_msg(ic[i] == ig[i], "case %d token %d slot %d: device expert %d, cpu %d", c, i / used, i % used,
                      ig[i], ic[i]);
    if (cases[c].n_group > 1) {
        const int32_t *flat = p.buf[0][ids2]->host;
        int differ = 0;
        for (int i = 0; i < n * used; i++)
            differ += flat[i] != ic[i];
        ck_assert_msg(differ > 0, "case %d: the groups changed no choice", c);
    }
    pair_read(&p, w, 3, (size_t)n * used, cpu, gpu);
    for (int i = 0; i < n * used; i++)
        ck_assert_msg(fabs((double)gpu[i] - cpu[i]) <= 1e-5 * fabs(cpu[i]) + 1e-9, "case %d weight %d: %g vs %g", c,
                      i, gpu[i], cpu[i]);
    free(ic);
    free(ig);
    free(cpu);
    free(gpu);
    pair_close(&p);
    tensor_free(&bias);
}
END_TEST

/* MLA's attention: one kv head of head_dim 576 (DeepSeek's 64 + 512) or 48 (the synthetic
 * model's), k and v the same cache, an explicit scale, over f32 and f16 caches, prefill and
 * decode: within 1e-5 of the output's scale, as the other attention tests. */
START_TEST(attention_mla_head_dim_576_matches_the_cpu)
{
    int heads = 6, hd = (_i / 2) ? 48 : 576, ctx = 96, f16 = _i % 2;
    static const int nn[] = {5, 1}, pp[] = {60, 90};
    pair p;

    if (!pair_open(&p, 8, 1024, ctx))
        return;
    int q = pair_buf(&p, (size_t)5 * heads * hd, BACKEND_F32, 1.0f);
    int kf = pair_buf(&p, (size_t)ctx * hd, BACKEND_F32, 1.0f);
    int kc = pair_buf(&p, (size_t)ctx * hd, f16 ? BACKEND_F16 : BACKEND_F32, 0);
    int o = pair_buf(&p, (size_t)5 * heads * hd, BACKEND_F32, 0);
    float *cpu = malloc(sizeof(float) * 5 * heads * hd), *gpu = malloc(sizeof(float) * 5 * heads * hd);
    for (int b = 0; b < 2; b++) {
        backend_op ops[2];
        backend_seq seq = {.ops = ops, .cap = 2};
        backend_seq_add(&seq, backend_at(p.buf[b][kf], 0), backend_at(p.buf[b][kf], 0), ctx * hd);
        backend_seq_store(&seq, backend_at(p.buf[b][kc], 0), backend_at(p.buf[b][kf], 0), ctx * hd);
        ck_assert_int_eq(backend_run(p.be[b], &seq), 0);
    }
    for (int k = 0; k < 2; k++) {
        for (int b = 0; b < 2; b++) {
            backend_op ops[1];
            backend_seq seq = {.ops = ops, .cap = 1};
            ck_assert_msg(backend_supports(p.be[b], BACKEND_OP_ATTENTION_WINDOW), "no explicit scale");
            backend_seq_attention_ex(&seq, backend_at(p.buf[b][o], 0), backend_at(p.buf[b][q], 0),
                                     backend_at(p.buf[b][kc], 0), backend_at(p.buf[b][kc], 0), nn[k], pp[k], heads, 1,
                                     hd, 0, 0.06f, 0);
            ck_assert_msg(backend_run(p.be[b], &seq) == 0, "%s", ms_err_msg());
        }
        size_t m = (size_t)nn[k] * heads * hd;
        pair_read(&p, o, 0, m, cpu, gpu);
        ck_assert_msg(rel_diff(gpu, cpu, m) <= 1e-5, "head_dim %d, %d tokens at %d: %g", hd, nn[k], pp[k],
                      rel_diff(gpu, cpu, m));
        printf("measured: mla attention head_dim %d %s, %d tokens: %.3g\n", hd, f16 ? "f16" : "f32", nn[k],
               rel_diff(gpu, cpu, m));
    }
    free(cpu);
    free(gpu);
    pair_close(&p);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("vulkan");
    TCase *ops = tcase_create("ops"), *models = tcase_create("models");
    SRunner *sr;
    int failed;

#ifndef MSTORE_HAVE_VULKAN
    printf("skipped: this mstore was built without the Vulkan backend (no vulkan/vulkan.h or glslc)\n");
#endif
    tcase_set_timeout(ops, 600);
    tcase_set_timeout(models, 900);
    tcase_add_loop_test(ops, matmul_matches_the_cpu_on_every_weight_type, 0, N_MM_CASES);
    tcase_add_loop_test(ops, matmul_rows_are_the_same_bits_in_any_pass, 0, N_MM_CASES);
    tcase_add_loop_test(ops, embedding_rows_match_the_cpu_on_every_weight_type, 0, N_MM_CASES);
    tcase_add_loop_test(ops, rms_norm_and_add_row_match_the_cpu, 0, 3);
    tcase_add_loop_test(ops, rope_matches_the_cpu_in_both_layouts, 0, 2);
    tcase_add_test(ops, store_converts_to_f16_bit_for_bit);
    tcase_add_test(ops, swiglu_and_add_match_the_cpu);
    tcase_add_loop_test(ops, attention_matches_the_cpu_over_f32_and_f16_caches, 0, 2);
    tcase_add_test(ops, gemma_and_moe_elementwise_ops_match_the_cpu);
    tcase_add_loop_test(ops, attention_window_and_ring_match_the_cpu, 0, 2);
    tcase_add_loop_test(ops, layer_norm_matches_the_cpu, 0, 3);
    tcase_add_test(ops, gelu_matches_the_cpu);
    tcase_add_loop_test(ops, attention_bidir_matches_the_cpu, 0, 2);
    tcase_add_loop_test(ops, moe_route_matches_the_cpu, 0, 4);
    tcase_add_loop_test(ops, matmul_id_matches_the_cpu_on_every_weight_type, 0, N_MM_CASES);
    tcase_add_test(ops, swiglu_oai_and_add_row_id_match_the_cpu);
    tcase_add_loop_test(ops, attention_sinks_match_the_cpu, 0, 2);
    tcase_add_test(ops, mxfp4_matmul_matches_the_dequantized_product);
    tcase_add_test(ops, mxfp4_matmul_id_matches_the_dequantized_product);
    tcase_add_test(ops, mxfp4_embedding_rows_are_the_dequantizer_s);
    tcase_add_test(ops, unsupported_types_are_refused_at_import);
    tcase_add_test(ops, devices_are_listed_and_auto_skips_software);
    tcase_add_loop_test(ops, matmul_heads_matches_the_cpu_on_every_weight_type, 0, N_MM_CASES);
    tcase_add_loop_test(ops, store_rows_match_the_cpu_bit_for_bit, 0, 2);
    tcase_add_loop_test(ops, moe_route_grouped_matches_the_cpu, 0, 4);
    tcase_add_loop_test(ops, attention_mla_head_dim_576_matches_the_cpu, 0, 4);
    tcase_add_loop_test(models, stories260k_from_the_store_gives_the_cpu_tokens, 0, 3);
    tcase_add_loop_test(models, first_step_logits_match_the_cpu_on_every_weight_type, 0, N_SYNTH);
    tcase_add_test(models, discrete_gpu_paths_give_the_cpu_tokens);
    tcase_add_loop_test(models, moe_gemma3_and_window_models_give_the_cpu_tokens, 0, N_ARCHS);
    suite_add_tcase(s, ops);
    suite_add_tcase(s, models);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
