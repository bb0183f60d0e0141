/* test_gguf.c: the GGUF reader and writer (src/format/gguf*.c, ggml_types.c). */
#include <check.h>
#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/format.h"
#include "helpers/fixture.h"

/* ---------------------------------------------------------------- helpers */

typedef fixture_mem mem;   /* emitted files, in memory */

static void put_le(uint8_t *p, int width, uint64_t v)
{
    for (int i = 0; i < width; i++)
        p[i] = (uint8_t)(v >> 8 * i);
}

static uint64_t get_le(const uint8_t *p, int width)
{
    uint64_t v = 0;

    for (int i = 0; i < width; i++)
        v |= (uint64_t)p[i] << 8 * i;
    return v;
}

static mem emit(gguf_writer *w)
{
    mem m = { 0 };

    ck_assert_int_eq(gguf_writer_emit(w, fixture_mem_sink, &m), 0);
    ck_assert_uint_eq(m.len, gguf_writer_size(w));
    return m;
}

#define ck_assert_msg_has(sub) \
    ck_assert_msg(strstr(ms_err_msg(), (sub)) != NULL, "message '%s' lacks '%s'", ms_err_msg(), (sub))

static char *tmp;
static void setup(void) { tmp = fixture_tmpdir(); }
static void teardown(void) { fixture_rmrf(tmp); }

/* ---------------------------------------------------------------- type table */

/* Written out again here from ggml's block structs, so a typo in either table fails. */
static const struct { int id; const char *name; uint32_t be, bb; } want_types[] = {
    { 0, "F32", 1, 4 },           { 1, "F16", 1, 2 },           { 2, "Q4_0", 32, 18 },
    { 3, "Q4_1", 32, 20 },        { 6, "Q5_0", 32, 22 },        { 7, "Q5_1", 32, 24 },
    { 8, "Q8_0", 32, 34 },        { 9, "Q8_1", 32, 36 },        { 10, "Q2_K", 256, 84 },
    { 11, "Q3_K", 256, 110 },     { 12, "Q4_K", 256, 144 },     { 13, "Q5_K", 256, 176 },
    { 14, "Q6_K", 256, 210 },     { 15, "Q8_K", 256, 292 },     { 16, "IQ2_XXS", 256, 66 },
    { 17, "IQ2_XS", 256, 74 },    { 18, "IQ3_XXS", 256, 98 },   { 19, "IQ1_S", 256, 50 },
    { 20, "IQ4_NL", 32, 18 },     { 21, "IQ3_S", 256, 110 },    { 22, "IQ2_S", 256, 82 },
    { 23, "IQ4_XS", 256, 136 },   { 24, "I8", 1, 1 },           { 25, "I16", 1, 2 },
    { 26, "I32", 1, 4 },          { 27, "I64", 1, 8 },          { 28, "F64", 1, 8 },
    { 29, "IQ1_M", 256, 56 },     { 30, "BF16", 1, 2 },         { 34, "TQ1_0", 256, 54 },
    { 35, "TQ2_0", 256, 66 },     { 39, "MXFP4", 32, 17 },
};
#define N_TYPES (sizeof want_types / sizeof want_types[0])

START_TEST(ggml_type_table_matches_ggml)
{
    int known = 0, id;

    for (size_t i = 0; i < N_TYPES; i++) {
        uint32_t be = 0, bb = 0;

        ck_assert_str_eq(ggml_type_name(want_types[i].id), want_types[i].name);
        ck_assert_int_eq(ggml_type_info(want_types[i].id, &be, &bb), 0);
        ck_assert_uint_eq(be, want_types[i].be);
        ck_assert_uint_eq(bb, want_types[i].bb);
        ck_assert_int_eq(ggml_type_from_name(&id, want_types[i].name), 0);
        ck_assert_int_eq(id, want_types[i].id);
    }
    for (id = -1; id <= GGML_TYPE_COUNT + 1; id++)
        known += ggml_type_name(id) != NULL;
    ck_assert_int_eq(known, (int)N_TYPES);   /* no id outside the list has a name */
    ck_assert_int_eq(ggml_type_from_name(&id, "q4_k"), 0);
    ck_assert_int_eq(id, GGML_TYPE_Q4_K);
    ck_assert_int_eq(ggml_type_from_name(&id, "Q4_2"), MS_EINVALID);
    ck_assert_int_eq(id, -1);
    ck_assert_int_eq(ggml_type_check(4), MS_EINVALID);
    ck_assert_msg_has("type id 4");
    ck_assert_int_eq(ggml_type_check(99), MS_EINVALID);
    ck_assert_msg_has("type id 99 out of range");
    ck_assert_int_eq(ggml_type_check(-1), MS_EINVALID);
}
END_TEST

START_TEST(ggml_sizes_are_checked)
{
    uint64_t n, ne[4] = { 256, 3, 2, 1 };

    ck_assert_int_eq(ggml_row_nbytes(&n, GGML_TYPE_Q4_0, 64), 0);
    ck_assert_uint_eq(n, 36);
    ck_assert_int_eq(ggml_row_nbytes(&n, GGML_TYPE_Q4_0, 33), MS_EINVALID);
    ck_assert_msg_has("not a multiple of block size 32");
    ck_assert_int_eq(ggml_row_nbytes(&n, 5, 32), MS_EINVALID);
    ck_assert_int_eq(ggml_tensor_nbytes(&n, GGML_TYPE_Q6_K, 3, ne), 0);
    ck_assert_uint_eq(n, 210 * 6);
    ck_assert_int_eq(ggml_tensor_nbytes(&n, GGML_TYPE_F16, 0, ne), 0);   /* a scalar */
    ck_assert_uint_eq(n, 2);
    ne[0] = 0;
    ck_assert_int_eq(ggml_tensor_nbytes(&n, GGML_TYPE_F32, 2, ne), 0);
    ck_assert_uint_eq(n, 0);
    ne[0] = ne[1] = (uint64_t)1 << 62;
    ck_assert_int_eq(ggml_tensor_nbytes(&n, GGML_TYPE_F32, 2, ne), MS_EINVALID);
    ck_assert_msg_has("element count overflow");
    ne[0] = (uint64_t)1 << 62;
    ck_assert_int_eq(ggml_tensor_nbytes(&n, GGML_TYPE_F32, 1, ne), MS_EINVALID);   /* 2^64 bytes */
    ck_assert_int_eq(ggml_tensor_nbytes(&n, GGML_TYPE_F32, 5, ne), MS_EINVALID);
    ck_assert_msg_has("n_dims 5 > 4");
}
END_TEST

