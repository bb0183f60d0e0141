/* blob.h: content-addressed blobs and sha256; the whole surface of src/blob.
 *
 * A blob is immutable bytes at <home>/blobs/sha256-<hex>, where <hex> is the sha256 of those bytes.
 *   1. Nothing appears under blobs/ before it is complete, fsynced and hashed; partial writes
 *      live in <home>/tmp/: a blob writer's under names that start with the writer's pid, and
 *      resumable downloads (blob_partial, below) in <home>/tmp/pull/, which blob_tmp_clean
 *      leaves alone.
 *   2. A blob is never modified in place; only gc removes one, and only when unreferenced, and
 *      a writer of the same bytes replaces one that is damaged (3).
 *   3. Writing bytes that are already stored leaves an intact blob untouched. A stored file whose
 *      bytes do not hash to its name (a flipped bit, a truncation) is not "already stored": the
 *      writer's file, complete and checked, is renamed over it (invariant 4 still holds; a
 *      reader that mapped the damaged file keeps its old inode). So re-importing or re-pulling
 *      heals a damaged blob.
 *   4. A file reaches blobs/ only by rename from tmp/ (blob_writer_commit, blob_adopt*,
 *      blob_batch_commit), after
 *      its sha256 was checked, its bytes fsynced and its mode made 0444; blobs/ is fsynced after.
 * Digests are written "sha256:<64 lowercase hex>" everywhere outside file names. */
#ifndef MSTORE_BLOB_H
#define MSTORE_BLOB_H

#include <stddef.h>
#include <stdint.h>

#include "util/util.h"

#define BLOB_DIGEST_LEN MS_DIGEST_LEN   /* "sha256:" + 64 hex (util.h: ms_digest) */

/* Streaming sha256. blob_hash_new runs on the CPU's SHA extensions where it has them (x86
 * SHA-NI), else on OpenSSL; NULL only when out of memory. */
typedef struct blob_hash blob_hash;
blob_hash *blob_hash_new(void);
/* The same on a named implementation: "openssl", "sha-ni" (only where the CPU has it) or
 * "sha-ni-emulated" (that code with its three SHA instructions done in C; slow, for tests). NULL
 * with an error when the name is unknown or the CPU lacks it. */
blob_hash *blob_hash_new_impl(const char *impl);
void blob_hash_update(blob_hash *h, const void *buf, size_t len);
/* The same bytes into two hashes, as blob_hash_update on each. Two hashes on the same SHA-NI
 * implementation run in one pass, at about 1.8x the rate of one after the other. */
void blob_hash_update2(blob_hash *a, blob_hash *b, const void *buf, size_t len);
/* 1 when blob_hash_update2 of two blob_hash_new hashes is that one pass on this CPU. */
int blob_hash_update2_fused(void);
void blob_hash_final(ms_digest digest_out, blob_hash *h);   /* consumes h */
void blob_hash_free(blob_hash *h);
/* Frees the calling thread's OpenSSL state (its error queue, hashing contexts). A detached
 * thread calls it before it says it is done: the process may exit at once, and LeakSanitizer
 * would count what the thread's exit had not yet freed. */
void blob_hash_thread_end(void);
/* One-shot digest of a buffer. */
void blob_digest_buf(ms_digest digest_out, const void *buf, size_t len);

/* 1 when `digest` is "sha256:" + 64 lowercase hex, else 0. */
int blob_digest_valid(const char *digest);
/* The 64 hex digits of a valid digest (what names its file, and what ollama's listings show):
 * the one place that knows the prefix is "sha256:". */
const char *blob_digest_hex(const char *digest);
/* malloc'd <home>/blobs/sha256-<hex>; MS_EINVALID for a malformed digest. */
int blob_path(char **out, const char *home, const char *digest);
/* Creates <home>, <home>/blobs and <home>/tmp if missing. */
int blob_dirs_make(const char *home);

typedef struct blob_writer blob_writer;
/* Opens a temp file in <home>/tmp. Ends in blob_writer_commit or blob_writer_abort. */
int blob_writer_open(blob_writer **out, const char *home);
int blob_writer_write(blob_writer *w, const void *buf, size_t len);   /* MS_EIO (disk full...) */
uint64_t blob_writer_size(const blob_writer *w);
/* blob_writer_write without hashing: the caller puts the same bytes, in the same order, into
 * blob_writer_hash(w) before the writer's next write or its commit (an import hashes each
 * chunk for its blob and for the whole source file in one blob_hash_update2). */
