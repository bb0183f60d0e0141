/* batch.c: many blobs made durable with one syncfs instead of one fsync each (blob.h). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blob/blob_int.h"

typedef struct pending {
    ms_digest digest;
    char *tmp_path;
} pending;

struct blob_batch {
    char *home;
    pending *items;
    size_t n, cap;
};

int blob_batch_new(blob_batch **out, const char *home)
{
    blob_batch *b = calloc(1, sizeof *b);

    *out = NULL;
    if (!b || !(b->home = strdup(home))) {
        free(b);
        return ms_err(MS_ENOMEM, "out of memory");
    }
    *out = b;
    return 0;
}

const char *blob_batch_home(const blob_batch *b) { return b->home; }

int blob_batch_add(blob_batch *b, ms_digest digest_out, blob_writer *w, const char *expect)
{
    ms_digest digest;
    pending *p;

    blob_hash_final(digest, w->hash);
    w->hash = NULL;
    if (expect && strcmp(expect, digest) != 0) {
        int rc = ms_err(MS_EMISMATCH, "digest mismatch: expected %s, got %s (%llu bytes)", expect, digest,
                        (unsigned long long)w->size);
        blob_writer_abort(w);
        return rc;
    }
    memcpy(digest_out, digest, sizeof digest);
    for (size_t i = 0; i < b->n; i++)
        if (strcmp(b->items[i].digest, digest) == 0) {
            blob_writer_abort(w);
            return 0;
        }
    if (blob_intact(b->home, digest, w->size)) {   /* invariant 3: an intact stored blob stays as it is */
        blob_writer_abort(w);
        return 0;
    }
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 64;
        pending *n = realloc(b->items, cap * sizeof *n);
        if (!n) {
            blob_writer_abort(w);
            return ms_err(MS_ENOMEM, "out of memory");
        }
        b->items = n;
        b->cap = cap;
    }
    if (fchmod(w->fd, 0444) < 0) {
        int rc = ms_err_os("%s: chmod", w->tmp_path);
        blob_writer_abort(w);
        return rc;
    }
#ifdef SYNC_FILE_RANGE_WRITE
    /* Start writing this blob to disk now, while the next ones are hashed: the sync in
     * blob_batch_commit then waits for little. Only a head start; that sync is still what
     * makes the bytes durable before any rename. */
    (void)sync_file_range(w->fd, 0, 0, SYNC_FILE_RANGE_WRITE);
#endif
    p = &b->items[b->n++];
    memcpy(p->digest, digest, sizeof digest);
    p->tmp_path = w->tmp_path;   /* the batch owns the temp file from here */
    w->tmp_path = NULL;
    blob_writer_abort(w);        /* closes the fd; there is no temp name left to unlink */
    return 0;
}

static int sync_all(blob_batch *b)
{
    char *tmp = ms_path_join(b->home, "tmp");
    int fd, rc = 0;

    if (!tmp)
        return ms_err(MS_ENOMEM, "out of memory");
    fd = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    free(tmp);
    if (fd >= 0 && syncfs(fd) == 0) {
        close(fd);
        return 0;
    }
    if (fd >= 0)
        close(fd);
    for (size_t i = 0; i < b->n && rc == 0; i++) {   /* no syncfs: one fsync each after all */
        int f = open(b->items[i].tmp_path, O_RDONLY | O_CLOEXEC);
        if (f < 0 || fsync(f) < 0)
            rc = ms_err_os("%s: fsync", b->items[i].tmp_path);
        if (f >= 0)
            close(f);
    }
    return rc;
}

int blob_batch_commit(blob_batch *b)
{
    char *blobs = NULL;
    size_t done = 0;
    int rc;

    if (b->n == 0)
        return 0;
    if ((rc = sync_all(b)) < 0)
        return rc;
    for (; done < b->n; done++) {
        pending *p = &b->items[done];
        char *final = NULL;
        if ((rc = blob_path(&final, b->home, p->digest)) < 0)
            break;
        if (rename(p->tmp_path, final) < 0) {
            rc = ms_err_os("%s: rename to %s", p->tmp_path, final);
            free(final);
            break;
        }
        free(final);
        free(p->tmp_path);
        p->tmp_path = NULL;
    }
    /* Without the directory fsync, power loss can undo the renames while index.db (synced
     * after this returns) already lists the blobs. */
    if ((blobs = ms_path_join(b->home, "blobs")) == NULL)
        return rc < 0 ? rc : ms_err(MS_ENOMEM, "out of memory");
    if (done > 0) {
        int frc = ms_fsync_dir(blobs);
        if (rc == 0)
            rc = frc;
    }
    free(blobs);
    if (rc == 0)
        b->n = 0;
    return rc;
}

void blob_batch_free(blob_batch *b)
{
    if (!b)
        return;
    for (size_t i = 0; i < b->n; i++)
        if (b->items[i].tmp_path) {
            unlink(b->items[i].tmp_path);
            free(b->items[i].tmp_path);
        }
    MS_FREE_ALL(b->items, b->home, b);
}
