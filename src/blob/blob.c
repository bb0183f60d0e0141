/* blob.c: writing, reading and checking blobs under <home>/blobs. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blob/blob_int.h"

#define COPY_CHUNK (4u << 20)


int blob_path(char **out, const char *home, const char *digest)
{
    *out = NULL;
    if (!blob_digest_valid(digest))
        return ms_err(MS_EINVALID, "digest '%.80s' is not of the form sha256:<64 lowercase hex>", digest);
    *out = ms_strdup_printf("%s/blobs/sha256-%s", home, blob_digest_hex(digest));
    return *out ? 0 : ms_err(MS_ENOMEM, "out of memory");
}

int blob_dirs_make(const char *home)
{
    char *b = ms_path_join(home, "blobs"), *t = ms_path_join(home, "tmp");
    int rc;

    if (!b || !t)
        rc = ms_err(MS_ENOMEM, "out of memory");
    else if ((rc = ms_mkdir_p(home, 0755)) == 0 && (rc = ms_mkdir_p(b, 0755)) == 0)
        rc = ms_mkdir_p(t, 0755);
    free(b);
    free(t);
    return rc;
}

int blob_writer_open(blob_writer **out, const char *home)
{
    static unsigned long seq;
    blob_writer *w = calloc(1, sizeof *w);

    *out = NULL;
    if (!w)
        return ms_err(MS_ENOMEM, "out of memory");
    w->fd = -1;
    w->home = strdup(home);
    /* The pid leads the name so that gc can tell a live writer's file from a dead one's. */
    w->tmp_path = ms_strdup_printf("%s/tmp/%ld-%lu-%lx.partial", home, (long)getpid(),
                                   __atomic_fetch_add(&seq, 1, __ATOMIC_RELAXED), (unsigned long)random());
    w->hash = blob_hash_new();
    if (!w->home || !w->tmp_path || !w->hash) {
        blob_writer_abort(w);
        return ms_err(MS_ENOMEM, "out of memory");
    }
    w->fd = open(w->tmp_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (w->fd < 0) {
        int rc = ms_err_os("%s: create", w->tmp_path);
        blob_writer_abort(w);
        return rc;
    }
    *out = w;
    return 0;
}

int blob_writer_write(blob_writer *w, const void *buf, size_t len)
{
    if (blob__write_hashed(w, buf, len) < 0)   /* overlap.c */
        return ms_err_os("%s: write", w->tmp_path);
    w->size += len;
    return 0;
}

uint64_t blob_writer_size(const blob_writer *w) { return w->size; }

int blob_writer_write_unhashed(blob_writer *w, const void *buf, size_t len)
{
    if (ms_write_all(w->fd, buf, len) < 0)
        return ms_err_os("%s: write", w->tmp_path);
    w->size += len;
    return 0;
}

blob_hash *blob_writer_hash(blob_writer *w) { return w->hash; }

void blob_writer_abort(blob_writer *w)
{
    if (!w)
        return;
    blob__overlap_free(w->ov);
    if (w->fd >= 0)
        close(w->fd);
    if (w->tmp_path)
        unlink(w->tmp_path);
    blob_hash_free(w->hash);
    MS_FREE_ALL(w->tmp_path, w->home, w);
}

int blob_writer_commit(ms_digest digest_out, blob_writer *w, const char *expect)
{
    char *final = NULL, *dir = NULL;
    ms_digest digest;
    int rc = 0;

    blob_hash_final(digest, w->hash);
    w->hash = NULL;
    if (expect && strcmp(expect, digest) != 0) {
        rc = ms_err(MS_EMISMATCH, "digest mismatch: expected %s, got %s (%llu bytes)", expect, digest,
                    (unsigned long long)w->size);
        goto done;
    }
    if ((rc = blob_path(&final, w->home, digest)) < 0)
        goto done;
    if (blob__intact_path(final, digest, w->size))   /* same bytes already stored: invariant 3 */
        goto done;
    /* fsync before the rename: the rename is the commit point, and it must not be able to
     * reach the disk ahead of the bytes it names. */
    if (fsync(w->fd) < 0) {
        rc = ms_err_os("%s: fsync", w->tmp_path);
        goto done;
    }
    if (fchmod(w->fd, 0444) < 0) {
        rc = ms_err_os("%s: chmod", w->tmp_path);
        goto done;
    }
    if (rename(w->tmp_path, final) < 0) {
        rc = ms_err_os("%s: rename to %s", w->tmp_path, final);
        goto done;
    }
    /* Without the directory fsync, power loss can undo the rename while index.db (synced after
     * this returns) already lists the blob. */
    dir = ms_path_join(w->home, "blobs");
    rc = dir ? ms_fsync_dir(dir) : ms_err(MS_ENOMEM, "out of memory");
done:
    if (rc == 0)
        memcpy(digest_out, digest, sizeof digest);
    free(final);
    free(dir);
    blob_writer_abort(w);   /* closes; unlinks the temp name if it is still there */
    return rc;
}

