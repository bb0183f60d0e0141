/* test_think.c: the <think> splitter (src/chat/think.c) fed whole, byte by byte and cut at
 * every point; which templates think; rendering with thinking on and off. */
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chat.h"

typedef struct got {
    char think[512], content[512];
    size_t nt, nc;
    int calls, stop_after; /* stop_after > 0: the callback stops at that call */
} got;

static int collect(void *ctx, int thinking, const char *s, size_t len)
{
    got *g = ctx;
    char *to = thinking ? g->think : g->content;
    size_t *n = thinking ? &g->nt : &g->nc;

    ck_assert_uint_gt(len, 0);
    ck_assert_uint_lt(*n + len, sizeof g->think);
    memcpy(to + *n, s, len);
    *n += len;
    to[*n] = '\0';
    return g->stop_after && ++g->calls >= g->stop_after;
}

/* Split `text` fed in the pieces that the cuts (ascending offsets, ncut of them) make. */
static void split(got *g, const char *text, const size_t *cuts, size_t ncut, int prefill)
{
    chat_think s;
    size_t at = 0, len = strlen(text);

    memset(g, 0, sizeof *g);
    chat_think_init(&s);
    if (prefill)
        ck_assert_int_eq(chat_think_feed(&s, "<think>", 7, collect, g), 0);
    for (size_t i = 0; i <= ncut; i++) {
        size_t to = i < ncut ? cuts[i] : len;
        ck_assert_int_eq(chat_think_feed(&s, text + at, to - at, collect, g), 0);
        at = to;
    }
    ck_assert_int_eq(chat_think_end(&s, collect, g), 0);
}

/* The same split whole, byte by byte, and cut once and twice at every offset. */
static void check_split(const char *text, int prefill, const char *think, const char *content)
{
    size_t len = strlen(text), cuts[2], *bytes = malloc((len + 1) * sizeof *bytes);
    got g;

    split(&g, text, NULL, 0, prefill);
    ck_assert_str_eq(g.think, think);
    ck_assert_str_eq(g.content, content);
    for (size_t i = 0; i < len; i++)
        bytes[i] = i + 1;
    split(&g, text, bytes, len ? len - 1 : 0, prefill);
    ck_assert_msg(!strcmp(g.think, think) && !strcmp(g.content, content), "byte by byte: [%s] [%s]", g.think,
                  g.content);
    for (cuts[0] = 0; cuts[0] <= len; cuts[0]++)
        for (cuts[1] = cuts[0]; cuts[1] <= len; cuts[1]++) {
            split(&g, text, cuts, 2, prefill);
            ck_assert_msg(!strcmp(g.think, think) && !strcmp(g.content, content), "cut at %zu, %zu: [%s] [%s]",
                          cuts[0], cuts[1], g.think, g.content);
        }
    free(bytes);
}

START_TEST(test_split_basic)
{
    check_split("<think>a plan</think>the answer", 0, "a plan", "the answer");
    /* the white space around both tags goes, as ollama's parser drops it; inside it stays */
    check_split("\n  <think>\n  reason\n</think>\n\n answer\n", 0, "reason\n", "answer\n");
    check_split("<think></think>answer", 0, "", "answer");
    check_split("", 0, "", "");
}
END_TEST

START_TEST(test_split_no_close)
{
    check_split("<think>still thinking when it ended", 0, "still thinking when it ended", "");
    /* a closing tag cut off by the end of the answer is reasoning */
    check_split("<think>ab</thi", 0, "ab</thi", "");
    check_split("<think>ab<", 0, "ab<", "");
}
END_TEST

START_TEST(test_split_text_first)
{
    /* the tag only opens reasoning at the start: anything before it makes all of it content */
    check_split("Hello <think>x</think> y", 0, "", "Hello <think>x</think> y");
    check_split("  hi", 0, "", "  hi");
    check_split("<thinking>x</thinking>", 0, "", "<thinking>x</thinking>");
}
END_TEST

START_TEST(test_split_lone_lt)
{
    check_split("<", 0, "", "<");
    check_split("<thi", 0, "", "<thi");
    check_split("< b", 0, "", "< b");
    check_split("<<think>", 0, "", "<<think>");
    /* "<" and cut closing tags inside the reasoning */
    check_split("<think>a<b</thinx c<</think>d</think>e", 0, "a<b</thinx c<", "d</think>e");
}
END_TEST

