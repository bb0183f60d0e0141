/* format.h: the file formats mstore reads and writes; the whole surface of src/format.
 *
 * Safetensors: [u64 LE header size][JSON header][data]. Header keys are tensor names mapped to
 *   {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative to the data region) and an
 *   optional "__metadata__" map of string to string.
 *   Invariants the reader checks (a buffer that breaks one is refused, naming the field):
 *   1. 8 <= header size <= ST_HEADER_MAX and 8 + header size <= buffer size.
 *   2. The header is a JSON object; each entry has a known dtype, a shape of at most ST_MAX_DIMS
 *      non-negative integers, and two offsets begin <= end inside the data region.
 *   3. end - begin == product(shape) * dtype size, computed without overflow.
 *   4. No two tensors overlap. Gaps are allowed (mstore's writer aligns each tensor).
 *   mstore's writer pads the header with spaces so the data region starts at a multiple of
 *   ST_ALIGN, and places every tensor at a multiple of ST_ALIGN, so mmapped views are aligned.
 *
 * GGUF (versions 2 and 3): see the GGUF section below. */
#ifndef MSTORE_FORMAT_H
#define MSTORE_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include "util/util.h"

/* ---------------------------------------------------------------- safetensors */

#define ST_MAX_DIMS 8
#define ST_ALIGN 64
#define ST_HEADER_MAX (100u << 20)   /* 100 MiB, as the safetensors library allows */

typedef enum st_dtype {
    ST_BOOL, ST_U8, ST_I8, ST_F8_E4M3, ST_F8_E5M2, ST_U16, ST_I16, ST_F16, ST_BF16,
    ST_U32, ST_I32, ST_F32, ST_U64, ST_I64, ST_F64, ST_DTYPE_COUNT
} st_dtype;

const char *st_dtype_name(st_dtype t);                  /* "F16" ... */
int st_dtype_parse(st_dtype *out, const char *name);    /* MS_EINVALID for an unknown name */
size_t st_dtype_size(st_dtype t);                       /* bytes per element */

typedef struct st_tensor {
    const char *name;          /* owned by the st_file */
    st_dtype dtype;
    int n_dims;
    uint64_t shape[ST_MAX_DIMS];
    uint64_t offset;           /* from the start of the file (not the data region) */
    uint64_t nbytes;
    const uint8_t *data;       /* buf + offset; NULL when parsed with ST_HEADER_ONLY */
} st_tensor;

typedef struct st_file st_file;
enum { ST_HEADER_ONLY = 1 };   /* buf holds at least the header; data may lie past len */
/* Parse and validate. `buf` is borrowed and must outlive the st_file. `what` names the buffer in
 * messages ("model.safetensors", "sha256:..."). With ST_HEADER_ONLY, `file_size` is the size of
 * the whole file, against which offsets are checked; otherwise it is ignored (len is used).
 * Returns 0, MS_EINVALID, MS_ENOMEM. */
int st_parse(st_file **out, const uint8_t *buf, size_t len, uint64_t file_size, int flags, const char *what);
size_t st_count(const st_file *f);
const st_tensor *st_at(const st_file *f, size_t i);            /* ordered by offset */
const st_tensor *st_find(const st_file *f, const char *name);  /* NULL when absent */
const char *st_meta(const st_file *f, const char *key);        /* __metadata__ value or NULL */
size_t st_meta_count(const st_file *f);
void st_meta_at(const st_file *f, size_t i, const char **key, const char **value);
uint64_t st_data_start(const st_file *f);                      /* 8 + header size */
void st_free(st_file *f);

/* Writer: collect tensors (data borrowed until st_writer_emit returns), then emit the file. */
typedef int (*st_sink)(void *ctx, const void *buf, size_t len);   /* 0 or a MS_E code */
typedef struct st_writer st_writer;
int st_writer_new(st_writer **out);
int st_writer_meta(st_writer *w, const char *key, const char *value);
/* MS_EINVALID when nbytes != product(shape) * dtype size or the name repeats. */
int st_writer_add(st_writer *w, const char *name, st_dtype dtype, int n_dims, const uint64_t *shape,
                  const void *data, uint64_t nbytes);
/* The same, the data given as n_parts pieces written one after the other (the experts of a pack,
 * each a tensor of its own in the source): their sizes sum to the shape's bytes. */
