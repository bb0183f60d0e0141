/* ollama.c: models from ollama-style registries, kept in the store's own form.
 *
 * ollama pushes a Docker v2 manifest whose config is its ConfigV2 (model_format, model_family,
 * file_type, ...) and whose weights are one whole GGUF file (MT_OLLAMA_MODEL), beside template,
 * params, system and license layers. mstore itself pushes `--format docker` manifests whose
 * config blob is an mstore config under the Docker media type. Neither runs as received, so a
 * pull derives the store's form of the model and names that:
 *   1. A whole-GGUF layer, once downloaded and verified over its bytes (download.c), is split
 *      by the GGUF importer (import_gguf_manifest), exactly as `mstore import` splits a file:
 *      one blob per tensor, the header layer, the config from the GGUF header. The importer
 *      hashes the file again as it reads it; a digest other than the layer's refuses the split.
 *   2. An mstore config under the Docker media type is named again as MT_CONFIG.
 *   3. The derived manifest keeps every other received layer (template, params, system,
 *      license, messages), the received config blob, and the received manifest's bytes as a
 *      MT_SOURCE_MANIFEST layer: that is the record of how the received layers map to the
 *      store's blobs (the GGUF layer's digest is the config's source.digest), and push sends
 *      those bytes back unchanged, rebuilding the GGUF blob by export when it is no longer
 *      stored.
 *   4. The whole GGUF blob is removed once the split is committed, unless a manifest in the
 *      index still references it: its tensors are stored once, in the blobs they share with
 *      every other model.
 * Docker Model Runner artifacts take the same path: their MT_DMR_GGUF layer is a whole GGUF file
 * as ollama's is, their config (MT_DMR_CONFIG_*) is kept as a received layer, and its
 * context_size becomes the model's num_ctx (a params layer), as `docker model run` would use it.
 * A DMR artifact of several MT_DMR_GGUF layers is a GGUF split by gguf-split, one shard a layer
 * in shard order (`docker model package` of model-00001-of-0000N.gguf): the shards are checked
 * and merged as `mstore import` of the first shard does (import_gguf_split_manifest), so the model
 * is the one stored from the unsplit file, blobs shared. No earlier split is reused for shards
 * (its header is named by no single GGUF), and a push of the received manifest needs the shard
 * blobs themselves: export cannot cut the same shards again. A CNCF ModelPack artifact whose
 * config says format "gguf" takes the same path, its raw weight layers (MT_CNCF_WEIGHT_RAW) as
 * the GGUF or its shards, or a tar of the one GGUF (MT_CNCF_WEIGHT_TAR: the file inside split,
 * the tar's frame kept to rebuild it, tar.c). Safetensors artifacts (DMR's, ModelPack's of format
 * "safetensors") are imported as the directory they package (hfdir.c); a ModelPack of another
 * format is kept as received. */
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "blob/blob.h"
#include "export/export.h"
#include "import/import.h"
#include "runtime/runtime.h"
#include "registry/registry_int.h"

#define CONFIG_MAX_BYTES   (16u << 20)
#define GGUF_TEMPLATE_NAME "tokenizer.chat_template" /* the GGUF's own template, as a layer name */
#define FRAME_MAX (16u << 20)   /* a weight tar's bytes besides its file: headers, padding, trailer */

static int blob_json(json_t **out, store *s, const char *digest)
{
    blob_view v = {0};
    json_error_t e;
    int rc;

    *out = NULL;
    if ((rc = store_blob_open(&v, s, digest)) < 0)
        return rc;
    if (v.size > CONFIG_MAX_BYTES)
        rc = ms_err(MS_EINVALID, "blob %s: %zu bytes, more than a config may have (%u)", digest, v.size,
                    CONFIG_MAX_BYTES);
    else if (!(*out = json_loadb((const char *)v.data, v.size, 0, &e)) || !json_is_object(*out))
        rc = ms_err(MS_EINVALID, "blob %s: not a JSON object (%s)", digest, e.text);
    if (rc < 0) {
        json_decref(*out);
        *out = NULL;
    }
    blob_close(&v);
    return rc;
}

/* 1 when some stored manifest references `digest` as a layer or a config. */
static int digest_referenced(store *s, const char *digest)
{
    /* when in doubt (an error), keep the blob: gc removes it later if it is unused */
    return store_blob_referenced(s, digest) != 0;
}

