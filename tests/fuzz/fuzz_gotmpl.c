/* fuzz_gotmpl.c: libFuzzer target for the chat templates: ollama's Go template subset
 * (chat_gotmpl_parse, then rendered over a short conversation) and the template recognizer
 * (chat_template_new + chat_render, with a tool), and the input read as a model's answer for
 * tool calls (chat_tool_calls_parse, with the template's syntax and the built-in ones) and for
 * its reasoning (chat_think_feed: whole, byte by byte and cut in two must split alike, into no
 * more bytes than it has), with thinking on and off (chat_render_think). A refusal
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

typedef struct split_out {
    char *p[2];
    size_t n[2], cap;
} split_out;

static int split_put(void *ctx, int thinking, const char *s, size_t len)
{
    split_out *o = ctx;

    CHECK(len > 0 && o->n[thinking] + len <= o->cap);
    memcpy(o->p[thinking] + o->n[thinking], s, len);
    o->n[thinking] += len;
    return 0;
}

/* The answer split fed in pieces of `step` bytes (0: whole, with a cut at `cut`). */
static void split(split_out *o, const char *text, size_t size, size_t step, size_t cut, int prefill)
{
    chat_think st;

    o->n[0] = o->n[1] = 0;
    chat_think_init(&st);
    if (prefill)
        CHECK(chat_think_feed(&st, "<think>", 7, split_put, o) == 0);
    if (step == 0) {
        CHECK(chat_think_feed(&st, text, cut, split_put, o) == 0);
        CHECK(chat_think_feed(&st, text + cut, size - cut, split_put, o) == 0);
    } else {
        for (size_t at = 0; at < size; at += step)
            CHECK(chat_think_feed(&st, text + at, size - at < step ? size - at : step, split_put, o) == 0);
    }
    CHECK(chat_think_end(&st, split_put, o) == 0);
    CHECK(o->n[0] + o->n[1] <= size);
}

static void think_split(const char *text, size_t size)
{
    split_out a = {.cap = size}, b = {.cap = size};

    if (!(a.p[0] = malloc(size + 1)) || !(a.p[1] = malloc(size + 1)) || !(b.p[0] = malloc(size + 1)) ||
        !(b.p[1] = malloc(size + 1)))
        abort();
    for (int prefill = 0; prefill < 2; prefill++) {
        split(&a, text, size, 0, size ? (unsigned char)text[0] % (size + 1) : 0, prefill);
        split(&b, text, size, 1, 0, prefill);
        CHECK(a.n[0] == b.n[0] && a.n[1] == b.n[1] && !memcmp(a.p[0], b.p[0], a.n[0]) &&
              !memcmp(a.p[1], b.p[1], a.n[1]));
    }
    for (int k = 0; k < 2; k++)
        free(a.p[k]), free(b.p[k]);
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
    out = NULL;
    for (int think = -1; think <= 1; think++) {
        if (chat_render_think(&out, &len, t, msgs, sizeof msgs / sizeof msgs[0], NULL, 0, 1, think) == 0)
            CHECK(out && strlen(out) <= len);
        else
            CHECK(out == NULL && ms_err_msg()[0]);
        free(out);
        out = NULL;
    }
    chat_template_thinks(t);
    think_split(text, size);
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
