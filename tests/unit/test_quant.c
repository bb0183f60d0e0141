/* test_quant.c: quantizers and dequantizers (src/quant): MLX affine and fp modes, float
 * conversions, ggml block types, refusals. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers/fixture.h"
#include "quant/quant.h"

static uint32_t rng_state = 1;
static float frand(void)   /* uniform in [-1, 1) */
{
    rng_state = rng_state * 1664525u + 1013904223u;
    return (float)(rng_state >> 8) / (float)(1u << 23) - 1.0f;
}

/* Code i of a little-endian bit stream, read bit by bit (independent of quant.c's reader). */
static uint32_t code_at(const uint32_t *words, size_t i, int bits)
{
    const uint8_t *b = (const uint8_t *)words;
    uint32_t q = 0;
    for (int k = 0; k < bits; k++) {
        size_t bit = i * (size_t)bits + (size_t)k;
        q |= (uint32_t)((b[bit / 8] >> (bit % 8)) & 1) << k;
    }
    return q;
}

static const int affine_bits[] = { 2, 3, 4, 5, 6, 8 };
static const int groups[] = { 32, 64, 128 };

/* Every element is within |scale| / 2 of its source, except codes clipped at n_bins (the far
 * end of MLX's "edge" scale), within |scale|. */
START_TEST(affine_round_trip_within_the_bound_the_bits_imply)
{
    int bits = affine_bits[_i / 3], gs = groups[_i % 3];
    size_t n = 4 * 128;
    float *w = malloc(n * sizeof *w), *out = malloc(n * sizeof *out), scales[16], biases[16];
    uint32_t *packed = malloc(n * (size_t)bits / 8);
    uint32_t n_bins = (1u << bits) - 1;

    for (size_t i = 0; i < n; i++)
        w[i] = frand() * (i % 7 == 0 ? 3.0f : 1.0f) + (i < 128 ? 0.5f : 0.0f);
    ck_assert_int_eq(quant_affine_quantize(packed, scales, biases, w, n, bits, gs), 0);
    ck_assert_int_eq(quant_dequantize_row(quant_affine_name(bits), packed, scales, biases, ST_F32, gs, n, out), 0);
    for (size_t i = 0; i < n; i++) {
        float s = fabsf(scales[i / (size_t)gs]), err = fabsf(w[i] - out[i]);
        uint32_t q = code_at(packed, i, bits);
        ck_assert_uint_le(q, n_bins);
        ck_assert_float_eq(out[i], scales[i / (size_t)gs] * (float)q + biases[i / (size_t)gs]);
        if (q == n_bins)
            ck_assert_float_le(err, s * 1.0001f);
        else
            ck_assert_msg(err <= s * 0.5001f + 1e-6f, "bits %d group %d elem %zu: err %g > scale/2 %g", bits, gs, i,
                          (double)err, (double)s / 2);
    }
    free(w);
    free(out);
    free(packed);
}
END_TEST

/* MLX's sign convention: the extreme of larger magnitude is the bias (q = 0), the scale is
 * negative when that extreme is the max. */
