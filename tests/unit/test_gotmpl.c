/* test_gotmpl.c: ollama's Go templates (src/chat/gotmpl.c) against the texts ollama's own
 * engine renders (tests/data/gotmpl, see its SOURCE.md), the subset's edges, and refusals. */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chat.h"
#include "helpers/fixture.h"

static const char *src_dir(void)
{
    return getenv("MSTORE_SRC") ? getenv("MSTORE_SRC") : ".";
}

static char *load(const char *name, const char *file, size_t *len)
{
    char *path = ms_strdup_printf("%s/tests/data/gotmpl/%s/%s", src_dir(), name, file), *text = NULL;

    ck_assert_msg(ms_file_read(&text, len, path, 1 << 20) == 0, "%s", ms_err_msg());
    free(path);
    return text;
}

static const chat_msg convo[] = {
    {.role = "system", .content = "You are a helpful assistant."},
    {.role = "user", .content = "Hello, how are you?"},
    {.role = "assistant", .content = "I'm doing great. How can I help you today?"},
    {.role = "user", .content = "I'd like to show off how chat templating works!"},
};
static const struct {
    const char *file;
    size_t from, n;
} cases[] = {
    {"user", 1, 1},
    {"user-assistant-user", 1, 3},
    {"system-user-assistant-user", 0, 4},
};

/* Every library template ollama tests, each message set, byte for byte. */
static const char *const library[] = {
    "alfred",
    "alpaca",
    "chatml",
    "chatqa",
    "codellama-70b-instruct",
    "command-r",
    "falcon-instruct",
    "gemma-instruct",
    "gemma3-instruct",
    "granite-instruct",
    "llama2-chat",
    "llama3-instruct",
    "magicoder",
    "mistral-instruct",
    "openchat",
    "phi-3",
    "solar-instruct",
    "starcoder2-instruct",
    "vicuna",
    "zephyr",
};
/* ollama's TestTemplate drops one trailing space of these renderings before comparing. */
static int trims_space(const char *name)
{
    static const char *const t[] = {"chatqa", "llama2-chat", "mistral-instruct", "openchat", "vicuna"};
    for (size_t i = 0; i < sizeof t / sizeof *t; i++)
        if (!strcmp(t[i], name))
            return 1;
    return 0;
}

START_TEST(library_templates_render_as_ollama)
{
    const char *name = library[_i];
    size_t tlen, elen, olen;
    char *text = load(name, "template", &tlen), *out, *expect;
    chat_gotmpl *t = NULL;

    ck_assert_int_eq(chat_gotmpl_looks(text, tlen), 1);
    ck_assert_msg(chat_gotmpl_parse(&t, text, tlen) == 0, "%s: %s", name, ms_err_msg());
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        ck_assert_msg(chat_gotmpl_render(&out, &olen, t, convo + cases[c].from, cases[c].n) == 0, "%s/%s: %s", name,
                      cases[c].file, ms_err_msg());
        if (trims_space(name) && olen && out[olen - 1] == ' ')
            out[--olen] = '\0';
        expect = load(name, cases[c].file, &elen);
        ck_assert_msg(olen == elen && memcmp(out, expect, elen) == 0, "%s/%s:\n--- got\n%s\n--- want\n%s", name,
                      cases[c].file, out, expect);
        free(expect);
        free(out);
    }
    chat_gotmpl_free(t);
    free(text);
}
END_TEST

static char *render(const char *tmpl, const chat_msg *m, size_t n)
{
    chat_gotmpl *t = NULL;
    char *out = NULL;
    size_t len;

    ck_assert_msg(chat_gotmpl_parse(&t, tmpl, strlen(tmpl)) == 0, "%s: %s", tmpl, ms_err_msg());
    ck_assert_msg(chat_gotmpl_render(&out, &len, t, m, n) == 0, "%s: %s", tmpl, ms_err_msg());
    ck_assert_uint_eq(strlen(out), len);
    chat_gotmpl_free(t);
    return out;
}

