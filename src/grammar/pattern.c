/* pattern.c: the regex subset of JSON Schema's "pattern" (grammar.h lists it) to a grammar rule
 * for a JSON string whose content matches. The regex speaks of the string's characters; the rule
 * speaks of its JSON text, so a '"' in the pattern becomes the two bytes \" and '.' is any JSON
 * string character (escapes included). Classes are ASCII and never match '"', '\' or controls. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_int.h"

#define MAX_REGEX_DEPTH  32
#define MAX_REGEX_REPEAT 1000

typedef struct rx {
    gr_builder *b;
    const char *p, *end, *pat, *path;
    uint32_t chr;
    int depth;
} rx;

static gr_elem refuse(rx *x, const char *why)
{
    gb_fail(x->b, ms_err(MS_EUNSUPPORTED, "schema keyword 'pattern' at '%s': '%s' at offset %ld: %s is not supported",
                         x->path, x->pat, (long)(x->p - x->pat), why));
    return (gr_elem){GR_REF, 0};
}

static uint32_t parse_alt(rx *x);

/* What a class escape (\d \w \s and their negations) stands for; 0 when `c` is not one. */
static int class_escape(char c, gr_set *s)
{
    gr_set t = {{0}};
    int neg = isupper((unsigned char)c);

    switch (tolower((unsigned char)c)) {
    case 'd':
        gr_set_range(&t, '0', '9');
        break;
    case 'w':
        gr_set_range(&t, '0', '9'), gr_set_range(&t, 'a', 'z'), gr_set_range(&t, 'A', 'Z'), gr_set_range(&t, '_', '_');
        break;
    case 's':
        gr_set_range(&t, ' ', ' ');
        break;
    default:
        return 0;
    }
    for (unsigned b = 0; b < 256; b++)
        if (gr_set_has(&t, b) != neg && (!neg || (b >= 0x20 && b < 0x7f)))
            gr_set_range(s, b, b);
    return 1;
}

static void json_safe(gr_set *s)
{
    for (unsigned b = 0; b < 0x20; b++)
        gr_set_clear(s, b);
    gr_set_clear(s, '"');
    gr_set_clear(s, '\\');
}

static gr_elem set_elem(rx *x, gr_set *s)
{
    int any = 0;

    json_safe(s);
    for (int k = 0; k < 8; k++)
        any |= s->bits[k] != 0;
    if (!any)
        return refuse(x, "a class that matches no JSON-safe character");
    return (gr_elem){GR_SET, gb_set_new(x->b, s)};
}

static gr_elem parse_class(rx *x)
{
    gr_set s = {{0}};
    int neg = 0;

    x->p++; /* '[' */
    if (x->p < x->end && *x->p == '^')
        neg = 1, x->p++;
    while (x->p < x->end && *x->p != ']') {
        unsigned lo = (unsigned char)*x->p, hi;
        if (lo >= 0x80)
            return refuse(x, "a non-ASCII character in a class");
        if (lo == '\\') {
            if (++x->p >= x->end)
                break;
            if (class_escape(*x->p, &s)) {
                x->p++;
                continue;
            }
            if (!ispunct((unsigned char)*x->p))
                return refuse(x, "this escape in a class");
            lo = (unsigned char)*x->p;
        }
        x->p++;
        hi = lo;
        if (x->end - x->p >= 2 && *x->p == '-' && x->p[1] != ']') {
            hi = (unsigned char)x->p[1];
            if (hi == '\\' || hi >= 0x80 || hi < lo)
                return refuse(x, "this range in a class");
            x->p += 2;
        }
        gr_set_range(&s, lo, hi);
    }
    if (x->p >= x->end)
        return refuse(x, "an unterminated class");
    x->p++; /* ']' */
    if (neg) {
        gr_set t = {{0}};
        for (unsigned b = 0x20; b < 0x7f; b++)
            if (!gr_set_has(&s, b))
                gr_set_range(&t, b, b);
        s = t;
    }
    return set_elem(x, &s);
}

