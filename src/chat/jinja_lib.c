/* jinja_lib.c: the library of the Jinja that Hugging Face chat templates use: filters, tests,
 * string and dict methods and the global functions (raise_exception, namespace, range,
 * strftime_now). What is not here is an error naming it, never a silent empty result. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chat/jinja_int.h"

/* ---- helpers for the library */

static const jv *arg(jv *args, const char **kw, size_t n, size_t pos, const char *name)
{
    for (size_t k = 0; k < n; k++)
        if (kw && kw[k] && strcmp(kw[k], name) == 0)
            return &args[k];
    size_t p = 0;
    for (size_t k = 0; k < n; k++)
        if (!(kw && kw[k]) && p++ == pos)
            return &args[k];
    return NULL;
}

static int want_str(jctx *c, const jv *v, const char *what)
{
    if (!v || v->t != JV_STR)
        return jinja__fail(c, "%s needs a string", what);
    return 0;
}

static int is_ws(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\f' || ch == '\v';
}

static int in_chars(char ch, const jv *chars)
{
    return chars && chars->t == JV_STR ? memchr(chars->u.s.p, ch, chars->u.s.n) != NULL : is_ws(ch);
}

/* how: 1 left, 2 right, 3 both; without chars, Python's white space (Unicode's too) */
static jv strip(const jv *s, const jv *chars, int how)
{
    size_t a = 0, b = s->u.s.n;
    if (!chars || chars->t != JV_STR) {
        size_t start, end;
        chat__trim_span(s->u.s.p, s->u.s.n, &start, &end);
        if (how & 1)
            a = start;
        if ((how & 2) && end > start)
            b = end;
        else if (how & 2)
            b = a;
        return jinja__str(s->u.s.p + a, b - a);
    }
    while ((how & 1) && a < b && in_chars(s->u.s.p[a], chars))
        a++;
    while ((how & 2) && b > a && in_chars(s->u.s.p[b - 1], chars))
        b--;
    return jinja__str(s->u.s.p + a, b - a);
}

/* mode: 'u' upper, 'l' lower, 'c' capitalize, 't' title (ASCII letters; others pass as they are) */
static int recase(jctx *c, const jv *s, int mode, jv *out)
{
    char *d = jinja__alloc(&c->arena, s->u.s.n + 1);
    int prev_alpha = 0;
    if (!d)
        return jinja__oom(c);
    for (size_t k = 0; k < s->u.s.n; k++) {
        unsigned char ch = (unsigned char)s->u.s.p[k];
        int up = mode == 'u' || (mode == 'c' && k == 0) || (mode == 't' && !prev_alpha);
        d[k] = (char)(up ? toupper(ch) : tolower(ch));
        prev_alpha = isalpha(ch) || (ch >= '0' && ch <= '9') || ch >= 0x80 || ch == '\'';
    }
    *out = jinja__str(d, s->u.s.n);
    return 0;
}

static int replace(jctx *c, const jv *s, const jv *from, const jv *to, const jv *count, jv *out)
{
    chat_buf b = {0};
    int64_t left = count && count->t == JV_INT ? count->u.i : -1;
    if (want_str(c, from, "replace") < 0 || want_str(c, to, "replace") < 0)
        return -1;
    for (size_t k = 0; k <= s->u.s.n;) {
        if (left != 0 && (from->u.s.n == 0 || (k + from->u.s.n <= s->u.s.n &&
                                                memcmp(s->u.s.p + k, from->u.s.p, from->u.s.n) == 0))) {
            chat__put(&b, to->u.s.p, to->u.s.n);
            left--;
            if (from->u.s.n) {
                k += from->u.s.n;
                continue;
            }
        }
        if (k < s->u.s.n)
            chat__put(&b, s->u.s.p + k, 1);
        k++;
    }
    return jinja__buf_done(c, &b, out);
}

