/* chat_int.h: helpers shared by the files of src/chat only (tests may use them). */
#ifndef MSTORE_CHAT_INT_H
#define MSTORE_CHAT_INT_H

#include <stddef.h>

#include "chat/chat.h"

/* A growing NUL-terminated string; an allocation failure sets oom and drops what follows, so
 * renderers check once at the end. */
typedef struct chat_buf {
    char *p;
    size_t n, cap;
    int oom;
} chat_buf;
void chat__put(chat_buf *b, const char *s, size_t len);
void chat__puts(chat_buf *b, const char *s);

/* What the Jinja templates' `tojson` writes under transformers (pyjson.c): Python's
 * json.dumps(x, ensure_ascii=False, indent=indent), indent 0 meaning none. */
/* x is the JSON text `json` (a client's arguments or parameters); MS_EINVALID when it is not JSON,
 * the message naming `what`. */
int chat__tojson(chat_buf *b, const char *json, int indent, const char *what);
/* x is the string s ({{ message.content | tojson }}). */
void chat__tojson_str(chat_buf *b, const char *s);
/* x is the tool as transformers passes it: {"type": "function", "function": {"name": ..,
 * "description": .., "parameters": ..}}, description and parameters only where given.
 * MS_EINVALID when its parameters are not JSON. */
int chat__tojson_tool(chat_buf *b, const chat_tool *tool, int indent);

#endif
