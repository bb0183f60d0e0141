/* test_runtime.c: the CPU runtime. Kernels against their definition on random data, through
 * both dispatch paths; rope, attention and the sampler against direct formulas; and whole
 * models against float64 reference outputs in tests/data/runtime (see its README). Model checks
 * skip, saying so, when the shared models folder is absent. */
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blob/blob.h"
#include "helpers/fixture.h"
#include "runtime/runtime.h"
#include "import/import.h"
#include "cpu/cpu_int.h"

static uint64_t rng = 88172645463325252ull;
static uint32_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 32);
}
static float unif(void) { return (float)rnd() / 4294967296.0f * 2.0f - 1.0f; }   /* [-1, 1) */

static const int types[] = { GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_Q8_0,
                             GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1 };
/* The SIMD paths of either architecture: those this CPU lacks are skipped. */
static const char *paths[] = { "scalar", "avx2", "neon", "neon-dotprod", "neon-i8mm" };
#define N_PATHS (int)(sizeof paths / sizeof paths[0])

static int use_path(int i)
{
    int rc = cpu_path_select(paths[i]);

    if (rc == MS_EUNSUPPORTED)
        printf("skipped: cpu path %s not available here\n", paths[i]);
    else
        ck_assert_int_eq(rc, 0);
    return rc == 0;
}

/* Random weights of `type`, rows x cols, with realistic scales (d ~ 0.01..0.06). */
static uint8_t *make_weights(backend_tensor *t, int type, int rows, int cols)
{
    uint64_t row_bytes;
    uint8_t *buf, *p;

    ck_assert_int_eq(ggml_row_nbytes(&row_bytes, type, (uint64_t)cols), 0);
    buf = malloc(row_bytes * rows);
    ck_assert_ptr_nonnull(buf);
    *t = (backend_tensor){ .name = "w", .type = type, .n_dims = 2, .shape = { (uint64_t)rows, (uint64_t)cols },
                           .data = buf, .nbytes = row_bytes * rows };
    for (p = buf; p < buf + row_bytes * rows;) {
        float f;
        uint16_t h;
        switch (type) {
        case GGML_TYPE_F32: f = unif(); memcpy(p, &f, 4); p += 4; break;
        case GGML_TYPE_F16: h = cpu_f32_to_f16(unif()); memcpy(p, &h, 2); p += 2; break;
        case GGML_TYPE_BF16: {
            uint32_t bits;
            f = unif();
            memcpy(&bits, &f, 4);
            h = (uint16_t)(bits >> 16);
            memcpy(p, &h, 2);
            p += 2;
            break;
        }
        default: {
            uint32_t bb = type == GGML_TYPE_Q8_0 ? CPU_Q8_0_BYTES : type == GGML_TYPE_Q4_0 ? CPU_Q4_0_BYTES
                          : type == GGML_TYPE_Q4_1 ? CPU_Q4_1_BYTES : type == GGML_TYPE_Q5_0 ? CPU_Q5_0_BYTES : CPU_Q5_1_BYTES;
            for (uint32_t j = 0; j < bb; j++)
                p[j] = (uint8_t)rnd();
            h = cpu_f32_to_f16(0.01f + 0.025f * (unif() + 1.0f));
            memcpy(p, &h, 2);
            if (type == GGML_TYPE_Q4_1 || type == GGML_TYPE_Q5_1) {
                h = cpu_f32_to_f16(0.1f * unif());
                memcpy(p + 2, &h, 2);
            }
            if (type == GGML_TYPE_Q8_0)
                for (int j = 0; j < QK; j++)
                    if (p[2 + j] == 0x80)
                        p[2 + j] = 0x81;   /* ggml's quantizer never writes -128 */
            p += bb;
        }
        }
    }
    return buf;
}

START_TEST(f16_conversion_round_trips_every_half_and_rounds_to_even)
{
    for (uint32_t h = 0; h < 65536; h++) {
        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff))
            continue;   /* nan payloads need not survive */
        ck_assert_uint_eq(cpu_f32_to_f16(cpu_f16_to_f32((uint16_t)h)), h);
    }
    ck_assert_uint_eq(cpu_f32_to_f16(1.0f + 0x1p-11f), 0x3c00);        /* tie: to even (down) */
    ck_assert_uint_eq(cpu_f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02);    /* tie: to even (up) */
    ck_assert_uint_eq(cpu_f32_to_f16(65519.0f), 0x7bff);
    ck_assert_uint_eq(cpu_f32_to_f16(65520.0f), 0x7c00);
    ck_assert_uint_eq(cpu_f32_to_f16(0x1p-25f), 0x0000);                /* half of the least subnormal */
    ck_assert_uint_eq(cpu_f32_to_f16(-0x1.8p-25f), 0x8001);
    ck_assert_float_eq(cpu_f16_to_f32(0x0001), 0x1p-24f);
    ck_assert_float_eq(cpu_f16_to_f32(0xc000), -2.0f);
}
END_TEST

/* Each type through each path: against the float64 dot product of the dequantized row with the
 * 16-bit activations the kernel sees (tight: only float summation order differs), and with the
 * exact activations (bounded by the activation rounding, |w| * dx / 2 per element). */
START_TEST(row_dot_matches_definition_for_every_type_and_path)
{
    static const int col_cases[] = { 256, 172, 8 };

    if (!use_path(_i))
        return;
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        for (size_t ci = 0; ci < 3; ci++) {
            int type = types[ti], cols = col_cases[ci], rows = 7, block = type >= GGML_TYPE_Q4_0 && type != GGML_TYPE_BF16;
            backend_tensor w;
            uint8_t *buf;
            float *x, *wr;
            cpu_q16 *xq;

            if (block && cols % QK)
                continue;
            buf = make_weights(&w, type, rows, cols);
            x = malloc(cols * sizeof *x);
            wr = malloc(cols * sizeof *wr);
            xq = malloc((cols / QK + 1) * sizeof *xq);
            for (int i = 0; i < cols; i++)
                x[i] = 2.0f * unif();
            cpu_quantize_q16(xq, x, cols - cols % QK);
            for (int r = 0; r < rows; r++) {
                double exact = 0, seen = 0, mag = 0, bound = 0;
                float got = cpu_dot_row(&w, (uint64_t)r, x);
                cpu_tensor_row(wr, &w, (uint64_t)r);
                for (int i = 0; i < cols; i++) {
                    double xs = block ? (double)xq[i / QK].d * xq[i / QK].q[i % QK] : x[i];
                    exact += (double)wr[i] * x[i];
                    seen += (double)wr[i] * xs;
                    mag += fabs((double)wr[i] * xs);
                    bound += block ? fabs(wr[i]) * xq[i / QK].d * 0.5 : 0;
                }
                ck_assert_msg(fabs(got - seen) <= 2e-6 * mag + 1e-6, "%s %s cols %d row %d: %g vs %g",
                              paths[_i], ggml_type_name(type), cols, r, got, seen);
                ck_assert_msg(fabs(got - exact) <= bound * 1.001 + 2e-6 * mag + 1e-6, "%s %s: %g vs exact %g",
                              paths[_i], ggml_type_name(type), got, exact);
            }
            free(buf);
            free(x);
            free(wr);
            free(xq);
        }
    }
    cpu_path_select("auto");
}
END_TEST

