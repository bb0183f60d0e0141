/* dmr.c: a stored model in Docker Model Runner's form, for `push --format dmr`.
 *
 * What `docker model package --gguf` writes (docker/model-distribution, types/config.go): an
 * OCI manifest whose config is application/vnd.docker.ai.model.config.v0.1+json ({"config":
 * {format, quantization, parameters, architecture, size, gguf, context_size}, "descriptor",
 * "rootfs": {"type": "rootfs", "diff_ids": [the GGUF's digest]}}) and whose layers are the GGUF
 * (application/vnd.docker.ai.gguf.v3), then the license and the Jinja chat template. The GGUF
 * is the file `mstore export` writes, rebuilt into a blob for the push and released after it
 * (its tensors stay stored once); the config is derived from the GGUF header and the store's
 * config, with nothing that changes from one push to the next (no creation time), so the same
 * model always makes the same manifest. An ollama Go template is not Jinja: it is left out.
 *
 * `push --format modelpack` builds the CNCF ModelPack form (modelpack/model-spec docs/spec.md)
 * from the same export: artifactType application/vnd.cncf.model.manifest.v1+json, config
 * application/vnd.cncf.model.config.v1+json ({descriptor: {name}, config: {architecture,
 * format, paramSize, quantization, precision}, modelfs: {type: layers, diffIds}}), the GGUF as
 * an UNCOMPRESSED ustar layer (application/vnd.cncf.model.weight.v1.tar) holding one file,
 * MP_GGUF_PATH, with the spec's org.cncf.model.filepath annotation. A container runtime unpacks
 * such layers into a filesystem, so the artifact mounts as a Kubernetes image volume with the
 * model at <mount>/model.gguf. The tar is written by tar.c (POSIX ustar, no library needed for
 * one regular file) with mtime, uid, gid and owner names zero: the same model always gives the
 * same tar, config and manifest digests. */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blob/blob.h"
#include "export/export.h"
#include "format/format.h"
#include "registry/registry_int.h"

#define JSON_MAX_BYTES (16u << 20)
#define MP_GGUF_PATH "model.gguf"   /* the GGUF's path: in the ModelPack tar, and DMR's annotation */

static int layer_json(json_t **out, store_model *sm, const manifest_layer *l)
{
    const uint8_t *data;
    size_t n;
    json_error_t e;
    int rc;

    *out = NULL;
    if ((rc = store_model_layer_bytes(&data, &n, sm, l)) < 0)
        return rc;
    if (n > JSON_MAX_BYTES || !(*out = json_loadb((const char *)data, n, 0, &e)) || !json_is_object(*out)) {
        json_decref(*out);
        *out = NULL;
        return ms_err(MS_EINVALID, "blob %s: not a JSON object of at most %u bytes", l->digest, JSON_MAX_BYTES);
    }
    return 0;
}

/* "1.24M", "7.62B": DMR's human-readable counts and sizes. */
static void human(char *buf, size_t len, double v, const char *unit)
{
    const char *sfx[] = { "", "K", "M", "G", "T" };
    int i = 0;

    while (v >= 1000 && i < 4)
        v /= 1000, i++;
    snprintf(buf, len, i ? "%.2f%s%s" : "%.0f%s%s", v, sfx[i], unit);
}

/* The DMR config: from the store's config (architecture, quantization) and the exported GGUF's
 * header (parameters, scalar metadata: a model imported from safetensors has them too), the
 * params layer's num_ctx as context_size. */
