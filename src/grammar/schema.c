/* schema.c: JSON Schema (and "json") to a grammar. Each schema becomes one rule for its value,
 * without the whitespace around it; objects and arrays put the bounded whitespace rule between
 * their tokens. Anything a keyword asks that the grammar cannot enforce is refused by name, so a
 * schema never silently means less than it says. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_int.h"

#define NONE          UINT32_MAX
#define MAX_REPEAT    10000 /* maxLength, maxItems, minLength, minItems */
#define MAX_INT_RANGE 9999999999999999LL /* 16 digits, as integer_any */
#define MAX_PATTERN   1000

typedef struct ref_entry {
    char *ref;
    uint32_t rule;
} ref_entry;

typedef struct sc {
    gr_builder *b;
    json_t *root;
    ref_entry *refs;
    size_t n_refs, cap_refs;
    uint32_t ws, chr, str, num, intg, value, object, array;
} sc;

static uint32_t compile(sc *c, json_t *s, const char *path, int depth);

static uint32_t fail(sc *c, int code)
{
    gb_fail(c->b, code);
    return 0;
}

/* ---------------------------------------------------------------- shared rules */

/* ws ::= "" | " " | "\n" [ \t]{0,GRAMMAR_MAX_INDENT}: a model may indent, but not forever */
static uint32_t ws(sc *c)
{
    gr_seq s;
    gr_set ind = {{0}};

    if (c->ws != NONE)
        return c->ws;
    c->ws = gb_rule_new(c->b);
    seq_init(&s, c->b);
    gb_alt(c->b, c->ws, &s);
    seq_byte(&s, ' ');
    gb_alt(c->b, c->ws, &s);
    gr_set_range(&ind, ' ', ' ');
    gr_set_range(&ind, '\t', '\t');
    seq_byte(&s, '\n');
    seq_ref(&s, gb_rep(c->b, (gr_elem){GR_SET, gb_set_new(c->b, &ind)}, 0, GRAMMAR_MAX_INDENT));
    gb_alt(c->b, c->ws, &s);
    seq_fini(&s);
    return c->ws;
}

/* One character of a JSON string: well-formed UTF-8 other than '"', '\' and controls, or an
 * escape. Byte by byte, so a character may come in several tokens. */
static uint32_t chr(sc *c)
{
    gr_seq s;
    gr_set ascii = {{0}}, esc = {{0}}, hex = {{0}};
    uint32_t h;

    if (c->chr != NONE)
        return c->chr;
    c->chr = gb_rule_new(c->b);
    seq_init(&s, c->b);
    gr_set_range(&ascii, 0x20, 0x7f);
    gr_set_clear(&ascii, '"');
    gr_set_clear(&ascii, '\\');
    seq_set(&s, &ascii);
    gb_alt(c->b, c->chr, &s);
    seq_range(&s, 0xc2, 0xdf), seq_range(&s, 0x80, 0xbf);
    gb_alt(c->b, c->chr, &s);
    seq_byte(&s, 0xe0), seq_range(&s, 0xa0, 0xbf), seq_range(&s, 0x80, 0xbf);
    gb_alt(c->b, c->chr, &s);
    seq_range(&s, 0xe1, 0xec), seq_range(&s, 0x80, 0xbf), seq_range(&s, 0x80, 0xbf);
    gb_alt(c->b, c->chr, &s);
    seq_byte(&s, 0xed), seq_range(&s, 0x80, 0x9f), seq_range(&s, 0x80, 0xbf);
    gb_alt(c->b, c->chr, &s);
    seq_range(&s, 0xee, 0xef), seq_range(&s, 0x80, 0xbf), seq_range(&s, 0x80, 0xbf);
    gb_alt(c->b, c->chr, &s);
    seq_byte(&s, 0xf0), seq_range(&s, 0x90, 0xbf), seq_range(&s, 0x80, 0xbf), seq_range(&s, 0x80, 0xbf);
    gb_alt(c->b, c->chr, &s);
    seq_range(&s, 0xf1, 0xf3), seq_range(&s, 0x80, 0xbf), seq_range(&s, 0x80, 0xbf), seq_range(&s, 0x80, 0xbf);
    gb_alt(c->b, c->chr, &s);
    seq_byte(&s, 0xf4), seq_range(&s, 0x80, 0x8f), seq_range(&s, 0x80, 0xbf), seq_range(&s, 0x80, 0xbf);
    gb_alt(c->b, c->chr, &s);
    for (const char *p = "\"\\/bfnrt"; *p; p++)
        gr_set_range(&esc, (unsigned char)*p, (unsigned char)*p);
    seq_byte(&s, '\\'), seq_set(&s, &esc);
    gb_alt(c->b, c->chr, &s);
    gr_set_range(&hex, '0', '9'), gr_set_range(&hex, 'a', 'f'), gr_set_range(&hex, 'A', 'F');
    h = gb_set_new(c->b, &hex);
    seq_str(&s, "\\u");
    for (int i = 0; i < 4; i++)
        seq_elem(&s, (gr_elem){GR_SET, h});
    gb_alt(c->b, c->chr, &s);
    seq_fini(&s);
    return c->chr;
}