/* Texts from ollama's docs/template.md and template_test.go, with the messages given there. */
static const struct {
    const char *tmpl;
    const char *want;
} edges[] = {
    /* docs/template.md: the example range over messages */
    {"{{- range .Messages }}\n{{ .Role }}: {{ .Content }}\n{{- end }}",
     "\nsystem: You are a helpful assistant.\nuser: Hello, how are you?\nassistant: I'm doing great. How can I help "
     "you today?\nuser: I'd like to show off how chat templating works!"},
    /* template_test.go MessagesRange style, $.-access inside range and eq with several operands */
    {"{{ range .Messages }}{{ if eq .Role \"user\" \"system\" }}[{{ $.System }}]{{ end }}{{ end }}",
     "[You are a helpful assistant.][You are a helpful assistant.][You are a helpful assistant.]"},
    /* range with index, len and slice: the last message */
    {"{{ range $i, $m := .Messages }}{{ if eq (len (slice $.Messages $i)) 1 }}{{ $m.Content }}{{ end }}{{ end }}",
     "I'd like to show off how chat templating works!"},
    /* legacy .Prompt / .Response templates: one round per exchange, the last cut after .Response */
    {"{{ if .System }}S:{{ .System }}\n{{ end }}U:{{ .Prompt }}\nA:{{ .Response }}</s>\n",
     "S:You are a helpful assistant.\nU:Hello, how are you?\nA:I'm doing great. How can I help you today?</s>\n"
     "U:I'd like to show off how chat templating works!\nA:"},
    /* and/or give the deciding operand, not and ne, break and continue, comments */
    {"{{/* c */}}{{ or .Prompt \"none\" }}|{{ and .System \"x\" }}|{{ not .Response }}|{{ range .Messages }}"
     "{{ if ne .Role \"assistant\" }}{{ continue }}{{ end }}{{ .Role }}{{ break }}{{ end }}",
     "none|x|true|assistant"},
    /* printf, variables assigned in a range, whitespace trimming both ways */
    {"{{- $n := 0 }}{{ range .Messages }}{{ $n = printf \"%s+%s\" .Role \"x\" }}{{ end }}  {{- $n -}}  \n!", "user+x!"},
    /* an else-if chain with a final else, inside a range */
    {"{{ range .Messages }}{{ if eq .Role \"system\" }}S{{ else if eq .Role \"user\" }}U{{ else if .Images }}I"
     "{{ else }}A{{ end }}{{ end }}",
     "SUAU"},
};

START_TEST(subset_edges_render)
{
    char *out = render(edges[_i].tmpl, convo, 4);
    ck_assert_msg(strcmp(out, edges[_i].want) == 0, "%s\n--- got\n%s\n--- want\n%s", edges[_i].tmpl, out,
                  edges[_i].want);
    free(out);
}
END_TEST

static const struct {
    const char *tmpl;
    int code;
    const char *expect;
} bad[] = {
    {"{{ if .System }}x", MS_EINVALID, "line 1: 'if' has no 'end'"},
    {"a\nb\n{{ end }}", MS_EINVALID, "line 3: 'end' without"},
    {"{{ .System", MS_EINVALID, "'{{' without '}}'"},
    {"x\n{{ \"abc }}", MS_EINVALID, "line 2: '{{' without '}}'"},
    {"x\n\n{{ if eq .Role \"a\" }}{{ \"a\nb\" }}{{ end }}", MS_EINVALID, "line 3: newline in a string"},
    {"{{ .Prompt | upper }}", MS_EUNSUPPORTED, "pipes"},
    {"{{ currentDate }}", MS_EUNSUPPORTED, "function 'currentDate'"},
    {"{{ with .System }}{{ . }}{{ end }}", MS_EUNSUPPORTED, "'with'"},
    {"{{ template \"x\" }}", MS_EUNSUPPORTED, "'template'"},
    {"{{ if .A }}{{ else }}{{ else }}{{ end }}", MS_EINVALID, "after 'else'"},
    {"{{ if .A }}{{ else if .B }}x", MS_EINVALID, "line 1: 'if' has no 'end'"},
    {"{{ range .A }}{{ else if .B }}{{ else }}{{ else }}{{ end }}", MS_EINVALID, "after 'else'"},
    {"{{ if .A }}{{ else while }}{{ end }}", MS_EUNSUPPORTED, "only 'else if' may follow 'else'"},
};

START_TEST(refusals_name_the_line)
{
    chat_gotmpl *t = (chat_gotmpl *)1;
    ck_assert_int_eq(chat_gotmpl_parse(&t, bad[_i].tmpl, strlen(bad[_i].tmpl)), bad[_i].code);
    ck_assert_ptr_null(t);
    ck_assert_msg(strstr(ms_err_msg(), bad[_i].expect), "%s: '%s' lacks '%s'", bad[_i].tmpl, ms_err_msg(),
                  bad[_i].expect);
}
END_TEST

/* Fields the data has no such name for refuse at render, not silently. */
START_TEST(unknown_field_refused_at_render)
{
    chat_gotmpl *t = NULL;
    char *out = NULL;
    size_t len;

    ck_assert_int_eq(chat_gotmpl_parse(&t, "{{ .Nope }}", 11), 0);
    ck_assert_int_eq(chat_gotmpl_render(&out, &len, t, convo, 4), MS_EUNSUPPORTED);
    ck_assert_ptr_null(out);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), ".Nope"));
    chat_gotmpl_free(t);
}
END_TEST

/* Found by tests/fuzz/fuzz_gotmpl: ranges nested over the messages multiply, and printing
 * nothing they never reach the output bound: 20 deep over 4 messages is 4^20 passes, a hang.
 * Rendering stops after MAX_STEPS actions with a message; chat_template_new, which renders a
 * trial conversation, falls back instead of hanging. */