START_TEST(affine_matches_mlx_on_a_known_group)
{
    float w[32], s, b, out[32];
    uint32_t packed[4];

    for (int j = 0; j < 32; j++)
        w[j] = (float)j / 31.0f;   /* min 0, max 1 */
    ck_assert_int_eq(quant_affine_quantize(packed, &s, &b, w, 32, 4, 32), 0);
    ck_assert_float_eq_tol(s, -1.0f / 15.0f, 1e-7f);
    ck_assert_float_eq(b, 1.0f);
    ck_assert_uint_eq(code_at(packed, 0, 4), 15);
    ck_assert_uint_eq(code_at(packed, 31, 4), 0);
    ck_assert_uint_eq(code_at(packed, 15, 4), (uint32_t)rintf(15.0f * (1.0f - 15.0f / 31.0f)));
    /* |min| > |max|: the min is exact and the scale positive */
    for (int j = 0; j < 32; j++)
        w[j] = -2.0f + (float)j / 31.0f;
    ck_assert_int_eq(quant_affine_quantize(packed, &s, &b, w, 32, 4, 32), 0);
    ck_assert_float_gt(s, 0.0f);
    ck_assert_float_eq(b, -2.0f);
    ck_assert_int_eq(quant_dequantize_row("int4", packed, &s, &b, ST_F32, 32, 32, out), 0);
    ck_assert_float_eq(out[0], -2.0f);
    /* an all-zero group dequantizes to zeros */
    memset(w, 0, sizeof w);
    ck_assert_int_eq(quant_affine_quantize(packed, &s, &b, w, 32, 3, 32), 0);
    ck_assert_int_eq(quant_dequantize_row("int3", packed, &s, &b, ST_F32, 32, 32, out), 0);
    for (int j = 0; j < 32; j++)
        ck_assert_float_eq(out[j], 0.0f);
}
END_TEST

/* 3, 5 and 6 bits run across word boundaries: MLX's packing is one little-endian bit stream. */
START_TEST(odd_bit_widths_pack_as_one_bit_stream)
{
    static const int widths[] = { 3, 5, 6 };
    int bits = widths[_i];
    uint32_t words[3 * 128 / 32 * 2] = { 0 };
    float s = 1.0f, b = 0.0f, out[64];

    for (int i = 0; i < 64; i++) {   /* code i % 2^bits at bit i * bits */
        uint64_t q = (uint64_t)(i % (1 << bits));
        for (int k = 0; k < bits; k++) {
            size_t bit = (size_t)i * (size_t)bits + (size_t)k;
            ((uint8_t *)words)[bit / 8] |= (uint8_t)(((q >> k) & 1) << (bit % 8));
        }
    }
    ck_assert_int_eq(quant_dequantize_row(quant_affine_name(bits), words, &s, &b, ST_F32, 32, 32, out), 0);
    for (int i = 0; i < 32; i++)
        ck_assert_float_eq(out[i], (float)(i % (1 << bits)));
}
END_TEST

START_TEST(affine_scales_in_f16_and_bf16)
{
    uint32_t words[4];
    uint16_t s16 = 0x4000, b16 = 0xbc00;     /* F16 2.0, -1.0 */
    uint16_t sb = 0x4000, bb = 0xbf80;       /* BF16 2.0, -1.0 */
    float out[32];

    memset(words, 0x11, sizeof words);       /* every 4-bit code is 1 */
    ck_assert_int_eq(quant_dequantize_row("int4", words, &s16, &b16, ST_F16, 32, 32, out), 0);
    ck_assert_float_eq(out[7], 1.0f);
    ck_assert_int_eq(quant_dequantize_row("int4", words, &sb, &bb, ST_BF16, 32, 32, out), 0);
    ck_assert_float_eq(out[31], 1.0f);
}
END_TEST

static const char *const fp_names[] = { "mxfp4", "nvfp4", "mxfp8" };

