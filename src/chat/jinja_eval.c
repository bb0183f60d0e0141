/* jinja_eval.c: running the tree. Scopes are frames of name -> value; a for loop's body and a
 * macro's run in a frame of their own, so a `set` inside them is gone after (Jinja's rule, the
 * reason templates use namespace()). Each node run counts a step; JINJA_MAX_STEPS, the arena's
 * bound and the depth bound stop a hostile template with an error instead of a hang. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja_int.h"

struct jframe {
    jframe *parent;
    jarr *vars;
};

int jinja__fail(jctx *c, const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    if (c->failed)
        return -1;  /* the first error stands */
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    c->failed = 1;
    ms_err(MS_EINVALID, "chat template line %d: %s", c->line, msg);
    return -1;
}

int jinja__oom(jctx *c)
{
    return jinja__fail(c, "out of memory (a render may use %u MiB)", JINJA_MAX_ARENA >> 20);
}

static int push_frame(jctx *c, jframe *parent)
{
    jframe *f = jinja__alloc(&c->arena, sizeof *f);
    if (!f || !(f->vars = jinja__arr_new(c, 1)))
        return jinja__oom(c);
    f->parent = parent;
    c->scope = f;
    return 0;
}

static const jv *lookup(jctx *c, const char *name)
{
    for (jframe *f = c->scope; f; f = f->parent) {
        const jv *v = jinja__dict_get(f->vars, name, strlen(name));
        if (v)
            return v;
    }
    return NULL;
}

static int set_var(jctx *c, const char *name, const jv *v)
{
    return jinja__dict_set(c, c->scope->vars, name, strlen(name), v);
}

static int run(jctx *c, const jnlist *body);

static int step(jctx *c, const jnode *n)
{
    c->line = n->line;
    if (++c->steps > JINJA_MAX_STEPS)
        return jinja__fail(c, "the template ran past %u steps", JINJA_MAX_STEPS);
    return 0;
}

static int eval_args(jctx *c, const jnode *n, jv **out)
{
    *out = NULL;
    if (!n->args.n)
        return 0;
    if (!(*out = jinja__alloc(&c->arena, n->args.n * sizeof **out)))
        return jinja__oom(c);
    for (size_t k = 0; k < n->args.n; k++)
        if (jinja__eval(c, n->args.v[k], &(*out)[k]) < 0)
            return -1;
    return 0;
}

/* output goes to a buffer of its own until capture_end turns it into a string value */
static chat_buf capture_begin(jctx *c)
{
    chat_buf saved = c->out;
    c->out = (chat_buf){0};
    return saved;
}

static int capture_end(jctx *c, chat_buf saved, int rc, jv *out)
{
    if (rc == 0)
        rc = c->out.oom ? jinja__oom(c) : jinja__strdup(c, out, c->out.p ? c->out.p : "", c->out.n);
    free(c->out.p);
    c->out = saved;
    return rc;
}

/* what body renders, as a string (macros, set blocks, filter blocks) */
static int capture(jctx *c, const jnlist *body, jv *out)
{
    chat_buf saved = capture_begin(c);
    return capture_end(c, saved, run(c, body), out);
}

static int loop_over(jctx *c, const jnode *n, const jv *seq, jframe *outer, int depth);

/* loop(items) inside a recursive loop: the loop's body over items, one level down, as a string */
static int call_loop(jctx *c, const jloop *l, jv *args, size_t n, jv *out)
{
    jframe *scope = c->scope;
    int rc;

    if (l->node->op != 1)
        return jinja__fail(c, "tried to call a loop that is not recursive (its for needs 'recursive')");
    if (n != 1)
        return jinja__fail(c, "loop() takes one argument, the items to loop over");
    if (++c->depth > JINJA_MAX_DEPTH)
        return jinja__fail(c, "a recursive loop went too deep (%d)", JINJA_MAX_DEPTH);
    chat_buf saved = capture_begin(c);
    rc = capture_end(c, saved, loop_over(c, l->node, &args[0], l->outer, l->depth + 1), out);
    c->scope = scope;
    c->depth--;
    return rc;
}

