/* hf.c: import a Hugging Face directory of unquantized safetensors.
 *
 * One pass over the tensor bytes: each tensor is re-framed as its own safetensors blob (see
 * import.h) and streamed through the blob writer, which hashes while it writes. Nothing is
 * named until the transaction commits (store_txn_commit), so a failure or a kill at any point leaves at most unnamed
 * blobs (gc removes them) and never a changed index. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blob/blob.h"
#include "format/format.h"
#include "import/import_int.h"

#define JSON_FILE_MAX (64u << 20)
#define NAME_LEN 512

typedef struct shard {
    char *file;          /* base name */
    ms_map map;
    st_file *st;
    import_source *src;  /* tensor bytes are read from here, not from the mapping (source.c) */
} shard;

typedef struct hf_import {
    const char *dir;
    store *s;
    const import_opts *o;
    json_t *config;      /* config.json */
    shard *shards;
    size_t n_shards;
    import_source **srcs;   /* shards[i].src, as import_tensor_blob takes them */
    manifest *m;
    store_txn *t;        /* every blob of the import, made durable together at the commit */
    json_t *dtypes;      /* dtype -> tensor count, for the quantization summary */
    uint64_t total, done;
    ms_progress *progress;
} hf_import;

static int sink_blob(void *ctx, const void *buf, size_t len) { return blob_writer_write(ctx, buf, len); }

int import_tensor_blob(char digest_out[72], uint64_t *size_out, store_txn *t, st_writer *w, import_source *const *srcs,
                       size_t n_srcs)
{
    blob_writer *bw = NULL;
    int rc;

    if ((rc = store_txn_blob_open(t, &bw)) < 0)
        return rc;
    if ((rc = n_srcs ? import_sources_emit(srcs, n_srcs, w, bw) : st_writer_emit(w, sink_blob, bw)) < 0) {
        blob_writer_abort(bw);
        return rc;
    }
    return store_txn_blob_add(t, digest_out, size_out, bw, NULL);
}

int import_json_file(json_t **out, const char *path, int required)
{
    json_error_t jerr;
    char *buf = NULL;
    size_t len;
    int rc;

    *out = NULL;
    if (!ms_is_file(path)) {
        if (!required)
            return 0;
        return ms_err(MS_ENOTFOUND, "%s: missing (a model directory needs it)", path);
    }
    if ((rc = ms_file_read(&buf, &len, path, JSON_FILE_MAX)) < 0)
        return rc;
    *out = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
    free(buf);
    if (!*out)
        return ms_err(MS_EINVALID, "%s: line %d: %s", path, jerr.line, jerr.text);
    if (!json_is_object(*out)) {
        json_decref(*out);
        *out = NULL;
        return ms_err(MS_EINVALID, "%s: not a JSON object", path);
    }
    return 0;
}

int import_file_layer(manifest *m, store_txn *t, const char *path, const char *media_type)
{
    char digest[72];
    int rc;
    uint64_t size = 0;

    if (!ms_is_file(path))
        return 0;
    if ((rc = store_txn_blob_put_file(t, digest, &size, path)) < 0)
        return rc;
    return manifest_layer_add(m, media_type, digest, size, NULL);
}

static int shard_add(hf_import *h, const char *file)
{
    shard *sh;
    char *path;
    int rc;

    for (size_t i = 0; i < h->n_shards; i++)
        if (strcmp(h->shards[i].file, file) == 0)
            return 0;
    if (strchr(file, '/') || strcmp(file, "..") == 0)   /* an index must not point outside the dir */
        return ms_err(MS_EINVALID, "model.safetensors.index.json: weight_map names '%s', which is not a file in the directory", file);
    sh = realloc(h->shards, (h->n_shards + 1) * sizeof *sh);
    if (!sh)
        return ms_err(MS_ENOMEM, "out of memory");
    h->shards = sh;
    sh = &h->shards[h->n_shards];
    memset(sh, 0, sizeof *sh);
    if (!(sh->file = strdup(file)) || !(path = ms_path_join(h->dir, file)))
        return ms_err(MS_ENOMEM, "out of memory");
    h->n_shards++;
    rc = ms_map_open(&sh->map, path);
    if (rc == MS_ENOTFOUND)
        rc = ms_err(MS_ENOTFOUND, "%s: shard named by model.safetensors.index.json is missing", path);
    if (rc == 0 && (rc = st_parse(&sh->st, sh->map.data, sh->map.size, sh->map.size, 0, file)) < 0)
        ms_err_ctx("%s", h->dir);
    if (rc == 0 && (rc = import_source_open(&sh->src, path, sh->map.data, sh->map.size)) < 0)
        ms_err_ctx("%s", path);
    free(path);
    return rc;
}

