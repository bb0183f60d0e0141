/* embed.c: the embedding endpoints, ollama's /api/embed and older /api/embeddings and OpenAI's
 * /v1/embeddings. Each reads its request (request.c), runs session_embed on the loaded model
 * under its lock, and writes the answer in its API's shape; the embedding itself (tokens,
 * truncation, batching, dimensions) is the session's, as `mstore embed` runs it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server_int.h"

static const char *const route[] = {"/api/embed", "/api/embeddings", "/v1/embeddings"};

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static json_t *floats(const float *v, int dim)
{
    json_t *a = json_array();

    for (int k = 0; a && k < dim; k++)
        if (json_array_append_new(a, json_real(v[k])) < 0) {
            json_decref(a);
            return NULL;
        }
    return a;
}

/* OpenAI's encoding_format "base64": the vector's float32 values, little-endian, in RFC 4648
 * base64 (its clients decode it into a Float32Array). */
static json_t *floats_base64(const float *v, int dim)
{
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t nb = (size_t)dim * 4, k = 0;
    unsigned char *b = malloc(nb + 2);
    char *s = malloc((nb + 2) / 3 * 4 + 1), *p = s;
    json_t *j = NULL;

    if (!b || !s)
        goto done;
    for (int i = 0; i < dim; i++) {
        uint32_t u;
        memcpy(&u, &v[i], 4);
        for (int byte = 0; byte < 4; byte++)
            b[k++] = (unsigned char)(u >> (8 * byte));
    }
    b[nb] = b[nb + 1] = 0;
    for (k = 0; k < nb; k += 3) {
        uint32_t w = (uint32_t)b[k] << 16 | (uint32_t)b[k + 1] << 8 | b[k + 2];
        *p++ = abc[w >> 18 & 63];
        *p++ = abc[w >> 12 & 63];
        *p++ = k + 1 < nb ? abc[w >> 6 & 63] : '=';
        *p++ = k + 2 < nb ? abc[w & 63] : '=';
    }
    *p = '\0';
    j = json_stringn(s, (size_t)(p - s));
done:
    free(b);
    free(s);
    return j;
}

/* The answer, in the endpoint's shape; NULL when out of memory. */
static json_t *answer(const embed_req *e, const char *model, const float *v, int dim, size_t n_tokens, double t_total,
                      double t_load)
{
    json_t *list = json_array(), *o = NULL;

    for (size_t i = 0; list && i < e->n; i++) {
        const float *row = v + i * (size_t)dim;
        json_t *x = e->base64 ? floats_base64(row, dim) : floats(row, dim);
        if (x && e->kind == EMBED_OPENAI)
            x = json_pack("{s:s,s:I,s:o}", "object", "embedding", "index", (json_int_t)i, "embedding", x);
        if (!x || json_array_append_new(list, x) < 0) {
            json_decref(list);
            return NULL;
        }
    }
    if (!list)
        return NULL;
    switch (e->kind) {
    case EMBED_OLLAMA:
        o = json_pack("{s:s,s:o,s:I,s:I,s:I}", "model", model, "embeddings", list, "total_duration",
                      (json_int_t)(t_total * 1e9), "load_duration", (json_int_t)(t_load * 1e9), "prompt_eval_count",
                      (json_int_t)n_tokens);
        break;
    case EMBED_OLLAMA_OLD: /* one prompt, one vector; none (an empty prompt only loads) */
        o = json_pack("{s:o}", "embedding", json_array_size(list) ? json_incref(json_array_get(list, 0)) : json_array());
        json_decref(list);
        break;
    case EMBED_OPENAI:
        o = json_pack("{s:s,s:o,s:s,s:{s:I,s:I}}", "object", "list", "data", list, "model", model, "usage",
                      "prompt_tokens", (json_int_t)n_tokens, "total_tokens", (json_int_t)n_tokens);
        break;
    }
    return o;
}

/* The model loaded (or found loaded), the inputs embedded under its lock. The failure's code,
 * with its message copied into err (releasing the model may set another). */
static int run(server *srv, srv_model *ref, const embed_req *e, const char *model, float **v, int *dim,
               size_t *n_tokens, double *t_load, char *err, size_t err_len)
{
    /* ollama's older endpoint answers the pooled vector as it is; /api/embed normalizes it */
    session_embed_opts so = {
        .truncate = e->truncate, .dimensions = e->dimensions, .model = model, .raw = e->kind == EMBED_OLLAMA_OLD};
    double t0 = now();
    loaded *L = NULL;
    session *S = NULL;
    int rc;

    if ((rc = srv_model_acquire(srv, ref, e->mo.n_ctx, &L)) < 0) {
        snprintf(err, err_len, "%s", ms_err_msg());
        /* a model that does not load is the server's failure; a busy server says so (503) */
        return rc == MS_ENOTFOUND || rc == MS_EBUSY ? rc : MS_ERROR;
    }
    *t_load = now() - t0;
    if ((rc = srv_model_lock(&S, L, NULL, 0, 0)) == 0)   /* an embedding load's one session keeps its context */
        rc = session_embed(S, v, dim, n_tokens, e->in, e->n, &so);
    if (rc < 0)
        snprintf(err, err_len, "%s", ms_err_msg());
    else /* one line per request for whoever runs the server, as generations have */
        fprintf(stderr, "mstore: %s %s: %zu inputs, %zu tokens embedded\n", route[e->kind], L->shown, e->n, *n_tokens);
    srv_model_release(srv, L, S, e->keep_alive_s);
    return rc;
}

enum MHD_Result embed_handle(req *r, embed_kind kind)
{
    srv_api api = kind == EMBED_OPENAI ? SRV_OPENAI : SRV_OLLAMA;
    json_t *b = NULL, *o;
    embed_req e = {0};
    srv_model ref = {0};
    const char *model = NULL;
    float *v = NULL;
    int dim = 0, rc;
    size_t n_tokens = 0;
    double t0 = now(), t_load = 0;
    char err[1024], name[400];
    enum MHD_Result ret;

    if ((rc = srv_body_json(&b, r)) < 0)
        return srv_fail(r, api, rc);
    if ((rc = srv_embed_fields(&e, b, kind, r->srv->o.keep_alive_s, &model)) < 0 ||
        (rc = srv_model_open(&ref, r->srv, model)) < 0) {
        ret = srv_fail(r, api, rc);
    } else if (snprintf(name, sizeof name, "%s", model), srv_model_caps(ref.sm) == SRV_CAN_COMPLETE) {
        /* a decoder the runtime runs and that names no pooling: refused before it is loaded */
        ret = srv_fail(r, api, ms_err(MS_EUNSUPPORTED, "model '%s' does not support embeddings", name));
    } else if ((rc = run(r->srv, &ref, &e, name, &v, &dim, &n_tokens, &t_load, err, sizeof err)) < 0) {
        ret = srv_json(r, srv_status(rc), srv_err_body(api, rc, err));
    } else {
        o = answer(&e, name, v, dim, n_tokens, now() - t0, t_load);
        ret = o ? srv_json(r, 200, o) : srv_fail(r, api, ms_err(MS_ENOMEM, "out of memory"));
    }
    free(v);
    srv_model_close(&ref);
    srv_embed_fields_free(&e);
    json_decref(b);
    return ret;
}
