/* jinja_value.c: the interpreter's values: their truth, equality, lists and dicts in the
 * render's arena, printing as Python prints them (str, and repr inside containers), tojson as
 * transformers writes it (pyjson.c's rules: json.dumps with ensure_ascii=False), the context
 * read from JSON, and iteration. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja_int.h"

/* ---- values */

jv jinja__str(const char *p, size_t n)
{
    return (jv){.t = JV_STR, .u.s = {p, n}};
}

int jinja__strdup(jctx *c, jv *out, const char *p, size_t n)
{
    char *d = jinja__alloc(&c->arena, n + 1);
    if (!d)
        return jinja__oom(c);
    memcpy(d, p, n);
    *out = jinja__str(d, n);
    return 0;
}

int jinja__buf_done(jctx *c, chat_buf *b, jv *out)
{
    int rc = b->oom ? jinja__oom(c) : jinja__strdup(c, out, b->p ? b->p : "", b->n);
    free(b->p);
    return rc;
}

int jinja__truthy(const jv *v)
{
    switch (v->t) {
    case JV_BOOL:
    case JV_INT:
        return v->u.i != 0;
    case JV_FLOAT:
        return v->u.f != 0;
    case JV_STR:
        return v->u.s.n != 0;
    case JV_LIST:
    case JV_DICT:
        return v->u.a->n != 0;
    case JV_MACRO:
        return 1;
    default:
        return 0;
    }
}

int jinja__equal(const jv *a, const jv *b)
{
    int an = a->t == JV_INT || a->t == JV_BOOL || a->t == JV_FLOAT, bn = b->t == JV_INT || b->t == JV_BOOL || b->t == JV_FLOAT;
    if (an && bn) {
        double x = a->t == JV_FLOAT ? a->u.f : (double)a->u.i, y = b->t == JV_FLOAT ? b->u.f : (double)b->u.i;
        return a->t != JV_FLOAT && b->t != JV_FLOAT ? a->u.i == b->u.i : x == y;
    }
    if (a->t != b->t)
        return 0;
    switch (a->t) {
    case JV_STR:
        return a->u.s.n == b->u.s.n && memcmp(a->u.s.p, b->u.s.p, a->u.s.n) == 0;
    case JV_LIST:
    case JV_DICT:
        if (a->u.a->n != b->u.a->n)
            return 0;
        for (size_t k = 0; k < a->u.a->n; k++) {
            if (a->t == JV_DICT) {
                const jv *bv = jinja__dict_get(b->u.a, a->u.a->k[k].u.s.p, a->u.a->k[k].u.s.n);
                if (!bv || !jinja__equal(&a->u.a->v[k], bv))
                    return 0;
            } else if (!jinja__equal(&a->u.a->v[k], &b->u.a->v[k]))
                return 0;
        }
        return 1;
    case JV_MACRO:
        return a->u.m == b->u.m;
    default:
        return 1;
    }
}

jarr *jinja__arr_new(jctx *c, int dict)
{
    jarr *a = jinja__alloc(&c->arena, sizeof *a);
    if (a && dict)
        a->k = (jv *)a;  /* a non-NULL marker until the first key */
    return a;
}

int jinja__arr_push(jctx *c, jarr *a, const jv *k, const jv *v)
{
    int dict = a->k != NULL;
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 4;
        jv *nv = jinja__alloc(&c->arena, cap * sizeof *nv), *nk = dict ? jinja__alloc(&c->arena, cap * sizeof *nk) : NULL;
        if (!nv || (dict && !nk))
            return jinja__oom(c);
        if (a->n) {
            memcpy(nv, a->v, a->n * sizeof *nv);
            if (dict)
                memcpy(nk, a->k, a->n * sizeof *nk);
        }
        a->v = nv, a->cap = cap;
        if (dict)
            a->k = nk;
    }
    if (dict)
        a->k[a->n] = *k;
    a->v[a->n++] = *v;
    return 0;
}

jv *jinja__dict_get(const jarr *d, const char *key, size_t n)
{
    for (size_t k = d->n; k-- > 0;)
        if (d->k[k].t == JV_STR && d->k[k].u.s.n == n && memcmp(d->k[k].u.s.p, key, n) == 0)
            return &d->v[k];
    return NULL;
}