/* ---------------------------------------------------------------- the rich fixture */

static const char *const strs[] = { "hello", "", "w\xc3\xb6rld", "\xe2\x96\x81the" };
static const int32_t i32s[] = { -1, 0, 7, 2147483647 };
static const uint8_t bools[] = { 1, 0, 1 };
static const double f64s[] = { 0.5, -2.25 };

/* Nested value: array of 2 arrays: [u16 1, 2], [string "ab"]. */
static size_t nested_value(uint8_t *b)
{
    size_t p = 0;

    put_le(b + p, 4, GGUF_TYPE_ARRAY), p += 4;
    put_le(b + p, 8, 2), p += 8;
    put_le(b + p, 4, GGUF_TYPE_UINT16), p += 4;
    put_le(b + p, 8, 2), p += 8;
    put_le(b + p, 2, 1), p += 2;
    put_le(b + p, 2, 2), p += 2;
    put_le(b + p, 4, GGUF_TYPE_STRING), p += 4;
    put_le(b + p, 8, 1), p += 8;
    put_le(b + p, 8, 2), p += 8;
    memcpy(b + p, "ab", 2), p += 2;
    return p;
}

static uint8_t tdata[N_TYPES][4096];

/* One small tensor per ggml type: 2 rows of one block (3 elements for plain types). */
static void tensor_shape(size_t i, uint64_t ne[2], uint64_t *nbytes)
{
    ne[0] = want_types[i].be == 1 ? 3 : want_types[i].be;
    ne[1] = 2;
    *nbytes = (ne[0] / want_types[i].be) * want_types[i].bb * 2;
}

static gguf_writer *rich_writer(uint32_t alignment)
{
    gguf_writer *w;
    uint8_t nested[64];
    size_t nlen = nested_value(nested);

    ck_assert_int_eq(gguf_writer_new(&w, 3, alignment), 0);
    ck_assert_int_eq(gguf_writer_set_u8(w, "v.u8", 200), 0);
    ck_assert_int_eq(gguf_writer_set_i8(w, "v.i8", -100), 0);
    ck_assert_int_eq(gguf_writer_set_u16(w, "v.u16", 60000), 0);
    ck_assert_int_eq(gguf_writer_set_i16(w, "v.i16", -30000), 0);
    ck_assert_int_eq(gguf_writer_set_u32(w, "v.u32", 4000000000u), 0);
    ck_assert_int_eq(gguf_writer_set_i32(w, "v.i32", -2000000000), 0);
    ck_assert_int_eq(gguf_writer_set_f32(w, "v.f32", 0.1f), 0);
    ck_assert_int_eq(gguf_writer_set_bool(w, "v.bool", 7), 0);
    ck_assert_int_eq(gguf_writer_set_str(w, "v.str", "a\0b", 3), 0);
    ck_assert_int_eq(gguf_writer_set_u64(w, "v.u64", UINT64_MAX), 0);
    ck_assert_int_eq(gguf_writer_set_i64(w, "v.i64", INT64_MIN), 0);
    ck_assert_int_eq(gguf_writer_set_f64(w, "v.f64", 1e300), 0);
    ck_assert_int_eq(gguf_writer_set_arr_str(w, "a.str", strs, NULL, 4), 0);
    ck_assert_int_eq(gguf_writer_set_arr(w, "a.i32", GGUF_TYPE_INT32, i32s, 4), 0);
    ck_assert_int_eq(gguf_writer_set_arr(w, "a.bool", GGUF_TYPE_BOOL, bools, 3), 0);
    ck_assert_int_eq(gguf_writer_set_arr(w, "a.f64", GGUF_TYPE_FLOAT64, f64s, 2), 0);
    ck_assert_int_eq(gguf_writer_set_arr(w, "a.empty", GGUF_TYPE_UINT8, NULL, 0), 0);
    ck_assert_int_eq(gguf_writer_set_raw(w, "a.nested", GGUF_TYPE_ARRAY, nested, nlen), 0);
    for (size_t i = 0; i < N_TYPES; i++) {
        char name[32];
        uint64_t ne[2], nbytes;

        tensor_shape(i, ne, &nbytes);
        ck_assert_uint_le(nbytes, sizeof tdata[i]);
        for (uint64_t k = 0; k < nbytes; k++)
            tdata[i][k] = (uint8_t)(k * 31 + i * 7 + 1);
        snprintf(name, sizeof name, "t.%s", want_types[i].name);
        ck_assert_int_eq(gguf_writer_add_tensor(w, name, want_types[i].id, 2, ne, tdata[i], nbytes), 0);
    }
    return w;
}