static uint32_t string_len(sc *c, long min, long max)
{
    uint32_t r = gb_rule_new(c->b), body = gb_rep(c->b, (gr_elem){GR_REF, chr(c)}, min, max);
    gr_seq s;

    seq_init(&s, c->b);
    seq_byte(&s, '"'), seq_ref(&s, body), seq_byte(&s, '"');
    gb_alt(c->b, r, &s);
    seq_fini(&s);
    return r;
}

static uint32_t str(sc *c)
{
    if (c->str == NONE)
        c->str = string_len(c, 0, -1);
    return c->str;
}

static gr_elem digit(sc *c)
{
    gr_set d = {{0}};

    gr_set_range(&d, '0', '9');
    return (gr_elem){GR_SET, gb_set_new(c->b, &d)};
}

/* "-"? ("0" | [1-9][0-9]{0,15}) */
static uint32_t intg(sc *c)
{
    uint32_t mag, r;
    gr_seq s;

    if (c->intg != NONE)
        return c->intg;
    seq_init(&s, c->b);
    mag = gb_rule_new(c->b);
    seq_byte(&s, '0');
    gb_alt(c->b, mag, &s);
    seq_range(&s, '1', '9'), seq_ref(&s, gb_rep(c->b, digit(c), 0, 15));
    gb_alt(c->b, mag, &s);
    r = c->intg = gb_rule_new(c->b);
    seq_byte(&s, '-'), seq_ref(&s, mag);
    gb_alt(c->b, r, &s);
    seq_ref(&s, mag);
    gb_alt(c->b, r, &s);
    seq_fini(&s);
    return r;
}

/* integer ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})? */
static uint32_t num(sc *c)
{
    uint32_t frac, exp, sign;
    gr_seq s;
    gr_set e = {{0}};

    if (c->num != NONE)
        return c->num;
    seq_init(&s, c->b);
    frac = gb_rule_new(c->b);
    gb_alt(c->b, frac, &s);
    seq_byte(&s, '.'), seq_ref(&s, gb_rep(c->b, digit(c), 1, 16));
    gb_alt(c->b, frac, &s);
    sign = gb_rule_new(c->b);
    gb_alt(c->b, sign, &s);
    seq_range(&s, '+', '+');
    gb_alt(c->b, sign, &s);
    seq_range(&s, '-', '-');
    gb_alt(c->b, sign, &s);
    exp = gb_rule_new(c->b);
    gb_alt(c->b, exp, &s);
    gr_set_range(&e, 'e', 'e'), gr_set_range(&e, 'E', 'E');
    seq_set(&s, &e), seq_ref(&s, sign), seq_ref(&s, gb_rep(c->b, digit(c), 1, 3));
    gb_alt(c->b, exp, &s);
    c->num = gb_rule_new(c->b);
    seq_ref(&s, intg(c)), seq_ref(&s, frac), seq_ref(&s, exp);
    gb_alt(c->b, c->num, &s);
    seq_fini(&s);
    return c->num;
}

/* open item ws ("," ws item ws)* close, or open ws close */
static void list_of(sc *c, uint32_t rule, char open, uint32_t item, char close)
{
    uint32_t more = gb_rule_new(c->b);
    gr_seq s;

    seq_init(&s, c->b);
    seq_byte(&s, ','), seq_ref(&s, ws(c)), seq_ref(&s, item), seq_ref(&s, ws(c)), seq_ref(&s, more);
    gb_alt(c->b, more, &s);
    gb_alt(c->b, more, &s);
    seq_byte(&s, (unsigned char)open), seq_ref(&s, ws(c)), seq_ref(&s, item), seq_ref(&s, ws(c)), seq_ref(&s, more);
    seq_byte(&s, (unsigned char)close);
    gb_alt(c->b, rule, &s);
    seq_byte(&s, (unsigned char)open), seq_ref(&s, ws(c)), seq_byte(&s, (unsigned char)close);
    gb_alt(c->b, rule, &s);
    seq_fini(&s);
}

/* kv ::= string ws ":" ws value */
static uint32_t kv_any(sc *c, uint32_t value)
{
    uint32_t r = gb_rule_new(c->b);
    gr_seq s;

    seq_init(&s, c->b);
    seq_ref(&s, str(c)), seq_ref(&s, ws(c)), seq_byte(&s, ':'), seq_ref(&s, ws(c)), seq_ref(&s, value);
    gb_alt(c->b, r, &s);
    seq_fini(&s);
    return r;
}

static uint32_t value(sc *c);

static uint32_t object_any(sc *c)
{
    if (c->object == NONE) {
        c->object = gb_rule_new(c->b);
        list_of(c, c->object, '{', kv_any(c, value(c)), '}');
    }
    return c->object;
}

static uint32_t value(sc *c)
{
    gr_seq s;

    if (c->value != NONE)
        return c->value;
    c->value = gb_rule_new(c->b);
    c->array = gb_rule_new(c->b);
    list_of(c, c->array, '[', c->value, ']');
    seq_init(&s, c->b);
    seq_ref(&s, object_any(c));
    gb_alt(c->b, c->value, &s);
    seq_ref(&s, c->array);
    gb_alt(c->b, c->value, &s);
    seq_ref(&s, str(c));
    gb_alt(c->b, c->value, &s);
    seq_ref(&s, num(c));
    gb_alt(c->b, c->value, &s);
    for (const char *const *w = (const char *const[]){"true", "false", "null", NULL}; *w; w++) {
        seq_str(&s, *w);
        gb_alt(c->b, c->value, &s);
    }
    seq_fini(&s);
    return c->value;
}

