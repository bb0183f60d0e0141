/* test_chat.c: chat templates (src/chat): family detection and renders byte-identical to what
 * jinja2 makes of the official templates (tests/data/chat: templates/, conversations.json,
 * expected.json written by render.py), the plain fallback for unknown or absent templates, and
 * template texts read from GGUF metadata. */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chat.h"
#include "chat/chat_int.h"
#include "helpers/fixture.h"

static const char *src_dir(void)
{
    return getenv("MSTORE_SRC") ? getenv("MSTORE_SRC") : ".";
}

static json_t *load_json(const char *rel)
{
    char *path = ms_strdup_printf("%s/tests/data/chat/%s", src_dir(), rel);
    json_error_t jerr;
    json_t *j = json_load_file(path, 0, &jerr);

    ck_assert_msg(j != NULL, "%s: %s", path, jerr.text);
    free(path);
    return j;
}

static char *load_template(const char *name, size_t *len)
{
    char *path = ms_strdup_printf("%s/tests/data/chat/templates/%s.jinja", src_dir(), name), *text = NULL;

    ck_assert_msg(ms_file_read(&text, len, path, 1 << 20) == 0, "%s", ms_err_msg());
    free(path);
    return text;
}

/* Conversation i of conversations.json as chat_msg (borrowed from the JSON). */
static chat_msg *conversation(json_t *convs, size_t i, size_t *n)
{
    json_t *c = json_array_get(convs, i), *m;
    chat_msg *msgs = calloc(json_array_size(c) + 1, sizeof *msgs);
    size_t k;

    ck_assert_ptr_nonnull(msgs);
    json_array_foreach(c, k, m)
    {
        msgs[k].role = json_string_value(json_object_get(m, "role"));
        msgs[k].content = json_string_value(json_object_get(m, "content"));
    }
    *n = json_array_size(c);
    return msgs;
}

/* Every template of expected.json: the family, then each render. */
START_TEST(renders_match_jinja2)
{
    json_t *expected = load_json("expected.json"), *convs = load_json("conversations.json"), *spec;
    const char *name;
    size_t n_checked = 0, n_templates = 0;

    json_object_foreach(expected, name, spec)
    {
        const char *family = json_string_value(json_object_get(spec, "family"));
        json_t *renders = json_object_get(spec, "renders"), *r;
        size_t len, i;
        char *text = load_template(name, &len);
        chat_template *t;

        ck_assert_int_eq(chat_template_new(&t, text, len, json_string_value(json_object_get(spec, "bos")),
                                           json_string_value(json_object_get(spec, "eos"))),
                         0);
        ck_assert_msg(strcmp(chat_family_name(chat_template_family(t)), family) == 0, "%s: family %s, want %s", name,
                      chat_family_name(chat_template_family(t)), family);
        /* Every one is Jinja mstore runs: rendered exactly, no warning, whatever its family. */
        ck_assert_msg(chat_template_warning(t) == NULL, "%s: warning '%s'", name, chat_template_warning(t));
        json_array_foreach(renders, i, r)
        {
            size_t ci = (size_t)json_integer_value(json_object_get(r, "conv")), n, out_len;
            int gen = json_is_true(json_object_get(r, "gen"));
            const char *want = json_string_value(json_object_get(r, "text"));
            chat_msg *msgs = conversation(convs, ci, &n);
            char *out;
            int rc = chat_render(&out, &out_len, t, msgs, n, gen);

            if (want) {
                ck_assert_msg(rc == 0, "%s conv %zu: %s", name, ci, ms_err_msg());
                ck_assert_msg(out_len == strlen(want) && memcmp(out, want, out_len) == 0,
                              "%s conv %zu gen %d:\n got '%s'\nwant '%s'", name, ci, gen, out, want);
                n_checked++;
            } else if (!want) {
                /* The template raises: so do we, with its message */
                const char *err = json_string_value(json_object_get(r, "error"));
                ck_assert_int_eq(rc, MS_EINVALID);
                ck_assert_msg(strstr(ms_err_msg(), err), "%s conv %zu: '%s', want '%s'", name, ci, ms_err_msg(), err);
                ck_assert_ptr_null(out);
            }
            if (rc == 0)
                ck_assert_uint_eq(strlen(out), out_len);
            free(out);
            free(msgs);
        }
        chat_template_free(t);
        free(text);
        n_templates++;
    }
    ck_assert_uint_ge(n_templates, 10);
    ck_assert_uint_ge(n_checked, 120);
    json_decref(expected);
    json_decref(convs);
}
END_TEST

