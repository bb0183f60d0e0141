/* hf.c: import a Hugging Face directory of unquantized safetensors (quantized on the way with
 * --quantize: quantize.c).
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
    import_quant q;      /* --quantize of a float directory (q.fmt NULL: none) */
    uint64_t total, done;
    ms_progress *progress;
} hf_import;

static int sink_blob(void *ctx, const void *buf, size_t len) { return blob_writer_write(ctx, buf, len); }

int import_tensor_blob_write(blob_writer **bw_out, store_txn *t, st_writer *w, import_source *const *srcs,
                             size_t n_srcs)
{
    blob_writer *bw = NULL;
    int rc;

    *bw_out = NULL;
    if ((rc = store_txn_blob_open(t, &bw)) < 0)
        return rc;
    if ((rc = n_srcs ? import_sources_emit(srcs, n_srcs, w, bw) : st_writer_emit(w, sink_blob, bw)) < 0) {
        import_tensor_blob_drop(bw, srcs, n_srcs);
        return rc;
    }
    *bw_out = bw;
    return 0;
}

void import_tensor_blob_drop(blob_writer *bw, import_source *const *srcs, size_t n_srcs)
{
    if (!bw)
        return;
    (void)import_sources_settle(srcs, n_srcs, bw);   /* a hash thread may still hold its hash */
    blob_writer_abort(bw);
}

int import_tensor_blob_name(ms_digest digest_out, uint64_t *size_out, store_txn *t, blob_writer *bw,
                            import_source *const *srcs, size_t n_srcs)
{
    int rc;

    if ((rc = import_sources_settle(srcs, n_srcs, bw)) < 0) {
        blob_writer_abort(bw);
        return rc;
    }
    return store_txn_blob_add(t, digest_out, size_out, bw, NULL);
}

