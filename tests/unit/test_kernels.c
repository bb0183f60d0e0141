/* test_kernels.c: the CPU paths of src/cpu (scalar, avx2, avx512, avxvnni, avxvnni-evex, avx512vnni, neon,
 * neon-dotprod, neon-i8mm, the -int8 ones, amx, amx-int8: each that this CPU runs; the -emul ones
 * everywhere; tests/arm64.sh runs the NEON ones under qemu-aarch64). Which result each path is
 * held to: its own row dot bit for bit, and the float64 sum over the activations it takes: f32
 * for the avx512 path's block types, the 16-bit cpu_q16 codes for the others (the VNNI paths included: vpdpwssd multiplies 16-bit
 * codes, so they are not compared with the avx512 path's f32 results). The VNNI paths compute one
 * arithmetic (kernels_vnni.h), so they also equal vnni-emul bit for bit (the AMX tiles too).
 * For every path: the tiled matmul equals the path's row dot products bit for bit at every
 * token count (so prefill in one batch, in chunks or token by token gives the same logits),
 * and within float rounding of the float64 sum over the activations it takes (16-bit blocks,
 * or f32 where the path says so); MSTORE_CPU picks the
 * path; and the stories260K models match their float64 references on every path (test_runtime
 * checks the scalar and avx2 paths by name, and only the default one for some models). */
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers/fixture.h"
#include "runtime/runtime.h"
#include "cpu/kernels.h"
#include "cpu/kquant_int.h"
#include "quant/quant.h"

static const char *paths[] = { "scalar", "avx2", "avx512", "avxvnni", "avxvnni-evex", "avx512vnni", "vnni-emul", "neon",
                               "neon-dotprod", "neon-i8mm", "avx512vnni-int8", "avxvnni-int8", "vnni-int8-emul",
                               "amx-int8", "amx-int8-emul", "amx", "amx-emul" };
#define N_PATHS 17

/* The int8 paths: 8-bit activations (cpu_quantize_q8), an opt-in that trades accuracy for speed. */
static int is_int8(int path) { return strstr(paths[path], "int8") != NULL; }

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 32);
}
static float unif(void) { return (float)rnd() / 4294967296.0f * 2.0f - 1.0f; }

/* 1 unless $MSTORE_TEST_PATHS (a comma-separated list) leaves the path out: tests/x86.sh runs this
 * suite under qemu on the paths its CPU models run natively (avx2, scalar), where the emulated
 * VNNI and AMX arithmetic, already tested on the host, would take most of CI's time. */
static int path_wanted(const char *name)
{
    const char *list = getenv("MSTORE_TEST_PATHS");
    size_t n = strlen(name);

    if (!list || !*list)
        return 1;
    for (const char *p = list; (p = strstr(p, name)) != NULL; p += n)
        if ((p == list || p[-1] == ',') && (p[n] == ',' || p[n] == '\0'))
            return 1;
    return 0;
}

static int use_path(int i)
{
    if (!path_wanted(paths[i])) {
        printf("skipped: cpu path %s not in MSTORE_TEST_PATHS\n", paths[i]);
        return 0;
    }
    int rc = cpu_path_select(paths[i]);

    if (rc == MS_EUNSUPPORTED) {
        printf("skipped: cpu path %s not available here\n", paths[i]);
        return 0;
    }
    ck_assert_int_eq(rc, 0);
    ck_assert_str_eq(cpu_path_name(), paths[i]);
    return 1;
}

static int is_block(int type) { return type != GGML_TYPE_F32 && type != GGML_TYPE_F16 && type != GGML_TYPE_BF16; }
static int is_kquant(int type) { return type == GGML_TYPE_Q4_K || type == GGML_TYPE_Q5_K || type == GGML_TYPE_Q6_K; }

