/* gguf_int.h: helpers shared by gguf*.c only (tests may use them): the bounded cursor that walks
 * encoded GGUF values (little-endian loads are util.h's ms_le*). */
#ifndef MSTORE_GGUF_INT_H
#define MSTORE_GGUF_INT_H

#include "format/format.h"

/* A cursor over [buf, buf + len). Every read checks the bytes that remain first, so a count
 * read from the file can be compared with `len - pos` before it is trusted. */
typedef struct gguf__rd {
    const uint8_t *buf;
    size_t len;
    size_t pos;
} gguf__rd;

static inline size_t gguf__left(const gguf__rd *r) { return r->len - r->pos; }

/* One metadata entry; offsets are into gguf_file.buf. */
typedef struct gguf__kv {
    char *key;              /* NUL-terminated copy */
    uint32_t type;
    size_t val_off;         /* encoded value (after the u32 type) */
    size_t val_len;
    uint32_t arr_type;      /* arrays: element type, count, first element */
    uint64_t arr_count;
    size_t arr_off;
    size_t *str_off;        /* arrays of strings: offset of each element's u64 length */
} gguf__kv;

struct gguf_file {
    ms_map map;             /* gguf_open only */
    const uint8_t *buf;
    size_t len;
    int flags;
    char *what;
    uint32_t version;
    uint32_t alignment;
    uint64_t header_nbytes;
    uint64_t data_offset;
    size_t n_kv;
    gguf__kv *kv;
    gguf__kv **kv_by_key;   /* sorted by key, for gguf_kv_find */
    size_t n_tensors;
    gguf_tensor *tensors;
    gguf_tensor **t_by_name;   /* sorted by name, for gguf_tensor_find */
};

/* Read a u32/u64 named `field` (for the message). MS_EINVALID "truncated: ..." when short. */
int gguf__rd_u32(gguf__rd *r, uint32_t *out, const char *field);
int gguf__rd_u64(gguf__rd *r, uint64_t *out, const char *field);
/* Read a string (u64 length + bytes); *s points into the buffer. */
int gguf__rd_str(gguf__rd *r, const uint8_t **s, uint64_t *len, const char *field);
/* Validate and skip one value of `type` (depth = nesting level of the enclosing arrays).
 * Messages name no key: the caller prefixes "kv 'k'". */
int gguf__value_skip(gguf__rd *r, uint32_t type, int depth);

#endif
