/* weights.c: tensors by canonical name, as views into read-only mappings.
 *   GGUF: the file is mapped once (gguf_open); names go through the llama table below.
 *   Store: the model handle (store_model) maps each MT_TENSOR blob once and parses its
 *   safetensors header once; the tensors here are views into those mappings; import.h says how GGUF block types are kept (U8 + quant_type/logical_shape).
 * Only headers are read at open: the pages of a weight come in when a kernel first touches them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quant/quant.h"
#include "runtime/runtime.h"

struct runtime_weights {
    runtime_config cfg;
    backend_tensor *t;
    size_t n;
    char *names;          /* GGUF: the canonical names, packed */
    gguf_file *g;
    store_model *sm;      /* store: the handle that owns the mappings and headers */
    int own_sm;           /* opened here (runtime_weights_open_store): closed with w */
    uint64_t nbytes;
    tokenizer *tok;
    int tok_rc;           /* why tok is NULL */
    char tok_err[512];
};

const runtime_config *runtime_weights_config(const runtime_weights *w) { return &w->cfg; }
size_t runtime_weights_count(const runtime_weights *w) { return w->n; }
const backend_tensor *runtime_weights_at(const runtime_weights *w, size_t i) { return i < w->n ? &w->t[i] : NULL; }
uint64_t runtime_weights_nbytes(const runtime_weights *w) { return w->nbytes; }

const backend_tensor *runtime_weights_find(const runtime_weights *w, const char *name)
{
    for (size_t i = 0; i < w->n; i++)
        if (strcmp(w->t[i].name, name) == 0)
            return &w->t[i];
    return NULL;
}

void runtime_weights_close(runtime_weights *w)
{
    if (!w)
        return;
    if (w->own_sm)
        store_model_close(w->sm);
    gguf_close(w->g);
    free(w->t);
    free(w->names);
    tokenizer_free(w->tok);
    free(w);
}

int runtime_weights_tokenizer(const tokenizer **out, const runtime_weights *w)
{
    *out = w->tok;
    return w->tok ? 0 : ms_err(w->tok_rc, "%s", w->tok_err);
}

/* A model without a usable tokenizer still runs on token ids: keep the reason for later. */
static void keep_tokenizer_error(runtime_weights *w, int rc)
{
    w->tok_rc = rc < 0 ? rc : MS_ENOTFOUND;
    snprintf(w->tok_err, sizeof w->tok_err, "%s", ms_err_msg());
    ms_err_clear();
}

/* ---------------------------------------------------------------- GGUF */

int runtime_weights_open_gguf(runtime_weights **out, const char *path)
{
    runtime_weights *w = calloc(1, sizeof *w);
    size_t names_len = 0, pos = 0;
    char name[256];
    int rc;

    *out = NULL;
    if (!w)
        return ms_err(MS_ENOMEM, "%s: out of memory", path);
    if ((rc = gguf_open(&w->g, path)) < 0)
        goto fail;
    if ((rc = runtime_config_from_gguf(&w->cfg, w->g)) < 0) {
        ms_err_ctx("%s", path);
        goto fail;
    }
    w->n = gguf_tensor_count(w->g);
    for (size_t i = 0; i < w->n; i++) {
        const gguf_tensor *gt = gguf_tensor_at(w->g, i);
        gguf_name_to_hf(name, sizeof name, NULL, 0, w->cfg.architecture, gt->name);   /* as the import names it */
        names_len += strlen(name) + 1;
    }
    w->t = calloc(w->n ? w->n : 1, sizeof *w->t);
    w->names = malloc(names_len ? names_len : 1);
    if (!w->t || !w->names) {
        rc = ms_err(MS_ENOMEM, "%s: out of memory", path);
        goto fail;
    }
    for (size_t i = 0; i < w->n; i++) {
        const gguf_tensor *gt = gguf_tensor_at(w->g, i);
        backend_tensor *t = &w->t[i];
        gguf_name_to_hf(name, sizeof name, NULL, 0, w->cfg.architecture, gt->name);
        t->name = strcpy(w->names + pos, name);
        pos += strlen(name) + 1;
        t->type = gt->type;
        t->n_dims = gt->n_dims > 0 ? gt->n_dims : 1;
        for (int d = 0; d < t->n_dims; d++)
            t->shape[d] = gt->ne[t->n_dims - 1 - d];   /* HF order: the row (ne[0]) last */
        t->data = gt->data;
        t->nbytes = gt->nbytes;
        t->map = gguf_bytes(w->g);
        t->map_nbytes = gguf_file_size(w->g);
        w->nbytes += gt->nbytes;
    }
    if ((rc = tokenizer_from_gguf(&w->tok, w->g, path)) < 0)
        keep_tokenizer_error(w, rc);
    *out = w;
    return 0;
fail:
    runtime_weights_close(w);
    return rc;
}