/* Random weights with realistic block scales (0.01..0.06); Q8_0 never holds -128 (ggml never writes it). */
static uint8_t *make_weights(backend_tensor *t, int type, int rows, int cols)
{
    uint64_t row_bytes;
    uint8_t *buf;

    ck_assert_int_eq(ggml_row_nbytes(&row_bytes, type, (uint64_t)cols), 0);
    buf = malloc(row_bytes * rows);
    ck_assert_ptr_nonnull(buf);
    *t = (backend_tensor){ .name = "w", .type = type, .n_dims = 2, .shape = { (uint64_t)rows, (uint64_t)cols },
                           .data = buf, .nbytes = row_bytes * rows };
    if (!is_block(type)) {
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
                memcpy(buf + 2 * i, (uint16_t[]){ (uint16_t)(bits >> 16) }, 2);
        }
        return buf;
    }
    int kq = is_kquant(type), bb = (int)(row_bytes / (uint64_t)(cols / (kq ? QK_K : QK)));
    for (uint8_t *p = buf; p < buf + row_bytes * rows; p += bb) {
        uint16_t h = cpu_f32_to_f16(0.01f + 0.025f * (unif() + 1.0f));
        for (int j = 0; j < bb; j++)
            p[j] = (uint8_t)rnd();
        if (kq) {   /* super-block d (and Q4_K's dmin) in range; scales and codes stay random */
            h = cpu_f32_to_f16((0.01f + 0.025f * (unif() + 1.0f)) / 16);
            memcpy(p + (type == GGML_TYPE_Q6_K ? CPU_Q6_K_BYTES - 2 : 0), &h, 2);
            if (type != GGML_TYPE_Q6_K) {   /* Q4_K, Q5_K: dmin */
                h = cpu_f32_to_f16(0.002f * (unif() + 1.0f));
                memcpy(p + 2, &h, 2);
            }
            continue;
        }
        if (type == GGML_TYPE_MXFP4) {   /* E8M0 e: d = 2^(e - 128), 2^-9 .. 2^-6 (weights up to 12 d) */
            p[0] = (uint8_t)(119 + rnd() % 4);
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
    return buf;
}

static const int types[] = { GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_Q8_0,
                             GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1,
                             GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K, GGML_TYPE_MXFP4 };

/* Shapes that cross every edge of the tiles: rows not a multiple of 4, token counts not a
 * multiple of 4 or 6 or past a 66-token block, block counts not a multiple of 16, float rows longer than a 512-column
 * chunk and with a tail that is not a multiple of 16 (nor of 8, the avx2 path's vectors: 1003, and 5,
 * shorter than one), rows past DEC_BLOCKS blocks, K-quant rows ending in half a 512-column chunk,
 * block counts not a multiple of 8 (the avx2 path's groups: 37, 258). */
START_TEST(tiled_matmul_equals_row_dots_bit_for_bit)
{
    static const int cols_cases[] = { 64, 1184, 552, 40, 8256, 2304, 1003, 5 }, tok_cases[] = { 1, 3, 7, 8, 9, 13, 70 };
    cpu_pool *pool;

    if (!use_path(_i))
        return;
    ck_assert_int_eq(cpu_pool_new(&pool, 2), 0);
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        for (size_t ci = 0; ci < sizeof cols_cases / sizeof cols_cases[0]; ci++) {
            int type = types[ti], cols = cols_cases[ci], rows = 23;
            if ((is_block(type) && cols % QK) || (is_kquant(type) && cols % QK_K))
                continue;
            /* block types the first five token counts; floats all, so the panel path (over 16) too */
            for (size_t ki = 0; ki < (is_block(type) ? 5 : sizeof tok_cases / sizeof tok_cases[0]); ki++) {
                int n_tok = tok_cases[ki];
                backend_tensor w;
                uint8_t *buf = make_weights(&w, type, rows, cols);
                float *x = malloc(sizeof(float) * n_tok * cols), *y = malloc(sizeof(float) * n_tok * rows);
                float *wr = malloc(sizeof(float) * cols);
                void *scratch = malloc(cpu_matmul_scratch(n_tok, cols));
                cpu_q16 *xq = malloc(sizeof(cpu_q16) * (cols / QK + 1));

                for (int i = 0; i < n_tok * cols; i++)
                    x[i] = 3.0f * unif();
                cpu_matmul(pool, y, x, n_tok, &w, scratch);
                /* the activations the kernels see: 16-bit blocks (8-bit for the types an int8 path
                 * has its own kernels for), or f32 where the path takes them */
                int q16 = cpu_path_get()->type[type].act != CPU_ACT_F32;
                void (*quantize)(cpu_q16 *, const float *, int) =
                    is_int8(_i) && cpu_path_get()->type[type].act == CPU_ACT_PATH ? cpu_quantize_q8 : cpu_quantize_q16;
                for (int t = 0; t < n_tok; t++) {
                    const float *xt = x + (size_t)t * cols;
                    if (q16)
                        quantize(xq, xt, cols);
                    for (int r = 0; r < rows; r++) {
                        float got = y[t * rows + r], one = cpu_dot_row(&w, (uint64_t)r, xt);
                        double seen = 0, mag = 0;
                        ck_assert_msg(memcmp(&got, &one, sizeof got) == 0, "%s %s cols %d tokens %d [%d][%d]: %.9g vs dot %.9g",
                                      paths[_i], ggml_type_name(type), cols, n_tok, t, r, got, one);
                        cpu_tensor_row(wr, &w, (uint64_t)r);
                        for (int i = 0; i < cols; i++) {
                            double xs = q16 ? (double)xq[i / QK].d * xq[i / QK].q[i % QK] : xt[i];
                            seen += (double)wr[i] * xs;
                            mag += fabs((double)wr[i] * xs);
                        }
                        ck_assert_msg(fabs(got - seen) <= 2e-6 * mag + 1e-6, "%s %s cols %d: %.9g vs definition %.9g",
                                      paths[_i], ggml_type_name(type), cols, got, seen);
                    }
                }
                free(buf);
                free(x);
                free(y);
                free(wr);
                free(scratch);
                free(xq);
            }
        }
    }
    cpu_pool_free(pool);
    cpu_path_select("auto");
}
END_TEST

/* The NEON block dots (Q8_0, Q4_0; Q4_K, Q6_K; MXFP4) sum integers exactly, whether by widening
 * multiplies, SDOT on the split 16-bit activations or USDOT, and then take the scalar float
 * steps: each must equal the scalar path's dot bit for bit. Each block's largest activation is
 * coded +-32767, the ends of the high/low split. */
START_TEST(neon_block_dots_equal_the_scalar_ones_bit_for_bit)
{
    static const int block_types[] = { GGML_TYPE_Q8_0, GGML_TYPE_Q4_0, GGML_TYPE_Q4_K, GGML_TYPE_Q6_K,
                                       GGML_TYPE_MXFP4 };
    const int rows = 16, cols = 4096;

    if (strncmp(paths[_i], "neon", 4) != 0 || !use_path(_i))
        return;
    for (size_t ti = 0; ti < sizeof block_types / sizeof block_types[0]; ti++) {
        backend_tensor w;
        uint8_t *buf = make_weights(&w, block_types[ti], rows, cols);
        float *x = malloc(sizeof(float) * cols), got[16], want[16];

        for (int i = 0; i < cols; i++)
            x[i] = (i % 7 == 0 ? -40.0f : 3.0f) * unif();
        ck_assert_int_eq(cpu_path_select(paths[_i]), 0);
        for (int r = 0; r < rows; r++)
            got[r] = cpu_dot_row(&w, (uint64_t)r, x);
        ck_assert_int_eq(cpu_path_select("scalar"), 0);
        for (int r = 0; r < rows; r++)
            want[r] = cpu_dot_row(&w, (uint64_t)r, x);
        for (int r = 0; r < rows; r++)
            ck_assert_msg(memcmp(&got[r], &want[r], sizeof got[r]) == 0, "%s %s row %d: %.9g vs scalar %.9g",
                          paths[_i], ggml_type_name(block_types[ti]), r, got[r], want[r]);
        free(buf);
        free(x);
    }
    cpu_path_select("auto");
}
END_TEST

