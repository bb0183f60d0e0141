/* bench.c: mstore bench NAME - prefill and decode speed, named as llama-bench names them. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "grammar/grammar.h"
#include "runtime/runtime.h"

static const char help[] =
    "usage: mstore bench NAME [-p 64] [-n 32] [-r 3] [--threads N] [--device D] [--parallel N,...]\n"
    "       mstore bench --gguf FILE [...]\n\n"
    "Prefill a prompt of -p tokens as one batch (ppP) and decode -n tokens one at a time (tgN),\n"
    "from an empty context, -r times each; print the median rate of each, one line per test.\n"
    "Token ids are fixed pseudo-random ids, so no tokenizer is needed.\n\n"
    "  -p N         prompt tokens (default 64; 0 skips the test)\n"
    "  -n N         generated tokens (default 32; 0 skips the test)\n"
    "  -r N         repetitions (default 3)\n"
    "  --threads N  worker threads (default: all cores)\n"
    "  --kv-f16     keep the KV cache in f16\n"
    "  --device D   auto, cpu, vulkan or metal (default: $MSTORE_DEVICE, else auto: a hardware\n"
    "               GPU when there is one, else the CPU; see 'mstore devices')\n"
    "  --verbose    say which device was chosen and why; a GPU also counts its submits and\n"
    "               host waits (stderr)\n"
    "  --gguf FILE  bench a GGUF file instead of a model in the store\n"
    "  --format F   also decode -n tokens greedily under F (json, a JSON Schema, @FILE) and print\n"
    "               that rate (tgN+format), the same greedy loop without it (tgN+greedy) and the\n"
    "               grammar's own cost per token (mask + accept)\n"
    "  --parallel L N sequences at once, for each N of the list L (\"8\", \"1,2,4,8\"; at most 64),\n"
    "               as mstore serve runs concurrent requests: one thread per sequence, their\n"
    "               forwards sharing passes. Each prefills its own -p tokens, then all decode -n\n"
    "               tokens; prints the aggregate and per-sequence rates of both (llama-batched-\n"
    "               bench's S_PP and S_TG) and the sequences per decode pass\n\n"
    "On the CPU, $MSTORE_CPU picks the kernel path (default auto; the first line printed names\n"
    "it): e.g. avx512vnni-int8 for 8-bit activations as llama.cpp rounds them, faster and about\n"
    "1e-2 from exact logits (README lists every path).\n";

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

/* The median of v[0..n) (sorts v). */
static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Median tokens/s of `reps` runs; decode when `one_by_one`. 0 or -1 (message set). */
static int measure(double *rate_out, runtime_model *m, const int32_t *ids, int n, int one_by_one, int reps,
                   float *logits)
{
    double *r = calloc((size_t)reps, sizeof *r);

    if (!r)
        return ms_err(MS_ENOMEM, "out of memory");
    for (int k = 0; k < reps; k++) {
        double t0;
        runtime_model_reset(m);
        t0 = now();
        for (int i = 0; i < (one_by_one ? n : 1); i++) {
            if (runtime_forward(m, ids + (one_by_one ? i : 0), one_by_one ? 1 : n, logits) < 0) {
                free(r);
                return -1;
            }
        }
        r[k] = n / (now() - t0);
    }
    *rate_out = median(r, reps);
    free(r);
    return 0;
}

/* Greedy decoding of n tokens from BOS under grammar g: each step masks the logits, takes the
 * best allowed token and advances the grammar by its bytes (a finished answer starts over).
 * Median tokens/s of the whole loop and median microseconds per token of the grammar's part.
 * With g NULL: the same loop without the grammar, the baseline. */