START_TEST(nested_ranges_are_bounded)
{
    char tmpl[1024] = "";
    chat_gotmpl *t = NULL;
    chat_template *ct = NULL;
    char *out = NULL;
    size_t len;

    for (int i = 0; i < 20; i++)
        strcat(tmpl, "{{range $.Messages}}");
    for (int i = 0; i < 20; i++)
        strcat(tmpl, "{{end}}");
    ck_assert_int_eq(chat_gotmpl_parse(&t, tmpl, strlen(tmpl)), 0);
    ck_assert_int_eq(chat_gotmpl_render(&out, &len, t, convo, 4), MS_EINVALID);
    ck_assert_ptr_null(out);
    ck_assert_msg(strstr(ms_err_msg(), "steps"), "%s", ms_err_msg());
    chat_gotmpl_free(t);
    ck_assert_int_eq(chat_template_new(&ct, tmpl, strlen(tmpl), "<s>", "</s>"), 0);
    ck_assert_int_ne(chat_template_family(ct), CHAT_OLLAMA);
    chat_template_free(ct);
}
END_TEST

/* Found by tests/fuzz/fuzz_gotmpl: every printf result is kept until the render ends, and a
 * variable doubled inside nested ranges (64 times here) asked for exabytes. All printf
 * results together stay under the output bound. */
START_TEST(printf_results_are_bounded)
{
    const char *tmpl = "{{ $x := \"abcdefgh\" }}{{ range .Messages }}{{ range $.Messages }}{{ range $.Messages }}"
                       "{{ $x = printf \"%s%s\" $x $x }}{{ end }}{{ end }}{{ end }}{{ len $x }}";
    chat_gotmpl *t = NULL;
    char *out = NULL;
    size_t len;

    ck_assert_int_eq(chat_gotmpl_parse(&t, tmpl, strlen(tmpl)), 0);
    ck_assert_int_eq(chat_gotmpl_render(&out, &len, t, convo, 4), MS_EINVALID);
    ck_assert_ptr_null(out);
    ck_assert_msg(strstr(ms_err_msg(), "printf results exceed"), "%s", ms_err_msg());
    chat_gotmpl_free(t);
}
END_TEST

/* Consecutive messages of one role are merged; each partial merge used to be kept until the
 * end: 1000 messages of 4 KiB held 2 GB. Now only the merge itself (4 MB) is. */
START_TEST(merging_many_messages_keeps_one_copy)
{
    const char *tmpl = "{{ range .Messages }}{{ len .Content }}{{ end }}";
    enum { N = 1000, LEN = 4096 };
    chat_msg *m = calloc(N, sizeof *m);
    char *text = malloc(LEN + 1), *out = NULL, want[32];
    chat_gotmpl *t = NULL;
    size_t len;

    memset(text, 'x', LEN);
    text[LEN] = '\0';
    for (int i = 0; i < N; i++)
        m[i] = (chat_msg){.role = "user", .content = text};
    ck_assert_int_eq(chat_gotmpl_parse(&t, tmpl, strlen(tmpl)), 0);
    ck_assert_msg(chat_gotmpl_render(&out, &len, t, m, N) == 0, "%s", ms_err_msg());
    snprintf(want, sizeof want, "%d", N * LEN + (N - 1) * 2);
    ck_assert_str_eq(out, want);
    free(out);
    chat_gotmpl_free(t);
    free(text);
    free(m);
}
END_TEST

/* chat_template_new renders a Go template itself, and falls back to the family by markers
 * with a warning when the template is outside the subset. */
START_TEST(chat_template_uses_go_templates)
{
    const char *go = "{{ range .Messages }}<{{ .Role }}>{{ .Content }}{{ end }}<assistant>";
    const char *outside = "{{ range .Messages }}<|im_start|>{{ .Role }}\n{{ .Content | trim }}<|im_end|>\n{{ end }}";
    chat_template *t = NULL;
    char *out = NULL;
    size_t len;

    ck_assert_int_eq(chat_template_new(&t, go, strlen(go), "<s>", "</s>"), 0);
    ck_assert_str_eq(chat_family_name(chat_template_family(t)), "ollama");
    ck_assert_ptr_null(chat_template_warning(t));
    ck_assert_int_eq(chat_render(&out, &len, t, convo + 1, 1, 1), 0);
    ck_assert_str_eq(out, "<user>Hello, how are you?<assistant>");
    free(out);
    chat_template_free(t);
    ck_assert_int_eq(chat_template_new(&t, outside, strlen(outside), "<s>", "</s>"), 0);
    ck_assert_int_eq(chat_template_family(t), CHAT_CHATML);
    ck_assert_ptr_nonnull(chat_template_warning(t));
    ck_assert_ptr_nonnull(strstr(chat_template_warning(t), "pipes"));
    chat_template_free(t);
}
END_TEST

/* ------------------------------------------------------------------ tools (tests/data/gotmpl-tools) */

/* ollama's tools test data: messages.json and tools.json as chat_msg and chat_tool, with JSON
 * texts as jansson writes them (compact, in order). Everything lives until data_free. */