/* Known block values decode as the ggml layouts say. */
START_TEST(block_layouts_decode_as_documented)
{
    uint8_t b5[CPU_Q5_1_BYTES] = { 0 }, b4[CPU_Q4_0_BYTES] = { 0 };
    backend_tensor t = { .name = "b", .n_dims = 2, .shape = { 1, 32 } };
    float out[32];
    uint16_t one = cpu_f32_to_f16(1.0f), half = cpu_f32_to_f16(0.5f);

    memcpy(b4, &half, 2);
    b4[2] = 0x1f;   /* element 0 = low nibble 15, element 16 = high nibble 1 */
    t.type = GGML_TYPE_Q4_0;
    t.data = b4;
    cpu_tensor_row(out, &t, 0);
    ck_assert_float_eq(out[0], 3.5f);    /* (15 - 8) * 0.5 */
    ck_assert_float_eq(out[16], -3.5f);  /* (1 - 8) * 0.5 */
    ck_assert_float_eq(out[1], -4.0f);
    memcpy(b5, &one, 2);
    memcpy(b5 + 2, &half, 2);   /* m = 0.5 */
    b5[4 + 2] = 0x01;           /* qh bit 16 -> element 16 gets +16 */
    b5[8] = 0x32;               /* element 0 = 2, element 16 = 3 */
    t.type = GGML_TYPE_Q5_1;
    t.data = b5;
    cpu_tensor_row(out, &t, 0);
    ck_assert_float_eq(out[0], 2.5f);
    ck_assert_float_eq(out[16], 19.5f);
}
END_TEST

START_TEST(threaded_matmul_equals_row_dots)
{
    cpu_pool *pool;
    int rows = 37, cols = 128, n_tok = 5;

    if (!use_path(_i))
        return;
    ck_assert_int_eq(cpu_pool_new(&pool, 3), 0);
    ck_assert_int_eq(cpu_pool_threads(pool), 3);
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        backend_tensor w;
        uint8_t *buf = make_weights(&w, types[ti], rows, cols);
        float *x = malloc(sizeof(float) * n_tok * cols), *y = malloc(sizeof(float) * n_tok * rows);
        void *scratch = malloc(cpu_matmul_scratch(n_tok, cols));

        for (int i = 0; i < n_tok * cols; i++)
            x[i] = unif();
        cpu_matmul(pool, y, x, n_tok, &w, scratch);
        for (int t = 0; t < n_tok; t++)
            for (int r = 0; r < rows; r++)
                ck_assert_float_eq(y[t * rows + r], cpu_dot_row(&w, (uint64_t)r, x + t * cols));
        free(buf);
        free(x);
        free(y);
        free(scratch);
    }
    cpu_pool_free(pool);
    cpu_path_select("auto");
}
END_TEST

static runtime_config rope_config(int n_rot, int scaling)
{
    runtime_config c = { .n_rot = n_rot, .rope_theta = 10000.0, .rope_scaling = scaling, .rope_factor = 8.0,
                         .rope_low_freq_factor = 1.0, .rope_high_freq_factor = 4.0, .rope_orig_ctx = 8192 };
    return c;
}

START_TEST(rope_rotates_adjacent_pairs_or_halves)
{
    enum { T = 3, H = 2, D = 8 };
    runtime_config c = rope_config(D, RUNTIME_ROPE_NONE);
    double freqs[D / 2];
    float x[T * H * D], y[T * H * D], g[T * H * D];
    int pos0 = 5;

    runtime_rope_freqs(freqs, &c);
    ck_assert(fabs(freqs[1] - pow(10000.0, -2.0 / 8)) < 1e-15);
    for (int i = 0; i < T * H * D; i++)
        x[i] = unif();
    for (int inter = 0; inter < 2; inter++) {
        memcpy(y, x, sizeof x);
        cpu_rope(y, T, H, D, D, pos0, freqs, inter);
        for (int t = 0; t < T; t++)
            for (int h = 0; h < H; h++)
                for (int i = 0; i < D / 2; i++) {
                    int a = (t * H + h) * D + (inter ? 2 * i : i), b = (t * H + h) * D + (inter ? 2 * i + 1 : i + D / 2);
                    double th = (pos0 + t) * freqs[i];
                    ck_assert(fabs(y[a] - (x[a] * cos(th) - x[b] * sin(th))) < 1e-6);
                    ck_assert(fabs(y[b] - (x[a] * sin(th) + x[b] * cos(th))) < 1e-6);
                }
    }
    /* GGUF permutes llama's Q/K rows so that pairs rope on the permuted rows equals halves rope
     * on HF's rows: g[2i] = x[i], g[2i+1] = x[i + D/2] */
    for (int v = 0; v < T * H; v++)
        for (int i = 0; i < D / 2; i++) {
            g[v * D + 2 * i] = x[v * D + i];
            g[v * D + 2 * i + 1] = x[v * D + i + D / 2];
        }
    memcpy(y, x, sizeof x);
    cpu_rope(y, T, H, D, D, pos0, freqs, 0);
    cpu_rope(g, T, H, D, D, pos0, freqs, 1);
    for (int v = 0; v < T * H; v++)
        for (int i = 0; i < D / 2; i++) {
            ck_assert_float_eq(g[v * D + 2 * i], y[v * D + i]);
            ck_assert_float_eq(g[v * D + 2 * i + 1], y[v * D + i + D / 2]);
        }
    /* partial rotation leaves dims past n_rot alone */
    memcpy(y, x, sizeof x);
    c = rope_config(4, RUNTIME_ROPE_NONE);
    runtime_rope_freqs(freqs, &c);
    cpu_rope(y, T, H, D, 4, pos0, freqs, 1);
    for (int v = 0; v < T * H; v++)
        for (int i = 4; i < D; i++)
            ck_assert_float_eq(y[v * D + i], x[v * D + i]);
}
END_TEST

START_TEST(rope_scaling_linear_and_llama3)
{
    runtime_config c = rope_config(128, RUNTIME_ROPE_LINEAR);
    double f[64], base[64];

    runtime_rope_freqs(f, &c);
    c.rope_scaling = RUNTIME_ROPE_NONE;
    runtime_rope_freqs(base, &c);
    for (int i = 0; i < 64; i++)
        ck_assert(fabs(f[i] - base[i] / 8.0) < 1e-18 + 1e-15 * base[i]);
    c.rope_scaling = RUNTIME_ROPE_LLAMA3;
    runtime_rope_freqs(f, &c);
    for (int i = 0; i < 64; i++) {
        double wl = 2 * M_PI / base[i], want;
        if (wl < 8192.0 / 4.0)
            want = base[i];                 /* short wavelengths kept */
        else if (wl > 8192.0 / 1.0)
            want = base[i] / 8.0;           /* long ones slowed by the factor */
        else {
            double s = (8192.0 / wl - 1.0) / (4.0 - 1.0);
            want = (1 - s) * base[i] / 8.0 + s * base[i];
        }
        ck_assert(fabs(f[i] - want) <= 1e-12 * base[i]);
    }
    ck_assert(f[0] == base[0] && f[63] < base[63]);
}
END_TEST