static int measure_format(double *rate_out, double *us_out, runtime_model *m, const grammar *g, int n, int reps,
                          float *logits)
{
    const tokenizer *t;
    grammar_vocab *v = NULL;
    grammar_matcher *gm = NULL;
    double *r = calloc((size_t)reps, sizeof *r), *u = calloc((size_t)reps, sizeof *u);
    int32_t n_vocab = runtime_model_config(m)->vocab_size;
    int rc = -1;

    if (!r || !u) {
        ms_err(MS_ENOMEM, "out of memory");
        goto done;
    }
    if (runtime_weights_tokenizer(&t, runtime_model_weights(m)) < 0 ||
        (g && (grammar_vocab_new(&v, t) < 0 || grammar_matcher_new(&gm, g) < 0)))
        goto done;
    for (int k = 0; k < reps; k++) {
        int32_t tok = tokenizer_bos(t) >= 0 ? tokenizer_bos(t) : 0;
        double t0, tg = 0;
        runtime_model_reset(m);
        if (gm)
            grammar_matcher_reset(gm);
        t0 = now();
        for (int i = 0; i < n; i++) {
            size_t n_allowed, len = 0;
            char piece[256];
            double t1;
            int32_t best = 0;
            if (runtime_forward(m, &tok, 1, logits) < 0)
                goto done;
            t1 = now();
            if (gm && grammar_matcher_mask(gm, v, logits, &n_allowed) < 0)
                goto done;
            tg += now() - t1;
            for (int32_t j = 1; j < n_vocab; j++)
                if (logits[j] > logits[best])
                    best = j;
            if (tokenizer_decode_piece(t, best, 0, piece, sizeof piece, &len) < 0)
                len = 0;
            t1 = now();
            if (gm && (tokenizer_is_eog(t, best) || grammar_matcher_accept(gm, piece, len) < 0 ||
                       grammar_matcher_finished(gm)))
                grammar_matcher_reset(gm); /* the answer is over: the next one starts */
            tg += now() - t1;
            tok = best;
        }
        r[k] = n / (now() - t0);
        u[k] = tg / n * 1e6;
    }
    *rate_out = median(r, reps);
    *us_out = median(u, reps);
    rc = 0;
done:
    grammar_matcher_free(gm);
    grammar_vocab_free(v);
    free(r);
    free(u);
    return rc;
}

/* ---- --parallel: n sequences from n threads, as the server runs them */

typedef struct par_run {
    runtime_model *m;
    int n, n_p, n_g, vocab;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int prefilled, failed;   /* threads past their prefill; a thread's error */
    double t_start, t_prefilled, t_end;
    char err[512];
} par_run;

typedef struct par_seq {
    par_run *R;
    int seq;
} par_seq;

static void *par_thread(void *arg)
{
    par_seq *q = arg;
    par_run *R = q->R;
    int32_t *ids = malloc(sizeof *ids * (size_t)(R->n_p + R->n_g));
    float *logits = malloc(sizeof *logits * (size_t)R->vocab);
    int rc = ids && logits ? 0 : ms_err(MS_ENOMEM, "out of memory");

    for (int i = 0; rc == 0 && i < R->n_p + R->n_g; i++)   /* a prompt of its own per sequence */
        ids[i] = (int32_t)(((unsigned)i * 7919u + (unsigned)q->seq * 104729u + 1) % (unsigned)R->vocab);
    runtime_seq_reset(R->m, q->seq);
    runtime_seq_active(R->m, q->seq, 1);
    if (rc == 0 && R->n_p > 0)
        rc = runtime_seq_forward(R->m, q->seq, ids, R->n_p, logits);
    pthread_mutex_lock(&R->mu);   /* decode starts when every prompt is in: its rate is decode's alone */
    if (rc < 0 && !R->failed)
        R->failed = 1, snprintf(R->err, sizeof R->err, "%s", ms_err_msg());
    if (++R->prefilled == R->n) {
        R->t_prefilled = now();
        pthread_cond_broadcast(&R->cv);
    }
    while (R->prefilled < R->n)
        pthread_cond_wait(&R->cv, &R->mu);
    pthread_mutex_unlock(&R->mu);
    for (int i = 0; rc == 0 && !R->failed && i < R->n_g; i++)
        rc = runtime_seq_forward(R->m, q->seq, ids + R->n_p + i, 1, logits);
    runtime_seq_active(R->m, q->seq, 0);
    pthread_mutex_lock(&R->mu);
    if (rc < 0 && !R->failed)
        R->failed = 1, snprintf(R->err, sizeof R->err, "%s", ms_err_msg());
    pthread_mutex_unlock(&R->mu);
    free(ids);
    free(logits);
    return NULL;
}