static int shards_open(hf_import *h)
{
    char *index_path = ms_path_join(h->dir, "model.safetensors.index.json");
    json_t *index = NULL, *map, *v;
    const char *key;
    int rc = 0;

    if (!index_path)
        return ms_err(MS_ENOMEM, "out of memory");
    if ((rc = import_json_file(&index, index_path, 0)) < 0)
        goto done;
    if (!index) {
        char *single = ms_path_join(h->dir, "model.safetensors");
        if (!ms_is_file(single))
            rc = ms_err(MS_ENOTFOUND, "%s: no model.safetensors or model.safetensors.index.json", h->dir);
        else
            rc = shard_add(h, "model.safetensors");
        free(single);
        goto done;
    }
    map = json_object_get(index, "weight_map");
    if (!json_is_object(map) || json_object_size(map) == 0) {
        rc = ms_err(MS_EINVALID, "%s: weight_map: missing or empty", index_path);
        goto done;
    }
    json_object_foreach(map, key, v) {
        if (!json_is_string(v)) {
            rc = ms_err(MS_EINVALID, "%s: weight_map['%s']: not a file name", index_path, key);
            goto done;
        }
        if ((rc = shard_add(h, json_string_value(v))) < 0)
            goto done;
    }
    /* Every tensor the index names must be in the shard it names. */
    json_object_foreach(map, key, v) {
        for (size_t i = 0; i < h->n_shards; i++)
            if (strcmp(h->shards[i].file, json_string_value(v)) == 0 && !st_find(h->shards[i].st, key)) {
                rc = ms_err(MS_EINVALID, "%s: weight_map: tensor '%s' is not in %s", index_path, key,
                            h->shards[i].file);
                goto done;
            }
    }
done:
    json_decref(index);
    free(index_path);
    return rc;
}

/* A tensor, the shard it lives in, and its name in the store: Hugging Face's own, but for the
 * experts of a mixture, which the store keeps as GGUF imports do, one blob per layer (moe_name). */
typedef struct owned {
    const st_tensor *t;
    const shard *sh;
    char name[NAME_LEN];
    char pack[NAME_LEN];   /* "" for a tensor with its own blob */
    long expert;           /* >= 0: this expert's slice of the stacked tensor `name` */
} owned;

/* Digits at *p as a number (at most 9 of them), *p moved past them; -1 when there are none. */
static long take_num(const char **p)
{
    long v = 0;
    int n = 0;

    while (**p >= '0' && **p <= '9' && n < 9)
        v = v * 10 + (*(*p)++ - '0'), n++;
    return n && !(**p >= '0' && **p <= '9') ? v : -1;
}

/* Hugging Face's MoE tensors under the store's names (those of a GGUF import, import/names.c):
 *   model.layers.L.block_sparse_moe.experts.E.{w1,w3,w2}.weight (Mixtral) and
 *   model.layers.L.mlp.experts.E.{gate,up,down}_proj.weight (Qwen2/3-MoE): expert E of
 *     model.layers.L.mlp.experts.{gate,up,down}_proj.weight [n_experts][rows][cols], stacked in
 *     expert order, in the pack model.layers.L.mlp.experts;
 *   model.layers.L.block_sparse_moe.gate.weight: the router, model.layers.L.mlp.gate.weight;
 *   model.layers.L.mlp.shared_expert.*: model.layers.L.mlp.shared_experts.*, in the pack
 *     model.layers.L.mlp.shared_experts (Qwen2-MoE).
 * Every other tensor keeps its name. */