/* Layers of one kind that are the shards of one split GGUF: DMR's, ModelPack's (raw, or one file
 * in a tar: is_tar). */
static int shard_kind(const char *mt)
{
    return !strcmp(mt, MT_DMR_GGUF) || !strcmp(mt, MT_CNCF_WEIGHT_RAW) || !strcmp(mt, MT_CNCF_WEIGHT_GGUF) ||
           !strcmp(mt, MT_CNCF_WEIGHT_TAR);
}

static int is_tar(const manifest_layer *l)
{
    return !strcmp(l->media_type, MT_CNCF_WEIGHT_TAR);
}

/* A layer that holds a whole GGUF file: ollama's, Docker Model Runner's, or a ModelPack weight
 * (a GGUF when the config's format says so: modelpack_gguf), raw or the one file of a tar. */
static int is_whole_gguf(const manifest_layer *l)
{
    return !strcmp(l->media_type, MT_OLLAMA_MODEL) || shard_kind(l->media_type);
}

/* The first whole-GGUF layer of `m`, or NULL. */
static const manifest_layer *whole_gguf(const manifest *m)
{
    for (size_t i = 0; i < m->n_layers; i++)
        if (is_whole_gguf(&m->layers[i]))
            return &m->layers[i];
    return NULL;
}

/* How many whole-GGUF layers `m` has: more than one are shards (DMR's, ModelPack's). */
static size_t gguf_layers(const manifest *m)
{
    size_t n = 0;

    for (size_t i = 0; i < m->n_layers; i++)
        n += is_whole_gguf(&m->layers[i]) != 0;
    return n;
}

/* The store's name for a received layer's media type: Docker Model Runner's chat template (Jinja,
 * which the chat module reads as it reads a GGUF's) and license are the store's template and
 * license; the received manifest, kept beside, still names them as sent. */
static const char *store_media_type(const char *mt)
{
    return !strcmp(mt, MT_DMR_CHAT_TEMPLATE) ? MT_TEMPLATE : !strcmp(mt, MT_DMR_LICENSE) ? MT_OLLAMA_LICENSE : mt;
}

/* The one file of a weight tar (tar.c): where its bytes are. */
typedef struct tar_one {
    uint64_t off, size;
    size_t files;
    const char *what;
} tar_one;

static int tar_one_file(void *ctx, const char *path, uint64_t off, uint64_t size)
{
    tar_one *o = ctx;
    char safe[256];

    if (o->files++)
        return ms_err(MS_EUNSUPPORTED, "%s: the archive holds more than one file ('%s' too); a weight layer of one file is read",
                      o->what, ms_str_safe(safe, sizeof safe, path));
    o->off = off;
    o->size = size;
    return 0;
}

/* Where the file of tar layer `l` (mapped in `v`) lies; its frame is all the rest. */
static int tar_locate(tar_one *o, const blob_view *v, const manifest_layer *l)
{
    *o = (tar_one){ .what = "weight tar" };
    if (reg_tar_scan(v->data, v->size, o->what, 0, tar_one_file, o) < 0)
        return ms_err_ctx("layer %s (%s)", l->digest, l->media_type);
    if (v->size - o->size > FRAME_MAX)
        return ms_err(MS_EUNSUPPORTED, "layer %s (%s): %zu bytes besides its file (at most %u are kept)", l->digest,
                      l->media_type, (size_t)(v->size - o->size), FRAME_MAX);
    return 0;
}

/* The GGUF file of layer `l`: the blob's own file (*temp 0), or for a tar layer its one file
 * written under tmp/ (*temp 1: the caller removes it). */
static int layer_gguf_path(char **path_out, int *temp, store *s, const manifest_layer *l)
{
    blob_view v = { 0 };
    tar_one o;
    char *path = NULL;
    int fd = -1, rc;

    *temp = 0;
    *path_out = NULL;
    if (!is_tar(l))
        return store_blob_file(path_out, s, l->digest);
    if ((rc = store_blob_open(&v, s, l->digest)) < 0 || (rc = tar_locate(&o, &v, l)) < 0)
        goto done;
    if (!(path = ms_strdup_printf("%s/tmp/%d-tar-%.16s.gguf", store_home(s), (int)getpid(), blob_digest_hex(l->digest)))) {
        rc = ms_err(MS_ENOMEM, "out of memory");
        goto done;
    }
    if ((fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) < 0) {
        rc = ms_err_os("%s: open", path);
        goto done;
    }
    *temp = 1;
    if ((rc = ms_write_all(fd, v.data + o.off, (size_t)o.size)) < 0)
        ms_err_ctx("%s", path);
done:
    if (fd >= 0 && close(fd) != 0 && rc == 0)
        rc = ms_err_os("%s: close", path);
    blob_close(&v);
    if (rc < 0 && *temp)
        unlink(path);
    if (rc < 0) {
        free(path);
        *temp = 0;
        return rc;
    }
    *path_out = path;
    return 0;
}

