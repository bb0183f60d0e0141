/* blobs.c: blob bytes by digest (store.h, "Blob bytes by digest"). The store knows where its
 * blobs live; callers name a blob by digest and never build its path. */
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/store_int.h"

int store_blob_open(blob_view *out, store *s, const char *digest)
{
    return blob_open(out, s->home, digest);
}

int store_blob_fd(int *fd_out, uint64_t *size_out, store *s, const char *digest)
{
    struct stat st;
    char *path = NULL;
    int fd, rc;

    *fd_out = -1;
    if ((rc = blob_path(&path, s->home, digest)) < 0)
        return rc;
    if ((fd = ms_open_regular(path)) < 0) { /* a FIFO planted under a blob's name: refused */
        rc = fd;
        goto done;
    }
    if (fstat(fd, &st) < 0) {
        rc = ms_err_os("%s: stat", path);
        close(fd);
        goto done;
    }
    *fd_out = fd;
    *size_out = (uint64_t)st.st_size;
done:
    free(path);
    return rc;
}

int store_blob_intact(store *s, const char *digest, uint64_t size) { return blob_intact(s->home, digest, size); }

int store_blob_exists(store *s, const char *digest, uint64_t *size_out)
{
    return blob_exists(s->home, digest, size_out);
}

int store_blob_file(char **path_out, store *s, const char *digest)
{
    *path_out = NULL;
    if (blob_digest_valid(digest) && !blob_exists(s->home, digest, NULL))
        return ms_err(MS_ENOTFOUND, "blob %s is not in the store", digest);
    return blob_path(path_out, s->home, digest);
}

void store_blobs_intact(store *s, const char *const *digests, const uint64_t *sizes, size_t n, unsigned char *ok,
                        int threads)
{
    blob_intact_each(s->home, digests, sizes, n, ok, threads);
}