int jinja__dict_set(jctx *c, jarr *d, const char *key, size_t n, const jv *v)
{
    jv *old = jinja__dict_get(d, key, n), k = jinja__str(key, n);
    if (old) {
        *old = *v;
        return 0;
    }
    return jinja__arr_push(c, d, &k, v);
}

/* ---- printing */

static void put_repr_str(chat_buf *b, const char *s, size_t n)
{
    char q = memchr(s, '\'', n) && !memchr(s, '"', n) ? '"' : '\'';
    chat__put(b, &q, 1);
    for (size_t k = 0; k < n; k++) {
        unsigned char ch = (unsigned char)s[k];
        char esc[8];
        if (ch == '\\' || ch == (unsigned char)q)
            esc[0] = '\\', esc[1] = (char)ch, esc[2] = 0;
        else if (ch == '\n' || ch == '\r' || ch == '\t')
            esc[0] = '\\', esc[1] = ch == '\n' ? 'n' : ch == '\r' ? 'r' : 't', esc[2] = 0;
        else if (ch < 0x20 || ch == 0x7f)
            snprintf(esc, sizeof esc, "\\x%02x", ch);
        else {
            chat__put(b, s + k, 1);
            continue;
        }
        chat__puts(b, esc);
    }
    chat__put(b, &q, 1);
}

void jinja__print(chat_buf *b, const jv *v, int repr)
{
    char num[32];
    switch (v->t) {
    case JV_UNDEF:
        if (repr)
            chat__puts(b, "None");
        return;
    case JV_NONE:
        chat__puts(b, "None");
        return;
    case JV_BOOL:
        chat__puts(b, v->u.i ? "True" : "False");
        return;
    case JV_INT:
        snprintf(num, sizeof num, "%lld", (long long)v->u.i);
        chat__puts(b, num);
        return;
    case JV_FLOAT:
        if (v->u.f != v->u.f)
            chat__puts(b, "nan");
        else if (v->u.f > 1e308 || v->u.f < -1e308)
            chat__puts(b, v->u.f > 0 ? "inf" : "-inf");
        else
            chat__pyreal(b, v->u.f);
        return;
    case JV_STR:
        if (repr)
            put_repr_str(b, v->u.s.p, v->u.s.n);
        else
            chat__put(b, v->u.s.p, v->u.s.n);
        return;
    case JV_LIST:
    case JV_DICT: {
        int tuple = v->t == JV_LIST && v->u.a->tuple;
        chat__puts(b, v->t == JV_DICT ? "{" : tuple ? "(" : "[");
        for (size_t k = 0; k < v->u.a->n && !b->oom; k++) {
            if (k)
                chat__puts(b, ", ");
            if (v->t == JV_DICT) {
                jinja__print(b, &v->u.a->k[k], 1);
                chat__puts(b, ": ");
            }
            jinja__print(b, &v->u.a->v[k], 1);
        }
        chat__puts(b, v->t == JV_DICT ? "}" : !tuple ? "]" : v->u.a->n == 1 ? ",)" : ")");
        return;
    }
    case JV_MACRO:
        chat__puts(b, "<macro>");
        return;
    }
}

int jinja__tostr(jctx *c, const jv *v, jv *out)
{
    chat_buf b = {0};
    if (v->t == JV_STR)
        return *out = *v, 0;
    jinja__print(&b, v, 0);
    return jinja__buf_done(c, &b, out);
}

static void put_newline(chat_buf *b, int indent, int depth)
{
    chat__puts(b, "\n");
    for (int i = 0; i < indent * depth && !b->oom; i++)
        chat__puts(b, " ");
}