/* ---------------------------------------------------------------- keywords */

static const char *const annotations[] = {"title",   "description", "$schema",  "$id",       "$comment",
                                          "default", "examples",    "readOnly", "writeOnly", "deprecated"};
/* clang-format off */
static const char *const supported[] = {
    "type", "properties", "required", "additionalProperties", "items", "prefixItems", "minItems", "maxItems",
    "enum", "const", "anyOf", "oneOf", "allOf", "$defs", "definitions", "$ref", "nullable", "minLength",
    "maxLength", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "format", "pattern"};
/* clang-format on */

static int in(const char *k, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(k, list[i]))
            return 1;
    return 0;
}
#define IN(k, list) in(k, list, sizeof list / sizeof *list)

static int has(json_t *s, const char *k)
{
    return json_object_get(s, k) != NULL;
}

static uint32_t unsupported(sc *c, const char *k, const char *path, const char *why)
{
    return fail(c, ms_err(MS_EUNSUPPORTED, "schema keyword '%s' at '%s' is not supported%s", k, path, why));
}

static uint32_t bad(sc *c, const char *k, const char *path, const char *what)
{
    return fail(c, ms_err(MS_EINVALID, "schema keyword '%s' at '%s': %s", k, path, what));
}

/* A count keyword (minLength, maxItems): a non-negative integer up to MAX_REPEAT; *out keeps
 * its default when absent. */
static int count(sc *c, json_t *s, const char *k, const char *path, long *out)
{
    json_t *v = json_object_get(s, k);

    if (!v)
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return bad(c, k, path, "expected a non-negative integer"), -1;
    if (json_integer_value(v) > MAX_REPEAT)
        return fail(c, ms_err(MS_ETOOBIG, "schema keyword '%s' at '%s': %lld is more than %d", k, path,
                              (long long)json_integer_value(v), MAX_REPEAT)),
               -1;
    *out = (long)json_integer_value(v);
    return 0;
}

static uint32_t literal(sc *c, json_t *v)
{
    char *text = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    uint32_t r;

    if (!text)
        return fail(c, ms_err(MS_ENOMEM, "out of memory"));
    r = gb_rule_lit(c->b, text);
    free(text);
    return r;
}

static uint32_t one_of_values(sc *c, json_t *a, const char *path)
{
    uint32_t r;
    size_t i;
    json_t *v;
    gr_seq s;

    if (!json_is_array(a))
        return bad(c, "enum", path, "expected an array");
    if (json_array_size(a) == 0)
        return fail(c, ms_err(MS_EINVALID, "schema at '%s' accepts nothing (an empty enum)", path));
    r = gb_rule_new(c->b);
    seq_init(&s, c->b);
    json_array_foreach(a, i, v)
    {
        seq_ref(&s, literal(c, v));
        gb_alt(c->b, r, &s);
    }
    seq_fini(&s);
    return r;
}

/* ---------------------------------------------------------------- integers in a range */

/* Decimal strings x <= y of the same length n, no sign: the rule for every number between. */
static uint32_t same_len(sc *c, const char *x, const char *y, size_t n)
{
    uint32_t r = gb_rule_new(c->b);
    gr_seq s;
    char nines[20], zeros[20];
    int rest_lo = 1, rest_hi = 1;

    seq_init(&s, c->b);
    if (n == 0) {
        gb_alt(c->b, r, &s);
        goto out;
    }
    if (x[0] == y[0]) {
        seq_byte(&s, (unsigned char)x[0]), seq_ref(&s, same_len(c, x + 1, y + 1, n - 1));
        gb_alt(c->b, r, &s);
        goto out;
    }
    for (size_t i = 1; i < n; i++)
        rest_lo &= x[i] == '0', rest_hi &= y[i] == '9';
    memset(nines, '9', n), memset(zeros, '0', n);
    /* x0 x' .. x0 99..9 | (x0+1 .. y0-1) any | y0 00..0 .. y0 y', merging the ends that are whole */
    if (!rest_lo) {
        seq_byte(&s, (unsigned char)x[0]), seq_ref(&s, same_len(c, x + 1, nines, n - 1));
        gb_alt(c->b, r, &s);
    }
    {
        unsigned lo = (unsigned char)x[0] + !rest_lo, hi = (unsigned char)y[0] - !rest_hi;
        if (lo <= hi) {
            seq_range(&s, lo, hi);
            for (size_t i = 1; i < n; i++)
                seq_elem(&s, digit(c));
            gb_alt(c->b, r, &s);
        }
    }
    if (!rest_hi) {
        seq_byte(&s, (unsigned char)y[0]), seq_ref(&s, same_len(c, zeros, y + 1, n - 1));
        gb_alt(c->b, r, &s);
    }
out:
    seq_fini(&s);
    return r;
}

/* Every integer in [lo, hi] (0 <= lo <= hi), without leading zeros, as alternatives of r. */
static void nonneg_range(sc *c, uint32_t r, long long lo, long long hi, const char *sign)
{
    long long p = 1;
    gr_seq s;

    seq_init(&s, c->b);
    for (int len = 1; len <= 17 && (len == 1 || p <= hi); len++, p *= 10) {
        long long a = lo > (len == 1 ? 0 : p) ? lo : (len == 1 ? 0 : p), b = hi < p * 10 - 1 ? hi : p * 10 - 1;
        char x[24], y[24];
        if (a > b)
            continue;
        snprintf(x, sizeof x, "%lld", a), snprintf(y, sizeof y, "%lld", b);
        seq_str(&s, sign), seq_ref(&s, same_len(c, x, y, (size_t)len));
        gb_alt(c->b, r, &s);
    }
    seq_fini(&s);
}

