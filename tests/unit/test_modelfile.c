/* test_modelfile.c: Modelfile syntax, params of the wrong type, stop strings over streamed text. */
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
    {"FROM a\nPARAMETER top_k 1.5\n", MS_EINVALID, "MF:2: PARAMETER top_k: the value is not an integer"},
    {"FROM a\nPARAMETER temperature hot\n", MS_EINVALID, "MF:2: PARAMETER temperature: the value is not a number"},
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
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "'top_k' must be an integer"));
    json_decref(o);
    o = json_loads("{\"stop\": [\"a\", 3]}", 0, NULL);
    ck_assert_int_eq(mf_params_from_json(&p, o, "params"), MS_EINVALID);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "'stop'[1]"));
    json_decref(o);
    for (size_t i = 0; i < p.n_stop; i++)
        free(p.stop[i]);
}
END_TEST

/* Text streamed so far, stops "foo" and "<|end|>": how much may be shown, and whether to stop. */
static const struct {
    const char *pending;
    int stop;
    size_t emit;
} scans[] = {
    {"hello", 0, 5}, /* nothing like a stop */
    {"hello f", 0, 6}, /* "f" may become "foo": held */
    {"hello fo", 0, 6}, {"hello foo bar", 1, 6}, /* stop: show what precedes it */
    {"a<|en", 0, 1},    {"a<|end|>b foo", 1, 1}, /* the first stop wins */
    {"fox", 0, 3}, /* "fo" then "x": no longer a prefix */
};

START_TEST(stop_scan_holds_prefixes)
{
    model_params p = {.n_stop = 2};
    size_t emit;

    p.stop[0] = "foo";
    p.stop[1] = "<|end|>";
    ck_assert_int_eq(model_params_stop_scan(&p, scans[_i].pending, strlen(scans[_i].pending), &emit), scans[_i].stop);
    ck_assert_uint_eq(emit, scans[_i].emit);
}
END_TEST

Suite *modelfile_suite(void)
{
    Suite *s = suite_create("modelfile");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, parses_every_value_form);
    tcase_add_loop_test(tc, refuses_naming_the_line, 0, sizeof bad / sizeof *bad);
    tcase_add_test(tc, params_of_wrong_type_refused);
    tcase_add_loop_test(tc, stop_scan_holds_prefixes, 0, sizeof scans / sizeof *scans);
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
