/* jinja_parse.c: tokens to a tree, by recursive descent with Jinja's precedence (lowest first):
 * `a if c else b`, or, and, not, comparisons (== != < <= > >= in, not in), + -, ~, * / // %, **,
 * unary -, then a primary with its postfixes (.name, [i], [a:b:c], (args)), filters (|f) and
 * tests (is [not] t). Statements: if/elif/else, for (with `if` and `else`), set (also `ns.x =`
 * and the block form), macro, call, filter, break, continue. Depth is bounded so a hostile
 * template cannot exhaust the stack. */
#include <stdio.h>
#include <string.h>

#include "chat/jinja_int.h"

typedef struct parser {
    jarena *a;
    jtok *t;
    size_t n, i;
    int depth;
} parser;

static jtok *peek(parser *p)
{
    return &p->t[p->i];
}

static int fail(parser *p, const char *fmt, const char *what)
{
    char msg[160];
    snprintf(msg, sizeof msg, fmt, what);
    return ms_err(MS_EINVALID, "chat template line %d: %s", peek(p)->line, msg);
}

static int is_op(parser *p, const char *op)
{
    jtok *t = peek(p);
    return t->t == TK_OP && t->n == strlen(op) && memcmp(t->p, op, t->n) == 0;
}

static int is_word(parser *p, const char *w)
{
    jtok *t = peek(p);
    return t->t == TK_NAME && t->n == strlen(w) && memcmp(t->p, w, t->n) == 0;
}

static int accept_op(parser *p, const char *op)
{
    return is_op(p, op) ? (p->i++, 1) : 0;
}

static int accept_word(parser *p, const char *w)
{
    return is_word(p, w) ? (p->i++, 1) : 0;
}

static int expect_op(parser *p, const char *op)
{
    return accept_op(p, op) ? 0 : fail(p, "expected '%s'", op);
}

static jnode *node(parser *p, jnode_kind k)
{
    jnode *n = jinja__alloc(p->a, sizeof *n);
    if (!n) {
        ms_err(MS_ENOMEM, "chat template: out of memory");
        return NULL;
    }
    n->kind = k;
    n->line = peek(p)->line;
    return n;
}

int jinja__list_push(jarena *a, jnlist *l, jnode *n)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        jnode **v = jinja__alloc(a, cap * sizeof *v);
        if (!v)
            return ms_err(MS_ENOMEM, "chat template: out of memory");
        if (l->n)
            memcpy(v, l->v, l->n * sizeof *v);
        l->v = v, l->cap = cap;
    }
    l->v[l->n++] = n;
    return 0;
}

static const char *name_dup(parser *p, const jtok *t)
{
    char *s = jinja__alloc(p->a, t->n + 1);
    if (!s) {
        ms_err(MS_ENOMEM, "chat template: out of memory");
        return NULL;
    }
    memcpy(s, t->p, t->n);
    return s;
}

static const char *expect_name(parser *p)
{
    if (peek(p)->t != TK_NAME) {
        fail(p, "expected a name%s", "");
        return NULL;
    }
    return name_dup(p, &p->t[p->i++]);
}

static jnode *expr(parser *p);
static jnode *unary(parser *p);

/* arguments up to ')': positional and name=value; the '(' is consumed */
static int call_args(parser *p, jnode *n)
{
    size_t cap = 0;
    while (!accept_op(p, ")")) {
        const char *kw = NULL;
        if (n->args.n && expect_op(p, ",") < 0)
            return -1;
        if (accept_op(p, ")"))
            break;
        if (peek(p)->t == TK_NAME && p->t[p->i + 1].t == TK_OP && p->t[p->i + 1].n == 1 && p->t[p->i + 1].p[0] == '=') {
            if (!(kw = name_dup(p, peek(p))))
                return -1;
            p->i += 2;
        }
        jnode *v = expr(p);
        if (!v || jinja__list_push(p->a, &n->args, v) < 0)
            return -1;
        if (n->args.n > cap) {
            size_t ncap = n->args.cap;
            const char **k = jinja__alloc(p->a, ncap * sizeof *k);
            if (!k)
                return ms_err(MS_ENOMEM, "chat template: out of memory");
            if (n->kw)
                memcpy(k, n->kw, (n->args.n - 1) * sizeof *k);
            n->kw = k, cap = ncap;
        }
        n->kw[n->args.n - 1] = kw;
    }
    return 0;
}