typedef struct tool_data {
    json_t *msgs_json, *tools_json;
    chat_msg *msgs;
    size_t n_msgs;
    chat_tool *tools;
    size_t n_tools;
    chat_tool_call *calls;
    char **texts;
    size_t n_texts;
} tool_data;

static const char *keep(tool_data *d, char *text)
{
    d->texts = realloc(d->texts, (d->n_texts + 1) * sizeof *d->texts);
    d->texts[d->n_texts++] = text;
    return text;
}

static json_t *load_json(const char *file)
{
    char *path = ms_strdup_printf("%s/tests/data/gotmpl-tools/%s", src_dir(), file);
    json_error_t e;
    json_t *j = json_load_file(path, 0, &e);

    ck_assert_msg(j != NULL, "%s: %s", path, e.text);
    free(path);
    return j;
}

static void data_load(tool_data *d)
{
    json_t *m, *c;
    size_t i, k, n_calls = 0;

    memset(d, 0, sizeof *d);
    d->msgs_json = load_json("messages.json");
    d->tools_json = load_json("tools.json");
    d->msgs = calloc(json_array_size(d->msgs_json), sizeof *d->msgs);
    d->calls = calloc(16, sizeof *d->calls);
    json_array_foreach(d->msgs_json, i, m)
    {
        chat_msg *x = &d->msgs[d->n_msgs++];
        x->role = json_string_value(json_object_get(m, "role"));
        x->content = json_string_value(json_object_get(m, "content"));
        x->tool_call_id = json_string_value(json_object_get(m, "tool_call_id"));
        x->tool_name = json_string_value(json_object_get(m, "tool_name"));
        x->tool_calls = d->calls + n_calls;
        json_array_foreach(json_object_get(m, "tool_calls"), k, c)
        {
            json_t *fn = json_object_get(c, "function");
            ck_assert_uint_lt(n_calls, 16);
            d->calls[n_calls++] = (chat_tool_call){
                .id = json_string_value(json_object_get(c, "id")),
                .name = json_string_value(json_object_get(fn, "name")),
                .arguments = keep(d, json_dumps(json_object_get(fn, "arguments"), JSON_COMPACT)),
            };
            x->n_tool_calls++;
        }
    }
    d->tools = calloc(json_array_size(d->tools_json), sizeof *d->tools);
    json_array_foreach(d->tools_json, i, m)
    {
        json_t *fn = json_object_get(m, "function");
        d->tools[d->n_tools++] = (chat_tool){
            .name = json_string_value(json_object_get(fn, "name")),
            .description = json_string_value(json_object_get(fn, "description")),
            .parameters = keep(d, json_dumps(json_object_get(fn, "parameters"), JSON_COMPACT)),
        };
    }
}

static void data_free(tool_data *d)
{
    for (size_t i = 0; i < d->n_texts; i++)
        free(d->texts[i]);
    free(d->texts);
    free(d->msgs);
    free(d->calls);
    free(d->tools);
    json_decref(d->msgs_json);
    json_decref(d->tools_json);
}

/* Each of ollama's tool templates; the tool-call syntax we find in it; and the tag ollama's
 * parser finds today (tools/template.go parseTag: "{" for a bare object), which is our
 * prefix, with "[" when the calls are an array, trimmed. xlam differs: ollama's tag stops at
 * the first "{", where its wrapper object {"tool_calls": [...]} opens; ours is the text before
 * the list of calls. */
static const struct {
    const char *name;
    const char *prefix, *suffix, *args_key;
    int array;
    const char *ollama_tag;
    const char *name_key; /* "" for "name" */
} tool_templates[] = {
    {"qwen2.5", "<tool_call>\n", "\n</tool_call>", "arguments", 0, "<tool_call>", ""},
    {"qwen3", "<tool_call>\n", "\n</tool_call>", "arguments", 0, "<tool_call>", ""},
    {"llama3-groq-tool-use", "<tool_call>\n", "\n</tool_call>", "arguments", 0, "<tool_call>", ""},
    {"llama3.2", "", "", "parameters", 0, "{", ""},
    {"mistral", "[TOOL_CALLS] ", "</s>", "arguments", 1, "[TOOL_CALLS] [", ""},
    {"command-r-plus", "Action: ```json\n", "```", "parameters", 1, "Action: ```json\n[", "tool_name"},
    {"firefunction", "functools", "", "arguments", 1, "functools[", ""},
    {"nemotron", "<toolcall> ", " </toolcall>", "arguments", 0, "<toolcall>", ""},
    {"xlam", "### Response:\n{\"tool_calls\": ", "}\n<|EOT|>", "arguments", 1, NULL, ""},
};

