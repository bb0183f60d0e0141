/* ggml_types.c: the ggml tensor type table (ids as in ggml.h's enum ggml_type) and the byte
 * sizes derived from it. A block-quantized type stores `blck_elems` consecutive elements of a row
 * in `blck_bytes` bytes; plain types have blck_elems == 1. The ids are part of the GGUF format,
 * so removed ids (4, 5: Q4_2/Q4_3; 31-33 and 36-38: the repacked Q4_0_x_x / IQ4_NL_x_x layouts,
 * which ggml no longer accepts in files) stay holes: a file naming one is refused. */
#include <string.h>
#include <strings.h>

#include "format/format.h"

typedef struct type_row {
    const char *name;     /* NULL for an id that is not (or no longer) a ggml type */
    uint32_t blck_elems;
    uint32_t blck_bytes;
} type_row;

/* Block byte sizes, from ggml's block structs (fp16 d/dmin = 2 bytes each, QK_K = 256):
 *   Q4_0 d+16  Q4_1 d,m+16  Q5_0 d+qh4+16  Q5_1 d,m+qh4+16  Q8_0 d+32  Q8_1 d,s+32
 *   Q2_K 16+64+4  Q3_K 32+64+12+2  Q4_K 4+12+128  Q5_K 4+12+32+128  Q6_K 128+64+16+2
 *   Q8_K f32 d+256+16*2  IQ2_XXS 2+64  IQ2_XS 2+64+8  IQ3_XXS 2+96  IQ1_S 2+32+16
 *   IQ4_NL 2+16  IQ3_S 2+64+8+32+4  IQ2_S 2+64+8+8  IQ4_XS 2+2+4+128  IQ1_M 32+16+8
 *   TQ1_0 48+4+2  TQ2_0 64+2  MXFP4 e8m0 1+16 */
static const type_row types[GGML_TYPE_COUNT] = {
    [GGML_TYPE_F32] = { "F32", 1, 4 },
    [GGML_TYPE_F16] = { "F16", 1, 2 },
    [GGML_TYPE_Q4_0] = { "Q4_0", 32, 18 },
    [GGML_TYPE_Q4_1] = { "Q4_1", 32, 20 },
    [GGML_TYPE_Q5_0] = { "Q5_0", 32, 22 },
    [GGML_TYPE_Q5_1] = { "Q5_1", 32, 24 },
    [GGML_TYPE_Q8_0] = { "Q8_0", 32, 34 },
    [GGML_TYPE_Q8_1] = { "Q8_1", 32, 36 },
    [GGML_TYPE_Q2_K] = { "Q2_K", 256, 84 },
    [GGML_TYPE_Q3_K] = { "Q3_K", 256, 110 },
    [GGML_TYPE_Q4_K] = { "Q4_K", 256, 144 },
    [GGML_TYPE_Q5_K] = { "Q5_K", 256, 176 },
    [GGML_TYPE_Q6_K] = { "Q6_K", 256, 210 },
    [GGML_TYPE_Q8_K] = { "Q8_K", 256, 292 },
    [GGML_TYPE_IQ2_XXS] = { "IQ2_XXS", 256, 66 },
    [GGML_TYPE_IQ2_XS] = { "IQ2_XS", 256, 74 },
    [GGML_TYPE_IQ3_XXS] = { "IQ3_XXS", 256, 98 },
    [GGML_TYPE_IQ1_S] = { "IQ1_S", 256, 50 },
    [GGML_TYPE_IQ4_NL] = { "IQ4_NL", 32, 18 },
    [GGML_TYPE_IQ3_S] = { "IQ3_S", 256, 110 },
    [GGML_TYPE_IQ2_S] = { "IQ2_S", 256, 82 },
    [GGML_TYPE_IQ4_XS] = { "IQ4_XS", 256, 136 },
    [GGML_TYPE_I8] = { "I8", 1, 1 },
    [GGML_TYPE_I16] = { "I16", 1, 2 },
    [GGML_TYPE_I32] = { "I32", 1, 4 },
    [GGML_TYPE_I64] = { "I64", 1, 8 },
    [GGML_TYPE_F64] = { "F64", 1, 8 },
    [GGML_TYPE_IQ1_M] = { "IQ1_M", 256, 56 },
    [GGML_TYPE_BF16] = { "BF16", 1, 2 },
    [GGML_TYPE_TQ1_0] = { "TQ1_0", 256, 54 },
    [GGML_TYPE_TQ2_0] = { "TQ2_0", 256, 66 },
    [GGML_TYPE_MXFP4] = { "MXFP4", 32, 17 },
};

