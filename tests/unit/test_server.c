/* test_server.c: what the server decides at a request's headers (src/server/gate.c): which
 * browser origins are allowed (ollama's defaults, MSTORE_ORIGINS, one '*' an entry) and which
 * Host names are this machine's when it listens on loopback; and what the request readers
 * (src/server/request.c) make of a body's format fields, and of the embedding endpoints'
 * bodies. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server_int.h"

static const struct {
    const char *extra, *origin;
    int allowed;
} origin_cases[] = {
    {NULL, "http://localhost", 1},
    {NULL, "http://localhost:3000", 1},
    {NULL, "https://127.0.0.1:8443", 1},
    {NULL, "http://0.0.0.0:5173", 1},
    {NULL, "HTTP://LOCALHOST:3000", 1}, /* scheme and host are case-insensitive */
    {NULL, "app://obsidian.md", 1},
    {NULL, "file://", 1},
    {NULL, "tauri://localhost", 1},
    {NULL, "vscode-webview://1234", 1},
    {NULL, "chrome-extension://abcdef", 1},
    {NULL, "http://evil.example", 0},
    {NULL, "http://localhost.evil.example", 0},
    {NULL, "http://127.0.0.1.evil.example", 0},
    {NULL, "https://evil.example:443", 0},
    {NULL, "null", 0}, /* sandboxed frames, data: pages */
    {NULL, "", 0},
    {"https://chat.example.com", "https://chat.example.com", 1},
    {"https://chat.example.com", "http://chat.example.com", 0},
    {" https://a.example , ,https://b.example ", "https://b.example", 1}, /* spaces, empty entries */
    {"http://*.lan.example:8080", "http://box.lan.example:8080", 1},
    {"http://*.lan.example:8080", "http://box.lan.example:8081", 0},
    {"http://a*a", "http://a", 0}, /* prefix and suffix never overlap */
    {"*", "http://anything.example", 1},
    {"https://chat.example.com", "http://localhost:3000", 1}, /* the defaults stay */
};

START_TEST(origins_allowed_as_ollama_allows_them)
{
    srv_origins *o;

    ck_assert_int_eq(srv_origins_new(&o, origin_cases[_i].extra), 0);
    ck_assert_msg(srv_origin_allowed(o, origin_cases[_i].origin) == origin_cases[_i].allowed, "%s with '%s'",
                  origin_cases[_i].origin, origin_cases[_i].extra ? origin_cases[_i].extra : "");
    ck_assert_int_eq(srv_origin_allowed(o, NULL), 1); /* no Origin: not a browser's cross-site request */
    srv_origins_free(o);
}
END_TEST

START_TEST(origins_refuse_two_wildcards_in_an_entry)
{
    srv_origins *o = (srv_origins *)1;

    ck_assert_int_eq(srv_origins_new(&o, "https://ok.example,http://*.a.*"), MS_EINVALID);
    ck_assert_ptr_null(o);
    ck_assert_str_eq(ms_err_msg(), "MSTORE_ORIGINS: 'http://*.a.*': at most one '*' in an origin");
}
END_TEST

static const struct {
    const char *host;
    int allowed;
} host_cases[] = {
    {NULL, 1}, /* HTTP/1.0 */
    {"", 1},
    {"localhost", 1},
    {"LocalHost:11434", 1},
    {"127.0.0.1", 1},
    {"127.0.0.1:11434", 1},
    {"127.1.2.3", 1},
    {"[::1]:11434", 1},
    {"[::1]", 1},
    {"::1", 1}, /* unbracketed, as ollama takes a host without a port */
    {"[::ffff:127.0.0.1]:80", 1},
    {"0.0.0.0", 1},
    {"10.0.0.7", 1},
    {"172.16.0.1", 1},
    {"172.32.0.1", 0},
    {"192.168.1.20:8080", 1},
    {"[fd00::1]", 1},
    {"app.localhost", 1},
    {"printer.local", 1},
    {"host.docker.internal", 1},
    {"testhost", 1}, /* the machine's own name */
    {"TESTHOST:11434", 1},
    {"evil.example", 0},
    {"evil.example:11434", 0},
    {"localhost.evil.example", 0},
    {"127.0.0.1.nip.io", 0},
    {"8.8.8.8", 0},
    {"[2001:4860:4860::8888]:80", 0},
    {"[::1", 0},
    {"[::1]x", 0},
    {"localhost.", 0},
    {"local", 0},
};

START_TEST(hosts_allowed_name_this_machine)
{
    ck_assert_msg(srv_host_allowed(host_cases[_i].host, "testhost") == host_cases[_i].allowed, "Host '%s'",
                  host_cases[_i].host ? host_cases[_i].host : "(none)");
}
END_TEST

/* A body through the reader of its API; the job's format afterwards in *format (copied), the
 * reader's code returned. */
