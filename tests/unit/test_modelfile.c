/* test_modelfile.c: Modelfile syntax, params of the wrong type, the option table and its readers. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "modelfile/modelfile_int.h"

START_TEST(parses_every_value_form)
{
    const char *text = "# comment\n"
                       "from ./m.gguf\n"
                       "PARAMETER Temperature 0.5\n"
                       "PARAMETER stop \"<|im_end|>\"\n"
                       "PARAMETER stop \"say \\\"hi\\\"\"\n"
                       "PARAMETER num_ctx 2048\n"
                       "SYSTEM \"\"\"line one\n"
                       "line two\"\"\"\n"
                       "TEMPLATE {{ .Prompt }}\n"
                       "LICENSE a\n"
                       "LICENSE \"\"\"b\"\"\"\n"
                       "MESSAGE user hello there\n"
                       "MESSAGE Assistant \"hi\"\n";
    modelfile *mf = NULL;

    ck_assert_msg(modelfile_parse(&mf, text, strlen(text), "MF") == 0, "%s", ms_err_msg());
    ck_assert_str_eq(mf->from, "./m.gguf");
    ck_assert_int_eq(mf->from_line, 2);
    ck_assert(json_real_value(json_object_get(mf->params, "temperature")) == 0.5);
    ck_assert_int_eq(json_integer_value(json_object_get(mf->params, "num_ctx")), 2048);
    ck_assert_str_eq(json_string_value(json_array_get(json_object_get(mf->params, "stop"), 0)), "<|im_end|>");
    ck_assert_str_eq(json_string_value(json_array_get(json_object_get(mf->params, "stop"), 1)), "say \"hi\"");
    ck_assert_str_eq(mf->system, "line one\nline two");
    ck_assert_str_eq(mf->template_, "{{ .Prompt }}");
    ck_assert_int_eq(mf->template_line, 9);
    ck_assert_uint_eq(mf->n_licenses, 2);
    ck_assert_str_eq(mf->licenses[1], "b");
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(mf->messages, 0), "content")), "hello there");
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(mf->messages, 1), "role")), "assistant");
    modelfile_free(mf);
}
END_TEST

static const struct {
    const char *text;
    int code;
    const char *expect;
} bad[] = {
    {"FROM a\nFROM b\n", MS_EINVALID, "MF:2: a second FROM"},
    {"FROM a\nPARAMETER top_k 1.5\n", MS_EINVALID,
     "MF:2: PARAMETER top_k: expected an integer from 0 to 16777216; '1.5' is not an integer"},
    {"FROM a\nPARAMETER temperature hot\n", MS_EINVALID,
     "MF:2: PARAMETER temperature: expected a number from 0 to 100; 'hot' is not a number"},
    {"FROM a\nPARAMETER temperature 300\n", MS_EINVALID,
     "MF:2: PARAMETER temperature: expected a number from 0 to 100; '300' is too large"},
    {"FROM a\nPARAMETER num_ctx -5\n", MS_EINVALID,
     "MF:2: PARAMETER num_ctx: expected an integer from 0 to 4194304; '-5' is too small"},
    {"FROM a\nPARAMETER seed\n", MS_EINVALID, "MF:2: PARAMETER seed: no value"},
    {"FROM a\nSYSTEM \"open\n", MS_EINVALID, "MF:2: unterminated quote"},
    {"FROM a\nSYSTEM \"x\" y\n", MS_EINVALID, "MF:2: text after the closing quote"},
    {"\n\nFROM a\nTEMPLATE \"\"\"\n{{ end }}\"\"\"\n", MS_EINVALID, "MF:4: TEMPLATE does not parse: template line 2"},
    {"FROM a\nADAPTER x\n", MS_EUNSUPPORTED, "MF:2: ADAPTER"},
    {"FROM a\nRUN x\n", MS_EINVALID, "MF:2: unknown instruction 'RUN'"},
    {"# only\n", MS_EINVALID, "MF: no FROM line"},
};

START_TEST(refuses_naming_the_line)
{
    modelfile *mf = (modelfile *)1;

    ck_assert_int_eq(modelfile_parse(&mf, bad[_i].text, strlen(bad[_i].text), "MF"), bad[_i].code);
    ck_assert_ptr_null(mf);
    ck_assert_msg(strstr(ms_err_msg(), bad[_i].expect), "'%s' lacks '%s'", ms_err_msg(), bad[_i].expect);
}
END_TEST

START_TEST(params_of_wrong_type_refused)
{
    model_params p = {0};
    json_t *o = json_loads("{\"top_k\": 1.5}", 0, NULL);

    ck_assert_int_eq(mf_params_from_json(&p, o, "params"), MS_EINVALID);
    ck_assert_msg(strstr(ms_err_msg(), "params: top_k: expected an integer from 0 to 16777216; 1.5 is not an integer"),
                  "%s", ms_err_msg());
    json_decref(o);
    o = json_loads("{\"stop\": [\"a\", 3]}", 0, NULL);
    ck_assert_int_eq(mf_params_from_json(&p, o, "params"), MS_EINVALID);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "'stop'[1]"));
    json_decref(o);
    for (size_t i = 0; i < p.n_stop; i++)
        free(p.stop[i]);
}
END_TEST

/* Each number option of the table, one value past a bound, as every reader spells it. */
static const struct {
    const char *name, *text, *bound;
} past[] = {
    {"temperature", "100.5", "from 0 to 100; "},
    {"top_k", "16777217", "from 0 to 16777216; "},
    {"top_p", "-0.5", "from 0 to 1; "},
    {"min_p", "2", "from 0 to 1; "},
    {"repeat_penalty", "0", "from 0.01 to 100; "},
    {"repeat_last_n", "1048577", "from 0 to 1048576; "},
    {"frequency_penalty", "2.5", "from -2 to 2; "},
    {"presence_penalty", "-2.25", "from -2 to 2; "},
    {"seed", "-2", "from -1 to 9007199254740992; "},
    {"num_predict", "-3", "from -2 to 16777216; "},
    {"num_ctx", "4194305", "from 0 to 4194304; "},
};