static int split(jctx *c, const jv *s, const jv *sep, const jv *maxsplit, jv *out)
{
    jarr *a = jinja__arr_new(c, 0);
    int64_t left = maxsplit && maxsplit->t == JV_INT ? maxsplit->u.i : -1;
    size_t k = 0, start = 0, n = s->u.s.n;
    const char *p = s->u.s.p;
    if (!a)
        return jinja__oom(c);
    *out = (jv){.t = JV_LIST, .u.a = a};
    if (sep && sep->t == JV_STR) {
        if (!sep->u.s.n)
            return jinja__fail(c, "split: empty separator");
        for (; k + sep->u.s.n <= n; k++)
            if (left != 0 && memcmp(p + k, sep->u.s.p, sep->u.s.n) == 0) {
                jv part = jinja__str(p + start, k - start);
                if (jinja__arr_push(c, a, NULL, &part) < 0)
                    return -1;
                k += sep->u.s.n - 1, start = k + 1, left--;
            }
        jv part = jinja__str(p + start, n - start);
        return jinja__arr_push(c, a, NULL, &part);
    }
    /* no separator: runs of white space, none at the ends */
    for (;;) {
        while (k < n && is_ws(p[k]))
            k++;
        if (k >= n)
            return 0;
        start = k;
        if (left == 0)
            k = n;
        while (k < n && !is_ws(p[k]))
            k++;
        if (left == 0) {
            size_t e = n;
            while (e > start && is_ws(p[e - 1]))
                e--;
            k = e;
        }
        jv part = jinja__str(p + start, k - start);
        if (jinja__arr_push(c, a, NULL, &part) < 0)
            return -1;
        left--;
    }
}

static int affix(jctx *c, const jv *s, const jv *x, int end, int *out)
{
    *out = 0;
    if (x && x->t == JV_LIST) {
        for (size_t k = 0; k < x->u.a->n && !*out; k++)
            if (affix(c, s, &x->u.a->v[k], end, out) < 0)
                return -1;
        return 0;
    }
    if (want_str(c, x, end ? "endswith" : "startswith") < 0)
        return -1;
    *out = x->u.s.n <= s->u.s.n && memcmp(s->u.s.p + (end ? s->u.s.n - x->u.s.n : 0), x->u.s.p, x->u.s.n) == 0;
    return 0;
}

static int make_list(jctx *c, jv *out)
{
    jarr *a = jinja__arr_new(c, 0);
    if (!a)
        return jinja__oom(c);
    *out = (jv){.t = JV_LIST, .u.a = a};
    return 0;
}

static int items(jctx *c, const jv *d, jv *out)
{
    if (d->t != JV_DICT)
        return jinja__fail(c, "items needs a dict");
    if (make_list(c, out) < 0)
        return -1;
    for (size_t k = 0; k < d->u.a->n; k++) {
        jv pair = {.t = JV_NONE};
        if (make_list(c, &pair) < 0 || (pair.u.a->tuple = 1, jinja__arr_push(c, pair.u.a, NULL, &d->u.a->k[k])) < 0 ||
            jinja__arr_push(c, pair.u.a, NULL, &d->u.a->v[k]) < 0 || jinja__arr_push(c, out->u.a, NULL, &pair) < 0)
            return -1;
    }
    return 0;
}

/* an attribute path "a.b" of v (undefined where missing); a part in digits indexes a list, as
 * jinja2's attribute getters read "items.0" */
static jv attr_of(const jv *v, const jv *path)
{
    jv cur = *v;
    const char *p = path->u.s.p, *end = p + path->u.s.n;
    while (p <= end) {
        const char *dot = memchr(p, '.', (size_t)(end - p));
        size_t n = dot ? (size_t)(dot - p) : (size_t)(end - p), i = 0, digits = 0;
        jv *x = cur.t == JV_DICT ? jinja__dict_get(cur.u.a, p, n) : NULL;
        while (digits < n && digits < 18 && p[digits] >= '0' && p[digits] <= '9')
            i = i * 10 + (size_t)(p[digits++] - '0');
        if (cur.t == JV_LIST && n && digits == n && i < cur.u.a->n)
            x = &cur.u.a->v[i];
        if (!x)
            return (jv){.t = JV_UNDEF};
        cur = *x;
        if (!dot)
            break;
        p = dot + 1;
    }
    return cur;
}

/* jinja__compare, but items that all lack the attribute sorted by stay as they are, as in jinja2 */
static int sort_compare(jctx *c, const jv *a, const jv *b, int *out)
{
    if ((a->t == JV_UNDEF) != (b->t == JV_UNDEF))
        return jinja__fail(c, "sort: an item lacks the attribute the others are sorted by");
    if (a->t == JV_UNDEF)
        return *out = 0, 0;
    return jinja__compare(c, a, b, out);
}

/* sort and dictsort: the items of list a ordered by keys[k] (a->v[k]'s key) as Python's sorted
 * orders them: stable, and `reverse` keeps equal items in their order. A merge sort over a
 * scratch copy; keys Python cannot order fail when compared. */
