/* source.c: reading an import's source file with pread, never through its mapping.
 *
 * Why pread and not the mapping (which the parsers still use to validate the header): a file
 * that shrinks under a mapping turns the next touch of a lost page into SIGBUS (or write(2)
 * into EFAULT, "Bad address"), with no way to name the cause. A signal handler could catch it,
 * but it would be process-wide state inside a library, would have to be scoped per thread (the
 * whole-file hash runs in a second thread) and would longjmp out of OpenSSL mid-update. A short
 * pread is an ordinary return value: "<file>: file changed during import". It is also faster
 * here: the bytes land in one reused, already-faulted buffer that is hashed and written while
 * it is in cache, where copying out of a fresh mapping takes a page fault per 4 KiB.
 *
 * A file that changes without shrinking is caught by comparing size and mtime with what they
 * were at open (import_source_check), before any blob of the import reaches blobs/.
 *
 * One read of the file feeds both digests: the chunks that the sink reads for the blobs go,
 * through a ring of RING slots, to the thread that hashes the whole file too. That thread
 * hashes in file order and reads for itself only what the blobs skip (the header, the gaps
 * between tensors, a tensor quantized on the way, a pack's tensors out of order).
 *
 * Where the CPU hashes two streams in one pass (blob_hash_update2_fused: SHA-NI), the thread
 * hashes each chunk for its blob as well, in the same pass as for the file, and the sink only
 * reads and writes: two busy threads, not three, and the two digests for little more than the
 * CPU of one. The blob's hash is then the thread's while chunks for it wait in the ring: the
 * sink waits for them (ring_settle) before it writes the blob anything else, and the importer
 * (import_sources_settle) before the blob is named or dropped, which it does as late as it can:
 * after the next blob's first chunks went to the thread, so that it has work meanwhile. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "import/import_int.h"

#define SINK_CHUNK (1u << 20)   /* fits L2: read, hashed and written while still in cache */
#define HASH_CHUNK (1u << 20)   /* the hash thread's own reads */
#define RING 4                  /* slots in flight between the sink and the hash thread */

typedef struct slot {
    uint8_t *buf;               /* SINK_CHUNK bytes, allocated by import_source_hash_start */
    uint64_t offset;
    size_t len;
    blob_hash *blob;            /* also hash the chunk into this (the fused mode), or NULL */
    int busy;                   /* posted, not yet hashed: the sink must not reuse it */
} slot;

struct import_source {
    int fd;
    uint64_t size;
    struct timespec mtime;
    const uint8_t *base;       /* the mapping whose pointers stand for file offsets (may be NULL) */
    uint8_t *buf;              /* SINK_CHUNK bytes for source_copy without a hash thread (lazy) */
    blob_writer *sink_writer;  /* where source_copy writes */
    pthread_t thread;
    int hashing;               /* the thread runs: the sink posts its chunks to it */
    int fused;                 /* ...and hashes them for their blobs too */
    int hash_rc;               /* its result, read after the join */
    int failed;                /* the thread's first error (under mu), for ring_settle */
    pthread_mutex_t mu;        /* guards the ring and the flags below */
    pthread_cond_t cv;         /* a slot posted or freed, done, stop: one condition, broadcast */
    slot ring[RING];
    uint64_t posted, taken;    /* slots posted by the sink / taken by the thread, ever */
    int done, stop;            /* no more posts (hash the rest) / give up (an error came) */
    ms_digest digest;
    int changed;               /* a read or check found the file changed (either thread) */
    char hash_msg[512];        /* the thread's error message (messages are per thread) */
};

/* Messages leave the file's name to the caller, which adds it as the outermost context. */
static int changed(import_source *s, const char *how, uint64_t offset)
{
    __atomic_store_n(&s->changed, 1, __ATOMIC_RELAXED);
    return ms_err(MS_EIO, "file changed during import (%s at offset %llu; it had %llu bytes)", how,
                  (unsigned long long)offset, (unsigned long long)s->size);
}

