/* run.c: mstore run NAME [PROMPT] - stream a completion. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "runtime/runtime.h"

static const char help[] =
    "usage: mstore run NAME [PROMPT] [options]\n"
    "       mstore run --gguf FILE [PROMPT] [options]\n\n"
    "Stream a completion of PROMPT (empty: start from BOS alone). Stops at the end-of-generation\n"
    "token, after -n tokens, when the context is full, or at Ctrl-C.\n\n"
    "  --raw                 send the prompt as is (chat templates are not applied yet: always raw)\n"
    "  --verbose             print load time, prompt and generation token counts and rates (stderr)\n"
    "  -n N                  generate at most N tokens (default 256)\n"
    "  --temp F              temperature; 0 = greedy (default 0.8)\n"
    "  --top-k N             keep the N most likely tokens; 0 = off (default 40)\n"
    "  --top-p F             keep the smallest set of probability >= F; 1 = off (default 0.95)\n"
    "  --min-p F             drop tokens below F x the top probability; 0 = off (default 0.05)\n"
    "  --repeat-penalty F    divide logits of recent tokens by F; 1 = off (default 1.0)\n"
    "  --repeat-last-n N     how many recent tokens the penalty sees (default 64)\n"
    "  --seed N              sampling seed; the same seed gives the same output (default: time)\n"
    "  --threads N           worker threads (default: all cores)\n"
    "  --ctx N               context length in tokens (default: the model's, at most 4096)\n"
    "  --kv-f16              keep the KV cache in f16 (half the memory)\n"
    "  --gguf FILE           run a GGUF file instead of a model in the store\n";

static volatile sig_atomic_t interrupted;
static void on_sigint(int sig) { (void)sig; interrupted = 1; }

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct run_args {
    const char *name, *prompt, *gguf;
    int verbose, n_predict;
    runtime_opts o;
    runtime_sampler_opts so;
} run_args;

/* Returns 0, or the exit status of a usage error (2), or -1 after --help. */
static int parse(run_args *a, int argc, char **argv)
{
    int n_pos = 0, seed_set = 0;
    const char *pos[2] = { NULL, NULL };
    long l;
    double d;

    runtime_sampler_defaults(&a->so);
    a->n_predict = 256;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (cli_is_help(f)) {
            fputs(help, stdout);
            return -1;
        } else if (strcmp(f, "--raw") == 0) {
            continue;
        } else if (strcmp(f, "--verbose") == 0) {
            a->verbose = 1;
        } else if (strcmp(f, "--kv-f16") == 0) {
            a->o.kv_f16 = 1;
        } else if (f[0] == '-' && f[1] && !v) {
            return cli_usage_error("run", "%s needs a value or is unknown", f);
#define LONG_FLAG(flag, lo, hi, dst)                                                 \
        } else if (strcmp(f, flag) == 0) {                                           \
            if (cli_parse_long(&l, "run", flag, v, lo, hi) < 0)                      \
                return 2;                                                            \
            dst = (int)l;                                                            \
            i++;
#define DBL_FLAG(flag, lo, hi, dst)                                                  \
        } else if (strcmp(f, flag) == 0) {                                           \
            if (cli_parse_double(&d, "run", flag, v, lo, hi) < 0)                    \
                return 2;                                                            \
            dst = (float)d;                                                          \
            i++;
        LONG_FLAG("-n", 0, 1 << 24, a->n_predict)
        LONG_FLAG("--top-k", 0, 1 << 24, a->so.top_k)
        LONG_FLAG("--repeat-last-n", 0, 1 << 20, a->so.repeat_last_n)
        LONG_FLAG("--threads", 1, 512, a->o.n_threads)
        LONG_FLAG("--ctx", 1, 1 << 22, a->o.n_ctx)
        DBL_FLAG("--temp", 0, 100, a->so.temp)
        DBL_FLAG("--top-p", 0, 1, a->so.top_p)
        DBL_FLAG("--min-p", 0, 1, a->so.min_p)
        DBL_FLAG("--repeat-penalty", 0.01, 100, a->so.repeat_penalty)
#undef LONG_FLAG
#undef DBL_FLAG
        } else if (strcmp(f, "--seed") == 0) {
            if (cli_parse_long(&l, "run", "--seed", v, 0, 0x7fffffffffffffffL) < 0)
                return 2;
            a->so.seed = (uint64_t)l;
            seed_set = 1;
            i++;
        } else if (strcmp(f, "--gguf") == 0) {
            a->gguf = argv[++i];
        } else if (f[0] == '-' && f[1]) {
            return cli_usage_error("run", "unknown option '%s'", f);
        } else if (n_pos < 2) {
            pos[n_pos++] = f;
        } else {
            return cli_usage_error("run", "unexpected argument '%s'", f);
        }
    }
    if (a->gguf) {   /* with --gguf the one positional is the prompt */
        if (n_pos > 1)
            return cli_usage_error("run", "unexpected argument '%s'", pos[1]);
        a->prompt = pos[0];
    } else {
        if (n_pos == 0)
            return cli_usage_error("run", "needs NAME (or --gguf FILE)");
        a->name = pos[0];
        a->prompt = pos[1];
    }
    if (!seed_set)
        a->so.seed = (uint64_t)time(NULL);
    return 0;
}