int jinja__tojson(jctx *c, chat_buf *b, const jv *v, int indent, int depth)
{
    char num[32];
    if (depth > JINJA_MAX_DEPTH)
        return jinja__fail(c, "tojson: nested too deeply");
    switch (v->t) {
    case JV_UNDEF:
    case JV_NONE:
        chat__puts(b, "null");
        return 0;
    case JV_BOOL:
        chat__puts(b, v->u.i ? "true" : "false");
        return 0;
    case JV_INT:
        snprintf(num, sizeof num, "%lld", (long long)v->u.i);
        chat__puts(b, num);
        return 0;
    case JV_FLOAT:
        jinja__print(b, v, 0);
        return 0;
    case JV_STR:
        chat__pystr(b, v->u.s.p, v->u.s.n);
        return 0;
    case JV_LIST:
    case JV_DICT:
        chat__puts(b, v->t == JV_LIST ? "[" : "{");
        for (size_t k = 0; k < v->u.a->n; k++) {
            if (k)
                chat__puts(b, indent ? "," : ", ");
            if (indent)
                put_newline(b, indent, depth + 1);
            if (v->t == JV_DICT) {
                jv key = { 0 };
                if (jinja__tostr(c, &v->u.a->k[k], &key) < 0)
                    return -1;
                chat__pystr(b, key.u.s.p, key.u.s.n);
                chat__puts(b, ": ");
            }
            if (jinja__tojson(c, b, &v->u.a->v[k], indent, depth + 1) < 0)
                return -1;
        }
        if (indent && v->u.a->n)
            put_newline(b, indent, depth);
        chat__puts(b, v->t == JV_LIST ? "]" : "}");
        return 0;
    default:
        return jinja__fail(c, "tojson: a macro is not JSON");
    }
}

/* ---- the context */

static int from_json(jctx *c, json_t *j, jv *out, int depth)
{
    if (depth > JINJA_MAX_DEPTH)
        return jinja__fail(c, "context nested too deeply");
    switch (json_typeof(j)) {
    case JSON_OBJECT:
    case JSON_ARRAY: {
        jarr *a = jinja__arr_new(c, json_is_object(j));
        const char *key;
        json_t *m;
        size_t i;
        if (!a)
            return jinja__oom(c);
        if (json_is_object(j)) {
            json_object_foreach(j, key, m)
            {
                jv k, v;
                if (jinja__strdup(c, &k, key, strlen(key)) < 0 || from_json(c, m, &v, depth + 1) < 0 ||
                    jinja__arr_push(c, a, &k, &v) < 0)
                    return -1;
            }
        } else
            json_array_foreach(j, i, m)
            {
                jv v;
                if (from_json(c, m, &v, depth + 1) < 0 || jinja__arr_push(c, a, NULL, &v) < 0)
                    return -1;
            }
        *out = (jv){.t = json_is_object(j) ? JV_DICT : JV_LIST, .u.a = a};
        return 0;
    }
    case JSON_STRING:
        return jinja__strdup(c, out, json_string_value(j), json_string_length(j));
    case JSON_INTEGER:
        *out = (jv){.t = JV_INT, .u.i = json_integer_value(j)};
        return 0;
    case JSON_REAL:
        *out = (jv){.t = JV_FLOAT, .u.f = json_real_value(j)};
        return 0;
    case JSON_TRUE:
    case JSON_FALSE:
        *out = (jv){.t = JV_BOOL, .u.i = json_is_true(j)};
        return 0;
    default:
        *out = (jv){.t = JV_NONE};
        return 0;
    }
}

int jinja__from_json_text(jctx *c, const char *json, jv *out)
{
    json_error_t e;
    json_t *j = json_loads(json ? json : "{}", JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
    int rc;
    if (!j)
        return ms_err(MS_EINVALID, "chat template context: line %d: %s", e.line, e.text);
    if (!json_is_object(j)) {
        json_decref(j);
        return ms_err(MS_EINVALID, "chat template context: not a JSON object");
    }
    rc = from_json(c, j, out, 0);
    json_decref(j);
    return rc;
}

int jinja__iterate(jctx *c, const jv *v, jv *out)
{
    jarr *a;
    if (v->t == JV_LIST)
        return *out = *v, 0;
    if (!(a = jinja__arr_new(c, 0)))
        return jinja__oom(c);
    *out = (jv){.t = JV_LIST, .u.a = a};
    if (v->t == JV_DICT) {
        for (size_t k = 0; k < v->u.a->n; k++)
            if (jinja__arr_push(c, a, NULL, &v->u.a->k[k]) < 0)
                return -1;
    } else if (v->t == JV_STR) {
        for (size_t k = 0; k < v->u.s.n;) {
            size_t n = ms_utf8_seq(v->u.s.p + k, v->u.s.n - k);
            jv ch = jinja__str(v->u.s.p + k, n ? n : 1);
            if (jinja__arr_push(c, a, NULL, &ch) < 0)
                return -1;
            k += n ? n : 1;
        }
    } else if (v->t != JV_UNDEF && v->t != JV_NONE)
        return jinja__fail(c, "this value is not iterable");
    else if (v->t == JV_NONE)
        return jinja__fail(c, "None is not iterable");
    return 0;
}

