/* test_safetensors.c: the safetensors reader and writer (src/format/safetensors.c). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "format/format.h"
#include "helpers/fixture.h"

/* ---------------------------------------------------------------- helpers */

typedef fixture_mem mem;   /* emitted files, in memory */

static int failing_sink(void *ctx, const void *buf, size_t len)
{
    (void)buf;
    (void)len;
    if ((*(int *)ctx)-- <= 0)
        return ms_err(MS_EIO, "sink: disk full");
    return 0;
}

/* [u64 LE strlen(json)][json][data_len zero bytes] */
static uint8_t *make_file(size_t *len_out, const char *json, size_t data_len)
{
    size_t hlen = strlen(json);
    uint8_t *b = calloc(1, 8 + hlen + data_len + 1);

    ck_assert_ptr_nonnull(b);
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)((uint64_t)hlen >> (8 * i));
    memcpy(b + 8, json, hlen);
    *len_out = 8 + hlen + data_len;
    return b;
}

static float f32_data[12] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12 };
static uint16_t bf16_data[5] = { 0x3f80, 0x4000, 0x4040, 0x4080, 0x40a0 };
static int64_t i64_scalar = -42;

/* Three tensors (one a scalar, one empty) plus metadata, emitted into *m. */
static st_writer *sample_writer(void)
{
    st_writer *w;
    uint64_t s_f32[2] = { 3, 4 }, s_bf16[1] = { 5 }, s_empty[2] = { 0, 7 };

    ck_assert_int_eq(st_writer_new(&w), 0);
    ck_assert_int_eq(st_writer_meta(w, "quant_type", "int4"), 0);
    ck_assert_int_eq(st_writer_meta(w, "group_size", "64"), 0);
    ck_assert_int_eq(st_writer_add(w, "z.weight", ST_F32, 2, s_f32, f32_data, sizeof f32_data), 0);
    ck_assert_int_eq(st_writer_add(w, "a.bias", ST_BF16, 1, s_bf16, bf16_data, sizeof bf16_data), 0);
    ck_assert_int_eq(st_writer_add(w, "m.empty", ST_F16, 2, s_empty, NULL, 0), 0);
    ck_assert_int_eq(st_writer_add(w, "m.scalar \"q\"", ST_I64, 0, NULL, &i64_scalar, 8), 0);
    return w;
}

static mem emit(st_writer *w)
{
    mem m = { 0 };

    ck_assert_int_eq(st_writer_emit(w, fixture_mem_sink, &m), 0);
    ck_assert_uint_eq(m.len, st_writer_size(w));
    return m;
}

/* ---------------------------------------------------------------- round trip */