static int emit(const tokenizer *t, int32_t id, unsigned flags)
{
    char buf[256];
    size_t n;

    if (tokenizer_decode_piece(t, id, flags, buf, sizeof buf, &n) < 0)
        return 0;   /* a piece longer than buf is not a real vocab entry: skip it */
    fwrite(buf, 1, n, stdout);
    fflush(stdout);
    return ferror(stdout) ? -1 : 0;
}

static int generate(run_args *a, runtime_model *m, const tokenizer *t, double t_load)
{
    const runtime_config *c = runtime_model_config(m);
    const char *prompt = a->prompt ? a->prompt : "";
    runtime_sampler *smp = NULL;
    int32_t *ids = NULL, tok;
    float *logits = malloc(sizeof(float) * (size_t)c->vocab_size);
    size_t n_ids;
    int n_gen = 0, rc = 1;
    double t0, t1, t2;

    if (!logits) {
        ms_err(MS_ENOMEM, "out of memory");
        goto done;
    }
    if (tokenizer_encode_alloc(t, prompt, strlen(prompt), 1, 0, &ids, &n_ids) < 0 ||
        runtime_sampler_new(&smp, &a->so, c->vocab_size) < 0)
        goto done;
    if (n_ids == 0) {
        ms_err(MS_EINVALID, "the prompt is empty and the vocab adds no BOS: nothing to start from");
        goto done;
    }
    if (n_ids >= (size_t)runtime_model_n_ctx(m)) {
        ms_err(MS_EINVALID, "prompt of %zu tokens does not fit the context of %d tokens (--ctx)", n_ids,
               runtime_model_n_ctx(m));
        goto done;
    }
    for (size_t i = 0; i < n_ids; i++)
        runtime_sampler_accept(smp, ids[i]);
    t0 = now();
    if (runtime_forward(m, ids, (int)n_ids, logits) < 0)
        goto done;
    t1 = now();
    while (n_gen < a->n_predict && !interrupted) {
        tok = runtime_sampler_sample(smp, logits);
        if (tokenizer_is_eog(t, tok))
            break;
        /* the first piece right after a bare BOS loses its space, as sentencepiece decodes */
        if (emit(t, tok, n_gen == 0 && n_ids == 1 ? TOKENIZER_DECODE_LSTRIP : 0) < 0) {
            ms_err_os("stdout");
            goto done;
        }
        n_gen++;
        runtime_sampler_accept(smp, tok);
        if (runtime_model_n_past(m) >= runtime_model_n_ctx(m) || n_gen >= a->n_predict)
            break;
        if (runtime_forward(m, &tok, 1, logits) < 0)
            goto done;
    }
    t2 = now();
    printf("\n");
    if (a->verbose) {
        fprintf(stderr, "load duration:        %.2fms\n", t_load * 1e3);
        fprintf(stderr, "prompt eval count:    %zu token(s)\n", n_ids);
        fprintf(stderr, "prompt eval duration: %.2fms\n", (t1 - t0) * 1e3);
        fprintf(stderr, "prompt eval rate:     %.2f tokens/s\n", (double)n_ids / (t1 - t0));
        fprintf(stderr, "eval count:           %d token(s)\n", n_gen);
        fprintf(stderr, "eval duration:        %.2fms\n", (t2 - t1) * 1e3);
        fprintf(stderr, "eval rate:            %.2f tokens/s\n", n_gen ? n_gen / (t2 - t1) : 0.0);
    }
    rc = interrupted ? 130 : 0;
done:
    if (rc == 1)
        cli_fail();
    runtime_sampler_free(smp);
    free(ids);
    free(logits);
    return rc;
}

int cmd_run(int argc, char **argv)
{
    run_args a = { 0 };
    runtime_model *m = NULL;
    const tokenizer *t;
    store *s = NULL;
    model_name name;
    double t0;
    int rc;

    if ((rc = parse(&a, argc, argv)) != 0)
        return rc < 0 ? 0 : rc;
    if (a.name && cli_name_parse(&name, a.name) < 0)
        return 1;
    t0 = now();
    if (a.gguf) {
        if (runtime_model_open_gguf(&m, a.gguf, &a.o) < 0)
            return cli_fail();
    } else {
        if (!(s = cli_store_open()))
            return 1;
        if (runtime_model_open_store(&m, s, &name, &a.o) < 0) {
            store_close(s);
            return cli_fail();
        }
    }
    if (runtime_weights_tokenizer(&t, runtime_model_weights(m)) < 0) {
        rc = cli_fail();
    } else {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_sigint;
        sigaction(SIGINT, &sa, NULL);   /* Ctrl-C ends the loop; the model closes normally */
        rc = generate(&a, m, t, now() - t0);
        signal(SIGINT, SIG_DFL);
    }
    runtime_model_close(m);
    store_close(s);
    return rc;
}