static int sort_items(jctx *c, jarr *a, jv *keys, int reverse)
{
    size_t n = a->n;
    jv *tv = jinja__alloc(&c->arena, 2 * n * sizeof *tv + 1), *tk;

    if (!tv)
        return jinja__oom(c);
    tk = tv + n;
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n, i = lo, j = mid, o = lo;
            while (i < mid || j < hi) {
                int r = 1;
                if (i < mid && j < hi && sort_compare(c, reverse ? &keys[i] : &keys[j], reverse ? &keys[j] : &keys[i], &r) < 0)
                    return -1;
                size_t from = i < mid && (j >= hi || r >= 0) ? i++ : j++;
                tv[o] = a->v[from], tk[o++] = keys[from];
            }
        }
        memcpy(a->v, tv, n * sizeof *tv);
        memcpy(keys, tk, n * sizeof *tk);
    }
    return 0;
}

/* a sort key: v's attribute (attr: a path, or NULL), lowered when a string and !case_sensitive */
static int sort_key(jctx *c, const jv *v, const jv *attr, int case_sensitive, jv *out)
{
    *out = attr ? attr_of(v, attr) : *v;
    return out->t == JV_STR && !case_sensitive ? recase(c, out, 'l', out) : 0;
}

/* sort(reverse=false, case_sensitive=false, attribute=none): attribute "a.b", or "a,b" for
 * a key of several, compared in turn */
static int sort_filter(jctx *c, const jv *self, jv *args, const char **kw, size_t n, jv *out)
{
    const jv *rev = arg(args, kw, n, 0, "reverse"), *cs = arg(args, kw, n, 1, "case_sensitive"),
             *attr = arg(args, kw, n, 2, "attribute");
    int case_sensitive = cs && jinja__truthy(cs);
    jv seq, *keys = NULL;

    if (attr && attr->t == JV_NONE)
        attr = NULL;
    if (attr && want_str(c, attr, "sort(attribute=)") < 0)
        return -1;
    if (jinja__iterate(c, self, &seq) < 0 || make_list(c, out) < 0)
        return -1;
    for (size_t k = 0; k < seq.u.a->n; k++)
        if (jinja__arr_push(c, out->u.a, NULL, &seq.u.a->v[k]) < 0)
            return -1;
    if (seq.u.a->n && !(keys = jinja__alloc(&c->arena, seq.u.a->n * sizeof *keys)))
        return jinja__oom(c);
    for (size_t k = 0; k < seq.u.a->n; k++) {
        const char *comma = attr ? memchr(attr->u.s.p, ',', attr->u.s.n) : NULL;
        if (!comma) {
            if (sort_key(c, &seq.u.a->v[k], attr, case_sensitive, &keys[k]) < 0)
                return -1;
            continue;
        }
        /* several attributes: the key is the tuple of theirs */
        if (make_list(c, &keys[k]) < 0)
            return -1;
        keys[k].u.a->tuple = 1;
        for (const char *p = attr->u.s.p, *end = p + attr->u.s.n; p <= end;) {
            const char *e = memchr(p, ',', (size_t)(end - p));
            jv part = jinja__str(p, e ? (size_t)(e - p) : (size_t)(end - p)), x;  /* unstripped, as jinja2 */
            if (sort_key(c, &seq.u.a->v[k], &part, case_sensitive, &x) < 0 || jinja__arr_push(c, keys[k].u.a, NULL, &x) < 0)
                return -1;
            p = e ? e + 1 : end + 1;
        }
    }
    return seq.u.a->n ? sort_items(c, out->u.a, keys, rev && jinja__truthy(rev)) : 0;
}

/* dictsort(case_sensitive=false, by='key', reverse=false): the (key, value) pairs in order */
static int dictsort_filter(jctx *c, const jv *self, jv *args, const char **kw, size_t n, jv *out)
{
    const jv *cs = arg(args, kw, n, 0, "case_sensitive"), *by = arg(args, kw, n, 1, "by"),
             *rev = arg(args, kw, n, 2, "reverse");
    int pos = 0;
    jv *keys;

    if (by && !(by->t == JV_STR && ((by->u.s.n == 3 && memcmp(by->u.s.p, "key", 3) == 0) ||
                                    (pos = 1, by->u.s.n == 5 && memcmp(by->u.s.p, "value", 5) == 0))))
        return jinja__fail(c, "dictsort: you can only sort by either 'key' or 'value'");
    if (items(c, self, out) < 0)
        return -1;
    if (!out->u.a->n)
        return 0;
    if (!(keys = jinja__alloc(&c->arena, out->u.a->n * sizeof *keys)))
        return jinja__oom(c);
    for (size_t k = 0; k < out->u.a->n; k++)
        if (sort_key(c, &out->u.a->v[k].u.a->v[pos], NULL, cs && jinja__truthy(cs), &keys[k]) < 0)
            return -1;
    return sort_items(c, out->u.a, keys, rev && jinja__truthy(rev));
}

