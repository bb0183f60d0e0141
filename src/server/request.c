/* request.c: what the ollama and OpenAI handlers read from a request body before any model is
 * opened: typed fields, options through the option table, stop strings, keep_alive, messages,
 * and the fields refused as not built. Pure JSON in, a gen_job's fields out (nothing here
 * opens the store or touches a connection), so that fuzz_serve runs every body through it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"
#include "server/server_int.h"

#define MAX_PARTS 4096 /* text parts of one message's content */

int srv_field_num(double *out, int *set, json_t *o, const char *key, const char *shown, double lo, double hi,
                  int integer)
{
    json_t *v = o ? json_object_get(o, key) : NULL;
    double d;

    *set = 0;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_number(v))
        goto bad;
    d = json_number_value(v);
    if (d != d || d < lo || d > hi || (integer && d != (double)(long long)d))
        goto bad;
    *out = d;
    *set = 1;
    return 0;
bad:
    return ms_err(MS_EINVALID, "%s: expected %s from %g to %g", shown, integer ? "an integer" : "a number", lo, hi);
}

int srv_field_str(const char **out, json_t *o, const char *key, const char *shown)
{
    json_t *v = json_object_get(o, key);

    *out = NULL;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_string(v))
        return ms_err(MS_EINVALID, "%s: expected a string", shown);
    *out = json_string_value(v);
    return 0;
}

int srv_field_bool(int *out, json_t *o, const char *key, const char *shown)
{
    json_t *v = json_object_get(o, key);

    if (!v || json_is_null(v))
        return 0;
    if (!json_is_boolean(v))
        return ms_err(MS_EINVALID, "%s: expected true or false", shown);
    *out = json_is_true(v);
    return 0;
}

/* The model a request body names ("model", or the older "name"). */
const char *srv_body_model(json_t *b)
{
    json_t *v = json_object_get(b, "model");

    if (!json_is_string(v))
        v = json_object_get(b, "name");
    return json_is_string(v) ? json_string_value(v) : NULL;
}

/* Fields that would change what an answer means and are not built: refused by name (`path`
 * before it: "messages[0]."). MS_EUNSUPPORTED. */
static int refuse_unbuilt(json_t *b, const char *const *keys, const char *path)
{
    for (; *keys; keys++) {
        json_t *v = json_object_get(b, *keys);
        if (v && !json_is_null(v) && !(json_is_array(v) && json_array_size(v) == 0) &&
            !(json_is_string(v) && !*json_string_value(v)) && !(json_is_false(v)))
            return ms_err(MS_EUNSUPPORTED, "%s%s: not supported by mstore yet", path, *keys);
    }
    return 0;
}

/* The request's format (text taken), checked through the option table's row: a schema that
 * does not compile is refused here, naming its keyword (400). */
static int format_set(gen_job *j, char *text, const char *shown)
{
    if (!text)
        return ms_err(MS_ENOMEM, "out of memory");
    free(j->format);
    j->format = text;
    return model_option_set_text(&j->mo, model_option_find("format"), shown, text);
}

/* ollama's "format": "json" or a JSON Schema object; absent, null or "": free text. */
static int ollama_format(gen_job *j, json_t *b)
{
    json_t *f = json_object_get(b, "format");

    if (!f || json_is_null(f) || (json_is_string(f) && !*json_string_value(f)))
        return 0;
    if (json_is_string(f) && strcmp(json_string_value(f), "json") == 0)
        return format_set(j, strdup("json"), "format");
    if (!json_is_object(f))
        return ms_err(MS_EINVALID, "format: expected \"json\" or a JSON Schema object");
    return format_set(j, json_dumps(f, JSON_COMPACT | JSON_PRESERVE_ORDER), "format");
}

/* OpenAI's "response_format": {"type": "text"}, {"type": "json_object"} (any JSON object), or
 * {"type": "json_schema", "json_schema": {"name", "schema", "strict"}}. The schema is enforced
 * whether or not strict is set: the grammar costs nothing extra. */
static int openai_format(gen_job *j, json_t *rf)
{
    const char *type;
    json_t *js, *schema;

    if (!rf || json_is_null(rf))
        return 0;
    if (!json_is_object(rf) || !(type = json_string_value(json_object_get(rf, "type"))))
        return ms_err(MS_EINVALID, "response_format: expected an object with a \"type\"");
    if (strcmp(type, "text") == 0)
        return 0;
    if (strcmp(type, "json_object") == 0)
        return format_set(j, strdup("json"), "response_format");
    if (strcmp(type, "json_schema") != 0)
        return ms_err(MS_EINVALID, "response_format.type: expected \"text\", \"json_object\" or \"json_schema\"");
    js = json_object_get(rf, "json_schema");
    if (!json_is_object(js))
        return ms_err(MS_EINVALID, "response_format.json_schema: expected an object");
    schema = json_object_get(js, "schema");
    if (!schema || json_is_null(schema)) /* OpenAI allows it: any JSON object */
        return format_set(j, strdup("json"), "response_format.json_schema");
    if (!json_is_object(schema))
        return ms_err(MS_EINVALID, "response_format.json_schema.schema: expected a JSON Schema object");
    return format_set(j, json_dumps(schema, JSON_COMPACT | JSON_PRESERVE_ORDER), "response_format.json_schema.schema");
}