static void check_rich_kv(const gguf_file *g)
{
    uint64_t u, count;
    int64_t s;
    double d;
    int b;
    const char *str;
    size_t len;
    uint32_t et;
    const uint8_t *data;

    ck_assert_int_eq(gguf_get_uint(g, "v.u8", &u), 0); ck_assert_uint_eq(u, 200);
    ck_assert_int_eq(gguf_get_int(g, "v.i8", &s), 0); ck_assert_int_eq(s, -100);
    ck_assert_int_eq(gguf_get_uint(g, "v.u16", &u), 0); ck_assert_uint_eq(u, 60000);
    ck_assert_int_eq(gguf_get_int(g, "v.i16", &s), 0); ck_assert_int_eq(s, -30000);
    ck_assert_int_eq(gguf_get_uint(g, "v.u32", &u), 0); ck_assert_uint_eq(u, 4000000000u);
    ck_assert_int_eq(gguf_get_int(g, "v.u32", &s), 0); ck_assert_int_eq(s, 4000000000);
    ck_assert_int_eq(gguf_get_int(g, "v.i32", &s), 0); ck_assert_int_eq(s, -2000000000);
    ck_assert_int_eq(gguf_get_float(g, "v.f32", &d), 0); ck_assert(d == (double)0.1f);
    ck_assert_int_eq(gguf_get_bool(g, "v.bool", &b), 0); ck_assert_int_eq(b, 1);
    ck_assert_int_eq(gguf_get_str(g, "v.str", &str, &len), 0);
    ck_assert_uint_eq(len, 3);
    ck_assert(memcmp(str, "a\0b", 3) == 0);
    ck_assert_int_eq(gguf_get_uint(g, "v.u64", &u), 0); ck_assert(u == UINT64_MAX);
    ck_assert_int_eq(gguf_get_int(g, "v.i64", &s), 0); ck_assert(s == INT64_MIN);
    ck_assert_int_eq(gguf_get_float(g, "v.f64", &d), 0); ck_assert(d == 1e300);
    ck_assert_int_eq(gguf_get_arr(g, "a.str", &et, &count), 0);
    ck_assert_uint_eq(et, GGUF_TYPE_STRING); ck_assert_uint_eq(count, 4);
    for (uint64_t i = 0; i < 4; i++) {
        ck_assert_int_eq(gguf_arr_str(g, "a.str", i, &str, &len), 0);
        ck_assert_uint_eq(len, strlen(strs[i]));
        ck_assert(memcmp(str, strs[i], len) == 0);
    }
    ck_assert_int_eq(gguf_arr_data(g, "a.i32", &et, &data, &count), 0);
    ck_assert_uint_eq(et, GGUF_TYPE_INT32); ck_assert_uint_eq(count, 4);
    ck_assert(memcmp(data, i32s, sizeof i32s) == 0);
    for (uint64_t i = 0; i < 4; i++) {
        ck_assert_int_eq(gguf_arr_int(g, "a.i32", i, &s), 0);
        ck_assert_int_eq(s, i32s[i]);
    }
    ck_assert_int_eq(gguf_arr_data(g, "a.bool", &et, &data, &count), 0);
    ck_assert_uint_eq(count, 3); ck_assert(memcmp(data, bools, 3) == 0);
    ck_assert_int_eq(gguf_arr_float(g, "a.f64", 1, &d), 0); ck_assert(d == -2.25);
    ck_assert_int_eq(gguf_get_arr(g, "a.empty", &et, &count), 0);
    ck_assert_uint_eq(et, GGUF_TYPE_UINT8); ck_assert_uint_eq(count, 0);
    ck_assert_int_eq(gguf_get_arr(g, "a.nested", &et, &count), 0);
    ck_assert_uint_eq(et, GGUF_TYPE_ARRAY); ck_assert_uint_eq(count, 2);
}

static void check_rich_tensors(const gguf_file *g, int header_only)
{
    ck_assert_uint_eq(gguf_tensor_count(g), N_TYPES);
    for (size_t i = 0; i < N_TYPES; i++) {
        const gguf_tensor *t = gguf_tensor_at(g, i);
        char name[32];
        uint64_t ne[2], nbytes;

        tensor_shape(i, ne, &nbytes);
        snprintf(name, sizeof name, "t.%s", want_types[i].name);
        ck_assert_str_eq(t->name, name);
        ck_assert_ptr_eq(gguf_tensor_find(g, name), t);
        ck_assert_int_eq(t->n_dims, 2);
        ck_assert_uint_eq(t->ne[0], ne[0]); ck_assert_uint_eq(t->ne[1], ne[1]);
        ck_assert_uint_eq(t->ne[2], 1); ck_assert_uint_eq(t->ne[3], 1);
        ck_assert_int_eq(t->type, want_types[i].id);
        ck_assert_uint_eq(t->nbytes, nbytes);
        ck_assert_uint_eq(t->offset % gguf_alignment(g), 0);
        if (header_only) {
            ck_assert_ptr_null(t->data);
        } else {
            ck_assert_ptr_eq(t->data, gguf_bytes(g) + gguf_data_offset(g) + t->offset);
            ck_assert(memcmp(t->data, tdata[i], nbytes) == 0);
        }
    }
    ck_assert_ptr_null(gguf_tensor_at(g, N_TYPES));
    ck_assert_ptr_null(gguf_tensor_find(g, "t.Q4_2"));
}

/* Padding after the header and after each tensor is zeros, and tensors follow in order. */
static void check_rich_padding(const gguf_file *g)
{
    const uint8_t *b = gguf_bytes(g);
    uint64_t pos = gguf_header_nbytes(g);

    for (size_t i = 0; i < gguf_tensor_count(g); i++) {
        const gguf_tensor *t = gguf_tensor_at(g, i);

        for (; pos < gguf_data_offset(g) + t->offset; pos++)
            ck_assert_msg(b[pos] == 0, "padding byte at %llu is %u", (unsigned long long)pos, b[pos]);
        ck_assert_uint_eq(pos, gguf_data_offset(g) + t->offset);
        pos += t->nbytes;
    }
    for (; pos < gguf_file_size(g); pos++)
        ck_assert(b[pos] == 0);
    ck_assert_uint_eq(gguf_file_size(g) % gguf_alignment(g), 0);
}

static const uint32_t alignments[] = { 32, 64, 128 };

