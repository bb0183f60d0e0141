/* test_runtime_batch.c: several sequences in one forward pass (runtime_forward_multi,
 * runtime_seq_forward). The property under test is runtime.h's: a sequence's logits are bit for
 * bit those of the same tokens run alone, whoever shares its passes and however its prompt is
 * cut. Each model runs four sequences alone first (a model of one sequence, prompt then 12
 * greedy tokens, every step's logits kept), then together: packed by one thread with sequences
 * joining and leaving at different steps, and from four threads at once. Every step's logits
 * are compared with memcmp, on the CPU and, with MSTORE_TEST_BATCH_DEVICE=vulkan (ctest's
 * test_runtime_batch_vulkan, on lavapipe), on the GPU backend: there a pass of one or two rows
 * takes the matrix-vector shader and a longer one the tiled shader, and a sequence's rows must
 * still be bit for bit. The models: stories260K in F32, F16 and mixed Q5_0/Q8_0/F16 (shared
 * models), and synthetic ones (python3 + numpy): llama Q4_0 and Q8_0 (the kernels that quantize
 * activations), Gemma 3 with a sliding window shorter than the prompts (ring caches) and
 * Qwen3-MoE (experts per row). Contexts per sequence (runtime_seq_set_ctx): a pool of three
 * sequences where one is resized past the others' context, each one's logits against a model
 * opened with its context alone (stories260K, Gemma 3's rings, Phi-3's longrope). */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers/fixture.h"
#include "runtime/runtime.h"

#define N_SEQ  4
#define N_GEN  12
#define N_BATCH 8   /* small: prompts are cut into several passes, shared with the others' tokens */

static const int prompt_len[N_SEQ] = { 5, 19, 1, 11 };

typedef struct seqref {
    int32_t toks[64];        /* prompt, then the greedy tokens */
    float *logits[N_GEN + 1];   /* after the prompt, then after each generated token but the last */
} seqref;

static const char *device(void)
{
    return getenv("MSTORE_TEST_BATCH_DEVICE") ? getenv("MSTORE_TEST_BATCH_DEVICE") : "cpu";
}

static int on_cpu(void)
{
    return strcmp(device(), "cpu") == 0;
}

static runtime_model *open_n(const char *path, int n_seq)
{
    runtime_opts o = { .n_threads = 2, .n_ctx = 128, .n_batch = N_BATCH, .device = device(), .n_seq = n_seq };
    runtime_model *m;

    ck_assert_msg(runtime_model_open_gguf(&m, path, &o) == 0, "%s: %s", path, ms_err_msg());
    return m;
}

/* got against want: the same bits, on every device. */
static int agree(const float *got, const float *want, int V)
{
    return memcmp(got, want, sizeof(float) * V) == 0;
}

/* Each sequence alone on a model of one sequence: prompt (distinct per sequence), 12 greedy steps. */
static void run_alone(const char *path, seqref *ref)
{
    runtime_model *m = open_n(path, 1);
    int V = runtime_model_config(m)->vocab_size;

    for (int s = 0; s < N_SEQ; s++) {
        seqref *r = &ref[s];
        int n = prompt_len[s];
        r->toks[0] = 1;
        for (int i = 1; i < n; i++)
            r->toks[i] = (int32_t)(3 + (s * 37 + i * 11) % (V - 3));
        runtime_model_reset(m);
        for (int g = 0; g <= N_GEN; g++) {
            r->logits[g] = malloc(sizeof(float) * V);
            ck_assert_msg(runtime_forward(m, g == 0 ? r->toks : &r->toks[n + g - 1], g == 0 ? n : 1, r->logits[g]) == 0,
                          "%s", ms_err_msg());
            r->toks[n + g] = fixture_argmax(r->logits[g], V);
        }
    }
    runtime_model_close(m);
}

static void free_ref(seqref *ref)
{
    for (int s = 0; s < N_SEQ; s++)
        for (int g = 0; g <= N_GEN; g++)
            free(ref[s].logits[g]);
}

static void same(const seqref *r, int s, int g, const float *got, int V, const char *how)
{
    ck_assert_msg(agree(got, r->logits[g], V), "%s: sequence %d step %d: logits differ from the sequence run alone", how,
                  s, g);
}

/* One thread, runtime_forward_multi: all four prompts in one call (39 rows in passes of 8, one
 * row of each first), then steps where sequence 2 starts late (its prompt runs beside the
 * others' tokens) and sequence 1 stops early. */
