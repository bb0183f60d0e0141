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
 * were at open (import_source_check), before any blob of the import reaches blobs/. */
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
#define HASH_CHUNK (4u << 20)

struct import_source {
    int fd;
    uint64_t size;
    struct timespec mtime;
    const uint8_t *base;       /* the mapping whose pointers stand for file offsets (may be NULL) */
    uint8_t *buf;              /* SINK_CHUNK bytes for source_sink */
    blob_writer *sink_writer;  /* where source_sink writes */
    pthread_t thread;
    int hashing;               /* the thread runs */
    int hash_rc;               /* its result, read after the join */
    char digest[BLOB_DIGEST_LEN + 1];
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
    if (s)
        s->fd = -1;
    if (!s || !(s->buf = malloc(SINK_CHUNK))) {
        rc = ms_err(MS_ENOMEM, "out of memory");
        goto fail;
    }
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
        rc = changed(s, "size differs from the parsed one", size);
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

static void *hash_main(void *arg)
{
    import_source *s = arg;
    uint8_t *buf = malloc(HASH_CHUNK);
    blob_hash *h = blob_hash_new();
    uint64_t at = 0;

    s->hash_rc = buf && h ? 0 : ms_err(MS_ENOMEM, "out of memory");
    while (s->hash_rc == 0 && at < s->size) {
        size_t n = s->size - at < HASH_CHUNK ? (size_t)(s->size - at) : HASH_CHUNK;
        if ((s->hash_rc = import_source_read(s, buf, at, n)) == 0)
            blob_hash_update(h, buf, n);
        at += n;
    }
    if (s->hash_rc == 0) {
        blob_hash_final(s->digest, h);
        h = NULL;
    } else {
        /* The message is per thread: keep it for import_source_hash_finish to set again. */
        snprintf(s->hash_msg, sizeof s->hash_msg, "%s", ms_err_msg());
    }
    blob_hash_free(h);
    free(buf);
    return NULL;
}

int import_source_hash_start(import_source *s)
{
    if (pthread_create(&s->thread, NULL, hash_main, s) == 0)
        s->hashing = 1;
    else
        hash_main(s);   /* no thread to be had: hash here, before the blobs */
    return 0;
}

int import_source_hash_finish(import_source *s, char digest_out[BLOB_DIGEST_LEN + 1])
{
    if (s->hashing) {
        pthread_join(s->thread, NULL);
        s->hashing = 0;
    }
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

/* `len` bytes of the file at `offset` into the writer set by import_sources_emit. */
static int source_copy(import_source *s, uint64_t off, size_t len)
{
    int rc;

    while (len > 0) {
        size_t n = len < SINK_CHUNK ? len : SINK_CHUNK;
        if ((rc = import_source_read(s, s->buf, off, n)) == 0)
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

    for (size_t i = 0; i < e->n; i++) {
        import_source *s = e->srcs[i];
        if (s && s->base && p >= s->base && p < s->base + s->size)
            return source_copy(s, (uint64_t)(p - s->base), len);
    }
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
    if (s->hashing)
        pthread_join(s->thread, NULL);
    if (s->fd >= 0)
        close(s->fd);
    free(s->buf);
    free(s);
}
