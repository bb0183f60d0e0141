/* query.c: reading the index: manifests, the model list, tensor listings. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blob/blob.h"
#include "store/store_int.h"

int store_manifest_bytes(store *s, const char *digest, char **out, size_t *len_out)
{
    ms_digest got;
    char *path = NULL, *buf = NULL;
    size_t len = 0;
    int rc;

    *out = NULL;
    if (len_out)
        *len_out = 0;
    if ((rc = blob_path(&path, s->home, digest)) < 0)
        return rc;
    rc = ms_file_read(&buf, &len, path, MANIFEST_MAX_BYTES);
    if (rc == MS_ENOTFOUND) {
        rc = ms_err(MS_ENOTFOUND, "manifest %s not found in the store (%s)", digest, path);
        goto done;
    }
    if (rc < 0)
        goto done;
    /* A manifest is small and everything else is trusted through it, so it is re-hashed on every
     * read: a corrupt manifest must not send the runtime or a push to the wrong blobs. */
    blob_digest_buf(got, buf, len);
    if (strcmp(got, digest) != 0) {
        rc = ms_err(MS_EMISMATCH, "manifest %s: %s: bytes hash to %s", digest, path, got);
        goto done;
    }
    *out = buf;
    buf = NULL;
    if (len_out)
        *len_out = len;
done:
    free(buf);
    free(path);
    return rc;
}

int store_manifest_load(store *s, const char *digest, manifest **out)
{
    char *buf = NULL;
    size_t len = 0;
    int rc;

    *out = NULL;
    if ((rc = store_manifest_bytes(s, digest, &buf, &len)) < 0)
        return rc;
    rc = manifest_parse(out, buf, len, digest);
    free(buf);
    return rc;
}

/* ---------------------------------------------------------------- list */

static int model_cmp(const void *a, const void *b)
{
    char da[NAME_HOST_MAX + 3 * NAME_PART_MAX], db[NAME_HOST_MAX + 3 * NAME_PART_MAX];

    name_display(da, sizeof da, &((const store_entry *)a)->name);
    name_display(db, sizeof db, &((const store_entry *)b)->name);
    return strcmp(da, db);
}

static void copy_col(char *dst, size_t cap, sqlite3_stmt *st, int col)
{
    const char *v = (const char *)sqlite3_column_text(st, col);
    snprintf(dst, cap, "%s", v ? v : "");
}

/* The size counts each blob once per model (a digest listed twice is stored once), taking sizes
 * from the blobs table, where commit recorded each file's size after checking it. */
static int list_row(void *row, sqlite3_stmt *st, void *arg)
{
    store_entry *m = row;

    (void)arg;
    copy_col(m->name.host, sizeof m->name.host, st, 0);
    copy_col(m->name.namespace_, sizeof m->name.namespace_, st, 1);
    copy_col(m->name.model, sizeof m->name.model, st, 2);
    copy_col(m->name.tag, sizeof m->name.tag, st, 3);
    copy_col(m->digest, sizeof m->digest, st, 4);
    m->modified_at = sqlite3_column_int64(st, 5);
    m->size = (uint64_t)sqlite3_column_int64(st, 6);
    return 0;
}

int store_list(store *s, store_entry **out, size_t *n_out)
{
    static const char sql[] =
        "SELECT n.host, n.namespace, n.model, n.tag, n.manifest_digest, n.modified_at, m.size + "
        "  COALESCE((SELECT SUM(b.size) FROM blobs b WHERE b.digest != m.digest AND "
        "    (b.digest = m.config_digest OR "
        "     b.digest IN (SELECT l.digest FROM layers l WHERE l.manifest_digest = m.digest))), 0) "
        "FROM names n JOIN manifests m ON m.digest = n.manifest_digest";
    sqlite3_stmt *st = NULL;
    int rc;

    *out = NULL;
    *n_out = 0;
    if ((rc = store__prepare(s, &st, sql)) < 0)
        return rc;
    if ((rc = store__rows(s, st, out, n_out, sizeof **out, list_row, NULL, "list models")) < 0) {
        free(*out);
        *out = NULL;
        *n_out = 0;
        return rc;
    }
    if (*n_out)
        qsort(*out, *n_out, sizeof **out, model_cmp);
    return 0;
}

/* ---------------------------------------------------------------- tensors */

static void tensor_fields_free(store_tensor *t)
{
    MS_FREE_ALL(t->name, t->dtype, t->shape, t->quant_type, t->blob_digest);
}

void store_tensors_free(store_tensor *t, size_t n)
{
    if (!t)
        return;
    for (size_t i = 0; i < n; i++)
        tensor_fields_free(&t[i]);
    free(t);
}

static int dup_col(char **dst, sqlite3_stmt *st, int col, int nullable)
{
    const char *v = (const char *)sqlite3_column_text(st, col);

    *dst = NULL;
    if (!v && nullable)
        return 0;
    *dst = strdup(v ? v : "");
    return *dst ? 0 : -1;
}

static int tensor_row(void *row, sqlite3_stmt *st, void *arg)
{
    store_tensor *t = row;

    if (dup_col(&t->name, st, 0, 0) < 0 || dup_col(&t->dtype, st, 1, 0) < 0 || dup_col(&t->shape, st, 2, 0) < 0 ||
        dup_col(&t->quant_type, st, 3, 1) < 0 || dup_col(&t->blob_digest, st, 4, 0) < 0) {
        tensor_fields_free(t);   /* the row is not counted: what it holds is freed here */
        return ms_err(MS_ENOMEM, "%s: tensor list: out of memory", (const char *)arg);
    }
    t->group_size = sqlite3_column_int64(st, 5);
    t->offset = (uint64_t)sqlite3_column_int64(st, 6);
    t->nbytes = (uint64_t)sqlite3_column_int64(st, 7);
    return 0;
}

/* A blob listed by several layers of one manifest is listed once, at its first layer. */
int store_tensors_list(store *s, const char *manifest_digest, store_tensor **out, size_t *n_out)
{
    static const char sql[] =
        "SELECT t.name, t.dtype, t.shape, t.quant_type, t.blob_digest, t.group_size, t.offset, t.nbytes "
        "FROM tensors t JOIN (SELECT digest, MIN(idx) AS idx FROM layers WHERE manifest_digest = ?1 "
        "                     GROUP BY digest) l ON t.blob_digest = l.digest "
        "ORDER BY l.idx, t.offset, t.name";
    sqlite3_stmt *st = NULL;
    int rc;

    *out = NULL;
    *n_out = 0;
    if ((rc = store__prepare(s, &st, sql)) < 0)
        return rc;
    sqlite3_bind_text(st, 1, manifest_digest, -1, SQLITE_STATIC);
    if ((rc = store__rows(s, st, out, n_out, sizeof **out, tensor_row, (void *)manifest_digest, "list tensors")) < 0) {
        store_tensors_free(*out, *n_out);
        *out = NULL;
        *n_out = 0;
    }
    return rc;
}