/* One run of n sequences: prefill and decode seconds (wall, all sequences), passes per decode step. */
static int par_once(runtime_model *m, int n, int n_p, int n_g, double *t_pp, double *t_tg, double *per_pass)
{
    par_run R = { .m = m, .n = n, .n_p = n_p, .n_g = n_g, .vocab = runtime_model_config(m)->vocab_size };
    par_seq q[RUNTIME_MAX_SEQ];
    pthread_t th[RUNTIME_MAX_SEQ];
    runtime_batch_stats a, b;
    int started = 0;

    pthread_mutex_init(&R.mu, NULL);
    pthread_cond_init(&R.cv, NULL);
    R.t_start = now();
    for (; started < n; started++) {
        q[started] = (par_seq){ &R, started };
        if (pthread_create(&th[started], NULL, par_thread, &q[started]) != 0)
            break;
    }
    pthread_mutex_lock(&R.mu);
    if (started < n) {   /* the threads that did start must not wait for the others forever */
        R.failed = 1, R.n = started, snprintf(R.err, sizeof R.err, "cannot start thread %d", started);
        pthread_cond_broadcast(&R.cv);
    }
    while (R.prefilled < R.n)
        pthread_cond_wait(&R.cv, &R.mu);
    pthread_mutex_unlock(&R.mu);
    runtime_batch_stats_get(m, &a);
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    R.t_end = now();
    runtime_batch_stats_get(m, &b);
    pthread_cond_destroy(&R.cv);
    pthread_mutex_destroy(&R.mu);
    if (R.failed)
        return ms_err(MS_ERROR, "%s", R.err);
    *t_pp = R.t_prefilled - R.t_start;
    *t_tg = R.t_end - R.t_prefilled;
    *per_pass = b.passes > a.passes ? (double)(b.seqs - a.seqs) / (double)(b.passes - a.passes) : 0;
    return 0;
}

/* For each n of the list: aggregate and per-sequence prefill and decode rates, medians of reps. */
static int bench_parallel(runtime_model *m, const int *ns, int n_ns, long n_p, long n_g, long reps)
{
    double *pp = calloc((size_t)reps * 3, sizeof *pp), *tg = pp + reps, *pass = tg + reps;
    int rc = -1;

    if (!pp)
        return ms_err(MS_ENOMEM, "out of memory");
    printf("device %s\n", runtime_model_device(m));
    for (int k = 0; k < n_ns; k++) {
        int n = ns[k];
        for (long r = 0; r < reps; r++) {
            double tp = 0, tt = 0, pp_s = 0;
            if (par_once(m, n, (int)n_p, (int)n_g, &tp, &tt, &pp_s) < 0)
                goto done;
            pp[r] = n_p > 0 ? n * n_p / tp : 0;
            tg[r] = n_g > 0 ? n * n_g / tt : 0;
            pass[r] = pp_s;
        }
        double a_pp = median(pp, (int)reps), a_tg = median(tg, (int)reps), a_pass = median(pass, (int)reps);
        printf("parallel %2d", n);
        if (n_p > 0)
            printf("  pp%ld %10.2f t/s (%.2f per sequence)", n_p, a_pp, a_pp / n);
        if (n_g > 0)
            printf("  tg%ld %10.2f t/s (%.2f per sequence, %.2f sequences per pass)", n_g, a_tg, a_tg / n, a_pass);
        printf("\n");
        fflush(stdout);
    }
    rc = 0;
done:
    free(pp);
    return rc;
}

/* "1,2,4,8" into ns (1..RUNTIME_MAX_SEQ each, at most 16 of them); the largest in *max. */
static int parse_list(const char *list, int *ns, int *n_out, int *max)
{
    const char *s = list;
    char *end;
    int n = 0;

    *max = 0;
    while (*s) {
        long v = strtol(s, &end, 10);
        if (end == s || v < 1 || v > RUNTIME_MAX_SEQ || n == 16 || (*end && (*end != ',' || !end[1])))
            return cli_usage_error("bench", "--parallel: '%s' is not a list of 1 to 16 numbers in 1..%d", list,
                                   RUNTIME_MAX_SEQ);
        ns[n++] = (int)v;
        if (v > *max)
            *max = (int)v;
        s = *end ? end + 1 : end;
    }
    if (n == 0)
        return cli_usage_error("bench", "--parallel: an empty list");
    *n_out = n;
    return 0;
}

