/* gguf_kv.c: typed access to GGUF metadata and its JSON form. Everything here reads values that
 * gguf.c validated at open, so the walks below trust lengths and never leave the buffer. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/gguf_int.h"

size_t gguf_kv_count(const gguf_file *g) { return g->n_kv; }
const char *gguf_kv_key(const gguf_file *g, size_t i) { return i < g->n_kv ? g->kv[i].key : NULL; }
uint32_t gguf_kv_type(const gguf_file *g, size_t i) { return i < g->n_kv ? g->kv[i].type : GGUF_TYPE_COUNT; }

void gguf_kv_value(const gguf_file *g, size_t i, const uint8_t **val, size_t *len)
{
    *val = i < g->n_kv ? g->buf + g->kv[i].val_off : NULL;
    *len = i < g->n_kv ? g->kv[i].val_len : 0;
}

static int lookup(const gguf_file *g, const char *key, const gguf__kv **out)
{
    long i = gguf_kv_find(g, key);

    *out = i < 0 ? NULL : &g->kv[i];
    if (i < 0)
        return ms_err(MS_ENOTFOUND, "%s: kv '%s' not found", g->what, key);
    return 0;
}

static int wrong_type(const gguf_file *g, const gguf__kv *kv, const char *expected)
{
    return ms_err(MS_EINVALID, "%s: kv '%s' has type %s, expected %s", g->what, kv->key,
                  gguf_type_name(kv->type), expected);
}

static int is_int_type(uint32_t t)
{
    return t <= GGUF_TYPE_INT32 || t == GGUF_TYPE_UINT64 || t == GGUF_TYPE_INT64;
}

/* An integer value as a sign and a magnitude-free pair: *neg set when it is below zero, *u the
 * value (two's complement cast for negatives). `p` points at the LE bytes. */
static void decode_int(uint32_t t, const uint8_t *p, int *neg, uint64_t *u)
{
    int64_t s = 0;

    *neg = 0;
    switch (t) {
    case GGUF_TYPE_UINT8: *u = p[0]; return;
    case GGUF_TYPE_UINT16: *u = ms_le16(p); return;
    case GGUF_TYPE_UINT32: *u = ms_le32(p); return;
    case GGUF_TYPE_UINT64: *u = ms_le64(p); return;
    case GGUF_TYPE_INT8: s = (int8_t)p[0]; break;
    case GGUF_TYPE_INT16: s = (int16_t)ms_le16(p); break;
    case GGUF_TYPE_INT32: s = (int32_t)ms_le32(p); break;
    default: s = (int64_t)ms_le64(p); break;
    }
    *neg = s < 0;
    *u = (uint64_t)s;
}

static double decode_float(uint32_t t, const uint8_t *p)
{
    if (t == GGUF_TYPE_FLOAT32) {
        uint32_t b = ms_le32(p);
        float f;

        memcpy(&f, &b, sizeof f);
        return f;
    } else {
        uint64_t b = ms_le64(p);
        double d;

        memcpy(&d, &b, sizeof d);
        return d;
    }
}

static int to_uint(const gguf_file *g, const gguf__kv *kv, uint32_t t, const uint8_t *p, uint64_t *out)
{
    int neg;

    decode_int(t, p, &neg, out);
    if (neg) {
        int64_t v = (int64_t)*out;

        *out = 0;
        return ms_err(MS_EINVALID, "%s: kv '%s': value %lld is negative", g->what, kv->key, (long long)v);
    }
    return 0;
}

static int to_int(const gguf_file *g, const gguf__kv *kv, uint32_t t, const uint8_t *p, int64_t *out)
{
    uint64_t u;
    int neg;

    decode_int(t, p, &neg, &u);
    *out = 0;
    if (!neg && u > (uint64_t)INT64_MAX)
        return ms_err(MS_EINVALID, "%s: kv '%s': value %llu exceeds INT64_MAX", g->what, kv->key,
                      (unsigned long long)u);
    *out = (int64_t)u;
    return 0;
}

int gguf_get_str(const gguf_file *g, const char *key, const char **s, size_t *len)
{
    const gguf__kv *kv;

    *s = NULL;
    *len = 0;
    if (lookup(g, key, &kv) < 0)
        return MS_ENOTFOUND;
    if (kv->type != GGUF_TYPE_STRING)
        return wrong_type(g, kv, "string");
    *len = (size_t)ms_le64(g->buf + kv->val_off);
    *s = (const char *)g->buf + kv->val_off + 8;
    return 0;
}

