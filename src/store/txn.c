/* txn.c: the write transaction (store.h, "Writing: store_txn"): the lock, the blob batch and
 * the index commit, in the one order that keeps invariants 2 and 4. */
#include <assert.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/store_int.h"

typedef struct txn_seen {
    char *host, *repo;
    ms_digest digest;
} txn_seen;

struct store_txn {
    store *s;
    blob_batch *batch;
    pthread_mutex_t mu;   /* guards `added`: store_txn_blob_adopt runs on download threads */
    store__blob_ref *added;   /* every blob this transaction wrote or adopted; sorted at commit */
    size_t n_added, cap_added;
    txn_seen *seen;       /* registry_blobs rows for the commit */
    size_t n_seen, cap_seen;
    pthread_t owner;      /* the one thread that may call anything but store_txn_blob_adopt */
};

/* store.h's contract: a transaction is used by the thread that began it, except adopt. */
#define TXN_OWNED(t) assert((t) && (t)->batch && pthread_equal((t)->owner, pthread_self()))

int store_txn_begin(store_txn **out, store *s)
{
    store_txn *t = calloc(1, sizeof *t);
    int rc;

    *out = NULL;
    if (!t)
        return ms_err(MS_ENOMEM, "out of memory");
    if ((rc = store_write_begin(s)) < 0) {
        free(t);
        return rc;
    }
    t->s = s;
    t->owner = pthread_self();
    pthread_mutex_init(&t->mu, NULL);
    if ((rc = blob_batch_new(&t->batch, s->home)) < 0) {
        store_txn_abort(t);
        return rc;
    }
    *out = t;
    return 0;
}

store *store_txn_store(const store_txn *t) { return t->s; }

static int added_push(store_txn *t, const char *digest, uint64_t size)
{
    int rc = 0;

    pthread_mutex_lock(&t->mu);
    if (t->n_added == t->cap_added) {
        size_t cap = t->cap_added ? t->cap_added * 2 : 64;
        store__blob_ref *n = realloc(t->added, cap * sizeof *n);
        if (!n) {
            rc = ms_err(MS_ENOMEM, "out of memory");
            goto done;
        }
        t->added = n;
        t->cap_added = cap;
    }
    snprintf(t->added[t->n_added].digest, sizeof t->added[0].digest, "%s", digest);
    t->added[t->n_added++].size = size;
done:
    pthread_mutex_unlock(&t->mu);
    return rc;
}

int store_txn_blob_open(store_txn *t, blob_writer **out)
{
    TXN_OWNED(t);
    return blob_writer_open(out, t->s->home);
}

int store_blob_writer_open(store *s, blob_writer **out)
{
    int rc;

    *out = NULL;
    if ((rc = store__writable(s, "write")) < 0)
        return rc;
    return blob_writer_open(out, s->home);
}

int store_txn_blob_add(store_txn *t, ms_digest digest_out, uint64_t *size_out, blob_writer *w, const char *expect)
{
    uint64_t size = blob_writer_size(w);
    int rc;

    TXN_OWNED(t);
    /* The batch drops bytes already stored intact or already added: both still count as added,
     * since the lock keeps the stored copy and the commit lands the pending one. */
    if ((rc = blob_batch_add(t->batch, digest_out, w, expect)) < 0)
        return rc;
    if (size_out)
        *size_out = size;
    return added_push(t, digest_out, size);
}

int store_txn_blob_put(store_txn *t, ms_digest digest_out, const void *buf, size_t len)
{
    blob_writer *w = NULL;
    int rc;

    if ((rc = store_txn_blob_open(t, &w)) < 0)
        return rc;
    if ((rc = blob_writer_write(w, buf, len)) < 0) {
        blob_writer_abort(w);
        return rc;
    }
    return store_txn_blob_add(t, digest_out, NULL, w, NULL);
}

int store_txn_blob_put_file(store_txn *t, ms_digest digest_out, uint64_t *size_out, const char *path)
{
    blob_writer *w = NULL;
    int fd, rc;

    if ((fd = ms_open_regular(path)) < 0)
        return fd;
    if ((rc = store_txn_blob_open(t, &w)) == 0 && (rc = blob_writer_write_fd(w, fd, path, UINT64_MAX)) == 0) {
        close(fd);
        return store_txn_blob_add(t, digest_out, size_out, w, NULL);
    }
    blob_writer_abort(w);
    close(fd);
    return rc;
}