static jnode *literal(parser *p, jv v)
{
    jnode *n = node(p, N_LIT);
    if (n)
        n->v = v;
    return n;
}

static jnode *primary(parser *p)
{
    jtok *t = peek(p);
    jnode *n;

    if (t->t == TK_STR) {
        /* adjacent strings join, as in Python */
        size_t len = 0, k;
        for (k = p->i; p->t[k].t == TK_STR; k++)
            len += p->t[k].n;
        char *s = jinja__alloc(p->a, len + 1);
        if (!s)
            return ms_err(MS_ENOMEM, "chat template: out of memory"), NULL;
        for (len = 0; p->t[p->i].t == TK_STR; p->i++)
            memcpy(s + len, p->t[p->i].p, p->t[p->i].n), len += p->t[p->i].n;
        return literal(p, jinja__str(s, len));
    }
    if (t->t == TK_INT || t->t == TK_FLOAT) {
        p->i++;
        return literal(p, t->t == TK_INT ? (jv){.t = JV_INT, .u.i = t->i} : (jv){.t = JV_FLOAT, .u.f = t->f});
    }
    if (t->t == TK_NAME) {
        static const struct {
            const char *w;
            jv v;
        } k[] = {{"true", {.t = JV_BOOL, .u.i = 1}},  {"True", {.t = JV_BOOL, .u.i = 1}},
                 {"false", {.t = JV_BOOL, .u.i = 0}}, {"False", {.t = JV_BOOL, .u.i = 0}},
                 {"none", {.t = JV_NONE}},            {"None", {.t = JV_NONE}}};
        for (size_t j = 0; j < sizeof k / sizeof *k; j++)
            if (accept_word(p, k[j].w))
                return literal(p, k[j].v);
        if (!(n = node(p, N_NAME)) || !(n->s = expect_name(p)))
            return NULL;
        return n;
    }
    if (accept_op(p, "(")) {
        jnode *e = expr(p);
        if (!e)
            return NULL;
        if (is_op(p, ",")) {
            /* a tuple: a list that prints as Python prints a tuple */
            if (!(n = node(p, N_LIST)) || jinja__list_push(p->a, &n->args, e) < 0)
                return NULL;
            n->op = 1;
            while (accept_op(p, ",") && !is_op(p, ")"))
                if (!(e = expr(p)) || jinja__list_push(p->a, &n->args, e) < 0)
                    return NULL;
            e = n;
        }
        return expect_op(p, ")") < 0 ? NULL : e;
    }
    if (accept_op(p, "[")) {
        if (!(n = node(p, N_LIST)))
            return NULL;
        while (!accept_op(p, "]")) {
            jnode *e;
            if (n->args.n && expect_op(p, ",") < 0)
                return NULL;
            if (accept_op(p, "]"))
                break;
            if (!(e = expr(p)) || jinja__list_push(p->a, &n->args, e) < 0)
                return NULL;
        }
        return n;
    }
    if (accept_op(p, "{")) {
        if (!(n = node(p, N_DICT)))
            return NULL;
        while (!accept_op(p, "}")) {
            jnode *k, *v;
            if (n->args.n && expect_op(p, ",") < 0)
                return NULL;
            if (accept_op(p, "}"))
                break;
            if (!(k = expr(p)) || expect_op(p, ":") < 0 || !(v = expr(p)) || jinja__list_push(p->a, &n->args, k) < 0 ||
                jinja__list_push(p->a, &n->body, v) < 0)
                return NULL;
        }
        return n;
    }
    fail(p, "unexpected %s", t->t == TK_END ? "end of tag" : t->t == TK_EOF ? "end of template" : "token");
    return NULL;
}

