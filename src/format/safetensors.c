/* safetensors.c: the safetensors reader (st_parse) and writer (st_writer_*); see format.h for the
 * layout and the invariants checked. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "format/format.h"

/* ---------------------------------------------------------------- dtypes */

static const struct {
    const char *name;
    size_t size;
} dtypes[ST_DTYPE_COUNT] = {
    [ST_BOOL] = { "BOOL", 1 },       [ST_U8] = { "U8", 1 },   [ST_I8] = { "I8", 1 },
    [ST_F8_E4M3] = { "F8_E4M3", 1 }, [ST_F8_E5M2] = { "F8_E5M2", 1 },
    [ST_U16] = { "U16", 2 },         [ST_I16] = { "I16", 2 }, [ST_F16] = { "F16", 2 },
    [ST_BF16] = { "BF16", 2 },       [ST_U32] = { "U32", 4 }, [ST_I32] = { "I32", 4 },
    [ST_F32] = { "F32", 4 },         [ST_U64] = { "U64", 8 }, [ST_I64] = { "I64", 8 },
    [ST_F64] = { "F64", 8 },
};

const char *st_dtype_name(st_dtype t)
{
    return (unsigned)t < ST_DTYPE_COUNT ? dtypes[t].name : "?";
}

int st_dtype_parse(st_dtype *out, const char *name)
{
    for (int i = 0; i < ST_DTYPE_COUNT; i++) {
        if (strcmp(dtypes[i].name, name) == 0) {
            *out = (st_dtype)i;
            return 0;
        }
    }
    return ms_err(MS_EINVALID, "unknown dtype '%s'", name);
}

size_t st_dtype_size(st_dtype t)
{
    return (unsigned)t < ST_DTYPE_COUNT ? dtypes[t].size : 0;
}

/* product(shape) * dtype size, or -1 when it does not fit in 64 bits. */
static int tensor_nbytes(uint64_t *out, st_dtype dtype, int n_dims, const uint64_t *shape)
{
    uint64_t n = st_dtype_size(dtype);

    for (int i = 0; i < n_dims; i++)
        if (ms_mul64(&n, n, shape[i]) < 0)
            return -1;
    *out = n;
    return 0;
}

/* ---------------------------------------------------------------- reader */

struct st_file {
    const uint8_t *buf;
    uint64_t data_start;
    size_t n;
    st_tensor *tensors;    /* sorted by offset */
    const st_tensor **by_name;   /* into tensors, sorted by name, for st_find */
    size_t n_meta;
    const char **meta;     /* key0, value0, key1, value1, ... sorted by key */
    char *strings;         /* one arena for every name, key and value */
};

/* What st_parse needs while it walks the JSON; kept apart so that st_file stays small. */
typedef struct parse_ctx {
    st_file *f;
    uint64_t data_size;    /* bytes in the data region */
    int header_only;
    char *arena_at;
} parse_ctx;

static const char *arena_copy(parse_ctx *c, const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = c->arena_at;

    memcpy(p, s, n);
    c->arena_at += n;
    return p;
}

static int read_u64(uint64_t *out, json_t *v)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return -1;
    *out = (uint64_t)json_integer_value(v);
    return 0;
}

static int parse_meta(parse_ctx *c, json_t *obj)
{
    const char *key;
    json_t *v;
    size_t i = 0;

    if (!json_is_object(obj))
        return ms_err(MS_EINVALID, "__metadata__ is not an object");
    c->f->meta = calloc(2 * json_object_size(obj) + 1, sizeof *c->f->meta);
    if (!c->f->meta)
        return ms_err(MS_ENOMEM, "out of memory");
    json_object_foreach(obj, key, v) {
        if (!json_is_string(v))
            return ms_err(MS_EINVALID, "__metadata__ '%s' is not a string", key);
        c->f->meta[2 * i] = arena_copy(c, key);
        c->f->meta[2 * i + 1] = arena_copy(c, json_string_value(v));
        i++;
    }
    c->f->n_meta = i;
    return 0;
}

