/* tools.c: tool calling in a generation. The tools are rendered through the model's template,
 * which also says how the model writes a call (chat_tool_syntax); the answer is read back into
 * calls. A forced call (OpenAI's tool_choice "required" or a named function) is a grammar: the
 * template's prefix, a JSON object {"name": <one of the tools>, <args_key>: <its parameters>},
 * its suffix, so the call parses and its arguments follow their schema whatever the weights.
 *
 * Streaming: text that cannot begin a call is streamed as content as it comes; from the point
 * where the template's call prefix appears (or, for templates whose calls are bare JSON, an
 * answer that opens with '{'), the rest is held and sent as calls once the answer is whole,
 * since a call is only known to be one when its JSON closes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server_int.h"

#define PYTHON_TAG "<|python_tag|>" /* Llama 3.1 may open its calls with it */

int gen_tools_on(const gen_job *j)
{
    return j->n_tools > 0 && j->tool_choice != GEN_TOOLS_NONE;
}

int srv_template_tool_syntax(const char *text, size_t len, chat_tool_syntax *out)
{
    chat_template *t = NULL;
    int rc;

    if ((rc = chat_template_new(&t, text, len, NULL, NULL)) == 0)
        rc = chat_template_tool_syntax(t, out);
    chat_template_free(t);
    return rc;
}

int gen_tools_check(gen_job *j)
{
    const uint8_t *data = NULL;
    size_t len = 0;
    char why[256];
    int rc;

    if (!gen_tools_on(j))
        return 0;
    rc = store_model_find(&data, &len, j->ref.sm, MT_TEMPLATE, NULL);
    if (rc < 0 && rc != MS_ENOTFOUND)
        return rc;
    /* the stored template is the one the loaded session renders with */
    if ((rc = srv_template_tool_syntax(rc == 0 ? (const char *)data : NULL, rc == 0 ? len : 0, &j->syn)) == 0 &&
        j->syn.harmony && j->tool_choice >= GEN_TOOLS_REQUIRED)
        /* a forced call is a grammar over the whole answer; harmony's comes after the analysis */
        return ms_err(MS_EUNSUPPORTED, "%s: tool_choice \"%s\" is not supported for the model's harmony format "
                                       "(gpt-oss): use \"auto\"",
                      j->model, j->tool_choice == GEN_TOOLS_REQUIRED ? "required" : "a named function");
    if (rc != MS_EUNSUPPORTED)
        return rc;
    snprintf(why, sizeof why, "%s", ms_err_msg()); /* ms_err writes over it */
    return ms_err(MS_EUNSUPPORTED, "%s: %s", j->model, why);
}

/* Move a tool's $defs (or definitions) into the forced call's root, where its "#/$defs/x"
 * references now resolve; two tools defining one name differently cannot share the root. */
static int defs_hoist(json_t *root, json_t *params, const char *tool)
{
    static const char *const keys[] = {"$defs", "definitions"};

    for (size_t k = 0; k < 2; k++) {
        json_t *d = json_object_get(params, keys[k]), *into, *v;
        const char *name;
        if (!json_is_object(d))
            continue;
        if (!(into = json_object_get(root, keys[k])))
            json_object_set_new(root, keys[k], into = json_object());
        json_object_foreach(d, name, v)
        {
            json_t *had = json_object_get(into, name);
            if (had && !json_equal(had, v))
                return ms_err(MS_EUNSUPPORTED, "tool_choice: tools define %s/%s differently (%s is one)", keys[k], name,
                              tool);
            json_object_set(into, name, v);
        }
        json_object_del(params, keys[k]);
    }
    return 0;
}

