/* mlx.c: the tensors of MLX-quantized model directories (as mlx-lm's convert writes them), and
 * of float directories quantized on import (--quantize), into blobs (see import.h).
 *
 * MLX keeps a quantized linear or embedding X as three tensors: X.weight (U32 codes, shape
 * [..., out, in * bits / 32]), X.scales and X.biases ([..., out, in / group_size]; no biases for
 * the fp modes). config.json's "quantization" (or "quantization_config") holds the defaults
 * {"group_size", "bits", "mode"} and per-module overrides: "<module path>": {group_size, bits}
 * or false (not quantized). Each triplet becomes one combined blob {name}, {name}.scale,
 * {name}.bias with quant_type and group_size in __metadata__. Expert tensors of one layer
 * (layers.L.<block>.experts.*, the stacked switch_mlp.*, shared_experts.*) go into one pack
 * blob named by that prefix, per-tensor metadata keys suffixed ":<tensor name>".
 *
 * Everything is checked against the config before a blob is named: bits and group size in
 * MLX's sets, codes and scales shaped as bits and group size imply, no scales without weight,
 * no packed weight without scales. hf.c has opened and validated the shards and the index. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blob/blob.h"
#include "import/import_int.h"

#define NAME_LEN 512

typedef struct qparams {
    const quant_format *fmt;   /* NULL: the module is not quantized */
    int group_size;
} qparams;

typedef struct entry {
    const st_tensor *t;
    const char *file;
} entry;

typedef struct item {
    const entry *w, *scales, *biases;
    char name[NAME_LEN];   /* in the store (import_moe_name) */
    char pack[NAME_LEN];   /* "" when the tensor has its own blob */
} item;

typedef struct mlx_import {
    const char *dir;
    char *config_path;
    json_t *qcfg;      /* the "quantization" object */
    const char *qkey;  /* its key in config.json */
    qparams dflt;
    import_source *const *srcs;   /* the shards' files: tensor bytes are read from them */
    const char **shard_files;     /* their base names */
    size_t n_srcs;
    entry *all;
    size_t n_all;
    item *items;
    size_t n_items;
} mlx_import;

static int ends_with(const char *s, const char *sfx)
{
    size_t a = strlen(s), b = strlen(sfx);
    return a >= b && strcmp(s + a - b, sfx) == 0;
}

/* {group_size, bits, mode} at `obj`; fields it lacks come from `dflt` (NULL for the defaults). */
static int params_parse(qparams *out, mlx_import *x, json_t *obj, const char *where, const qparams *dflt)
{
    json_t *jg = json_object_get(obj, "group_size"), *jb = json_object_get(obj, "bits"), *jm = json_object_get(obj, "mode");
    const char *mode = json_is_string(jm) ? json_string_value(jm) : dflt && dflt->fmt->mode != QUANT_AFFINE ? dflt->fmt->name : "affine";
    long long g, b;

    if ((!jg && !dflt) || (jg && !json_is_integer(jg)))
        return ms_err(MS_EINVALID, "%s: %s.group_size: %s", x->config_path, where, jg ? "not an integer" : "missing");
    if ((!jb && !dflt) || (jb && !json_is_integer(jb)))
        return ms_err(MS_EINVALID, "%s: %s.bits: %s", x->config_path, where, jb ? "not an integer" : "missing");
    if (jm && !json_is_string(jm))
        return ms_err(MS_EINVALID, "%s: %s.mode: not a string", x->config_path, where);
    g = jg ? json_integer_value(jg) : dflt->group_size;
    b = jb ? json_integer_value(jb) : dflt->fmt->bits;
    if (strcmp(mode, "affine") == 0) {
        out->fmt = quant_format_find(b >= 0 && b <= 8 ? quant_affine_name((int)b) : NULL);
        if (!out->fmt)
            return ms_err(MS_EINVALID, "%s: %s.bits: %lld is not one of 2, 3, 4, 5, 6, 8", x->config_path, where, b);
    } else {
        out->fmt = quant_format_find(mode);
        if (!out->fmt || out->fmt->mode == QUANT_AFFINE || out->fmt->mode >= QUANT_GGML)
            return ms_err(MS_EUNSUPPORTED, "%s: %s.mode: '%s' is not affine, mxfp4, nvfp4 or mxfp8", x->config_path,
                          where, mode);
        if (b != out->fmt->bits)
            return ms_err(MS_EINVALID, "%s: %s.bits: %lld, mode %s has %d", x->config_path, where, b, mode,
                          out->fmt->bits);
    }
    if (g < 1 || g > 1024 || !quant_group_valid(out->fmt, (int)g))
        return ms_err(MS_EINVALID, "%s: %s.group_size: %lld is not allowed for %s (%s)", x->config_path, where, g,
                      out->fmt->name, out->fmt->mode == QUANT_AFFINE ? "32, 64 or 128" : "fixed by the mode");
    out->group_size = (int)g;
    return 0;
}

