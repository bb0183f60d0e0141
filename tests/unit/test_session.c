/* test_session.c: the generation session (src/session) on stories260K: prompts fed whole reuse
 * the KV cache exactly when their tokens extend it and give what a fresh session gives; stop
 * strings are cut and never shown in part; the context filling and a cancelling caller end a
 * generation with their reason; a prompt over the context is refused with nothing left cached;
 * each token comes with its log probabilities (runtime_logprobs), checked apart. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "helpers/fixture.h"
#include "session/session.h"

typedef struct fx {
    runtime_model *m;
    const tokenizer *t;
    session *S;
} fx;

static int open_fx(fx *f, int n_ctx)
{
    char *models = fixture_models_dir(), *path;
    runtime_opts o = {.n_threads = 1, .n_ctx = n_ctx};

    memset(f, 0, sizeof *f);
    if (!models)
        return -1;
    path = ms_strdup_printf("%s/stories260K/stories260K.gguf", models);
    free(models);
    ck_assert_msg(runtime_model_open_gguf(&f->m, path, &o) == 0, "%s", ms_err_msg());
    free(path);
    ck_assert_int_eq(runtime_weights_tokenizer(&f->t, runtime_model_weights(f->m)), 0);
    ck_assert_msg(session_new(&f->S, f->m, f->t, NULL, 0) == 0, "%s", ms_err_msg());
    runtime_sampler_opts so;
    runtime_sampler_defaults(&so);
    so.temp = 0;
    ck_assert_int_eq(session_sampler_set(f->S, &so), 0);
    return 0;
}

static void close_fx(fx *f)
{
    session_free(f->S);
    runtime_model_close(f->m);
}

typedef struct sink {
    char text[4096];
    size_t n, calls, cancel_after;
} sink;

static int collect(void *ctx, const char *s, size_t len)
{
    sink *k = ctx;

    ck_assert_uint_lt(k->n + len, sizeof k->text);
    memcpy(k->text + k->n, s, len);
    k->n += len;
    k->text[k->n] = '\0';
    return ++k->calls == k->cancel_after;
}

static session_done gen(fx *f, int n, const char *stop, sink *k)
{
    session_gen g = {.n_predict = n};
    session_done done;

    if (stop)
        g.stops[g.n_stops++] = stop;
    ck_assert_msg(session_generate(f->S, &g, 0, collect, k, &done) == 0, "%s", ms_err_msg());
    return done;
}

#define SKIP_WITHOUT_MODEL(f, ctx) \
    if (open_fx(f, ctx) < 0)       \
    return

/* runtime_logprobs on stories260K's real logits after "Once upon a time", against a separate
 * computation: every token's log-softmax in long double (log of the sum of exp, max subtracted),
 * the order by qsort on (logit desc, id asc). Then ties (the best logit copied to higher and
 * lower ids) list by id, and masked tokens (-inf) never appear, even when fewer than asked are
 * left. */
typedef struct ranked {
    float logit;
    int32_t id;
} ranked;

static int by_rank(const void *a, const void *b)
{
    const ranked *x = a, *y = b;

    if (x->logit != y->logit)
        return x->logit < y->logit ? 1 : -1;
    return (x->id > y->id) - (x->id < y->id);
}

