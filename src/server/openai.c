/* openai.c: OpenAI's /v1: chat/completions, completions, models. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server_int.h"

#define MSG 1024
#define BAD "invalid_request_error"

/* "content": a string, or an array of {"type": "text", "text": ...} parts (joined). */
static int content_text(json_t *c, size_t i, char **out, char *msg, size_t msg_len)
{
    size_t k, len = 0;
    json_t *part;

    *out = NULL;
    if (!c || json_is_null(c))
        return (*out = strdup("")) ? 0 : -1;
    if (json_is_string(c))
        return (*out = strdup(json_string_value(c))) ? 0 : -1;
    if (!json_is_array(c)) {
        snprintf(msg, msg_len, "messages[%zu].content: expected a string or an array of text parts", i);
        return -1;
    }
    json_array_foreach(c, k, part)
    {
        const char *type = json_string_value(json_object_get(part, "type"));
        if (!type || strcmp(type, "text") != 0 || !json_is_string(json_object_get(part, "text"))) {
            snprintf(msg, msg_len,
                     "messages[%zu].content[%zu]: only {\"type\": \"text\", \"text\": ...} parts are "
                     "supported (%s is not)",
                     i, k, type ? type : "a part without a type");
            return -1;
        }
        len += strlen(json_string_value(json_object_get(part, "text")));
    }
    if (!(*out = calloc(1, len + 1)))
        return -1;
    json_array_foreach(c, k, part) strcat(*out, json_string_value(json_object_get(part, "text")));
    return 0;
}

static int parse_messages(gen_job *j, json_t *msgs, char *msg, size_t msg_len)
{
    size_t i;
    json_t *m;

    if (!json_is_array(msgs) || json_array_size(msgs) == 0) {
        snprintf(msg, msg_len, "messages: expected a non-empty array");
        return -1;
    }
    if (!(j->msgs = calloc(json_array_size(msgs), sizeof *j->msgs)))
        return snprintf(msg, msg_len, "out of memory"), -1;
    json_array_foreach(msgs, i, m)
    {
        const char *role = json_string_value(json_object_get(m, "role"));
        char *text;
        if (!json_is_object(m)) {
            snprintf(msg, msg_len, "messages[%zu]: expected an object", i);
            return -1;
        }
        if (role && strcmp(role, "developer") == 0)
            role = "system";
        if (!role || (strcmp(role, "system") && strcmp(role, "user") && strcmp(role, "assistant"))) {
            snprintf(msg, msg_len, "messages[%zu].role: expected \"system\", \"developer\", \"user\" or \"assistant\"",
                     i);
            return -1;
        }
        if (json_object_get(m, "tool_calls") && json_array_size(json_object_get(m, "tool_calls"))) {
            snprintf(msg, msg_len, "messages[%zu].tool_calls: not supported by mstore yet", i);
            return -1;
        }
        if (content_text(json_object_get(m, "content"), i, &text, msg, msg_len) < 0)
            return -1;
        j->msgs[i].content = text;
        j->msgs[i].role = strdup(role);
        j->n_msgs = i + 1;
        if (!text || !j->msgs[i].role)
            return snprintf(msg, msg_len, "out of memory"), -1;
    }
    return 0;
}

