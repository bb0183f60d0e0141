/* tensor_blob.c: the metadata contract of a stored tensor blob, written and read here only.
 *
 * The importers write it (tensor_blob_meta_put), and the index, the runtime, export and show
 * read it back (tensor_blob_meta_get). The logical_shape text "[4096, 4096]" is part of the
 * blob's bytes, hence of its digest: tensor_blob_shape_format is the one formatter and its
 * output must never change; tensor_blob_shape_parse is the one parser. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/format.h"

#define KEY_MAX 1024

const char *tensor_blob_shape_format(char *buf, size_t len, int n_dims, const uint64_t *shape)
{
    size_t at = (size_t)snprintf(buf, len, "[");

    for (int d = 0; d < n_dims && at < len; d++)
        at += (size_t)snprintf(buf + at, len - at, "%s%" PRIu64, d ? ", " : "", shape[d]);
    if (at < len)
        snprintf(buf + at, len - at, "]");
    return buf;
}

/* Strict: '[', one to ST_MAX_DIMS decimal integers that fit in 64 bits separated by ',' and
 * spaces, ']', nothing after. The index lists what passes, so nothing else from a blob reaches
 * a terminal. */
int tensor_blob_shape_parse(int *n_dims, uint64_t *shape, const char *s)
{
    const char *p = s;
    int n = 0;

    *n_dims = 0;
    if (*p++ != '[')
        goto bad;
    for (;;) {
        uint64_t v = 0;
        const char *start;
        while (*p == ' ')
            p++;
        start = p;
        for (; *p >= '0' && *p <= '9'; p++)
            if (ms_mul64(&v, v, 10) < 0 || ms_add64(&v, v, (uint64_t)(*p - '0')) < 0)
                goto bad;
        if (p == start || n == ST_MAX_DIMS)
            goto bad;
        shape[n++] = v;
        while (*p == ' ')
            p++;
        if (*p == ']' && p[1] == '\0')
            break;
        if (*p++ != ',')
            goto bad;
    }
    *n_dims = n;
    return 0;
bad:
    return ms_err(MS_EINVALID, "logical_shape '%.64s': expected 1 to %d integers in brackets", s, ST_MAX_DIMS);
}

static int put(st_writer *w, const char *key, const char *tensor, const char *value)
{
    char k[KEY_MAX];

    if ((size_t)snprintf(k, sizeof k, tensor ? "%s:%s" : "%s", key, tensor) >= sizeof k)
        return ms_err(MS_EINVALID, "tensor name '%.64s...' is too long for a __metadata__ key", tensor);
    return st_writer_meta(w, k, value);
}

/* The order of the keys is part of the blob's bytes: quant_type, logical_shape, group_size,
 * gguf_name, as every mstore since the first has written them. */
int tensor_blob_meta_put(st_writer *w, const char *tensor, const tensor_blob_meta *m)
{
    char val[TENSOR_BLOB_SHAPE_MAX];
    int rc = 0;

    if (m->quant_type && (rc = put(w, "quant_type", tensor, m->quant_type)) < 0)
        return rc;
    if (m->n_dims > 0 &&
        (rc = put(w, "logical_shape", tensor, tensor_blob_shape_format(val, sizeof val, m->n_dims, m->shape))) < 0)
        return rc;
    if (m->group_size > 0) {
        snprintf(val, sizeof val, "%d", m->group_size);
        if ((rc = put(w, "group_size", tensor, val)) < 0)
            return rc;
    }
    if (m->gguf_name && (rc = put(w, "gguf_name", tensor, m->gguf_name)) < 0)
        return rc;
    return 0;
}

/* The value of `key` for tensor `name`: its own ("key:<name>"), else for a ".scale" / ".bias"
 * that of the tensor it belongs to, else the blob's ("key"). *own says which. */
static const char *lookup(const st_file *f, const char *key, const char *name, int *own)
{
    char k[KEY_MAX];
    const char *v, *dot = strrchr(name, '.');

    *own = 1;
    snprintf(k, sizeof k, "%s:%s", key, name);
    if ((v = st_meta(f, k)) != NULL)
        return v;
    *own = 0;
    if (dot && (strcmp(dot, ".scale") == 0 || strcmp(dot, ".bias") == 0)) {
        snprintf(k, sizeof k, "%s:%.*s", key, (int)(dot - name), name);
        if ((v = st_meta(f, k)) != NULL)
            return v;
    }
    return st_meta(f, key);
}

int tensor_blob_meta_get(tensor_blob_meta *out, const st_file *f, const st_tensor *t, const char *layer,
                         const char *what)
{
    const char *gs, *ls;
    int own;

    memset(out, 0, sizeof *out);
    out->quant_type = lookup(f, "quant_type", t->name, &own);
    out->gguf_name = lookup(f, "gguf_name", t->name, &own);
    if ((gs = lookup(f, "group_size", t->name, &own)) != NULL) {
        char *end = NULL;
        long long g;
        errno = 0;
        g = strtoll(gs, &end, 10);
        if (errno || end == gs || *end || g <= 0 || g > INT32_MAX)
            return ms_err(MS_EINVALID, "%s: tensor '%s': __metadata__ group_size '%.64s' is not an integer in 1..%d",
                          what, t->name, gs, INT32_MAX);
        out->group_size = (int)g;
    }
    /* A blob-wide logical_shape describes the blob's main tensor only: the one named like the
     * layer, or the only one (a quantized tensor's .scale and .bias have their own shapes). */
    if ((ls = lookup(f, "logical_shape", t->name, &own)) == NULL)
        return 0;
    if (tensor_blob_shape_parse(&out->n_dims, out->shape, ls) < 0)
        return ms_err(MS_EINVALID, "%s: tensor '%s': __metadata__ logical_shape '%.64s' is not a list of integers",
                      what, t->name, ls);
    if (!own && st_count(f) > 1 && layer && strcmp(layer, t->name) != 0)
        out->n_dims = 0;
    return 0;
}