/* ---------------------------------------------------------------- store */

/* The logical shape into t: 1 to 4 dims. */
static int logical_shape(backend_tensor *t, const tensor_blob_meta *m, const char *name)
{
    if (m->n_dims < 1 || m->n_dims > 4)
        return ms_err(MS_EINVALID, "tensor '%s': logical_shape of %d dims, expected 1 to 4", name, m->n_dims);
    t->n_dims = m->n_dims;
    memcpy(t->shape, m->shape, (size_t)m->n_dims * sizeof t->shape[0]);
    return 0;
}

/* The runtime view of one safetensors tensor in a blob, m its metadata (tensor_blob). */
static int tensor_from_st(backend_tensor *t, const st_tensor *s, const tensor_blob_meta *m)
{
    const char *qt = m->quant_type;
    char ls[TENSOR_BLOB_SHAPE_MAX];
    uint64_t row_bytes, rows = 1;
    int rc;

    tensor_blob_shape_format(ls, sizeof ls, m->n_dims, m->shape);
    t->name = s->name;
    t->data = s->data;
    t->nbytes = s->nbytes;
    if (!qt) {
        if (s->dtype != ST_F32 && s->dtype != ST_F16 && s->dtype != ST_BF16)
            return ms_err(MS_EUNSUPPORTED, "tensor '%s': dtype %s is not supported", s->name, st_dtype_name(s->dtype));
        if (s->n_dims < 1 || s->n_dims > 4)
            return ms_err(MS_EINVALID, "tensor '%s': %d dims, expected 1 to 4", s->name, s->n_dims);
        t->type = s->dtype == ST_F32 ? GGML_TYPE_F32 : s->dtype == ST_F16 ? GGML_TYPE_F16 : GGML_TYPE_BF16;
        t->n_dims = s->n_dims;
        memcpy(t->shape, s->shape, (size_t)s->n_dims * sizeof t->shape[0]);
        return 0;
    }
    if (ggml_type_from_name(&t->type, qt) < 0)   /* whether a device runs it is the backend's call */
        return ms_err(MS_EUNSUPPORTED, "tensor '%s': quant_type '%s' is not supported", s->name, qt);
    if (s->dtype != ST_U8 || !m->n_dims)
        return ms_err(MS_EINVALID, "tensor '%s': quant_type %s needs dtype U8 and a logical_shape", s->name, qt);
    if ((rc = logical_shape(t, m, s->name)) < 0)
        return rc;
    if (ggml_row_nbytes(&row_bytes, t->type, t->shape[t->n_dims - 1]) < 0)
        return ms_err_ctx("tensor '%s'", s->name);
    for (int d = 0; d < t->n_dims - 1; d++)
        if (ms_mul64(&rows, rows, t->shape[d]) < 0)
            return ms_err(MS_EINVALID, "tensor '%s': logical_shape '%s' overflows", s->name, ls);
    if (ms_mul64(&rows, rows, row_bytes) < 0 || rows != s->nbytes)
        return ms_err(MS_EINVALID, "tensor '%s': %llu bytes of %s, logical_shape '%s' needs %llu", s->name,
                      (unsigned long long)s->nbytes, qt, ls, (unsigned long long)rows);
    return 0;
}