#define MAX_TOOLS      128 /* tools offered in one request */
#define MAX_TOOL_CALLS 64 /* calls in one assistant message */
#define MAX_NAME       64 /* a function's name, as OpenAI bounds it */

/* A function name: 1 to 64 of [A-Za-z0-9_.-], as OpenAI's API requires (so it can sit in a
 * JSON Schema const and a template unescaped). */
static int name_ok(const char *s)
{
    size_t n = strlen(s);

    if (n == 0 || n > MAX_NAME)
        return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_' ||
              *s == '-' || *s == '.'))
            return 0;
    return 1;
}

/* One of "tools": {"type": "function", "function": {"name", "description", "parameters"}}. A
 * forced call compiles its parameters, so their schema is checked here, where a bad keyword
 * can still be answered 400 naming it. */
static int tool_read(chat_tool *t, json_t *v, size_t i, int check_schema)
{
    json_t *f = json_object_get(v, "function"), *params;
    const char *type = json_string_value(json_object_get(v, "type")), *name, *desc;
    char shown[64];
    grammar *g = NULL;
    int rc;

    if (!json_is_object(v) || (type && strcmp(type, "function") != 0) || !json_is_object(f))
        return ms_err(MS_EINVALID, "tools[%zu]: expected {\"type\": \"function\", \"function\": {...}}", i);
    snprintf(shown, sizeof shown, "tools[%zu].function.name", i);
    if ((rc = srv_field_str(&name, f, "name", shown)) < 0)
        return rc;
    if (!name || !name_ok(name))
        return ms_err(MS_EINVALID, "%s: expected 1 to %d letters, digits, '_', '-' or '.'", shown, MAX_NAME);
    snprintf(shown, sizeof shown, "tools[%zu].function.description", i);
    if ((rc = srv_field_str(&desc, f, "description", shown)) < 0)
        return rc;
    params = json_object_get(f, "parameters");
    if (params && !json_is_null(params) && !json_is_object(params))
        return ms_err(MS_EINVALID, "tools[%zu].function.parameters: expected a JSON Schema object", i);
    if (!(t->name = strdup(name)) || (desc && !(t->description = strdup(desc))) ||
        (json_is_object(params) && !(t->parameters = json_dumps(params, JSON_COMPACT | JSON_PRESERVE_ORDER))))
        return ms_err(MS_ENOMEM, "out of memory");
    snprintf(shown, sizeof shown, "tools[%zu].function.parameters", i);
    if (check_schema && t->parameters &&
        (rc = grammar_from_format(&g, t->parameters, strlen(t->parameters), shown)) < 0)
        return rc;
    grammar_free(g);
    return 0;
}

static int tools_read(gen_job *j, json_t *tools)
{
    size_t i;
    json_t *v;
    int rc;

    if (!tools || json_is_null(tools))
        return 0;
    if (!json_is_array(tools))
        return ms_err(MS_EINVALID, "tools: expected an array");
    if (json_array_size(tools) > MAX_TOOLS)
        return ms_err(MS_EINVALID, "tools: %zu tools, at most %d", json_array_size(tools), MAX_TOOLS);
    if (!(j->tools = calloc(json_array_size(tools) + 1, sizeof *j->tools)))
        return ms_err(MS_ENOMEM, "out of memory");
    json_array_foreach(tools, i, v)
    {
        j->n_tools = i + 1;
        if ((rc = tool_read(&j->tools[i], v, i, j->tool_choice >= GEN_TOOLS_REQUIRED)) < 0)
            return rc;
    }
    return 0;
}

/* OpenAI's "tool_choice": "auto", "none", "required", or {"type": "function", "function":
 * {"name"}} naming one of the tools. Read before the tools (a forced call checks their
 * schemas); the name is checked against them after. */
