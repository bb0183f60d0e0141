/* harmony.c: gpt-oss's answers in OpenAI's harmony format, parted into reasoning, content and
 * tool calls as they stream.
 *
 * The prompt ends "<|start|>assistant", so the answer opens inside a message's header. Each
 * message is header <|message|> body end, the header naming the channel and maybe a recipient:
 *   <|channel|>analysis<|message|>REASONING<|end|>
 *   <|start|>assistant<|channel|>final<|message|>ANSWER<|return|>
 *   <|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{"a":1}<|call|>
 *   <|start|>assistant to=functions.NAME<|channel|>commentary json<|message|>{"a":1}<|call|>
 * As ollama's harmony parser reads them: analysis is the reasoning; a recipient makes the body a
 * call's arguments (its name the recipient less "functions."); final, commentary without a
 * recipient (a preamble) and any channel we do not know are content. No marker ever reaches the
 * content: the seven markers inside a body are dropped, ending it or opening the next header.
 *
 * Headers are short: one is held whole (CHAT_HARMONY_HOLD bytes) until its <|message|>; an
 * answer whose first header runs longer was not written in harmony and is all content. In a
 * body only what could begin a marker is held. The output machinery is think.c's (chat__out). */
#include <string.h>

#include "chat/chat.h"
#include "chat/chat_int.h"

int chat_template_harmony(const chat_template *t)
{
    return (t->flags & F_HARMONY) != 0;
}

int chat__harmony_looks(const char *s)
{
    return strstr(s, "<|channel|>") && strstr(s, "<|start|>") && strstr(s, "<|message|>");
}

enum {
    H_HEADER = 0, /* held is the header so far */
    H_BODY, /* a message's body; held is what may begin a marker */
    H_PLAIN, /* not harmony after all: everything is content */
};

/* The markers; the first three end a body, the next two open a header. */
static const char *const MARK[] = {"<|end|>", "<|return|>", "<|call|>", "<|start|>", "<|channel|>", "<|message|>",
                                   "<|constrain|>"};
#define N_MARK (sizeof MARK / sizeof *MARK)
enum { M_END = 0, M_RETURN, M_CALL, M_START, M_CHANNEL, M_MESSAGE, M_CONSTRAIN };

void chat_harmony_init(chat_harmony *h)
{
    h->state = H_HEADER;
    h->kind = CHAT_HARMONY_CONTENT;
    h->n = 0;
}

/* The marker held[0..n) is, or -1. */
static int marker(const char *held, size_t n)
{
    for (size_t m = 0; m < N_MARK; m++)
        if (strlen(MARK[m]) == n && !memcmp(held, MARK[m], n))
            return (int)m;
    return -1;
}

/* The longest end of held[0..n) that begins some marker. */
static size_t overlap(const char *held, size_t n)
{
    for (size_t k = n; k > 0; k--)
        for (size_t m = 0; m < N_MARK; m++)
            if (k <= strlen(MARK[m]) && !memcmp(held + n - k, MARK[m], k))
                return k;
    return 0;
}

static int has_marker(const char *h, size_t n)
{
    for (size_t i = 0; i + 1 < n; i++)
        if (h[i] == '<' && h[i + 1] == '|')
            return 1;
    return 0;
}

/* Where the word after `key` in h[0..n) is (*len bytes, ending at white space, '<' or the
 * end); NULL when key is not there. */
static const char *word_after(const char *h, size_t n, const char *key, size_t *len)
{
    size_t k = strlen(key), i, e;

    for (i = 0; i + k <= n; i++)
        if (!memcmp(h + i, key, k) && (key[0] == '<' || i == 0 || h[i - 1] == ' ' || h[i - 1] == '>'))
            break;
    if (i + k > n)
        return NULL;
    for (e = i + k; e < n && h[e] != ' ' && h[e] != '\t' && h[e] != '\n' && h[e] != '<'; e++)
        ;
    *len = e - i - k;
    return h + i + k;
}

