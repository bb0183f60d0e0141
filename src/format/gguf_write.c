/* gguf_write.c: the GGUF writer. Output follows llama.cpp's own layout (gguf_write_to_buf) so
 * llama.cpp and gguf-py read it: header, kv in insertion order, tensor infos in insertion order,
 * zero padding to the alignment, then each tensor at the next multiple of the alignment with its
 * tail zero padded. Values are encoded when set, so emit only concatenates. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/gguf_int.h"

/* llama.cpp keeps tensor names in char[GGML_MAX_NAME = 64], NUL included, and refuses longer */
#define GGML_NAME_MAX 63

typedef struct wkv {
    char *key;
    uint32_t type;
    uint8_t *val;   /* encoded value */
    size_t len;
} wkv;

typedef struct wtensor {
    char *name;
    int type;
    int n_dims;
    uint64_t ne[GGUF_MAX_DIMS];
    const void *data;
    uint64_t nbytes;
    uint64_t offset;
} wtensor;

struct gguf_writer {
    uint32_t version;
    uint32_t alignment;
    wkv *kv;
    size_t n_kv, cap_kv;
    wtensor *t;
    size_t n_t, cap_t;
    uint64_t data_nbytes;   /* data section size, every tensor padded */
};

int gguf_writer_new(gguf_writer **out, uint32_t version, uint32_t alignment)
{
    *out = NULL;
    if (version != 2 && version != 3)
        return ms_err(MS_EINVALID, "gguf writer: unsupported version %u (2 and 3 are)", version);
    if (alignment == 0)
        alignment = GGUF_DEFAULT_ALIGNMENT;
    if (alignment & (alignment - 1))
        return ms_err(MS_EINVALID, "gguf writer: alignment %u is not a power of two", alignment);
    if (!(*out = calloc(1, sizeof **out)))
        return ms_err(MS_ENOMEM, "gguf writer: out of memory");
    (*out)->version = version;
    (*out)->alignment = alignment;
    return 0;
}

void gguf_writer_free(gguf_writer *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->n_kv; i++) {
        free(w->kv[i].key);
        free(w->kv[i].val);
    }
    for (size_t i = 0; i < w->n_t; i++)
        free(w->t[i].name);
    MS_FREE_ALL(w->kv, w->t, w);
}

/* Take ownership of `val` (malloc'd, len bytes) as the value of `key`; frees it on failure. */
static int add_kv(gguf_writer *w, const char *key, uint32_t type, uint8_t *val, size_t len)
{
    char *k = NULL;
    int rc = MS_EINVALID;

    if (!key || !*key) {
        ms_err(MS_EINVALID, "gguf writer: empty key");
        goto fail;
    }
    for (size_t i = 0; i < w->n_kv; i++)
        if (strcmp(w->kv[i].key, key) == 0) {
            ms_err(MS_EINVALID, "gguf writer: duplicate key '%s'", key);
            goto fail;
        }
    /* the reader takes the data section's alignment from this key: it must agree with ours */
    if (strcmp(key, "general.alignment") == 0 &&
        (type != GGUF_TYPE_UINT32 || len != 4 || ms_le32(val) != w->alignment)) {
        ms_err(MS_EINVALID, "gguf writer: kv 'general.alignment' must be the u32 %u given to gguf_writer_new",
               w->alignment);
        goto fail;
    }
    if ((rc = ms_grow(&w->kv, &w->cap_kv, w->n_kv + 1, sizeof *w->kv)) < 0)
        goto fail;
    if (!(k = strdup(key))) {
        rc = ms_err(MS_ENOMEM, "gguf writer: out of memory");
        goto fail;
    }
    w->kv[w->n_kv++] = (wkv){ k, type, val, len };
    return 0;
fail:
    free(val);
    return rc;
}

static int set_fixed(gguf_writer *w, const char *key, uint32_t type, const void *v)
{
    size_t n = gguf_type_size(type);
    uint8_t *val = malloc(n);

    if (!val)
        return ms_err(MS_ENOMEM, "gguf writer: out of memory");
    memcpy(val, v, n);   /* host order: little-endian hosts only, as format.h says */
    return add_kv(w, key, type, val, n);
}