int st_writer_add_parts(st_writer *w, const char *name, st_dtype dtype, int n_dims, const uint64_t *shape,
                        const void *const *parts, const uint64_t *part_nbytes, size_t n_parts);
uint64_t st_writer_size(const st_writer *w);   /* total bytes st_writer_emit will produce */
int st_writer_emit(st_writer *w, st_sink sink, void *ctx);
void st_writer_free(st_writer *w);

/* ---------------------------------------------------------------- tensor blobs */
/* A stored tensor is a safetensors blob (one tensor; a quantized tensor with its ".scale" and
 * ".bias"; or an expert pack). What the safetensors header cannot say travels in __metadata__,
 * encoded and decoded only by tensor_blob.c (the contract itself is in import.h):
 *   quant_type     ggml type name ("Q4_0") of U8 block bytes, or MLX format ("int4") of U32 codes
 *   logical_shape  the element shape, HF order, "[4096, 4096]", when the stored one is not it
 *   group_size     MLX quantization group, decimal
 *   gguf_name      the tensor's GGUF name, on tensors imported from GGUF
 * Each key is the blob's ("quant_type") or one tensor's ("quant_type:<name>", in packs); a
 * ".scale" / ".bias" shares its tensor's. A blob-wide logical_shape belongs to the blob's main
 * tensor: the only one, or the one named like its layer. */
typedef struct tensor_blob_meta {
    const char *quant_type;   /* NULL: not quantized */
    const char *gguf_name;    /* NULL: none */
    int group_size;           /* 0: none */
    int n_dims;               /* logical shape; 0: none (the safetensors shape is the shape) */
    uint64_t shape[ST_MAX_DIMS];
} tensor_blob_meta;
/* Write m's fields that are set, keyed for `tensor` (NULL: blob-wide). The key order is fixed:
 * it is part of the blob's bytes. MS_EINVALID (a key set twice), MS_ENOMEM. */
int tensor_blob_meta_put(st_writer *w, const char *tensor, const tensor_blob_meta *m);
/* Read tensor t's fields (strings borrowed from f). `layer` is the manifest layer's name (NULL:
 * unknown), `what` names the blob in messages. MS_EINVALID for a group_size that is not an
 * integer in 1..INT32_MAX or a logical_shape that tensor_blob_shape_parse refuses. */
int tensor_blob_meta_get(tensor_blob_meta *out, const st_file *f, const st_tensor *t, const char *layer,
                         const char *what);
/* "[4096, 4096]": the one shape text, in blobs, the index and listings. Truncated to len. */
const char *tensor_blob_shape_format(char *buf, size_t len, int n_dims, const uint64_t *shape);
#define TENSOR_BLOB_SHAPE_MAX (ST_MAX_DIMS * 22 + 4)   /* fits any shape's text */
/* Its inverse: 1 to ST_MAX_DIMS integers; MS_EINVALID naming the text otherwise. */
int tensor_blob_shape_parse(int *n_dims, uint64_t *shape, const char *s);

/* ---------------------------------------------------------------- GGUF */
/* GGUF v2/v3, little-endian (all integers LE, strings = u64 length + bytes, no NUL):
 *   u32 magic "GGUF" (0x46554747)  u32 version (2 or 3)  u64 n_tensors  u64 n_kv
 *   n_kv x { string key; u32 value type; value }
 *     value: fixed-size scalar | string | array = { u32 elem type; u64 count; count x value }
 *   n_tensors x { string name; u32 n_dims; u64 ne[n_dims]; u32 ggml type; u64 offset }
 *   zero padding up to the data section, which starts at the header end rounded up to the
 *   alignment (`general.alignment`, a u32, default 32); tensor offsets are relative to it.
 * Invariants the reader checks (a buffer that breaks one is refused, naming the field and value):
 *   1. Version 2 or 3; every count and length fits in the bytes that remain (checked before
 *      anything is allocated); value types are known; arrays nest at most GGUF_MAX_DEPTH deep;
 *      bools are 0 or 1; keys and tensor names are non-empty, contain no NUL and do not repeat.
 *   2. general.alignment, when present, is a u32 and a nonzero power of two.
 *   3. n_dims <= GGUF_MAX_DIMS; each ne <= INT64_MAX and their product too (ggml's int64_t);
 *      the type is a ggml type (ggml_type_check); ne[0] is a multiple of its block size.
 *   4. Each offset is a multiple of the alignment; tensors do not overlap; without
 *      GGUF_HEADER_ONLY each tensor's data lies inside the buffer.
 * The data section may hold gaps (llama.cpp itself writes tensors in order, each padded). */