int store_txn_blob_adopt(store_txn *t, ms_digest digest_out, const char *path, const char *expect, const char *computed)
{
    struct stat st;
    int rc;

    assert(t && t->batch && path);
    /* The file is complete and the caller's own (blob.h): its size now is the blob's. */
    if (stat(path, &st) < 0)
        return ms_err_os("%s", path);
    rc = computed ? blob_adopt_hashed(digest_out, t->s->home, path, expect, computed)
                  : blob_adopt(digest_out, t->s->home, path, expect);
    return rc < 0 ? rc : added_push(t, digest_out, (uint64_t)st.st_size);
}

int store_txn_flush(store_txn *t)
{
    TXN_OWNED(t);
    return blob_batch_commit(t->batch);
}

int store_txn_registry_blob(store_txn *t, const char *host, const char *repo, const char *digest)
{
    txn_seen *e;

    TXN_OWNED(t);
    if (t->n_seen == t->cap_seen) {
        size_t cap = t->cap_seen ? t->cap_seen * 2 : 16;
        txn_seen *n = realloc(t->seen, cap * sizeof *n);
        if (!n)
            return ms_err(MS_ENOMEM, "out of memory");
        t->seen = n;
        t->cap_seen = cap;
    }
    e = &t->seen[t->n_seen];
    if (!(e->host = strdup(host)) || !(e->repo = strdup(repo))) {
        free(e->host);
        return ms_err(MS_ENOMEM, "out of memory");
    }
    snprintf(e->digest, sizeof e->digest, "%s", digest);
    t->n_seen++;
    return 0;
}

/* ---------------------------------------------------------------- commit */

/* The commit's check of invariant 2 (store__blobs_check) looks blobs up in t->added. */
static void added_sort(store_txn *t)
{
    if (t->n_added)
        qsort(t->added, t->n_added, sizeof *t->added, store__digest_cmp);
}

int store_txn_commit(store_txn *t, const model_name *name, const manifest *m, ms_digest digest_out)
{
    ms_digest digest;
    char *bytes = NULL;
    store *s = t->s;
    size_t len = 0;
    int rc;

    TXN_OWNED(t);
    assert(name && m);
    if (digest_out)
        digest_out[0] = '\0';
    /* A manifest built in memory has every field checked by its builders but one: a config
     * never set. */
    if (!blob_digest_valid(m->config.digest)) {
        rc = ms_err(MS_EINVALID, "manifest: config is missing");
        goto done;
    }
    if ((rc = manifest_bytes(&bytes, &len, m)) < 0)
        goto done;
    added_sort(t);
    if ((rc = store__blobs_check(s, m, t->added, t->n_added)) < 0)
        goto done;
    /* The manifest blob joins the batch: one sync makes every blob of the model durable, and
     * the renames into blobs/ come after it, before any row names them. */
    if ((rc = store_txn_blob_put(t, digest, bytes, len)) < 0 || (rc = blob_batch_commit(t->batch)) < 0)
        goto done;
    if ((rc = store__begin(s, 1)) < 0)
        goto done;
    rc = store__model_rows(s, m, digest, len, name);
    for (size_t i = 0; rc == 0 && i < t->n_seen; i++)
        rc = store__registry_blob_insert(s, t->seen[i].host, t->seen[i].repo, t->seen[i].digest);
    if (rc < 0 || (rc = store__commit(s)) < 0) {
        store__rollback(s);
        goto done;
    }
    if (digest_out)
        snprintf(digest_out, sizeof(ms_digest), "%s", digest);
done:
    free(bytes);
    store_txn_abort(t);   /* after a commit there is nothing left to remove: it only frees */
    return rc;
}

void store_txn_abort(store_txn *t)
{
    if (!t)
        return;
    blob_batch_free(t->batch);
    if (t->s)
        store_write_end(t->s);
    pthread_mutex_destroy(&t->mu);
    for (size_t i = 0; i < t->n_seen; i++) {
        free(t->seen[i].host);
        free(t->seen[i].repo);
    }
    MS_FREE_ALL(t->seen, t->added, t);
}

int store_model_commit(store *s, const model_name *name, const char *manifest_json, size_t len, ms_digest digest_out)
{
    store_txn *t = NULL;
    manifest *m = NULL;
    int rc;

    if (digest_out)
        digest_out[0] = '\0';
    if ((rc = manifest_parse(&m, manifest_json, len, "manifest")) < 0)
        return rc;
    if ((rc = store_txn_begin(&t, s)) == 0)
        rc = store_txn_commit(t, name, m, digest_out);
    manifest_free(m);
    return rc;
}