static chat_gotmpl *tool_template(const char *name)
{
    char *file = ms_strdup_printf("%s.gotmpl", name), *path, *text = NULL;
    chat_gotmpl *t = NULL;
    size_t len;

    path = ms_strdup_printf("%s/tests/data/gotmpl-tools/%s", src_dir(), file);
    ck_assert_msg(ms_file_read(&text, &len, path, 1 << 20) == 0, "%s", ms_err_msg());
    ck_assert_msg(chat_gotmpl_parse(&t, text, len) == 0, "%s: %s", name, ms_err_msg());
    free(text);
    free(path);
    free(file);
    return t;
}

/* ollama's TestParseToolCalls renders each template with messages.json and tools.json and
 * compares with the .out byte for byte, nothing normalized. */
START_TEST(tool_templates_render_as_ollama)
{
    const char *name = tool_templates[_i].name;
    chat_gotmpl *t = tool_template(name);
    char *file = ms_strdup_printf("%s/tests/data/gotmpl-tools/%s.out", src_dir(), name), *want = NULL, *out = NULL;
    size_t wlen, olen;
    tool_data d;

    data_load(&d);
    ck_assert_msg(ms_file_read(&want, &wlen, file, 1 << 20) == 0, "%s", ms_err_msg());
    ck_assert_msg(chat_gotmpl_render_tools(&out, &olen, t, d.msgs, d.n_msgs, d.tools, d.n_tools) == 0, "%s: %s", name,
                  ms_err_msg());
    ck_assert_msg(olen == wlen && memcmp(out, want, wlen) == 0, "%s:\n--- got\n%s\n--- want\n%s", name, out, want);
    free(out);
    free(want);
    free(file);
    data_free(&d);
    chat_gotmpl_free(t);
}
END_TEST

static void trim_into(char *dst, const char *s)
{
    size_t n = strlen(s);
    while (*s == ' ' || *s == '\n')
        s++, n--;
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\n'))
        n--;
    memcpy(dst, s, n);
    dst[n] = '\0';
}

START_TEST(tool_templates_syntax_as_ollama_finds_it)
{
    chat_gotmpl *t = tool_template(tool_templates[_i].name);
    chat_tool_syntax s;
    char tag[160], want_tag[160];

    ck_assert_msg(chat_gotmpl_tool_syntax(t, &s) == 0, "%s: %s", tool_templates[_i].name, ms_err_msg());
    ck_assert_str_eq(s.prefix, tool_templates[_i].prefix);
    ck_assert_str_eq(s.suffix, tool_templates[_i].suffix);
    ck_assert_str_eq(s.args_key, tool_templates[_i].args_key);
    ck_assert_str_eq(s.name_key, tool_templates[_i].name_key ? tool_templates[_i].name_key : "");
    ck_assert_int_eq(s.array, tool_templates[_i].array);
    if (tool_templates[_i].ollama_tag) {
        snprintf(want_tag, sizeof want_tag, "%s%s", s.prefix, s.array ? "[" : "");
        trim_into(tag, want_tag);
        ck_assert_str_eq(*tag ? tag : "{",
                         tool_templates[_i].ollama_tag[0] == '{' ? "{" : tool_templates[_i].ollama_tag);
    }
    chat_gotmpl_free(t);
}
END_TEST

static char *render_tools(const char *tmpl, const chat_msg *m, size_t n, const chat_tool *tools, size_t n_tools)
{
    chat_gotmpl *t = NULL;
    char *out = NULL;
    size_t len;

    ck_assert_msg(chat_gotmpl_parse(&t, tmpl, strlen(tmpl)) == 0, "%s: %s", tmpl, ms_err_msg());
    ck_assert_msg(chat_gotmpl_render_tools(&out, &len, t, m, n, tools, n_tools) == 0, "%s: %s", tmpl, ms_err_msg());
    ck_assert_uint_eq(strlen(out), len);
    chat_gotmpl_free(t);
    return out;
}

static const chat_tool_call tokyo = {.name = "get_weather", .arguments = "{\"unit\":\"celsius\",\"city\":\"Tokyo\"}"};
static const chat_msg calling[] = {
    {.role = "user", .content = "weather?"},
    {.role = "assistant", .tool_calls = &tokyo, .n_tool_calls = 1},
    {.role = "tool", .content = "sunny", .tool_name = "get_weather", .tool_call_id = "call_1"},
    {.role = "tool", .content = "72F", .tool_name = "get_temperature"},
};
static const chat_tool weather = {
    .name = "get_weather",
    .description = "Get weather",
    .parameters =
        "{\"type\":\"object\",\"properties\":{\"location\":{\"type\":\"string\",\"description\":\"City name\"},"
        "\"days\":{\"type\":[\"integer\",\"null\"]}},\"required\":[\"location\"]}",
};

/* ollama's template_test.go (TestTemplateArguments*, TestTemplateProperties*, the tool
 * messages kept apart) and Go's json.Marshal details: struct field order, omitempty, Go map
 * order sorted but ToolPropertiesMap's insertion order kept, float64 numbers, HTML escapes. */