/* Templates that are no template, or odd ones: plain or a family, never a failure. */
/* A tools.json case as chat_msg / chat_tool: strings borrowed from the JSON, the JSON texts of
 * parameters and arguments written compactly by jansson (the order of keys kept) and owned here. */
typedef struct tool_case {
    chat_msg *msgs;
    chat_tool_call *calls;
    chat_tool *tools;
    char *texts[64];
    size_t n_msgs, n_tools, n_texts;
} tool_case;

static const char *dump(tool_case *c, const json_t *v)
{
    if (!v)
        return NULL;
    ck_assert_uint_lt(c->n_texts, 64);
    c->texts[c->n_texts] = json_dumps(v, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY);
    ck_assert_ptr_nonnull(c->texts[c->n_texts]);
    return c->texts[c->n_texts++];
}

static void tool_case_load(tool_case *c, const json_t *tc)
{
    json_t *msgs = json_object_get(tc, "messages"), *tools = json_object_get(tc, "tools"), *m, *x;
    size_t i, k, n_calls = 0;

    memset(c, 0, sizeof *c);
    c->msgs = calloc(json_array_size(msgs) + 1, sizeof *c->msgs);
    c->calls = calloc(64, sizeof *c->calls);
    c->tools = calloc(json_array_size(tools) + 1, sizeof *c->tools);
    ck_assert(c->msgs && c->calls && c->tools);
    json_array_foreach(tools, i, x)
    {
        json_t *fn = json_object_get(x, "function");
        c->tools[i].name = json_string_value(json_object_get(fn, "name"));
        c->tools[i].description = json_string_value(json_object_get(fn, "description"));
        c->tools[i].parameters = dump(c, json_object_get(fn, "parameters"));
    }
    c->n_tools = json_array_size(tools);
    json_array_foreach(msgs, i, m)
    {
        c->msgs[i].role = json_string_value(json_object_get(m, "role"));
        c->msgs[i].content = json_string_value(json_object_get(m, "content"));
        c->msgs[i].tool_name = json_string_value(json_object_get(m, "name"));
        c->msgs[i].tool_call_id = json_string_value(json_object_get(m, "tool_call_id"));
        c->msgs[i].tool_calls = c->calls + n_calls;
        json_array_foreach(json_object_get(m, "tool_calls"), k, x)
        {
            json_t *fn = json_object_get(x, "function");
            ck_assert_uint_lt(n_calls, 64);
            c->calls[n_calls].id = json_string_value(json_object_get(x, "id"));
            c->calls[n_calls].name = json_string_value(json_object_get(fn, "name"));
            c->calls[n_calls++].arguments = dump(c, json_object_get(fn, "arguments"));
            c->msgs[i].n_tool_calls++;
        }
    }
    c->n_msgs = json_array_size(msgs);
}

static void tool_case_free(tool_case *c)
{
    for (size_t i = 0; i < c->n_texts; i++)
        free(c->texts[i]);
    free(c->msgs);
    free(c->calls);
    free(c->tools);
}

/* One tool render of expected.json: the text byte for byte, the template's own refusal
 * (MS_EINVALID with its message), or, for a template mstore renders no tools for,
 * MS_EUNSUPPORTED naming the family. */
static int check_tool_render(const char *name, chat_template *t, const json_t *r, const tool_case *c)
{
    const char *want = json_string_value(json_object_get(r, "text"));
    const char *err = json_string_value(json_object_get(r, "error"));
    int gen = json_is_true(json_object_get(r, "gen"));
    size_t ci = (size_t)json_integer_value(json_object_get(r, "conv")), out_len;
    char *out;
    int rc = chat_render_tools(&out, &out_len, t, c->msgs, c->n_msgs, c->tools, c->n_tools, gen);

    if (json_is_true(json_object_get(r, "unsupported"))) {
        ck_assert_msg(rc == MS_EUNSUPPORTED, "%s tools %zu: rc %d", name, ci, rc);
        ck_assert_ptr_nonnull(strstr(ms_err_msg(), chat_family_name(chat_template_family(t))));
        ck_assert_ptr_null(out);
        return 0;
    }
    if (err) {
        ck_assert_msg(rc == MS_EINVALID, "%s tools %zu: rc %d", name, ci, rc);
        ck_assert_msg(strstr(ms_err_msg(), err), "%s tools %zu: '%s'", name, ci, ms_err_msg());
        ck_assert_ptr_null(out);
        return 0;
    }
    ck_assert_msg(rc == 0, "%s tools %zu: %s", name, ci, ms_err_msg());
    ck_assert_msg(out_len == strlen(want) && memcmp(out, want, out_len) == 0,
                  "%s tools %zu gen %d:\n got '%s'\nwant '%s'", name, ci, gen, out, want);
    free(out);
    return 1;
}