#define GGUF_MAGIC 0x46554747u   /* "GGUF" read as a little-endian u32 */
#define GGUF_MAX_DIMS 4
#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_DEPTH 8          /* nesting of arrays (ggml itself reads none) */

/* Metadata value types, as numbered in the file. */
enum gguf_value_type {
    GGUF_TYPE_UINT8 = 0, GGUF_TYPE_INT8 = 1, GGUF_TYPE_UINT16 = 2, GGUF_TYPE_INT16 = 3,
    GGUF_TYPE_UINT32 = 4, GGUF_TYPE_INT32 = 5, GGUF_TYPE_FLOAT32 = 6, GGUF_TYPE_BOOL = 7,
    GGUF_TYPE_STRING = 8, GGUF_TYPE_ARRAY = 9, GGUF_TYPE_UINT64 = 10, GGUF_TYPE_INT64 = 11,
    GGUF_TYPE_FLOAT64 = 12, GGUF_TYPE_COUNT
};
const char *gguf_type_name(uint32_t type);   /* "u8", "i32", "f32", "bool", "string", "array"...; NULL if unknown */
size_t gguf_type_size(uint32_t type);        /* bytes of a fixed-size type; 0 for string, array, unknown */

/* ggml tensor types: ids as in ggml.h. Holes (4, 5, 31-33, 36-38) are removed types. */
enum ggml_type_id {
    GGML_TYPE_F32 = 0, GGML_TYPE_F16 = 1, GGML_TYPE_Q4_0 = 2, GGML_TYPE_Q4_1 = 3,
    GGML_TYPE_Q5_0 = 6, GGML_TYPE_Q5_1 = 7, GGML_TYPE_Q8_0 = 8, GGML_TYPE_Q8_1 = 9,
    GGML_TYPE_Q2_K = 10, GGML_TYPE_Q3_K = 11, GGML_TYPE_Q4_K = 12, GGML_TYPE_Q5_K = 13,
    GGML_TYPE_Q6_K = 14, GGML_TYPE_Q8_K = 15, GGML_TYPE_IQ2_XXS = 16, GGML_TYPE_IQ2_XS = 17,
    GGML_TYPE_IQ3_XXS = 18, GGML_TYPE_IQ1_S = 19, GGML_TYPE_IQ4_NL = 20, GGML_TYPE_IQ3_S = 21,
    GGML_TYPE_IQ2_S = 22, GGML_TYPE_IQ4_XS = 23, GGML_TYPE_I8 = 24, GGML_TYPE_I16 = 25,
    GGML_TYPE_I32 = 26, GGML_TYPE_I64 = 27, GGML_TYPE_F64 = 28, GGML_TYPE_IQ1_M = 29,
    GGML_TYPE_BF16 = 30, GGML_TYPE_TQ1_0 = 34, GGML_TYPE_TQ2_0 = 35, GGML_TYPE_MXFP4 = 39,
    GGML_TYPE_COUNT = 40
};
/* Upper-case names as gguf-py and llama.cpp print them: "F32", "Q4_0", "Q4_K", "IQ4_XS", "BF16".
 * NULL for an id that is not a ggml type. */
const char *ggml_type_name(int id);
int ggml_type_from_name(int *out, const char *name);   /* case-insensitive; MS_EINVALID, *out = -1 */
int ggml_type_check(int id);   /* 0, or MS_EINVALID "type id 99 out of range" / "... removed ..." */
/* Elements per block and bytes per block (1 and the element size for plain types). Either
 * pointer may be NULL. MS_EINVALID for an unknown id. */
int ggml_type_info(int id, uint32_t *blck_elems, uint32_t *blck_bytes);
/* Bytes of a row of n_elems elements. MS_EINVALID when n_elems is not a multiple of the block
 * size, the type is unknown or the size overflows. */
