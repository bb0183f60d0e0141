/* hfdir.c: safetensors artifacts (Docker Model Runner's, CNCF ModelPack's) into the store's form.
 *
 * `docker model package --safetensors-dir` writes a Hugging Face directory as layers: each
 * .safetensors file one application/vnd.docker.ai.safetensors layer, and the directory's other
 * files (config.json, tokenizer.json, ...) either one application/vnd.docker.ai.model.file layer
 * each (config v0.2) or together in one tar (application/vnd.docker.ai.vllm.config.tar, v0.1);
 * every layer names its file in the org.cncf.model.filepath annotation. A ModelPack artifact
 * whose config says format "safetensors" does the same with its own media types (weight raw,
 * weight config raw or tar). The pull puts the directory back together under tmp/ (a symbolic
 * link to each stored blob, the archive's files written out) and imports it as `mstore import
 * DIR` would (import_hf_manifest): the tensors land in the blobs a plain import of the same
 * directory stores. A safetensors file whose tensors are those blobs' bytes, one after the other
 * (what the importer stores from an unquantized file), is kept as its header only (a
 * MT_ST_FRAME layer): the header and the tensor blobs give the file back byte for byte, so the
 * file blob is released (reg_ollama_release) and a push of the manifest as received rebuilds it
 * (reg_hfdir_rebuild). A file that is not so (bytes between tensors, tensors the importer
 * combined) stays stored whole, a layer of the model.
 *
 * Only the directory's top level is read, as the importer reads it: a file in a subdirectory
 * (a diffusers model's text_encoder/) or a hidden one is left out, and a model that needs one
 * fails the import naming what it lacks. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blob/blob.h"
#include "format/format.h"
#include "import/import.h"
#include "registry/registry_int.h"

#define CONFIG_FILE_MAX (64u << 20)   /* one file of a config archive */

int reg_hfdir_weight(const manifest_layer *l, int modelpack_st)
{
    return !strcmp(l->media_type, MT_DMR_SAFETENSORS) || !strcmp(l->media_type, MT_CNCF_WEIGHT_SAFETENSORS) ||
           (modelpack_st && !strcmp(l->media_type, MT_CNCF_WEIGHT_RAW));
}

static int is_file(const manifest_layer *l)
{
    return !strcmp(l->media_type, MT_DMR_MODEL_FILE) || !strcmp(l->media_type, MT_CNCF_WEIGHT_CONFIG_RAW);
}

static int is_archive(const manifest_layer *l)
{
    return !strcmp(l->media_type, MT_DMR_CONFIG_TAR) || !strcmp(l->media_type, MT_CNCF_WEIGHT_CONFIG_TAR);
}

int reg_hfdir_has_config(const manifest *m)
{
    for (size_t i = 0; i < m->n_layers; i++)
        if (is_archive(&m->layers[i]) || (m->layers[i].filepath && !strcmp(m->layers[i].filepath, "config.json")))
            return 1;
    return 0;
}

/* 1 for a file name of the directory's top level that the importer may read; a path into a
 * subdirectory, and a hidden name (".gitattributes", and so "." and ".."), are left out. */
static int top_level(const char *p)
{
    return p[0] && p[0] != '.' && !strchr(p, '/');
}

typedef struct dir_fill {
    const char *dir, *what;
    const uint8_t *data;
} dir_fill;

/* One file of a config archive written into the directory. */
static int archive_file(void *ctx, const char *path, uint64_t off, uint64_t size)
{
    dir_fill *f = ctx;
    char *dst;
    int rc;

    if (!top_level(path))
        return 0;
    if (size > CONFIG_FILE_MAX)
        return ms_err(MS_EUNSUPPORTED, "%s: '%s' is %llu bytes, more than a config file may have (%u)", f->what, path,
                      (unsigned long long)size, CONFIG_FILE_MAX);
    if (!(dst = ms_path_join(f->dir, path)))
        return ms_err(MS_ENOMEM, "out of memory");
    if (access(dst, F_OK) == 0)
        rc = ms_err(MS_EINVALID, "%s: '%s' is in the artifact twice", f->what, path);
    else
        rc = ms_file_write_atomic(dst, f->data + off, (size_t)size);
    free(dst);
    return rc;
}

