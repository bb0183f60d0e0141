/* overlap.c: a blob writer hashes a large buffer in a helper thread while write(2) copies it.
 *
 * Hashing and writing each touch every byte once and neither waits for the other: done one
 * after the other, a big import pays for both (sha256 at ~2 GB/s with SHA-NI, the copy into
 * the page cache about as much); side by side it pays for the slower one. The digest still
 * covers exactly the bytes written: both read the same caller's buffer, which does not change
 * during blob_writer_write, and the writer waits for the hash before it returns. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "blob/blob_int.h"

struct blob_overlap {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;        /* work posted, work done, quit: one condition, broadcast */
    blob_hash *hash;
    const void *buf;
    size_t len;
    int busy, quit;
};

static void *helper_main(void *arg)
{
    blob_overlap *o = arg;

    pthread_mutex_lock(&o->mu);
    for (;;) {
        while (!o->busy && !o->quit)
            pthread_cond_wait(&o->cv, &o->mu);
        if (!o->busy)
            break;
        pthread_mutex_unlock(&o->mu);
        blob_hash_update(o->hash, o->buf, o->len);
        pthread_mutex_lock(&o->mu);
        o->busy = 0;
        pthread_cond_broadcast(&o->cv);
    }
    pthread_mutex_unlock(&o->mu);
    return NULL;
}

static blob_overlap *overlap_new(void)
{
    blob_overlap *o = calloc(1, sizeof *o);

    if (!o)
        return NULL;
    pthread_mutex_init(&o->mu, NULL);
    pthread_cond_init(&o->cv, NULL);
    if (pthread_create(&o->thread, NULL, helper_main, o) != 0) {
        pthread_cond_destroy(&o->cv);
        pthread_mutex_destroy(&o->mu);
        free(o);
        return NULL;
    }
    return o;
}

int blob__write_hashed(blob_writer *w, const void *buf, size_t len)
{
    blob_overlap *o;
    int rc, err;

    if (len >= BLOB_OVERLAP_MIN && !w->ov && !w->ov_failed && !(w->ov = overlap_new()))
        w->ov_failed = 1;   /* no thread to be had: hash here, as below */
    if (len < BLOB_OVERLAP_MIN || !(o = w->ov)) {
        blob_hash_update(w->hash, buf, len);
        return ms_write_all(w->fd, buf, len);
    }
    pthread_mutex_lock(&o->mu);
    o->hash = w->hash;
    o->buf = buf;
    o->len = len;
    o->busy = 1;
    pthread_cond_broadcast(&o->cv);
    pthread_mutex_unlock(&o->mu);
    rc = ms_write_all(w->fd, buf, len);
    err = errno;
    pthread_mutex_lock(&o->mu);
    while (o->busy)
        pthread_cond_wait(&o->cv, &o->mu);
    pthread_mutex_unlock(&o->mu);
    errno = err;   /* for the caller's message about the write */
    return rc;
}

void blob__overlap_free(blob_overlap *o)
{
    if (!o)
        return;
    pthread_mutex_lock(&o->mu);
    o->quit = 1;
    pthread_cond_broadcast(&o->cv);
    pthread_mutex_unlock(&o->mu);
    pthread_join(o->thread, NULL);
    pthread_cond_destroy(&o->cv);
    pthread_mutex_destroy(&o->mu);
    free(o);
}