/* .name [i] [a:b:c] (args) after a primary */
static jnode *postfix(parser *p, jnode *e)
{
    while (e) {
        jnode *n;
        if (accept_op(p, ".")) {
            if (!(n = node(p, N_ATTR)))
                return NULL;
            n->a = e;
            if (peek(p)->t == TK_INT) {  /* x.0: an index */
                n->kind = N_ITEM;
                if (!(n->b = literal(p, (jv){.t = JV_INT, .u.i = peek(p)->i})))
                    return NULL;
                p->i++;
            } else if (!(n->s = expect_name(p)))
                return NULL;
        } else if (accept_op(p, "[")) {
            jnode *parts[3] = {0};
            int k = 0;
            if (!(n = node(p, N_ITEM)))
                return NULL;
            for (;;) {
                if (!is_op(p, ":") && !is_op(p, "]") && !(parts[k] = expr(p)))
                    return NULL;
                if (k < 2 && accept_op(p, ":")) {
                    n->kind = N_SLICE, k++;
                    continue;
                }
                break;
            }
            if (expect_op(p, "]") < 0)
                return NULL;
            if (n->kind == N_ITEM && !parts[0])
                return fail(p, "empty subscript%s", ""), NULL;
            n->a = e, n->b = parts[0], n->c = parts[1], n->d = parts[2];
        } else if (accept_op(p, "(")) {
            if (!(n = node(p, N_CALL)))
                return NULL;
            n->a = e;
            if (call_args(p, n) < 0)
                return NULL;
        } else
            return e;
        e = n;
    }
    return NULL;
}

/* |filter(args) and is [not] test(args) */
static jnode *filters(parser *p, jnode *e)
{
    while (e) {
        jnode *n;
        if (accept_op(p, "|")) {
            if (!(n = node(p, N_FILTER)) || !(n->s = expect_name(p)))
                return NULL;
            if (accept_op(p, "(") && call_args(p, n) < 0)
                return NULL;
        } else if (accept_word(p, "is")) {
            if (!(n = node(p, N_TEST)))
                return NULL;
            n->op = accept_word(p, "not");
            if (accept_word(p, "none") || accept_word(p, "None"))
                n->s = "none";
            else if (accept_word(p, "true") || accept_word(p, "True"))
                n->s = "true";
            else if (accept_word(p, "false") || accept_word(p, "False"))
                n->s = "false";
            else if (!(n->s = expect_name(p)))
                return NULL;
            if (accept_op(p, "(")) {
                if (call_args(p, n) < 0)
                    return NULL;
            } else if (peek(p)->t == TK_STR || peek(p)->t == TK_INT || peek(p)->t == TK_FLOAT) {
                jnode *arg = primary(p);  /* `is divisibleby 3`, `is equalto 'x'` */
                if (!arg || jinja__list_push(p->a, &n->args, arg) < 0)
                    return NULL;
            }
        } else
            return e;
        n->a = e;
        e = n;
    }
    return NULL;
}

static jnode *binary(parser *p, jnode *a, int op, jnode *(*next)(parser *))
{
    jnode *n = node(p, N_BIN);
    if (!n || !(n->b = next(p)))
        return NULL;
    n->a = a, n->op = op;
    return n;
}

static jnode *unary(parser *p)
{
    jnode *n;
    if (++p->depth > JINJA_MAX_DEPTH)
        return fail(p, "expression nested too deeply%s", ""), NULL;
    if (accept_op(p, "-") || accept_op(p, "+")) {
        int neg = p->t[p->i - 1].p[0] == '-';
        if (!(n = node(p, N_NEG)) || !(n->a = unary(p)))
            return NULL;
        if (!neg)
            n = n->a;
        p->depth--;
        return filters(p, n);
    }
    n = filters(p, postfix(p, primary(p)));
    p->depth--;
    return n;
}

