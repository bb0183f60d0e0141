/* fuzz_safetensors.c: libFuzzer target for the safetensors reader (st_parse) and, through a
 * round trip, the writer. Each input is parsed whole and with ST_HEADER_ONLY (against the
 * input's size and a larger claimed file size). A refusal must leave *out NULL and a message; an
 * accepted file must keep format.h's promises under every accessor (data inside the buffer,
 * sorted by offset, names found), and must survive being rewritten by st_writer and read back. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/format.h"

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "fuzz_safetensors: %s:%d: %s (%s)\n", __FILE__, __LINE__, #c, ms_err_msg()); abort(); } } while (0)

/* The writers' sink into util's growable buffer (n counts bytes; NULs inside are fine). */
static int text_sink(void *ctx, const void *buf, size_t len)
{
    return ms_text_put(ctx, buf, len);
}

static volatile uint8_t sink_byte;

static void touch(const st_file *f, const uint8_t *data, size_t size, uint64_t file_size, int header_only)
{
    uint64_t prev_end = st_data_start(f);

    CHECK(st_data_start(f) >= 8 && st_data_start(f) <= (header_only ? file_size : size));
    for (size_t i = 0; i < st_count(f); i++) {
        const st_tensor *t = st_at(f, i);
        uint64_t n = st_dtype_size(t->dtype);

        CHECK(t && t->name && st_find(f, t->name) == t && st_dtype_name(t->dtype));
        CHECK(t->n_dims >= 0 && t->n_dims <= ST_MAX_DIMS);
        for (int d = 0; d < t->n_dims; d++)
            n *= t->shape[d];
        CHECK(n == t->nbytes);
        CHECK(t->offset >= st_data_start(f) && t->offset + t->nbytes <= (header_only ? file_size : size));
        if (t->nbytes) {   /* empty tensors occupy no bytes and may sit anywhere */
            CHECK(t->offset >= prev_end);
            prev_end = t->offset + t->nbytes;
        }
        if (header_only) {
            CHECK(t->data == NULL);
        } else {
            CHECK(t->data == data + t->offset);
            if (t->nbytes) {
                sink_byte = t->data[0];
                sink_byte = t->data[t->nbytes - 1];
            }
        }
    }
    CHECK(st_at(f, st_count(f)) == NULL);
    for (size_t i = 0; i < st_meta_count(f); i++) {
        const char *k, *v;

        st_meta_at(f, i, &k, &v);
        CHECK(k && v && st_meta(f, k) && strcmp(st_meta(f, k), v) == 0);
    }
}

static void roundtrip(const st_file *f)
{
    st_writer *w = NULL;
    st_file *f2 = NULL;
    ms_text m = { 0 };

    CHECK(st_writer_new(&w) == 0);
    for (size_t i = 0; i < st_meta_count(f); i++) {
        const char *k, *v;

        st_meta_at(f, i, &k, &v);
        CHECK(st_writer_meta(w, k, v) == 0);
    }
    for (size_t i = 0; i < st_count(f); i++) {
        const st_tensor *t = st_at(f, i);

        CHECK(st_writer_add(w, t->name, t->dtype, t->n_dims, t->shape, t->data, t->nbytes) == 0);
    }
    CHECK(st_writer_emit(w, text_sink, &m) == 0 && m.n == st_writer_size(w));
    CHECK(st_parse(&f2, (const uint8_t *)m.p, m.n, 0, 0, "rewritten") == 0);
    CHECK(st_count(f2) == st_count(f) && st_meta_count(f2) == st_meta_count(f));
    for (size_t i = 0; i < st_count(f); i++) {
        const st_tensor *a = st_at(f, i), *b = st_find(f2, a->name);

        CHECK(b && b->dtype == a->dtype && b->nbytes == a->nbytes);
        CHECK(a->nbytes == 0 || memcmp(a->data, b->data, a->nbytes) == 0);
    }
    st_free(f2);
    st_writer_free(w);
    free(m.p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    for (int pass = 0; pass < 3; pass++) {
        uint64_t file_size = pass == 2 ? (uint64_t)size + 4096 : size;
        st_file *f = (st_file *)&pass;

        ms_err_clear();
        if (st_parse(&f, data, size, file_size, pass ? ST_HEADER_ONLY : 0, "fuzz") < 0) {
            CHECK(f == NULL && ms_err_msg()[0]);
            continue;
        }
        touch(f, data, size, file_size, pass != 0);
        if (pass == 0)
            roundtrip(f);
        st_free(f);
    }
    return 0;
}