/* loop.cycle(a, b, ..) and loop.changed(x, ..) of the loop whose state is l */
static int loop_method(jctx *c, jloop *l, const char *name, jv *args, size_t n, jv *out)
{
    if (strcmp(name, "cycle") == 0) {
        if (!n)
            return jinja__fail(c, "loop.cycle: no items for cycling given");
        *out = args[l->index0 % n];
        return 0;
    }
    jv now;
    if (make_list(c, &now) < 0)
        return -1;
    for (size_t k = 0; k < n; k++)
        if (jinja__arr_push(c, now.u.a, NULL, &args[k]) < 0)
            return -1;
    *out = (jv){.t = JV_BOOL, .u.i = !l->changed_set || !jinja__equal(&l->changed_last, &now)};
    l->changed_set = 1, l->changed_last = now;
    return 0;
}

static int json_filter(jctx *c, const jv *self, const jv *indent, jv *out)
{
    chat_buf b = {0};
    int ind = indent && indent->t == JV_INT ? (int)(indent->u.i > 64 ? 64 : indent->u.i < 0 ? 0 : indent->u.i) : 0;
    if (jinja__tojson(c, &b, self, ind, 0) < 0) {
        free(b.p);
        return -1;
    }
    return jinja__buf_done(c, &b, out);
}

/* select/reject/selectattr/rejectattr: keep the items whose test (or truth) is `want` */
static int select_items(jctx *c, const jv *self, int by_attr, int want, jv *args, size_t n, jv *out)
{
    jv seq;
    if (!jinja__truthy(self))  /* jinja2 iterates only a true value: None selects nothing */
        return make_list(c, out);
    if (jinja__iterate(c, self, &seq) < 0 || make_list(c, out) < 0)
        return -1;
    if (by_attr && want_str(c, n ? &args[0] : NULL, "selectattr") < 0)
        return -1;
    size_t t = by_attr ? 1 : 0;
    for (size_t k = 0; k < seq.u.a->n; k++) {
        jv x = by_attr ? attr_of(&seq.u.a->v[k], &args[0]) : seq.u.a->v[k];
        int ok;
        if (n > t) {
            if (want_str(c, &args[t], "a test name") < 0)
                return -1;
            char name[32];
            snprintf(name, sizeof name, "%.*s", (int)(args[t].u.s.n < 31 ? args[t].u.s.n : 31), args[t].u.s.p);
            if (jinja__test(c, name, &x, args + t + 1, n - t - 1, &ok) < 0)
                return -1;
        } else
            ok = jinja__truthy(&x);
        if (ok == want && jinja__arr_push(c, out->u.a, NULL, &seq.u.a->v[k]) < 0)
            return -1;
    }
    return 0;
}

static int indent_filter(jctx *c, const jv *s, const jv *width, const jv *first, const jv *blank, jv *out)
{
    chat_buf b = {0}, pad = {0};
    if (width && width->t == JV_STR)
        chat__put(&pad, width->u.s.p, width->u.s.n);
    else
        for (int64_t k = 0; k < (width && width->t == JV_INT ? width->u.i : 4) && k < 256; k++)
            chat__puts(&pad, " ");
    int do_first = first && jinja__truthy(first), do_blank = blank && jinja__truthy(blank);
    for (size_t k = 0, ln = 0; k <= s->u.s.n; ln++) {
        const char *nl = memchr(s->u.s.p + k, '\n', s->u.s.n - k);
        size_t e = nl ? (size_t)(nl - s->u.s.p) : s->u.s.n;
        if ((ln > 0 || do_first) && (e > k || do_blank))
            chat__put(&b, pad.p, pad.n);
        chat__put(&b, s->u.s.p + k, e - k);
        if (!nl)
            break;
        chat__puts(&b, "\n");
        k = e + 1;
    }
    free(pad.p);
    return jinja__buf_done(c, &b, out);
}

/* What jinja__filter returns of a name that is not one of a helper's filters. */
#define NOT_HERE 1

