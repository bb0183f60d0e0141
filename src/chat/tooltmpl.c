/* tooltmpl.c: the templates that render tools (Meta's Llama 3.1 / 3.2, Qwen 2.5, Mistral Nemo):
 * recognizing them by the fixed texts they write, and rendering them with their tools, calls and
 * results as jinja2 does (tests/data/chat). chat.c calls these from its detection and rendering. */
#include <stdlib.h>
#include <string.h>

#include "chat/chat.h"
#include "chat/chat_int.h"
#include "util/util.h"

static int is(const chat_msg *m, const char *role)
{
    return m->role && strcmp(m->role, role) == 0;
}
static const char *content(const chat_msg *m)
{
    return m->content ? m->content : "";
}

/* The texts the tool-rendering templates write around tools, shared by detection (which finds
 * them in the template's source) and rendering. */
static const char QWEN_TOOLS_HEAD[] = "\n\n# Tools\n\nYou may call one or more functions to assist with the user "
                                      "query.\n\nYou are provided with function signatures within <tools></tools> "
                                      "XML tags:\n<tools>";
static const char QWEN_TOOLS_TAIL[] =
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
    "<args-json-object>}\n</tool_call><|im_end|>\n";
static const char LLAMA31_TOOLS_USER[] =
    "Given the following functions, please respond with a JSON for a function call with its proper arguments "
    "that best answers the given prompt.\n\nRespond in the format {\"name\": function name, \"parameters\": "
    "dictionary of argument name and its value}.Do not use variables.\n\n";

/* 1 when the template's source holds `text` as a double-quoted Jinja string literal would write
 * it (\n, \" and \\ escaped): how the tool-rendering templates write their fixed texts. */
static int has_literal(const char *s, const char *text)
{
    char esc[1024];
    size_t o = 0;

    for (const char *p = text; *p && o + 2 < sizeof esc; p++) {
        if (*p == '\n' || *p == '"' || *p == '\\')
            esc[o++] = '\\';
        esc[o++] = *p == '\n' ? 'n' : *p;
    }
    esc[o] = '\0';
    return strstr(s, esc) != NULL;
}

/* Qwen 2.5's tools: its "# Tools" system block, a "\n" before each <tool_call> and the results in
 * <tool_response>. Qwen 3 and QwQ differ (reasoning, no "\n" before a first call): not these. */
int chat__qwen25_tools(const char *s)
{
    return has_literal(s, QWEN_TOOLS_HEAD) && has_literal(s, QWEN_TOOLS_TAIL) &&
           strstr(s, "'\\n<tool_call>\\n{\"name\": \"'") && strstr(s, "'\\n<tool_response>\\n'") &&
           !strstr(s, "reasoning_content") && !strstr(s, "<think>");
}

/* Llama 3.1 / 3.2 / 3.3 instruct: the system header with its dates, tools in the first user
 * message, "parameters" calls and "ipython" results. 3.2 writes strftime_now's date where the
 * renderer defines it (transformers); without it, as here and as jinja2 alone renders it, the
 * date the template falls back to ("26 Jul 2024"), so that a prompt does not change by the day. */
int chat__llama31(chat_template *t, const char *s)
{
    const char *d = strstr(s, "set date_string = \""), *end;

    if (!(strstr(s, "Cutting Knowledge Date: December 2023\\n") && strstr(s, "Today Date: \" + date_string") &&
          strstr(s, "Environment: ipython\\n") && strstr(s, "tools_in_user_message") &&
          strstr(s, "Given the following functions, please respond with a JSON for a function call ") &&
          strstr(s, "'\"parameters\": '") && strstr(s, "<|start_header_id|>ipython<|end_header_id|>\\n\\n") &&
          strstr(s, "message.content | tojson")))
        return chat__warning_set(t, "a Llama 3.1+ template unlike Meta's: rendered as Llama 3, without its "
                                    "knowledge-date system header and tools");
    d = d ? d + strlen("set date_string = \"") : NULL;
    end = d ? strchr(d, '"') : NULL;
    t->date = d && end && end - d < 64 ? ms_strdup_printf("%.*s", (int)(end - d), d) : ms_strdup_printf("26 Jul 2024");
    if (!t->date)
        return ms_err(MS_ENOMEM, "chat: out of memory");
    t->flags |= F_LLAMA31 | F_TOOLS;
    return 0;
}

/* Mistral Nemo 2407's template, as its tokenizer_config.json has it. Mistral's other templates
 * ("[INST] " with spaces in v0.3, trimmed contents, different eos placement) would render
 * differently: they stay plain. */