static int config_build(json_t **out, store *s, store_model *sm, const char *gguf, uint64_t gguf_size)
{
    const manifest *p = store_model_manifest(sm);
    const manifest_layer *params = manifest_layer_find(p, MT_OLLAMA_PARAMS, NULL);
    json_t *sc = NULL, *pj = NULL, *g = json_object(), *c = NULL, *q, *v;
    gguf_file *gh = NULL;
    blob_view bv = { 0 };
    const char *key, *best = "unknown";
    json_int_t most = -1;
    double n_params = 0;
    char buf[64];
    int rc;

    if (!g)
        return ms_err(MS_ENOMEM, "out of memory");
    if ((rc = layer_json(&sc, sm, &p->config)) < 0)
        goto done;
    json_object_foreach(json_object_get(sc, "quantization"), key, q) {
        if (json_is_integer(q) && json_integer_value(q) > most)
            most = json_integer_value(q), best = key;
    }
    if ((rc = store_blob_open(&bv, s, gguf)) < 0 || (rc = gguf_open_buf(&gh, bv.data, bv.size, 0, gguf)) < 0)
        goto done;
    for (size_t i = 0; i < gguf_tensor_count(gh); i++) {
        const gguf_tensor *t = gguf_tensor_at(gh, i);
        double e = 1;
        for (int d = 0; d < t->n_dims; d++)
            e *= (double)t->ne[d];
        n_params += e;
    }
    /* the scalars as strings, as DMR's gguf map holds them; arrays (the vocabulary) left out */
    for (size_t i = 0; i < gguf_kv_count(gh); i++) {
        json_t *x;
        if (gguf_kv_type(gh, i) == GGUF_TYPE_ARRAY || !(x = gguf_kv_to_json(gh, i)))
            continue;
        if (json_is_string(x))
            json_object_set(g, gguf_kv_key(gh, i), x);
        else if ((v = json_is_boolean(x) ? json_string(json_is_true(x) ? "true" : "false") : NULL) ||
                 (json_is_integer(x) &&
                  (v = json_sprintf("%" JSON_INTEGER_FORMAT, json_integer_value(x)))) ||
                 (json_is_real(x) && (v = json_sprintf("%g", json_real_value(x)))))
            json_object_set_new(g, gguf_kv_key(gh, i), v);
        json_decref(x);
    }
    if (!(c = json_object())) {
        rc = ms_err(MS_ENOMEM, "out of memory");
        goto done;
    }
    json_object_set_new(c, "format", json_string("gguf"));
    json_object_set_new(c, "quantization", json_string(best));
    human(buf, sizeof buf, n_params, "");
    json_object_set_new(c, "parameters", json_string(buf));
    v = json_object_get(sc, "architecture");
    json_object_set_new(c, "architecture", json_string(json_is_string(v) ? json_string_value(v) : "unknown"));
    human(buf, sizeof buf, (double)gguf_size, "B");
    json_object_set_new(c, "size", json_string(buf));
    json_object_set(c, "gguf", g);
    if (params) {
        if ((rc = layer_json(&pj, sm, params)) < 0)
            goto done;
        if (json_is_integer(v = json_object_get(pj, "num_ctx")))
            json_object_set(c, "context_size", v);
    }
    *out = json_pack("{s:o, s:{}, s:{s:s, s:[]}}", "config", c, "descriptor", "rootfs", "type", "rootfs", "diff_ids");
    c = NULL;
    if (!*out)
        rc = ms_err(MS_ENOMEM, "out of memory");
done:
    json_decref(c);
    json_decref(sc);
    json_decref(pj);
    json_decref(g);
    gguf_close(gh);
    blob_close(&bv);
    return rc;
}

/* A Jinja template, not an ollama Go template ({{ .Prompt }}): DMR renders Jinja only. */
static int is_jinja(const uint8_t *data, size_t n)
{
    for (size_t i = 0; i + 1 < n; i++)
        if (data[i] == '{' && (data[i + 1] == '%' || data[i + 1] == '#'))
            return 1;
    for (size_t i = 0; i + 2 < n; i++)
        if (data[i] == '{' && data[i + 1] == '{' && data[i + 2] != '.' && data[i + 2] != '-')
            return 1;
    return 0;
}

/* `src` (`size` bytes) as mstore's one-file archive at `dst` (tar.c). */
static int tar_wrap(const char *dst, const char *src, const char *entry, uint64_t size)
{
    uint8_t head[512], tail[2048];
    size_t tail_len;
    int rc = reg_tar_frame_make(head, tail, &tail_len, entry, size);

    return rc < 0 ? rc : reg_tar_wrap(dst, src, size, head, sizeof head, tail, tail_len);
}

