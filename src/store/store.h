/* store.h: the SQLite index over the blob store; the whole surface of src/store.
 *
 * The store is the one gate to a model: readers open it with store_model_open (below,
 * "Reading"), writers go through a store_txn ("Writing"); nothing outside src/store takes the
 * lock, opens a blob batch or touches SQLite (e2e t0007 checks that from the sources).
 *
 * <home>/index.db (WAL, busy timeout, schema versioned by PRAGMA user_version, migrated on open):
 *   blobs(digest PK, size, media_type, verified_at)
 *   manifests(digest PK, config_digest, media_type, size, created_at)
 *   layers(manifest_digest, idx, digest, media_type, size, name)          PK(manifest_digest, idx)
 *   tensors(blob_digest, name, dtype, shape, quant_type, group_size, offset, nbytes) PK(blob_digest, name)
 *   names(host, namespace, model, tag, manifest_digest, modified_at)    PK(host, namespace, model, tag)
 * Invariants:
 *   1. Every multi-row change is one transaction: a reader sees a model whole or not at all.
 *   2. A manifest row exists only when its manifest blob and every blob it references exist.
 *   3. A blob is live when a manifest that some name points to references it (the manifest blob
 *      itself, its config, its layers). gc removes the others.
 *   4. Work that writes blobs holds <home>/lock shared (a store_txn) from its first blob to
 *      its commit; gc holds it exclusive, so it never removes a blob that work is about to name.
 *   registry_blobs(host, repo, digest)                                    PK(host, repo, digest)
 *     which blobs a registry repository is known to hold (a pull received them, a push sent
 *     them), so that a push can mount a blob from another repository of the same registry.
 * Several processes may use one store at once. */
#ifndef MSTORE_STORE_H
#define MSTORE_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "blob/blob.h"
#include "format/format.h"
#include "manifest/manifest.h"
#include "util/util.h"

typedef struct store store;

/* Creates <home>, blobs/, tmp/, index.db and the space reserve (<home>/reserve, see
 * store_open_to_free) as needed; migrates the schema.
 * A store that exists but whose home this process cannot write (a read-only file system, a
 * shared model directory, another user's store) opens read-only instead: nothing is created
 * (no lock file, no tmp/, no -wal/-shm: SQLite opens the index read-only, and immutable when it
 * could not otherwise read it), nothing migrated, and every call that writes fails with MS_EIO
 * "the store is read-only"; reading (names, manifests, tensors, blobs, verify) works.
 * Likewise on a full disk, when the index cannot be opened for writing and its WAL is empty:
 * writes then fail with "the disk is full" (store_open_to_free is the way to free space).
 * MS_EIO (unwritable home that holds no store...), MS_EINVALID (index from a newer mstore, or
 * a read-only index from an older one, which needs one open with write access to migrate). */
int store_open(store **out, const char *home);
/* store_open for work that frees space (rm, gc). On a full disk even that needs a little
 * space (index.db-shm, the WAL pages of the change) before any blob can go: the store keeps
 * <home>/reserve (STORE_RESERVE_BYTES, made by store_open when there is room) and a handle
 * opened here deletes it when opening, store_names_remove or store_gc fail for a full disk,
 * then retries once; store_gc makes it again after removing blobs. */
int store_open_to_free(store **out, const char *home);
/* Who waits for the store's lock learns why: gc (and rm, which ends with one) takes it
 * exclusive and waits for every import, pull and create in progress. When it has to wait, `fn`
 * gets a message naming the holders as the system lists them ("waiting for the store's lock,
 * held by pid 123 (mstore import big.gguf --name big)"), once, before the wait. NULL: silent. */
typedef void (*store_wait_fn)(void *ctx, const char *message);
void store_lock_wait_notify(store *s, store_wait_fn fn, void *ctx);
/* 1 when `s` was opened read-only (see store_open). */
int store_readonly(const store *s);
void store_close(store *s);   /* NULL is fine */
const char *store_home(const store *s);
/* The home to use: `flag` if given, else $MSTORE_HOME, else $HOME/.mstore. malloc'd. */
char *store_home_default(const char *flag);

/* name -> manifest digest. MS_ENOTFOUND "model 'x:latest' not found".
 * Readers of a model use store_model_open below; these three stay for src/store and tests. */
int store_name_resolve(store *s, const model_name *name, ms_digest digest_out);
/* Read and parse a stored manifest. */
int store_manifest_load(store *s, const char *digest, manifest **out);
/* The manifest's bytes, exactly as stored (re-hashed: MS_EMISMATCH). *out malloc'd. */
int store_manifest_bytes(store *s, const char *digest, char **out, size_t *len_out);