/* MXFP4 (gpt-oss's experts) on every path: a row's dot and the pool's matmul (which must agree
 * bit for bit) against the float64 dot of src/quant's dequantized row with the 16-bit activations
 * the kernel sees (only float summation order may differ: the IQ4 tests' bound), and against the
 * exact activations within their rounding (|w| * dx / 2 each). One block, odd block counts and
 * gpt-oss's 2880 columns; 19 rows and 1, 5 and 18 tokens, past the 16-row and 16-token tiles;
 * E8M0 scales from 2^-29 to 2^-1 (e 99 .. 127). cpu_tensor_row (embedding lookup) is src/quant's row. */
START_TEST(mxfp4_dots_and_matmuls_match_the_dequantized_rows)
{
    static const int cols_cases[] = { 32, 96, 1056, 2880 }, tok_cases[] = { 1, 5, 18 };
    const int rows = 19;
    cpu_pool *pool;

    if (!use_path(_i))
        return;
    ck_assert(cpu_type_supported(GGML_TYPE_MXFP4));
    ck_assert_int_eq(cpu_pool_new(&pool, 2), 0);
    for (size_t ci = 0; ci < sizeof cols_cases / sizeof cols_cases[0]; ci++) {
        int cols = cols_cases[ci];
        uint64_t row_bytes;
        backend_tensor w;
        uint8_t *buf = make_weights(&w, GGML_TYPE_MXFP4, rows, cols);
        float *wr = malloc(sizeof(float) * cols), *wr2 = malloc(sizeof(float) * cols);
        cpu_q16 *xq = malloc(sizeof(cpu_q16) * (cols / QK));
        const cpu_type_traits *tt = &cpu_path_get()->type[GGML_TYPE_MXFP4];

        ggml_row_nbytes(&row_bytes, GGML_TYPE_MXFP4, (uint64_t)cols);
        ck_assert_uint_eq(row_bytes, (uint64_t)cols / QK * 17);
        ck_assert_int_ne(tt->act, CPU_ACT_F32);
        for (int b = 0; b < rows * cols / QK; b++)
            buf[b * 17] = (uint8_t)(99 + rnd() % 29);
        for (size_t ki = 0; ki < sizeof tok_cases / sizeof tok_cases[0]; ki++) {
            int n_tok = tok_cases[ki];
            float *x = malloc(sizeof(float) * n_tok * cols), *y = malloc(sizeof(float) * n_tok * rows);
            void *scratch = malloc(cpu_matmul_scratch(n_tok, cols));

            for (int i = 0; i < n_tok * cols; i++)
                x[i] = 3.0f * unif();
            cpu_matmul(pool, y, x, n_tok, &w, scratch);
            for (int t = 0; t < n_tok; t++) {
                const float *xt = x + (size_t)t * cols;
                (is_int8(_i) && tt->act == CPU_ACT_PATH ? cpu_quantize_q8 : cpu_quantize_q16)(xq, xt, cols);
                for (int r = 0; r < rows; r++) {
                    float got = y[t * rows + r], one = cpu_dot_row(&w, (uint64_t)r, xt);
                    double seen = 0, exact = 0, mag = 0, bound = 0;
                    ck_assert_msg(memcmp(&got, &one, sizeof got) == 0, "%s MXFP4 cols %d tokens %d [%d][%d]: %.9g vs "
                                  "dot %.9g", paths[_i], cols, n_tok, t, r, got, one);
                    ck_assert_int_eq(quant_dequantize_row("MXFP4", buf + r * row_bytes, NULL, NULL, ST_F32, 0,
                                                          (size_t)cols, wr), 0);
                    cpu_tensor_row(wr2, &w, (uint64_t)r);
                    ck_assert_int_eq(memcmp(wr, wr2, sizeof(float) * cols), 0);
                    for (int i = 0; i < cols; i++) {
                        double xs = (double)xq[i / QK].d * xq[i / QK].q[i % QK];
                        seen += (double)wr[i] * xs;
                        exact += (double)wr[i] * xt[i];
                        mag += fabs((double)wr[i] * xs);
                        bound += fabs(wr[i]) * xq[i / QK].d * 0.5;
                    }
                    ck_assert_msg(fabs(got - seen) <= 2e-6 * mag + 1e-6, "%s MXFP4 cols %d [%d][%d]: %.9g vs %.9g "
                                  "(mag %g)", paths[_i], cols, t, r, got, seen, mag);
                    ck_assert_msg(fabs(got - exact) <= bound * 1.001 + 2e-6 * mag + 1e-6, "%s MXFP4 cols %d: %g vs "
                                  "exact %g", paths[_i], cols, got, exact);
                }
            }
            free(x);
            free(y);
            free(scratch);
        }
        free(buf);
        free(wr);
        free(wr2);
        free(xq);
    }
    cpu_pool_free(pool);
    cpu_path_select("auto");
}
END_TEST

