/* gotmpl_exec.c: executing a parsed ollama Go template over ollama's data (gotmpl.c has the
 * subset, the data model and the bounds). */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/gotmpl_int.h"

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
    size_t steps; /* nodes executed, over every execution of one render: at most MAX_STEPS */
    size_t made; /* bytes of printf results, all kept until the end: at most MAX_OUT */
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
    size_t len = 0, k = 1, w = 0; /* w: bytes written so far (the stream's len lags) */
    FILE *f;
    int rc = 0;

    if (n < 1 || args[0].k != V_STR)
        return rerr(line, "printf needs a format string");
    if (!(f = open_memstream(&buf, &len)))
        return ms_err(MS_ENOMEM, "out of memory");
    for (size_t i = 0; i < args[0].len && rc == 0; i++) {
        char c = args[0].s[i];
        /* every printf result is kept until the render ends, and one that doubles a variable
         * in a range grows exponentially: all of them together stay under MAX_OUT */
        size_t next = c != '%' ? 1 : k < n && args[k].k == V_STR ? args[k].len + 2 : 24;
        if (w + next > MAX_OUT - r->made) {
            rc = ms_err(MS_EINVALID, "template line %d: printf results exceed %zu bytes", line, MAX_OUT);
            break;
        }
        w += next;
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
    r->made += len;
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

    if (++r->steps > MAX_STEPS)
        return ms_err(MS_EINVALID, "template line %d: rendering takes more than %zu steps (nested ranges?)", x->line,
                      MAX_STEPS);
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

static const char *role_of(const chat_msg *m)
{
    return m->role ? m->role : "";
}
static const char *content_of(const chat_msg *m)
{
    return m->content ? m->content : "";
}

/* The contents of m[0..n) whose role is `role`, "\n\n"-joined into one string owned by r (the
 * content itself when only one has the role; "" when none). Sized first, then copied once:
 * joining pairwise kept every partial join, memory quadratic in the conversation. NULL when
 * out of memory. */
static const char *join_role(rctx *r, const chat_msg *m, size_t n, const char *role)
{
    size_t len = 0, k = 0, at = 0;
    const char *only = "";
    char *j;

    for (size_t i = 0; i < n; i++)
        if (!strcmp(role_of(&m[i]), role)) {
            len += strlen(content_of(&m[i])) + (k++ ? 2 : 0);
            only = content_of(&m[i]);
        }
    if (k <= 1)
        return only;
    if (!(j = malloc(len + 1)))
        return NULL;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(role_of(&m[i]), role)) {
            size_t l = strlen(content_of(&m[i]));
            if (at) {
                memcpy(j + at, "\n\n", 2);
                at += 2;
            }
            memcpy(j + at, content_of(&m[i]), l);
            at += l;
        }
    j[at] = '\0';
    return own(r, j);
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
    for (size_t i = 0; i < n; i++)
        if (!strcmp(role_of(&msgs[i]), "system")) {
            if (!(sys = join_role(&r, msgs, n, "system")))
                rc = ms_err(MS_ENOMEM, "out of memory");
            break;
        }
    for (size_t i = 0, j; i < n && rc == 0; i = j) {
        const char *role = role_of(&msgs[i]);
        for (j = i + 1; j < n && strcmp(role, "tool") != 0 && !strcmp(role_of(&msgs[j]), role); j++)
            ;
        col[nc++] = (chat_msg){.role = role, .content = join_role(&r, msgs + i, j - i, role)};
        if (!col[nc - 1].content)
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

int chat_gotmpl_render_tools(char **out, size_t *len_out, const chat_gotmpl *t, const chat_msg *msgs, size_t n,
                             const chat_tool *tools, size_t n_tools)
{
    *out = NULL;
    *len_out = 0;
    if (n_tools == 0)
        return chat_gotmpl_render(out, len_out, t, msgs, n);
    (void)tools;
    return ms_err(MS_EUNSUPPORTED, "tools in ollama templates: not supported by mstore yet");
}

int chat_gotmpl_tool_syntax(const chat_gotmpl *t, chat_tool_syntax *out)
{
    (void)t;
    memset(out, 0, sizeof *out);
    return ms_err(MS_EUNSUPPORTED, "tools in ollama templates: not supported by mstore yet");
}