int ggml_row_nbytes(uint64_t *out, int type, uint64_t n_elems);
/* Bytes of a whole tensor (ggml ne[] order: ne[0] is the row, contiguous). Dims past n_dims
 * count as 1. Checks invariant 3. MS_EINVALID. */
int ggml_tensor_nbytes(uint64_t *out, int type, int n_dims, const uint64_t *ne);

typedef struct gguf_tensor {
    const char *name;            /* NUL-terminated copy owned by the gguf_file */
    int n_dims;                  /* 0..GGUF_MAX_DIMS */
    uint64_t ne[GGUF_MAX_DIMS];  /* ggml order (ne[0] = row length); 1 past n_dims */
    int type;                    /* ggml type id, valid (ggml_type_name is never NULL) */
    uint64_t offset;             /* relative to the data section, as in the file */
    uint64_t nbytes;
    const uint8_t *data;         /* into the mapping/buffer; NULL with GGUF_HEADER_ONLY */
} gguf_tensor;

typedef struct gguf_file gguf_file;
enum { GGUF_HEADER_ONLY = 1 };   /* buf holds at least the KV and tensor infos; data may be absent */

/* Map `path` read-only and validate it whole (header, infos, every tensor's bounds). The
 * mapping lives until gguf_close. Messages start with `path`. MS_EINVALID, MS_ENOTFOUND, MS_EIO,
 * MS_ENOMEM. */
int gguf_open(gguf_file **out, const char *path);
/* Validate a buffer. `buf` is borrowed and must outlive the gguf_file. `what` names it in
 * messages ("model.gguf", "sha256:..."; copied). With GGUF_HEADER_ONLY only the metadata and
 * tensor infos must be in buf (e.g. the bytes before gguf_data_offset): tensor data bounds are
 * not checked and gguf_tensor.data is NULL; everything else is. MS_EINVALID, MS_ENOMEM. */
int gguf_open_buf(gguf_file **out, const uint8_t *buf, size_t len, int flags, const char *what);
void gguf_close(gguf_file *g);   /* NULL is fine */

uint32_t gguf_version(const gguf_file *g);
uint32_t gguf_alignment(const gguf_file *g);
uint64_t gguf_data_offset(const gguf_file *g);    /* absolute offset of the data section */
uint64_t gguf_header_nbytes(const gguf_file *g);  /* bytes of magic..last tensor info, before padding */
uint64_t gguf_file_size(const gguf_file *g);      /* bytes mapped, or `len` of gguf_open_buf */
const uint8_t *gguf_bytes(const gguf_file *g);    /* the mapping or buffer (e.g. to copy the header) */

/* Metadata. Indices are in file order. Getters by key return MS_ENOTFOUND "<what>: kv 'k' not
 * found" when absent, MS_EINVALID "<what>: kv 'k' has type f32, expected string" on a type
 * mismatch. Pointers returned are borrowed and valid until gguf_close. Multi-byte array
 * elements returned by pointer are little-endian and MAY BE UNALIGNED: read with memcpy. */
size_t gguf_kv_count(const gguf_file *g);
long gguf_kv_find(const gguf_file *g, const char *key);   /* index, or -1 (no message) */
const char *gguf_kv_key(const gguf_file *g, size_t i);    /* NUL-terminated copy */
uint32_t gguf_kv_type(const gguf_file *g, size_t i);      /* enum gguf_value_type */
/* The encoded value bytes as in the file (after the u32 type): for re-emitting a value verbatim
 * with gguf_writer_set_raw. */
void gguf_kv_value(const gguf_file *g, size_t i, const uint8_t **val, size_t *len);
int gguf_get_str(const gguf_file *g, const char *key, const char **s, size_t *len);   /* not NUL-terminated */
int gguf_get_uint(const gguf_file *g, const char *key, uint64_t *out);  /* any integer type; negative refused */
int gguf_get_int(const gguf_file *g, const char *key, int64_t *out);    /* any integer type; u64 > INT64_MAX refused */
int gguf_get_float(const gguf_file *g, const char *key, double *out);   /* f32 or f64 */
int gguf_get_bool(const gguf_file *g, const char *key, int *out);       /* 0 or 1 */
/* Arrays: element type and count (MS_EINVALID when the key is not an array). */
int gguf_get_arr(const gguf_file *g, const char *key, uint32_t *elem_type, uint64_t *count);
/* Raw elements of an array of a fixed-size type (not string, not array): count x
 * gguf_type_size(elem_type) LE bytes, possibly unaligned. */
