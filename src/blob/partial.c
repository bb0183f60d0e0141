/* partial.c: resumable downloads of one blob each, <home>/tmp/pull/<hex>.partial and its
 * sidecar <hex>.ranges (blob.h, "Partial blobs"): names, locks, progress and cleanup. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "blob/blob_int.h"

struct blob_partial {
    char *path, *rpath;    /* rpath NULL for a blob of one part */
    int fd, rfd;           /* both locked exclusive; rfd -1 without a sidecar */
    uint64_t size, part_bytes;
    size_t n_parts;
};

int blob_partial_ranges_parse(uint64_t *done_out, const uint8_t *buf, size_t len, uint64_t size, uint64_t part_bytes,
                              size_t n_parts)
{
    uint64_t got;

    if (len < BLOB_PARTIAL_RANGES_HEADER || memcmp(buf, BLOB_PARTIAL_RANGES_MAGIC, 8) != 0)
        return ms_err(MS_EINVALID, "no '%.7s' magic in %zu bytes", BLOB_PARTIAL_RANGES_MAGIC, len);
    if ((got = ms_le64(buf + 8)) != size)
        return ms_err(MS_EINVALID, "blob size %" PRIu64 ", expected %" PRIu64, got, size);
    if ((got = ms_le64(buf + 16)) != part_bytes)
        return ms_err(MS_EINVALID, "part size %" PRIu64 ", expected %" PRIu64, got, part_bytes);
    if ((got = ms_le64(buf + 24)) != n_parts)
        return ms_err(MS_EINVALID, "%" PRIu64 " parts, expected %zu", got, n_parts);
    /* n_parts is the caller's (from the manifest's size), so this cannot overflow; the length
     * must match it exactly, which also bounds every read below. */
    if (len != BLOB_PARTIAL_RANGES_HEADER + 8 * n_parts)
        return ms_err(MS_EINVALID, "%zu bytes, expected %zu for %zu parts", len,
                      BLOB_PARTIAL_RANGES_HEADER + 8 * n_parts, n_parts);
    for (size_t k = 0; k < n_parts; k++) {
        uint64_t off = k * part_bytes, plen = size - off < part_bytes ? size - off : part_bytes;

        if ((done_out[k] = ms_le64(buf + BLOB_PARTIAL_RANGES_HEADER + 8 * k)) > plen)
            return ms_err(MS_EINVALID, "part %zu: %" PRIu64 " bytes done, more than its %" PRIu64, k, done_out[k], plen);
    }
    return 0;
}

/* The sidecar's progress, each part bounded by the bytes the download really has. Anything
 * unreadable or inconsistent means "nothing done": refetching is always safe, trusting is not. */
static int ranges_load(blob_partial *p, uint64_t file_size, uint64_t *done)
{
    size_t len = BLOB_PARTIAL_RANGES_HEADER + 8 * p->n_parts;
    uint8_t *buf = malloc(len);
    struct stat st;
    ssize_t n = -1;
    int rc = 0;

    if (!buf)
        return ms_err(MS_ENOMEM, "out of memory");
    if (fstat(p->rfd, &st) == 0 && (uint64_t)st.st_size == len)
        n = pread(p->rfd, buf, len, 0);
    if (n != (ssize_t)len || blob_partial_ranges_parse(done, buf, len, p->size, p->part_bytes, p->n_parts) < 0) {
        memset(done, 0, p->n_parts * sizeof *done);
        memcpy(buf, BLOB_PARTIAL_RANGES_MAGIC, 8);
        ms_put_le64(buf + 8, p->size);
        ms_put_le64(buf + 16, p->part_bytes);
        ms_put_le64(buf + 24, (uint64_t)p->n_parts);
        memset(buf + BLOB_PARTIAL_RANGES_HEADER, 0, len - BLOB_PARTIAL_RANGES_HEADER);
        if (ftruncate(p->rfd, 0) < 0 || pwrite(p->rfd, buf, len, 0) != (ssize_t)len) {
            rc = ms_err_os("%s: write", p->rpath);
            goto done;
        }
    }
    for (size_t k = 0; k < p->n_parts; k++) {
        uint64_t off = k * p->part_bytes;

        /* The sidecar is written after the bytes, but a lost or replaced download file
         * would make it lie: never claim bytes past the file's end. */
        if (off + done[k] > file_size)
            done[k] = file_size > off ? file_size - off : 0;
    }
done:
    free(buf);
    return rc;
}