START_TEST(attention_matches_naive_causal_gqa)
{
    enum { H = 4, KVH = 2, D = 8, P0 = 3, T = 2, CTX = 8 };
    float q[T * H * D], kc[CTX * KVH * D], vc[CTX * KVH * D], out[T * H * D], scratch[CTX * 2];
    uint16_t kh[CTX * KVH * D], vh[CTX * KVH * D];
    cpu_pool *pool;

    ck_assert_int_eq(cpu_pool_new(&pool, 2), 0);
    ck_assert_uint_ge(sizeof scratch, cpu_attention_scratch(CTX, 2));
    for (int i = 0; i < T * H * D; i++)
        q[i] = unif();
    for (int i = 0; i < CTX * KVH * D; i++) {
        kh[i] = cpu_f32_to_f16(unif());
        vh[i] = cpu_f32_to_f16(unif());
        kc[i] = cpu_f16_to_f32(kh[i]);
        vc[i] = cpu_f16_to_f32(vh[i]);
    }
    for (int f16 = 0; f16 < 2; f16++) {
        cpu_attention(pool, out, q, f16 ? (void *)kh : (void *)kc, f16 ? (void *)vh : (void *)vc,
                                         f16, T, P0, H, KVH, D, scratch, CTX);
        for (int t = 0; t < T; t++)
            for (int h = 0; h < H; h++) {
                int n = P0 + t + 1, kvh = h / (H / KVH);
                double s[CTX], mx = -1e30, sum = 0;
                for (int p = 0; p < n; p++) {
                    s[p] = 0;
                    for (int d = 0; d < D; d++)
                        s[p] += (double)q[(t * H + h) * D + d] * kc[(p * KVH + kvh) * D + d] / sqrt(D);
                    mx = fmax(mx, s[p]);
                }
                for (int p = 0; p < n; p++)
                    sum += s[p] = exp(s[p] - mx);
                for (int d = 0; d < D; d++) {
                    double o = 0;
                    for (int p = 0; p < n; p++)
                        o += s[p] / sum * vc[(p * KVH + kvh) * D + d];
                    ck_assert(fabs(out[(t * H + h) * D + d] - o) < 1e-5);
                }
            }
    }
    cpu_pool_free(pool);
}
END_TEST

static runtime_sampler *sampler(float temp, int top_k, float top_p, float min_p, float pen, uint64_t seed)
{
    runtime_sampler_opts o = { temp, top_k, top_p, min_p, pen, 64, seed, 0.0f, 0.0f };
    runtime_sampler *s;

    ck_assert_int_eq(runtime_sampler_new(&s, &o, 16), 0);
    return s;
}

static int32_t draw(runtime_sampler *s, const float *logits)
{
    float l[16];

    memcpy(l, logits, sizeof l);
    return runtime_sampler_sample(s, l);
}

START_TEST(sampler_is_deterministic_per_seed_and_honours_each_filter)
{
    float lg[16];
    int32_t a[64], b[64], same = 1, count = 0;
    runtime_sampler *s1 = sampler(1.0f, 0, 1.0f, 0.0f, 1.0f, 42), *s2 = sampler(1.0f, 0, 1.0f, 0.0f, 1.0f, 42);
    runtime_sampler *s3 = sampler(1.0f, 0, 1.0f, 0.0f, 1.0f, 43), *s;

    for (int i = 0; i < 16; i++)
        lg[i] = 0.3f * (float)(i % 5);
    for (int i = 0; i < 64; i++) {
        a[i] = draw(s1, lg);
        b[i] = draw(s2, lg);
        ck_assert_int_eq(a[i], b[i]);
        same &= draw(s3, lg) == a[i];
    }
    ck_assert_msg(!same, "another seed gave the same 64 draws");
    lg[7] = 5.0f;
    s = sampler(0.0f, 0, 1.0f, 0.0f, 1.0f, 1);   /* greedy */
    ck_assert_int_eq(draw(s, lg), 7);
    runtime_sampler_accept(s, 7);                /* no penalty configured: still 7 */
    ck_assert_int_eq(draw(s, lg), 7);
    runtime_sampler_free(s);
    s = sampler(0.0f, 0, 1.0f, 0.0f, 10.0f, 1);  /* 5.0 / 10 = 0.5 < 1.2 */
    runtime_sampler_accept(s, 7);
    ck_assert_int_eq(draw(s, lg), 4);            /* the first of the 1.2 logits */
    runtime_sampler_free(s);
    s = sampler(1.5f, 1, 1.0f, 0.0f, 1.0f, 9);   /* top-k 1: always the best */
    for (int i = 0; i < 50; i++)
        ck_assert_int_eq(draw(s, lg), 7);
    runtime_sampler_free(s);
    s = sampler(1.0f, 0, 1.0f, 0.5f, 1.0f, 9);   /* min-p 0.5: e^-3.8 is far below half */
    for (int i = 0; i < 50; i++)
        ck_assert_int_eq(draw(s, lg), 7);
    runtime_sampler_free(s);
    s = sampler(1.0f, 0, 0.5f, 0.0f, 1.0f, 9);   /* top-p 0.5: token 7 alone has ~0.8 */
    for (int i = 0; i < 50; i++)
        ck_assert_int_eq(draw(s, lg), 7);
    runtime_sampler_free(s);
    /* frequencies follow the distribution: p(0) = 0.75, p(1) = 0.25 */
    for (int i = 0; i < 16; i++)
        lg[i] = -1e9f;
    lg[0] = logf(0.75f);
    lg[1] = logf(0.25f);
    s = sampler(1.0f, 0, 1.0f, 0.0f, 1.0f, 5);
    for (int i = 0; i < 4000; i++)
        count += draw(s, lg) == 0;
    ck_assert_msg(count > 2880 && count < 3120, "p(0) drawn %d / 4000", count);
    runtime_sampler_free(s);
    runtime_sampler_free(s1);
    runtime_sampler_free(s2);
    runtime_sampler_free(s3);
}
END_TEST

/* Greedy, penalties only, over 16 tokens: all logits 0 but lg[3] = 2, lg[5] = 1.5, lg[9] = -1. */
static runtime_sampler *penalized(float rep, float freq, float pres, int last_n, const int32_t *hist, int n_hist)
{
    runtime_sampler_opts o;
    runtime_sampler *s;

    runtime_sampler_defaults(&o);
    o.temp = 0.0f;
    o.repeat_penalty = rep;
    o.repeat_last_n = last_n;
    o.frequency_penalty = freq;
    o.presence_penalty = pres;
    ck_assert_int_eq(runtime_sampler_new(&s, &o, 16), 0);
    for (int i = 0; i < n_hist; i++)
        runtime_sampler_accept(s, hist[i]);
    return s;
}

static int32_t greedy_after(float l[16], float rep, float freq, float pres, int last_n, const int32_t *hist, int n_hist)
{
    runtime_sampler *s = penalized(rep, freq, pres, last_n, hist, n_hist);
    int32_t tok;

    memset(l, 0, 16 * sizeof *l);
    l[3] = 2.0f, l[5] = 1.5f, l[9] = -1.0f;
    tok = runtime_sampler_sample(s, l);
    runtime_sampler_free(s);
    return tok;
}

/* OpenAI's definition, logit[t] -= count[t] * frequency + (count[t] > 0) * presence, over the
 * repeat_last_n window; every expected logit below is that formula worked by hand, and each is
 * exact in binary floating point. */