/* The message names the option as the reader shows it, the bound and the value. */
static void assert_refusal(const char *shown, const char *bound, const char *value)
{
    const char *m = ms_err_msg();

    ck_assert_msg(!strncmp(m, shown, strlen(shown)) && strstr(m, bound) && strstr(m, value),
                  "'%s': wants '%s', '%s', '%s'", m, shown, bound, value);
}

START_TEST(every_reader_refuses_a_value_past_the_bounds)
{
    const model_option *o = model_option_find(past[_i].name);
    char shown[64], text[256];
    model_params p = {0};
    model_opts mo;
    modelfile *mf = NULL;
    json_t *obj;
    double d;

    ck_assert_ptr_nonnull(o);
    model_opts_defaults(&mo);
    /* mstore run's flag and chat's /set parameter */
    ck_assert_ptr_eq(model_option_find_flag(o->flag), o);
    ck_assert_int_eq(model_option_parse(&d, o, o->flag, past[_i].text), MS_EINVALID);
    snprintf(text, sizeof text, "'%s' is too", past[_i].text);
    assert_refusal(o->flag, past[_i].bound, text);
    ck_assert_int_eq(model_option_parse(&d, o, o->name, past[_i].text), MS_EINVALID);
    assert_refusal(o->name, past[_i].bound, text);
    /* ollama's options, and a stored params layer */
    snprintf(text, sizeof text, "{\"%s\": %s}", o->name, past[_i].text);
    ck_assert_ptr_nonnull(obj = json_loads(text, 0, NULL));
    ck_assert_int_eq(model_opts_from_json(&mo, obj, "options.", 0), MS_EINVALID);
    snprintf(shown, sizeof shown, "options.%s", o->name);
    snprintf(text, sizeof text, " %s is too", past[_i].text);
    assert_refusal(shown, past[_i].bound, text);
    ck_assert_int_eq(mf_params_from_json(&p, obj, "params layer"), MS_EINVALID);
    snprintf(shown, sizeof shown, "params layer: %s", o->name);
    assert_refusal(shown, past[_i].bound, text);
    ck_assert_uint_eq(p.set, 0);
    json_decref(obj);
    /* Modelfile PARAMETER */
    snprintf(text, sizeof text, "FROM a\nPARAMETER %s %s\n", o->name, past[_i].text);
    ck_assert_int_eq(modelfile_parse(&mf, text, strlen(text), "MF"), MS_EINVALID);
    snprintf(shown, sizeof shown, "MF:2: PARAMETER %s", o->name);
    snprintf(text, sizeof text, "'%s' is too", past[_i].text);
    assert_refusal(shown, past[_i].bound, text);
}
END_TEST