/* Values the format can represent exactly come back exactly; random ones within its precision. */
START_TEST(fp_modes_round_trip)
{
    const quant_format *f = quant_format_find(fp_names[_i]);
    static const float e2m1[8] = { 0, 0.5f, 1, 1.5f, 2, 3, 4, 6 };
    size_t n = 256, gs;
    float w[256], out[256];
    uint32_t packed[64];
    uint8_t scales[16];
    quant_error e = { 0 };

    ck_assert_ptr_nonnull(f);
    gs = (size_t)f->group_size;
    for (size_t i = 0; i < n; i++) {
        float v = f->bits == 4 ? e2m1[i % 8] : quant_e4m3_to_f32((uint8_t)(i % 0x7e));
        w[i] = (i % 3 ? v : -v) * (f->mode == QUANT_NVFP4 ? 1.0f : 0.25f);
    }
    for (size_t g = 0; g < n / gs; g++)   /* every group holds the format's max, so the scale is exact */
        w[g * gs + 1] = f->bits == 4 ? 6.0f * (f->mode == QUANT_NVFP4 ? 1.0f : 0.25f) : 448.0f * 0.25f;
    ck_assert_int_eq(quant_fp_quantize(packed, scales, w, n, f), 0);
    ck_assert_int_eq(quant_dequantize_row(f->name, packed, scales, NULL, f->scale_dtype, f->group_size, n, out), 0);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(out[i] == w[i], "%s elem %zu: %g != %g", f->name, i, (double)out[i], (double)w[i]);
    for (size_t i = 0; i < n; i++)
        w[i] = frand();
    ck_assert_int_eq(quant_fp_quantize(packed, scales, w, n, f), 0);
    ck_assert_int_eq(quant_dequantize_row(f->name, packed, scales, NULL, f->scale_dtype, f->group_size, n, out), 0);
    quant_error_add(&e, w, out, n);
    ck_assert_double_lt(quant_error_rms_rel(&e), f->bits == 4 ? 0.2 : 0.08);
    ck_assert_double_gt(quant_error_rms_rel(&e), 0.0);
}
END_TEST

START_TEST(float_conversions_round_to_nearest_even)
{
    static const struct { float f; uint8_t e4m3; } e4[] = {
        { 1.0f, 0x38 }, { -2.0f, 0xc0 }, { 448.0f, 0x7e }, { 1000.0f, 0x7e }, { 0.001953125f, 0x01 },
        { 1.0625f, 0x38 }, { 1.1875f, 0x3a }, { 0.0f, 0x00 }, { 0.015625f, 0x08 }, { 240.0f, 0x77 },
    };
    uint16_t h;
    float f;

    for (size_t i = 0; i < sizeof e4 / sizeof e4[0]; i++) {
        ck_assert_uint_eq(quant_f32_to_e4m3(e4[i].f), e4[i].e4m3);
        if (e4[i].f < 448.5f && e4[i].f != 1.0625f && e4[i].f != 1.1875f)
            ck_assert_float_eq(quant_e4m3_to_f32(e4[i].e4m3), e4[i].f);
    }
    ck_assert(isnan(quant_e4m3_to_f32(0x7f)));
    ck_assert_float_eq(quant_e8m0_to_f32(127), 1.0f);
    ck_assert_float_eq(quant_e8m0_to_f32(120), 1.0f / 128.0f);
    f = 1.0f + 1.0f / 256.0f;   /* BF16 tie: to even (1.0) */
    ck_assert_int_eq(quant_from_f32(&h, ST_BF16, &f, 1), 0);
    ck_assert_uint_eq(h, 0x3f80);
    f = 1.0f + 3.0f / 256.0f;
    ck_assert_int_eq(quant_from_f32(&h, ST_BF16, &f, 1), 0);
    ck_assert_uint_eq(h, 0x3f82);
    f = 65504.0f;
    ck_assert_int_eq(quant_from_f32(&h, ST_F16, &f, 1), 0);
    ck_assert_uint_eq(h, 0x7bff);
    f = 1.0f + 1.0f / 2048.0f;   /* F16 tie: to even */
    ck_assert_int_eq(quant_from_f32(&h, ST_F16, &f, 1), 0);
    ck_assert_uint_eq(h, 0x3c00);
    f = 5.96046448e-08f;   /* least subnormal */
    ck_assert_int_eq(quant_from_f32(&h, ST_F16, &f, 1), 0);
    ck_assert_uint_eq(h, 0x0001);
    ck_assert_int_eq(quant_to_f32(&f, &h, ST_F16, 1), 0);
    ck_assert_float_eq(f, 5.96046448e-08f);
    for (uint32_t v = 0; v < 0x7c00; v += 7) {   /* every 7th finite half round-trips */
        uint16_t a = (uint16_t)v, b;
        ck_assert_int_eq(quant_to_f32(&f, &a, ST_F16, 1), 0);
        ck_assert_int_eq(quant_from_f32(&b, ST_F16, &f, 1), 0);
        ck_assert_uint_eq(a, b);
    }
    ck_assert_int_eq(quant_from_f32(&h, ST_U8, &f, 1), MS_EINVALID);
}
END_TEST