/* The ModelPack config from DMR's (same facts, the spec's field names). Precision only for an
 * unquantized model (F32, F16, BF16): the quantization names the rest. */
static json_t *modelpack_config(json_t *dmr, const char *display, const char *tar)
{
    json_t *c = json_object_get(dmr, "config"), *q = json_object_get(c, "quantization");
    const char *qs = json_is_string(q) ? json_string_value(q) : "unknown";
    json_t *o = json_pack("{s:{s:s}, s:{s:O, s:s, s:O, s:s}, s:{s:s, s:[s]}}", "descriptor", "name", display,
                          "config", "architecture", json_object_get(c, "architecture"), "format", "gguf",
                          "paramSize", json_object_get(c, "parameters"), "quantization", qs, "modelfs", "type",
                          "layers", "diffIds", tar);
    char lower[16];
    size_t i;

    if (o && (!strcmp(qs, "F32") || !strcmp(qs, "F16") || !strcmp(qs, "BF16"))) {
        for (i = 0; qs[i] && i + 1 < sizeof lower; i++)
            lower[i] = (char)(qs[i] | 0x20);
        lower[i] = 0;
        json_object_set_new(json_object_get(o, "config"), "precision", json_string(lower));
    }
    return o;
}

/* ModelPack's manifest `m`: config `cfg` (cfg_len bytes) and the GGUF in tar layer `tar`. */
static int modelpack_layers(manifest *m, const char *cfg, size_t cfg_len, const char *tar, uint64_t tar_size)
{
    int rc;

    if ((rc = manifest_config_set(m, MT_CNCF_CONFIG, cfg, cfg_len)) < 0 ||
        (rc = manifest_layer_add(m, MT_CNCF_WEIGHT_TAR, tar, tar_size, NULL)) < 0)
        return rc;
    m->artifact_type = strdup(MT_CNCF_MANIFEST);
    m->layers[0].filepath = strdup(MP_GGUF_PATH);
    return m->artifact_type && m->layers[0].filepath ? 0 : ms_err(MS_ENOMEM, "out of memory");
}

/* Docker Model Runner's manifest `m`: config `cfg`, the GGUF blob `gguf`, and model sm's licenses
 * and (Jinja) chat template, each layer annotated with its file. */
static int dmr_layers(manifest *m, store_model *sm, const char *cfg, size_t cfg_len, const char *gguf,
                      uint64_t gguf_size)
{
    const manifest *from = store_model_manifest(sm);
    const uint8_t *data;
    size_t n;
    int rc;

    if ((rc = manifest_config_set(m, MT_DMR_CONFIG_V01, cfg, cfg_len)) < 0 ||
        (rc = manifest_layer_add(m, MT_DMR_GGUF, gguf, gguf_size, NULL)) < 0)
        return rc;
    for (size_t i = 0; i < from->n_layers; i++) {
        const manifest_layer *l = &from->layers[i];
        if (!strcmp(l->media_type, MT_OLLAMA_LICENSE)) {
            rc = manifest_layer_add(m, MT_DMR_LICENSE, l->digest, l->size, NULL);
        } else if (!strcmp(l->media_type, MT_TEMPLATE) && !manifest_layer_find(m, MT_DMR_CHAT_TEMPLATE, NULL)) {
            if ((rc = store_model_layer_bytes(&data, &n, sm, l)) == 0 && is_jinja(data, n))
                rc = manifest_layer_add(m, MT_DMR_CHAT_TEMPLATE, l->digest, l->size, NULL);
        }
        if (rc < 0)
            return rc;
    }
    /* the file each layer is, as `docker model package` annotates it (its unpacking names the
     * files by these paths) */
    for (size_t i = 0, lic = 0; i < m->n_layers; i++) {
        const char *mt = m->layers[i].media_type;
        m->layers[i].filepath = !strcmp(mt, MT_DMR_GGUF)      ? strdup(MP_GGUF_PATH)
                                : !strcmp(mt, MT_DMR_LICENSE) ? (lic++ ? ms_strdup_printf("LICENSE.%zu", lic)
                                                                       : strdup("LICENSE"))
                                                              : strdup("template.jinja");
        if (!m->layers[i].filepath)
            return ms_err(MS_ENOMEM, "out of memory");
    }
    return 0;
}