START_TEST(sampler_frequency_and_presence_penalties_follow_openai)
{
    static const int32_t h33395[] = {3, 3, 3, 9, 5}, h3[] = {3}, h33[] = {3, 3}, h355[] = {3, 5, 5}, h39[] = {3, 9},
                         h4[] = {4};
    float l[16];
    runtime_sampler_opts o;
    runtime_sampler *s;

    /* counts 3, 1, 1: 2 - (3 x 0.5 + 0.25), 1.5 - (0.5 + 0.25), -1 - (0.5 + 0.25); the rest untouched */
    ck_assert_int_eq(greedy_after(l, 1.0f, 0.5f, 0.25f, 64, h33395, 5), 5);
    ck_assert(l[3] == 0.25f && l[5] == 0.75f && l[9] == -1.75f);
    for (int i = 0; i < 16; i++)
        ck_assert(i == 3 || i == 5 || i == 9 || l[i] == 0.0f);
    /* presence: the greedy choice flips once the penalty passes the gap of 0.5, whatever the count */
    ck_assert_int_eq(greedy_after(l, 1.0f, 0.0f, 0.375f, 64, h33, 2), 3);
    ck_assert(l[3] == 1.625f);
    ck_assert_int_eq(greedy_after(l, 1.0f, 0.0f, 0.625f, 64, h33, 2), 5);
    ck_assert(l[3] == 1.375f);
    /* frequency: scales with the count; 2 x 0.25 = 0.5 is a tie (the lower id wins), 2 x 0.375 is past it */
    ck_assert_int_eq(greedy_after(l, 1.0f, 0.25f, 0.0f, 64, h33, 2), 3);
    ck_assert(l[3] == 1.5f);
    ck_assert_int_eq(greedy_after(l, 1.0f, 0.375f, 0.0f, 64, h33, 2), 5);
    ck_assert(l[3] == 1.25f);
    ck_assert_int_eq(greedy_after(l, 1.0f, 0.375f, 0.0f, 64, h3, 1), 3); /* once: 2 - 0.375 */
    ck_assert(l[3] == 1.625f);
    /* negative values favour what was seen: 1.5 + 1 passes 2 */
    ck_assert_int_eq(greedy_after(l, 1.0f, 0.0f, -1.0f, 64, h355 + 1, 2), 5);
    ck_assert(l[5] == 2.5f && l[3] == 2.0f);
    /* the window is repeat_last_n: with 2, the 3 of {3, 5, 5} has left it */
    ck_assert_int_eq(greedy_after(l, 1.0f, 0.25f, 0.5f, 2, h355, 3), 3);
    ck_assert(l[3] == 2.0f && l[5] == 0.5f);
    ck_assert_int_eq(greedy_after(l, 1.0f, 0.25f, 0.5f, 0, h355, 3), 3); /* 0: no window, no penalty */
    ck_assert(l[3] == 2.0f && l[5] == 1.5f);
    /* after the repeat penalty, as llama.cpp: 2 / 2 - 0.5; -1 x 2 - 0.5 */
    ck_assert_int_eq(greedy_after(l, 2.0f, 0.5f, 0.0f, 64, h39, 2), 5);
    ck_assert(l[3] == 0.5f && l[9] == -2.5f);
    /* a masked token stays masked, however negative the penalty */
    s = penalized(1.0f, -2.0f, -2.0f, 64, h4, 1);
    memset(l, 0, sizeof l);
    l[4] = -INFINITY;
    ck_assert_int_ne(runtime_sampler_sample(s, l), 4);
    ck_assert(isinf(l[4]) && l[4] < 0);
    runtime_sampler_free(s);
    /* a value the option table would never pass is still refused, naming it */
    runtime_sampler_defaults(&o);
    o.presence_penalty = NAN;
    ck_assert_int_eq(runtime_sampler_new(&s, &o, 16), MS_EINVALID);
    ck_assert_ptr_null(s);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "presence_penalty"));
}
END_TEST

/* ---------------------------------------------------------------- config and names */

static const struct { const char *json, *expect; int code; } bad_config[] = {
    { "{\"architecture\": \"xyz\"}", "architecture 'xyz' is not supported; supported: llama", MS_EUNSUPPORTED },
    { "{\"architecture\": \"gptoss\"}", "(architecture 'gpt-oss') runs", MS_EUNSUPPORTED },
    { "[1]", "not a JSON object", MS_EINVALID },
    { "{\"architecture\": \"llama\", \"num_hidden_layers\": 2}", "hidden_size: missing", MS_EINVALID },
    { "{\"architecture\": \"llama\", \"hidden_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 6,"
      " \"num_key_value_heads\": 4, \"intermediate_size\": 8, \"vocab_size\": 9, \"max_position_embeddings\": 9}",
      "head count 6 is not a multiple of the kv head count 4", MS_EINVALID },
    { "{\"architecture\": \"llama\", \"hidden_size\": -1}", "hidden_size: -1 out of range", MS_EINVALID },
    { "{\"architecture\": \"llama\", \"hidden_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 4,"
      " \"intermediate_size\": 8, \"vocab_size\": 9, \"max_position_embeddings\": 9, \"rope_scaling\":"
      " {\"rope_type\": \"dynamic\", \"factor\": 4}}", "rope scaling 'dynamic' is not supported", MS_EUNSUPPORTED },
    { "{\"architecture\": \"llama\", \"hidden_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 4,"
      " \"intermediate_size\": 8, \"vocab_size\": 9, \"max_position_embeddings\": 9, \"rope_scaling\":"
      " {\"rope_type\": \"yarn\", \"factor\": 4}}", "yarn rope scaling: needs original_max_position_embeddings (0)",
      MS_EINVALID },
    { "{\"architecture\": \"llama\", \"hidden_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 4,"
      " \"intermediate_size\": 8, \"vocab_size\": 9, \"max_position_embeddings\": 9, \"rope_scaling\":"
      " {\"rope_type\": \"yarn\", \"factor\": 4, \"original_max_position_embeddings\": 8, \"beta_fast\": 0.5}}",
      "0 < beta_slow (1) < beta_fast (0.5)", MS_EINVALID },
    { "{\"architecture\": \"llama\", \"hidden_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 4,"
      " \"intermediate_size\": 8, \"vocab_size\": 9, \"max_position_embeddings\": 9, \"rms_norm_eps\": 0}",
      "rms norm epsilon 0 out of range", MS_EINVALID },
    /* found by tests/fuzz/fuzz_config: accepted, then rope frequencies of NaN */
    { "{\"architecture\": \"gemma3\", \"hidden_size\": 32, \"num_hidden_layers\": 1, \"num_attention_heads\": 2,"
      " \"intermediate_size\": 8, \"vocab_size\": 9, \"max_position_embeddings\": 9,"
      " \"hf_config\": {\"rope_local_base_freq\": -5}}",
      "local rope theta (rope_local_base_freq) -5 out of range", MS_EINVALID },
    { "{\"architecture\": \"gemma3\", \"hidden_size\": 32, \"num_hidden_layers\": 1, \"num_attention_heads\": 2,"
      " \"intermediate_size\": 8, \"vocab_size\": 9, \"max_position_embeddings\": 9, \"final_logit_softcapping\": -1}",
      "final logit soft-capping -1", MS_EINVALID },
};

static int mem_sink(void *ctx, const void *buf, size_t len)
{
    uint8_t **p = ctx;

    memcpy(*p, buf, len);
    *p += len;
    return 0;
}

/* Found by tests/fuzz/fuzz_config: a GGUF float key may hold inf or NaN, which passed the
 * range checks (rope theta > 1, soft-capping unchecked) and gave NaN logits later. */
