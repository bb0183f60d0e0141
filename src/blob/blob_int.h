/* blob_int.h: what the files of src/blob share; nothing outside src/blob includes it. */
#ifndef MSTORE_BLOB_INT_H
#define MSTORE_BLOB_INT_H

#include "blob/blob.h"

/* overlap.c: writes of at least BLOB_OVERLAP_MIN bytes are hashed by a helper thread (one per
 * writer, started at the first such write) while write(2) runs. */
#define BLOB_OVERLAP_MIN (256u << 10)
typedef struct blob_overlap blob_overlap;

struct blob_writer {
    char *home, *tmp_path;
    int fd;
    uint64_t size;
    blob_hash *hash;
    blob_overlap *ov;   /* NULL until a large write */
    int ov_failed;      /* no thread could be started: hash inline */
};

/* blob_intact for a path: 1 when `path` is a regular file of `size` bytes (BLOB_SIZE_ANY: any)
 * that hash to `digest`. */
int blob__intact_path(const char *path, const char *digest, uint64_t size);

/* Hash `buf` into w->hash and write it to w->fd; -1 with errno set when the write fails. */
int blob__write_hashed(blob_writer *w, const void *buf, size_t len);
void blob__overlap_free(blob_overlap *o);   /* stops the helper; NULL is fine */

#endif
