/* grammar.h: constrained decoding; the whole surface of src/grammar.
 *
 * A grammar says which byte strings are a valid answer. At each generation step the matcher
 * masks the tokens whose bytes cannot continue a valid answer, so what the model writes is valid
 * by construction whatever its weights.
 *
 *   grammar          a compiled grammar (immutable, shareable): rules, each a list of
 *                    alternatives, each a sequence of byte sets and rule references. Built from a
 *                    JSON Schema, or "json" for any JSON object. Work is per byte, so a UTF-8
 *                    character may span tokens.
 *   grammar_vocab    what the matcher needs of a tokenizer, computed once: every token's bytes
 *                    in a prefix trie (shared prefixes are matched once) and the end tokens.
 *   grammar_matcher  one answer in progress: the set of parse stacks of a nondeterministic
 *                    pushdown automaton over bytes. A mask walks the vocab trie depth first,
 *                    advancing the stacks byte by byte and pruning a subtree as soon as none
 *                    survives. Each set of stacks is interned as a state of a lazily built
 *                    DFA that keeps its transitions and its mask, so a state seen before (the
 *                    inside of a string, again and again) costs one pass over the logits.
 *
 * Invariants:
 *   1. Each stack's top is a byte set; a stack that has matched all of the root is "complete".
 *   2. The grammars this module compiles have no left recursion and every repetition the model
 *      could extend without end (whitespace, digits) is bounded, so a model cannot loop there.
 *   3. End-of-generation tokens are allowed exactly when the answer so far is complete; tokens
 *      with no bytes (control tokens) never are.
 *
 * JSON Schema (grammar_from_schema): type (object, array, string, number, integer, boolean,
 * null, or a list of them), properties, required, additionalProperties (false, true or a schema;
 * absent means false when properties are given, else any), items, prefixItems, minItems,
 * maxItems, enum, const, anyOf, oneOf (as anyOf: exclusivity is not enforced), $defs /
 * definitions with local $ref ("#", "#/$defs/x", any local JSON pointer; recursion allowed),
 * allOf of exactly one schema (as pydantic writes a described $ref), nullable (OpenAPI), minLength, maxLength, minimum / maximum / exclusiveMinimum /
 * exclusiveMaximum on integers, format (date, time, date-time, uuid), pattern (the regex subset
 * below). Annotations (title, description, $schema, $id, $comment, default, examples, readOnly,
 * writeOnly, deprecated) are accepted and ignored; any other keyword is refused:
 *   MS_EUNSUPPORTED "schema keyword 'allOf' at '/properties/a' is not supported".
 * Properties come out in the order the schema lists them. With additionalProperties true or a
 * schema, the extra keys are any strings: one may repeat a declared name (not excluded). JSON whitespace between tokens is
 * bounded: none, one space, or a newline and at most GRAMMAR_MAX_INDENT spaces or tabs.
 * Numbers have at most 16 digits before and after the point and 3 in the exponent.
 *
 * pattern: anchored (starts with ^ and ends with $), of literals, '.', escapes \d \w \s \D \W \S
 * and escaped punctuation, classes [a-z0-9_] and [^...] (ASCII), groups ( ... ) and (?: ... ) with
 * |, quantifiers ? * + {n} {n,} {n,m}. Anything else is refused naming the pattern. */
#ifndef MSTORE_GRAMMAR_H
#define MSTORE_GRAMMAR_H

#include <stddef.h>
#include <stdint.h>

#include "tokenizer/tokenizer.h"

#define GRAMMAR_MAX_SCHEMA_BYTES (1u << 20) /* a schema's text */
#define GRAMMAR_MAX_DEPTH        64 /* nesting of schemas inside a schema */
#define GRAMMAR_MAX_RULES        (1u << 16) /* rules of one compiled grammar */
#define GRAMMAR_MAX_ELEMS        (1u << 20) /* elements of one compiled grammar */
#define GRAMMAR_MAX_INDENT       20 /* spaces or tabs after a newline between JSON tokens */

typedef struct grammar grammar;

/* Compile `len` bytes of `format`: "json" (any JSON object, as ollama's format "json") or the
 * text of a JSON Schema.
 * `what` names the format in messages ("--format"). Returns 0; MS_EINVALID (not JSON, a keyword
 * of the wrong type, a $ref that resolves to nothing, a schema that accepts nothing), naming the
 * schema path; MS_EUNSUPPORTED (a keyword or format this compiler does not support, naming it);
 * MS_ETOOBIG (past GRAMMAR_MAX_*); MS_ENOMEM. */
int grammar_from_format(grammar **out, const char *format, size_t len, const char *what);
/* The same between two literals: prefix, then the answer (with the JSON whitespace allowed
 * around it), then suffix (NULL or "": none). A forced tool call is one: "<tool_call>\n", the
 * call's object, "\n</tool_call>". */
int grammar_from_format_framed(grammar **out, const char *format, size_t len, const char *prefix, const char *suffix,
                               const char *what);
/* Any JSON value, with the bounds above. */
int grammar_json_any(grammar **out);
void grammar_free(grammar *g); /* NULL is fine */
size_t grammar_n_rules(const grammar *g);

/* Whether the whole of s[0..len) is an answer the grammar accepts (tests, checks). */
int grammar_accepts(const grammar *g, const char *s, size_t len);

/* The tokens of a tokenizer as bytes (tokenizer_decode_piece without flags) in a prefix trie.
 * The tokenizer is only read during the call. MS_ENOMEM. */
typedef struct grammar_vocab grammar_vocab;
int grammar_vocab_new(grammar_vocab **out, const tokenizer *t);
void grammar_vocab_free(grammar_vocab *v); /* NULL is fine */

/* One answer in progress over `g` (borrowed: it must outlive the matcher). MS_ENOMEM. */
typedef struct grammar_matcher grammar_matcher;
int grammar_matcher_new(grammar_matcher **out, const grammar *g);
void grammar_matcher_free(grammar_matcher *m); /* NULL is fine */
/* Back to the empty answer. */
void grammar_matcher_reset(grammar_matcher *m);

/* Set logits[id] to -INFINITY for every token of `v` that cannot continue the answer (the
 * logits have tokenizer_n_vocab entries). *n_allowed_out: the tokens left. Returns 0, or
 * MS_EINVALID "grammar: no token of the vocabulary can continue the answer" (then nothing is
 * allowed: the caller ends the answer), MS_ENOMEM. */
int grammar_matcher_mask(grammar_matcher *m, const grammar_vocab *v, float *logits, size_t *n_allowed_out);
/* Advance over the bytes of a chosen token. MS_EINVALID when they do not continue the answer
 * (the matcher is then unchanged), MS_ENOMEM. */
int grammar_matcher_accept(grammar_matcher *m, const char *bytes, size_t len);
/* 1 when the answer so far is complete (an end token may follow). */
int grammar_matcher_complete(const grammar_matcher *m);
/* 1 when no byte can follow: the answer is complete and must end. */
int grammar_matcher_finished(const grammar_matcher *m);

#endif