static int tool_choice_read(gen_job *j, json_t *c)
{
    const char *s = json_string_value(c), *name;

    if (!c || json_is_null(c) || (s && strcmp(s, "auto") == 0))
        return 0;
    if (s && strcmp(s, "none") == 0)
        j->tool_choice = GEN_TOOLS_NONE;
    else if (s && strcmp(s, "required") == 0)
        j->tool_choice = GEN_TOOLS_REQUIRED;
    else if (json_is_object(c) && (name = json_string_value(json_object_get(json_object_get(c, "function"), "name")))) {
        j->tool_choice = GEN_TOOLS_NAMED;
        if (!(j->tool_named = strdup(name)))
            return ms_err(MS_ENOMEM, "out of memory");
    } else {
        return ms_err(MS_EINVALID, "tool_choice: expected \"auto\", \"none\", \"required\" or {\"type\": \"function\", "
                                   "\"function\": {\"name\": ...}}");
    }
    return 0;
}

static int tool_choice_check(const gen_job *j)
{
    if (j->tool_choice >= GEN_TOOLS_REQUIRED && j->n_tools == 0)
        return ms_err(MS_EINVALID, "tool_choice: a call is required, but no tools are given");
    for (size_t i = 0; j->tool_choice == GEN_TOOLS_NAMED && i < j->n_tools; i++)
        if (strcmp(j->tools[i].name, j->tool_named) == 0)
            return 0;
    if (j->tool_choice == GEN_TOOLS_NAMED)
        return ms_err(MS_EINVALID, "tool_choice: no tool is named '%s'", j->tool_named);
    return 0;
}

/* An assistant message's "tool_calls": ollama's {"function": {"name", "arguments": {...}}} or
 * OpenAI's {"id", "type": "function", "function": {"name", "arguments": "<JSON text>"}}. The
 * arguments are kept as a JSON object's compact text, the way templates print them. */
static int tool_calls_read(chat_msg *m, json_t *a, size_t i)
{
    chat_tool_call *c;
    size_t k;
    json_t *v;

    if (!a || json_is_null(a) || (json_is_array(a) && json_array_size(a) == 0))
        return 0;
    if (!json_is_array(a) || json_array_size(a) > MAX_TOOL_CALLS)
        return ms_err(MS_EINVALID, "messages[%zu].tool_calls: expected an array of at most %d calls", i,
                      MAX_TOOL_CALLS);
    if (!(c = calloc(json_array_size(a), sizeof *c)))
        return ms_err(MS_ENOMEM, "out of memory");
    m->tool_calls = c;
    json_array_foreach(a, k, v)
    {
        json_t *f = json_object_get(v, "function"), *args = json_object_get(f, "arguments"), *parsed = NULL;
        const char *name = json_string_value(json_object_get(f, "name")),
                   *id = json_string_value(json_object_get(v, "id"));
        m->n_tool_calls = k + 1;
        if (!name)
            return ms_err(MS_EINVALID, "messages[%zu].tool_calls[%zu].function.name: expected a string", i, k);
        if (json_is_string(args))
            args = parsed = json_loads(json_string_value(args), JSON_DECODE_ANY, NULL);
        if (args && !json_is_null(args) && !json_is_object(args)) {
            json_decref(parsed);
            return ms_err(MS_EINVALID, "messages[%zu].tool_calls[%zu].function.arguments: expected a JSON object", i,
                          k);
        }
        c[k].name = strdup(name);
        c[k].id = id ? strdup(id) : NULL;
        c[k].arguments = json_is_object(args) ? json_dumps(args, JSON_COMPACT | JSON_PRESERVE_ORDER) : strdup("{}");
        json_decref(parsed);
        if (!c[k].name || (id && !c[k].id) || !c[k].arguments)
            return ms_err(MS_ENOMEM, "out of memory");
    }
    return 0;
}

/* A "tool" message's own fields: the function (ollama's tool_name, OpenAI's name) and the call
 * it answers (OpenAI's tool_call_id, whose function an earlier assistant message named). */
static int tool_result_read(gen_job *j, chat_msg *m, json_t *o, size_t i)
{
    const char *name = json_string_value(json_object_get(o, "tool_name")),
               *id = json_string_value(json_object_get(o, "tool_call_id"));

    if (!name)
        name = json_string_value(json_object_get(o, "name"));
    for (size_t k = i; !name && id && k-- > 0;)
        for (size_t c = 0; c < j->msgs[k].n_tool_calls; c++)
            if (j->msgs[k].tool_calls[c].id && strcmp(j->msgs[k].tool_calls[c].id, id) == 0)
                name = j->msgs[k].tool_calls[c].name;
    if ((name && !(m->tool_name = strdup(name))) || (id && !(m->tool_call_id = strdup(id))))
        return ms_err(MS_ENOMEM, "out of memory");
    return 0;
}