int blob_put_buf(ms_digest digest_out, const char *home, const void *buf, size_t len)
{
    ms_digest digest;
    blob_writer *w;
    int rc;

    /* Hash first: bytes already stored (a manifest committed twice, a shared config) cost no
     * write at all. */
    blob_digest_buf(digest, buf, len);
    if (blob_intact(home, digest, len)) {
        memcpy(digest_out, digest, sizeof digest);
        return 0;
    }
    if ((rc = blob_writer_open(&w, home)) < 0)
        return rc;
    if ((rc = blob_writer_write(w, buf, len)) < 0) {
        blob_writer_abort(w);
        return rc;
    }
    return blob_writer_commit(digest_out, w, digest);
}

int blob_writer_write_fd(blob_writer *w, int fd, const char *path, uint64_t max)
{
    uint8_t *buf = malloc(COPY_CHUNK);
    int rc = 0;

    if (!buf)
        return ms_err(MS_ENOMEM, "out of memory");
    for (;;) {
        ssize_t n = ms_read(fd, buf, COPY_CHUNK);
        if (n < 0) {
            rc = ms_err_os("%s: read", path);
            break;
        }
        if (n == 0)
            break;
        if (w->size + (uint64_t)n > max) {
            rc = ms_err(MS_EMISMATCH, "%s has more than %llu bytes", path, (unsigned long long)max);
            break;
        }
        if ((rc = blob_writer_write(w, buf, (size_t)n)) < 0)
            break;
    }
    free(buf);
    return rc;
}

int blob_put_file(ms_digest digest_out, const char *home, const char *path)
{
    blob_writer *w = NULL;
    int fd, rc;

    if ((fd = ms_open_regular(path)) < 0)
        return fd;
    if ((rc = blob_writer_open(&w, home)) == 0 && (rc = blob_writer_write_fd(w, fd, path, UINT64_MAX)) == 0) {
        close(fd);
        return blob_writer_commit(digest_out, w, NULL);
    }
    blob_writer_abort(w);
    close(fd);
    return rc;
}

int blob_exists(const char *home, const char *digest, uint64_t *size_out)
{
    struct stat st;
    char *p = NULL;
    int ok;

    if (blob_path(&p, home, digest) < 0)
        return 0;
    ok = stat(p, &st) == 0 && S_ISREG(st.st_mode);
    if (ok && size_out)
        *size_out = (uint64_t)st.st_size;
    free(p);
    return ok;
}

int blob_open(blob_view *out, const char *home, const char *digest)
{
    ms_map m;
    char *p = NULL;
    int rc;

    out->data = NULL;
    out->size = 0;
    if ((rc = blob_path(&p, home, digest)) < 0)
        return rc;
    rc = ms_map_open(&m, p);
    if (rc == MS_ENOTFOUND)
        rc = ms_err(MS_ENOTFOUND, "blob %s is missing (%s)", digest, p);
    free(p);
    if (rc == 0) {
        out->data = m.data;
        out->size = m.size;
    }
    return rc;
}

void blob_close(blob_view *v)
{
    ms_map m;

    if (!v)
        return;
    m.data = v->data;
    m.size = v->size;
    ms_map_close(&m);
    v->data = NULL;
    v->size = 0;
}

/* sha256 of what `fd` reads from its current offset to the end; *size_out the byte count. */
static int hash_fd(ms_digest digest_out, uint64_t *size_out, int fd, const char *path)
{
    blob_hash *h = blob_hash_new();
    uint8_t *buf = malloc(COPY_CHUNK);
    uint64_t size = 0;
    int rc = 0;

    if (!buf || !h) {
        rc = ms_err(MS_ENOMEM, "out of memory");
        goto done;
    }
    for (;;) {
        ssize_t n = ms_read(fd, buf, COPY_CHUNK);
        if (n < 0) {
            rc = ms_err_os("%s: read", path);
            goto done;
        }
        if (n == 0)
            break;
        blob_hash_update(h, buf, (size_t)n);
        size += (uint64_t)n;
    }
    blob_hash_final(digest_out, h);
    h = NULL;
    if (size_out)
        *size_out = size;
done:
    blob_hash_free(h);
    free(buf);
    return rc;
}