/* The ends of E8M0 on every path. 2^(e - 128) is exact for every e < 255, the subnormal 2^-128
 * and 2^-127 (e 0, 1) and 2^126 (e 254) included; rows of such blocks, with activations scaled so
 * that the products stay in float's normal range, match the float64 dot of the weights decoded
 * in double to 2e-6 of their magnitude. e = 255 is E8M0's NaN: src/quant dequantizes its block to
 * NaN, and a row that holds one has a NaN dot product and matmul output (the other rows not). */
START_TEST(mxfp4_scale_extremes)
{
    static const int es[] = { 0, 1, 2, 127, 128, 200, 254 };
    const int rows = 5, cols = 96, n_tok = 3;
    cpu_pool *pool;

    for (int e = 0; e < 255; e++) {
        float d = cpu_mxfp4_scale((uint8_t)e), want = ldexpf(1.0f, e - 128);
        ck_assert_msg(memcmp(&d, &want, sizeof d) == 0, "e %d: %g vs %g", e, d, want);
    }
    ck_assert(isnan(cpu_mxfp4_scale(255)));
    if (!use_path(_i))
        return;
    ck_assert_int_eq(cpu_pool_new(&pool, 2), 0);
    for (size_t ei = 0; ei < sizeof es / sizeof es[0]; ei++) {
        backend_tensor w;
        uint8_t *buf = make_weights(&w, GGML_TYPE_MXFP4, rows, cols);
        float *x = malloc(sizeof(float) * n_tok * cols), *y = malloc(sizeof(float) * n_tok * rows);
        float *wr = malloc(sizeof(float) * cols), *wr2 = malloc(sizeof(float) * cols);
        void *scratch = malloc(cpu_matmul_scratch(n_tok, cols));
        cpu_q16 *xq = malloc(sizeof(cpu_q16) * (cols / QK));
        int e = es[ei], shift = 128 - e < -100 ? -100 : 128 - e > 100 ? 100 : 128 - e;

        for (int b = 0; b < rows * cols / QK; b++)
            buf[b * 17] = (uint8_t)e;
        for (int i = 0; i < n_tok * cols; i++)
            x[i] = ldexpf(3.0f * unif(), shift);
        cpu_matmul(pool, y, x, n_tok, &w, scratch);
        for (int r = 0; r < rows; r++) {
            const uint8_t *row = buf + (size_t)r * (cols / QK) * 17;
            ck_assert_int_eq(quant_dequantize_row("MXFP4", row, NULL, NULL, ST_F32, 0, (size_t)cols, wr), 0);
            cpu_tensor_row(wr2, &w, (uint64_t)r);
            ck_assert_int_eq(memcmp(wr, wr2, sizeof(float) * cols), 0);
            for (int t = 0; t < n_tok; t++) {
                float got = y[t * rows + r], one = cpu_dot_row(&w, (uint64_t)r, x + (size_t)t * cols);
                double seen = 0, mag = 0;
                ck_assert_msg(memcmp(&got, &one, sizeof got) == 0, "%s e %d: matmul %.9g vs dot %.9g", paths[_i], e,
                              got, one);
                cpu_quantize_q16(xq, x + (size_t)t * cols, cols);
                for (int i = 0; i < cols; i++) {
                    int q = row[i / QK * 17 + 1 + i % 16] >> (i % QK < 16 ? 0 : 4) & 15;
                    double wd = cpu_mxfp4_values[q] * ldexp(1.0, e - 128);
                    ck_assert(!isfinite(wr[i]) || wr[i] == wd);   /* src/quant's, where float holds it */
                    seen += wd * ((double)xq[i / QK].d * xq[i / QK].q[i % QK]);
                    mag += fabs(wd * ((double)xq[i / QK].d * xq[i / QK].q[i % QK]));
                }
                ck_assert_msg(isfinite(got) && fabs(got - seen) <= 2e-6 * mag, "%s e %d [%d][%d]: %.9g vs %.9g (mag %g)",
                              paths[_i], e, t, r, got, seen, mag);
            }
        }
        buf[2 * (cols / QK) * 17 + 17] = 255;   /* row 2's second block */
        cpu_matmul(pool, y, x, n_tok, &w, scratch);
        cpu_tensor_row(wr, &w, 2);
        for (int i = 0; i < cols; i++)
            ck_assert_msg(isnan(wr[i]) == (i / QK == 1), "%s e 255: element %d is %g", paths[_i], i, wr[i]);
        for (int t = 0; t < n_tok; t++)
            for (int r = 0; r < rows; r++) {
                ck_assert_msg(isnan(y[t * rows + r]) == (r == 2), "%s e 255: [%d][%d] is %g", paths[_i], t, r,
                              y[t * rows + r]);
                ck_assert(isnan(cpu_dot_row(&w, (uint64_t)r, x + (size_t)t * cols)) == (r == 2));
            }
        free(buf);
        free(x);
        free(y);
        free(wr);
        free(wr2);
        free(scratch);
        free(xq);
    }
    cpu_pool_free(pool);
    cpu_path_select("auto");
}
END_TEST

/* The batched attention kernels (many keys per call) replace a dot_f32 and an axpy_f32 per key:
 * they must give those calls' results bit for bit, at head sizes with and without a tail and
 * with key rows strided as in the KV cache. */
