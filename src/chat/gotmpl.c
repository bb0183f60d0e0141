/* gotmpl.c: a bounded interpreter for the subset of Go's text/template that ollama's model
 * templates use, with ollama's data model.
 *
 * Subset: text; {{ pipeline }}; {{- and -}} trimming; comments ({{/ * ... * /}}); if / else if / else /
 * end; range [$i,] [$x :=] pipeline ... [else] end, with break and continue; variables ($,
 * $x := v, $x = v, $x.Field); fields .A.B of the data, of a message, of a variable; literals
 * ("...", `...`, integers, true, false); parentheses; the functions eq (several operands: any
 * equal), ne, lt, le, gt, ge, not, and, or, len, index, slice, printf (%s %d %v %q %%) and
 * ollama's json (Go's json.Marshal). Anything else (pipes with |, with, define, template,
 * block, other functions) refuses to parse with MS_EUNSUPPORTED naming the line, so the caller
 * can fall back.
 *
 * Data, as ollama's template.Execute gives it: with the template mentioning .Messages, one
 * execution with .System (every system message, "\n\n"-joined), .Messages (consecutive messages
 * of one role, tool results excepted, merged into the first with "\n\n"), .Tools, .Response "" ;
 * otherwise the legacy loop, one execution per (system, prompt, response) round with .System
 * .Prompt .Response, the last one cut right after its first .Response. A message has .Role
 * .Content .ToolCalls .ToolName .ToolCallID; the tools and the calls are Go values whose fields,
 * ranges and printing follow ollama's Go types (gotmpl_tools.c).
 *
 * Bounds: the template text (CHAT_GOTMPL_MAX_TEXT), nesting depth, variables, the output
 * (CHAT_GOTMPL_MAX_OUT) and the actions executed (MAX_STEPS): a template has no loops but range
 * over finite lists and no calls, so rendering always ends, but nested ranges multiply, and
 * without the step bound ended only after 4^14 passes in the fuzzer's case. */
#include <ctype.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/gotmpl_int.h"

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

static const char *const funcs[] = {"eq",  "ne", "lt",  "le",    "gt",    "ge",     "not",
                                    "and", "or", "len", "index", "slice", "printf", "json"};

/* What the template mentions decides how it executes: .Messages (as ollama's Vars finds it)
 * and whether it has a place for tools and their calls. */
static void note_fields(chat_gotmpl *t, const expr *e)
{
    for (size_t i = 0; i < e->n_fields; i++) {
        t->uses_messages |= !strcmp(e->fields[i], "Messages");
        t->uses_tools |= !strcmp(e->fields[i], "Tools");
        t->uses_tool_calls |= !strcmp(e->fields[i], "ToolCalls");
    }
}

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
        note_fields(lx->t, e);
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
            note_fields(lx->t, e);
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
/* The else branch of block n: its list must end at the block's 'end'. */
static int parse_else(parser *ps, node *n, lexer *sl, int depth)
{
    stop_kind st;
    int rc;

    if ((rc = parse_list(ps, &n->alt, &n->n_alt, &st, sl, depth + 1)) < 0)
        return rc;
    if (st != A_END)
        return perr(MS_EINVALID, sl, "'%s' after 'else'", st == A_NONE ? "end of template" : "else");
    return 0;
}

/* else if C ...: each a nested if in the alt of the one before, all sharing the outer block's
 * end. `sl` holds the first condition; *st is where the chain stopped (A_END when whole). */
static int parse_else_if(parser *ps, node *x, lexer *sl, stop_kind *st, int depth)
{
    node *cur = x;
    int rc;

    while (*st == A_ELSE_IF) {
        node *y = calloc(1, sizeof *y);
        if (!y || push_node(&cur->alt, &cur->n_alt, y) < 0) {
            free(y);
            return ms_err(MS_ENOMEM, "out of memory");
        }
        cur = y;
        cur->kind = N_IF;
        cur->line = sl->line;
        if ((rc = parse_pipeline(sl, &cur->e)) < 0 ||
            (rc = parse_list(ps, &cur->body, &cur->n_body, st, sl, depth + 1)) < 0)
            return rc;
        if (*st == A_ELSE) {
            if ((rc = parse_else(ps, cur, sl, depth)) < 0)
                return rc;
            *st = A_END;
        }
    }
    return 0;
}

/* An if or range after its keyword: the header (range's variables, the pipeline), the body,
 * and the else or else-if chain up to the one 'end'. */
static int parse_block(parser *ps, lexer *lx, node *x, int depth)
{
    int rc = 0, assign = 0, is_if = x->kind == N_IF;
    stop_kind st;
    lexer sl;

    if (!is_if && (rc = parse_decl(lx, &x->var, &x->var2, &assign)) < 0)
        return rc;
    if (rc == 1 && assign)
        return perr(MS_EINVALID, lx, "range needs ':=', not '='");
    if ((rc = parse_pipeline(lx, &x->e)) < 0)
        return rc;
    if (depth >= MAX_DEPTH)
        return perr(MS_EUNSUPPORTED, lx, "blocks nested deeper than %d", MAX_DEPTH);
    if ((rc = parse_list(ps, &x->body, &x->n_body, &st, &sl, depth + 1)) < 0)
        return rc;
    if (st == A_ELSE) {
        if ((rc = parse_else(ps, x, &sl, depth)) < 0)
            return rc;
        st = A_END;
    } else if (st == A_ELSE_IF && (rc = parse_else_if(ps, x, &sl, &st, depth)) < 0) {
        return rc;
    }
    if (st != A_END)
        return perr(MS_EINVALID, lx, "'%s' has no 'end'", is_if ? "if" : "range");
    return 0;
}

static int parse_action(parser *ps, lexer *lx, node **out, stop_kind *stop, int depth)
{
    node *x = calloc(1, sizeof *x);
    int rc = 0, assign = 0;

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
        if ((rc = parse_block(ps, lx, x, depth)) < 0)
            goto fail;
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
