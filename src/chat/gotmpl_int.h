/* gotmpl_int.h: the parsed form of an ollama Go template, shared by gotmpl.c (parser) and
 * gotmpl_exec.c (execution) only. */
#ifndef MSTORE_GOTMPL_INT_H
#define MSTORE_GOTMPL_INT_H

#include <stddef.h>

#include "chat/chat.h"

#define MAX_DEPTH 64
#define MAX_VARS  256
#define MAX_ARGS  16
#define MAX_OUT   ((size_t)16 << 20)
/* Actions one rendering may execute: nested ranges over the messages multiply (14 deep over 4
 * messages is 4^14 passes, printing nothing, so MAX_OUT never stops them). A library template
 * executes some 5 to 30 actions per message: this allows tens of thousands of messages. */
#define MAX_STEPS ((size_t)1 << 20)

/* ------------------------------------------------------------------ AST */

typedef enum { E_FIELD, E_VAR, E_STR, E_INT, E_BOOL, E_CALL, E_DOT } expr_kind;

typedef struct expr {
    expr_kind kind;
    char *name; /* variable name ("$", "$x"), function name, or string literal */
    size_t name_len;
    char **fields; /* field chain: .A.B */
    size_t n_fields;
    long long ival;
    struct expr **args; /* E_CALL operands */
    size_t n_args;
} expr;

typedef enum { N_TEXT, N_PRINT, N_IF, N_RANGE, N_DECL, N_ASSIGN, N_BREAK, N_CONTINUE } node_kind;

typedef struct node {
    node_kind kind;
    int line;
    const char *text; /* N_TEXT: into the template's copy */
    size_t text_len;
    expr *e; /* the pipeline */
    char *var, *var2; /* N_DECL / N_ASSIGN: var; N_RANGE: [$i (var2),] $x (var) */
    struct node **body, **alt;
    size_t n_body, n_alt;
} node;

struct chat_gotmpl {
    char *src;
    node **root;
    size_t n_root;
    int uses_messages;
};

#endif