static int bound(sc *c, json_t *s, const char *k, const char *path, int up, int excl, long long *io)
{
    json_t *v = json_object_get(s, k);
    double d;

    if (!v)
        return 0;
    if (!json_is_number(v))
        return bad(c, k, path,
                   excl && json_is_boolean(v) ? "the boolean form (draft 4) is not supported" : "expected a number"),
               -1;
    d = json_number_value(v);
    d = up ? floor(d) - (excl && d == floor(d)) : ceil(d) + (excl && d == ceil(d));
    if (up ? d < (double)*io : d > (double)*io)
        *io = (long long)d;
    return 0;
}

static uint32_t integer(sc *c, json_t *s, const char *path)
{
    long long lo = -MAX_INT_RANGE, hi = MAX_INT_RANGE;
    uint32_t r;

    if (!has(s, "minimum") && !has(s, "maximum") && !has(s, "exclusiveMinimum") && !has(s, "exclusiveMaximum"))
        return intg(c);
    if (bound(c, s, "minimum", path, 0, 0, &lo) < 0 || bound(c, s, "exclusiveMinimum", path, 0, 1, &lo) < 0 ||
        bound(c, s, "maximum", path, 1, 0, &hi) < 0 || bound(c, s, "exclusiveMaximum", path, 1, 1, &hi) < 0)
        return 0;
    if (lo > hi)
        return fail(c,
                    ms_err(MS_EINVALID, "schema at '%s' accepts nothing (no integer from %lld to %lld)", path, lo, hi));
    r = gb_rule_new(c->b);
    if (lo < 0) /* "-" then the magnitudes, smallest |x| first; -0 is not written */
        nonneg_range(c, r, hi < 0 ? -hi : 1, -lo, "-");
    if (hi >= 0)
        nonneg_range(c, r, lo > 0 ? lo : 0, hi, "");
    return r;
}

/* ---------------------------------------------------------------- strings */

static void two_digits(sc *c, gr_seq *s, unsigned a_lo, unsigned a_hi, unsigned b_lo, unsigned b_hi)
{
    seq_range(s, a_lo, a_hi), seq_range(s, b_lo, b_hi);
    (void)c;
}

/* Alternatives of two-digit ranges: (first digits, second digits) pairs. */
static uint32_t digits2(sc *c, const char *spec)
{
    uint32_t r = gb_rule_new(c->b);
    gr_seq s;

    seq_init(&s, c->b);
    for (const char *p = spec; *p; p += 4) { /* "0019" = [0-0][1-9] */
        two_digits(c, &s, (unsigned char)p[0], (unsigned char)p[1], (unsigned char)p[2], (unsigned char)p[3]);
        gb_alt(c->b, r, &s);
    }
    seq_fini(&s);
    return r;
}

static void date(sc *c, gr_seq *s)
{
    for (int i = 0; i < 4; i++)
        seq_elem(s, digit(c));
    seq_byte(s, '-'), seq_ref(s, digits2(c, "00191102")), seq_byte(s, '-');
    seq_ref(s, digits2(c, "001912093301"));
}

static void time_(sc *c, gr_seq *s)
{
    uint32_t hh = digits2(c, "01092203"), frac = gb_rule_new(c->b), tz = gb_rule_new(c->b);
    gr_seq t;
    gr_set pm = {{0}};

    seq_init(&t, c->b);
    gb_alt(c->b, frac, &t);
    seq_byte(&t, '.'), seq_ref(&t, gb_rep(c->b, digit(c), 1, 9));
    gb_alt(c->b, frac, &t);
    seq_byte(&t, 'Z');
    gb_alt(c->b, tz, &t);
    gr_set_range(&pm, '+', '+'), gr_set_range(&pm, '-', '-');
    seq_set(&t, &pm), seq_ref(&t, hh), seq_byte(&t, ':'), two_digits(c, &t, '0', '5', '0', '9');
    gb_alt(c->b, tz, &t);
    seq_fini(&t);
    seq_ref(s, hh), seq_byte(s, ':'), two_digits(c, s, '0', '5', '0', '9'), seq_byte(s, ':');
    two_digits(c, s, '0', '5', '0', '9'), seq_ref(s, frac), seq_ref(s, tz);
}

static uint32_t format(sc *c, const char *f, const char *path)
{
    uint32_t r = gb_rule_new(c->b);
    gr_seq s;
    gr_set hex = {{0}};

    seq_init(&s, c->b);
    seq_byte(&s, '"');
    if (!strcmp(f, "date")) {
        date(c, &s);
    } else if (!strcmp(f, "time")) {
        time_(c, &s);
    } else if (!strcmp(f, "date-time")) {
        date(c, &s), seq_byte(&s, 'T'), time_(c, &s);
    } else if (!strcmp(f, "uuid")) {
        gr_set_range(&hex, '0', '9'), gr_set_range(&hex, 'a', 'f'), gr_set_range(&hex, 'A', 'F');
        for (int g = 0, n[] = {8, 4, 4, 4, 12}; g < 5; g++) {
            for (int i = 0; i < n[g]; i++)
                seq_set(&s, &hex);
            if (g < 4)
                seq_byte(&s, '-');
        }
    } else {
        seq_fini(&s);
        return fail(c, ms_err(MS_EUNSUPPORTED,
                              "schema keyword 'format' at '%s': format '%s' is not supported "
                              "(date, time, date-time, uuid are)",
                              path, f));
    }
    seq_byte(&s, '"');
    gb_alt(c->b, r, &s);
    seq_fini(&s);
    return r;
}

