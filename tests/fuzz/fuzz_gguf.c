/* fuzz_gguf.c: libFuzzer target for the GGUF reader (and, through round trips, the writer).
 * Every input is parsed twice, whole and with GGUF_HEADER_ONLY. A refusal must leave *out NULL
 * and a message; an accepted file must keep format.h's invariants under every accessor, and
 * must survive being rewritten by gguf_writer and read back. Build and run: see README.md. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/format.h"

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "fuzz_gguf: %s:%d: %s (%s)\n", __FILE__, __LINE__, #c, ms_err_msg()); abort(); } } while (0)

/* The writers' sink into util's growable buffer (n counts bytes; NULs inside are fine). */
static int text_sink(void *ctx, const void *buf, size_t len)
{
    return ms_text_put(ctx, buf, len);
}

static volatile uint8_t sink_byte;

static void touch_kv(const gguf_file *g, size_t i)
{
    const char *key = gguf_kv_key(g, i), *s;
    uint32_t type = gguf_kv_type(g, i), et;
    const uint8_t *val, *data;
    size_t len;
    uint64_t u, count;
    int64_t v;
    double d;
    int b;
    json_t *j;

    CHECK(key && type < GGUF_TYPE_COUNT && gguf_kv_find(g, key) == (long)i);
    gguf_kv_value(g, i, &val, &len);
    CHECK(val >= gguf_bytes(g) && val + len <= gguf_bytes(g) + gguf_file_size(g));
    CHECK((gguf_get_str(g, key, &s, &len) == 0) == (type == GGUF_TYPE_STRING));
    gguf_get_uint(g, key, &u);
    gguf_get_int(g, key, &v);
    gguf_get_float(g, key, &d);
    CHECK((gguf_get_bool(g, key, &b) == 0) == (type == GGUF_TYPE_BOOL));
    CHECK(b == 0 || b == 1);
    if (gguf_get_arr(g, key, &et, &count) == 0) {
        CHECK(type == GGUF_TYPE_ARRAY && et < GGUF_TYPE_COUNT);
        if (gguf_arr_data(g, key, &et, &data, &count) == 0 && count)
            sink_byte = data[count * gguf_type_size(et) - 1];   /* ASan checks the last byte */
        for (uint64_t k = 0; k < count && k < 4096; k++) {
            if (gguf_arr_str(g, key, k, &s, &len) == 0 && len)
                sink_byte = (uint8_t)s[len - 1];
            gguf_arr_int(g, key, k, &v);
            gguf_arr_float(g, key, k, &d);
        }
        CHECK(gguf_arr_str(g, key, count, &s, &len) < 0);
    }
    j = gguf_kv_to_json(g, i);
    CHECK(j);
    json_decref(j);
}

static void touch_tensors(const gguf_file *g, int header_only)
{
    for (size_t i = 0; i < gguf_tensor_count(g); i++) {
        const gguf_tensor *t = gguf_tensor_at(g, i);
        uint64_t n;

        CHECK(t && gguf_tensor_find(g, t->name) == t && ggml_type_name(t->type));
        CHECK(t->n_dims >= 0 && t->n_dims <= GGUF_MAX_DIMS && t->offset % gguf_alignment(g) == 0);
        CHECK(ggml_tensor_nbytes(&n, t->type, t->n_dims, t->ne) == 0 && n == t->nbytes);
        if (header_only) {
            CHECK(t->data == NULL);
        } else if (t->nbytes) {
            CHECK(t->data == gguf_bytes(g) + gguf_data_offset(g) + t->offset);
            sink_byte = t->data[0];
            sink_byte = t->data[t->nbytes - 1];
        }
    }
    CHECK(gguf_tensor_at(g, gguf_tensor_count(g)) == NULL);
}

/* Rewrite with our writer and read back: every accepted value must be accepted by set_raw. */
static void roundtrip(const gguf_file *g, int header_only)
{
    gguf_writer *w = NULL;
    gguf_file *g2 = NULL;
    ms_text m = { 0 };

    CHECK(gguf_writer_new(&w, gguf_version(g), gguf_alignment(g)) == 0);
    for (size_t i = 0; i < gguf_kv_count(g); i++) {
        const uint8_t *val;
        size_t len;

        gguf_kv_value(g, i, &val, &len);
        CHECK(gguf_writer_set_raw(w, gguf_kv_key(g, i), gguf_kv_type(g, i), val, len) == 0);
    }
    for (size_t i = 0; i < gguf_tensor_count(g) && !header_only; i++) {
        const gguf_tensor *t = gguf_tensor_at(g, i);

        /* the writer refuses names llama.cpp cannot hold; the reader does not */
        if (strlen(t->name) > 63)
            goto done;
        CHECK(gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, t->nbytes) == 0);
    }
    CHECK(gguf_writer_emit(w, text_sink, &m) == 0 && m.n == gguf_writer_size(w));
    CHECK(gguf_open_buf(&g2, (const uint8_t *)m.p, m.n, 0, "rewritten") == 0);
    CHECK(gguf_kv_count(g2) >= gguf_kv_count(g));
    CHECK(gguf_tensor_count(g2) == (header_only ? 0 : gguf_tensor_count(g)));
    for (size_t i = 0; i < gguf_tensor_count(g2); i++)
        CHECK(memcmp(gguf_tensor_at(g2, i)->data, gguf_tensor_at(g, i)->data, gguf_tensor_at(g, i)->nbytes) == 0);
done:
    gguf_close(g2);
    gguf_writer_free(w);
    free(m.p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    for (int pass = 0; pass < 2; pass++) {
        int flags = pass ? GGUF_HEADER_ONLY : 0;
        gguf_file *g = (gguf_file *)&flags;
        json_t *j;

        ms_err_clear();
        if (gguf_open_buf(&g, data, size, flags, "fuzz") < 0) {
            CHECK(g == NULL && ms_err_msg()[0]);
            continue;
        }
        CHECK(gguf_version(g) == 2 || gguf_version(g) == 3);
        CHECK(gguf_alignment(g) && !(gguf_alignment(g) & (gguf_alignment(g) - 1)));
        CHECK(gguf_header_nbytes(g) <= size && gguf_data_offset(g) >= gguf_header_nbytes(g));
        CHECK(gguf_file_size(g) == size && gguf_bytes(g) == data);
        for (size_t i = 0; i < gguf_kv_count(g); i++)
            touch_kv(g, i);
        CHECK(gguf_kv_key(g, gguf_kv_count(g)) == NULL);
        touch_tensors(g, pass);
        j = gguf_meta_to_json(g);
        CHECK(j);
        json_decref(j);
        roundtrip(g, pass);
        gguf_close(g);
    }
    return 0;
}