/* An MLX-quantized tensor (import.h): {name} U32 codes, {name}.scale, {name}.bias (affine only),
 * "quant_type", "group_size", "logical_shape" in __metadata__ (the blob's, or inside an expert
 * pack each tensor's own, "key:<name>"); one runtime tensor of type BACKEND_TYPE_MLX: a matrix,
 * or an expert pack [n_experts][rows][cols] whose experts follow each other in codes, scales
 * and biases alike. Every size the kernels rely on is checked here, so they need not. */
static int tensor_from_mlx(backend_tensor *t, const st_file *f, const st_tensor *codes, const quant_format *fmt,
                           const tensor_blob_meta *m)
{
    const st_tensor *sc, *bi;
    char key[600], ls[TENSOR_BLOB_SHAPE_MAX];
    uint64_t rows, cols, ng, ssz;
    long g;
    int rc;

    tensor_blob_shape_format(ls, sizeof ls, m->n_dims, m->shape);
    if (codes->dtype != ST_U32 || !m->n_dims || !m->group_size)
        return ms_err(MS_EINVALID, "tensor '%s': quant_type %s expects U32 codes, a logical_shape and a group_size",
                      codes->name, fmt->name);
    t->name = codes->name;
    snprintf(key, sizeof key, "%s.scale", codes->name);
    sc = st_find(f, key);
    snprintf(key, sizeof key, "%s.bias", codes->name);
    bi = st_find(f, key);
    if ((rc = logical_shape(t, m, codes->name)) < 0)
        return rc;
    g = m->group_size;
    if (!quant_group_valid(fmt, (int)g))
        return ms_err(MS_EINVALID, "tensor '%s': group_size '%ld' is not allowed for %s", codes->name, g, fmt->name);
    if (t->n_dims != 2 && t->n_dims != 3)
        return ms_err(MS_EUNSUPPORTED, "tensor '%s': %s with %d dims; only matrices and expert packs are supported",
                      codes->name, fmt->name, t->n_dims);
    rows = t->shape[0];
    cols = t->shape[t->n_dims - 1];
    if (t->n_dims == 3 && ms_mul64(&rows, rows, t->shape[1]) < 0)
        return ms_err(MS_EINVALID, "tensor '%s': logical_shape %s overflows", codes->name, ls);
    /* the kernels read codes in whole blocks of 32 */
    if (cols == 0 || cols % (uint64_t)g || cols % 32 || rows > UINT64_MAX / 8 / cols ||
        codes->nbytes != rows * cols * (uint64_t)fmt->bits / 8)
        return ms_err(MS_EINVALID, "tensor '%s': %llu bytes of %d-bit codes for logical_shape %s (group %ld)",
                      codes->name, (unsigned long long)codes->nbytes, fmt->bits, ls, g);
    ng = rows * (cols / (uint64_t)g);
    if (!sc || (fmt->mode == QUANT_AFFINE) != (bi != NULL))
        return ms_err(MS_EINVALID, "tensor '%s': %s needs %s", codes->name, fmt->name,
                      fmt->mode == QUANT_AFFINE ? "a .scale and a .bias" : "a .scale and no .bias");
    ssz = st_dtype_size(sc->dtype);
    if (fmt->mode == QUANT_AFFINE ? (sc->dtype != ST_F32 && sc->dtype != ST_F16 && sc->dtype != ST_BF16)
                                  : (sc->dtype != fmt->scale_dtype && !(fmt->mode == QUANT_NVFP4 && sc->dtype == ST_U8)))
        return ms_err(MS_EINVALID, "tensor '%s.scale': dtype %s is not a %s scale", codes->name,
                      st_dtype_name(sc->dtype), fmt->name);
    if (sc->nbytes != ng * ssz || (bi && (bi->dtype != sc->dtype || bi->nbytes != sc->nbytes)))
        return ms_err(MS_EINVALID, "tensor '%s': scales/biases of %llu bytes, expected %llu groups of %s", codes->name,
                      (unsigned long long)sc->nbytes, (unsigned long long)ng, st_dtype_name(sc->dtype));
    t->type = BACKEND_TYPE_MLX;
    t->data = codes->data;
    t->nbytes = codes->nbytes + sc->nbytes + (bi ? bi->nbytes : 0);
    t->quant_type = fmt->name;
    t->bits = fmt->bits;
    t->group_size = (int)g;
    t->scale_dtype = (int)sc->dtype;
    t->scales = sc->data;
    t->biases = bi ? bi->data : NULL;
    return 0;
}

