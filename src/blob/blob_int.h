/* blob_int.h: what the files of src/blob share; nothing outside src/blob includes it. */
#ifndef MSTORE_BLOB_INT_H
#define MSTORE_BLOB_INT_H

#include "blob/blob.h"

/* sha256.c: SHA-256 on the x86 SHA extensions (hash.c uses it for blob_hash where the CPU has
 * them, OpenSSL elsewhere). An implementation hashes whole 64-byte blocks, of one stream or of
 * two at once. */
typedef struct blob_sha_impl {
    const char *name;   /* "sha-ni", "sha-ni-emulated" */
    void (*blocks1)(uint32_t h[8], const uint8_t *p, size_t n);
    void (*blocks2)(uint32_t h[8], const uint8_t *p, uint32_t j[8], const uint8_t *q, size_t n);
} blob_sha_impl;

typedef struct blob_sha {
    uint32_t h[8];
    uint64_t len;        /* bytes hashed so far */
    uint8_t buf[64];     /* a partial block */
    size_t n;            /* bytes in it */
    const blob_sha_impl *impl;
} blob_sha;

/* Call `each` with the path and name of every entry of `dir` but dot files (a missing directory
 * has none); `each` returns 1 when it removed the entry, counted into *removed (NULL: not
 * counted). MS_EIO when the directory cannot be read. */
typedef int (*blob_entry_fn)(const char *path, const char *name, void *arg);
int blob__dir_each(const char *dir, blob_entry_fn each, void *arg, int *removed);

const blob_sha_impl *blob__sha_impl(const char *name);   /* NULL: unknown, or not on this CPU */
const blob_sha_impl *blob__sha_best(void);               /* sha-ni where the CPU has it, else NULL */
void blob__sha_init(blob_sha *s, const blob_sha_impl *impl);
void blob__sha_update(blob_sha *s, const void *buf, size_t len);
void blob__sha_update2(blob_sha *a, blob_sha *b, const void *buf, size_t len);   /* same impl */
void blob__sha_final(uint8_t md[32], blob_sha *s);

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