/* Message i's tool fields, as both APIs spell them: an assistant's calls, a result's names. */
static int message_tools_read(gen_job *j, json_t *m, size_t i)
{
    int rc;

    if ((rc = tool_calls_read(&j->msgs[i], json_object_get(m, "tool_calls"), i)) < 0)
        return rc;
    return strcmp(j->msgs[i].role, "tool") == 0 ? tool_result_read(j, &j->msgs[i], m, i) : 0;
}

/* ollama's "options" (through the option table) and the request's own fields shared by
 * generate and chat. MS_EINVALID naming the field. */
static int job_options(gen_job *j, json_t *b)
{
    json_t *o = json_object_get(b, "options"), *ka;
    int rc;

    if (o && !json_is_null(o) && !json_is_object(o))
        return ms_err(MS_EINVALID, "options: expected an object");
    if (json_is_object(o) && (rc = model_opts_from_json(&j->mo, o, "options.", 0)) < 0)
        return rc;
    if (json_is_object(o) && (rc = gen_job_stops_json(j, json_object_get(o, "stop"), "options.stop", 0)) < 0)
        return rc;
    if ((ka = json_object_get(b, "keep_alive")) && !json_is_null(ka) && (rc = srv_duration_s(&j->keep_alive_s, ka)) < 0)
        return rc;
    j->stream = 1;
    return srv_field_bool(&j->stream, b, "stream", "stream");
}

static int chat_message(gen_job *j, json_t *m, size_t i)
{
    static const char *const unbuilt[] = {"images", NULL};
    const char *role, *content, *thinking = NULL;
    char field[64];
    int rc;

    if (!json_is_object(m))
        return ms_err(MS_EINVALID, "messages[%zu]: expected an object", i);
    snprintf(field, sizeof field, "messages[%zu].role", i);
    if ((rc = srv_field_str(&role, m, "role", field)) < 0)
        return rc;
    if (!role || (strcmp(role, "system") && strcmp(role, "user") && strcmp(role, "assistant") && strcmp(role, "tool")))
        return ms_err(MS_EINVALID, "messages[%zu].role: expected \"system\", \"user\", \"assistant\" or \"tool\"", i);
    snprintf(field, sizeof field, "messages[%zu].content", i);
    if ((rc = srv_field_str(&content, m, "content", field)) < 0)
        return rc;
    snprintf(field, sizeof field, "messages[%zu].thinking", i);
    if ((rc = srv_field_str(&thinking, m, "thinking", field)) < 0)
        return rc;
    snprintf(field, sizeof field, "messages[%zu].", i);
    if ((rc = refuse_unbuilt(m, unbuilt, field)) < 0)
        return rc;
    j->n_msgs = i + 1;
    if (!(j->msgs[i].role = strdup(role)) || !(j->msgs[i].content = strdup(content ? content : "")) ||
        (thinking && !(j->msgs[i].thinking = strdup(thinking))))
        return ms_err(MS_ENOMEM, "out of memory");
    return message_tools_read(j, m, i);
}

static int chat_messages(gen_job *j, json_t *msgs)
{
    size_t i;
    json_t *m;
    int rc;

    if (!json_is_array(msgs))
        return ms_err(MS_EINVALID, "messages: expected an array");
    if (!(j->msgs = calloc(json_array_size(msgs) + 1, sizeof *j->msgs)))
        return ms_err(MS_ENOMEM, "out of memory");
    json_array_foreach(msgs, i, m)
    {
        if ((rc = chat_message(j, m, i)) < 0)
            return rc;
    }
    return 0;
}

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
    if (!role || (strcmp(role, "system") && strcmp(role, "user") && strcmp(role, "assistant") && strcmp(role, "tool")))
        return ms_err(MS_EINVALID,
                      "messages[%zu].role: expected \"system\", \"developer\", \"user\", \"assistant\" or \"tool\"", i);
    if ((rc = content_text(&text, json_object_get(m, "content"), i)) < 0)
        return rc;
    j->msgs[i].content = text;
    j->n_msgs = i + 1;
    if (!(j->msgs[i].role = strdup(role)))
        return ms_err(MS_ENOMEM, "out of memory");
    return message_tools_read(j, m, i);
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

/* logprobs into j (gen.c reports them):
 *   openai chat, ollama: logprobs (true or false), top_logprobs (0..20, only with logprobs:
 *           true, as OpenAI requires)
 *   openai completions: logprobs (an integer 0..5: the chosen tokens and that many
 *           alternatives; null or absent: none); top_logprobs is not its field (0 accepted)
 * MS_EINVALID naming the field. */
