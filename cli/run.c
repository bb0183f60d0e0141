/* run.c: mstore run NAME [PROMPT] - stream a completion. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "chat/chat.h"
#include "cli.h"
#include "modelfile/modelfile.h"
#include "runtime/runtime.h"

#define RUN_STDIN_MAX (64u << 20)   /* a prompt from standard input: far past any context */

static const char help[] =
    "usage: mstore run NAME [PROMPT] [options]\n"
    "       mstore run --gguf FILE [PROMPT] [options]\n\n"
    "Stream the answer to PROMPT, rendered with the model's chat template (llama2, llama3, chatml,\n"
    "gemma, phi3) when it has one. Stops at an end-of-turn token, after -n tokens, when the\n"
    "context is full, or at Ctrl-C. An empty PROMPT (\"\") starts from BOS alone, raw.\n"
    "Without PROMPT on a terminal: an interactive chat that keeps its context between turns\n"
    "(type /? for its commands). Without PROMPT and with standard input not a terminal, the\n"
    "prompt is read from standard input.\n\n"
    "  --raw                 send the prompt as is, without the chat template\n"
    "  --system TEXT         the system prompt (chat template only)\n"
    "  --verbose             print load time, prompt and generation token counts and rates (stderr)\n"
    "  -n N                  generate at most N tokens per answer (default 256)\n"
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
    "  --gguf FILE           run a GGUF file instead of a model in the store\n"
    "  --insecure            a model not in the store is pulled (when you agree) over plain http\n\n"
    "The model's params and system layers (ollama's, or a Modelfile's) are the defaults; a flag\n"
    "wins. A model not in the store: on a terminal, mstore offers to pull it.\n";