START_TEST(attention_batches_equal_the_per_key_calls_bit_for_bit)
{
    static const int dims[] = {64, 72, 128, 200}, keys[] = {1, 7, 40};

    if (!use_path(_i))
        return;
    const cpu_path *k = cpu_path_get();
    if (!k->dots_f32 || !k->axpys_f32) {
        ck_assert_ptr_null(k->dots_f32); /* both or neither: cpu.c takes them together */
        ck_assert_ptr_null(k->axpys_f32);
        return;
    }
    for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++)
        for (size_t mi = 0; mi < sizeof keys / sizeof keys[0]; mi++) {
            int n = dims[di], m = keys[mi];
            size_t ks = (size_t)n * 3 + 5;
            float *q = malloc(sizeof(float) * n), *kv = malloc(sizeof(float) * ks * m);
            float *s = malloc(sizeof(float) * m), *want_s = malloc(sizeof(float) * m);
            float *y = malloc(sizeof(float) * n), *want_y = malloc(sizeof(float) * n);
            for (int i = 0; i < n; i++)
                q[i] = unif();
            for (size_t i = 0; i < ks * m; i++)
                kv[i] = unif();
            for (int i = 0; i < n; i++)
                y[i] = want_y[i] = unif();
            k->dots_f32(s, q, kv, ks, m, n);
            for (int i = 0; i < m; i++)
                want_s[i] = k->dot_f32(q, kv + (size_t)i * ks, n);
            k->axpys_f32(y, s, kv, ks, m, n);
            for (int i = 0; i < m; i++)
                k->axpy_f32(want_y, want_s[i], kv + (size_t)i * ks, n);
            for (int i = 0; i < m; i++)
                ck_assert_msg(memcmp(&s[i], &want_s[i], sizeof s[i]) == 0, "%s dots n %d key %d: %.9g vs %.9g",
                              paths[_i], n, i, s[i], want_s[i]);
            for (int i = 0; i < n; i++)
                ck_assert_msg(memcmp(&y[i], &want_y[i], sizeof y[i]) == 0, "%s axpys n %d m %d [%d]: %.9g vs %.9g",
                              paths[_i], n, m, i, y[i], want_y[i]);
            free(q);
            free(kv);
            free(s);
            free(want_s);
            free(y);
            free(want_y);
        }
    cpu_path_select("auto");
}
END_TEST

/* One pool pass over several matrices of the same x (Q, K and V; gate and up) gives each the very
 * outputs it gets alone, on every path: rows of each part not a multiple of the 16-row tiles, so
 * the threads' split falls inside a part, and five parts (past the four of one job). */
START_TEST(fused_matmuls_equal_the_single_ones_bit_for_bit)
{
    static const int cols_cases[] = {256, 2304}, tok_cases[] = {1, 7, 70}, rows[] = {40, 23, 8, 1, 33};
    cpu_pool *pool;

    if (!use_path(_i))
        return;
    ck_assert_int_eq(cpu_pool_new(&pool, 2), 0);
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        for (size_t ci = 0; ci < 2; ci++) {
            int type = types[ti], cols = cols_cases[ci];
            if ((is_block(type) && cols % QK) || (is_kquant(type) && cols % QK_K))
                continue;
            for (size_t ki = 0; ki < 3; ki++) {
                int n_tok = tok_cases[ki];
                backend_tensor w[5];
                const backend_tensor *ws[5];
                float *x = malloc(sizeof(float) * n_tok * cols), *ys[5], *one = malloc(sizeof(float) * n_tok * 40);
                void *scratch = malloc(cpu_matmul_scratch(n_tok, cols));
                for (int i = 0; i < n_tok * cols; i++)
                    x[i] = 3.0f * unif();
                for (int p = 0; p < 5; p++) {
                    make_weights(&w[p], type, rows[p], cols);
                    ws[p] = &w[p];
                    ys[p] = malloc(sizeof(float) * n_tok * rows[p]);
                    /* every type of the path tables fuses, the K-quants' row dots too */
                    ck_assert(cpu_matmul_fusable(ws[0], ws[p]));
                }
                cpu_matmul_n(pool, 5, ys, x, n_tok, ws, scratch);
                for (int p = 0; p < 5; p++) {
                    cpu_matmul(pool, one, x, n_tok, ws[p], scratch);
                    ck_assert_msg(memcmp(one, ys[p], sizeof(float) * n_tok * rows[p]) == 0,
                                  "%s %s cols %d tokens %d: part %d differs", paths[_i], ggml_type_name(type), cols,
                                  n_tok, p);
                    free(ys[p]);
                    free((void *)w[p].data);
                }
                free(scratch);
                free(one);
                free(x);
            }
        }
    }
    { /* another type or width does not fuse */
        backend_tensor a, b, c;
        make_weights(&a, GGML_TYPE_Q4_0, 8, 256);
        make_weights(&b, GGML_TYPE_Q8_0, 8, 256);
        make_weights(&c, GGML_TYPE_Q4_0, 8, 512);
        ck_assert(!cpu_matmul_fusable(&a, &b));
        ck_assert(!cpu_matmul_fusable(&a, &c));
        free((void *)a.data), free((void *)b.data), free((void *)c.data);
    }
    cpu_pool_free(pool);
}
END_TEST

/* Each path's table, resolved through its bases, is whole: every type the backend supports has a
 * row dot, a gemm or the path's own activation layout comes with what it needs, and the batched
 * attention kernels come both or neither (cpu.c takes them together). A type entry missing from
 * a path and its bases, or a base chain that skips the scalar path, fails here by name. */
