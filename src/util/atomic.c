/* atomic.c: whole-file replacement by temp file and rename (util.h's ms_atomic). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/util.h"

/* Distinguishes the temp names of one process: two threads may replace files side by side. */
static unsigned long tmp_seq;

int ms_atomic_open(ms_atomic *a, const char *path, const char *tmp, int mode)
{
    a->fd = -1;
    a->path = strdup(path);
    a->tmp = tmp ? strdup(tmp)
                 : ms_strdup_printf("%s.tmp.%ld.%lu", path, (long)getpid(),
                                    __atomic_fetch_add(&tmp_seq, 1, __ATOMIC_RELAXED));
    if (!a->path || !a->tmp) {
        ms_atomic_abort(a);
        return ms_err(MS_ENOMEM, "%s: out of memory", path);
    }
    a->fd = open(a->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, (mode_t)mode);
    /* Temp names carry the pid: one already there is a dead process's leftover (its pid came
     * round again), never a live writer's, so it is replaced once. */
    if (a->fd < 0 && errno == EEXIST && unlink(a->tmp) == 0)
        a->fd = open(a->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, (mode_t)mode);
    if (a->fd < 0) {
        int rc = ms_err_os("%s: create", a->tmp);
        free(a->tmp);   /* not ours to unlink */
        a->tmp = NULL;
        ms_atomic_abort(a);
        return rc;
    }
    return 0;
}

int ms_atomic_commit(ms_atomic *a)
{
    char *dir = NULL, *slash;
    int rc = 0;

    if (fsync(a->fd) < 0) {
        rc = ms_err_os("%s: fsync", a->tmp);
        goto done;
    }
    rc = close(a->fd);
    a->fd = -1;
    if (rc < 0) {
        rc = ms_err_os("%s: close", a->tmp);
        goto done;
    }
    /* the rename is the commit point: a reader sees the old file or the whole new one */
    if (rename(a->tmp, a->path) < 0) {
        rc = ms_err_os("%s: rename to %s", a->tmp, a->path);
        goto done;
    }
    free(a->tmp);
    a->tmp = NULL;
    /* and the directory entry itself must survive a crash */
    if (!(dir = strdup(a->path))) {
        rc = ms_err(MS_ENOMEM, "%s: out of memory", a->path);
        goto done;
    }
    slash = strrchr(dir, '/');
    if (!slash)
        rc = ms_fsync_dir(".");
    else if (slash == dir)
        rc = ms_fsync_dir("/");
    else {
        *slash = '\0';
        rc = ms_fsync_dir(dir);
    }
done:
    free(dir);
    ms_atomic_abort(a);
    return rc;
}

void ms_atomic_abort(ms_atomic *a)
{
    if (!a)
        return;
    if (a->fd >= 0)
        close(a->fd);
    if (a->tmp)
        unlink(a->tmp);
    free(a->tmp);
    free(a->path);
    a->fd = -1;
    a->tmp = a->path = NULL;
}
