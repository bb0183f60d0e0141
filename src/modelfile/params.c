/* params.c: a stored model's run defaults (ollama's params and system layers), applied under
 * the caller's flags, and stop strings over streamed text. */
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

/* The option table: ollama's names and the JSON type each must have. */
typedef struct opt {
    const char *name;
    int is_int;
    size_t has_off, val_off;
} opt;
#define OPT_D(n)                                                          \
    {                                                                     \
#n, 0, offsetof(model_params, has_##n), offsetof(model_params, n) \
    }
#define OPT_I(n)                                                          \
    {                                                                     \
#n, 1, offsetof(model_params, has_##n), offsetof(model_params, n) \
    }
static const opt opts[] = {OPT_D(temperature),   OPT_I(top_k), OPT_D(top_p),       OPT_D(min_p),  OPT_D(repeat_penalty),
                           OPT_I(repeat_last_n), OPT_I(seed),  OPT_I(num_predict), OPT_I(num_ctx)};

int mf_params_known(const char *key, int *is_int_out)
{
    for (size_t i = 0; i < sizeof opts / sizeof *opts; i++)
        if (!strcmp(opts[i].name, key)) {
            *is_int_out = opts[i].is_int;
            return 1;
        }
    *is_int_out = -1;
    return !strcmp(key, "stop");
}

int mf_params_from_json(model_params *p, json_t *o, const char *what)
{
    const char *key;
    json_t *v;

    if (!json_is_object(o))
        return ms_err(MS_EINVALID, "%s: not a JSON object", what);
    json_object_foreach(o, key, v)
    {
        size_t i;
        for (i = 0; i < sizeof opts / sizeof *opts; i++)
            if (!strcmp(opts[i].name, key))
                break;
        if (i < sizeof opts / sizeof *opts) {
            char *base = (char *)p;
            if (!json_is_number(v) || (opts[i].is_int && !json_is_integer(v)))
                return ms_err(MS_EINVALID, "%s: '%s' must be %s", what, key,
                              opts[i].is_int ? "an integer" : "a number");
            *(int *)(base + opts[i].has_off) = 1;
            if (opts[i].is_int)
                *(long long *)(base + opts[i].val_off) = (long long)json_integer_value(v);
            else
                *(double *)(base + opts[i].val_off) = json_number_value(v);
        } else if (!strcmp(key, "stop")) {
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
    free(p->system);
    free(p);
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

void model_params_apply(const model_params *p, runtime_sampler_opts *so, int *n_predict, int *n_ctx)
{
    if (!p)
        return;
    if (so) {
        if (p->has_temperature)
            so->temp = (float)p->temperature;
        if (p->has_top_k)
            so->top_k = (int)p->top_k;
        if (p->has_top_p)
            so->top_p = (float)p->top_p;
        if (p->has_min_p)
            so->min_p = (float)p->min_p;
        if (p->has_repeat_penalty)
            so->repeat_penalty = (float)p->repeat_penalty;
        if (p->has_repeat_last_n)
            so->repeat_last_n = (int)p->repeat_last_n;
        if (p->has_seed && p->seed >= 0) /* ollama's seed -1: a random one, as without */
            so->seed = (uint64_t)p->seed;
    }
    /* ollama: num_predict -1 means no limit; this runtime's budget is the context */
    if (n_predict && p->has_num_predict)
        *n_predict = p->num_predict < 0 || p->num_predict > (1 << 24) ? 1 << 24 : (int)p->num_predict;
    if (n_ctx && p->has_num_ctx && p->num_ctx > 0 && p->num_ctx <= (1 << 22))
        *n_ctx = (int)p->num_ctx;
}

int model_params_stop_scan(const model_params *p, const char *pending, size_t len, size_t *emit_out)
{
    size_t first = len, hold = 0;

    *emit_out = len;
    if (!p)
        return 0;
    for (size_t i = 0; i < p->n_stop; i++) {
        const char *st = p->stop[i];
        size_t sl = strlen(st);
        for (size_t at = 0; at + sl <= len && at < first; at++)
            if (!memcmp(pending + at, st, sl)) {
                first = at;
                break;
            }
        /* the longest tail of pending that is a proper prefix of this stop string */
        for (size_t k = sl - 1 < len ? sl - 1 : len; k > hold; k--)
            if (!memcmp(pending + len - k, st, k)) {
                hold = k;
                break;
            }
    }
    if (first < len) {
        *emit_out = first;
        return 1;
    }
    *emit_out = len - hold;
    return 0;
}
