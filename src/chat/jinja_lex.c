/* jinja_lex.c: the arena, and the template cut into tokens.
 *
 * Text between tags becomes TK_TEXT with the whitespace rules already applied, as transformers
 * renders (jinja2 with trim_blocks and lstrip_blocks): a '-' inside a tag's brace strips all
 * white space on that side; the newline right after a block or comment tag goes; spaces and
 * tabs between a line's start and a block or comment tag go (a '+' after the brace keeps them).
 * Inside a tag: names, strings (with Python's escapes), numbers and operators, the tag closed
 * by TK_END. Comments leave nothing. */
#include <stdlib.h>
#include <string.h>

#include "chat/jinja_int.h"

struct jarena_chunk {
    jarena_chunk *next;
    size_t size, used;
    max_align_t data[];
};

void *jinja__alloc(jarena *a, size_t n)
{
    jarena_chunk *c = a->head;
    size_t need = (n + 15) & ~(size_t)15;

    if (n > a->limit || need > a->limit - a->used)
        return NULL;
    if (!c || c->size - c->used < need) {
        size_t size = need > 65536 ? need : 65536;
        if (!(c = malloc(sizeof *c + size)))
            return NULL;
        c->size = size, c->used = 0, c->next = a->head;
        a->head = c;
    }
    void *p = (char *)c->data + c->used;
    c->used += need;
    a->used += need;
    memset(p, 0, n);
    return p;
}

void jinja__arena_free(jarena *a)
{
    while (a->head) {
        jarena_chunk *n = a->head->next;
        free(a->head);
        a->head = n;
    }
    a->used = 0;
}

typedef struct lexer {
    jarena *a;
    const char *s;
    size_t len, i;
    int line;
    jtok *v;
    size_t n, cap;
} lexer;

static int push(lexer *x, jtok_type t, const char *p, size_t n)
{
    if (x->n == x->cap) {
        size_t cap = x->cap ? x->cap * 2 : 256;
        jtok *v = jinja__alloc(x->a, cap * sizeof *v);
        if (!v)
            return ms_err(MS_ENOMEM, "chat template: out of memory");
        if (x->n)
            memcpy(v, x->v, x->n * sizeof *v);
        x->v = v, x->cap = cap;
    }
    x->v[x->n++] = (jtok){.t = t, .line = x->line, .p = p, .n = n};
    return 0;
}

static int fail(lexer *x, const char *what)
{
    return ms_err(MS_EINVALID, "chat template line %d: %s", x->line, what);
}

static int is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

static int is_name(char c, int first)
{
    return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (!first && c >= '0' && c <= '9');
}

static void count_lines(lexer *x, size_t from, size_t to)
{
    for (size_t k = from; k < to; k++)
        x->line += x->s[k] == '\n';
}

/* a quoted string at x->i, decoded into the arena */
static int lex_string(lexer *x)
{
    char q = x->s[x->i++], *d;
    size_t start = x->i, n = 0;

    while (x->i < x->len && x->s[x->i] != q)
        x->i += x->s[x->i] == '\\' && x->i + 1 < x->len ? 2 : 1;
    if (x->i >= x->len)
        return fail(x, "unterminated string");
    if (!(d = jinja__alloc(x->a, x->i - start + 1)))
        return ms_err(MS_ENOMEM, "chat template: out of memory");
    for (size_t k = start; k < x->i; k++) {
        char c = x->s[k];
        if (c == '\\' && k + 1 < x->i) {
            c = x->s[++k];
            unsigned cp = 0;
            int digits = c == 'u' ? 4 : c == 'x' ? 2 : 0, ok = digits && k + (size_t)digits < x->i;
            for (int h = 1; ok && h <= digits; h++) {
                char ch = x->s[k + (size_t)h];
                int v = ch >= '0' && ch <= '9' ? ch - '0' : (ch | 32) >= 'a' && (ch | 32) <= 'f' ? (ch | 32) - 'a' + 10 : -1;
                ok = v >= 0, cp = cp * 16 + (unsigned)v;
            }
            if (ok) {  /* \uXXXX, \xXX: the code point in UTF-8 (never longer than the escape) */
                k += (size_t)digits;
                if (cp < 0x80)
                    d[n++] = (char)cp;
                else if (cp < 0x800)
                    d[n++] = (char)(0xC0 | cp >> 6), d[n++] = (char)(0x80 | (cp & 63));
                else
                    d[n++] = (char)(0xE0 | cp >> 12), d[n++] = (char)(0x80 | (cp >> 6 & 63)),
                    d[n++] = (char)(0x80 | (cp & 63));
                continue;
            }
            c = c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r' : c == '0' ? '\0' : c;
        }
        d[n++] = c;
    }
    count_lines(x, start, x->i);
    x->i++;
    if (push(x, TK_STR, d, n) < 0)
        return -1;
    return 0;
}