static uint32_t string(sc *c, json_t *s, const char *path)
{
    long min = 0, max = -1;
    json_t *f = json_object_get(s, "format"), *p = json_object_get(s, "pattern");

    if (f && p)
        return unsupported(c, "pattern", path, " together with 'format'");
    if (f) {
        if (!json_is_string(f))
            return bad(c, "format", path, "expected a string");
        if (has(s, "minLength") || has(s, "maxLength"))
            return unsupported(c, has(s, "minLength") ? "minLength" : "maxLength", path, " together with 'format'");
        return format(c, json_string_value(f), path);
    }
    if (p) {
        if (!json_is_string(p))
            return bad(c, "pattern", path, "expected a string");
        if (has(s, "minLength") || has(s, "maxLength"))
            return unsupported(c, has(s, "minLength") ? "minLength" : "maxLength", path, " together with 'pattern'");
        return grammar__pattern(c->b, chr(c), json_string_value(p), path);
    }
    if (count(c, s, "minLength", path, &min) < 0 || count(c, s, "maxLength", path, &max) < 0)
        return 0;
    if (max >= 0 && min > max)
        return fail(
            c, ms_err(MS_EINVALID, "schema at '%s' accepts nothing (minLength %ld > maxLength %ld)", path, min, max));
    if (min == 0 && max < 0)
        return str(c);
    return string_len(c, min, max);
}

/* ---------------------------------------------------------------- objects and arrays */

typedef struct prop {
    const char *name;
    uint32_t kv; /* "name" ws ":" ws value */
    int required;
} prop;

static uint32_t object(sc *c, json_t *s, const char *path, int depth)
{
    json_t *props = json_object_get(s, "properties"), *req = json_object_get(s, "required"),
           *addl = json_object_get(s, "additionalProperties"), *v;
    size_t n = 0, i;
    prop *ps = NULL;
    uint32_t next[2], extra = NONE, r;
    const char *k;
    char sub[512];
    gr_seq q;

    if (props && !json_is_object(props))
        return bad(c, "properties", path, "expected an object");
    if (req && !json_is_array(req))
        return bad(c, "required", path, "expected an array of strings");
    if (!props && !req && (!addl || json_is_true(addl)))
        return object_any(c);
    if (!(ps = calloc(json_object_size(props) + json_array_size(req) + 1, sizeof *ps)))
        return fail(c, ms_err(MS_ENOMEM, "out of memory"));
    seq_init(&q, c->b);
    json_object_foreach(props, k, v)
    {
        snprintf(sub, sizeof sub, "%s/properties/%s", path, k);
        ps[n].name = k;
        ps[n].kv = compile(c, v, sub, depth + 1);
        n++;
    }
    json_array_foreach(req, i, v)
    {
        size_t j;
        if (!json_is_string(v)) {
            bad(c, "required", path, "expected an array of strings");
            goto out;
        }
        for (j = 0; j < n && strcmp(ps[j].name, json_string_value(v)); j++)
            ;
        if (j == n) /* required but not described: any value */
            ps[n].name = json_string_value(v), ps[n].kv = value(c), n++;
        ps[j].required = 1;
    }
    for (i = 0; i < n; i++) { /* the key and its value */
        json_t *name = json_string(ps[i].name);
        uint32_t kv = gb_rule_new(c->b);
        seq_ref(&q, literal(c, name)), seq_ref(&q, ws(c)), seq_byte(&q, ':'), seq_ref(&q, ws(c)), seq_ref(&q, ps[i].kv);
        gb_alt(c->b, kv, &q);
        json_decref(name);
        ps[i].kv = kv;
    }
    if (addl && !json_is_boolean(addl)) {
        snprintf(sub, sizeof sub, "%s/additionalProperties", path);
        extra = kv_any(c, compile(c, addl, sub, depth + 1));
    } else if (addl && json_is_true(addl)) {
        extra = kv_any(c, value(c));
    }
    /* next[f]: the rest after property i, f = 1 while none has been written (no comma yet) */
    for (int f = 0; f < 2; f++) {
        next[f] = gb_rule_new(c->b);
        if (extra != NONE) { /* ("," ws)? kv ws ("," ws kv ws)* */
            uint32_t more = gb_rule_new(c->b);
            seq_byte(&q, ','), seq_ref(&q, ws(c)), seq_ref(&q, extra), seq_ref(&q, ws(c)), seq_ref(&q, more);
            gb_alt(c->b, more, &q);
            gb_alt(c->b, more, &q);
            if (!f)
                seq_byte(&q, ','), seq_ref(&q, ws(c));
            seq_ref(&q, extra), seq_ref(&q, ws(c)), seq_ref(&q, more);
            gb_alt(c->b, next[f], &q);
        }
        gb_alt(c->b, next[f], &q);
    }
    for (i = n; i-- > 0;) {
        uint32_t cur[2];
        for (int f = 0; f < 2; f++) {
            cur[f] = gb_rule_new(c->b);
            if (!f)
                seq_byte(&q, ','), seq_ref(&q, ws(c));
            seq_ref(&q, ps[i].kv), seq_ref(&q, ws(c)), seq_ref(&q, next[0]);
            gb_alt(c->b, cur[f], &q);
            if (!ps[i].required) {
                seq_ref(&q, next[f]);
                gb_alt(c->b, cur[f], &q);
            }
        }
        next[0] = cur[0], next[1] = cur[1];
    }
    r = gb_rule_new(c->b);
    seq_byte(&q, '{'), seq_ref(&q, ws(c)), seq_ref(&q, next[1]), seq_byte(&q, '}');
    gb_alt(c->b, r, &q);
out:
    seq_fini(&q);
    free(ps);
    return c->b->err ? 0 : r;
}