/* The penalties are rows like the others: a flag, /set's and PARAMETER's name, ollama's key and
 * OpenAI's field all reach the sampler's options; 0 (off) unless given. */
START_TEST(penalties_reach_the_sampler_from_every_reader)
{
    const model_option *f = model_option_find("frequency_penalty"), *p = model_option_find("presence_penalty");
    json_t *obj = json_loads("{\"frequency_penalty\": 0.25, \"presence_penalty\": 2}", 0, NULL);
    model_opts mo;
    double d;

    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_nonnull(p);
    ck_assert_ptr_eq(model_option_find_flag("--frequency-penalty"), f);
    ck_assert_ptr_eq(model_option_find_flag("--presence-penalty"), p);
    model_opts_defaults(&mo);
    ck_assert(mo.so.frequency_penalty == 0.0f && mo.so.presence_penalty == 0.0f);
    ck_assert_int_eq(model_option_parse(&d, f, "--frequency-penalty", "-1.5"), 0);
    model_option_set(&mo, f, d);
    ck_assert(mo.so.frequency_penalty == -1.5f);
    for (int openai = 0; openai < 2; openai++) {
        model_opts_defaults(&mo);
        ck_assert_int_eq(model_opts_from_json(&mo, obj, openai ? NULL : "options.", openai), 0);
        ck_assert(mo.so.frequency_penalty == 0.25f && mo.so.presence_penalty == 2.0f);
    }
    json_decref(obj);
}
END_TEST

/* OpenAI's fields read the same rows, with the range OpenAI documents where it has its own. */
START_TEST(openai_fields_refuse_past_their_range)
{
    static const struct {
        const char *body, *expect;
    } cases[] = {
        {"{\"temperature\": 2.5}", "temperature: expected a number from 0 to 2; 2.5 is too large"},
        {"{\"top_p\": \"high\"}", "top_p: expected a number from 0 to 1; \"high\" is not a number"},
        {"{\"max_tokens\": -1}", "max_tokens: expected an integer from 0 to 16777216; -1 is too small"},
        {"{\"presence_penalty\": -3}", "presence_penalty: expected a number from -2 to 2; -3 is too small"},
        {"{\"max_completion_tokens\": 1.5}",
         "max_completion_tokens: expected an integer from 0 to 16777216; 1.5 is not"},
        {"{\"seed\": 1e300}",
         "seed: expected an integer from -9007199254740992 to 9007199254740992; 1e+300 is too large"},
    };
    model_opts mo;

    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        json_t *b = json_loads(cases[i].body, 0, NULL);
        model_opts_defaults(&mo);
        ck_assert_int_eq(model_opts_from_json(&mo, b, NULL, 1), MS_EINVALID);
        ck_assert_msg(!strcmp(ms_err_msg(), cases[i].expect) || strstr(ms_err_msg(), cases[i].expect), "'%s' != '%s'",
                      ms_err_msg(), cases[i].expect);
        json_decref(b);
    }
}
END_TEST

/* One option spelled by mstore run, ollama's options, OpenAI's fields and PARAMETER: one value. */
START_TEST(every_spelling_gives_the_same_value)
{
    static const char *const flags[][2] = {{"--temp", "0.7"}, {"--top-p", "0.5"}, {"--seed", "42"}, {"-n", "12"}};
    json_t *ollama = json_loads("{\"temperature\": 0.7, \"top_p\": 0.5, \"seed\": 42, \"num_predict\": 12}", 0, NULL);
    json_t *openai = json_loads("{\"temperature\": 0.7, \"top_p\": 0.5, \"seed\": 42, \"max_tokens\": 12}", 0, NULL);
    const char *mf_text = "FROM a\nPARAMETER temperature 0.7\nPARAMETER top_p 0.5\nPARAMETER seed 42\n"
                          "PARAMETER num_predict 12\n";
    model_opts cli, oll, oai, layer;
    model_params p = {0};
    modelfile *mf = NULL;
    double d;

    model_opts_defaults(&cli), model_opts_defaults(&oll), model_opts_defaults(&oai), model_opts_defaults(&layer);
    for (size_t i = 0; i < sizeof flags / sizeof *flags; i++) {
        const model_option *o = model_option_find_flag(flags[i][0]);
        ck_assert_ptr_nonnull(o);
        ck_assert_int_eq(model_option_parse(&d, o, flags[i][0], flags[i][1]), 0);
        model_option_set(&cli, o, d);
    }
    ck_assert_int_eq(model_opts_from_json(&oll, ollama, "options.", 0), 0);
    ck_assert_int_eq(model_opts_from_json(&oai, openai, NULL, 1), 0);
    ck_assert_msg(modelfile_parse(&mf, mf_text, strlen(mf_text), "MF") == 0, "%s", ms_err_msg());
    ck_assert_int_eq(mf_params_from_json(&p, mf->params, "params"), 0);
    model_params_apply(&p, &layer);
    ck_assert(cli.so.temp == 0.7f && cli.so.top_p == 0.5f && cli.so.seed == 42 && cli.seed_set && cli.n_predict == 12);
    ck_assert_mem_eq(&cli, &oll, sizeof cli);
    ck_assert_mem_eq(&cli, &oai, sizeof cli);
    ck_assert_mem_eq(&cli, &layer, sizeof cli);
    modelfile_free(mf);
    json_decref(ollama);
    json_decref(openai);
}
END_TEST

