/* grammar_int.h: the grammar IR and its builder, shared by the files of src/grammar only.
 *
 * A grammar is rules; a rule is alternatives; an alternative is a run of elements in `el`
 * ending with GR_END. An element is a byte set (arg: index into `sets`) or a reference to a
 * rule (arg: the rule). Rule 0 is the root. */
#ifndef MSTORE_GRAMMAR_INT_H
#define MSTORE_GRAMMAR_INT_H

#include <stddef.h>
#include <stdint.h>

#include "grammar/grammar.h"

enum { GR_END = 0, GR_SET = 1, GR_REF = 2 };

typedef struct gr_elem {
    uint32_t type; /* GR_END, GR_SET, GR_REF */
    uint32_t arg;
} gr_elem;

typedef struct gr_set {
    uint32_t bits[8]; /* byte b is in the set when bits[b >> 5] >> (b & 31) & 1 */
} gr_set;

struct grammar {
    gr_elem *el;
    size_t n_el;
    gr_set *sets;
    size_t n_sets;
    uint32_t *alt_start; /* element index of each alternative, rule by rule */
    uint32_t *rule_first; /* rule r's alternatives: alt_start[rule_first[r] .. rule_first[r + 1]) */
    size_t n_rules;
};

static inline int gr_set_has(const gr_set *s, unsigned c)
{
    return (int)(s->bits[c >> 5] >> (c & 31) & 1);
}

/* ---------------------------------------------------------------- builder
 * Errors are sticky: after the first one every call does nothing, and gb_finish returns it.
 * That keeps the schema compiler's code free of a check after every element. */
typedef struct gb_rule {
    uint32_t *alts; /* element index of each alternative */
    size_t n, cap;
} gb_rule;

typedef struct gr_builder {
    gr_elem *el;
    size_t n_el, cap_el;
    gr_set *sets;
    size_t n_sets, cap_sets;
    gb_rule *rules;
    size_t n_rules, cap_rules;
    int err;
} gr_builder;

/* An alternative being written, committed with gb_alt. */
typedef struct gr_seq {
    gr_builder *b;
    gr_elem *e;
    size_t n, cap;
} gr_seq;

void gb_init(gr_builder *b);
void gb_fini(gr_builder *b); /* after gb_finish, or to drop the work */
/* The grammar whose root is rule 0; the builder is emptied. Returns 0 or the first error. */
int gb_finish(grammar **out, gr_builder *b);
int gb_fail(gr_builder *b, int code); /* record an error already set with ms_err */

uint32_t gb_rule_new(gr_builder *b);
uint32_t gb_set_new(gr_builder *b, const gr_set *s);
/* Commit `s` as one more alternative of `rule`; `s` is emptied for reuse. */
void gb_alt(gr_builder *b, uint32_t rule, gr_seq *s);

void seq_init(gr_seq *s, gr_builder *b);
void seq_fini(gr_seq *s);
void seq_set(gr_seq *s, const gr_set *set);
void seq_range(gr_seq *s, unsigned lo, unsigned hi); /* one byte in [lo, hi] */
void seq_byte(gr_seq *s, unsigned c);
void seq_lit(gr_seq *s, const char *p, size_t len);
void seq_str(gr_seq *s, const char *p); /* NUL-terminated literal */
void seq_ref(gr_seq *s, uint32_t rule);
void seq_elem(gr_seq *s, gr_elem e);

/* A rule of one alternative: a literal. */
uint32_t gb_rule_lit(gr_builder *b, const char *p);
/* A rule for `item` repeated min..max times (max < 0: no upper bound). */
uint32_t gb_rep(gr_builder *b, gr_elem item, long min, long max);

/* pattern.c: the rule for a JSON string whose content matches `pattern` (grammar.h's subset);
 * chr_rule is one JSON string character ('.'). Errors name `path`. */
uint32_t grammar__pattern(gr_builder *b, uint32_t chr_rule, const char *pattern, const char *path);

void gr_set_range(gr_set *s, unsigned lo, unsigned hi);
void gr_set_clear(gr_set *s, unsigned c);

#endif