/* Tool definitions, calls and results (tools.json) in every template of expected.json. */
START_TEST(tool_renders_match_jinja2)
{
    json_t *expected = load_json("expected.json"), *cases = load_json("tools.json"), *spec, *r;
    const char *name;
    size_t n_checked = 0, n_refused = 0, i;

    json_object_foreach(expected, name, spec)
    {
        size_t len;
        char *text = load_template(name, &len);
        chat_template *t;
        chat_tool_syntax syn;

        ck_assert_int_eq(chat_template_new(&t, text, len, json_string_value(json_object_get(spec, "bos")),
                                           json_string_value(json_object_get(spec, "eos"))),
                         0);
        /* a template renders tools exactly when its model's calls can be read back */
        ck_assert_int_eq(chat_template_tool_syntax(t, &syn),
                         json_is_true(json_object_get(spec, "tools")) ? 0 : MS_EUNSUPPORTED);
        json_array_foreach(json_object_get(spec, "tool_renders"), i, r)
        {
            tool_case c;
            tool_case_load(&c, json_array_get(cases, (size_t)json_integer_value(json_object_get(r, "conv"))));
            if (check_tool_render(name, t, r, &c))
                n_checked++;
            else
                n_refused++;
            tool_case_free(&c);
        }
        chat_template_free(t);
        free(text);
    }
    ck_assert_uint_ge(n_checked, 36);
    ck_assert_uint_ge(n_refused, 100);
    json_decref(expected);
    json_decref(cases);
}
END_TEST

/* pyjson.c against Python: json.dumps(json.loads(in), ensure_ascii=False[, indent=4]), as
 * written by Python 3.11 (duplicate keys, float repr, escapes, empty containers). */
static const struct {
    const char *in, *flat, *indented;
} pyjson[] = {
    {"{\"a\": 1, \"b\": 2, \"a\": 3}", "{\"a\": 3, \"b\": 2}", "{\n    \"a\": 3,\n    \"b\": 2\n}"},
    {"[0.1, 1e22, 1e16, 9999999999999998.0, 123456789012345678, -1e-300, 5e-324, 1.7976931348623157e308, "
     "0.30000000000000004, 100.0, 1E2, -0.5, -0.0, 0]",
     "[0.1, 1e+22, 1e+16, 9999999999999998.0, 123456789012345678, -1e-300, 5e-324, 1.7976931348623157e+308, "
     "0.30000000000000004, 100.0, 100.0, -0.5, -0.0, 0]",
     "[\n    0.1,\n    1e+22,\n    1e+16,\n    9999999999999998.0,\n    123456789012345678,\n    -1e-300,\n    "
     "5e-324,\n    1.7976931348623157e+308,\n    0.30000000000000004,\n    100.0,\n    100.0,\n    -0.5,\n    -0.0,\n  "
     "  0\n]"},
    {"{\"key\": \"v\\u0000al\", \"\\u00e9\": \"\\ud83d\\ude42\\u2028<>&'\", \"c\": "
     "\"\\u001f\\u007f\\b\\f\\r\\t\\n\\\"\\\\/\"}",
     "{\"key\": \"v\\u0000al\", \"\303\251\": \"\360\237\231\202\342\200\250<>&'\", \"c\": "
     "\"\\u001f\177\\b\\f\\r\\t\\n\\\"\\\\/\"}",
     "{\n    \"key\": \"v\\u0000al\",\n    \"\303\251\": \"\360\237\231\202\342\200\250<>&'\",\n    \"c\": "
     "\"\\u001f\177\\b\\f\\r\\t\\n\\\"\\\\/\"\n}"},
    {"\"just a string\"", "\"just a string\"", "\"just a string\""},
    {"{\"nested\": {\"deep\": [[], {}, [{}]]}}", "{\"nested\": {\"deep\": [[], {}, [{}]]}}",
     "{\n    \"nested\": {\n        \"deep\": [\n            [],\n            {},\n            [\n                {}\n "
     "           ]\n        ]\n    }\n}"},
    {"[true, false, null, -9223372036854775808]", "[true, false, null, -9223372036854775808]",
     "[\n    true,\n    false,\n    null,\n    -9223372036854775808\n]"},
    {"{}", "{}", "{}"},
    {"[]", "[]", "[]"},
};

