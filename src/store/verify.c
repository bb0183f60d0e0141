/* verify.c: re-hashing blobs against their names. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "blob/blob.h"
#include "store/store_int.h"

typedef struct verify_run {
    store *s;
    sqlite3_stmt *mark;   /* UPDATE blobs SET verified_at */
    store_verify_cb bad;
    void *ctx;
    size_t n_checked, n_bad;
} verify_run;

static void report(verify_run *r, const char *digest, const char *message)
{
    r->n_bad++;
    if (r->bad)
        r->bad(r->ctx, digest, message);
}

/* One blob. A failing blob is reported and the run goes on; only running out of memory or a
 * broken index stops it. verified_at is written per blob, in its own autocommit transaction, so
 * an interrupted verify of a large store keeps what it established. */
static int verify_one(verify_run *r, const char *digest, int vanished_ok)
{
    int rc = blob_verify(r->s->home, digest);

    if (rc == MS_ENOMEM)
        return rc;
    if (rc == MS_ENOTFOUND && vanished_ok)
        return 0;   /* listed in blobs/ a moment ago: removed by a gc since, not a failure */
    r->n_checked++;
    if (rc == MS_ENOTFOUND) {
        report(r, digest, "missing");
        return 0;
    }
    if (rc < 0) {
        report(r, digest, ms_err_msg());
        return 0;
    }
    if (r->s->readonly)
        return 0;   /* the check holds; only its date is not recorded */
    sqlite3_bind_int64(r->mark, 1, (sqlite3_int64)time(NULL));
    sqlite3_bind_text(r->mark, 2, digest, -1, SQLITE_STATIC);
    rc = sqlite3_step(r->mark) == SQLITE_DONE ? 0 : store__db_err(r->s, "record verification");
    sqlite3_reset(r->mark);
    sqlite3_clear_bindings(r->mark);
    return rc;
}

/* The index records what a manifest references (written from its parse at commit), so a model
 * whose manifest blob is itself corrupt can still have its other blobs checked. */
static int verify_model(verify_run *r, const model_name *name)
{
    static const char sql[] =
        "SELECT digest, MIN(ord) FROM ("
        "  SELECT ?1 AS digest, -2 AS ord"
        "  UNION ALL SELECT config_digest, -1 FROM manifests WHERE digest = ?1"
        "  UNION ALL SELECT digest, idx FROM layers WHERE manifest_digest = ?1"
        ") GROUP BY digest ORDER BY 2";
    sqlite3_stmt *st = NULL;
    ms_digest *list = NULL;
    ms_digest digest;
    size_t n = 0;
    int rc;

    if ((rc = store_name_resolve(r->s, name, digest)) < 0)
        return rc;
    if ((rc = store__prepare(r->s, &st, sql)) < 0)
        return rc;
    /* Collected first: the statement must not stay open across the verified_at writes. A row
     * that is no digest is kept, for verify_one to report. */
    sqlite3_bind_text(st, 1, digest, -1, SQLITE_STATIC);
    rc = store__rows(r->s, st, &list, &n, sizeof *list, store__row_digest, r, "verify: list blobs");
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = verify_one(r, list[i], 0);
    free(list);
    return rc;
}

/* Every file in blobs/, then every live blob that has no file (which the walk cannot see). */
static int verify_all(verify_run *r)
{
    static const char sql_live[] =
        "SELECT manifest_digest FROM names "
        "UNION SELECT config_digest FROM manifests WHERE digest IN (SELECT manifest_digest FROM names) "
        "UNION SELECT digest FROM layers WHERE manifest_digest IN (SELECT manifest_digest FROM names) "
        "ORDER BY 1";
    ms_digest *files = NULL;
    sqlite3_stmt *st = NULL;
    size_t n = 0;
    int rc, step;

    if ((rc = store__blobs_scan(r->s, &files, &n)) < 0)
        return rc;
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = verify_one(r, files[i], 1);
    if (rc < 0 || (rc = store__prepare(r->s, &st, sql_live)) < 0)
        goto done;
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        const char *d = (const char *)sqlite3_column_text(st, 0);

        uint64_t size = 0;

        /* A file that exists now was committed after the walk began: not a failure. */
        if (!d || (n && bsearch(d, files, n, sizeof *files, store__digest_cmp)) ||
            blob_exists(r->s->home, d, &size))
            continue;
        r->n_checked++;
        report(r, d, "missing");
    }
    if (step != SQLITE_DONE)
        rc = store__db_err(r->s, "verify: live blobs");
done:
    sqlite3_finalize(st);
    free(files);
    return rc;
}

int store_verify(store *s, const model_name *name, store_verify_cb bad, void *ctx, size_t *n_checked_out)
{
    verify_run r = { .s = s, .bad = bad, .ctx = ctx };
    int rc;

    if (n_checked_out)
        *n_checked_out = 0;
    if ((rc = store__prepare(s, &r.mark, "UPDATE blobs SET verified_at = ?1 WHERE digest = ?2")) < 0)
        return rc;
    rc = name ? verify_model(&r, name) : verify_all(&r);
    sqlite3_finalize(r.mark);
    if (n_checked_out)
        *n_checked_out = r.n_checked;
    if (rc < 0)
        return rc;
    if (r.n_bad)
        return ms_err(MS_EMISMATCH, "%zu of %zu blobs failed verification", r.n_bad, r.n_checked);
    return 0;
}