START_TEST(every_path_table_is_whole_after_resolution)
{
    if (!use_path(_i))
        return;
    const cpu_path *k = cpu_path_get();
    for (int t = 0; t < GGML_TYPE_COUNT; t++) {
        if (!cpu_type_supported(t)) {
            ck_assert_msg(k->type[t].dot == NULL && k->type[t].gemm == NULL, "%s: type %d has kernels but is not supported",
                          paths[_i], t);
            continue;
        }
        ck_assert_msg(k->type[t].dot != NULL, "%s %s: no row dot", paths[_i], ggml_type_name(t));
        ck_assert_msg(k->type[t].act >= CPU_ACT_Q16 && k->type[t].act <= CPU_ACT_PATH, "%s %s: activation format %d",
                      paths[_i], ggml_type_name(t), k->type[t].act);
        if (!is_block(t))
            ck_assert_msg(k->type[t].act == CPU_ACT_F32, "%s %s: float weights take f32", paths[_i], ggml_type_name(t));
        if (k->type[t].act == CPU_ACT_PATH)
            ck_assert_msg(k->act_bytes && k->act_quantize, "%s %s: own layout without act_quantize", paths[_i],
                          ggml_type_name(t));
    }
    ck_assert(k->dot_f32 && k->dot_f32_f16 && k->axpy_f32 && k->axpy_f16 && k->f32_to_f16);
    ck_assert_int_eq(k->dots_f32 != NULL, k->axpys_f32 != NULL);
    cpu_path_select("auto");
}
END_TEST

START_TEST(mstore_cpu_selects_the_path_and_bad_names_are_refused)
{
    /* what "auto" prefers, best first (the other paths are taken by name only, cpu.c says why) */
    static const char *rank[] = { "avx512vnni", "avx512", "avxvnni", "avx2", "neon-i8mm", "neon-dotprod", "neon",
                                  "scalar" };
    static const char *names = "expected auto, avx512vnni, avx512, avxvnni, avx2, neon-i8mm, neon-dotprod, neon, scalar, vnni-emul, avxvnni-evex, avx512vnni-int8, avxvnni-int8, vnni-int8-emul, amx-int8, amx-int8-emul, amx, amx-emul";
    char *old = getenv("MSTORE_CPU") ? strdup(getenv("MSTORE_CPU")) : NULL, best[16];
    int emul = cpu_path_select("vnni-emul") == 0;   /* a build with -DMSTORE_EMUL_PATHS=OFF has none */

    ck_assert_int_eq(cpu_path_select("avx9000"), MS_EINVALID);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "cpu path 'avx9000': unknown;"));
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), names));
    setenv("MSTORE_CPU", "scalar", 1);
    ck_assert_int_eq(cpu_path_check_env(), 0);
    ck_assert_int_eq(cpu_path_select("auto"), 0);
    ck_assert_str_eq(cpu_path_name(), "scalar");
    if (emul) {
        setenv("MSTORE_CPU", "vnni-emul", 1);   /* runs on every CPU */
        ck_assert_int_eq(cpu_path_select(NULL), 0);
        ck_assert_str_eq(cpu_path_name(), "vnni-emul");
    } else {
        printf("skipped: vnni-emul not built (MSTORE_EMUL_PATHS=OFF): $MSTORE_CPU read by select is not checked\n");
    }
    setenv("MSTORE_CPU", "bogus", 1);   /* an unknown name is an error naming the valid ones */
    ck_assert_int_eq(cpu_path_check_env(), MS_EINVALID);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "MSTORE_CPU 'bogus': unknown;"));
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), names));
    ck_assert_int_eq(cpu_path_select(NULL), MS_EINVALID);
    ck_assert_str_eq(cpu_path_name(), emul ? "vnni-emul" : "scalar");   /* and nothing changed */
    for (int i = 0; i < N_PATHS; i++) {   /* a path this CPU lacks, asked for by $MSTORE_CPU: an error */
        unsetenv("MSTORE_CPU");
        if (cpu_path_select(paths[i]) != MS_EUNSUPPORTED)
            continue;
        setenv("MSTORE_CPU", paths[i], 1);
        ck_assert_int_eq(cpu_path_check_env(), MS_EUNSUPPORTED);
        ck_assert_int_eq(cpu_path_select("auto"), MS_EUNSUPPORTED);
        ck_assert_ptr_nonnull(strstr(ms_err_msg(), "not supported by this cpu"));
        printf("measured: MSTORE_CPU=%s refused: %s\n", paths[i], ms_err_msg());
    }
    unsetenv("MSTORE_CPU");
    ck_assert_int_eq(cpu_path_check_env(), 0);
    ck_assert_int_eq(cpu_path_select("auto"), 0);
    snprintf(best, sizeof best, "%s", cpu_path_name());
    for (size_t i = 0; i < sizeof rank / sizeof rank[0]; i++) {   /* auto is the best path this CPU runs */
        if (cpu_path_select(rank[i]) == 0) {
            ck_assert_str_eq(best, rank[i]);
            break;
        }
    }
    /* tests/arm64.sh knows which instructions the qemu CPU model has: the hardware capabilities
     * must have been read right, not merely consistently. */
    if (getenv("MSTORE_EXPECT_CPU_PATH"))
        ck_assert_str_eq(best, getenv("MSTORE_EXPECT_CPU_PATH"));
    /* tests/x86.sh's CPU models without AVX-512 (or without AVX): asking for the paths they lack
     * is refused from cpuid alone, before any of those paths' code runs (an AVX-512 instruction
     * there would be SIGILL, as it was on every AVX2 CPU) */
    if (getenv("MSTORE_EXPECT_CPU_PATH") && (strcmp(best, "avx2") == 0 || strcmp(best, "scalar") == 0)) {
        static const char *lacking[] = { "avx512", "avx512vnni", "avx512vnni-int8", "amx", "amx-int8", "avxvnni",
                                         "avxvnni-evex" };
        for (size_t i = 0; i < sizeof lacking / sizeof lacking[0]; i++)
            ck_assert_int_eq(cpu_path_select(lacking[i]), MS_EUNSUPPORTED);
        if (strcmp(best, "scalar") == 0) {
            ck_assert_int_eq(cpu_path_select("avx2"), MS_EUNSUPPORTED);
            ck_assert_int_eq(cpu_path_select("avxvnni"), MS_EUNSUPPORTED);
        }
    }
    if (getenv("MSTORE_EXPECT_CPU_PATH") && strcmp(best, "neon") == 0) {
        ck_assert_int_eq(cpu_path_select("neon-dotprod"), MS_EUNSUPPORTED);
        ck_assert_int_eq(cpu_path_select("neon-i8mm"), MS_EUNSUPPORTED);
    }
    if (old) {
        setenv("MSTORE_CPU", old, 1);
        free(old);
    }
    cpu_path_select("auto");
}
END_TEST