/* a macro (or a call block's caller()) called with args */
static int call_macro(jctx *c, const jnode *m, jv *args, const char **kw, size_t n, jv *out)
{
    jframe *saved = c->scope;
    int rc;

    if (++c->depth > JINJA_MAX_DEPTH)
        return jinja__fail(c, "macros call each other too deeply (%d)", JINJA_MAX_DEPTH);
    if (push_frame(c, m->kind == N_CALLBLOCK ? c->caller_scope : c->globals) < 0)
        return -1;
    for (size_t k = 0; k < m->args.n; k++) {
        const jnode *p = m->args.v[k];
        jv v = {.t = JV_UNDEF};
        if (k < n && !(kw && kw[k]))
            v = args[k];
        else {
            size_t j;
            for (j = 0; j < n && !(kw && kw[j] && strcmp(kw[j], p->s) == 0); j++)
                ;
            if (j < n)
                v = args[j];
            else if (p->a && jinja__eval(c, p->a, &v) < 0)
                return -1;
        }
        if (set_var(c, p->s, &v) < 0)
            return -1;
    }
    rc = capture(c, &m->body, out);
    c->scope = saved;
    c->depth--;
    return rc;
}

static int eval_call(jctx *c, const jnode *n, jv *out)
{
    const jnode *f = n->a;
    jv *args;
    int found = 0;

    if (eval_args(c, n, &args) < 0)
        return -1;
    if (f->kind == N_ATTR) {
        jv self;
        if (jinja__eval(c, f->a, &self) < 0)
            return -1;
        c->line = n->line;
        return jinja__method(c, &self, f->s, args, n->kw, n->args.n, out);
    }
    if (f->kind == N_NAME) {
        const jv *v = lookup(c, f->s);
        if (v && v->t == JV_MACRO && v->u.m)
            return call_macro(c, v->u.m, args, n->kw, n->args.n, out);
        if (v && v->t == JV_DICT && v->u.a->loop)
            return call_loop(c, v->u.a->loop, args, n->args.n, out);
        if (strcmp(f->s, "caller") == 0 && c->caller) {
            const jnode *m = c->caller;
            jframe *cs = c->caller_scope;
            int rc;
            c->caller = NULL;  /* caller() inside the call block's body is the outer one's */
            rc = call_macro(c, m, args, n->kw, n->args.n, out);
            c->caller = m, c->caller_scope = cs;
            return rc;
        }
        if (!v) {
            if (jinja__global(c, f->s, args, n->kw, n->args.n, out, &found) < 0)
                return -1;
            if (found)
                return 0;
        }
        return jinja__fail(c, "'%s' is %s", f->s, v ? "not callable" : "undefined");
    }
    return jinja__fail(c, "this value is not callable");
}

static int64_t norm_index(int64_t i, size_t n)
{
    return i < 0 ? i + (int64_t)n : i;
}

static int eval_item(jctx *c, const jv *obj, const jv *key, jv *out)
{
    *out = (jv){.t = JV_UNDEF};
    if (obj->t == JV_DICT) {
        if (key->t == JV_STR) {
            jv *v = jinja__dict_get(obj->u.a, key->u.s.p, key->u.s.n);
            if (v)
                *out = *v;
        } else
            for (size_t k = 0; k < obj->u.a->n; k++)
                if (jinja__equal(&obj->u.a->k[k], key))
                    *out = obj->u.a->v[k];
        return 0;
    }
    if ((obj->t == JV_LIST || obj->t == JV_STR) && (key->t == JV_INT || key->t == JV_BOOL)) {
        size_t n = obj->t == JV_LIST ? obj->u.a->n : obj->u.s.n;
        int64_t i = norm_index(key->u.i, n);
        if (i < 0 || (uint64_t)i >= n)
            return 0;
        if (obj->t == JV_LIST)
            *out = obj->u.a->v[i];
        else
            *out = jinja__str(obj->u.s.p + i, 1);
        return 0;
    }
    if (obj->t == JV_UNDEF)
        return jinja__fail(c, "subscript of an undefined value");
    if (obj->t == JV_NONE)
        return jinja__fail(c, "subscript of None");
    return 0;
}