int gguf_arr_data(const gguf_file *g, const char *key, uint32_t *elem_type, const uint8_t **data, uint64_t *count);
/* Element i of a string array, O(1) (offsets are indexed at open). MS_EINVALID past the end. */
int gguf_arr_str(const gguf_file *g, const char *key, uint64_t i, const char **s, size_t *len);
/* Element i of an array of integers / of f32 or f64, converted like gguf_get_int / get_float. */
int gguf_arr_int(const gguf_file *g, const char *key, uint64_t i, int64_t *out);
int gguf_arr_float(const gguf_file *g, const char *key, uint64_t i, double *out);
/* Any value as JSON (new reference; NULL with MS_ENOMEM set): integers -> integer (u64 above
 * INT64_MAX -> decimal string), f32/f64 -> real (nan/inf -> "nan", "inf", "-inf"), bool -> true/false,
 * string -> string (invalid UTF-8 bytes -> U+FFFD), arrays (nested too) -> arrays. */
struct json_t *gguf_kv_to_json(const gguf_file *g, size_t i);
/* All metadata as one JSON object {key: value} in file order; NULL with MS_ENOMEM set. */
struct json_t *gguf_meta_to_json(const gguf_file *g);

/* Tensors, in file order. */
size_t gguf_tensor_count(const gguf_file *g);
const gguf_tensor *gguf_tensor_at(const gguf_file *g, size_t i);
const gguf_tensor *gguf_tensor_find(const gguf_file *g, const char *name);   /* NULL when absent */

/* Writer: collect metadata (copied) and tensors (data borrowed until emit returns), then emit a
 * standard GGUF: header, keys in insertion order, tensor infos in insertion order, zero padding
 * to the alignment, each tensor at the next multiple of the alignment, zero padded, the last
 * one too (as llama.cpp writes it); a file without tensors ends at its last kv (as gguf-py writes
 * vocab-only files). When the alignment is not 32 and no `general.alignment` was
 * set, the writer emits it as the first key; setting it to another value is refused.
 * Setters return MS_EINVALID "duplicate key 'k'" for a repeated key, MS_ENOMEM. */
typedef struct gguf_writer gguf_writer;
/* version 2 or 3; alignment 0 means 32, else a power of two. MS_EINVALID, MS_ENOMEM. */
int gguf_writer_new(gguf_writer **out, uint32_t version, uint32_t alignment);
int gguf_writer_set_u8(gguf_writer *w, const char *key, uint8_t v);
int gguf_writer_set_i8(gguf_writer *w, const char *key, int8_t v);
int gguf_writer_set_u16(gguf_writer *w, const char *key, uint16_t v);
int gguf_writer_set_i16(gguf_writer *w, const char *key, int16_t v);
int gguf_writer_set_u32(gguf_writer *w, const char *key, uint32_t v);
int gguf_writer_set_i32(gguf_writer *w, const char *key, int32_t v);
int gguf_writer_set_u64(gguf_writer *w, const char *key, uint64_t v);
int gguf_writer_set_i64(gguf_writer *w, const char *key, int64_t v);
int gguf_writer_set_f32(gguf_writer *w, const char *key, float v);
int gguf_writer_set_f64(gguf_writer *w, const char *key, double v);
int gguf_writer_set_bool(gguf_writer *w, const char *key, int v);   /* written as 0 or 1 */
int gguf_writer_set_str(gguf_writer *w, const char *key, const char *s, size_t len);
/* Array of a fixed-size type: `data` holds count elements in host order (little-endian hosts). */
int gguf_writer_set_arr(gguf_writer *w, const char *key, uint32_t elem_type, const void *data, uint64_t count);
/* Array of strings; lens may be NULL (then strlen of each). */
int gguf_writer_set_arr_str(gguf_writer *w, const char *key, const char *const *strs, const size_t *lens,
                            uint64_t count);
/* Any value, given as its encoded bytes (what follows the u32 type in the file, e.g. from
 * gguf_kv_value): nested arrays, or a value copied verbatim. The bytes must encode exactly one
 * valid value of `type` (checked as the reader does). MS_EINVALID. */