static int parse_shape(st_tensor *t, json_t *shape)
{
    json_t *v;
    size_t i;

    if (!json_is_array(shape))
        return ms_err(MS_EINVALID, "shape is missing or not an array");
    if (json_array_size(shape) > ST_MAX_DIMS)
        return ms_err(MS_EINVALID, "shape has %zu dimensions (max %d)", json_array_size(shape), ST_MAX_DIMS);
    json_array_foreach(shape, i, v) {
        if (read_u64(&t->shape[i], v) < 0)
            return ms_err(MS_EINVALID, "shape[%zu] is not a non-negative integer", i);
    }
    t->n_dims = (int)json_array_size(shape);
    return 0;
}

/* Checks invariants 2 and 3 for one entry and fills *t (offset relative to the data region until
 * st_parse adds data_start). */
static int parse_tensor(parse_ctx *c, st_tensor *t, json_t *entry)
{
    json_t *dtype = json_object_get(entry, "dtype");
    json_t *offs = json_object_get(entry, "data_offsets");
    uint64_t begin, end, want;
    char sbuf[256];
    int rc;

    if (!json_is_object(entry))
        return ms_err(MS_EINVALID, "entry is not an object");
    if (!json_is_string(dtype))
        return ms_err(MS_EINVALID, "dtype is missing or not a string");
    if ((rc = st_dtype_parse(&t->dtype, json_string_value(dtype))) < 0)
        return rc;
    if ((rc = parse_shape(t, json_object_get(entry, "shape"))) < 0)
        return rc;
    if (!json_is_array(offs) || json_array_size(offs) != 2)
        return ms_err(MS_EINVALID, "data_offsets is not an array of 2 integers");
    if (read_u64(&begin, json_array_get(offs, 0)) < 0 || read_u64(&end, json_array_get(offs, 1)) < 0)
        return ms_err(MS_EINVALID, "data_offsets are not non-negative integers");
    if (begin > end)
        return ms_err(MS_EINVALID, "data_offsets [%" PRIu64 ", %" PRIu64 "] are reversed", begin, end);
    if (end > c->data_size)
        return ms_err(MS_EINVALID, "data_offsets [%" PRIu64 ", %" PRIu64 "] extend past the end of the data "
                      "region (%" PRIu64 " bytes)", begin, end, c->data_size);
    tensor_blob_shape_format(sbuf, sizeof sbuf, t->n_dims, t->shape);
    if (tensor_nbytes(&want, t->dtype, t->n_dims, t->shape) < 0)
        return ms_err(MS_EINVALID, "shape %s x %s overflows 64 bits", sbuf, st_dtype_name(t->dtype));
    if (end - begin != want)
        return ms_err(MS_EINVALID, "data_offsets [%" PRIu64 ", %" PRIu64 "] do not match shape %s x %s "
                      "(%" PRIu64 " bytes)", begin, end, sbuf, st_dtype_name(t->dtype), want);
    t->offset = begin;
    t->nbytes = want;
    return 0;
}

static int cmp_offset(const void *a, const void *b)
{
    const st_tensor *x = a, *y = b;

    if (x->offset != y->offset)
        return x->offset < y->offset ? -1 : 1;
    if (x->nbytes != y->nbytes)
        return x->nbytes < y->nbytes ? -1 : 1;
    return strcmp(x->name, y->name);   /* names are unique, so the order is total */
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp((*(const st_tensor *const *)a)->name, (*(const st_tensor *const *)b)->name);
}

