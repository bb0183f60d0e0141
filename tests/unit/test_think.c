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

/* ---------------------------------------------------------------- harmony (src/chat/harmony.c) */

typedef struct hgot {
    char think[1024], content[1024], calls[1024];
    size_t nt, nc, nk;
    int n_calls, pieces, stop_after;
} hgot;

static void hput(char *to, size_t *n, const char *s, size_t len)
{
    ck_assert_uint_lt(*n + len, 1024);
    memcpy(to + *n, s, len);
    *n += len;
    to[*n] = '\0';
}

/* calls read "|name:args|name:args" */
static int hcollect(void *ctx, int kind, const char *s, size_t len)
{
    hgot *g = ctx;

    switch (kind) {
    case CHAT_HARMONY_CONTENT:
        ck_assert_uint_gt(len, 0);
        hput(g->content, &g->nc, s, len);
        break;
    case CHAT_HARMONY_THINKING:
        ck_assert_uint_gt(len, 0);
        hput(g->think, &g->nt, s, len);
        break;
    case CHAT_HARMONY_CALL: /* the name comes whole, in one piece */
        g->n_calls++;
        hput(g->calls, &g->nk, "|", 1);
        hput(g->calls, &g->nk, s, len);
        hput(g->calls, &g->nk, ":", 1);
        break;
    case CHAT_HARMONY_ARGS:
        ck_assert_int_gt(g->n_calls, 0);
        hput(g->calls, &g->nk, s, len);
        break;
    default:
        ck_abort_msg("kind %d", kind);
    }
    return g->stop_after && ++g->pieces >= g->stop_after;
}

static void hsplit(hgot *g, const char *text, const size_t *cuts, size_t ncut)
{
    chat_harmony h;
    size_t at = 0, len = strlen(text);

    memset(g, 0, sizeof *g);
    chat_harmony_init(&h);
    for (size_t i = 0; i <= ncut; i++) {
        size_t to = i < ncut ? cuts[i] : len;
        ck_assert_int_eq(chat_harmony_feed(&h, text + at, to - at, hcollect, g), 0);
        at = to;
    }
    ck_assert_int_eq(chat_harmony_end(&h, hcollect, g), 0);
}

static int hsame(const hgot *g, const char *think, const char *content, const char *calls, int n_calls)
{
    return !strcmp(g->think, think) && !strcmp(g->content, content) && !strcmp(g->calls, calls) &&
           g->n_calls == n_calls;
}

/* Whole, byte by byte, and cut once and twice at every offset: the same pieces every time. */
static void check_harmony(const char *text, const char *think, const char *content, const char *calls, int n_calls)
{
    size_t len = strlen(text), cuts[2], *bytes = malloc((len + 1) * sizeof *bytes);
    hgot g;

    hsplit(&g, text, NULL, 0);
    ck_assert_str_eq(g.think, think);
    ck_assert_str_eq(g.content, content);
    ck_assert_str_eq(g.calls, calls);
    ck_assert_int_eq(g.n_calls, n_calls);
    for (size_t i = 0; i < len; i++)
        bytes[i] = i + 1;
    hsplit(&g, text, bytes, len ? len - 1 : 0);
    ck_assert_msg(hsame(&g, think, content, calls, n_calls), "byte by byte: [%s] [%s] [%s]", g.think, g.content,
                  g.calls);
    for (cuts[0] = 0; cuts[0] <= len; cuts[0]++)
        for (cuts[1] = cuts[0]; cuts[1] <= len; cuts[1] += 3) {
            hsplit(&g, text, cuts, 2);
            ck_assert_msg(hsame(&g, think, content, calls, n_calls), "cut at %zu, %zu: [%s] [%s] [%s]", cuts[0],
                          cuts[1], g.think, g.content, g.calls);
        }
    free(bytes);
}

START_TEST(test_harmony_analysis_final)
{
    check_harmony("<|channel|>analysis<|message|>User asks: capital. Paris.<|end|>"
                  "<|start|>assistant<|channel|>final<|message|>The capital is Paris.<|return|>",
                  "User asks: capital. Paris.", "The capital is Paris.", "", 0);
    /* generation stops at <|return|>, which the text then lacks */
    check_harmony("<|channel|>analysis<|message|>a\nb <i>\n<|end|><|start|>assistant<|channel|>final<|message|>\n x\n",
                  "a\nb <i>\n", "\n x\n", "", 0);
    /* a final message with no analysis before it */
    check_harmony("<|channel|>final<|message|>Hi there!<|return|>", "", "Hi there!", "", 0);
}
END_TEST