int gguf_get_uint(const gguf_file *g, const char *key, uint64_t *out)
{
    const gguf__kv *kv;

    *out = 0;
    if (lookup(g, key, &kv) < 0)
        return MS_ENOTFOUND;
    if (!is_int_type(kv->type))
        return wrong_type(g, kv, "an integer");
    return to_uint(g, kv, kv->type, g->buf + kv->val_off, out);
}

int gguf_get_int(const gguf_file *g, const char *key, int64_t *out)
{
    const gguf__kv *kv;

    *out = 0;
    if (lookup(g, key, &kv) < 0)
        return MS_ENOTFOUND;
    if (!is_int_type(kv->type))
        return wrong_type(g, kv, "an integer");
    return to_int(g, kv, kv->type, g->buf + kv->val_off, out);
}

int gguf_get_float(const gguf_file *g, const char *key, double *out)
{
    const gguf__kv *kv;

    *out = 0;
    if (lookup(g, key, &kv) < 0)
        return MS_ENOTFOUND;
    if (kv->type != GGUF_TYPE_FLOAT32 && kv->type != GGUF_TYPE_FLOAT64)
        return wrong_type(g, kv, "f32 or f64");
    *out = decode_float(kv->type, g->buf + kv->val_off);
    return 0;
}

int gguf_get_bool(const gguf_file *g, const char *key, int *out)
{
    const gguf__kv *kv;

    *out = 0;
    if (lookup(g, key, &kv) < 0)
        return MS_ENOTFOUND;
    if (kv->type != GGUF_TYPE_BOOL)
        return wrong_type(g, kv, "bool");
    *out = g->buf[kv->val_off];
    return 0;
}

static int lookup_arr(const gguf_file *g, const char *key, const gguf__kv **kv)
{
    if (lookup(g, key, kv) < 0)
        return MS_ENOTFOUND;
    if ((*kv)->type != GGUF_TYPE_ARRAY)
        return wrong_type(g, *kv, "array");
    return 0;
}

int gguf_get_arr(const gguf_file *g, const char *key, uint32_t *elem_type, uint64_t *count)
{
    const gguf__kv *kv;
    int rc;

    *elem_type = GGUF_TYPE_COUNT;
    *count = 0;
    if ((rc = lookup_arr(g, key, &kv)) < 0)
        return rc;
    *elem_type = kv->arr_type;
    *count = kv->arr_count;
    return 0;
}

int gguf_arr_data(const gguf_file *g, const char *key, uint32_t *elem_type, const uint8_t **data, uint64_t *count)
{
    const gguf__kv *kv;
    int rc;

    *data = NULL;
    if ((rc = gguf_get_arr(g, key, elem_type, count)) < 0)
        return rc;
    if (gguf_type_size(*elem_type) == 0)
        return ms_err(MS_EINVALID, "%s: kv '%s' is an array of %s, not of a fixed-size type", g->what, key,
                      gguf_type_name(*elem_type));
    lookup(g, key, &kv);
    *data = g->buf + kv->arr_off;
    return 0;
}

/* Element i of an array of fixed-size values; MS_EINVALID past the end. */
static int arr_elem(const gguf_file *g, const char *key, uint64_t i, const gguf__kv **kv, const uint8_t **p)
{
    int rc;

    *p = NULL;
    if ((rc = lookup_arr(g, key, kv)) < 0)
        return rc;
    if (i >= (*kv)->arr_count)
        return ms_err(MS_EINVALID, "%s: kv '%s': index %llu past array count %llu", g->what, key,
                      (unsigned long long)i, (unsigned long long)(*kv)->arr_count);
    *p = g->buf + (*kv)->arr_off + (size_t)i * gguf_type_size((*kv)->arr_type);
    return 0;
}

int gguf_arr_str(const gguf_file *g, const char *key, uint64_t i, const char **s, size_t *len)
{
    const gguf__kv *kv;
    const uint8_t *p;
    int rc;

    *s = NULL;
    *len = 0;
    if ((rc = arr_elem(g, key, i, &kv, &p)) < 0)
        return rc;
    if (kv->arr_type != GGUF_TYPE_STRING)
        return ms_err(MS_EINVALID, "%s: kv '%s' is an array of %s, expected string", g->what, key,
                      gguf_type_name(kv->arr_type));
    p = g->buf + kv->str_off[i];
    *len = (size_t)ms_le64(p);
    *s = (const char *)p + 8;
    return 0;
}

int gguf_arr_int(const gguf_file *g, const char *key, uint64_t i, int64_t *out)
{
    const gguf__kv *kv;
    const uint8_t *p;
    int rc;

    *out = 0;
    if ((rc = arr_elem(g, key, i, &kv, &p)) < 0)
        return rc;
    if (!is_int_type(kv->arr_type))
        return ms_err(MS_EINVALID, "%s: kv '%s' is an array of %s, expected integers", g->what, key,
                      gguf_type_name(kv->arr_type));
    return to_int(g, kv, kv->arr_type, p, out);
}