static uint32_t array(sc *c, json_t *s, const char *path, int depth)
{
    json_t *prefix = json_object_get(s, "prefixItems"), *items = json_object_get(s, "items");
    long min = 0, max = -1, k, st;
    uint32_t *el = NULL, item = NONE, next, r;
    char sub[512];
    gr_seq q;

    if (items && json_is_array(items) && !prefix) /* draft 4's tuple form */
        prefix = items, items = NULL;
    if (prefix && !json_is_array(prefix))
        return bad(c, "prefixItems", path, "expected an array of schemas");
    if (count(c, s, "minItems", path, &min) < 0 || count(c, s, "maxItems", path, &max) < 0)
        return 0;
    k = (long)json_array_size(prefix);
    if (items && json_is_false(items))
        max = max < 0 || max > k ? k : max;
    if (max >= 0 && min > max)
        return fail(c, ms_err(MS_EINVALID, "schema at '%s' accepts nothing (minItems %ld > %ld items at most)", path,
                              min, max));
    if (!prefix && !items && !min && max < 0) {
        value(c);
        return c->array;
    }
    if (!(el = calloc((size_t)k + 1, sizeof *el)))
        return fail(c, ms_err(MS_ENOMEM, "out of memory"));
    for (long i = 0; i < k; i++) {
        snprintf(sub, sizeof sub, "%s/prefixItems/%ld", path, i);
        el[i] = compile(c, json_array_get(prefix, (size_t)i), sub, depth + 1);
    }
    if (!items || json_is_true(items)) {
        item = value(c);
    } else if (!json_is_false(items)) {
        snprintf(sub, sizeof sub, "%s/items", path);
        item = compile(c, items, sub, depth + 1);
    }
    seq_init(&q, c->b);
    st = k > min ? k : min;
    if (max >= 0 && st > max)
        st = max;
    /* next: the elements from index st on, all of them `item` */
    next = gb_rule_new(c->b);
    if (item != NONE && max < 0) { /* T ::= "" | "," ws item ws T; at index 0 without the comma */
        uint32_t t = st == 0 ? gb_rule_new(c->b) : next;
        seq_byte(&q, ','), seq_ref(&q, ws(c)), seq_ref(&q, item), seq_ref(&q, ws(c)), seq_ref(&q, t);
        gb_alt(c->b, t, &q);
        gb_alt(c->b, t, &q);
        if (st == 0) {
            seq_ref(&q, item), seq_ref(&q, ws(c)), seq_ref(&q, t);
            gb_alt(c->b, next, &q);
            gb_alt(c->b, next, &q);
        }
    } else if (item != NONE && max > st) {
        uint32_t t = gb_rule_new(c->b);
        gb_alt(c->b, t, &q);
        for (long i = max - 1; i >= st; i--) {
            uint32_t u = i == st ? next : gb_rule_new(c->b);
            if (i > 0)
                seq_byte(&q, ','), seq_ref(&q, ws(c));
            seq_ref(&q, item), seq_ref(&q, ws(c)), seq_ref(&q, t);
            gb_alt(c->b, u, &q);
            gb_alt(c->b, u, &q);
            t = u;
        }
    } else {
        gb_alt(c->b, next, &q);
    }
    for (long i = st - 1; i >= 0; i--) {
        uint32_t u = gb_rule_new(c->b);
        if (i > 0)
            seq_byte(&q, ','), seq_ref(&q, ws(c));
        seq_ref(&q, i < k ? el[i] : item), seq_ref(&q, ws(c)), seq_ref(&q, next);
        gb_alt(c->b, u, &q);
        if (i >= min)
            gb_alt(c->b, u, &q);
        next = u;
    }
    r = gb_rule_new(c->b);
    seq_byte(&q, '['), seq_ref(&q, ws(c)), seq_ref(&q, next), seq_byte(&q, ']');
    gb_alt(c->b, r, &q);
    seq_fini(&q);
    free(el);
    return c->b->err ? 0 : r;
}

/* ---------------------------------------------------------------- schemas */