/* The JSON Schema of one forced call: the tools it may name (one, when named). */
static int call_schema(char **out, const gen_job *j)
{
    json_t *root = json_object(), *any = json_array();
    int rc = 0;

    *out = NULL;
    for (size_t i = 0; i < j->n_tools && rc == 0; i++) {
        const chat_tool *t = &j->tools[i];
        json_t *params = t->parameters ? json_loads(t->parameters, 0, NULL) : json_pack("{s:s}", "type", "object");
        if (j->tool_choice == GEN_TOOLS_NAMED && strcmp(t->name, j->tool_named) != 0) {
            json_decref(params);
            continue;
        }
        if (!params || (rc = defs_hoist(root, params, t->name)) < 0) {
            rc = params ? rc : ms_err(MS_ENOMEM, "out of memory");
            json_decref(params);
            break;
        }
        const char *name_key = j->syn.name_key[0] ? j->syn.name_key : "name";
        json_array_append_new(any, json_pack("{s:s,s:{s:{s:s},s:o},s:[s,s]}", "type", "object", "properties", name_key,
                                             "const", t->name, j->syn.args_key, params, "required", name_key,
                                             j->syn.args_key));
    }
    if (rc == 0) {
        json_object_set(root, "anyOf", any);
        if (!(*out = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER)))
            rc = ms_err(MS_ENOMEM, "out of memory");
    }
    json_decref(any);
    json_decref(root);
    return rc;
}

int gen_tools_grammar(gen_job *j, session *S)
{
    char prefix[80], suffix[80], *schema;
    int rc;

    if (!gen_tools_on(j) || j->tool_choice < GEN_TOOLS_REQUIRED)
        return session_format_set(S, j->mo.format, j->mo.format ? strlen(j->mo.format) : 0);
    if ((rc = call_schema(&schema, j)) < 0)
        return rc;
    snprintf(prefix, sizeof prefix, "%s%s", j->syn.prefix, j->syn.array ? "[" : "");
    /* An array's ']' closes the calls; what follows it in such templates is an end token's text
     * (Mistral's "</s>") or a fence, which the model need not write as bytes. */
    snprintf(suffix, sizeof suffix, "%s", j->syn.array ? "]" : j->syn.suffix);
    rc = session_format_set_framed(S, schema, strlen(schema), prefix, suffix);
    free(schema);
    return rc;
}

static int send_content(gen_job *j, size_t upto)
{
    int rc = 0;

    if (upto > j->sent) {
        json_t *o = gen_content_chunk(j, j->out.p + j->sent, upto - j->sent);
        rc = o ? gen_send_obj(j, o) : -1;
    }
    if (upto > j->sent)
        j->sent = upto;
    return rc;
}

/* The call prefix without its trailing white space ("<tool_call>" of "<tool_call>\n"): models
 * vary the white space, the marker they do not. 0: calls are bare JSON. */
static size_t key_len(const gen_job *j)
{
    size_t n = strlen(j->syn.prefix);

    while (n && strchr(" \t\r\n", j->syn.prefix[n - 1]))
        n--;
    return n;
}

/* Bare-JSON calls (Llama 3.1): only an answer that opens with '{' or the python tag is one. */
static int stream_bare(gen_job *j)
{
    const char *p = j->out.p;
    size_t i = 0, n = j->out.n, tag = strlen(PYTHON_TAG);

    if (j->tool_state == GEN_CALLS_UNDECIDED) {
        while (i < n && strchr(" \t\r\n", p[i]))
            i++;
        if (i == n || (n - i < tag && memcmp(p + i, PYTHON_TAG, n - i) == 0))
            return 0; /* nothing yet, or maybe the tag */
        j->tool_state = p[i] == '{' || memcmp(p + i, PYTHON_TAG, tag) == 0 ? GEN_CALLS_CALLS : GEN_CALLS_CONTENT;
        j->call_at = i;
    }
    return j->tool_state == GEN_CALLS_CONTENT ? send_content(j, n) : 0;
}

int gen_tools_stream(gen_job *j)
{
    const char *p = j->out.p, *key = j->syn.prefix, *at;
    size_t n = j->out.n, k = key_len(j), hold;

    if (j->tool_state == GEN_CALLS_CALLS)
        return 0;
    if (j->tool_choice >= GEN_TOOLS_REQUIRED) {
        j->tool_state = GEN_CALLS_CALLS, j->call_at = 0;
        return 0;
    }
    if (k == 0)
        return stream_bare(j);
    j->tool_state = GEN_CALLS_CONTENT;
    if ((at = memmem(p + j->sent, n - j->sent, key, k))) {
        j->tool_state = GEN_CALLS_CALLS, j->call_at = (size_t)(at - p);
        return send_content(j, j->call_at);
    }
    /* hold back a tail that may be the marker's beginning */
    for (hold = k - 1 < n - j->sent ? k - 1 : n - j->sent; hold > 0; hold--)
        if (memcmp(p + n - hold, key, hold) == 0)
            break;
    return send_content(j, n - hold);
}