/* The filters that walk a sequence: list, first, last, join, map, unique, reverse. */
static int seq_filter(jctx *c, const char *name, jv *self, jv *args, const char **kw, size_t n, jv *out)
{
    const jv *a0 = arg(args, kw, n, 0, "");
    int s = self->t == JV_STR;

    if (strcmp(name, "list") == 0) {
        jv seq;
        if (jinja__iterate(c, self, &seq) < 0 || make_list(c, out) < 0)
            return -1;
        for (size_t k = 0; k < seq.u.a->n; k++)
            if (jinja__arr_push(c, out->u.a, NULL, &seq.u.a->v[k]) < 0)
                return -1;
        return 0;
    }
    if (strcmp(name, "first") == 0 || strcmp(name, "last") == 0) {
        jv seq;
        if (jinja__iterate(c, self, &seq) < 0)
            return -1;
        *out = (jv){.t = JV_UNDEF};
        if (seq.u.a->n)
            *out = seq.u.a->v[name[0] == 'f' ? 0 : seq.u.a->n - 1];
        return 0;
    }
    if (strcmp(name, "join") == 0) {
        jv seq, sep = a0 && a0->t == JV_STR ? *a0 : jinja__str("", 0);
        const jv *attr = arg(args, kw, n, 1, "attribute");
        chat_buf b = {0};
        if (jinja__iterate(c, self, &seq) < 0)
            return -1;
        for (size_t k = 0; k < seq.u.a->n; k++) {
            jv x = attr && attr->t == JV_STR ? attr_of(&seq.u.a->v[k], attr) : seq.u.a->v[k];
            if (k)
                chat__put(&b, sep.u.s.p, sep.u.s.n);
            jinja__print(&b, &x, 0);
        }
        return jinja__buf_done(c, &b, out);
    }
    if (strcmp(name, "map") == 0) {
        const jv *attr = arg(args, kw, n, 99, "attribute"), *def = arg(args, kw, n, 99, "default");
        jv seq;
        if (!jinja__truthy(self))
            return make_list(c, out);
        if (jinja__iterate(c, self, &seq) < 0 || make_list(c, out) < 0)
            return -1;
        for (size_t k = 0; k < seq.u.a->n; k++) {
            jv x;
            if (attr) {
                if (want_str(c, attr, "map(attribute=)") < 0)
                    return -1;
                x = attr_of(&seq.u.a->v[k], attr);
                if (x.t == JV_UNDEF && def)
                    x = *def;
            } else {
                char fname[32];
                if (want_str(c, a0, "map") < 0)
                    return -1;
                snprintf(fname, sizeof fname, "%.*s", (int)(a0->u.s.n < 31 ? a0->u.s.n : 31), a0->u.s.p);
                if (jinja__filter(c, fname, &seq.u.a->v[k], args + 1, kw ? kw + 1 : NULL, n - 1, &x) < 0)
                    return -1;
            }
            if (jinja__arr_push(c, out->u.a, NULL, &x) < 0)
                return -1;
        }
        return 0;
    }
    if (strcmp(name, "unique") == 0) {
        jv seq;
        if (jinja__iterate(c, self, &seq) < 0 || make_list(c, out) < 0)
            return -1;
        for (size_t k = 0; k < seq.u.a->n; k++) {
            size_t j;
            for (j = 0; j < out->u.a->n && !jinja__equal(&out->u.a->v[j], &seq.u.a->v[k]); j++)
                ;
            if (j == out->u.a->n && jinja__arr_push(c, out->u.a, NULL, &seq.u.a->v[k]) < 0)
                return -1;
        }
        return 0;
    }
    if (strcmp(name, "reverse") == 0) {
        jv seq;
        if (jinja__iterate(c, self, &seq) < 0 || make_list(c, out) < 0)
            return -1;
        for (size_t k = seq.u.a->n; k-- > 0;)
            if (jinja__arr_push(c, out->u.a, NULL, &seq.u.a->v[k]) < 0)
                return -1;
        if (s) {
            jv sep = jinja__str("", 0);
            return jinja__filter(c, "join", out, &sep, NULL, 1, out);
        }
        return 0;
    }
    return NOT_HERE;
}

