/* commit.c: recording a model (manifest, layers, tensors, name) in the index. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "blob/blob.h"
#include "format/format.h"
#include "store/store_int.h"

#define WHERE_MAX 512

/* "config" or "layer 3 'model.embed_tokens.weight'" (the media type when the layer has no name). */
static void layer_where(char *buf, size_t cap, const manifest *m, const manifest_layer *l)
{
    if (l == &m->config)
        snprintf(buf, cap, "config");
    else
        snprintf(buf, cap, "layer %zu '%s'", (size_t)(l - m->layers), l->name ? l->name : l->media_type);
}

/* A blob this transaction added (sorted `added`, n_added of them) is known with its size;
 * only the others are looked up on disk: each referenced blob is checked once. */
static int blob_check(store *s, const manifest *m, const manifest_layer *l, const store__blob_ref *added,
                      size_t n_added)
{
    store__blob_ref key;
    const store__blob_ref *hit;
    char where[WHERE_MAX];
    uint64_t size = 0;

    snprintf(key.digest, sizeof key.digest, "%s", l->digest);
    hit = n_added ? bsearch(&key, added, n_added, sizeof *added, store__digest_cmp) : NULL;
    layer_where(where, sizeof where, m, l);
    if (hit)
        size = hit->size;
    else if (!blob_exists(s->home, l->digest, &size))
        return ms_err(MS_ENOTFOUND, "manifest: %s: blob %s is not in the store", where, l->digest);
    if (size != l->size)
        return ms_err(MS_EMISMATCH, "manifest: %s: blob %s has %llu bytes, the manifest says %llu", where,
                      l->digest, (unsigned long long)size, (unsigned long long)l->size);
    return 0;
}

/* Invariant 2 is checked before anything is written, so a refused commit leaves no trace, not
 * even the manifest blob. */
int store__blobs_check(store *s, const manifest *m, const store__blob_ref *added, size_t n_added)
{
    int rc = blob_check(s, m, &m->config, added, n_added);

    for (size_t i = 0; rc == 0 && i < m->n_layers; i++)
        rc = blob_check(s, m, &m->layers[i], added, n_added);
    return rc;
}

static int step_done(store *s, sqlite3_stmt *st, const char *what)
{
    int rc = sqlite3_step(st) == SQLITE_DONE ? 0 : store__db_err(s, what);

    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return rc;
}

/* ---------------------------------------------------------------- tensors */

/* The rows of a tensor layer: what tensor_blob_meta_get reads; the shape is the logical one
 * when the tensor has one, else its safetensors shape. */
static int tensors_insert(store *s, sqlite3_stmt *ins, const manifest_layer *l)
{
    blob_view v = { 0 };
    st_file *f = NULL;
    int rc;

    if ((rc = blob_open(&v, s->home, l->digest)) < 0)
        return rc;
    if ((rc = st_parse(&f, v.data, v.size, v.size, ST_HEADER_ONLY, l->digest)) < 0)
        goto done;
    for (size_t i = 0; i < st_count(f); i++) {
        const st_tensor *t = st_at(f, i);
        char shape[TENSOR_BLOB_SHAPE_MAX];
        tensor_blob_meta tm;

        if ((rc = tensor_blob_meta_get(&tm, f, t, l->name, l->digest)) < 0)
            goto done;
        if (tm.n_dims)
            tensor_blob_shape_format(shape, sizeof shape, tm.n_dims, tm.shape);
        else
            tensor_blob_shape_format(shape, sizeof shape, t->n_dims, t->shape);
        sqlite3_bind_text(ins, 1, l->digest, -1, SQLITE_STATIC);
        sqlite3_bind_text(ins, 2, t->name, -1, SQLITE_STATIC);
        sqlite3_bind_text(ins, 3, st_dtype_name(t->dtype), -1, SQLITE_STATIC);
        sqlite3_bind_text(ins, 4, shape, -1, SQLITE_TRANSIENT);
        if (tm.quant_type)
            sqlite3_bind_text(ins, 5, tm.quant_type, -1, SQLITE_STATIC);
        else
            sqlite3_bind_null(ins, 5);
        sqlite3_bind_int64(ins, 6, tm.group_size);
        sqlite3_bind_int64(ins, 7, (sqlite3_int64)t->offset);
        sqlite3_bind_int64(ins, 8, (sqlite3_int64)t->nbytes);
        if ((rc = step_done(s, ins, "insert tensor")) < 0)
            goto done;
    }
done:
    st_free(f);
    blob_close(&v);
    return rc;
}

static int tensors_known(store *s, sqlite3_stmt *q, const char *digest, int *known)
{
    int rc = 0;

    sqlite3_bind_text(q, 1, digest, -1, SQLITE_STATIC);
    if (sqlite3_step(q) == SQLITE_ROW)
        *known = sqlite3_column_int(q, 0);
    else
        rc = store__db_err(s, "look up tensors");
    sqlite3_reset(q);
    sqlite3_clear_bindings(q);
    return rc;
}

/* ---------------------------------------------------------------- rows */