/* The calls, streamed: OpenAI's deltas (id and name, then the arguments), ollama's one message. */
static int send_calls(gen_job *j)
{
    int openai = j->kind == GEN_OPENAI_CHAT, rc = 0;
    json_t *calls = gen_tool_calls_json(j, openai);
    char when[64];

    if (!openai) {
        srv_time_rfc3339(when, sizeof when, time(NULL));
        return gen_send_obj(j,
                            json_pack("{s:s,s:s,s:{s:s,s:s,s:o},s:b}", "model", j->model, "created_at", when, "message",
                                      "role", "assistant", "content", "", "tool_calls", calls, "done", 0));
    }
    for (size_t i = 0; i < j->n_calls && rc == 0; i++) {
        json_t *c = json_array_get(calls, i), *f = json_object_get(c, "function");
        json_t *args = json_incref(json_object_get(f, "arguments"));
        json_object_set_new(c, "index", json_integer((json_int_t)i));
        json_object_set_new(f, "arguments", json_string(""));
        rc = gen_send_obj(j, gen_delta(j, json_pack("{s:s,s:[O]}", "role", "assistant", "tool_calls", c), NULL));
        if (rc == 0)
            rc = gen_send_obj(j, gen_delta(j,
                                           json_pack("{s:[{s:I,s:{s:o}}]}", "tool_calls", "index", (json_int_t)i,
                                                     "function", "arguments", args),
                                           NULL));
        else
            json_decref(args);
    }
    json_decref(calls);
    return rc;
}

int gen_tools_finish(gen_job *j)
{
    int stream = j->fd >= 0, rc;
    size_t from = stream ? j->call_at : 0, clen;

    if (j->harmony) { /* the splitter found the calls (think.c), offered or not; the rest is content */
        j->content_len = j->out.n;
        return stream && j->n_calls ? send_calls(j) : 0;
    }
    if (!gen_tools_on(j) || !j->out.p)
        return 0;
    if (stream && j->tool_state != GEN_CALLS_CALLS)
        return send_content(j, j->out.n); /* a held tail that never became a marker */
    if ((rc = chat_tool_calls_parse(&j->syn, j->out.p + from, j->out.n - from, &j->calls, &j->n_calls, &clen)) < 0)
        return rc;
    j->content_len = from + clen;
    if (!stream) {
        if (j->logprobs)   /* the calls' tokens are no content's */
            gen_logprobs_cut(j, j->content_len);
        return 0;
    }
    if (j->n_calls == 0)
        return send_content(j, j->out.n); /* not a call after all: it was content */
    if (send_content(j, j->content_len) < 0)
        return -1;
    return send_calls(j);
}

json_t *gen_tool_calls_json(const gen_job *j, int openai)
{
    json_t *a = json_array();
    const char *hex = strchr(j->id, '-');

    for (size_t i = 0; i < j->n_calls; i++) {
        const chat_tool_call *c = &j->calls[i];
        json_t *args = json_loads(c->arguments, 0, NULL);
        char id[64];
        if (!args)
            args = json_object();
        if (openai) {
            /* Mistral's template takes only ids of 9 letters and digits back */
            snprintf(id, sizeof id, j->syn.array ? "%.7s%02zu" : "call_%.16s%02zu", hex ? hex + 1 : j->id, i);
            json_array_append_new(a, json_pack("{s:s,s:s,s:{s:s,s:s}}", "id", id, "type", "function", "function",
                                               "name", c->name, "arguments", c->arguments));
            json_decref(args);
        } else {
            json_array_append_new(a, json_pack("{s:{s:I,s:s,s:o}}", "function", "index", (json_int_t)i, "name", c->name,
                                               "arguments", args));
        }
    }
    return a;
}