/* The measurements themselves: prefill, decode, and decode under a grammar when one is given. */
static int bench_run(runtime_model *m, long n_p, long n_g, long reps, const grammar *g)
{
    int n_max = (int)(n_p > n_g ? n_p : n_g);
    int32_t *ids = malloc(sizeof *ids * (size_t)n_max);
    float *logits = malloc(sizeof *logits * (size_t)runtime_model_config(m)->vocab_size);
    double rate = 0, us = 0;
    int rc = -1;

    if (!ids || !logits) {
        ms_err(MS_ENOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < n_max; i++)   /* any ids will do; fixed ones make runs comparable */
        ids[i] = (int32_t)((i * 7919u + 1) % (unsigned)runtime_model_config(m)->vocab_size);
    printf("device %s\n", runtime_model_device(m));
    if (n_p > 0) {
        if (measure(&rate, m, ids, (int)n_p, 0, (int)reps, logits) < 0)
            goto done;
        printf("pp%ld %10.2f t/s\n", n_p, rate);
    }
    if (n_g > 0) {
        if (measure(&rate, m, ids, (int)n_g, 1, (int)reps, logits) < 0)
            goto done;
        printf("tg%ld %10.2f t/s\n", n_g, rate);
        if (g) {
            if (measure_format(&rate, &us, m, NULL, (int)n_g, (int)reps, logits) < 0)
                goto done;
            printf("tg%ld+greedy %10.2f t/s\n", n_g, rate);
            if (measure_format(&rate, &us, m, g, (int)n_g, (int)reps, logits) < 0)
                goto done;
            printf("tg%ld+format %10.2f t/s  (grammar %.1f us/token)\n", n_g, rate, us);
        }
    }
    rc = 0;
done:
    free(ids);
    free(logits);
    return rc;
}

int cmd_bench(int argc, char **argv)
{
    const char *format = NULL;
    char *format_file = NULL;
    grammar *g = NULL;
    const char *name_arg = NULL, *gguf = NULL, *par = NULL;
    int ns[16], n_ns = 0, n_par = 0;
    long n_p = 64, n_g = 32, reps = 3, threads = 0;
    runtime_opts o = { 0 };
    runtime_model *m = NULL;
    store *s = NULL;
    model_name name;
    int rc = 1, n_max;

    const cli_opt opts[] = {
        { "-p", NULL, CLI_OPT_LONG, &n_p, NULL, 0, 1 << 20 },
        { "-n", NULL, CLI_OPT_LONG, &n_g, NULL, 0, 1 << 20 },
        { "-r", NULL, CLI_OPT_LONG, &reps, NULL, 1, 1 << 20 },
        { "--threads", NULL, CLI_OPT_LONG, &threads, NULL, 1, 512 },
        { "--gguf", NULL, CLI_OPT_STRING, &gguf, "a file", 0, 0 },
        { "--device", NULL, CLI_OPT_STRING, &o.device, "a device name", 0, 0 },
        { "--format", NULL, CLI_OPT_STRING, &format, "\"json\", a JSON schema or @FILE", 0, 0 },
        { "--parallel", NULL, CLI_OPT_STRING, &par, "a list of sequence counts", 0, 0 },
        { "--kv-f16", NULL, CLI_OPT_FLAG, &o.kv_f16, NULL, 0, 0 },
        { "--verbose", NULL, CLI_OPT_FLAG, &o.verbose, NULL, 0, 0 },
        { NULL, NULL, 0, NULL, NULL, 0, 0 },
    };
    if ((rc = cli_args_parse(argc, argv, help, opts, &name_arg, 1, NULL)) != 0)
        return rc < 0 ? 0 : rc;
    rc = 1;
    if (!!name_arg == !!gguf)
        return cli_usage_error("bench", "needs NAME or --gguf FILE");
    if (n_p + n_g == 0)
        return cli_usage_error("bench", "-p and -n are both 0: nothing to measure");
    if (par && (parse_list(par, ns, &n_ns, &n_par) != 0))
        return 2;
    if (par && format)
        return cli_usage_error("bench", "--parallel and --format: one at a time");
    if (format && format[0] == '@') {
        if (ms_file_read(&format_file, NULL, format + 1, GRAMMAR_MAX_SCHEMA_BYTES) < 0)
            return ms_err_ctx("--format"), cli_fail();
        format = format_file;
    }
    if (format && grammar_from_format(&g, format, strlen(format), "--format") < 0) {
        free(format_file);
        return cli_usage_error("bench", "%s", ms_err_msg());
    }
    n_max = (int)(n_p > n_g ? n_p : n_g);
    o.n_threads = (int)threads;
    o.n_ctx = n_max;
    o.n_batch = n_p > 0 ? (int)n_p : 1;   /* the whole prompt is one batch */
    if (par) {   /* as the server: passes of 128 rows at most, every sequence's token in each */
        o.n_seq = n_par;
        o.n_ctx = (int)(n_p + n_g);
        o.n_batch = n_p > 128 ? 128 : n_p > n_par ? (int)n_p : n_par;
    }
    if (name_arg && cli_name_parse(&name, name_arg) < 0)
        return 1;
    if (gguf ? runtime_model_open_gguf(&m, gguf, &o) < 0
             : (!(s = cli_store_open()) || runtime_model_open_store(&m, s, &name, &o) < 0))
        goto done;
    if (par ? bench_parallel(m, ns, n_ns, n_p, n_g, reps) < 0 : bench_run(m, n_p, n_g, reps, g) < 0)
        goto done;
    rc = 0;
done:
    if (rc)
        cli_fail();
    grammar_free(g);
    free(format_file);
    runtime_model_close(m);
    store_close(s);
    return rc;
}