typedef struct optab {
    const char *op;
    int code;
} optab;

/* the code of the operator of ops (ended by {NULL}) that comes next, consumed; 0: none */
static int match_op(parser *p, const optab *ops)
{
    for (; ops->op; ops++)
        if (accept_op(p, ops->op))
            return ops->code;
    return 0;
}

/* next() joined left to right by the operators of ops */
static jnode *left_assoc(parser *p, const optab *ops, jnode *(*next)(parser *))
{
    jnode *e = next(p);
    int code;
    while (e && (code = match_op(p, ops)))
        e = binary(p, e, code, next);
    return e;
}

static jnode *power(parser *p)
{
    static const optab ops[] = {{"**", OP_POW}, {NULL, 0}};
    return left_assoc(p, ops, unary);
}

static jnode *product(parser *p)
{
    static const optab ops[] = {{"*", OP_MUL}, {"//", OP_FLOORDIV}, {"/", OP_DIV}, {"%", OP_MOD}, {NULL, 0}};
    return left_assoc(p, ops, power);
}

static jnode *concat(parser *p)
{
    static const optab ops[] = {{"~", OP_CAT}, {NULL, 0}};
    return left_assoc(p, ops, product);
}

static jnode *sum(parser *p)
{
    static const optab ops[] = {{"+", OP_ADD}, {"-", OP_SUB}, {NULL, 0}};
    return left_assoc(p, ops, concat);
}

static jnode *compare(parser *p)
{
    static const optab ops[] = {{"==", OP_EQ}, {"!=", OP_NE}, {"<=", OP_LE}, {">=", OP_GE},
                                {"<", OP_LT},  {">", OP_GT},  {NULL, 0}};
    jnode *e = sum(p);
    while (e) {
        int code = match_op(p, ops);
        if (!code && accept_word(p, "in"))
            code = OP_IN;
        if (!code && is_word(p, "not") && p->t[p->i + 1].t == TK_NAME && p->t[p->i + 1].n == 2 &&
            memcmp(p->t[p->i + 1].p, "in", 2) == 0)
            p->i += 2, code = OP_NOTIN;
        if (!code)
            return e;
        e = binary(p, e, code, sum);
    }
    return NULL;
}

static jnode *not_expr(parser *p)
{
    if (accept_word(p, "not")) {
        jnode *n = node(p, N_NOT);
        if (++p->depth > JINJA_MAX_DEPTH)
            return fail(p, "expression nested too deeply%s", ""), NULL;
        if (!n || !(n->a = not_expr(p)))
            return NULL;
        p->depth--;
        return n;
    }
    return compare(p);
}

static jnode *logic(parser *p, jnode_kind k, const char *word, jnode *(*next)(parser *))
{
    jnode *e = next(p);
    while (e && accept_word(p, word)) {
        jnode *n = node(p, k);
        if (!n || !(n->b = next(p)))
            return NULL;
        n->a = e, e = n;
    }
    return e;
}

static jnode *and_expr(parser *p)
{
    return logic(p, N_AND, "and", not_expr);
}

static jnode *or_expr(parser *p)
{
    return logic(p, N_OR, "or", and_expr);
}

/* or_expr [if or_expr [else expr]] */
static jnode *expr(parser *p)
{
    jnode *e = or_expr(p);
    if (e && accept_word(p, "if")) {
        jnode *n = node(p, N_COND);
        if (!n || !(n->b = or_expr(p)))
            return NULL;
        n->a = e;
        if (accept_word(p, "else") && !(n->c = expr(p)))
            return NULL;
        e = n;
    }
    return e;
}

static int expect_end(parser *p)
{
    if (peek(p)->t != TK_END)
        return fail(p, "expected the end of the tag%s", "");
    p->i++;
    return 0;
}

/* statements until one of the `stop` words opens a block tag (left at that word) */
static int body(parser *p, jnlist *out, const char *const *stop, const char *what);