/* A row of the name list (not a handle: see store_model below). */
typedef struct store_entry {
    model_name name;
    ms_digest digest;
    uint64_t size;          /* manifest + config + layers, bytes */
    int64_t modified_at;    /* unix seconds */
} store_entry;
/* All names, sorted by name. *out malloc'd (free()). */
int store_list(store *s, store_entry **out, size_t *n_out);

/* Reading: store_model, the one way to read a stored model.
 *
 * DESIGN: every reader (run, chat, serve, show, tokenize, export, push, a Modelfile's FROM)
 * opens the model once: the name is resolved once, the manifest read (re-hashed) and parsed
 * once, its exact bytes kept (push and the OCI server send them as they are). Blobs are then
 * handed out by layer: each blob is mapped read-only at most once per handle (two layers or
 * two requests for one digest share the mapping), its size checked against the manifest
 * (MS_EMISMATCH naming the layer), and an MT_TENSOR blob's safetensors header is parsed at
 * most once ("tensor views": st_tensor.data points into the mapping). Mapping is lazy, on the
 * first request for a layer: the runtime asks for every tensor blob, while show, tokenize and
 * chat touch only a few small layers and must not open thousands of files. Every pointer
 * handed out (manifest, bytes, views, headers) is owned by the handle and stays valid until
 * store_model_close. The handle does not keep `s`: close the store whenever; the handle only
 * keeps the home path for mapping. Not thread-safe for lazy mapping: map from one thread
 * (the runtime maps every tensor blob at open) before sharing. */
typedef struct store_model store_model;
/* MS_ENOTFOUND "model 'x:latest' not found" / a missing manifest blob, MS_EMISMATCH (manifest
 * bytes do not hash to their digest), MS_EINVALID (manifest does not parse), MS_ENOMEM. */
int store_model_open(store_model **out, store *s, const model_name *name);
/* The same, by manifest digest ("sha256:<64 hex>"): the OCI and ollama servers' paths.
 * MS_EINVALID for a malformed digest. The name is then the digest (store_model_name NULL). */
int store_model_open_digest(store_model **out, store *s, const char *manifest_digest);
void store_model_close(store_model *m);   /* NULL is fine; ends every view */

const model_name *store_model_name(const store_model *m);   /* NULL when opened by digest */
const char *store_model_shown(const store_model *m);        /* "tiny:latest", for messages */
const char *store_model_digest(const store_model *m);       /* the manifest's digest */
const manifest *store_model_manifest(const store_model *m);
const char *store_model_manifest_bytes(const store_model *m, size_t *len_out);   /* exact bytes */

/* The bytes of layer `l`, which must point into store_model_manifest(m) (a layer, or its
 * config). Mapped on first use; the same pointer on every later call. MS_ENOTFOUND (blob
 * missing), MS_EMISMATCH (size differs from the manifest), MS_EINVALID (l is not m's). */
int store_model_layer_bytes(const uint8_t **data, size_t *len, store_model *m, const manifest_layer *l);
/* The config blob's bytes (store_model_layer_bytes of the config). */
int store_model_config(const uint8_t **data, size_t *len, store_model *m);
/* The bytes of the first layer with this media type (and name, NULL: any). MS_ENOTFOUND
 * "model 'x': no <media type> layer" when there is none; then *data is NULL. */
int store_model_find(const uint8_t **data, size_t *len, store_model *m, const char *media_type, const char *name);
/* The parsed safetensors header of MT_TENSOR layer `l`, its tensors' data pointing into the
 * mapping. Parsed once. MS_EINVALID (not a tensor layer, bad header), or as layer_bytes. */
int store_model_tensors(const st_file **out, store_model *m, const manifest_layer *l);

typedef struct store_tensor {
    char *name, *dtype, *shape, *quant_type, *blob_digest;   /* shape as "[4096, 4096]" */
    int64_t group_size;    /* 0 when none; quant_type is NULL when none */
    uint64_t offset, nbytes;
} store_tensor;
/* Every tensor of a manifest, in layer order. Free with store_tensors_free. */
int store_tensors_list(store *s, const char *manifest_digest, store_tensor **out, size_t *n_out);
void store_tensors_free(store_tensor *t, size_t n);

