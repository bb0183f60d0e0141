/* blob.h: content-addressed blobs and sha256; the whole surface of src/blob.
 *
 * A blob is immutable bytes at <home>/blobs/sha256-<hex>, where <hex> is the sha256 of those bytes.
 *   1. Nothing appears under blobs/ before it is complete, fsynced and hashed; partial writes
 *      live in <home>/tmp/ under names that start with the writer's pid.
 *   2. A blob is never modified in place; only gc removes one, and only when unreferenced.
 *   3. Writing bytes that are already stored leaves the existing blob untouched.
 * Digests are written "sha256:<64 lowercase hex>" everywhere outside file names. */
#ifndef MSTORE_BLOB_H
#define MSTORE_BLOB_H

#include <stddef.h>
#include <stdint.h>

#include "util/util.h"

#define BLOB_DIGEST_LEN 71   /* "sha256:" + 64 hex */

/* Streaming sha256. */
typedef struct blob_hash blob_hash;
blob_hash *blob_hash_new(void);
void blob_hash_update(blob_hash *h, const void *buf, size_t len);
void blob_hash_final(char digest_out[BLOB_DIGEST_LEN + 1], blob_hash *h);   /* consumes h */
void blob_hash_free(blob_hash *h);
/* One-shot digest of a buffer. */
void blob_digest_buf(char digest_out[BLOB_DIGEST_LEN + 1], const void *buf, size_t len);

/* 1 when `digest` is "sha256:" + 64 lowercase hex, else 0. */
int blob_digest_valid(const char *digest);
/* malloc'd <home>/blobs/sha256-<hex>; MS_EINVALID for a malformed digest. */
int blob_path(char **out, const char *home, const char *digest);
/* Creates <home>, <home>/blobs and <home>/tmp if missing. */
int blob_dirs_make(const char *home);

typedef struct blob_writer blob_writer;
/* Opens a temp file in <home>/tmp. Ends in blob_writer_commit or blob_writer_abort. */
int blob_writer_open(blob_writer **out, const char *home);
int blob_writer_write(blob_writer *w, const void *buf, size_t len);   /* MS_EIO (disk full...) */
uint64_t blob_writer_size(const blob_writer *w);
/* fsync, rename into blobs/, fsync the directory. If `expect` is given and the bytes hash to
 * something else: MS_EMISMATCH and no file left. If the blob already exists the temp file is
 * dropped. Always consumes `w`. Returns 0, MS_EMISMATCH, MS_EIO. */
int blob_writer_commit(char digest_out[BLOB_DIGEST_LEN + 1], blob_writer *w, const char *expect);
void blob_writer_abort(blob_writer *w);   /* removes the temp file; NULL is fine */

/* Store a buffer / a whole file as a blob. */
int blob_put_buf(char digest_out[BLOB_DIGEST_LEN + 1], const char *home, const void *buf, size_t len);
int blob_put_file(char digest_out[BLOB_DIGEST_LEN + 1], const char *home, const char *path);

/* 1 when the blob file exists (its content is not checked), else 0. */
int blob_exists(const char *home, const char *digest, uint64_t *size_out);

/* Read-only mmap of a blob. The view is valid until blob_close. */
typedef struct blob_view {
    const uint8_t *data;
    size_t size;
} blob_view;
int blob_open(blob_view *out, const char *home, const char *digest);   /* MS_ENOTFOUND, MS_EIO */
void blob_close(blob_view *v);

/* Re-hash a blob file. MS_EMISMATCH names the digest and path; MS_ENOTFOUND when missing. */
int blob_verify(const char *home, const char *digest);

/* Remove temp files in <home>/tmp whose writer process is gone. Returns how many, or <0. */
int blob_tmp_clean(const char *home, int *removed_out);

#endif