static void logprobs_check(const float *logits, int n, int32_t chosen, int n_top)
{
    runtime_logprob top[RUNTIME_MAX_TOP_LOGPROBS];
    ranked *r = malloc((size_t)n * sizeof *r);
    long double mx = -INFINITY, sum = 0, lse;
    double lp;
    int m = 0, got;

    ck_assert_ptr_nonnull(r);
    for (int i = 0; i < n; i++)
        if (!isinf(logits[i])) {
            r[m++] = (ranked){logits[i], i};
            if (logits[i] > mx)
                mx = logits[i];
        }
    for (int i = 0; i < m; i++)
        sum += expl((long double)r[i].logit - mx);
    lse = mx + logl(sum);
    qsort(r, (size_t)m, sizeof *r, by_rank);
    got = runtime_logprobs(logits, n, chosen, &lp, top, n_top);
    ck_assert_int_eq(got, n_top < m ? n_top : m);
    /* double against long double: the sum of n exp() terms rounds at about n * 1e-16 */
    ck_assert_msg(fabs(lp - (double)((long double)logits[chosen] - lse)) < 1e-12, "chosen %d: %.17g", chosen, lp);
    for (int k = 0; k < got; k++) {
        ck_assert_int_eq(top[k].id, r[k].id);
        ck_assert_msg(fabs(top[k].logprob - (double)((long double)r[k].logit - lse)) < 1e-12, "top %d: %.17g", k,
                      top[k].logprob);
    }
    free(r);
}

START_TEST(runtime_logprobs_match_a_separate_computation)
{
    fx f;
    SKIP_WITHOUT_MODEL(&f, 64);
    const int32_t prompt[] = {1, 403, 407, 261, 378};
    int n = runtime_model_config(f.m)->vocab_size, best = 0;
    float *l = malloc((size_t)n * sizeof *l);
    double sum = 0, lp;
    runtime_logprob top[RUNTIME_MAX_TOP_LOGPROBS];

    ck_assert_ptr_nonnull(l);
    ck_assert_int_eq(runtime_forward(f.m, prompt, 5, l), 0);
    for (int i = 1; i < n; i++)
        best = l[i] > l[best] ? i : best;
    for (int k = 0; k <= RUNTIME_MAX_TOP_LOGPROBS; k += 5)
        logprobs_check(l, n, best, k);
    logprobs_check(l, n, 7, 3);
    /* the probabilities of the whole vocab sum to 1 */
    ck_assert_int_eq(runtime_logprobs(l, n, best, &lp, top, 0), 0);
    for (int i = 0; i < n; i++) {
        double li;
        runtime_logprobs(l, n, i, &li, top, 0);
        sum += exp(li);
    }
    ck_assert_msg(fabs(sum - 1.0) < 1e-9, "sum %.17g", sum);
    /* ties: ids 3 and 300 take the best logit; the best of the three lowest id first */
    l[3] = l[300] = l[best];
    logprobs_check(l, n, 300, 20);
    ck_assert_int_eq(runtime_logprobs(l, n, 300, &lp, top, 3), 3);
    ck_assert_int_eq(top[0].id, 3);
    ck_assert_int_eq(top[1].id, best < 300 ? best : 300);
    ck_assert(top[0].logprob == top[1].logprob && top[1].logprob == top[2].logprob);
    /* a mask: all but five tokens -inf; those five only, even when twenty are asked for */
    for (int i = 0; i < n; i++)
        if (i % 97 != 0)
            l[i] = -INFINITY;
    logprobs_check(l, n, 97, 20);
    ck_assert_int_eq(runtime_logprobs(l, n, 97, &lp, top, 20), (n + 96) / 97);
    free(l);
    close_fx(&f);
}
END_TEST

/* session_generate hands each token before its text: their texts join to what was emitted, the
 * greedy choice is the first alternative, and no token is reported without a callback asking. */
typedef struct lp_sink {
    sink k;
    char joined[4096];
    size_t n, tokens;
} lp_sink;

static int lp_token(void *ctx, const session_token *t)
{
    lp_sink *s = ctx;

    ck_assert_int_eq(t->n_top, 4);
    ck_assert_int_eq(t->top[0].id, t->id);
    ck_assert(t->top[0].logprob == t->logprob && t->logprob <= 0);
    ck_assert_uint_eq(s->n, s->k.n); /* ASCII story text, no stop: each token is out before the next */
    ck_assert_uint_lt(s->n + t->len, sizeof s->joined);
    memcpy(s->joined + s->n, t->text, t->len);
    s->n += t->len;
    s->tokens++;
    return 0;
}