int blob__intact_path(const char *path, const char *digest, uint64_t size)
{
    ms_digest got;
    struct stat st;
    int fd, ok = 0;

    /* A damaged copy of another length is found by fstat alone; one of the right length must be
     * read whole, since a flipped bit changes nothing else. O_NOFOLLOW and S_ISREG: a link or a
     * directory under a blob's name is not the blob. */
    if ((fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)) < 0)
        return 0;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (size == BLOB_SIZE_ANY || (uint64_t)st.st_size == size) &&
        hash_fd(got, NULL, fd, path) == 0)
        ok = strcmp(got, digest) == 0;
    close(fd);
    return ok;
}

int blob_intact(const char *home, const char *digest, uint64_t size)
{
    char *p = NULL;
    int ok;

    if (blob_path(&p, home, digest) < 0)
        return 0;
    ok = blob__intact_path(p, digest, size);
    free(p);
    return ok;
}

typedef struct intact_job {
    const char *home;
    const char *const *digests;
    const uint64_t *sizes;
    unsigned char *ok;
    size_t n, next; /* next: the first blob no thread has taken (atomic) */
} intact_job;

static void *intact_main(void *arg)
{
    intact_job *j = arg;
    size_t i;

    while ((i = __atomic_fetch_add(&j->next, 1, __ATOMIC_RELAXED)) < j->n)
        j->ok[i] = j->digests[i] && blob_intact(j->home, j->digests[i], j->sizes[i]);
    return NULL;
}

void blob_intact_each(const char *home, const char *const *digests, const uint64_t *sizes, size_t n, unsigned char *ok,
                      int threads)
{
    intact_job j = {.home = home, .digests = digests, .sizes = sizes, .ok = ok, .n = n};
    pthread_t th[8];
    int nt = threads, started = 0;

    if (nt <= 0) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        nt = cores > 0 ? (int)cores : 1;
    }
    if (nt > 8)
        nt = 8;
    if ((size_t)nt > n)
        nt = (int)n;
    /* this thread takes blobs too; a thread that cannot start leaves its share to the others */
    while (started < nt - 1 && pthread_create(&th[started], NULL, intact_main, &j) == 0)
        started++;
    intact_main(&j);
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
}

int blob_verify(const char *home, const char *digest)
{
    char *p = NULL;
    ms_digest got;
    int fd = -1, rc = 0;

    if ((rc = blob_path(&p, home, digest)) < 0)
        return rc;
    if ((fd = open(p, O_RDONLY | O_CLOEXEC)) < 0) {
        rc = errno == ENOENT ? ms_err(MS_ENOTFOUND, "blob %s is missing (%s)", digest, p) : ms_err_os("%s: open", p);
        goto done;
    }
    if ((rc = hash_fd(got, NULL, fd, p)) < 0)
        goto done;
    if (strcmp(got, digest) != 0)
        rc = ms_err(MS_EMISMATCH, "blob %s is corrupt: its bytes hash to %s (%s)", digest, got, p);
done:
    if (fd >= 0)
        close(fd);
    free(p);
    return rc;
}

