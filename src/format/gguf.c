/* gguf.c: the GGUF reader: validates a whole file (or just its header) against the invariants in
 * format.h before anything is handed out. Every count read from the file is compared with the
 * bytes that remain before it sizes an allocation or a loop, so a hostile file costs at most
 * O(file size) memory and time. */
#include <stdlib.h>
#include <string.h>

#include "format/gguf_int.h"

/* Smallest encodings, used to bound counts: a kv is a key (8 + >= 1 byte), a u32 type and a
 * value of >= 1 byte; a tensor info is a name (8 + >= 1), n_dims, type and offset. */
#define KV_MIN_BYTES 14
#define TENSOR_MIN_BYTES 25
#define ARR_HDR_BYTES 12   /* u32 elem type + u64 count */

static const char *const type_names[GGUF_TYPE_COUNT] = {
    "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64",
};
static const uint8_t type_sizes[GGUF_TYPE_COUNT] = { 1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8 };

const char *gguf_type_name(uint32_t type) { return type < GGUF_TYPE_COUNT ? type_names[type] : NULL; }
size_t gguf_type_size(uint32_t type) { return type < GGUF_TYPE_COUNT ? type_sizes[type] : 0; }

static int need(const gguf__rd *r, size_t n, const char *field)
{
    if (gguf__left(r) < n)
        return ms_err(MS_EINVALID, "truncated: %s needs %zu bytes at offset %zu, %zu remain", field, n,
                      r->pos, gguf__left(r));
    return 0;
}

int gguf__rd_u32(gguf__rd *r, uint32_t *out, const char *field)
{
    if (need(r, 4, field) < 0)
        return MS_EINVALID;
    *out = ms_le32(r->buf + r->pos);
    r->pos += 4;
    return 0;
}

int gguf__rd_u64(gguf__rd *r, uint64_t *out, const char *field)
{
    if (need(r, 8, field) < 0)
        return MS_EINVALID;
    *out = ms_le64(r->buf + r->pos);
    r->pos += 8;
    return 0;
}

int gguf__rd_str(gguf__rd *r, const uint8_t **s, uint64_t *len, const char *field)
{
    if (gguf__rd_u64(r, len, field) < 0)
        return MS_EINVALID;
    if (*len > gguf__left(r))
        return ms_err(MS_EINVALID, "%s length %llu exceeds remaining %zu bytes", field,
                      (unsigned long long)*len, gguf__left(r));
    *s = r->buf + r->pos;
    r->pos += (size_t)*len;
    return 0;
}

static int check_bools(const uint8_t *p, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        if (p[i] > 1)
            return ms_err(MS_EINVALID, "bool value %u is not 0 or 1", p[i]);
    return 0;
}

static int array_skip(gguf__rd *r, int depth)
{
    uint32_t et;
    uint64_t count;
    size_t left, min;

    if (depth >= GGUF_MAX_DEPTH)
        return ms_err(MS_EINVALID, "arrays nested deeper than %d", GGUF_MAX_DEPTH);
    if (gguf__rd_u32(r, &et, "array element type") < 0 || gguf__rd_u64(r, &count, "array count") < 0)
        return MS_EINVALID;
    if (et >= GGUF_TYPE_COUNT)
        return ms_err(MS_EINVALID, "array element type %u out of range", et);
    left = gguf__left(r);
    min = et == GGUF_TYPE_STRING ? 8 : et == GGUF_TYPE_ARRAY ? ARR_HDR_BYTES : type_sizes[et];
    if (count > left / min)
        return ms_err(MS_EINVALID, "array count %llu exceeds remaining %zu bytes (%zu per %s)",
                      (unsigned long long)count, left, min, type_names[et]);
    if (type_sizes[et]) {
        if (et == GGUF_TYPE_BOOL && check_bools(r->buf + r->pos, count) < 0)
            return MS_EINVALID;
        r->pos += (size_t)count * min;   /* <= left, checked above */
        return 0;
    }
    for (uint64_t i = 0; i < count; i++)
        if (gguf__value_skip(r, et, depth + 1) < 0)
            return ms_err_ctx("element %llu", (unsigned long long)i);
    return 0;
}

