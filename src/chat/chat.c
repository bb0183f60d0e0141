/* chat.c: template families, their renderers, and where template texts come from. */
#include <stdlib.h>
#include <string.h>

#include "chat/chat.h"
#include "chat/chat_int.h"

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
    MS_FREE_ALL(t->bos, t->eos, t->default_system, t->date, t->warning);
    chat_gotmpl_free(t->go);
    chat_jinja_free(t->jinja);
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

int chat__warning_set(chat_template *t, const char *msg)
{
    if (!(t->warning = ms_strdup_printf("%s", msg)))
        return ms_err(MS_ENOMEM, "chat: out of memory");
    return 0;
}

/* Family by markers, in llama.cpp's order of checks. */
static int detect(chat_template *t, const char *s)
{
    int has_bos = strstr(s, "bos_token") != NULL;

    if (strstr(s, "<|im_start|>")) {
        t->family = CHAT_CHATML;
        t->flags = chat__qwen25_tools(s) ? F_TOOLS : 0;
        return chatml_default_system(t, s);
    }
    if (strstr(s, "[INST]")) {
        if (!strstr(s, "<<SYS>>") && chat__mistral_nemo(s)) {
            t->family = CHAT_MISTRAL;
            t->flags = F_TOOLS | (has_bos ? F_BOS : 0);
            return 0;
        }
        if (!strstr(s, "<<SYS>>"))
            return chat__warning_set(t, "an [INST] template without <<SYS>> (Mistral style) other than Mistral "
                                        "Nemo's is not supported: rendering plainly");
        t->family = CHAT_LLAMA2;
        return 0;
    }
    if (strstr(s, "<|start_header_id|>") && strstr(s, "<|end_header_id|>")) {
        t->family = CHAT_LLAMA3;
        t->flags = has_bos ? F_BOS : 0;
        return strstr(s, "Cutting Knowledge Date") ? chat__llama31(t, s) : 0;
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
    return chat__warning_set(t, "the chat template is of no family mstore knows (llama2, llama3, chatml, gemma, "
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

/* A Jinja template that parses renders itself, exactly: no warning; the family (and its markers)
 * still says how the model writes tool calls and thinks. One that does not parse renders by
 * family as before, and so does a Go-looking one outside the Go subset that fails a trial as
 * Jinja ("{{ if .System }}" parses as Jinja too). 0 or MS_ENOMEM. */
static int jinja_template(chat_template *t, const char *s, size_t len)
{
    static const chat_msg trial = {.role = "user", .content = "u"};
    char *out = NULL;
    size_t olen;
    int rc = chat_jinja_parse(&t->jinja, s, len);

    if (rc == 0 && chat_gotmpl_looks(s, len) && (rc = chat__render_jinja(&out, &olen, t, &trial, 1, NULL, 0, 1, -1)) < 0) {
        chat_jinja_free(t->jinja);
        t->jinja = NULL;
    }
    free(out);
    if (rc == MS_ENOMEM)
        return rc;
    if (rc == 0) {
        free(t->warning);
        t->warning = NULL;
        if (strstr(s, "tools"))
            t->flags |= F_JINJA_TOOLS;
        if (strstr(s, "reasoning_effort"))
            t->flags |= F_JINJA_EFFORT;
    }
    return 0;
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
        if ((rc = chat__warning_set(t, "the model has no chat template: the user's messages are the bare prompt")) < 0)
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
    if (t->family != CHAT_OLLAMA && (rc = jinja_template(t, s, len)) < 0)
        goto fail;
    /* thinking (think.c): ollama infers its tags from the text around a message's .Thinking;
     * the Jinja templates of thinking models split past answers at "</think>" */
    if (t->family == CHAT_OLLAMA ? strstr(s, ".Thinking") && strstr(s, "<think>") && strstr(s, "</think>")
                                 : strstr(s, "</think>") != NULL)
        t->flags |= F_THINK;
    if (t->family == CHAT_CHATML && (t->flags & F_THINK) && strstr(s, "enable_thinking"))
        t->flags |= F_THINK_OFF;
    if (chat__harmony_looks(s))
        t->flags |= F_HARMONY;
    if (t->family == CHAT_OLLAMA && strstr(s, ".ThinkLevel")) /* ollama's reasoning_effort (gpt-oss) */
        t->flags |= F_JINJA_EFFORT;
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
void chat__trim_span(const char *s, size_t len, size_t *start_out, size_t *end_out)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t start = 0, end = 0, k;

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
    *start_out = start;
    *end_out = end > start ? end : start;
}

void chat__put_trimmed(chat_buf *b, const char *s)
{
    size_t start, end;

    chat__trim_span(s, strlen(s), &start, &end);
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
                    chat__put_trimmed(b, c.p);
                free(c.p);
            } else {
                chat__put_trimmed(b, content(&m[i]));
            }
            puts_(b, " [/INST]");
        } else if (is(&m[i], "assistant")) {
            puts_(b, " ");
            chat__put_trimmed(b, content(&m[i]));
            puts_(b, " ");
            puts_(b, t->eos);
        }
    }
    return 0;
}

