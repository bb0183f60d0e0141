/* store_int.h: helpers shared by the .c files of src/store only (tests may use them too). */
#ifndef MSTORE_STORE_INT_H
#define MSTORE_STORE_INT_H

#include <sqlite3.h>

#include "store/store.h"

struct store {
    char *home;
    char *db_path;    /* <home>/index.db, for messages */
    sqlite3 *db;
    int lock_fd;      /* <home>/lock, open for the handle's whole life */
    int n_write;      /* open store_txns (store_write_begin depth); the shared lock is held while > 0 */
    int readonly;     /* opened read-only (store_open): 1 no write access, 2 a full disk; every
                       * write is refused by store__writable */
    int to_free;      /* opened by store_open_to_free: may give up the space reserve (space.c) */
    int schema;       /* a read-only handle's PRAGMA user_version (store.c SCHEMA_READABLE); 0 when migrated */
    int full;         /* the last SQLite failure was a full disk (store__db_err) */
    store_wait_fn wait_fn; /* told when taking the lock exclusive has to wait (store_lock_wait_notify) */
    void *wait_ctx;
};

/* The shared write lock (invariant 4), taken by store_txn_begin; nested calls are fine. MS_EIO
 * on a read-only store. */
int store_write_begin(store *s);
void store_write_end(store *s);
/* The lock exclusive (gc), telling s->wait_fn who holds it when it must wait. MS_EIO. */
int store__lock_exclusive(store *s);
/* The raw handle (tests). */
struct sqlite3 *store_db(store *s);
/* store_txn_begin + store_txn_commit: a model whose blobs are all stored already (tests). */
int store_model_commit(store *s, const model_name *name, const char *manifest_json, size_t len,
                       ms_digest digest_out);
/* commit.c: every row of a model (blobs, manifest, layers, tensors, name -> it); the caller
 * holds the SQLite transaction and has checked invariant 2. */
int store__model_rows(store *s, const manifest *m, const char *digest, size_t len, const model_name *name);
/* commit.c: invariant 2 for a manifest about to be committed: every blob it references exists
 * with the manifest's size. Those in `added` (sorted by digest; a store_txn's own blobs) are
 * taken as they are; the others are looked up on disk. MS_ENOTFOUND, MS_EMISMATCH. */
typedef struct store__blob_ref {
    ms_digest digest;   /* first: store__digest_cmp compares it */
    uint64_t size;
} store__blob_ref;
int store__blobs_check(store *s, const manifest *m, const store__blob_ref *added, size_t n_added);
/* refs.c: the registry_blobs row; the caller may hold a transaction. */
int store__registry_blob_insert(store *s, const char *host, const char *repo, const char *digest);

/* The space reserve (space.c): <home>/reserve, given up on a full disk by work that frees space. */
#define STORE_RESERVE_BYTES (4L << 20)
/* Make <home>/reserve if it is missing and the disk has room; best effort, no error. */
void store__reserve_make(const char *home);
/* Delete it; 1 when there was one (a retry can use its space), else 0. */
int store__reserve_release(store *s);
/* After a failure `rc` of work on a store_open_to_free handle: when the disk was full
 * (s->full) and the reserve could be given up, 1 (retry once), else 0. */
int store__retry_full(store *s, int rc);

/* 0 when `s` may write; else MS_EIO "the store is read-only" naming `what`. */
int store__writable(store *s, const char *what);

/* Set the message from SQLite's last error: "<home>/index.db: <what>: <sqlite message>".
 * MS_EBUSY for busy/locked, MS_EIO for I/O, full disk and permissions, else MS_ERROR.
 * Sets s->full when the cause is a full disk (SQLITE_FULL, or an OS call's ENOSPC / EDQUOT). */
int store__db_err(store *s, const char *what);
int store__exec(store *s, const char *sql);
int store__prepare(store *s, sqlite3_stmt **out, const char *sql);
/* Step `st` (prepared and bound) to its end, one element of `size` bytes per row in a growing
 * array (zeroed, then written by `fill`: 0 keeps the row, 1 skips it, < 0 fails with that code).
 * Finalizes `st`. On failure *rows still holds the *n_rows rows filled, for the caller to free
 * as it frees a result; `what` names the query in SQLite's errors. */
typedef int (*store_row_fn)(void *row, sqlite3_stmt *st, void *arg);
int store__rows(store *s, sqlite3_stmt *st, void *rows, size_t *n_rows, size_t size, store_row_fn fill, void *arg,
                const char *what);
/* A store_row_fn for one ms_digest in column 0; arg NULL skips a row whose text cannot be a
 * digest, arg non-NULL keeps it as written (truncated) for the caller's own check. */
int store__row_digest(void *row, sqlite3_stmt *st, void *arg);
/* Transactions. store__rollback is safe to call when none is open. */
int store__begin(store *s, int immediate);
int store__commit(store *s);
void store__rollback(store *s);
/* Binds host, namespace, model, tag to parameters first..first+3. */
void store__name_bind(sqlite3_stmt *st, int first, const model_name *n);
/* Point `name` at `digest` (insert or move), modified_at = now. Call inside a transaction. */
int store__name_set(store *s, const model_name *name, const char *digest);

/* The digests ("sha256:<hex>") of every file in <home>/blobs named sha256-<64 lowercase hex>,
 * sorted by strcmp. Other files are ignored. *out malloc'd. */
int store__blobs_scan(store *s, ms_digest **out, size_t *n_out);
int store__digest_cmp(const void *a, const void *b);   /* for qsort/bsearch over ms_digest */

#endif