int reg_dmr_build(char **bytes_out, size_t *len_out, manifest **m_out, store_txn **t_out, store *s,
                  store_model *sm, const model_name *name, int modelpack)
{
    store_txn *t = NULL;
    manifest *m = NULL;
    json_t *cfg = NULL;
    export_result res;
    ms_digest gguf, digest, tar;
    char path[4200], tpath[4210], display[512], *text = NULL;
    struct stat st;
    static unsigned seq;
    int rc, adopted = 0;

    *bytes_out = NULL;
    *m_out = NULL;
    *t_out = NULL;
    if ((rc = store_txn_begin(&t, s)) < 0)
        goto done;
    /* the GGUF, as export writes it, adopted as a blob (re-hashed) and held by t against gc */
    snprintf(path, sizeof path, "%s/tmp/%d-dmr-%u.gguf", store_home(s), (int)getpid(), seq++);
    if ((rc = export_gguf(s, name, path, &res)) < 0)
        goto done;
    snprintf(tpath, sizeof tpath, "%s.tar", path);
    if (modelpack && ((rc = tar_wrap(tpath, path, MP_GGUF_PATH, res.nbytes)) < 0 || stat(tpath, &st) != 0)) {
        rc = rc < 0 ? rc : ms_err(MS_EIO, "%s: %s", tpath, strerror(errno));
        unlink(tpath);
        unlink(path);
        goto done;
    }
    if ((rc = store_txn_blob_adopt(t, gguf, path, res.digest, NULL)) < 0) {
        unlink(path);
        if (modelpack)
            unlink(tpath);
        goto done;
    }
    adopted = 1;
    if ((rc = config_build(&cfg, s, sm, gguf, res.nbytes)) < 0) {
        if (modelpack)   /* not adopted yet: nothing else removes it */
            unlink(tpath);
        goto done;
    }
    json_array_append_new(json_object_get(json_object_get(cfg, "rootfs"), "diff_ids"), json_string(gguf));
    if (modelpack) {
        /* the tar is a blob of its own (the GGUF's bytes once more, only for the push) */
        if ((rc = store_txn_blob_adopt(t, tar, tpath, NULL, NULL)) < 0) {
            unlink(tpath);
            goto done;
        }
        name_display(display, sizeof display, name);
        json_t *mp = modelpack_config(cfg, display, tar);
        json_decref(cfg);
        if (!(cfg = mp)) {
            rc = ms_err(MS_ENOMEM, "out of memory");
            goto done;
        }
    }
    if (!(text = json_dumps(cfg, JSON_COMPACT | JSON_SORT_KEYS))) {
        rc = ms_err(MS_ENOMEM, "out of memory");
        goto done;
    }
    if ((rc = manifest_new(&m)) < 0 || (rc = store_txn_blob_put(t, digest, text, strlen(text))) < 0)
        goto done;
    if (modelpack) {
        if ((rc = modelpack_layers(m, digest, strlen(text), tar, (uint64_t)st.st_size)) < 0)
            goto done;
        store_blob_release(s, gguf);   /* only the tar is pushed */
        adopted = 0;
    } else if ((rc = dmr_layers(m, sm, digest, strlen(text), gguf, res.nbytes)) < 0) {
        goto done;
    }
    if ((rc = store_txn_flush(t)) < 0 || (rc = manifest_serialize(bytes_out, len_out, m)) < 0)
        goto done;
    *m_out = m;
    m = NULL;
    *t_out = t;
    t = NULL;
done:
    if (rc < 0)
        ms_err_ctx("the Docker Model Runner form of the model");
    if (rc < 0 && adopted)
        store_blob_release(s, gguf);   /* the tensors stay stored once, as after a push */
    store_txn_abort(t);
    manifest_free(m);
    json_decref(cfg);
    free(text);
    return rc;
}
