/* jinja_int.h: the Jinja interpreter's parts shared by jinja_*.c (tests may use them).
 *
 * jinja_lex.c cuts the template into tokens, applying the whitespace rules Hugging Face renders
 * with (trim_blocks, lstrip_blocks, the '-' markers); jinja_parse.c builds the tree; jinja_eval.c
 * runs it over values (jinja_value.c) made from the JSON context; jinja_lib.c holds the filters,
 * tests and methods. Every allocation of a parse or a render comes from one arena, bounded, freed at once. */
#ifndef MSTORE_CHAT_JINJA_INT_H
#define MSTORE_CHAT_JINJA_INT_H

#include <stddef.h>
#include <stdint.h>

#include "chat/chat_int.h"
#include "util/util.h"

#define JINJA_MAX_ARENA (256u << 20) /* bytes a parse or a render may allocate */
#define JINJA_MAX_STEPS 5000000u /* evaluation steps of one render */
#define JINJA_MAX_DEPTH 200 /* nesting of expressions, statements and macro calls */

/* ---- arena */
typedef struct jarena_chunk jarena_chunk;
typedef struct jarena {
    jarena_chunk *head;
    size_t used, limit;
} jarena;
void *jinja__alloc(jarena *a, size_t n); /* zeroed; NULL past the limit or on OOM */
void jinja__arena_free(jarena *a);

/* ---- values */
typedef enum { JV_UNDEF, JV_NONE, JV_BOOL, JV_INT, JV_FLOAT, JV_STR, JV_LIST, JV_DICT, JV_MACRO } jv_type;
typedef struct jarr jarr;
struct jnode;
typedef struct jv {
    jv_type t;
    union {
        int64_t i; /* JV_BOOL, JV_INT */
        double f;
        struct {
            const char *p;
            size_t n;
        } s;
        jarr *a; /* JV_LIST, JV_DICT */
        const struct jnode *m; /* JV_MACRO: the macro or call block */
    } u;
} jv;
/* a list (k NULL) or a dict: keys in insertion order, looked up by scanning */
struct jarr {
    jv *k, *v;
    size_t n, cap;
    int tuple; /* a list Python would hold as a tuple (items' pairs, (a, b)): printed "(a, b)" */
    struct jloop *loop; /* a for loop's `loop`: its methods' state (jinja_eval.c); NULL otherwise */
};
/* what loop.cycle(), loop.changed() and loop(...) need beyond the loop dict's plain values */
typedef struct jloop {
    const struct jnode *node; /* the N_FOR; loop(...) reruns it when it is recursive */
    struct jframe *outer; /* the scope the for statement ran in: a recursive call's parent scope */
    size_t index0;
    int depth; /* 1 at the top, +1 per recursive call */
    int changed_set;
    jv changed_last; /* loop.changed()'s last arguments, a list */
} jloop;

/* ---- tokens */
typedef enum { TK_EOF, TK_TEXT, TK_VAR, TK_BLOCK, TK_END, TK_NAME, TK_STR, TK_INT, TK_FLOAT, TK_OP } jtok_type;
typedef struct jtok {
    jtok_type t;
    int line;
    const char *p; /* TK_TEXT, TK_NAME, TK_OP: into the template; TK_STR: decoded, in the arena */
    size_t n;
    int64_t i;
    double f;
} jtok;
/* Tokens of text[0..len) into *out (arena-allocated). -1 with the error set. */
int jinja__lex(jtok **out, size_t *n_out, jarena *a, const char *text, size_t len);