START_TEST(test_split_prefilled)
{
    /* the template opened the block: the answer begins inside it */
    check_split("\nreasoning here</think>\n\nAnswer.", 1, "reasoning here", "Answer.");
    check_split("no end", 1, "no end", "");
    check_split("</think>x", 1, "", "x");
}
END_TEST

START_TEST(test_split_bounded)
{
    /* white space before the tag is held up to CHAT_THINK_HOLD bytes, then given up on */
    char text[CHAT_THINK_HOLD + 32];
    got g;

    memset(text, ' ', CHAT_THINK_HOLD + 8);
    strcpy(text + CHAT_THINK_HOLD + 8, "<think>x</think>y");
    split(&g, text, NULL, 0, 0);
    ck_assert_str_eq(g.think, "");
    ck_assert_str_eq(g.content, text);
}
END_TEST

START_TEST(test_split_stop)
{
    chat_think s;
    got g;

    memset(&g, 0, sizeof g);
    g.stop_after = 1;
    chat_think_init(&s);
    ck_assert_int_eq(chat_think_feed(&s, "<think>a</think>b", 17, collect, &g), 1);
    ck_assert_int_eq(g.calls, 1);
    ck_assert_str_eq(g.think, "a");
    ck_assert_str_eq(g.content, "");
}
END_TEST

START_TEST(test_prefilled)
{
    ck_assert(chat_think_prefilled("<|im_start|>assistant\n<think>\n", 30));
    ck_assert(chat_think_prefilled("<think>", 7));
    ck_assert(!chat_think_prefilled("<think>\n\n</think>\n\n", 19));
    ck_assert(!chat_think_prefilled("think>", 6));
    ck_assert(!chat_think_prefilled("", 0));
}
END_TEST

/* Qwen3's template, cut to what mstore reads from it: ChatML, enable_thinking and </think>. */
static const char qwen3[] =
    "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- if '</think>' in message.content %}{% endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}"
    "{%- endif %}";
static const char qwen25[] =
    "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";
static const char go_think[] = "{{- range .Messages }}{{ .Role }}: {{ if .Thinking }}<think>{{ .Thinking }}</think>"
                               "{{ end }}{{ .Content }}\n{{ end }}A:{{ if .IsThinkSet }}{{ if .Think }} <think>"
                               "{{ else }} off{{ end }}{{ else }} unset{{ end }}";

static void render(char *out, size_t cap, const char *tmpl, int think)
{
    static const chat_msg m[] = {{.role = "user", .content = "hi"}};
    chat_template *t;
    char *text;
    size_t len;

    ck_assert_int_eq(chat_template_new(&t, tmpl, strlen(tmpl), NULL, NULL), 0);
    ck_assert_int_eq(chat_render_think(&text, &len, t, m, 1, NULL, 0, 1, think), 0);
    ck_assert_uint_eq(len, strlen(text));
    ck_assert_uint_lt(len, cap);
    strcpy(out, text);
    free(text);
    chat_template_free(t);
}