static void run_packed(const char *path, const seqref *ref)
{
    runtime_model *m = open_n(path, N_SEQ);
    int V = runtime_model_config(m)->vocab_size, step[N_SEQ] = { 0 };
    float *lg[N_SEQ];
    runtime_batch_stats st;

    for (int s = 0; s < N_SEQ; s++)
        lg[s] = malloc(sizeof(float) * V);
    for (int round = 0;; round++) {
        runtime_seq_item it[N_SEQ];
        int n = 0;
        for (int s = 0; s < N_SEQ; s++) {
            int g = step[s];
            if (g > N_GEN || (s == 2 && round < 5) || (s == 1 && g > 6))
                continue;
            it[n++] = (runtime_seq_item){ .seq = s,
                                          .tokens = g == 0 ? ref[s].toks : &ref[s].toks[prompt_len[s] + g - 1],
                                          .n = g == 0 ? prompt_len[s] : 1,
                                          .logits = lg[s] };
        }
        if (n == 0)
            break;
        ck_assert_msg(runtime_forward_multi(m, it, n) == 0, "%s", ms_err_msg());
        for (int i = 0; i < n; i++) {
            int s = it[i].seq;
            same(&ref[s], s, step[s], lg[s], V, "packed");
            step[s]++;
        }
    }
    runtime_batch_stats_get(m, &st);
    ck_assert_msg(st.max_seqs == N_SEQ, "no pass held all %d sequences (max %llu)", N_SEQ,
                  (unsigned long long)st.max_seqs);
    for (int s = 0; s < N_SEQ; s++)
        free(lg[s]);
    runtime_model_close(m);
}

typedef struct worker {
    runtime_model *m;
    const seqref *r;
    int s, V, bad_step, rc;
    char msg[256];
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    float *lg = malloc(sizeof(float) * w->V);
    int n = prompt_len[w->s];

    w->bad_step = -1;
    runtime_seq_active(w->m, w->s, 1);
    for (int g = 0; g <= N_GEN && w->bad_step < 0; g++) {
        if ((w->rc = runtime_seq_forward(w->m, w->s, g == 0 ? w->r->toks : &w->r->toks[n + g - 1], g == 0 ? n : 1,
                                         lg)) < 0) {
            snprintf(w->msg, sizeof w->msg, "%s", ms_err_msg());
            break;
        }
        if (!agree(lg, w->r->logits[g], w->V))
            w->bad_step = g;
    }
    runtime_seq_active(w->m, w->s, 0);
    free(lg);
    return NULL;
}

/* Four threads, one sequence each, at once: however the passes fall, every step is the same. */
static void run_threads(const char *path, const seqref *ref)
{
    runtime_model *m = open_n(path, N_SEQ);
    worker w[N_SEQ];
    pthread_t th[N_SEQ];
    runtime_batch_stats st;

    for (int s = 0; s < N_SEQ; s++) {
        w[s] = (worker){ .m = m, .r = &ref[s], .s = s, .V = runtime_model_config(m)->vocab_size };
        ck_assert_int_eq(pthread_create(&th[s], NULL, work, &w[s]), 0);
    }
    for (int s = 0; s < N_SEQ; s++)
        pthread_join(th[s], NULL);
    for (int s = 0; s < N_SEQ; s++) {
        ck_assert_msg(w[s].rc == 0, "sequence %d: %s", s, w[s].msg);
        ck_assert_msg(w[s].bad_step < 0, "threads: sequence %d step %d: logits differ from the sequence run alone", s,
                      w[s].bad_step);
    }
    runtime_batch_stats_get(m, &st);
    printf("measured: %s: %llu passes for %llu sequence steps, at most %llu sequences in one\n", path,
           (unsigned long long)st.passes, (unsigned long long)st.seqs, (unsigned long long)st.max_seqs);
    runtime_model_close(m);
}

/* 1 (said) when the device under test is not on this machine: a skip; any other failure of
 * opening the model the test's own open reports. */
static int device_missing(const char *path)
{
    runtime_opts o = { .device = device() };
    runtime_model *probe;
    int rc;

    if (on_cpu())
        return 0;
    if ((rc = runtime_model_open_gguf(&probe, path, &o)) == MS_EUNSUPPORTED) {
        printf("skipped: device %s: %s\n", device(), ms_err_msg());
        return 1;
    }
    if (rc == 0)
        runtime_model_close(probe);
    return 0;
}