/* ---- tree */
typedef enum {
    N_TEXT, N_OUT, N_IF, N_FOR, N_SET, N_MACRO, N_CALLBLOCK, N_FILTERBLOCK, N_BREAK, N_CONTINUE,
    N_LIT, N_NAME, N_ATTR, N_ITEM, N_SLICE, N_CALL, N_FILTER, N_TEST, N_BIN, N_NOT, N_NEG, N_COND, N_LIST,
    N_DICT, N_AND, N_OR,
} jnode_kind;
typedef struct jnlist {
    struct jnode **v;
    size_t n, cap;
} jnlist;
typedef struct jnode {
    jnode_kind kind;
    int line;
    int op; /* N_BIN: an operator code (jinja_parse.c); N_TEST: 1 when negated; N_LIT: 1 for a
             * filter block's placeholder; N_LIST: 1 for a tuple; N_FOR: 1 for a recursive loop */
    struct jnode *a, *b, *c, *d;
    const char *s, *s2; /* names (NUL-terminated, in the arena) */
    jv v; /* N_LIT */
    jnlist args; /* call and filter arguments, list items, dict keys, macro parameters */
    const char **kw; /* per args entry: its keyword name or NULL (NULL array: none) */
    jnlist body, orelse; /* statements; N_DICT: the values */
} jnode;
enum { OP_ADD = 1, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW, OP_CAT, OP_EQ, OP_NE, OP_LT, OP_LE,
       OP_GT, OP_GE, OP_IN, OP_NOTIN };

typedef struct jinja_tmpl {
    jarena arena;
    jnlist body;
} jinja_tmpl;
int jinja__parse(jinja_tmpl *t, const char *text, size_t len); /* -1 with the error set */
int jinja__list_push(jarena *a, jnlist *l, jnode *n);

/* ---- render state */
typedef struct jframe jframe;
typedef struct jctx {
    jarena arena;
    chat_buf out;
    size_t steps;
    int depth;
    int line; /* of the node being run, for errors */
    int brk; /* 1: break, 2: continue pending */
    int failed; /* the error is set: the first one stands */
    jframe *scope, *globals;
    const jnode *caller; /* the call block whose body caller() runs */
    jframe *caller_scope;
    jv block_text; /* the filter block being filtered: its body's text */
} jctx;
/* Set "chat template line N: ..." (MS_EINVALID) once; returns -1. */
int jinja__fail(jctx *c, const char *fmt, ...) MS_PRINTF(2, 3);
int jinja__eval(jctx *c, const jnode *n, jv *out);
int jinja__oom(jctx *c);
/* *out: -1, 0 or 1 as Python orders a and b (numbers, strings, lists and tuples
 * lexicographically); -1 with the error set for values Python does not order */
int jinja__compare(jctx *c, const jv *a, const jv *b, int *out);

/* values (jinja_value.c) */
jv jinja__str(const char *p, size_t n);
int jinja__strdup(jctx *c, jv *out, const char *p, size_t n);
/* b's text as a string value; frees b's buffer */
int jinja__buf_done(jctx *c, chat_buf *b, jv *out);
int jinja__truthy(const jv *v);
int jinja__equal(const jv *a, const jv *b);
jarr *jinja__arr_new(jctx *c, int dict);
int jinja__arr_push(jctx *c, jarr *a, const jv *k, const jv *v);
jv *jinja__dict_get(const jarr *d, const char *key, size_t n);
int jinja__dict_set(jctx *c, jarr *d, const char *key, size_t n, const jv *v);
/* str(v) as Python / Jinja print it, appended to b */
void jinja__print(chat_buf *b, const jv *v, int repr);
int jinja__tostr(jctx *c, const jv *v, jv *out);
int jinja__tojson(jctx *c, chat_buf *b, const jv *v, int indent, int depth);
/* filters, tests, methods and global functions (jinja_lib.c); args evaluated, kw names parallel (NULL: none) */
int jinja__filter(jctx *c, const char *name, jv *self, jv *args, const char **kw, size_t n, jv *out);
int jinja__test(jctx *c, const char *name, const jv *self, jv *args, size_t n, int *out);
int jinja__method(jctx *c, const jv *self, const char *name, jv *args, const char **kw, size_t n, jv *out);
int jinja__is_global(const char *name); /* 1 for the names jinja__global knows */
int jinja__global(jctx *c, const char *name, jv *args, const char **kw, size_t n, jv *out, int *found);
/* the context: a JSON object's text; its members are the template's variables */
int jinja__from_json_text(jctx *c, const char *json, jv *out);
int jinja__iterate(jctx *c, const jv *v, jv *out_list); /* a list of v's items (dict: keys, str: chars) */

#endif