START_TEST(config_gguf_refuses_non_finite_floats)
{
    static const struct { const char *arch, *key, *expect; float v; } cases[] = {
        { "llama", "llama.rope.freq_base", "rope theta inf out of range", INFINITY },
        { "gemma3", "gemma3.final_logit_softcapping", "final logit soft-capping nan", NAN },
    };

    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const char *a = cases[i].arch;
        char k[64];
        gguf_writer *w;
        gguf_file *g;
        runtime_config c;
        uint8_t *buf, *at;

        ck_assert_int_eq(gguf_writer_new(&w, 3, 32), 0);
        ck_assert_int_eq(gguf_writer_set_str(w, "general.architecture", a, strlen(a)), 0);
#define U32(suffix, v) do { snprintf(k, sizeof k, "%s." suffix, a); ck_assert_int_eq(gguf_writer_set_u32(w, k, v), 0); } while (0)
        U32("embedding_length", 8);
        U32("block_count", 1);
        U32("attention.head_count", 2);
        U32("feed_forward_length", 16);
        U32("context_length", 64);
        U32("vocab_size", 10);
#undef U32
        ck_assert_int_eq(gguf_writer_set_f32(w, cases[i].key, cases[i].v), 0);
        at = buf = malloc(gguf_writer_size(w));
        ck_assert_int_eq(gguf_writer_emit(w, mem_sink, &at), 0);
        ck_assert_int_eq(gguf_open_buf(&g, buf, gguf_writer_size(w), 0, "cfg.gguf"), 0);
        ck_assert_int_eq(runtime_config_from_gguf(&c, g), MS_EINVALID);
        ck_assert_msg(strstr(ms_err_msg(), cases[i].expect), "message '%s' lacks '%s'", ms_err_msg(), cases[i].expect);
        gguf_close(g);
        gguf_writer_free(w);
        free(buf);
    }
}
END_TEST

START_TEST(config_json_refusals_name_the_field)
{
    runtime_config c;
    int rc = runtime_config_from_json(&c, bad_config[_i].json, strlen(bad_config[_i].json), "cfg");

    ck_assert_int_eq(rc, bad_config[_i].code);
    ck_assert_msg(strstr(ms_err_msg(), bad_config[_i].expect), "message '%s' lacks '%s'", ms_err_msg(),
                  bad_config[_i].expect);
}
END_TEST

START_TEST(config_json_reads_llama3_fields)
{
    const char *j = "{\"architecture\": \"llama\", \"hidden_size\": 2048, \"num_hidden_layers\": 16,"
                    " \"num_attention_heads\": 32, \"num_key_value_heads\": 8, \"intermediate_size\": 8192,"
                    " \"vocab_size\": 128256, \"max_position_embeddings\": 131072, \"rms_norm_eps\": 1e-5,"
                    " \"rope_theta\": 500000.0, \"rope_interleaved\": false, \"eos_token_id\": [128001, 128008],"
                    " \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 32.0, \"low_freq_factor\": 1.0,"
                    " \"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 8192}}";
    runtime_config c;

    ck_assert_int_eq(runtime_config_from_json(&c, j, strlen(j), "cfg"), 0);
    ck_assert_int_eq(c.head_dim, 64);
    ck_assert_int_eq(c.n_rot, 64);
    ck_assert_int_eq(c.n_kv_heads, 8);
    ck_assert_int_eq(c.rope_scaling, RUNTIME_ROPE_LLAMA3);
    ck_assert_int_eq(c.rope_orig_ctx, 8192);
    ck_assert_int_eq(c.eos_id, 128001);
    ck_assert_int_eq(c.rope_interleaved, 0);
    ck_assert(c.rope_theta == 500000.0);
}
END_TEST

/* Qwen 2.5's long-context config: YaRN as Hugging Face defines it (transformers' _compute_yarn_parameters
 * with its default truncation, which is ggml's floor / ceil), written out here in double: the
 * frequencies blend f and f / factor over the band the betas give, and the magnitude 1 + 0.1 ln(factor)
 * reaches the attention scale squared. */
START_TEST(config_json_reads_yarn_and_its_frequencies)
{
    const char *j = "{\"architecture\": \"qwen2\", \"hidden_size\": 1024, \"num_hidden_layers\": 2,"
                    " \"num_attention_heads\": 8, \"intermediate_size\": 64, \"vocab_size\": 100,"
                    " \"max_position_embeddings\": 131072, \"rope_theta\": 1000000.0,"
                    " \"rope_scaling\": {\"type\": \"yarn\", \"factor\": 4.0,"
                    " \"original_max_position_embeddings\": 32768}}";
    runtime_config c;
    double f[64], d = 128, base = 1e6, lo, hi;
    int changed = 0, kept = 0;

    ck_assert_msg(runtime_config_from_json(&c, j, strlen(j), "cfg") == 0, "%s", ms_err_msg());
    ck_assert_int_eq(c.rope_scaling, RUNTIME_ROPE_YARN);
    ck_assert(c.yarn_beta_fast == 32 && c.yarn_beta_slow == 1);
    ck_assert_double_eq_tol(c.yarn_mscale, 1 + 0.1 * log(4.0), 1e-15);
    ck_assert_double_eq_tol(c.attn_scale, pow(1 + 0.1 * log(4.0), 2) / sqrt(128.0), 1e-15);
    runtime_rope_freqs(f, &c);
    lo = floor(d * log(32768 / (32 * 2 * M_PI)) / (2 * log(base)));
    hi = ceil(d * log(32768 / (1 * 2 * M_PI)) / (2 * log(base)));
    for (int i = 0; i < 64; i++) {
        double extrap = pow(base, -2.0 * i / d), interp = extrap / 4.0;
        double ramp = fmin(1, fmax(0, (i - lo) / (hi - lo))), want = interp * ramp + extrap * (1 - ramp);
        ck_assert_msg(fabs(f[i] - want) <= 1e-15 * want, "pair %d: %g, expected %g", i, f[i], want);
        changed += f[i] < extrap * 0.999;
        kept += f[i] == extrap;
    }
    ck_assert(changed > 0 && kept > 0);   /* the band lies inside the dims: both sides are there */
}
END_TEST

START_TEST(gguf_names_map_to_hf_names)
{
    static const char *map[][2] = {
        { "token_embd.weight", "model.embed_tokens.weight" }, { "output_norm.weight", "model.norm.weight" },
        { "output.weight", "lm_head.weight" }, { "blk.0.attn_norm.weight", "model.layers.0.input_layernorm.weight" },
        { "blk.12.attn_q.weight", "model.layers.12.self_attn.q_proj.weight" },
        { "blk.3.attn_k.weight", "model.layers.3.self_attn.k_proj.weight" },
        { "blk.3.attn_v.weight", "model.layers.3.self_attn.v_proj.weight" },
        { "blk.3.attn_output.weight", "model.layers.3.self_attn.o_proj.weight" },
        { "blk.3.ffn_norm.weight", "model.layers.3.post_attention_layernorm.weight" },
        { "blk.3.ffn_gate.weight", "model.layers.3.mlp.gate_proj.weight" },
        { "blk.3.ffn_up.weight", "model.layers.3.mlp.up_proj.weight" },
        { "blk.3.ffn_down.weight", "model.layers.3.mlp.down_proj.weight" },
    };
    char buf[128];

    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
        gguf_name_to_hf(buf, sizeof buf, NULL, 0, "llama", map[i][0]);
        ck_assert_str_eq(buf, map[i][1]);
    }
    /* the import's name for Llama 3.1's rope divisors; names outside the table stay as they are */
    gguf_name_to_hf(buf, sizeof buf, NULL, 0, "llama", "rope_freqs.weight");
    ck_assert_str_eq(buf, "model.rope_freqs.weight");
    gguf_name_to_hf(buf, sizeof buf, NULL, 0, "llama", "blk.x.attn_q.weight");
    ck_assert_str_eq(buf, "blk.x.attn_q.weight");
    gguf_name_to_hf(buf, sizeof buf, NULL, 0, "llama", "blk.1.attn_qq.weight");
    ck_assert_str_eq(buf, "blk.1.attn_qq.weight");
}
END_TEST

/* ---------------------------------------------------------------- whole models */