int gguf_writer_set_u8(gguf_writer *w, const char *key, uint8_t v) { return set_fixed(w, key, GGUF_TYPE_UINT8, &v); }
int gguf_writer_set_i8(gguf_writer *w, const char *key, int8_t v) { return set_fixed(w, key, GGUF_TYPE_INT8, &v); }
int gguf_writer_set_u16(gguf_writer *w, const char *key, uint16_t v) { return set_fixed(w, key, GGUF_TYPE_UINT16, &v); }
int gguf_writer_set_i16(gguf_writer *w, const char *key, int16_t v) { return set_fixed(w, key, GGUF_TYPE_INT16, &v); }
int gguf_writer_set_u32(gguf_writer *w, const char *key, uint32_t v) { return set_fixed(w, key, GGUF_TYPE_UINT32, &v); }
int gguf_writer_set_i32(gguf_writer *w, const char *key, int32_t v) { return set_fixed(w, key, GGUF_TYPE_INT32, &v); }
int gguf_writer_set_u64(gguf_writer *w, const char *key, uint64_t v) { return set_fixed(w, key, GGUF_TYPE_UINT64, &v); }
int gguf_writer_set_i64(gguf_writer *w, const char *key, int64_t v) { return set_fixed(w, key, GGUF_TYPE_INT64, &v); }
int gguf_writer_set_f32(gguf_writer *w, const char *key, float v) { return set_fixed(w, key, GGUF_TYPE_FLOAT32, &v); }
int gguf_writer_set_f64(gguf_writer *w, const char *key, double v) { return set_fixed(w, key, GGUF_TYPE_FLOAT64, &v); }

int gguf_writer_set_bool(gguf_writer *w, const char *key, int v)
{
    uint8_t b = v != 0;

    return set_fixed(w, key, GGUF_TYPE_BOOL, &b);
}

int gguf_writer_set_str(gguf_writer *w, const char *key, const char *s, size_t len)
{
    uint8_t *val;

    if (len > SIZE_MAX - 8 || !(val = malloc(8 + len)))
        return ms_err(MS_ENOMEM, "gguf writer: kv '%s': out of memory", key);
    ms_put_le64(val, len);
    if (len)
        memcpy(val + 8, s, len);
    return add_kv(w, key, GGUF_TYPE_STRING, val, 8 + len);
}

int gguf_writer_set_arr(gguf_writer *w, const char *key, uint32_t elem_type, const void *data, uint64_t count)
{
    size_t esize = gguf_type_size(elem_type), n;
    uint8_t *val;

    if (esize == 0)
        return ms_err(MS_EINVALID, "gguf writer: kv '%s': array element type %u is not a fixed-size type "
                      "(use gguf_writer_set_arr_str or gguf_writer_set_raw)", key, elem_type);
    if (ms_mul(&n, (size_t)count, esize) < 0 || ms_add(&n, n, 12) < 0 || count > SIZE_MAX)
        return ms_err(MS_EINVALID, "gguf writer: kv '%s': array count %llu overflows", key,
                      (unsigned long long)count);
    if (count && !data)
        return ms_err(MS_EINVALID, "gguf writer: kv '%s': no data for %llu elements", key,
                      (unsigned long long)count);
    if (elem_type == GGUF_TYPE_BOOL)
        for (uint64_t i = 0; i < count; i++)
            if (((const uint8_t *)data)[i] > 1)
                return ms_err(MS_EINVALID, "gguf writer: kv '%s': bool element %llu is not 0 or 1", key,
                              (unsigned long long)i);
    if (!(val = malloc(n)))
        return ms_err(MS_ENOMEM, "gguf writer: kv '%s': out of memory", key);
    ms_put_le32(val, elem_type);
    ms_put_le64(val + 4, count);
    if (n > 12)
        memcpy(val + 12, data, n - 12);
    return add_kv(w, key, GGUF_TYPE_ARRAY, val, n);
}

int gguf_writer_set_arr_str(gguf_writer *w, const char *key, const char *const *strs, const size_t *lens,
                            uint64_t count)
{
    size_t n = 12, pos = 12;
    uint8_t *val;

    for (uint64_t i = 0; i < count; i++)
        if (ms_add(&n, n, 8) < 0 || ms_add(&n, n, lens ? lens[i] : strlen(strs[i])) < 0)
            return ms_err(MS_EINVALID, "gguf writer: kv '%s': string array size overflows", key);
    if (!(val = malloc(n)))
        return ms_err(MS_ENOMEM, "gguf writer: kv '%s': out of memory", key);
    ms_put_le32(val, GGUF_TYPE_STRING);
    ms_put_le64(val + 4, count);
    for (uint64_t i = 0; i < count; i++) {
        size_t len = lens ? lens[i] : strlen(strs[i]);

        ms_put_le64(val + pos, len);
        if (len)
            memcpy(val + pos + 8, strs[i], len);
        pos += 8 + len;
    }
    return add_kv(w, key, GGUF_TYPE_ARRAY, val, n);
}

