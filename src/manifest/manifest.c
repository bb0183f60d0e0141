/* manifest.c: OCI / Docker v2 image manifests: parse and validate, build, serialize. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "blob/blob.h"
#include "manifest/manifest.h"

static void layer_clear(manifest_layer *l)
{
    MS_FREE_ALL(l->media_type, l->name, l->filepath);
    memset(l, 0, sizeof *l);
}

void manifest_free(manifest *m)
{
    if (!m)
        return;
    free(m->media_type);
    free(m->artifact_type);
    layer_clear(&m->config);
    for (size_t i = 0; i < m->n_layers; i++)
        layer_clear(&m->layers[i]);
    MS_FREE_ALL(m->layers, m->parsed, m);
}

/* The fields change: the parsed bytes no longer describe `m`. */
static void parsed_drop(manifest *m)
{
    free(m->parsed);
    m->parsed = NULL;
    m->parsed_len = 0;
}

/* 1 when s is well-formed UTF-8, as jansson wants it, so serializing it cannot fail. */
static int utf8_ok(const char *s)
{
    return ms_utf8_valid(s, strlen(s));
}

/* Checks one descriptor's fields; shared by the parser and the builders so that a manifest built
 * in memory can always be serialized and parsed back. */
static int layer_check(const char *media_type, const char *digest, uint64_t size, const char *name)
{
    if (!media_type || !*media_type)
        return ms_err(MS_EINVALID, "mediaType is empty");
    if (!utf8_ok(media_type))
        return ms_err(MS_EINVALID, "mediaType is not valid utf-8");
    if (name && !utf8_ok(name))
        return ms_err(MS_EINVALID, "name is not valid utf-8");
    if (!blob_digest_valid(digest))
        return ms_err(MS_EINVALID, "digest '%.80s' is not of the form sha256:<64 lowercase hex>",
                      digest ? digest : "(null)");
    /* JSON integers in jansson are signed 64-bit; a larger size could not be written back. */
    if (size > INT64_MAX)
        return ms_err(MS_EINVALID, "size %" PRIu64 " exceeds %" PRId64, size, INT64_MAX);
    return 0;
}

static int layer_fill(manifest_layer *l, const char *media_type, const char *digest, uint64_t size,
                      const char *name)
{
    manifest_layer n = { 0 };
    int rc;

    if ((rc = layer_check(media_type, digest, size, name)) < 0)
        return rc;
    n.media_type = strdup(media_type);
    n.name = name ? strdup(name) : NULL;
    if (!n.media_type || (name && !n.name)) {
        layer_clear(&n);
        return ms_err(MS_ENOMEM, "out of memory");
    }
    memcpy(n.digest, digest, sizeof(ms_digest));
    n.size = size;
    layer_clear(l);
    *l = n;
    return 0;
}

/* ---------------------------------------------------------------- parse */

static int parse_layer(manifest_layer *l, json_t *obj)
{
    json_t *mt = json_object_get(obj, "mediaType"), *dg = json_object_get(obj, "digest");
    json_t *sz = json_object_get(obj, "size"), *nm = json_object_get(obj, "name");
    json_t *fp = json_object_get(json_object_get(obj, "annotations"), MT_CNCF_FILEPATH);
    int rc;

    if (!json_is_object(obj))
        return ms_err(MS_EINVALID, "is not an object");
    if (!json_is_string(mt))
        return ms_err(MS_EINVALID, "mediaType is missing or not a string");
    if (!json_is_string(dg))
        return ms_err(MS_EINVALID, "digest is missing or not a string");
    if (!json_is_integer(sz))
        return ms_err(MS_EINVALID, "size is missing or not an integer");
    if (json_integer_value(sz) < 0)
        return ms_err(MS_EINVALID, "size %" JSON_INTEGER_FORMAT " is negative", json_integer_value(sz));
    if (nm && !json_is_string(nm))
        return ms_err(MS_EINVALID, "name is not a string");
    /* a path that no file could have is no path: whoever needs one refuses the layer then */
    if (fp && (!json_is_string(fp) || json_string_length(fp) == 0 || json_string_length(fp) > 4096 ||
               strlen(json_string_value(fp)) != json_string_length(fp)))
        fp = NULL;
    if ((rc = layer_fill(l, json_string_value(mt), json_string_value(dg), (uint64_t)json_integer_value(sz),
                         nm ? json_string_value(nm) : NULL)) < 0)
        return rc;
    /* ModelPack's and Docker Model Runner's file path: which file of a directory the layer is */
    if (fp && !(l->filepath = strndup(json_string_value(fp), json_string_length(fp))))
        return ms_err(MS_ENOMEM, "out of memory");
    return 0;
}