static int eval_slice(jctx *c, const jnode *n, jv *out)
{
    jv obj, b[3] = {{.t = JV_NONE}, {.t = JV_NONE}, {.t = JV_NONE}};
    const jnode *parts[3] = {n->b, n->c, n->d};
    int64_t start, stop, st = 1, len;

    if (jinja__eval(c, n->a, &obj) < 0)
        return -1;
    for (int k = 0; k < 3; k++) {
        if (parts[k] && jinja__eval(c, parts[k], &b[k]) < 0)
            return -1;
        if (b[k].t != JV_NONE && b[k].t != JV_INT)
            return jinja__fail(c, "slice indices must be integers");
    }
    if (obj.t != JV_LIST && obj.t != JV_STR)
        return jinja__fail(c, "only lists and strings can be sliced");
    len = (int64_t)(obj.t == JV_LIST ? obj.u.a->n : obj.u.s.n);
    if (b[2].t == JV_INT)
        st = b[2].u.i;
    if (st == 0)
        return jinja__fail(c, "slice step cannot be zero");
    /* Python's PySlice_AdjustIndices */
    if (b[0].t == JV_NONE)
        start = st < 0 ? len - 1 : 0;
    else {
        start = b[0].u.i < 0 ? b[0].u.i + len : b[0].u.i;
        start = start < 0 ? (st < 0 ? -1 : 0) : start >= len ? (st < 0 ? len - 1 : len) : start;
    }
    if (b[1].t == JV_NONE)
        stop = st < 0 ? -1 : len;
    else {
        stop = b[1].u.i < 0 ? b[1].u.i + len : b[1].u.i;
        stop = stop < 0 ? (st < 0 ? -1 : 0) : stop >= len ? (st < 0 ? len - 1 : len) : stop;
    }
    if (obj.t == JV_LIST) {
        jarr *a = jinja__arr_new(c, 0);
        if (!a)
            return jinja__oom(c);
        for (int64_t i = start; st > 0 ? i < stop : i > stop; i += st)
            if (jinja__arr_push(c, a, NULL, &obj.u.a->v[i]) < 0)
                return -1;
        *out = (jv){.t = JV_LIST, .u.a = a};
        return 0;
    }
    chat_buf s = {0};
    for (int64_t i = start; st > 0 ? i < stop : i > stop; i += st)
        chat__put(&s, obj.u.s.p + i, 1);
    int rc = s.oom ? jinja__oom(c) : jinja__strdup(c, out, s.p ? s.p : "", s.n);
    free(s.p);
    return rc;
}

static int num(const jv *v, double *f)
{
    if (v->t == JV_INT || v->t == JV_BOOL)
        return *f = (double)v->u.i, 1;
    if (v->t == JV_FLOAT)
        return *f = v->u.f, 1;
    return 0;
}

static const char *type_name(const jv *v)
{
    static const char *const names[] = {"Undefined", "NoneType", "bool", "int", "float", "str", "list", "dict", "Macro"};
    return v->t == JV_LIST && v->u.a->tuple ? "tuple" : names[v->t];
}

int jinja__compare(jctx *c, const jv *a, const jv *b, int *out)
{
    double x, y;
    if (num(a, &x) && num(b, &y)) {
        *out = (x > y) - (x < y);
        return 0;
    }
    if (a->t == JV_STR && b->t == JV_STR) {
        size_t n = a->u.s.n < b->u.s.n ? a->u.s.n : b->u.s.n;
        int r = memcmp(a->u.s.p, b->u.s.p, n);  /* UTF-8's byte order is the code points' */
        *out = r ? (r > 0 ? 1 : -1) : (a->u.s.n > b->u.s.n) - (a->u.s.n < b->u.s.n);
        return 0;
    }
    if (a->t == JV_LIST && b->t == JV_LIST && a->u.a->tuple == b->u.a->tuple) {
        /* the first items that differ decide, as Python orders sequences; nesting is bounded */
        if (++c->depth > JINJA_MAX_DEPTH * 4)
            return jinja__fail(c, "lists nested too deeply to compare");
        size_t k;
        for (k = 0; k < a->u.a->n && k < b->u.a->n && jinja__equal(&a->u.a->v[k], &b->u.a->v[k]); k++)
            ;
        int rc = 0;
        if (k < a->u.a->n && k < b->u.a->n)
            rc = jinja__compare(c, &a->u.a->v[k], &b->u.a->v[k], out);
        else
            *out = (a->u.a->n > b->u.a->n) - (a->u.a->n < b->u.a->n);
        c->depth--;
        return rc;
    }
    return jinja__fail(c, "'<' not supported between instances of '%s' and '%s'", type_name(a), type_name(b));
}