START_TEST(gguf_roundtrips_every_type_and_value)
{
    uint32_t a = alignments[_i];
    gguf_writer *w = rich_writer(a);
    char *path = ms_path_join(tmp, "rich.gguf");
    gguf_file *g = NULL;
    uint64_t u;

    ck_assert_int_eq(gguf_writer_write_file(w, path), 0);
    ck_assert_int_eq(gguf_open(&g, path), 0);
    ck_assert_uint_eq(gguf_version(g), 3);
    ck_assert_uint_eq(gguf_alignment(g), a);
    ck_assert_uint_eq(gguf_file_size(g), gguf_writer_size(w));
    ck_assert_uint_eq(gguf_data_offset(g), gguf_writer_data_offset(w));
    ck_assert_uint_eq(gguf_data_offset(g) % a, 0);
    ck_assert_uint_lt(gguf_data_offset(g) - gguf_header_nbytes(g), a);
    /* alignment != 32 adds general.alignment first */
    ck_assert_uint_eq(gguf_kv_count(g), a == 32 ? 18 : 19);
    if (a != 32) {
        ck_assert_str_eq(gguf_kv_key(g, 0), "general.alignment");
        ck_assert_int_eq(gguf_get_uint(g, "general.alignment", &u), 0);
        ck_assert_uint_eq(u, a);
    } else {
        ck_assert_int_eq(gguf_kv_find(g, "general.alignment"), -1);
    }
    ck_assert_str_eq(gguf_kv_key(g, a == 32 ? 0 : 1), "v.u8");
    check_rich_kv(g);
    check_rich_tensors(g, 0);
    check_rich_padding(g);
    gguf_close(g);
    gguf_writer_free(w);
    free(path);
}
END_TEST

START_TEST(gguf_header_only_reads_metadata_without_data)
{
    gguf_writer *w = rich_writer(64);
    mem m = emit(w);
    gguf_file *g = NULL, *h = NULL;

    ck_assert_int_eq(gguf_open_buf(&g, m.p, m.len, 0, "rich"), 0);
    /* exactly the bytes before the data section, as import stores them (MT_GGUF_META) */
    ck_assert_int_eq(gguf_open_buf(&h, m.p, gguf_data_offset(g), GGUF_HEADER_ONLY, "meta"), 0);
    check_rich_kv(h);
    check_rich_tensors(h, 1);
    ck_assert_uint_eq(gguf_data_offset(h), gguf_data_offset(g));
    gguf_close(h);
    ck_assert_int_eq(gguf_open_buf(&h, m.p, gguf_header_nbytes(g), GGUF_HEADER_ONLY, "meta"), 0);
    gguf_close(h);
    ck_assert_int_eq(gguf_open_buf(&h, m.p, gguf_header_nbytes(g) - 1, GGUF_HEADER_ONLY, "meta"), MS_EINVALID);
    ck_assert_ptr_null(h);
    ck_assert_msg_has("meta: ");
    ck_assert_msg_has("truncated");
    /* without the flag the same bytes are refused: the data is missing */
    ck_assert_int_eq(gguf_open_buf(&h, m.p, gguf_data_offset(g), 0, "meta"), MS_EINVALID);
    ck_assert_msg_has("data extends past end of file");
    gguf_close(g);
    gguf_writer_free(w);
    free(m.p);
}
END_TEST

START_TEST(gguf_kv_value_copies_verbatim)
{
    gguf_writer *w = rich_writer(32), *w2;
    mem m = emit(w), m2;
    gguf_file *g = NULL;

    ck_assert_int_eq(gguf_open_buf(&g, m.p, m.len, 0, "rich"), 0);
    /* rebuild the file from the reader: keys via set_raw, tensors by pointer: same bytes */
    ck_assert_int_eq(gguf_writer_new(&w2, gguf_version(g), gguf_alignment(g)), 0);
    for (size_t i = 0; i < gguf_kv_count(g); i++) {
        const uint8_t *v;
        size_t len;

        gguf_kv_value(g, i, &v, &len);
        ck_assert_int_eq(gguf_writer_set_raw(w2, gguf_kv_key(g, i), gguf_kv_type(g, i), v, len), 0);
    }
    for (size_t i = 0; i < gguf_tensor_count(g); i++) {
        const gguf_tensor *t = gguf_tensor_at(g, i);

        ck_assert_int_eq(gguf_writer_add_tensor(w2, t->name, t->type, t->n_dims, t->ne, t->data, t->nbytes), 0);
    }
    m2 = emit(w2);
    ck_assert_uint_eq(m2.len, m.len);
    ck_assert(memcmp(m.p, m2.p, m.len) == 0);
    gguf_close(g);
    gguf_writer_free(w);
    gguf_writer_free(w2);
    free(m.p);
    free(m2.p);
}
END_TEST