/* ggml blocks built by hand; expected values worked out from ggml's block layouts. */
START_TEST(ggml_blocks_dequantize_as_ggml_does)
{
    uint8_t b[292];
    float y[256];

    memset(b, 0, sizeof b);   /* Q4_0: d = 0.5, qs[j] = j | (15 - j) << 4 */
    b[1] = 0x38;
    for (int j = 0; j < 16; j++)
        b[2 + j] = (uint8_t)(j | ((15 - j) << 4));
    ck_assert_int_eq(quant_dequantize_row("Q4_0", b, NULL, NULL, ST_F32, 0, 32, y), 0);
    for (int j = 0; j < 16; j++) {
        ck_assert_float_eq(y[j], (float)(j - 8) * 0.5f);
        ck_assert_float_eq(y[j + 16], (float)(7 - j) * 0.5f);
    }
    memset(b, 0, sizeof b);   /* Q4_1: d = 1, m = -2, codes 3 */
    b[1] = 0x3c;
    b[3] = 0xc0;
    memset(b + 4, 0x33, 16);
    ck_assert_int_eq(quant_dequantize_row("q4_1", b, NULL, NULL, ST_F32, 0, 32, y), 0);
    ck_assert_float_eq(y[5], 1.0f);
    memset(b, 0, sizeof b);   /* Q5_0: d = 1, qh bit 0 set, qs[0] low = 15 */
    b[1] = 0x3c;
    b[2] = 0x01;
    b[6] = 0x0f;
    ck_assert_int_eq(quant_dequantize_row("Q5_0", b, NULL, NULL, ST_F32, 0, 32, y), 0);
    ck_assert_float_eq(y[0], 15.0f);
    ck_assert_float_eq(y[16], -16.0f);
    memset(b, 0, sizeof b);   /* Q8_0: d = 2, q = -3 */
    b[1] = 0x40;
    b[2 + 9] = (uint8_t)-3;
    ck_assert_int_eq(quant_dequantize_row("Q8_0", b, NULL, NULL, ST_F32, 0, 32, y), 0);
    ck_assert_float_eq(y[9], -6.0f);
    memset(b, 0, sizeof b);   /* Q3_K: d = 1, zero scales decode to -32, zero hmask subtracts 4 */
    b[109] = 0x3c;
    ck_assert_int_eq(quant_dequantize_row("Q3_K", b, NULL, NULL, ST_F32, 0, 256, y), 0);
    ck_assert_float_eq(y[0], 128.0f);
    ck_assert_float_eq(y[255], 128.0f);
    memset(b, 0, sizeof b);   /* Q4_K: d = 1, dmin = 0.5; sub-block 0 scale 3 min 2; code 1 */
    b[1] = 0x3c;
    b[3] = 0x38;
    b[4] = 3;
    b[8] = 2;
    memset(b + 16, 0x21, 128);
    ck_assert_int_eq(quant_dequantize_row("Q4_K", b, NULL, NULL, ST_F32, 0, 256, y), 0);
    ck_assert_float_eq(y[0], 3.0f * 1.0f - 1.0f);
    ck_assert_float_eq(y[32], 0.0f);   /* sub-block 1: scale 0, min 0 */
    memset(b, 0, sizeof b);   /* Q6_K: d = 1, scales 1 (scale[2] = 2), codes 0 -> -32 */
    memset(b + 192, 1, 16);
    b[194] = 2;
    b[209] = 0x3c;
    ck_assert_int_eq(quant_dequantize_row("Q6_K", b, NULL, NULL, ST_F32, 0, 256, y), 0);
    ck_assert_float_eq(y[0], -32.0f);
    ck_assert_float_eq(y[32], -64.0f);
    memset(b, 0, sizeof b);   /* IQ4_NL: d = 1, qs[0] = 0x0f */
    b[1] = 0x3c;
    b[2] = 0x0f;
    ck_assert_int_eq(quant_dequantize_row("IQ4_NL", b, NULL, NULL, ST_F32, 0, 32, y), 0);
    ck_assert_float_eq(y[0], 113.0f);
    ck_assert_float_eq(y[16], -127.0f);
    memset(b, 0, sizeof b);   /* Q2_K, Q5_K, Q8_K, IQ4_XS, MXFP4: all-zero blocks give zeros */
    ck_assert_int_eq(quant_dequantize_row("Q2_K", b, NULL, NULL, ST_F32, 0, 256, y), 0);
    ck_assert_float_eq(y[100], 0.0f);
    ck_assert_int_eq(quant_dequantize_row("Q5_K", b, NULL, NULL, ST_F32, 0, 256, y), 0);
    ck_assert_int_eq(quant_dequantize_row("Q8_K", b, NULL, NULL, ST_F32, 0, 256, y), 0);
    ck_assert_int_eq(quant_dequantize_row("IQ4_XS", b, NULL, NULL, ST_F32, 0, 256, y), 0);
    b[0] = 128;   /* ggml MXFP4: e = 128 -> d = 1 (halved E8M0), code 7 -> 12 */
    b[1] = 0x07;
    ck_assert_int_eq(quant_dequantize_row("MXFP4", b, NULL, NULL, ST_F32, 0, 32, y), 0);
    ck_assert_float_eq(y[0], 12.0f);
    ck_assert_float_eq(y[16], 0.0f);
}
END_TEST