static int contains(jctx *c, const jv *hay, const jv *needle, int *out)
{
    *out = 0;
    if (hay->t == JV_STR) {
        if (needle->t != JV_STR)
            return jinja__fail(c, "'in <string>' needs a string on the left");
        if (needle->u.s.n == 0)
            return *out = 1, 0;
        for (size_t k = 0; k + needle->u.s.n <= hay->u.s.n && !*out; k++)
            *out = memcmp(hay->u.s.p + k, needle->u.s.p, needle->u.s.n) == 0;
        return 0;
    }
    if (hay->t == JV_LIST || hay->t == JV_DICT) {
        const jv *items = hay->t == JV_DICT ? hay->u.a->k : hay->u.a->v;
        for (size_t k = 0; k < hay->u.a->n && !*out; k++)
            *out = jinja__equal(&items[k], needle);
        return 0;
    }
    if (hay->t == JV_UNDEF)
        return jinja__fail(c, "'in' an undefined value");
    return jinja__fail(c, "'in' needs a string, list or dict on the right");
}

static int arith(jctx *c, int op, const jv *a, const jv *b, jv *out)
{
    double x, y;
    if (op == OP_ADD && a->t == JV_STR && b->t == JV_STR) {
        char *p;
        if (!(p = jinja__alloc(&c->arena, a->u.s.n + b->u.s.n + 1)))
            return jinja__oom(c);
        memcpy(p, a->u.s.p, a->u.s.n);
        memcpy(p + a->u.s.n, b->u.s.p, b->u.s.n);
        *out = jinja__str(p, a->u.s.n + b->u.s.n);
        return 0;
    }
    if (op == OP_ADD && a->t == JV_LIST && b->t == JV_LIST) {
        jarr *r = jinja__arr_new(c, 0);
        if (!r)
            return jinja__oom(c);
        for (size_t k = 0; k < a->u.a->n + b->u.a->n; k++)
            if (jinja__arr_push(c, r, NULL, k < a->u.a->n ? &a->u.a->v[k] : &b->u.a->v[k - a->u.a->n]) < 0)
                return -1;
        *out = (jv){.t = JV_LIST, .u.a = r};
        return 0;
    }
    if (op == OP_MUL && a->t == JV_STR && (b->t == JV_INT || b->t == JV_BOOL)) {
        chat_buf s = {0};
        if (b->u.i > 0 && a->u.s.n * (uint64_t)b->u.i > JINJA_MAX_ARENA)
            return jinja__fail(c, "string repeated past the size bound");
        for (int64_t k = 0; k < b->u.i; k++)
            chat__put(&s, a->u.s.p, a->u.s.n);
        int rc = s.oom ? jinja__oom(c) : jinja__strdup(c, out, s.p ? s.p : "", s.n);
        free(s.p);
        return rc;
    }
    if (a->t == JV_UNDEF || b->t == JV_UNDEF)
        return jinja__fail(c, "an undefined value in arithmetic");
    if (!num(a, &x) || !num(b, &y))
        return jinja__fail(c, "unsupported operand types for an arithmetic operator");
    int ints = a->t != JV_FLOAT && b->t != JV_FLOAT;
    int64_t i = a->u.i, j = b->u.i, r;
    switch (op) {
    case OP_ADD:
    case OP_SUB:
    case OP_MUL:
        if (ints) {
            int ovf = op == OP_ADD ? __builtin_add_overflow(i, j, &r)
                    : op == OP_SUB ? __builtin_sub_overflow(i, j, &r)
                                   : __builtin_mul_overflow(i, j, &r);
            if (ovf)
                return jinja__fail(c, "integer overflow");
            *out = (jv){.t = JV_INT, .u.i = r};
        } else
            *out = (jv){.t = JV_FLOAT, .u.f = op == OP_ADD ? x + y : op == OP_SUB ? x - y : x * y};
        return 0;
    case OP_DIV:
        if (y == 0)
            return jinja__fail(c, "division by zero");
        *out = (jv){.t = JV_FLOAT, .u.f = x / y};
        return 0;
    case OP_FLOORDIV:
    case OP_MOD:
        if (y == 0)
            return jinja__fail(c, "division by zero");
        if (ints) {
            if (i == INT64_MIN && j == -1)
                return jinja__fail(c, "integer overflow");
            int64_t q = i / j, m = i % j;
            if (m && ((m < 0) != (j < 0)))
                q--, m += j;  /* Python floors */
            *out = (jv){.t = JV_INT, .u.i = op == OP_MOD ? m : q};
        } else {
            double q = __builtin_floor(x / y);
            *out = (jv){.t = JV_FLOAT, .u.f = op == OP_MOD ? x - q * y : q};
        }
        return 0;
    default:
        if (ints && j >= 0) {
            r = 1;
            for (int64_t k = 0; k < j; k++)
                if (__builtin_mul_overflow(r, i, &r))
                    return jinja__fail(c, "integer overflow");
                else if (r == 0 || r == 1)
                    break;
            *out = (jv){.t = JV_INT, .u.i = r};
        } else
            *out = (jv){.t = JV_FLOAT, .u.f = __builtin_pow(x, y)};
        return 0;
    }
}