static int config_parse(mlx_import *x, json_t *config)
{
    json_t *q = json_object_get(config, "quantization");

    x->qkey = "quantization";
    if (!q) {
        q = json_object_get(config, "quantization_config");
        x->qkey = "quantization_config";
    }
    if (!json_is_object(q))
        return ms_err(MS_EINVALID, "%s: %s: not an object", x->config_path, x->qkey);
    if (json_is_string(json_object_get(q, "quant_method")))
        return ms_err(MS_EUNSUPPORTED, "%s: %s.quant_method: '%s' is not supported (MLX-quantized directories only)",
                      x->config_path, x->qkey, json_string_value(json_object_get(q, "quant_method")));
    x->qcfg = q;
    return params_parse(&x->dflt, x, q, x->qkey, NULL);
}

/* The parameters of module `base` (the weight's name without ".weight"). */
static int params_for(qparams *out, mlx_import *x, const char *base)
{
    json_t *o = json_object_get(x->qcfg, base);
    char where[NAME_LEN + 32];

    if (json_is_false(o)) {
        out->fmt = NULL;
        return 0;
    }
    if (!json_is_object(o)) {
        *out = x->dflt;
        return 0;
    }
    snprintf(where, sizeof where, "%s.%s", x->qkey, base);
    return params_parse(out, x, o, where, &x->dflt);
}

static int cmp_entry(const void *a, const void *b)
{
    return strcmp(((const entry *)a)->t->name, ((const entry *)b)->t->name);
}

static const entry *find(const mlx_import *x, const char *name)
{
    st_tensor key_t = { .name = name };
    entry key = { .t = &key_t };
    return bsearch(&key, x->all, x->n_all, sizeof *x->all, cmp_entry);
}

static int collect(mlx_import *x, const import_shard_view *shards, size_t n_shards)
{
    size_t n = 0, k = 0;

    for (size_t i = 0; i < n_shards; i++)
        n += st_count(shards[i].st);
    if (n == 0)
        return ms_err(MS_EINVALID, "%s: the safetensors files hold no tensors", x->dir);
    if (!(x->all = calloc(n, sizeof *x->all)) || !(x->items = calloc(n, sizeof *x->items)))
        return ms_err(MS_ENOMEM, "out of memory");
    for (size_t i = 0; i < n_shards; i++)
        for (size_t j = 0; j < st_count(shards[i].st); j++)
            x->all[k++] = (entry){ st_at(shards[i].st, j), shards[i].file };
    x->n_all = n;
    qsort(x->all, n, sizeof *x->all, cmp_entry);
    for (size_t i = 1; i < n; i++)
        if (strcmp(x->all[i].t->name, x->all[i - 1].t->name) == 0)
            return ms_err(MS_EINVALID, "%s: tensor '%s' appears in both %s and %s", x->dir, x->all[i].t->name,
                          x->all[i - 1].file, x->all[i].file);
    return 0;
}

/* "<...>layers.<L>.<block>.<experts|switch_mlp|shared_experts>" when `name` is in an expert pack. */
static void pack_of(char *out, size_t len, const char *name)
{
    static const char *const kinds[] = { "experts.", "switch_mlp.", "shared_experts." };
    const char *p = strstr(name, "layers.");

    out[0] = '\0';
    for (; p; p = strstr(p + 1, "layers.")) {
        const char *q = p + 7, *block;
        if (*q < '0' || *q > '9')
            continue;
        while (*q >= '0' && *q <= '9')
            q++;
        if (*q++ != '.' || !(block = strchr(q, '.')))
            continue;
        for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
            if (strncmp(block + 1, kinds[k], strlen(kinds[k])) == 0) {
                size_t n = (size_t)(block + 1 - name) + strlen(kinds[k]) - 1;
                if (n < len)
                    snprintf(out, len, "%.*s", (int)n, name);
                return;
            }
    }
}