int blob_writer_write_unhashed(blob_writer *w, const void *buf, size_t len);
blob_hash *blob_writer_hash(blob_writer *w);
/* Append what `fd` reads to its end; `path` names it in messages. MS_EMISMATCH when the blob
 * would pass `max` bytes, MS_EIO. */
int blob_writer_write_fd(blob_writer *w, int fd, const char *path, uint64_t max);
/* fsync, rename into blobs/, fsync the directory. If `expect` is given and the bytes hash to
 * something else: MS_EMISMATCH and no file left. If the blob is already stored intact
 * (blob_intact) the temp file is dropped; a damaged one is replaced. Always consumes `w`. Returns 0, MS_EMISMATCH, MS_EIO. */
int blob_writer_commit(ms_digest digest_out, blob_writer *w, const char *expect);
void blob_writer_abort(blob_writer *w);   /* removes the temp file; NULL is fine */

/* Make `path`, a complete file that the caller wrote under <home>/tmp/, the blob of its bytes
 * without copying them: hash it (one read of the file), check the digest against `expect`
 * (NULL: no check), fsync it, chmod 0444, rename it into blobs/, fsync blobs/. When that blob
 * is already stored intact, `path` is removed and the stored blob left untouched; a damaged
 * one is replaced (invariant 3).
 * On MS_EMISMATCH `path` is removed (its bytes are worthless) and nothing is under a final
 * name; on the other errors `path` is left in place, for the caller to retry or remove.
 * digest_out gets the digest on success. Returns 0, MS_EMISMATCH, MS_EINVALID (path not under
 * <home>/tmp/, not a regular file, malformed digest), MS_ENOTFOUND (no such file), MS_EIO. */
int blob_adopt(ms_digest digest_out, const char *home, const char *path, const char *expect);
/* blob_adopt without reading the file back: `computed` is the sha256 that the caller computed
 * over the file's bytes as it wrote them (or read them). The check against `expect` is then
 * only as good as that claim, so use it only for a file the caller wrote itself and that no
 * one else could change since (the caller holds it locked); otherwise use blob_adopt. */
int blob_adopt_hashed(ms_digest digest_out, const char *home, const char *path, const char *expect,
                      const char *computed);

/* A batch: many blobs made durable together. An import writes hundreds of tensor blobs; one
 * fsync each serialises the disk behind every one of them, while one syncfs of the file system
 * flushes them all at once. Each blob still reaches blobs/ only after its bytes are on disk
 * (invariant 4): blob_batch_commit syncs first, then renames.
 *   blob_batch_new; per blob: blob_writer_open, _write, blob_batch_add (the digest is known
 *   then); blob_batch_commit before the index names any of them; blob_batch_free always. */
typedef struct blob_batch blob_batch;
int blob_batch_new(blob_batch **out, const char *home);
const char *blob_batch_home(const blob_batch *b);
/* Finish `w` (always consumed): hash, compare with `expect` (MS_EMISMATCH, its temp file
 * removed), close. Bytes already stored intact, or already in the batch, are dropped at once;
 * a damaged stored copy is replaced at blob_batch_commit (invariant 3). */
int blob_batch_add(blob_batch *b, ms_digest digest_out, blob_writer *w, const char *expect);
/* syncfs (or, where that fails, fsync of each file), then chmod 0444 and rename each into
 * blobs/, then fsync blobs/. MS_EIO. After a failure, blobs already renamed are whole. */
int blob_batch_commit(blob_batch *b);
void blob_batch_free(blob_batch *b);   /* removes temp files not committed; NULL is fine */

/* Store a buffer / a whole file as a blob. */
int blob_put_buf(ms_digest digest_out, const char *home, const void *buf, size_t len);
int blob_put_file(ms_digest digest_out, const char *home, const char *path);

/* 1 when the blob file exists (its content is not checked), else 0. */
int blob_exists(const char *home, const char *digest, uint64_t *size_out);
/* 1 when the blob is stored, has `size` bytes (BLOB_SIZE_ANY: any size) and its bytes hash to
 * its name; 0 when it is missing or damaged, or cannot be read (then writing its bytes replaces
 * it: invariant 3). The size is compared first (a stat); only a file of the right size is
 * re-hashed, a full read. This is the test for "already stored" before a write or a download
 * is skipped, not for listing. */