/* The table's defaults are the sampler's; ollama's seed -1 asks for a random seed. */
START_TEST(defaults_are_the_samplers)
{
    runtime_sampler_opts so;
    model_opts mo;
    double d;

    runtime_sampler_defaults(&so);
    model_opts_defaults(&mo);
    ck_assert_mem_eq(&mo.so, &so, sizeof so);
    ck_assert_int_eq(mo.seed_set, 0);
    ck_assert_int_eq(mo.n_predict, -1);
    ck_assert_int_eq(mo.n_ctx, 0);
    ck_assert_int_eq(model_option_parse(&d, model_option_find("seed"), "seed", "-1"), 0);
    model_option_set(&mo, model_option_find("seed"), d);
    ck_assert_int_eq(mo.seed_set, 0);
    ck_assert_ptr_null(model_option_find("mirostat"));
    ck_assert_ptr_null(model_option_find_flag("--threads"));
}
END_TEST

/* ollama's create request gives the parts a Modelfile of the same content gives. */
START_TEST(request_reads_as_the_modelfile)
{
    const char *text = "FROM base\nPARAMETER temperature 0\nPARAMETER num_predict 20\nPARAMETER stop \" box\"\n"
                       "PARAMETER format {\"type\":\"object\"}\n"
                       "SYSTEM Be kind.\nTEMPLATE \"{{ .Prompt }}\"\nLICENSE MIT\nMESSAGE user Hi\n";
    const char *req =
        "{\"model\": \"m\", \"from\": \"base\", \"system\": \"Be kind.\", \"template\": \"{{ .Prompt }}\","
        " \"license\": \"MIT\", \"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}],"
        " \"parameters\": {\"temperature\": 0, \"num_predict\": 20, \"stop\": [\" box\"],"
        " \"format\": {\"type\": \"object\"}},"
        " \"stream\": false, \"adapters\": {}, \"quantize\": \"\"}";
    modelfile *a = NULL, *b = NULL;
    json_t *j = json_loads(req, 0, NULL);

    ck_assert_msg(modelfile_parse(&a, text, strlen(text), "MF") == 0, "%s", ms_err_msg());
    ck_assert_msg(modelfile_from_request(&b, j) == 0, "%s", ms_err_msg());
    ck_assert_str_eq(b->from, a->from);
    ck_assert_int_eq(b->from_store_only, 1);
    ck_assert_int_eq(a->from_store_only, 0);
    ck_assert_str_eq(b->system, a->system);
    ck_assert_str_eq(b->template_, a->template_);
    ck_assert_uint_eq(b->n_licenses, 1);
    ck_assert_str_eq(b->licenses[0], a->licenses[0]);
    ck_assert(json_equal(b->params, a->params));
    ck_assert(json_equal(b->messages, a->messages));
    modelfile_free(a);
    modelfile_free(b);
    json_decref(j);
}
END_TEST