/* Tar layer `l`'s frame (the archive less its file's bytes) stored in `t` and added to `d` as a
 * MT_TAR_FRAME layer named by the tar's digest: push rebuilds the tar from it. */
static int tar_frame_keep(manifest *d, store_txn *t, const manifest_layer *l)
{
    blob_view v = { 0 };
    tar_one o;
    ms_digest digest;
    uint8_t *f = NULL;
    size_t n = 0;
    int rc;

    if ((rc = store_blob_open(&v, store_txn_store(t), l->digest)) < 0 || (rc = tar_locate(&o, &v, l)) < 0)
        goto done;
    n = v.size - (size_t)o.size;
    if (!(f = malloc(n))) {
        rc = ms_err(MS_ENOMEM, "out of memory");
        goto done;
    }
    memcpy(f, v.data, (size_t)o.off);
    memcpy(f + o.off, v.data + o.off + o.size, n - (size_t)o.off);
    if ((rc = store_txn_blob_put(t, digest, f, n)) == 0)
        rc = manifest_layer_add(d, MT_TAR_FRAME, digest, n, l->digest);
done:
    free(f);
    blob_close(&v);
    return rc;
}

/* GGUF shard `l` (a raw layer, stored) kept in `d`: as its header (MT_GGUF_SHARD) when
 * export_gguf_shard writes it again from that and the tensor blobs (its gaps zero, as
 * gguf-split writes them); else whole, so that push still has it. */
static int shard_keep(manifest *d, store_txn *t, const manifest_layer *l)
{
    blob_view v = { 0 };
    ms_digest digest;
    uint64_t header = 0;
    int rc;

    if ((rc = store_blob_open(&v, store_txn_store(t), l->digest)) < 0 ||
        (rc = export_gguf_shard_fits(v.data, v.size, l->digest, &header)) < 0)
        goto done;
    if (rc == 0)
        rc = manifest_layer_add(d, l->media_type, l->digest, l->size, NULL);
    else if ((rc = store_txn_blob_put(t, digest, v.data, (size_t)header)) == 0)
        rc = manifest_layer_add(d, MT_GGUF_SHARD, digest, header, l->digest);
done:
    blob_close(&v);
    return rc < 0 ? ms_err_ctx("layer %s", l->digest) : 0;
}

/* Not a layer the GGUF split makes, so not one prior_split reuses. */
static int not_from_import(const manifest_layer *l)
{
    return !(!strcmp(l->media_type, MT_TENSOR) || !strcmp(l->media_type, MT_GGUF_META) ||
             !strcmp(l->media_type, MT_GGUF_GAPS) ||
             (!strcmp(l->media_type, MT_TEMPLATE) && l->name && !strcmp(l->name, GGUF_TEMPLATE_NAME)));
}

/* A model already split from the GGUF of digest `gguf` (its header layer is named by that
 * digest, see reg_ollama_derive): *out a manifest with its config and import layers only, or
 * NULL when the store has none whose blobs are all present. */
static int prior_split(manifest **out, store *s, const char *gguf)
{
    store_model *sm = NULL;
    const manifest *p;
    manifest *k = NULL;
    ms_digest digest = "";
    unsigned char *ok = NULL;
    int rc = 0;

    *out = NULL;
    /* An error is no reuse: the GGUF is downloaded and split again. */
    if (store_manifest_find_layer(s, MT_GGUF_META, gguf, digest) <= 0 || store_model_open_digest(&sm, s, digest) < 0)
        return 0;
    p = store_model_manifest(sm);
    if ((rc = manifest_new(&k)) < 0 ||
        (rc = manifest_config_set(k, p->config.media_type, p->config.digest, p->config.size)) < 0)
        goto done;
    /* every blob re-hashed, on a thread a core; one missing or damaged (gc raced us, or the
     * store is damaged) means split again */
    if ((rc = reg_manifest_intact(&ok, s, p, not_from_import)) < 0 || ok[0] != 1)
        goto done;
    for (size_t i = 0; i < p->n_layers; i++) {
        const manifest_layer *l = &p->layers[i];
        if (not_from_import(l))
            continue;
        if (!ok[i + 1])
            goto done;
        if ((rc = manifest_layer_add(k, l->media_type, l->digest, l->size, l->name)) < 0)
            goto done;
    }
    *out = k;
    k = NULL;
done:
    free(ok);
    manifest_free(k);
    store_model_close(sm);
    return rc;
}