static void check_path(const char *path)
{
    seqref ref[N_SEQ];

    if (device_missing(path))
        return;
    memset(ref, 0, sizeof ref);
    run_alone(path, ref);
    run_packed(path, ref);
    run_threads(path, ref);
    free_ref(ref);
}

static const char *const shared[] = { "stories260K/stories260K.gguf", "stories260K/s260k-f16.gguf",
                                      "stories260K/s260k-mixed.gguf" };

START_TEST(shared_models_batch_bit_for_bit)
{
    char *p = fixture_model_path(shared[_i]);

    if (p)
        check_path(p);
    free(p);
}
END_TEST

/* ---- contexts per sequence (runtime_seq_set_ctx) */

#define CTX_BASE 32   /* each of the pool's three sequences at open */

/* Tokens t[0..n) on sequence seq of m: a prompt of n_prompt, then one at a time; the logits after
 * the prompt and after each later token into lg (rows of V). */
static void run_seq(runtime_model *m, int seq, const int32_t *t, int n_prompt, int n, float *lg, int V)
{
    ck_assert_msg(runtime_seq_forward(m, seq, t, n_prompt, lg) == 0, "%s", ms_err_msg());
    for (int i = n_prompt; i < n; i++)
        ck_assert_msg(runtime_seq_forward(m, seq, &t[i], 1, lg + (size_t)(i - n_prompt + 1) * V) == 0, "%s",
                      ms_err_msg());
}

/* The same on a model of one sequence opened with n_ctx: the reference. */
static float *alone_ctx(const char *path, int n_ctx, const int32_t *t, int n_prompt, int n, int V)
{
    runtime_opts o = { .n_threads = 2, .n_ctx = n_ctx, .n_batch = N_BATCH, .device = device() };
    float *lg = malloc(sizeof(float) * V * (size_t)(n - n_prompt + 1));
    runtime_model *m;

    ck_assert_msg(runtime_model_open_gguf(&m, path, &o) == 0, "%s: %s", path, ms_err_msg());
    run_seq(m, 0, t, n_prompt, n, lg, V);
    runtime_model_close(m);
    return lg;
}

static void same_rows(const float *got, const float *want, int rows, int V, const char *how)
{
    for (int r = 0; r < rows; r++)
        ck_assert_msg(agree(got + (size_t)r * V, want + (size_t)r * V, V),
                      "%s: step %d: logits differ from a model opened with that context alone", how, r);
}

/* A pool of three sequences of CTX_BASE: one resized past CTX_BASE once the room is free, run
 * in the same passes as another; each one's logits bit for bit those of a model opened with its
 * context alone (Phi-3 past its longrope's original context takes the long factors; a window
 * keeps a ring at one size and not at another). The refusals leave the table as it was. */