static int eval_bin(jctx *c, const jnode *n, jv *out)
{
    jv a, b;
    int r = 0;
    if (jinja__eval(c, n->a, &a) < 0 || jinja__eval(c, n->b, &b) < 0)
        return -1;
    c->line = n->line;
    switch (n->op) {
    case OP_CAT: {
        chat_buf s = {0};
        jinja__print(&s, &a, 0);
        jinja__print(&s, &b, 0);
        r = s.oom ? jinja__oom(c) : jinja__strdup(c, out, s.p ? s.p : "", s.n);
        free(s.p);
        return r;
    }
    case OP_EQ:
    case OP_NE:
        *out = (jv){.t = JV_BOOL, .u.i = jinja__equal(&a, &b) == (n->op == OP_EQ)};
        return 0;
    case OP_LT:
    case OP_LE:
    case OP_GT:
    case OP_GE:
        if (jinja__compare(c, &a, &b, &r) < 0)
            return -1;
        r = n->op == OP_LT ? r < 0 : n->op == OP_LE ? r <= 0 : n->op == OP_GT ? r > 0 : r >= 0;
        *out = (jv){.t = JV_BOOL, .u.i = r};
        return 0;
    case OP_IN:
    case OP_NOTIN:
        if (contains(c, &b, &a, &r) < 0)
            return -1;
        *out = (jv){.t = JV_BOOL, .u.i = r == (n->op == OP_IN)};
        return 0;
    default:
        return arith(c, n->op, &a, &b, out);
    }
}

/* a.name: a dict's item; of a value that has no attributes, undefined; of undefined or None, an
 * error naming it. */
static int eval_attr(jctx *c, const jnode *n, jv *out)
{
    jv a, key;

    if (jinja__eval(c, n->a, &a) < 0)
        return -1;
    c->line = n->line;
    if (a.t == JV_UNDEF && n->a->kind == N_NAME)
        return jinja__fail(c, "'%s' is undefined", n->a->s);
    if (a.t == JV_UNDEF || a.t == JV_NONE)
        return jinja__fail(c, "'%s' of %s value", n->s, a.t == JV_NONE ? "a None" : "an undefined");
    key = jinja__str(n->s, strlen(n->s));
    return a.t == JV_DICT ? eval_item(c, &a, &key, out) : 0;
}

/* `x is [not] test(args)`; `caller is defined` inside a macro called with a block. */
static int eval_test(jctx *c, const jnode *n, jv *out)
{
    jv a, *args;
    int t;

    if (jinja__eval(c, n->a, &a) < 0 || eval_args(c, n, &args) < 0)
        return -1;
    c->line = n->line;
    if (strcmp(n->s, "defined") == 0 && n->a->kind == N_NAME && a.t == JV_UNDEF && strcmp(n->a->s, "caller") == 0)
        a.t = c->caller ? JV_MACRO : JV_UNDEF;
    if (jinja__test(c, n->s, &a, args, n->args.n, &t) < 0)
        return -1;
    *out = (jv){.t = JV_BOOL, .u.i = t != n->op};
    return 0;
}