static uint32_t ref(sc *c, json_t *s, const char *path, int depth)
{
    json_t *v = json_object_get(s, "$ref"), *at = c->root;
    const char *r;
    uint32_t rule;
    char tok[256], sub[512];
    gr_seq q;

    if (!json_is_string(v))
        return bad(c, "$ref", path, "expected a string");
    r = json_string_value(v);
    for (size_t i = 0; i < c->n_refs; i++)
        if (!strcmp(c->refs[i].ref, r))
            return c->refs[i].rule;
    if (r[0] != '#' || (r[1] && r[1] != '/'))
        return unsupported(c, "$ref", path, " beyond a local JSON pointer (\"#/...\")");
    for (const char *p = r + 1; *p == '/';) { /* JSON pointer: ~1 is '/', ~0 is '~' */
        size_t n = 0;
        for (p++; *p && *p != '/' && n + 1 < sizeof tok; p++) {
            if (*p == '~' && (p[1] == '0' || p[1] == '1'))
                tok[n++] = p[1] == '0' ? '~' : '/', p++;
            else
                tok[n++] = *p;
        }
        tok[n] = '\0';
        at = json_is_array(at) ? json_array_get(at, strtoul(tok, NULL, 10)) : json_object_get(at, tok);
        if (!at)
            return fail(c, ms_err(MS_EINVALID, "schema keyword '$ref' at '%s': '%s' resolves to nothing", path, r));
    }
    /* the rule exists before its body, so a schema may refer to itself */
    if (ms_grow(&c->refs, &c->cap_refs, c->n_refs + 1, sizeof *c->refs) < 0 || !(c->refs[c->n_refs].ref = strdup(r)))
        return fail(c, ms_err(MS_ENOMEM, "out of memory"));
    rule = c->refs[c->n_refs++].rule = gb_rule_new(c->b);
    snprintf(sub, sizeof sub, "%s", r + 1);
    seq_init(&q, c->b);
    seq_ref(&q, compile(c, at, sub, depth + 1));
    gb_alt(c->b, rule, &q);
    seq_fini(&q);
    return rule;
}

static uint32_t alternatives(sc *c, json_t *a, const char *k, const char *path, int depth)
{
    uint32_t r;
    size_t i;
    json_t *v;
    char sub[512];
    gr_seq q;

    if (!json_is_array(a) || json_array_size(a) == 0)
        return bad(c, k, path, "expected a non-empty array of schemas");
    r = gb_rule_new(c->b);
    seq_init(&q, c->b);
    json_array_foreach(a, i, v)
    {
        snprintf(sub, sizeof sub, "%s/%s/%zu", path, k, i);
        seq_ref(&q, compile(c, v, sub, depth + 1));
        gb_alt(c->b, r, &q);
    }
    seq_fini(&q);
    return r;
}

static uint32_t typed(sc *c, json_t *s, const char *t, const char *path, int depth)
{
    if (!strcmp(t, "null"))
        return gb_rule_lit(c->b, "null");
    if (!strcmp(t, "boolean")) {
        uint32_t r = gb_rule_new(c->b);
        gr_seq q;
        seq_init(&q, c->b);
        seq_str(&q, "true");
        gb_alt(c->b, r, &q);
        seq_str(&q, "false");
        gb_alt(c->b, r, &q);
        seq_fini(&q);
        return r;
    }
    if (!strcmp(t, "string"))
        return string(c, s, path);
    if (!strcmp(t, "integer"))
        return integer(c, s, path);
    if (!strcmp(t, "number")) {
        for (const char *const *k =
                 (const char *const[]){"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", NULL};
             *k; k++)
            if (has(s, *k))
                return unsupported(c, *k, path, " for type 'number' (only for 'integer')");
        return num(c);
    }
    if (!strcmp(t, "object"))
        return object(c, s, path, depth);
    if (!strcmp(t, "array"))
        return array(c, s, path, depth);
    return fail(c, ms_err(MS_EINVALID, "schema keyword 'type' at '%s': unknown type '%s'", path, t));
}

/* The type a schema without "type" has by its keywords; NULL: any value. */
static const char *implied_type(json_t *s)
{
    if (has(s, "properties") || has(s, "additionalProperties") || has(s, "required"))
        return "object";
    if (has(s, "items") || has(s, "prefixItems") || has(s, "minItems") || has(s, "maxItems"))
        return "array";
    if (has(s, "minLength") || has(s, "maxLength") || has(s, "pattern") || has(s, "format"))
        return "string";
    if (has(s, "minimum") || has(s, "maximum") || has(s, "exclusiveMinimum") || has(s, "exclusiveMaximum"))
        return "number";
    return NULL;
}