int chat__mistral_nemo(const char *s)
{
    return strstr(s, "{{- \"[AVAILABLE_TOOLS][\" }}") && strstr(s, "{{- \"[TOOL_CALLS][\" }}") &&
           strstr(s, "{{- \"[INST]\" + message[\"content\"] + \"[/INST]\" }}") &&
           strstr(s, "{{- \"[INST]\" + system_message + \"\\n\\n\" + message[\"content\"] + \"[/INST]\" }}") &&
           strstr(s, "{%- if loop.last and system_message is defined %}") &&
           strstr(s, "{{- message[\"content\"] + eos_token}}") && strstr(s, "{{- out[:-1] }}") &&
           strstr(s, "'[TOOL_RESULTS]{\"content\": ' + content|string + \", \"") &&
           strstr(s, "'\"call_id\": \"' + message.tool_call_id + '\"}[/TOOL_RESULTS]'");
}

static int refuse(const char *why)
{
    return ms_err(MS_EINVALID, "chat: %s", why);
}

/* A call's arguments as the templates' `tool_call.arguments | tojson` writes the dict the client
 * sent (a missing one: as "{}"). */
static int put_arguments(chat_buf *b, const chat_tool_call *c)
{
    char *what = ms_strdup_printf("tool call '%s': arguments", c->name ? c->name : "");
    int rc = what ? chat__tojson(b, c->arguments ? c->arguments : "{}", 0, what) : (b->oom = 1, 0);

    free(what);
    return rc;
}

/* Llama 3.1's system turn: tools announced by "Environment: ipython", then the template's dates
 * and the system message, trimmed. */
static void llama31_system(chat_buf *b, const chat_template *t, const char *sys, int tools)
{
    chat__puts(b, "<|start_header_id|>system<|end_header_id|>\n\n");
    if (tools)
        chat__puts(b, "Environment: ipython\n");
    chat__puts(b, "Cutting Knowledge Date: December 2023\nToday Date: ");
    chat__puts(b, t->date);
    chat__puts(b, "\n\n");
    chat__put_trimmed(b, sys);
    chat__puts(b, "<|eot_id|>");
}

/* One message after Llama 3.1's header: a tool call as {"name": .., "parameters": ..}, a tool's
 * result as the JSON string of its content (the template's `content is iterable` holds for
 * strings), any other turn as Llama 3 writes it. */