/* Layer `l` as the file of its filepath annotation in `dir`: a link to the stored blob. */
static int link_layer(store *s, const char *dir, const manifest_layer *l, const char *fallback)
{
    const char *fp = l->filepath ? l->filepath : fallback;
    char *blob = NULL, *dst = NULL, safe[256];
    int rc;

    if (!fp)
        return ms_err(MS_EINVALID, "layer %s (%s): no " MT_CNCF_FILEPATH " annotation names its file", l->digest,
                      l->media_type);
    if (!top_level(fp))
        return 0;
    if ((rc = store_blob_file(&blob, s, l->digest)) < 0)
        return rc;
    if (!(dst = ms_path_join(dir, fp)))
        rc = ms_err(MS_ENOMEM, "out of memory");
    else if (symlink(blob, dst) != 0)
        rc = errno == EEXIST ? ms_err(MS_EINVALID, "layer %s: file path '%s' is in the artifact twice", l->digest,
                                      ms_str_safe(safe, sizeof safe, fp))
                             : ms_err_os("%s: symlink", dst);
    free(blob);
    free(dst);
    return rc;
}

/* Remove what the directory holds (files and links only: it was made flat), then itself. */
static void dir_remove(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;

    while (d && (e = readdir(d)) != NULL) {
        char *p;
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if ((p = ms_path_join(dir, e->d_name)) != NULL)
            unlink(p);
        free(p);
    }
    if (d)
        closedir(d);
    rmdir(dir);
}

/* The bytes of tensor `name` as model manifest `k` stores it (its own tensor blob), checked
 * against dtype and size: *data within *view (the caller closes it and frees *f). */
static int tensor_bytes(const uint8_t **data, blob_view *view, st_file **f, store *s, const manifest *k,
                        const st_tensor *want)
{
    const manifest_layer *l = manifest_layer_find(k, MT_TENSOR, want->name);
    const st_tensor *t;
    int rc;

    *f = NULL;
    if (!l)
        return ms_err(MS_ENOTFOUND, "tensor '%s': no tensor blob of that name", want->name);
    if ((rc = store_blob_open(view, s, l->digest)) < 0 ||
        (rc = st_parse(f, view->data, view->size, view->size, 0, l->digest)) < 0)
        return rc;
    if (!(t = st_find(*f, want->name)) || t->dtype != want->dtype || t->nbytes != want->nbytes)
        return ms_err(MS_EMISMATCH, "tensor '%s': blob %s holds it otherwise", want->name, l->digest);
    *data = t->data;
    return 0;
}

/* 1 when safetensors file `l` (stored) is its header followed by the bytes of k's tensor blobs,
 * in order, nothing between: then its header is all that needs keeping. */
static int frame_fits(store *s, const manifest *k, const manifest_layer *l, st_file **hdr, blob_view *v)
{
    uint64_t at;
    int rc;

    if ((rc = store_blob_open(v, s, l->digest)) < 0 || (rc = st_parse(hdr, v->data, v->size, v->size, 0, l->digest)) < 0)
        return rc;
    at = st_data_start(*hdr);
    for (size_t i = 0; i < st_count(*hdr); i++) {
        const st_tensor *t = st_at(*hdr, i);
        const uint8_t *data;
        blob_view tv = { 0 };
        st_file *tf = NULL;
        int same;
        if (t->offset != at)
            return 0;
        same = tensor_bytes(&data, &tv, &tf, s, k, t) == 0 && !memcmp(data, t->data, (size_t)t->nbytes);
        st_free(tf);
        blob_close(&tv);
        if (!same)
            return 0;
        at += t->nbytes;
    }
    return at == v->size;
}

/* Safetensors file `l` kept in `k`: as its header (MT_ST_FRAME) when that and the tensor blobs
 * give it back, else whole. */
static int weight_keep(manifest *k, store_txn *t, const manifest_layer *l)
{
    store *s = store_txn_store(t);
    st_file *hdr = NULL;
    blob_view v = { 0 };
    ms_digest d;
    int rc;

    ms_err_clear();
    if ((rc = frame_fits(s, k, l, &hdr, &v)) > 0) {
        rc = store_txn_blob_put(t, d, v.data, (size_t)st_data_start(hdr));
        if (rc == 0)
            rc = manifest_layer_add(k, MT_ST_FRAME, d, st_data_start(hdr), l->digest);
    } else if (rc == 0) {
        rc = manifest_layer_add(k, l->media_type, l->digest, l->size, l->filepath);
    }
    st_free(hdr);
    blob_close(&v);
    return rc < 0 ? ms_err_ctx("layer %s", l->digest) : 0;
}

