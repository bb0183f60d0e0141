/* tools.c: tool calls in a model's answer, by the syntax its template gives them. */
#include <stdlib.h>
#include <string.h>

#include "chat/chat.h"
#include "util/util.h"

int chat_tool_calls_parse(const chat_tool_syntax *s, const char *text, size_t len, chat_tool_call **calls,
                          size_t *n_calls, size_t *content_len)
{
    (void)s, (void)text;
    *calls = NULL, *n_calls = 0, *content_len = len;
    return 0;
}

void chat_tool_calls_free(chat_tool_call *calls, size_t n)
{
    for (size_t i = 0; calls && i < n; i++) {
        free((char *)calls[i].id);
        free((char *)calls[i].name);
        free((char *)calls[i].arguments);
    }
    free(calls);
}
