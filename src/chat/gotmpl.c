/* gotmpl.c: a bounded interpreter for the subset of Go's text/template that ollama's model
 * templates use, with ollama's data model.
 *
 * Subset: text; {{ pipeline }}; {{- and -}} trimming; comments ({{/ * ... * /}}); if / else if / else /
 * end; range [$i,] [$x :=] pipeline ... [else] end, with break and continue; variables ($,
 * $x := v, $x = v, $x.Field); fields .A.B of the data, of a message, of a variable; literals
 * ("...", `...`, integers, true, false); parentheses; the functions eq (several operands: any
 * equal), ne, lt, le, gt, ge, not, and, or, len, index, slice, printf (%s %d %v %q %%). Anything
 * else (pipes with |, with, define, template, block, other functions) refuses to parse with
 * MS_EUNSUPPORTED naming the line, so the caller can fall back.
 *
 * Data, as ollama's template.Execute gives it: with the template mentioning .Messages, one
 * execution with .System (every system message, "\n\n"-joined), .Messages (consecutive messages
 * of one role merged with "\n\n"), .Response "" ; otherwise the legacy loop, one execution per
 * (system, prompt, response) round with .System .Prompt .Response, the last one cut right after
 * its first .Response.
 *
 * Bounds: the template text (CHAT_GOTMPL_MAX_TEXT), nesting depth, variables, and the output
 * (CHAT_GOTMPL_MAX_OUT); a template has no loops but range over finite lists and no calls, so
 * rendering always ends. */
#include <ctype.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chat.h"

#define MAX_DEPTH 64
#define MAX_VARS  256
#define MAX_ARGS  16
#define MAX_OUT   ((size_t)16 << 20)

/* ------------------------------------------------------------------ AST */

typedef enum { E_FIELD, E_VAR, E_STR, E_INT, E_BOOL, E_CALL, E_DOT } expr_kind;

typedef struct expr {
    expr_kind kind;
    char *name; /* variable name ("$", "$x"), function name, or string literal */
    size_t name_len;
    char **fields; /* field chain: .A.B */
    size_t n_fields;
    long long ival;
    struct expr **args; /* E_CALL operands */
    size_t n_args;
} expr;

typedef enum { N_TEXT, N_PRINT, N_IF, N_RANGE, N_DECL, N_ASSIGN, N_BREAK, N_CONTINUE } node_kind;

typedef struct node {
    node_kind kind;
    int line;
    const char *text; /* N_TEXT: into the template's copy */
    size_t text_len;
    expr *e; /* the pipeline */
    char *var, *var2; /* N_DECL / N_ASSIGN: var; N_RANGE: [$i (var2),] $x (var) */
    struct node **body, **alt;
    size_t n_body, n_alt;
} node;

struct chat_gotmpl {
    char *src;
    node **root;
    size_t n_root;
    int uses_messages;
};

static void expr_free(expr *e)
{
    if (!e)
        return;
    free(e->name);
    for (size_t i = 0; i < e->n_fields; i++)
        free(e->fields[i]);
    free(e->fields);
    for (size_t i = 0; i < e->n_args; i++)
        expr_free(e->args[i]);
    free(e->args);
    free(e);
}

static void nodes_free(node **v, size_t n);

static void node_free(node *x)
{
    if (!x)
        return;
    expr_free(x->e);
    free(x->var);
    free(x->var2);
    nodes_free(x->body, x->n_body);
    nodes_free(x->alt, x->n_alt);
    free(x);
}

static void nodes_free(node **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        node_free(v[i]);
    free(v);
}

void chat_gotmpl_free(chat_gotmpl *t)
{
    if (!t)
        return;
    nodes_free(t->root, t->n_root);
    free(t->src);
    free(t);
}

/* ------------------------------------------------------------------ lexer over one action */

typedef struct lexer {
    const char *p, *end;
    int line;
    chat_gotmpl *t;
} lexer;

static int perr(int code, const lexer *lx, const char *fmt, ...)
{
    char msg[256];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return ms_err(code, "template line %d: %s", lx->line, msg);
}

static void skip_space(lexer *lx)
{
    while (lx->p < lx->end && isspace((unsigned char)*lx->p))
        lx->p++;
}

static int is_ident(int c)
{
    return isalnum(c) || c == '_';
}