int reg_hfdir_import(manifest **out, store_txn *t, const manifest *m, int modelpack_st, const registry_opts *o)
{
    store *s = store_txn_store(t);
    import_opts io = { .quiet = o->quiet };
    size_t n_weights = 0;
    char *dir;
    int rc = 0;

    *out = NULL;
    for (size_t i = 0; i < m->n_layers; i++)
        n_weights += reg_hfdir_weight(&m->layers[i], modelpack_st) != 0;
    if (!(dir = ms_strdup_printf("%s/tmp/%d-hf-%.16s", store_home(s), (int)getpid(), blob_digest_hex(m->config.digest))))
        return ms_err(MS_ENOMEM, "out of memory");
    dir_remove(dir);   /* a leftover of this pid's earlier try */
    if (mkdir(dir, 0700) != 0) {
        rc = ms_err_os("%s: mkdir", dir);
        free(dir);
        return rc;
    }
    for (size_t i = 0; rc == 0 && i < m->n_layers; i++) {
        const manifest_layer *l = &m->layers[i];
        if (reg_hfdir_weight(l, modelpack_st))
            /* one safetensors layer without a path is the directory's model.safetensors */
            rc = link_layer(s, dir, l, n_weights == 1 ? "model.safetensors" : NULL);
        else if (is_file(l))
            rc = link_layer(s, dir, l, NULL);
        else if (is_archive(l)) {
            blob_view v = { 0 };
            dir_fill f = { .dir = dir, .what = "config archive" };
            if ((rc = store_blob_open(&v, s, l->digest)) == 0) {
                f.data = v.data;
                rc = reg_tar_scan(v.data, v.size, f.what, 0, archive_file, &f);
            }
            blob_close(&v);
            if (rc < 0)
                ms_err_ctx("layer %s (%s)", l->digest, l->media_type);
        }
    }
    if (rc == 0)
        rc = import_hf_manifest(out, t, dir, "model", &io);
    if (rc == 0)
        rc = store_txn_flush(t);   /* the import read the links: the blobs go nowhere before this */
    for (size_t i = 0; rc == 0 && i < m->n_layers; i++)
        if (reg_hfdir_weight(&m->layers[i], modelpack_st))
            rc = weight_keep(*out, t, &m->layers[i]);
    if (rc < 0) {
        manifest_free(*out);
        *out = NULL;
    }
    dir_remove(dir);
    free(dir);
    return rc;
}

/* Safetensors file `l` written again into `t` from its frame (header) in `model` and the tensor
 * blobs it names, its digest checked. */
static int weight_rebuild(store_txn *t, const manifest *model, const manifest_layer *l)
{
    store *s = store_txn_store(t);
    const manifest_layer *fl = manifest_layer_find(model, MT_ST_FRAME, l->digest);
    blob_view fv = { 0 };
    st_file *hdr = NULL;
    blob_writer *w = NULL;
    ms_digest d;
    int rc;

    if (!fl)
        return ms_err(MS_EUNSUPPORTED,
                      "layer %s (%s): the safetensors file is not kept, nor its header to write it again; push "
                      "with --format oci",
                      l->digest, l->media_type);
    if ((rc = store_blob_open(&fv, s, fl->digest)) < 0 ||
        (rc = st_parse(&hdr, fv.data, fv.size, l->size, ST_HEADER_ONLY, fl->digest)) < 0 ||
        (rc = store_txn_blob_open(t, &w)) < 0)
        goto done;
    rc = blob_writer_write(w, fv.data, fv.size);
    for (size_t i = 0; rc == 0 && i < st_count(hdr); i++) {
        const uint8_t *data;
        blob_view tv = { 0 };
        st_file *tf = NULL;
        if ((rc = tensor_bytes(&data, &tv, &tf, s, model, st_at(hdr, i))) == 0)
            rc = blob_writer_write(w, data, (size_t)st_at(hdr, i)->nbytes);
        st_free(tf);
        blob_close(&tv);
    }
    if (rc == 0) {
        rc = store_txn_blob_add(t, d, NULL, w, l->digest);
        w = NULL;
    }
done:
    if (w)
        blob_writer_abort(w);
    st_free(hdr);
    blob_close(&fv);
    return rc < 0 ? ms_err_ctx("rebuilding layer %s", l->digest) : 0;
}

int reg_hfdir_rebuild(store_txn **t_out, store *s, const model_name *name, const manifest *m, int modelpack_st)
{
    store_model *sm = NULL;
    store_txn *t = NULL;
    int rc = 0;

    *t_out = NULL;
    for (size_t i = 0; rc == 0 && i < m->n_layers; i++) {
        const manifest_layer *l = &m->layers[i];
        if (!reg_hfdir_weight(l, modelpack_st) || store_blob_intact(s, l->digest, l->size))
            continue;
        if (!t && ((rc = store_model_open(&sm, s, name)) < 0 || (rc = store_txn_begin(&t, s)) < 0))
            break;
        rc = weight_rebuild(t, store_model_manifest(sm), l);
    }
    if (rc == 0 && t)
        rc = store_txn_flush(t);
    store_model_close(sm);
    if (rc < 0) {
        store_txn_abort(t);
        return rc;
    }
    *t_out = t;
    return 0;
}