/* The VNNI paths this CPU runs give their emulation's results bit for bit (the instruction against
 * its emulation), for every type they take, on the shapes of the test above, prefill and decode:
 * avx512vnni against vnni-emul (_i 0), the -int8 ones against vnni-int8-emul (_i 1),
 * and the AMX tiles, real and emulated, against the VNNI arithmetic they keep: amx-int8 against
 * vnni-int8-emul (_i 2), amx against vnni-emul (_i 3). avxvnni and avxvnni-evex are avx2's block
 * kernels with vpdpwssd for vpmaddwd + vpaddd: avx2's bits (_i 4), in decode (1 and 5 tokens: rows
 * of 8256 columns take the long-row prefetch) and prefill (70), and for the types they inherit. */
START_TEST(vnni_paths_equal_the_emulation_bit_for_bit)
{
    static const int vtypes[] = { GGML_TYPE_Q8_0, GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0,
                                  GGML_TYPE_Q5_1, GGML_TYPE_Q4_K, GGML_TYPE_Q6_K, GGML_TYPE_MXFP4 };
    static const char *reals[5][2] = { { "avx512vnni", NULL },
                                       { "avx512vnni-int8", "avxvnni-int8" },
                                       { "amx-int8", "amx-int8-emul" },
                                       { "amx", "amx-emul" },
                                       { "avxvnni", "avxvnni-evex" } };
    static const char *emuls[5] = { "vnni-emul", "vnni-int8-emul", "vnni-int8-emul", "vnni-emul", "avx2" };
    const char *const *real = reals[_i], *emul = emuls[_i];
    static const int cols_cases[] = { 64, 1184, 8256, 2304, 768 }, tok_cases[] = { 1, 5, 70 };
    cpu_pool *pool;
    int ran = 0;

    if (!(path_wanted(real[0]) && cpu_path_select(real[0]) == 0) &&
        !(real[1] && path_wanted(real[1]) && cpu_path_select(real[1]) == 0)) {
        printf("skipped: no VNNI on this cpu (%s is tested against the definition alone)\n", emul);
        cpu_path_select("auto");
        return;
    }
    if (cpu_path_select(emul) == MS_EUNSUPPORTED) {
        printf("skipped: %s not built (MSTORE_EMUL_PATHS=OFF)\n", emul);
        cpu_path_select("auto");
        return;
    }
    ck_assert_int_eq(cpu_pool_new(&pool, 2), 0);
    for (size_t ti = 0; ti < sizeof vtypes / sizeof vtypes[0]; ti++) {
        for (size_t ci = 0; ci < sizeof cols_cases / sizeof cols_cases[0]; ci++) {
            int type = vtypes[ti], cols = cols_cases[ci], rows = 19;
            if ((is_kquant(type) && cols % QK_K) || cols % QK)
                continue;
            if (type == GGML_TYPE_MXFP4 && strstr(emul, "int8"))
                continue; /* the int8 paths run MXFP4 on the base path's cpu_q16 dot, not a kernel of theirs */
            for (size_t ki = 0; ki < sizeof tok_cases / sizeof tok_cases[0]; ki++) {
                int n_tok = tok_cases[ki];
                backend_tensor w;
                uint8_t *buf = make_weights(&w, type, rows, cols);
                float *x = malloc(sizeof(float) * n_tok * cols), *ye = malloc(sizeof(float) * n_tok * rows);
                float *yr = malloc(sizeof(float) * n_tok * rows);
                void *scratch = malloc(cpu_matmul_scratch(n_tok, cols));
                for (int i = 0; i < n_tok * cols; i++)
                    x[i] = 3.0f * unif();
                ck_assert_int_eq(cpu_path_select(emul), 0);
                cpu_matmul(pool, ye, x, n_tok, &w, scratch);
                for (size_t p = 0; p < 2; p++) {
                    if (!real[p] || !path_wanted(real[p]) || cpu_path_select(real[p]) != 0)
                        continue;
                    ran++;
                    cpu_matmul(pool, yr, x, n_tok, &w, scratch);
                    for (int i = 0; i < n_tok * rows; i++)
                        ck_assert_msg(memcmp(&ye[i], &yr[i], sizeof *ye) == 0, "%s %s cols %d tokens %d [%d]: %.9g vs %s %.9g",
                                      real[p], ggml_type_name(type), cols, n_tok, i, yr[i], emul, ye[i]);
                }
                free(buf);
                free(x);
                free(ye);
                free(yr);
                free(scratch);
            }
        }
    }
    if (!ran)
        printf("skipped: no VNNI on this cpu (%s is tested against the definition alone)\n", emul);
    else
        printf("measured: %d VNNI matmuls equal to %s bit for bit\n", ran, emul);
    cpu_pool_free(pool);
    cpu_path_select("auto");
}
END_TEST

static json_t *load_ref(const char *name)
{
    char *path = ms_strdup_printf("%s/tests/data/runtime/%s", getenv("MSTORE_SRC") ? getenv("MSTORE_SRC") : ".", name);
    json_error_t e;
    json_t *j = json_load_file(path, 0, &e);

    ck_assert_msg(j != NULL, "%s: %s", path, e.text);
    free(path);
    return j;
}