static int logprobs_read(gen_job *j, json_t *b, int openai, int chat)
{
    double d;
    int set, rc;

    j->logprobs = j->top_logprobs = 0;
    if (openai && !chat) {
        if ((rc = srv_field_num(&d, &set, b, "logprobs", "logprobs", 0, 5, 1)) < 0)
            return rc;
        j->logprobs = set, j->top_logprobs = set ? (int)d : 0;
        if ((rc = srv_field_num(&d, &set, b, "top_logprobs", "top_logprobs", 0, 20, 1)) < 0)
            return rc;
        if (set && d > 0)
            return ms_err(MS_EINVALID, "top_logprobs: /v1/completions takes the alternatives as logprobs: N (0 to 5)");
        return 0;
    }
    if ((rc = srv_field_bool(&j->logprobs, b, "logprobs", "logprobs")) < 0 ||
        (rc = srv_field_num(&d, &set, b, "top_logprobs", "top_logprobs", 0, 20, 1)) < 0)
        return rc;
    if (set && d > 0 && !j->logprobs)
        return ms_err(MS_EINVALID, "top_logprobs: needs logprobs: true");
    j->top_logprobs = set ? (int)d : 0;
    return 0;
}

/* Thinking (j->think: CHAT_THINK_*; gen_think_check decides with the model):
 *   ollama: think true or false, or "low", "medium", "high": gpt-oss's levels, for a template
 *           that reads reasoning_effort (others refuse them, as ollama does)
 *   openai: reasoning_effort, or reasoning: {"effort"}: "none" off, "minimal" .. "high" a level
 *           (the <think> models have no levels: any of them turns thinking on); /v1/completions
 *           is not templated and takes "none" only. */
static int parse_think(gen_job *j, json_t *b, int openai, int chat)
{
    json_t *v = json_object_get(b, openai ? "reasoning_effort" : "think"), *r = json_object_get(b, "reasoning");
    const char *key = openai ? "reasoning_effort" : "think", *s;

    if (openai && r && !json_is_null(r)) {
        if (!json_is_object(r))
            return ms_err(MS_EINVALID, "reasoning: expected an object");
        if (v && !json_is_null(v))
            return ms_err(MS_EINVALID, "reasoning_effort and reasoning: give one of them");
        v = json_object_get(r, "effort"), key = "reasoning.effort";
    }
    if (!v || json_is_null(v))
        return 0;
    s = json_string_value(v);
    if (!openai && json_is_boolean(v)) {
        j->think = json_is_true(v);
        return 0;
    }
    if (openai && s && !strcmp(s, "none")) {
        j->think = CHAT_THINK_OFF;
        return 0;
    }
    /* ollama's levels start at "low" */
    for (int level = openai ? CHAT_THINK_MINIMAL : CHAT_THINK_LOW; s && level <= CHAT_THINK_HIGH; level++)
        if (!strcmp(s, chat_think_effort(level))) {
            if (openai && !chat)
                return ms_err(MS_EUNSUPPORTED, "%s: not supported on /v1/completions (its prompt is not templated)",
                              key);
            j->think = level;
            return 0;
        }
    if (!openai)
        return ms_err(MS_EINVALID, "think: expected true, false, \"low\", \"medium\" or \"high\"");
    return ms_err(MS_EINVALID, "%s: expected \"none\", \"minimal\", \"low\", \"medium\" or \"high\"", key);
}