static int lp_collect(void *ctx, const char *text, size_t len)
{
    return collect(&((lp_sink *)ctx)->k, text, len);
}

START_TEST(session_hands_each_token_with_its_logprobs)
{
    fx f;
    SKIP_WITHOUT_MODEL(&f, 64);
    lp_sink s = {0};
    session_gen g = {.n_predict = 12, .token = lp_token, .n_top = 4};
    session_done done;

    ck_assert_int_eq(session_feed(f.S, "Once upon a time", 16, 0, SESSION_FEED_EXACT), 0);
    ck_assert_msg(session_generate(f.S, &g, 0, lp_collect, &s, &done) == 0, "%s", ms_err_msg());
    ck_assert_uint_eq(s.tokens, 12);
    ck_assert_uint_eq(s.n, s.k.n);
    ck_assert(memcmp(s.joined, s.k.text, s.n) == 0);
    close_fx(&f);
}
END_TEST

START_TEST(session_exact_reuses_an_extended_prompt_and_answers_as_fresh)
{
    const char *a = "Once upon a time", *b = "Once upon a time, there was a cat";
    sink warm = {0}, cold = {0};
    fx f;

    SKIP_WITHOUT_MODEL(&f, 256);
    ck_assert_int_eq(session_feed(f.S, a, strlen(a), 0, SESSION_FEED_EXACT), 0);
    ck_assert_uint_eq(session_stats_get(f.S)->n_prompt, 5); /* BOS + 4 */
    session_stats_clear(f.S);
    ck_assert_int_eq(session_feed(f.S, b, strlen(b), 0, SESSION_FEED_EXACT), 0);
    ck_assert_uint_eq(session_stats_get(f.S)->n_prompt, 6); /* only what b adds */
    ck_assert_uint_eq(session_stats_get(f.S)->n_prompt_total, 11);
    ck_assert_int_eq(gen(&f, 16, NULL, &warm), SESSION_DONE_LENGTH);
    /* another prompt shares only BOS with the cache: the rest of b again, the same answer */
    ck_assert_int_eq(session_feed(f.S, "The dog", 7, 0, SESSION_FEED_EXACT), 0);
    session_stats_clear(f.S);
    ck_assert_int_eq(session_feed(f.S, b, strlen(b), 0, SESSION_FEED_EXACT), 0);
    ck_assert_uint_eq(session_stats_get(f.S)->n_prompt, 10);
    ck_assert_int_eq(gen(&f, 16, NULL, &cold), SESSION_DONE_LENGTH);
    ck_assert_str_eq(warm.text, cold.text);
    ck_assert_uint_gt(strlen(warm.text), 10);
    close_fx(&f);
}
END_TEST

/* A prompt that parts from the cached one midway runs only what follows the shared tokens, and
 * answers exactly as from a cold cache: the kept positions hold the same keys and values. */
START_TEST(session_exact_keeps_the_longest_common_prefix)
{
    const char *a = "Once upon a time, there was a cat", *b = "Once upon a time, there was a dog named Max";
    sink warm = {0}, cold = {0};
    fx f;

    SKIP_WITHOUT_MODEL(&f, 256);
    ck_assert_int_eq(session_feed(f.S, a, strlen(a), 0, SESSION_FEED_EXACT), 0);
    ck_assert_int_eq(gen(&f, 8, NULL, &warm), SESSION_DONE_LENGTH);
    warm = (sink){0};
    session_stats_clear(f.S);
    ck_assert_int_eq(session_feed(f.S, b, strlen(b), 0, SESSION_FEED_EXACT), 0);
    size_t reused = session_stats_get(f.S)->n_prompt_total - session_stats_get(f.S)->n_prompt;
    ck_assert_uint_ge(reused, 9);   /* BOS and "Once upon a time, there was a" */
    ck_assert_int_eq(gen(&f, 16, NULL, &warm), SESSION_DONE_LENGTH);
    session_reset(f.S);
    ck_assert_int_eq(session_feed(f.S, b, strlen(b), 0, SESSION_FEED_EXACT), 0);
    ck_assert_int_eq(gen(&f, 16, NULL, &cold), SESSION_DONE_LENGTH);
    ck_assert_str_eq(warm.text, cold.text);
    close_fx(&f);
}
END_TEST