static int lex_number(lexer *x)
{
    size_t start = x->i;
    int is_float = 0;
    char buf[64];

    while (x->i < x->len && ((x->s[x->i] >= '0' && x->s[x->i] <= '9') || x->s[x->i] == '_'))
        x->i++;
    if (x->i + 1 < x->len && x->s[x->i] == '.' && x->s[x->i + 1] >= '0' && x->s[x->i + 1] <= '9') {
        is_float = 1;
        for (x->i++; x->i < x->len && x->s[x->i] >= '0' && x->s[x->i] <= '9'; x->i++)
            ;
    }
    if (x->i + 1 < x->len && (x->s[x->i] == 'e' || x->s[x->i] == 'E') &&
        ((x->s[x->i + 1] >= '0' && x->s[x->i + 1] <= '9') ||
         (x->i + 2 < x->len && (x->s[x->i + 1] == '-' || x->s[x->i + 1] == '+') && x->s[x->i + 2] >= '0' &&
          x->s[x->i + 2] <= '9'))) {
        is_float = 1;
        for (x->i += 2; x->i < x->len && x->s[x->i] >= '0' && x->s[x->i] <= '9'; x->i++)
            ;
    }
    if (x->i - start >= sizeof buf)
        return fail(x, "number too long");
    size_t m = 0;
    for (size_t k = start; k < x->i; k++)
        if (x->s[k] != '_')
            buf[m++] = x->s[k];
    buf[m] = '\0';
    if (push(x, is_float ? TK_FLOAT : TK_INT, x->s + start, x->i - start) < 0)
        return -1;
    if (is_float)
        x->v[x->n - 1].f = strtod(buf, NULL);
    else
        x->v[x->n - 1].i = strtoll(buf, NULL, 10);
    return 0;
}

/* the inside of a {{ }} or {% %} tag, up to and past its end; *strip_after: it ended with '-' */
static int lex_tag(lexer *x, char close, int *strip_after)
{
    static const char *ops[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<", ">", "=",
                                "(", ")", "[", "]", "{", "}", ".", ",", ":", "|"};
    for (;;) {
        while (x->i < x->len && is_space(x->s[x->i]))
            x->line += x->s[x->i++] == '\n';
        if (x->i >= x->len)
            return fail(x, "unclosed tag");
        const char *p = x->s + x->i;
        size_t left = x->len - x->i;
        if (left >= 3 && p[0] == '-' && p[1] == close && p[2] == '}') {
            x->i += 3, *strip_after = 1;
            return push(x, TK_END, p, 0);
        }
        if (left >= 2 && p[0] == close && p[1] == '}') {
            x->i += 2, *strip_after = 0;
            return push(x, TK_END, p, 0);
        }
        if (*p == '"' || *p == '\'') {
            if (lex_string(x) < 0)
                return -1;
            continue;
        }
        if (*p >= '0' && *p <= '9') {
            if (lex_number(x) < 0)
                return -1;
            continue;
        }
        if (is_name(*p, 1)) {
            size_t k = 1;
            while (k < left && is_name(p[k], 0))
                k++;
            x->i += k;
            if (push(x, TK_NAME, p, k) < 0)
                return -1;
            continue;
        }
        size_t k = 0;
        for (size_t o = 0; o < sizeof ops / sizeof *ops; o++)
            if (strncmp(p, ops[o], strlen(ops[o])) == 0) {
                k = strlen(ops[o]);
                break;
            }
        if (!k)
            return fail(x, "unexpected character in tag");
        x->i += k;
        if (push(x, TK_OP, p, k) < 0)
            return -1;
    }
}

int jinja__lex(jtok **out, size_t *n_out, jarena *a, const char *text, size_t len)
{
    lexer x = {.a = a, .s = text, .len = len, .line = 1};
    int strip_next = 0, trim_nl = 0;

    if (memchr(text, '\0', len))
        return fail(&x, "a NUL byte in the template");
    /* jinja2's keep_trailing_newline=False: one newline at the very end goes */
    if (len && text[len - 1] == '\n')
        x.len = --len;
    if (len && text[len - 1] == '\r')
        x.len = --len;

    while (x.i < len) {
        /* the text up to the next tag */
        size_t start = x.i, end;
        const char *open = NULL;
        for (end = start; end + 1 < len; end++)
            if (text[end] == '{' && (text[end + 1] == '{' || text[end + 1] == '%' || text[end + 1] == '#')) {
                open = text + end;
                break;
            }
        if (!open)
            end = len;
        size_t ts = start, te = end;
        if (strip_next)
            while (ts < te && is_space(text[ts]))
                ts++;
        else if (trim_nl && ts < te && text[ts] == '\n')
            ts++;
        else if (trim_nl && ts + 1 < te && text[ts] == '\r' && text[ts + 1] == '\n')
            ts += 2;
        char mark = open && end + 2 < len ? open[2] : 0;
        if (open && mark == '-') {
            while (te > ts && is_space(text[te - 1]))
                te--;
        } else if (open && open[1] != '{' && mark != '+') {
            /* lstrip_blocks: only white space between the line's start and the tag */
            size_t k = te;
            while (k > ts && (text[k - 1] == ' ' || text[k - 1] == '\t'))
                k--;
            if ((k > start && text[k - 1] == '\n') || k == 0 || (k == ts && ts > start && text[ts - 1] == '\n'))
                te = k;
        }
        if (te > ts && push(&x, TK_TEXT, text + ts, te - ts) < 0)
            return -1;
        count_lines(&x, start, end);
        x.i = end;
        if (!open)
            break;
        char kind = open[1];
        x.i += 2;
        if (mark == '-' || mark == '+')
            x.i++;
        if (kind == '#') {
            const char *e = NULL;
            for (size_t k = x.i; k + 1 < len; k++)
                if (text[k] == '#' && text[k + 1] == '}') {
                    e = text + k;
                    break;
                }
            if (!e)
                return fail(&x, "unclosed comment");
            strip_next = e > text + x.i && e[-1] == '-';
            trim_nl = 1;
            count_lines(&x, x.i, (size_t)(e - text));
            x.i = (size_t)(e - text) + 2;
            continue;
        }
        if (push(&x, kind == '{' ? TK_VAR : TK_BLOCK, open, 0) < 0 ||
            lex_tag(&x, kind == '{' ? '}' : '%', &strip_next) < 0)
            return -1;
        trim_nl = kind == '%';
    }
    if (push(&x, TK_EOF, text + len, 0) < 0)
        return -1;
    *out = x.v;
    *n_out = x.n;
    return 0;
}