/* The n shards from layer `first` on, checked and merged into `*d` (import_gguf_split_manifest).
 * Each shard's digest was checked as it was downloaded; the merged file is mstore's own. */
static int split_shards(manifest **d, store_txn *t, const manifest_layer *first, size_t n, const registry_opts *o)
{
    store *s = store_txn_store(t);
    import_opts io = {.quiet = o->quiet};
    char **paths = calloc(n, sizeof *paths), **labels = calloc(n, sizeof *labels);
    int *temp = calloc(n, sizeof *temp);
    int rc = 0;

    if (!paths || !labels || !temp) {
        rc = ms_err(MS_ENOMEM, "out of memory for %zu shards", n);
        goto done;
    }
    /* the shards are the manifest's whole-GGUF layers from `first` on, in order */
    for (size_t i = 0, k = 0; k < n; i++) {
        const manifest_layer *l = first + i;
        if (!is_whole_gguf(l))
            continue;
        if ((rc = layer_gguf_path(&paths[k], &temp[k], s, l)) < 0)
            goto done;
        if (!(labels[k] = malloc(strlen(l->digest) + 16))) {
            rc = ms_err(MS_ENOMEM, "out of memory");
            goto done;
        }
        sprintf(labels[k++], "layer %s", l->digest);
    }
    rc = import_gguf_split_manifest(d, t, (const char *const *)paths, (const char *const *)labels, n, "model.gguf", &io);
    if (rc == 0)
        rc = store_txn_flush(t);
done:
    if (rc < 0) {
        manifest_free(*d);
        *d = NULL;
    }
    for (size_t i = 0; i < n; i++) {
        if (paths && temp && temp[i])
            unlink(paths[i]);
        if (paths)
            free(paths[i]);
        if (labels)
            free(labels[i]);
    }
    MS_FREE_ALL(paths, labels, temp);
    return rc;
}

/* Split the GGUF layer `l` into `*d` (import_gguf_manifest), checking the digest it read, or
 * take the split of an earlier pull of the same file; n_shards > 1: `l` is the first shard. */
static int split_gguf(manifest **d, store_txn *t, const manifest_layer *l, size_t n_shards, const registry_opts *o,
                      int *reused_out)
{
    store *s = store_txn_store(t);
    import_opts io = {.quiet = o->quiet};
    char *path = NULL;
    json_t *cfg = NULL;
    const char *src;
    int rc, temp = 0;

    *reused_out = 0;
    if (n_shards > 1)
        return split_shards(d, t, l, n_shards, o);
    if ((rc = prior_split(d, s, l->digest)) < 0 || *d) {
        *reused_out = *d != NULL;
        return rc;
    }
    if ((rc = layer_gguf_path(&path, &temp, s, l)) < 0)
        return rc;
    /* The split's blobs land now, still unnamed: its config is read back just below. */
    if ((rc = import_gguf_manifest(d, t, path, "model.gguf", &io)) < 0 || (rc = store_txn_flush(t)) < 0)
        goto done;
    if (temp)   /* the file of a tar: the tar's digest was checked as it came in */
        goto done;
    if ((rc = blob_json(&cfg, s, (*d)->config.digest)) < 0)
        goto done;
    src = json_string_value(json_object_get(json_object_get(cfg, "source"), "digest"));
    if (!src || strcmp(src, l->digest) != 0)
        rc = ms_err(MS_EMISMATCH, "layer %s (%s): the bytes split hash to %s", l->digest, l->media_type,
                    src ? src : "?");
done:
    if (rc < 0) {
        manifest_free(*d);
        *d = NULL;
    }
    json_decref(cfg);
    if (temp)
        unlink(path);
    free(path);
    return rc;
}