static void moe_name(owned *o)
{
    static const struct { const char *hf, *store; } kinds[] = {
        { "w1.weight", "gate_proj.weight" }, { "w3.weight", "up_proj.weight" }, { "w2.weight", "down_proj.weight" },
        { "gate_proj.weight", "gate_proj.weight" }, { "up_proj.weight", "up_proj.weight" },
        { "down_proj.weight", "down_proj.weight" },
    };
    const char *name = o->t->name, *p = name + 13, *rest;
    long layer, e;
    int mixtral;

    snprintf(o->name, sizeof o->name, "%s", name);
    o->pack[0] = '\0';
    o->expert = -1;
    if (strncmp(name, "model.layers.", 13) != 0 || (layer = take_num(&p)) < 0 || *p++ != '.')
        return;
    if (strcmp(p, "block_sparse_moe.gate.weight") == 0) {
        snprintf(o->name, sizeof o->name, "model.layers.%ld.mlp.gate.weight", layer);
        return;
    }
    if (strncmp(p, "mlp.shared_expert.", 18) == 0) {
        snprintf(o->name, sizeof o->name, "model.layers.%ld.mlp.shared_experts.%s", layer, p + 18);
        snprintf(o->pack, sizeof o->pack, "model.layers.%ld.mlp.shared_experts", layer);
        return;
    }
    mixtral = strncmp(p, "block_sparse_moe.experts.", 25) == 0;
    if (!mixtral && strncmp(p, "mlp.experts.", 12) != 0)
        return;
    rest = p + (mixtral ? 25 : 12);
    if ((e = take_num(&rest)) < 0 || *rest++ != '.')
        return;
    for (size_t k = mixtral ? 0 : 3; k < (mixtral ? 3u : 6u); k++)
        if (strcmp(rest, kinds[k].hf) == 0) {
            snprintf(o->name, sizeof o->name, "model.layers.%ld.mlp.experts.%s", layer, kinds[k].store);
            snprintf(o->pack, sizeof o->pack, "model.layers.%ld.mlp.experts", layer);
            o->expert = e;
            return;
        }
}

/* Blobs in name order (pack, name, expert), so that importing the same tensors gives the same
 * manifest. */
static int cmp_owned(const void *a, const void *b)
{
    const owned *x = a, *y = b;
    int c = strcmp(x->pack[0] ? x->pack : x->name, y->pack[0] ? y->pack : y->name);

    if (!c)
        c = strcmp(x->name, y->name);
    return c ? c : (x->expert > y->expert) - (x->expert < y->expert);
}

static void count_dtype(hf_import *h, st_dtype dt)
{
    json_t *n = json_object_get(h->dtypes, st_dtype_name(dt));

    json_object_set_new(h->dtypes, st_dtype_name(dt), json_integer(n ? json_integer_value(n) + 1 : 1));
}

/* The experts all[i .. j) of one stacked tensor: 0 .. n-1 in order, each a matrix of the same
 * dtype and shape, added as [n][rows][cols] without a copy. */
static int stack_add(hf_import *h, st_writer *w, const owned *all, size_t i, size_t j)
{
    const st_tensor *t0 = all[i].t;
    size_t n = j - i;
    const void **parts = malloc(n * sizeof *parts);
    uint64_t *lens = malloc(n * sizeof *lens), shape[3];
    int rc = 0;

    if (!parts || !lens) {
        rc = ms_err(MS_ENOMEM, "out of memory");
        goto done;
    }
    for (size_t k = i; k < j; k++) {
        const st_tensor *t = all[k].t;
        if (all[k].expert != (long)(k - i)) {
            rc = ms_err(MS_EINVALID, "%s: '%s': expert %ld is missing (found '%s')", h->dir, all[i].name,
                        (long)(k - i), t->name);
            goto done;
        }
        if (t->n_dims != 2 || t->dtype != t0->dtype || t->shape[0] != t0->shape[0] || t->shape[1] != t0->shape[1]) {
            rc = ms_err(MS_EINVALID, "%s: tensor '%s': dtype or shape differs from expert 0's ('%s')", all[k].sh->file,
                        t->name, t0->name);
            goto done;
        }
        parts[k - i] = t->data;
        lens[k - i] = t->nbytes;
    }
    shape[0] = n;
    shape[1] = t0->shape[0];
    shape[2] = t0->shape[1];
    if ((rc = st_writer_add_parts(w, all[i].name, t0->dtype, 3, shape, parts, lens, n)) < 0)
        ms_err_ctx("%s", h->dir);
done:
    free(parts);
    free(lens);
    return rc;
}

