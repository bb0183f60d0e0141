/* file.c: file helpers shared by every module. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/util.h"

/* O_NONBLOCK because open(2) of a FIFO blocks until a writer appears: a planted FIFO where a
 * model file should be would hang the command forever before fstat could refuse it. Regular
 * files ignore the flag; it is cleared anyway so later reads behave as ever. */
int ms_open_regular(const char *path)
{
    struct stat st;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);

    if (fd < 0)
        return ms_err_os("%s: open", path);
    if (fstat(fd, &st) < 0) {
        close(fd);
        return ms_err_os("%s: stat", path);
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return ms_err(MS_EINVALID, "%s: not a regular file", path);
    }
    if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) < 0) {
        close(fd);
        return ms_err_os("%s: fcntl", path);
    }
    return fd;
}

int ms_map_open(ms_map *out, const char *path)
{
    struct stat st;
    void *p;
    int fd;

    out->data = NULL;
    out->size = 0;
    if ((fd = ms_open_regular(path)) < 0)
        return fd;
    if (fstat(fd, &st) < 0) {
        close(fd);
        return ms_err_os("%s: stat", path);
    }
    if (st.st_size == 0) {
        close(fd);
        return 0;
    }
    p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);   /* the mapping keeps the file open */
    if (p == MAP_FAILED)
        return ms_err_os("%s: mmap", path);
    out->data = p;
    out->size = (size_t)st.st_size;
    return 0;
}

void ms_map_close(ms_map *m)
{
    if (m && m->data)
        munmap((void *)m->data, m->size);
    if (m) {
        m->data = NULL;
        m->size = 0;
    }
}

int ms_file_read(char **out, size_t *size_out, const char *path, size_t max)
{
    struct stat st;
    char *buf = NULL;
    size_t got = 0;
    int fd;

    *out = NULL;
    if ((fd = ms_open_regular(path)) < 0)
        return fd;
    if (fstat(fd, &st) < 0) {
        close(fd);
        return ms_err_os("%s: stat", path);
    }
    if ((uint64_t)st.st_size > max) {
        close(fd);
        return ms_err(MS_EINVALID, "%s: file is too large (%lld bytes > %zu)", path, (long long)st.st_size, max);
    }
    buf = malloc((size_t)st.st_size + 1);
    if (!buf) {
        close(fd);
        return ms_err(MS_ENOMEM, "%s: out of memory", path);
    }
    while (got < (size_t)st.st_size) {
        ssize_t n = ms_read(fd, buf + got, (size_t)st.st_size - got);
        if (n <= 0) {
            int rc = n < 0 ? ms_err_os("%s: read", path) : ms_err(MS_EIO, "%s: file shrank while reading", path);
            free(buf);
            close(fd);
            return rc;
        }
        got += (size_t)n;
    }
    close(fd);
    buf[got] = '\0';
    *out = buf;
    if (size_out)
        *size_out = got;
    return 0;
}

int ms_fd_read_all(char **out, size_t *len_out, int fd, size_t max)
{
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);

    *out = NULL;
    if (!buf)
        return ms_err(MS_ENOMEM, "out of memory");
    for (;;) {
        ssize_t n;
        if (len + 1 == cap) {
            char *nb = cap > max ? NULL : realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                return cap > max ? ms_err(MS_EINVALID, "more than %zu bytes", max) : ms_err(MS_ENOMEM, "out of memory");
            }
            buf = nb;
            cap *= 2;
        }
        n = ms_read(fd, buf + len, cap - 1 - len);
        if (n < 0) {
            free(buf);
            return ms_err_os("read");
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    buf[len] = '\0';
    *out = buf;
    if (len_out)
        *len_out = len;
    return 0;
}

ssize_t ms_read(int fd, void *buf, size_t len)
{
    ssize_t n;

    while ((n = read(fd, buf, len)) < 0 && errno == EINTR)
        ;
    return n;
}

int ms_write_all(int fd, const void *buf, size_t len)
{
    const uint8_t *p = buf;

    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int ms_fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int rc = 0;

    if (fd < 0)
        return ms_err_os("%s: open directory", dir);
    if (fsync(fd) < 0 && errno != EINVAL)
        rc = ms_err_os("%s: fsync directory", dir);
    close(fd);
    return rc;
}

int ms_file_write_atomic(const char *path, const void *buf, size_t len)
{
    ms_atomic a;
    int rc;

    if ((rc = ms_atomic_open(&a, path, NULL, 0644)) < 0)
        return rc;
    if (ms_write_all(a.fd, buf, len) < 0) {
        rc = ms_err_os("%s: write", a.tmp);
        ms_atomic_abort(&a);
        return rc;
    }
    return ms_atomic_commit(&a);
}

int ms_mkdir_p(const char *path, int mode)
{
    char *p = strdup(path);
    int rc = 0;

    if (!p)
        return ms_err(MS_ENOMEM, "%s: out of memory", path);
    for (char *s = p + 1; ; s++) {
        if (*s == '/' || *s == '\0') {
            char c = *s;
            *s = '\0';
            if (mkdir(p, (mode_t)mode) < 0 && errno != EEXIST) {
                rc = ms_err_os("%s: mkdir", p);
                break;
            }
            *s = c;
            if (c == '\0')
                break;
        }
    }
    if (rc == 0 && !ms_is_dir(path))
        rc = ms_err(MS_EIO, "%s: not a directory", path);
    free(p);
    return rc;
}

char *ms_path_join(const char *a, const char *b)
{
    size_t la = strlen(a);

    return ms_strdup_printf("%s%s%s", a, (la && a[la - 1] == '/') ? "" : "/", b);
}

void ms_free_many(void *const *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(p[i]);
}

char *ms_strdup_printf(const char *fmt, ...)
{
    va_list ap;
    char *s = NULL;

    va_start(ap, fmt);
    if (vasprintf(&s, fmt, ap) < 0)
        s = NULL;
    va_end(ap);
    return s;
}

int ms_is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int ms_is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

const char *ms_fmt_bytes(char *buf, size_t len, uint64_t n)
{
    static const char *unit[] = { "B", "KB", "MB", "GB", "TB" };
    double v = (double)n;
    int u = 0;

    while (v >= 1000 && u < 4) {
        v /= 1000;
        u++;
    }
    if (u == 0)
        snprintf(buf, len, "%llu B", (unsigned long long)n);
    else
        snprintf(buf, len, "%.1f %s", v, unit[u]);
    return buf;
}