/* Blob bytes by digest, for what works on blobs rather than on a model (the registry's push and
 * pull, the server's /v2 and /api/blobs, `mstore blob`): the one way to a blob's file outside
 * src/store and src/blob. store_blob_open maps a stored blob (MS_ENOTFOUND, MS_EINVALID for a
 * malformed digest, MS_EIO); store_blob_fd opens it for ranged reads, *size_out its size (as
 * ms_open_regular: MS_ENOTFOUND, MS_EINVALID when not a regular file, MS_EIO);
 * store_blob_intact is 1 when the blob is stored with that size (BLOB_SIZE_ANY: any) and its
 * bytes hash to its name; store_blobs_intact checks many, as blob_intact_each. */
int store_blob_open(blob_view *out, store *s, const char *digest);
int store_blob_fd(int *fd_out, uint64_t *size_out, store *s, const char *digest);
int store_blob_intact(store *s, const char *digest, uint64_t size);
/* 1 when a file stands under the blob's name (its bytes unchecked: a HEAD, before a use that
 * checks them), *size_out (may be NULL) its size. */
int store_blob_exists(store *s, const char *digest, uint64_t *size_out);
/* The file of a stored blob (malloc'd), for a reader that needs a path: the GGUF importer preads
 * a file with its file-changed checks. Read it only. MS_ENOTFOUND when no such blob is stored. */
int store_blob_file(char **path_out, store *s, const char *digest);
void store_blobs_intact(store *s, const char *const *digests, const uint64_t *sizes, size_t n, unsigned char *ok,
                        int threads);

int store_name_copy(store *s, const model_name *src, const model_name *dst);   /* MS_ENOTFOUND */
int store_name_remove(store *s, const model_name *name);                        /* MS_ENOTFOUND */
/* Remove `n` names in one transaction: all of them, or (one is not found, or any error) none.
 * MS_ENOTFOUND names the first missing one. */
int store_names_remove(store *s, const model_name *names, size_t n);

/* Re-hash blobs: those of one model (name != NULL: manifest, config, layers) or every file in
 * blobs/ (then also every live blob that has no file). `bad` is called for each blob that fails,
 * with a message ("missing", or why the bytes do not match). Passing blobs get verified_at
 * (not on a read-only store).
 * Returns 0 when all pass, MS_EMISMATCH when any failed, or another error. */
typedef void (*store_verify_cb)(void *ctx, const char *digest, const char *message);
int store_verify(store *s, const model_name *name, store_verify_cb bad, void *ctx,
                 size_t *n_checked_out);

/* Remove unreferenced blobs (invariant 3), stale temp files, and index rows of manifests that no
 * name references. Stale temp files: those in tmp/ whose writer process is gone
 * (blob_tmp_clean), and resumable pull downloads in tmp/pull/ (blob_partial_clean) whose mtime is more
 * than STORE_GC_PARTIAL_AGE_S (7 days) old and that no process holds a flock on (a running pull
 * locks the files it writes). With dry_run, only report. `each` (may be NULL) sees every blob removed.
 * Takes the exclusive lock: waits for imports and pulls in progress. MS_EBUSY when `s` itself has
 * a store_txn open (it would wait for itself). */
#define STORE_GC_PARTIAL_AGE_S (7L * 24 * 3600)
typedef void (*store_gc_cb)(void *ctx, const char *digest, uint64_t size);
int store_gc(store *s, int dry_run, store_gc_cb each, void *ctx, size_t *n_out, uint64_t *bytes_out);

/* Writing: store_txn -----------------------------------------------------------------------
 * The one way to add a model to the store: every importer, puller and `create` runs
 *   store_txn_begin; store_txn_blob_* for each blob; store_txn_commit (or store_txn_abort).
 * A transaction owns the three things a writer used to sequence by hand:
 *   - the shared write lock (invariant 4), taken at begin and released at commit or abort, so
 *     gc never removes a blob between its write and its naming;
 *   - a blob batch (blob.h): blobs written through the transaction land under blobs/ only at
 *     commit (or store_txn_flush), all made durable by one sync; abort removes them;
 *   - the index commit: the manifest blob, its rows, the name and the registry_blobs rows
 *     queued with store_txn_registry_blob, in one SQLite transaction.
 * The transaction remembers every blob it added (digest and size), so the commit's check that
 * each referenced blob exists (invariant 2) looks at the disk only for blobs it did not add.
 * Adopted files (store_txn_blob_adopt: finished downloads) are renamed into blobs/ at once, as
 * blob_adopt does: abort leaves them there, unnamed, for a later pull to reuse or gc to remove.
 * A transaction is used by one thread, except store_txn_blob_adopt, which download threads may
 * call at once. Transactions nest on one store (an import inside `create`): each commits alone
 * and the lock goes when the last one ends. */