static const struct {
    const char *json;
    int code;
    const char *expect;
} bad_request[] = {
    {"{}", MS_EINVALID, "from or files: required"},
    {"{\"from\": 3}", MS_EINVALID, "from: expected a string"},
    {"{\"from\": \"a\", \"files\": {\"m.gguf\": \"sha256:"
     "0000000000000000000000000000000000000000000000000000000000000000\"}}",
     MS_EINVALID, "from and files: give one of them"},
    {"{\"files\": {\"m.gguf\": \"sha256:short\"}}", MS_EINVALID, "files.m.gguf: expected a blob digest"},
    {"{\"files\": {\"a/m.gguf\": \"sha256:short\"}}", MS_EINVALID, "files: 'a/m.gguf': expected a file name"},
    {"{\"files\": [\"m.gguf\"]}", MS_EINVALID, "files: expected an object"},
    {"{\"from\": \"a\", \"adapters\": {\"l.gguf\": \"sha256:x\"}}", MS_EUNSUPPORTED, "adapters: LoRA adapters"},
    {"{\"from\": \"a\", \"quantize\": \"q8_0\"}", MS_EUNSUPPORTED, "quantize: quantizing on create"},
    {"{\"from\": \"a\", \"parameters\": []}", MS_EINVALID, "parameters: expected an object"},
    {"{\"from\": \"a\", \"parameters\": {\"mirostat\": 1}}", MS_EINVALID, "parameters.mirostat: unknown parameter"},
    {"{\"from\": \"a\", \"parameters\": {\"top_k\": 1.5}}", MS_EINVALID, "parameters.top_k: expected an integer"},
    {"{\"from\": \"a\", \"parameters\": {\"temperature\": \"hot\"}}", MS_EINVALID, "parameters.temperature: expected"},
    {"{\"from\": \"a\", \"parameters\": {\"stop\": [\"\"]}}", MS_EINVALID, "parameters.stop[0]: expected a non-empty"},
    {"{\"from\": \"a\", \"parameters\": {\"format\": [\"x\"]}}", MS_EINVALID, "parameters.format: expected \"json\""},
    {"{\"from\": \"a\", \"parameters\": {\"format\": 3}}", MS_EINVALID, "parameters.format: expected"},
    {"{\"from\": \"a\", \"parameters\": {\"format\": \"yaml\"}}", MS_EINVALID, "parameters.format"},
    {"{\"from\": \"a\", \"parameters\": {\"format\": {\"type\": \"nope\"}}}", MS_EINVALID, "parameters.format"},
    {"{\"from\": \"a\", \"template\": \"{{ end }}\"}", MS_EINVALID, "template: TEMPLATE does not parse"},
    {"{\"from\": \"a\", \"messages\": [{\"role\": \"tool\"}]}", MS_EINVALID, "messages[0].role: expected"},
    {"{\"from\": \"a\", \"messages\": {}}", MS_EINVALID, "messages: expected an array"},
    {"{\"from\": \"a\", \"license\": [\"x\", 1]}", MS_EINVALID, "license[1]: expected a string"},
    {"{\"from\": \"a\", \"system\": \"a\\u0000b\"}", MS_EINVALID, "system: a NUL character"},
};

START_TEST(request_refuses_naming_the_field)
{
    modelfile *mf = (modelfile *)1;
    json_t *j = json_loads(bad_request[_i].json, JSON_ALLOW_NUL, NULL);

    ck_assert_ptr_nonnull(j);
    ck_assert_int_eq(modelfile_from_request(&mf, j), bad_request[_i].code);
    ck_assert_ptr_null(mf);
    ck_assert_msg(strstr(ms_err_msg(), bad_request[_i].expect), "'%s' lacks '%s'", ms_err_msg(),
                  bad_request[_i].expect);
    json_decref(j);
}
END_TEST

Suite *modelfile_suite(void)
{
    Suite *s = suite_create("modelfile");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, parses_every_value_form);
    tcase_add_loop_test(tc, refuses_naming_the_line, 0, sizeof bad / sizeof *bad);
    tcase_add_test(tc, params_of_wrong_type_refused);
    tcase_add_loop_test(tc, every_reader_refuses_a_value_past_the_bounds, 0, sizeof past / sizeof *past);
    tcase_add_test(tc, penalties_reach_the_sampler_from_every_reader);
    tcase_add_test(tc, openai_fields_refuse_past_their_range);
    tcase_add_test(tc, every_spelling_gives_the_same_value);
    tcase_add_test(tc, defaults_are_the_samplers);
    tcase_add_test(tc, request_reads_as_the_modelfile);
    tcase_add_loop_test(tc, request_refuses_naming_the_field, 0, sizeof bad_request / sizeof *bad_request);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(modelfile_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