static const struct {
    const char *tmpl, *params, *want;
} tool_edges[] = {
    {"{{- range .Messages }}{{- range .ToolCalls }}{{ .Function.Arguments }}{{- end }}{{- end }}", NULL,
     "{\"city\":\"Tokyo\",\"unit\":\"celsius\"}"},
    {"{{- range .Messages }}{{- range .ToolCalls }}{{- range $k, $v := .Function.Arguments }}{{ $k }}={{ $v }};{{- end "
     "}}{{- end }}{{- end }}",
     NULL, "city=Tokyo;unit=celsius;"},
    {"{{- range .Messages }}{{- end }}{{- range .Tools }}{{ .Function.Parameters.Properties }}{{- end }}", NULL,
     "{\"days\":{\"type\":[\"integer\",\"null\"]},\"location\":{\"type\":\"string\",\"description\":\"City name\"}}"},
    {"{{- range .Messages }}{{- end }}{{- range .Tools }}{{- range $name, $prop := .Function.Parameters.Properties }}"
     "{{ $name }}:{{ $prop.Type }};{{- end }}{{- end }}",
     NULL, "days:[integer null];location:string;"},
    {"{{ range .Messages }}{{ if eq .Role \"tool\" }}{{ .ToolName }}/{{ .ToolCallID }}={{ .Content }};{{ end }}{{ end "
     "}}",
     NULL, "get_weather/call_1=sunny;get_temperature/=72F;"},
    {"{{ range .Messages }}{{ range $i, $c := .ToolCalls }}{{ $i }}{{ .Function.Index }}{{ .Function.Name }}"
     "{{ json $c }}{{ end }}{{ end }}",
     NULL,
     "00get_weather{\"ID\":\"\",\"Function\":{\"Index\":0,\"Name\":\"get_weather\",\"Arguments\":{\"city\":\"Tokyo\","
     "\"unit\":\"celsius\"}}}"},
    {"{{ range .Messages }}{{ end }}{{ len .Tools }} {{ json .Tools }}", NULL,
     "1 [{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"Get weather\",\"parameters\":{"
     "\"type\":\"object\",\"required\":[\"location\"],\"properties\":{\"days\":{\"type\":[\"integer\",\"null\"]},"
     "\"location\":{\"type\":\"string\",\"description\":\"City name\"}}}}}]"},
    /* no parameters: the zero struct, description and properties written anyway */
    {"{{ range .Messages }}{{ end }}{{ range .Tools }}{{ . }}{{ end }}", "",
     "{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"Get weather\",\"parameters\":{"
     "\"type\":\"\",\"properties\":null}}}"},
    /* unknown members dropped, a key matched case-insensitively, an empty required omitted, the
     * nested properties in their order, `any` maps sorted, numbers as float64, <>& escaped */
    {"{{ range .Messages }}{{ end }}{{ range .Tools }}{{ json .Function.Parameters }}{{ end }}",
     "{\"TYPE\":\"object\",\"additionalProperties\":false,\"required\":[],\"properties\":{\"z\":{\"type\":\"object\","
     "\"properties\":{\"b\":{\"type\":\"number\"},\"a\":{\"Description\":\"<a & b>\"}}},\"y\":{\"enum\":[1,1.5,1e21,"
     "1e-7,100000000000000000000,-0.000001,12345678901234567890],\"items\":{\"b\":1,\"a\":[true,null]}}}}",
     "{\"type\":\"object\",\"properties\":{\"y\":{\"items\":{\"a\":[true,null],\"b\":1},\"enum\":[1,1.5,1e+21,1e-7,"
     "100000000000000000000,-0.000001,12345678901234567000]},\"z\":{\"type\":\"object\",\"properties\":{\"b\":{"
     "\"type\":"
     "\"number\"},\"a\":{\"description\":\"\\u003ca \\u0026 b\\u003e\"}}}}}"},
};

START_TEST(tool_data_prints_as_go)
{
    chat_tool tool = weather;
    char *out, *tmpl;

    if (tool_edges[_i].params)
        tool.parameters = *tool_edges[_i].params ? tool_edges[_i].params : NULL;
    /* the templates that do not mention .Tools would be refused it */
    tmpl = ms_strdup_printf("%s{{ if .Tools }}{{ end }}", tool_edges[_i].tmpl);
    out = render_tools(tmpl, calling, 4, &tool, 1);
    free(tmpl);
    ck_assert_msg(strcmp(out, tool_edges[_i].want) == 0, "%s\n--- got\n%s\n--- want\n%s", tool_edges[_i].tmpl, out,
                  tool_edges[_i].want);
    free(out);
}
END_TEST

static char *nested(const char *open, const char *mid, const char *close, int depth)
{
    size_t lo = strlen(open), lc = strlen(close), lm = strlen(mid);
    char *s = malloc(depth * (lo + lc) + lm + 1), *p = s;

    for (int i = 0; i < depth; i++, p += lo)
        memcpy(p, open, lo);
    memcpy(p, mid, lm), p += lm;
    for (int i = 0; i < depth; i++, p += lc)
        memcpy(p, close, lc);
    *p = '\0';
    return s;
}