START_TEST(writer_output_parses_back_to_the_same_tensors)
{
    st_writer *w = sample_writer();
    mem m = emit(w);
    st_file *f;
    const st_tensor *t;
    const char *k, *v;

    ck_assert_int_eq(st_parse(&f, m.p, m.len, 0, 0, "mem"), 0);
    ck_assert_uint_eq(st_count(f), 4);

    t = st_find(f, "z.weight");
    ck_assert_ptr_nonnull(t);
    ck_assert_str_eq(t->name, "z.weight");
    ck_assert_int_eq(t->dtype, ST_F32);
    ck_assert_int_eq(t->n_dims, 2);
    ck_assert_uint_eq(t->shape[0], 3);
    ck_assert_uint_eq(t->shape[1], 4);
    ck_assert_uint_eq(t->nbytes, sizeof f32_data);
    ck_assert_ptr_eq(t->data, m.p + t->offset);
    ck_assert_mem_eq(t->data, f32_data, sizeof f32_data);

    t = st_find(f, "a.bias");
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(t->dtype, ST_BF16);
    ck_assert_mem_eq(t->data, bf16_data, sizeof bf16_data);

    t = st_find(f, "m.empty");
    ck_assert_ptr_nonnull(t);
    ck_assert_uint_eq(t->nbytes, 0);
    ck_assert_uint_eq(t->shape[0], 0);
    ck_assert_uint_eq(t->shape[1], 7);

    t = st_find(f, "m.scalar \"q\"");   /* the quote survives JSON escaping */
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(t->n_dims, 0);
    ck_assert_int_eq(t->dtype, ST_I64);
    ck_assert_mem_eq(t->data, &i64_scalar, 8);

    ck_assert_ptr_null(st_find(f, "absent"));
    ck_assert_ptr_null(st_find(f, "__metadata__"));
    ck_assert_str_eq(st_meta(f, "quant_type"), "int4");
    ck_assert_str_eq(st_meta(f, "group_size"), "64");
    ck_assert_ptr_null(st_meta(f, "nope"));
    ck_assert_uint_eq(st_meta_count(f), 2);
    st_meta_at(f, 0, &k, &v);
    ck_assert_ptr_nonnull(k);
    ck_assert_ptr_nonnull(v);
    ck_assert_str_eq(st_meta(f, k), v);

    /* Tensors come back ordered by offset, which is insertion order for mstore's writer. */
    ck_assert_str_eq(st_at(f, 0)->name, "z.weight");
    ck_assert_str_eq(st_at(f, 1)->name, "a.bias");
    for (size_t i = 1; i < st_count(f); i++)
        ck_assert_uint_le(st_at(f, i - 1)->offset, st_at(f, i)->offset);
    ck_assert_ptr_null(st_at(f, 4));
    st_free(f);
    st_writer_free(w);
    free(m.p);
}
END_TEST

START_TEST(writer_aligns_the_data_region_and_every_tensor)
{
    st_writer *w = sample_writer();
    mem m = emit(w);
    st_file *f;
    uint64_t hsize = 0;

    for (int i = 7; i >= 0; i--)
        hsize = hsize << 8 | m.p[i];
    ck_assert_uint_eq((8 + hsize) % ST_ALIGN, 0);
    /* Metadata first, then tensors in insertion order, padded with spaces. */
    ck_assert_int_eq(memcmp(m.p + 8, "{\"__metadata__\":{\"quant_type\":\"int4\",\"group_size\":\"64\"},", 56), 0);
    ck_assert_int_eq(m.p[8 + hsize - 1], ' ');
    char *hdr = strndup((const char *)m.p + 8, (size_t)hsize);
    const char *pz = strstr(hdr, "\"z.weight\""), *pa = strstr(hdr, "\"a.bias\""), *pe = strstr(hdr, "\"m.empty\"");
    ck_assert(pz && pa && pe && pz < pa && pa < pe);
    free(hdr);

    ck_assert_int_eq(st_parse(&f, m.p, m.len, 0, 0, "mem"), 0);
    ck_assert_uint_eq(st_data_start(f), 8 + hsize);
    for (size_t i = 0; i < st_count(f); i++) {
        const st_tensor *t = st_at(f, i);
        ck_assert_uint_eq(t->offset % ST_ALIGN, 0);
        ck_assert_uint_eq(((uintptr_t)t->data - (uintptr_t)m.p) % ST_ALIGN, 0);
    }
    /* The bytes between tensors are zero. */
    const st_tensor *a = st_find(f, "z.weight"), *b = st_find(f, "a.bias");
    for (uint64_t o = a->offset + a->nbytes; o < b->offset; o++)
        ck_assert_uint_eq(m.p[o], 0);
    st_free(f);
    st_writer_free(w);
    free(m.p);
}
END_TEST

START_TEST(writer_output_is_deterministic)
{
    st_writer *w1 = sample_writer(), *w2 = sample_writer();
    mem a = emit(w1), b = emit(w2), c = emit(w1);   /* emitting twice gives the same bytes too */

    ck_assert_uint_eq(a.len, b.len);
    ck_assert_mem_eq(a.p, b.p, a.len);
    ck_assert_uint_eq(a.len, c.len);
    ck_assert_mem_eq(a.p, c.p, a.len);
    st_writer_free(w1);
    st_writer_free(w2);
    free(a.p);
    free(b.p);
    free(c.p);
}
END_TEST