static int llama31_message(chat_buf *b, const chat_msg *m)
{
    if (m->n_tool_calls > 0) {
        if (m->n_tool_calls != 1)
            return refuse("This model only supports single tool-calls at once!");
        chat__puts(b, "<|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"");
        chat__puts(b, m->tool_calls[0].name ? m->tool_calls[0].name : "");
        chat__puts(b, "\", \"parameters\": ");
        if (put_arguments(b, &m->tool_calls[0]) < 0)
            return MS_EINVALID;
        chat__puts(b, "}<|eot_id|>");
    } else if (is(m, "tool") || is(m, "ipython")) {
        chat__puts(b, "<|start_header_id|>ipython<|end_header_id|>\n\n");
        if (m->content)
            chat__tojson_str(b, m->content);
        else
            chat__puts(b, "None"); /* the template prints a None content as Python does */
        chat__puts(b, "<|eot_id|>");
    } else {
        chat__puts(b, "<|start_header_id|>");
        chat__puts(b, m->role ? m->role : "");
        chat__puts(b, "<|end_header_id|>\n\n");
        chat__put_trimmed(b, content(m));
        chat__puts(b, "<|eot_id|>");
    }
    return 0;
}

/* Llama 3.1 / 3.2 instruct: the tools go into the first message after the system turn, whatever
 * its role, which the template refuses to do without one. */
int chat__render_llama31(chat_buf *b, const chat_template *t, const chat_msg *m, size_t n, const chat_tool *tools,
                         size_t n_tools, int gen)
{
    size_t i = 0;
    int rc;

    if (t->flags & F_BOS)
        chat__puts(b, t->bos);
    if (n > 0 && is(&m[0], "system"))
        i = 1;
    llama31_system(b, t, i ? content(&m[0]) : "", n_tools > 0);
    if (n_tools > 0) {
        if (i == n)
            return refuse("Cannot put tools in the first user message when there's no first user message!");
        chat__puts(b, "<|start_header_id|>user<|end_header_id|>\n\n");
        chat__puts(b, LLAMA31_TOOLS_USER);
        for (size_t k = 0; k < n_tools; k++) {
            if ((rc = chat__tojson_tool(b, &tools[k], 4)) < 0)
                return rc;
            chat__puts(b, "\n\n");
        }
        chat__put_trimmed(b, content(&m[i++]));
        chat__puts(b, "<|eot_id|>");
    }
    for (; i < n; i++)
        if ((rc = llama31_message(b, &m[i])) < 0)
            return rc;
    if (gen)
        chat__puts(b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
    return 0;
}

/* Qwen 2.5: the system turn (the conversation's first or the default), with the tools' block
 * when there are tools. */
static int qwen25_system(chat_buf *b, const chat_template *t, const chat_msg *m, size_t n, const chat_tool *tools,
                         size_t n_tools)
{
    int rc;

    chat__puts(b, "<|im_start|>system\n");
    chat__puts(b, n > 0 && is(&m[0], "system") ? content(&m[0]) : t->default_system ? t->default_system : "");
    if (n_tools == 0) {
        chat__puts(b, "<|im_end|>\n");
        return 0;
    }
    chat__puts(b, QWEN_TOOLS_HEAD);
    for (size_t k = 0; k < n_tools; k++) {
        chat__puts(b, "\n");
        if ((rc = chat__tojson_tool(b, &tools[k], 0)) < 0)
            return rc;
    }
    chat__puts(b, QWEN_TOOLS_TAIL);
    return 0;
}

/* Qwen 2.5's assistant turn with calls: its content if any, then each call in <tool_call>. */
static int qwen25_calls(chat_buf *b, const chat_msg *m)
{
    chat__puts(b, "<|im_start|>assistant");
    if (*content(m)) {
        chat__puts(b, "\n");
        chat__puts(b, content(m));
    }
    for (size_t k = 0; k < m->n_tool_calls; k++) {
        chat__puts(b, "\n<tool_call>\n{\"name\": \"");
        chat__puts(b, m->tool_calls[k].name ? m->tool_calls[k].name : "");
        chat__puts(b, "\", \"arguments\": ");
        if (put_arguments(b, &m->tool_calls[k]) < 0)
            return MS_EINVALID;
        chat__puts(b, "}\n</tool_call>");
    }
    chat__puts(b, "<|im_end|>\n");
    return 0;
}

/* Qwen 2.5 (ChatML with tools): tool results go into one user turn per run of them, each in
 * <tool_response>; roles other than system, user, assistant and tool are dropped, as there. */
int chat__render_qwen25(chat_buf *b, const chat_template *t, const chat_msg *m, size_t n, const chat_tool *tools,
                        size_t n_tools, int gen)
{
    int rc;

    if (n > 0 && (rc = qwen25_system(b, t, m, n, tools, n_tools)) < 0)
        return rc;
    for (size_t i = 0; i < n; i++) {
        if (is(&m[i], "user") || (is(&m[i], "system") && i > 0) || (is(&m[i], "assistant") && !m[i].n_tool_calls)) {
            chat__puts(b, "<|im_start|>");
            chat__puts(b, m[i].role);
            chat__puts(b, "\n");
            chat__puts(b, content(&m[i]));
            chat__puts(b, "<|im_end|>\n");
        } else if (is(&m[i], "assistant") && (rc = qwen25_calls(b, &m[i])) < 0) {
            return rc;
        } else if (is(&m[i], "tool")) {
            if (i == 0 || !is(&m[i - 1], "tool"))
                chat__puts(b, "<|im_start|>user");
            chat__puts(b, "\n<tool_response>\n");
            chat__puts(b, content(&m[i]));
            chat__puts(b, "\n</tool_response>");
            if (i + 1 == n || !is(&m[i + 1], "tool"))
                chat__puts(b, "<|im_end|>\n");
        }
    }
    if (gen)
        chat__puts(b, "<|im_start|>assistant\n");
    return 0;
}

/* Mistral: the 9 characters the template demands of an id (Mistral's tokenizer checks them). */
static int mistral_id(const char *id)
{
    size_t chars = 0;

    for (const char *p = id ? id : ""; *p; p++)
        chars += ((unsigned char)*p & 0xC0) != 0x80; /* Jinja's length counts characters */
    return id && chars == 9 ? 0 : refuse("Tool call IDs should be alphanumeric strings with length 9!");
}

/* Mistral's [AVAILABLE_TOOLS]: each function's members in order, the template writing strings
 * between quotes unescaped and the rest with tojson. */
static int mistral_tools(chat_buf *b, const chat_tool *tools, size_t n_tools)
{
    int rc;

    chat__puts(b, "[AVAILABLE_TOOLS][");
    for (size_t k = 0; k < n_tools; k++) {
        chat__puts(b, "{\"type\": \"function\", \"function\": {\"name\": \"");
        chat__puts(b, tools[k].name ? tools[k].name : "");
        chat__puts(b, "\"");
        if (tools[k].description) {
            chat__puts(b, ", \"description\": \"");
            chat__puts(b, tools[k].description);
            chat__puts(b, "\"");
        }
        if (tools[k].parameters) {
            chat__puts(b, ", \"parameters\": ");
            if ((rc = chat__tojson(b, tools[k].parameters, 0, "tool parameters")) < 0)
                return rc;
        }
        chat__puts(b, k + 1 < n_tools ? "}}, " : "}}]");
    }
    chat__puts(b, "[/AVAILABLE_TOOLS]");
    return 0;
}

/* An assistant turn's calls: the tojson of each {"name", "arguments"} with its id added, then eos;
 * a tool's result: its content as it is, and the call's id. */
static int mistral_calls(chat_buf *b, const chat_template *t, const chat_msg *m)
{
    chat__puts(b, "[TOOL_CALLS][");
    for (size_t k = 0; k < m->n_tool_calls; k++) {
        chat__puts(b, "{\"name\": ");
        chat__tojson_str(b, m->tool_calls[k].name ? m->tool_calls[k].name : "");
        chat__puts(b, ", \"arguments\": ");
        if (put_arguments(b, &m->tool_calls[k]) < 0 || mistral_id(m->tool_calls[k].id) < 0)
            return MS_EINVALID;
        chat__puts(b, ", \"id\": \"");
        chat__puts(b, m->tool_calls[k].id);
        chat__puts(b, k + 1 < m->n_tool_calls ? "\"}, " : "\"}]");
    }
    chat__puts(b, t->eos);
    return 0;
}

static int mistral_result(chat_buf *b, const chat_msg *m)
{
    chat__puts(b, "[TOOL_RESULTS]{\"content\": ");
    chat__puts(b, m->content ? m->content : "None");
    chat__puts(b, ", ");
    if (mistral_id(m->tool_call_id) < 0)
        return MS_EINVALID;
    chat__puts(b, "\"call_id\": \"");
    chat__puts(b, m->tool_call_id);
    chat__puts(b, "\"}[/TOOL_RESULTS]");
    return 0;
}

static int is_tool_result(const chat_msg *m)
{
    return is(m, "tool") || is(m, "tool_results");
}

/* Mistral Nemo: after the system message, user and assistant alternate (calls and results
 * aside); the system message goes into the last turn only if that is the user's, and the tools
 * before the last user message (and any user message equal to it, as the template compares). */
int chat__render_mistral(chat_buf *b, const chat_template *t, const chat_msg *m, size_t n, const chat_tool *tools,
                         size_t n_tools)
{
    const char *sys = NULL, *last_user = NULL;
    size_t k = 0;
    int rc = 0;

    if (n > 0 && is(&m[0], "system"))
        sys = content(&m[0]), m++, n--;
    for (size_t i = 0; i < n; i++) {
        if (!is_tool_result(&m[i]) && !m[i].n_tool_calls && is(&m[i], "user") != (k++ % 2 == 0))
            return refuse("After the optional system message, conversation roles must alternate "
                          "user/assistant/user/assistant/...");
        if (is(&m[i], "user"))
            last_user = content(&m[i]);
    }
    if (t->flags & F_BOS)
        chat__puts(b, t->bos);
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (is(&m[i], "user")) {
            if (n_tools > 0 && strcmp(content(&m[i]), last_user) == 0 && (rc = mistral_tools(b, tools, n_tools)) < 0)
                return rc;
            chat__puts(b, "[INST]");
            if (i + 1 == n && sys) {
                chat__puts(b, sys);
                chat__puts(b, "\n\n");
            }
            chat__puts(b, content(&m[i]));
            chat__puts(b, "[/INST]");
        } else if (m[i].n_tool_calls > 0) {
            rc = mistral_calls(b, t, &m[i]);
        } else if (is(&m[i], "assistant")) {
            chat__puts(b, content(&m[i]));
            chat__puts(b, t->eos);
        } else if (is_tool_result(&m[i])) {
            rc = mistral_result(b, &m[i]);
        } else {
            rc = refuse("Only user and assistant roles are supported, with the exception of an initial optional "
                        "system message!");
        }
    }
    return rc;
}
