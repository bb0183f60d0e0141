/* quantize.c: quantize float weights on import (--quantize), into the combined blob layout of
 * import.h: {name} U32 codes, {name}.scale, {name}.bias (affine only), "quant_type",
 * "group_size" and "logical_shape" in __metadata__ (keys suffixed ":<name>" inside a pack).
 *
 * What gets quantized, as mlx-lm's convert does: the weights of linear and embedding layers
 * (".weight" tensors of 2 or more dims, expert stacks included) whose last (input) dimension is
 * a multiple of the group size; norms, biases, 1-D and odd-sized tensors stay as they are.
 * Affine scales and biases take the weight's dtype (F16, BF16, F32), as MLX casts them. The
 * error against the source weights (measured after that cast, so it is what a reader gets) is
 * accumulated and reported in the config blob as "quantization_error". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blob/blob.h"
#include "import/import_int.h"

static int default_group(const quant_format *f)
{
    /* Fixed for fp modes; for affine, the group sizes of the blob format's table (int4 at 32,
     * int8 at 64; the others as int4). */
    if (f->mode != QUANT_AFFINE)
        return f->group_size;
    return f->bits == 8 ? 64 : 32;
}

int import_quant_init(import_quant *q, const import_opts *o)
{
    memset(q, 0, sizeof *q);
    if (!o || !o->quantize)
        return 0;
    q->fmt = quant_format_find(o->quantize);
    if (!q->fmt || (q->fmt->mode != QUANT_AFFINE && q->fmt->mode != QUANT_MXFP4 && q->fmt->mode != QUANT_NVFP4 &&
                    q->fmt->mode != QUANT_MXFP8))
        return ms_err(MS_EINVALID, "--quantize '%s': not a quantization type (int2, int3, int4, int5, int6, int8, "
                      "mxfp4, nvfp4, mxfp8)", o->quantize);
    q->group_size = o->group_size ? o->group_size : default_group(q->fmt);
    if (!quant_group_valid(q->fmt, q->group_size)) {
        if (q->fmt->mode == QUANT_AFFINE)
            return ms_err(MS_EINVALID, "--group-size %d: %s needs 32, 64 or 128", q->group_size, q->fmt->name);
        return ms_err(MS_EINVALID, "--group-size %d: %s has a fixed group size of %d", q->group_size, q->fmt->name,
                      q->fmt->group_size);
    }
    return 0;
}

int import_quant_wants(const import_quant *q, const char *name, st_dtype dt, int n_dims, const uint64_t *shape)
{
    size_t len = strlen(name);

    if (!q->fmt || n_dims < 2 || (dt != ST_F32 && dt != ST_F16 && dt != ST_BF16))
        return 0;
    if (len < 7 || strcmp(name + len - 7, ".weight") != 0 || strstr(name, "norm"))
        return 0;
    /* A single row (Qwen2-MoE's shared_expert_gate, [1][dim]) saves nothing quantized and a GGUF
     * keeps it as a vector: it stays as it is, so both imports of a model run the same. */
    if (n_dims == 2 && shape[0] < 2)
        return 0;
    return shape[n_dims - 1] >= (uint64_t)q->group_size && shape[n_dims - 1] % (uint64_t)q->group_size == 0;
}

void *import_quant_buf(import_quant *q, size_t nbytes)
{
    void **b = realloc(q->bufs, (q->n_bufs + 1) * sizeof *b);

    if (!b)
        return NULL;
    q->bufs = b;
    if (!(b[q->n_bufs] = calloc(1, nbytes ? nbytes : 1)))
        return NULL;
    return b[q->n_bufs++];
}

void import_quant_release(import_quant *q)
{
    for (size_t i = 0; i < q->n_bufs; i++)
        free(q->bufs[i]);
    free(q->bufs);
    q->bufs = NULL;
    q->n_bufs = 0;
}

int import_quant_meta(st_writer *w, const char *name, int packed, const char *quant_type, int group_size,
                      int n_dims, const uint64_t *logical)
{
    tensor_blob_meta m = {.quant_type = quant_type, .group_size = group_size, .n_dims = n_dims};

    memcpy(m.shape, logical, (size_t)n_dims * sizeof *logical);
    return tensor_blob_meta_put(w, packed ? name : NULL, &m);
}

/* Quantize one row of `cols` weights into the row's slots of the outputs, then dequantize it
 * from what was stored to measure the error. */