START_TEST(empty_writer_gives_an_empty_valid_file)
{
    st_writer *w;
    st_file *f;
    mem m;

    ck_assert_int_eq(st_writer_new(&w), 0);
    m = emit(w);
    ck_assert_uint_eq(m.len, ST_ALIGN);
    ck_assert_int_eq(st_parse(&f, m.p, m.len, 0, 0, "mem"), 0);
    ck_assert_uint_eq(st_count(f), 0);
    ck_assert_uint_eq(st_meta_count(f), 0);
    ck_assert_ptr_null(st_find(f, "x"));
    st_free(f);
    st_writer_free(w);
    free(m.p);
}
END_TEST

START_TEST(many_tensors_are_all_found_by_name)
{
    enum { N = 20000 };
    static uint8_t byte[N];
    st_writer *w;
    st_file *f;
    char name[64];
    uint64_t shape[1] = { 1 };
    mem m;

    ck_assert_int_eq(st_writer_new(&w), 0);
    for (int i = 0; i < N; i++) {
        byte[i] = (uint8_t)i;
        snprintf(name, sizeof name, "model.layers.%d.w", (i * 7919) % N);   /* not in name order */
        ck_assert_int_eq(st_writer_add(w, name, ST_U8, 1, shape, &byte[i], 1), 0);
    }
    ck_assert_int_eq(st_writer_add(w, "model.layers.5.w", ST_U8, 1, shape, byte, 1), MS_EINVALID);
    m = emit(w);
    ck_assert_int_eq(st_parse(&f, m.p, m.len, 0, 0, "mem"), 0);
    ck_assert_uint_eq(st_count(f), N);
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof name, "model.layers.%d.w", (i * 7919) % N);
        const st_tensor *t = st_find(f, name);
        ck_assert_ptr_nonnull(t);
        ck_assert_uint_eq(t->data[0], (uint8_t)i);
    }
    st_free(f);
    st_writer_free(w);
    free(m.p);
}
END_TEST

START_TEST(parse_works_on_a_mapped_file)
{
    char dir[] = "/tmp/test_st_XXXXXX";
    st_writer *w = sample_writer();
    mem m = emit(w);
    ms_map map;
    st_file *f;
    char *path;

    ck_assert_ptr_nonnull(mkdtemp(dir));
    path = ms_path_join(dir, "model.safetensors");
    ck_assert_int_eq(ms_file_write_atomic(path, m.p, m.len), 0);
    ck_assert_int_eq(ms_map_open(&map, path), 0);
    ck_assert_int_eq(st_parse(&f, map.data, map.size, 0, 0, path), 0);
    ck_assert_mem_eq(st_find(f, "z.weight")->data, f32_data, sizeof f32_data);
    st_free(f);
    ms_map_close(&map);
    ck_assert_int_eq(unlink(path), 0);
    ck_assert_int_eq(rmdir(dir), 0);
    free(path);
    st_writer_free(w);
    free(m.p);
}
END_TEST

/* Gaps between tensors are legal (invariant 4 forbids only overlaps), as is any entry order. */
START_TEST(parse_accepts_gaps_and_unsorted_entries)
{
    size_t len;
    uint8_t *b = make_file(&len, "{\"b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[10,12]},"
                                 "\"a\":{\"dtype\":\"I16\",\"shape\":[2],\"data_offsets\":[0,4]}}", 16);
    st_file *f;

    ck_assert_int_eq(st_parse(&f, b, len, 0, 0, "gap"), 0);
    ck_assert_str_eq(st_at(f, 0)->name, "a");
    ck_assert_str_eq(st_at(f, 1)->name, "b");
    ck_assert_uint_eq(st_at(f, 1)->offset, st_data_start(f) + 10);
    st_free(f);
    free(b);
}
END_TEST

