/* tools.c: tool calls in a model's answer, by the syntax its template gives them.
 *
 * Models write calls less strictly than their templates show them: white space varies around the
 * tags, Llama 3.1 may open with <|python_tag|>, some models write "parameters" where the template
 * says "arguments" (or the reverse), and some give the arguments as a JSON string holding the
 * object. We accept all of that; whatever does not read as a call ends the calls, keeping those
 * before it, as ollama does. Pure: no state beyond the arguments, so any text may be fed to it. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chat.h"
#include "util/util.h"

#define MAX_CALLS 64

static int is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static size_t skip_space(const char *t, size_t len, size_t i)
{
    while (i < len && is_space(t[i]))
        i++;
    return i;
}

/* A prefix or suffix without its surrounding white space, which models vary. */
static void core(const char *s, const char **out, size_t *len_out)
{
    size_t n = strlen(s);

    while (n > 0 && is_space(*s))
        s++, n--;
    while (n > 0 && is_space(s[n - 1]))
        n--;
    *out = s;
    *len_out = n;
}

/* Where `tag` (n bytes) starts in t[i..len), or len. */
static size_t find(const char *t, size_t len, size_t i, const char *tag, size_t n)
{
    for (; n > 0 && i + n <= len; i++)
        if (memcmp(t + i, tag, n) == 0)
            return i;
    return len;
}

/* i past `tag` when t[i..] starts with it, else i. */
static size_t skip_tag(const char *t, size_t len, size_t i, const char *tag, size_t n)
{
    return n > 0 && i + n <= len && memcmp(t + i, tag, n) == 0 ? i + n : i;
}

/* The JSON object or array at t[i..len) and where it ends (*end); NULL when none parses there.
 * jansson bounds the nesting and refuses bytes that are not UTF-8. */
static json_t *json_at(const char *t, size_t len, size_t i, size_t *end)
{
    json_error_t jerr;
    json_t *v;

    if (i >= len || (t[i] != '{' && t[i] != '['))
        return NULL;
    if ((v = json_loadb(t + i, len - i, JSON_DISABLE_EOF_CHECK, &jerr)) != NULL)
        *end = i + (size_t)jerr.position;
    return v;
}

/* The call's arguments: the syntax's member or the other name for it; a JSON string holding an
 * object is read as that object. strict (no prefix: any JSON answer could be taken for a call):
 * they must be there. NULL when they are not an object; else borrowed from obj, or *owned (a new
 * reference the caller drops). */
static const json_t *arguments(const json_t *obj, const chat_tool_syntax *s, int strict, json_t **owned)
{
    const char *other = strcmp(s->args_key, "parameters") == 0 ? "arguments" : "parameters";
    json_t *a = json_object_get(obj, s->args_key[0] ? s->args_key : "arguments");

    *owned = NULL;
    if (!a)
        a = json_object_get(obj, other);
    if (!a && !strict)
        return *owned = json_object();
    if (json_is_string(a)) {
        *owned = json_loadb(json_string_value(a), json_string_length(a), 0, NULL);
        a = *owned;
    }
    return json_is_object(a) ? a : NULL;
}