static int items_build(mlx_import *x)
{
    char aux[NAME_LEN + 16];

    for (size_t i = 0; i < x->n_all; i++) {
        const entry *e = &x->all[i];
        const char *name = e->t->name;
        size_t len = strlen(name);
        long expert;
        item *it;

        if (len + 16 > NAME_LEN)
            return ms_err(MS_EINVALID, "%s: tensor name '%.64s...' longer than %d bytes", e->file, name, NAME_LEN - 16);
        if ((ends_with(name, ".scales") || ends_with(name, ".biases"))) {
            snprintf(aux, sizeof aux, "%.*s.weight", (int)(len - 7), name);
            if (!find(x, aux))
                return ms_err(MS_EINVALID, "%s: tensor '%s' has no '%s' beside it", e->file, name, aux);
            continue;
        }
        it = &x->items[x->n_items++];
        it->w = e;
        import_moe_name(name, it->name, sizeof it->name, it->pack, sizeof it->pack, &expert);
        if (expert >= 0) {   /* one tensor per expert (mlx-lm stacks them; these do not run) */
            snprintf(it->name, sizeof it->name, "%s", name);
            pack_of(it->pack, sizeof it->pack, name);
        } else if (!it->pack[0] && strcmp(it->name, name) == 0) {   /* in an MLX prefix's pack */
            pack_of(it->pack, sizeof it->pack, name);
        }
        if (ends_with(name, ".weight")) {
            snprintf(aux, sizeof aux, "%.*s.scales", (int)(len - 7), name);
            it->scales = find(x, aux);
            snprintf(aux, sizeof aux, "%.*s.biases", (int)(len - 7), name);
            it->biases = find(x, aux);
        }
        if (e->t->dtype == ST_U32 && !it->scales)
            return ms_err(MS_EINVALID, "%s: tensor '%s' holds packed codes (U32) but its scales tensor is missing",
                          e->file, name);
    }
    return 0;
}

static int cmp_item(const void *a, const void *b)
{
    const item *x = a, *y = b;
    int c = strcmp(x->pack[0] ? x->pack : x->name, y->pack[0] ? y->pack : y->name);
    return c ? c : strcmp(x->name, y->name);
}

/* Scales (or biases) of `t` must be [lead..., in / group] with `t`'s leading dims. */
static int aux_check(const entry *a, const st_tensor *w, uint64_t n_groups, int affine, int nvfp4, const char *what)
{
    char sh[TENSOR_BLOB_SHAPE_MAX];
    int ok = a->t->n_dims == w->n_dims && a->t->shape[w->n_dims - 1] == n_groups;

    for (int d = 0; ok && d < w->n_dims - 1; d++)
        ok = a->t->shape[d] == w->shape[d];
    if (!ok) {
        tensor_blob_shape_format(sh, sizeof sh, a->t->n_dims, a->t->shape);
        return ms_err(MS_EINVALID, "%s: tensor '%s': shape %s, expected the weight's leading dims and %llu %s", a->file,
                      a->t->name, sh, (unsigned long long)n_groups, what);
    }
    if (affine ? (a->t->dtype != ST_F32 && a->t->dtype != ST_F16 && a->t->dtype != ST_BF16)
               : nvfp4 ? (a->t->dtype != ST_U8 && a->t->dtype != ST_F8_E4M3) : a->t->dtype != ST_U8)
        return ms_err(MS_EINVALID, "%s: tensor '%s': dtype %s, expected %s", a->file, a->t->name,
                      st_dtype_name(a->t->dtype), affine ? "F32, F16 or BF16" : nvfp4 ? "F8_E4M3 or U8" : "U8 (E8M0)");
    return 0;
}