static int cmp_meta(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Invariant 4 on the sorted tensors. Empty tensors occupy no bytes and overlap nothing. The
 * message gives data_offsets as the header has them, relative to the data region. */
static int check_overlaps(const st_file *f)
{
    const st_tensor *prev = NULL;
    uint64_t d = f->data_start;

    for (size_t i = 0; i < f->n; i++) {
        const st_tensor *t = &f->tensors[i];
        if (t->nbytes == 0)
            continue;
        if (prev && t->offset < prev->offset + prev->nbytes)
            return ms_err(MS_EINVALID, "tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] overlap tensor "
                          "'%s' [%" PRIu64 ", %" PRIu64 "]", t->name, t->offset - d, t->offset - d + t->nbytes,
                          prev->name, prev->offset - d, prev->offset - d + prev->nbytes);
        prev = t;
    }
    return 0;
}

/* Sizes the string arena (every key and metadata value) so names are copied once, not per malloc. */
static size_t arena_size(json_t *root)
{
    size_t n = 1;
    const char *key;
    json_t *v, *mv;

    json_object_foreach(root, key, v) {
        n += strlen(key) + 1;
        if (strcmp(key, "__metadata__") == 0 && json_is_object(v)) {
            const char *mk;
            json_object_foreach(v, mk, mv)
                n += strlen(mk) + 1 + (json_is_string(mv) ? strlen(json_string_value(mv)) + 1 : 0);
        }
    }
    return n;
}

static int parse_entries(parse_ctx *c, json_t *root)
{
    st_file *f = c->f;
    const char *key;
    json_t *v;
    size_t n = json_object_size(root);
    int rc;

    /* The count is bounded by the header bytes jansson already parsed, so this cannot be huge. */
    f->tensors = calloc(n ? n : 1, sizeof *f->tensors);
    f->by_name = calloc(n ? n : 1, sizeof *f->by_name);
    f->strings = malloc(arena_size(root));
    if (!f->tensors || !f->by_name || !f->strings)
        return ms_err(MS_ENOMEM, "out of memory for %zu header entries", n);
    c->arena_at = f->strings;
    json_object_foreach(root, key, v) {
        if (strcmp(key, "__metadata__") == 0) {
            if ((rc = parse_meta(c, v)) < 0)
                return rc;
            continue;
        }
        st_tensor *t = &f->tensors[f->n];
        t->name = arena_copy(c, key);
        if ((rc = parse_tensor(c, t, v)) < 0)
            return ms_err_ctx("tensor '%s'", key);
        t->offset += f->data_start;
        t->data = c->header_only ? NULL : f->buf + t->offset;
        f->n++;
    }
    return 0;
}

/* Invariant 1. */
static int check_header_size(uint64_t *hsize_out, const uint8_t *buf, size_t len, uint64_t file_size,
                             int header_only)
{
    uint64_t hsize;

    if (len < 8)
        return ms_err(MS_EINVALID, "too short for the header size prefix (%zu bytes < 8)", len);
    hsize = ms_le64(buf);
    if (hsize < 8)
        return ms_err(MS_EINVALID, "header size %" PRIu64 " is below the minimum 8", hsize);
    if (hsize > ST_HEADER_MAX)
        return ms_err(MS_EINVALID, "header size %" PRIu64 " exceeds the limit %u", hsize, ST_HEADER_MAX);
    if (8 + hsize > len)
        return ms_err(MS_EINVALID, "header size %" PRIu64 " extends past the end of the buffer "
                      "(8 + %" PRIu64 " > %zu)", hsize, hsize, len);
    if (header_only && 8 + hsize > file_size)
        return ms_err(MS_EINVALID, "header size %" PRIu64 " extends past the end of the file "
                      "(8 + %" PRIu64 " > %" PRIu64 ")", hsize, hsize, file_size);
    *hsize_out = hsize;
    return 0;
}

int st_parse(st_file **out, const uint8_t *buf, size_t len, uint64_t file_size, int flags, const char *what)
{
    parse_ctx c = { 0 };
    json_error_t jerr;
    json_t *root = NULL;
    uint64_t hsize = 0;
    int rc;

    *out = NULL;
    c.header_only = (flags & ST_HEADER_ONLY) != 0;
    if ((rc = check_header_size(&hsize, buf, len, file_size, c.header_only)) < 0)
        return ms_err_ctx("%s", what);
    if (!(c.f = calloc(1, sizeof *c.f))) {
        rc = ms_err(MS_ENOMEM, "out of memory");
        goto fail;
    }
    c.f->buf = buf;
    c.f->data_start = 8 + hsize;
    c.data_size = (c.header_only ? file_size : len) - c.f->data_start;
    root = json_loadb((const char *)buf + 8, (size_t)hsize, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        rc = ms_err(MS_EINVALID, "header is not valid json: %s (at byte %d of the header)", jerr.text,
                    jerr.position);
        goto fail;
    }
    if (!json_is_object(root)) {
        rc = ms_err(MS_EINVALID, "header is not a json object");
        goto fail;
    }
    if ((rc = parse_entries(&c, root)) < 0)
        goto fail;
    qsort(c.f->tensors, c.f->n, sizeof *c.f->tensors, cmp_offset);
    if ((rc = check_overlaps(c.f)) < 0)
        goto fail;
    for (size_t i = 0; i < c.f->n; i++)
        c.f->by_name[i] = &c.f->tensors[i];   /* after the offset sort: tensors no longer move */
    qsort(c.f->by_name, c.f->n, sizeof *c.f->by_name, cmp_name);
    if (c.f->meta)
        qsort(c.f->meta, c.f->n_meta, 2 * sizeof *c.f->meta, cmp_meta);
    json_decref(root);
    *out = c.f;
    return 0;
fail:
    json_decref(root);
    st_free(c.f);
    ms_err_ctx("%s", what);
    return rc;
}

size_t st_count(const st_file *f) { return f->n; }
const st_tensor *st_at(const st_file *f, size_t i) { return i < f->n ? &f->tensors[i] : NULL; }
uint64_t st_data_start(const st_file *f) { return f->data_start; }
size_t st_meta_count(const st_file *f) { return f->n_meta; }

const st_tensor *st_find(const st_file *f, const char *name)
{
    size_t lo = 0, hi = f->n;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const st_tensor *t = f->by_name[mid];
        int c = strcmp(name, t->name);
        if (c == 0)
            return t;
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

const char *st_meta(const st_file *f, const char *key)
{
    size_t lo = 0, hi = f->n_meta;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(key, f->meta[2 * mid]);
        if (c == 0)
            return f->meta[2 * mid + 1];
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

void st_meta_at(const st_file *f, size_t i, const char **key, const char **value)
{
    *key = i < f->n_meta ? f->meta[2 * i] : NULL;
    *value = i < f->n_meta ? f->meta[2 * i + 1] : NULL;
}

void st_free(st_file *f)
{
    if (!f)
        return;
    MS_FREE_ALL(f->tensors, f->by_name, f->meta, f->strings, f);
}

/* ---------------------------------------------------------------- writer */

/* The header is built as text while tensors are added, so st_writer_size is exact and cheap:
 * offsets depend only on earlier tensors (data goes in insertion order). */
typedef struct text {
    char *p;
    size_t len, cap;
} text;

typedef struct wentry {
    char *name;
    const void *data;
    uint64_t offset;   /* relative to the data region, a multiple of ST_ALIGN */
    uint64_t nbytes;
    const void **parts;   /* st_writer_add_parts: the pieces, in order (owned array) */
    uint64_t *part_nbytes;
    size_t n_parts;
} wentry;

struct st_writer {
    wentry *e;
    size_t n, cap;
    size_t *slots;     /* open addressing on names: index + 1, 0 = empty; catches repeats in O(1) */
    size_t n_slots;    /* a power of two, at least twice n */
    text meta;         /* "k":"v","k2":"v2" */
    text body;         /* "name":{...},"name2":{...} */
    char **meta_keys;
    size_t n_meta;
    uint64_t data_end; /* end of the last tensor in the data region */
};

static int text_add(text *t, const char *s, size_t n)
{
    if (ms_grow(&t->p, &t->cap, t->len + n + 1, 1) < 0)
        return ms_err_ctx("safetensors header");
    memcpy(t->p + t->len, s, n);
    t->len += n;
    t->p[t->len] = '\0';
    return 0;
}

/* Appends s as a JSON string literal; jansson does the escaping and refuses invalid UTF-8, which
 * a reader's JSON parser would refuse too. */
static int text_add_json_string(text *t, const char *s, const char *field)
{
    json_t *j = json_string(s);
    char *q = j ? json_dumps(j, JSON_ENCODE_ANY) : NULL;
    int rc;

    json_decref(j);
    if (!j)
        return ms_err(MS_EINVALID, "%s '%s' is not valid utf-8", field, s);
    if (!q)
        return ms_err(MS_ENOMEM, "out of memory");
    rc = text_add(t, q, strlen(q));
    free(q);
    return rc;
}

static int text_addf(text *t, const char *fmt, ...) MS_PRINTF(2, 3);
static int text_addf(text *t, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return text_add(t, buf, (size_t)n);   /* callers format numbers only, well under 512 bytes */
}

static uint64_t name_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;   /* FNV-1a */

    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

/* The slot holding `name`, or the empty slot where it would go. */
static size_t *slot_find(const st_writer *w, const char *name)
{
    size_t mask = w->n_slots - 1, i = (size_t)name_hash(name) & mask;

    while (w->slots[i] && strcmp(w->e[w->slots[i] - 1].name, name) != 0)
        i = (i + 1) & mask;
    return &w->slots[i];
}

static int slots_grow(st_writer *w)
{
    size_t n = w->n_slots ? w->n_slots * 2 : 64;
    size_t *old = w->slots, n_old = w->n_slots;

    if (!(w->slots = calloc(n, sizeof *w->slots))) {
        w->slots = old;
        return ms_err(MS_ENOMEM, "out of memory");
    }
    w->n_slots = n;
    for (size_t i = 0; i < n_old; i++)
        if (old[i])
            *slot_find(w, w->e[old[i] - 1].name) = old[i];
    free(old);
    return 0;
}

int st_writer_new(st_writer **out)
{
    *out = calloc(1, sizeof **out);
    return *out ? 0 : ms_err(MS_ENOMEM, "out of memory");
}

int st_writer_meta(st_writer *w, const char *key, const char *value)
{
    char **keys;
    int rc;

    for (size_t i = 0; i < w->n_meta; i++)
        if (strcmp(w->meta_keys[i], key) == 0)
            return ms_err(MS_EINVALID, "__metadata__ '%s' is set twice", key);
    if (!(keys = realloc(w->meta_keys, (w->n_meta + 1) * sizeof *keys)))
        return ms_err(MS_ENOMEM, "out of memory");
    w->meta_keys = keys;
    if (!(keys[w->n_meta] = strdup(key)))
        return ms_err(MS_ENOMEM, "out of memory");
    /* Roll the text back on failure so a refused pair leaves the writer as it was. */
    size_t mark = w->meta.len;
    if ((w->n_meta && (rc = text_add(&w->meta, ",", 1)) < 0) ||
        (rc = text_add_json_string(&w->meta, key, "__metadata__ key")) < 0 ||
        (rc = text_add(&w->meta, ":", 1)) < 0 ||
        (rc = text_add_json_string(&w->meta, value, "__metadata__ value")) < 0) {
        w->meta.len = mark;
        free(keys[w->n_meta]);
        return rc;
    }
    w->n_meta++;
    return 0;
}

static int check_add(const st_writer *w, const char *name, st_dtype dtype, int n_dims, const uint64_t *shape,
                     const void *data, uint64_t nbytes)
{
    uint64_t want;
    char sbuf[256];

    if (strcmp(name, "__metadata__") == 0)
        return ms_err(MS_EINVALID, "the name __metadata__ is reserved");
    if ((unsigned)dtype >= ST_DTYPE_COUNT)
        return ms_err(MS_EINVALID, "dtype %d is out of range", (int)dtype);
    if (n_dims < 0 || n_dims > ST_MAX_DIMS)
        return ms_err(MS_EINVALID, "%d dimensions (max %d)", n_dims, ST_MAX_DIMS);
    if (w->n_slots && *slot_find(w, name))
        return ms_err(MS_EINVALID, "name repeats");
    tensor_blob_shape_format(sbuf, sizeof sbuf, n_dims, shape);
    if (tensor_nbytes(&want, dtype, n_dims, shape) < 0)
        return ms_err(MS_EINVALID, "shape %s x %s overflows 64 bits", sbuf, st_dtype_name(dtype));
    if (want != nbytes)
        return ms_err(MS_EINVALID, "%" PRIu64 " bytes do not match shape %s x %s (%" PRIu64 " bytes)", nbytes,
                      sbuf, st_dtype_name(dtype), want);
    if (nbytes && !data)
        return ms_err(MS_EINVALID, "no data for %" PRIu64 " bytes", nbytes);
    return 0;
}

/* Appends "name":{"dtype":..,"shape":[..],"data_offsets":[begin,end]}. */
static int body_add(st_writer *w, const char *name, st_dtype dtype, int n_dims, const uint64_t *shape,
                    uint64_t begin, uint64_t end)
{
    int rc;

    if ((w->n && (rc = text_add(&w->body, ",", 1)) < 0) ||
        (rc = text_add_json_string(&w->body, name, "name")) < 0 ||
        (rc = text_addf(&w->body, ":{\"dtype\":\"%s\",\"shape\":[", st_dtype_name(dtype))) < 0)
        return rc;
    for (int i = 0; i < n_dims; i++)
        if ((rc = text_addf(&w->body, "%s%" PRIu64, i ? "," : "", shape[i])) < 0)
            return rc;
    return text_addf(&w->body, "],\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}", begin, end);
}

int st_writer_add(st_writer *w, const char *name, st_dtype dtype, int n_dims, const uint64_t *shape,
                  const void *data, uint64_t nbytes)
{
    uint64_t begin = ms_align_up(w->data_end, ST_ALIGN), end;
    size_t mark = w->body.len;
    char *copy = NULL;
    int rc;

    if ((rc = check_add(w, name, dtype, n_dims, shape, data, nbytes)) < 0)
        return ms_err_ctx("tensor '%s'", name);
    if (begin < w->data_end || ms_add64(&end, begin, nbytes) < 0)
        return ms_err(MS_EINVALID, "tensor '%s': data region exceeds 64 bits", name);
    if ((rc = ms_grow(&w->e, &w->cap, w->n + 1, sizeof *w->e)) < 0)
        return ms_err_ctx("tensor '%s'", name);
    if (2 * (w->n + 1) > w->n_slots && (rc = slots_grow(w)) < 0)
        return rc;
    if (!(copy = strdup(name)))
        return ms_err(MS_ENOMEM, "out of memory");
    if ((rc = body_add(w, name, dtype, n_dims, shape, begin, end)) < 0) {
        w->body.len = mark;
        free(copy);
        return ms_err_ctx("tensor '%s'", name);
    }
    w->e[w->n] = (wentry){ .name = copy, .data = data, .offset = begin, .nbytes = nbytes };
    w->n++;
    *slot_find(w, copy) = w->n;
    w->data_end = end;
    return 0;
}

int st_writer_add_parts(st_writer *w, const char *name, st_dtype dtype, int n_dims, const uint64_t *shape,
                        const void *const *parts, const uint64_t *part_nbytes, size_t n_parts)
{
    uint64_t total = 0;
    wentry *e;
    int rc;

    if (n_parts == 0)
        return ms_err(MS_EINVALID, "tensor '%s': no parts", name);
    for (size_t i = 0; i < n_parts; i++)
        if (ms_add64(&total, total, part_nbytes[i]) < 0 || (part_nbytes[i] && !parts[i]))
            return ms_err(MS_EINVALID, "tensor '%s': part %zu: no data or a size past 64 bits", name, i);
    if ((rc = st_writer_add(w, name, dtype, n_dims, shape, parts[0] ? parts[0] : "", total)) < 0)
        return rc;
    e = &w->e[w->n - 1];
    e->parts = malloc(n_parts * sizeof *e->parts);
    e->part_nbytes = malloc(n_parts * sizeof *e->part_nbytes);
    if (!e->parts || !e->part_nbytes)
        return ms_err(MS_ENOMEM, "out of memory");   /* st_writer_free releases what was taken */
    memcpy(e->parts, parts, n_parts * sizeof *e->parts);
    memcpy(e->part_nbytes, part_nbytes, n_parts * sizeof *e->part_nbytes);
    e->n_parts = n_parts;
    return 0;
}

/* Hands `nbytes` at p to the sink in pieces of at most 1 GiB (a tensor may exceed size_t on
 * 32-bit hosts). */
static int sink_all(st_sink sink, void *ctx, const uint8_t *p, uint64_t nbytes)
{
    int rc;

    for (uint64_t left = nbytes; left > 0;) {
        size_t chunk = left > (1u << 30) ? (1u << 30) : (size_t)left;
        if ((rc = sink(ctx, p, chunk)) < 0)
            return rc;
        p += chunk;
        left -= chunk;
    }
    return 0;
}

/* Length of the header JSON before padding: {"__metadata__":{meta},body}. */
static size_t header_json_len(const st_writer *w)
{
    size_t n = 2 + w->body.len;

    if (w->n_meta)
        n += strlen("\"__metadata__\":{}") + w->meta.len + (w->n ? 1 : 0);
    return n;
}

/* The header size field: JSON plus the spaces that put the data region on an ST_ALIGN boundary. */
static uint64_t header_size(const st_writer *w)
{
    uint64_t json = header_json_len(w);

    return ms_align_up(8 + json, ST_ALIGN) - 8;
}

uint64_t st_writer_size(const st_writer *w)
{
    return 8 + header_size(w) + w->data_end;
}

static int emit_header(st_writer *w, st_sink sink, void *ctx)
{
    uint64_t hsize = header_size(w);
    text h = { 0 };
    uint8_t prefix[8];
    int rc;

    ms_put_le64(prefix, hsize);
    if ((rc = text_add(&h, "{", 1)) < 0)
        goto done;
    if (w->n_meta && ((rc = text_addf(&h, "\"__metadata__\":{")) < 0 ||
                      (rc = text_add(&h, w->meta.p, w->meta.len)) < 0 ||
                      (rc = text_add(&h, w->n ? "}," : "}", w->n ? 2 : 1)) < 0))
        goto done;
    if ((w->n && (rc = text_add(&h, w->body.p, w->body.len)) < 0) || (rc = text_add(&h, "}", 1)) < 0)
        goto done;
    while (h.len < hsize)
        if ((rc = text_add(&h, " ", 1)) < 0)
            goto done;
    if ((rc = sink(ctx, prefix, sizeof prefix)) == 0)
        rc = sink(ctx, h.p, h.len);
done:
    free(h.p);
    return rc;
}

int st_writer_emit(st_writer *w, st_sink sink, void *ctx)
{
    static const uint8_t zeros[ST_ALIGN];
    uint64_t at = 0;
    int rc;

    if ((rc = emit_header(w, sink, ctx)) < 0)
        return rc;
    for (size_t i = 0; i < w->n; i++) {
        const wentry *e = &w->e[i];
        if (e->offset > at && (rc = sink(ctx, zeros, (size_t)(e->offset - at))) < 0)
            return rc;
        if (e->n_parts) {
            for (size_t k = 0; k < e->n_parts; k++)
                if ((rc = sink_all(sink, ctx, e->parts[k], e->part_nbytes[k])) < 0)
                    return rc;
        } else if ((rc = sink_all(sink, ctx, e->data, e->nbytes)) < 0) {
            return rc;
        }
        at = e->offset + e->nbytes;
    }
    return 0;
}

void st_writer_free(st_writer *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->n; i++)
        MS_FREE_ALL(w->e[i].name, w->e[i].parts, w->e[i].part_nbytes);
    for (size_t i = 0; i < w->n_meta; i++)
        free(w->meta_keys[i]);
    MS_FREE_ALL(w->e, w->slots, w->meta_keys, w->meta.p, w->body.p, w);
}