int gguf__value_skip(gguf__rd *r, uint32_t type, int depth)
{
    const uint8_t *s;
    uint64_t len;

    if (type >= GGUF_TYPE_COUNT)
        return ms_err(MS_EINVALID, "value type %u out of range", type);
    if (type == GGUF_TYPE_STRING)
        return gguf__rd_str(r, &s, &len, "string");
    if (type == GGUF_TYPE_ARRAY)
        return array_skip(r, depth);
    if (need(r, type_sizes[type], type_names[type]) < 0)
        return MS_EINVALID;
    if (type == GGUF_TYPE_BOOL && check_bools(r->buf + r->pos, 1) < 0)
        return MS_EINVALID;
    r->pos += type_sizes[type];
    return 0;
}

/* A NUL-terminated copy of a key or tensor name, refusing the empty name and embedded NULs (the
 * copy could not stand for the bytes). `field` names the entry in messages. */
static int name_copy(char **out, const uint8_t *s, uint64_t len, const char *field, size_t idx)
{
    *out = NULL;
    if (len == 0)
        return ms_err(MS_EINVALID, "%s #%zu: empty name", field, idx);
    if (memchr(s, 0, (size_t)len))
        return ms_err(MS_EINVALID, "%s #%zu: name contains a NUL byte", field, idx);
    *out = malloc((size_t)len + 1);
    if (!*out)
        return ms_err(MS_ENOMEM, "%s #%zu: out of memory", field, idx);
    memcpy(*out, s, (size_t)len);
    (*out)[len] = '\0';
    return 0;
}

/* Arrays of strings get an index of element offsets so gguf_arr_str is O(1). The value was
 * validated already, so the walk cannot leave it; count <= val_len / 8 bounds the allocation. */
static int index_str_array(gguf_file *g, gguf__kv *kv)
{
    size_t pos = kv->arr_off;

    kv->str_off = malloc((kv->arr_count ? (size_t)kv->arr_count : 1) * sizeof *kv->str_off);
    if (!kv->str_off)
        return ms_err(MS_ENOMEM, "kv '%s': out of memory indexing %llu strings", kv->key,
                      (unsigned long long)kv->arr_count);
    for (uint64_t i = 0; i < kv->arr_count; i++) {
        kv->str_off[i] = pos;
        pos += 8 + (size_t)ms_le64(g->buf + pos);
    }
    return 0;
}

static int read_kv(gguf_file *g, gguf__rd *r, size_t i)
{
    gguf__kv *kv = &g->kv[i];
    const uint8_t *key = NULL;
    uint64_t klen;

    if (gguf__rd_str(r, &key, &klen, "key") < 0)
        return ms_err_ctx("kv #%zu", i);
    if (name_copy(&kv->key, key, klen, "kv", i) < 0)
        return MS_EINVALID;
    if (gguf__rd_u32(r, &kv->type, "value type") < 0)
        return ms_err_ctx("kv '%s'", kv->key);
    kv->val_off = r->pos;
    if (gguf__value_skip(r, kv->type, 0) < 0)
        return ms_err_ctx("kv '%s'", kv->key);
    kv->val_len = r->pos - kv->val_off;
    if (kv->type != GGUF_TYPE_ARRAY)
        return 0;
    kv->arr_type = ms_le32(g->buf + kv->val_off);
    kv->arr_count = ms_le64(g->buf + kv->val_off + 4);
    kv->arr_off = kv->val_off + ARR_HDR_BYTES;
    return kv->arr_type == GGUF_TYPE_STRING ? index_str_array(g, kv) : 0;
}

static int cmp_kv(const void *a, const void *b)
{
    return strcmp((*(gguf__kv *const *)a)->key, (*(gguf__kv *const *)b)->key);
}

static int cmp_tensor_name(const void *a, const void *b)
{
    return strcmp((*(gguf_tensor *const *)a)->name, (*(gguf_tensor *const *)b)->name);
}

static int cmp_tensor_offset(const void *a, const void *b)
{
    const gguf_tensor *x = *(gguf_tensor *const *)a, *y = *(gguf_tensor *const *)b;

    if (x->offset != y->offset)
        return x->offset < y->offset ? -1 : 1;
    return x->nbytes < y->nbytes ? -1 : x->nbytes > y->nbytes;
}