/* Open `path` (created if missing) and hold an exclusive flock on it. Another pull of the same
 * blob holds it while it downloads: wait for it. When we get the lock, the name may meanwhile
 * have been adopted into blobs/, removed after a mismatch, or removed by gc: then the inode we
 * locked is no longer the one at `path`, and we start again. */
static int open_locked(int *fd_out, const char *dir, const char *path)
{
    struct stat a, b;
    int fd = -1;

    *fd_out = -1;
    for (int tries = 0;; tries++) {
        if ((fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644)) < 0) {
            /* Another pull that finished removes tmp/pull/ when it looks empty: make it again. */
            if (errno != ENOENT || tries >= 3)
                return ms_err_os("%s: open", path);
            ms_mkdir_p(dir, 0755);
            continue;
        }
        while (flock(fd, LOCK_EX) < 0)
            if (errno != EINTR) {
                close(fd);
                return ms_err_os("%s: lock", path);
            }
        if (fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
            *fd_out = fd;
            return 0;
        }
        close(fd);
        if (tries >= 1000)
            return ms_err(MS_EIO, "%s: replaced by another process again and again", path);
    }
}

int blob_partial_open(blob_partial **out, const char *home, const char *digest, uint64_t size, uint64_t part_bytes,
                      size_t n_parts, uint64_t *done_out)
{
    blob_partial *p = NULL;
    char *dir = NULL;
    struct stat st;
    int rc = 0;

    *out = NULL;
    if (!blob_digest_valid(digest))
        return ms_err(MS_EINVALID, "blob digest '%.80s' is not sha256:<64 hex>", digest);
    if (n_parts == 0 || (n_parts > 1 && part_bytes == 0))
        return ms_err(MS_EINVALID, "blob %s: %zu parts of %" PRIu64 " bytes", digest, n_parts, part_bytes);
    if (blob_intact(home, digest, size))
        return 0;   /* another pull into this store finished the blob meanwhile */
    if (!(p = calloc(1, sizeof *p)))
        return ms_err(MS_ENOMEM, "out of memory");
    p->fd = p->rfd = -1;
    if (!(dir = ms_strdup_printf("%s/tmp/pull", home)) ||
        !(p->path = ms_strdup_printf("%s/%s.partial", dir, blob_digest_hex(digest))) ||
        (n_parts > 1 && !(p->rpath = ms_strdup_printf("%s/%s.ranges", dir, blob_digest_hex(digest))))) {
        rc = ms_err(MS_ENOMEM, "out of memory");
        goto fail;
    }
    p->size = size;
    p->part_bytes = part_bytes;
    p->n_parts = n_parts;
    if ((rc = ms_mkdir_p(dir, 0755)) < 0 || (rc = open_locked(&p->fd, dir, p->path)) < 0)
        goto fail;
    if (blob_intact(home, digest, size)) {
        /* Stored while we waited for the lock: what is left here (or what open just created) is
         * redundant, and only lock holders touch these names. */
        blob_partial_abandon(p);
        free(dir);
        return 0;
    }
    if (fstat(p->fd, &st) < 0) {
        rc = ms_err_os("%s: stat", p->path);
        goto fail;
    }
    if (n_parts == 1) {
        /* One part is written in order from byte 0, so the file's length is its progress. */
        if ((uint64_t)st.st_size > size && ftruncate(p->fd, 0) < 0) {
            rc = ms_err_os("%s: truncate", p->path);
            goto fail;
        }
        done_out[0] = (uint64_t)st.st_size > size ? 0 : (uint64_t)st.st_size;
    } else if ((rc = open_locked(&p->rfd, dir, p->rpath)) < 0 || (rc = ranges_load(p, (uint64_t)st.st_size, done_out)) < 0) {
        goto fail;
    }
    free(dir);
    *out = p;
    return 0;
fail:
    blob_partial_close(p);
    free(dir);
    return rc;
}