static int read_format(const char *body, int openai, int chat, char *format, size_t cap)
{
    json_t *b = json_loads(body, 0, NULL);
    gen_job j = {0};
    const char *p, *q;
    int rc;

    ck_assert_ptr_nonnull(b);
    model_opts_defaults(&j.mo);
    rc = openai ? srv_openai_fields(&j, b, chat, &p) : srv_ollama_fields(&j, b, chat, &p, &q);
    snprintf(format, cap, "%s", j.mo.format ? j.mo.format : "(none)");
    srv_request_fields_free(&j);
    json_decref(b);
    return rc;
}

static const struct {
    int openai, chat;
    const char *body, *rc_or_format; /* what mo.format holds, or the start of the error message */
} format_cases[] = {
    {0, 0, "{\"prompt\": \"x\"}", "(none)"},
    {0, 0, "{\"prompt\": \"x\", \"format\": \"\"}", "(none)"},
    {0, 0, "{\"prompt\": \"x\", \"format\": \"json\"}", "json"},
    {0, 1, "{\"messages\": [], \"format\": {\"type\": \"object\", \"properties\": {\"b\": {}, \"a\": {}}}}",
     "{\"type\":\"object\",\"properties\":{\"b\":{},\"a\":{}}}"}, /* the schema's own order */
    {0, 0, "{\"prompt\": \"x\", \"format\": \"yaml\"}", "E:format: expected \"json\" or a JSON Schema object"},
    {0, 0, "{\"prompt\": \"x\", \"format\": [1]}", "E:format: expected"},
    {0, 0, "{\"prompt\": \"x\", \"format\": {\"type\": \"string\", \"contentEncoding\": \"base64\"}}",
     "E:format: schema keyword 'contentEncoding'"},
    {1, 1, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"response_format\": {\"type\": \"text\"}}",
     "(none)"},
    {1, 1,
     "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"response_format\": {\"type\": \"json_object\"}}",
     "json"},
    {1, 0,
     "{\"prompt\": \"x\", \"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": \"n\", "
     "\"strict\": true, \"schema\": {\"enum\": [1, 2]}}}}",
     "{\"enum\":[1,2]}"},
    {1, 0, "{\"prompt\": \"x\", \"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": \"n\"}}}",
     "json"},
    {1, 0, "{\"prompt\": \"x\", \"response_format\": {\"type\": \"json_schema\"}}",
     "E:response_format.json_schema: expected an object"},
    {1, 0, "{\"prompt\": \"x\", \"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"schema\": 5}}}",
     "E:response_format.json_schema.schema: expected"},
    {1, 0, "{\"prompt\": \"x\", \"response_format\": \"json\"}", "E:response_format: expected an object"},
    {1, 0, "{\"prompt\": \"x\", \"response_format\": {\"type\": \"grammar\"}}", "E:response_format.type: expected"},
    {1, 1,
     "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"response_format\": {\"type\": \"json_schema\", "
     "\"json_schema\": {\"schema\": {\"type\": \"object\", \"not\": {}}}}}",
     "E:response_format.json_schema.schema: schema keyword 'not'"},
};

START_TEST(formats_read_from_both_apis)
{
    char format[256];
    const char *want = format_cases[_i].rc_or_format;
    int rc = read_format(format_cases[_i].body, format_cases[_i].openai, format_cases[_i].chat, format, sizeof format);

    if (want[0] == 'E' && want[1] == ':') {
        ck_assert_msg(rc == MS_EINVALID || rc == MS_EUNSUPPORTED, "%s: rc %d", format_cases[_i].body, rc);
        ck_assert_msg(strncmp(ms_err_msg(), want + 2, strlen(want + 2)) == 0, "%s: '%s'", format_cases[_i].body,
                      ms_err_msg());
    } else {
        ck_assert_msg(rc == 0, "%s: %s", format_cases[_i].body, ms_err_msg());
        ck_assert_str_eq(format, want);
    }
}
END_TEST