int gguf_arr_float(const gguf_file *g, const char *key, uint64_t i, double *out)
{
    const gguf__kv *kv;
    const uint8_t *p;
    int rc;

    *out = 0;
    if ((rc = arr_elem(g, key, i, &kv, &p)) < 0)
        return rc;
    if (kv->arr_type != GGUF_TYPE_FLOAT32 && kv->arr_type != GGUF_TYPE_FLOAT64)
        return ms_err(MS_EINVALID, "%s: kv '%s' is an array of %s, expected f32 or f64", g->what, key,
                      gguf_type_name(kv->arr_type));
    *out = decode_float(kv->arr_type, p);
    return 0;
}

/* ---------------------------------------------------------------- JSON */

/* A JSON string of bytes that should be UTF-8; each byte that is not part of a valid sequence
 * becomes U+FFFD, so any file's metadata can be shown. */
static json_t *json_bytes(const uint8_t *s, size_t len)
{
    char *fixed;
    size_t n;
    json_t *j;

    if (ms_utf8_valid((const char *)s, len))
        return json_stringn((const char *)s, len);
    if (!(fixed = ms_utf8_repair((const char *)s, len, &n)))
        return NULL;
    j = json_stringn(fixed, n);
    free(fixed);
    return j;
}

static json_t *json_scalar(uint32_t t, const uint8_t *p)
{
    char buf[32];
    uint64_t u;
    double d;
    int neg;

    if (t == GGUF_TYPE_BOOL)
        return json_boolean(p[0]);
    if (t == GGUF_TYPE_FLOAT32 || t == GGUF_TYPE_FLOAT64) {
        d = decode_float(t, p);
        if (isfinite(d))
            return json_real(d);
        return json_string(isnan(d) ? "nan" : d > 0 ? "inf" : "-inf");
    }
    decode_int(t, p, &neg, &u);
    if (neg || u <= (uint64_t)INT64_MAX)
        return json_integer((json_int_t)(int64_t)u);
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)u);   /* JSON integers stop at int64 */
    return json_string(buf);
}

/* The value of `type` at *pos (validated at open); advances *pos past it. */
static json_t *json_value(const gguf_file *g, size_t *pos, uint32_t type)
{
    const uint8_t *p = g->buf + *pos;
    json_t *arr;
    uint32_t et;
    uint64_t n;

    if (type == GGUF_TYPE_STRING) {
        n = ms_le64(p);
        *pos += 8 + (size_t)n;
        return json_bytes(p + 8, (size_t)n);
    }
    if (type != GGUF_TYPE_ARRAY) {
        *pos += gguf_type_size(type);
        return json_scalar(type, p);
    }
    et = ms_le32(p);
    n = ms_le64(p + 4);
    *pos += 12;
    if (!(arr = json_array()))
        return NULL;
    for (uint64_t i = 0; i < n; i++) {
        json_t *e = json_value(g, pos, et);   /* depth bounded by GGUF_MAX_DEPTH at open */

        if (!e || json_array_append_new(arr, e) < 0) {
            json_decref(arr);
            return NULL;
        }
    }
    return arr;
}

json_t *gguf_kv_to_json(const gguf_file *g, size_t i)
{
    size_t pos;
    json_t *j;

    if (i >= g->n_kv) {
        ms_err(MS_EINVALID, "%s: kv index %zu past count %zu", g->what, i, g->n_kv);
        return NULL;
    }
    pos = g->kv[i].val_off;
    if (!(j = json_value(g, &pos, g->kv[i].type)))
        ms_err(MS_ENOMEM, "%s: kv '%s': out of memory building json", g->what, g->kv[i].key);
    return j;
}

json_t *gguf_meta_to_json(const gguf_file *g)
{
    json_t *obj = json_object(), *key = NULL, *v;
    int rc;

    if (!obj)
        goto oom;
    for (size_t i = 0; i < g->n_kv; i++) {
        /* keys go through json_bytes too: jansson refuses a key that is not UTF-8 */
        if (!(key = json_bytes((const uint8_t *)g->kv[i].key, strlen(g->kv[i].key))))
            goto oom;
        if (!(v = gguf_kv_to_json(g, i)))
            goto oom;
        rc = json_object_set_new(obj, json_string_value(key), v);   /* consumes v, even on failure */
        json_decref(key);
        key = NULL;
        if (rc < 0)
            goto oom;
    }
    return obj;
oom:
    json_decref(key);
    json_decref(obj);
    ms_err(MS_ENOMEM, "%s: out of memory building json", g->what);
    return NULL;
}
