/* chat.c: template families, their renderers, and where template texts come from. */
#include <stdlib.h>
#include <string.h>

#include "chat/chat.h"
#include "chat/chat_int.h"

/* Flags read from the template text. */
enum {
    F_BOS = 1, /* the template writes bos_token */
    F_EOS = 2, /* ... eos_token (Phi-3.5: when there is no generation prompt) */
    F_SYS = 4, /* Phi-3: renders system turns */
    F_SYS_NONEMPTY = 8, /* Phi-3.5: only when their content is not empty */
    F_GEN = 16, /* Phi-3: add_generation_prompt decides; else <|assistant|> after each user turn */
    F_BARE = 32, /* plain: there is no template at all (ollama's "{{ .Prompt }}") */
    F_TOOLS = 64, /* renders tools, tool calls and results: Llama 3.1 / 3.2, Qwen 2.5 */
    F_LLAMA31 = 128, /* llama3: the 3.1 system header (knowledge date, today's date, tools) */
};

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

struct chat_template {
    chat_family family;
    unsigned flags;
    char *bos, *eos;
    char *default_system; /* chatml: the system turn written when the conversation has none */
    char *date; /* F_LLAMA31: the "Today Date" the template falls back to */
    char *warning;
    chat_gotmpl *go; /* CHAT_OLLAMA: the parsed Go template */
};

const char *chat_family_name(chat_family f)
{
    static const char *const names[] = {"plain", "llama2", "llama3", "chatml", "gemma", "phi3", "ollama", "mistral"};
    return (unsigned)f < sizeof names / sizeof *names ? names[f] : "?";
}

chat_family chat_template_family(const chat_template *t)
{
    return t->family;
}
const char *chat_template_warning(const chat_template *t)
{
    return t->warning;
}

void chat_template_free(chat_template *t)
{
    if (!t)
        return;
    free(t->bos);
    free(t->eos);
    free(t->default_system);
    free(t->date);
    free(t->warning);
    chat_gotmpl_free(t->go);
    free(t);
}

static char *dup_or_empty(const char *s)
{
    return ms_strdup_printf("%s", s ? s : "");
}

/* ChatML templates that write a system turn of their own when the conversation has none (Qwen 2:
 * "You are a helpful assistant."; Qwen 2.5: "You are Qwen, created by Alibaba Cloud. ..."):
 * the first "<|im_start|>system\n" followed by literal text rather than the end of a string
 * literal. The Jinja escapes \n, \' and \" in that text are undone. */
static int chatml_default_system(chat_template *t, const char *s)
{
    static const char *const heads[] = {"<|im_start|>system\\n", "<|im_start|>system\n"};
    const char *best = NULL, *end;
    size_t k, o = 0;

    for (k = 0; k < 2; k++)
        for (const char *p = s; (p = strstr(p, heads[k])) != NULL; p++) {
            const char *q = p + strlen(heads[k]);
            if (*q != '\'' && *q != '"' && strncmp(q, "<|im_end|>", 10) != 0 && (!best || q < best)) {
                best = q;
                break;
            }
        }
    if (!best || !(end = strstr(best, "<|im_end|>")))
        return 0;
    if (!(t->default_system = malloc((size_t)(end - best) + 1)))
        return ms_err(MS_ENOMEM, "chat: out of memory");
    for (const char *p = best; p < end; p++) {
        if (*p == '\\' && p + 1 < end && (p[1] == 'n' || p[1] == '\'' || p[1] == '"' || p[1] == '\\'))
            t->default_system[o++] = *++p == 'n' ? '\n' : *p;
        else
            t->default_system[o++] = *p;
    }
    t->default_system[o] = '\0';
    return 0;
}

static int set_warning(chat_template *t, const char *msg)
{
    if (!(t->warning = ms_strdup_printf("%s", msg)))
        return ms_err(MS_ENOMEM, "chat: out of memory");
    return 0;
}

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
static int qwen25_tools(const char *s)
{
    return has_literal(s, QWEN_TOOLS_HEAD) && has_literal(s, QWEN_TOOLS_TAIL) &&
           strstr(s, "'\\n<tool_call>\\n{\"name\": \"'") && strstr(s, "'\\n<tool_response>\\n'") &&
           !strstr(s, "reasoning_content") && !strstr(s, "<think>");
}