/* One blob: a tensor of its own, or a pack (all[i .. j) share it). */
static int blob_import(hf_import *h, const owned *all, size_t i, size_t j)
{
    const char *layer = all[i].pack[0] ? all[i].pack : all[i].name;
    st_writer *w = NULL;
    char digest[72];
    uint64_t size = 0;
    int rc;

    if ((rc = st_writer_new(&w)) < 0)
        return rc;
    for (size_t k = i; k < j && rc == 0;) {
        size_t e = k + 1;
        while (e < j && all[k].expert >= 0 && strcmp(all[e].name, all[k].name) == 0)
            e++;
        if (all[k].expert >= 0)
            rc = stack_add(h, w, all, k, e);
        else if ((rc = st_writer_add(w, all[k].name, all[k].t->dtype, all[k].t->n_dims, all[k].t->shape,
                                     all[k].t->data, all[k].t->nbytes)) < 0)
            ms_err_ctx("%s: tensor '%s'", all[k].sh->file, all[k].t->name);
        if (rc == 0)
            count_dtype(h, all[k].t->dtype);
        k = e;
    }
    if (rc == 0 && (rc = import_tensor_blob(digest, &size, h->t, w, h->srcs, h->n_shards)) < 0) {
        const shard *changed = NULL;
        for (size_t k = 0; k < h->n_shards && !changed; k++)
            if (import_source_changed(h->shards[k].src))
                changed = &h->shards[k];
        if (changed)   /* the file, not the tensor, is what went wrong */
            ms_err_ctx("%s/%s", h->dir, changed->file);
        else
            ms_err_ctx("%s: tensor '%s'", h->dir, layer);
    }
    st_writer_free(w);
    for (size_t k = i; k < j; k++)
        h->done += all[k].t->nbytes;
    ms_progress_update(h->progress, h->done);
    return rc < 0 ? rc : manifest_layer_add(h->m, MT_TENSOR, digest, size, layer);
}

/* Tests only: shrink the first shard to MSTORE_TEST_IMPORT_SHRINK bytes after the first blob. */
static void test_shrink(const hf_import *h)
{
    const char *v = getenv("MSTORE_TEST_IMPORT_SHRINK");
    char *path;

    if (v && *v && (path = ms_path_join(h->dir, h->shards[0].file)) != NULL) {
        (void)!truncate(path, (off_t)strtoll(v, NULL, 10));
        free(path);
    }
}

static int tensors_import(hf_import *h)
{
    owned *all = NULL;
    size_t n = 0, k = 0;
    int rc = 0;

    for (size_t i = 0; i < h->n_shards; i++)
        n += st_count(h->shards[i].st);
    if (n == 0)
        return ms_err(MS_EINVALID, "%s: the safetensors files hold no tensors", h->dir);
    if (!(all = calloc(n, sizeof *all)))
        return ms_err(MS_ENOMEM, "out of memory");
    for (size_t i = 0; i < h->n_shards; i++)
        for (size_t j = 0; j < st_count(h->shards[i].st); j++) {
            all[k].t = st_at(h->shards[i].st, j);
            all[k].sh = &h->shards[i];
            if (strlen(all[k].t->name) >= NAME_LEN - 16) {
                rc = ms_err(MS_EINVALID, "%s: tensor name '%.64s...' longer than %d bytes", h->shards[i].file,
                            all[k].t->name, NAME_LEN - 16);
                goto done;
            }
            moe_name(&all[k]);
            h->total += all[k++].t->nbytes;
        }
    qsort(all, n, sizeof *all, cmp_owned);
    for (size_t i = 1; i < n; i++)
        if (strcmp(all[i].name, all[i - 1].name) == 0 && all[i].expert == all[i - 1].expert) {
            if (strcmp(all[i].t->name, all[i - 1].t->name) == 0)
                rc = ms_err(MS_EINVALID, "%s: tensor '%s' appears in more than one shard", h->dir, all[i].t->name);
            else
                rc = ms_err(MS_EINVALID, "%s: tensors '%s' (%s) and '%s' (%s) are both '%s'%s", h->dir,
                            all[i - 1].t->name, all[i - 1].sh->file, all[i].t->name, all[i].sh->file, all[i].name,
                            all[i].expert >= 0 ? " of the same expert" : "");
            goto done;
        }
    h->progress = h->o && h->o->quiet ? NULL : ms_progress_new("import", h->total, 256u << 20);
    for (size_t i = 0; i < n && rc == 0;) {
        size_t j = i + 1;
        while (j < n && all[i].pack[0] && strcmp(all[j].pack, all[i].pack) == 0)
            j++;
        rc = blob_import(h, all, i, j);
        if (i == 0)
            test_shrink(h);
        i = j;
    }
    ms_progress_free(h->progress);
    h->progress = NULL;
done:
    free(all);
    return rc;
}

/* Hand the opened shards to mlx.c (MLX-quantized directories, --quantize). */
static int mlx_tensors_import(hf_import *h, json_t **qerr)
{
    import_shard_view *v = calloc(h->n_shards ? h->n_shards : 1, sizeof *v);
    int rc;

    if (!v)
        return ms_err(MS_ENOMEM, "out of memory");
    for (size_t i = 0; i < h->n_shards; i++)
        v[i] = (import_shard_view){ h->shards[i].file, h->shards[i].st };
    rc = import_mlx_tensors(h->t, h->m, h->config, h->dir, v, h->n_shards, h->o, h->dtypes, qerr);
    free(v);
    return rc;
}

