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
uint64_t st_writer_size(const st_writer *w);   /* total bytes st_writer_emit will produce */
int st_writer_emit(st_writer *w, st_sink sink, void *ctx);
void st_writer_free(st_writer *w);

/* ---------------------------------------------------------------- GGUF */
/* (owned by the GGUF reader/writer: gguf.c, ggml_types.c) */

#endif