/* The MLX format a tensor's metadata names (NULL: not MLX-quantized). A ".scale" / ".bias"
 * names its tensor's (tensor_blob's key rule). */
static const quant_format *mlx_format(const tensor_blob_meta *m)
{
    const quant_format *fmt = quant_format_find(m->quant_type);

    return fmt && fmt->mode != QUANT_GGML && fmt->mode != QUANT_FLOAT ? fmt : NULL;
}

/* Whether `s`, of an MLX format, is the .scale or .bias of U32 codes in f (read with them, not
 * alone; tensor_from_mlx checks the three together). */
static int mlx_companion(const st_file *f, const st_tensor *s)
{
    size_t n = strlen(s->name);
    char base[600];
    const st_tensor *codes;

    if (!(n > 6 && strcmp(s->name + n - 6, ".scale") == 0) && !(n > 5 && strcmp(s->name + n - 5, ".bias") == 0))
        return 0;
    snprintf(base, sizeof base, "%.*s", (int)(n - (s->name[n - 1] == 'e' ? 6 : 5)), s->name);
    codes = st_find(f, base);
    return codes && codes->dtype == ST_U32;
}

/* Every tensor blob, mapped and parsed by the handle (each once), as runtime tensors. Mapped
 * eagerly here, not as kernels first ask: a missing or short blob fails the open, not a forward. */
