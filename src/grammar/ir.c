/* ir.c: building a grammar (rules of alternatives of byte sets and references) and freeing it. */
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_int.h"

void gb_init(gr_builder *b)
{
    memset(b, 0, sizeof *b);
}

void gb_fini(gr_builder *b)
{
    for (size_t i = 0; i < b->n_rules; i++)
        free(b->rules[i].alts);
    MS_FREE_ALL(b->rules, b->el, b->sets);
    memset(b, 0, sizeof *b);
}

int gb_fail(gr_builder *b, int code)
{
    if (!b->err)
        b->err = code;
    return b->err;
}

static int oom(gr_builder *b)
{
    if (!b->err)
        b->err = ms_err(MS_ENOMEM, "out of memory");
    return b->err;
}

uint32_t gb_rule_new(gr_builder *b)
{
    if (b->err)
        return 0;
    if (b->n_rules >= GRAMMAR_MAX_RULES) {
        b->err = ms_err(MS_ETOOBIG, "the grammar needs more than %u rules (GRAMMAR_MAX_RULES)", GRAMMAR_MAX_RULES);
        return 0;
    }
    if (ms_grow(&b->rules, &b->cap_rules, b->n_rules + 1, sizeof *b->rules) < 0) {
        oom(b);
        return 0;
    }
    memset(&b->rules[b->n_rules], 0, sizeof *b->rules);
    return (uint32_t)b->n_rules++;
}

uint32_t gb_set_new(gr_builder *b, const gr_set *s)
{
    if (b->err)
        return 0;
    /* the last few sets are often the same class again (digits, string characters) */
    for (size_t i = b->n_sets, k = 0; i > 0 && k < 8; i--, k++)
        if (!memcmp(&b->sets[i - 1], s, sizeof *s))
            return (uint32_t)(i - 1);
    if (ms_grow(&b->sets, &b->cap_sets, b->n_sets + 1, sizeof *b->sets) < 0) {
        oom(b);
        return 0;
    }
    b->sets[b->n_sets] = *s;
    return (uint32_t)b->n_sets++;
}

void gb_alt(gr_builder *b, uint32_t rule, gr_seq *s)
{
    gb_rule *r;

    if (b->err)
        goto out;
    if (b->n_el + s->n + 1 > GRAMMAR_MAX_ELEMS) {
        b->err = ms_err(MS_ETOOBIG, "the grammar needs more than %u elements (GRAMMAR_MAX_ELEMS)", GRAMMAR_MAX_ELEMS);
        goto out;
    }
    r = &b->rules[rule];
    if (ms_grow(&b->el, &b->cap_el, b->n_el + s->n + 1, sizeof *b->el) < 0 ||
        ms_grow(&r->alts, &r->cap, r->n + 1, sizeof *r->alts) < 0) {
        oom(b);
        goto out;
    }
    r->alts[r->n++] = (uint32_t)b->n_el;
    if (s->n)
        memcpy(b->el + b->n_el, s->e, s->n * sizeof *s->e);
    b->n_el += s->n;
    b->el[b->n_el++] = (gr_elem){GR_END, 0};
out:
    s->n = 0;
}

int gb_finish(grammar **out, gr_builder *b)
{
    grammar *g = NULL;
    size_t n_alts = 0, k = 0;

    *out = NULL;
    if (b->err)
        return b->err;
    for (size_t r = 0; r < b->n_rules; r++) {
        if (b->rules[r].n == 0) /* a programmer error in the compiler; refuse rather than crash */
            return ms_err(MS_ERROR, "grammar: rule %zu has no alternative", r);
        n_alts += b->rules[r].n;
    }
    if (!(g = calloc(1, sizeof *g)) || !(g->alt_start = malloc((n_alts ? n_alts : 1) * sizeof *g->alt_start)) ||
        !(g->rule_first = malloc((b->n_rules + 1) * sizeof *g->rule_first))) {
        grammar_free(g);
        return ms_err(MS_ENOMEM, "out of memory");
    }
    for (size_t r = 0; r < b->n_rules; r++) {
        g->rule_first[r] = (uint32_t)k;
        memcpy(g->alt_start + k, b->rules[r].alts, b->rules[r].n * sizeof *g->alt_start);
        k += b->rules[r].n;
    }
    g->rule_first[b->n_rules] = (uint32_t)k;
    g->n_rules = b->n_rules;
    g->el = b->el, g->n_el = b->n_el;
    g->sets = b->sets, g->n_sets = b->n_sets;
    b->el = NULL, b->sets = NULL;
    gb_fini(b);
    *out = g;
    return 0;
}