/* Tool definitions and calls that Go's json.Unmarshal would refuse, or that nest past the
 * bound, are refused with what and where; none crashes. */
START_TEST(bad_tool_json_is_refused)
{
    const char *tmpl = "{{ range .Messages }}{{ range .ToolCalls }}{{ .Function.Arguments }}{{ end }}{{ end }}"
                       "{{ range .Tools }}{{ . }}{{ end }}";
    static const struct {
        const char *params, *args, *expect;
    } bad_json[] = {
        {"[1,2]", NULL, "tool 0 ('get_weather'): parameters: not a JSON object"},
        {"{\"type\":", NULL, "parameters: "},
        {"{\"properties\":5}", NULL, "properties: want an object, found a number"},
        {"{\"properties\":{\"a\":{\"type\":5}}}", NULL, "a: type: want a string or a list of strings"},
        {"{\"properties\":{\"a\":{\"type\":[\"x\",1]}}}", NULL, "want a string, found a number"},
        {"{\"required\":\"a\"}", NULL, "required: want a list, found a string"},
        {"{\"properties\":{\"a\":{\"anyOf\":[5]}}}", NULL, "anyOf: [0]: want an object"},
        {NULL, "[]", "tool call 0 ('get_weather'): arguments: not a JSON object"},
        {NULL, "{\"a\":", "arguments: "},
        {NULL, "12", "not a JSON object"},
    };
    chat_gotmpl *t = NULL;
    char *out = (char *)1;
    size_t len;

    ck_assert_int_eq(chat_gotmpl_parse(&t, tmpl, strlen(tmpl)), 0);
    for (size_t i = 0; i < sizeof bad_json / sizeof *bad_json; i++) {
        chat_tool tool = weather;
        chat_tool_call call = tokyo;
        chat_msg m[2] = {calling[0], {.role = "assistant", .tool_calls = &call, .n_tool_calls = 1}};
        if (bad_json[i].params)
            tool.parameters = bad_json[i].params;
        if (bad_json[i].args)
            call.arguments = bad_json[i].args;
        ck_assert_int_eq(chat_gotmpl_render_tools(&out, &len, t, m, 2, &tool, 1), MS_EINVALID);
        ck_assert_ptr_null(out);
        ck_assert_msg(strstr(ms_err_msg(), bad_json[i].expect), "%zu: '%s' lacks '%s'", i, ms_err_msg(),
                      bad_json[i].expect);
    }
    chat_gotmpl_free(t);
}
END_TEST

/* JSON nested past GOTMPL_MAX_JSON_DEPTH in every place it can nest, and past what jansson
 * reads at all: refused, the stack never deep. */
START_TEST(deep_tool_json_is_refused)
{
    const char *tmpl = "{{ range .Messages }}{{ range .ToolCalls }}{{ .Function.Arguments }}{{ end }}{{ end }}"
                       "{{ range .Tools }}{{ . }}{{ end }}";
    char *deep[] = {
        nested("{\"properties\":{\"a\":", "{}", "}}", 200), /* ToolProperty in ToolProperty */
        nested("{\"items\":", "1", "}", 300), /* `any` */
        nested("[", "1", "]", 100000), /* past jansson's own bound */
        nested("{\"properties\":{\"a\":{\"anyOf\":[", "{}", "]}}}", 150),
    };
    chat_gotmpl *t = NULL;
    char *out = NULL, *args;
    size_t len;

    ck_assert_int_eq(chat_gotmpl_parse(&t, tmpl, strlen(tmpl)), 0);
    for (size_t i = 0; i < sizeof deep / sizeof *deep; i++) {
        chat_tool tool = weather;
        tool.parameters = deep[i];
        ck_assert_int_eq(chat_gotmpl_render_tools(&out, &len, t, calling, 4, &tool, 1), MS_EINVALID);
        ck_assert_ptr_null(out);
        free(deep[i]);
    }
    args = nested("{\"a\":", "1", "}", 1000);
    {
        chat_tool_call call = {.name = "f", .arguments = args};
        chat_msg m = {.role = "assistant", .tool_calls = &call, .n_tool_calls = 1};
        ck_assert_int_eq(chat_gotmpl_render_tools(&out, &len, t, &m, 1, &weather, 1), MS_EINVALID);
        ck_assert_msg(strstr(ms_err_msg(), "nested deeper"), "%s", ms_err_msg());
    }
    free(args);
    chat_gotmpl_free(t);
}
END_TEST