static int parse_common(gen_job *j, json_t *b, int chat)
{
    static const char *const unbuilt[] = {"functions", "function_call", "logit_bias", "suffix", NULL};
    /* accepted and without effect: one answer (frequency_penalty and presence_penalty are the
     * option table's now, and change the answer) */
    static const struct {
        const char *key;
        double lo, hi;
        int integer;
    } inert[] = {{"n", 1, 1, 1}};
    json_t *rf = json_object_get(b, "response_format"), *so = json_object_get(b, "stream_options");
    double d;
    int set, rc;

    for (const char *const *k = unbuilt; *k; k++) {
        json_t *v = json_object_get(b, *k);
        if (v && !json_is_null(v) && !(json_is_array(v) && !json_array_size(v)) &&
            !(json_is_object(v) && !json_object_size(v)))
            return ms_err(MS_EUNSUPPORTED, "%s: not supported by mstore yet", *k);
    }
    if ((rc = logprobs_read(j, b, 1, chat)) < 0 || (rc = parse_think(j, b, 1, chat)) < 0 ||
        (rc = openai_format(j, rf)) < 0)
        return rc;
    if (!chat && json_object_get(b, "tools") && !json_is_null(json_object_get(b, "tools")))
        return ms_err(MS_EINVALID, "tools: only /v1/chat/completions takes tools");
    if (chat && ((rc = tool_choice_read(j, json_object_get(b, "tool_choice"))) < 0 ||
                 (rc = tools_read(j, json_object_get(b, "tools"))) < 0 || (rc = tool_choice_check(j)) < 0))
        return rc;
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

int gen_job_stop_add(gen_job *j, const char *s)
{
    if (!*s)
        return 0;
    if (j->g.n_stops >= SESSION_MAX_STOPS || strlen(s) > SESSION_MAX_STOP_LEN)
        return ms_err(MS_EINVALID, "at most %d stop strings of at most %d bytes each", SESSION_MAX_STOPS,
                      SESSION_MAX_STOP_LEN);
    if (!(j->stops[j->g.n_stops] = strdup(s)))
        return ms_err(MS_ENOMEM, "out of memory");
    j->g.stops[j->g.n_stops] = j->stops[j->g.n_stops];
    j->g.n_stops++;
    return 0;
}

int gen_job_stops_json(gen_job *j, json_t *v, const char *shown, int one_string)
{
    size_t i;
    json_t *s;
    int rc;

    if (!v || json_is_null(v))
        return 0;
    if (one_string && json_is_string(v))
        return gen_job_stop_add(j, json_string_value(v));
    if (!json_is_array(v))
        return ms_err(MS_EINVALID, "%s: expected %san array of strings", shown, one_string ? "a string or " : "");
    json_array_foreach(v, i, s)
    {
        if (!json_is_string(s))
            return ms_err(MS_EINVALID, "%s[%zu]: expected a string", shown, i);
        if ((rc = gen_job_stop_add(j, json_string_value(s))) < 0)
            return rc;
    }
    return 0;
}

int srv_duration_s(int *out, json_t *v)
{
    const char *s;
    char *end;
    double d, unit = 1;

    if (json_is_integer(v) || json_is_real(v)) {
        d = json_number_value(v);
    } else if (json_is_string(v)) {
        s = json_string_value(v);
        d = strtod(s, &end);
        if (end == s)
            goto bad;
        if (strcmp(end, "ms") == 0)
            unit = 1e-3;
        else if (strcmp(end, "s") == 0 || !*end)
            unit = 1;
        else if (strcmp(end, "m") == 0)
            unit = 60;
        else if (strcmp(end, "h") == 0)
            unit = 3600;
        else
            goto bad;
        d *= unit;
    } else {
        goto bad;
    }
    if (d != d)
        goto bad;
    *out = d < 0 ? -1 : d > 1e9 ? 1000000000 : (int)d;
    return 0;
bad:
    return ms_err(MS_EINVALID, "keep_alive: expected a number of seconds or a duration such as \"5m\"");
}

/* Request fields that generate and chat refuse, not being built; /api/show's capabilities read
 * them too, so that a capability appears when its field is accepted. */
static const char *const unbuilt_gen[] = {"images", "suffix", "template", "context", "tools", NULL};
static const char *const unbuilt_chat[] = {"template", NULL};

static int unbuilt(const char *const *keys, const char *key)
{
    for (; *keys; keys++)
        if (strcmp(*keys, key) == 0)
            return 1;
    return 0;
}

int srv_unbuilt(int chat, const char *key)
{
    return unbuilt(chat ? unbuilt_chat : unbuilt_gen, key);
}

int srv_ollama_fields(gen_job *j, json_t *b, int chat, const char **prompt, const char **system)
{
    json_t *msgs = json_object_get(b, "messages");
    int rc;

    *prompt = *system = NULL;
    if ((rc = refuse_unbuilt(b, chat ? unbuilt_chat : unbuilt_gen, "")) < 0 ||
        (rc = logprobs_read(j, b, 0, chat)) < 0 || (rc = parse_think(j, b, 0, chat)) < 0 ||
        (rc = job_options(j, b)) < 0 ||
        (rc = srv_field_bool(&j->raw, b, "raw", "raw")) < 0 || (rc = ollama_format(j, b)) < 0)
        return rc;
    if (!chat && ((rc = srv_field_str(prompt, b, "prompt", "prompt")) < 0 ||
                  (rc = srv_field_str(system, b, "system", "system")) < 0))
        return rc;
    if (chat && msgs && !json_is_null(msgs) && (rc = chat_messages(j, msgs)) < 0)
        return rc;
    if (chat && (rc = tools_read(j, json_object_get(b, "tools"))) < 0)
        return rc;
    return 0;
}

int srv_openai_fields(gen_job *j, json_t *b, int chat, const char **model)
{
    int rc;

    *model = NULL;
    rc = chat ? parse_messages(j, json_object_get(b, "messages")) : parse_prompt(j, json_object_get(b, "prompt"));
    if (rc < 0 || (rc = parse_common(j, b, chat)) < 0)
        return rc;
    return srv_field_str(model, b, "model", "model");
}

void srv_request_fields_free(gen_job *j)
{
    for (size_t i = 0; i < j->n_msgs; i++) {
        free((char *)j->msgs[i].role);
        free((char *)j->msgs[i].content);
        chat_tool_calls_free((chat_tool_call *)j->msgs[i].tool_calls, j->msgs[i].n_tool_calls);
        MS_FREE_ALL((char *)j->msgs[i].tool_name, (char *)j->msgs[i].tool_call_id,
                    (char *)j->msgs[i].thinking);
    }
    for (size_t i = 0; i < j->n_tools; i++) {
        MS_FREE_ALL((char *)j->tools[i].name, (char *)j->tools[i].description,
                    (char *)j->tools[i].parameters);
    }
    free(j->tools);
    free(j->tool_named);
    j->tools = NULL, j->tool_named = NULL;
    j->n_tools = 0;
    free(j->msgs);
    j->msgs = NULL;
    j->n_msgs = 0;
    for (size_t i = 0; i < j->g.n_stops; i++)
        free(j->stops[i]);
    j->g.n_stops = 0;
    MS_FREE_ALL(j->prompt, j->system, j->format);
    j->prompt = j->system = j->format = NULL;
    j->mo.format = NULL;
}

/* ---------------------------------------------------------------- embeddings */

/* What an "input" holds, counted before anything is allocated for it: the inputs, the token
 * ids of OpenAI's token arrays, the bytes of the texts. Each element is checked here, so the
 * copy that follows cannot fail on one. MS_EINVALID naming the element. */
typedef struct input_shape {
    size_t n, n_ids, bytes;
    int tokens; /* 1: the input is token arrays (one, or an array of them) */
} input_shape;

static int token_ids_check(json_t *a, const char *shown, size_t *n_ids)
{
    size_t k;
    json_t *v;

    if (json_array_size(a) > SESSION_EMBED_MAX_IDS)
        return ms_err(MS_EINVALID, "%s: %zu token ids, at most %u", shown, json_array_size(a), SESSION_EMBED_MAX_IDS);
    json_array_foreach(a, k, v)
    {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX)
            return ms_err(MS_EINVALID, "%s[%zu]: expected a token id (an integer from 0)", shown, k);
    }
    *n_ids += json_array_size(a);
    return 0;
}