/* The header held[0..n) is whole: what its body is. A call says its name first. */
static void header_done(chat_harmony *h, chat__out *o)
{
    size_t clen = 0, rlen = 0;
    const char *ch = word_after(h->held, h->n, "<|channel|>", &clen);
    const char *to = word_after(h->held, h->n, "to=", &rlen);

    if (to) {
        if (rlen > 10 && !memcmp(to, "functions.", 10))
            to += 10, rlen -= 10;
        h->kind = CHAT_HARMONY_ARGS;
        chat__out_flush(o); /* the name is one piece of its own, even an empty one */
        if (!o->rc)
            o->rc = o->fn(o->ctx, CHAT_HARMONY_CALL, to, rlen);
    } else {
        h->kind = ch && clen == 8 && !memcmp(ch, "analysis", 8) ? CHAT_HARMONY_THINKING : CHAT_HARMONY_CONTENT;
    }
    h->state = H_BODY, h->n = 0;
}

static void step_header(chat_harmony *h, chat__out *o, char c)
{
    static const char msg[] = "<|message|>";
    const size_t k = sizeof msg - 1;

    h->held[h->n++] = c;
    if (h->n >= k && !memcmp(h->held + h->n - k, msg, k)) {
        h->n -= k;
        header_done(h, o);
    } else if (h->n == CHAT_HARMONY_HOLD) {
        h->state = H_PLAIN; /* no header is this long: the model did not write harmony */
        chat__out_put(o, CHAT_HARMONY_CONTENT, h->held, h->n, 0);
        h->n = 0;
    }
}

static void step_body(chat_harmony *h, chat__out *o, const char *c)
{
    size_t k;
    int m;

    if (h->n == 0 && *c != '<') {
        chat__out_put(o, h->kind, c, 1, 1);
        return;
    }
    h->held[h->n++] = *c;
    if ((m = marker(h->held, h->n)) >= 0) {
        h->n = 0;
        if (m <= M_CALL) /* between messages: what is not a header is content */
            h->kind = CHAT_HARMONY_CONTENT;
        else if (m <= M_CHANNEL) /* a header, "<|start|>" left out or not */
            h->state = H_HEADER, h->kind = -1;
        if (m == M_CHANNEL)
            memcpy(h->held, MARK[M_CHANNEL], h->n = strlen(MARK[M_CHANNEL]));
        return;
    }
    k = overlap(h->held, h->n);
    chat__out_put(o, h->kind, h->held, h->n - k, 0);
    memmove(h->held, h->held + h->n - k, k);
    h->n = k;
}

int chat_harmony_feed(chat_harmony *h, const char *text, size_t len, chat_think_fn fn, void *ctx)
{
    chat__out o = {.fn = fn, .ctx = ctx, .kind = -1};

    for (size_t i = 0; i < len && !o.rc; i++) {
        if (h->state == H_HEADER)
            step_header(h, &o, text[i]);
        else if (h->state == H_BODY)
            step_body(h, &o, text + i);
        else
            chat__out_put(&o, CHAT_HARMONY_CONTENT, text + i, 1, 1);
    }
    chat__out_flush(&o);
    return o.rc;
}

int chat_harmony_end(chat_harmony *h, chat_think_fn fn, void *ctx)
{
    int rc = 0, kind = h->kind;

    /* a cut header is markup, unless the answer began with it and holds no marker: an answer
     * too short to tell (kind is -1 in a header that a marker opened) */
    if (h->state == H_HEADER)
        kind = kind < 0 || has_marker(h->held, h->n) ? -1 : CHAT_HARMONY_CONTENT;
    if (h->n && kind >= 0)
        rc = fn(ctx, kind, h->held, h->n); /* a cut marker in a body was the body's text */
    h->n = 0;
    h->state = H_PLAIN;
    return rc;
}