START_TEST(gguf_getters_name_the_key)
{
    gguf_writer *w = rich_writer(32);
    mem m = emit(w);
    gguf_file *g = NULL;
    const char *s;
    size_t len;
    uint64_t u;
    int64_t i;
    double d;
    int b;
    uint32_t et;
    const uint8_t *data;

    ck_assert_int_eq(gguf_open_buf(&g, m.p, m.len, 0, "rich.gguf"), 0);
    ck_assert_int_eq(gguf_get_str(g, "nope", &s, &len), MS_ENOTFOUND);
    ck_assert_msg_has("rich.gguf: kv 'nope' not found");
    ck_assert_int_eq(gguf_get_str(g, "v.u8", &s, &len), MS_EINVALID);
    ck_assert_msg_has("kv 'v.u8' has type u8, expected string");
    ck_assert_int_eq(gguf_get_uint(g, "v.i8", &u), MS_EINVALID);
    ck_assert_msg_has("value -100 is negative");
    ck_assert_int_eq(gguf_get_int(g, "v.u64", &i), MS_EINVALID);
    ck_assert_msg_has("exceeds INT64_MAX");
    ck_assert_int_eq(gguf_get_uint(g, "v.f32", &u), MS_EINVALID);
    ck_assert_int_eq(gguf_get_float(g, "v.u8", &d), MS_EINVALID);
    ck_assert_int_eq(gguf_get_bool(g, "v.u8", &b), MS_EINVALID);
    ck_assert_int_eq(gguf_get_arr(g, "v.u8", &et, &u), MS_EINVALID);
    ck_assert_msg_has("expected array");
    ck_assert_int_eq(gguf_arr_data(g, "a.str", &et, &data, &u), MS_EINVALID);
    ck_assert_ptr_null(data);
    ck_assert_int_eq(gguf_arr_str(g, "a.str", 4, &s, &len), MS_EINVALID);
    ck_assert_msg_has("index 4 past array count 4");
    ck_assert_int_eq(gguf_arr_str(g, "a.i32", 0, &s, &len), MS_EINVALID);
    ck_assert_int_eq(gguf_arr_int(g, "a.f64", 0, &i), MS_EINVALID);
    ck_assert_int_eq(gguf_arr_float(g, "a.i32", 0, &d), MS_EINVALID);
    ck_assert_ptr_null(gguf_kv_key(g, 1000));
    gguf_close(g);
    gguf_writer_free(w);
    free(m.p);
}
END_TEST

START_TEST(gguf_metadata_as_json)
{
    gguf_writer *w = rich_writer(32);
    mem m = emit(w);
    gguf_file *g = NULL;
    json_t *j, *want, *all;
    uint8_t bad[3] = { 'a', 0xff, 'b' };

    ck_assert_int_eq(gguf_open_buf(&g, m.p, m.len, 0, "rich"), 0);
    j = gguf_kv_to_json(g, (size_t)gguf_kv_find(g, "a.nested"));
    want = json_loads("[[1, 2], [\"ab\"]]", 0, NULL);
    ck_assert(json_equal(j, want));
    json_decref(j); json_decref(want);
    j = gguf_kv_to_json(g, (size_t)gguf_kv_find(g, "a.str"));
    want = json_loads("[\"hello\", \"\", \"w\\u00f6rld\", \"\\u2581the\"]", 0, NULL);
    ck_assert(json_equal(j, want));
    json_decref(j); json_decref(want);
    all = gguf_meta_to_json(g);
    ck_assert_uint_eq(json_object_size(all), gguf_kv_count(g));
    ck_assert_str_eq(json_string_value(json_object_get(all, "v.u64")), "18446744073709551615");
    ck_assert(json_integer_value(json_object_get(all, "v.i64")) == INT64_MIN);
    ck_assert(json_is_true(json_object_get(all, "v.bool")));
    ck_assert(json_real_value(json_object_get(all, "v.f64")) == 1e300);
    ck_assert_uint_eq(json_string_length(json_object_get(all, "v.str")), 3);
    json_decref(all);
    gguf_close(g);
    gguf_writer_free(w);
    free(m.p);

    /* bytes that are not UTF-8 become U+FFFD instead of failing */
    ck_assert_int_eq(gguf_writer_new(&w, 3, 0), 0);
    ck_assert_int_eq(gguf_writer_set_str(w, "s", (const char *)bad, 3), 0);
    ck_assert_int_eq(gguf_writer_set_f32(w, "nan", NAN), 0);
    m = emit(w);
    ck_assert_int_eq(gguf_open_buf(&g, m.p, m.len, 0, "bad"), 0);
    ck_assert_uint_eq(m.len, gguf_header_nbytes(g));   /* no tensors: no padding after the header */
    j = gguf_kv_to_json(g, 0);
    ck_assert_str_eq(json_string_value(j), "a\xef\xbf\xbd" "b");
    json_decref(j);
    j = gguf_kv_to_json(g, 1);
    ck_assert_str_eq(json_string_value(j), "nan");
    json_decref(j);
    gguf_close(g);
    gguf_writer_free(w);
    free(m.p);
}
END_TEST

START_TEST(gguf_writer_refuses_bad_input)
{
    gguf_writer *w;
    uint64_t ne[2] = { 32, 2 };
    static uint8_t data[256];
    uint8_t raw[32];
    float f = 1;

    ck_assert_int_eq(gguf_writer_new(&w, 1, 32), MS_EINVALID);
    ck_assert_ptr_null(w);
    ck_assert_int_eq(gguf_writer_new(&w, 3, 3), MS_EINVALID);
    ck_assert_msg_has("alignment 3");
    ck_assert_int_eq(gguf_writer_new(&w, 2, 64), 0);
    ck_assert_int_eq(gguf_writer_set_u32(w, "k", 1), 0);
    ck_assert_int_eq(gguf_writer_set_str(w, "k", "x", 1), MS_EINVALID);
    ck_assert_msg_has("duplicate key 'k'");
    ck_assert_int_eq(gguf_writer_set_u32(w, "", 1), MS_EINVALID);
    ck_assert_int_eq(gguf_writer_set_u32(w, "general.alignment", 32), MS_EINVALID);
    ck_assert_int_eq(gguf_writer_set_u64(w, "general.alignment", 64), MS_EINVALID);
    ck_assert_int_eq(gguf_writer_set_arr(w, "a", GGUF_TYPE_STRING, data, 1), MS_EINVALID);
    ck_assert_int_eq(gguf_writer_set_arr(w, "a", GGUF_TYPE_BOOL, (const uint8_t[]){ 2 }, 1), MS_EINVALID);
    memset(raw, 0, sizeof raw);
    ck_assert_int_eq(gguf_writer_set_raw(w, "r", GGUF_TYPE_UINT32, raw, 5), MS_EINVALID);
    ck_assert_msg_has("1 trailing bytes");
    ck_assert_int_eq(gguf_writer_set_raw(w, "r", 13, raw, 4), MS_EINVALID);
    ck_assert_msg_has("value type 13 out of range");
    put_le(raw, 4, GGUF_TYPE_UINT8), put_le(raw + 4, 8, 100);
    ck_assert_int_eq(gguf_writer_set_raw(w, "r", GGUF_TYPE_ARRAY, raw, 20), MS_EINVALID);
    ck_assert_msg_has("array count 100 exceeds remaining 8 bytes");
    ck_assert_int_eq(gguf_writer_add_tensor(w, "t", GGML_TYPE_Q8_0, 2, ne, data, 68), 0);
    ck_assert_int_eq(gguf_writer_add_tensor(w, "t", GGML_TYPE_Q8_0, 2, ne, data, 68), MS_EINVALID);
    ck_assert_msg_has("duplicate tensor name 't'");
    ck_assert_int_eq(gguf_writer_add_tensor(w, "u", GGML_TYPE_Q8_0, 2, ne, data, 67), MS_EINVALID);
    ck_assert_msg_has("67 bytes given");
    ne[0] = 33;
    ck_assert_int_eq(gguf_writer_add_tensor(w, "u", GGML_TYPE_Q8_0, 2, ne, data, 68), MS_EINVALID);
    ck_assert_msg_has("not a multiple of block size 32");
    ck_assert_int_eq(gguf_writer_add_tensor(w, "u", 4, 1, ne, data, 4), MS_EINVALID);
    ck_assert_int_eq(gguf_writer_add_tensor(w, "u", GGML_TYPE_F32, 5, ne, data, 4), MS_EINVALID);
    ck_assert_int_eq(gguf_writer_add_tensor(w, "0123456789012345678901234567890123456789012345678901234567890123",
                                            GGML_TYPE_F32, 0, ne, &f, 4), MS_EINVALID);
    ck_assert_msg_has("llama.cpp");
    gguf_writer_free(w);
}
END_TEST