static volatile sig_atomic_t interrupted;
static void on_sigint(int sig) { (void)sig; interrupted = 1; }

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct run_args {
    const char *name, *prompt, *gguf, *system;
    int verbose, n_predict, raw, insecure;
    runtime_opts o;
    runtime_sampler_opts so;
    model_params *mp;   /* the model's own defaults (params, system layers), or NULL */
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
    /* The model's params come first so that a flag still wins. */
    model_params_apply(a->mp, &a->so, &a->n_predict, &a->o.n_ctx);
    a->system = a->mp ? a->mp->system : NULL;
    seed_set = a->mp && a->mp->has_seed && a->mp->seed >= 0;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (cli_is_help(f)) {
            fputs(help, stdout);
            return -1;
        } else if (strcmp(f, "--raw") == 0) {
            a->raw = 1;
        } else if (strcmp(f, "--verbose") == 0) {
            a->verbose = 1;
        } else if (strcmp(f, "--insecure") == 0) {
            a->insecure = 1;
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
        } else if (strcmp(f, "--system") == 0) {
            a->system = argv[++i];
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

/* A growable byte string. */
typedef struct text {
    char *p;
    size_t n, cap;
} text;

static int text_put(text *b, const char *s, size_t len)
{
    if (b->n + len + 1 > b->cap) {
        size_t cap = (b->n + len + 1) * 2;
        char *p = realloc(b->p, cap);
        if (!p)
            return ms_err(MS_ENOMEM, "out of memory");
        b->p = p, b->cap = cap;
    }
    if (len)
        memcpy(b->p + b->n, s, len);
    b->n += len;
    b->p[b->n] = '\0';
    return 0;
}

/* Everything a run needs, one-shot or chat. `cache` is the text whose tokens sit in the KV
 * cache: a new turn only prefills what its rendering adds after it. */
typedef struct session {
    run_args *a;
    runtime_model *m;
    const tokenizer *t;
    runtime_sampler *smp;
    chat_template *tmpl;        /* NULL: raw text */
    float *logits;
    const char *bos_text;       /* what BOS is in text ("<s>"), or "" */
    char *system;               /* the system prompt, or NULL */
    chat_msg *msgs;             /* user / assistant turns (owned strings) */
    size_t n_msgs, cap_msgs;
    text cache;
    size_t n_prompt, n_gen;
    double t_prompt, t_gen;
} session;

/* Tokenize `s` and run it through the model after what the cache holds. BOS goes first when
 * the cache is empty, unless the text itself starts with the BOS text (templates that write
 * bos_token). Returns 0, 1 when it does not fit the context (nothing run), -1 on error. */
static int feed(session *S, const char *s, size_t len, int parse_special)
{
    const char *bos = S->bos_text;
    int first = runtime_model_n_past(S->m) == 0;
    int add = first && !(parse_special && *bos && len >= strlen(bos) && memcmp(s, bos, strlen(bos)) == 0);
    int32_t *ids = NULL;
    size_t n;
    double t0 = now();
    int rc = -1;

    if (tokenizer_encode_alloc(S->t, s, len, add, parse_special, &ids, &n) < 0)
        return -1;
    if (n == 0) {
        if (first)
            ms_err(MS_EINVALID, "the prompt is empty and the vocab adds no BOS: nothing to start from");
        else
            rc = 0;
        goto done;
    }
    if ((size_t)runtime_model_n_past(S->m) + n >= (size_t)runtime_model_n_ctx(S->m)) {
        ms_err(MS_EINVALID, "prompt of %zu tokens does not fit the context of %d tokens (--ctx)",
               (size_t)runtime_model_n_past(S->m) + n, runtime_model_n_ctx(S->m));
        rc = 1;
        goto done;
    }
    for (size_t i = 0; i < n; i++)
        runtime_sampler_accept(S->smp, ids[i]);
    if (runtime_forward(S->m, ids, (int)n, S->logits) < 0)
        goto done;
    S->n_prompt += n;
    S->t_prompt += now() - t0;
    rc = text_put(&S->cache, s, len) < 0 ? -1 : 0;
done:
    free(ids);
    return rc;
}

/* Sample and stream up to n_predict tokens after the last feed, into `out` too. keep: every
 * emitted token also goes through the model, so that the cache holds exactly the cache text
 * (chat); otherwise the last one is not run (one-shot). lstrip: drop the first piece's
 * leading space (sentencepiece decoding right after a bare BOS). */
static int answer(session *S, text *out, int keep, int lstrip)
{
    double t0 = now();
    int n = 0, stopped = 0;
    text hold = { 0 };   /* generated text held back while it may be the start of a stop string */
    size_t show;

    while (n < S->a->n_predict && !interrupted && !stopped) {
        int32_t tok = runtime_sampler_sample(S->smp, S->logits);
        char buf[256];
        size_t len;

        if (tokenizer_is_eog(S->t, tok))
            break;
        /* a piece longer than buf is not a real vocab entry: it is skipped */
        if (tokenizer_decode_piece(S->t, tok, n == 0 && lstrip ? TOKENIZER_DECODE_LSTRIP : 0, buf, sizeof buf,
                                   &len) < 0)
            len = 0;
        if (text_put(&hold, buf, len) < 0)
            return -1;
        stopped = model_params_stop_scan(S->a->mp, hold.p, hold.n, &show);
        fwrite(hold.p, 1, show, stdout);
        memmove(hold.p, hold.p + show, hold.n -= stopped ? hold.n : show);
        fflush(stdout);
        if (ferror(stdout))
            return ms_err_os("stdout");
        if (out && text_put(out, buf, len) < 0)
            return -1;
        n++;
        S->n_gen++;
        runtime_sampler_accept(S->smp, tok);
        if (runtime_model_n_past(S->m) >= runtime_model_n_ctx(S->m) || (!keep && n >= S->a->n_predict))
            break;
        if (runtime_forward(S->m, &tok, 1, S->logits) < 0)
            return -1;
        if (keep && text_put(&S->cache, buf, len) < 0)
            return -1;
    }
    fwrite(hold.p, 1, hold.n, stdout);   /* what was held back and turned out not to be a stop */
    free(hold.p);
    S->t_gen += now() - t0;
    return 0;
}

static void stats(const session *S, double t_load)
{
    if (t_load > 0)
        fprintf(stderr, "load duration:        %.2fms\n", t_load * 1e3);
    fprintf(stderr, "prompt eval count:    %zu token(s)\n", S->n_prompt);
    fprintf(stderr, "prompt eval duration: %.2fms\n", S->t_prompt * 1e3);
    fprintf(stderr, "prompt eval rate:     %.2f tokens/s\n", S->t_prompt > 0 ? (double)S->n_prompt / S->t_prompt : 0.0);
    fprintf(stderr, "eval count:           %zu token(s)\n", S->n_gen);
    fprintf(stderr, "eval duration:        %.2fms\n", S->t_gen * 1e3);
    fprintf(stderr, "eval rate:            %.2f tokens/s\n", S->n_gen && S->t_gen > 0 ? (double)S->n_gen / S->t_gen : 0.0);
}

/* The conversation rendered with the template, system prompt first. */
static int render(session *S, char **out, size_t *len)
{
    chat_msg *all = malloc((S->n_msgs + 1) * sizeof *all);
    size_t n = 0;
    int rc;

    if (!all)
        return ms_err(MS_ENOMEM, "out of memory");
    if (S->system)
        all[n++] = (chat_msg){ "system", S->system };
    memcpy(all + n, S->msgs, S->n_msgs * sizeof *all);
    rc = chat_render(out, len, S->tmpl, all, n + S->n_msgs, 1);
    free(all);
    return rc;
}

/* One-shot: PROMPT (templated unless raw), one answer. */
static int generate(session *S, double t_load)
{
    const char *prompt = S->a->prompt ? S->a->prompt : "";
    char *full = NULL;
    size_t len = strlen(prompt);
    int rc, lstrip;

    if (S->tmpl && *prompt) {
        S->msgs[0] = (chat_msg){ "user", prompt };
        S->n_msgs = 1;
        rc = render(S, &full, &len);
        S->n_msgs = 0;
        if (rc < 0)
            return cli_fail();
    }
    rc = feed(S, full ? full : prompt, len, full != NULL);
    free(full);
    if (rc != 0)
        return cli_fail();
    lstrip = S->n_prompt == 1 && !S->tmpl;
    if (answer(S, NULL, 0, lstrip) < 0)
        return cli_fail();
    printf("\n");
    if (S->a->verbose)
        stats(S, t_load);
    return interrupted ? 130 : 0;
}

/* ---------------------------------------------------------------- interactive chat */

static const char chat_help[] =
    "Available Commands:\n"
    "  /set parameter NAME VALUE   temperature, top_k, top_p, min_p, repeat_penalty,\n"
    "                              repeat_last_n, seed, num_predict\n"
    "  /set system TEXT            set the system message (the context starts over)\n"
    "  /clear                      clear the session context\n"
    "  /bye                        exit\n"
    "  /?, /help                   this help\n\n";

static int push_msg(session *S, const char *role, const char *content, size_t len)
{
    char *c;

    if (S->n_msgs == S->cap_msgs) {
        size_t cap = S->cap_msgs * 2 + 8;
        chat_msg *m = realloc(S->msgs, cap * sizeof *m);
        if (!m)
            return ms_err(MS_ENOMEM, "out of memory");
        S->msgs = m, S->cap_msgs = cap;
    }
    if (!(c = malloc(len + 1)))
        return ms_err(MS_ENOMEM, "out of memory");
    memcpy(c, content, len);
    c[len] = '\0';
    S->msgs[S->n_msgs++] = (chat_msg){ role, c };
    return 0;
}

static void clear_msgs(session *S)
{
    for (size_t i = 0; i < S->n_msgs; i++)
        free((char *)S->msgs[i].content);
    S->n_msgs = 0;
}

static void forget(session *S)
{
    runtime_model_reset(S->m);
    S->cache.n = 0;
}

/* /set parameter NAME VALUE. Returns 0, or -1 with the reason printed. */
static int set_parameter(session *S, const char *name, const char *value)
{
    runtime_sampler_opts *o = &S->a->so;
    runtime_sampler *smp;
    char *end;
    double v;

    if (!name || !value)
        return printf("Usage: /set parameter NAME VALUE\n"), -1;
    v = strtod(value, &end);
    if (end == value || *end || v != v)
        return printf("Couldn't set parameter: '%s' is not a number\n", value), -1;
    if (strcmp(name, "temperature") == 0 && v >= 0 && v <= 100)
        o->temp = (float)v;
    else if (strcmp(name, "top_k") == 0 && v >= 0 && v <= 1 << 24 && v == (int)v)
        o->top_k = (int)v;
    else if (strcmp(name, "top_p") == 0 && v >= 0 && v <= 1)
        o->top_p = (float)v;
    else if (strcmp(name, "min_p") == 0 && v >= 0 && v <= 1)
        o->min_p = (float)v;
    else if (strcmp(name, "repeat_penalty") == 0 && v >= 0.01 && v <= 100)
        o->repeat_penalty = (float)v;
    else if (strcmp(name, "repeat_last_n") == 0 && v >= 0 && v <= 1 << 20 && v == (int)v)
        o->repeat_last_n = (int)v;
    else if (strcmp(name, "seed") == 0 && v >= 0 && v <= 9007199254740992.0 && v == (double)(uint64_t)v)
        o->seed = (uint64_t)v;
    else if (strcmp(name, "num_predict") == 0 && v >= 0 && v <= 1 << 24 && v == (int)v)
        S->a->n_predict = (int)v;
    else
        return printf("Couldn't set parameter: unknown parameter '%s' or value %s out of range\n", name, value), -1;
    if (runtime_sampler_new(&smp, o, runtime_model_config(S->m)->vocab_size) < 0)
        return printf("Couldn't set parameter: %s\n", ms_err_msg()), -1;
    runtime_sampler_free(S->smp);
    S->smp = smp;
    printf("Set parameter '%s' to '%s'\n", name, value);
    return 0;
}

/* A line starting with '/'. Returns 1 for /bye, else 0 (-1: out of memory). */
static int command(session *S, char *line)
{
    char *save = NULL, *cmd = strtok_r(line, " \t", &save), *what;

    if (strcmp(cmd, "/bye") == 0)
        return 1;
    if (strcmp(cmd, "/?") == 0 || strcmp(cmd, "/help") == 0) {
        fputs(chat_help, stdout);
    } else if (strcmp(cmd, "/clear") == 0) {
        clear_msgs(S);
        forget(S);
        printf("Cleared session context\n");
    } else if (strcmp(cmd, "/set") == 0 && (what = strtok_r(NULL, " \t", &save)) && strcmp(what, "parameter") == 0) {
        char *name = strtok_r(NULL, " \t", &save), *value = strtok_r(NULL, " \t", &save);
        set_parameter(S, name, value);
    } else if (strcmp(cmd, "/set") == 0 && what && strcmp(what, "system") == 0) {
        char *sys = save ? save + strspn(save, " \t") : NULL, *copy;
        if (!sys || !*sys) {
            printf("Usage: /set system TEXT\n");
            return 0;
        }
        if (!(copy = ms_strdup_printf("%s", sys)))
            return -1;
        free(S->system);
        S->system = copy;
        printf("Set system message.\n");
    } else if (strcmp(cmd, "/set") == 0) {
        printf("Usage:\n  /set parameter NAME VALUE\n  /set system TEXT\n");
    } else {
        printf("Unknown command '%s'. Type /? for help\n", cmd);
    }
    return 0;
}

/* One user turn: render, prefill only what is new after the cache, stream the answer. */
static int turn(session *S, const char *line, size_t len)
{
    text reply = { NULL, 0, 0 };
    char *full = NULL;
    const char *delta;
    size_t full_len = len, delta_len;
    int rc;

    if (!S->tmpl) {   /* raw: the context simply goes on */
        full = NULL;
        delta = line, delta_len = len;
    } else {
        if (push_msg(S, "user", line, len) < 0 || render(S, &full, &full_len) < 0)
            goto fail;
        /* The cache holds an older rendering plus the answers as generated. When the template
         * renders that history differently (it trims an answer, the system prompt changed),
         * start over from the whole conversation. */
        if (S->cache.n > full_len || memcmp(S->cache.p ? S->cache.p : "", full, S->cache.n) != 0)
            forget(S);
        delta = full + S->cache.n, delta_len = full_len - S->cache.n;
    }
    rc = feed(S, delta, delta_len, S->tmpl != NULL);
    if (rc == 1 && S->cache.n > 0 && S->tmpl) {   /* full: drop the cache, try the conversation alone */
        forget(S);
        rc = feed(S, full, full_len, 1);
    }
    if (rc != 0) {
        if (S->tmpl)
            free((char *)S->msgs[--S->n_msgs].content);   /* the turn did not happen */
        if (rc == 1)
            fprintf(stderr, "mstore: %s; /clear starts over\n", ms_err_msg());
        free(full);
        return rc == 1 ? 0 : -1;
    }
    free(full);
    full = NULL;
    if (answer(S, &reply, 1, 0) < 0)
        goto fail;
    if (S->tmpl && push_msg(S, "assistant", reply.p ? reply.p : "", reply.n) < 0)
        goto fail;
    free(reply.p);
    printf("\n\n");
    fflush(stdout);
    if (S->a->verbose) {   /* per answer, as ollama does: shows what was prefilled this turn */
        stats(S, 0);
        S->n_prompt = S->n_gen = 0;
        S->t_prompt = S->t_gen = 0;
    }
    return 0;
fail:
    free(full);
    free(reply.p);
    return -1;
}

static int chat(session *S, double t_load)
{
    char *line = NULL;
    size_t cap = 0;
    int rc = 0;

    if (S->tmpl && chat_template_warning(S->tmpl))
        fprintf(stderr, "mstore: warning: %s\n", chat_template_warning(S->tmpl));
    if (S->a->verbose)
        fprintf(stderr, "load duration:        %.2fms\n", t_load * 1e3);
    for (;;) {
        ssize_t len;

        printf(">>> ");
        fflush(stdout);
        errno = 0;
        len = getline(&line, &cap, stdin);
        if (len < 0) {
            if (interrupted && !feof(stdin)) {   /* Ctrl-C at the prompt */
                interrupted = 0;
                clearerr(stdin);
                printf("\nUse Ctrl + d or /bye to exit.\n");
                continue;
            }
            printf("\n");
            break;
        }
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        if (len == 0)
            continue;
        if (line[0] == '/') {
            if ((rc = command(S, line)) != 0)
                break;
            continue;
        }
        if ((rc = turn(S, line, (size_t)len)) < 0)
            break;
        interrupted = 0;   /* Ctrl-C ends an answer, not the chat */
    }
    free(line);
    if (rc < 0)
        return cli_fail();
    return 0;
}

/* The model's template text: from the GGUF file, or the store's MT_TEMPLATE layer. NULL
 * (and 0) when it has none. */
static int template_text(char **out, size_t *len, const run_args *a, store *s, const model_name *name)
{
    gguf_file *g = NULL;
    int rc;

    if (a->gguf) {
        if ((rc = gguf_open(&g, a->gguf)) == 0)
            rc = chat_template_text_gguf(out, len, g);
        gguf_close(g);
    } else {
        rc = chat_template_text_store(out, len, s, name);
    }
    return rc == MS_ENOTFOUND ? 0 : rc;
}

/* Template, sampler and buffers around an open model; then one-shot or chat. */
static int run_model(run_args *a, runtime_model *m, const tokenizer *t, store *s, const model_name *name,
                     double t0)
{
    session S = { .a = a, .m = m, .t = t, .bos_text = "" };
    int interactive = !a->prompt && isatty(STDIN_FILENO);
    char *tmpl_text = NULL;
    size_t tmpl_len = 0, len;
    const char *eos;
    int rc = 1;

    if (!(S.logits = malloc(sizeof(float) * (size_t)runtime_model_config(m)->vocab_size)) ||
        !(S.msgs = calloc(1, sizeof *S.msgs))) {
        ms_err(MS_ENOMEM, "out of memory");
        goto fail;
    }
    S.cap_msgs = 1;
    if (tokenizer_bos(t) >= 0 && tokenizer_token_text(t, tokenizer_bos(t), &len) &&
        !(S.bos_text = ms_strdup_printf("%.*s", (int)len, tokenizer_token_text(t, tokenizer_bos(t), &len))))
        goto nomem;
    if (runtime_sampler_new(&S.smp, &a->so, runtime_model_config(m)->vocab_size) < 0)
        goto fail;
    /* The template applies unless --raw, or in one-shot mode when the model has none; a chat
     * without one renders plainly ("user: ..."). */
    if (!a->raw) {
        if (template_text(&tmpl_text, &tmpl_len, a, s, name) < 0)
            goto fail;
        if (tmpl_text || interactive) {
            eos = tokenizer_eos(t) >= 0 ? tokenizer_token_text(t, tokenizer_eos(t), &len) : NULL;
            char *eos_text = eos ? ms_strdup_printf("%.*s", (int)len, eos) : NULL;
            rc = chat_template_new(&S.tmpl, tmpl_text, tmpl_len, S.bos_text, eos_text);
            free(eos_text);
            if (rc < 0)
                goto fail;
            rc = 1;
            if (a->verbose)
                fprintf(stderr, "chat template:        %s\n", chat_family_name(chat_template_family(S.tmpl)));
            if (!interactive && chat_template_warning(S.tmpl))
                fprintf(stderr, "mstore: warning: %s\n", chat_template_warning(S.tmpl));
        }
    }
    if (a->system && !(S.system = ms_strdup_printf("%s", a->system)))
        goto nomem;
    {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_sigint;   /* no SA_RESTART: Ctrl-C also interrupts reading a line */
        sigaction(SIGINT, &sa, NULL);
        rc = interactive ? chat(&S, now() - t0) : generate(&S, now() - t0);
        signal(SIGINT, SIG_DFL);
    }
    goto done;
nomem:
    ms_err(MS_ENOMEM, "out of memory");
fail:
    rc = cli_fail();
done:
    clear_msgs(&S);
    free(S.msgs);
    free(S.system);
    free(S.cache.p);
    free(S.logits);
    free(tmpl_text);
    if (*S.bos_text)
        free((char *)S.bos_text);
    chat_template_free(S.tmpl);
    runtime_sampler_free(S.smp);
    return rc;
}

int cmd_run(int argc, char **argv)
{
    char *stdin_prompt = NULL;
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
    if (!a.gguf) {
        if (!(s = cli_store_open()))
            return 1;
        if ((rc = model_params_load(&a.mp, s, &name)) == MS_ENOTFOUND && (rc = cli_pull_offer(s, &name, a.insecure)) == 0)
            rc = model_params_load(&a.mp, s, &name);
        if (rc < 0 || (a.mp && (rc = parse(&a, argc, argv)) != 0)) {
            rc = rc < 0 ? cli_fail() : rc;
            goto done;
        }
    }
    /* As ollama does: with no PROMPT and standard input not a terminal, the prompt is what
     * arrives there (`echo "Why?" | mstore run NAME`), less one final newline. */
    if (!a.prompt && !isatty(STDIN_FILENO)) {
        size_t len = 0;
        if (ms_fd_read_all(&stdin_prompt, &len, STDIN_FILENO, RUN_STDIN_MAX) < 0) {
            ms_err_ctx("standard input");
            rc = cli_fail();
            goto done;
        }
        if (len && stdin_prompt[len - 1] == '\n')
            stdin_prompt[--len] = '\0';
        a.prompt = stdin_prompt;
    }
    t0 = now();
    if (a.gguf ? runtime_model_open_gguf(&m, a.gguf, &a.o) < 0 : runtime_model_open_store(&m, s, &name, &a.o) < 0)
        rc = cli_fail();
    else if (runtime_weights_tokenizer(&t, runtime_model_weights(m)) < 0)
        rc = cli_fail();
    else
        rc = run_model(&a, m, t, s, a.gguf ? NULL : &name, t0);
done:
    runtime_model_close(m);
    store_close(s);
    model_params_free(a.mp);
    free(stdin_prompt);
    return rc;
}