START_TEST(header_only_checks_offsets_against_the_file_size)
{
    st_writer *w = sample_writer();
    mem m = emit(w);
    st_file *f;
    uint64_t hsize = 0;

    for (int i = 7; i >= 0; i--)
        hsize = hsize << 8 | m.p[i];
    /* Only the header is in memory; the data lies past len. */
    ck_assert_int_eq(st_parse(&f, m.p, 8 + hsize, m.len, ST_HEADER_ONLY, "big.safetensors"), 0);
    ck_assert_uint_eq(st_count(f), 4);
    ck_assert_ptr_null(st_find(f, "z.weight")->data);
    ck_assert_uint_eq(st_find(f, "a.bias")->nbytes, sizeof bf16_data);
    st_free(f);

    ck_assert_int_eq(st_parse(&f, m.p, 8 + hsize, m.len - 1, ST_HEADER_ONLY, "big.safetensors"), MS_EINVALID);
    ck_assert_ptr_null(f);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "big.safetensors: tensor 'm.scalar \"q\"': data_offsets"));
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "past the end of the data region"));

    ck_assert_int_eq(st_parse(&f, m.p, 8 + hsize - 1, m.len, ST_HEADER_ONLY, "big"), MS_EINVALID);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "past the end of the buffer"));
    ck_assert_int_eq(st_parse(&f, m.p, 8 + hsize, hsize, ST_HEADER_ONLY, "big"), MS_EINVALID);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "past the end of the file"));
    /* Without the flag the data region is what the buffer holds. */
    ck_assert_int_eq(st_parse(&f, m.p, 8 + hsize, m.len, 0, "big"), MS_EINVALID);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "past the end of the data region"));
    st_writer_free(w);
    free(m.p);
}
END_TEST

/* ---------------------------------------------------------------- corrupt inputs */

#define T(dtype, shape, offs) "{\"t\":{\"dtype\":" dtype ",\"shape\":" shape ",\"data_offsets\":" offs "}}"