int import_source_open(import_source **out, const char *path, const uint8_t *base, uint64_t size)
{
    import_source *s = calloc(1, sizeof *s);
    struct stat st;
    int rc;

    *out = NULL;
    if (s) {
        s->fd = -1;
        pthread_mutex_init(&s->mu, NULL);
        pthread_cond_init(&s->cv, NULL);
    }
    if (!s)
        return ms_err(MS_ENOMEM, "out of memory");
    if ((rc = ms_open_regular(path)) < 0)
        goto fail;
    s->fd = rc;
    if (fstat(s->fd, &st) < 0) {
        rc = ms_err_os("stat");
        goto fail;
    }
    s->size = (uint64_t)st.st_size;
    s->mtime = st.st_mtim;
    s->base = base;
    /* The file was mapped and validated before this open: if it is not the same length now,
     * the header just parsed may not be the file's. */
    if (s->size != size) {
        s->changed = 1;
        rc = ms_err(MS_EIO, "file changed during import (%llu bytes when parsed, %llu now)",
                    (unsigned long long)size, (unsigned long long)s->size);
        goto fail;
    }
    (void)posix_fadvise(s->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    *out = s;
    return 0;
fail:
    import_source_close(s);
    return rc;
}

uint64_t import_source_size(const import_source *s) { return s->size; }

int import_source_read(import_source *s, void *buf, uint64_t offset, size_t len)
{
    uint8_t *p = buf;

    while (len > 0) {
        ssize_t n = pread(s->fd, p, len, (off_t)offset);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return ms_err_os("read at offset %llu", (unsigned long long)offset);
        if (n == 0)
            return changed(s, "end of file", offset);
        p += n;
        offset += (uint64_t)n;
        len -= (size_t)n;
    }
    return 0;
}

int import_sources_read(import_source *const *srcs, size_t n, void *buf, const void *data, size_t len)
{
    const uint8_t *p = data;

    for (size_t i = 0; i < n; i++) {
        import_source *s = srcs[i];
        if (s && s->base && p >= s->base && p < s->base + s->size)
            return import_source_read(s, buf, (uint64_t)(p - s->base), len);
    }
    memcpy(buf, data, len);   /* not file bytes: memory the caller owns */
    return 0;
}

/* Hash [*pos, to) with the thread's own reads. */
static int hash_range(import_source *s, blob_hash *h, uint8_t *buf, uint64_t *pos, uint64_t to)
{
    int rc;

    while (*pos < to) {
        size_t n = to - *pos < HASH_CHUNK ? (size_t)(to - *pos) : HASH_CHUNK;
        if ((rc = import_source_read(s, buf, *pos, n)) < 0)
            return rc;
        blob_hash_update(h, buf, n);
        *pos += n;
    }
    return 0;
}

/* A chunk the sink read: bytes before it that were not hashed yet are read here first; bytes
 * already hashed (a chunk behind the hash's position) are skipped for the file. In the fused
 * mode the whole chunk goes into its blob's hash too, in order, and the part new to the file
 * into both at once. */
static int hash_chunk(import_source *s, blob_hash *h, uint8_t *buf, uint64_t *pos, const slot *c)
{
    size_t behind;
    int rc;

    if (c->offset > *pos && (rc = hash_range(s, h, buf, pos, c->offset)) < 0)
        return rc;
    behind = c->offset + c->len > *pos ? (size_t)(*pos - c->offset) : c->len;
    if (c->blob)
        blob_hash_update(c->blob, c->buf, behind);
    if (behind < c->len) {
        if (c->blob)
            blob_hash_update2(h, c->blob, c->buf + behind, c->len - behind);
        else
            blob_hash_update(h, c->buf + behind, c->len - behind);
        *pos = c->offset + c->len;
    }
    return 0;
}

/* The message is per thread: keep it for ring_settle and import_source_hash_finish to set
 * again in theirs. Written before `failed` or `hash_rc` are, which they read first. */
static int keep_msg(import_source *s, int rc)
{
    snprintf(s->hash_msg, sizeof s->hash_msg, "%s", ms_err_msg());
    return rc;
}

static void *hash_main(void *arg)
{
    import_source *s = arg;
    uint8_t *buf = malloc(HASH_CHUNK);
    blob_hash *h = blob_hash_new();
    uint64_t pos = 0;
    int rc = buf && h ? 0 : keep_msg(s, ms_err(MS_ENOMEM, "out of memory"));

    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (s->taken == s->posted && !s->done && !s->stop)
            pthread_cond_wait(&s->cv, &s->mu);
        if (s->stop || s->taken == s->posted)
            break;
        slot *c = &s->ring[s->taken % RING];
        pthread_mutex_unlock(&s->mu);
        if (rc == 0 && (rc = hash_chunk(s, h, buf, &pos, c)) < 0)   /* after it, slots are only handed back */
            keep_msg(s, rc);
        pthread_mutex_lock(&s->mu);
        if (rc < 0 && !s->failed)
            s->failed = rc;
        c->busy = 0;
        s->taken++;
        pthread_cond_broadcast(&s->cv);
    }
    if (s->stop && rc == 0)
        rc = MS_ERROR;   /* nobody reads the digest */
    pthread_mutex_unlock(&s->mu);
    if (rc == 0 && (rc = hash_range(s, h, buf, &pos, s->size)) < 0)
        keep_msg(s, rc);
    if (rc == 0) {
        blob_hash_final(s->digest, h);
        h = NULL;
    }
    s->hash_rc = rc;
    blob_hash_free(h);
    free(buf);
    return NULL;
}