/* On every path: each prompt's first-step logits within `tol` of the float64 reference (max
 * abs error / max abs logit), all reference greedy tokens, and the prompt prefilled in one
 * batch giving the very same logits as token by token. The int8 paths (8-bit activations, an
 * opt-in) are held to 2e-2 and the first greedy token: their rounding is ggml's, about 1e-2. */
static void check_model(int path, const char *file, const char *ref_name, double tol)
{
    if (is_int8(path) && tol < 2e-2)
        tol = 2e-2;
    char *dir = fixture_models_dir(), *p = dir ? ms_strdup_printf("%s/%s", dir, file) : NULL;
    json_t *ref = load_ref(ref_name), *ps = json_object_get(ref, "prompts");
    runtime_opts o = { .n_threads = 2 };
    runtime_model *m;

    if (!p) {
        printf("skipped: shared models folder not found (set MSTORE_TEST_MODELS)\n");
    } else if (use_path(path)) {
        ck_assert_msg(runtime_model_open_gguf(&m, p, &o) == 0, "%s", ms_err_msg());
        int V = runtime_model_config(m)->vocab_size;
        float *lg = malloc(sizeof *lg * V), *lg1 = malloc(sizeof *lg1 * V);
        for (size_t i = 0; i < json_array_size(ps); i++) {
            json_t *pr = json_array_get(ps, i), *toks = json_object_get(pr, "tokens"), *rl = json_object_get(pr, "logits");
            json_t *greedy = json_object_get(pr, "greedy");
            int n = (int)json_array_size(toks), agree = 0;
            int32_t ids[128], next;
            double num = 0, den = 0;
            ck_assert_int_le(n, 128);
            for (int k = 0; k < n; k++)
                ids[k] = (int32_t)json_integer_value(json_array_get(toks, k));
            runtime_model_reset(m);
            for (int k = 0; k < n; k++)
                ck_assert_int_eq(runtime_forward(m, &ids[k], 1, lg1), 0);
            runtime_model_reset(m);
            ck_assert_int_eq(runtime_forward(m, ids, n, lg), 0);
            ck_assert_msg(memcmp(lg, lg1, sizeof *lg * V) == 0, "%s %s prompt %zu: batch and token by token differ",
                          paths[path], file, i);
            for (size_t k = 0; k < json_array_size(rl); k++) {
                double r = json_number_value(json_array_get(rl, k));
                num = fmax(num, fabs(lg[k] - r));
                den = fmax(den, fabs(r));
            }
            for (size_t s = 0; s < json_array_size(greedy); s++) {
                next = fixture_argmax(lg, V);
                if (next != json_integer_value(json_array_get(greedy, s)))
                    break;
                agree++;
                ck_assert_int_eq(runtime_forward(m, &next, 1, lg), 0);
            }
            printf("measured: %s %s prompt %zu (%d tokens): logits rel %.3g, %d/%zu greedy\n", paths[path], file, i, n,
                   num / den, agree, json_array_size(greedy));
            ck_assert_msg(num / den <= tol, "%s %s prompt %zu: logits rel %g > %g", paths[path], file, i, num / den, tol);
            if (is_int8(path))   /* a greedy run drifts off where two logits are closer than 1e-2 */
                ck_assert_int_ge(agree, 1);
            else
                ck_assert_int_eq(agree, (int)json_array_size(greedy));
        }
        free(lg);
        free(lg1);
        runtime_model_close(m);
        cpu_path_select("auto");
    }
    free(p);
    free(dir);
    json_decref(ref);
}

START_TEST(s260k_mixed_on_every_path) { check_model(_i, "stories260K/s260k-mixed.gguf", "s260k-mixed.json", 1e-2); }
END_TEST

START_TEST(s260k_f16_on_every_path) { check_model(_i, "stories260K/s260k-f16.gguf", "s260k-f16.json", 1e-4); }
END_TEST

int main(void)
{
    Suite *s = suite_create("kernels");
    TCase *k = tcase_create("paths"), *m = tcase_create("models");
    SRunner *r;
    int failed;

    tcase_set_timeout(k, 300);
    tcase_set_timeout(m, 300);
    tcase_add_loop_test(k, every_path_table_is_whole_after_resolution, 0, N_PATHS);
    tcase_add_loop_test(k, tiled_matmul_equals_row_dots_bit_for_bit, 0, N_PATHS);
    tcase_add_loop_test(k, fused_matmuls_equal_the_single_ones_bit_for_bit, 0, N_PATHS);
    tcase_add_loop_test(k, neon_block_dots_equal_the_scalar_ones_bit_for_bit, 0, N_PATHS);
    tcase_add_loop_test(k, mxfp4_dots_and_matmuls_match_the_dequantized_rows, 0, N_PATHS);
    tcase_add_loop_test(k, mxfp4_scale_extremes, 0, N_PATHS);
    tcase_add_test(k, mstore_cpu_selects_the_path_and_bad_names_are_refused);
    tcase_add_loop_test(k, attention_batches_equal_the_per_key_calls_bit_for_bit, 0, N_PATHS);
    tcase_add_loop_test(k, vnni_paths_equal_the_emulation_bit_for_bit, 0, 5);
    tcase_add_loop_test(m, s260k_mixed_on_every_path, 0, N_PATHS);
    tcase_add_loop_test(m, s260k_f16_on_every_path, 0, N_PATHS);
    suite_add_tcase(s, k);
    suite_add_tcase(s, m);
    r = srunner_create(s);
    srunner_run_all(r, CK_NORMAL);
    failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? 1 : 0;
}