/* A list, tuple (op 1) or dict literal. */
static int eval_collection(jctx *c, const jnode *n, jv *out)
{
    jarr *arr = jinja__arr_new(c, n->kind == N_DICT);
    int r = arr ? 0 : jinja__oom(c);

    if (arr)
        arr->tuple = n->op == 1;
    for (size_t k = 0; r == 0 && k < n->args.n; k++) {
        jv key, val;
        if ((r = jinja__eval(c, n->args.v[k], &key)) == 0 && n->kind == N_DICT)
            r = jinja__eval(c, n->body.v[k], &val);
        if (r == 0)
            r = n->kind == N_DICT ? (key.t == JV_STR ? jinja__dict_set(c, arr, key.u.s.p, key.u.s.n, &val)
                                                     : jinja__arr_push(c, arr, &key, &val))
                                  : jinja__arr_push(c, arr, NULL, &key);
    }
    if (r == 0)
        *out = (jv){.t = n->kind == N_DICT ? JV_DICT : JV_LIST, .u.a = arr};
    return r;
}

int jinja__eval(jctx *c, const jnode *n, jv *out)
{
    jv a;
    int r;

    if (step(c, n) < 0)
        return -1;
    if (++c->depth > JINJA_MAX_DEPTH * 4)
        return jinja__fail(c, "expression nested too deeply");
    *out = (jv){.t = JV_UNDEF};
    switch (n->kind) {
    case N_LIT:
        *out = n->op == 1 ? c->block_text : n->v;
        r = 0;
        break;
    case N_NAME: {
        const jv *v = lookup(c, n->s);
        if (v)
            *out = *v;
        else if (jinja__is_global(n->s))
            *out = (jv){.t = JV_MACRO};  /* a global function: defined, callable by name only */
        r = 0;
        break;
    }
    case N_ATTR:
        r = eval_attr(c, n, out);
        break;
    case N_ITEM: {
        jv key;
        if ((r = jinja__eval(c, n->a, &a)) == 0 && (r = jinja__eval(c, n->b, &key)) == 0) {
            c->line = n->line;
            r = eval_item(c, &a, &key, out);
        }
        break;
    }
    case N_SLICE:
        r = eval_slice(c, n, out);
        break;
    case N_CALL:
        r = eval_call(c, n, out);
        break;
    case N_FILTER: {
        jv *args;
        if ((r = jinja__eval(c, n->a, &a)) == 0 && (r = eval_args(c, n, &args)) == 0) {
            c->line = n->line;
            r = jinja__filter(c, n->s, &a, args, n->kw, n->args.n, out);
        }
        break;
    }
    case N_TEST:
        r = eval_test(c, n, out);
        break;
    case N_BIN:
        r = eval_bin(c, n, out);
        break;
    case N_AND:
    case N_OR:
        if ((r = jinja__eval(c, n->a, out)) == 0 && jinja__truthy(out) == (n->kind == N_AND))
            r = jinja__eval(c, n->b, out);
        break;
    case N_NOT:
        if ((r = jinja__eval(c, n->a, &a)) == 0)
            *out = (jv){.t = JV_BOOL, .u.i = !jinja__truthy(&a)};
        break;
    case N_NEG:
        if ((r = jinja__eval(c, n->a, &a)) == 0) {
            jv zero = {.t = JV_INT, .u.i = 0};
            r = arith(c, OP_SUB, &zero, &a, out);
        }
        break;
    case N_COND:
        if ((r = jinja__eval(c, n->b, &a)) == 0) {
            if (jinja__truthy(&a))
                r = jinja__eval(c, n->a, out);
            else if (n->c)
                r = jinja__eval(c, n->c, out);
        }
        break;
    case N_LIST:
    case N_DICT:
        r = eval_collection(c, n, out);
        break;
    default:
        r = jinja__fail(c, "a statement where an expression belongs");
    }
    c->depth--;
    return r;
}

static int emit(jctx *c, const jv *v)
{
    jinja__print(&c->out, v, 0);
    if (c->out.oom || c->out.n > JINJA_MAX_ARENA / 4)
        return jinja__fail(c, "the output passed %u MiB", JINJA_MAX_ARENA >> 22);
    return 0;
}

static int loop_var(jctx *c, jarr *loop, const char *name, int64_t v, int is_bool)
{
    jv x = {.t = is_bool ? JV_BOOL : JV_INT, .u.i = v};
    return jinja__dict_set(c, loop, name, strlen(name), &x);
}

