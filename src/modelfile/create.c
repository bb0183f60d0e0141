/* create.c: a model from a Modelfile, and what `show` prints of ollama's layers.
 *
 * The new manifest is the base's config and layers with the Modelfile's layers in place of the
 * base's own: every tensor blob is shared, and only the new text layers are written. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "blob/blob.h"
#include "import/import.h"
#include "modelfile/modelfile_int.h"

/* FROM as a path: absolute, or relative to the Modelfile's folder. malloc'd. */
static char *from_path(const char *modelfile_path, const char *from)
{
    const char *slash = strrchr(modelfile_path, '/');

    if (from[0] == '/')
        return strdup(from);
    if (from[0] == '~' && from[1] == '/' && getenv("HOME"))
        return ms_strdup_printf("%s%s", getenv("HOME"), from + 1);
    if (!slash)
        return strdup(from);
    return ms_strdup_printf("%.*s/%s", (int)(slash - modelfile_path), modelfile_path, from);
}

/* The base: a file or folder imported first, else a model of the store. A stored base (a name,
 * or the folder just imported) is read through its handle (sm); a GGUF file's manifest is built
 * in memory (own) and has no stored text layers to read (a GGUF import writes no params). */
typedef struct base_model {
    store_model *sm;
    manifest *own;
    const manifest *m;
} base_model;

static void status(const modelfile_create_opts *o, const char *fmt, const char *arg)
{
    char buf[600];

    if (!o->status)
        return;
    snprintf(buf, sizeof buf, fmt, arg ? arg : "");
    o->status(o->ctx, buf);
}

/* The one GGUF of a request's `files`, and its blob's path. MS_EUNSUPPORTED for other files
 * (a safetensors model, several GGUFs), MS_EINVALID for a blob not in the store. */
static int files_gguf(const char **name_out, const char **digest_out, char **path_out, store *s, const json_t *files)
{
    const char *fname, *gguf = NULL;
    json_t *v;
    size_t n;

    *path_out = NULL;
    json_object_foreach((json_t *)files, fname, v)
    {
        n = strlen(fname);
        if (n < 5 || strcasecmp(fname + n - 5, ".gguf") != 0)
            return ms_err(MS_EUNSUPPORTED,
                          "files: '%s': only one GGUF file is supported yet (safetensors files: import the "
                          "directory with mstore import)",
                          fname);
        if (gguf)
            return ms_err(MS_EUNSUPPORTED, "files: '%s' and '%s': a model of several GGUF files is not supported", gguf,
                          fname);
        gguf = fname;
        *digest_out = json_string_value(v);
    }
    if (!gguf)
        return ms_err(MS_EINVALID, "files: empty");
    *name_out = gguf;
    if (!store_blob_exists(s, *digest_out, NULL))
        return ms_err(MS_EINVALID, "files: '%s': blob %s is not in the store; upload it first", gguf, *digest_out);
    return store_blob_file(path_out, s, *digest_out);
}

int modelfile_base_check(store *s, const modelfile *mf)
{
    const char *fname, *digest;
    char *path = NULL;
    store_model *sm = NULL;
    model_name base;
    int rc;

    if (mf->files) {
        rc = files_gguf(&fname, &digest, &path, s, mf->files);
        free(path);
        return rc;
    }
    if (!mf->from_store_only)
        return 0;
    if ((rc = name_parse(&base, mf->from)) < 0)
        return ms_err_ctx("from");
    rc = store_model_open(&sm, s, &base);
    store_model_close(sm);
    return rc;
}