/* "relative" everywhere below: max_i |got[i] - ref[i]| / max_i |ref[i]|, over the vocab logits. */
static double rel_err(const float *got, json_t *ref)
{
    double num = 0, den = 0;

    for (size_t i = 0; i < json_array_size(ref); i++) {
        double r = json_number_value(json_array_get(ref, i));
        num = fmax(num, fabs(got[i] - r));
        den = fmax(den, fabs(r));
    }
    return num / den;
}

static json_t *load_ref(const char *name)
{
    char *path = ms_strdup_printf("%s/tests/data/runtime/%s", getenv("MSTORE_SRC") ? getenv("MSTORE_SRC") : ".", name);
    json_error_t e;
    json_t *j = json_load_file(path, 0, &e);

    ck_assert_msg(j != NULL, "%s: %s", path, e.text);
    free(path);
    return j;
}


static runtime_model *open_model(const char *path, int n_threads, int kv_f16, int n_batch)
{
    runtime_opts o = { .n_threads = n_threads, .kv_f16 = kv_f16, .n_batch = n_batch };
    runtime_model *m;

    ck_assert_msg(runtime_model_open_gguf(&m, path, &o) == 0, "%s", ms_err_msg());
    return m;
}

/* Prefill the prompt as one batch, compare the first-step logits, then decode greedily. Returns
 * how many leading greedy tokens agree with the reference; *rel_out gets the logits' error. */
static int check_prompt(runtime_model *m, json_t *p, int n_steps, double *rel_out)
{
    json_t *toks = json_object_get(p, "tokens"), *greedy = json_object_get(p, "greedy");
    int n = (int)json_array_size(toks), V = runtime_model_config(m)->vocab_size, agree = 0, on = 1;
    int32_t *ids = malloc(sizeof *ids * n), next;
    float *lg = malloc(sizeof *lg * V);

    for (int i = 0; i < n; i++)
        ids[i] = (int32_t)json_integer_value(json_array_get(toks, i));
    runtime_model_reset(m);
    ck_assert_msg(runtime_forward(m, ids, n, lg) == 0, "%s", ms_err_msg());
    *rel_out = json_object_get(p, "logits") ? rel_err(lg, json_object_get(p, "logits")) : 0;
    for (int s = 0; s < n_steps && s < (int)json_array_size(greedy); s++) {
        next = fixture_argmax(lg, V);
        on = on && next == json_integer_value(json_array_get(greedy, s));
        agree += on;
        if (!on)
            break;
        ck_assert_int_eq(runtime_forward(m, &next, 1, lg), 0);
    }
    free(ids);
    free(lg);
    return agree;
}

START_TEST(stories260K_f32_reproduces_the_200_step_greedy_text)
{
    char *path = fixture_model_path("stories260K/stories260K.gguf");
    json_t *ref = load_ref("stories260K.json"), *p = json_array_get(json_object_get(ref, "prompts"), 0);
    runtime_model *m;
    double rel;
    int agree;

    if (path && use_path(_i)) {
        m = open_model(path, 2, 0, 0);
        agree = check_prompt(m, p, 200, &rel);
        printf("measured: stories260K.gguf %s: %d/200 greedy tokens from BOS, first-step logits rel %.3g\n",
               paths[_i], agree, rel);
        ck_assert_int_eq(agree, 200);
        ck_assert(rel < 1e-4);
        runtime_model_close(m);
        cpu_path_select("auto");
    }
    free(path);
    json_decref(ref);
}
END_TEST

/* The penalties on a real model, against ref_forward.py's greedy with them (written from OpenAI's
 * definition, apart from src/runtime): the session's order, prompt tokens into the sampler's
 * window, then sample, accept, forward. The penalized path must also leave plain argmax. */
START_TEST(stories260K_penalties_match_the_reference_greedy)
{
    char *path = fixture_model_path("stories260K/stories260K.gguf");
    json_t *ref = load_ref("stories260K-penalties.json"), *ps = json_object_get(ref, "prompts");
    runtime_model *m;

    for (size_t pi = 0; path && pi < json_array_size(ps); pi++) {
        json_t *p = json_array_get(ps, pi), *toks = json_object_get(p, "tokens"),
               *greedy = json_object_get(p, "greedy");
        json_t *pen = json_object_get(p, "penalties");
        int n = (int)json_array_size(toks), V, left_argmax = 0;
        runtime_sampler_opts o;
        runtime_sampler *s;
        int32_t *ids = malloc(sizeof *ids * n), next;
        float *lg;

        m = open_model(path, 2, 0, 0);
        V = runtime_model_config(m)->vocab_size;
        lg = malloc(sizeof *lg * V);
        runtime_sampler_defaults(&o);
        o.temp = 0.0f;
        o.frequency_penalty = (float)json_number_value(json_object_get(pen, "frequency_penalty"));
        o.presence_penalty = (float)json_number_value(json_object_get(pen, "presence_penalty"));
        o.repeat_last_n = (int)json_integer_value(json_object_get(pen, "repeat_last_n"));
        ck_assert(o.frequency_penalty != 0.0f && o.presence_penalty != 0.0f);
        ck_assert_int_eq(runtime_sampler_new(&s, &o, V), 0);
        for (int i = 0; i < n; i++) {
            ids[i] = (int32_t)json_integer_value(json_array_get(toks, i));
            runtime_sampler_accept(s, ids[i]);
        }
        ck_assert_msg(runtime_forward(m, ids, n, lg) == 0, "%s", ms_err_msg());
        for (size_t k = 0; k < json_array_size(greedy); k++) {
            int plain = fixture_argmax(lg, V);
            next = runtime_sampler_sample(s, lg);
            ck_assert_msg(next == json_integer_value(json_array_get(greedy, k)), "prompt %zu step %zu: %d, want %lld",
                          pi, k, next, json_integer_value(json_array_get(greedy, k)));
            left_argmax += next != plain;
            runtime_sampler_accept(s, next);
            ck_assert_int_eq(runtime_forward(m, &next, 1, lg), 0);
        }
        ck_assert_msg(left_argmax > 0, "prompt %zu: the penalties never changed a choice", pi);
        runtime_sampler_free(s);
        runtime_model_close(m);
        free(ids);
        free(lg);
    }
    free(path);
    json_decref(ref);
}
END_TEST

/* `need_greedy` leading tokens must agree (0 = all the reference has); logits within `tol`. */
static void check_file(const char *file, const char *ref_name, double tol, int need_greedy, int kv_f16)
{
    char *path = fixture_model_path(file);
    json_t *ref = load_ref(ref_name), *ps = json_object_get(ref, "prompts");
    runtime_model *m;

    for (int pi = 0; path && pi < 2; pi++) {
        if (!use_path(pi))
            continue;
        m = open_model(path, 2, kv_f16, 0);
        for (size_t i = 0; i < json_array_size(ps); i++) {
            json_t *p = json_array_get(ps, i);
            int n_ref = (int)json_array_size(json_object_get(p, "greedy"));
            double rel;
            int agree = check_prompt(m, p, n_ref, &rel);
            printf("measured: %s %s kv %s: prompt of %zu tokens: %d/%d greedy tokens, first-step logits rel %.3g\n",
                   file, cpu_path_name(), kv_f16 ? "f16" : "f32", json_array_size(json_object_get(p, "tokens")),
                   agree, n_ref, rel);
            ck_assert_msg(rel <= tol, "%s prompt %zu: logits rel %g > %g", file, i, rel, tol);
            ck_assert_int_ge(agree, need_greedy ? need_greedy : n_ref);
        }
        runtime_model_close(m);
    }
    cpu_path_select("auto");
    free(path);
    json_decref(ref);
}

