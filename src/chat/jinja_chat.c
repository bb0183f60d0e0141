/* jinja_chat.c: a chat rendered by the model's own Jinja template. The context is what
 * transformers' apply_chat_template passes: messages as Hugging Face shapes them (an assistant's
 * tool_calls as [{"type": "function", "id"?, "function": {"name", "arguments": {..}}}] with the
 * arguments a dict, a tool result as role "tool" with name and tool_call_id, an assistant's
 * thinking where the client sent it back, as gpt-oss's template reads it), tools in the
 * OpenAI shape, add_generation_prompt, bos_token, eos_token, enable_thinking when the
 * request set thinking on or off, and reasoning_effort when it gave a level (gpt-oss's). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chat_int.h"
#include "util/util.h"

/* o[key] = the JSON text s parsed (arguments, parameters); MS_EINVALID naming `what` */
static int set_parsed(json_t *o, const char *key, const char *s, const char *what)
{
    json_error_t e;
    json_t *v = json_loads(s, JSON_DECODE_ANY, &e);
    if (!v)
        return ms_err(MS_EINVALID, "%s is not JSON: %s", what, e.text);
    return json_object_set_new(o, key, v) < 0 ? ms_err(MS_ENOMEM, "chat: out of memory") : 0;
}

static int set_str(json_t *o, const char *key, const char *s)
{
    return s && json_object_set_new(o, key, json_string(s)) < 0 ? ms_err(MS_ENOMEM, "chat: out of memory") : 0;
}

static int add_message(json_t *arr, const chat_msg *m)
{
    json_t *o = json_object(), *calls = NULL;
    int rc = MS_ENOMEM;

    if (!o || json_array_append_new(arr, o) < 0)
        return ms_err(MS_ENOMEM, "chat: out of memory");
    if (set_str(o, "role", m->role ? m->role : "user") < 0 || set_str(o, "content", m->content ? m->content : "") < 0)
        return MS_ENOMEM;
    if (m->n_tool_calls) {
        if (!(calls = json_array()) || json_object_set_new(o, "tool_calls", calls) < 0)
            return ms_err(MS_ENOMEM, "chat: out of memory");
        for (size_t k = 0; k < m->n_tool_calls; k++) {
            const chat_tool_call *tc = &m->tool_calls[k];
            json_t *call = json_object(), *fn = json_object();
            /* keys in OpenAI's order: id, type, function */
            if (!call || !fn || json_array_append_new(calls, call) < 0 || set_str(call, "id", tc->id) < 0 ||
                set_str(call, "type", "function") < 0 || json_object_set_new(call, "function", fn) < 0 ||
                set_str(fn, "name", tc->name ? tc->name : "") < 0)
                return ms_err(MS_ENOMEM, "chat: out of memory");
            if ((rc = set_parsed(fn, "arguments", tc->arguments ? tc->arguments : "{}", "a tool call's arguments")) < 0)
                return rc;
        }
    }
    /* an assistant's reasoning as ollama's clients send it back: gpt-oss's template writes it as
     * the analysis before the calls it led to */
    if (set_str(o, "name", m->tool_name) < 0 || set_str(o, "tool_call_id", m->tool_call_id) < 0 ||
        set_str(o, "thinking", m->thinking) < 0)
        return MS_ENOMEM;
    return 0;
}

static int add_tool(json_t *arr, const chat_tool *tool)
{
    json_t *o = json_object(), *fn = json_object();
    if (!o || !fn || json_array_append_new(arr, o) < 0 || set_str(o, "type", "function") < 0 ||
        json_object_set_new(o, "function", fn) < 0 || set_str(fn, "name", tool->name ? tool->name : "") < 0 ||
        set_str(fn, "description", tool->description) < 0)
        return ms_err(MS_ENOMEM, "chat: out of memory");
    return tool->parameters ? set_parsed(fn, "parameters", tool->parameters, "a tool's parameters") : 0;
}

int chat__render_jinja(char **out, size_t *len_out, const chat_template *t, const chat_msg *m, size_t n,
                       const chat_tool *tools, size_t n_tools, int gen, int think)
{
    json_t *ctx = json_object(), *msgs = json_array(), *tl = NULL;
    char *text = NULL;
    int rc = ms_err(MS_ENOMEM, "chat: out of memory");

    *out = NULL;
    *len_out = 0;
    if (!ctx || !msgs || json_object_set_new(ctx, "messages", msgs) < 0)
        goto done;
    for (size_t k = 0; k < n; k++)
        if ((rc = add_message(msgs, &m[k])) < 0)
            goto done;
    if (n_tools) {
        if (!(tl = json_array()) || json_object_set_new(ctx, "tools", tl) < 0)
            goto done;
        for (size_t k = 0; k < n_tools; k++)
            if ((rc = add_tool(tl, &tools[k])) < 0)
                goto done;
    }
    if (json_object_set_new(ctx, "add_generation_prompt", json_boolean(gen)) < 0 ||
        set_str(ctx, "bos_token", t->bos) < 0 || set_str(ctx, "eos_token", t->eos) < 0 ||
        (think >= 0 && json_object_set_new(ctx, "enable_thinking", json_boolean(think > 0)) < 0) ||
        set_str(ctx, "reasoning_effort", chat_think_effort(think)) < 0 ||
        !(text = json_dumps(ctx, JSON_COMPACT | JSON_ENSURE_ASCII | JSON_PRESERVE_ORDER)))
        goto done;
    rc = chat_jinja_render_json(out, len_out, t->jinja, text);
done:
    free(text);
    json_decref(ctx);
    return rc;
}
