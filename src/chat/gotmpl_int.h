/* gotmpl_int.h: the parsed form of an ollama Go template, shared by gotmpl.c (parser) and
 * gotmpl_exec.c (execution) only. */
#ifndef MSTORE_GOTMPL_INT_H
#define MSTORE_GOTMPL_INT_H

#include <jansson.h>
#include <stddef.h>

#include "chat/chat.h"
#include "util/util.h"

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
    int uses_tools; /* mentions .Tools */
    int uses_tool_calls; /* mentions .ToolCalls */
};

/* ------------------------------------------------------------------ tool data (gotmpl_tools.c) */

/* JSON in tool definitions and calls nests at most this deep (jansson stops at 2048). */
#define GOTMPL_MAX_JSON_DEPTH 128

/* The Go type of a value in ollama's tool data: how a template reaches its fields, ranges over
 * it, prints it and marshals it. A value is a (gotype, json_t) pair; json_t NULL is the type's
 * zero value (nil for slices, maps, pointers and interfaces). */
typedef enum {
    GK_STRING,
    GK_INT,
    GK_ANY, /* Go's `any` holding what json.Unmarshal made: maps marshal with sorted keys */
    GK_PTYPE, /* api.PropertyType: a list of strings, one of them written as a string */
    GK_SLICE,
    GK_MAP, /* a Go map: sorted keys */
    GK_OMAP, /* *api.ToolPropertiesMap: insertion order */
    GK_STRUCT,
} gokind;

typedef struct gotype gotype;
typedef struct gofield {
    const char *go, *json; /* the field's Go name and its JSON name */
    int omitempty;
    const gotype *type;
} gofield;
struct gotype {
    gokind kind;
    const char *name; /* Go's name of the type, for messages */
    const gotype *elem; /* slices and maps */
    const gofield *fields; /* structs, in declaration order */
    size_t n_fields;
    int prints_json; /* its String() marshals it (a nil map prints "{}") */
};

extern const gotype gotmpl__tools_type; /* templateTools, the data's .Tools */
extern const gotype gotmpl__calls_type; /* []templateToolCall, a message's .ToolCalls */

/* Output bounded by max bytes (MS_EINVALID past it). */
typedef struct gotmpl_buf {
    ms_text t;
    size_t max;
} gotmpl_buf;

/* tools[0..n) as ollama's templateTools would hold them, parameters decoded as json.Unmarshal
 * decodes them into api.ToolFunctionParameters. MS_EINVALID naming the tool and the member
 * for parameters that are not JSON, not an object, of the wrong type or nested too deep. */
int gotmpl__tools_new(json_t **out, const chat_tool *tools, size_t n);
/* A message's calls as []templateToolCall. MS_EINVALID when arguments are not a JSON object. */
int gotmpl__calls_new(json_t **out, const chat_tool_call *calls, size_t n);
const gofield *gotmpl__field_find(const gotype *t, const char *go_name); /* NULL: no such field */
/* json.Marshal of the value (t, j) appended to b. MS_EINVALID (bound, depth), MS_ENOMEM. */
int gotmpl__marshal(gotmpl_buf *b, const gotype *t, const json_t *j, int depth);
int gotmpl__put(gotmpl_buf *b, const char *s, size_t len);
int gotmpl__put_string(gotmpl_buf *b, const char *s, size_t len); /* as a JSON string */
/* float64 as Go's json (is_json) or fmt's %v writes it. */
void gotmpl__float(char out[40], double f, int is_json);
/* An object's keys in Go's map order (bytewise); malloc'd, NULL when out of memory. */
const char **gotmpl__keys_sorted(const json_t *o, size_t *n_out);

/* gotmpl_exec.c: what `section` (an if: its body; a range: itself) renders for an assistant
 * message with the one tool call `call`, variables from outside the section being nil. */
int gotmpl__render_call(char **out, size_t *len_out, const chat_gotmpl *t, const node *section,
                        const chat_tool_call *call);

#endif
