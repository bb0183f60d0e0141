/* layers.c: the tokenizer of a stored model, from the bytes of whichever layers its import wrote
 * (import.h): a GGUF import keeps the GGUF header (MT_GGUF_META); a Hugging Face or MLX import
 * keeps tokenizer.json (MT_TOKENIZER), tokenizer_config.json (MT_TOKENIZER_CONFIG) and
 * generation_config.json (MT_GENERATION_CONFIG). The caller reads the layers (the runtime, from
 * its store_model handle); this module never reads the store. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer_int.h"

#define MAX_CONFIG_BYTES ((size_t)16 << 20)

static int from_gguf(tokenizer **out, const tokenizer_layers *in)
{
    const char *what = in->gguf_meta_what ? in->gguf_meta_what : "GGUF metadata";
    gguf_file *g = NULL;
    int rc;

    if ((rc = gguf_open_buf(&g, in->gguf_meta, in->gguf_meta_len, GGUF_HEADER_ONLY, what)) == 0)
        rc = tokenizer_from_gguf(out, g, what);
    gguf_close(g);
    return rc;
}

/* Bytes as a NUL-terminated string; *out NULL when data is NULL (no such layer). */
static int text_of(char **out, const char *data, size_t len, const char *what)
{
    *out = NULL;
    if (!data)
        return 0;
    if (len > MAX_CONFIG_BYTES)
        return ms_err(MS_EINVALID, "%s: %zu bytes, more than %zu", what, len, MAX_CONFIG_BYTES);
    if (!(*out = malloc(len + 1)))
        return ms_err(MS_ENOMEM, "%s: out of memory", what);
    if (len)
        memcpy(*out, data, len);
    (*out)[len] = '\0';
    return 0;
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

static int from_json(tokenizer **out, const tokenizer_layers *in)
{
    char *cfg = NULL, *gen = NULL, *conf = NULL;
    int rc, found = 0;

    if ((rc = text_of(&cfg, in->config, in->config_len, "tokenizer_config.json")) < 0 ||
        (rc = text_of(&gen, in->generation, in->generation_len, "generation_config.json")) < 0)
        goto done;
    if ((rc = tokenizer_from_json(out, in->json, in->json_len, cfg, "tokenizer.json")) < 0)
        goto done;
    /* generation_config.json is what transformers' generate() stops at; config.json's
     * eos_token_id (kept in the config blob: import.h) is the fallback */
    if ((rc = eog_from(*out, gen, &found)) == 0 && !found &&
        (rc = text_of(&conf, in->model_config, in->model_config_len, "config")) == 0)
        rc = eog_from(*out, conf, &found);
    if (rc < 0) {
        tokenizer_free(*out);
        *out = NULL;
    }
done:
    MS_FREE_ALL(cfg, gen, conf);
    return rc;
}

int tokenizer_from_layers(tokenizer **out, const tokenizer_layers *in, const char *what)
{
    int rc;

    *out = NULL;
    if (in->gguf_meta)
        rc = from_gguf(out, in);
    else if (in->json)
        rc = from_json(out, in);
    else
        return ms_err(MS_ENOTFOUND, "%s: no tokenizer (no GGUF metadata or tokenizer.json layer)", what);
    return rc < 0 ? ms_err_ctx("%s", what) : 0;
}