/* Many large tools: the output bound holds for printing them and for json of them. */
START_TEST(tool_output_is_bounded)
{
    static const char *const tmpls[] = {
        "{{ range .Messages }}{{ end }}{{ range .Tools }}{{ $.Tools }}{{ end }}",
        "{{ range .Messages }}{{ end }}{{ range .Tools }}{{ $x := json $.Tools }}{{ end }}",
    };
    enum { N = 20, LEN = 1 << 20 };
    chat_tool *tools = calloc(N, sizeof *tools);
    char *desc = malloc(LEN + 1), *out = NULL;
    size_t len;

    memset(desc, '<', LEN); /* escaped: six bytes each */
    desc[LEN] = '\0';
    for (int i = 0; i < N; i++)
        tools[i] = (chat_tool){.name = "f", .description = desc};
    for (size_t i = 0; i < 2; i++) {
        chat_gotmpl *t = NULL;
        ck_assert_int_eq(chat_gotmpl_parse(&t, tmpls[i], strlen(tmpls[i])), 0);
        ck_assert_int_eq(chat_gotmpl_render_tools(&out, &len, t, calling, 1, tools, N), MS_EINVALID);
        ck_assert_ptr_null(out);
        ck_assert_msg(strstr(ms_err_msg(), "exceed"), "%s", ms_err_msg());
        chat_gotmpl_free(t);
    }
    free(desc);
    free(tools);
}
END_TEST

/* Templates with no place for tools refuse them; templates whose calls are not JSON have no
 * syntax we can give. With no tools, rendering is chat_gotmpl_render's, .Tools nil. */
START_TEST(templates_without_tools_refuse)
{
    static const char *const no_syntax[] = {
        "{{ range .Messages }}{{ .Content }}{{ end }}",
        "{{ .Tools }}{{ range .Messages }}{{ .Content }}{{ end }}",
        "{{ .Tools }}{{ range .Messages }}{{ range .ToolCalls }}<fn={{ .Function.Name }}>{{ end }}{{ end }}",
        "{{ .Tools }}{{ range .Messages }}{{ if .ToolCalls }}{\"name\": \"x\"}{{ end }}{{ end }}",
    };
    const char *plain = "{{ range .Messages }}{{ .Content }}{{ end }}";
    chat_gotmpl *t = NULL;
    chat_tool_syntax s;
    char *out = NULL, *again = NULL;
    size_t len, len2;

    for (size_t i = 0; i < sizeof no_syntax / sizeof *no_syntax; i++) {
        ck_assert_int_eq(chat_gotmpl_parse(&t, no_syntax[i], strlen(no_syntax[i])), 0);
        ck_assert_int_eq(chat_gotmpl_tool_syntax(t, &s), MS_EUNSUPPORTED);
        ck_assert_str_eq(s.prefix, "");
        chat_gotmpl_free(t);
    }
    ck_assert_int_eq(chat_gotmpl_parse(&t, plain, strlen(plain)), 0);
    ck_assert_int_eq(chat_gotmpl_render_tools(&out, &len, t, convo, 4, &weather, 1), MS_EUNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "does not support tools"));
    ck_assert_int_eq(chat_gotmpl_render_tools(&out, &len, t, convo, 4, NULL, 0), 0);
    ck_assert_int_eq(chat_gotmpl_render(&again, &len2, t, convo, 4), 0);
    ck_assert_str_eq(out, again);
    free(out);
    free(again);
    chat_gotmpl_free(t);
    out = render("{{ range .Messages }}{{ end }}{{ .Tools }}|{{ if .Tools }}x{{ end }}|{{ len .Tools }}", convo, 4);
    ck_assert_str_eq(out, "null||0"); /* as Go prints a nil templateTools */
    free(out);
}
END_TEST

Suite *gotmpl_suite(void)
{
    Suite *s = suite_create("gotmpl");
    TCase *tc = tcase_create("core");

    tcase_add_loop_test(tc, library_templates_render_as_ollama, 0, sizeof library / sizeof *library);
    tcase_add_loop_test(tc, subset_edges_render, 0, sizeof edges / sizeof *edges);
    tcase_add_loop_test(tc, refusals_name_the_line, 0, sizeof bad / sizeof *bad);
    tcase_add_test(tc, unknown_field_refused_at_render);
    tcase_add_test(tc, chat_template_uses_go_templates);
    tcase_add_test(tc, nested_ranges_are_bounded);
    tcase_add_test(tc, printf_results_are_bounded);
    tcase_add_test(tc, merging_many_messages_keeps_one_copy);
    tcase_add_loop_test(tc, tool_templates_render_as_ollama, 0, sizeof tool_templates / sizeof *tool_templates);
    tcase_add_loop_test(tc, tool_templates_syntax_as_ollama_finds_it, 0,
                        sizeof tool_templates / sizeof *tool_templates);
    tcase_add_loop_test(tc, tool_data_prints_as_go, 0, sizeof tool_edges / sizeof *tool_edges);
    tcase_add_test(tc, bad_tool_json_is_refused);
    tcase_add_test(tc, deep_tool_json_is_refused);
    tcase_add_test(tc, tool_output_is_bounded);
    tcase_add_test(tc, templates_without_tools_refuse);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(gotmpl_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