static const struct {
    const char *json;   /* NULL: raw bytes below */
    size_t data_len;
    const char *expect;
} bad[] = {
    { "[1, 2, 3]       ", 0, "m.st: header is not a json object" },
    { "{\"t\": {\"dtype\": ", 0, "m.st: header is not valid json" },
    { "not json at all!", 0, "header is not valid json" },
    { "{\"a\":1} trailing", 0, "header is not valid json" },
    { T("\"F33\"", "[1]", "[0,4]"), 4, "m.st: tensor 't': unknown dtype 'F33'" },
    { T("4", "[1]", "[0,4]"), 4, "tensor 't': dtype is missing or not a string" },
    { "{\"t\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "tensor 't': dtype is missing" },
    { T("\"F32\"", "[1,-3]", "[0,4]"), 4, "tensor 't': shape[1] is not a non-negative integer" },
    { T("\"F32\"", "[1.5]", "[0,4]"), 4, "tensor 't': shape[0] is not a non-negative integer" },
    { T("\"F32\"", "[\"2\"]", "[0,8]"), 8, "tensor 't': shape[0] is not a non-negative integer" },
    { T("\"F32\"", "[1,1,1,1,1,1,1,1,1]", "[0,4]"), 4, "tensor 't': shape has 9 dimensions (max 8)" },
    { T("\"F32\"", "3", "[0,12]"), 12, "tensor 't': shape is missing or not an array" },
    { T("\"F32\"", "[1]", "[4,0]"), 4, "tensor 't': data_offsets [4, 0] are reversed" },
    { T("\"F32\"", "[1]", "[0,4,8]"), 8, "tensor 't': data_offsets is not an array of 2 integers" },
    { T("\"F32\"", "[1]", "[0,\"4\"]"), 4, "tensor 't': data_offsets are not non-negative integers" },
    { T("\"F32\"", "[1]", "[-4,0]"), 4, "tensor 't': data_offsets are not non-negative integers" },
    { T("\"F32\"", "[2]", "[0,8]"), 7, "tensor 't': data_offsets [0, 8] extend past the end of the data region (7 bytes)" },
    { "{\"a.weight\":{\"dtype\":\"F32\",\"shape\":[3,4],\"data_offsets\":[0,100]}}", 100,
      "m.st: tensor 'a.weight': data_offsets [0, 100] do not match shape [3, 4] x F32 (48 bytes)" },
    { T("\"F64\"", "[4294967296,4294967296]", "[0,8]"), 8, "tensor 't': shape [4294967296, 4294967296] x F64 overflows 64 bits" },
    { T("\"U8\"", "[9223372036854775807,3]", "[0,8]"), 8, "overflows 64 bits" },
    { "{\"a\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[0,8]},"
      "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[6,10]}}", 10,
      "m.st: tensor 'b': data_offsets [6, 10] overlap tensor 'a' [0, 8]" },
    { "{\"a\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[0,8]},"
      "\"b\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[0,8]}}", 8, "overlap tensor" },
    { "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
      "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}", 2, "duplicate" },
    { "{\"__metadata__\":{\"k\":3}}", 0, "m.st: __metadata__ 'k' is not a string" },
    { "{\"__metadata__\":[\"k\"]}", 0, "m.st: __metadata__ is not an object" },
    { "{\"t\":[1,2]}", 0, "m.st: tensor 't': entry is not an object" },
};

START_TEST(parse_refuses_corrupt_headers)
{
    size_t len;
    uint8_t *b = make_file(&len, bad[_i].json, bad[_i].data_len);
    st_file *f = (st_file *)1;

    ck_assert_int_eq(st_parse(&f, b, len, 0, 0, "m.st"), MS_EINVALID);
    ck_assert_ptr_null(f);
    ck_assert_msg(strstr(ms_err_msg(), bad[_i].expect), "case %d: got '%s', want '%s'", _i, ms_err_msg(),
                  bad[_i].expect);
    free(b);
}
END_TEST

static const struct {
    uint64_t hsize;
    size_t len;        /* bytes handed to st_parse (the prefix, then spaces) */
    const char *expect;
} bad_size[] = {
    { 16, 5, "m.st: too short for the header size prefix (5 bytes < 8)" },
    { 16, 0, "too short for the header size prefix (0 bytes < 8)" },
    { 4, 64, "m.st: header size 4 is below the minimum 8" },
    { 100, 18, "m.st: header size 100 extends past the end of the buffer (8 + 100 > 18)" },
    { UINT64_MAX, 64, "m.st: header size 18446744073709551615 exceeds the limit 104857600" },
    { (100u << 20) + 1, 64, "exceeds the limit" },
};

START_TEST(parse_refuses_bad_header_sizes)
{
    uint8_t b[64];
    st_file *f = (st_file *)1;

    memset(b, ' ', sizeof b);
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(bad_size[_i].hsize >> (8 * i));
    ck_assert_int_eq(st_parse(&f, b, bad_size[_i].len, 0, 0, "m.st"), MS_EINVALID);
    ck_assert_ptr_null(f);
    ck_assert_msg(strstr(ms_err_msg(), bad_size[_i].expect), "case %d: got '%s'", _i, ms_err_msg());
}
END_TEST

/* ---------------------------------------------------------------- writer refusals */

START_TEST(writer_refuses_bad_tensors)
{
    st_writer *w;
    uint64_t s[2] = { 3, 4 }, big[2] = { UINT64_MAX, 2 };
    mem m;

    ck_assert_int_eq(st_writer_new(&w), 0);
    ck_assert_int_eq(st_writer_add(w, "x", ST_F32, 2, s, f32_data, 47), MS_EINVALID);
    ck_assert_str_eq(ms_err_msg(), "tensor 'x': 47 bytes do not match shape [3, 4] x F32 (48 bytes)");
    ck_assert_int_eq(st_writer_add(w, "x", ST_U8, 2, big, f32_data, 48), MS_EINVALID);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "overflows 64 bits"));
    ck_assert_int_eq(st_writer_add(w, "x", ST_F32, 9, s, f32_data, 48), MS_EINVALID);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "9 dimensions (max 8)"));
    ck_assert_int_eq(st_writer_add(w, "__metadata__", ST_F32, 2, s, f32_data, 48), MS_EINVALID);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "reserved"));
    ck_assert_int_eq(st_writer_add(w, "bad\xff", ST_F32, 2, s, f32_data, 48), MS_EINVALID);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "not valid utf-8"));
    ck_assert_int_eq(st_writer_add(w, "x", ST_F32, 2, s, f32_data, 48), 0);
    ck_assert_int_eq(st_writer_add(w, "x", ST_F32, 2, s, f32_data, 48), MS_EINVALID);
    ck_assert_str_eq(ms_err_msg(), "tensor 'x': name repeats");
    ck_assert_int_eq(st_writer_meta(w, "k", "v"), 0);
    ck_assert_int_eq(st_writer_meta(w, "k", "w"), MS_EINVALID);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "__metadata__ 'k' is set twice"));
    ck_assert_int_eq(st_writer_meta(w, "k2", "bad\xc3"), MS_EINVALID);

    /* Refused calls left no trace: the file holds exactly x and k. */
    st_file *f;
    m = emit(w);
    ck_assert_int_eq(st_parse(&f, m.p, m.len, 0, 0, "mem"), 0);
    ck_assert_uint_eq(st_count(f), 1);
    ck_assert_uint_eq(st_meta_count(f), 1);
    ck_assert_str_eq(st_meta(f, "k"), "v");
    st_free(f);
    free(m.p);
    st_writer_free(w);
}
END_TEST