START_TEST(tojson_as_python)
{
    chat_buf b = {NULL, 0, 0, 0};

    ck_assert_int_eq(chat__tojson(&b, pyjson[_i].in, 0, "x"), 0);
    ck_assert_str_eq(b.p, pyjson[_i].flat);
    b.n = 0;
    ck_assert_int_eq(chat__tojson(&b, pyjson[_i].in, 4, "x"), 0);
    ck_assert_str_eq(b.p, pyjson[_i].indented);
    ck_assert(!b.oom);
    free(b.p);
    b = (chat_buf){NULL, 0, 0, 0};
    ck_assert_int_eq(chat__tojson(&b, "{\"a\": ", 0, "tool 'f': arguments"), MS_EINVALID);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "tool 'f': arguments: not JSON"));
    free(b.p);
}
END_TEST

/* Tool calls read back from answers: Qwen's tags, Llama 3.1's bare object, Mistral's array. */
static const chat_tool_syntax syntaxes[] = {
    {.prefix = "<tool_call>\n", .suffix = "\n</tool_call>", .args_key = "arguments"},
    {.prefix = "", .suffix = "", .args_key = "parameters"},
    {.prefix = "[TOOL_CALLS]", .suffix = "", .args_key = "arguments", .array = 1},
    {.prefix = "Action: ```json\n", .suffix = "```", .args_key = "parameters", .name_key = "tool_name", .array = 1},
};
#define ALL ((size_t)-1) /* content_len: the whole answer (no calls) */
/* want: "name arguments" for each call, one a line */
static const struct {
    int syn;
    const char *text;
    size_t content_len;
    const char *want;
} answers[] = {
    {0,
     "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"S\xc3\xa3o Paulo\", \"n\": "
     "1.50}}\n</tool_call>",
     0, "get_weather {\"city\":\"S\xc3\xa3o Paulo\",\"n\":1.5}"},
    {0,
     "Let me check.\n<tool_call>{\"name\":\"a\",\"arguments\":{\"x\":[1,{}]}}</tool_call>\n\n<tool_call>\n {\"name\": "
     "\"b\", \"arguments\": {}} \n</tool_call> and then",
     14, "a {\"x\":[1,{}]}\nb {}"},
    {0, "<tool_call>{\"name\":\"a\",\"arguments\":\"{\\\"x\\\": 1}\"}</tool_call>", 0,
     "a {\"x\":1}"}, /* arguments in a string */
    {0, "<tool_call>{\"name\":\"a\",\"parameters\":{\"y\":[1,2]}}", 0,
     "a {\"y\":[1,2]}"}, /* the other key, no suffix */
    {0, "<tool_call>{\"name\":\"a\",\"arguments\":{\"s\":\"}{\\\"]</tool_call>\"}}</tool_call>", 0,
     "a {\"s\":\"}{\\\"]</tool_call>\"}"}, /* tags in strings */
    {0, "<tool_call>{\"name\":\"a\"}</tool_call>", 0, "a {}"}, /* no arguments: none needed */
    {0, "x <tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": ", ALL, ""}, /* truncated */
    {0, "<tool_call> hello </tool_call>", ALL, ""}, /* no JSON */
    {0, "<tool_call>{\"arguments\": {}}</tool_call>", ALL, ""}, /* no name */
    {0, "<tool_call>{\"name\": \"\", \"arguments\": {}}</tool_call>", ALL, ""},
    {0, "<tool_call>{\"name\": 7, \"arguments\": {}}</tool_call>", ALL, ""},
    {0, "<tool_call>{\"name\": \"a\", \"arguments\": 5}</tool_call>", ALL, ""}, /* arguments not an object */
    {0, "<tool_call>{\"name\": \"a\", \"arguments\": \"{oops\"}</tool_call>", ALL, ""},
    {0, "<tool_call>{\"name\":\"\xff\",\"arguments\":{}}</tool_call>", ALL, ""}, /* not UTF-8 */
    {0, "<tool_call>{\"name\":\"a\",\"arguments\":{}}</tool_call><tool_call>{bad", 0, "a {}"}, /* the good one kept */
    {0, "<tool_call>{\"name\":\"a\",\"arguments\":{}}</tool_call>text<tool_call>{\"name\":\"b\",\"arguments\":{}}", 0,
     "a {}"}, /* text ends the calls */
    {0, "Just text, no call at all.", ALL, ""},
    {0, "", ALL, ""},
    {1, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}", 0, "get_weather {\"city\":\"Paris\"}"},
    {1, " \n<|python_tag|>{\"name\": \"f\", \"arguments\": {}}", 2, "f {}"},
    {1, "{\"name\": \"f\", \"parameters\": {\"a\": 1}}; {\"name\": \"g\", \"parameters\": {}}", 0, "f {\"a\":1}\ng {}"},
    {1, "{\"name\": \"f\"}", ALL, ""}, /* a JSON answer, not a call */
    {1, "{\"a\": 1}", ALL, ""},
    {1, "The call is {\"name\": \"f\", \"parameters\": {}}", ALL, ""},
    {1, "{\"name\": \"f\", \"parameters\": {}", ALL, ""},
    {1, "<|python_tag|>", ALL, ""},
    {2, "[TOOL_CALLS] [{\"name\": \"a\", \"arguments\": {\"x\": 1}}, {\"name\": \"b\", \"arguments\": {}}]", 0,
     "a {\"x\":1}\nb {}"},
    {2, "ok [TOOL_CALLS][{\"name\": \"a\", \"arguments\": {}}, {\"nope\": 1}]", 3, "a {}"},
    {2, "[TOOL_CALLS] []", ALL, ""},
    {2, "[TOOL_CALLS]", ALL, ""},
    {3, "Action: ```json\n[{\"tool_name\": \"f\", \"parameters\": {\"q\": 1}}]\n```", 0,
     "f {\"q\":1}"}, /* Command R+ */
    {3, "Action: ```json\n[{\"name\": \"f\", \"parameters\": {}}]```", ALL, ""}, /* its name key, not another */
};

START_TEST(tool_calls_read_back)
{
    size_t len = strlen(answers[_i].text), n, content_len;
    chat_tool_call *calls;

    ck_assert_int_eq(chat_tool_calls_parse(&syntaxes[answers[_i].syn], answers[_i].text, len, &calls, &n, &content_len),
                     0);
    char got[512] = "";

    ck_assert_uint_eq(content_len, answers[_i].content_len == ALL ? len : answers[_i].content_len);
    ck_assert(n > 0 ? calls != NULL : calls == NULL);
    for (size_t k = 0; k < n; k++) {
        ck_assert_ptr_null(calls[k].id); /* the server gives ids */
        snprintf(got + strlen(got), sizeof got - strlen(got), "%s%s %s", k ? "\n" : "", calls[k].name,
                 calls[k].arguments);
    }
    ck_assert_str_eq(got, answers[_i].want);
    chat_tool_calls_free(calls, n);
}
END_TEST

/* Garbage never crashes nor gives a call without a name and an object: every truncation of
 * answers, deep nesting, many calls (bounded), random bytes. */
static void parse_checked(const chat_tool_syntax *s, const char *text, size_t len, size_t *n)
{
    size_t content_len;
    chat_tool_call *calls;

    ck_assert_int_eq(chat_tool_calls_parse(s, text, len, &calls, n, &content_len), 0);
    ck_assert_uint_le(content_len, len);
    ck_assert_uint_le(*n, 64);
    for (size_t k = 0; k < *n; k++) {
        json_t *a = json_loads(calls[k].arguments, 0, NULL);
        ck_assert(calls[k].name[0] != '\0' && json_is_object(a));
        json_decref(a);
    }
    chat_tool_calls_free(calls, *n);
}

START_TEST(tool_calls_garbage)
{
    size_t n, big = 200000;
    char *deep = malloc(big + 32), *many = malloc(100 * 64);
    unsigned seed = 1;

    ck_assert(deep && many);
    for (size_t i = 0; i < sizeof answers / sizeof *answers; i++)
        for (size_t len = 0; len <= strlen(answers[i].text); len++)
            for (int s = 0; s < 3; s++)
                parse_checked(&syntaxes[s], answers[i].text, len, &n);
    for (int s = 0; s < 3; s++) {
        size_t o = (size_t)sprintf(deep, "%s", syntaxes[s].prefix);
        memset(deep + o, s == 1 ? '{' : '[', big);
        parse_checked(&syntaxes[s], deep, o + big, &n);
        ck_assert_uint_eq(n, 0);
    }
    many[0] = '\0';
    for (int k = 0; k < 100; k++)
        strcat(many, "<tool_call>{\"name\":\"f\",\"arguments\":{}}</tool_call>");
    parse_checked(&syntaxes[0], many, strlen(many), &n);
    ck_assert_uint_eq(n, 64);
    for (int round = 0; round < 2000; round++) {
        static const char alphabet[] = "{}[]\":,ab \\n<tool_call>\xff\x80";
        char buf[96];
        for (size_t i = 0; i < sizeof buf; i++) /* mostly JSON punctuation, some of the tags */
            buf[i] = alphabet[((seed = seed * 1103515245 + 12345) >> 16) % (sizeof alphabet - 1)];
        parse_checked(&syntaxes[round % 3], buf, sizeof buf, &n);
    }
    free(deep);
    free(many);
}
END_TEST

static const struct {
    const char *text;
    size_t len; /* 0: strlen */
    const char *family, *warning;
} odd[] = {
    {"", 0, "plain", "no chat template"},
    /* a template of no family that parses as Jinja renders itself, exactly: no warning */
    {"{{ messages }}", 0, "plain", NULL},
    {"[INST] {{ m }} [/INST]", 0, "plain", NULL},
    {"{% for m in messages %}<|im_start|>{{ m.role }}", 0, "chatml", NULL},
    {"<|im_start|>system\\n", 0, "chatml", NULL}, /* a default system prompt without its end */
    {"<|start_header_id|> <|end_header_id|> Cutting Knowledge Date", 0, "llama3", NULL},
    {"x\0<|im_start|>", 14, "plain", "of no family"}, /* what follows a NUL is not looked at */
    {"{{ '<|user|>' }}", 0, "plain", NULL}, /* <|user|> alone is not Phi-3 */
    {"{{ '<|user|>' ", 0, "plain", "of no family"}, /* nor Jinja */
    /* Go outside the subset that parses as Jinja but fails there: the family, as before */
    {"{{ if .System }}<|im_start|>{{ printf2 .System }}{{ end }}", 0, "chatml", "outside the subset"},
};

START_TEST(odd_templates_fall_back)
{
    chat_template *t;
    const chat_msg msgs[] = {{.role = "system", .content = "S"},
                             {.role = "user", .content = "U"},
                             {.role = "assistant", .content = "A"},
                             {.role = "user", .content = NULL},
                             {.role = NULL, .content = "no role"}};
    size_t len = odd[_i].len ? odd[_i].len : strlen(odd[_i].text), out_len;
    char *out;

    ck_assert_int_eq(chat_template_new(&t, odd[_i].text, len, NULL, NULL), 0);
    ck_assert_str_eq(chat_family_name(chat_template_family(t)), odd[_i].family);
    if (odd[_i].warning)
        ck_assert_msg(chat_template_warning(t) && strstr(chat_template_warning(t), odd[_i].warning), "'%s'",
                      chat_template_warning(t) ? chat_template_warning(t) : "(none)");
    else
        ck_assert_ptr_null(chat_template_warning(t));
    ck_assert_int_eq(chat_render(&out, &out_len, t, msgs, 5, 1), 0);
    ck_assert_uint_eq(strlen(out), out_len);
    free(out);
    ck_assert_int_eq(chat_render(&out, &out_len, t, NULL, 0, 0), 0);
    ck_assert_ptr_nonnull(out);
    free(out);
    chat_template_free(t);
}
END_TEST

START_TEST(plain_rendering)
{
    chat_template *t;
    const chat_msg msgs[] = {{.role = "system", .content = "be kind"}, {.role = "user", .content = "hi"}};
    char *out;
    size_t len;

    /* a template of no family that does not parse as Jinja: role lines */
    ck_assert_int_eq(chat_template_new(&t, "{{ messages ", 12, "<s>", "</s>"), 0);
    ck_assert_int_eq(chat_template_family(t), CHAT_PLAIN);
    ck_assert_int_eq(chat_render(&out, &len, t, msgs, 2, 1), 0);
    ck_assert_str_eq(out, "system: be kind\nuser: hi\nassistant: ");
    free(out);
    chat_template_free(t);
}
END_TEST

/* No template: ollama's "{{ .Prompt }}", the user messages' contents and nothing else, so that
 * a chat of one message is the bare prompt `mstore run` sends (issue 40 item 13). */
START_TEST(no_template_renders_bare_prompt)
{
    chat_template *t;
    const chat_msg msgs[] = {{.role = "system", .content = "be kind"},
                             {.role = "user", .content = "hi"},
                             {.role = "assistant", .content = "hello"},
                             {.role = "user", .content = " again"}};
    char *out;
    size_t len;

    ck_assert_int_eq(chat_template_new(&t, NULL, 0, "<s>", "</s>"), 0);
    ck_assert_int_eq(chat_template_family(t), CHAT_PLAIN);
    ck_assert_int_eq(chat_render(&out, &len, t, msgs + 1, 1, 1), 0);
    ck_assert_str_eq(out, "hi");
    free(out);
    ck_assert_int_eq(chat_render(&out, &len, t, msgs, 4, 1), 0);
    ck_assert_str_eq(out, "hi again");
    ck_assert_uint_eq(len, 8);
    free(out);
    chat_template_free(t);
}
END_TEST

/* The Phi-3 vocab GGUF carries its template: read back byte for byte as in templates/phi3.jinja. */
START_TEST(template_text_from_gguf)
{
    char *models = fixture_models_dir(), *path, *text, *want;
    size_t len, want_len;
    gguf_file *g;

    if (!models) {
        printf("test_chat: skipped: shared models not found\n");
        return;
    }
    path = ms_strdup_printf("%s/vocab/ggml-vocab-phi-3.gguf", models);
    ck_assert_int_eq(gguf_open(&g, path), 0);
    ck_assert_int_eq(chat_template_text_gguf(&text, &len, g), 0);
    want = load_template("phi3", &want_len);
    ck_assert_uint_eq(len, want_len);
    ck_assert_int_eq(memcmp(text, want, len), 0);
    ck_assert_uint_eq(strlen(text), len);
    free(text);
    free(want);
    gguf_close(g);
    free(path);

    path = ms_strdup_printf("%s/vocab/ggml-vocab-gpt-2.gguf", models);
    ck_assert_int_eq(gguf_open(&g, path), 0);
    ck_assert_int_eq(chat_template_text_gguf(&text, &len, g), MS_ENOTFOUND);
    ck_assert_ptr_null(text);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "tokenizer.chat_template not found"));
    gguf_close(g);
    free(path);
    free(models);
}
END_TEST