int gguf_writer_set_raw(gguf_writer *w, const char *key, uint32_t type, const void *val, size_t len)
{
    gguf__rd r = { val, len, 0 };
    uint8_t *copy;

    if (len == 0 || gguf__value_skip(&r, type, 0) < 0) {
        if (len == 0)
            ms_err(MS_EINVALID, "empty value");
        return ms_err_ctx("gguf writer: kv '%s'", key);
    }
    if (r.pos != len)
        return ms_err(MS_EINVALID, "gguf writer: kv '%s': %zu trailing bytes after the %s value", key,
                      len - r.pos, gguf_type_name(type));
    if (!(copy = malloc(len)))
        return ms_err(MS_ENOMEM, "gguf writer: kv '%s': out of memory", key);
    memcpy(copy, val, len);
    return add_kv(w, key, type, copy, len);
}

int gguf_writer_add_tensor(gguf_writer *w, const char *name, int type, int n_dims, const uint64_t *ne,
                           const void *data, uint64_t nbytes)
{
    wtensor t = { .type = type, .n_dims = n_dims, .data = data, .nbytes = nbytes };
    uint64_t want, end;
    size_t nlen = name ? strlen(name) : 0;
    int rc;

    if (nlen == 0 || nlen > GGML_NAME_MAX)
        return ms_err(MS_EINVALID, "gguf writer: tensor name '%s' is %zu bytes (1..%d allowed by llama.cpp)",
                      name ? name : "", nlen, GGML_NAME_MAX);
    for (size_t i = 0; i < w->n_t; i++)
        if (strcmp(w->t[i].name, name) == 0)
            return ms_err(MS_EINVALID, "gguf writer: duplicate tensor name '%s'", name);
    if (ggml_tensor_nbytes(&want, type, n_dims, ne) < 0)
        return ms_err_ctx("gguf writer: tensor '%s'", name);
    if (want != nbytes || (nbytes && !data))
        return ms_err(MS_EINVALID, "gguf writer: tensor '%s': %llu bytes given, its shape and type %s need %llu",
                      name, (unsigned long long)nbytes, ggml_type_name(type), (unsigned long long)want);
    for (int d = 0; d < GGUF_MAX_DIMS; d++)
        t.ne[d] = d < n_dims ? ne[d] : 1;
    t.offset = w->data_nbytes;
    if (ms_add64(&end, t.offset, nbytes) < 0 || ms_add64(&end, end, w->alignment - 1) < 0)
        return ms_err(MS_EINVALID, "gguf writer: tensor '%s': data section size overflows", name);
    if ((rc = ms_grow(&w->t, &w->cap_t, w->n_t + 1, sizeof *w->t)) < 0)
        return rc;
    if (!(t.name = strdup(name)))
        return ms_err(MS_ENOMEM, "gguf writer: out of memory");
    w->data_nbytes = end / w->alignment * w->alignment;
    w->t[w->n_t++] = t;
    return 0;
}

/* general.alignment is emitted first when it differs from the default and the caller did not
 * set it (then add_kv checked that it matches). */
static int auto_alignment(const gguf_writer *w)
{
    if (w->alignment == GGUF_DEFAULT_ALIGNMENT)
        return 0;
    for (size_t i = 0; i < w->n_kv; i++)
        if (strcmp(w->kv[i].key, "general.alignment") == 0)
            return 0;
    return 1;
}

static uint64_t header_nbytes(const gguf_writer *w)
{
    uint64_t n = 24;

    if (auto_alignment(w))
        n += 8 + strlen("general.alignment") + 4 + 4;
    for (size_t i = 0; i < w->n_kv; i++)
        n += 8 + strlen(w->kv[i].key) + 4 + w->kv[i].len;
    for (size_t i = 0; i < w->n_t; i++)
        n += 8 + strlen(w->t[i].name) + 4 + 8 * (uint64_t)w->t[i].n_dims + 4 + 8;
    return n;
}

uint64_t gguf_writer_data_offset(const gguf_writer *w) { return ms_align_up(header_nbytes(w), w->alignment); }
/* With no tensors there is no data section and no padding after the header: gguf-py writes
 * vocab-only files that way (llama.cpp's test vocabs end at the last kv), and we keep their bytes. */