/* Tools, tool_choice and a conversation with a call and its result, through both readers. */
START_TEST(tools_and_tool_messages_are_read)
{
    static const char openai[] =
        "{\"model\": \"m\", \"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": \"get\"}},"
        " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get\", \"description\": \"d\","
        " \"parameters\": {\"type\": \"object\", \"properties\": {\"z\": {}, \"a\": {}}}}}],"
        " \"messages\": [{\"role\": \"user\", \"content\": \"q\"},"
        " {\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"id\": \"call_1\", \"type\": \"function\","
        " \"function\": {\"name\": \"get\", \"arguments\": \"{\\\"z\\\": 1}\"}}]},"
        " {\"role\": \"tool\", \"tool_call_id\": \"call_1\", \"content\": \"r\"}]}";
    static const char ollama[] =
        "{\"model\": \"m\", \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get\"}}],"
        " \"messages\": [{\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"function\": {\"name\":"
        " \"get\", \"arguments\": {\"b\": [1], \"a\": \"x\"}}}]}, {\"role\": \"tool\", \"content\": \"r\","
        " \"tool_name\": \"get\"}]}";
    json_t *b = json_loads(openai, 0, NULL);
    gen_job j = {0};
    const char *p, *q;

    ck_assert_ptr_nonnull(b);
    model_opts_defaults(&j.mo);
    ck_assert_msg(srv_openai_fields(&j, b, 1, &p) == 0, "%s", ms_err_msg());
    ck_assert_int_eq(j.tool_choice, GEN_TOOLS_NAMED);
    ck_assert_str_eq(j.tool_named, "get");
    ck_assert_uint_eq(j.n_tools, 1);
    ck_assert_str_eq(j.tools[0].description, "d");
    ck_assert_str_eq(j.tools[0].parameters, "{\"type\":\"object\",\"properties\":{\"z\":{},\"a\":{}}}");
    ck_assert_uint_eq(j.n_msgs, 3);
    ck_assert_uint_eq(j.msgs[1].n_tool_calls, 1);
    ck_assert_str_eq(j.msgs[1].tool_calls[0].id, "call_1");
    ck_assert_str_eq(j.msgs[1].tool_calls[0].arguments, "{\"z\":1}");
    ck_assert_str_eq(j.msgs[1].content, "");
    ck_assert_str_eq(j.msgs[2].role, "tool");
    ck_assert_str_eq(j.msgs[2].tool_name, "get"); /* found from the call it answers */
    ck_assert_str_eq(j.msgs[2].tool_call_id, "call_1");
    srv_request_fields_free(&j);
    json_decref(b);

    b = json_loads(ollama, 0, NULL);
    memset(&j, 0, sizeof j);
    model_opts_defaults(&j.mo);
    ck_assert_msg(srv_ollama_fields(&j, b, 1, &p, &q) == 0, "%s", ms_err_msg());
    ck_assert_int_eq(j.tool_choice, GEN_TOOLS_AUTO);
    ck_assert_ptr_null(j.tools[0].parameters);
    ck_assert_str_eq(j.msgs[0].tool_calls[0].arguments, "{\"b\":[1],\"a\":\"x\"}");
    ck_assert_ptr_null(j.msgs[0].tool_calls[0].id);
    ck_assert_str_eq(j.msgs[1].tool_name, "get");
    srv_request_fields_free(&j);
    json_decref(b);
}
END_TEST

static const struct {
    const char *body, *msg;
} tool_refusals[] = {
    {"{\"tools\": {}}", "tools: expected an array"},
    {"{\"tools\": [{\"type\": \"retrieval\"}]}", "tools[0]: expected"},
    {"{\"tools\": [{\"function\": {\"name\": \"\"}}]}", "tools[0].function.name: expected 1 to 64"},
    {"{\"tools\": [{\"function\": {\"name\": \"f\", \"parameters\": []}}]}", "tools[0].function.parameters: expected"},
    {"{\"tool_choice\": \"always\", \"tools\": []}", "tool_choice: expected"},
    {"{\"tool_choice\": \"required\"}", "tool_choice: a call is required, but no tools are given"},
    {"{\"tool_choice\": \"required\", \"tools\": [{\"function\": {\"name\": \"f\", \"parameters\": {\"uniqueItems\": "
     "true}}}]}",
     "tools[0].function.parameters: schema keyword 'uniqueItems'"},
    {"{\"tools\": [{\"function\": {\"name\": \"f\", \"parameters\": {\"uniqueItems\": true}}}]}",
     NULL}, /* not forced */
    {"{\"messages\": [{\"role\": \"assistant\", \"tool_calls\": [{\"function\": {\"arguments\": \"{}\"}}]}]}",
     "messages[0].tool_calls[0].function.name: expected a string"},
    {"{\"messages\": [{\"role\": \"assistant\", \"tool_calls\": [{\"function\": {\"name\": \"f\", \"arguments\": "
     "\"[1]\"}}]}]}",
     "messages[0].tool_calls[0].function.arguments: expected a JSON object"},
    {"{\"messages\": [{\"role\": \"assistant\", \"tool_calls\": 3}]}", "messages[0].tool_calls: expected an array"},
};