static int input_count(input_shape *sh, json_t *in, int openai)
{
    const char *expect = openai ? "a string, an array of strings, an array of token ids or an array of them"
                                : "a string or an array of strings";
    char shown[48];
    size_t i;
    json_t *v;
    int rc;

    memset(sh, 0, sizeof *sh);
    if (json_is_string(in)) {
        sh->n = json_string_length(in) > 0 || openai;
        sh->bytes = json_string_length(in);
        return 0;
    }
    if (!json_is_array(in))
        return ms_err(MS_EINVALID, "input: expected %s", expect);
    if (openai && json_is_integer(json_array_get(in, 0))) { /* one token array */
        sh->n = 1, sh->tokens = 1;
        return token_ids_check(in, "input", &sh->n_ids);
    }
    if (json_array_size(in) > SESSION_EMBED_MAX_INPUTS)
        return ms_err(MS_EINVALID, "input: %zu inputs, at most %d", json_array_size(in), SESSION_EMBED_MAX_INPUTS);
    sh->tokens = openai && json_is_array(json_array_get(in, 0));
    json_array_foreach(in, i, v)
    {
        snprintf(shown, sizeof shown, "input[%zu]", i);
        if (sh->tokens && json_is_array(v)) {
            if ((rc = token_ids_check(v, shown, &sh->n_ids)) < 0)
                return rc;
        } else if (!sh->tokens && json_is_string(v)) {
            sh->bytes += json_string_length(v);
        } else if (i == 0) {
            return ms_err(MS_EINVALID, "%s: expected %s", shown,
                          openai ? "a string, an array of token ids or a token id" : "a string");
        } else {
            return ms_err(MS_EINVALID, "%s: expected %s, as input[0] is", shown,
                          sh->tokens ? "an array of token ids" : "a string");
        }
        if (sh->n_ids > SESSION_EMBED_MAX_IDS || sh->bytes > SESSION_EMBED_MAX_BYTES)
            return ms_err(MS_EINVALID, "input: more than %u bytes of text or %u token ids", SESSION_EMBED_MAX_BYTES,
                          SESSION_EMBED_MAX_IDS);
    }
    sh->n = json_array_size(in);
    return 0;
}