static int read_alignment(gguf_file *g)
{
    long i = gguf_kv_find(g, "general.alignment");
    uint32_t a;

    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    if (i < 0)
        return 0;
    if (g->kv[i].type != GGUF_TYPE_UINT32)
        return ms_err(MS_EINVALID, "kv 'general.alignment' has type %s, expected u32",
                      type_names[g->kv[i].type]);
    a = ms_le32(g->buf + g->kv[i].val_off);
    if (a == 0 || (a & (a - 1)))
        return ms_err(MS_EINVALID, "kv 'general.alignment' %u is not a nonzero power of two", a);
    g->alignment = a;
    return 0;
}

static int read_metadata(gguf_file *g, gguf__rd *r, uint64_t n_kv)
{
    if (n_kv > gguf__left(r) / KV_MIN_BYTES)
        return ms_err(MS_EINVALID, "n_kv %llu exceeds remaining %zu bytes (%d per kv at least)",
                      (unsigned long long)n_kv, gguf__left(r), KV_MIN_BYTES);
    g->kv = calloc(n_kv ? (size_t)n_kv : 1, sizeof *g->kv);
    g->kv_by_key = malloc((n_kv ? (size_t)n_kv : 1) * sizeof *g->kv_by_key);
    if (!g->kv || !g->kv_by_key)
        return ms_err(MS_ENOMEM, "out of memory for %llu kv", (unsigned long long)n_kv);
    for (size_t i = 0; i < n_kv; i++) {
        g->n_kv = i + 1;   /* so close frees what read_kv allocated, even on failure */
        if (read_kv(g, r, i) < 0)
            return MS_EINVALID;
        g->kv_by_key[i] = &g->kv[i];
    }
    qsort(g->kv_by_key, g->n_kv, sizeof *g->kv_by_key, cmp_kv);
    for (size_t i = 1; i < g->n_kv; i++)
        if (strcmp(g->kv_by_key[i - 1]->key, g->kv_by_key[i]->key) == 0)
            return ms_err(MS_EINVALID, "duplicate key '%s'", g->kv_by_key[i]->key);
    return read_alignment(g);
}

static int read_tensor_info(gguf_file *g, gguf__rd *r, size_t i)
{
    gguf_tensor *t = &g->tensors[i];
    const uint8_t *name = NULL;
    uint64_t nlen;
    uint32_t n_dims, type;
    char *copy;

    if (gguf__rd_str(r, &name, &nlen, "tensor name") < 0)
        return ms_err_ctx("tensor #%zu", i);
    if (name_copy(&copy, name, nlen, "tensor", i) < 0)
        return MS_EINVALID;
    t->name = copy;
    if (gguf__rd_u32(r, &n_dims, "n_dims") < 0)
        return ms_err_ctx("tensor '%s'", t->name);
    if (n_dims > GGUF_MAX_DIMS)
        return ms_err(MS_EINVALID, "tensor '%s': n_dims %u > %d", t->name, n_dims, GGUF_MAX_DIMS);
    t->n_dims = (int)n_dims;
    for (int d = 0; d < GGUF_MAX_DIMS; d++)
        t->ne[d] = 1;
    for (uint32_t d = 0; d < n_dims; d++)
        if (gguf__rd_u64(r, &t->ne[d], "ne") < 0)
            return ms_err_ctx("tensor '%s'", t->name);
    if (gguf__rd_u32(r, &type, "type") < 0 || gguf__rd_u64(r, &t->offset, "offset") < 0)
        return ms_err_ctx("tensor '%s'", t->name);
    if (type >= GGML_TYPE_COUNT)   /* before the cast: a u32 above INT_MAX must not turn negative */
        return ms_err(MS_EINVALID, "tensor '%s': type id %u out of range (0..%d)", t->name, type,
                      GGML_TYPE_COUNT - 1);
    t->type = (int)type;
    if (ggml_tensor_nbytes(&t->nbytes, t->type, t->n_dims, t->ne) < 0)
        return ms_err_ctx("tensor '%s'", t->name);
    return 0;
}