static int open_blobs(runtime_weights *w, store_model *sm)
{
    const manifest *m = store_model_manifest(sm);
    const st_file **st = calloc(m->n_layers + 1, sizeof *st);
    const uint8_t **map = calloc(m->n_layers + 1, sizeof *map);
    size_t *map_len = calloc(m->n_layers + 1, sizeof *map_len);
    size_t n_t = 0;
    int rc = 0;

    if (!st || !map || !map_len) {
        rc = ms_err(MS_ENOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < m->n_layers; i++) {
        const manifest_layer *l = &m->layers[i];
        if (strcmp(l->media_type, MT_TENSOR) != 0)
            continue;
        if ((rc = store_model_layer_bytes(&map[i], &map_len[i], sm, l)) < 0 ||
            (rc = store_model_tensors(&st[i], sm, l)) < 0)
            goto done;
        n_t += st_count(st[i]);
    }
    w->t = calloc(n_t ? n_t : 1, sizeof *w->t);
    if (!w->t) {
        rc = ms_err(MS_ENOMEM, "out of memory");
        goto done;
    }
    for (size_t b = 0; b < m->n_layers; b++) {
        for (size_t i = 0; st[b] && i < st_count(st[b]); i++) {
            const st_tensor *s = st_at(st[b], i);
            const quant_format *fmt;
            tensor_blob_meta tm;
            /* the layer name is not needed: only a blob's main tensor asks for a blob-wide shape */
            if ((rc = tensor_blob_meta_get(&tm, st[b], s, NULL, "blob")) == 0) {
                if ((fmt = mlx_format(&tm)) && mlx_companion(st[b], s))
                    continue;
                rc = fmt ? tensor_from_mlx(&w->t[w->n], st[b], s, fmt, &tm) : tensor_from_st(&w->t[w->n], s, &tm);
            }
            if (rc < 0) {
                ms_err_ctx("%s", store_model_shown(sm));
                goto done;
            }
            w->t[w->n].map = map[b];
            w->t[w->n].map_nbytes = map_len[b];
            w->nbytes += w->t[w->n++].nbytes;
        }
    }
done:
    MS_FREE_ALL(st, map, map_len);
    return rc;
}

/* A layer's bytes when the model has one; absent is no error (NULL), a failing one is. */
static int optional_layer(const uint8_t **data, size_t *len, store_model *sm, const char *media_type)
{
    const manifest_layer *l = manifest_layer_find(store_model_manifest(sm), media_type, NULL);

    *data = NULL;
    *len = 0;
    return l ? store_model_layer_bytes(data, len, sm, l) : 0;
}

int runtime_tokenizer_from_model(tokenizer **out, store_model *sm)
{
    const manifest *m = store_model_manifest(sm);
    const manifest_layer *meta = manifest_layer_find(m, MT_GGUF_META, NULL);
    tokenizer_layers in = { 0 };
    const uint8_t *p;
    char what[700];
    size_t n;
    int rc;

    *out = NULL;
    if (meta) {
        if ((rc = store_model_layer_bytes(&in.gguf_meta, &in.gguf_meta_len, sm, meta)) < 0)
            return rc;
        in.gguf_meta_what = meta->digest;
    } else if (manifest_layer_find(m, MT_TOKENIZER, NULL)) {
        if ((rc = optional_layer(&p, &n, sm, MT_TOKENIZER_CONFIG)) < 0)
            return rc;
        in.config = (const char *)p, in.config_len = n;
        if ((rc = optional_layer(&p, &n, sm, MT_GENERATION_CONFIG)) < 0)
            return rc;
        in.generation = (const char *)p, in.generation_len = n;
        if ((rc = optional_layer(&p, &n, sm, MT_TOKENIZER)) < 0)
            return rc;
        in.json = (const char *)p, in.json_len = n;
        if ((rc = store_model_config(&p, &n, sm)) < 0)
            return rc;
        in.model_config = (const char *)p, in.model_config_len = n;
    }
    snprintf(what, sizeof what, "model '%s'", store_model_shown(sm));
    return tokenizer_from_layers(out, &in, what);
}

/* A stored model's tokenizer: GGUF metadata, or tokenizer.json for Hugging Face / MLX imports
 * (runtime_tokenizer_from_model, shared with `mstore tokenize` and export). */
static void open_tokenizer(runtime_weights *w, store_model *sm)
{
    int rc = runtime_tokenizer_from_model(&w->tok, sm);
    if (rc < 0)
        keep_tokenizer_error(w, rc);
}

int runtime_weights_open_model(runtime_weights **out, store_model *sm)
{
    runtime_weights *w = calloc(1, sizeof *w);
    const manifest *m = store_model_manifest(sm);
    const char *shown = store_model_shown(sm);
    const uint8_t *cfg;
    size_t cfg_len;
    int rc;

    *out = NULL;
    if (!w)
        return ms_err(MS_ENOMEM, "out of memory");
    w->sm = sm;
    if (!m->config.media_type || strcmp(m->config.media_type, MT_CONFIG) != 0) {
        rc = ms_err(MS_EUNSUPPORTED, "%s: config media type '%s' is not %s", shown,
                    m->config.media_type ? m->config.media_type : "", MT_CONFIG);
        goto fail;
    }
    /* the handle's messages name the model already */
    if ((rc = store_model_config(&cfg, &cfg_len, sm)) < 0)
        goto fail;
    if ((rc = runtime_config_from_json(&w->cfg, (const char *)cfg, cfg_len, m->config.digest)) < 0) {
        ms_err_ctx("%s", shown);
        goto fail;
    }
    if ((rc = open_blobs(w, sm)) < 0)
        goto fail;
    open_tokenizer(w, sm);
    *out = w;
    return 0;
fail:
    runtime_weights_close(w);
    return rc;
}

int runtime_weights_open_store(runtime_weights **out, store *s, const model_name *name)
{
    store_model *sm = NULL;
    int rc;

    *out = NULL;
    if ((rc = store_model_open(&sm, s, name)) < 0)
        return rc;
    if ((rc = runtime_weights_open_model(out, sm)) < 0) {
        store_model_close(sm);
        return rc;
    }
    (*out)->own_sm = 1;
    return 0;
}