static int base_load(base_model *out, store_txn *t, const modelfile *mf, const char *mpath, const model_name *name,
                     const modelfile_create_opts *o)
{
    import_opts io = {.quiet = o->quiet};
    char *path = NULL;
    const char *fname, *digest;
    ms_digest imported;
    model_name base;
    store *s = store_txn_store(t);
    int rc;

    if (mf->files) {
        /* An uploaded blob is read as the GGUF file it is; its digest, checked as the import
         * hashes it anyway, is the verification (HEAD /api/blobs only looks for the file). */
        if ((rc = files_gguf(&fname, &digest, &path, s, mf->files)) == 0) {
            status(o, "parsing GGUF %s", fname);
            io.expect_digest = digest;
            rc = import_gguf_manifest(&out->own, t, path, fname, &io);
            /* A damaged upload goes (unless a model uses it: verify names it then), so that the
             * client's next HEAD misses it and it sends the bytes again. */
            if (rc == MS_EMISMATCH) {
                char why[1024];
                snprintf(why, sizeof why, "%s", ms_err_msg()); /* the release may set another */
                store_blob_release(s, digest);
                rc = ms_err(MS_EMISMATCH, "%s", why);
            }
        }
    } else if (mf->from_store_only) {
        if ((rc = name_parse(&base, mf->from)) < 0)
            rc = ms_err_ctx("from");
        else if ((rc = store_model_open(&out->sm, s, &base)) == 0)
            status(o, "using base model %s", store_model_shown(out->sm));
    } else if (!(path = from_path(mpath, mf->from))) {
        rc = ms_err(MS_ENOMEM, "out of memory");
    } else if (ms_is_dir(path)) {
        /* import_hf_dir names what it imports: under the new name, replaced at the commit. */
        status(o, "importing %s", path);
        if ((rc = import_hf_dir(s, path, name, &io, imported)) == 0)
            rc = store_model_open_digest(&out->sm, s, imported);
    } else if (ms_is_file(path)) {
        status(o, "parsing GGUF %s", path);
        rc = import_gguf_manifest(&out->own, t, path, NULL, &io);
    } else if (name_parse(&base, mf->from) < 0) {
        rc = ms_err(MS_ENOTFOUND, "%s:%d: FROM '%s': no such file or directory (%s), nor a model name", mpath,
                    mf->from_line, mf->from, path);
    } else if ((rc = store_model_open(&out->sm, s, &base)) == MS_ENOTFOUND) {
        rc = ms_err(MS_ENOTFOUND, "%s:%d: FROM '%s': no such file or directory (%s), and no such model in the store",
                    mpath, mf->from_line, mf->from, path);
    }
    out->m = out->sm ? store_model_manifest(out->sm) : out->own;
    free(path);
    return rc;
}

static int text_layer(manifest *m, store_txn *t, const char *media_type, const char *text, size_t len)
{
    ms_digest digest;
    int rc = store_txn_blob_put(t, digest, text, len);
    return rc < 0 ? rc : manifest_layer_add(m, media_type, digest, len, NULL);
}

static int json_layer(manifest *m, store_txn *t, const char *media_type, const json_t *j)
{
    char *text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(15));
    int rc;

    if (!text)
        return ms_err(MS_ENOMEM, "out of memory");
    rc = text_layer(m, t, media_type, text, strlen(text));
    free(text);
    return rc;
}

/* Base params overridden by the Modelfile's (ollama merges them the same way). */
static int params_merged(json_t **out, const base_model *base, const json_t *mine)
{
    const manifest_layer *l = base->sm ? manifest_layer_find(base->m, MT_OLLAMA_PARAMS, NULL) : NULL;
    char *text = NULL;
    json_error_t e;
    size_t len;
    int rc;

    *out = NULL;
    if (l) {
        if ((rc = mf_layer_text(&text, &len, base->sm, l)) < 0)
            return rc;
        *out = json_loadb(text, len, 0, &e);
        free(text);
        if (!json_is_object(*out)) {
            json_decref(*out);
            *out = NULL;
            return ms_err(MS_EINVALID, "base model's params layer %s: not a JSON object", l->digest);
        }
    } else if (!(*out = json_object())) {
        return ms_err(MS_ENOMEM, "out of memory");
    }
    json_object_update(*out, (json_t *)mine);
    return 0;
}

static int build(manifest **out, store_txn *t, const base_model *bm, const modelfile *mf,
                 const modelfile_create_opts *o)
{
    const manifest *base = bm->m;
    manifest *m = NULL;
    json_t *params = NULL;
    int rc;

    *out = NULL;
    if ((rc = manifest_new(&m)) < 0 ||
        (rc = manifest_config_set(m, base->config.media_type, base->config.digest, base->config.size)) < 0)
        goto done;
    for (size_t i = 0; i < base->n_layers; i++) {
        const manifest_layer *l = &base->layers[i];
        const char *mt = l->media_type;
        /* The received manifest and config of a pulled model describe the base, not this one. */
        if (!strcmp(mt, MT_SOURCE_MANIFEST) || !strcmp(mt, MT_DOCKER_CONFIG) || !strcmp(mt, MT_OLLAMA_PARAMS) ||
            (mf->template_ && !strcmp(mt, MT_TEMPLATE)) || (mf->system && !strcmp(mt, MT_OLLAMA_SYSTEM)) ||
            (json_array_size(mf->messages) && !strcmp(mt, MT_OLLAMA_MESSAGES)))
            continue;
        if ((rc = manifest_layer_add(m, mt, l->digest, l->size, l->name)) < 0)
            goto done;
    }
    if (mf->template_)
        status(o, "creating template layer", NULL);
    if (mf->template_ && (rc = text_layer(m, t, MT_TEMPLATE, mf->template_, strlen(mf->template_))) < 0)
        goto done;
    if (mf->system)
        status(o, "creating system layer", NULL);
    if (mf->system && (rc = text_layer(m, t, MT_OLLAMA_SYSTEM, mf->system, strlen(mf->system))) < 0)
        goto done;
    if ((rc = params_merged(&params, bm, mf->params)) < 0)
        goto done;
    if (json_object_size(mf->params))
        status(o, "creating parameters layer", NULL);
    if (json_object_size(params) && (rc = json_layer(m, t, MT_OLLAMA_PARAMS, params)) < 0)
        goto done;
    if (mf->n_licenses)
        status(o, "creating license layer", NULL);
    for (size_t i = 0; i < mf->n_licenses; i++)
        if ((rc = text_layer(m, t, MT_OLLAMA_LICENSE, mf->licenses[i], strlen(mf->licenses[i]))) < 0)
            goto done;
    if (json_array_size(mf->messages))
        status(o, "creating messages layer", NULL);
    if (json_array_size(mf->messages) && (rc = json_layer(m, t, MT_OLLAMA_MESSAGES, mf->messages)) < 0)
        goto done;
    *out = m;
    m = NULL;
done:
    json_decref(params);
    manifest_free(m);
    return rc;
}