START_TEST(tool_fields_refused_by_name)
{
    json_t *b = json_loads(tool_refusals[_i].body, 0, NULL);
    gen_job j = {0};
    const char *p;
    int rc;

    ck_assert_ptr_nonnull(b);
    model_opts_defaults(&j.mo);
    if (!json_object_get(b, "messages"))
        json_object_set_new(b, "messages", json_pack("[{s:s,s:s}]", "role", "user", "content", "q"));
    rc = srv_openai_fields(&j, b, 1, &p);
    if (tool_refusals[_i].msg) {
        ck_assert_msg(rc == MS_EINVALID || rc == MS_EUNSUPPORTED, "%s: rc %d", tool_refusals[_i].body, rc);
        ck_assert_msg(strstr(ms_err_msg(), tool_refusals[_i].msg), "%s: '%s'", tool_refusals[_i].body, ms_err_msg());
    } else {
        ck_assert_msg(rc == 0, "%s: %s", tool_refusals[_i].body, ms_err_msg());
    }
    srv_request_fields_free(&j);
    json_decref(b);
}
END_TEST

/* A field that changes an answer is honoured or refused by name (issue 39 item 6): the
 * penalties go to the sampler through the option table (logprobs: logprob_fields below); think
 * and reasoning_effort are read (whether the model thinks, or takes a level, is
 * gen_think_check's: t6034, t6035). api: 0 ollama, 1
 * OpenAI; rc 0 with the penalties read, else the code and the start of the message. */
static const struct {
    int openai, chat;
    const char *body;
    int rc;
    const char *msg;
    float freq, pres;
} answer_fields[] = {
    {1, 1, "{\"frequency_penalty\": 0.5, \"presence_penalty\": -1.5}", 0, NULL, 0.5f, -1.5f},
    {1, 0, "{\"frequency_penalty\": -2, \"presence_penalty\": 2}", 0, NULL, -2.0f, 2.0f},
    {1, 1, "{\"frequency_penalty\": 2.5}", MS_EINVALID,
     "frequency_penalty: expected a number from -2 to 2; 2.5 is too large", 0, 0},
    {1, 0, "{\"presence_penalty\": \"x\"}", MS_EINVALID,
     "presence_penalty: expected a number from -2 to 2; \"x\" is not a number", 0, 0},
    {0, 0, "{\"options\": {\"frequency_penalty\": 1, \"presence_penalty\": 0.25}}", 0, NULL, 1.0f, 0.25f},
    {0, 1, "{\"options\": {\"presence_penalty\": -3}}", MS_EINVALID,
     "options.presence_penalty: expected a number from -2 to 2; -3 is too small", 0, 0},
    {0, 0, "{\"frequency_penalty\": 1}", 0, NULL, 0, 0}, /* ollama reads options only, as before */
    {1, 1, "{\"logprobs\": false, \"top_logprobs\": 0, \"reasoning_effort\": \"none\"}", 0, NULL, 0, 0},
    {1, 1, "{\"logprobs\": null, \"top_logprobs\": null, \"reasoning_effort\": null}", 0, NULL, 0, 0},
    {1, 1, "{\"logprobs\": 1}", MS_EINVALID, "logprobs: expected true or false", 0, 0},
    {1, 1, "{\"top_logprobs\": 21}", MS_EINVALID, "top_logprobs: expected an integer from 0 to 20", 0, 0},
    {1, 0, "{\"logprobs\": 0}", 0, NULL, 0, 0},
    {1, 0, "{\"logprobs\": 6}", MS_EINVALID, "logprobs: expected an integer from 0 to 5", 0, 0},
    {1, 0, "{\"logprobs\": true}", MS_EINVALID, "logprobs: expected an integer from 0 to 5", 0, 0},
    {1, 1, "{\"reasoning_effort\": \"high\"}", 0, NULL, 0, 0},
    {1, 0, "{\"reasoning_effort\": \"minimal\"}", MS_EUNSUPPORTED, "reasoning_effort: not supported on /v1/completions",
     0, 0},
    {1, 1, "{\"reasoning_effort\": \"max\"}", MS_EINVALID, "reasoning_effort: expected \"none\"", 0, 0},
    {1, 1, "{\"reasoning_effort\": \"low\", \"reasoning\": {\"effort\": \"low\"}}", MS_EINVALID,
     "reasoning_effort and reasoning: give one of them", 0, 0},
    {1, 1, "{\"reasoning\": \"high\"}", MS_EINVALID, "reasoning: expected an object", 0, 0},
    {1, 1, "{\"reasoning_effort\": 3}", MS_EINVALID, "reasoning_effort: expected \"none\"", 0, 0},
    {1, 1, "{\"reasoning\": {\"effort\": \"high\"}}", 0, NULL, 0, 0},
    {1, 1, "{\"reasoning\": {\"effort\": \"huge\"}}", MS_EINVALID, "reasoning.effort: expected \"none\"", 0, 0},
    {1, 1, "{\"reasoning\": {}}", 0, NULL, 0, 0},
    {0, 0, "{\"think\": false, \"logprobs\": false, \"top_logprobs\": 0}", 0, NULL, 0, 0},
    {0, 1, "{\"think\": true}", 0, NULL, 0, 0},
    {0, 0, "{\"think\": \"medium\"}", 0, NULL, 0, 0}, /* a level: gen_think_check asks the template (t6035) */
    {0, 1, "{\"think\": \"minimal\"}", MS_EINVALID, "think: expected true, false, \"low\"", 0, 0}, /* OpenAI's only */
    {0, 1, "{\"think\": \"max\"}", MS_EINVALID, "think: expected true, false, \"low\", \"medium\" or \"high\"", 0, 0},
    {0, 0, "{\"think\": 1}", MS_EINVALID, "think: expected true, false", 0, 0},
    {0, 0, "{\"logprobs\": \"yes\"}", MS_EINVALID, "logprobs: expected true or false", 0, 0},
};

