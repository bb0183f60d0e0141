/* openai.c: OpenAI's /v1: chat/completions, completions, models. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server_int.h"

#define BAD       "invalid_request_error"
#define MAX_PARTS 4096 /* text parts of one message's content */

/* "content": a string, or an array of {"type": "text", "text": ...} parts (joined). */
static int content_text(char **out, json_t *c, size_t i)
{
    ms_text t = {NULL, 0, 0};
    size_t k;
    json_t *part;
    int rc = 0;

    *out = NULL;
    if (json_is_string(c)) {
        rc = ms_text_put(&t, json_string_value(c), json_string_length(c));
    } else if (json_is_array(c) && json_array_size(c) > MAX_PARTS) {
        /* refused before joining them: each part costs, and no one writes a message this way */
        rc = ms_err(MS_EINVALID, "messages[%zu].content: %zu parts, at most %d", i, json_array_size(c), MAX_PARTS);
    } else if (json_is_array(c)) {
        json_array_foreach(c, k, part)
        {
            const char *type = json_string_value(json_object_get(part, "type"));
            json_t *text = json_object_get(part, "text");
            if (!type || strcmp(type, "text") != 0 || !json_is_string(text)) {
                rc = ms_err(MS_EINVALID,
                            "messages[%zu].content[%zu]: only {\"type\": \"text\", \"text\": ...} parts are "
                            "supported (%s is not)",
                            i, k, type ? type : "a part without a type");
                break;
            }
            if ((rc = ms_text_put(&t, json_string_value(text), json_string_length(text))) < 0)
                break;
        }
    } else if (c && !json_is_null(c)) {
        rc = ms_err(MS_EINVALID, "messages[%zu].content: expected a string or an array of text parts", i);
    }
    if (rc == 0 && !t.p)
        rc = ms_text_put(&t, "", 0); /* no content: an empty message */
    if (rc == MS_ENOMEM)
        rc = ms_err(MS_ENOMEM, "out of memory");
    if (rc < 0) {
        free(t.p);
        return rc;
    }
    *out = t.p;
    return 0;
}

static int parse_message(gen_job *j, json_t *m, size_t i)
{
    const char *role = json_string_value(json_object_get(m, "role"));
    char *text;
    int rc;

    if (!json_is_object(m))
        return ms_err(MS_EINVALID, "messages[%zu]: expected an object", i);
    if (role && strcmp(role, "developer") == 0)
        role = "system";
    if (!role || (strcmp(role, "system") && strcmp(role, "user") && strcmp(role, "assistant")))
        return ms_err(MS_EINVALID, "messages[%zu].role: expected \"system\", \"developer\", \"user\" or \"assistant\"",
                      i);
    if (json_object_get(m, "tool_calls") && json_array_size(json_object_get(m, "tool_calls")))
        return ms_err(MS_EUNSUPPORTED, "messages[%zu].tool_calls: not supported by mstore yet", i);
    if ((rc = content_text(&text, json_object_get(m, "content"), i)) < 0)
        return rc;
    j->msgs[i].content = text;
    j->n_msgs = i + 1;
    if (!(j->msgs[i].role = strdup(role)))
        return ms_err(MS_ENOMEM, "out of memory");
    return 0;
}

static int parse_messages(gen_job *j, json_t *msgs)
{
    size_t i;
    json_t *m;
    int rc;

    if (!json_is_array(msgs) || json_array_size(msgs) == 0)
        return ms_err(MS_EINVALID, "messages: expected a non-empty array");
    if (!(j->msgs = calloc(json_array_size(msgs), sizeof *j->msgs)))
        return ms_err(MS_ENOMEM, "out of memory");
    json_array_foreach(msgs, i, m)
    {
        if ((rc = parse_message(j, m, i)) < 0)
            return rc;
    }
    return 0;
}