/* stories260K with a chat template added: every kv and tensor of the source copied through the
 * GGUF writer, then tokenizer.chat_template. The e2e chat test makes its model this way too
 * (main below, with $MSTORE_CHAT_WRITE_GGUF). */
static int write_templated(const char *src, const char *dst, const char *tmpl, size_t tmpl_len, long eos)
{
    gguf_file *g = NULL;
    gguf_writer *w = NULL;
    int rc;

    if ((rc = gguf_open(&g, src)) < 0 || (rc = gguf_writer_new(&w, gguf_version(g), gguf_alignment(g))) < 0)
        goto done;
    for (size_t i = 0; i < gguf_kv_count(g) && rc == 0; i++) {
        const uint8_t *val;
        size_t len;
        const char *key = gguf_kv_key(g, i);
        if (strcmp(key, "tokenizer.chat_template") == 0 ||
            (strcmp(key, "general.alignment") == 0 && gguf_alignment(g) == 32) ||
            (eos >= 0 && strcmp(key, "tokenizer.ggml.eos_token_id") == 0))
            continue;
        gguf_kv_value(g, i, &val, &len);
        rc = gguf_writer_set_raw(w, key, gguf_kv_type(g, i), val, len);
    }
    if (rc == 0)
        rc = gguf_writer_set_str(w, "tokenizer.chat_template", tmpl, tmpl_len);
    if (rc == 0 && eos >= 0)
        rc = gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)eos);
    for (size_t i = 0; i < gguf_tensor_count(g) && rc == 0; i++) {
        const gguf_tensor *t = gguf_tensor_at(g, i);
        rc = gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, t->nbytes);
    }
    if (rc == 0)
        rc = gguf_writer_write_file(w, dst);