int reg_ollama_plan(manifest **fetch_out, store *s, const manifest *m)
{
    const manifest_layer *g = whole_gguf(m);
    manifest *prior = NULL, *f = NULL;
    int rc;

    *fetch_out = NULL;
    /* a tar is fetched all the same: its frame is kept beside the split (tar_frame_keep) */
    if (!g || is_tar(g) || store_blob_intact(s, g->digest, g->size) || gguf_layers(m) > 1)
        return 0;
    if ((rc = prior_split(&prior, s, g->digest)) < 0 || !prior)
        return rc;
    manifest_free(prior);
    if ((rc = manifest_new(&f)) < 0 ||
        (rc = manifest_config_set(f, m->config.media_type, m->config.digest, m->config.size)) < 0)
        goto fail;
    for (size_t i = 0; i < m->n_layers; i++)
        if (&m->layers[i] != g && (rc = manifest_layer_add(f, m->layers[i].media_type, m->layers[i].digest,
                                                           m->layers[i].size, m->layers[i].name)) < 0)
            goto fail;
    *fetch_out = f;
    return 0;
fail:
    manifest_free(f);
    return rc;
}

/* An mstore config pushed under the Docker media type: it names the architecture and its
 * dimensions, which ollama's ConfigV2 never does. */
static int is_mstore_config(store *s, const manifest_layer *config)
{
    json_t *c = NULL;
    int yes;

    if (blob_json(&c, s, config->digest) < 0)
        return 0;
    yes = json_is_string(json_object_get(c, "architecture")) && json_object_get(c, "hidden_size") &&
          json_object_get(c, "num_hidden_layers");
    json_decref(c);
    return yes;
}

/* A Docker Model Runner config's context_size as a params layer {"num_ctx": N} of `d`, unless the
 * received manifest has params of its own. A value outside num_ctx's bounds refuses the pull. */
static int dmr_params(manifest *d, store_txn *t, const manifest *m)
{
    const json_t *cs;
    json_t *cfg = NULL;
    ms_digest digest;
    char text[64];
    int rc;

    if ((strcmp(m->config.media_type, MT_DMR_CONFIG_V01) && strcmp(m->config.media_type, MT_DMR_CONFIG_V02)) ||
        manifest_layer_find(m, MT_OLLAMA_PARAMS, NULL))
        return 0;
    if ((rc = blob_json(&cfg, store_txn_store(t), m->config.digest)) < 0)
        return rc;
    cs = json_object_get(json_object_get(cfg, "config"), "context_size");
    if (!cs || json_is_null(cs)) {
        rc = 0;
    } else if (!json_is_integer(cs) || json_integer_value(cs) < 1 || json_integer_value(cs) > RUNTIME_CTX_MAX) {
        rc = ms_err(MS_EINVALID, "config %s: config.context_size: expected an integer from 1 to %d", m->config.digest,
                    RUNTIME_CTX_MAX);
    } else {
        int n = snprintf(text, sizeof text, "{\"num_ctx\":%" JSON_INTEGER_FORMAT "}", json_integer_value(cs));
        if ((rc = store_txn_blob_put(t, digest, text, (size_t)n)) == 0)
            rc = manifest_layer_add(d, MT_OLLAMA_PARAMS, digest, (uint64_t)n, NULL);
    }
    json_decref(cfg);
    return rc;
}

/* 1 when ModelPack manifest `m`'s config says config.format `want` ("gguf", "safetensors": the
 * spec's values; any case), read from the store (flushed first when it came in a transaction). */
static int modelpack_format(store *s, const manifest *m, const char *want)
{
    json_t *cfg = NULL;
    const char *f;
    int rc;

    if (strcmp(m->config.media_type, MT_CNCF_CONFIG) != 0)
        return 0;
    if ((rc = blob_json(&cfg, s, m->config.digest)) < 0)
        return rc;
    f = json_string_value(json_object_get(json_object_get(cfg, "config"), "format"));
    rc = f && !strcasecmp(f, want);
    json_decref(cfg);
    return rc;
}

/* 2 when `m` is a ModelPack of safetensors files, 1 for DMR's safetensors layers, else 0. One
 * without the directory's config.json is no model to import: 0, kept as received. */