static int stmt_if(parser *p, jnode *n)
{
    static const char *const stop[] = {"elif", "else", "endif", NULL};
    if (!(n->a = expr(p)) || expect_end(p) < 0 || body(p, &n->body, stop, "if") < 0)
        return -1;
    if (accept_word(p, "elif")) {
        jnode *e = node(p, N_IF);
        if (!e || jinja__list_push(p->a, &n->orelse, e) < 0)
            return -1;
        return stmt_if(p, e);
    }
    if (accept_word(p, "else")) {
        static const char *const stop2[] = {"endif", NULL};
        if (expect_end(p) < 0 || body(p, &n->orelse, stop2, "if") < 0)
            return -1;
    }
    if (!accept_word(p, "endif"))
        return fail(p, "expected endif%s", "");
    return expect_end(p);
}

static int stmt_for(parser *p, jnode *n)
{
    static const char *const stop[] = {"else", "endfor", NULL}, *const stop2[] = {"endfor", NULL};
    if (!(n->s = expect_name(p)))
        return -1;
    if (accept_op(p, ",") && !(n->s2 = expect_name(p)))
        return -1;
    if (!accept_word(p, "in"))
        return fail(p, "expected 'in'%s", "");
    /* the iterable may not be a bare conditional: its `if` filters the loop */
    if (!(n->a = or_expr(p)))
        return -1;
    if (accept_word(p, "if") && !(n->b = expr(p)))
        return -1;
    if (accept_word(p, "recursive"))
        n->op = 1;  /* loop(items) in the body reruns it (jinja_eval.c) */
    if (expect_end(p) < 0 || body(p, &n->body, stop, "for") < 0)
        return -1;
    if (accept_word(p, "else") && (expect_end(p) < 0 || body(p, &n->orelse, stop2, "for") < 0))
        return -1;
    if (!accept_word(p, "endfor"))
        return fail(p, "expected endfor%s", "");
    return expect_end(p);
}

static int stmt_set(parser *p, jnode *n)
{
    static const char *const stop[] = {"endset", NULL};
    if (!(n->s = expect_name(p)))
        return -1;
    if (accept_op(p, ".") && !(n->s2 = expect_name(p)))
        return -1;
    if (accept_op(p, "="))
        return !(n->a = expr(p)) ? -1 : expect_end(p);
    if (expect_end(p) < 0 || body(p, &n->body, stop, "set") < 0)
        return -1;
    p->i++;
    return expect_end(p);
}

/* macro name(a, b=default) ...: parameters are N_NAME nodes, a default in their `a` */
static int params(parser *p, jnode *n)
{
    if (!accept_op(p, "("))
        return 0;
    while (!accept_op(p, ")")) {
        jnode *k;
        if (n->args.n && expect_op(p, ",") < 0)
            return -1;
        if (!(k = node(p, N_NAME)) || !(k->s = expect_name(p)) || jinja__list_push(p->a, &n->args, k) < 0)
            return -1;
        if (accept_op(p, "=") && !(k->a = expr(p)))
            return -1;
    }
    return 0;
}

static int stmt_block(parser *p, jnode *n, const char *end)
{
    const char *const stop[] = {end, NULL};
    if (expect_end(p) < 0 || body(p, &n->body, stop, end + 3) < 0)
        return -1;
    p->i++;
    return expect_end(p);
}