/* Offsets, bounds and overlaps, once the data section's start is known. */
static int place_tensors(gguf_file *g)
{
    gguf_tensor **by_off = NULL;
    const gguf_tensor *prev = NULL;
    int rc = 0;

    for (size_t i = 0; i < g->n_tensors; i++) {
        gguf_tensor *t = &g->tensors[i];
        uint64_t abs, end;

        if (t->offset % g->alignment)
            return ms_err(MS_EINVALID, "tensor '%s': offset %llu is not a multiple of alignment %u",
                          t->name, (unsigned long long)t->offset, g->alignment);
        if (ms_add64(&abs, g->data_offset, t->offset) < 0 || ms_add64(&end, abs, t->nbytes) < 0)
            return ms_err(MS_EINVALID, "tensor '%s': offset %llu + size %llu overflows", t->name,
                          (unsigned long long)t->offset, (unsigned long long)t->nbytes);
        if (g->flags & GGUF_HEADER_ONLY)
            continue;
        if (end > g->len)
            return ms_err(MS_EINVALID,
                          "tensor '%s': data extends past end of file (offset %llu + size %llu > %zu)",
                          t->name, (unsigned long long)abs, (unsigned long long)t->nbytes, g->len);
        t->data = g->buf + abs;
    }
    by_off = malloc((g->n_tensors ? g->n_tensors : 1) * sizeof *by_off);
    if (!by_off)
        return ms_err(MS_ENOMEM, "out of memory sorting %zu tensors", g->n_tensors);
    for (size_t i = 0; i < g->n_tensors; i++)
        by_off[i] = &g->tensors[i];
    qsort(by_off, g->n_tensors, sizeof *by_off, cmp_tensor_offset);
    for (size_t i = 0; i < g->n_tensors && rc == 0; i++) {
        const gguf_tensor *t = by_off[i];

        if (t->nbytes == 0)
            continue;   /* an empty range overlaps nothing */
        if (prev && prev->offset + prev->nbytes > t->offset)
            rc = ms_err(MS_EINVALID, "tensor '%s' (offset %llu) overlaps tensor '%s' (offset %llu + size %llu)",
                        t->name, (unsigned long long)t->offset, prev->name,
                        (unsigned long long)prev->offset, (unsigned long long)prev->nbytes);
        prev = t;
    }
    free(by_off);
    return rc;
}

static int read_tensors(gguf_file *g, gguf__rd *r, uint64_t n)
{
    if (n > gguf__left(r) / TENSOR_MIN_BYTES)
        return ms_err(MS_EINVALID, "n_tensors %llu exceeds remaining %zu bytes (%d per tensor info at least)",
                      (unsigned long long)n, gguf__left(r), TENSOR_MIN_BYTES);
    g->tensors = calloc(n ? (size_t)n : 1, sizeof *g->tensors);
    g->t_by_name = malloc((n ? (size_t)n : 1) * sizeof *g->t_by_name);
    if (!g->tensors || !g->t_by_name)
        return ms_err(MS_ENOMEM, "out of memory for %llu tensor infos", (unsigned long long)n);
    for (size_t i = 0; i < n; i++) {
        g->n_tensors = i + 1;
        if (read_tensor_info(g, r, i) < 0)
            return MS_EINVALID;
        g->t_by_name[i] = &g->tensors[i];
    }
    qsort(g->t_by_name, g->n_tensors, sizeof *g->t_by_name, cmp_tensor_name);
    for (size_t i = 1; i < g->n_tensors; i++)
        if (strcmp(g->t_by_name[i - 1]->name, g->t_by_name[i]->name) == 0)
            return ms_err(MS_EINVALID, "duplicate tensor name '%s'", g->t_by_name[i]->name);
    g->header_nbytes = r->pos;
    /* pos <= len < 2^64 - 2^32, so rounding up cannot wrap */
    g->data_offset = ms_align_up(r->pos, g->alignment);
    return place_tensors(g);
}