/* One call from a JSON object: 1, 0 when it is not a call, MS_ENOMEM. */
static int call_from(chat_tool_call *c, const json_t *obj, const chat_tool_syntax *s, int strict)
{
    const char *name = json_string_value(json_object_get(obj, s->name_key[0] ? s->name_key : "name"));
    json_t *owned = NULL;
    const json_t *args = NULL;

    memset(c, 0, sizeof *c);
    if (json_is_object(obj) && name && *name)
        args = arguments(obj, s, strict, &owned);
    if (!args) {
        json_decref(owned);
        return 0;
    }
    c->name = ms_strdup_printf("%s", name);
    c->arguments = json_dumps(args, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(owned);
    if (!c->name || !c->arguments) {
        free((char *)c->name);
        free((char *)c->arguments);
        memset(c, 0, sizeof *c);
        return ms_err(MS_ENOMEM, "chat: out of memory reading a tool call");
    }
    return 1;
}

static int add_call(chat_tool_call *c, size_t *n, const json_t *v, const chat_tool_syntax *s, int strict)
{
    int rc;

    if (*n == MAX_CALLS)
        return 0;
    if ((rc = call_from(&c[*n], v, s, strict)) > 0)
        ++*n;
    return rc;
}

/* The calls of one JSON value: an object, or an array of them (Mistral's, or a model that lists
 * its calls). 1 when all were calls, 0 when one was not (those before it are kept), MS_ENOMEM. */
static int calls_from(chat_tool_call *c, size_t *n, const json_t *v, const chat_tool_syntax *s, int strict)
{
    size_t k;
    json_t *item;
    int rc;

    if (!json_is_array(v))
        return add_call(c, n, v, s, strict);
    json_array_foreach(v, k, item)
    {
        if ((rc = add_call(c, n, item, s, strict)) <= 0)
            return rc;
    }
    return json_array_size(v) > 0;
}

/* The calls from t[i..len), i at the first: each [<|python_tag|>] prefix JSON suffix, white space
 * around each part; without a prefix, calls in a row may be separated by ';'. */
static int read_calls(chat_tool_call *c, size_t *n, const chat_tool_syntax *s, const char *t, size_t len, size_t i)
{
    const char *pre, *suf;
    size_t npre, nsuf, end;
    json_t *v;
    int rc;

    core(s->prefix, &pre, &npre);
    core(s->suffix, &suf, &nsuf);
    for (;;) {
        i = skip_space(t, len, skip_tag(t, len, skip_space(t, len, i), "<|python_tag|>", 14));
        if (npre > 0) {
            if (skip_tag(t, len, i, pre, npre) == i)
                return 0;
            i = skip_space(t, len, i + npre);
        }
        if (!(v = json_at(t, len, i, &end)))
            return 0;
        rc = calls_from(c, n, v, s, npre == 0);
        json_decref(v);
        if (rc <= 0)
            return rc;
        i = skip_tag(t, len, skip_space(t, len, end), suf, nsuf);
        if (npre == 0)
            i = skip_tag(t, len, skip_space(t, len, i), ";", 1);
    }
}

int chat_tool_calls_parse(const chat_tool_syntax *s, const char *text, size_t len, chat_tool_call **calls,
                          size_t *n_calls, size_t *content_len)
{
    chat_tool_syntax syn = *s; /* with its strings surely terminated, whoever filled it */
    const char *pre;
    size_t npre, start, n = 0;
    chat_tool_call *c;
    int rc;

    *calls = NULL, *n_calls = 0, *content_len = len;
    syn.prefix[sizeof syn.prefix - 1] = syn.suffix[sizeof syn.suffix - 1] = syn.args_key[sizeof syn.args_key - 1] =
        syn.name_key[sizeof syn.name_key - 1] = '\0';
    s = &syn;
    core(s->prefix, &pre, &npre);
    /* with a prefix the calls start at its first appearance; without, the answer is a call or not */
    start = npre > 0 ? find(text, len, 0, pre, npre) : skip_space(text, len, 0);
    if (start == len)
        return 0;
    if (!(c = calloc(MAX_CALLS, sizeof *c)))
        return ms_err(MS_ENOMEM, "chat: out of memory reading tool calls");
    if ((rc = read_calls(c, &n, s, text, len, start)) < 0 || n == 0) {
        chat_tool_calls_free(c, n);
        return rc < 0 ? rc : 0;
    }
    *calls = c, *n_calls = n, *content_len = start;
    return 0;
}

void chat_tool_calls_free(chat_tool_call *calls, size_t n)
{
    for (size_t i = 0; calls && i < n; i++) {
        MS_FREE_ALL((char *)calls[i].id, (char *)calls[i].name, (char *)calls[i].arguments);
    }
    free(calls);
}