START_TEST(test_templates)
{
    static const struct {
        const char *text;
        int thinks;
    } cases[] = {
        {qwen3, 1},
        {qwen25, 0},
        {go_think, 1},
        {"{{ .Prompt }}", 0},
        {"", 0},
    };
    char out[512];

    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        chat_template *t;
        ck_assert_int_eq(chat_template_new(&t, cases[i].text, strlen(cases[i].text), NULL, NULL), 0);
        ck_assert_msg(chat_template_thinks(t) == cases[i].thinks, "case %zu", i);
        chat_template_free(t);
    }
    /* Qwen3: off adds the empty block enable_thinking=false renders; on and unset render as before */
    render(out, sizeof out, qwen3, 0);
    ck_assert_str_eq(out, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
    render(out, sizeof out, qwen3, 1);
    ck_assert_str_eq(out, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
    render(out, sizeof out, qwen3, -1);
    ck_assert_str_eq(out, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
    /* a template without enable_thinking renders the same whatever think says */
    render(out, sizeof out, qwen25, 0);
    ck_assert_str_eq(out, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
    /* ollama's .Think and .IsThinkSet */
    render(out, sizeof out, go_think, 1);
    ck_assert_str_eq(out, "user: hi\nA: <think>");
    render(out, sizeof out, go_think, 0);
    ck_assert_str_eq(out, "user: hi\nA: off");
    render(out, sizeof out, go_think, -1);
    ck_assert_str_eq(out, "user: hi\nA: unset");
    /* a level: on, and a Jinja template's reasoning_effort (gpt-oss's); without one it is undefined */
    {
        static const char effort[] = "{{ reasoning_effort }}|{{ enable_thinking }}|{{ reasoning_effort is defined }}";
        chat_template *t;
        ck_assert_int_eq(chat_template_new(&t, effort, strlen(effort), NULL, NULL), 0);
        ck_assert(chat_template_effort(t));
        chat_template_free(t);
        render(out, sizeof out, effort, CHAT_THINK_LOW);
        ck_assert_str_eq(out, "low|True|True");
        render(out, sizeof out, effort, CHAT_THINK_HIGH);
        ck_assert_str_eq(out, "high|True|True");
        render(out, sizeof out, effort, CHAT_THINK_ON);
        ck_assert_str_eq(out, "|True|False");
        render(out, sizeof out, effort, CHAT_THINK_UNSET);
        ck_assert_str_eq(out, "||False");
        ck_assert_ptr_null(chat_think_effort(CHAT_THINK_ON));
        ck_assert_ptr_null(chat_think_effort(CHAT_THINK_HIGH + 1));
        ck_assert_str_eq(chat_think_effort(CHAT_THINK_MINIMAL), "minimal");
        ck_assert_int_eq(chat_template_new(&t, qwen3, strlen(qwen3), NULL, NULL), 0);
        ck_assert(!chat_template_effort(t));
        chat_template_free(t);
    }
    /* an earlier answer's reasoning, as ollama's clients send it back, is the template's .Thinking */
    {
        static const chat_msg m[] = {{.role = "user", .content = "hi"},
                                     {.role = "assistant", .content = "yes", .thinking = "hmm"},
                                     {.role = "user", .content = "ok"}};
        chat_template *t;
        char *text;
        size_t len;
        ck_assert_int_eq(chat_template_new(&t, go_think, strlen(go_think), NULL, NULL), 0);
        ck_assert_int_eq(chat_render_think(&text, &len, t, m, 3, NULL, 0, 1, 1), 0);
        ck_assert_str_eq(text, "user: hi\nassistant: <think>hmm</think>yes\nuser: ok\nA: <think>");
        free(text);
        chat_template_free(t);
    }
}
END_TEST

static int file_thinks(const char *dir, const char *name)
{
    char *path = ms_strdup_printf("%s/tests/data/%s/%s", getenv("MSTORE_SRC") ? getenv("MSTORE_SRC") : ".", dir, name),
         *text = NULL;
    size_t len;
    chat_template *t;
    int thinks;

    ck_assert_msg(ms_file_read(&text, &len, path, 1 << 20) == 0, "%s", ms_err_msg());
    ck_assert_int_eq(chat_template_new(&t, text, len, "<s>", "</s>"), 0);
    thinks = chat_template_thinks(t);
    chat_template_free(t);
    free(text);
    free(path);
    return thinks;
}

/* The real templates: DeepSeek-R1's thinks; none of the chat families' does. */
START_TEST(test_real_templates)
{
    char *dir = ms_strdup_printf("%s/tests/data/chat/templates", getenv("MSTORE_SRC") ? getenv("MSTORE_SRC") : ".");
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;

    ck_assert(file_thinks("think", "deepseek-r1-distill.jinja"));
    ck_assert_msg(d, "%s", dir);
    while ((e = readdir(d)))
        if (strstr(e->d_name, ".jinja")) {
            ck_assert_msg(!file_thinks("chat/templates", e->d_name), "%s", e->d_name);
            n++;
        }
    closedir(d);
    free(dir);
    ck_assert_int_ge(n, 10);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("think");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, test_split_basic);
    tcase_add_test(tc, test_split_no_close);
    tcase_add_test(tc, test_split_text_first);
    tcase_add_test(tc, test_split_lone_lt);
    tcase_add_test(tc, test_split_prefilled);
    tcase_add_test(tc, test_split_bounded);
    tcase_add_test(tc, test_split_stop);
    tcase_add_test(tc, test_prefilled);
    tcase_add_test(tc, test_templates);
    tcase_add_test(tc, test_real_templates);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *r = srunner_create(suite());
    int failed;

    srunner_run_all(r, CK_NORMAL);
    failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? 1 : 0;
}