static int parse_top(manifest *m, json_t *root)
{
    json_t *sv = json_object_get(root, "schemaVersion"), *mt = json_object_get(root, "mediaType");

    if (!json_is_object(root))
        return ms_err(MS_EINVALID, "not a json object");
    if (!json_is_integer(sv))
        return ms_err(MS_EINVALID, "schemaVersion is missing or not an integer");
    if (json_integer_value(sv) != 2)
        return ms_err(MS_EINVALID, "schemaVersion is %" JSON_INTEGER_FORMAT ", want 2", json_integer_value(sv));
    m->schema_version = 2;
    /* OCI makes mediaType optional in a manifest; absent means an OCI image manifest. */
    if (mt && !json_is_string(mt))
        return ms_err(MS_EINVALID, "mediaType is not a string");
    if (mt && !*json_string_value(mt))
        return ms_err(MS_EINVALID, "mediaType is empty");
    m->media_type = strdup(mt ? json_string_value(mt) : MT_OCI_MANIFEST);
    return m->media_type ? 0 : ms_err(MS_ENOMEM, "out of memory");
}

static int parse_layers(manifest *m, json_t *layers)
{
    size_t n, cap;
    int rc;

    if (!json_is_array(layers))
        return ms_err(MS_EINVALID, "layers is missing or not an array");
    n = json_array_size(layers);
    if (n > MANIFEST_MAX_LAYERS)
        return ms_err(MS_EINVALID, "%zu layers (max %d)", n, MANIFEST_MAX_LAYERS);
    /* Capacity rounded to a power of two, the invariant manifest_layer_add grows by. */
    for (cap = n ? 1 : 0; cap < n; cap *= 2)
        ;
    if (cap && !(m->layers = calloc(cap, sizeof *m->layers)))
        return ms_err(MS_ENOMEM, "out of memory for %zu layers", n);
    for (size_t i = 0; i < n; i++) {
        if ((rc = parse_layer(&m->layers[i], json_array_get(layers, i))) < 0)
            return ms_err_ctx("layers[%zu]", i);
        m->n_layers++;
    }
    return 0;
}

int manifest_parse(manifest **out, const char *buf, size_t len, const char *what)
{
    manifest *m = NULL;
    json_t *root = NULL;
    json_error_t jerr;
    int rc;

    *out = NULL;
    if (len > MANIFEST_MAX_BYTES)
        return ms_err(MS_EINVALID, "%s: manifest is %zu bytes (max %u)", what, len, MANIFEST_MAX_BYTES);
    if (!(m = calloc(1, sizeof *m))) {
        rc = ms_err(MS_ENOMEM, "out of memory");
        goto fail;
    }
    if (!(root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr))) {
        /* jansson quotes the token "near" the error: for a manifest from a host that is no
         * registry (an internal service a server's client named), that could be a secret. */
        char *near = strstr(jerr.text, " near ");
        if (near)
            *near = '\0';
        rc = ms_err(MS_EINVALID, "not valid json: %s (at byte %d)", jerr.text, jerr.position);
        goto fail;
    }
    if ((rc = parse_top(m, root)) < 0)
        goto fail;
    if (!json_object_get(root, "config")) {
        rc = ms_err(MS_EINVALID, "config is missing");
        goto fail;
    }
    if ((rc = parse_layer(&m->config, json_object_get(root, "config"))) < 0) {
        ms_err_ctx("config");
        goto fail;
    }
    if ((rc = parse_layers(m, json_object_get(root, "layers"))) < 0)
        goto fail;
    if (!(m->parsed = malloc(len + 1))) {
        rc = ms_err(MS_ENOMEM, "out of memory");
        goto fail;
    }
    memcpy(m->parsed, buf, len);
    m->parsed[len] = '\0';
    m->parsed_len = len;
    json_decref(root);
    *out = m;
    return 0;
fail:
    json_decref(root);
    manifest_free(m);
    ms_err_ctx("%s", what);
    return rc;
}

/* ---------------------------------------------------------------- serialize */

/* Each json_object_set_new below steals its value even on failure, so only the result of the
 * whole object needs checking; a NULL anywhere makes the final check fail. */