/* ---------------------------------------------------------------- corrupt inputs */

/* The tiny file, field offsets written out by hand (the layout is the format's, not ours):
 *   0 magic  4 version  8 n_tensors=2  16 n_kv=4
 *   24 kv "k1" string "hi": key len 24, key 32, type 34, str len 38, bytes 46..47
 *   48 kv "k2" array i32 [1, 2]: key 48, type 58, elem type 62, count 66, data 74..81
 *   82 kv "general.alignment" u32 32: key 82, type 107, value 111
 *   115 kv "bb" bool 1: key 115, type 125, value 129
 *   130 tensor "t0" F32 ne {8, 1}: name 130, n_dims 140, ne 144 152, type 160, offset 164
 *   172 tensor "t1" F32 ne {8}: name 172, n_dims 182, ne 186, type 194, offset 198
 *   206 header end; data at 224: t0 224..255, t1 256..287 */
enum { TINY_SIZE = 288 };
static float tiny_t0[8] = { 1, 2, 3, 4, 5, 6, 7, 8 }, tiny_t1[8] = { -1, -2, -3, -4, -5, -6, -7, -8 };

static mem tiny(void)
{
    gguf_writer *w;
    uint64_t ne[2] = { 8, 1 };
    mem m;

    ck_assert_int_eq(gguf_writer_new(&w, 3, 32), 0);
    ck_assert_int_eq(gguf_writer_set_str(w, "k1", "hi", 2), 0);
    ck_assert_int_eq(gguf_writer_set_arr(w, "k2", GGUF_TYPE_INT32, (const int32_t[]){ 1, 2 }, 2), 0);
    ck_assert_int_eq(gguf_writer_set_u32(w, "general.alignment", 32), 0);
    ck_assert_int_eq(gguf_writer_set_bool(w, "bb", 1), 0);
    ck_assert_int_eq(gguf_writer_add_tensor(w, "t0", GGML_TYPE_F32, 2, ne, tiny_t0, 32), 0);
    ck_assert_int_eq(gguf_writer_add_tensor(w, "t1", GGML_TYPE_F32, 1, ne, tiny_t1, 32), 0);
    m = emit(w);
    gguf_writer_free(w);
    ck_assert_uint_eq(m.len, TINY_SIZE);
    return m;
}

START_TEST(gguf_tiny_layout_is_the_format)
{
    mem m = tiny();
    gguf_file *g = NULL;

    ck_assert_uint_eq(get_le(m.p, 4), GGUF_MAGIC);
    ck_assert(memcmp(m.p, "GGUF", 4) == 0);
    ck_assert_uint_eq(get_le(m.p + 8, 8), 2);
    ck_assert_uint_eq(get_le(m.p + 16, 8), 4);
    ck_assert_uint_eq(get_le(m.p + 38, 8), 2);
    ck_assert_uint_eq(get_le(m.p + 66, 8), 2);
    ck_assert_uint_eq(get_le(m.p + 111, 4), 32);
    ck_assert_uint_eq(m.p[129], 1);
    ck_assert_uint_eq(get_le(m.p + 140, 4), 2);
    ck_assert_uint_eq(get_le(m.p + 152, 8), 1);
    ck_assert_uint_eq(get_le(m.p + 198, 8), 32);
    ck_assert(memcmp(m.p + 256, tiny_t1, 32) == 0);
    ck_assert_int_eq(gguf_open_buf(&g, m.p, m.len, 0, "tiny"), 0);
    ck_assert_uint_eq(gguf_header_nbytes(g), 206);
    ck_assert_uint_eq(gguf_data_offset(g), 224);
    gguf_close(g);
    free(m.p);
}
END_TEST