static int statement(parser *p, jnlist *out)
{
    jnode *n;
    int line = peek(p)->line;
    if (peek(p)->t != TK_NAME)
        return fail(p, "expected a statement%s", "");
    if (!(n = node(p, N_IF)))
        return -1;
    if (accept_word(p, "if")) {
        if (stmt_if(p, n) < 0)
            return -1;
    } else if (accept_word(p, "for")) {
        n->kind = N_FOR;
        if (stmt_for(p, n) < 0)
            return -1;
    } else if (accept_word(p, "set")) {
        n->kind = N_SET;
        if (stmt_set(p, n) < 0)
            return -1;
    } else if (accept_word(p, "macro")) {
        n->kind = N_MACRO;
        if (!(n->s = expect_name(p)) || params(p, n) < 0 || stmt_block(p, n, "endmacro") < 0)
            return -1;
    } else if (accept_word(p, "call")) {
        n->kind = N_CALLBLOCK;
        if (params(p, n) < 0 || !(n->a = expr(p)) || stmt_block(p, n, "endcall") < 0)
            return -1;
        if (n->a->kind != N_CALL)
            return ms_err(MS_EINVALID, "chat template line %d: call block without a call", line);
    } else if (accept_word(p, "filter")) {
        /* the filters apply to a placeholder (op 1) that stands for the body's text as rendered:
         * jinja_eval.c keeps that text in the render's state, the tree stays read-only */
        jnode *lit = literal(p, jinja__str("", 0));
        n->kind = N_FILTERBLOCK;
        if (!lit)
            return -1;
        lit->op = 1;
        if (!(n->a = node(p, N_FILTER)) || !(n->a->s = expect_name(p)))
            return -1;
        n->a->a = lit;
        if (accept_op(p, "(") && call_args(p, n->a) < 0)
            return -1;
        if (!(n->a = filters(p, n->a)) || stmt_block(p, n, "endfilter") < 0)
            return -1;
    } else if (accept_word(p, "break") || accept_word(p, "continue")) {
        n->kind = p->t[p->i - 1].n == 5 ? N_BREAK : N_CONTINUE;
        if (expect_end(p) < 0)
            return -1;
    } else if (accept_word(p, "generation")) {
        /* transformers' marker of the assistant's text: renders its body */
        n->kind = N_IF;
        if (!(n->a = literal(p, (jv){.t = JV_BOOL, .u.i = 1})) || stmt_block(p, n, "endgeneration") < 0)
            return -1;
    } else {
        char w[40];
        snprintf(w, sizeof w, "%.*s", (int)(peek(p)->n < 32 ? peek(p)->n : 32), peek(p)->p);
        return ms_err(MS_EINVALID, "chat template line %d: unknown statement '%s'", line, w);
    }
    n->line = line;
    return jinja__list_push(p->a, out, n);
}

static int body(parser *p, jnlist *out, const char *const *stop, const char *what)
{
    if (++p->depth > JINJA_MAX_DEPTH)
        return fail(p, "statements nested too deeply%s", "");
    for (;;) {
        jtok *t = peek(p);
        jnode *n;
        if (t->t == TK_EOF) {
            if (!stop)
                break;
            return fail(p, "unclosed '%s' block", what);
        }
        p->i++;
        if (t->t == TK_TEXT) {
            if (!(n = node(p, N_TEXT)))
                return -1;
            n->s = t->p, n->v = jinja__str(t->p, t->n);
        } else if (t->t == TK_VAR) {
            if (!(n = node(p, N_OUT)) || !(n->a = expr(p)) || expect_end(p) < 0)
                return -1;
        } else {
            for (size_t k = 0; stop && stop[k]; k++)
                if (is_word(p, stop[k])) {
                    p->depth--;
                    return 0;
                }
            if (statement(p, out) < 0)
                return -1;
            continue;
        }
        if (jinja__list_push(p->a, out, n) < 0)
            return -1;
    }
    p->depth--;
    return 0;
}

int jinja__parse(jinja_tmpl *t, const char *text, size_t len)
{
    parser p = {.a = &t->arena};
    char *copy;
    t->arena.limit = JINJA_MAX_ARENA;
    /* the tree's texts and names point into the template: keep it */
    if (!(copy = jinja__alloc(&t->arena, len + 1)))
        return ms_err(MS_ENOMEM, "chat template: out of memory");
    memcpy(copy, text, len);
    if (jinja__lex(&p.t, &p.n, &t->arena, copy, len) < 0)
        return -1;
    return body(&p, &t->body, NULL, NULL);
}