static void check_contexts(const char *path)
{
    runtime_opts o = { .n_threads = 2, .n_ctx = CTX_BASE, .n_batch = N_BATCH, .device = device(), .n_seq = 3 };
    int32_t t0[20], t1[60], one;
    float *lg0, *lg1, *ref0, *ref1;
    runtime_model *m;
    uint64_t kv;
    int V;

    if (device_missing(path))
        return;
    ck_assert_msg(runtime_model_open_gguf(&m, path, &o) == 0, "%s: %s", path, ms_err_msg());
    V = runtime_model_config(m)->vocab_size;
    kv = runtime_model_kv_nbytes(m);
    for (int i = 0; i < 60; i++)
        t1[i] = (int32_t)(3 + (i * 29 + 5) % (V - 3));
    for (int i = 0; i < 20; i++)
        t0[i] = (int32_t)(3 + (i * 13 + 2) % (V - 3));
    for (int s = 0; s < 3; s++)
        ck_assert_int_eq(runtime_seq_n_ctx(m, s), CTX_BASE);
    ck_assert_int_ge(runtime_model_max_ctx(m), 3 * CTX_BASE);   /* a ring makes it more */

    ck_assert_int_eq(runtime_seq_set_ctx(m, 1, runtime_model_max_ctx(m) + 1), MS_ETOOBIG);
    ck_assert_int_eq(runtime_seq_set_ctx(m, 1, 60), MS_EBUSY);   /* sequence 2 holds the room after it */
    ck_assert_msg(strstr(ms_err_msg(), "no room"), "%s", ms_err_msg());
    ck_assert_int_eq(runtime_seq_n_ctx(m, 1), CTX_BASE);
    ck_assert_int_eq(runtime_seq_set_ctx(m, 2, 0), 0);
    ck_assert_int_eq(runtime_seq_forward(m, 2, t0, 1, NULL), MS_EINVALID);
    ck_assert_msg(strstr(ms_err_msg(), "holds no KV cache"), "%s", ms_err_msg());
    ck_assert_int_eq(runtime_seq_set_ctx(m, 1, 60), 0);
    ck_assert_int_eq(runtime_seq_n_ctx(m, 1), 60);

    /* prompts of 12 and 50 in shared passes, then one token of each per pass */
    lg0 = malloc(sizeof(float) * V * 9);
    lg1 = malloc(sizeof(float) * V * 11);
    runtime_seq_item both[2] = { { .seq = 0, .tokens = t0, .n = 12, .logits = lg0 },
                                 { .seq = 1, .tokens = t1, .n = 50, .logits = lg1 } };
    ck_assert_msg(runtime_forward_multi(m, both, 2) == 0, "%s", ms_err_msg());
    for (int k = 0; k < 10; k++) {   /* sequence 0's last 8 tokens beside sequence 1's first 8 of 10 */
        runtime_seq_item step[2] = { { .seq = 1, .tokens = &t1[50 + k], .n = 1, .logits = lg1 + (size_t)(k + 1) * V } };
        if (k < 8)
            step[1] = (runtime_seq_item){ .seq = 0, .tokens = &t0[12 + k], .n = 1,
                                          .logits = lg0 + (size_t)(k + 1) * V };
        ck_assert_msg(runtime_forward_multi(m, step, k < 8 ? 2 : 1) == 0, "%s", ms_err_msg());
    }
    ref0 = alone_ctx(path, CTX_BASE, t0, 12, 20, V);
    ref1 = alone_ctx(path, 60, t1, 50, 60, V);
    same_rows(lg0, ref0, 9, V, "sequence 0 (32 positions)");
    same_rows(lg1, ref1, 11, V, "sequence 1 (60 positions)");
    one = t1[0];
    ck_assert_int_eq(runtime_seq_forward(m, 1, &one, 1, lg1), MS_EINVALID);   /* its 60 are full */
    ck_assert_msg(strstr(ms_err_msg(), "context of 60"), "%s", ms_err_msg());
    ck_assert_int_eq(runtime_seq_set_ctx(m, 1, 60), 0);   /* the same size keeps the cache */
    ck_assert_int_eq(runtime_seq_n_past(m, 1), 60);
    free(ref0);
    free(ref1);

    /* sequence 0 smaller, where its old place was: 10 positions (no ring: the window's would be longer) */
    ck_assert_int_eq(runtime_seq_set_ctx(m, 0, 10), 0);
    ck_assert_int_eq(runtime_seq_n_past(m, 0), 0);
    run_seq(m, 0, t0, 6, 10, lg0, V);
    ref0 = alone_ctx(path, 10, t0, 6, 10, V);
    same_rows(lg0, ref0, 5, V, "sequence 0 (10 positions)");
    ck_assert_int_eq(runtime_seq_n_past(m, 1), 60);   /* its neighbour untouched */
    ck_assert(runtime_model_kv_nbytes(m) == kv);   /* the pool's size is the load's */
    free(ref0);
    free(lg0);
    free(lg1);
    runtime_model_close(m);
}

START_TEST(contexts_per_sequence_stories)
{
    char *p = fixture_model_path("stories260K/stories260K.gguf");

    if (p)
        check_contexts(p);
    free(p);
}
END_TEST

/* A synthetic model: `tool` "arch" (tests/reference/make_synthetic_arch.py) or "gguf" (the
 * shared tools' make_synthetic_gguf.py) run with `args`, the vocab of stories260K, checked by
 * `check`. */