static int parse_common(gen_job *j, json_t *b, char *msg, size_t msg_len)
{
    static const char *const unbuilt[] = {"tools", "functions", "logit_bias", "suffix", NULL};
    json_t *stop = json_object_get(b, "stop"), *rf = json_object_get(b, "response_format");
    double d;
    int set;

    for (const char *const *k = unbuilt; *k; k++) {
        json_t *v = json_object_get(b, *k);
        if (v && !json_is_null(v) && !(json_is_array(v) && !json_array_size(v)) &&
            !(json_is_object(v) && !json_object_size(v))) {
            snprintf(msg, msg_len, "%s: not supported by mstore yet", *k);
            return -1;
        }
    }
    if (rf && !json_is_null(rf)) {
        const char *t = json_string_value(json_object_get(rf, "type"));
        if (!t || strcmp(t, "text") != 0) {
            snprintf(msg, msg_len, "response_format: only {\"type\": \"text\"} is supported by mstore yet");
            return -1;
        }
    }
    j->mo.so.top_k = 0; /* OpenAI has no top_k: the whole vocabulary, as its API means */
    if (model_opts_from_json(&j->mo, b, NULL, 1) < 0) {
        snprintf(msg, msg_len, "%s", ms_err_msg());
        return -1;
    }
#define NUM(key, lo, hi, integer, dst)                                           \
    if (srv_field_num(b, key, key, lo, hi, integer, &d, &set, msg, msg_len) < 0) \
        return -1;                                                               \
    if (set)                                                                     \
        dst;
    NUM("n", 1, 1, 1, (void)d)
    NUM("frequency_penalty", -2, 2, 0, (void)d)
    NUM("presence_penalty", -2, 2, 0, (void)d)
#undef NUM
    if (stop && json_is_string(stop)) {
        if (gen_job_stop_add(j, json_string_value(stop), msg, msg_len) < 0)
            return -1;
    } else if (stop && json_is_array(stop)) {
        size_t i;
        json_t *s;
        json_array_foreach(stop, i, s)
        {
            if (!json_is_string(s)) {
                snprintf(msg, msg_len, "stop[%zu]: expected a string", i);
                return -1;
            }
            if (gen_job_stop_add(j, json_string_value(s), msg, msg_len) < 0)
                return -1;
        }
    } else if (stop && !json_is_null(stop)) {
        snprintf(msg, msg_len, "stop: expected a string or an array of strings");
        return -1;
    }
    j->stream = 0;
    if (srv_field_bool(b, "stream", "stream", &j->stream, msg, msg_len) < 0)
        return -1;
    {
        json_t *so = json_object_get(b, "stream_options");
        if (so && json_is_object(so) &&
            srv_field_bool(so, "include_usage", "stream_options.include_usage", &j->include_usage, msg, msg_len) < 0)
            return -1;
    }
    return 0;
}

static enum MHD_Result completions(req *r, int chat)
{
    char msg[MSG];
    json_t *b = srv_body_json(r, msg, sizeof msg), *p;
    gen_job *j = NULL;
    const char *model = NULL;
    int rc;

    if (!b)
        return srv_err_openai(r, 400, BAD, "%s", msg);
    if (!(j = gen_job_new(r->srv, chat ? GEN_OPENAI_CHAT : GEN_OPENAI_COMPLETION)))
        goto nomem;
    if (chat) {
        if (parse_messages(j, json_object_get(b, "messages"), msg, sizeof msg) < 0)
            goto bad;
    } else {
        j->mo.n_predict = 16; /* OpenAI's default max_tokens for completions */
        p = json_object_get(b, "prompt");
        if (json_is_array(p) && json_array_size(p) == 1)
            p = json_array_get(p, 0);
        if (!json_is_string(p)) {
            snprintf(msg, sizeof msg, "prompt: expected a string (or an array of one string)");
            goto bad;
        }
        if (!(j->prompt = strdup(json_string_value(p))))
            goto nomem;
        j->raw = 1; /* a completion continues the text as it is */
    }
    if (parse_common(j, b, msg, sizeof msg) < 0 || srv_field_str(b, "model", "model", &model, msg, sizeof msg) < 0)
        goto bad;
    if ((rc = srv_model_check(r->srv, model, &j->name, msg, sizeof msg)) < 0) {
        json_decref(b);
        gen_job_free(j);
        if (rc == -2)
            return srv_json(r, 404,
                            json_pack("{s:{s:s,s:s,s:s,s:s}}", "error", "message", msg, "type", BAD, "param", "model",
                                      "code", "model_not_found"));
        return srv_err_openai(r, 400, BAD, "%s", msg);
    }
    snprintf(j->model, sizeof j->model, "%s", model);
    json_decref(b);
    return gen_start(r, j);
bad:
    json_decref(b);
    gen_job_free(j);
    return srv_err_openai(r, 400, BAD, "%s", msg);
nomem:
    json_decref(b);
    gen_job_free(j);
    return srv_err_openai(r, 500, "server_error", "out of memory");
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