static int safetensors_artifact(store *s, const manifest *m)
{
    if (!reg_hfdir_has_config(m))
        return 0;
    for (size_t i = 0; i < m->n_layers; i++)
        if (reg_hfdir_weight(&m->layers[i], 0))
            return 1;
    for (size_t i = 0; i < m->n_layers; i++)
        if (!strcmp(m->layers[i].media_type, MT_CNCF_WEIGHT_RAW)) {
            int rc = modelpack_format(s, m, "safetensors");
            return rc <= 0 ? rc : 2;
        }
    return 0;
}

static void count_tensors(store *s, const manifest *d, registry_pull_report *rep)
{
    for (size_t i = 0; rep && i < d->n_layers; i++) {
        if (strcmp(d->layers[i].media_type, MT_TENSOR) != 0)
            continue;
        rep->tensor_blobs++;
        if (digest_referenced(s, d->layers[i].digest))
            rep->tensor_blobs_shared++;
        else
            rep->tensor_bytes_new += d->layers[i].size;
    }
}

int reg_ollama_derive(manifest **out, store_txn *t, const manifest *m, const registry_opts *o,
                      registry_pull_report *rep)
{
    store *s = store_txn_store(t);
    const manifest_layer *gguf = NULL, *tmpl;
    manifest *d = NULL;
    ms_digest src;
    char *bytes = NULL;
    size_t len = 0, n_gguf = 0;
    int rc, st;

    *out = NULL;
    /* What is read back below (the GGUF, the config) may still sit in the transaction's batch:
     * a layout pull writes its blobs through it (a download is adopted into blobs/ at once). */
    if ((rc = store_txn_flush(t)) < 0 || (st = safetensors_artifact(s, m)) < 0)
        return rc < 0 ? rc : st;
    for (size_t i = 0; !st && i < m->n_layers; i++) {
        if (!is_whole_gguf(&m->layers[i]))
            continue;
        n_gguf++;
        /* several DMR GGUF layers are the shards of one split GGUF; ollama's are other files */
        if (gguf && !(shard_kind(gguf->media_type) && !strcmp(m->layers[i].media_type, gguf->media_type)))
            return ms_err(MS_EUNSUPPORTED,
                          "manifest: %s layers %s and %s: models of several GGUF files "
                          "(vision projectors, adapters) are not supported yet",
                          m->layers[i].media_type, gguf->digest, m->layers[i].digest);
        if (!gguf)
            gguf = &m->layers[i];
    }
    if (!gguf && !st && !strcmp(m->config.media_type, MT_CONFIG))
        return 0; /* the store's own form already */
    if (gguf && (!strcmp(gguf->media_type, MT_CNCF_WEIGHT_RAW) || is_tar(gguf)) &&
        (rc = modelpack_format(s, m, "gguf")) <= 0)
        return rc; /* a ModelPack of other files: kept as received */
    if (gguf || st) {
        manifest *k = NULL;
        int reused = 0;
        if ((rc = st ? reg_hfdir_import(&k, t, m, st == 2, o) : split_gguf(&k, t, gguf, n_gguf, o, &reused)) < 0)
            goto done;
        if (rep)
            rep->split = !st, rep->split_reused = reused;
        /* The import's layers, named so that a later pull of the same file finds them
         * (prior_split): the header by the GGUF's digest, the file's own chat template by
         * GGUF_TEMPLATE_NAME. A template layer from the registry replaces the file's (ollama
         * renders its Go template, never the GGUF's). */
        tmpl = manifest_layer_find(m, MT_TEMPLATE, NULL);
        if (!tmpl)
            tmpl = manifest_layer_find(m, MT_DMR_CHAT_TEMPLATE, NULL);
        if ((rc = manifest_new(&d)) < 0 ||
            (rc = manifest_config_set(d, k->config.media_type, k->config.digest, k->config.size)) < 0) {
            manifest_free(k);
            goto done;
        }
        for (size_t i = 0; rc == 0 && i < k->n_layers; i++) {
            const manifest_layer *l = &k->layers[i];
            int is_tmpl = !strcmp(l->media_type, MT_TEMPLATE);
            if (is_tmpl && tmpl)
                continue;
            rc = manifest_layer_add(d, l->media_type, l->digest, l->size,
                                    st                                   ? l->name
                                    : !strcmp(l->media_type, MT_GGUF_META) ? (n_gguf > 1 ? NULL : gguf->digest)
                                    : is_tmpl                            ? GGUF_TEMPLATE_NAME
                                                                         : l->name);
        }
        manifest_free(k);
        if (rc < 0)
            goto done;
    } else if (!strcmp(m->config.media_type, MT_DOCKER_CONFIG) && is_mstore_config(s, &m->config)) {
        if ((rc = manifest_new(&d)) < 0 ||
            (rc = manifest_config_set(d, MT_CONFIG, m->config.digest, m->config.size)) < 0)
            goto done;
    } else {
        return 0; /* nothing the store knows how to derive: kept as received */
    }
    for (size_t i = 0; i < m->n_layers; i++) {
        const manifest_layer *l = &m->layers[i];
        if (is_tar(l) && (rc = tar_frame_keep(d, t, l)) < 0)
            goto done;
        if (n_gguf > 1 && !is_tar(l) && is_whole_gguf(l) && (rc = shard_keep(d, t, l)) < 0)
            goto done;
        if (!is_whole_gguf(l) && !reg_hfdir_weight(l, 0) &&
            (rc = manifest_layer_add(d, store_media_type(l->media_type), l->digest, l->size, l->name)) < 0)
            goto done;
    }
    if (strcmp(d->config.digest, m->config.digest) != 0 &&
        (rc = manifest_layer_add(d, m->config.media_type, m->config.digest, m->config.size, NULL)) < 0)
        goto done;
    if ((rc = dmr_params(d, t, m)) < 0)
        goto done;
    if ((rc = manifest_bytes(&bytes, &len, m)) < 0 || (rc = store_txn_blob_put(t, src, bytes, len)) < 0 ||
        (rc = manifest_layer_add(d, MT_SOURCE_MANIFEST, src, len, NULL)) < 0)
        goto done;
    count_tensors(s, d, rep);
    *out = d;
    d = NULL;
done:
    if (rc < 0)
        ms_err_ctx("deriving the store's form of the model");
    manifest_free(d);
    free(bytes);
    return rc;
}