static void check_synthetic_with(const char *tool, const char *args, void (*check)(const char *))
{
    char *models = fixture_models_dir(), *dir = fixture_tmpdir(), *out = ms_strdup_printf("%s/m.gguf", dir), *cmd;
    const char *src = getenv("MSTORE_SRC") ? getenv("MSTORE_SRC") : ".";

    if (!models) {
        printf("skipped: shared models folder not found (the vocab comes from stories260K.gguf)\n");
    } else {
        if (strcmp(tool, "arch") == 0)
            cmd = ms_strdup_printf("/usr/bin/python3 '%s/tests/reference/make_synthetic_arch.py' %s --vocab "
                                   "'%s/stories260K/stories260K.gguf' -o '%s' >/dev/null", src, args, models, out);
        else
            cmd = ms_strdup_printf("/usr/bin/python3 '%s/../tools/make_synthetic_gguf.py' %s --vocab "
                                   "'%s/stories260K/stories260K.gguf' -o '%s' >/dev/null", models, args, models, out);
        if (system(cmd) != 0)
            printf("skipped: %s failed (python3 or numpy missing?)\n", cmd);
        else
            check(out);
        free(cmd);
    }
    free(models);
    free(out);
    fixture_rmrf(dir);
}

static void check_synthetic(const char *tool, const char *args)
{
    check_synthetic_with(tool, args, check_path);
}

static const char *const synth[][2] = {
    { "gguf", "--dim 64 --layers 2 --heads 4 --kv-heads 2 --ffn 192 --seed 7 --dtype q4_0" },
    { "gguf", "--dim 64 --layers 2 --heads 4 --kv-heads 2 --ffn 192 --seed 8 --dtype q8_0" },
    { "arch", "--arch gemma3 --dim 64 --layers 6 --heads 4 --kv-heads 2 --head-dim 16 --ffn 128 --window 6" },
    { "arch", "--arch qwen3moe --dim 64 --layers 2 --heads 4 --kv-heads 2 --head-dim 16 --ffn 64 --experts 8 "
              "--used 2" },
    { "arch", "--arch deepseek2 --dtype q8_0" },   /* MLA: each sequence's latent rows in its own cache */
};

START_TEST(synthetic_models_batch_bit_for_bit)
{
    check_synthetic(synth[_i][0], synth[_i][1]);
}
END_TEST

/* A window shorter than the contexts (ring caches at 32 and 60, none at 10); Phi-3's longrope
 * with an original context of 32 (no window): the pool's 32 take the short factors, 60 the long ones. */
static const char *const synth_ctx[] = {
    "--arch gemma3 --dim 64 --layers 6 --heads 4 --kv-heads 2 --head-dim 16 --ffn 128 --window 6",
    "--arch phi3 --dim 64 --layers 2 --heads 4 --kv-heads 4 --head-dim 16 --ffn 128 --window 0 --longrope 32",
};

START_TEST(contexts_per_sequence_synthetic)
{
    check_synthetic_with("arch", synth_ctx[_i], check_contexts);
}
END_TEST

START_TEST(misuse_is_refused)
{
    char *p = fixture_model_path("stories260K/stories260K.gguf");
    runtime_model *m;
    int32_t t[2] = { 1, 2 };
    float *lg;

    if (!p)
        return;
    m = open_n(p, 2);
    lg = malloc(sizeof(float) * runtime_model_config(m)->vocab_size);
    runtime_seq_item two[2] = { { .seq = 1, .tokens = t, .n = 2, .logits = lg }, { .seq = 1, .tokens = t, .n = 1 } };
    ck_assert_int_eq(runtime_seq_forward(m, 2, t, 1, lg), MS_EINVALID);
    ck_assert_msg(strstr(ms_err_msg(), "sequence 2"), "%s", ms_err_msg());
    ck_assert_int_eq(runtime_forward_multi(m, two, 2), MS_EINVALID);
    ck_assert_msg(strstr(ms_err_msg(), "twice"), "%s", ms_err_msg());
    t[1] = 1 << 20;
    two[1].seq = 0;
    ck_assert_int_eq(runtime_forward_multi(m, two, 2), MS_EINVALID);   /* checked before anything runs */
    ck_assert_int_eq(runtime_seq_n_past(m, 0), 0);
    ck_assert_int_eq(runtime_seq_n_past(m, 1), 0);
    runtime_model_close(m);
    free(lg);
    free(p);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("runtime_batch");
    TCase *tc = tcase_create("batch");

    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, shared_models_batch_bit_for_bit, 0, (int)(sizeof shared / sizeof shared[0]));
    tcase_add_loop_test(tc, synthetic_models_batch_bit_for_bit, 0, (int)(sizeof synth / sizeof synth[0]));
    tcase_add_test(tc, misuse_is_refused);
    tcase_add_test(tc, contexts_per_sequence_stories);
    tcase_add_loop_test(tc, contexts_per_sequence_synthetic, 0, (int)(sizeof synth_ctx / sizeof synth_ctx[0]));
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