int gguf_writer_set_raw(gguf_writer *w, const char *key, uint32_t type, const void *val, size_t len);
/* Add a tensor; `data` is borrowed until emit. MS_EINVALID when nbytes != ggml_tensor_nbytes,
 * the name repeats ("duplicate tensor name"), is empty or the shape is invalid. */
int gguf_writer_add_tensor(gguf_writer *w, const char *name, int type, int n_dims, const uint64_t *ne,
                           const void *data, uint64_t nbytes);
uint64_t gguf_writer_size(const gguf_writer *w);        /* total bytes emit produces */
uint64_t gguf_writer_data_offset(const gguf_writer *w); /* where the data section will start */
/* Stream the file to `sink` (the st_sink type above; its error code is returned as is). */
int gguf_writer_emit(gguf_writer *w, st_sink sink, void *ctx);
/* Write to `path` atomically (temp file beside it, fsync, rename). MS_EIO. */
int gguf_writer_write_file(gguf_writer *w, const char *path);
void gguf_writer_free(gguf_writer *w);   /* NULL is fine */

/* ---------------------------------------------------------------- GGUF tensor names (gguf_names.c) */

/* The one architecture table (gguf_names.c). 1 when `arch` is a GGUF architecture name whose
 * tensor names are mapped to canonical names. */
int gguf_arch_known(const char *arch);
/* The decoder that runs `arch` ("llama" for llama, mistral and mixtral; "qwen2moe" for qwen2moe
 * and Hugging Face's qwen2_moe; ...), or NULL when mstore does not run it. Takes GGUF names and
 * the Hugging Face model_type spellings a config blob may carry. */
const char *gguf_arch_decoder(const char *arch);

/* ---------------------------------------------------------------- GGUF config (gguf_config.c) */

/* The config blob's model fields (import.h's config contract) read from a GGUF file's
 * metadata: the one GGUF hyper-parameter reader. The importer stores it (adding quantization
 * and the source's file, digest, size); the runtime reads it with runtime_config_from_json's
 * rules, so `run --gguf FILE` and `run` of FILE imported see the same config.
 * Fields: architecture (general.architecture, or "unknown"), hidden_size, num_hidden_layers,
 * num_attention_heads, num_key_value_heads and head_dim (llama.cpp's defaults when absent),
 * intermediate_size, max_position_embeddings, sliding_window, num_experts,
 * num_experts_per_tok, moe_intermediate_size, shared_expert_intermediate_size,
 * rope_dimension_count, final_logit_softcapping (when set), rms_norm_eps, rope_theta,
 * rope_scaling (null or {rope_type, factor, original_max_position_embeddings, attn_factor};
 * rope_factors_* tensors mean longrope), rope_interleaved (the llama decoder's GGUF rows),
 * norm_topk_prob (<arch>.expert_weights_norm, when set), tie_word_embeddings, vocab_size (the
 * token list's length, else <arch>.vocab_size), bos_token_id, eos_token_id, tokenizer
 * ({kind, model, pre} or null) and source {"format": "gguf"}; and, only when the file has the
 * key (so a decoder's config is what it was before encoders): pooling_type (<arch>.pooling_type,
 * 0 to 4), layer_norm_eps (<arch>.attention.layer_norm_epsilon), causal_attention
 * (<arch>.attention.causal). head_dim defaults to hidden / heads only where heads divide hidden;
 * else, with no key_length, the head count is refused by its key. An absent integer key is null.
 * A key present with an unusable type, or a non-finite float: MS_EINVALID naming the key
 * (the file is refused rather than stored under a config that says otherwise). MS_ENOMEM. */
int gguf_config_json(struct json_t **out, const gguf_file *g);
/* The canonical (Hugging Face) name of GGUF tensor `gguf` under `arch`, or the GGUF name itself
 * when the table has no row for it; `pack` (may be NULL) receives the expert pack's name, or ""
 * when the tensor has its own blob. */
void gguf_name_to_hf(char *out, size_t len, char *pack, size_t pack_len, const char *arch, const char *gguf);
/* The GGUF name of canonical tensor `hf` under `arch`; -1 (no message) when the table has none. */
int gguf_name_from_hf(char *out, size_t len, const char *arch, const char *hf);

#endif