static const struct {
    size_t off;
    int width;
    uint64_t val;
    size_t off2;   /* a second patch when nonzero */
    uint64_t val2;
    const char *expect;
} bad[] = {
    { 0, 4, 0x46554746, 0, 0, "tiny.gguf: bad magic 0x46554746" },
    { 4, 4, 1, 0, 0, "unsupported version 1" },
    { 4, 4, 99, 0, 0, "unsupported version 99" },
    { 4, 4, 0x03000000, 0, 0, "big-endian" },
    { 8, 8, UINT64_MAX, 0, 0, "n_tensors 18446744073709551615 exceeds remaining" },
    { 8, 8, 11, 0, 0, "n_tensors 11 exceeds remaining" },
    { 16, 8, UINT64_MAX, 0, 0, "n_kv 18446744073709551615 exceeds remaining" },
    { 16, 8, 5, 0, 0, "tensor #0: tensor name length 281474976710656 exceeds remaining" },
    { 24, 8, (uint64_t)1 << 62, 0, 0, "kv #0: key length 4611686018427387904 exceeds remaining" },
    { 24, 8, 0, 0, 0, "kv #0: empty name" },
    { 32, 1, 0, 0, 0, "kv #0: name contains a NUL byte" },
    { 34, 4, 13, 0, 0, "kv 'k1': value type 13 out of range" },
    { 38, 8, UINT64_MAX, 0, 0, "kv 'k1': string length 18446744073709551615 exceeds remaining" },
    { 62, 4, 13, 0, 0, "kv 'k2': array element type 13 out of range" },
    { 66, 8, (uint64_t)1 << 63, 0, 0, "kv 'k2': array count 9223372036854775808 exceeds remaining" },
    { 66, 8, 100, 0, 0, "kv 'k2': array count 100 exceeds remaining 214 bytes" },
    { 62, 4, GGUF_TYPE_ARRAY, 0, 0, "kv 'k2': element 0: array count" },
    { 57, 1, '1', 0, 0, "duplicate key 'k1'" },
    { 111, 4, 0, 0, 0, "kv 'general.alignment' 0 is not a nonzero power of two" },
    { 111, 4, 3, 0, 0, "kv 'general.alignment' 3 is not a nonzero power of two" },
    { 107, 4, GGUF_TYPE_INT32, 0, 0, "kv 'general.alignment' has type i32, expected u32" },
    { 129, 1, 2, 0, 0, "kv 'bb': bool value 2 is not 0 or 1" },
    { 130, 8, 1000, 0, 0, "tensor #0: tensor name length 1000 exceeds remaining" },
    { 140, 4, 5, 0, 0, "tensor 't0': n_dims 5 > 4" },
    { 160, 4, 99, 0, 0, "tensor 't0': type id 99 out of range" },
    { 160, 4, 0x80000000u, 0, 0, "tensor 't0': type id 2147483648 out of range" },
    { 160, 4, 4, 0, 0, "tensor 't0': type id 4 is a removed" },
    { 160, 4, 5, 0, 0, "tensor 't0': type id 5 is a removed" },
    { 160, 4, GGML_TYPE_Q4_0, 0, 0, "tensor 't0': ne[0]: row of 8 elements is not a multiple of block size 32" },
    { 144, 8, (uint64_t)1 << 62, 152, (uint64_t)1 << 62, "tensor 't0': element count overflow" },
    { 144, 8, (uint64_t)1 << 63, 0, 0, "tensor 't0': ne[0] 9223372036854775808 exceeds INT64_MAX" },
    { 144, 8, 16, 0, 0, "tensor 't1' (offset 32) overlaps tensor 't0' (offset 0 + size 64)" },
    { 164, 8, 4, 0, 0, "tensor 't0': offset 4 is not a multiple of alignment 32" },
    { 198, 8, 64, 0, 0, "tensor 't1': data extends past end of file (offset 288 + size 32 > 288)" },
    { 198, 8, 0, 0, 0, "overlaps tensor" },
    { 198, 8, UINT64_MAX - 31, 0, 0, "tensor 't1': offset 18446744073709551584 + size 32 overflows" },
    { 181, 1, '0', 0, 0, "duplicate tensor name 't0'" },
};

START_TEST(gguf_refuses_corrupt_input)
{
    mem m = tiny();
    char *path;
    gguf_file *g = (gguf_file *)&m;

    put_le(m.p + bad[_i].off, bad[_i].width, bad[_i].val);
    if (bad[_i].off2)
        put_le(m.p + bad[_i].off2, 8, bad[_i].val2);
    path = fixture_write(tmp, "tiny.gguf", m.p, m.len);
    ck_assert_int_eq(gguf_open(&g, path), MS_EINVALID);
    ck_assert_ptr_null(g);
    ck_assert_msg_has(bad[_i].expect);
    ck_assert_msg(strncmp(ms_err_msg(), path, strlen(path)) == 0, "'%s' does not start with the path", ms_err_msg());
    free(path);
    free(m.p);
}
END_TEST

START_TEST(gguf_refuses_every_truncation)
{
    mem m = tiny();
    gguf_file *g;

    for (size_t len = 0; len < m.len; len++) {
        /* a copy of exactly len bytes, so ASan sees any read past it */
        uint8_t *b = len ? malloc(len) : NULL;

        if (len)
            memcpy(b, m.p, len);
        ck_assert_int_eq(gguf_open_buf(&g, b, len, 0, "cut"), MS_EINVALID);
        ck_assert_ptr_null(g);
        ck_assert_msg_has("cut: ");
        if (len >= 206)
            ck_assert_msg_has("data extends past end of file");
        ck_assert_int_eq(gguf_open_buf(&g, b, len, GGUF_HEADER_ONLY, "cut"), len < 206 ? MS_EINVALID : 0);
        gguf_close(g);
        free(b);
    }
    free(m.p);
}
END_TEST

START_TEST(gguf_open_reports_missing_and_empty_files)
{
    gguf_file *g;
    char *path = ms_path_join(tmp, "absent.gguf");

    ck_assert_int_eq(gguf_open(&g, path), MS_ENOTFOUND);
    ck_assert_ptr_null(g);
    free(path);
    path = fixture_write(tmp, "empty.gguf", "", 0);
    ck_assert_int_eq(gguf_open(&g, path), MS_EINVALID);
    ck_assert_msg_has("truncated: magic");
    free(path);
}
END_TEST

