/* think.c: which templates think, rendering with thinking on or off, and the splitter that
 * parts a model's reasoning (<think>...</think>) from its answer, as ollama's thinking parser
 * does: one tag pair, at the start of the answer only. */
#include <stdlib.h>
#include <string.h>

#include "chat/chat.h"
#include "chat/chat_int.h"

static const char OPEN[] = "<think>", CLOSE[] = "</think>";
#define OPEN_LEN (sizeof OPEN - 1)
#define CLOSE_LEN (sizeof CLOSE - 1)

int chat_template_thinks(const chat_template *t)
{
    return (t->flags & (F_THINK | F_HARMONY)) != 0;
}

int chat_template_effort(const chat_template *t)
{
    return (t->flags & F_JINJA_EFFORT) != 0;
}

const char *chat_think_effort(int think)
{
    static const char *const levels[] = {"minimal", "low", "medium", "high"};
    return think >= CHAT_THINK_MINIMAL && think <= CHAT_THINK_HIGH ? levels[think - CHAT_THINK_MINIMAL] : NULL;
}

int chat_render_think(char **out, size_t *len_out, const chat_template *t, const chat_msg *msgs, size_t n,
                      const chat_tool *tools, size_t n_tools, int add_generation_prompt, int think)
{
    /* Qwen3's template writes this after "<|im_start|>assistant\n" when enable_thinking is false */
    static const char off[] = "<think>\n\n</think>\n\n";
    char *p;
    int rc;

    *out = NULL;
    *len_out = 0;
    if (t->family == CHAT_OLLAMA) /* ollama's templates always end ready for the answer */
        return chat_gotmpl_render_think(out, len_out, t->go, msgs, n, tools, n_tools, think);
    if (t->jinja) {
        if (n_tools && !(t->flags & F_JINJA_TOOLS))
            return chat_render_tools(out, len_out, t, msgs, n, tools, n_tools, add_generation_prompt);
        return chat__render_jinja(out, len_out, t, msgs, n, tools, n_tools, add_generation_prompt, think);
    }
    if ((rc = chat_render_tools(out, len_out, t, msgs, n, tools, n_tools, add_generation_prompt)) < 0)
        return rc;
    if (!add_generation_prompt || think != 0 || !(t->flags & F_THINK_OFF))
        return 0;
    if (!(p = realloc(*out, *len_out + sizeof off))) {
        free(*out);
        *out = NULL;
        *len_out = 0;
        return ms_err(MS_ENOMEM, "chat: out of memory");
    }
    memcpy(p + *len_out, off, sizeof off);
    *out = p;
    *len_out += sizeof off - 1;
    return 0;
}

static int space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

int chat_think_prefilled(const char *prompt, size_t len)
{
    while (len && space(prompt[len - 1]))
        len--;
    return len >= OPEN_LEN && !memcmp(prompt + len - OPEN_LEN, OPEN, OPEN_LEN);
}

/* ---------------------------------------------------------------- the splitter */

enum {
    T_OPENING = 0, /* before the answer's first non-space: held is white space and a cut "<think>" */
    T_STARTED, /* after "<think>": its white space is dropped */
    T_THINKING, /* held is a cut "</think>" */
    T_CLOSED, /* after "</think>": its white space is dropped */
    T_DONE, /* the rest is content */
};

void chat__out_flush(chat__out *o)
{
    if (o->n && !o->rc)
        o->rc = o->fn(o->ctx, o->kind, o->p ? o->p : o->buf, o->n);
    o->n = 0, o->p = NULL, o->kind = -1;
}

void chat__out_put(chat__out *o, int kind, const char *s, size_t len, int in_text)
{
    if (!len)
        return;
    if (o->n && (o->kind != kind || (in_text && (!o->p || o->p + o->n != s)) || (!in_text && o->p)))
        chat__out_flush(o);
    if (!o->n) {
        o->kind = kind;
        if (in_text) {
            o->p = s, o->n = len;
            return;
        }
    }
    if (in_text) {
        o->n += len;
        return;
    }
    while (len) {
        size_t k = sizeof o->buf - o->n < len ? sizeof o->buf - o->n : len;
        memcpy(o->buf + o->n, s, k);
        o->n += k, s += k, len -= k;
        if (o->n == sizeof o->buf)
            chat__out_flush(o), o->kind = kind;
    }
}

void chat_think_init(chat_think *s)
{
    s->state = T_OPENING;
    s->opened = 0;
    s->n = 0;
}

/* The longest end of held[0..n) that begins "</think>". */
static size_t close_overlap(const char *h, size_t n)
{
    for (size_t k = n < CLOSE_LEN ? n : CLOSE_LEN; k > 0; k--)
        if (!memcmp(h + n - k, CLOSE, k))
            return k;
    return 0;
}

static void step(chat_think *s, chat__out *o, const char *c)
{
    size_t lead, k;

    switch (s->state) {
    case T_OPENING:
        s->held[s->n++] = *c;
        for (lead = 0; lead < s->n && space(s->held[lead]); lead++)
            ;
        k = s->n - lead; /* bytes after the white space */
        if (k == OPEN_LEN && !memcmp(s->held + lead, OPEN, OPEN_LEN)) {
            s->state = T_STARTED, s->n = 0, s->opened = 1; /* the white space before it is dropped, as ollama does */
        } else if (k < OPEN_LEN && !memcmp(s->held + lead, OPEN, k) && s->n < CHAT_THINK_HOLD) {
            /* still white space, or a cut "<think>": wait */
        } else {
            s->state = T_DONE; /* the answer did not open with a thought: all of it is content */
            chat__out_put(o, 0, s->held, s->n, 0);
            s->n = 0;
        }
        return;
    case T_STARTED:
        if (space(*c))
            return;
        s->state = T_THINKING;
        /* fall through */
    case T_THINKING:
        if (s->n == 0 && *c != '<') {
            chat__out_put(o, 1, c, 1, 1);
            return;
        }
        s->held[s->n++] = *c;
        if (s->n == CLOSE_LEN && !memcmp(s->held, CLOSE, CLOSE_LEN)) {
            s->state = T_CLOSED, s->n = 0;
            return;
        }
        k = close_overlap(s->held, s->n);
        chat__out_put(o, 1, s->held, s->n - k, 0);
        memmove(s->held, s->held + s->n - k, k);
        s->n = k;
        return;
    case T_CLOSED:
        if (space(*c))
            return;
        s->state = T_DONE;
        /* fall through */
    default:
        chat__out_put(o, 0, c, 1, 1);
    }
}

int chat_think_feed(chat_think *s, const char *text, size_t len, chat_think_fn fn, void *ctx)
{
    chat__out o = {.fn = fn, .ctx = ctx, .kind = -1};

    for (size_t i = 0; i < len && !o.rc; i++)
        step(s, &o, text + i);
    chat__out_flush(&o);
    return o.rc;
}

int chat_think_end(chat_think *s, chat_think_fn fn, void *ctx)
{
    int rc = 0;

    if (s->n && (s->state == T_OPENING || s->state == T_THINKING))
        rc = fn(ctx, s->state == T_THINKING, s->held, s->n);
    s->n = 0;
    s->state = T_DONE;
    return rc;
}
