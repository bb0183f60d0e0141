/* fuzz_gotmpl.c: libFuzzer target for the chat templates: ollama's Go template subset
 * (chat_gotmpl_parse, then rendered over a short conversation) and the template recognizer
 * (chat_template_new + chat_render, with a tool), and the input read as a model's answer for
 * tool calls (chat_tool_calls_parse, with the template's syntax and the built-in ones). A refusal
 * must say why; a parsed template must render or refuse in bounded time and memory (the renderer
 * caps its output); calls found have a name and arguments inside the answer's bounds. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chat.h"

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "fuzz_gotmpl: %s:%d: %s (%s)\n", __FILE__, __LINE__, #c, ms_err_msg()); abort(); } } while (0)

static const chat_msg msgs[] = {
    {.role = "system", .content = "Be brief."},
    {.role = "user", .content = "Hi {{ .Prompt }}"},
    {.role = "assistant", .content = "Hello."},
    {.role = "user", .content = "Bye"},
};

static const chat_tool tool = { .name = "get_weather", .description = "the weather", .parameters = "{\"type\": \"object\", \"properties\": {}}" };

static void tool_calls(const chat_tool_syntax *s, const char *text, size_t size)
{
    chat_tool_call *calls;
    size_t n, content_len;

    CHECK(chat_tool_calls_parse(s, text, size, &calls, &n, &content_len) == 0);
    CHECK(content_len <= size && n <= 64 && (n == 0) == (calls == NULL));
    for (size_t i = 0; i < n; i++)
        CHECK(calls[i].name[0] && calls[i].arguments[0] == '{');
    chat_tool_calls_free(calls, n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    chat_gotmpl *g = (chat_gotmpl *)&size;
    chat_template *t = NULL;
    char *out = NULL;
    size_t len = 0;

    ms_err_clear();
    chat_gotmpl_looks(text, size);
    if (chat_gotmpl_parse(&g, text, size) == 0) {
        for (size_t n = 0; n <= sizeof msgs / sizeof msgs[0]; n += 2) {
            if (chat_gotmpl_render(&out, &len, g, msgs, n) == 0) {
                CHECK(out && strlen(out) <= len);
            } else {
                CHECK(out == NULL && ms_err_msg()[0]);
            }
            free(out);
            out = NULL;
        }
        chat_gotmpl_free(g);
    } else {
        CHECK(g == NULL && ms_err_msg()[0]);
    }
    CHECK(chat_template_new(&t, text, size, "<s>", "</s>") == 0 && t);
    chat_template_warning(t);
    if (chat_render(&out, &len, t, msgs, sizeof msgs / sizeof msgs[0], 1) == 0)
        CHECK(out);
    free(out);
    out = NULL;
    if (chat_render_tools(&out, &len, t, msgs, sizeof msgs / sizeof msgs[0], &tool, 1, 1) == 0)
        CHECK(out);
    free(out);
    {
        static const chat_tool_syntax fixed[] = {
            { .prefix = "<tool_call>\n", .suffix = "\n</tool_call>", .args_key = "arguments" },
            { .args_key = "parameters" },
            { .prefix = "[TOOL_CALLS]", .args_key = "arguments", .array = 1 },
        };
        chat_tool_syntax syn;
        if (chat_template_tool_syntax(t, &syn) == 0)
            tool_calls(&syn, text, size);
        for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
            tool_calls(&fixed[i], text, size);
    }
    chat_template_free(t);
    return 0;
}
