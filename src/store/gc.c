/* gc.c: removing what no name references (invariant 3). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "blob/blob.h"
#include "store/store_int.h"

/* Live blobs: each named manifest, its config and its layers. The names table points at manifest
 * digests directly, so a manifest blob stays live even if its manifest row were missing. */
#define LIVE_SQL                                                                         \
    "SELECT manifest_digest FROM names "                                                 \
    "UNION SELECT config_digest FROM manifests "                                          \
    "      WHERE digest IN (SELECT manifest_digest FROM names) "                          \
    "UNION SELECT digest FROM layers WHERE manifest_digest IN (SELECT manifest_digest FROM names)"

/* Rows of manifests that no name references, then the blob rows (and through the foreign key,
 * the tensor rows) of blobs that are not live. Layers go with their manifest (ON DELETE CASCADE)
 * but are deleted explicitly so the order does not depend on the foreign_keys pragma. */
static const char sql_prune[] =
    "DELETE FROM layers WHERE manifest_digest NOT IN (SELECT manifest_digest FROM names);"
    "DELETE FROM manifests WHERE digest NOT IN (SELECT manifest_digest FROM names);"
    "DELETE FROM tensors WHERE blob_digest NOT IN (" LIVE_SQL ");"
    "DELETE FROM blobs WHERE digest NOT IN (" LIVE_SQL ");";

/* The live set, sorted by strcmp (UNION's BINARY collation orders ASCII the same way), for
 * bsearch while walking blobs/. */
static int live_load(store *s, ms_digest **out, size_t *n_out)
{
    sqlite3_stmt *st = NULL;
    int rc;

    *out = NULL;
    *n_out = 0;
    if ((rc = store__prepare(s, &st, LIVE_SQL " ORDER BY 1")) < 0)
        return rc;
    if ((rc = store__rows(s, st, out, n_out, sizeof **out, store__row_digest, NULL, "gc: live blobs")) < 0) {
        free(*out);
        *out = NULL;
        *n_out = 0;
        return rc;
    }
    if (*n_out)
        qsort(*out, *n_out, sizeof **out, store__digest_cmp);   /* cheap insurance against collation surprises */
    return 0;
}

/* Index part, in one transaction: read the live set and (unless dry_run) prune the rows. */
static int index_prune(store *s, int dry_run, ms_digest **live, size_t *n_live)
{
    int rc;

    if ((rc = store__begin(s, !dry_run)) < 0)
        return rc;
    if ((rc = live_load(s, live, n_live)) < 0 || (!dry_run && (rc = store__exec(s, sql_prune)) < 0) ||
        (rc = store__commit(s)) < 0) {
        store__rollback(s);
        free(*live);
        *live = NULL;
        *n_live = 0;
        return rc;
    }
    return 0;
}

/* Files after rows: a crash in between leaves unindexed files, which the next gc finds by walking
 * blobs/; the reverse order could leave rows naming files that are gone. */
static int files_remove(store *s, int dry_run, ms_digest *live, size_t n_live, store_gc_cb each,
                        void *ctx, size_t *n_out, uint64_t *bytes_out)
{
    ms_digest *files = NULL;
    char first_msg[1024] = "";
    size_t n_files = 0;
    char *path = NULL;
    int rc, first_rc = 0;

    if ((rc = store__blobs_scan(s, &files, &n_files)) < 0)
        return rc;
    for (size_t i = 0; i < n_files; i++) {
        struct stat st;

        if (n_live && bsearch(files[i], live, n_live, sizeof *live, store__digest_cmp))
            continue;
        free(path);
        path = NULL;
        if ((rc = blob_path(&path, s->home, files[i])) < 0)
            goto done;
        if (lstat(path, &st) < 0) {
            if (errno == ENOENT)
                continue;
            rc = ms_err_os("%s: stat", path);
            goto done;
        }
        /* Not a file gc wrote (a stray directory, a FIFO someone made): not a blob, so not
         * ours to remove; stopping here would leave every later blob behind for good. */
        if (!S_ISREG(st.st_mode))
            continue;
        /* One blob that cannot go (permissions, I/O) must not keep the others: go on, report
         * the first failure at the end. */
        if (!dry_run && unlink(path) < 0 && errno != ENOENT) {
            if (!first_rc) {
                first_rc = ms_err_os("%s: remove", path);
                snprintf(first_msg, sizeof first_msg, "%s", ms_err_msg());
            }
            continue;
        }
        if (each)
            each(ctx, files[i], (uint64_t)st.st_size);
        (*n_out)++;
        *bytes_out += (uint64_t)st.st_size;
    }
    if (first_rc)
        rc = ms_err(first_rc, "%s", first_msg);
done:
    free(path);
    free(files);
    return rc;
}

int store_gc(store *s, int dry_run, store_gc_cb each, void *ctx, size_t *n_out, uint64_t *bytes_out)
{
    ms_digest *live = NULL;
    size_t n_live = 0, n = 0;
    uint64_t bytes = 0;
    int rc, removed = 0;

    if (n_out)
        *n_out = 0;
    if (bytes_out)
        *bytes_out = 0;
    /* flock would convert this handle's own shared lock to exclusive, silently breaking the
     * caller's in-progress write; refuse instead. */
    if (s->n_write > 0)
        return ms_err(MS_EBUSY, "%s: gc: this store handle is in the middle of a write", s->home);
    if ((rc = store__writable(s, "gc")) < 0)
        return rc;
    if ((rc = store__lock_exclusive(s)) < 0)
        return rc;
    s->full = 0;
    rc = index_prune(s, dry_run, &live, &n_live);
    if (store__retry_full(s, rc))   /* a full disk: once more, in the reserve's space */
        rc = index_prune(s, dry_run, &live, &n_live);
    if (rc < 0)
        goto done;
    if ((rc = files_remove(s, dry_run, live, n_live, each, ctx, &n, &bytes)) < 0)
        goto done;
    /* Under the exclusive lock no writer of this store is active, yet blob_tmp_clean still spares
     * files whose writer pid is alive: a process may write into tmp/ without the lock (a download
     * that has not reached its first blob yet). */
    if (!dry_run && ((rc = blob_tmp_clean(s->home, &removed)) < 0 || (rc = blob_partial_clean(s->home, STORE_GC_PARTIAL_AGE_S)) < 0))
        goto done;
    /* Blobs are gone, so there may be room again for what rm and gc need next time. */
    if (!dry_run)
        store__reserve_make(s->home);
    rc = 0;
    if (n_out)
        *n_out = n;
    if (bytes_out)
        *bytes_out = bytes;
done:
    flock(s->lock_fd, LOCK_UN);
    free(live);
    return rc;
}