/* Check a triplet against the config; *p and *in_out receive its parameters and input dim. */
static int triplet_check(mlx_import *x, const item *it, qparams *pp, uint64_t *in_out)
{
    const st_tensor *t = it->w->t;
    size_t len = strlen(t->name);
    char base[NAME_LEN];
    uint64_t in;
    const quant_format *f;
    qparams p;
    int rc, affine;

    snprintf(base, sizeof base, "%.*s", (int)(len - 7), t->name);
    if ((rc = params_for(&p, x, base)) < 0)
        return rc;
    if (!p.fmt)
        return ms_err(MS_EINVALID, "%s: %s.%s is false (not quantized), but '%s' has scales", x->config_path, x->qkey,
                      base, t->name);
    f = p.fmt;
    affine = f->mode == QUANT_AFFINE;
    if (t->dtype != ST_U32 || t->n_dims < 1)
        return ms_err(MS_EINVALID, "%s: tensor '%s': dtype %s, packed codes must be U32", it->w->file, t->name,
                      st_dtype_name(t->dtype));
    in = t->shape[t->n_dims - 1] * 32 / (uint64_t)f->bits;
    if ((t->shape[t->n_dims - 1] * 32) % (uint64_t)f->bits || in % (uint64_t)p.group_size || in == 0)
        return ms_err(MS_EINVALID, "%s: tensor '%s': group_size %d does not divide the input dimension %llu "
                      "(%llu words of %d-bit codes; config %s)", it->w->file, t->name, p.group_size,
                      (unsigned long long)in, (unsigned long long)t->shape[t->n_dims - 1], f->bits, x->config_path);
    if ((rc = aux_check(it->scales, t, in / (uint64_t)p.group_size, affine, f->mode == QUANT_NVFP4, "scales")) < 0)
        return rc;
    if (affine && !it->biases)
        return ms_err(MS_EINVALID, "%s: tensor '%s': affine quantization needs '%s.biases', which is missing",
                      it->w->file, t->name, base);
    if (!affine && it->biases)
        return ms_err(MS_EINVALID, "%s: tensor '%s.biases': mode %s has no biases", it->biases->file, base, f->name);
    if (affine && ((rc = aux_check(it->biases, t, in / (uint64_t)p.group_size, 1, 0, "biases")) < 0))
        return rc;
    if (affine && it->biases->t->dtype != it->scales->t->dtype)
        return ms_err(MS_EINVALID, "%s: tensor '%s.biases': dtype %s, its scales are %s", it->biases->file, base,
                      st_dtype_name(it->biases->t->dtype), st_dtype_name(it->scales->t->dtype));
    *pp = p;
    *in_out = in;
    return 0;
}

static int triplet_add(mlx_import *x, st_writer *w, const item *it, int packed, const char **qt)
{
    const st_tensor *t = it->w->t;
    char key[NAME_LEN + 16];
    uint64_t logical[ST_MAX_DIMS], in;
    const quant_format *f;
    qparams p;
    int rc, affine;

    if ((rc = triplet_check(x, it, &p, &in)) < 0)
        return rc;
    f = p.fmt;
    affine = f->mode == QUANT_AFFINE;
    memcpy(logical, t->shape, sizeof logical);
    logical[t->n_dims - 1] = in;
    if ((rc = import_quant_meta(w, it->name, packed, f->name, p.group_size, t->n_dims, logical)) < 0 ||
        (rc = st_writer_add(w, it->name, ST_U32, t->n_dims, t->shape, t->data, t->nbytes)) < 0)
        return rc;
    snprintf(key, sizeof key, "%s.scale", it->name);
    /* nvfp4 scales are E4M3 bits whatever dtype MLX saved them as */
    if ((rc = st_writer_add(w, key, f->mode == QUANT_NVFP4 ? ST_F8_E4M3 : it->scales->t->dtype, t->n_dims,
                            it->scales->t->shape, it->scales->t->data, it->scales->t->nbytes)) < 0)
        return rc;
    snprintf(key, sizeof key, "%s.bias", it->name);
    if (affine && (rc = st_writer_add(w, key, it->biases->t->dtype, t->n_dims, it->biases->t->shape,
                                      it->biases->t->data, it->biases->t->nbytes)) < 0)
        return rc;
    *qt = f->name;
    return 0;
}