START_TEST(test_harmony_tool_calls)
{
    /* the recipient after the channel, with <|constrain|> */
    check_harmony("<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary "
                  "to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}<|call|>",
                  "Need the weather.", "", "|get_weather:{\"city\":\"Paris\"}", 1);
    /* the recipient after the role, before <|channel|>; cut at the end (<|call|> ended it) */
    check_harmony("<|channel|>analysis<|message|>x<|end|><|start|>assistant to=functions.get_weather<|channel|>"
                  "commentary json<|message|>{\"a\": [1, 2]}",
                  "x", "", "|get_weather:{\"a\": [1, 2]}", 1);
    /* a preamble (commentary without recipient) is content; two calls in a row */
    check_harmony("<|channel|>commentary<|message|>Let me check.<|end|><|start|>assistant<|channel|>commentary "
                  "to=functions.f <|constrain|>json<|message|>{}<|call|><|start|>assistant<|channel|>commentary "
                  "to=functions.g<|message|>{\"k\":1}<|call|>",
                  "", "Let me check.", "|f:{}|g:{\"k\":1}", 2);
    /* a recipient that is no function keeps its name; an empty one is still a call */
    check_harmony("<|channel|>commentary to= <|message|>{}", "", "", "|:{}", 1);
    check_harmony("<|channel|>analysis to=browser.search code<|message|>{\"q\":\"x\"}<|call|>", "", "",
                  "|browser.search:{\"q\":\"x\"}", 1);
}
END_TEST

START_TEST(test_harmony_odd_answers)
{
    /* an unknown channel is content, as ollama's parser has it */
    check_harmony("<|channel|>weird<|message|>odd<|end|><|start|>assistant<|channel|>final<|message|>ok", "", "oddok",
                  "", 0);
    /* truncated: inside the analysis, and inside a marker (then it was text) */
    check_harmony("<|channel|>analysis<|message|>still thin", "still thin", "", "", 0);
    check_harmony("<|channel|>analysis<|message|>abc<|en", "abc<|en", "", "", 0);
    /* cut inside a header: markup, dropped */
    check_harmony("<|channel|>analysis<|message|>a<|end|><|start|>assistant<|chan", "a", "", "", 0);
    /* markers never reach content; '<' and "<|" that begin none are text */
    check_harmony("<|channel|>final<|message|>a<|constrain|>b<|message|>c 1 < 2 <|x|> <", "", "abc 1 < 2 <|x|> <", "",
                  0);
    /* "<|start|>" left out between messages */
    check_harmony("<|channel|>analysis<|message|>t<|end|><|channel|>final<|message|>c", "t", "c", "", 0);
    /* not harmony at all: short, and longer than any header */
    check_harmony("Hello <b>world</b>", "", "Hello <b>world</b>", "", 0);
    check_harmony("", "", "", "", 0);
}
END_TEST

START_TEST(test_harmony_bounded)
{
    char text[CHAT_HARMONY_HOLD * 2 + 1];
    hgot g;

    memset(text, 'w', sizeof text - 1);
    text[sizeof text - 1] = '\0';
    text[3] = '<', text[4] = '|'; /* looks like markup, yet no header is this long */
    hsplit(&g, text, NULL, 0);
    ck_assert_str_eq(g.content, text);
    ck_assert_str_eq(g.think, "");
}
END_TEST

START_TEST(test_harmony_stop)
{
    static const char text[] = "<|channel|>analysis<|message|>a<|end|><|start|>assistant<|channel|>final<|message|>b";
    chat_harmony h;
    hgot g;

    memset(&g, 0, sizeof g);
    g.stop_after = 1;
    chat_harmony_init(&h);
    ck_assert_int_eq(chat_harmony_feed(&h, text, sizeof text - 1, hcollect, &g), 1);
    ck_assert_str_eq(g.think, "a");
    ck_assert_str_eq(g.content, "");
}
END_TEST

/* gpt-oss's templates, Jinja (reasoning_effort, tools) and ollama's Go one, are told by their
 * markers; they think and take tools as harmony calls */