static const type_row *row_of(int id)
{
    if (id < 0 || id >= GGML_TYPE_COUNT || !types[id].name)
        return NULL;
    return &types[id];
}

const char *ggml_type_name(int id)
{
    const type_row *r = row_of(id);

    return r ? r->name : NULL;
}

int ggml_type_from_name(int *out, const char *name)
{
    *out = -1;
    for (int id = 0; id < GGML_TYPE_COUNT; id++) {
        if (types[id].name && strcasecmp(types[id].name, name) == 0) {
            *out = id;
            return 0;
        }
    }
    return ms_err(MS_EINVALID, "unknown ggml type name '%s'", name);
}

int ggml_type_check(int id)
{
    if (id < 0 || id >= GGML_TYPE_COUNT)
        return ms_err(MS_EINVALID, "type id %d out of range (0..%d)", id, GGML_TYPE_COUNT - 1);
    if (!types[id].name)
        return ms_err(MS_EINVALID, "type id %d is a removed or unknown ggml type", id);
    return 0;
}

int ggml_type_info(int id, uint32_t *blck_elems, uint32_t *blck_bytes)
{
    if (ggml_type_check(id) < 0)
        return MS_EINVALID;
    if (blck_elems)
        *blck_elems = types[id].blck_elems;
    if (blck_bytes)
        *blck_bytes = types[id].blck_bytes;
    return 0;
}

int ggml_row_nbytes(uint64_t *out, int type, uint64_t n_elems)
{
    const type_row *r = row_of(type);

    *out = 0;
    if (!r)
        return ggml_type_check(type);
    if (n_elems % r->blck_elems)
        return ms_err(MS_EINVALID, "row of %llu elements is not a multiple of block size %u for %s",
                      (unsigned long long)n_elems, r->blck_elems, r->name);
    /* n_elems / blck_elems * blck_bytes can only overflow when n_elems is near 2^64 */
    if (ms_mul64(out, n_elems / r->blck_elems, r->blck_bytes) < 0)
        return ms_err(MS_EINVALID, "row of %llu elements of %s overflows 64-bit byte size",
                      (unsigned long long)n_elems, r->name);
    return 0;
}

int ggml_tensor_nbytes(uint64_t *out, int type, int n_dims, const uint64_t *ne)
{
    uint64_t n = 1, rows = 1, row;

    *out = 0;
    if (n_dims < 0 || n_dims > GGUF_MAX_DIMS)
        return ms_err(MS_EINVALID, "n_dims %d > %d", n_dims, GGUF_MAX_DIMS);
    if (ggml_type_check(type) < 0)
        return MS_EINVALID;
    /* ggml keeps ne[] and the element count in int64_t: both must fit */
    for (int d = 0; d < n_dims; d++) {
        if (ne[d] > (uint64_t)INT64_MAX)
            return ms_err(MS_EINVALID, "ne[%d] %llu exceeds INT64_MAX", d, (unsigned long long)ne[d]);
        if (ms_mul64(&n, n, ne[d]) < 0 || n > (uint64_t)INT64_MAX)
            return ms_err(MS_EINVALID, "element count overflow at ne[%d] %llu", d,
                          (unsigned long long)ne[d]);
        if (d > 0)
            rows *= ne[d];   /* <= n unless some ne is 0, and then the result is unused */
    }
    if (ggml_row_nbytes(&row, type, n_dims > 0 ? ne[0] : 1) < 0)
        return ms_err_ctx("ne[0]");
    if (n == 0)
        return 0;
    if (ms_mul64(out, row, rows) < 0) {
        *out = 0;
        return ms_err(MS_EINVALID, "tensor byte size overflows (row %llu x %llu rows)",
                      (unsigned long long)row, (unsigned long long)rows);
    }
    return 0;
}
