/* store_load.c: the tokenizer of a stored model, from whichever layers its import wrote
 * (import.h): a GGUF import keeps the GGUF header (MT_GGUF_META); a Hugging Face or MLX import
 * keeps tokenizer.json (MT_TOKENIZER), tokenizer_config.json (MT_TOKENIZER_CONFIG) and
 * generation_config.json (MT_GENERATION_CONFIG). One function, so that `mstore run` and
 * `mstore tokenize` cannot disagree on which tokenizer a model has. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "blob/blob.h"
#include "tokenizer/tokenizer_int.h"

#define MAX_CONFIG_BYTES ((size_t)16 << 20)

static int from_gguf(tokenizer **out, store *s, const manifest_layer *l)
{
    blob_view v = { 0 };
    gguf_file *g = NULL;
    int rc;

    if ((rc = blob_open(&v, store_home(s), l->digest)) == 0 &&
        (rc = gguf_open_buf(&g, v.data, v.size, GGUF_HEADER_ONLY, l->digest)) == 0)
        rc = tokenizer_from_gguf(out, g, l->digest);
    gguf_close(g);
    blob_close(&v);
    return rc;
}

/* A blob's bytes as a NUL-terminated string; *out NULL when digest is NULL (no such layer). */
static int blob_text(char **out, store *s, const char *digest, size_t max)
{
    blob_view v = { 0 };
    int rc;

    *out = NULL;
    if (!digest)
        return 0;
    if ((rc = blob_open(&v, store_home(s), digest)) < 0)
        return rc;
    if (v.size > max) {
        rc = ms_err(MS_EINVALID, "%s: %zu bytes, more than %zu", digest, v.size, max);
    } else if (!(*out = malloc(v.size + 1))) {
        rc = ms_err(MS_ENOMEM, "%s: out of memory", digest);
    } else {
        if (v.size)
            memcpy(*out, v.data, v.size);
        (*out)[v.size] = '\0';
    }
    blob_close(&v);
    return rc;
}

static const char *layer_digest(const manifest *m, const char *media_type)
{
    const manifest_layer *l = manifest_layer_find(m, media_type, NULL);
    return l ? l->digest : NULL;
}

/* eos_token_id of a JSON object (an id or a list of ids): each one ends generation. Ids outside
 * the vocab are skipped: the model's embedding may be larger than its tokenizer (Qwen pads it). */
static int eog_from(tokenizer *t, const char *text, int *found)
{
    json_t *root = text ? json_loads(text, 0, NULL) : NULL, *e = json_object_get(root, "eos_token_id");
    size_t n = json_is_array(e) ? json_array_size(e) : json_is_integer(e);
    int rc = 0;

    for (size_t i = 0; i < n && rc == 0; i++) {
        json_int_t id = json_integer_value(json_is_array(e) ? json_array_get(e, i) : e);
        if (id >= 0 && (size_t)id < tokenizer_n_vocab(t))
            rc = tokenizer_eog_add(t, (int32_t)id);
        *found = 1;
    }
    json_decref(root);
    return rc;
}

static int from_json(tokenizer **out, store *s, const manifest *m, const manifest_layer *l)
{
    char *cfg = NULL, *gen = NULL, *conf = NULL;
    blob_view v = { 0 };
    int rc, found = 0;

    if ((rc = blob_text(&cfg, s, layer_digest(m, MT_TOKENIZER_CONFIG), MAX_CONFIG_BYTES)) < 0 ||
        (rc = blob_text(&gen, s, layer_digest(m, MT_GENERATION_CONFIG), MAX_CONFIG_BYTES)) < 0 ||
        (rc = blob_open(&v, store_home(s), l->digest)) < 0)
        goto done;
    if ((rc = tokenizer_from_json(out, (const char *)v.data, v.size, cfg, "tokenizer.json")) < 0)
        goto done;
    /* generation_config.json is what transformers' generate() stops at; config.json's
     * eos_token_id (kept in the config blob: import.h) is the fallback */
    if ((rc = eog_from(*out, gen, &found)) == 0 && !found &&
        (rc = blob_text(&conf, s, m->config.digest, MAX_CONFIG_BYTES)) == 0)
        rc = eog_from(*out, conf, &found);
    if (rc < 0) {
        tokenizer_free(*out);
        *out = NULL;
    }
done:
    blob_close(&v);
    free(cfg);
    free(gen);
    free(conf);
    return rc;
}

int tokenizer_from_manifest(tokenizer **out, store *s, const manifest *m, const char *what)
{
    const manifest_layer *l;
    int rc;

    *out = NULL;
    if ((l = manifest_layer_find(m, MT_GGUF_META, NULL)) != NULL)
        rc = from_gguf(out, s, l);
    else if ((l = manifest_layer_find(m, MT_TOKENIZER, NULL)) != NULL)
        rc = from_json(out, s, m, l);
    else
        return ms_err(MS_ENOTFOUND, "%s: no tokenizer (no GGUF metadata or tokenizer.json layer)", what);
    return rc < 0 ? ms_err_ctx("%s", what) : 0;
}