const char *blob_partial_path(const blob_partial *p) { return p->path; }

int blob_partial_write(blob_partial *p, uint64_t off, const void *buf, size_t len)
{
    const uint8_t *src = buf;

    while (len > 0) {
        ssize_t w = pwrite(p->fd, src, len, (off_t)off);

        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return ms_err_os("%s: write", p->path);
        src += w;
        off += (uint64_t)w;
        len -= (size_t)w;
    }
    return 0;
}

int64_t blob_partial_read(blob_partial *p, uint64_t off, void *buf, size_t len)
{
    for (;;) {
        ssize_t got = pread(p->fd, buf, len, (off_t)off);

        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            return ms_err_os("%s: read", p->path);
        return got;
    }
}

int blob_partial_save(blob_partial *p, size_t part, uint64_t done)
{
    uint8_t v[8];

    if (p->rfd < 0)
        return 0;   /* one part: the file's length is its progress */
    ms_put_le64(v, done);
    if (pwrite(p->rfd, v, 8, (off_t)(BLOB_PARTIAL_RANGES_HEADER + 8 * part)) != 8)
        return ms_err_os("%s: write", p->rpath);
    return 0;
}

void blob_partial_hint(blob_partial *p, uint64_t off, uint64_t len)
{
#ifdef SYNC_FILE_RANGE_WRITE
    if (len)
        sync_file_range(p->fd, (off_t)off, (off_t)len, SYNC_FILE_RANGE_WRITE);
#else
    (void)p, (void)off, (void)len;
#endif
}

int blob_partial_size(blob_partial *p, uint64_t *size_out)
{
    struct stat st;

    if (fstat(p->fd, &st) < 0)
        return ms_err_os("%s: stat", p->path);
    *size_out = (uint64_t)st.st_size;
    return 0;
}

static void partial_free(blob_partial *p, int unlink_data, int unlink_ranges)
{
    if (!p)
        return;
    /* Unlinked while still locked: a pull waiting for the lock then finds the name gone. */
    if (unlink_data)
        unlink(p->path);
    if (unlink_ranges && p->rpath)
        unlink(p->rpath);
    if (p->rfd >= 0)
        close(p->rfd);
    if (p->fd >= 0)
        close(p->fd);
    MS_FREE_ALL(p->path, p->rpath, p);
}

void blob_partial_close(blob_partial *p) { partial_free(p, 0, 0); }
void blob_partial_done(blob_partial *p) { partial_free(p, 0, 1); }
void blob_partial_abandon(blob_partial *p) { partial_free(p, 1, 1); }

/* ---------------------------------------------------------------- cleanup */

/* A file of a download whose blob is stored: a pull killed between adopting <hex>.partial and
 * unlinking <hex>.ranges left the sidecar, which no later pull touches (the blob is stored, so
 * never fetched again). It goes at once, whatever its age. */
static int done_download(const char *home, const char *file)
{
    const char *dot = strchr(file, '.');
    ms_digest digest;

    if (!dot || dot - file != 64)
        return 0;
    snprintf(digest, sizeof digest, "sha256:%.64s", file);
    return blob_digest_valid(digest) && blob_exists(home, digest, NULL);
}

typedef struct sweep {
    const char *home;
    time_t now;
    int64_t max_age_s;
} sweep;

/* Old, or of a download that finished, and not locked by a pull still running. */
static int partial_stale(const char *path, const char *name, void *arg)
{
    const sweep *w = arg;
    struct stat st;
    int fd, gone = 0;

    if ((fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)) < 0)
        return 0;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
        (w->now - st.st_mtime > w->max_age_s || done_download(w->home, name)) && flock(fd, LOCK_EX | LOCK_NB) == 0)
        gone = unlink(path) == 0;
    close(fd);   /* drops the lock */
    return gone;
}

int blob_partial_clean(const char *home, int64_t max_age_s)
{
    char *dir = ms_strdup_printf("%s/tmp/pull", home);
    sweep w = { home, time(NULL), max_age_s };
    int rc;

    if (!dir)
        return ms_err(MS_ENOMEM, "out of memory");
    rc = blob__dir_each(dir, partial_stale, &w, NULL);
    free(dir);
    return rc;
}