/* the loop's name(s) bound to item it */
static int bind(jctx *c, const jnode *n, const jv *it)
{
    if (!n->s2)
        return set_var(c, n->s, it);
    if (it->t != JV_LIST || it->u.a->n != 2)
        return jinja__fail(c, "cannot unpack a loop item into two names");
    return set_var(c, n->s, &it->u.a->v[0]) < 0 || set_var(c, n->s2, &it->u.a->v[1]) < 0 ? -1 : 0;
}

/* n's body over seq's items, in frames whose parent is outer; depth is loop.depth (a recursive
 * loop's loop(items) comes back here one deeper) */
static int loop_over(jctx *c, const jnode *n, const jv *seq, jframe *outer, int depth)
{
    jv items;
    jarr *kept;
    int rc = 0;

    if (jinja__iterate(c, seq, &items) < 0)
        return -1;
    if (seq->t == JV_DICT && n->s2)
        return jinja__fail(c, "unpacking a dict's keys: use .items()");
    kept = items.u.a;
    if (n->b) {
        /* `for x in y if cond`: the filter runs first, so loop.length counts what passes */
        if (push_frame(c, outer) < 0 || !(kept = jinja__arr_new(c, 0)))
            return jinja__oom(c);
        for (size_t k = 0; k < items.u.a->n; k++) {
            jv *it = &items.u.a->v[k], ok;
            if (step(c, n) < 0 || bind(c, n, it) < 0 || jinja__eval(c, n->b, &ok) < 0)
                return -1;
            if (jinja__truthy(&ok) && jinja__arr_push(c, kept, NULL, it) < 0)
                return -1;
        }
    }
    size_t len = kept->n;
    /* one frame and one loop dict for all the iterations: a long loop costs steps, not memory */
    jarr *loop = jinja__arr_new(c, 1);
    jloop *st = jinja__alloc(&c->arena, sizeof *st);
    jv lv = {.t = JV_DICT, .u.a = loop};
    if (!loop || !st || push_frame(c, outer) < 0)
        return jinja__oom(c);
    *st = (jloop){.node = n, .outer = outer, .depth = depth};
    loop->loop = st;
    if (set_var(c, "loop", &lv) < 0 || loop_var(c, loop, "depth", depth, 0) < 0 ||
        loop_var(c, loop, "depth0", depth - 1, 0) < 0)
        return -1;
    for (size_t k = 0; k < len && rc == 0; k++) {
        jv *it = &kept->v[k], none = {.t = JV_UNDEF};
        st->index0 = k;
        if (loop_var(c, loop, "index", (int64_t)k + 1, 0) < 0 || loop_var(c, loop, "index0", (int64_t)k, 0) < 0 ||
            loop_var(c, loop, "revindex", (int64_t)(len - k), 0) < 0 ||
            loop_var(c, loop, "revindex0", (int64_t)(len - k - 1), 0) < 0 ||
            loop_var(c, loop, "first", k == 0, 1) < 0 || loop_var(c, loop, "last", k + 1 == len, 1) < 0 ||
            loop_var(c, loop, "length", (int64_t)len, 0) < 0 ||
            jinja__dict_set(c, loop, "previtem", 8, k > 0 ? &kept->v[k - 1] : &none) < 0 ||
            jinja__dict_set(c, loop, "nextitem", 8, k + 1 < len ? &kept->v[k + 1] : &none) < 0)
            return -1;
        if (step(c, n) < 0 || bind(c, n, it) < 0)
            return -1;
        rc = run(c, &n->body);
        if (c->brk == 1 || c->brk == 2) {
            int b = c->brk;
            c->brk = 0;
            if (b == 1)
                break;
        }
    }
    c->scope = outer;
    if (rc == 0 && len == 0)
        rc = run(c, &n->orelse);
    return rc;
}

static int run_for(jctx *c, const jnode *n)
{
    jv seq;
    return jinja__eval(c, n->a, &seq) < 0 ? -1 : loop_over(c, n, &seq, c->scope, 1);
}

static int run_set(jctx *c, const jnode *n)
{
    jv v;
    if (n->a) {
        if (jinja__eval(c, n->a, &v) < 0)
            return -1;
    } else if (capture(c, &n->body, &v) < 0)
        return -1;
    c->line = n->line;
    if (n->s2) {
        const jv *ns = lookup(c, n->s);
        if (!ns || ns->t != JV_DICT)
            return jinja__fail(c, "'%s' is not a namespace: cannot set '%s.%s'", n->s, n->s, n->s2);
        return jinja__dict_set(c, ns->u.a, n->s2, strlen(n->s2), &v);
    }
    return set_var(c, n->s, &v);
}