done:
    gguf_writer_free(w);
    gguf_close(g);
    return rc;
}

START_TEST(templated_gguf_round_trip)
{
    char *models = fixture_models_dir(), *dir, *src, *dst, *tmpl, *text;
    size_t tmpl_len, len;
    gguf_file *g, *orig;

    if (!models) {
        printf("test_chat: skipped: shared models not found\n");
        return;
    }
    dir = fixture_tmpdir();
    src = ms_strdup_printf("%s/stories260K/stories260K.gguf", models);
    dst = ms_strdup_printf("%s/chatml.gguf", dir);
    tmpl = load_template("qwen2", &tmpl_len);
    ck_assert_msg(write_templated(src, dst, tmpl, tmpl_len, -1) == 0, "%s", ms_err_msg());
    ck_assert_int_eq(gguf_open(&g, dst), 0);
    ck_assert_int_eq(gguf_open(&orig, src), 0);
    ck_assert_uint_eq(gguf_kv_count(g), gguf_kv_count(orig) + 1);
    ck_assert_uint_eq(gguf_tensor_count(g), gguf_tensor_count(orig));
    for (size_t i = 0; i < gguf_tensor_count(g); i++) {
        const gguf_tensor *a = gguf_tensor_at(g, i), *b = gguf_tensor_at(orig, i);
        ck_assert_str_eq(a->name, b->name);
        ck_assert_uint_eq(a->nbytes, b->nbytes);
        ck_assert_int_eq(memcmp(a->data, b->data, a->nbytes), 0);
    }
    ck_assert_int_eq(chat_template_text_gguf(&text, &len, g), 0);
    ck_assert_uint_eq(len, tmpl_len);
    ck_assert_int_eq(memcmp(text, tmpl, len), 0);
    free(text);
    gguf_close(g);
    gguf_close(orig);
    free(tmpl);
    free(src);
    free(dst);
    fixture_rmrf(dir);
    free(models);
}
END_TEST