static int layers_import(hf_import *h)
{
    static const struct { const char *file, *media_type; } extra[] = {
        { "tokenizer.json", MT_TOKENIZER },
        { "tokenizer_config.json", MT_TOKENIZER_CONFIG },
        { "generation_config.json", MT_GENERATION_CONFIG },
        { "chat_template.jinja", MT_TEMPLATE },
    };
    json_t *tc = NULL;
    int rc = 0;

    for (size_t i = 0; i < sizeof extra / sizeof extra[0] && rc == 0; i++) {
        char *p = ms_path_join(h->dir, extra[i].file);
        if (strcmp(extra[i].file, "chat_template.jinja") == 0 && manifest_layer_find(h->m, MT_TEMPLATE, NULL)) {
            free(p);
            continue;
        }
        if (strcmp(extra[i].file, "tokenizer_config.json") == 0 && (rc = import_json_file(&tc, p, 0)) == 0 && tc) {
            /* The chat template is its own layer, as ollama keeps it. */
            json_t *t = json_object_get(tc, "chat_template");
            if (json_is_string(t)) {
                char d[72];
                size_t len = json_string_length(t);
                if ((rc = store_txn_blob_put(h->t, d, json_string_value(t), len)) == 0)
                    rc = manifest_layer_add(h->m, MT_TEMPLATE, d, len, NULL);
            }
            json_decref(tc);
            tc = NULL;
        }
        if (rc == 0)
            rc = import_file_layer(h->m, h->t, p, extra[i].media_type);
        free(p);
    }
    return rc;
}

static void hf_import_free(hf_import *h)
{
    for (size_t i = 0; i < h->n_shards; i++) {
        st_free(h->shards[i].st);
        import_source_close(h->shards[i].src);
        ms_map_close(&h->shards[i].map);
        free(h->shards[i].file);
    }
    free(h->shards);
    free(h->srcs);
    json_decref(h->config);
    json_decref(h->dtypes);
    manifest_free(h->m);
    store_txn_abort(h->t);   /* NULL once committed */
}

int import_hf_dir(store *s, const char *dir, const model_name *name, const import_opts *o, char digest_out[72])
{
    hf_import h = { .dir = dir, .s = s, .o = o };
    char *config_path = ms_path_join(dir, "config.json");
    json_t *qerr = NULL, *extra = NULL;
    int rc, mlx;

    if (!config_path)
        return ms_err(MS_ENOMEM, "out of memory");
    if ((rc = import_json_file(&h.config, config_path, 1)) < 0)
        goto done;
    /* MLX-quantized directories and --quantize go through mlx.c's tensor import (triplets
     * combined, expert packs); shards, extra layers and the config are shared with this file. */
    mlx = json_object_get(h.config, "quantization") || json_object_get(h.config, "quantization_config");
    if ((rc = manifest_new(&h.m)) < 0 || !(h.dtypes = json_object()))
        goto done;
    if ((rc = shards_open(&h)) < 0)
        goto done;
    if (!(h.srcs = calloc(h.n_shards ? h.n_shards : 1, sizeof *h.srcs))) {
        rc = ms_err(MS_ENOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < h.n_shards; i++)
        h.srcs[i] = h.shards[i].src;
    if ((rc = store_txn_begin(&h.t, s)) < 0)
        goto done;
    if (mlx || (o && o->quantize))
        rc = mlx_tensors_import(&h, &qerr);   /* mlx.c */
    else
        rc = tensors_import(&h);
    if (rc < 0 || (rc = layers_import(&h)) < 0)
        goto done;
    if (qerr && !(extra = json_pack("{s:O}", "quantization_error", qerr))) {   /* --quantize */
        rc = ms_err(MS_ENOMEM, "out of memory");
        goto done;
    }
    if ((rc = import_config_commit(h.t, h.m, h.config, h.dtypes, mlx ? "mlx" : "safetensors", dir, extra)) < 0)
        goto done;
    /* Nothing lands under blobs/ from a shard that changed while it was read. */
    for (size_t i = 0; i < h.n_shards && rc == 0; i++)
        if ((rc = import_source_check(h.shards[i].src)) < 0)
            ms_err_ctx("%s/%s", dir, h.shards[i].file);
    if (rc < 0)
        goto done;
    rc = import_manifest_commit(h.t, h.m, name, digest_out);
    h.t = NULL;   /* the commit ended it */
done:
    free(config_path);
    json_decref(qerr);
    json_decref(extra);
    hf_import_free(&h);
    return rc;
}