START_TEST(s260k_f16_gives_the_reference_32_greedy_tokens_per_prompt)
{
    check_file("stories260K/s260k-f16.gguf", "s260k-f16.json", 1e-4, 0, 0);
}
END_TEST

START_TEST(s260k_mixed_agrees_on_first_step_logits_and_first_tokens)
{
    check_file("stories260K/s260k-mixed.gguf", "s260k-mixed.json", 1e-2, 0, 0);
}
END_TEST

START_TEST(f16_kv_cache_keeps_the_f16_model_on_the_reference)
{
    check_file("stories260K/s260k-f16.gguf", "s260k-f16.json", 1e-3, 16, 1);
}
END_TEST

/* The synthetic models are regenerated (they are small and the tool is deterministic) and
 * must hash to what the reference was computed on. */
START_TEST(synthetic_models_match_reference_logits)
{
    static const char *dt[] = { "f32", "f16", "q8_0", "q4_0" };
    char *tool = fixture_model_path("../tools/make_synthetic_gguf.py"), *vocab = fixture_model_path("stories260K/stories260K.gguf");
    char *dir = fixture_tmpdir(), *out = ms_strdup_printf("%s/synthetic-%s.gguf", dir, dt[_i]);
    char *ref_name = ms_strdup_printf("synthetic-%s.json", dt[_i]), *cmd;
    ms_digest digest;
    json_t *ref = load_ref(ref_name);
    char *bytes = NULL;
    size_t len;

    if (tool && ms_is_file("/usr/bin/python3")) {
        cmd = ms_strdup_printf("/usr/bin/python3 '%s' --dim 64 --layers 2 --heads 4 --kv-heads 2 --ffn 192 "
                               "--vocab '%s' --seed 1234 --dtype %s -o '%s' >/dev/null 2>&1", tool, vocab, dt[_i], out);
        if (system(cmd) != 0) {
            printf("skipped: %s failed (numpy missing?)\n", cmd);
        } else {
            ck_assert_int_eq(ms_file_read(&bytes, &len, out, 1u << 24), 0);
            blob_digest_buf(digest, bytes, len);
            ck_assert_str_eq(digest + 7, json_string_value(json_object_get(ref, "sha256")));
            free(bytes);
            runtime_model *m = open_model(out, 2, 0, 0);
            json_t *ps = json_object_get(ref, "prompts");
            for (size_t i = 0; i < json_array_size(ps); i++) {
                double rel, tol = _i < 2 ? 1e-4 : 1e-2;
                int agree = check_prompt(m, json_array_get(ps, i), 8, &rel);
                printf("measured: synthetic %s %s: prompt %zu: first-step logits rel %.3g, %d/8 greedy\n", dt[_i],
                       cpu_path_name(), i, rel, agree);
                ck_assert_msg(rel <= tol, "synthetic %s: logits rel %g > %g", dt[_i], rel, tol);
            }
            runtime_model_close(m);
        }
        free(cmd);
    }
    json_decref(ref);
    free(ref_name);
    free(out);
    fixture_rmrf(dir);
    free(tool);
    free(vocab);
}
END_TEST

/* Prefill in one batch, in chunks of 7, and one token at a time give the same logits. */
START_TEST(batched_prefill_equals_token_by_token)
{
    char *path = fixture_model_path("stories260K/s260k-mixed.gguf");
    json_t *ref = load_ref("s260k-mixed.json");
    json_t *toks = json_object_get(json_array_get(json_object_get(ref, "prompts"), 3), "tokens");
    int n = (int)json_array_size(toks), batches[] = { 0, 7, 1 };
    float lg[3][512];
    int32_t ids[64];

    if (path) {
        for (int i = 0; i < n; i++)
            ids[i] = (int32_t)json_integer_value(json_array_get(toks, i));
        for (int b = 0; b < 3; b++) {
            runtime_model *m = open_model(path, 2, 0, batches[b]);
            ck_assert_int_eq(runtime_forward(m, ids, n, lg[b]), 0);
            ck_assert_int_eq(runtime_model_n_past(m), n);
            runtime_model_close(m);
        }
        for (int b = 1; b < 3; b++)
            for (int i = 0; i < 512; i++)
                ck_assert_msg(fabsf(lg[b][i] - lg[0][i]) <= 1e-5f * (1 + fabsf(lg[0][i])), "batch %d logit %d: %g vs %g",
                              batches[b], i, lg[b][i], lg[0][i]);
    }
    free(path);
    json_decref(ref);
}
END_TEST

START_TEST(forward_refuses_context_overflow_and_bad_tokens)
{
    char *path = fixture_model_path("stories260K/stories260K.gguf");
    runtime_opts o = { .n_threads = 1, .n_ctx = 8 };
    int32_t ids[9] = { 1, 2, 3, 4, 5, 6, 7, 8, 9 }, bad = 512;
    float lg[512];
    runtime_model *m;

    if (path) {
        ck_assert_int_eq(runtime_model_open_gguf(&m, path, &o), 0);
        ck_assert_int_eq(runtime_model_n_ctx(m), 8);
        ck_assert_int_eq(runtime_forward(m, ids, 9, lg), MS_EINVALID);
        ck_assert_ptr_nonnull(strstr(ms_err_msg(), "9 tokens after 0 exceed the context of 8 tokens"));
        ck_assert_int_eq(runtime_forward(m, ids, 8, lg), 0);
        ck_assert_int_eq(runtime_forward(m, ids, 1, lg), MS_EINVALID);
        ck_assert_int_eq(runtime_forward(m, &bad, 1, lg), MS_EINVALID);
        runtime_model_reset(m);
        ck_assert_int_eq(runtime_forward(m, &bad, 1, lg), MS_EINVALID);
        ck_assert_ptr_nonnull(strstr(ms_err_msg(), "token 512 at index 0 out of range [0, 512)"));
        runtime_model_close(m);
        o.n_ctx = 4096;
        ck_assert_int_eq(runtime_model_open_gguf(&m, path, &o), MS_EINVALID);
        ck_assert_ptr_nonnull(strstr(ms_err_msg(), "context 4096 exceeds the model's context length 2048"));
        ck_assert_ptr_null(m);
    }
    free(path);
}
END_TEST

START_TEST(open_refuses_an_unsupported_architecture)
{
    char *dir = fixture_tmpdir(), *path = ms_strdup_printf("%s/x.gguf", dir);
    gguf_writer *w;
    runtime_model *m;

    ck_assert_int_eq(gguf_writer_new(&w, 3, 32), 0);
    ck_assert_int_eq(gguf_writer_set_str(w, "general.architecture", "xyz", 3), 0);
    ck_assert_int_eq(gguf_writer_write_file(w, path), 0);
    gguf_writer_free(w);
    ck_assert_int_eq(runtime_model_open_gguf(&m, path, NULL), MS_EUNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "architecture 'xyz' is not supported; supported: llama"));
    ck_assert_ptr_null(m);
    free(path);
    fixture_rmrf(dir);
}
END_TEST


/* The same model through the store (import, then open by name) gives the reference output;
 * a missing or damaged tensor blob is refused at open, naming the layer. */