static uint32_t body(sc *c, json_t *s, const char *path, int depth)
{
    json_t *t = json_object_get(s, "type"), *v;
    uint32_t r;
    size_t i;
    gr_seq q;

    if (has(s, "$ref"))
        return ref(c, s, path, depth);
    if (has(s, "allOf")) { /* pydantic wraps a described $ref so: allOf of one schema is that schema */
        json_t *a = json_object_get(s, "allOf");
        char sub[512];
        if (!json_is_array(a) || json_array_size(a) != 1 || t || implied_type(s) || has(s, "anyOf") ||
            has(s, "oneOf") || has(s, "enum") || has(s, "const"))
            return unsupported(c, "allOf", path, " (only as the one keyword, of exactly one schema)");
        snprintf(sub, sizeof sub, "%s/allOf/0", path);
        return compile(c, json_array_get(a, 0), sub, depth + 1);
    }
    if (has(s, "const"))
        return literal(c, json_object_get(s, "const"));
    if (has(s, "enum"))
        return one_of_values(c, json_object_get(s, "enum"), path);
    if (has(s, "anyOf") || has(s, "oneOf")) {
        const char *k = has(s, "anyOf") ? "anyOf" : "oneOf";
        if (has(s, "anyOf") && has(s, "oneOf"))
            return unsupported(c, "oneOf", path, " together with 'anyOf'");
        if (t || implied_type(s))
            return unsupported(c, k, path, " together with type keywords (put them in each alternative)");
        return alternatives(c, json_object_get(s, k), k, path, depth);
    }
    if (!t) {
        const char *it = implied_type(s);
        return it ? typed(c, s, it, path, depth) : value(c);
    }
    if (json_is_string(t))
        return typed(c, s, json_string_value(t), path, depth);
    if (!json_is_array(t) || json_array_size(t) == 0)
        return bad(c, "type", path, "expected a type name or a non-empty array of them");
    r = gb_rule_new(c->b);
    seq_init(&q, c->b);
    json_array_foreach(t, i, v)
    {
        if (!json_is_string(v)) {
            seq_fini(&q);
            return bad(c, "type", path, "expected a type name or a non-empty array of them");
        }
        seq_ref(&q, typed(c, s, json_string_value(v), path, depth));
        gb_alt(c->b, r, &q);
    }
    seq_fini(&q);
    return r;
}

static uint32_t compile(sc *c, json_t *s, const char *path, int depth)
{
    const char *k;
    json_t *v;
    uint32_t r;
    gr_seq q;

    if (c->b->err)
        return 0;
    if (depth > GRAMMAR_MAX_DEPTH)
        return fail(c, ms_err(MS_ETOOBIG, "schema at '%s' is nested more than %d deep", path, GRAMMAR_MAX_DEPTH));
    if (json_is_true(s))
        return value(c);
    if (json_is_false(s))
        return fail(c, ms_err(MS_EINVALID, "schema at '%s' accepts nothing (false)", path));
    if (!json_is_object(s))
        return fail(c, ms_err(MS_EINVALID, "schema at '%s' is not an object or a boolean", path));
    json_object_foreach(s, k, v)
    {
        if (!IN(k, supported) && !IN(k, annotations))
            return unsupported(c, k, path, "");
    }
    if (has(s, "$ref"))
        json_object_foreach(s, k, v)
        {
            if (IN(k, supported) && strcmp(k, "$ref") && strcmp(k, "$defs") && strcmp(k, "definitions"))
                return unsupported(c, k, path, " next to '$ref'");
        }
    r = body(c, s, path, depth);
    if ((v = json_object_get(s, "nullable")) && json_is_true(v)) {
        uint32_t n = gb_rule_new(c->b);
        seq_init(&q, c->b);
        seq_ref(&q, r);
        gb_alt(c->b, n, &q);
        seq_str(&q, "null");
        gb_alt(c->b, n, &q);
        seq_fini(&q);
        r = n;
    }
    return c->b->err ? 0 : r;
}

/* root ::= prefix ws value ws suffix, compiled from the schema `s` (NULL: "json", any object;
 * any_value: any JSON value); prefix and suffix are literal bytes (NULL: none). */
static int build(grammar **out, json_t *s, int any_value, const char *prefix, const char *suffix)
{
    gr_builder b;
    sc c = {&b, s, NULL, 0, 0, NONE, NONE, NONE, NONE, NONE, NONE, NONE, NONE};
    uint32_t root, v;
    gr_seq q;
    int rc;

    gb_init(&b);
    root = gb_rule_new(&b);
    v = s ? compile(&c, s, "", 0) : any_value ? value(&c) : object_any(&c);
    seq_init(&q, &b);
    if (prefix && *prefix)
        seq_str(&q, prefix);
    seq_ref(&q, ws(&c)), seq_ref(&q, v), seq_ref(&q, ws(&c));
    if (suffix && *suffix)
        seq_str(&q, suffix);
    gb_alt(&b, root, &q);
    seq_fini(&q);
    rc = gb_finish(out, &b);
    gb_fini(&b);
    for (size_t i = 0; i < c.n_refs; i++)
        free(c.refs[i].ref);
    free(c.refs);
    return rc;
}

int grammar_json_any(grammar **out)
{
    return build(out, NULL, 1, NULL, NULL);
}

int grammar_from_format_framed(grammar **out, const char *format, size_t len, const char *prefix, const char *suffix,
                               const char *what)
{
    json_error_t je;
    json_t *s;
    int rc;

    *out = NULL;
    if (len == 4 && !memcmp(format, "json", 4))
        return build(out, NULL, 0, prefix, suffix);
    if (len > GRAMMAR_MAX_SCHEMA_BYTES)
        return ms_err(MS_ETOOBIG, "%s: a schema of %zu bytes is more than %u", what, len, GRAMMAR_MAX_SCHEMA_BYTES);
    if (!(s = json_loadb(format, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je)))
        return ms_err(MS_EINVALID, "%s: expected \"json\" or a JSON schema; line %d column %d: %s", what, je.line,
                      je.column, je.text);
    rc = build(out, s, 0, prefix, suffix);
    json_decref(s);
    return rc < 0 ? ms_err_ctx("%s", what) : 0;
}

int grammar_from_format(grammar **out, const char *format, size_t len, const char *what)
{
    return grammar_from_format_framed(out, format, len, NULL, NULL, what);
}