/* session_count gives the tokens session_feed runs, and refuses a text whose bytes alone cannot
 * fit the context without tokenizing it ("at least"), so that refusing it costs nothing. */
START_TEST(session_count_matches_feed_and_refuses_by_bytes)
{
    const char *a = "Once upon a time, there was a cat";
    size_t n = 0, big_len = 1 << 20;
    char *big;
    fx f;

    SKIP_WITHOUT_MODEL(&f, 256);
    ck_assert_ptr_nonnull(big = malloc(big_len));
    ck_assert_int_eq(session_count(f.S, a, strlen(a), 0, 0, &n), 0);
    ck_assert_int_eq(session_feed(f.S, a, strlen(a), 0, SESSION_FEED_EXACT), 0);
    ck_assert_uint_eq(n, session_stats_get(f.S)->n_prompt_total);
    memset(big, 'a', big_len);
    ck_assert_int_eq(session_count(f.S, big, big_len, 0, 0, &n), MS_ETOOBIG);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "prompt of at least"));
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "does not fit the context of 256 tokens"));
    ck_assert_int_eq(session_feed(f.S, big, big_len, 0, SESSION_FEED_EXACT), MS_ETOOBIG);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "prompt of at least"));
    /* a text that tokenizes past the context, though its bytes could fit: counted, refused */
    ck_assert_int_eq(session_count(f.S, big, 300 * 2, 0, 0, &n), MS_ETOOBIG);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "tokens does not fit the context of 256 tokens"));
    free(big);
    close_fx(&f);
}
END_TEST

START_TEST(session_whole_feeds_only_the_text_after_the_cache)
{
    const char *a = "Once upon a time", *b = "Once upon a time there was";
    fx f;

    SKIP_WITHOUT_MODEL(&f, 256);
    ck_assert_int_eq(session_feed(f.S, a, strlen(a), 0, SESSION_FEED_WHOLE), 0);
    session_stats_clear(f.S);
    ck_assert_int_eq(session_feed(f.S, b, strlen(b), 0, SESSION_FEED_WHOLE), 0);
    ck_assert_uint_lt(session_stats_get(f.S)->n_prompt, 5);
    ck_assert_int_eq(runtime_model_n_past(f.m), (int)session_stats_get(f.S)->n_prompt_total);
    close_fx(&f);
}
END_TEST

START_TEST(session_stop_string_is_cut_and_never_shown)
{
    sink all = {0}, cut = {0};
    fx f;

    SKIP_WITHOUT_MODEL(&f, 256);
    ck_assert_int_eq(session_feed(f.S, "Once upon a time", 16, 0, SESSION_FEED_EXACT), 0);
    ck_assert_int_eq(gen(&f, 24, NULL, &all), SESSION_DONE_LENGTH);
    ck_assert_ptr_nonnull(strstr(all.text, "Lily"));
    ck_assert_int_eq(session_feed(f.S, "Once upon a time", 16, 0, SESSION_FEED_EXACT), 0);
    ck_assert_int_eq(gen(&f, 24, "Lily", &cut), SESSION_DONE_STOP);
    ck_assert_uint_eq(cut.n, (size_t)(strstr(all.text, "Lily") - all.text));
    ck_assert_int_eq(strncmp(cut.text, all.text, cut.n), 0);
    ck_assert_ptr_null(strstr(cut.text, "L")); /* not even the start of the stop string */
    close_fx(&f);
}
END_TEST