uint64_t gguf_writer_size(const gguf_writer *w)
{
    return w->n_t ? gguf_writer_data_offset(w) + w->data_nbytes : header_nbytes(w);
}

/* The header as one buffer (its size is about that of the metadata: the vocab dominates). */
static int build_header(const gguf_writer *w, uint8_t **out, size_t *len)
{
    uint64_t n = header_nbytes(w);
    uint8_t *b, *p;

    *out = NULL;
    if (n > SIZE_MAX || !(b = malloc((size_t)n)))
        return ms_err(MS_ENOMEM, "gguf writer: out of memory for a %llu-byte header", (unsigned long long)n);
    p = b;
    ms_put_le32(p, GGUF_MAGIC), p += 4;
    ms_put_le32(p, w->version), p += 4;
    ms_put_le64(p, w->n_t), p += 8;
    ms_put_le64(p, w->n_kv + (size_t)auto_alignment(w)), p += 8;
    if (auto_alignment(w)) {
        ms_put_le64(p, 17), memcpy(p + 8, "general.alignment", 17), p += 25;
        ms_put_le32(p, GGUF_TYPE_UINT32), ms_put_le32(p + 4, w->alignment), p += 8;
    }
    for (size_t i = 0; i < w->n_kv; i++) {
        size_t kl = strlen(w->kv[i].key);

        ms_put_le64(p, kl), memcpy(p + 8, w->kv[i].key, kl), p += 8 + kl;
        ms_put_le32(p, w->kv[i].type), p += 4;
        memcpy(p, w->kv[i].val, w->kv[i].len), p += w->kv[i].len;
    }
    for (size_t i = 0; i < w->n_t; i++) {
        const wtensor *t = &w->t[i];
        size_t nl = strlen(t->name);

        ms_put_le64(p, nl), memcpy(p + 8, t->name, nl), p += 8 + nl;
        ms_put_le32(p, (uint32_t)t->n_dims), p += 4;
        for (int d = 0; d < t->n_dims; d++)
            ms_put_le64(p, t->ne[d]), p += 8;
        ms_put_le32(p, (uint32_t)t->type), p += 4;
        ms_put_le64(p, t->offset), p += 8;
    }
    *out = b;
    *len = (size_t)n;
    return 0;
}

static int pad(st_sink sink, void *ctx, uint64_t n)
{
    static const uint8_t zeros[4096];
    int rc;

    while (n > 0) {
        size_t k = n < sizeof zeros ? (size_t)n : sizeof zeros;

        if ((rc = sink(ctx, zeros, k)) < 0)
            return rc;
        n -= k;
    }
    return 0;
}

int gguf_writer_emit(gguf_writer *w, st_sink sink, void *ctx)
{
    uint8_t *hdr = NULL;
    size_t hlen = 0;
    uint64_t pos;
    int rc;

    if ((rc = build_header(w, &hdr, &hlen)) < 0)
        return rc;
    rc = sink(ctx, hdr, hlen);
    free(hdr);
    if (rc < 0 || (w->n_t && (rc = pad(sink, ctx, ms_align_up(hlen, w->alignment) - hlen)) < 0))
        return rc;
    for (size_t i = 0; i < w->n_t; i++) {
        const wtensor *t = &w->t[i];

        /* sinks take size_t: feed big tensors in pieces that fit any size_t */
        for (pos = 0; pos < t->nbytes; pos += (size_t)1 << 30) {
            uint64_t k = t->nbytes - pos < ((uint64_t)1 << 30) ? t->nbytes - pos : (uint64_t)1 << 30;

            if ((rc = sink(ctx, (const uint8_t *)t->data + pos, (size_t)k)) < 0)
                return rc;
        }
        if ((rc = pad(sink, ctx, ms_align_up(t->nbytes, w->alignment) - t->nbytes)) < 0)
            return rc;
    }
    return 0;
}

static int fd_sink(void *ctx, const void *buf, size_t len) { return ms_write_all(*(int *)ctx, buf, len); }

int gguf_writer_write_file(gguf_writer *w, const char *path)
{
    ms_atomic a;
    int rc;

    if ((rc = ms_atomic_open(&a, path, NULL, 0644)) < 0)
        return rc;
    if ((rc = gguf_writer_emit(w, fd_sink, &a.fd)) < 0) {
        ms_err_ctx("%s", path);
        ms_atomic_abort(&a);
        return rc;
    }
    return ms_atomic_commit(&a);
}
