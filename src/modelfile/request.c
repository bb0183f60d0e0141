/* request.c: ollama's create request (POST /api/create) as a modelfile.
 *
 * Since ollama 0.6 its CLI parses a Modelfile itself and sends the parts as JSON; this reads
 * them back into the struct modelfile_parse fills, checked by the same rules (the option table,
 * the Go template parser, the message roles), so that `mstore create -f` and the API build a
 * model through one modelfile_create_from. The request names its base by model name or by
 * uploaded blob only: a path in "from" is not read from the server's disk. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blob/blob.h"
#include "modelfile/modelfile_int.h"

/* A string field: NULL when absent or null; MS_EINVALID when of another type. */
static int str_field(const char **out, const json_t *req, const char *key)
{
    json_t *v = json_object_get(req, key);

    *out = NULL;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_string(v))
        return ms_err(MS_EINVALID, "%s: expected a string", key);
    if (json_string_length(v) > MODELFILE_MAX_BYTES)
        return ms_err(MS_EINVALID, "%s: %zu bytes, more than a text layer may have (%u)", key, json_string_length(v),
                      MODELFILE_MAX_BYTES);
    if (memchr(json_string_value(v), '\0', json_string_length(v)))
        return ms_err(MS_EINVALID, "%s: a NUL character", key);
    *out = json_string_value(v);
    return 0;
}

/* Fields a client may send empty ({} , "", null) when it means "none". */
static int given(const json_t *v)
{
    return v && !json_is_null(v) && !(json_is_object(v) && json_object_size(v) == 0) &&
           !(json_is_string(v) && json_string_length(v) == 0);
}

static int read_files(modelfile *mf, const json_t *files)
{
    const char *name;
    json_t *v;

    if (!json_is_object(files))
        return ms_err(MS_EINVALID, "files: expected an object of file names to blob digests");
    json_object_foreach((json_t *)files, name, v)
    {
        /* a file name, never a path: it only labels the blob (config's source.file) */
        if (!*name || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, "..") || strlen(name) > 255)
            return ms_err(MS_EINVALID, "files: '%.100s': expected a file name", name);
        if (!json_is_string(v) || !blob_digest_valid(json_string_value(v)))
            return ms_err(MS_EINVALID, "files.%s: expected a blob digest sha256:<64 hex>", name);
    }
    mf->files = json_incref((json_t *)files);
    return 0;
}

/* A MODEL_OPT_TEXT row (format): checked as the Modelfile's PARAMETER checks it, so a stored
 * model never holds a format that fails. */
static int read_text_parameter(modelfile *mf, const model_option *opt, const char *shown, json_t *v)
{
    char *text;
    int rc;

    if ((rc = mf_option_text_json(&text, opt, shown, v)) < 0)
        return rc;
    if (json_object_set_new(mf->params, opt->name, json_string(text)) < 0)
        rc = ms_err(MS_ENOMEM, "out of memory");
    free(text);
    return rc;
}

/* One option of "parameters": the table's row, its type and bounds; stop is an array of strings
 * (or one string, as some clients send a single stop). */
static int read_parameter(modelfile *mf, const char *key, json_t *v)
{
    const model_option *opt = model_option_find(key);
    char shown[96];
    double d;
    json_t *a;
    size_t i;
    int rc;

    snprintf(shown, sizeof shown, "parameters.%.60s", key);
    if (!opt)
        return ms_err(MS_EINVALID, "%s: unknown parameter", shown);
    if (json_is_null(v))
        return 0;
    if (opt->type == MODEL_OPT_TEXT) /* format: "json" or a schema, kept as PARAMETER keeps it */
        return read_text_parameter(mf, opt, shown, v);
    if (opt->type != MODEL_OPT_STRINGS) {
        if ((rc = model_option_json(&d, opt, shown, v, 0)) < 0)
            return rc;
        if (json_object_set_new(mf->params, opt->name,
                                opt->type == MODEL_OPT_INTEGER ? json_integer((json_int_t)d) : json_real(d)) < 0)
            return ms_err(MS_ENOMEM, "out of memory");
        return 0;
    }
    if (!json_is_array(v) && !json_is_string(v))
        return ms_err(MS_EINVALID, "%s: expected an array of strings", shown);
    if (json_is_array(v) && json_array_size(v) > MODELFILE_MAX_STOP)
        return ms_err(MS_EINVALID, "%s: more than %d stop strings", shown, MODELFILE_MAX_STOP);
    if (!(a = json_array()))
        return ms_err(MS_ENOMEM, "out of memory");
    for (i = 0; i < (json_is_array(v) ? json_array_size(v) : 1); i++) {
        json_t *x = json_is_array(v) ? json_array_get(v, i) : v;
        if (!json_is_string(x) || json_string_length(x) == 0) {
            json_decref(a);
            return ms_err(MS_EINVALID, "%s[%zu]: expected a non-empty string", shown, i);
        }
        json_array_append(a, x);
    }
    if (json_object_set_new(mf->params, opt->name, a) < 0)
        return ms_err(MS_ENOMEM, "out of memory");
    return 0;
}

static int read_parameters(modelfile *mf, const json_t *params)
{
    const char *key;
    json_t *v;
    int rc;

    if (!params || json_is_null(params))
        return 0;
    if (!json_is_object(params))
        return ms_err(MS_EINVALID, "parameters: expected an object");
    json_object_foreach((json_t *)params, key, v)
    {
        if ((rc = read_parameter(mf, key, v)) < 0)
            return rc;
    }
    return 0;
}

