/* import_int.h: helpers shared by the importers in src/import only. */
#ifndef MSTORE_IMPORT_INT_H
#define MSTORE_IMPORT_INT_H

#include <jansson.h>

#include "blob/blob.h"
#include "format/format.h"
#include "import/import.h"

/* A source file read with pread (source.c): what an import copies from it never touches its
 * mapping, so a file that shrinks meanwhile gives "<file>: file changed during import" (MS_EIO)
 * instead of SIGBUS. Messages do not name the file: the caller adds it. `base`/`size` are the file's mapping as a parser validated it: pointers
 * into it (st_writer's borrowed tensor data) stand for file offsets. */
typedef struct import_source import_source;
/* MS_EIO also when the file's size is no longer `size`. */
int import_source_open(import_source **out, const char *path, const uint8_t *base, uint64_t size);
uint64_t import_source_size(const import_source *s);
/* `len` bytes at `offset`; a short file is "file changed during import". MS_EIO. */
int import_source_read(import_source *s, void *buf, uint64_t offset, size_t len);
/* The sha256 of the whole file, computed by a second thread that import_source_hash_finish
 * joins (MS_EIO when the file shrank under it). Where it also hashes the blobs' chunks (fused),
 * a blob must take its chunks from this one source, as a GGUF import's do: two threads would
 * hash one blob out of order. */
int import_source_hash_start(import_source *s);
int import_source_hash_finish(import_source *s, ms_digest digest_out);
/* MS_EIO "file changed during import" when size or mtime differ from those at open: call it
 * after the last read and before any blob of the import is committed. */
int import_source_check(import_source *s);
/* 1 once a read or check found the file changed: the caller then names only the file, since
 * the tensor it was copying is not what went wrong. */
int import_source_changed(const import_source *s);
/* The index of the first of n sources (entries may be NULL) found changed, or -1. */
int import_sources_changed(import_source *const *srcs, size_t n);
/* st_writer_emit(w) into `bw`, reading the tensor data that points into one of the sources'
 * mappings from its file (an HF pack may span shards). Entries of `srcs` may be NULL. The hash
 * threads may still be hashing the last chunks into `bw`'s hash when it returns: call
 * import_sources_settle before naming, aborting or writing to `bw` (import_tensor_blob_name). */
int import_sources_emit(import_source *const *srcs, size_t n, st_writer *w, blob_writer *bw);
/* Wait until no source's hash thread holds chunks of `bw`. The thread's error (the file changed
 * under it...) when it had one. */
int import_sources_settle(import_source *const *srcs, size_t n, blob_writer *bw);
/* `len` bytes of tensor data at `data` into buf: read from the file of the source whose
 * mapping holds `data` (never through the mapping), else copied. For the importers that must
 * see a tensor's values (quantizing on import). */
int import_sources_read(import_source *const *srcs, size_t n, void *buf, const void *data, size_t len);
void import_source_close(import_source *s);   /* joins the hash thread; NULL is fine */
/* Tests only (t1006): truncate dir/file to MSTORE_TEST_IMPORT_SHRINK bytes when that is set;
 * the importers call it right after their first tensor blob, so a shrinking source is met at
 * the same point every time. */
void import_test_shrink(const char *dir, const char *file);

/* Emit `w` into a new blob of `t` (it lands under blobs/ at the commit). Tensor
 * data that points into the mapping of one of `srcs` (n_srcs of them, may be 0) is read from
 * its file instead (import_sources_emit). */
int import_tensor_blob(ms_digest digest_out, uint64_t *size_out, store_txn *t, st_writer *w, import_source *const *srcs,
                       size_t n_srcs);
/* import_tensor_blob in two halves, so that a caller can start the next blob before naming
 * this one (the hash thread then has the next blob's chunks to hash while this one is named).
 * _write leaves *bw_out NULL after an error; _name always consumes `bw`. */
int import_tensor_blob_write(blob_writer **bw_out, store_txn *t, st_writer *w, import_source *const *srcs,
                             size_t n_srcs);
int import_tensor_blob_name(ms_digest digest_out, uint64_t *size_out, store_txn *t, blob_writer *bw,
                            import_source *const *srcs, size_t n_srcs);