START_TEST(session_context_full_and_cancel_say_why)
{
    sink k = {0}, c = {.cancel_after = 3};
    fx f;

    SKIP_WITHOUT_MODEL(&f, 16);
    ck_assert_int_eq(session_feed(f.S, "Once upon a time", 16, 0, SESSION_FEED_EXACT), 0);
    ck_assert_int_eq(gen(&f, -1, NULL, &k), SESSION_DONE_CONTEXT);
    ck_assert_int_eq(runtime_model_n_past(f.m), 16);
    ck_assert_uint_eq(session_stats_get(f.S)->n_gen, 11 + 1); /* the last one fits no more */
    ck_assert_int_eq(session_feed(f.S, "Once upon a time", 16, 0, SESSION_FEED_EXACT), 0);
    ck_assert_int_eq(gen(&f, -1, NULL, &c), SESSION_DONE_CANCELLED);
    ck_assert_uint_eq(c.calls, 3);
    /* a prompt over the context: refused, nothing cached */
    ck_assert_int_eq(session_feed(f.S, "Once upon a time there was a little girl named Lily who loved to play", 70, 0,
                                  SESSION_FEED_EXACT),
                     MS_ETOOBIG);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "does not fit the context of 16 tokens"));
    ck_assert_int_eq(runtime_model_n_past(f.m), 0);
    close_fx(&f);
}
END_TEST

/* With a format the answer is what the grammar allows and ends as soon as nothing can follow;
 * a bad schema is refused and leaves the old format; NULL frees the text again. */
START_TEST(session_format_constrains_the_answer_and_ends_it)
{
    static const char schema[] = "{\"enum\":[\"yes\",\"no\"]}";
    sink k = {0}, free_text = {0};
    fx f;

    SKIP_WITHOUT_MODEL(&f, 256);
    ck_assert_int_eq(session_format_set(f.S, schema, strlen(schema)), 0);
    ck_assert_int_eq(session_feed(f.S, "Once upon a time", 16, 0, SESSION_FEED_WHOLE), 0);
    ck_assert_int_eq(gen(&f, 100, NULL, &k), SESSION_DONE_STOP);
    {
        char v[sizeof k.text];
        size_t n = 0;
        for (size_t i = 0; i < k.n; i++) /* JSON whitespace may go around the value */
            if (!strchr(" \n\t", k.text[i]))
                v[n++] = k.text[i];
        v[n] = '\0';
        ck_assert_msg(!strcmp(v, "\"yes\"") || !strcmp(v, "\"no\""), "answer '%s'", k.text);
    }
    ck_assert_int_eq(session_format_set(f.S, "{\"allOf\":[]}", 12), MS_EUNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "schema keyword 'allOf' at ''"));
    ck_assert_int_eq(session_format_set(f.S, NULL, 0), 0);
    session_reset(f.S);
    ck_assert_int_eq(session_feed(f.S, "Once upon a time", 16, 0, SESSION_FEED_WHOLE), 0);
    ck_assert_int_eq(gen(&f, 12, NULL, &free_text), SESSION_DONE_LENGTH);
    ck_assert_ptr_nonnull(strstr(free_text.text, "there was a little girl named Lily"));
    close_fx(&f);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("session");
    TCase *tc = tcase_create("session");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, session_exact_reuses_an_extended_prompt_and_answers_as_fresh);
    tcase_add_test(tc, session_exact_keeps_the_longest_common_prefix);
    tcase_add_test(tc, session_whole_feeds_only_the_text_after_the_cache);
    tcase_add_test(tc, session_count_matches_feed_and_refuses_by_bytes);
    tcase_add_test(tc, session_stop_string_is_cut_and_never_shown);
    tcase_add_test(tc, session_context_full_and_cancel_say_why);
    tcase_add_test(tc, session_format_constrains_the_answer_and_ends_it);
    tcase_add_test(tc, runtime_logprobs_match_a_separate_computation);
    tcase_add_test(tc, session_hands_each_token_with_its_logprobs);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