static int parse(gguf_file *g)
{
    gguf__rd r = { g->buf, g->len, 0 };
    uint32_t magic, version;
    uint64_t n_tensors, n_kv;

    if (gguf__rd_u32(&r, &magic, "magic") < 0)
        return MS_EINVALID;
    if (magic != GGUF_MAGIC)
        return ms_err(MS_EINVALID, "bad magic 0x%08x (expected 0x%08x, \"GGUF\")", magic, GGUF_MAGIC);
    if (gguf__rd_u32(&r, &version, "version") < 0)
        return MS_EINVALID;
    if (version == 0x02000000u || version == 0x03000000u)
        return ms_err(MS_EINVALID, "unsupported version %u (a big-endian gguf)", version);
    if (version != 2 && version != 3)
        return ms_err(MS_EINVALID, "unsupported version %u (2 and 3 are)", version);
    g->version = version;
    if (gguf__rd_u64(&r, &n_tensors, "n_tensors") < 0 || gguf__rd_u64(&r, &n_kv, "n_kv") < 0)
        return MS_EINVALID;
    /* a first bound before the kv are read: their bytes are needed too */
    if (n_tensors > gguf__left(&r) / TENSOR_MIN_BYTES)
        return ms_err(MS_EINVALID, "n_tensors %llu exceeds remaining %zu bytes (%d per tensor info at least)",
                      (unsigned long long)n_tensors, gguf__left(&r), TENSOR_MIN_BYTES);
    if (read_metadata(g, &r, n_kv) < 0)
        return MS_EINVALID;
    return read_tensors(g, &r, n_tensors);
}

static int file_new(gguf_file **out, const char *what)
{
    gguf_file *g = calloc(1, sizeof *g);

    *out = g;
    if (!g || !(g->what = strdup(what ? what : "gguf")))
        return ms_err(MS_ENOMEM, "%s: out of memory", what ? what : "gguf");
    return 0;
}

int gguf_open_buf(gguf_file **out, const uint8_t *buf, size_t len, int flags, const char *what)
{
    gguf_file *g = NULL;
    int rc;

    *out = NULL;
    if ((rc = file_new(&g, what)) < 0)
        goto fail;
    g->buf = buf;
    g->len = len;
    g->flags = flags;
    if ((rc = parse(g)) < 0) {
        ms_err_ctx("%s", g->what);
        goto fail;
    }
    *out = g;
    return 0;
fail:
    gguf_close(g);
    return rc;
}

int gguf_open(gguf_file **out, const char *path)
{
    gguf_file *g = NULL;
    int rc;

    *out = NULL;
    if ((rc = file_new(&g, path)) < 0 || (rc = ms_map_open(&g->map, path)) < 0)
        goto fail;
    g->buf = g->map.data;
    g->len = g->map.size;
    if ((rc = parse(g)) < 0) {
        ms_err_ctx("%s", path);
        goto fail;
    }
    *out = g;
    return 0;
fail:
    gguf_close(g);
    return rc;
}

void gguf_close(gguf_file *g)
{
    if (!g)
        return;
    for (size_t i = 0; i < g->n_kv; i++) {
        free(g->kv[i].key);
        free(g->kv[i].str_off);
    }
    for (size_t i = 0; i < g->n_tensors; i++)
        free((char *)g->tensors[i].name);
    MS_FREE_ALL(g->kv, g->kv_by_key, g->tensors, g->t_by_name);
    ms_map_close(&g->map);
    free(g->what);
    free(g);
}

uint32_t gguf_version(const gguf_file *g) { return g->version; }
uint32_t gguf_alignment(const gguf_file *g) { return g->alignment; }
uint64_t gguf_data_offset(const gguf_file *g) { return g->data_offset; }
uint64_t gguf_header_nbytes(const gguf_file *g) { return g->header_nbytes; }
uint64_t gguf_file_size(const gguf_file *g) { return g->len; }
const uint8_t *gguf_bytes(const gguf_file *g) { return g->buf; }

size_t gguf_tensor_count(const gguf_file *g) { return g->n_tensors; }

const gguf_tensor *gguf_tensor_at(const gguf_file *g, size_t i)
{
    return i < g->n_tensors ? &g->tensors[i] : NULL;
}

const gguf_tensor *gguf_tensor_find(const gguf_file *g, const char *name)
{
    gguf_tensor key = { .name = name }, *pk = &key, **hit;

    hit = bsearch(&pk, g->t_by_name, g->n_tensors, sizeof *g->t_by_name, cmp_tensor_name);
    return hit ? *hit : NULL;
}

long gguf_kv_find(const gguf_file *g, const char *key)
{
    gguf__kv k = { .key = (char *)key }, *pk = &k, **hit;

    hit = bsearch(&pk, g->kv_by_key, g->n_kv, sizeof *g->kv_by_key, cmp_kv);
    return hit ? (long)(*hit - g->kv) : -1;
}