static int row_quantize(import_quant *q, const float *x, float *deq, uint32_t *codes, uint8_t *scales,
                        uint8_t *biases, st_dtype sdt, size_t cols, float *tmp_s, float *tmp_b)
{
    const quant_format *f = q->fmt;
    size_t ng = cols / (size_t)q->group_size;
    int rc;

    if (f->mode == QUANT_AFFINE) {
        if ((rc = quant_affine_quantize(codes, tmp_s, tmp_b, x, cols, f->bits, q->group_size)) < 0 ||
            (rc = quant_from_f32(scales, sdt, tmp_s, ng)) < 0 || (rc = quant_from_f32(biases, sdt, tmp_b, ng)) < 0)
            return rc;
    } else if ((rc = quant_fp_quantize(codes, scales, x, cols, f)) < 0) {
        return rc;
    }
    if ((rc = quant_dequantize_row(f->name, codes, scales, biases, sdt, q->group_size, cols, deq)) < 0)
        return rc;
    quant_error_add(&q->err, x, deq, cols);
    return 0;
}

int import_quant_add(import_quant *q, st_writer *w, const char *name, st_dtype dt, int n_dims, const uint64_t *shape,
                     const void *data, int packed)
{
    const quant_format *f = q->fmt;
    st_dtype sdt = f->mode == QUANT_AFFINE ? dt : f->scale_dtype;
    uint64_t cols = shape[n_dims - 1], rows = 1, qshape[ST_MAX_DIMS], sshape[ST_MAX_DIMS];
    size_t ng = (size_t)cols / (size_t)q->group_size, ssz = st_dtype_size(sdt), in_sz = st_dtype_size(dt);
    float *x = NULL, *deq = NULL, *tmp_s = NULL, *tmp_b = NULL;
    uint32_t *codes;
    uint8_t *scales, *biases = NULL;
    char key[1024];
    int rc = 0;

    for (int d = 0; d < n_dims - 1; d++) {
        rows *= shape[d];
        qshape[d] = sshape[d] = shape[d];
    }
    qshape[n_dims - 1] = cols * (uint64_t)f->bits / 32;
    sshape[n_dims - 1] = ng;
    codes = import_quant_buf(q, (size_t)(rows * qshape[n_dims - 1] * 4));
    scales = import_quant_buf(q, (size_t)rows * ng * ssz);
    if (f->has_bias)
        biases = import_quant_buf(q, (size_t)rows * ng * ssz);
    x = malloc((size_t)cols * sizeof *x);
    deq = malloc((size_t)cols * sizeof *deq);
    tmp_s = malloc(ng * sizeof *tmp_s);
    tmp_b = malloc(ng * sizeof *tmp_b);
    if (!codes || !scales || (f->has_bias && !biases) || !x || !deq || !tmp_s || !tmp_b) {
        rc = ms_err(MS_ENOMEM, "out of memory");
        goto done;
    }
    for (uint64_t r = 0; r < rows && rc == 0; r++) {
        if ((rc = quant_to_f32(x, (const uint8_t *)data + r * cols * in_sz, dt, (size_t)cols)) < 0)
            break;
        rc = row_quantize(q, x, deq, codes + r * qshape[n_dims - 1], scales + r * ng * ssz,
                          biases ? biases + r * ng * ssz : NULL, sdt, (size_t)cols, tmp_s, tmp_b);
    }
    if (rc < 0)
        goto done;
    if ((rc = import_quant_meta(w, name, packed, f->name, q->group_size, n_dims, shape)) < 0 ||
        (rc = st_writer_add(w, name, ST_U32, n_dims, qshape, codes, rows * qshape[n_dims - 1] * 4)) < 0)
        goto done;
    snprintf(key, sizeof key, "%s.scale", name);
    if ((rc = st_writer_add(w, key, sdt, n_dims, sshape, scales, rows * ng * ssz)) < 0)
        goto done;
    snprintf(key, sizeof key, "%s.bias", name);
    if (biases && (rc = st_writer_add(w, key, sdt, n_dims, sshape, biases, rows * ng * ssz)) < 0)
        goto done;
    q->n_tensors++;
done:
    MS_FREE_ALL(x, deq, tmp_s, tmp_b);
    if (rc < 0)
        ms_err_ctx("tensor '%s': quantize to %s", name, f->name);
    return rc;
}

json_t *import_quant_report(const import_quant *q)
{
    return json_pack("{s:f, s:f, s:s, s:i, s:I}", "max_abs", q->err.max_abs, "rms_rel", quant_error_rms_rel(&q->err),
                     "quant_type", q->fmt->name, "group_size", q->group_size, "n_tensors", (json_int_t)q->n_tensors);
}