START_TEST(store_model_runs_like_its_gguf_and_refuses_missing_blobs)
{
    char *path = fixture_model_path("stories260K/s260k-mixed.gguf"), *home = fixture_tmpdir(), *bp = NULL;
    ms_digest digest;
    json_t *ref = load_ref("s260k-mixed.json"), *ps = json_object_get(ref, "prompts");
    import_opts io = { .quiet = 1 };
    runtime_opts o = { .n_threads = 2 };
    model_name name, unknown;
    runtime_model *m;
    store *st;
    manifest *man;
    const manifest_layer *l;

    if (path) {
        ck_assert_int_eq(store_open(&st, home), 0);
        ck_assert_int_eq(name_parse(&name, "s260k:mixed"), 0);
        ck_assert_msg(import_path(st, path, &name, &io, digest) == 0, "%s", ms_err_msg());
        ck_assert_msg(runtime_model_open_store(&m, st, &name, &o) == 0, "%s", ms_err_msg());
        ck_assert_int_eq(runtime_model_config(m)->rope_interleaved, 1);
        for (size_t i = 0; i < json_array_size(ps); i++) {
            double rel;
            int agree = check_prompt(m, json_array_get(ps, i), 32, &rel);
            printf("measured: store s260k:mixed prompt %zu: %d/32 greedy, logits rel %.3g\n", i, agree, rel);
            ck_assert(rel <= 1e-2);
            ck_assert_int_eq(agree, 32);
        }
        runtime_model_close(m);
        ck_assert_int_eq(name_parse(&unknown, "nope"), 0);
        ck_assert_int_eq(runtime_model_open_store(&m, st, &unknown, &o), MS_ENOTFOUND);
        ck_assert_ptr_nonnull(strstr(ms_err_msg(), "not found"));
        /* damage the blob of one layer: shorter, then gone */
        ck_assert_int_eq(store_manifest_load(st, digest, &man), 0);
        l = manifest_layer_find(man, MT_TENSOR, "model.layers.2.self_attn.q_proj.weight");
        ck_assert_ptr_nonnull(l);
        ck_assert_int_eq(blob_path(&bp, home, l->digest), 0);
        ck_assert_int_eq(chmod(bp, 0644), 0);   /* blobs are read-only */
        ck_assert_int_eq(truncate(bp, 100), 0);
        ck_assert_int_ne(runtime_model_open_store(&m, st, &name, &o), 0);
        ck_assert_ptr_null(m);
        ck_assert_msg(strstr(ms_err_msg(), "model.layers.2.self_attn.q_proj.weight") && strstr(ms_err_msg(), "100 bytes"),
                      "%s", ms_err_msg());
        ck_assert_int_eq(unlink(bp), 0);
        ck_assert_int_eq(runtime_model_open_store(&m, st, &name, &o), MS_ENOTFOUND);
        ck_assert_msg(strstr(ms_err_msg(), "model.layers.2.self_attn.q_proj.weight"), "%s", ms_err_msg());
        free(bp);
        manifest_free(man);
        store_close(st);
    }
    fixture_rmrf(home);
    free(path);
    json_decref(ref);
}
END_TEST


/* A model whose output norm holds NaN (or infinity) makes non-finite logits: runtime_forward says
 * so, naming the logit and the position, instead of handing NaN to the sampler. Before the check,
 * the 16-bit activation quantizer converted NaN to int (undefined) and sampling went on. */
START_TEST(forward_reports_non_finite_logits)
{
    char *src = fixture_model_path("stories260K/stories260K.gguf"), *dir = fixture_tmpdir();
    char *path = ms_strdup_printf("%s/nan.gguf", dir), *bytes = NULL;
    const float bad[] = { NAN, INFINITY };
    const gguf_tensor *t;
    gguf_file *g;
    size_t len;

    if (!src) {
        printf("skipped: stories260K.gguf not found (MSTORE_TEST_MODELS)\n");
        fixture_rmrf(dir);
        free(path);
        return;
    }
    ck_assert_int_eq(gguf_open(&g, src), 0);
    ck_assert_ptr_nonnull(t = gguf_tensor_find(g, "blk.0.attn_norm.weight"));
    size_t off = (size_t)(t->data - gguf_bytes(g));
    ck_assert_int_eq(ms_file_read(&bytes, &len, src, 1u << 26), 0);
    gguf_close(g);
    memcpy(bytes + off, &bad[_i], sizeof bad[_i]);   /* one element of layer 0's attention norm */
    ck_assert_int_eq(ms_file_write_atomic(path, bytes, len), 0);
    runtime_model *m = open_model(path, 2, 0, 0);
    int32_t toks[3] = { 1, 403, 407 };
    float *logits = malloc(sizeof(float) * (size_t)runtime_model_config(m)->vocab_size);
    ck_assert_int_eq(runtime_forward(m, toks, 3, logits), MS_EINVALID);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "at position 2 is NaN: the model's weights or activations overflow"));
    runtime_model_close(m);
    free(logits);
    free(bytes);
    free(path);
    free(src);
    fixture_rmrf(dir);
}
END_TEST

static void add_model_tests(TCase *m)
{
    tcase_set_timeout(m, 300);
    tcase_add_loop_test(m, stories260K_f32_reproduces_the_200_step_greedy_text, 0, N_PATHS);
    tcase_add_test(m, s260k_f16_gives_the_reference_32_greedy_tokens_per_prompt);
    tcase_add_test(m, stories260K_penalties_match_the_reference_greedy);
    tcase_add_test(m, s260k_mixed_agrees_on_first_step_logits_and_first_tokens);
    tcase_add_test(m, f16_kv_cache_keeps_the_f16_model_on_the_reference);
    tcase_add_loop_test(m, synthetic_models_match_reference_logits, 0, 4);
    tcase_add_test(m, batched_prefill_equals_token_by_token);
    tcase_add_test(m, forward_refuses_context_overflow_and_bad_tokens);
    tcase_add_test(m, open_refuses_an_unsupported_architecture);
    tcase_add_test(m, store_model_runs_like_its_gguf_and_refuses_missing_blobs);
    tcase_add_loop_test(m, forward_reports_non_finite_logits, 0, 2);
}

static Suite *runtime_suite(void)
{
    Suite *s = suite_create("runtime");
    TCase *k = tcase_create("kernels"), *c = tcase_create("config"), *m = tcase_create("models");

    tcase_add_test(k, f16_conversion_round_trips_every_half_and_rounds_to_even);
    tcase_add_loop_test(k, row_dot_matches_definition_for_every_type_and_path, 0, N_PATHS);
    tcase_add_test(k, block_layouts_decode_as_documented);
    tcase_add_loop_test(k, threaded_matmul_equals_row_dots, 0, N_PATHS);
    tcase_add_test(k, rope_rotates_adjacent_pairs_or_halves);
    tcase_add_test(k, rope_scaling_linear_and_llama3);
    tcase_add_test(k, attention_matches_naive_causal_gqa);
    tcase_add_test(k, sampler_is_deterministic_per_seed_and_honours_each_filter);
    tcase_add_test(k, sampler_frequency_and_presence_penalties_follow_openai);
    suite_add_tcase(s, k);
    tcase_add_test(c, config_gguf_refuses_non_finite_floats);
    tcase_add_loop_test(c, config_json_refusals_name_the_field, 0, sizeof bad_config / sizeof bad_config[0]);
    tcase_add_test(c, config_json_reads_llama3_fields);
    tcase_add_test(c, config_json_reads_yarn_and_its_frequencies);
    tcase_add_test(c, gguf_names_map_to_hf_names);
    suite_add_tcase(s, c);
    add_model_tests(m);
    suite_add_tcase(s, m);
    return s;
}

int main(void)
{
    SRunner *r = srunner_create(runtime_suite());
    int failed;

    srunner_run_all(r, CK_NORMAL);
    failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? 1 : 0;
}