/* Abort a blob of _write that will not be named, once no hash thread holds it; NULL is fine. */
void import_tensor_blob_drop(blob_writer *bw, import_source *const *srcs, size_t n_srcs);
/* Parse a JSON object file (bounded). With required == 0 a missing file gives *out == NULL, 0. */
int import_json_file(json_t **out, const char *path, int required);
/* Add the file at `path`, when it exists, as a layer of `media_type`. */
int import_file_layer(manifest *m, store_txn *t, const char *path, const char *media_type);
/* Build the config blob (import.h) from a Hugging Face config.json object, store it and set it
 * as the manifest's config. `dtypes` maps tensor type -> count; the members of `extra` (may be
 * NULL), such as "quantization_error", are added as they are. */
int import_config_commit(store_txn *t, manifest *m, json_t *hf_config, json_t *dtypes, const char *format,
                         const char *source_path, json_t *extra);
/* Add a config object as the config blob of `m` to `t` (sorted keys, compact). */
int import_config_store(store_txn *t, manifest *m, json_t *config);

/* Split GGUF sets (gguf_split.c). *n_out: the split.count of `path` when it is 2 or more (a
 * shard), else 0. Merge checks the set and writes the merged GGUF to out_path. Split_file imports
 * the set whose first shard is `path` (n shards named as gguf-split names them). */
int import_gguf_split_count(unsigned *n_out, const char *path);
int import_gguf_split_merge(const char *const *paths, const char *const *labels, size_t n, const char *out_path);
int import_gguf_split_file(manifest **out, store_txn *t, const char *path, const char *label, unsigned n,
                           const import_opts *o);

/* The store's name of a Hugging Face or MLX tensor (common.c, which lists the MoE renames):
 * `out` the name, `pack` the expert pack it joins ("" for none), *expert the index of the expert
 * it is within a tensor to stack (-1 for none). */
void import_moe_name(const char *name, char *out, size_t out_len, char *pack, size_t pack_len, long *expert);

/* ---------------------------------------------------------------- MLX (mlx.c) and --quantize (quantize.c) */
#include "quant/quant.h"

/* One safetensors file of a model directory, as hf.c opened it. */
typedef struct import_shard_view {
    const char *file;     /* base name */
    const st_file *st;
} import_shard_view;
/* The tensors of an MLX-quantized directory (config has "quantization") into blobs of `m`:
 * quantized triplets combined, MoE tensors named and packed as import_moe_name says, the rest one
 * blob per tensor; tensor bytes are read from `srcs` (shards[i]'s file is srcs[i]). `qsum` gets
 * type -> tensor count. The blobs go into `t`. MS_EINVALID naming the file and field for
 * inconsistent input (o->quantize too: the model is quantized already), MS_EUNSUPPORTED. */
int import_mlx_tensors(store_txn *t, manifest *m, json_t *config, const char *dir, const import_shard_view *shards,
                       import_source *const *srcs, size_t n_shards, const import_opts *o, json_t *qsum);

/* Quantizing float tensors on import; usable by any importer (gguf.c's float tensors too):
 *   import_quant q; import_quant_init(&q, o);
 *   per blob: for each tensor, import_quant_wants ? import_quant_add : st_writer_add;
 *             emit the writer, then import_quant_release(&q) (the writer borrows q's buffers);
 *   at the end: import_quant_report(&q) into the config, import_quant_release(&q). */
typedef struct import_quant {
    const quant_format *fmt;   /* NULL: no quantization */
    int group_size;
    quant_error err;
    size_t n_tensors;
    void **bufs;               /* buffers the pending st_writer borrows */
    size_t n_bufs;
} import_quant;
int import_quant_init(import_quant *q, const import_opts *o);   /* MS_EINVALID for a bad type or group */
/* 1 when this tensor (HF order shape) is to be quantized. */
int import_quant_wants(const import_quant *q, const char *name, st_dtype dt, int n_dims, const uint64_t *shape);
/* Quantize and add {name}, {name}.scale[, {name}.bias] and the metadata (keys ":<name>"
 * suffixed when `packed`). */
int import_quant_add(import_quant *q, st_writer *w, const char *name, st_dtype dt, int n_dims, const uint64_t *shape,
                     const void *data, int packed);
void *import_quant_buf(import_quant *q, size_t nbytes);   /* zeroed, freed by import_quant_release */
void import_quant_release(import_quant *q);
json_t *import_quant_report(const import_quant *q);       /* new reference */
/* A quantized tensor's quant_type, logical_shape and group_size (tensor_blob_meta_put), keyed
 * for `name` in a pack. */
int import_quant_meta(st_writer *w, const char *name, int packed, const char *quant_type, int group_size,
                      int n_dims, const uint64_t *logical);

#endif