static const struct { const char *type; int group; st_dtype sdt; int biases; size_t n; const char *expect; } bad[] = {
    { "int7", 32, ST_F32, 1, 32, "unknown quant type 'int7'" },
    { "int4", 48, ST_F32, 1, 48, "group size 48 not allowed" },
    { "int4", 32, ST_F32, 1, 40, "40 elements are not whole groups of 32" },
    { "int4", 32, ST_F32, 0, 32, "needs biases" },
    { "int4", 32, ST_U8, 1, 32, "scale dtype U8" },
    { "nvfp4", 32, ST_F8_E4M3, 0, 32, "group size 32 not allowed" },
    { "mxfp8", 32, ST_F16, 0, 32, "scale dtype F16, expected U8" },
    { "Q4_K", 0, ST_F32, 0, 32, "not whole blocks of 256" },
};

START_TEST(dequantize_refuses_inconsistent_arguments)
{
    uint32_t words[64] = { 0 };
    float s[4] = { 1, 1, 1, 1 }, out[256];

    ck_assert_int_eq(quant_dequantize_row(bad[_i].type, words, s, bad[_i].biases ? s : NULL, bad[_i].sdt,
                                          bad[_i].group, bad[_i].n, out), MS_EINVALID);
    ck_assert_msg(strstr(ms_err_msg(), bad[_i].expect), "'%s' lacks '%s'", ms_err_msg(), bad[_i].expect);
}
END_TEST

START_TEST(quantize_refuses_bad_parameters)
{
    float w[64] = { 0 }, s[2], b[2];
    uint32_t p[64];

    ck_assert_int_eq(quant_affine_quantize(p, s, b, w, 64, 7, 32), MS_EINVALID);
    ck_assert_int_eq(quant_affine_quantize(p, s, b, w, 64, 4, 16), MS_EINVALID);
    ck_assert_int_eq(quant_affine_quantize(p, s, b, w, 48, 4, 32), MS_EINVALID);
    ck_assert_int_eq(quant_fp_quantize(p, (uint8_t *)s, w, 64, quant_format_find("int4")), MS_EINVALID);
    ck_assert_ptr_null(quant_format_find("int7"));
    ck_assert_ptr_null(quant_affine_name(7));
    ck_assert_str_eq(quant_format_find("q6_k")->name, "Q6_K");
}
END_TEST