enum { Q_BLOB, Q_MANIFEST, Q_LAYER, Q_TENSOR, Q_KNOWN, Q_COUNT };
static const char *const sql_of[Q_COUNT] = {
    "INSERT INTO blobs(digest, size, media_type) VALUES (?1, ?2, ?3) ON CONFLICT(digest) DO NOTHING",
    "INSERT INTO manifests(digest, config_digest, media_type, size, created_at) VALUES (?1, ?2, ?3, ?4, ?5) "
    "ON CONFLICT(digest) DO NOTHING",
    "INSERT INTO layers(manifest_digest, idx, digest, media_type, size, name) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    "INSERT INTO tensors(blob_digest, name, dtype, shape, quant_type, group_size, offset, nbytes) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT(blob_digest, name) DO NOTHING",
    "SELECT EXISTS(SELECT 1 FROM tensors WHERE blob_digest = ?1)",
};

static int blob_row(store *s, sqlite3_stmt *st, const char *digest, uint64_t size, const char *media_type)
{
    sqlite3_bind_text(st, 1, digest, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, (sqlite3_int64)size);
    sqlite3_bind_text(st, 3, media_type, -1, SQLITE_STATIC);
    return step_done(s, st, "insert blob");
}

static int layer_rows(store *s, sqlite3_stmt **q, const manifest *m, const char *digest)
{
    int rc = 0;

    for (size_t i = 0; rc == 0 && i < m->n_layers; i++) {
        const manifest_layer *l = &m->layers[i];

        sqlite3_bind_text(q[Q_LAYER], 1, digest, -1, SQLITE_STATIC);
        sqlite3_bind_int64(q[Q_LAYER], 2, (sqlite3_int64)i);
        sqlite3_bind_text(q[Q_LAYER], 3, l->digest, -1, SQLITE_STATIC);
        sqlite3_bind_text(q[Q_LAYER], 4, l->media_type, -1, SQLITE_STATIC);
        sqlite3_bind_int64(q[Q_LAYER], 5, (sqlite3_int64)l->size);
        if (l->name)
            sqlite3_bind_text(q[Q_LAYER], 6, l->name, -1, SQLITE_STATIC);
        rc = step_done(s, q[Q_LAYER], "insert layer");
    }
    return rc;
}

/* Tensor rows describe a blob, not a manifest: a blob that another model already brought in is
 * not parsed again. */
static int tensor_rows(store *s, sqlite3_stmt **q, const manifest *m)
{
    int rc = 0;

    for (size_t i = 0; rc == 0 && i < m->n_layers; i++) {
        const manifest_layer *l = &m->layers[i];
        int known = 0;

        if (strcmp(l->media_type, MT_TENSOR) != 0)
            continue;
        if ((rc = tensors_known(s, q[Q_KNOWN], l->digest, &known)) < 0 || known)
            continue;
        if ((rc = tensors_insert(s, q[Q_TENSOR], l)) < 0) {
            char where[WHERE_MAX];
            layer_where(where, sizeof where, m, l);
            rc = ms_err_ctx("manifest: %s", where);
        }
    }
    return rc;
}

/* Every row of the commit; the caller holds the transaction. */
int store__model_rows(store *s, const manifest *m, const char *digest, size_t len, const model_name *name)
{
    const char *mt = m->media_type ? m->media_type : MT_OCI_MANIFEST;
    sqlite3_stmt *q[Q_COUNT] = { 0 };
    int rc = 0;

    for (int i = 0; rc == 0 && i < Q_COUNT; i++)
        rc = store__prepare(s, &q[i], sql_of[i]);
    if (rc < 0)
        goto done;
    if ((rc = blob_row(s, q[Q_BLOB], digest, len, mt)) < 0 ||
        (rc = blob_row(s, q[Q_BLOB], m->config.digest, m->config.size, m->config.media_type)) < 0)
        goto done;
    for (size_t i = 0; i < m->n_layers; i++)
        if ((rc = blob_row(s, q[Q_BLOB], m->layers[i].digest, m->layers[i].size, m->layers[i].media_type)) < 0)
            goto done;
    sqlite3_bind_text(q[Q_MANIFEST], 1, digest, -1, SQLITE_STATIC);
    sqlite3_bind_text(q[Q_MANIFEST], 2, m->config.digest, -1, SQLITE_STATIC);
    sqlite3_bind_text(q[Q_MANIFEST], 3, mt, -1, SQLITE_STATIC);
    sqlite3_bind_int64(q[Q_MANIFEST], 4, (sqlite3_int64)len);
    sqlite3_bind_int64(q[Q_MANIFEST], 5, (sqlite3_int64)time(NULL));
    if ((rc = step_done(s, q[Q_MANIFEST], "insert manifest")) < 0)
        goto done;
    /* The same manifest committed again (a re-import, a second tag) already has its layer rows. */
    if (sqlite3_changes(s->db) == 1 && (rc = layer_rows(s, q, m, digest)) < 0)
        goto done;
    if ((rc = tensor_rows(s, q, m)) < 0)
        goto done;
    rc = store__name_set(s, name, digest);
done:
    for (int i = 0; i < Q_COUNT; i++)
        sqlite3_finalize(q[i]);
    return rc;
}
