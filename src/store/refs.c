/* refs.c: index lookups for the registry: which manifests reference a blob (and freeing one
 * that none does), and registry_blobs
 * (which blobs a registry repository holds, for cross-repository mounts). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blob/blob.h"

#include "store/store_int.h"

int store_blob_referenced(store *s, const char *digest)
{
    sqlite3_stmt *st = NULL;
    int rc;

    if ((rc = store__prepare(s, &st,
                             "SELECT 1 FROM layers WHERE digest = ?1 UNION ALL "
                             "SELECT 1 FROM manifests WHERE config_digest = ?1 LIMIT 1")) < 0)
        return rc;
    sqlite3_bind_text(st, 1, digest, -1, SQLITE_STATIC);
    rc = sqlite3_step(st);
    rc = rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : store__db_err(s, "look up blob references");
    sqlite3_finalize(st);
    return rc;
}

int store_blob_release(store *s, const char *digest)
{
    char *path = NULL;
    int rc;

    /* when in doubt (an error), keep the blob: gc removes it later if it is unused */
    if (store__writable(s, "release a blob") < 0 || store_blob_referenced(s, digest) != 0 ||
        blob_path(&path, s->home, digest) < 0) {
        ms_err_clear();
        return 0;
    }
    rc = unlink(path) == 0;
    free(path);
    return rc;
}

int store_manifest_find_layer(store *s, const char *media_type, const char *layer_name, ms_digest digest_out)
{
    sqlite3_stmt *st = NULL;
    int rc;

    digest_out[0] = '\0';
    if ((rc = store__prepare(s, &st, "SELECT manifest_digest FROM layers WHERE media_type = ?1 AND name = ?2 LIMIT 1")) < 0)
        return rc;
    sqlite3_bind_text(st, 1, media_type, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, layer_name, -1, SQLITE_STATIC);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW && sqlite3_column_text(st, 0)) {
        snprintf(digest_out, sizeof(ms_digest), "%s", (const char *)sqlite3_column_text(st, 0));
        rc = 1;
    } else {
        rc = rc == SQLITE_DONE || rc == SQLITE_ROW ? 0 : store__db_err(s, "look up layers");
    }
    sqlite3_finalize(st);
    return rc;
}

int store__registry_blob_insert(store *s, const char *host, const char *repo, const char *digest)
{
    sqlite3_stmt *st = NULL;
    int rc;

    if ((rc = store__prepare(s, &st, "INSERT OR IGNORE INTO registry_blobs(host, repo, digest) VALUES(?1, ?2, ?3)")) < 0)
        return rc;
    sqlite3_bind_text(st, 1, host, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, repo, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, digest, -1, SQLITE_STATIC);
    rc = sqlite3_step(st) == SQLITE_DONE ? 0 : store__db_err(s, "insert registry blob");
    sqlite3_finalize(st);
    return rc;
}

int store_registry_blob_record(store *s, const char *host, const char *repo, const char *digest)
{
    int rc;

    if ((rc = store__writable(s, "record a registry blob")) < 0)
        return rc;
    return store__registry_blob_insert(s, host, repo, digest);
}

int store_registry_blob_find(store *s, const char *host, const char *not_repo, const char *digest, char *repo_out,
                             size_t len)
{
    sqlite3_stmt *st = NULL;
    int rc;

    repo_out[0] = '\0';
    if (s->schema == 1)   /* a read-only store from before registry_blobs: none recorded */
        return 0;
    if ((rc = store__prepare(s, &st,
                             "SELECT repo FROM registry_blobs WHERE host = ?1 AND digest = ?2 AND repo != ?3 LIMIT 1")) < 0)
        return rc;
    sqlite3_bind_text(st, 1, host, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, digest, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, not_repo, -1, SQLITE_STATIC);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW && sqlite3_column_text(st, 0)) {
        snprintf(repo_out, len, "%s", (const char *)sqlite3_column_text(st, 0));
        rc = 1;
    } else {
        rc = rc == SQLITE_DONE || rc == SQLITE_ROW ? 0 : store__db_err(s, "look up registry blobs");
    }
    sqlite3_finalize(st);
    return rc;
}