START_TEST(test_harmony_templates)
{
    static const char jinja[] =
        "Reasoning: {{ reasoning_effort | default('medium') }}"
        "{%- if tools %}{{ tools | tojson }}{% endif %}"
        "{%- for m in messages %}<|start|>{{ m.role }}{% if m.thinking %}<|channel|>analysis<|message|>"
        "{{ m.thinking }}<|end|><|start|>{{ m.role }}{% endif %}<|channel|>final<|message|>{{ m.content }}<|end|>"
        "{% endfor %}{%- if add_generation_prompt %}<|start|>assistant{% endif %}";
    static const char go[] = "{{ if .ThinkLevel }}Reasoning: {{ .ThinkLevel }}{{ end }}"
                             "{{- range .Messages }}<|start|>{{ .Role }}<|channel|>final<|message|>{{ .Content }}"
                             "<|end|>{{ end }}<|start|>assistant";
    static const char chatml[] = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n"
                                 "{% endfor %}<|start|> <|channel|>";
    static const chat_msg msg = {.role = "user", .content = "hi"};
    static const chat_msg past[] = {{.role = "user", .content = "hi"},
                                    {.role = "assistant", .content = "yo", .thinking = "hm"},
                                    {.role = "user", .content = "again"}};
    chat_template *t;
    chat_tool_syntax syn;
    char *out;
    size_t len;

    ck_assert_int_eq(chat_template_new(&t, jinja, sizeof jinja - 1, "", ""), 0);
    ck_assert_int_eq(chat_template_harmony(t), 1);
    ck_assert_int_eq(chat_template_thinks(t), 1);
    ck_assert_int_eq(chat_template_tool_syntax(t, &syn), 0);
    ck_assert_int_eq(syn.harmony, 1);
    ck_assert_int_eq(chat_render_think(&out, &len, t, &msg, 1, NULL, 0, 1, CHAT_THINK_HIGH), 0);
    ck_assert_str_eq(out, "Reasoning: high<|start|>user<|channel|>final<|message|>hi<|end|><|start|>assistant");
    free(out);
    /* an assistant's thinking, sent back as ollama's clients do, reaches the template */
    ck_assert_int_eq(chat_render_think(&out, &len, t, past, 3, NULL, 0, 1, CHAT_THINK_UNSET), 0);
    ck_assert_str_eq(out, "Reasoning: medium<|start|>user<|channel|>final<|message|>hi<|end|><|start|>assistant"
                          "<|channel|>analysis<|message|>hm<|end|><|start|>assistant<|channel|>final<|message|>yo<|end|>"
                          "<|start|>user<|channel|>final<|message|>again<|end|><|start|>assistant");
    free(out);
    chat_template_free(t);
    ck_assert_int_eq(chat_template_new(&t, go, sizeof go - 1, "", ""), 0);
    ck_assert_int_eq(chat_template_family(t), CHAT_OLLAMA);
    ck_assert_int_eq(chat_template_harmony(t), 1);
    ck_assert_int_eq(chat_template_thinks(t), 1);
    ck_assert_int_eq(chat_template_effort(t), 1); /* .ThinkLevel: ollama's gpt-oss template takes levels */
    ck_assert_int_eq(chat_render_think(&out, &len, t, &msg, 1, NULL, 0, 1, CHAT_THINK_LOW), 0);
    ck_assert_str_eq(out, "Reasoning: low<|start|>user<|channel|>final<|message|>hi<|end|><|start|>assistant");
    free(out);
    ck_assert_int_eq(chat_render_think(&out, &len, t, &msg, 1, NULL, 0, 1, CHAT_THINK_ON), 0);
    ck_assert_str_eq(out, "<|start|>user<|channel|>final<|message|>hi<|end|><|start|>assistant");
    free(out);
    chat_template_free(t);
    /* one marker is not enough */
    ck_assert_int_eq(chat_template_new(&t, chatml, sizeof chatml - 1, "", ""), 0);
    ck_assert_int_eq(chat_template_harmony(t), 0);
    ck_assert_int_eq(chat_template_thinks(t), 0);
    chat_template_free(t);
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
    tcase_add_test(tc, test_harmony_analysis_final);
    tcase_add_test(tc, test_harmony_tool_calls);
    tcase_add_test(tc, test_harmony_odd_answers);
    tcase_add_test(tc, test_harmony_bounded);
    tcase_add_test(tc, test_harmony_stop);
    tcase_add_test(tc, test_harmony_templates);
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
