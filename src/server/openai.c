/* openai.c: OpenAI's /v1: chat/completions, completions, models (embeddings: embed.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server_int.h"

#define BAD "invalid_request_error"

static enum MHD_Result completions(req *r, int chat)
{
    json_t *b = NULL;
    gen_job *j = NULL;
    const char *model = NULL;
    int rc;

    if ((rc = gen_job_new(&j, &b, r, chat ? GEN_OPENAI_CHAT : GEN_OPENAI_COMPLETION)) < 0 ||
        (rc = srv_openai_fields(j, b, chat, &model)) < 0 || (rc = srv_model_open(&j->ref, r->srv, model)) < 0 ||
        (rc = gen_model_check(j, model)) < 0)
        goto fail;
    snprintf(j->model, sizeof j->model, "%s", model);
    rc = 0;
fail:
    return gen_respond(r, j, b, rc, SRV_OPENAI);
}

static json_t *model_obj(const store_entry *m)
{
    char name[400];

    name_display(name, sizeof name, &m->name);
    return json_pack("{s:s,s:s,s:I,s:s}", "id", name, "object", "model", "created", (json_int_t)m->modified_at,
                     "owned_by", "library");
}

static enum MHD_Result models(req *r, const char *one)
{
    store *s = NULL;
    store_entry *ms = NULL;
    size_t n = 0;
    json_t *arr;

    if (store_open(&s, r->srv->home) < 0 || store_list(s, &ms, &n) < 0) {
        store_close(s);
        return srv_err_openai(r, 500, "server_error", "%s", ms_err_msg());
    }
    store_close(s);
    arr = json_array();
    for (size_t i = 0; i < n; i++) {
        char name[400];
        name_display(name, sizeof name, &ms[i].name);
        if (one && strcmp(one, name) == 0) {
            json_decref(arr);
            json_t *o = model_obj(&ms[i]);
            free(ms);
            return srv_json(r, 200, o);
        }
        json_array_append_new(arr, model_obj(&ms[i]));
    }
    free(ms);
    if (one) {
        json_decref(arr);
        return srv_json(r, 404,
                        json_pack("{s:{s:s+,s:s,s:s,s:s}}", "error", "message", "model not found: ", one, "type", BAD,
                                  "param", "model", "code", "model_not_found"));
    }
    return srv_json(r, 200, json_pack("{s:s,s:o}", "object", "list", "data", arr));
}

enum MHD_Result openai_route(req *r)
{
    const char *u = r->url, *m = r->method;
    int get = strcmp(m, "GET") == 0, post = strcmp(m, "POST") == 0;

    if (strcmp(u, "/v1/chat/completions") == 0 && post)
        return completions(r, 1);
    if (strcmp(u, "/v1/completions") == 0 && post)
        return completions(r, 0);
    if (strcmp(u, "/v1/embeddings") == 0 && post)
        return embed_handle(r, EMBED_OPENAI);
    if (strcmp(u, "/v1/models") == 0 && get)
        return models(r, NULL);
    if (strncmp(u, "/v1/models/", 11) == 0 && get)
        return models(r, u + 11);
    return srv_err_openai(r, 404, BAD, "no such endpoint: %s %s", m, u);
}
