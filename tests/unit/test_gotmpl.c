/* test_gotmpl.c: ollama's Go templates (src/chat/gotmpl.c) against the texts ollama's own
 * engine renders (tests/data/gotmpl, see its SOURCE.md), the subset's edges, and refusals. */
#include <check.h>
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
    {"{{ json .Tools }}", MS_EUNSUPPORTED, "function 'json'"},
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