static json_t *descriptor_json(const manifest_layer *l)
{
    json_t *o = json_object();
    int bad = !o;

    bad |= json_object_set_new(o, "mediaType", json_string(l->media_type)) != 0;
    bad |= json_object_set_new(o, "digest", json_string(l->digest)) != 0;
    bad |= json_object_set_new(o, "size", json_integer((json_int_t)l->size)) != 0;
    if (l->name)
        bad |= json_object_set_new(o, "name", json_string(l->name)) != 0;
    if (l->filepath)
        bad |= json_object_set_new(o, "annotations", json_pack("{s:s}", MT_CNCF_FILEPATH, l->filepath)) != 0;
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

int manifest_serialize(char **out, size_t *len_out, const manifest *m)
{
    json_t *root = NULL, *layers = NULL, *cfg;
    int rc = 0, bad;

    *out = NULL;
    *len_out = 0;
    if (!m->config.media_type)
        return ms_err(MS_EINVALID, "manifest has no config");
    if ((rc = layer_check(m->config.media_type, m->config.digest, m->config.size, NULL)) < 0)
        return ms_err_ctx("config");
    for (size_t i = 0; i < m->n_layers; i++)
        if ((rc = layer_check(m->layers[i].media_type, m->layers[i].digest, m->layers[i].size,
                               m->layers[i].name)) < 0)
            return ms_err_ctx("layers[%zu]", i);
    root = json_object();
    layers = json_array();
    cfg = descriptor_json(&m->config);
    bad = !root || !layers || !cfg;
    /* Insertion order is the key order in the output (jansson >= 2.8 keeps it; the flag below
     * asks for it on older versions too). */
    bad |= json_object_set_new(root, "schemaVersion", json_integer(m->schema_version)) != 0;
    bad |= json_object_set_new(root, "mediaType", json_string(m->media_type ? m->media_type : MT_OCI_MANIFEST)) != 0;
    if (m->artifact_type)
        bad |= json_object_set_new(root, "artifactType", json_string(m->artifact_type)) != 0;
    bad |= json_object_set_new(root, "config", cfg) != 0;
    for (size_t i = 0; i < m->n_layers && !bad; i++)
        bad |= json_array_append_new(layers, descriptor_json(&m->layers[i])) != 0;
    bad |= json_object_set(root, "layers", layers) != 0;
    if (!bad)
        *out = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (!*out)
        rc = ms_err(MS_ENOMEM, "out of memory serializing a manifest of %zu layers", m->n_layers);
    else
        *len_out = strlen(*out);
    json_decref(layers);
    json_decref(root);
    return rc;
}

int manifest_bytes(char **out, size_t *len_out, const manifest *m)
{
    *out = NULL;
    if (!m->parsed)
        return manifest_serialize(out, len_out, m);
    if (!(*out = malloc(m->parsed_len + 1)))
        return ms_err(MS_ENOMEM, "out of memory");
    memcpy(*out, m->parsed, m->parsed_len + 1);
    *len_out = m->parsed_len;
    return 0;
}

/* ---------------------------------------------------------------- build */

int manifest_new(manifest **out)
{
    manifest *m = calloc(1, sizeof *m);

    *out = NULL;
    if (!m || !(m->media_type = strdup(MT_OCI_MANIFEST))) {
        free(m);
        return ms_err(MS_ENOMEM, "out of memory");
    }
    m->schema_version = 2;
    *out = m;
    return 0;
}

int manifest_config_set(manifest *m, const char *media_type, const char *digest, uint64_t size)
{
    parsed_drop(m);
    return layer_fill(&m->config, media_type, digest, size, NULL) < 0 ? ms_err_ctx("config") : 0;
}

int manifest_layer_add(manifest *m, const char *media_type, const char *digest, uint64_t size, const char *name)
{
    manifest_layer *l;
    int rc;

    if (m->n_layers >= MANIFEST_MAX_LAYERS)
        return ms_err(MS_EINVALID, "manifest already has %zu layers (max %d)", m->n_layers, MANIFEST_MAX_LAYERS);
    if ((rc = layer_check(media_type, digest, size, name)) < 0)
        return ms_err_ctx("layers[%zu]", m->n_layers);
    parsed_drop(m);
    /* Grow by doubling: importers add one layer per tensor, up to thousands. The capacity is not
     * stored: it is the next power of two >= n_layers, which manifest_parse keeps too. */
    if ((m->n_layers & (m->n_layers - 1)) == 0) {
        size_t cap = m->n_layers ? 2 * m->n_layers : 1;
        if (!(l = realloc(m->layers, cap * sizeof *l)))
            return ms_err(MS_ENOMEM, "out of memory for %zu layers", cap);
        m->layers = l;
    }
    l = &m->layers[m->n_layers];
    memset(l, 0, sizeof *l);
    if ((rc = layer_fill(l, media_type, digest, size, name)) < 0)
        return rc;
    m->n_layers++;
    return 0;
}

const manifest_layer *manifest_layer_find(const manifest *m, const char *media_type, const char *name)
{
    for (size_t i = 0; i < m->n_layers; i++) {
        const manifest_layer *l = &m->layers[i];
        if (media_type && strcmp(l->media_type, media_type) != 0)
            continue;
        if (name && (!l->name || strcmp(l->name, name) != 0))
            continue;
        return l;
    }
    return NULL;
}