/* Llama 3.1 / 3.2 / 3.3 instruct: the system header with its dates, tools in the first user
 * message, "parameters" calls and "ipython" results. 3.2 writes strftime_now's date where the
 * renderer defines it (transformers); without it, as here and as jinja2 alone renders it, the
 * date the template falls back to ("26 Jul 2024"), so that a prompt does not change by the day. */
static int llama31(chat_template *t, const char *s)
{
    const char *d = strstr(s, "set date_string = \""), *end;

    if (!(strstr(s, "Cutting Knowledge Date: December 2023\\n") && strstr(s, "Today Date: \" + date_string") &&
          strstr(s, "Environment: ipython\\n") && strstr(s, "tools_in_user_message") &&
          strstr(s, "Given the following functions, please respond with a JSON for a function call ") &&
          strstr(s, "'\"parameters\": '") && strstr(s, "<|start_header_id|>ipython<|end_header_id|>\\n\\n") &&
          strstr(s, "message.content | tojson")))
        return set_warning(t, "a Llama 3.1+ template unlike Meta's: rendered as Llama 3, without its "
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
static int mistral_nemo(const char *s)
{
    return strstr(s, "{{- \"[AVAILABLE_TOOLS][\" }}") && strstr(s, "{{- \"[TOOL_CALLS][\" }}") &&
           strstr(s, "{{- \"[INST]\" + message[\"content\"] + \"[/INST]\" }}") &&
           strstr(s, "{{- \"[INST]\" + system_message + \"\\n\\n\" + message[\"content\"] + \"[/INST]\" }}") &&
           strstr(s, "{%- if loop.last and system_message is defined %}") &&
           strstr(s, "{{- message[\"content\"] + eos_token}}") && strstr(s, "{{- out[:-1] }}") &&
           strstr(s, "'[TOOL_RESULTS]{\"content\": ' + content|string + \", \"") &&
           strstr(s, "'\"call_id\": \"' + message.tool_call_id + '\"}[/TOOL_RESULTS]'");
}

/* Family by markers, in llama.cpp's order of checks. */
static int detect(chat_template *t, const char *s)
{
    int has_bos = strstr(s, "bos_token") != NULL;

    if (strstr(s, "<|im_start|>")) {
        t->family = CHAT_CHATML;
        t->flags = qwen25_tools(s) ? F_TOOLS : 0;
        return chatml_default_system(t, s);
    }
    if (strstr(s, "[INST]")) {
        if (!strstr(s, "<<SYS>>") && mistral_nemo(s)) {
            t->family = CHAT_MISTRAL;
            t->flags = F_TOOLS | (has_bos ? F_BOS : 0);
            return 0;
        }
        if (!strstr(s, "<<SYS>>"))
            return set_warning(t, "an [INST] template without <<SYS>> (Mistral style) other than Mistral "
                                  "Nemo's is not supported: rendering plainly");
        t->family = CHAT_LLAMA2;
        return 0;
    }
    if (strstr(s, "<|start_header_id|>") && strstr(s, "<|end_header_id|>")) {
        t->family = CHAT_LLAMA3;
        t->flags = has_bos ? F_BOS : 0;
        return strstr(s, "Cutting Knowledge Date") ? llama31(t, s) : 0;
    }
    if (strstr(s, "<start_of_turn>")) {
        t->family = CHAT_GEMMA;
        t->flags = has_bos ? F_BOS : 0;
        return 0;
    }
    if (strstr(s, "<|user|>") && strstr(s, "<|end|>") && strstr(s, "<|assistant|>")) {
        t->family = CHAT_PHI3;
        t->flags = (has_bos ? F_BOS : 0) | (strstr(s, "eos_token") ? F_EOS : 0) |
                   (strstr(s, "<|system|>") ? F_SYS : 0) |
                   (strstr(s, "'system' and message['content']") ? F_SYS_NONEMPTY : 0) |
                   (strstr(s, "add_generation_prompt") ? F_GEN : 0);
        return 0;
    }
    return set_warning(t, "the chat template is of no family mstore knows (llama2, llama3, chatml, gemma, "
                          "phi3, mistral): rendering plainly");
}

/* An ollama Go template: rendered by gotmpl.c when it is inside the subset and renders a trial
 * conversation; otherwise the family by markers (detect) with a warning that says why. */
static int go_template(chat_template *t, const char *s, size_t len)
{
    static const chat_msg trial[] = {{.role = "system", .content = "s"},
                                     {.role = "user", .content = "u"},
                                     {.role = "assistant", .content = "a"},
                                     {.role = "user", .content = "u"}};
    char *out = NULL, *why;
    size_t olen;
    int rc;

    if ((rc = chat_gotmpl_parse(&t->go, s, len)) == 0 && (rc = chat_gotmpl_render(&out, &olen, t->go, trial, 4)) == 0) {
        free(out);
        t->family = CHAT_OLLAMA;
        return 0;
    }
    if (rc == MS_ENOMEM)
        return rc;
    chat_gotmpl_free(t->go);
    t->go = NULL;
    if (!(why = ms_strdup_printf("%s", ms_err_msg())))
        return ms_err(MS_ENOMEM, "chat: out of memory");
    if ((rc = detect(t, s)) == 0) {
        char *w =
            ms_strdup_printf("the Go template is outside the subset mstore renders (%s): rendering as %s%s%s", why,
                             chat_family_name(t->family), t->warning ? "; " : "", t->warning ? t->warning : "");
        free(t->warning);
        t->warning = w;
        rc = w ? 0 : ms_err(MS_ENOMEM, "chat: out of memory");
    }
    free(why);
    return rc;
}

int chat_template_new(chat_template **out, const char *text, size_t len, const char *bos, const char *eos)
{
    chat_template *t = calloc(1, sizeof *t);
    char *s = NULL;
    int rc;

    *out = NULL;
    if (!t)
        return ms_err(MS_ENOMEM, "chat: out of memory");
    t->family = CHAT_PLAIN;
    if (!(t->bos = dup_or_empty(bos)) || !(t->eos = dup_or_empty(eos))) {
        rc = ms_err(MS_ENOMEM, "chat: out of memory");
        goto fail;
    }
    if (!text || len == 0) {
        t->flags = F_BARE;
        if ((rc = set_warning(t, "the model has no chat template: the user's messages are the bare prompt")) < 0)
            goto fail;
        *out = t;
        return 0;
    }
    /* A NUL inside would hide the rest from strstr: look at the text up to it, as C sees it. */
    if (!(s = malloc(len + 1))) {
        rc = ms_err(MS_ENOMEM, "chat: out of memory for a template of %zu bytes", len);
        goto fail;
    }
    memcpy(s, text, len);
    s[len] = '\0';
    /* go_template falls back to detect itself, with a warning that says why */
    if ((rc = chat_gotmpl_looks(s, len) ? go_template(t, s, len) : detect(t, s)) < 0)
        goto fail;
    free(s);
    *out = t;
    return 0;
fail:
    free(s);
    chat_template_free(t);
    return rc;
}

/* ---------------------------------------------------------------- rendering */

typedef chat_buf sbuf;

static void put(sbuf *b, const char *s, size_t len)
{
    chat__put(b, s, len);
}

static void puts_(sbuf *b, const char *s)
{
    chat__puts(b, s);
}

/* Python's str.isspace at the start of s (Jinja's trim and str.strip use it): its length in
 * bytes, or 0. */
static size_t space_at(const unsigned char *s, size_t left)
{
    uint32_t c;
    size_t k;

    if (left == 0)
        return 0;
    if (s[0] < 0x80)
        return (s[0] >= 0x09 && s[0] <= 0x0D) || (s[0] >= 0x1C && s[0] <= 0x20) ? 1 : 0;
    if ((s[0] & 0xE0) == 0xC0 && left >= 2)
        c = (uint32_t)(s[0] & 0x1F) << 6 | (s[1] & 0x3F), k = 2;
    else if ((s[0] & 0xF0) == 0xE0 && left >= 3)
        c = (uint32_t)(s[0] & 0x0F) << 12 | (uint32_t)(s[1] & 0x3F) << 6 | (s[2] & 0x3F), k = 3;
    else
        return 0;
    return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
                   c == 0x202F || c == 0x205F || c == 0x3000
               ? k
               : 0;
}

/* Put s without leading and trailing white space (Python's str.strip()). */
static void put_trimmed(sbuf *b, const char *s)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t len = strlen(s), start = 0, end = 0, k;

    while ((k = space_at(u + start, len - start)) > 0)
        start += k;
    /* the end: the last non-space character's end, scanning forward (UTF-8 has no backward
     * decoding we trust on arbitrary bytes) */
    for (size_t i = start; i < len;) {
        if ((k = space_at(u + i, len - i)) > 0) {
            i += k;
        } else {
            i++;
            while (i < len && (u[i] & 0xC0) == 0x80 && !space_at(u + i, len - i))
                i++;
            end = i;
        }
    }
    if (end > start)
        put(b, s + start, end - start);
}

static int is(const chat_msg *m, const char *role)
{
    return m->role && strcmp(m->role, role) == 0;
}
static const char *content(const chat_msg *m)
{
    return m->content ? m->content : "";
}

static int alternation_error(void)
{
    return ms_err(MS_EINVALID, "chat: conversation roles must alternate user/assistant/user/assistant/...");
}

static int render_llama2(sbuf *b, const chat_template *t, const chat_msg *m, size_t n)
{
    const char *sys = NULL;
    size_t first = 0;

    if (n > 0 && is(&m[0], "system"))
        sys = content(&m[0]), first = 1;
    for (size_t i = first; i < n; i++) {
        size_t k = i - first;
        if (is(&m[i], "user") != (k % 2 == 0))
            return alternation_error();
        if (is(&m[i], "user")) {
            puts_(b, t->bos);
            puts_(b, "[INST] ");
            if (k == 0 && sys) {
                /* The template strips the system block and the message as one string: an empty
                 * message lets the strip reach into the block's "\n\n". */
                sbuf c = {NULL, 0, 0, 0};
                puts_(&c, "<<SYS>>\n");
                puts_(&c, sys);
                puts_(&c, "\n<</SYS>>\n\n");
                puts_(&c, content(&m[i]));
                if (c.oom)
                    b->oom = 1;
                else
                    put_trimmed(b, c.p);
                free(c.p);
            } else {
                put_trimmed(b, content(&m[i]));
            }
            puts_(b, " [/INST]");
        } else if (is(&m[i], "assistant")) {
            puts_(b, " ");
            put_trimmed(b, content(&m[i]));
            puts_(b, " ");
            puts_(b, t->eos);
        }
    }
    return 0;
}

static void render_llama3(sbuf *b, const chat_template *t, const chat_msg *m, size_t n, int gen)
{
    for (size_t i = 0; i < n; i++) {
        if (i == 0 && (t->flags & F_BOS))
            puts_(b, t->bos);
        puts_(b, "<|start_header_id|>");
        puts_(b, m[i].role ? m[i].role : "");
        puts_(b, "<|end_header_id|>\n\n");
        put_trimmed(b, content(&m[i]));
        puts_(b, "<|eot_id|>");
    }
    if (gen)
        puts_(b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

static void render_chatml(sbuf *b, const chat_template *t, const chat_msg *m, size_t n, int gen)
{
    for (size_t i = 0; i < n; i++) {
        if (i == 0 && t->default_system && !is(&m[0], "system")) {
            puts_(b, "<|im_start|>system\n");
            puts_(b, t->default_system);
            puts_(b, "<|im_end|>\n");
        }
        puts_(b, "<|im_start|>");
        puts_(b, m[i].role ? m[i].role : "");
        puts_(b, "\n");
        puts_(b, content(&m[i]));
        puts_(b, "<|im_end|>\n");
    }
    if (gen)
        puts_(b, "<|im_start|>assistant\n");
}

static int refuse(const char *why)
{
    return ms_err(MS_EINVALID, "chat: %s", why);
}

/* A call's arguments as the templates' `tool_call.arguments | tojson` writes the dict the client
 * sent (a missing one: as "{}"). */
static int put_arguments(sbuf *b, const chat_tool_call *c)
{
    char *what = ms_strdup_printf("tool call '%s': arguments", c->name ? c->name : "");
    int rc = what ? chat__tojson(b, c->arguments ? c->arguments : "{}", 0, what) : (b->oom = 1, 0);

    free(what);
    return rc;
}

/* Llama 3.1's system turn: tools announced by "Environment: ipython", then the template's dates
 * and the system message, trimmed. */
static void llama31_system(sbuf *b, const chat_template *t, const char *sys, int tools)
{
    puts_(b, "<|start_header_id|>system<|end_header_id|>\n\n");
    if (tools)
        puts_(b, "Environment: ipython\n");
    puts_(b, "Cutting Knowledge Date: December 2023\nToday Date: ");
    puts_(b, t->date);
    puts_(b, "\n\n");
    put_trimmed(b, sys);
    puts_(b, "<|eot_id|>");
}

/* One message after Llama 3.1's header: a tool call as {"name": .., "parameters": ..}, a tool's
 * result as the JSON string of its content (the template's `content is iterable` holds for
 * strings), any other turn as Llama 3 writes it. */
static int llama31_message(sbuf *b, const chat_msg *m)
{
    if (m->n_tool_calls > 0) {
        if (m->n_tool_calls != 1)
            return refuse("This model only supports single tool-calls at once!");
        puts_(b, "<|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"");
        puts_(b, m->tool_calls[0].name ? m->tool_calls[0].name : "");
        puts_(b, "\", \"parameters\": ");
        if (put_arguments(b, &m->tool_calls[0]) < 0)
            return MS_EINVALID;
        puts_(b, "}<|eot_id|>");
    } else if (is(m, "tool") || is(m, "ipython")) {
        puts_(b, "<|start_header_id|>ipython<|end_header_id|>\n\n");
        if (m->content)
            chat__tojson_str(b, m->content);
        else
            puts_(b, "None"); /* the template prints a None content as Python does */
        puts_(b, "<|eot_id|>");
    } else {
        puts_(b, "<|start_header_id|>");
        puts_(b, m->role ? m->role : "");
        puts_(b, "<|end_header_id|>\n\n");
        put_trimmed(b, content(m));
        puts_(b, "<|eot_id|>");
    }
    return 0;
}

/* Llama 3.1 / 3.2 instruct: the tools go into the first message after the system turn, whatever
 * its role, which the template refuses to do without one. */
static int render_llama31(sbuf *b, const chat_template *t, const chat_msg *m, size_t n, const chat_tool *tools,
                          size_t n_tools, int gen)
{
    size_t i = 0;
    int rc;

    if (t->flags & F_BOS)
        puts_(b, t->bos);
    if (n > 0 && is(&m[0], "system"))
        i = 1;
    llama31_system(b, t, i ? content(&m[0]) : "", n_tools > 0);
    if (n_tools > 0) {
        if (i == n)
            return refuse("Cannot put tools in the first user message when there's no first user message!");
        puts_(b, "<|start_header_id|>user<|end_header_id|>\n\n");
        puts_(b, LLAMA31_TOOLS_USER);
        for (size_t k = 0; k < n_tools; k++) {
            if ((rc = chat__tojson_tool(b, &tools[k], 4)) < 0)
                return rc;
            puts_(b, "\n\n");
        }
        put_trimmed(b, content(&m[i++]));
        puts_(b, "<|eot_id|>");
    }
    for (; i < n; i++)
        if ((rc = llama31_message(b, &m[i])) < 0)
            return rc;
    if (gen)
        puts_(b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
    return 0;
}

/* Qwen 2.5: the system turn (the conversation's first or the default), with the tools' block
 * when there are tools. */
static int qwen25_system(sbuf *b, const chat_template *t, const chat_msg *m, size_t n, const chat_tool *tools,
                         size_t n_tools)
{
    int rc;

    puts_(b, "<|im_start|>system\n");
    puts_(b, n > 0 && is(&m[0], "system") ? content(&m[0]) : t->default_system ? t->default_system : "");
    if (n_tools == 0) {
        puts_(b, "<|im_end|>\n");
        return 0;
    }
    puts_(b, QWEN_TOOLS_HEAD);
    for (size_t k = 0; k < n_tools; k++) {
        puts_(b, "\n");
        if ((rc = chat__tojson_tool(b, &tools[k], 0)) < 0)
            return rc;
    }
    puts_(b, QWEN_TOOLS_TAIL);
    return 0;
}

/* Qwen 2.5's assistant turn with calls: its content if any, then each call in <tool_call>. */
static int qwen25_calls(sbuf *b, const chat_msg *m)
{
    puts_(b, "<|im_start|>assistant");
    if (*content(m)) {
        puts_(b, "\n");
        puts_(b, content(m));
    }
    for (size_t k = 0; k < m->n_tool_calls; k++) {
        puts_(b, "\n<tool_call>\n{\"name\": \"");
        puts_(b, m->tool_calls[k].name ? m->tool_calls[k].name : "");
        puts_(b, "\", \"arguments\": ");
        if (put_arguments(b, &m->tool_calls[k]) < 0)
            return MS_EINVALID;
        puts_(b, "}\n</tool_call>");
    }
    puts_(b, "<|im_end|>\n");
    return 0;
}

/* Qwen 2.5 (ChatML with tools): tool results go into one user turn per run of them, each in
 * <tool_response>; roles other than system, user, assistant and tool are dropped, as there. */
static int render_qwen25(sbuf *b, const chat_template *t, const chat_msg *m, size_t n, const chat_tool *tools,
                         size_t n_tools, int gen)
{
    int rc;

    if (n > 0 && (rc = qwen25_system(b, t, m, n, tools, n_tools)) < 0)
        return rc;
    for (size_t i = 0; i < n; i++) {
        if (is(&m[i], "user") || (is(&m[i], "system") && i > 0) || (is(&m[i], "assistant") && !m[i].n_tool_calls)) {
            puts_(b, "<|im_start|>");
            puts_(b, m[i].role);
            puts_(b, "\n");
            puts_(b, content(&m[i]));
            puts_(b, "<|im_end|>\n");
        } else if (is(&m[i], "assistant") && (rc = qwen25_calls(b, &m[i])) < 0) {
            return rc;
        } else if (is(&m[i], "tool")) {
            if (i == 0 || !is(&m[i - 1], "tool"))
                puts_(b, "<|im_start|>user");
            puts_(b, "\n<tool_response>\n");
            puts_(b, content(&m[i]));
            puts_(b, "\n</tool_response>");
            if (i + 1 == n || !is(&m[i + 1], "tool"))
                puts_(b, "<|im_end|>\n");
        }
    }
    if (gen)
        puts_(b, "<|im_start|>assistant\n");
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
static int mistral_tools(sbuf *b, const chat_tool *tools, size_t n_tools)
{
    int rc;

    puts_(b, "[AVAILABLE_TOOLS][");
    for (size_t k = 0; k < n_tools; k++) {
        puts_(b, "{\"type\": \"function\", \"function\": {\"name\": \"");
        puts_(b, tools[k].name ? tools[k].name : "");
        puts_(b, "\"");
        if (tools[k].description) {
            puts_(b, ", \"description\": \"");
            puts_(b, tools[k].description);
            puts_(b, "\"");
        }
        if (tools[k].parameters) {
            puts_(b, ", \"parameters\": ");
            if ((rc = chat__tojson(b, tools[k].parameters, 0, "tool parameters")) < 0)
                return rc;
        }
        puts_(b, k + 1 < n_tools ? "}}, " : "}}]");
    }
    puts_(b, "[/AVAILABLE_TOOLS]");
    return 0;
}

/* An assistant turn's calls: the tojson of each {"name", "arguments"} with its id added, then eos;
 * a tool's result: its content as it is, and the call's id. */
static int mistral_calls(sbuf *b, const chat_template *t, const chat_msg *m)
{
    puts_(b, "[TOOL_CALLS][");
    for (size_t k = 0; k < m->n_tool_calls; k++) {
        puts_(b, "{\"name\": ");
        chat__tojson_str(b, m->tool_calls[k].name ? m->tool_calls[k].name : "");
        puts_(b, ", \"arguments\": ");
        if (put_arguments(b, &m->tool_calls[k]) < 0 || mistral_id(m->tool_calls[k].id) < 0)
            return MS_EINVALID;
        puts_(b, ", \"id\": \"");
        puts_(b, m->tool_calls[k].id);
        puts_(b, k + 1 < m->n_tool_calls ? "\"}, " : "\"}]");
    }
    puts_(b, t->eos);
    return 0;
}

static int mistral_result(sbuf *b, const chat_msg *m)
{
    puts_(b, "[TOOL_RESULTS]{\"content\": ");
    puts_(b, m->content ? m->content : "None");
    puts_(b, ", ");
    if (mistral_id(m->tool_call_id) < 0)
        return MS_EINVALID;
    puts_(b, "\"call_id\": \"");
    puts_(b, m->tool_call_id);
    puts_(b, "\"}[/TOOL_RESULTS]");
    return 0;
}

static int is_tool_result(const chat_msg *m)
{
    return is(m, "tool") || is(m, "tool_results");
}

/* Mistral Nemo: after the system message, user and assistant alternate (calls and results
 * aside); the system message goes into the last turn only if that is the user's, and the tools
 * before the last user message (and any user message equal to it, as the template compares). */
static int render_mistral(sbuf *b, const chat_template *t, const chat_msg *m, size_t n, const chat_tool *tools,
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
        puts_(b, t->bos);
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (is(&m[i], "user")) {
            if (n_tools > 0 && strcmp(content(&m[i]), last_user) == 0 && (rc = mistral_tools(b, tools, n_tools)) < 0)
                return rc;
            puts_(b, "[INST]");
            if (i + 1 == n && sys) {
                puts_(b, sys);
                puts_(b, "\n\n");
            }
            puts_(b, content(&m[i]));
            puts_(b, "[/INST]");
        } else if (m[i].n_tool_calls > 0) {
            rc = mistral_calls(b, t, &m[i]);
        } else if (is(&m[i], "assistant")) {
            puts_(b, content(&m[i]));
            puts_(b, t->eos);
        } else if (is_tool_result(&m[i])) {
            rc = mistral_result(b, &m[i]);
        } else {
            rc = refuse("Only user and assistant roles are supported, with the exception of an initial optional "
                        "system message!");
        }
    }
    return rc;
}

static int render_gemma(sbuf *b, const chat_template *t, const chat_msg *m, size_t n, int gen)
{
    const char *sys = NULL;
    size_t first = 0;

    if (t->flags & F_BOS)
        puts_(b, t->bos);
    /* Gemma 1/2 templates refuse a system turn; Gemma 3 puts it before the first user turn. We
     * do the latter for all, so that --system works with every Gemma. */
    if (n > 0 && is(&m[0], "system"))
        sys = content(&m[0]), first = 1;
    for (size_t i = first; i < n; i++) {
        if (is(&m[i], "user") != ((i - first) % 2 == 0))
            return alternation_error();
        puts_(b, "<start_of_turn>");
        puts_(b, is(&m[i], "assistant") ? "model" : m[i].role ? m[i].role : "");
        puts_(b, "\n");
        if (i == first && sys) {
            puts_(b, sys);
            puts_(b, "\n\n");
        }
        put_trimmed(b, content(&m[i]));
        puts_(b, "<end_of_turn>\n");
    }
    if (gen)
        puts_(b, "<start_of_turn>model\n");
    return 0;
}

static void render_phi3(sbuf *b, const chat_template *t, const chat_msg *m, size_t n, int gen)
{
    unsigned f = t->flags;

    if (f & F_BOS)
        puts_(b, t->bos);
    for (size_t i = 0; i < n; i++) {
        const char *c = content(&m[i]);
        if (is(&m[i], "system")) {
            if (!(f & F_SYS) || ((f & F_SYS_NONEMPTY) && !*c))
                continue;
            puts_(b, "<|system|>\n");
        } else if (is(&m[i], "user")) {
            puts_(b, "<|user|>\n");
        } else if (is(&m[i], "assistant")) {
            if (f & F_GEN)
                puts_(b, "<|assistant|>\n");
        } else {
            continue;
        }
        puts_(b, c);
        puts_(b, "<|end|>\n");
        if (!(f & F_GEN) && is(&m[i], "user")) /* Phi-3 4k opens the answer after each question */
            puts_(b, "<|assistant|>\n");
    }
    if ((f & F_GEN) && gen)
        puts_(b, "<|assistant|>\n");
    else if ((f & F_GEN) && (f & F_EOS))
        puts_(b, t->eos);
}

/* No template: as ollama renders its default template "{{ .Prompt }}" over a conversation, turn
 * by turn with only .Prompt in it: the user messages' contents back to back; system and
 * assistant messages leave nothing. `mstore run` and the server both come here, so a chat of
 * one message is the prompt that `mstore run MODEL PROMPT` sends. */
static void render_bare(sbuf *b, const chat_msg *m, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (is(&m[i], "user"))
            puts_(b, content(&m[i]));
}

static void render_plain(sbuf *b, const chat_msg *m, size_t n, int gen)
{
    for (size_t i = 0; i < n; i++) {
        puts_(b, m[i].role ? m[i].role : "");
        puts_(b, ": ");
        puts_(b, content(&m[i]));
        puts_(b, "\n");
    }
    if (gen)
        puts_(b, "assistant: ");
}

/* The built-in families; tools only reach the ones with F_TOOLS. */
static int render_family(sbuf *b, const chat_template *t, const chat_msg *m, size_t n, const chat_tool *tools,
                         size_t n_tools, int gen)
{
    switch (t->family) {
    case CHAT_LLAMA2:
        return render_llama2(b, t, m, n);
    case CHAT_LLAMA3:
        if (t->flags & F_LLAMA31)
            return render_llama31(b, t, m, n, tools, n_tools, gen);
        render_llama3(b, t, m, n, gen);
        return 0;
    case CHAT_CHATML:
        if (t->flags & F_TOOLS)
            return render_qwen25(b, t, m, n, tools, n_tools, gen);
        render_chatml(b, t, m, n, gen);
        return 0;
    case CHAT_GEMMA:
        return render_gemma(b, t, m, n, gen);
    case CHAT_PHI3:
        render_phi3(b, t, m, n, gen);
        return 0;
    case CHAT_MISTRAL: /* the template has no generation prompt: [/INST] ends the prompt */
        return render_mistral(b, t, m, n, tools, n_tools);
    default:
        if (t->flags & F_BARE)
            render_bare(b, m, n);
        else
            render_plain(b, m, n, gen);
        return 0;
    }
}

static int render(char **out, size_t *len_out, const chat_template *t, const chat_msg *msgs, size_t n,
                  const chat_tool *tools, size_t n_tools, int gen)
{
    sbuf b = {NULL, 0, 0, 0};
    int rc = render_family(&b, t, msgs, n, tools, n_tools, gen);

    if (rc == 0 && !b.oom && !b.p && !(b.p = calloc(1, 1)))
        b.oom = 1;
    if (rc == 0 && b.oom)
        rc = ms_err(MS_ENOMEM, "chat: out of memory rendering %zu messages", n);
    if (rc < 0) {
        free(b.p);
        return rc;
    }
    *out = b.p;
    *len_out = b.n;
    return 0;
}

int chat_render_tools(char **out, size_t *len_out, const chat_template *t, const chat_msg *msgs, size_t n,
                      const chat_tool *tools, size_t n_tools, int add_generation_prompt)
{
    *out = NULL;
    *len_out = 0;
    if (n_tools == 0)
        return chat_render(out, len_out, t, msgs, n, add_generation_prompt);
    if (t->family == CHAT_OLLAMA)
        return chat_gotmpl_render_tools(out, len_out, t->go, msgs, n, tools, n_tools);
    if (!(t->flags & F_TOOLS))
        return ms_err(MS_EUNSUPPORTED, "the model's template (%s) does not support tools", chat_family_name(t->family));
    return render(out, len_out, t, msgs, n, tools, n_tools, add_generation_prompt);
}

int chat_render(char **out, size_t *len_out, const chat_template *t, const chat_msg *msgs, size_t n,
                int add_generation_prompt)
{
    *out = NULL;
    *len_out = 0;
    if (t->family == CHAT_OLLAMA) /* ollama's templates always end ready for the answer */
        return chat_gotmpl_render(out, len_out, t->go, msgs, n);
    return render(out, len_out, t, msgs, n, NULL, 0, add_generation_prompt);
}

/* How the model of a template that renders tools writes its calls: as the template shows them
 * (Llama 3.1: a bare {"name": .., "parameters": ..}; Qwen 2.5: each in <tool_call> tags). */
int chat_template_tool_syntax(const chat_template *t, chat_tool_syntax *out)
{
    memset(out, 0, sizeof *out);
    if (t->family == CHAT_OLLAMA)
        return chat_gotmpl_tool_syntax(t->go, out);
    if (t->family == CHAT_LLAMA3 && (t->flags & F_TOOLS)) {
        strcpy(out->args_key, "parameters");
        return 0;
    }
    if (t->family == CHAT_CHATML && (t->flags & F_TOOLS)) {
        strcpy(out->prefix, "<tool_call>\n");
        strcpy(out->suffix, "\n</tool_call>");
        strcpy(out->args_key, "arguments");
        return 0;
    }
    if (t->family == CHAT_MISTRAL) {
        strcpy(out->prefix, "[TOOL_CALLS]");
        strcpy(out->args_key, "arguments");
        out->array = 1;
        return 0;
    }
    return ms_err(MS_EUNSUPPORTED, "the model's template (%s) does not support tools", chat_family_name(t->family));
}

/* ---------------------------------------------------------------- template sources */

static int copy_text(char **out, size_t *len_out, const void *p, size_t len, const char *what)
{
    if (!(*out = malloc(len + 1)))
        return ms_err(MS_ENOMEM, "%s: out of memory for a chat template of %zu bytes", what, len);
    memcpy(*out, p, len);
    (*out)[len] = '\0';
    *len_out = len;
    return 0;
}

int chat_template_text_gguf(char **out, size_t *len_out, const gguf_file *g)
{
    const char *s;
    size_t len;
    int rc;

    *out = NULL;
    *len_out = 0;
    if (gguf_kv_find(g, "tokenizer.chat_template") < 0)
        return ms_err(MS_ENOTFOUND, "no chat template (tokenizer.chat_template not found)");
    if ((rc = gguf_get_str(g, "tokenizer.chat_template", &s, &len)) < 0)
        return rc;
    return copy_text(out, len_out, s, len, "tokenizer.chat_template");
}