static int item_add(mlx_import *x, st_writer *w, const item *it, int packed, json_t *qsum)
{
    const st_tensor *t = it->w->t;
    const char *qt = st_dtype_name(t->dtype);
    json_t *c;
    int rc;

    if (it->scales)
        rc = triplet_add(x, w, it, packed, &qt);
    else
        rc = st_writer_add(w, it->name, t->dtype, t->n_dims, t->shape, t->data, t->nbytes);
    if (rc < 0)
        return rc;
    c = json_object_get(qsum, qt);
    return json_object_set_new(qsum, qt, json_integer(c ? json_integer_value(c) + 1 : 1)) < 0
               ? ms_err(MS_ENOMEM, "out of memory") : 0;
}

static int blobs_write(mlx_import *x, store_txn *t, manifest *m, const import_opts *o, json_t *qsum)
{
    uint64_t total = 0, done = 0;
    ms_progress *pr;
    size_t i = 0;
    int rc = 0;

    for (size_t k = 0; k < x->n_all; k++)
        total += x->all[k].t->nbytes;
    pr = o && o->quiet ? NULL : ms_progress_new("import", total, 256u << 20);
    while (i < x->n_items && rc == 0) {
        const item *first = &x->items[i];
        const char *layer = first->pack[0] ? first->pack : first->name;
        size_t j = i + 1;
        st_writer *w = NULL;
        ms_digest digest;
        uint64_t size = 0;

        while (j < x->n_items && first->pack[0] && strcmp(x->items[j].pack, first->pack) == 0)
            j++;
        if ((rc = st_writer_new(&w)) < 0)
            break;
        for (size_t k = i; k < j && rc == 0; k++) {
            rc = item_add(x, w, &x->items[k], first->pack[0] != '\0', qsum);
            done += x->items[k].w->t->nbytes;
        }
        if (rc == 0 && (rc = import_tensor_blob(digest, &size, t, w, x->srcs, x->n_srcs)) < 0) {
            int changed = import_sources_changed(x->srcs, x->n_srcs);
            if (changed >= 0)   /* the file, not the tensor, is what went wrong */
                ms_err_ctx("%s/%s", x->dir, x->shard_files[changed]);
            else
                ms_err_ctx("%s: tensor '%s'", x->dir, layer);
        }
        st_writer_free(w);
        if (i == 0)
            import_test_shrink(x->dir, x->shard_files[0]);
        ms_progress_update(pr, done);
        if (rc == 0)
            rc = manifest_layer_add(m, MT_TENSOR, digest, size, layer);
        i = j;
    }
    ms_progress_free(pr);
    return rc;
}

int import_mlx_tensors(store_txn *t, manifest *m, json_t *config, const char *dir, const import_shard_view *shards,
                       import_source *const *srcs, size_t n_shards, const import_opts *o, json_t *qsum)
{
    mlx_import x = { .dir = dir };
    int rc;

    if (!(x.config_path = ms_path_join(dir, "config.json")))
        return ms_err(MS_ENOMEM, "out of memory");
    if (o && o->quantize) {
        rc = ms_err(MS_EINVALID, "%s: --quantize %s: the model is already quantized", x.config_path, o->quantize);
        goto done;
    }
    x.srcs = srcs;
    x.n_srcs = n_shards;
    if (!(x.shard_files = calloc(n_shards ? n_shards : 1, sizeof *x.shard_files))) {
        rc = ms_err(MS_ENOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < n_shards; i++)
        x.shard_files[i] = shards[i].file;
    if ((rc = config_parse(&x, config)) < 0)
        goto done;
    if ((rc = collect(&x, shards, n_shards)) < 0 || (rc = items_build(&x)) < 0)
        goto done;
    qsort(x.items, x.n_items, sizeof *x.items, cmp_item);
    /* Every triplet is checked before the first blob is written: bad input stores nothing. */
    for (size_t i = 0; i < x.n_items && rc == 0; i++) {
        qparams p;
        uint64_t in;
        if (x.items[i].scales)
            rc = triplet_check(&x, &x.items[i], &p, &in);
    }
    if (rc < 0)
        goto done;
    rc = blobs_write(&x, t, m, o, qsum);
done:
    MS_FREE_ALL(x.shard_files, x.all, x.items, x.config_path);
    return rc;
}