int import_source_hash_start(import_source *s)
{
    for (int i = 0; i < RING; i++)
        if (!s->ring[i].buf && !(s->ring[i].buf = malloc(SINK_CHUNK)))
            return ms_err(MS_ENOMEM, "out of memory");
    if (pthread_create(&s->thread, NULL, hash_main, s) == 0) {
        s->hashing = 1;
        s->fused = blob_hash_update2_fused();
    } else {
        s->done = 1;    /* no thread to be had: hash here, before the blobs, with a read more */
        hash_main(s);
    }
    return 0;
}

/* Stop the hash thread: `finish` lets it hash what remains, else it gives up. */
static void hash_join(import_source *s, int finish)
{
    if (!s->hashing)
        return;
    pthread_mutex_lock(&s->mu);
    if (finish)
        s->done = 1;
    else
        s->stop = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    s->hashing = 0;
}

int import_source_hash_finish(import_source *s, ms_digest digest_out)
{
    hash_join(s, 1);
    if (s->hash_rc < 0)
        return ms_err(s->hash_rc, "%s", s->hash_msg);
    memcpy(digest_out, s->digest, sizeof s->digest);
    return 0;
}

int import_source_check(import_source *s)
{
    struct stat st;

    if (fstat(s->fd, &st) < 0)
        return ms_err_os("stat");
    if ((uint64_t)st.st_size != s->size || st.st_mtim.tv_sec != s->mtime.tv_sec ||
        st.st_mtim.tv_nsec != s->mtime.tv_nsec) {
        s->changed = 1;
        if ((uint64_t)st.st_size != s->size)
            return ms_err(MS_EIO, "file changed during import (%llu bytes at the start, %llu now)",
                          (unsigned long long)s->size, (unsigned long long)st.st_size);
        return ms_err(MS_EIO, "file changed during import (modified while it was read)");
    }
    return 0;
}

int import_source_changed(const import_source *s) { return __atomic_load_n(&s->changed, __ATOMIC_RELAXED); }

int import_sources_changed(import_source *const *srcs, size_t n)
{
    for (size_t k = 0; k < n; k++)
        if (srcs[k] && import_source_changed(srcs[k]))
            return (int)k;
    return -1;
}

/* 1 while a chunk posted for `h` waits in the ring or is being hashed (under mu). */
static int ring_holds(const import_source *s, const blob_hash *h)
{
    for (uint64_t k = s->taken; k < s->posted; k++)
        if (s->ring[k % RING].blob == h)
            return 1;
    return 0;
}

/* Wait until the thread is done with `h` (fused: the blob's hash is whole, and the caller's
 * again). After an error or a stop the thread touches no blob's hash again. The thread's error,
 * if it had one, is this one's. */
static int ring_settle(import_source *s, const blob_hash *h)
{
    int rc;

    pthread_mutex_lock(&s->mu);
    while (ring_holds(s, h) && !s->failed && !s->stop)
        pthread_cond_wait(&s->cv, &s->mu);
    rc = s->failed;
    pthread_mutex_unlock(&s->mu);
    return rc < 0 ? ms_err(rc, "%s", s->hash_msg) : 0;
}