/* A format whose every turn is open, role, after_role, text, close (Llama 3 headers, ChatML). */
typedef struct turn_fmt {
    const char *open, *after_role, *close;
    int trim; /* Llama 3's template trims each message */
} turn_fmt;

static const turn_fmt fmt_llama3 = { "<|start_header_id|>", "<|end_header_id|>\n\n", "<|eot_id|>", 1 };
static const turn_fmt fmt_chatml = { "<|im_start|>", "\n", "<|im_end|>\n", 0 };

static void put_head(sbuf *b, const turn_fmt *f, const char *role)
{
    puts_(b, f->open);
    puts_(b, role ? role : "");
    puts_(b, f->after_role);
}

static void put_turn(sbuf *b, const turn_fmt *f, const char *role, const char *text)
{
    put_head(b, f, role);
    if (f->trim)
        chat__put_trimmed(b, text);
    else
        puts_(b, text);
    puts_(b, f->close);
}

static void render_llama3(sbuf *b, const chat_template *t, const chat_msg *m, size_t n, int gen)
{
    if (n && (t->flags & F_BOS))
        puts_(b, t->bos);
    for (size_t i = 0; i < n; i++)
        put_turn(b, &fmt_llama3, m[i].role, content(&m[i]));
    if (gen)
        put_head(b, &fmt_llama3, "assistant");
}

static void render_chatml(sbuf *b, const chat_template *t, const chat_msg *m, size_t n, int gen)
{
    if (n && t->default_system && !is(&m[0], "system"))
        put_turn(b, &fmt_chatml, "system", t->default_system);
    for (size_t i = 0; i < n; i++)
        put_turn(b, &fmt_chatml, m[i].role, content(&m[i]));
    if (gen)
        put_head(b, &fmt_chatml, "assistant");
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
        chat__put_trimmed(b, content(&m[i]));
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
            return chat__render_llama31(b, t, m, n, tools, n_tools, gen);
        render_llama3(b, t, m, n, gen);
        return 0;
    case CHAT_CHATML:
        if (t->flags & F_TOOLS)
            return chat__render_qwen25(b, t, m, n, tools, n_tools, gen);
        render_chatml(b, t, m, n, gen);
        return 0;
    case CHAT_GEMMA:
        return render_gemma(b, t, m, n, gen);
    case CHAT_PHI3:
        render_phi3(b, t, m, n, gen);
        return 0;
    case CHAT_MISTRAL: /* the template has no generation prompt: [/INST] ends the prompt */
        return chat__render_mistral(b, t, m, n, tools, n_tools);
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
    if (t->jinja && !(t->flags & F_JINJA_TOOLS))
        return ms_err(MS_EUNSUPPORTED, "the model's template (%s) does not support tools (it never reads `tools`)",
                      chat_family_name(t->family));
    if (t->jinja)
        return chat__render_jinja(out, len_out, t, msgs, n, tools, n_tools, add_generation_prompt, -1);
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
    if (t->jinja)
        return chat__render_jinja(out, len_out, t, msgs, n, NULL, 0, add_generation_prompt, -1);
    return render(out, len_out, t, msgs, n, NULL, 0, add_generation_prompt);
}

/* How the model of a template that renders tools writes its calls: as the template shows them
 * (Llama 3.1: a bare {"name": .., "parameters": ..}; Qwen 2.5: each in <tool_call> tags). */
int chat_template_tool_syntax(const chat_template *t, chat_tool_syntax *out)
{
    memset(out, 0, sizeof *out);
    if ((t->flags & F_HARMONY) && (t->family == CHAT_OLLAMA ? t->go != NULL : (t->flags & F_JINJA_TOOLS) != 0)) {
        out->harmony = 1; /* gpt-oss's calls are messages to a recipient: no prefix or JSON object */
        strcpy(out->args_key, "arguments");
        return 0;
    }
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