static int run_node(jctx *c, const jnode *n)
{
    jv v;
    if (step(c, n) < 0)
        return -1;
    switch (n->kind) {
    case N_TEXT:
        return emit(c, &n->v);
    case N_OUT:
        return jinja__eval(c, n->a, &v) < 0 ? -1 : emit(c, &v);
    case N_IF:
        if (jinja__eval(c, n->a, &v) < 0)
            return -1;
        return run(c, jinja__truthy(&v) ? &n->body : &n->orelse);
    case N_FOR:
        return run_for(c, n);
    case N_SET:
        return run_set(c, n);
    case N_MACRO:
        v = (jv){.t = JV_MACRO, .u.m = n};
        return set_var(c, n->s, &v);
    case N_CALLBLOCK: {
        const jnode *saved = c->caller;
        jframe *saved_scope = c->caller_scope;
        int rc;
        c->caller = n, c->caller_scope = c->scope;
        rc = jinja__eval(c, n->a, &v);
        c->caller = saved, c->caller_scope = saved_scope;
        return rc < 0 ? -1 : emit(c, &v);
    }
    case N_FILTERBLOCK: {
        jv saved_text = c->block_text;
        int rc;
        if (capture(c, &n->body, &v) < 0)
            return -1;
        c->block_text = v;
        rc = jinja__eval(c, n->a, &v);
        c->block_text = saved_text;
        return rc < 0 ? -1 : emit(c, &v);
    }
    case N_BREAK:
    case N_CONTINUE:
        c->brk = n->kind == N_BREAK ? 1 : 2;
        return 0;
    default:
        return jinja__fail(c, "an expression where a statement belongs");
    }
}

static int run(jctx *c, const jnlist *body)
{
    if (++c->depth > JINJA_MAX_DEPTH * 4)
        return jinja__fail(c, "statements nested too deeply");
    for (size_t k = 0; k < body->n; k++) {
        if (run_node(c, body->v[k]) < 0)
            return -1;
        if (c->brk == 1 || c->brk == 2)
            break;
    }
    c->depth--;
    return 0;
}

/* ---- the surface (chat.h) */

struct chat_jinja {
    jinja_tmpl t;
};

int chat_jinja_parse(chat_jinja **out, const char *text, size_t len)
{
    chat_jinja *j = calloc(1, sizeof *j);

    *out = NULL;
    if (!j)
        return ms_err(MS_ENOMEM, "chat template: out of memory");
    if (len > CHAT_GOTMPL_MAX_TEXT) {
        free(j);
        return ms_err(MS_EINVALID, "chat template: %zu bytes, more than the %u a template may have", len,
                      CHAT_GOTMPL_MAX_TEXT);
    }
    if (jinja__parse(&j->t, text, len) < 0) {
        int rc = ms_err_code();
        chat_jinja_free(j);
        return rc < 0 ? rc : MS_EINVALID;
    }
    *out = j;
    return 0;
}

void chat_jinja_free(chat_jinja *j)
{
    if (!j)
        return;
    jinja__arena_free(&j->t.arena);
    free(j);
}

int chat_jinja_render_json(char **out, size_t *len_out, const chat_jinja *j, const char *context_json)
{
    jctx c = {.arena.limit = JINJA_MAX_ARENA};
    jv ctx;
    int rc = -1;

    *out = NULL;
    *len_out = 0;
    if (jinja__from_json_text(&c, context_json, &ctx) < 0)
        goto done;
    if (push_frame(&c, NULL) < 0)
        goto done;
    c.globals = c.scope;
    if (ctx.t == JV_DICT)
        c.scope->vars = ctx.u.a;
    rc = run(&c, &j->t.body);
    if (rc == 0 && c.out.oom)
        rc = jinja__oom(&c);
done:
    jinja__arena_free(&c.arena);
    if (rc < 0) {
        free(c.out.p);
        rc = ms_err_code();
        return rc < 0 ? rc : MS_EINVALID;
    }
    *out = c.out.p ? c.out.p : strdup("");
    if (!*out)
        return ms_err(MS_ENOMEM, "chat template: out of memory");
    *len_out = c.out.n;
    return 0;
}