#define BLOB_SIZE_ANY UINT64_MAX
int blob_intact(const char *home, const char *digest, uint64_t size);
/* ok[i] = blob_intact(home, digests[i], sizes[i]) for i < n (a NULL digest: 0, not read), the
 * re-hashes spread over up to `threads` threads (0: one a core, at most 8): checking what a
 * model already has stored is a full read of it, and the hashing, not the disk, bounds it. */
void blob_intact_each(const char *home, const char *const *digests, const uint64_t *sizes, size_t n, unsigned char *ok,
                      int threads);

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

/* Partial blobs: resumable downloads (partial.c). One blob's download is ONE file,
 * <home>/tmp/pull/<hex>.partial, written at offsets in parts (by several threads at once), and
 * for a blob of several parts the sidecar <hex>.ranges:
 *   BLOB_PARTIAL_RANGES_MAGIC, u64 blob size, u64 part size, u64 n_parts, then n_parts u64
 *   bytes done (all little-endian), each part's count written after its bytes,
 * so a download killed at any point resumes from the bytes on disk.
 *   1. The names derive from the digest only, never from a pid, so any later download resumes.
 *   2. The holder of a blob_partial holds an exclusive flock on both files; a second opener of
 *      the same blob waits for it, then finds the blob stored (and removes what is left), or
 *      takes over. Having the lock it checks that the name still refers to the inode it locked.
 *   3. A blob of one part is written in order from byte 0: the file's length is its progress.
 *      A sidecar that does not match the blob, or claims bytes past the file's end, counts as
 *      nothing done.
 *   4. The complete file becomes a blob by adoption (blob_adopt_hashed, in the store through
 *      store_txn_blob_adopt) while still held; then blob_partial_done. A digest mismatch:
 *      blob_partial_abandon (both files go). I/O errors and kills keep both for a rerun
 *      (blob_partial_close).
 *   5. blob_partial_clean (store_gc) removes files in tmp/pull/ that no one has locked and that
 *      are older than its bound or whose blob is stored. */
#define BLOB_PARTIAL_RANGES_MAGIC "MSPULL1\n"
#define BLOB_PARTIAL_RANGES_HEADER ((size_t)32)
typedef struct blob_partial blob_partial;
/* Open, lock and resume the download of `digest` (`size` bytes in `n_parts` parts of
 * `part_bytes`; part k starts at k * part_bytes): done_out[k] (n_parts entries) gets the bytes
 * part k already has. *out NULL (and 0) when the blob is stored intact, before or after the
 * wait for the lock. MS_EINVALID, MS_EIO, MS_ENOMEM. */
int blob_partial_open(blob_partial **out, const char *home, const char *digest, uint64_t size, uint64_t part_bytes,
                      size_t n_parts, uint64_t *done_out);
const char *blob_partial_path(const blob_partial *p);   /* for blob_adopt and messages */
/* Write all of `buf` at `off`. MS_EIO. */
int blob_partial_write(blob_partial *p, uint64_t off, const void *buf, size_t len);
/* Up to `len` bytes at `off`: the count read, 0 at the file's end, <0 (MS_EIO) on error. */
int64_t blob_partial_read(blob_partial *p, uint64_t off, void *buf, size_t len);
/* Record that part `part` has `done` bytes on disk (the sidecar; nothing for one part). */
int blob_partial_save(blob_partial *p, size_t part, uint64_t done);
/* Start writing [off, off + len) to disk now, so the fsync of the adopt finds little left. */
void blob_partial_hint(blob_partial *p, uint64_t off, uint64_t len);
int blob_partial_size(blob_partial *p, uint64_t *size_out);   /* the file's length now */
/* End holding `p` (NULL is fine), dropping the locks: _close keeps both files for a rerun;
 * _done after the adopt removes the sidecar; _abandon removes both. */
void blob_partial_close(blob_partial *p);
void blob_partial_done(blob_partial *p);
void blob_partial_abandon(blob_partial *p);
/* The sidecar's parser: done_out[k] (n_parts entries) gets part k's bytes done. MS_EINVALID
 * naming the field. */
int blob_partial_ranges_parse(uint64_t *done_out, const uint8_t *buf, size_t len, uint64_t size,
                              uint64_t part_bytes, size_t n_parts);
/* Remove the files of tmp/pull/ that no process holds locked and whose mtime is more than
 * `max_age_s` old or whose blob is stored. 0 or <0. */
int blob_partial_clean(const char *home, int64_t max_age_s);

#endif
