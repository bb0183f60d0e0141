/* gotmpl_exec.c: executing a parsed ollama Go template over ollama's data (gotmpl.c has the
 * subset, the data model and the bounds). */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/gotmpl_int.h"

/* ------------------------------------------------------------------ values and execution */

typedef enum { V_NIL, V_BOOL, V_INT, V_STR, V_MSGS, V_MSG, V_ROOT, V_GO } vkind;

typedef struct value {
    vkind k;
    long long i;
    const char *s;
    size_t len;
    const chat_msg *msgs; /* V_MSGS: msgs[0..len); V_MSG: one */
    const gotype *gt; /* V_GO: tool data, (gt, j) as gotmpl_int.h says; scalars become V_STR etc */
    const json_t *j;
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
    json_t **calls; /* calls[i]: msgs[i]'s tool calls, NULL when none */
    json_t *tools; /* .Tools, NULL when none */
    int modern; /* the .Messages execution, the only one with .Tools */
    int lenient; /* tool syntax: an undefined variable is nil, not an error */
    int cut; /* legacy last round: stop right after the first .Response */
    int saw_response;
    int think; /* .Think and .IsThinkSet: the request's think, -1 when it did not set it */
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

/* A value of the tool data; its strings, numbers and bools become plain values, as Go's
 * template sees through `any` to them. */
static value go_value(const gotype *t, const json_t *j)
{
    if (t->kind == GK_STRING || (t->kind == GK_ANY && json_is_string(j)))
        return j ? (value){.k = V_STR, .s = json_string_value(j), .len = json_string_length(j)} : vstr("");
    if (t->kind == GK_INT)
        return (value){.k = V_INT, .i = j ? (long long)json_integer_value(j) : 0};
    if (t->kind == GK_ANY && json_is_boolean(j))
        return (value){.k = V_BOOL, .i = json_is_true(j)};
    if (t->kind == GK_ANY && (!j || json_is_null(j)))
        return (value){.k = V_NIL};
    return (value){.k = V_GO, .gt = t, .j = j};
}

/* Lists and maps: their length; -1 for what has none. */
static long long go_len(const value *v)
{
    const json_t *j = v->j;
    switch (v->gt->kind) {
    case GK_SLICE:
    case GK_PTYPE:
    case GK_MAP:
        return !j ? 0 : json_is_array(j) ? (long long)json_array_size(j) : (long long)json_object_size(j);
    case GK_ANY:
        return json_is_array(j)    ? (long long)json_array_size(j)
               : json_is_object(j) ? (long long)json_object_size(j)
                                   : -1;
    default:
        return -1;
    }
}

static int go_truth(const value *v)
{
    if (v->gt->kind == GK_STRUCT)
        return 1;
    if (v->gt->kind == GK_OMAP) /* a pointer */
        return v->j != NULL;
    if (v->gt->kind == GK_ANY && json_is_number(v->j))
        return json_number_value(v->j) != 0;
    return go_len(v) > 0;
}

static int truth(const value *v)
{
    switch (v->k) {
    case V_GO:
        return go_truth(v);
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

/* .f of a struct (its Go field) or of a map (its key; a missing key is the zero value). */
static int go_field(value *v, const char *f, int line)
{
    const gotype *t = v->gt;
    const json_t *j = v->j;

    if (t->kind == GK_STRUCT) {
        const gofield *fd = gotmpl__field_find(t, f);
        if (!fd)
            return rerr(line, "%s has no field .%s", t->name, f);
        *v = go_value(fd->type, j ? json_object_get(j, fd->json) : NULL);
        return 0;
    }
    if (t->kind == GK_MAP || (t->kind == GK_ANY && json_is_object(j))) {
        *v = go_value(t->elem, j ? json_object_get(j, f) : NULL);
        return 0;
    }
    return rerr(line, "field .%s of a %s", f, t->name);
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
        else if (!strcmp(f, "Suffix"))
            *v = vstr("");
        else if (!strcmp(f, "ThinkLevel")) /* ollama's think "low" .. "high" (gpt-oss's template reads it) */
            *v = vstr(chat_think_effort(r->think) ? chat_think_effort(r->think) : "");
        else if (!strcmp(f, "Think"))
            *v = (value){.k = V_BOOL, .i = r->think > 0};
        else if (!strcmp(f, "IsThinkSet"))
            *v = (value){.k = V_BOOL, .i = r->think >= 0};
        else if (!strcmp(f, "Tools")) /* the legacy execution's data has none: nil */
            *v = r->modern ? (value){.k = V_GO, .gt = &gotmpl__tools_type, .j = r->tools} : (value){.k = V_NIL};
        else
            return rerr(line, "field .%s is not supported", f);
        return 0;
    }
    if (v->k == V_MSG) {
        const chat_msg *m = v->msgs;
        size_t at = (size_t)(m - r->msgs); /* every V_MSG points into r->msgs */
        if (!strcmp(f, "Role"))
            *v = vstr(m->role);
        else if (!strcmp(f, "Content"))
            *v = vstr(m->content);
        else if (!strcmp(f, "ToolName"))
            *v = vstr(m->tool_name);
        else if (!strcmp(f, "ToolCallID"))
            *v = vstr(m->tool_call_id);
        else if (!strcmp(f, "Thinking"))
            *v = vstr(m->thinking);
        else if (!strcmp(f, "ToolCalls"))
            *v = (value){.k = V_GO, .gt = &gotmpl__calls_type, .j = r->calls && at < r->n_msgs ? r->calls[at] : NULL};
        else if (!strcmp(f, "Images"))
            *v = (value){.k = V_MSGS};
        else
            return rerr(line, "field .%s of a message is not supported", f);
        return 0;
    }
    if (v->k == V_GO)
        return go_field(v, f, line);
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

/* index of a list (an integer) or a map (a string key; missing: the zero value). */
static int go_index(const value *c, const value *k, value *out, int line)
{
    const gotype *t = c->gt;
    const json_t *j = c->j;

    if (json_is_array(j) || ((t->kind == GK_SLICE || t->kind == GK_PTYPE) && !j)) {
        if (k->k != V_INT)
            return rerr(line, "index of a list needs an integer");
        if (k->i < 0 || (size_t)k->i >= json_array_size(j))
            return rerr(line, "index %lld out of range (%zu)", k->i, json_array_size(j));
        *out = go_value(t->elem, json_array_get(j, (size_t)k->i));
        return 0;
    }
    if (t->kind == GK_MAP || json_is_object(j)) {
        if (k->k != V_STR)
            return rerr(line, "index of a map needs a string");
        *out = go_value(t->elem, j ? json_object_get(j, k->s) : NULL);
        return 0;
    }
    return rerr(line, "index of a %s", t->name);
}

/* ollama's json: Go's json.Marshal of the operand, as a string. */
static int call_json(rctx *r, const value *a, value *out, int line)
{
    gotmpl_buf b = {{NULL, 0, 0}, MAX_OUT - r->made};
    char num[32];
    int rc;

    if (a->k == V_GO)
        rc = gotmpl__marshal(&b, a->gt, a->j, 0);
    else if (a->k == V_STR)
        rc = gotmpl__put_string(&b, a->s, a->len);
    else if (a->k == V_INT || a->k == V_BOOL || a->k == V_NIL) {
        snprintf(num, sizeof num, "%lld", a->i);
        rc = gotmpl__put(&b,
                         a->k == V_NIL    ? "null"
                         : a->k == V_BOOL ? (a->i ? "true" : "false")
                                          : num,
                         a->k == V_NIL    ? 4
                         : a->k == V_BOOL ? (a->i ? 4 : 5)
                                          : strlen(num));
    } else
        return rerr(line, "json of a message, a message list or the data is not supported");
    if (rc == 0 && !b.t.p && !(b.t.p = calloc(1, 1)))
        rc = ms_err(MS_ENOMEM, "out of memory");
    if (rc < 0) {
        free(b.t.p);
        return rc == MS_EINVALID ? ms_err(MS_EINVALID, "template line %d: json results exceed %zu bytes", line, MAX_OUT)
                                 : rc;
    }
    if (!own(r, b.t.p))
        return ms_err(MS_ENOMEM, "out of memory");
    r->made += b.t.n;
    *out = (value){.k = V_STR, .s = b.t.p, .len = b.t.n};
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
        if (e->n_args != 1 || (a[0].k != V_STR && a[0].k != V_MSGS && (a[0].k != V_GO || go_len(&a[0]) < 0)))
            return rerr(line, "len needs one string, list or map");
        *out = (value){.k = V_INT, .i = a[0].k == V_GO ? go_len(&a[0]) : (long long)a[0].len};
    } else if (!strcmp(f, "index") && e->n_args == 2 && a[0].k == V_GO) {
        return go_index(&a[0], &a[1], out, line);
    } else if (!strcmp(f, "json")) {
        if (e->n_args != 1)
            return rerr(line, "json needs one operand");
        return call_json(r, &a[0], out, line);
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
        else if (!v && r->lenient)
            *out = (value){.k = V_NIL};
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

static int print_value(rctx *r, const value *v, int line);

/* A list of scalars as Go's fmt prints it: "[a b]". */
static int print_list(gotmpl_buf *b, const json_t *j, int line)
{
    char num[40];
    json_t *x;
    size_t i;
    int rc = gotmpl__put(b, "[", 1);

    json_array_foreach(j, i, x)
    {
        const char *s = num;
        size_t len;
        if (rc == 0 && i)
            rc = gotmpl__put(b, " ", 1);
        if (json_is_string(x))
            s = json_string_value(x), len = json_string_length(x);
        else if (json_is_number(x))
            gotmpl__float(num, json_number_value(x), 0), len = strlen(num);
        else if (json_is_boolean(x) || json_is_null(x))
            s = json_is_null(x) ? "<nil>" : json_is_true(x) ? "true" : "false", len = strlen(s);
        else
            return rerr(line, "printing a list of lists or maps is not supported");
        if (rc == 0)
            rc = gotmpl__put(b, s, len);
    }
    return rc < 0 ? rc : gotmpl__put(b, "]", 1);
}

/* Tool data as Go prints it: through its String() where it has one that marshals (a nil
 * templateArgs or templateProperties prints "{}"), PropertyType's own String(), numbers as
 * %v, lists of scalars as fmt does. Structs and maps without one Go prints as {...} and
 * map[...]: not supported. */
static int print_go(rctx *r, const value *v, int line)
{
    gotmpl_buf b = {{NULL, 0, 0}, MAX_OUT - r->n};
    const gotype *t = v->gt;
    char num[40];
    int rc;

    if (t->prints_json && !v->j && t->kind == GK_MAP)
        return emit(r, "{}", 2);
    if (t->prints_json)
        rc = gotmpl__marshal(&b, t, v->j, 0);
    else if (t->kind == GK_PTYPE && json_array_size(v->j) == 1)
        return print_value(r,
                           &(value){.k = V_STR,
                                    .s = json_string_value(json_array_get(v->j, 0)),
                                    .len = json_string_length(json_array_get(v->j, 0))},
                           line);
    else if (t->kind == GK_PTYPE && json_array_size(v->j) == 0)
        return 0;
    else if (t->kind == GK_SLICE || t->kind == GK_PTYPE || json_is_array(v->j))
        rc = v->j ? print_list(&b, v->j, line) : gotmpl__put(&b, "[]", 2);
    else if (t->kind == GK_ANY && json_is_number(v->j)) {
        gotmpl__float(num, json_number_value(v->j), 0);
        return emit(r, num, strlen(num));
    } else
        return rerr(line, "printing a %s is not supported", t->name);
    if (rc == 0)
        rc = emit(r, b.t.p ? b.t.p : "", b.t.n);
    free(b.t.p);
    return rc;
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
    case V_GO:
        return print_go(r, v, line);
    default:
        return rerr(line, "printing a list or a message is not supported");
    }
}

static int exec_list(rctx *r, node *const *v, size_t n, const value *dot);

/* range over the messages, a list (key: the index) or a map (key: each key, sorted as Go
 * does); the else branch when there is nothing. */
static int exec_range(rctx *r, const node *x, const value *dot)
{
    size_t mark = r->n_vars, n;
    const char **keys = NULL;
    value v;
    int rc;

    if ((rc = eval(r, x->e, dot, &v, x->line)) < 0)
        return rc;
    if ((v.k != V_MSGS && v.k != V_NIL && v.k != V_GO) || (v.k == V_GO && go_len(&v) < 0))
        return rerr(x->line, "range over a %s", v.k == V_GO ? v.gt->name : "value that is not a list");
    if (!truth(&v)) {
        rc = exec_list(r, x->alt, x->n_alt, dot);
        r->n_vars = mark;
        return rc;
    }
    n = v.k == V_GO ? (size_t)go_len(&v) : v.len;
    if (v.k == V_GO && json_is_object(v.j) && !(keys = gotmpl__keys_sorted(v.j, &n)))
        return ms_err(MS_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        value el = {.k = V_MSG, .msgs = v.msgs + i}, key = {.k = V_INT, .i = (long long)i};
        if (keys) {
            key = vstr(keys[i]);
            el = go_value(v.gt->elem, json_object_get(v.j, keys[i]));
        } else if (v.k == V_GO) {
            el = go_value(v.gt->elem, json_array_get(v.j, i));
        }
        r->n_vars = mark;
        if ((x->var2 && (rc = var_push(r, x->var2, key, x->line)) < 0) ||
            (x->var && (rc = var_push(r, x->var, el, x->line)) < 0))
            break;
        rc = exec_list(r, x->body, x->n_body, &el);
        if (rc < 0 || rc == X_HALT || rc == X_BREAK)
            break;
    }
    free(keys);
    r->n_vars = mark;
    return rc == X_BREAK || rc == X_CONTINUE ? X_OK : rc;
}

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
            return r->lenient ? var_push(r, x->var, v, x->line) : rerr(x->line, "undefined variable %s", x->var);
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
    case N_RANGE:
        return exec_range(r, x, dot);
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

/* ollama's collate: every system message joined into .System; consecutive messages of one
 * role (tool results excepted) merged into the first of them, contents "\n\n"-joined; each
 * message's tool calls as the template sees them. */
static int collate(rctx *r, const chat_msg *msgs, size_t n, const char **sys)
{
    chat_msg *col = calloc(n ? n : 1, sizeof *col);
    json_t **calls = calloc(n ? n : 1, sizeof *calls);
    size_t nc = 0;
    int rc = 0;

    r->msgs = col;
    r->calls = calls;
    *sys = NULL;
    if (!col || !calls)
        return ms_err(MS_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++)
        if (!strcmp(role_of(&msgs[i]), "system")) {
            if (!(*sys = join_role(r, msgs, n, "system")))
                return ms_err(MS_ENOMEM, "out of memory");
            break;
        }
    for (size_t i = 0, j; i < n && rc == 0; i = j) {
        const char *role = role_of(&msgs[i]);
        for (j = i + 1; j < n && strcmp(role, "tool") != 0 && !strcmp(role_of(&msgs[j]), role); j++)
            ;
        col[nc] = msgs[i];
        col[nc].role = role;
        if (!(col[nc].content = join_role(r, msgs + i, j - i, role)))
            rc = ms_err(MS_ENOMEM, "out of memory");
        else if (msgs[i].n_tool_calls &&
                 (rc = gotmpl__calls_new(&calls[nc], msgs[i].tool_calls, msgs[i].n_tool_calls)) < 0)
            ms_err_ctx("message %zu", i);
        r->n_msgs = ++nc;
    }
    return rc;
}

static void rctx_free(rctx *r)
{
    for (size_t i = 0; i < r->n_owned; i++)
        free(r->owned[i]);
    free(r->owned);
    for (size_t i = 0; r->calls && i < r->n_msgs; i++)
        json_decref(r->calls[i]);
    free(r->calls);
    free((chat_msg *)r->msgs);
    json_decref(r->tools);
}

/* The legacy loop: a round per (system, prompt, response); the last cut at .Response. */
static int execute_legacy(rctx *r, const chat_msg *col, size_t nc)
{
    const char *s = "", *p = "", *a = "";
    int rc = 0;

    for (size_t i = 0; i < nc && rc == 0; i++) {
        const char *role = col[i].role;
        int flush = (!strcmp(role, "system") && (*p || *a)) || (!strcmp(role, "user") && *a);
        if (flush) {
            r->system = s, r->prompt = p, r->response = a;
            rc = execute(r);
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
        r->system = s, r->prompt = p, r->response = a;
        r->cut = 1;
        rc = execute(r);
    }
    return rc;
}

static int render(char **out, size_t *len_out, const chat_gotmpl *t, const chat_msg *msgs, size_t n,
                  const chat_tool *tools, size_t n_tools, int think)
{
    rctx r = {.t = t, .think = think};
    const char *sys;
    int rc;

    *out = NULL;
    *len_out = 0;
    if ((rc = collate(&r, msgs, n, &sys)) == 0 && n_tools && (rc = gotmpl__tools_new(&r.tools, tools, n_tools)) < 0)
        ms_err_ctx("tools");
    if (rc == 0 && t->uses_messages) {
        r.system = sys;
        r.response = "";
        r.modern = 1;
        rc = execute(&r);
    } else if (rc == 0) {
        const chat_msg *col = r.msgs;
        size_t nc = r.n_msgs;
        r.msgs = NULL; /* the legacy data has no .Messages */
        rc = execute_legacy(&r, col, nc);
        r.msgs = col;
    }
    rctx_free(&r);
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

int chat_gotmpl_render(char **out, size_t *len_out, const chat_gotmpl *t, const chat_msg *msgs, size_t n)
{
    return render(out, len_out, t, msgs, n, NULL, 0, -1);
}

int chat_gotmpl_render_tools(char **out, size_t *len_out, const chat_gotmpl *t, const chat_msg *msgs, size_t n,
                             const chat_tool *tools, size_t n_tools)
{
    *out = NULL;
    *len_out = 0;
    return chat_gotmpl_render_think(out, len_out, t, msgs, n, tools, n_tools, -1);
}

int chat_gotmpl_render_think(char **out, size_t *len_out, const chat_gotmpl *t, const chat_msg *msgs, size_t n,
                             const chat_tool *tools, size_t n_tools, int think)
{
    *out = NULL;
    *len_out = 0;
    /* as ollama: a model whose template never mentions .Tools does not support tools */
    if (n_tools && !t->uses_tools)
        return ms_err(MS_EUNSUPPORTED, "the model's template does not support tools (no .Tools)");
    return render(out, len_out, t, msgs, n, n_tools ? tools : NULL, n_tools, think);
}

/* ------------------------------------------------------------------ one sample tool call */

int gotmpl__render_call(char **out, size_t *len_out, const chat_gotmpl *t, const node *section,
                        const chat_tool_call *call)
{
    chat_msg m = {.role = "assistant", .content = "", .tool_calls = call, .n_tool_calls = 1};
    json_t *calls = NULL;
    rctx r = {.t = t, .msgs = &m, .n_msgs = 1, .calls = &calls, .modern = 1, .lenient = 1, .think = -1};
    value dot = {.k = V_MSG, .msgs = &m};
    int rc;

    *out = NULL;
    *len_out = 0;
    if ((rc = gotmpl__calls_new(&calls, call, 1)) == 0)
        rc = section->kind == N_IF ? exec_list(&r, section->body, section->n_body, &dot) : exec_node(&r, section, &dot);
    for (size_t i = 0; i < r.n_owned; i++)
        free(r.owned[i]);
    free(r.owned);
    json_decref(calls);
    if (rc < 0 || (!r.out && !(r.out = calloc(1, 1)))) {
        free(r.out);
        return rc < 0 ? rc : ms_err(MS_ENOMEM, "out of memory");
    }
    *out = r.out;
    *len_out = r.n;
    return 0;
}