void grammar_free(grammar *g)
{
    if (!g)
        return;
    MS_FREE_ALL(g->el, g->sets, g->alt_start, g->rule_first, g);
}

size_t grammar_n_rules(const grammar *g)
{
    return g->n_rules;
}

void seq_init(gr_seq *s, gr_builder *b)
{
    memset(s, 0, sizeof *s);
    s->b = b;
}

void seq_fini(gr_seq *s)
{
    free(s->e);
    s->e = NULL;
    s->n = s->cap = 0;
}

void seq_elem(gr_seq *s, gr_elem e)
{
    if (s->b->err)
        return;
    if (s->n >= GRAMMAR_MAX_ELEMS) {
        s->b->err =
            ms_err(MS_ETOOBIG, "the grammar needs more than %u elements (GRAMMAR_MAX_ELEMS)", GRAMMAR_MAX_ELEMS);
        return;
    }
    if (ms_grow(&s->e, &s->cap, s->n + 1, sizeof *s->e) < 0) {
        oom(s->b);
        return;
    }
    s->e[s->n++] = e;
}

void gr_set_range(gr_set *s, unsigned lo, unsigned hi)
{
    for (unsigned c = lo; c <= hi && c < 256; c++)
        s->bits[c >> 5] |= 1u << (c & 31);
}

void gr_set_clear(gr_set *s, unsigned c)
{
    s->bits[c >> 5] &= ~(1u << (c & 31));
}

void seq_set(gr_seq *s, const gr_set *set)
{
    uint32_t id = gb_set_new(s->b, set);

    seq_elem(s, (gr_elem){GR_SET, id});
}

void seq_range(gr_seq *s, unsigned lo, unsigned hi)
{
    gr_set set = {{0}};

    gr_set_range(&set, lo, hi);
    seq_set(s, &set);
}

void seq_byte(gr_seq *s, unsigned c)
{
    seq_range(s, c, c);
}

void seq_lit(gr_seq *s, const char *p, size_t len)
{
    for (size_t i = 0; i < len; i++)
        seq_byte(s, (unsigned char)p[i]);
}

void seq_str(gr_seq *s, const char *p)
{
    seq_lit(s, p, strlen(p));
}

void seq_ref(gr_seq *s, uint32_t rule)
{
    seq_elem(s, (gr_elem){GR_REF, rule});
}

uint32_t gb_rule_lit(gr_builder *b, const char *p)
{
    uint32_t r = gb_rule_new(b);
    gr_seq s;

    seq_init(&s, b);
    seq_str(&s, p);
    gb_alt(b, r, &s);
    seq_fini(&s);
    return r;
}

/* item{min,max} = item x min, then a chain of optional items: opt_k ::= item opt_{k-1} | "".
 * Unbounded: star ::= item star | "" (right recursion: the matcher pops it without growing). */
uint32_t gb_rep(gr_builder *b, gr_elem item, long min, long max)
{
    uint32_t r = gb_rule_new(b), tail = 0;
    int has_tail = 0;
    gr_seq s;

    seq_init(&s, b);
    if (max < 0) {
        tail = gb_rule_new(b), has_tail = 1;
        seq_elem(&s, item);
        seq_ref(&s, tail);
        gb_alt(b, tail, &s);
        gb_alt(b, tail, &s);
    } else {
        for (long k = 1; k <= max - min && !b->err; k++) {
            uint32_t o = gb_rule_new(b);
            seq_elem(&s, item);
            if (has_tail)
                seq_ref(&s, tail);
            gb_alt(b, o, &s);
            gb_alt(b, o, &s);
            tail = o, has_tail = 1;
        }
    }
    for (long k = 0; k < min && !b->err; k++)
        seq_elem(&s, item);
    if (has_tail)
        seq_ref(&s, tail);
    gb_alt(b, r, &s);
    seq_fini(&s);
    return r;
}