/* Arrays nested past GGUF_MAX_DEPTH are refused before the recursion can exhaust the stack. */
START_TEST(gguf_refuses_deep_nesting)
{
    uint8_t raw[12 * (GGUF_MAX_DEPTH + 2)];
    gguf_writer *w;
    size_t n = 0;

    for (int d = 0; d <= GGUF_MAX_DEPTH; d++, n += 12) {
        put_le(raw + n, 4, d == GGUF_MAX_DEPTH ? GGUF_TYPE_UINT8 : GGUF_TYPE_ARRAY);
        put_le(raw + n + 4, 8, d == GGUF_MAX_DEPTH ? 0 : 1);
    }
    ck_assert_int_eq(gguf_writer_new(&w, 3, 0), 0);
    ck_assert_int_eq(gguf_writer_set_raw(w, "deep", GGUF_TYPE_ARRAY, raw, n), MS_EINVALID);
    ck_assert_msg_has("nested deeper than");
    /* one level less is fine */
    ck_assert_int_eq(gguf_writer_set_raw(w, "ok", GGUF_TYPE_ARRAY, raw + 12, n - 12), 0);
    gguf_writer_free(w);
}
END_TEST

/* ---------------------------------------------------------------- real models */

static void check_model(const char *path)
{
    gguf_file *g = NULL;
    gguf_writer *w = NULL;
    uint32_t et;
    uint64_t count;
    json_t *j;
    mem m = { 0 };

    ck_assert_msg(gguf_open(&g, path) == 0, "%s", ms_err_msg());
    ck_assert_msg(gguf_tensor_count(g) > 0 || gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &count) == 0,
                  "%s: no tensors and no vocab", path);
    if (gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &count) == 0) {
        const char *s;
        size_t len;

        ck_assert_uint_eq(et, GGUF_TYPE_STRING);
        for (uint64_t i = 0; i < count; i++)
            ck_assert_int_eq(gguf_arr_str(g, "tokenizer.ggml.tokens", i, &s, &len), 0);
    }
    ck_assert_ptr_nonnull(j = gguf_meta_to_json(g));
    json_decref(j);
    /* a llama.cpp-written file comes back byte for byte from our writer */
    ck_assert_int_eq(gguf_writer_new(&w, gguf_version(g), gguf_alignment(g)), 0);
    for (size_t i = 0; i < gguf_kv_count(g); i++) {
        const uint8_t *v;
        size_t len;

        gguf_kv_value(g, i, &v, &len);
        ck_assert_int_eq(gguf_writer_set_raw(w, gguf_kv_key(g, i), gguf_kv_type(g, i), v, len), 0);
    }
    for (size_t i = 0; i < gguf_tensor_count(g); i++) {
        const gguf_tensor *t = gguf_tensor_at(g, i);

        ck_assert_ptr_nonnull(ggml_type_name(t->type));
        ck_assert_int_eq(gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, t->nbytes), 0);
    }
    ck_assert_int_eq(gguf_writer_emit(w, fixture_mem_sink, &m), 0);
    ck_assert_msg(m.len == gguf_file_size(g) && memcmp(m.p, gguf_bytes(g), m.len) == 0,
                  "%s: rewritten file differs (%zu vs %llu bytes)", path, m.len,
                  (unsigned long long)gguf_file_size(g));
    printf("test_gguf: %s: v%u, %zu kv, %zu tensors, rewritten byte for byte\n", path, gguf_version(g),
           gguf_kv_count(g), gguf_tensor_count(g));
    free(m.p);
    gguf_writer_free(w);
    gguf_close(g);
}

static int walk_models(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;

    if (!d)
        return 0;
    while ((e = readdir(d))) {
        char *p;
        size_t len = strlen(e->d_name);

        if (e->d_name[0] == '.')
            continue;
        p = ms_path_join(dir, e->d_name);
        if (ms_is_dir(p))
            n += walk_models(p);
        else if (len > 5 && strcmp(e->d_name + len - 5, ".gguf") == 0 && (check_model(p), 1))
            n++;
        free(p);
    }
    closedir(d);
    return n;
}

START_TEST(gguf_reads_shared_models)
{
    char *dir = fixture_models_dir();
    int n;

    if (!dir) {
        printf("test_gguf: SKIP shared models: no models folder ($MSTORE_TEST_MODELS or $MSTORE_SRC/../shared/models)\n");
        return;
    }
    n = walk_models(dir);
    if (n == 0)
        printf("test_gguf: SKIP shared models: no .gguf under %s\n", dir);
    free(dir);
}
END_TEST

Suite *gguf_suite(void)
{
    Suite *s = suite_create("gguf");
    TCase *tc = tcase_create("core");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, ggml_type_table_matches_ggml);
    tcase_add_test(tc, ggml_sizes_are_checked);
    tcase_add_loop_test(tc, gguf_roundtrips_every_type_and_value, 0, 3);
    tcase_add_test(tc, gguf_header_only_reads_metadata_without_data);
    tcase_add_test(tc, gguf_kv_value_copies_verbatim);
    tcase_add_test(tc, gguf_getters_name_the_key);
    tcase_add_test(tc, gguf_metadata_as_json);
    tcase_add_test(tc, gguf_writer_refuses_bad_input);
    tcase_add_test(tc, gguf_tiny_layout_is_the_format);
    tcase_add_loop_test(tc, gguf_refuses_corrupt_input, 0, sizeof bad / sizeof bad[0]);
    tcase_add_test(tc, gguf_refuses_every_truncation);
    tcase_add_test(tc, gguf_open_reports_missing_and_empty_files);
    tcase_add_test(tc, gguf_refuses_deep_nesting);
    tcase_add_test(tc, gguf_reads_shared_models);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(gguf_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