/* logprobs are read into the job (gen.c reports them): whether asked, and the alternatives per
 * token; top_logprobs only with logprobs: true; completions count them in logprobs: N. */
static const struct {
    int openai, chat;
    const char *body;
    int rc;
    const char *msg;
    int logprobs, top;
} logprob_fields[] = {
    {1, 1, "{\"logprobs\": true}", 0, NULL, 1, 0},
    {1, 1, "{\"logprobs\": true, \"top_logprobs\": 20}", 0, NULL, 1, 20},
    {1, 1, "{\"logprobs\": false, \"top_logprobs\": 0}", 0, NULL, 0, 0},
    {1, 1, "{\"top_logprobs\": 3}", MS_EINVALID, "top_logprobs: needs logprobs: true", 0, 0},
    {1, 1, "{\"logprobs\": true, \"top_logprobs\": 2.5}", MS_EINVALID, "top_logprobs: expected an integer", 0, 0},
    {1, 0, "{\"logprobs\": 2}", 0, NULL, 1, 2},
    {1, 0, "{\"logprobs\": 0}", 0, NULL, 1, 0},
    {1, 0, "{\"logprobs\": null}", 0, NULL, 0, 0},
    {1, 0, "{\"logprobs\": 1, \"top_logprobs\": 3}", MS_EINVALID, "top_logprobs: /v1/completions takes", 0, 0},
    {0, 1, "{\"logprobs\": true}", 0, NULL, 1, 0},
    {0, 0, "{\"logprobs\": true, \"top_logprobs\": 5}", 0, NULL, 1, 5},
    {0, 1, "{\"top_logprobs\": 5}", MS_EINVALID, "top_logprobs: needs logprobs: true", 0, 0},
    {0, 0, "{\"logprobs\": true, \"top_logprobs\": -1}", MS_EINVALID, "top_logprobs: expected an integer from 0 to 20",
     0, 0},
    {1, 1,
     "{\"logprobs\": true, \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": "
     "{\"type\": \"object\"}}}]}",
     0, NULL, 1, 0},
    {0, 1,
     "{\"logprobs\": true, \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": "
     "{\"type\": \"object\"}}}]}",
     0, NULL, 1, 0},
};

START_TEST(logprob_fields_read)
{
    json_t *b = json_loads(logprob_fields[_i].body, 0, NULL);
    gen_job j = {0};
    const char *p, *q;
    int rc;

    ck_assert_ptr_nonnull(b);
    model_opts_defaults(&j.mo);
    if (logprob_fields[_i].openai && logprob_fields[_i].chat)
        json_object_set_new(b, "messages", json_pack("[{s:s,s:s}]", "role", "user", "content", "q"));
    else if (logprob_fields[_i].openai)
        json_object_set_new(b, "prompt", json_string("q"));
    rc = logprob_fields[_i].openai ? srv_openai_fields(&j, b, logprob_fields[_i].chat, &p)
                                   : srv_ollama_fields(&j, b, logprob_fields[_i].chat, &p, &q);
    ck_assert_msg(rc == logprob_fields[_i].rc, "%s: rc %d: %s", logprob_fields[_i].body, rc, ms_err_msg());
    if (rc == 0) {
        ck_assert_int_eq(j.logprobs, logprob_fields[_i].logprobs);
        ck_assert_int_eq(j.top_logprobs, logprob_fields[_i].top);
    } else {
        ck_assert_msg(strstr(ms_err_msg(), logprob_fields[_i].msg), "%s: '%s'", logprob_fields[_i].body, ms_err_msg());
    }
    srv_request_fields_free(&j);
    json_decref(b);
}
END_TEST