/* The filters of a number or a string: int, float, abs, trim, the cases, replace, indent. */
static int scalar_filter(jctx *c, const char *name, jv *self, jv *args, const char **kw, size_t n, jv *out)
{
    const jv *a0 = arg(args, kw, n, 0, ""), *a1 = arg(args, kw, n, 1, "");
    int s = self->t == JV_STR;

    if (strcmp(name, "int") == 0 || strcmp(name, "float") == 0) {
        double f = 0;
        if (self->t == JV_INT || self->t == JV_BOOL)
            f = (double)self->u.i;
        else if (self->t == JV_FLOAT)
            f = self->u.f;
        else if (s) {
            char buf[64];
            snprintf(buf, sizeof buf, "%.*s", (int)(self->u.s.n < 63 ? self->u.s.n : 63), self->u.s.p);
            f = strtod(buf, NULL);
        }
        if (name[0] == 'i' && (f != f || f > 9.2e18 || f < -9.2e18))
            f = 0;
        *out = name[0] == 'i' ? (jv){.t = JV_INT, .u.i = self->t == JV_INT ? self->u.i : (int64_t)f}
                              : (jv){.t = JV_FLOAT, .u.f = f};
        return 0;
    }
    if (strcmp(name, "abs") == 0 && (self->t == JV_INT || self->t == JV_FLOAT)) {
        *out = *self;
        if (self->t == JV_INT && self->u.i < 0 && self->u.i != INT64_MIN)
            out->u.i = -self->u.i;
        else if (self->t == JV_FLOAT && self->u.f < 0)
            out->u.f = -self->u.f;
        return 0;
    }
    /* string filters */
    if (!s && self->t != JV_UNDEF)
        return NOT_HERE;
    jv str = s ? *self : jinja__str("", 0);
    if (strcmp(name, "trim") == 0)
        return *out = strip(&str, a0, 3), 0;
    if (strcmp(name, "upper") == 0 || strcmp(name, "lower") == 0 || strcmp(name, "capitalize") == 0 ||
        strcmp(name, "title") == 0)
        return recase(c, &str, name[0] == 'u' ? 'u' : name[0] == 'l' ? 'l' : name[0], out);
    if (strcmp(name, "replace") == 0)
        return replace(c, &str, a0, a1, arg(args, kw, n, 2, "count"), out);
    if (strcmp(name, "indent") == 0)
        return indent_filter(c, &str, arg(args, kw, n, 0, "width"), arg(args, kw, n, 1, "first"),
                             arg(args, kw, n, 2, "blank"), out);
    return NOT_HERE;
}

int jinja__filter(jctx *c, const char *name, jv *self, jv *args, const char **kw, size_t n, jv *out)
{
    int s = self->t == JV_STR, r;

    if (strcmp(name, "safe") == 0 || strcmp(name, "string") == 0 || strcmp(name, "e") == 0)
        return strcmp(name, "string") == 0 ? jinja__tostr(c, self, out) : (*out = *self, 0);
    if (strcmp(name, "tojson") == 0)
        return json_filter(c, self, arg(args, kw, n, 0, "indent"), out);
    if (strcmp(name, "length") == 0 || strcmp(name, "count") == 0) {
        size_t len = s ? 0 : self->t == JV_LIST || self->t == JV_DICT ? self->u.a->n : 0;
        if (s)
            for (size_t k = 0; k < self->u.s.n; k++)
                len += ((unsigned char)self->u.s.p[k] & 0xc0) != 0x80;
        else if (self->t != JV_LIST && self->t != JV_DICT && self->t != JV_UNDEF)
            return jinja__fail(c, "length of a value that has none");
        *out = (jv){.t = JV_INT, .u.i = (int64_t)len};
        return 0;
    }
    if (strcmp(name, "default") == 0 || strcmp(name, "d") == 0) {
        const jv *boolean = arg(args, kw, n, 1, "boolean");
        jv empty = jinja__str("", 0);
        int use = self->t == JV_UNDEF || (boolean && jinja__truthy(boolean) && !jinja__truthy(self));
        *out = use ? (arg(args, kw, n, 0, "default_value") ? *arg(args, kw, n, 0, "default_value") : empty) : *self;
        return 0;
    }
    if (strcmp(name, "items") == 0)
        return self->t == JV_UNDEF ? make_list(c, out) : items(c, self, out);
    if ((r = seq_filter(c, name, self, args, kw, n, out)) != NOT_HERE)
        return r;
    if (strcmp(name, "select") == 0 || strcmp(name, "reject") == 0)
        return select_items(c, self, 0, name[0] == 's', args, n, out);
    if (strcmp(name, "selectattr") == 0 || strcmp(name, "rejectattr") == 0)
        return select_items(c, self, 1, name[0] == 's', args, n, out);
    if (strcmp(name, "dictsort") == 0)
        return dictsort_filter(c, self, args, kw, n, out);
    if (strcmp(name, "sort") == 0)
        return sort_filter(c, self, args, kw, n, out);
    if ((r = scalar_filter(c, name, self, args, kw, n, out)) != NOT_HERE)
        return r;
    return jinja__fail(c, "filter '%s' is not implemented for this value", name);
}