int import_sources_settle(import_source *const *srcs, size_t n, blob_writer *bw)
{
    int rc;

    for (size_t i = 0; i < n; i++)
        if (srcs[i] && srcs[i]->fused && (rc = ring_settle(srcs[i], blob_writer_hash(bw))) < 0)
            return rc;
    return 0;
}

/* With the hash thread running, one chunk of the file through a ring slot: read, posted to
 * the thread, written (and hashed for the blob, here or by the thread) while the thread
 * hashes it for the file. The slot is reused only after the thread handed it back. */
static int sink_chunk(import_source *s, uint64_t offset, size_t len)
{
    slot *c = &s->ring[s->posted % RING];
    int rc;

    pthread_mutex_lock(&s->mu);
    while (c->busy)
        pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
    if ((rc = import_source_read(s, c->buf, offset, len)) < 0)
        return rc;
    pthread_mutex_lock(&s->mu);
    c->offset = offset;
    c->len = len;
    c->blob = s->fused ? blob_writer_hash(s->sink_writer) : NULL;
    c->busy = 1;
    s->posted++;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    /* reads c->buf only, as the thread does */
    if (s->fused)
        return blob_writer_write_unhashed(s->sink_writer, c->buf, len);
    return blob_writer_write(s->sink_writer, c->buf, len);
}

/* `len` bytes of the file at `offset` into the writer set by import_sources_emit. */
static int source_copy(import_source *s, uint64_t off, size_t len)
{
    int rc;

    while (len > 0) {
        size_t n = len < SINK_CHUNK ? len : SINK_CHUNK;
        if (s->hashing)
            rc = sink_chunk(s, off, n);
        else if (!s->buf && !(s->buf = malloc(SINK_CHUNK)))
            rc = ms_err(MS_ENOMEM, "out of memory");
        else if ((rc = import_source_read(s, s->buf, off, n)) == 0)
            rc = blob_writer_write(s->sink_writer, s->buf, n);
        if (rc < 0)
            return rc;
        off += n;
        len -= n;
    }
    return 0;
}

typedef struct emit_ctx {
    import_source *const *srcs;
    size_t n;
    blob_writer *bw;
} emit_ctx;

/* An st_sink: bytes that lie in a source's mapping [base, base + size) are read from that file
 * at the same offset instead; anything else (the blob's header, padding, a quantized tensor)
 * is the writer's own memory. */
static int sources_sink(void *ctx, const void *buf, size_t len)
{
    const emit_ctx *e = ctx;
    const uint8_t *p = buf;
    int rc;

    for (size_t i = 0; i < e->n; i++) {
        import_source *s = e->srcs[i];
        if (s && s->base && p >= s->base && p < s->base + s->size)
            return source_copy(s, (uint64_t)(p - s->base), len);
    }
    if ((rc = import_sources_settle(e->srcs, e->n, e->bw)) < 0)
        return rc;
    return blob_writer_write(e->bw, buf, len);
}

int import_sources_emit(import_source *const *srcs, size_t n, st_writer *w, blob_writer *bw)
{
    emit_ctx e = { srcs, n, bw };
    int rc;

    for (size_t i = 0; i < n; i++)
        if (srcs[i])
            srcs[i]->sink_writer = bw;
    rc = st_writer_emit(w, sources_sink, &e);
    for (size_t i = 0; i < n; i++)
        if (srcs[i])
            srcs[i]->sink_writer = NULL;
    return rc;
}

void import_source_close(import_source *s)
{
    if (!s)
        return;
    hash_join(s, 0);
    if (s->fd >= 0)
        close(s->fd);
    for (int i = 0; i < RING; i++)
        free(s->ring[i].buf);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free(s->buf);
    free(s);
}

void import_test_shrink(const char *dir, const char *file)
{
    const char *v = getenv("MSTORE_TEST_IMPORT_SHRINK");
    char *path;

    if (v && *v && (path = ms_path_join(dir, file)) != NULL) {
        (void)!truncate(path, (off_t)strtoll(v, NULL, 10));
        free(path);
    }
}
