/* fuzz_jinja.c: libFuzzer target for the Jinja interpreter (src/chat/jinja_*.c): the input as a
 * template, parsed (chat_jinja_parse) and rendered over a conversation with tools and a tool
 * call (chat_jinja_render_json), then the same through chat_template_new + chat_render_tools.
 * A parse or a render either succeeds or refuses with a message naming the template's line;
 * nothing crashes, hangs or exhausts memory (steps, output, arena and nesting are bounded). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chat.h"

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "fuzz_jinja: %s:%d: %s (%s)\n", __FILE__, __LINE__, #c, ms_err_msg()); abort(); } } while (0)

static const char context[] =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"Hi\"},"
    " {\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"type\": \"function\", \"id\": \"call12345\","
    " \"function\": {\"name\": \"f\", \"arguments\": {\"a\": 1, \"b\": [true, null, 2.5, \"x\"]}}}]},"
    " {\"role\": \"tool\", \"name\": \"f\", \"tool_call_id\": \"call12345\", \"content\": \"42\"}],"
    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"description\": \"d\","
    " \"parameters\": {\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"integer\"}}}}}],"
    " \"add_generation_prompt\": true, \"bos_token\": \"<s>\", \"eos_token\": \"</s>\"}";

static const chat_msg msgs[] = {
    {.role = "system", .content = "Be brief."},
    {.role = "user", .content = "Hi {{ x }}"},
};
static const chat_tool tool = {.name = "f", .description = "d", .parameters = "{\"type\": \"object\"}"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    chat_jinja *j = NULL;
    chat_template *t = NULL;
    char *out = NULL;
    size_t len = 0;

    ms_err_clear();
    if (chat_jinja_parse(&j, text, size) == 0) {
        CHECK(j);
        if (chat_jinja_render_json(&out, &len, j, context) == 0)
            CHECK(out && strlen(out) <= len);
        else
            CHECK(out == NULL && strncmp(ms_err_msg(), "chat template", 13) == 0);
        free(out);
        out = NULL;
        chat_jinja_free(j);
    } else {
        CHECK(j == NULL && strncmp(ms_err_msg(), "chat template", 13) == 0);
    }
    CHECK(chat_template_new(&t, text, size, "<s>", "</s>") == 0 && t);
    if (chat_render_tools(&out, &len, t, msgs, 2, &tool, 1, 1) == 0)
        CHECK(out && strlen(out) <= len);
    else
        CHECK(out == NULL && ms_err_msg()[0]);
    free(out);
    chat_template_free(t);
    return 0;
}