START_TEST(writer_passes_sink_errors_up)
{
    st_writer *w = sample_writer();

    for (int n = 0; n < 4; n++) {
        int budget = n;
        ck_assert_int_eq(st_writer_emit(w, failing_sink, &budget), MS_EIO);
        ck_assert_str_eq(ms_err_msg(), "sink: disk full");
    }
    st_writer_free(w);
}
END_TEST

START_TEST(dtype_names_round_trip)
{
    st_dtype t;

    for (int i = 0; i < ST_DTYPE_COUNT; i++) {
        ck_assert_int_eq(st_dtype_parse(&t, st_dtype_name((st_dtype)i)), 0);
        ck_assert_int_eq(t, i);
        ck_assert_uint_gt(st_dtype_size(t), 0);
    }
    ck_assert_uint_eq(st_dtype_size(ST_BF16), 2);
    ck_assert_uint_eq(st_dtype_size(ST_F8_E4M3), 1);
    ck_assert_uint_eq(st_dtype_size(ST_I64), 8);
    ck_assert_int_eq(st_dtype_parse(&t, "f32"), MS_EINVALID);   /* names are case sensitive */
}
END_TEST

int main(void)
{
    Suite *s = suite_create("safetensors");
    TCase *tc = tcase_create("core");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, writer_output_parses_back_to_the_same_tensors);
    tcase_add_test(tc, writer_aligns_the_data_region_and_every_tensor);
    tcase_add_test(tc, writer_output_is_deterministic);
    tcase_add_test(tc, empty_writer_gives_an_empty_valid_file);
    tcase_add_test(tc, many_tensors_are_all_found_by_name);
    tcase_add_test(tc, parse_works_on_a_mapped_file);
    tcase_add_test(tc, parse_accepts_gaps_and_unsorted_entries);
    tcase_add_test(tc, header_only_checks_offsets_against_the_file_size);
    tcase_add_loop_test(tc, parse_refuses_corrupt_headers, 0, (int)(sizeof bad / sizeof bad[0]));
    tcase_add_loop_test(tc, parse_refuses_bad_header_sizes, 0, (int)(sizeof bad_size / sizeof bad_size[0]));
    tcase_add_test(tc, writer_refuses_bad_tensors);
    tcase_add_test(tc, writer_passes_sink_errors_up);
    tcase_add_test(tc, dtype_names_round_trip);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
