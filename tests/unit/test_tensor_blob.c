/* test_tensor_blob.c: the tensor-blob metadata codec (src/format/tensor_blob.c): what the
 * importers write is what the index, the runtime and export read back. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/format.h"
#include "helpers/fixture.h"

/* A blob of the given tensors (all U8, 4 bytes) after `put` has written its metadata. */
typedef int (*put_fn)(st_writer *w);

static st_file *blob_make(fixture_mem *mem, put_fn put, const char *const *names, size_t n)
{
    static const uint8_t data[4] = { 1, 2, 3, 4 };
    const uint64_t shape[1] = { 4 };
    st_writer *w = NULL;
    st_file *f = NULL;

    memset(mem, 0, sizeof *mem);
    ck_assert_int_eq(st_writer_new(&w), 0);
    ck_assert_msg(put(w) == 0, "%s", ms_err_msg());
    for (size_t i = 0; i < n; i++)
        ck_assert_int_eq(st_writer_add(w, names[i], ST_U8, 1, shape, data, sizeof data), 0);
    ck_assert_int_eq(st_writer_emit(w, fixture_mem_sink, mem), 0);
    st_writer_free(w);
    ck_assert_msg(st_parse(&f, mem->p, mem->len, mem->len, 0, "blob") == 0, "%s", ms_err_msg());
    return f;
}

static int put_ggml(st_writer *w)
{
    tensor_blob_meta m = {.quant_type = "Q4_0", .n_dims = 2, .shape = { 4096, 11008 }, .gguf_name = "blk.0.ffn_up.weight"};
    return tensor_blob_meta_put(w, NULL, &m);
}

START_TEST(blob_wide_keys_round_trip_with_integer_shapes)
{
    const char *names[] = { "model.layers.0.mlp.up_proj.weight" };
    fixture_mem mem;
    st_file *f = blob_make(&mem, put_ggml, names, 1);
    tensor_blob_meta m;

    ck_assert_int_eq(tensor_blob_meta_get(&m, f, st_at(f, 0), names[0], "blob"), 0);
    ck_assert_str_eq(m.quant_type, "Q4_0");
    ck_assert_str_eq(m.gguf_name, "blk.0.ffn_up.weight");
    ck_assert_int_eq(m.group_size, 0);
    ck_assert_int_eq(m.n_dims, 2);
    ck_assert_uint_eq(m.shape[0], 4096);
    ck_assert_uint_eq(m.shape[1], 11008);
    /* the text in the blob is the one format, in the order every mstore has written */
    ck_assert_str_eq(st_meta(f, "logical_shape"), "[4096, 11008]");
    const char *want = "\"quant_type\":\"Q4_0\",\"logical_shape\":\"[4096, 11008]\",\"gguf_name\":\"blk.0.ffn_up.weight\"";
    ck_assert_ptr_nonnull(memmem(mem.p, mem.len, want, strlen(want)));
    st_free(f);
    free(mem.p);
}
END_TEST

static int put_pack(st_writer *w)
{
    tensor_blob_meta a = {.quant_type = "int4", .group_size = 64, .n_dims = 3, .shape = { 8, 128, 256 }};
    tensor_blob_meta b = {.gguf_name = "blk.1.ffn_down_exps.weight"};
    int rc = tensor_blob_meta_put(w, "e.gate", &a);
    return rc < 0 ? rc : tensor_blob_meta_put(w, "e.down", &b);
}

/* In a pack each tensor has its own keys; a .scale / .bias shares its tensor's quantization
 * but not its logical shape. */
START_TEST(pack_keys_belong_to_their_tensor_and_its_scales)
{
    const char *names[] = { "e.gate", "e.gate.scale", "e.gate.bias", "e.down" };
    fixture_mem mem;
    st_file *f = blob_make(&mem, put_pack, names, 4);
    tensor_blob_meta m;

    ck_assert_int_eq(tensor_blob_meta_get(&m, f, st_find(f, "e.gate"), "e", "blob"), 0);
    ck_assert_str_eq(m.quant_type, "int4");
    ck_assert_int_eq(m.group_size, 64);
    ck_assert_int_eq(m.n_dims, 3);
    ck_assert_uint_eq(m.shape[2], 256);
    ck_assert_ptr_null(m.gguf_name);
    ck_assert_int_eq(tensor_blob_meta_get(&m, f, st_find(f, "e.gate.scale"), "e", "blob"), 0);
    ck_assert_str_eq(m.quant_type, "int4");
    ck_assert_int_eq(m.group_size, 64);
    ck_assert_int_eq(tensor_blob_meta_get(&m, f, st_find(f, "e.down"), "e", "blob"), 0);
    ck_assert_ptr_null(m.quant_type);
    ck_assert_int_eq(m.n_dims, 0);
    ck_assert_str_eq(m.gguf_name, "blk.1.ffn_down_exps.weight");
    ck_assert_str_eq(st_meta(f, "logical_shape:e.gate"), "[8, 128, 256]");
    st_free(f);
    free(mem.p);
}
END_TEST

