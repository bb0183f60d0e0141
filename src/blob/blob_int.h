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

#endif