int modelfile_create_from(store *s, const model_name *name, const modelfile *mf, const char *path,
                          const modelfile_create_opts *o, ms_digest digest_out)
{
    base_model base = {0};
    manifest *m = NULL;
    store_txn *t = NULL;
    int rc;

    digest_out[0] = '\0';
    if ((rc = store_txn_begin(&t, s)) < 0)
        goto done;
    if ((rc = base_load(&base, t, mf, path, name, o)) < 0 || (rc = build(&m, t, &base, mf, o)) < 0)
        goto done;
    status(o, "writing manifest", NULL);
    rc = store_txn_commit(t, name, m, digest_out);
    t = NULL; /* the commit ended it */
done:
    store_txn_abort(t);
    manifest_free(m);
    store_model_close(base.sm);
    manifest_free(base.own);
    return rc;
}

int modelfile_create(store *s, const model_name *name, const char *path, int quiet, ms_digest digest_out)
{
    modelfile_create_opts o = {.quiet = quiet};
    modelfile *mf = NULL;
    char *text = NULL;
    size_t len = 0;
    int rc;

    digest_out[0] = '\0';
    /* Everything the Modelfile can get wrong is refused here, before any blob is written. */
    if ((rc = ms_file_read(&text, &len, path, MODELFILE_MAX_BYTES)) == 0 &&
        (rc = modelfile_parse(&mf, text, len, path)) == 0)
        rc = modelfile_create_from(s, name, mf, path, &o, digest_out);
    modelfile_free(mf);
    free(text);
    return rc;
}

/* ---------------------------------------------------------------- show */

/* A growable string on open_memstream. */
static int layer_text(char **out, store_model *sm, const char *media_type)
{
    const manifest_layer *l = manifest_layer_find(store_model_manifest(sm), media_type, NULL);
    *out = NULL;
    return l ? mf_layer_text(out, NULL, sm, l) : 0;
}

static void put_quoted(FILE *f, const char *s)
{
    fputs(strchr(s, '\n') || strchr(s, '"') ? "\"\"\"" : "\"", f);
    fputs(s, f);
    fputs(strchr(s, '\n') || strchr(s, '"') ? "\"\"\"" : "\"", f);
}

static int params_lines(char **out, store_model *sm, const char *prefix)
{
    const manifest_layer *l = manifest_layer_find(store_model_manifest(sm), MT_OLLAMA_PARAMS, NULL);
    char *text = NULL, *buf = NULL;
    size_t len, blen;
    json_t *o, *v;
    json_error_t e;
    const char *key;
    FILE *f;
    int rc;

    *out = NULL;
    if (!l)
        return 0;
    if ((rc = mf_layer_text(&text, &len, sm, l)) < 0)
        return rc;
    o = json_loadb(text, len, 0, &e);
    free(text);
    if (!json_is_object(o)) {
        json_decref(o);
        return ms_err(MS_EINVALID, "params layer %s: not a JSON object", l->digest);
    }
    if (!(f = open_memstream(&buf, &blen))) {
        json_decref(o);
        return ms_err(MS_ENOMEM, "out of memory");
    }
    json_object_foreach(o, key, v)
    {
        json_t *items = json_is_array(v) ? v : NULL;
        size_t n = items ? json_array_size(items) : 1;
        for (size_t i = 0; i < n; i++) {
            json_t *x = items ? json_array_get(items, i) : v;
            char *val =
                json_is_string(x) ? NULL : json_dumps(x, JSON_ENCODE_ANY | JSON_COMPACT | JSON_REAL_PRECISION(15));
            fprintf(f, "%s%-30s ", prefix, key);
            if (json_is_string(x))
                put_quoted(f, json_string_value(x));
            else
                fputs(val ? val : "?", f);
            fputc('\n', f);
            free(val);
        }
    }
    fclose(f);
    json_decref(o);
    *out = buf;
    return 0;
}