START_TEST(answer_changing_fields_honoured_or_refused)
{
    json_t *b = json_loads(answer_fields[_i].body, 0, NULL);
    gen_job j = {0};
    const char *p, *q;
    int rc;

    ck_assert_ptr_nonnull(b);
    model_opts_defaults(&j.mo);
    if (answer_fields[_i].openai && answer_fields[_i].chat)
        json_object_set_new(b, "messages", json_pack("[{s:s,s:s}]", "role", "user", "content", "q"));
    else if (answer_fields[_i].openai)
        json_object_set_new(b, "prompt", json_string("q"));
    rc = answer_fields[_i].openai ? srv_openai_fields(&j, b, answer_fields[_i].chat, &p)
                                  : srv_ollama_fields(&j, b, answer_fields[_i].chat, &p, &q);
    ck_assert_msg(rc == answer_fields[_i].rc, "%s: rc %d: %s", answer_fields[_i].body, rc, ms_err_msg());
    if (rc == 0) {
        ck_assert(j.mo.so.frequency_penalty == answer_fields[_i].freq);
        ck_assert(j.mo.so.presence_penalty == answer_fields[_i].pres);
    } else {
        ck_assert_msg(strncmp(ms_err_msg(), answer_fields[_i].msg, strlen(answer_fields[_i].msg)) == 0, "%s: '%s'",
                      answer_fields[_i].body, ms_err_msg());
    }
    srv_request_fields_free(&j);
    json_decref(b);
}
END_TEST

/* ---------------------------------------------------------------- embedding requests */

/* What srv_embed_fields made of a body, as text: "T:hello|T:x" (texts), "I:1,2|I:3" (token
 * arrays), "" (no inputs). */
static void embed_describe(char *buf, size_t cap, const embed_req *e)
{
    size_t at = 0;

    buf[0] = '\0';
    for (size_t i = 0; i < e->n && at < cap; i++) {
        const session_embed_input *in = &e->in[i];
        at += (size_t)snprintf(buf + at, cap - at, "%s%s", i ? "|" : "", in->text ? "T:" : "I:");
        if (in->text)
            at += (size_t)snprintf(buf + at, cap > at ? cap - at : 0, "%.*s", (int)in->len, in->text);
        for (size_t k = 0; !in->text && k < in->n_ids && at < cap; k++)
            at += (size_t)snprintf(buf + at, cap - at, "%s%d", k ? "," : "", (int)in->ids[k]);
    }
}

static const struct {
    embed_kind kind;
    const char *body, *want; /* the inputs as embed_describe writes them, or "E:" and the error's start */
} embed_cases[] = {
    {EMBED_OLLAMA, "{\"input\": \"hello\"}", "T:hello"},
    {EMBED_OLLAMA, "{\"input\": [\"a\", \"bc\", \"\"]}", "T:a|T:bc|T:"},
    {EMBED_OLLAMA, "{\"input\": \"\"}", ""}, /* as ollama: nothing to embed, the model is loaded */
    {EMBED_OLLAMA, "{\"input\": []}", ""},
    {EMBED_OLLAMA, "{\"model\": \"m\"}", ""},
    {EMBED_OLLAMA_OLD, "{\"prompt\": \"why\"}", "T:why"},
    {EMBED_OLLAMA_OLD, "{\"prompt\": \"\"}", ""},
    {EMBED_OLLAMA_OLD, "{\"input\": \"not read here\"}", ""},
    {EMBED_OPENAI, "{\"input\": \"x y\"}", "T:x y"},
    {EMBED_OPENAI, "{\"input\": [\"x\", \"y\"]}", "T:x|T:y"},
    {EMBED_OPENAI, "{\"input\": [101, 7592, 102]}", "I:101,7592,102"},
    {EMBED_OPENAI, "{\"input\": [[101, 102], [5], []]}", "I:101,102|I:5|I:"},
    {EMBED_OPENAI, "{\"input\": \"x\", \"user\": \"u-1\", \"encoding_format\": \"float\"}", "T:x"},
    {EMBED_OLLAMA, "{\"input\": 5}", "E:input: expected a string or an array of strings"},
    {EMBED_OLLAMA, "{\"input\": [\"a\", 1]}", "E:input[1]: expected a string, as input[0] is"},
    {EMBED_OLLAMA, "{\"input\": [1]}", "E:input[0]: expected a string"},
    {EMBED_OLLAMA, "{\"input\": \"x\", \"truncate\": \"no\"}", "E:truncate: expected true or false"},
    {EMBED_OLLAMA, "{\"input\": \"x\", \"dimensions\": 0}", "E:dimensions: expected an integer from 1"},
    {EMBED_OLLAMA, "{\"input\": \"x\", \"dimensions\": 2.5}", "E:dimensions: expected an integer"},
    {EMBED_OLLAMA, "{\"input\": \"x\", \"keep_alive\": \"soon\"}", "E:keep_alive: expected"},
    {EMBED_OLLAMA, "{\"input\": \"x\", \"options\": []}", "E:options: expected an object"},
    {EMBED_OLLAMA, "{\"input\": \"x\", \"options\": {\"num_ctx\": -1}}", "E:options.num_ctx: expected"},
    {EMBED_OLLAMA_OLD, "{\"prompt\": [\"a\"]}", "E:prompt: expected a string"},
    {EMBED_OLLAMA_OLD, "{\"prompt\": \"x\", \"options\": {\"num_ctx\": \"big\"}}", "E:options.num_ctx: expected"},
    {EMBED_OPENAI, "{}", "E:input: required"},
    {EMBED_OPENAI, "{\"input\": \"\"}", "E:input: expected a non-empty string or array"},
    {EMBED_OPENAI, "{\"input\": []}", "E:input: expected a non-empty string or array"},
    {EMBED_OPENAI, "{\"input\": {\"text\": \"x\"}}", "E:input: expected a string, an array of strings, an array"},
    {EMBED_OPENAI, "{\"input\": [1, -2]}", "E:input[1]: expected a token id"},
    {EMBED_OPENAI, "{\"input\": [1, \"a\"]}", "E:input[1]: expected a token id"},
    {EMBED_OPENAI, "{\"input\": [1, 4294967296]}", "E:input[1]: expected a token id"},
    {EMBED_OPENAI, "{\"input\": [[1], \"a\"]}", "E:input[1]: expected an array of token ids, as input[0] is"},
    {EMBED_OPENAI, "{\"input\": [\"a\", [1]]}", "E:input[1]: expected a string, as input[0] is"},
    {EMBED_OPENAI, "{\"input\": [[1], [2.5]]}", "E:input[1][0]: expected a token id"},
    {EMBED_OPENAI, "{\"input\": [true]}", "E:input[0]: expected a string, an array of token ids or a token id"},
    {EMBED_OPENAI, "{\"input\": \"x\", \"encoding_format\": \"hex\"}",
     "E:encoding_format: expected \"float\" or \"base64\""},
    {EMBED_OPENAI, "{\"input\": \"x\", \"user\": 5}", "E:user: expected a string"},
    {EMBED_OPENAI, "{\"input\": \"x\", \"model\": 5}", "E:model: expected a string"},
    {EMBED_OPENAI, "{\"input\": \"x\", \"dimensions\": 1048577}", "E:dimensions: expected an integer from 1"},
};

