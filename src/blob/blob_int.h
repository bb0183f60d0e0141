/* blob_int.h: what the files of src/blob share; nothing outside src/blob includes it. */
#ifndef MSTORE_BLOB_INT_H
#define MSTORE_BLOB_INT_H

#include "blob/blob.h"

struct blob_writer {
    char *home, *tmp_path;
    int fd;
    uint64_t size;
    blob_hash *hash;
};

/* blob_intact for a path: 1 when `path` is a regular file of `size` bytes (BLOB_SIZE_ANY: any)
 * that hash to `digest`. */
int blob__intact_path(const char *path, const char *digest, uint64_t size);

#endif