/* `computed` NULL: hash the file here (blob_adopt); else trust the caller's (blob_adopt_hashed). */
static int adopt(ms_digest digest_out, const char *home, const char *path, const char *expect,
                 const char *computed)
{
    char *tmp = NULL, *final = NULL, *dir = NULL;
    ms_digest digest;
    struct stat st;
    size_t tl;
    int fd = -1, rc = 0;

    digest_out[0] = '\0';
    if ((expect && !blob_digest_valid(expect)) || (computed && !blob_digest_valid(computed)))
        return ms_err(MS_EINVALID, "%s: digest '%.80s' is not of the form sha256:<64 lowercase hex>", path,
                      expect && !blob_digest_valid(expect) ? expect : computed);
    if (!(tmp = ms_path_join(home, "tmp")))
        return ms_err(MS_ENOMEM, "out of memory");
    /* Only files under tmp/: they are on the filesystem of blobs/ (the rename below is the
     * commit point and must not turn into a copy), and invariant 1 says partial bytes live there. */
    tl = strlen(tmp);
    if (strncmp(path, tmp, tl) != 0 || path[tl] != '/' || strstr(path + tl, "/../")) {
        rc = ms_err(MS_EINVALID, "%s: not a file under %s/", path, tmp);
        goto done;
    }
    /* O_NOFOLLOW: a symlink would be renamed as a link, and blobs/ must hold the bytes. */
    if ((fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
        rc = ms_err_os("%s: open", path);
        goto done;
    }
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        rc = S_ISREG(st.st_mode) ? ms_err_os("%s: stat", path) : ms_err(MS_EINVALID, "%s: not a regular file", path);
        goto done;
    }
    if (computed)
        memcpy(digest, computed, sizeof digest);
    else if ((rc = hash_fd(digest, NULL, fd, path)) < 0)
        goto done;
    if (expect && strcmp(expect, digest) != 0) {
        /* Worthless bytes: removed, so that nobody resumes from them. */
        unlink(path);
        rc = ms_err(MS_EMISMATCH, "digest mismatch: expected %s, got %s (%llu bytes)", expect, digest,
                    (unsigned long long)st.st_size);
        goto done;
    }
    if ((rc = blob_path(&final, home, digest)) < 0)
        goto done;
    if (blob__intact_path(final, digest, (uint64_t)st.st_size)) {   /* same bytes already stored: invariant 3 */
        unlink(path);
        goto done;
    }
    /* As in blob_writer_commit: the bytes reach the disk before the rename that names them. */
    if (fsync(fd) < 0) {
        rc = ms_err_os("%s: fsync", path);
        goto done;
    }
    if (fchmod(fd, 0444) < 0) {
        rc = ms_err_os("%s: chmod", path);
        goto done;
    }
    if (rename(path, final) < 0) {
        rc = ms_err_os("%s: rename to %s", path, final);
        (void)!fchmod(fd, st.st_mode & 07777);   /* the caller may retry or resume: give it back as it was */
        goto done;
    }
    dir = ms_path_join(home, "blobs");
    rc = dir ? ms_fsync_dir(dir) : ms_err(MS_ENOMEM, "out of memory");
done:
    if (rc == 0)
        memcpy(digest_out, digest, sizeof digest);
    if (fd >= 0)
        close(fd);
    MS_FREE_ALL(final, dir, tmp);
    return rc;
}

int blob_adopt(ms_digest digest_out, const char *home, const char *path, const char *expect)
{
    return adopt(digest_out, home, path, expect, NULL);
}

int blob_adopt_hashed(ms_digest digest_out, const char *home, const char *path, const char *expect,
                      const char *computed)
{
    return adopt(digest_out, home, path, expect, computed);
}

int blob__dir_each(const char *dir, blob_entry_fn each, void *arg, int *removed)
{
    struct dirent *e;
    DIR *d;
    char *p;

    if (removed)
        *removed = 0;
    if (!(d = opendir(dir)))
        return errno == ENOENT ? 0 : ms_err_os("%s: opendir", dir);
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        if (!(p = ms_path_join(dir, e->d_name)))
            break;
        if (each(p, e->d_name, arg) > 0 && removed)
            ++*removed;
        free(p);
    }
    closedir(d);
    return 0;
}

/* A writer that is still running owns its file; kill(pid, 0) fails with ESRCH once the writer is
 * gone. Names that do not start with a pid are not ours to keep either. */
static int tmp_stale(const char *path, const char *name, void *arg)
{
    char *end;
    long pid = strtol(name, &end, 10);

    (void)arg;
    if (end != name && *end == '-' && pid > 0 && (kill((pid_t)pid, 0) == 0 || errno == EPERM))
        return 0;
    return unlink(path) == 0;
}

int blob_tmp_clean(const char *home, int *removed_out)
{
    char *dir = ms_path_join(home, "tmp");
    int removed = 0, rc;

    if (removed_out)
        *removed_out = 0;
    if (!dir)
        return ms_err(MS_ENOMEM, "out of memory");
    rc = blob__dir_each(dir, tmp_stale, NULL, &removed);
    free(dir);
    if (removed_out)
        *removed_out = removed;
    return rc;
}