START_TEST(embed_inputs_read_in_each_form_or_refused_by_field)
{
    json_t *b = json_loads(embed_cases[_i].body, 0, NULL);
    const char *want = embed_cases[_i].want, *model;
    embed_req e;
    char got[256];
    int rc;

    ck_assert_ptr_nonnull(b);
    rc = srv_embed_fields(&e, b, embed_cases[_i].kind, 300, &model);
    if (strncmp(want, "E:", 2) == 0) {
        ck_assert_msg(rc == MS_EINVALID, "%s: rc %d", embed_cases[_i].body, rc);
        ck_assert_msg(strncmp(ms_err_msg(), want + 2, strlen(want + 2)) == 0, "%s: '%s'", embed_cases[_i].body,
                      ms_err_msg());
    } else {
        ck_assert_msg(rc == 0, "%s: %s", embed_cases[_i].body, ms_err_msg());
        embed_describe(got, sizeof got, &e);
        ck_assert_str_eq(got, want);
    }
    srv_embed_fields_free(&e);
    json_decref(b);
}
END_TEST

/* The fields beside the input: defaults, then each one read. */
START_TEST(embed_fields_beside_the_input_are_read)
{
    json_t *b = json_loads("{\"model\": \"bge\", \"input\": \"x\"}", 0, NULL);
    const char *model;
    embed_req e;

    ck_assert_int_eq(srv_embed_fields(&e, b, EMBED_OLLAMA, 300, &model), 0);
    ck_assert_str_eq(model, "bge");
    ck_assert(e.truncate == 1 && e.dimensions == 0 && e.base64 == 0 && e.keep_alive_s == 300 && e.mo.n_ctx <= 0);
    srv_embed_fields_free(&e);
    json_decref(b);

    b = json_loads("{\"name\": \"bge\", \"input\": \"x\", \"truncate\": false, \"dimensions\": 8, \"keep_alive\": "
                   "\"2m\", \"options\": {\"num_ctx\": 32}}",
                   0, NULL);
    ck_assert_int_eq(srv_embed_fields(&e, b, EMBED_OLLAMA, 300, &model), 0);
    ck_assert_str_eq(model, "bge"); /* ollama's older "name" */
    ck_assert(e.truncate == 0 && e.dimensions == 8 && e.keep_alive_s == 120 && e.mo.n_ctx == 32);
    srv_embed_fields_free(&e);
    json_decref(b);

    b = json_loads("{\"model\": \"bge\", \"input\": [1], \"encoding_format\": \"base64\", \"dimensions\": 4}", 0, NULL);
    ck_assert_int_eq(srv_embed_fields(&e, b, EMBED_OPENAI, 300, &model), 0);
    ck_assert(e.base64 == 1 && e.dimensions == 4 && e.truncate == 1);
    srv_embed_fields_free(&e);
    json_decref(b);

    /* the older endpoint has no dimensions or truncate: they are not read there */
    b = json_loads("{\"model\": \"bge\", \"prompt\": \"x\", \"dimensions\": 0, \"truncate\": 1, \"keep_alive\": 0}", 0,
                   NULL);
    ck_assert_int_eq(srv_embed_fields(&e, b, EMBED_OLLAMA_OLD, 300, &model), 0);
    ck_assert(e.dimensions == 0 && e.truncate == 1 && e.keep_alive_s == 0 && e.n == 1);
    srv_embed_fields_free(&e);
    json_decref(b);
}
END_TEST