static gr_elem parse_atom(rx *x)
{
    unsigned c = (unsigned char)*x->p;
    gr_set s = {{0}};

    if (c == '(') {
        uint32_t r;
        x->p++;
        if (x->end - x->p >= 2 && x->p[0] == '?' && x->p[1] == ':')
            x->p += 2;
        else if (x->p < x->end && *x->p == '?')
            return refuse(x, "a group of this kind");
        if (++x->depth > MAX_REGEX_DEPTH)
            return refuse(x, "nesting this deep");
        r = parse_alt(x);
        x->depth--;
        if (x->p >= x->end || *x->p != ')')
            return refuse(x, "an unbalanced group");
        x->p++;
        return (gr_elem){GR_REF, r};
    }
    if (c == '[')
        return parse_class(x);
    if (c == '.')
        return x->p++, (gr_elem){GR_REF, x->chr};
    if (c == '*' || c == '+' || c == '?' || c == '{')
        return refuse(x, "a quantifier with nothing to repeat");
    if (c == '^' || c == '$')
        return refuse(x, "an anchor inside the pattern");
    if (c == '\\') {
        if (++x->p >= x->end)
            return refuse(x, "a trailing backslash");
        c = (unsigned char)*x->p;
        if (class_escape((char)c, &s))
            return x->p++, set_elem(x, &s);
        if (c == 'n' || c == 't')
            return x->p++, (gr_elem){GR_REF, gb_rule_lit(x->b, c == 'n' ? "\\n" : "\\t")};
        if (!ispunct(c))
            return refuse(x, "this escape");
    }
    if (c < 0x20)
        return refuse(x, "a control character");
    if (c == '"' || c == '\\') /* in JSON text these are written escaped */
        return x->p++, (gr_elem){GR_REF, gb_rule_lit(x->b, c == '"' ? "\\\"" : "\\\\")};
    if (c >= 0x80) { /* one whole UTF-8 character, as its bytes */
        const char *q = x->p + 1;
        char lit[5] = {0};
        while (q < x->end && ((unsigned char)*q & 0xc0) == 0x80 && q - x->p < 4)
            q++;
        memcpy(lit, x->p, (size_t)(q - x->p));
        x->p = q;
        return (gr_elem){GR_REF, gb_rule_lit(x->b, lit)};
    }
    x->p++;
    gr_set_range(&s, c, c);
    return (gr_elem){GR_SET, gb_set_new(x->b, &s)};
}

static long number(rx *x)
{
    long n = 0;

    if (x->p >= x->end || !isdigit((unsigned char)*x->p))
        return -1;
    while (x->p < x->end && isdigit((unsigned char)*x->p) && n <= MAX_REGEX_REPEAT)
        n = n * 10 + (*x->p++ - '0');
    return n;
}

/* A quantifier after an atom: 1 and its bounds, 0 when none, -1 refused. */
static int quantifier(rx *x, long *min, long *max)
{
    char c = x->p < x->end ? *x->p : 0;

    if (c == '?' || c == '*' || c == '+') {
        *min = c == '+', *max = c == '?' ? 1 : -1;
        x->p++;
    } else if (c == '{') {
        x->p++;
        if ((*min = number(x)) < 0)
            return refuse(x, "a '{' that is not a quantifier"), -1;
        *max = *min;
        if (x->p < x->end && *x->p == ',') {
            x->p++;
            *max = x->p < x->end && *x->p == '}' ? -1 : number(x);
            if (*max == -1 && *x->p != '}')
                return refuse(x, "this quantifier"), -1;
        }
        if (x->p >= x->end || *x->p != '}' || (*max >= 0 && *max < *min))
            return refuse(x, "this quantifier"), -1;
        if (*min > MAX_REGEX_REPEAT || *max > MAX_REGEX_REPEAT)
            return refuse(x, "a repeat count over 1000"), -1;
        x->p++;
    } else {
        return 0;
    }
    if (x->p < x->end && *x->p == '?') /* lazy: the same language */
        x->p++;
    return 1;
}

static uint32_t parse_alt(rx *x)
{
    uint32_t r = gb_rule_new(x->b);
    gr_seq s;

    seq_init(&s, x->b);
    for (;;) {
        while (x->p < x->end && *x->p != '|' && *x->p != ')' && !x->b->err) {
            long min, max;
            gr_elem e = parse_atom(x);
            int q = x->b->err ? 0 : quantifier(x, &min, &max);
            if (q > 0)
                e = (gr_elem){GR_REF, gb_rep(x->b, e, min, max)};
            seq_elem(&s, e);
        }
        gb_alt(x->b, r, &s);
        if (x->b->err || x->p >= x->end || *x->p != '|')
            break;
        x->p++;
    }
    seq_fini(&s);
    return r;
}

uint32_t grammar__pattern(gr_builder *b, uint32_t chr_rule, const char *pattern, const char *path)
{
    size_t len = strlen(pattern), bs = 0;
    rx x = {b, pattern + 1, pattern + len - 1, pattern, path, chr_rule, 0};
    uint32_t r, body;
    gr_seq s;

    while (bs + 2 < len && pattern[len - 2 - bs] == '\\')
        bs++;
    if (len > 1000 || len < 2 || pattern[0] != '^' || pattern[len - 1] != '$' || bs % 2)
        return gb_fail(b, ms_err(MS_EUNSUPPORTED,
                                 "schema keyword 'pattern' at '%s': '%s' is not supported (the pattern must be "
                                 "anchored, ^...$, and at most 1000 bytes)",
                                 path, pattern)),
               0;
    body = parse_alt(&x);
    if (!b->err && x.p < x.end)
        refuse(&x, "an unbalanced ')'");
    r = gb_rule_new(b);
    seq_init(&s, b);
    seq_byte(&s, '"'), seq_ref(&s, body), seq_byte(&s, '"');
    gb_alt(b, r, &s);
    seq_fini(&s);
    return r;
}