static char *dupn(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

/* A word at p: identifier characters. */
static size_t word_len(const lexer *lx)
{
    size_t n = 0;
    while (lx->p + n < lx->end && is_ident((unsigned char)lx->p[n]))
        n++;
    return n;
}

static int word_is(const lexer *lx, const char *w)
{
    size_t n = strlen(w);
    return (size_t)(lx->end - lx->p) >= n && memcmp(lx->p, w, n) == 0 &&
           (lx->p + n == lx->end || !is_ident((unsigned char)lx->p[n]));
}

static expr *expr_new(expr_kind k)
{
    expr *e = calloc(1, sizeof *e);
    if (e)
        e->kind = k;
    return e;
}

/* .A.B after the current position (p at '.'). */
static int parse_fields(lexer *lx, expr *e)
{
    while (lx->p < lx->end && *lx->p == '.' && lx->p + 1 < lx->end && isalpha((unsigned char)lx->p[1])) {
        size_t n;
        char **f;
        lx->p++;
        n = word_len(lx);
        if (!(f = realloc(e->fields, (e->n_fields + 1) * sizeof *f)) || !(f[e->n_fields] = dupn(lx->p, n))) {
            if (f)
                e->fields = f;
            return ms_err(MS_ENOMEM, "out of memory");
        }
        e->fields = f;
        e->n_fields++;
        lx->p += n;
    }
    return 0;
}

static int parse_string(lexer *lx, expr *e)
{
    char q = *lx->p++, *out = malloc((size_t)(lx->end - lx->p) + 1);
    size_t n = 0;

    if (!out)
        return ms_err(MS_ENOMEM, "out of memory");
    e->kind = E_STR;
    e->name = out;
    while (lx->p < lx->end && *lx->p != q) {
        char c = *lx->p++;
        if (q == '"' && c == '\\' && lx->p < lx->end) {
            c = *lx->p++;
            c = c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r' : c;
        } else if (q == '"' && c == '\n') {
            return perr(MS_EINVALID, lx, "newline in a string");
        }
        out[n++] = c;
    }
    if (lx->p >= lx->end)
        return perr(MS_EINVALID, lx, "unterminated string");
    lx->p++;
    out[n] = '\0';
    e->name_len = n;
    return 0;
}

static const char *const funcs[] = {"eq",  "ne", "lt",  "le",    "gt",    "ge",    "not",
                                    "and", "or", "len", "index", "slice", "printf"};

static int parse_command(lexer *lx, expr **out, int depth);

/* One operand: a field, variable, literal or parenthesized command. */
static int parse_operand(lexer *lx, expr **out, int depth)
{
    expr *e = NULL;
    int rc = 0;

    *out = NULL;
    skip_space(lx);
    if (lx->p >= lx->end)
        return perr(MS_EINVALID, lx, "missing operand");
    if (*lx->p == '(') {
        lx->p++;
        if ((rc = parse_command(lx, &e, depth + 1)) < 0)
            return rc;
        skip_space(lx);
        if (lx->p >= lx->end || *lx->p != ')') {
            expr_free(e);
            return perr(MS_EINVALID, lx, "unclosed '('");
        }
        lx->p++;
        *out = e;
        return 0;
    }
    if (!(e = expr_new(E_DOT)))
        return ms_err(MS_ENOMEM, "out of memory");
    if (*lx->p == '.') {
        e->kind = lx->p + 1 < lx->end && isalpha((unsigned char)lx->p[1]) ? E_FIELD : E_DOT;
        if (e->kind == E_DOT)
            lx->p++;
        else
            rc = parse_fields(lx, e);
        if (e->kind == E_FIELD) {
            for (size_t i = 0; i < e->n_fields; i++)
                if (!strcmp(e->fields[i], "Messages"))
                    lx->t->uses_messages = 1;
        }
    } else if (*lx->p == '$') {
        size_t n;
        lx->p++;
        n = word_len(lx);
        e->kind = E_VAR;
        if (!(e->name = malloc(n + 2)))
            rc = ms_err(MS_ENOMEM, "out of memory");
        else {
            e->name[0] = '$';
            memcpy(e->name + 1, lx->p, n);
            e->name[n + 1] = '\0';
            lx->p += n;
            rc = parse_fields(lx, e);
            for (size_t i = 0; i < e->n_fields; i++)
                if (!strcmp(e->fields[i], "Messages"))
                    lx->t->uses_messages = 1;
        }
    } else if (*lx->p == '"' || *lx->p == '`') {
        rc = parse_string(lx, e);
    } else if (isdigit((unsigned char)*lx->p) ||
               (*lx->p == '-' && lx->p + 1 < lx->end && isdigit((unsigned char)lx->p[1]))) {
        char *endp;
        e->kind = E_INT;
        e->ival = strtoll(lx->p, &endp, 10);
        if (endp > lx->end || (endp < lx->end && (is_ident((unsigned char)*endp) || *endp == '.')))
            rc = perr(MS_EUNSUPPORTED, lx, "number '%.*s' is not an integer", (int)word_len(lx) + 1, lx->p);
        lx->p = endp;
    } else if (word_is(lx, "true") || word_is(lx, "false")) {
        e->kind = E_BOOL;
        e->ival = *lx->p == 't';
        lx->p += e->ival ? 4 : 5;
    } else {
        rc = perr(MS_EUNSUPPORTED, lx, "'%.*s' is not supported here", (int)(word_len(lx) ? word_len(lx) : 1), lx->p);
    }
    if (rc < 0) {
        expr_free(e);
        return rc;
    }
    *out = e;
    return 0;
}

/* A command: a function with operands, or one operand. */
static int parse_command(lexer *lx, expr **out, int depth)
{
    size_t n;
    expr *e;
    int rc;

    *out = NULL;
    if (depth > MAX_DEPTH)
        return perr(MS_EUNSUPPORTED, lx, "expression nested deeper than %d", MAX_DEPTH);
    skip_space(lx);
    n = word_len(lx);
    if (n && isalpha((unsigned char)*lx->p) && !word_is(lx, "true") && !word_is(lx, "false")) {
        size_t k;
        for (k = 0; k < sizeof funcs / sizeof *funcs; k++)
            if (strlen(funcs[k]) == n && !memcmp(funcs[k], lx->p, n))
                break;
        if (k == sizeof funcs / sizeof *funcs)
            return perr(MS_EUNSUPPORTED, lx, "function '%.*s' is not supported", (int)n, lx->p);
        if (!(e = expr_new(E_CALL)) || !(e->name = dupn(lx->p, n)) || !(e->args = calloc(MAX_ARGS, sizeof *e->args))) {
            expr_free(e);
            return ms_err(MS_ENOMEM, "out of memory");
        }
        lx->p += n;
        for (;;) {
            expr *a;
            skip_space(lx);
            if (lx->p >= lx->end || *lx->p == ')')
                break;
            if (*lx->p == '|')
                rc = perr(MS_EUNSUPPORTED, lx, "pipes ('|') are not supported");
            else if (e->n_args == MAX_ARGS)
                rc = perr(MS_EUNSUPPORTED, lx, "more than %d arguments", MAX_ARGS);
            else
                rc = parse_operand(lx, &a, depth + 1);
            if (rc < 0) {
                expr_free(e);
                return rc;
            }
            e->args[e->n_args++] = a;
        }
        *out = e;
        return 0;
    }
    return parse_operand(lx, out, depth);
}

/* ------------------------------------------------------------------ parser over the text */

typedef struct parser {
    chat_gotmpl *t;
    const char *p, *end;
    int line;
    int trim_next; /* the previous action ended with -}} */
} parser;

typedef enum { A_NONE, A_END, A_ELSE, A_ELSE_IF } stop_kind;

static int count_lines(const char *a, const char *b)
{
    int n = 0;
    for (; a < b; a++)
        n += *a == '\n';
    return n;
}

static int push_node(node ***v, size_t *n, node *x)
{
    node **g = realloc(*v, (*n + 1) * sizeof *g);
    if (!g)
        return ms_err(MS_ENOMEM, "out of memory");
    *v = g;
    g[(*n)++] = x;
    return 0;
}

static int parse_list(parser *ps, node ***out, size_t *n_out, stop_kind *stop, lexer *stop_lx, int depth);

/* `$x :=` or `$i, $x :=` at the head of a range or an action. */
static int parse_decl(lexer *lx, char **v1, char **v2, int *assign)
{
    const char *save = lx->p;
    char *a = NULL, *b = NULL;
    size_t n;

    *v1 = *v2 = NULL;
    *assign = 0;
    skip_space(lx);
    if (lx->p >= lx->end || *lx->p != '$')
        return 0;
    lx->p++;
    n = word_len(lx);
    a = malloc(n + 2);
    if (!a)
        return ms_err(MS_ENOMEM, "out of memory");
    a[0] = '$';
    memcpy(a + 1, lx->p, n);
    a[n + 1] = '\0';
    lx->p += n;
    skip_space(lx);
    if (lx->p < lx->end && *lx->p == ',') {
        lx->p++;
        skip_space(lx);
        if (lx->p < lx->end && *lx->p == '$') {
            lx->p++;
            n = word_len(lx);
            if (!(b = malloc(n + 2))) {
                free(a);
                return ms_err(MS_ENOMEM, "out of memory");
            }
            b[0] = '$';
            memcpy(b + 1, lx->p, n);
            b[n + 1] = '\0';
            lx->p += n;
            skip_space(lx);
        }
    }
    if (lx->end - lx->p >= 2 && lx->p[0] == ':' && lx->p[1] == '=') {
        lx->p += 2;
    } else if (!b && lx->p < lx->end && *lx->p == '=') {
        lx->p++;
        *assign = 1;
    } else {
        free(a);
        free(b);
        lx->p = save; /* a variable used as an operand */
        return 0;
    }
    if (b) { /* range $i, $x := : the second is the element */
        *v1 = b;
        *v2 = a;
    } else {
        *v1 = a;
    }
    return 1;
}

static int parse_pipeline(lexer *lx, expr **out)
{
    int rc = parse_command(lx, out, 0);
    if (rc < 0)
        return rc;
    skip_space(lx);
    if (lx->p < lx->end) {
        expr_free(*out);
        *out = NULL;
        if (*lx->p == '|')
            return perr(MS_EUNSUPPORTED, lx, "pipes ('|') are not supported");
        return perr(MS_EINVALID, lx, "unexpected '%.*s'", (int)(lx->end - lx->p > 20 ? 20 : lx->end - lx->p), lx->p);
    }
    return 0;
}

/* One action's node (lx spans its content); control words end or continue the enclosing list. */
static int parse_action(parser *ps, lexer *lx, node **out, stop_kind *stop, int depth)
{
    node *x = calloc(1, sizeof *x);
    int rc = 0, assign = 0;
    stop_kind st;
    lexer sl;

    *out = NULL;
    *stop = A_NONE;
    if (!x)
        return ms_err(MS_ENOMEM, "out of memory");
    x->line = lx->line;
    skip_space(lx);
    if (word_is(lx, "end") || word_is(lx, "else")) {
        int is_end = word_is(lx, "end");
        lx->p += is_end ? 3 : 4;
        skip_space(lx);
        free(x);
        if (is_end || lx->p == lx->end) {
            *stop = is_end ? A_END : A_ELSE;
            return lx->p == lx->end ? 0 : perr(MS_EINVALID, lx, "unexpected text after '%s'", is_end ? "end" : "else");
        }
        if (!word_is(lx, "if"))
            return perr(MS_EUNSUPPORTED, lx, "only 'else if' may follow 'else'");
        lx->p += 2;
        *stop = A_ELSE_IF;
        return 0; /* the caller parses the condition from lx */
    }
    if (word_is(lx, "if") || word_is(lx, "range")) {
        int is_if = word_is(lx, "if");
        lx->p += is_if ? 2 : 5;
        x->kind = is_if ? N_IF : N_RANGE;
        if (!is_if && (rc = parse_decl(lx, &x->var, &x->var2, &assign)) < 0)
            goto fail;
        if (rc == 1 && assign) {
            rc = perr(MS_EINVALID, lx, "range needs ':=', not '='");
            goto fail;
        }
        if ((rc = parse_pipeline(lx, &x->e)) < 0)
            goto fail;
        if (depth >= MAX_DEPTH) {
            rc = perr(MS_EUNSUPPORTED, lx, "blocks nested deeper than %d", MAX_DEPTH);
            goto fail;
        }
        if ((rc = parse_list(ps, &x->body, &x->n_body, &st, &sl, depth + 1)) < 0)
            goto fail;
        if (st == A_ELSE) {
            stop_kind st2;
            if ((rc = parse_list(ps, &x->alt, &x->n_alt, &st2, &sl, depth + 1)) < 0)
                goto fail;
            if (st2 != A_END) {
                rc = perr(MS_EINVALID, &sl, "'%s' after 'else'", st2 == A_NONE ? "end of template" : "else");
                goto fail;
            }
        } else if (st == A_ELSE_IF) {
            /* else if C: a nested if that shares this one's end. */
            node *y = calloc(1, sizeof *y);
            stop_kind st2 = A_ELSE_IF;
            node *cur;
            if (!y || push_node(&x->alt, &x->n_alt, y) < 0) {
                free(y);
                rc = ms_err(MS_ENOMEM, "out of memory");
                goto fail;
            }
            cur = y;
            while (st2 == A_ELSE_IF) {
                cur->kind = N_IF;
                cur->line = sl.line;
                if ((rc = parse_pipeline(&sl, &cur->e)) < 0 ||
                    (rc = parse_list(ps, &cur->body, &cur->n_body, &st2, &sl, depth + 1)) < 0)
                    goto fail;
                if (st2 == A_ELSE_IF) {
                    node *z = calloc(1, sizeof *z);
                    if (!z || push_node(&cur->alt, &cur->n_alt, z) < 0) {
                        free(z);
                        rc = ms_err(MS_ENOMEM, "out of memory");
                        goto fail;
                    }
                    cur = z;
                } else if (st2 == A_ELSE) {
                    if ((rc = parse_list(ps, &cur->alt, &cur->n_alt, &st2, &sl, depth + 1)) < 0)
                        goto fail;
                    if (st2 != A_END) {
                        rc = perr(MS_EINVALID, &sl, "'%s' after 'else'", st2 == A_NONE ? "end of template" : "else");
                        goto fail;
                    }
                }
            }
            if (st2 != A_END) {
                rc = perr(MS_EINVALID, lx, "'%s' has no 'end'", is_if ? "if" : "range");
                goto fail;
            }
        } else if (st != A_END) {
            rc = perr(MS_EINVALID, lx, "'%s' has no 'end'", is_if ? "if" : "range");
            goto fail;
        }
        *out = x;
        return 0;
    }
    if (word_is(lx, "break") || word_is(lx, "continue")) {
        x->kind = word_is(lx, "break") ? N_BREAK : N_CONTINUE;
        lx->p += x->kind == N_BREAK ? 5 : 8;
        skip_space(lx);
        if (lx->p != lx->end) {
            rc = perr(MS_EINVALID, lx, "unexpected text after '%s'", x->kind == N_BREAK ? "break" : "continue");
            goto fail;
        }
        *out = x;
        return 0;
    }
    if (word_is(lx, "with") || word_is(lx, "define") || word_is(lx, "template") || word_is(lx, "block")) {
        rc = perr(MS_EUNSUPPORTED, lx, "'%.*s' is not supported", (int)word_len(lx), lx->p);
        goto fail;
    }
    if ((rc = parse_decl(lx, &x->var, &x->var2, &assign)) < 0)
        goto fail;
    if (rc == 1 && x->var2) {
        rc = perr(MS_EINVALID, lx, "two variables outside range");
        goto fail;
    }
    x->kind = rc == 1 ? (assign ? N_ASSIGN : N_DECL) : N_PRINT;
    if ((rc = parse_pipeline(lx, &x->e)) < 0)
        goto fail;
    *out = x;
    return 0;
fail:
    node_free(x);
    return rc;
}

/* Nodes up to an end / else / else if action (its kind in *stop, A_NONE at the end of the
 * text); for else if, *stop_lx spans the condition. */
static int parse_list(parser *ps, node ***out, size_t *n_out, stop_kind *stop, lexer *stop_lx, int depth)
{
    *stop = A_NONE;
    while (ps->p < ps->end) {
        const char *open = NULL, *close, *text_end, *a, *b;
        int trim_left, trim_right, rc;
        node *x;
        stop_kind st;
        lexer lx;

        for (const char *q = ps->p; q + 1 < ps->end; q++)
            if (q[0] == '{' && q[1] == '{') {
                open = q;
                break;
            }
        text_end = open ? open : ps->end;
        trim_left = open && open + 3 < ps->end && open[2] == '-' && isspace((unsigned char)open[3]);
        {
            const char *ts = ps->p, *te = text_end;
            if (ps->trim_next)
                while (ts < te && isspace((unsigned char)*ts))
                    ts++;
            if (trim_left)
                while (te > ts && isspace((unsigned char)te[-1]))
                    te--;
            if (te > ts) {
                if (!(x = calloc(1, sizeof *x)))
                    return ms_err(MS_ENOMEM, "out of memory");
                x->kind = N_TEXT;
                x->text = ts;
                x->text_len = (size_t)(te - ts);
                x->line = ps->line;
                if ((rc = push_node(out, n_out, x)) < 0) {
                    free(x);
                    return rc;
                }
            }
        }
        ps->line += count_lines(ps->p, text_end);
        ps->trim_next = 0;
        if (!open) {
            ps->p = ps->end;
            break;
        }
        a = open + 2 + (trim_left ? 2 : 0);
        close = NULL;
        for (const char *q = a; q + 1 < ps->end; q++) {
            if (*q == '"' || *q == '`') { /* "}}" inside a string literal does not close */
                char c = *q;
                for (q++; q < ps->end && *q != c; q++)
                    if (c == '"' && *q == '\\')
                        q++;
                continue;
            }
            if (q[0] == '}' && q[1] == '}') {
                close = q;
                break;
            }
        }
        if (!close) {
            lexer e = {open, ps->end, ps->line, ps->t};
            return perr(MS_EINVALID, &e, "'{{' without '}}'");
        }
        trim_right = close - a >= 2 && close[-1] == '-' && isspace((unsigned char)close[-2]);
        b = trim_right ? close - 2 : close;
        ps->p = close + 2;
        ps->trim_next = trim_right;
        lx = (lexer){a, b, ps->line, ps->t};
        ps->line += count_lines(open, close);
        skip_space(&lx);
        if (lx.end - lx.p >= 2 && lx.p[0] == '/' && lx.p[1] == '*') {
            if (b - a < 4 || b[-1] != '/' || b[-2] != '*')
                return perr(MS_EINVALID, &lx, "unterminated comment");
            continue;
        }
        if ((rc = parse_action(ps, &lx, &x, &st, depth)) < 0)
            return rc;
        if (st != A_NONE) {
            *stop = st;
            *stop_lx = lx;
            return 0;
        }
        if ((rc = push_node(out, n_out, x)) < 0) {
            node_free(x);
            return rc;
        }
    }
    return 0;
}

int chat_gotmpl_parse(chat_gotmpl **out, const char *text, size_t len)
{
    chat_gotmpl *t = calloc(1, sizeof *t);
    parser ps;
    stop_kind st;
    lexer sl = {0};
    int rc;

    *out = NULL;
    if (!t)
        return ms_err(MS_ENOMEM, "out of memory");
    if (len > CHAT_GOTMPL_MAX_TEXT) {
        free(t);
        return ms_err(MS_EINVALID, "template: %zu bytes, more than %u", len, CHAT_GOTMPL_MAX_TEXT);
    }
    if (!(t->src = dupn(text, len))) {
        free(t);
        return ms_err(MS_ENOMEM, "out of memory");
    }
    ps = (parser){t, t->src, t->src + len, 1, 0};
    if ((rc = parse_list(&ps, &t->root, &t->n_root, &st, &sl, 0)) == 0 && st != A_NONE)
        rc = perr(MS_EINVALID, &sl, "'%s' without 'if' or 'range'", st == A_END ? "end" : "else");
    if (rc < 0) {
        chat_gotmpl_free(t);
        return rc;
    }
    *out = t;
    return 0;
}

/* ------------------------------------------------------------------ values and execution */

typedef enum { V_NIL, V_BOOL, V_INT, V_STR, V_MSGS, V_MSG, V_ROOT } vkind;

typedef struct value {
    vkind k;
    long long i;
    const char *s;
    size_t len;
    const chat_msg *msgs; /* V_MSGS: msgs[0..len); V_MSG: one */
} value;

typedef struct scope_var {
    const char *name;
    value v;
} scope_var;

typedef struct rctx {
    const chat_gotmpl *t;
    char *out;
    size_t n, cap;
    /* the data */
    const char *system, *prompt, *response;
    const chat_msg *msgs;
    size_t n_msgs;
    int cut; /* legacy last round: stop right after the first .Response */
    int saw_response;
    scope_var vars[MAX_VARS];
    size_t n_vars;
    char **owned; /* strings made while rendering (printf, merged messages) */
    size_t n_owned;
} rctx;

enum { X_OK = 0, X_BREAK = 1, X_CONTINUE = 2, X_HALT = 3 };

static int rerr(int line, const char *fmt, ...)
{
    char msg[256];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return ms_err(MS_EUNSUPPORTED, "template line %d: %s", line, msg);
}

static int emit(rctx *r, const char *s, size_t len)
{
    if (r->n + len + 1 > MAX_OUT)
        return ms_err(MS_EINVALID, "template: the rendering exceeds %zu bytes", MAX_OUT);
    if (r->n + len + 1 > r->cap) {
        size_t cap = (r->n + len + 1) * 2;
        char *p = realloc(r->out, cap);
        if (!p)
            return ms_err(MS_ENOMEM, "out of memory");
        r->out = p;
        r->cap = cap;
    }
    memcpy(r->out + r->n, s, len);
    r->n += len;
    r->out[r->n] = '\0';
    return 0;
}

static const char *own(rctx *r, char *s)
{
    char **o = s ? realloc(r->owned, (r->n_owned + 1) * sizeof *o) : NULL;
    if (!o) {
        free(s);
        return NULL;
    }
    r->owned = o;
    o[r->n_owned++] = s;
    return s;
}

static value vstr(const char *s)
{
    return (value){.k = V_STR, .s = s ? s : "", .len = s ? strlen(s) : 0};
}

static int truth(const value *v)
{
    switch (v->k) {
    case V_NIL:
        return 0;
    case V_BOOL:
    case V_INT:
        return v->i != 0;
    case V_STR:
    case V_MSGS:
        return v->len != 0;
    default:
        return 1;
    }
}

static int field_of(rctx *r, value *v, const char *f, int line)
{
    if (v->k == V_ROOT) {
        if (!strcmp(f, "System"))
            *v = vstr(r->system);
        else if (!strcmp(f, "Prompt"))
            *v = vstr(r->prompt);
        else if (!strcmp(f, "Response")) {
            *v = vstr(r->response);
            r->saw_response = 1;
        } else if (!strcmp(f, "Messages"))
            *v = (value){.k = V_MSGS, .msgs = r->msgs, .len = r->n_msgs};
        else if (!strcmp(f, "Suffix") || !strcmp(f, "ThinkLevel"))
            *v = vstr("");
        else if (!strcmp(f, "Think") || !strcmp(f, "IsThinkSet"))
            *v = (value){.k = V_BOOL};
        else if (!strcmp(f, "Tools"))
            *v = (value){.k = V_MSGS};
        else
            return rerr(line, "field .%s is not supported", f);
        return 0;
    }
    if (v->k == V_MSG) {
        const chat_msg *m = v->msgs;
        if (!strcmp(f, "Role"))
            *v = vstr(m->role);
        else if (!strcmp(f, "Content"))
            *v = vstr(m->content);
        else if (!strcmp(f, "Thinking") || !strcmp(f, "ToolName") || !strcmp(f, "ToolCallID"))
            *v = vstr("");
        else if (!strcmp(f, "ToolCalls") || !strcmp(f, "Images"))
            *v = (value){.k = V_MSGS};
        else
            return rerr(line, "field .%s of a message is not supported", f);
        return 0;
    }
    return rerr(line, "field .%s of a value that has no fields", f);
}

static value *var_find(rctx *r, const char *name)
{
    for (size_t i = r->n_vars; i-- > 0;)
        if (!strcmp(r->vars[i].name, name))
            return &r->vars[i].v;
    return NULL;
}

static int var_push(rctx *r, const char *name, value v, int line)
{
    if (r->n_vars == MAX_VARS)
        return rerr(line, "more than %d variables", MAX_VARS);
    r->vars[r->n_vars++] = (scope_var){name, v};
    return 0;
}

static int eval(rctx *r, const expr *e, const value *dot, value *out, int line);

static int compare(const value *a, const value *b, int *cmp_out, int line)
{
    if (a->k == V_STR && b->k == V_STR) {
        size_t n = a->len < b->len ? a->len : b->len;
        int c = memcmp(a->s, b->s, n);
        *cmp_out = c ? c : (a->len > b->len) - (a->len < b->len);
    } else if ((a->k == V_INT || a->k == V_BOOL) && a->k == b->k) {
        *cmp_out = (a->i > b->i) - (a->i < b->i);
    } else if (a->k == V_NIL && b->k == V_NIL) {
        *cmp_out = 0;
    } else {
        return rerr(line, "incompatible types for comparison");
    }
    return 0;
}

static int call_printf(rctx *r, value *args, size_t n, value *out, int line)
{
    char *buf = NULL;
    size_t len = 0, k = 1;
    FILE *f;
    int rc = 0;

    if (n < 1 || args[0].k != V_STR)
        return rerr(line, "printf needs a format string");
    if (!(f = open_memstream(&buf, &len)))
        return ms_err(MS_ENOMEM, "out of memory");
    for (size_t i = 0; i < args[0].len && rc == 0; i++) {
        char c = args[0].s[i];
        if (c != '%') {
            fputc(c, f);
            continue;
        }
        if (++i >= args[0].len) {
            rc = rerr(line, "printf: format ends in '%%'");
            break;
        }
        c = args[0].s[i];
        if (c == '%') {
            fputc('%', f);
        } else if (k >= n) {
            rc = rerr(line, "printf: more verbs than operands");
        } else if ((c == 's' || c == 'v' || c == 'q') && args[k].k == V_STR) {
            if (c == 'q')
                fputc('"', f);
            fwrite(args[k].s, 1, args[k].len, f);
            if (c == 'q')
                fputc('"', f);
            k++;
        } else if ((c == 'd' || c == 'v') && args[k].k == V_INT) {
            fprintf(f, "%lld", args[k++].i);
        } else if (c == 'v' && args[k].k == V_BOOL) {
            fputs(args[k++].i ? "true" : "false", f);
        } else {
            rc = rerr(line, "printf: verb '%%%c' for this operand is not supported", c);
        }
    }
    fclose(f);
    if (rc < 0) {
        free(buf);
        return rc;
    }
    if (!own(r, buf))
        return ms_err(MS_ENOMEM, "out of memory");
    *out = (value){.k = V_STR, .s = buf, .len = len};
    return 0;
}

static int call(rctx *r, const expr *e, const value *dot, value *out, int line)
{
    value a[MAX_ARGS];
    const char *f = e->name;
    int rc, c;

    /* and / or evaluate lazily, as Go's do, and give the deciding operand back. */
    if (!strcmp(f, "and") || !strcmp(f, "or")) {
        int want = !strcmp(f, "or");
        if (e->n_args < 1)
            return rerr(line, "%s needs operands", f);
        for (size_t i = 0; i < e->n_args; i++) {
            if ((rc = eval(r, e->args[i], dot, out, line)) < 0)
                return rc;
            if (truth(out) == want)
                return 0;
        }
        return 0;
    }
    for (size_t i = 0; i < e->n_args; i++)
        if ((rc = eval(r, e->args[i], dot, &a[i], line)) < 0)
            return rc;
    if (!strcmp(f, "not")) {
        if (e->n_args != 1)
            return rerr(line, "not needs one operand");
        *out = (value){.k = V_BOOL, .i = !truth(&a[0])};
    } else if (!strcmp(f, "eq")) {
        if (e->n_args < 2)
            return rerr(line, "eq needs two operands");
        *out = (value){.k = V_BOOL};
        for (size_t i = 1; i < e->n_args && !out->i; i++) {
            if ((rc = compare(&a[0], &a[i], &c, line)) < 0)
                return rc;
            out->i = c == 0;
        }
    } else if (!strcmp(f, "ne") || !strcmp(f, "lt") || !strcmp(f, "le") || !strcmp(f, "gt") || !strcmp(f, "ge")) {
        if (e->n_args != 2)
            return rerr(line, "%s needs two operands", f);
        if ((rc = compare(&a[0], &a[1], &c, line)) < 0)
            return rc;
        *out = (value){.k = V_BOOL,
                       .i = !strcmp(f, "ne")   ? c != 0
                            : !strcmp(f, "lt") ? c < 0
                            : !strcmp(f, "le") ? c <= 0
                            : !strcmp(f, "gt") ? c > 0
                                               : c >= 0};
    } else if (!strcmp(f, "len")) {
        if (e->n_args != 1 || (a[0].k != V_STR && a[0].k != V_MSGS))
            return rerr(line, "len needs one string or list");
        *out = (value){.k = V_INT, .i = (long long)a[0].len};
    } else if (!strcmp(f, "index")) {
        if (e->n_args != 2 || a[0].k != V_MSGS || a[1].k != V_INT)
            return rerr(line, "index needs a list and an integer");
        if (a[1].i < 0 || (size_t)a[1].i >= a[0].len)
            return rerr(line, "index %lld out of range (%zu)", a[1].i, a[0].len);
        *out = (value){.k = V_MSG, .msgs = a[0].msgs + a[1].i};
    } else if (!strcmp(f, "slice")) {
        long long lo = e->n_args > 1 && a[1].k == V_INT ? a[1].i : 0;
        long long hi = e->n_args > 2 && a[2].k == V_INT ? a[2].i : (long long)a[0].len;
        if (e->n_args < 1 || e->n_args > 3 || (a[0].k != V_MSGS && a[0].k != V_STR))
            return rerr(line, "slice needs a list or string and up to two integers");
        if (lo < 0 || hi < lo || (size_t)hi > a[0].len)
            return rerr(line, "slice [%lld:%lld] out of range (%zu)", lo, hi, a[0].len);
        *out = a[0];
        out->len = (size_t)(hi - lo);
        if (a[0].k == V_MSGS)
            out->msgs += lo;
        else
            out->s += lo;
    } else {
        return call_printf(r, a, e->n_args, out, line);
    }
    return 0;
}

static int eval(rctx *r, const expr *e, const value *dot, value *out, int line)
{
    size_t i = 0;
    int rc;

    switch (e->kind) {
    case E_DOT:
        *out = *dot;
        return 0;
    case E_STR:
        *out = (value){.k = V_STR, .s = e->name, .len = e->name_len};
        return 0;
    case E_INT:
        *out = (value){.k = V_INT, .i = e->ival};
        return 0;
    case E_BOOL:
        *out = (value){.k = V_BOOL, .i = e->ival};
        return 0;
    case E_CALL:
        return call(r, e, dot, out, line);
    case E_FIELD:
        *out = *dot;
        break;
    case E_VAR: {
        value *v = !strcmp(e->name, "$") ? NULL : var_find(r, e->name);
        if (!strcmp(e->name, "$"))
            *out = (value){.k = V_ROOT};
        else if (!v)
            return rerr(line, "undefined variable %s", e->name);
        else
            *out = *v;
        break;
    }
    }
    for (; i < e->n_fields; i++)
        if ((rc = field_of(r, out, e->fields[i], line)) < 0)
            return rc;
    return 0;
}

static int print_value(rctx *r, const value *v, int line)
{
    char num[32];

    switch (v->k) {
    case V_STR:
        return emit(r, v->s, v->len);
    case V_INT:
        snprintf(num, sizeof num, "%lld", v->i);
        return emit(r, num, strlen(num));
    case V_BOOL:
        return emit(r, v->i ? "true" : "false", v->i ? 4 : 5);
    case V_NIL:
        return emit(r, "<no value>", 10);
    default:
        return rerr(line, "printing a list or a message is not supported");
    }
}

static int exec_list(rctx *r, node *const *v, size_t n, const value *dot);

static int exec_node(rctx *r, const node *x, const value *dot)
{
    value v;
    value *slot;
    int rc;

    switch (x->kind) {
    case N_TEXT:
        return emit(r, x->text, x->text_len);
    case N_BREAK:
        return X_BREAK;
    case N_CONTINUE:
        return X_CONTINUE;
    case N_PRINT:
        if ((rc = eval(r, x->e, dot, &v, x->line)) < 0 || (rc = print_value(r, &v, x->line)) < 0)
            return rc;
        return r->cut && r->saw_response ? X_HALT : X_OK;
    case N_DECL:
        if ((rc = eval(r, x->e, dot, &v, x->line)) < 0)
            return rc;
        return var_push(r, x->var, v, x->line);
    case N_ASSIGN:
        if ((rc = eval(r, x->e, dot, &v, x->line)) < 0)
            return rc;
        if (!(slot = var_find(r, x->var)))
            return rerr(x->line, "undefined variable %s", x->var);
        *slot = v;
        return 0;
    case N_IF: {
        size_t mark = r->n_vars;
        if ((rc = eval(r, x->e, dot, &v, x->line)) < 0)
            return rc;
        if (r->cut && r->saw_response)
            return X_HALT;
        rc = truth(&v) ? exec_list(r, x->body, x->n_body, dot) : exec_list(r, x->alt, x->n_alt, dot);
        r->n_vars = mark;
        return rc;
    }
    case N_RANGE: {
        size_t mark = r->n_vars;
        if ((rc = eval(r, x->e, dot, &v, x->line)) < 0)
            return rc;
        if (v.k != V_MSGS && v.k != V_NIL)
            return rerr(x->line, "range over a value that is not a list");
        if (!truth(&v)) {
            rc = exec_list(r, x->alt, x->n_alt, dot);
            r->n_vars = mark;
            return rc;
        }
        for (size_t i = 0; i < v.len; i++) {
            value el = {.k = V_MSG, .msgs = v.msgs + i};
            r->n_vars = mark;
            if (x->var2 && (rc = var_push(r, x->var2, (value){.k = V_INT, .i = (long long)i}, x->line)) < 0)
                return rc;
            if (x->var && (rc = var_push(r, x->var, el, x->line)) < 0)
                return rc;
            rc = exec_list(r, x->body, x->n_body, &el);
            if (rc < 0 || rc == X_HALT || rc == X_BREAK)
                break;
        }
        r->n_vars = mark;
        return rc == X_BREAK || rc == X_CONTINUE ? X_OK : rc;
    }
    }
    return 0;
}

static int exec_list(rctx *r, node *const *v, size_t n, const value *dot)
{
    for (size_t i = 0; i < n; i++) {
        int rc = exec_node(r, v[i], dot);
        if (rc != X_OK)
            return rc;
    }
    return X_OK;
}

/* One execution over the current data; the variables start empty ($ is the root). */
static int execute(rctx *r)
{
    value root = {.k = V_ROOT};
    int rc;

    r->n_vars = 0;
    r->saw_response = 0;
    rc = exec_list(r, r->t->root, r->t->n_root, &root);
    if (rc == X_BREAK || rc == X_CONTINUE)
        return rerr(1, "break or continue outside range");
    return rc < 0 ? rc : 0;
}

static char *join2(const char *a, const char *b)
{
    return ms_strdup_printf("%s\n\n%s", a, b);
}

int chat_gotmpl_render(char **out, size_t *len_out, const chat_gotmpl *t, const chat_msg *msgs, size_t n)
{
    rctx r = {.t = t};
    chat_msg *col = calloc(n ? n : 1, sizeof *col);
    const char *sys = NULL;
    size_t nc = 0;
    int rc = 0;

    *out = NULL;
    *len_out = 0;
    if (!col)
        return ms_err(MS_ENOMEM, "out of memory");
    /* ollama collates: every system message joined into .System; consecutive messages of one
     * role (tool results excepted) merged into one. */
    for (size_t i = 0; i < n && rc == 0; i++) {
        const char *role = msgs[i].role ? msgs[i].role : "", *content = msgs[i].content ? msgs[i].content : "";
        if (!strcmp(role, "system"))
            sys = sys ? own(&r, join2(sys, content)) : content;
        if (nc && !strcmp(col[nc - 1].role, role) && strcmp(role, "tool") != 0)
            col[nc - 1].content = own(&r, join2(col[nc - 1].content, content));
        else
            col[nc++] = (chat_msg){role, content};
        if ((!strcmp(role, "system") && !sys) || (nc && !col[nc - 1].content))
            rc = ms_err(MS_ENOMEM, "out of memory");
    }
    if (rc == 0 && t->uses_messages) {
        r.system = sys;
        r.msgs = col;
        r.n_msgs = nc;
        r.response = "";
        rc = execute(&r);
    } else if (rc == 0) {
        /* The legacy loop: a round per (system, prompt, response); the last cut at .Response. */
        const char *s = "", *p = "", *a = "";
        for (size_t i = 0; i < nc && rc == 0; i++) {
            const char *role = col[i].role;
            int flush = (!strcmp(role, "system") && (*p || *a)) || (!strcmp(role, "user") && *a);
            if (flush) {
                r.system = s, r.prompt = p, r.response = a;
                rc = execute(&r);
                s = p = a = "";
            }
            if (!strcmp(role, "system"))
                s = col[i].content;
            else if (!strcmp(role, "user"))
                p = col[i].content;
            else if (!strcmp(role, "assistant"))
                a = col[i].content;
        }
        if (rc == 0) {
            r.system = s, r.prompt = p, r.response = a;
            r.cut = 1;
            rc = execute(&r);
        }
    }
    for (size_t i = 0; i < r.n_owned; i++)
        free(r.owned[i]);
    free(r.owned);
    free(col);
    if (rc < 0) {
        free(r.out);
        return rc;
    }
    if (!r.out && !(r.out = calloc(1, 1)))
        return ms_err(MS_ENOMEM, "out of memory");
    *out = r.out;
    *len_out = r.n;
    return 0;
}

int chat_gotmpl_looks(const char *text, size_t len)
{
    int has_action = 0;

    for (size_t i = 0; i + 1 < len; i++) {
        if (text[i] == '{' && text[i + 1] == '%')
            return 0;
        has_action |= text[i] == '{' && text[i + 1] == '{';
    }
    return has_action;
}