int import_tensor_blob(ms_digest digest_out, uint64_t *size_out, store_txn *t, st_writer *w, import_source *const *srcs,
                       size_t n_srcs)
{
    blob_writer *bw;
    int rc;

    if ((rc = import_tensor_blob_write(&bw, t, w, srcs, n_srcs)) < 0)
        return rc;
    return import_tensor_blob_name(digest_out, size_out, t, bw, srcs, n_srcs);
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
    ms_digest digest;
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
 * experts of a mixture, which the store keeps as GGUF imports do, one blob per layer
 * (import_moe_name). */
typedef struct owned {
    const st_tensor *t;
    const shard *sh;
    char name[NAME_LEN];
    char pack[NAME_LEN];   /* "" for a tensor with its own blob */
    long expert;           /* >= 0: this expert's slice of the stacked tensor `name` */
} owned;

static void moe_name(owned *o)
{
    import_moe_name(o->t->name, o->name, sizeof o->name, o->pack, sizeof o->pack, &o->expert);
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

/* One more tensor of `type` (a dtype's name, or the format --quantize made it) in the summary. */
static void count_type(hf_import *h, const char *type)
{
    json_t *n = json_object_get(h->dtypes, type);

    json_object_set_new(h->dtypes, type, json_integer(n ? json_integer_value(n) + 1 : 1));
}

/* With --quantize, a tensor's values: read from its shard's file (not through the mapping: a
 * shard that shrinks is an error, not SIGBUS) into a buffer the writer borrows until the blob is
 * written; each of the n parts (experts) at its place in one [n][rows][cols] buffer. */
static int quant_add(hf_import *h, st_writer *w, const char *name, const st_tensor *t0, int n_dims,
                     const uint64_t *shape, const void *const *parts, size_t n, int packed)
{
    uint64_t total = t0->nbytes * n;
    uint8_t *buf = total <= SIZE_MAX ? import_quant_buf(&h->q, (size_t)total) : NULL;
    int rc;

    if (!buf)
        return ms_err(MS_ENOMEM, "out of memory for %llu bytes", (unsigned long long)total);
    for (size_t k = 0; k < n; k++)
        if ((rc = import_sources_read(h->srcs, h->n_shards, buf + k * t0->nbytes, parts[k], (size_t)t0->nbytes)) < 0)
            return rc;
    return import_quant_add(&h->q, w, name, t0->dtype, n_dims, shape, buf, packed);
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
    if (import_quant_wants(&h->q, all[i].name, t0->dtype, 3, shape))   /* one 3-D MLX tensor */
        rc = quant_add(h, w, all[i].name, t0, 3, shape, parts, n, 1);
    else
        rc = st_writer_add_parts(w, all[i].name, t0->dtype, 3, shape, parts, lens, n);
    if (rc < 0)
        ms_err_ctx("%s", h->dir);
done:
    free(parts);
    free(lens);
    return rc;
}

/* The shard a read found changed (shrunk, rewritten) since it was opened, or NULL. */
static const shard *shard_changed(const hf_import *h)
{
    int k = import_sources_changed(h->srcs, h->n_shards);

    return k < 0 ? NULL : &h->shards[k];
}

/* One blob: a tensor of its own, or a pack (all[i .. j) share it). */
static int blob_import(hf_import *h, const owned *all, size_t i, size_t j)
{
    const char *layer = all[i].pack[0] ? all[i].pack : all[i].name;
    const shard *changed;
    st_writer *w = NULL;
    ms_digest digest;
    uint64_t size = 0;
    int rc, emitted = 0;   /* the error came from writing the blob, not from a tensor */

    if ((rc = st_writer_new(&w)) < 0)
        return rc;
    for (size_t k = i; k < j && rc == 0;) {
        const st_tensor *t = all[k].t;
        size_t e = k + 1;
        int quantized = 0;
        while (e < j && all[k].expert >= 0 && strcmp(all[e].name, all[k].name) == 0)
            e++;
        if (all[k].expert >= 0) {
            /* stack_add asks the same of the stacked shape: the same last dim */
            quantized = import_quant_wants(&h->q, all[k].name, t->dtype, t->n_dims, t->shape);
            rc = stack_add(h, w, all, k, e);
        } else if ((quantized = import_quant_wants(&h->q, all[k].name, t->dtype, t->n_dims, t->shape))) {
            const void *data = t->data;
            rc = quant_add(h, w, all[k].name, t, t->n_dims, t->shape, &data, 1, all[k].pack[0] != '\0');
            if (rc < 0 && !shard_changed(h))
                ms_err_ctx("%s: tensor '%s'", all[k].sh->file, t->name);
        } else if ((rc = st_writer_add(w, all[k].name, t->dtype, t->n_dims, t->shape, t->data, t->nbytes)) < 0) {
            ms_err_ctx("%s: tensor '%s'", all[k].sh->file, t->name);
        }
        if (rc == 0)
            count_type(h, quantized ? h->q.fmt->name : st_dtype_name(t->dtype));
        k = e;
    }
    if (rc == 0) {
        emitted = 1;
        rc = import_tensor_blob(digest, &size, h->t, w, h->srcs, h->n_shards);
    }
    if (rc < 0 && (changed = shard_changed(h)) != NULL)   /* the file, not the tensor, is what went wrong */
        ms_err_ctx("%s/%s", h->dir, changed->file);
    else if (rc < 0 && emitted)
        ms_err_ctx("%s: tensor '%s'", h->dir, layer);
    st_writer_free(w);
    import_quant_release(&h->q);   /* the writer borrowed its buffers until the blob was written */
    for (size_t k = i; k < j; k++)
        h->done += all[k].t->nbytes;
    ms_progress_update(h->progress, h->done);
    return rc < 0 ? rc : manifest_layer_add(h->m, MT_TENSOR, digest, size, layer);
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
            import_test_shrink(h->dir, h->shards[0].file);
        i = j;
    }
    ms_progress_free(h->progress);
    h->progress = NULL;
done:
    free(all);
    return rc;
}

/* Hand the opened shards to mlx.c (MLX-quantized directories). */
static int mlx_tensors_import(hf_import *h)
{
    import_shard_view *v = calloc(h->n_shards ? h->n_shards : 1, sizeof *v);
    int rc;

    if (!v)
        return ms_err(MS_ENOMEM, "out of memory");
    for (size_t i = 0; i < h->n_shards; i++)
        v[i] = (import_shard_view){ h->shards[i].file, h->shards[i].st };
    rc = import_mlx_tensors(h->t, h->m, h->config, h->dir, v, h->srcs, h->n_shards, h->o, h->dtypes);
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
                ms_digest d;
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

/* sentence-transformers' pooling, as GGUF's pooling_type (1 mean, 2 cls, 3 last): the Pooling module
 * modules.json names (its path), else 1_Pooling/, when the directory has one; 0 (no key) when
 * neither exists. A pooling mode mstore cannot run (max, weighted mean, ...) is refused by name:
 * the model exists to embed, and would embed wrong. MS_EINVALID, MS_EUNSUPPORTED. */
static int pooling_read(int *out, const char *dir)
{
    static const struct { const char *key; int type; } modes[] = {
        { "pooling_mode_mean_tokens", 1 }, { "pooling_mode_cls_token", 2 }, { "pooling_mode_lasttoken", 3 },
        { "pooling_mode_max_tokens", -1 }, { "pooling_mode_mean_sqrt_len_tokens", -1 },
        { "pooling_mode_weightedmean_tokens", -1 },
    };
    char *mpath = ms_path_join(dir, "modules.json"), *ppath = NULL, *sub = NULL;
    json_t *mods = NULL, *pool = NULL, *v;
    const char *rel = "1_Pooling";
    size_t i;
    int rc = 0;

    *out = 0;
    if (!mpath)
        return ms_err(MS_ENOMEM, "out of memory");
    if (ms_is_file(mpath)) {   /* a list, which import_json_file (objects only) does not read */
        json_error_t e;
        if (!(mods = json_load_file(mpath, JSON_REJECT_DUPLICATES, &e)) || !json_is_array(mods)) {
            rc = ms_err(MS_EINVALID, "%s: not a JSON list of modules (%s)", mpath, mods ? "not a list" : e.text);
            goto done;
        }
        json_array_foreach(mods, i, v) {
            const char *type = json_string_value(json_object_get(v, "type"));
            const char *path = json_string_value(json_object_get(v, "path"));
            if (type && strcmp(type, "sentence_transformers.models.Pooling") == 0 && path) {
                rel = path;
                break;
            }
        }
    }
    if (strstr(rel, "..") || rel[0] == '/') {
        rc = ms_err(MS_EINVALID, "%s: Pooling path '%s' is outside the directory", mpath, rel);
        goto done;
    }
    if (!(sub = ms_path_join(dir, rel)) || !(ppath = ms_path_join(sub, "config.json"))) {
        rc = ms_err(MS_ENOMEM, "out of memory");
        goto done;
    }
    if ((rc = import_json_file(&pool, ppath, 0)) < 0 || !pool)
        goto done;
    for (i = 0; i < sizeof modes / sizeof modes[0]; i++)
        if (json_is_true(json_object_get(pool, modes[i].key))) {
            if (modes[i].type < 0) {
                rc = ms_err(MS_EUNSUPPORTED, "%s: %s is not supported; supported: pooling_mode_mean_tokens, "
                            "pooling_mode_cls_token, pooling_mode_lasttoken", ppath, modes[i].key);
                goto done;
            }
            if (!*out)
                *out = modes[i].type;
        }
    if (!*out)
        rc = ms_err(MS_EINVALID, "%s: no pooling mode is true", ppath);
done:
    json_decref(mods);
    json_decref(pool);
    MS_FREE_ALL(mpath, sub, ppath);
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
    import_quant_release(&h->q);
    manifest_free(h->m);
    store_txn_abort(h->t);   /* NULL once committed */
}

/* The directory's blobs into `t`, *out its manifest; `label` the name its config records. */
static int hf_build(manifest **out, store_txn *t, const char *dir, const char *label, const import_opts *o)
{
    hf_import h = { .dir = dir, .s = store_txn_store(t), .o = o, .t = t };
    char *config_path = ms_path_join(dir, "config.json");
    json_t *qerr = NULL, *extra = NULL;
    int rc, mlx, pooling = 0;

    *out = NULL;
    if (!config_path)
        return ms_err(MS_ENOMEM, "out of memory");
    if ((rc = import_json_file(&h.config, config_path, 1)) < 0)
        goto done;
    /* MLX-quantized directories go through mlx.c's tensor import (triplets combined); shards,
     * extra layers and the config are shared with this file. Float ones, quantized on the way
     * with --quantize or not, are this file's. */
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
    if (mlx)
        rc = mlx_tensors_import(&h);   /* mlx.c */
    else if ((rc = import_quant_init(&h.q, o)) == 0 && (rc = tensors_import(&h)) == 0 && h.q.fmt &&
             !(qerr = import_quant_report(&h.q)))
        rc = ms_err(MS_ENOMEM, "out of memory");
    if (rc < 0 || (rc = layers_import(&h)) < 0)
        goto done;
    if (qerr && !(extra = json_pack("{s:O}", "quantization_error", qerr))) {   /* --quantize */
        rc = ms_err(MS_ENOMEM, "out of memory");
        goto done;
    }
    if ((rc = pooling_read(&pooling, dir)) < 0)
        goto done;
    if (pooling && ((!extra && !(extra = json_object())) || json_object_set_new(extra, "pooling_type", json_integer(pooling)) < 0)) {
        rc = ms_err(MS_ENOMEM, "out of memory");
        goto done;
    }
    if ((rc = import_config_commit(h.t, h.m, h.config, h.dtypes, mlx ? "mlx" : "safetensors", label, extra)) < 0)
        goto done;
    /* Nothing lands under blobs/ from a shard that changed while it was read. */
    for (size_t i = 0; i < h.n_shards && rc == 0; i++)
        if ((rc = import_source_check(h.shards[i].src)) < 0)
            ms_err_ctx("%s/%s", dir, h.shards[i].file);
    if (rc == 0)
        *out = h.m, h.m = NULL;
done:
    h.t = NULL;   /* the caller's */
    free(config_path);
    json_decref(qerr);
    json_decref(extra);
    hf_import_free(&h);
    return rc;
}

int import_hf_manifest(manifest **out, store_txn *t, const char *dir, const char *label, const import_opts *o)
{
    return hf_build(out, t, dir, label ? label : dir, o);
}