typedef struct store_txn store_txn;
/* Take the shared lock and open the batch. MS_EIO on a read-only store. */
int store_txn_begin(store_txn **out, store *s);
store *store_txn_store(const store_txn *t);
/* A blob writer for the transaction's temp files; finish it with store_txn_blob_add (or
 * blob_writer_abort). */
int store_txn_blob_open(store_txn *t, blob_writer **out);
/* A blob writer that belongs to no transaction yet and holds no lock: for bytes that arrive at
 * their sender's pace (an HTTP upload), which must not keep gc and rm waiting meanwhile. Its temp
 * file under tmp/ is spared by gc while this process lives; once the bytes are in, a
 * transaction takes it with store_txn_blob_add, and the lock is held only from there to the
 * commit. MS_EIO on a read-only store. */
int store_blob_writer_open(store *s, blob_writer **out);
/* Hash `w` (always consumed), compare with `expect` (NULL: none; MS_EMISMATCH and its temp file
 * removed) and add it to the batch; *size_out (may be NULL) gets its size. */
int store_txn_blob_add(store_txn *t, ms_digest digest_out, uint64_t *size_out, blob_writer *w, const char *expect);
/* A buffer / a whole regular file (copied) as a blob of the batch. */
int store_txn_blob_put(store_txn *t, ms_digest digest_out, const void *buf, size_t len);
int store_txn_blob_put_file(store_txn *t, ms_digest digest_out, uint64_t *size_out, const char *path);
/* blob_adopt (computed NULL) or blob_adopt_hashed of `path`, a finished file under <home>/tmp/. */
int store_txn_blob_adopt(store_txn *t, ms_digest digest_out, const char *path, const char *expect,
                         const char *computed);
/* Make the blobs added so far durable under blobs/ now (still unnamed), for a writer that must
 * read one back before the commit. */
int store_txn_flush(store_txn *t);
/* Queue a registry_blobs row (host, repo, digest), written with the commit. */
int store_txn_registry_blob(store_txn *t, const char *host, const char *repo, const char *digest);
/* Check that every blob manifest `m` references is added or stored with the manifest's size
 * (else MS_ENOTFOUND / MS_EMISMATCH and no change), make the batch and the manifest blob
 * durable, then record the manifest, its layers, the tensors of each tensor layer (from the
 * blobs' safetensors headers), `name` -> it (an existing name moves) and the queued registry
 * rows in one SQLite transaction. The manifest blob holds manifest_bytes(m): the bytes `m` was
 * parsed from (a pull's, as received), or its serialization when it was built in memory (an
 * import's). MS_EINVALID for a manifest without a config. Always ends `t` (as store_txn_abort
 * on failure); `m` stays the caller's. digest_out (may be NULL) gets the manifest's digest. */
int store_txn_commit(store_txn *t, const model_name *name, const manifest *m, ms_digest digest_out);
/* Remove the batch's temp files, release the lock, free; the index is unchanged. NULL is fine. */
void store_txn_abort(store_txn *t);

/* Index lookups and registry_blobs, for the registry (src/registry/ollama.c, push.c). */
/* 1 when some stored manifest references `digest` as a layer or its config, 0 when none, <0 on
 * error. */
int store_blob_referenced(store *s, const char *digest);
/* Remove blob `digest` now when no stored manifest references it (what gc would do later):
 * a pull of an ollama model frees the whole GGUF it split into tensor blobs. Best effort, and
 * without gc's exclusive lock: a concurrent writer about to name the same blob fails with "no
 * such file" and succeeds when run again. 1 removed, 0 kept (referenced, or already gone). */
int store_blob_release(store *s, const char *digest);
/* The digest of one stored manifest with a layer of `media_type` named `layer_name`: 1 and
 * digest_out set, 0 when there is none, <0 on error. */
int store_manifest_find_layer(store *s, const char *media_type, const char *layer_name, ms_digest digest_out);
/* registry_blobs: record that `repo` at `host` holds `digest` (outside a pull's commit: push);
 * find another repo of `host` that holds it (1 and repo_out set, 0 when none, <0 on error). */
int store_registry_blob_record(store *s, const char *host, const char *repo, const char *digest);
int store_registry_blob_find(store *s, const char *host, const char *not_repo, const char *digest, char *repo_out,
                             size_t len);

#endif