Suite *chat_suite(void)
{
    Suite *s = suite_create("chat");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, renders_match_jinja2);
    tcase_add_test(tc, tool_renders_match_jinja2);
    tcase_add_loop_test(tc, tojson_as_python, 0, sizeof pyjson / sizeof *pyjson);
    tcase_add_loop_test(tc, tool_calls_read_back, 0, sizeof answers / sizeof *answers);
    tcase_add_test(tc, tool_calls_garbage);
    tcase_add_loop_test(tc, odd_templates_fall_back, 0, sizeof odd / sizeof *odd);
    tcase_add_test(tc, plain_rendering);
    tcase_add_test(tc, no_template_renders_bare_prompt);
    tcase_add_test(tc, template_text_from_gguf);
    tcase_add_test(tc, templated_gguf_round_trip);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr;
    int failed;

    /* Llama 3.2's template dates its system turn with strftime_now: the day jinja2 rendered
     * tests/data/chat's texts without it (its fallback, 26 Jul 2024) */
    setenv("SOURCE_DATE_EPOCH", "1721995200", 1);

    /* Fixture mode for tests/e2e/t5201-run-chat.sh: write stories260K with the Qwen 2 (ChatML)
     * template to $MSTORE_CHAT_WRITE_GGUF (and eos_token_id $MSTORE_CHAT_EOS if set), and stop.
     * $MSTORE_CHAT_TEMPLATE names another template file (tests/e2e/t6040). */
    if (getenv("MSTORE_CHAT_WRITE_GGUF")) {
        char *models = fixture_models_dir(), *src, *tmpl;
        size_t len;
        int rc;

        if (!models)
            return 77;
        char *tpath = getenv("MSTORE_CHAT_TEMPLATE") ? ms_strdup_printf("%s", getenv("MSTORE_CHAT_TEMPLATE"))
                                                     : ms_strdup_printf("%s/tests/data/chat/templates/qwen2.jinja", src_dir());

        src = ms_strdup_printf("%s/stories260K/stories260K.gguf", models);
        tmpl = NULL; /* no ck_assert here: Check's asserts need a running test */
        if ((rc = ms_file_read(&tmpl, &len, tpath, 1 << 20)) == 0)
            rc = write_templated(src, getenv("MSTORE_CHAT_WRITE_GGUF"), tmpl, len,
                                 getenv("MSTORE_CHAT_EOS") ? atol(getenv("MSTORE_CHAT_EOS")) : -1);
        free(tpath);
        if (rc < 0)
            fprintf(stderr, "test_chat: %s\n", ms_err_msg());
        free(src);
        free(tmpl);
        free(models);
        return rc < 0 ? 1 : 0;
    }
    sr = srunner_create(chat_suite());

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