static int put_mlx(st_writer *w)
{
    tensor_blob_meta m = {.quant_type = "int8", .group_size = 32, .n_dims = 2, .shape = { 64, 64 }};
    return tensor_blob_meta_put(w, NULL, &m);
}

/* A blob-wide logical_shape is the main tensor's: the one named like the layer. */
START_TEST(blob_wide_logical_shape_is_the_main_tensors_only)
{
    const char *names[] = { "w", "w.scale", "w.bias" };
    fixture_mem mem;
    st_file *f = blob_make(&mem, put_mlx, names, 3);
    tensor_blob_meta m;

    ck_assert_int_eq(tensor_blob_meta_get(&m, f, st_find(f, "w"), "w", "blob"), 0);
    ck_assert_int_eq(m.n_dims, 2);
    ck_assert_int_eq(tensor_blob_meta_get(&m, f, st_find(f, "w.scale"), "w", "blob"), 0);
    ck_assert_int_eq(m.n_dims, 0);
    ck_assert_str_eq(m.quant_type, "int8");
    ck_assert_int_eq(m.group_size, 32);
    st_free(f);
    free(mem.p);
}
END_TEST

static const char *const bad_meta[][2] = {
    { "group_size", "0" },         { "group_size", "-3" },       { "group_size", "64x" },
    { "group_size", "3000000000" }, { "logical_shape", "4096" }, { "logical_shape", "[]" },
    { "logical_shape", "[1,,2]" }, { "logical_shape", "[1, 2] " }, { "logical_shape", "[1, 2, 3, 4, 5, 6, 7, 8, 9]" },
    { "logical_shape", "[99999999999999999999]" }, { "logical_shape", "[1, \x1b[31m]" },
};
static int bad_i;

static int put_bad(st_writer *w) { return st_writer_meta(w, bad_meta[bad_i][0], bad_meta[bad_i][1]); }

/* What a hostile blob says is refused, naming the blob, the tensor and the key. */
START_TEST(lying_metadata_is_refused_naming_the_key)
{
    const char *names[] = { "t" };
    fixture_mem mem;
    st_file *f;
    tensor_blob_meta m;

    bad_i = _i;
    f = blob_make(&mem, put_bad, names, 1);
    ck_assert_int_eq(tensor_blob_meta_get(&m, f, st_at(f, 0), "t", "sha256:ab"), MS_EINVALID);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "sha256:ab: tensor 't'"));
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), bad_meta[_i][0]));
    st_free(f);
    free(mem.p);
}
END_TEST

START_TEST(shape_text_round_trips)
{
    const uint64_t shape[ST_MAX_DIMS] = { 1, 18446744073709551615ull, 0, 7, 8, 9, 10, 11 };
    char buf[TENSOR_BLOB_SHAPE_MAX];
    uint64_t back[ST_MAX_DIMS];
    int n;

    for (int d = 1; d <= ST_MAX_DIMS; d++) {
        ck_assert_int_eq(tensor_blob_shape_parse(&n, back, tensor_blob_shape_format(buf, sizeof buf, d, shape)), 0);
        ck_assert_int_eq(n, d);
        ck_assert_mem_eq(back, shape, (size_t)d * sizeof *shape);
    }
    ck_assert_str_eq(tensor_blob_shape_format(buf, sizeof buf, 2, shape), "[1, 18446744073709551615]");
    ck_assert_int_eq(tensor_blob_shape_parse(&n, back, "[18446744073709551616]"), MS_EINVALID);
    ck_assert_int_eq(tensor_blob_shape_parse(&n, back, "[3,4]"), 0);   /* spaces are optional */
    ck_assert_int_eq(n, 2);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tensor_blob");
    TCase *tc = tcase_create("core");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, blob_wide_keys_round_trip_with_integer_shapes);
    tcase_add_test(tc, pack_keys_belong_to_their_tensor_and_its_scales);
    tcase_add_test(tc, blob_wide_logical_shape_is_the_main_tensors_only);
    tcase_add_loop_test(tc, lying_metadata_is_refused_naming_the_key, 0, (int)(sizeof bad_meta / sizeof bad_meta[0]));
    tcase_add_test(tc, shape_text_round_trips);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