void reg_ollama_release(store *s, const manifest *m)
{
    for (size_t i = 0; i < m->n_layers; i++)
        if (is_whole_gguf(&m->layers[i]) || reg_hfdir_weight(&m->layers[i], 0))
            store_blob_release(s, m->layers[i].digest);   /* a tar: rebuilt by push from its frame */
}

int reg_source_swap(char **bytes, size_t *len, manifest **m, store_model *model)
{
    const manifest_layer *l = manifest_layer_find(store_model_manifest(model), MT_SOURCE_MANIFEST, NULL);
    const uint8_t *data;
    size_t n;
    manifest *sm = NULL;
    char *sb = NULL;
    int rc;

    if (!l)
        return 0;
    if ((rc = store_model_layer_bytes(&data, &n, model, l)) < 0)
        return ms_err_ctx("source manifest");
    if (n > MANIFEST_MAX_BYTES || !(sb = malloc(n + 1)))
        return ms_err(MS_EINVALID, "source manifest %s: %zu bytes", l->digest, n);
    memcpy(sb, data, n);
    sb[n] = '\0';
    if ((rc = manifest_parse(&sm, sb, n, "source manifest")) < 0) {
        free(sb);
        return rc;
    }
    *len = n;
    free(*bytes);
    manifest_free(*m);
    *bytes = sb;
    *m = sm;
    return 0;
}

/* The GGUF shards of received manifest `m` that are not stored, written again from their headers
 * (shard_keep) and model `name`'s tensor blobs into *t_out, each checked against its digest. */
static int shards_rebuild(store_txn **t_out, store *s, const model_name *name, const manifest *m)
{
    store_model *sm = NULL;
    store_txn *t = NULL;
    char path[4200];
    int rc = 0;

    for (size_t i = 0; rc == 0 && i < m->n_layers; i++) {
        const manifest_layer *l = &m->layers[i], *h;
        blob_view hv = { 0 };
        export_result res;
        ms_digest got;
        if (!is_whole_gguf(l) || store_blob_intact(s, l->digest, l->size))
            continue;
        if (!sm && ((rc = store_model_open(&sm, s, name)) < 0 || (rc = store_txn_begin(&t, s)) < 0))
            break;
        if (is_tar(l) || !(h = manifest_layer_find(store_model_manifest(sm), MT_GGUF_SHARD, l->digest))) {
            rc = ms_err(MS_EUNSUPPORTED,
                        "layer %s: a GGUF shard that is not kept, nor its header to write it again; push with "
                        "--format oci",
                        l->digest);
            break;
        }
        snprintf(path, sizeof path, "%s/tmp/%d-shard-%s.gguf", store_home(s), (int)getpid(), blob_digest_hex(l->digest));
        if ((rc = store_blob_open(&hv, s, h->digest)) == 0 &&
            (rc = export_gguf_shard(s, name, hv.data, hv.size, l->size, path, &res)) == 0 &&
            (rc = store_txn_blob_adopt(t, got, path, l->digest, NULL)) < 0)
            unlink(path);
        blob_close(&hv);
        if (rc < 0)
            ms_err_ctx("rebuilding layer %s", l->digest);
    }
    store_model_close(sm);
    if (rc < 0) {
        store_txn_abort(t);
        return rc;
    }
    *t_out = t;
    return 0;
}