/* Real data: stories260K re-typed to Q5_0 / Q8_0 (s260k-mixed.gguf) dequantizes close to the same
 * weights in F16 (s260k-f16.gguf), each within the precision of its type. */
START_TEST(ggml_dequantize_matches_the_f16_model)
{
    char *models = fixture_models_dir(), *pm = NULL, *pf = NULL;
    gguf_file *gm = NULL, *gf = NULL;
    int checked = 0;

    if (models) {
        pm = ms_path_join(models, "stories260K/s260k-mixed.gguf");
        pf = ms_path_join(models, "stories260K/s260k-f16.gguf");
    }
    if (!pm || !ms_is_file(pm) || !ms_is_file(pf)) {
        fprintf(stderr, "test_quant: no stories260K/s260k-{mixed,f16}.gguf in the models folder: real-data check skipped\n");
        goto done;
    }
    ck_assert_int_eq(gguf_open(&gm, pm), 0);
    ck_assert_int_eq(gguf_open(&gf, pf), 0);
    for (size_t i = 0; i < gguf_tensor_count(gm); i++) {
        const gguf_tensor *tm = gguf_tensor_at(gm, i), *tf = gguf_tensor_find(gf, tm->name);
        size_t n = (size_t)(tm->ne[0] * tm->ne[1] * tm->ne[2] * tm->ne[3]);
        float *a, *b;
        quant_error e = { 0 };

        if (tm->type != GGML_TYPE_Q5_0 && tm->type != GGML_TYPE_Q8_0)
            continue;
        ck_assert_ptr_nonnull(tf);
        ck_assert_int_eq(tf->type, GGML_TYPE_F16);
        a = malloc(n * sizeof *a);
        b = malloc(n * sizeof *b);
        ck_assert_int_eq(quant_dequantize_row(ggml_type_name(tm->type), tm->data, NULL, NULL, ST_F32, 0, n, a), 0);
        ck_assert_int_eq(quant_dequantize_row("F16", tf->data, NULL, NULL, ST_F32, 0, n, b), 0);
        quant_error_add(&e, b, a, n);
        ck_assert_msg(quant_error_rms_rel(&e) < (tm->type == GGML_TYPE_Q8_0 ? 0.01 : 0.06), "%s (%s): rms rel %g",
                      tm->name, ggml_type_name(tm->type), quant_error_rms_rel(&e));
        ck_assert_double_gt(quant_error_rms_rel(&e), 0.0);
        free(a);
        free(b);
        checked++;
    }
    ck_assert_int_eq(checked, 32);   /* 29 Q5_0 + 3 Q8_0, as SOURCES.md says */
done:
    gguf_close(gm);
    gguf_close(gf);
    free(pm);
    free(pf);
    free(models);
}
END_TEST

int main(void)
{
    Suite *su = suite_create("quant");
    TCase *tc = tcase_create("quant");
    SRunner *sr;
    int failed;

    tcase_add_loop_test(tc, affine_round_trip_within_the_bound_the_bits_imply, 0, 18);
    tcase_add_test(tc, affine_matches_mlx_on_a_known_group);
    tcase_add_loop_test(tc, odd_bit_widths_pack_as_one_bit_stream, 0, 3);
    tcase_add_test(tc, affine_scales_in_f16_and_bf16);
    tcase_add_loop_test(tc, fp_modes_round_trip, 0, 3);
    tcase_add_test(tc, float_conversions_round_to_nearest_even);
    tcase_add_test(tc, ggml_blocks_dequantize_as_ggml_does);
    tcase_add_test(tc, ggml_dequantize_matches_the_f16_model);
    tcase_add_loop_test(tc, dequantize_refuses_inconsistent_arguments, 0, (int)(sizeof bad / sizeof bad[0]));
    tcase_add_test(tc, quantize_refuses_bad_parameters);
    suite_add_tcase(su, tc);
    sr = srunner_create(su);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