/* The counted input into e: texts borrowed from the body, ids copied into e->ids. */
static int input_read(embed_req *e, json_t *in, const input_shape *sh)
{
    size_t i, at = 0;
    int one_array = json_is_array(in) && json_is_integer(json_array_get(in, 0)); /* [1, 2, 3] */

    if (sh->n == 0)
        return 0;
    if (!(e->in = calloc(sh->n, sizeof *e->in)) || (sh->n_ids && !(e->ids = malloc(sh->n_ids * sizeof *e->ids))))
        return ms_err(MS_ENOMEM, "out of memory");
    e->n = sh->n;
    if (json_is_string(in)) {
        e->in[0].text = json_string_value(in), e->in[0].len = json_string_length(in);
        return 0;
    }
    for (i = 0; i < sh->n; i++) {
        json_t *a = one_array ? in : json_array_get(in, i);
        if (!sh->tokens) {
            e->in[i].text = json_string_value(a), e->in[i].len = json_string_length(a);
            continue;
        }
        e->in[i].ids = e->ids ? e->ids + at : NULL;
        e->in[i].n_ids = json_array_size(a);
        for (size_t k = 0; k < e->in[i].n_ids; k++)
            e->ids[at++] = (int32_t)json_integer_value(json_array_get(a, k));
    }
    return 0;
}

/* The fields beside the input: ollama's truncate, keep_alive and options; OpenAI's
 * encoding_format and user; dimensions on both new endpoints. */
static int embed_options(embed_req *e, json_t *b)
{
    json_t *o = json_object_get(b, "options"), *ka = json_object_get(b, "keep_alive");
    const char *fmt, *user;
    double d;
    int set, rc;

    if (e->kind != EMBED_OLLAMA_OLD) {
        if ((rc = srv_field_num(&d, &set, b, "dimensions", "dimensions", 1, 1 << 20, 1)) < 0)
            return rc;
        e->dimensions = set ? (int)d : 0;
    }
    if (e->kind == EMBED_OPENAI) {
        if ((rc = srv_field_str(&fmt, b, "encoding_format", "encoding_format")) < 0 ||
            (rc = srv_field_str(&user, b, "user", "user")) < 0) /* user: OpenAI's abuse tracking, unused */
            return rc;
        if (fmt && strcmp(fmt, "float") != 0 && strcmp(fmt, "base64") != 0)
            return ms_err(MS_EINVALID, "encoding_format: expected \"float\" or \"base64\"");
        e->base64 = fmt && strcmp(fmt, "base64") == 0;
        return 0;
    }
    if (e->kind == EMBED_OLLAMA && (rc = srv_field_bool(&e->truncate, b, "truncate", "truncate")) < 0)
        return rc;
    if (ka && !json_is_null(ka) && (rc = srv_duration_s(&e->keep_alive_s, ka)) < 0)
        return rc;
    if (o && !json_is_null(o) && !json_is_object(o))
        return ms_err(MS_EINVALID, "options: expected an object");
    return json_is_object(o) ? model_opts_from_json(&e->mo, o, "options.", 0) : 0;
}

int srv_embed_fields(embed_req *e, json_t *b, embed_kind kind, int keep_alive_s, const char **model)
{
    json_t *in = json_object_get(b, kind == EMBED_OLLAMA_OLD ? "prompt" : "input");
    input_shape sh = {0};
    int rc;

    memset(e, 0, sizeof *e);
    e->kind = kind, e->truncate = 1, e->keep_alive_s = keep_alive_s;
    model_opts_defaults(&e->mo);
    *model = kind == EMBED_OPENAI ? json_string_value(json_object_get(b, "model")) : srv_body_model(b);
    if (kind == EMBED_OPENAI && json_object_get(b, "model") && !json_is_string(json_object_get(b, "model")))
        return ms_err(MS_EINVALID, "model: expected a string");
    if (kind == EMBED_OLLAMA_OLD && in && !json_is_null(in) && !json_is_string(in))
        return ms_err(MS_EINVALID, "prompt: expected a string");
    if (kind == EMBED_OPENAI && (!in || json_is_null(in)))
        return ms_err(MS_EINVALID, "input: required");
    if (in && !json_is_null(in) && (rc = input_count(&sh, in, kind == EMBED_OPENAI)) < 0)
        return rc;
    if (kind == EMBED_OPENAI && (sh.n == 0 || (json_is_string(in) && sh.bytes == 0)))
        return ms_err(MS_EINVALID, "input: expected a non-empty string or array");
    if ((rc = embed_options(e, b)) < 0)
        return rc;
    return input_read(e, in, &sh);
}

void srv_embed_fields_free(embed_req *e)
{
    free(e->in);
    free(e->ids);
    e->in = NULL, e->ids = NULL;
    e->n = 0;
}