/* The frame of tar layer `l` as model `name` keeps it (tar_frame_keep): *head / *tail the bytes
 * before and after the file, *size the file's size, in *view (the caller closes it). */
static int frame_find(blob_view *view, size_t *head, uint64_t *size, store *s, const model_name *name,
                      const manifest_layer *l)
{
    store_model *sm = NULL;
    const manifest_layer *f;
    tar_one o;
    int rc;

    if ((rc = store_model_open(&sm, s, name)) < 0)
        return rc;
    if (!(f = manifest_layer_find(store_model_manifest(sm), MT_TAR_FRAME, l->digest)))
        rc = ms_err(MS_ENOTFOUND, "layer %s (%s): the model keeps no frame to rebuild it from", l->digest, l->media_type);
    else if ((rc = store_blob_open(view, s, f->digest)) == 0) {
        o = (tar_one){ .what = "tar frame" };
        if ((rc = reg_tar_scan(view->data, view->size, "tar frame", REG_TAR_FRAME, tar_one_file, &o)) == 0)
            *head = (size_t)o.off, *size = o.size;
    }
    store_model_close(sm);
    return rc;
}

int reg_source_materialize(store_txn **t_out, store *s, const model_name *name, const manifest *m)
{
    const manifest_layer *l = whole_gguf(m);
    const char *home = store_home(s);
    char path[4200], tpath[4210];
    const char *made = path;
    ms_digest digest;
    export_result res;
    store_txn *t = NULL;
    int rc;

    *t_out = NULL;
    if ((rc = safetensors_artifact(s, m)) != 0)
        return rc < 0 ? rc : reg_hfdir_rebuild(t_out, s, name, m, rc == 2);
    if (l && gguf_layers(m) > 1)
        return shards_rebuild(t_out, s, name, m);
    if (!l || store_blob_intact(s, l->digest, l->size))
        return 0;
    if ((rc = store_txn_begin(&t, s)) < 0)
        return ms_err_ctx("rebuilding layer %s", l->digest);
    /* export_gguf writes atomically under its own temp name next to `path`; adopting it from
     * tmp/ re-hashes it, so the blob appears only if it is the very file the manifest names. */
    snprintf(path, sizeof path, "%s/tmp/%d-source-%s.gguf", home, (int)getpid(), blob_digest_hex(l->digest));
    if ((rc = export_gguf(s, name, path, &res)) < 0)
        goto fail;
    if (is_tar(l)) {   /* the export put back into the received archive's frame */
        blob_view f = { 0 };
        size_t head = 0;
        uint64_t size = 0;
        snprintf(tpath, sizeof tpath, "%s.tar", path);
        if ((rc = frame_find(&f, &head, &size, s, name, l)) == 0 && size != res.nbytes)
            rc = ms_err(MS_EMISMATCH, "layer %s: the archive held %" PRIu64 " bytes, the export is %" PRIu64, l->digest,
                        size, res.nbytes);
        if (rc == 0)
            rc = reg_tar_wrap(tpath, path, size, f.data, head, f.data + head, f.size - head);
        blob_close(&f);
        unlink(path);
        if (rc < 0) {
            unlink(tpath);
            goto fail;
        }
        made = tpath;
    }
    if ((rc = store_txn_blob_adopt(t, digest, made, l->digest, NULL)) < 0) {
        unlink(made);
        goto fail;
    }
    *t_out = t;
    return 0;
fail:
    store_txn_abort(t);
    return ms_err_ctx("rebuilding layer %s", l->digest);
}
