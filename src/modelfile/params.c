/* params.c: a stored model's run defaults (ollama's params and system layers), applied under
 * the caller's flags through the option table. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "modelfile/modelfile_int.h"

int mf_layer_text(char **out, size_t *len_out, store_model *m, const manifest_layer *l)
{
    const uint8_t *data;
    size_t len;
    int rc;

    *out = NULL;
    if ((rc = store_model_layer_bytes(&data, &len, m, l)) < 0)
        return rc;
    if (len > MODELFILE_MAX_BYTES)
        return ms_err(MS_EINVALID, "blob %s: %zu bytes, more than a text layer may have (%u)", l->digest, len,
                      MODELFILE_MAX_BYTES);
    if (!(*out = malloc(len + 1)))
        return ms_err(MS_ENOMEM, "out of memory");
    if (len)
        memcpy(*out, data, len);
    (*out)[len] = '\0';
    if (len_out)
        *len_out = len;
    return 0;
}

int mf_params_from_json(model_params *p, json_t *o, const char *what)
{
    const char *key;
    json_t *v;

    if (!json_is_object(o))
        return ms_err(MS_EINVALID, "%s: not a JSON object", what);
    json_object_foreach(o, key, v)
    {
        const model_option *opt = model_option_find(key);
        size_t row = opt ? (size_t)(opt - model_options) : 0;
        if (opt && opt->type == MODEL_OPT_TEXT) {
            char *text;
            if (mf_option_text_json(&text, opt, key, v) < 0)
                return ms_err_ctx("%s", what);
            free(p->format);
            p->format = text;
        } else if (opt && opt->type != MODEL_OPT_STRINGS) {
            if (model_option_json(&p->val[row], opt, key, v, 0) < 0)
                return ms_err_ctx("%s", what);
            p->set |= 1u << row;
        } else if (opt) {
            size_t k;
            json_t *e;
            if (!json_is_array(v) || json_array_size(v) > MODELFILE_MAX_STOP)
                return ms_err(MS_EINVALID, "%s: 'stop' must be an array of at most %d strings", what,
                              MODELFILE_MAX_STOP);
            json_array_foreach(v, k, e)
            {
                if (!json_is_string(e) || !json_string_length(e))
                    return ms_err(MS_EINVALID, "%s: 'stop'[%zu] is not a non-empty string", what, k);
                if (!(p->stop[p->n_stop] = strdup(json_string_value(e))))
                    return ms_err(MS_ENOMEM, "out of memory");
                p->n_stop++;
            }
        }
        /* Other ollama options (mirostat, num_gpu, ...) do not apply to this runtime: kept in
         * the layer, shown by `show --parameters`, not used. */
    }
    return 0;
}

void model_params_free(model_params *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n_stop; i++)
        free(p->stop[i]);
    MS_FREE_ALL(p->format, p->system, p);
}

int model_params_load(model_params **out, store_model *sm)
{
    const manifest *m = store_model_manifest(sm);
    const manifest_layer *lp, *ls;
    model_params *p = NULL;
    char *text = NULL;
    json_t *o = NULL;
    json_error_t e;
    size_t len;
    int rc = 0;

    *out = NULL;
    lp = manifest_layer_find(m, MT_OLLAMA_PARAMS, NULL);
    ls = manifest_layer_find(m, MT_OLLAMA_SYSTEM, NULL);
    if (!lp && !ls)
        goto done;
    if (!(p = calloc(1, sizeof *p))) {
        rc = ms_err(MS_ENOMEM, "out of memory");
        goto done;
    }
    if (lp) {
        if ((rc = mf_layer_text(&text, &len, sm, lp)) < 0)
            goto done;
        if (!(o = json_loadb(text, len, 0, &e))) {
            rc = ms_err(MS_EINVALID, "params layer %s: %s", lp->digest, e.text);
            goto done;
        }
        if ((rc = mf_params_from_json(p, o, "params layer")) < 0)
            goto done;
    }
    if (ls && (rc = mf_layer_text(&p->system, NULL, sm, ls)) < 0)
        goto done;
    *out = p;
    p = NULL;
done:
    json_decref(o);
    free(text);
    model_params_free(p);
    return rc;
}

void model_params_apply(const model_params *p, model_opts *o)
{
    for (size_t i = 0; p && i < model_options_n; i++)
        if (p->set & 1u << i)
            model_option_set(o, &model_options[i], p->val[i]);
    if (p && p->format)
        o->format = p->format;
}