int jinja__test(jctx *c, const char *name, const jv *self, jv *args, size_t n, int *out)
{
    static const struct {
        const char *name;
        unsigned types; /* 1 << jv_type */
    } kinds[] = {
        {"defined", ~1u},
        {"undefined", 1u << JV_UNDEF},
        {"none", 1u << JV_NONE},
        {"string", 1u << JV_STR},
        {"mapping", 1u << JV_DICT},
        {"iterable", 1u << JV_STR | 1u << JV_LIST | 1u << JV_DICT},
        {"sequence", 1u << JV_STR | 1u << JV_LIST | 1u << JV_DICT},
        {"number", 1u << JV_INT | 1u << JV_FLOAT},
        {"integer", 1u << JV_INT},
        {"float", 1u << JV_FLOAT},
        {"boolean", 1u << JV_BOOL},
        {"callable", 1u << JV_MACRO},
    };
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++)
        if (strcmp(name, kinds[k].name) == 0)
            return *out = (kinds[k].types >> self->t) & 1, 0;
    if (strcmp(name, "true") == 0 || strcmp(name, "false") == 0)
        return *out = self->t == JV_BOOL && self->u.i == (name[0] == 't'), 0;
    if (strcmp(name, "lower") == 0 || strcmp(name, "upper") == 0) {
        *out = self->t == JV_STR;
        for (size_t k = 0; *out && k < self->u.s.n; k++)
            if (name[0] == 'l' ? isupper((unsigned char)self->u.s.p[k]) : islower((unsigned char)self->u.s.p[k]))
                *out = 0;
        return 0;
    }
    if ((strcmp(name, "odd") == 0 || strcmp(name, "even") == 0) && self->t == JV_INT)
        return *out = (self->u.i & 1) == (name[0] == 'o'), 0;
    if (n < 1)
        return jinja__fail(c, "test '%s' is not implemented (or needs an argument)", name);
    if (strcmp(name, "eq") == 0 || strcmp(name, "equalto") == 0 || strcmp(name, "==") == 0 ||
        strcmp(name, "ne") == 0 || strcmp(name, "!=") == 0)
        return *out = jinja__equal(self, &args[0]) == (name[0] != 'n' && name[0] != '!'), 0;
    if (strcmp(name, "in") == 0) {
        jv seq;
        *out = 0;
        if (args[0].t == JV_STR)
            return *out = self->t == JV_STR && (self->u.s.n == 0 ||
                                                 memmem(args[0].u.s.p, args[0].u.s.n, self->u.s.p, self->u.s.n)), 0;
        if (jinja__iterate(c, &args[0], &seq) < 0)
            return -1;
        for (size_t k = 0; k < seq.u.a->n && !*out; k++)
            *out = jinja__equal(&seq.u.a->v[k], self);
        return 0;
    }
    if (strcmp(name, "divisibleby") == 0 && self->t == JV_INT && args[0].t == JV_INT && args[0].u.i != 0)
        return *out = self->u.i % args[0].u.i == 0, 0;
    return jinja__fail(c, "test '%s' is not implemented for this value", name);
}

int jinja__method(jctx *c, const jv *self, const char *name, jv *args, const char **kw, size_t n, jv *out)
{
    const jv *a0 = arg(args, kw, n, 0, ""), *a1 = arg(args, kw, n, 1, "");
    if (self->t == JV_DICT && self->u.a->loop && (strcmp(name, "cycle") == 0 || strcmp(name, "changed") == 0))
        return loop_method(c, self->u.a->loop, name, args, n, out);
    if (self->t == JV_DICT) {
        if (strcmp(name, "get") == 0) {
            jv none = {.t = JV_NONE};
            const jv *v = a0 && a0->t == JV_STR ? jinja__dict_get(self->u.a, a0->u.s.p, a0->u.s.n) : NULL;
            *out = v ? *v : a1 ? *a1 : none;
            return 0;
        }
        if (strcmp(name, "items") == 0)
            return items(c, self, out);
        if (strcmp(name, "keys") == 0 || strcmp(name, "values") == 0) {
            if (make_list(c, out) < 0)
                return -1;
            for (size_t k = 0; k < self->u.a->n; k++)
                if (jinja__arr_push(c, out->u.a, NULL, name[0] == 'k' ? &self->u.a->k[k] : &self->u.a->v[k]) < 0)
                    return -1;
            return 0;
        }
    }
    if (self->t == JV_STR) {
        int r;
        if (strcmp(name, "startswith") == 0 || strcmp(name, "endswith") == 0) {
            if (affix(c, self, a0, name[0] == 'e', &r) < 0)
                return -1;
            return *out = (jv){.t = JV_BOOL, .u.i = r}, 0;
        }
        if (strcmp(name, "strip") == 0 || strcmp(name, "lstrip") == 0 || strcmp(name, "rstrip") == 0)
            return *out = strip(self, a0, name[0] == 'l' ? 1 : name[0] == 'r' ? 2 : 3), 0;
        if (strcmp(name, "split") == 0)
            return split(c, self, arg(args, kw, n, 0, "sep"), arg(args, kw, n, 1, "maxsplit"), out);
        if (strcmp(name, "replace") == 0)
            return replace(c, self, a0, a1, arg(args, kw, n, 2, "count"), out);
        if (strcmp(name, "upper") == 0 || strcmp(name, "lower") == 0 || strcmp(name, "title") == 0 ||
            strcmp(name, "capitalize") == 0)
            return recase(c, self, name[0] == 'u' ? 'u' : name[0] == 'l' ? 'l' : name[0], out);
    }
    if (self->t == JV_UNDEF || self->t == JV_NONE)
        return jinja__fail(c, "'%s' of %s value", name, self->t == JV_NONE ? "a None" : "an undefined");
    return jinja__fail(c, "method '%s' is not implemented for this value", name);
}

