/* quant.h: weight quantizers and dequantizers; the whole surface of src/quant.
 *
 * MLX-style formats (what a combined quantized blob holds, see import.h): weights in groups of
 * `group_size` consecutive elements along the last (input) axis; codes packed as one
 * little-endian bit stream (code i at bit i * bits), stored as U32 words, so a row of `cols`
 * weights takes cols * bits / 32 words (MLX's layout for every bit width, 3, 5 and 6 included).
 *   affine  "int2".."int8" (bits 2,3,4,5,6,8): w = scale * q + bias, q unsigned in [0, 2^bits - 1];
 *           one scale and one bias per group, float (F32, F16 or BF16).
 *   mxfp4   4-bit E2M1 codes (sign, 2 exponent bits, 1 mantissa bit), group 32, one E8M0 scale
 *           per group (a U8 e, the factor 2^(e - 127); 255 is NaN), no bias.
 *   nvfp4   E2M1 codes, group 16, one E4M3 (F8_E4M3) scale per group, no bias.
 *   mxfp8   8-bit E4M3 codes, group 32, one E8M0 scale per group, no bias.
 *
 * GGUF block types (dequantize only, bit-exact with ggml's reference dequantizers): Q4_0, Q4_1,
 * Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K, IQ4_NL, IQ4_XS, MXFP4 (the ggml one),
 * and F32, F16, BF16. Their `packed` is the block bytes; scales and biases are NULL.
 *
 * Quantizers follow MLX (mlx/backend/cpu/quantized.cpp and ops.cpp fp_quantize) as closely as
 * known; quant.c documents each step and where the result may differ. */
#ifndef MSTORE_QUANT_H
#define MSTORE_QUANT_H

#include <stddef.h>
#include <stdint.h>

#include "format/format.h"

enum quant_mode { QUANT_AFFINE, QUANT_MXFP4, QUANT_NVFP4, QUANT_MXFP8, QUANT_GGML, QUANT_FLOAT };

typedef struct quant_format {
    const char *name;      /* "int4", "nvfp4", "Q4_K", "F16" */
    int mode;              /* enum quant_mode */
    int bits;              /* bits per code in the packed stream (MLX modes) */
    int group_size;        /* the fixed group (fp modes), block elements (ggml); 0 for affine */
    int has_bias;          /* affine only */
    st_dtype scale_dtype;  /* fp modes: ST_U8 (E8M0) or ST_F8_E4M3; affine: ST_F32 (any float works) */
    int ggml_type;         /* ggml type id (QUANT_GGML, QUANT_FLOAT), else -1 */
} quant_format;

/* The format named `name` (case-sensitive for MLX names, case-insensitive for ggml names);
 * NULL when unknown. */
const quant_format *quant_format_find(const char *name);
/* The MLX affine name for `bits` ("int4"), NULL when bits is not 2, 3, 4, 5, 6 or 8. */
const char *quant_affine_name(int bits);
/* 1 when `group_size` is allowed for the MLX format: 32, 64, 128 for affine, the fixed group
 * for fp modes. */
int quant_group_valid(const quant_format *f, int group_size);

/* Dequantize `n` consecutive weights of one row (n a multiple of the group / block size),
 * starting at a group boundary: packed points at the row's first code word (MLX) or block
 * (ggml); scales / biases at the first group's entries, of `scale_dtype` (F32, F16, BF16 for
 * affine, U8 or F8_E4M3 as the format says for fp modes; ignored for ggml types, which carry
 * their scales in the blocks). MS_EINVALID for an unknown type, a group size the type does not
 * allow, n not a multiple of it, a wrong scale dtype, or a missing biases for affine. */
int quant_dequantize_row(const char *quant_type, const void *packed, const void *scales, const void *biases,
                         st_dtype scale_dtype, int group_size, size_t n, float *out);

/* Affine quantization of n weights (n a multiple of group_size) in groups of group_size:
 * packed gets n * bits / 32 words (n * bits must be a multiple of 32), scales and biases
 * n / group_size floats (float32, as MLX computes them before casting to the weight dtype).
 * MS_EINVALID for bits or group_size out of the set. */
int quant_affine_quantize(uint32_t *packed, float *scales, float *biases, const float *w, size_t n, int bits,
                          int group_size);
/* mxfp4, nvfp4, mxfp8 quantization: packed gets n * bits / 32 words, scales n / group bytes (E8M0
 * or E4M3 bits as the format says). `f` must be one of those formats. */
int quant_fp_quantize(uint32_t *packed, uint8_t *scales, const float *w, size_t n, const quant_format *f);

/* Float conversions. quant_to_f32 reads F32, F16, BF16, F8_E4M3, F8_E5M2 (n elements, may be
 * unaligned); quant_from_f32 writes F32, F16, BF16 rounding to nearest even. MS_EINVALID for
 * other dtypes. */
int quant_to_f32(float *out, const void *src, st_dtype dtype, size_t n);
int quant_from_f32(void *dst, st_dtype dtype, const float *src, size_t n);
float quant_e4m3_to_f32(uint8_t v);
uint8_t quant_f32_to_e4m3(float f);    /* round to nearest even, saturating at +-448, NaN -> 0x7f */
float quant_e8m0_to_f32(uint8_t e);    /* 2^(e - 127); NaN for 255 */

/* Error of a quantization, accumulated over any number of tensors. */
typedef struct quant_error {
    double max_abs;      /* max |w - dequantized| */
    double sum_sq_err;   /* sum (w - dequantized)^2 */
    double sum_sq_ref;   /* sum w^2 */
    uint64_t n;
} quant_error;
void quant_error_add(quant_error *e, const float *ref, const float *deq, size_t n);
double quant_error_rms_rel(const quant_error *e);   /* sqrt(sum_sq_err / sum_sq_ref); 0 when empty */

#endif