static int parse_common(gen_job *j, json_t *b)
{
    static const char *const unbuilt[] = {"tools", "functions", "logit_bias", "suffix", NULL};
    /* accepted and without effect: one answer, and no penalties beyond repeat_penalty */
    static const struct {
        const char *key;
        double lo, hi;
        int integer;
    } inert[] = {{"n", 1, 1, 1}, {"frequency_penalty", -2, 2, 0}, {"presence_penalty", -2, 2, 0}};
    json_t *rf = json_object_get(b, "response_format"), *so = json_object_get(b, "stream_options");
    double d;
    int set, rc;

    for (const char *const *k = unbuilt; *k; k++) {
        json_t *v = json_object_get(b, *k);
        if (v && !json_is_null(v) && !(json_is_array(v) && !json_array_size(v)) &&
            !(json_is_object(v) && !json_object_size(v)))
            return ms_err(MS_EUNSUPPORTED, "%s: not supported by mstore yet", *k);
    }
    if (rf && !json_is_null(rf)) {
        const char *t = json_string_value(json_object_get(rf, "type"));
        if (!t || strcmp(t, "text") != 0)
            return ms_err(MS_EUNSUPPORTED, "response_format: only {\"type\": \"text\"} is supported by mstore yet");
    }
    j->mo.so.top_k = 0; /* OpenAI has no top_k: the whole vocabulary, as its API means */
    if ((rc = model_opts_from_json(&j->mo, b, NULL, 1)) < 0)
        return rc;
    for (size_t i = 0; i < sizeof inert / sizeof *inert; i++)
        if ((rc = srv_field_num(&d, &set, b, inert[i].key, inert[i].key, inert[i].lo, inert[i].hi, inert[i].integer)) <
            0)
            return rc;
    if ((rc = gen_job_stops_json(j, json_object_get(b, "stop"), "stop", 1)) < 0)
        return rc;
    j->stream = 0;
    if ((rc = srv_field_bool(&j->stream, b, "stream", "stream")) < 0)
        return rc;
    if (so && json_is_object(so) &&
        (rc = srv_field_bool(&j->include_usage, so, "include_usage", "stream_options.include_usage")) < 0)
        return rc;
    return 0;
}

/* A completion's "prompt": a string, or an array of one string. */
static int parse_prompt(gen_job *j, json_t *p)
{
    j->mo.n_predict = 16; /* OpenAI's default max_tokens for completions */
    if (json_is_array(p) && json_array_size(p) == 1)
        p = json_array_get(p, 0);
    if (!json_is_string(p))
        return ms_err(MS_EINVALID, "prompt: expected a string (or an array of one string)");
    if (!(j->prompt = strdup(json_string_value(p))))
        return ms_err(MS_ENOMEM, "out of memory");
    j->raw = 1; /* a completion continues the text as it is */
    return 0;
}

static enum MHD_Result completions(req *r, int chat)
{
    json_t *b = NULL;
    gen_job *j = NULL;
    const char *model = NULL;
    int rc;

    if ((rc = srv_body_json(&b, r)) < 0)
        return srv_fail(r, SRV_OPENAI, rc);
    if (!(j = gen_job_new(r->srv, chat ? GEN_OPENAI_CHAT : GEN_OPENAI_COMPLETION))) {
        rc = ms_err(MS_ENOMEM, "out of memory");
        goto fail;
    }
    rc = chat ? parse_messages(j, json_object_get(b, "messages")) : parse_prompt(j, json_object_get(b, "prompt"));
    if (rc < 0 || (rc = parse_common(j, b)) < 0 || (rc = srv_field_str(&model, b, "model", "model")) < 0 ||
        (rc = srv_model_open(&j->ref, r->srv, model)) < 0)
        goto fail;
    snprintf(j->model, sizeof j->model, "%s", model);
    json_decref(b);
    return gen_start(r, j);
fail:
    json_decref(b);
    gen_job_free(j);
    return srv_fail(r, SRV_OPENAI, rc);
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
    if (strcmp(u, "/v1/models") == 0 && get)
        return models(r, NULL);
    if (strncmp(u, "/v1/models/", 11) == 0 && get)
        return models(r, u + 11);
    return srv_err_openai(r, 404, BAD, "no such endpoint: %s %s", m, u);
}