int jinja__is_global(const char *name)
{
    static const char *const names[] = {"raise_exception", "namespace", "dict", "range", "strftime_now"};
    for (size_t k = 0; k < sizeof names / sizeof *names; k++)
        if (strcmp(name, names[k]) == 0)
            return 1;
    return 0;
}

int jinja__global(jctx *c, const char *name, jv *args, const char **kw, size_t n, jv *out, int *found)
{
    *found = 1;
    if (strcmp(name, "raise_exception") == 0) {
        jv msg = n ? args[0] : jinja__str("raise_exception", 15);
        char buf[400];
        if (jinja__tostr(c, &msg, &msg) < 0)
            return -1;
        snprintf(buf, sizeof buf, "%.*s", (int)(msg.u.s.n < 399 ? msg.u.s.n : 399), msg.u.s.p);
        return jinja__fail(c, "%s", buf);
    }
    if (strcmp(name, "namespace") == 0 || strcmp(name, "dict") == 0) {
        jarr *d = jinja__arr_new(c, 1);
        if (!d)
            return jinja__oom(c);
        for (size_t k = 0; k < n; k++)
            if (kw && kw[k]) {
                if (jinja__dict_set(c, d, kw[k], strlen(kw[k]), &args[k]) < 0)
                    return -1;
            } else if (args[k].t == JV_DICT) {
                for (size_t j = 0; j < args[k].u.a->n; j++)
                    if (jinja__arr_push(c, d, &args[k].u.a->k[j], &args[k].u.a->v[j]) < 0)
                        return -1;
            }
        *out = (jv){.t = JV_DICT, .u.a = d};
        return 0;
    }
    if (strcmp(name, "range") == 0) {
        int64_t lo = 0, hi, st = 1;
        for (size_t k = 0; k < n; k++)
            if (args[k].t != JV_INT)
                return jinja__fail(c, "range needs integers");
        if (n < 1 || n > 3)
            return jinja__fail(c, "range takes 1 to 3 arguments");
        hi = args[n == 1 ? 0 : 1].u.i;
        if (n > 1)
            lo = args[0].u.i;
        if (n == 3)
            st = args[2].u.i;
        if (st == 0)
            return jinja__fail(c, "range step cannot be zero");
        if (make_list(c, out) < 0)
            return -1;
        for (int64_t i = lo; st > 0 ? i < hi : i > hi; i += st) {
            jv x = {.t = JV_INT, .u.i = i};
            if (out->u.a->n >= 100000)
                return jinja__fail(c, "range of more than 100000 items");
            if (jinja__arr_push(c, out->u.a, NULL, &x) < 0)
                return -1;
        }
        return 0;
    }
    if (strcmp(name, "strftime_now") == 0) {
        char fmt[128], buf[256];
        const char *epoch = getenv("SOURCE_DATE_EPOCH");
        time_t now = time(NULL);
        struct tm tm;
        if (want_str(c, n ? &args[0] : NULL, "strftime_now") < 0)
            return -1;
        snprintf(fmt, sizeof fmt, "%.*s", (int)(args[0].u.s.n < 127 ? args[0].u.s.n : 127), args[0].u.s.p);
        /* reproducible renders (tests, builds) fix the clock the usual way, in UTC */
        if (epoch && *epoch) {
            now = (time_t)strtoll(epoch, NULL, 10);
            gmtime_r(&now, &tm);
        } else
            localtime_r(&now, &tm);
        size_t len = strftime(buf, sizeof buf, fmt, &tm);
        return jinja__strdup(c, out, buf, len);
    }
    *found = 0;
    return 0;
}