static int read_messages(modelfile *mf, const json_t *msgs)
{
    size_t i;
    json_t *m;

    if (!msgs || json_is_null(msgs))
        return 0;
    if (!json_is_array(msgs))
        return ms_err(MS_EINVALID, "messages: expected an array");
    json_array_foreach((json_t *)msgs, i, m)
    {
        const char *role = json_string_value(json_object_get(m, "role"));
        json_t *content = json_object_get(m, "content");
        if (!json_is_object(m))
            return ms_err(MS_EINVALID, "messages[%zu]: expected an object", i);
        if (!role || (strcmp(role, "system") && strcmp(role, "user") && strcmp(role, "assistant")))
            return ms_err(MS_EINVALID, "messages[%zu].role: expected \"system\", \"user\" or \"assistant\"", i);
        if (content && !json_is_null(content) && !json_is_string(content))
            return ms_err(MS_EINVALID, "messages[%zu].content: expected a string", i);
        if (given(json_object_get(m, "images")) || given(json_object_get(m, "tool_calls")))
            return ms_err(MS_EUNSUPPORTED, "messages[%zu]: images and tool calls are not supported by mstore yet", i);
        json_array_append_new(mf->messages, json_pack("{s:s, s:s}", "role", role, "content",
                                                      json_is_string(content) ? json_string_value(content) : ""));
    }
    return 0;
}

static int add_license(modelfile *mf, const json_t *v, const char *shown)
{
    char **l;

    if (!json_is_string(v))
        return ms_err(MS_EINVALID, "%s: expected a string or an array of strings", shown);
    if (json_string_length(v) == 0) /* no license, as an empty field means elsewhere */
        return 0;
    if (!(l = realloc(mf->licenses, (mf->n_licenses + 1) * sizeof *l)))
        return ms_err(MS_ENOMEM, "out of memory");
    mf->licenses = l;
    if (!(l[mf->n_licenses] = strdup(json_string_value(v))))
        return ms_err(MS_ENOMEM, "out of memory");
    mf->n_licenses++;
    return 0;
}

static int read_licenses(modelfile *mf, const json_t *lic)
{
    char shown[32];
    size_t i;
    json_t *v;
    int rc;

    if (!lic || json_is_null(lic))
        return 0;
    if (!json_is_array(lic))
        return add_license(mf, lic, "license");
    json_array_foreach((json_t *)lic, i, v)
    {
        snprintf(shown, sizeof shown, "license[%zu]", i);
        if ((rc = add_license(mf, v, shown)) < 0)
            return rc;
    }
    return 0;
}

/* The text fields: from, template (parsed as a Go template), system. */
static int read_texts(modelfile *mf, const json_t *req)
{
    const char *from, *tmpl, *system;
    int rc;

    if ((rc = str_field(&from, req, "from")) < 0 || (rc = str_field(&tmpl, req, "template")) < 0 ||
        (rc = str_field(&system, req, "system")) < 0)
        return rc;
    if (from && *from && !(mf->from = strdup(from)))
        return ms_err(MS_ENOMEM, "out of memory");
    if (tmpl && *tmpl && ((rc = mf_template_check(tmpl, "template")) < 0 || !(mf->template_ = strdup(tmpl))))
        return rc < 0 ? rc : ms_err(MS_ENOMEM, "out of memory");
    if (system && *system && !(mf->system = strdup(system)))
        return ms_err(MS_ENOMEM, "out of memory");
    return 0;
}

int modelfile_from_request(modelfile **out, const json_t *req)
{
    modelfile *mf = calloc(1, sizeof *mf);
    json_t *files = json_object_get(req, "files");
    const char *quantize;
    int rc;

    *out = NULL;
    if (!mf || !(mf->params = json_object()) || !(mf->messages = json_array())) {
        modelfile_free(mf);
        return ms_err(MS_ENOMEM, "out of memory");
    }
    mf->from_store_only = 1;
    /* What is not built is refused before anything else is read, as a Modelfile's ADAPTER is. */
    if (given(json_object_get(req, "adapters")))
        rc = ms_err(MS_EUNSUPPORTED, "adapters: LoRA adapters are not supported yet");
    else if ((rc = str_field(&quantize, req, "quantize")) == 0 && quantize && *quantize)
        rc = ms_err(MS_EUNSUPPORTED,
                    "quantize: quantizing on create is not supported yet ('%.40s'; mstore import --quantize "
                    "int4|int8|nvfp4|mxfp8 quantizes float weights on import)",
                    quantize);
    if (rc == 0 && (rc = read_texts(mf, req)) == 0 && given(files))
        rc = read_files(mf, files);
    if (rc == 0 && mf->from && mf->files)
        rc = ms_err(MS_EINVALID, "from and files: give one of them (the base model, or its uploaded GGUF)");
    if (rc == 0 && !mf->from && !mf->files)
        rc = ms_err(MS_EINVALID, "from or files: required (a model of the store, or an uploaded GGUF)");
    if (rc == 0 && (rc = read_parameters(mf, json_object_get(req, "parameters"))) == 0 &&
        (rc = read_messages(mf, json_object_get(req, "messages"))) == 0)
        rc = read_licenses(mf, json_object_get(req, "license"));
    if (rc < 0) {
        modelfile_free(mf);
        return rc;
    }
    *out = mf;
    return 0;
}