static int licenses(char **out, store_model *sm)
{
    const manifest *m = store_model_manifest(sm);
    char *buf = NULL, *t;
    size_t blen;
    FILE *f;
    int rc = 0, n = 0;

    *out = NULL;
    if (!manifest_layer_find(m, MT_OLLAMA_LICENSE, NULL))
        return 0;
    if (!(f = open_memstream(&buf, &blen)))
        return ms_err(MS_ENOMEM, "out of memory");
    for (size_t i = 0; i < m->n_layers && rc == 0; i++) {
        if (strcmp(m->layers[i].media_type, MT_OLLAMA_LICENSE) != 0)
            continue;
        if ((rc = mf_layer_text(&t, NULL, sm, &m->layers[i])) == 0) {
            fprintf(f, "%s%s", n++ ? "\n\n" : "", t);
            free(t);
        }
    }
    fclose(f);
    if (rc < 0)
        free(buf);
    else
        *out = buf;
    return rc;
}

static int modelfile_text(char **out, store_model *sm, const model_info *i)
{
    const manifest *m = store_model_manifest(sm);
    char *buf = NULL, *msgs = NULL, *params = NULL;
    size_t blen;
    json_t *a = NULL, *v;
    json_error_t e;
    FILE *f;
    int rc;

    *out = NULL;
    if ((rc = layer_text(&msgs, sm, MT_OLLAMA_MESSAGES)) < 0 || (rc = params_lines(&params, sm, "PARAMETER ")) < 0)
        goto done;
    if (msgs)   /* not inside json_is_array: that macro evaluates its argument twice */
        a = json_loads(msgs, 0, &e);
    if (msgs && !json_is_array(a)) {
        rc = ms_err(MS_EINVALID, "messages layer: not a JSON array");
        goto done;
    }
    if (!(f = open_memstream(&buf, &blen))) {
        rc = ms_err(MS_ENOMEM, "out of memory");
        goto done;
    }
    fprintf(f, "# Modelfile generated by \"mstore show\"\nFROM %s\n", store_model_shown(sm));
    if (i->template_) {
        fputs("TEMPLATE ", f);
        put_quoted(f, i->template_);
        fputc('\n', f);
    }
    if (i->system) {
        fputs("SYSTEM ", f);
        put_quoted(f, i->system);
        fputc('\n', f);
    }
    if (params)
        fputs(params, f);
    for (size_t k = 0; k < m->n_layers; k++) {
        char *t = NULL;
        if (strcmp(m->layers[k].media_type, MT_OLLAMA_LICENSE) != 0 ||
            mf_layer_text(&t, NULL, sm, &m->layers[k]) < 0)
            continue;
        fputs("LICENSE ", f);
        put_quoted(f, t);
        fputc('\n', f);
        free(t);
    }
    for (size_t k = 0; a && k < json_array_size(a); k++) {
        v = json_array_get(a, k);
        fprintf(f, "MESSAGE %s ",
                json_string_value(json_object_get(v, "role")) ? json_string_value(json_object_get(v, "role")) : "user");
        put_quoted(f, json_string_value(json_object_get(v, "content"))
                          ? json_string_value(json_object_get(v, "content"))
                          : "");
        fputc('\n', f);
    }
    fclose(f);
    *out = buf;
done:
    json_decref(a);
    free(msgs);
    free(params);
    return rc;
}

void model_info_fini(model_info *i)
{
    MS_FREE_ALL(i->parameters, i->template_, i->system, i->license, i->modelfile);
    memset(i, 0, sizeof *i);
}

int model_info_load(model_info *out, store_model *sm)
{
    int rc;

    memset(out, 0, sizeof *out);
    if ((rc = params_lines(&out->parameters, sm, "")) < 0 || (rc = layer_text(&out->template_, sm, MT_TEMPLATE)) < 0 ||
        (rc = layer_text(&out->system, sm, MT_OLLAMA_SYSTEM)) < 0 || (rc = licenses(&out->license, sm)) < 0 ||
        (rc = modelfile_text(&out->modelfile, sm, out)) < 0)
        model_info_fini(out);
    return rc;
}