/* Past the limits, refused before anything is allocated for the inputs (the bodies repeat one
 * element, so the test itself stays small). */
START_TEST(embed_limits_refused_before_allocating)
{
    json_t *one = json_string("x"), *big = json_stringn(NULL, 0), *id = json_integer(7), *a, *b;
    char *text = malloc((SESSION_EMBED_MAX_BYTES / SESSION_EMBED_MAX_INPUTS) + 2);
    const char *model;
    embed_req e;

    ck_assert_ptr_nonnull(text);
    memset(text, 'a', SESSION_EMBED_MAX_BYTES / SESSION_EMBED_MAX_INPUTS + 1);
    text[SESSION_EMBED_MAX_BYTES / SESSION_EMBED_MAX_INPUTS + 1] = '\0';
    json_decref(big);
    big = json_string(text);
    free(text);

    a = json_array(); /* one input too many */
    for (int i = 0; i <= SESSION_EMBED_MAX_INPUTS; i++)
        json_array_append(a, one);
    b = json_pack("{s:o}", "input", a);
    ck_assert_int_eq(srv_embed_fields(&e, b, EMBED_OLLAMA, 300, &model), MS_EINVALID);
    ck_assert_str_eq(ms_err_msg(), "input: 2049 inputs, at most 2048");
    ck_assert_ptr_null(e.in);
    json_decref(b);

    a = json_array(); /* as many inputs as allowed, each a little over its share of the bytes */
    for (int i = 0; i < SESSION_EMBED_MAX_INPUTS; i++)
        json_array_append(a, big);
    b = json_pack("{s:o}", "input", a);
    ck_assert_int_eq(srv_embed_fields(&e, b, EMBED_OPENAI, 300, &model), MS_EINVALID);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "bytes of text"));
    ck_assert_ptr_null(e.in);
    json_decref(b);

    a = json_array(); /* one token array of one id too many */
    for (unsigned i = 0; i <= SESSION_EMBED_MAX_IDS; i++)
        json_array_append(a, id);
    b = json_pack("{s:o}", "input", a);
    ck_assert_int_eq(srv_embed_fields(&e, b, EMBED_OPENAI, 300, &model), MS_EINVALID);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "token ids, at most"));
    ck_assert_ptr_null(e.ids);
    json_decref(b);

    json_decref(one);
    json_decref(big);
    json_decref(id);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("server");
    TCase *tc = tcase_create("gate");
    SRunner *sr;
    int failed;

    tcase_add_loop_test(tc, origins_allowed_as_ollama_allows_them, 0,
                        (int)(sizeof origin_cases / sizeof *origin_cases));
    tcase_add_test(tc, origins_refuse_two_wildcards_in_an_entry);
    tcase_add_loop_test(tc, hosts_allowed_name_this_machine, 0, (int)(sizeof host_cases / sizeof *host_cases));
    suite_add_tcase(s, tc);
    tc = tcase_create("request");
    tcase_add_loop_test(tc, formats_read_from_both_apis, 0, (int)(sizeof format_cases / sizeof *format_cases));
    tcase_add_test(tc, tools_and_tool_messages_are_read);
    tcase_add_loop_test(tc, tool_fields_refused_by_name, 0, (int)(sizeof tool_refusals / sizeof *tool_refusals));
    tcase_add_loop_test(tc, answer_changing_fields_honoured_or_refused, 0,
                        (int)(sizeof answer_fields / sizeof *answer_fields));
    tcase_add_loop_test(tc, logprob_fields_read, 0, (int)(sizeof logprob_fields / sizeof *logprob_fields));
    tcase_add_loop_test(tc, embed_inputs_read_in_each_form_or_refused_by_field, 0,
                        (int)(sizeof embed_cases / sizeof *embed_cases));
    tcase_add_test(tc, embed_fields_beside_the_input_are_read);
    tcase_add_test(tc, embed_limits_refused_before_allocating);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
