/* run.c: mstore run NAME [PROMPT] - stream a completion. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <editline/readline.h>

#include "chat/chat.h"
#include "cli.h"
#include "grammar/grammar.h"
#include "modelfile/modelfile.h"
#include "runtime/runtime.h"
#include "session/session.h"

#define RUN_STDIN_MAX (64u << 20) /* a prompt from standard input: far past any context */

static const char help[] =
    "usage: mstore run NAME [PROMPT...] [options] [-- PROMPT...]\n"
    "       mstore run --gguf FILE [PROMPT...] [options]\n\n"
    "Stream the answer to PROMPT, rendered with the model's chat template (llama2, llama3, chatml,\n"
    "gemma, phi3) when it has one. Several words make one prompt (mstore run m Once upon a time);\n"
    "after -- every word is prompt, even one starting with '-'. Stops at an end-of-turn token,\n"
    "after -n tokens, when the context is full (said on stderr), or at Ctrl-C. An empty PROMPT\n"
    "(\"\") starts from BOS alone, raw.\n"
    "Without PROMPT on a terminal: an interactive chat that keeps its context between turns\n"
    "(type /? for its commands). Without PROMPT and with standard input not a terminal, the\n"
    "prompt is read from standard input.\n\n"
    "  --raw                 send the prompt as is, without the chat template\n"
    "  --system TEXT         the system prompt (chat template only)\n"
    "  --think[=false]       a model whose template thinks (Qwen3, DeepSeek-R1, gpt-oss) shows its\n"
    "                        reasoning (the <think> block, harmony's analysis) dimmed under\n"
    "                        \"Thinking...\"; it thinks unless --think=false; --think asks a model\n"
    "                        that cannot and fails\n"
    "  --hidethinking        let a thinking model think, but print only its answer\n"
    "  --verbose             print load time, prompt and generation token counts and rates (stderr)\n"
    "  -n N                  generate at most N tokens per answer; -1 = until the context is full\n"
    "                        (default 256)\n"
    "  --temp F              temperature; 0 = greedy (default 0.8)\n"
    "  --top-k N             keep the N most likely tokens; 0 = off (default 40)\n"
    "  --top-p F             keep the smallest set of probability >= F; 1 = off (default 0.95)\n"
    "  --min-p F             drop tokens below F x the top probability; 0 = off (default 0.05)\n"
    "  --repeat-penalty F    divide logits of recent tokens by F; 1 = off (default 1.0)\n"
    "  --repeat-last-n N     how many recent tokens (prompt included) the penalties see; 0 = off\n"
    "                        (default 64)\n"
    "  --frequency-penalty F subtract F x the count of each recent token from its logit, -2..2\n"
    "                        (OpenAI's); 0 = off (default)\n"
    "  --presence-penalty F  subtract F from the logit of each recent token, -2..2; 0 = off\n"
    "                        (default)\n"
    "  --format F            constrain the answer: json (any JSON object), a JSON Schema's text, or\n"
    "                        @FILE, a schema in a file; greedy and seeded sampling both obey it\n"
    "  --seed N              sampling seed; the same seed gives the same output (default, or -1:\n"
    "                        random)\n"
    "  --threads N           worker threads (default: all cores)\n"
    "  --ctx N               context length in tokens (default, or 0: the model's, at most 4096)\n"
    "  --kv-f16              keep the KV cache in f16 (half the memory)\n"
    "  --device D            auto, cpu, vulkan or metal (default: $MSTORE_DEVICE, else auto: a\n"
    "                        hardware GPU when there is one, else the CPU; see 'mstore devices')\n"
    "  --gguf FILE           run a GGUF file instead of a model in the store\n"
    "  --insecure            a model not in the store is pulled (when you agree) over plain http\n\n"
    "The model's params and system layers (ollama's, or a Modelfile's) are the defaults; a flag\n"
    "wins; each has the range ollama's options and a Modelfile's PARAMETER have. A model not in\n"
    "the store: on a terminal, mstore offers to pull it.\n";

static volatile sig_atomic_t interrupted;
static void on_sigint(int sig)
{
    (void)sig;
    interrupted = 1;
}

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct run_args {
    const char *name, *gguf, *system;
    char *prompt; /* the words after NAME joined by spaces (malloc'd), or NULL */
    int verbose, raw, insecure;
    int think, hide_thinking; /* think: -1 unset, 0 --think=false, 1 --think */
    runtime_opts o;
    model_opts mo; /* sampler, -n and --ctx: the option table's (modelfile.h) */
    model_params *mp;   /* the model's own defaults (params, system layers), or NULL */
    char *format_file; /* the text of --format @FILE, which mo.format points into */
} run_args;

/* A seed nobody else gets: runs started in the same second must not repeat each other. */
static uint64_t random_seed(void)
{
    uint64_t seed = 0;
    struct timespec ts;

    if (getrandom(&seed, sizeof seed, GRND_NONBLOCK) == (ssize_t)sizeof seed)
        return seed & 0x7fffffffffffffffULL;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ((uint64_t)ts.tv_sec * 1000000007ULL ^ (uint64_t)ts.tv_nsec ^ (uint64_t)getpid() << 32) &
           0x7fffffffffffffffULL;
}

/* words[0..n) joined by single spaces, malloc'd; NULL for none. */
static int join_words(char **out, char **words, int n)
{
    size_t len = 0, at = 0;

    *out = NULL;
    if (n == 0)
        return 0;
    for (int i = 0; i < n; i++)
        len += strlen(words[i]) + 1;
    if (!(*out = malloc(len)))
        return ms_err(MS_ENOMEM, "out of memory");
    for (int i = 0; i < n; i++) {
        size_t l = strlen(words[i]);
        memcpy(*out + at, words[i], l);
        at += l;
        (*out)[at++] = i + 1 < n ? ' ' : '\0';
    }
    return 0;
}

/* Returns 0, or the exit status of a usage error (2), or -1 after --help. */
static int parse(run_args *a, int argc, char **argv, char **pos)
{
    const model_option *opt;
    int n_pos = 0, dashdash = 0;
    long l;
    double d;

    model_opts_defaults(&a->mo);
    a->mo.n_predict = 256;
    a->think = -1;
    /* The model's params come first so that a flag still wins. */
    model_params_apply(a->mp, &a->mo);
    a->system = a->mp ? a->mp->system : NULL;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (dashdash || !(f[0] == '-' && f[1])) {
            pos[n_pos++] = argv[i];
        } else if (strcmp(f, "--") == 0) {
            dashdash = 1;
        } else if (cli_is_help(f)) {
            fputs(help, stdout);
            return -1;
        } else if (strcmp(f, "--raw") == 0) {
            a->raw = 1;
        } else if (strcmp(f, "--think") == 0 || strcmp(f, "--think=true") == 0) {
            a->think = 1;
        } else if (strcmp(f, "--think=false") == 0) {
            a->think = 0;
        } else if (strcmp(f, "--hidethinking") == 0) {
            a->hide_thinking = 1;
        } else if (strcmp(f, "--verbose") == 0) {
            a->verbose = 1;
            a->o.verbose = 1;
        } else if (strcmp(f, "--insecure") == 0) {
            a->insecure = 1;
        } else if (strcmp(f, "--kv-f16") == 0) {
            a->o.kv_f16 = 1;
        } else if (!v) {
            return cli_usage_error("run", "%s needs a value or is unknown (a prompt starting with '-' goes after --)",
                                   f);
        } else if ((opt = model_option_find_flag(f)) && opt->type == MODEL_OPT_TEXT) {
            const char *text = v;
            if (v[0] == '@') {
                free(a->format_file);
                a->format_file = NULL;
                if (ms_file_read(&a->format_file, NULL, v + 1, GRAMMAR_MAX_SCHEMA_BYTES) < 0)
                    return ms_err_ctx("%s", f), cli_usage_error("run", "%s", ms_err_msg());
                text = a->format_file;
            }
            if (model_option_set_text(&a->mo, opt, f, text) < 0)
                return cli_usage_error("run", "%s", ms_err_msg());
            i++;
        } else if (opt) {
            if (model_option_parse(&d, opt, f, v) < 0)
                return cli_usage_error("run", "%s", ms_err_msg());
            model_option_set(&a->mo, opt, d);
            i++;
        } else if (strcmp(f, "--threads") == 0) {
            if (cli_parse_long(&l, "run", f, v, 1, 512) < 0)
                return 2;
            a->o.n_threads = (int)l;
            i++;
        } else if (strcmp(f, "--gguf") == 0) {
            a->gguf = argv[++i];
        } else if (strcmp(f, "--system") == 0) {
            a->system = argv[++i];
        } else if (strcmp(f, "--device") == 0) {
            a->o.device = argv[++i];
        } else {
            return cli_usage_error("run", "unknown option '%s' (a prompt starting with '-' goes after --)", f);
        }
    }
    if (!a->gguf) { /* without --gguf the first word is the model */
        if (n_pos == 0)
            return cli_usage_error("run", "needs NAME (or --gguf FILE)");
        a->name = pos[0];
        pos++, n_pos--;
    }
    if (join_words(&a->prompt, pos, n_pos) < 0)
        return cli_fail();
    if (!a->mo.seed_set)
        a->mo.so.seed = random_seed();
    a->o.n_ctx = a->mo.n_ctx;
    return 0;
}

/* Everything a run needs, one-shot or chat, around the library session. */
typedef struct run_state {
    run_args *a;
    session *S;
    int tmpl; /* 1: prompts are rendered with the template (plain when none) */
    char *system; /* the system prompt, or NULL */
    chat_msg *msgs; /* user / assistant turns (owned strings) */
    size_t n_msgs, cap_msgs;
    ms_text *reply; /* where the answer also goes (chat), or NULL */
    char *format; /* the format set by /set parameter format, which a->mo.format points to */
    int think; /* the template's think: -1 unset (the model does not think), 0 off, 1 on */
    int splitting; /* this answer goes through the splitter */
    int in_thought; /* "Thinking..." is open on stdout */
    chat_think split;
    int harmony;          /* gpt-oss: the answer is harmony messages, always split (hsplit) */
    chat_harmony hsplit;
} run_state;

/* ollama's CLI: the reasoning under "Thinking...", dimmed on a terminal, closed before the answer. */
static void thought_close(run_state *R)
{
    if (!R->in_thought)
        return;
    fputs(isatty(STDOUT_FILENO) ? "\033[0m\n...done thinking.\n\n" : "\n...done thinking.\n\n", stdout);
    R->in_thought = 0;
}

static int piece(void *ctx, int thinking, const char *s, size_t len)
{
    run_state *R = ctx;

    if (thinking) {
        if (R->a->hide_thinking)
            return interrupted;
        if (!R->in_thought)
            fputs(isatty(STDOUT_FILENO) ? "Thinking...\n\033[2m" : "Thinking...\n", stdout);
        R->in_thought = 1;
        fwrite(s, 1, len, stdout);
        fflush(stdout);
        return ferror(stdout) || interrupted;
    }
    thought_close(R);
    fwrite(s, 1, len, stdout);
    fflush(stdout);
    if (ferror(stdout))
        return 1;
    if (R->reply && ms_text_put(R->reply, s, len) < 0)
        return 1;
    return interrupted;
}

/* A harmony answer's parts: the analysis is the reasoning (shown only when thinking is on), a call
 * (run offers no tools, but a model may still call one) is printed as such, the rest is content. */
static int harmony_piece(void *ctx, int kind, const char *s, size_t len)
{
    run_state *R = ctx;

    switch (kind) {
    case CHAT_HARMONY_THINKING:
        return R->think == 1 ? piece(R, 1, s, len) : interrupted;
    case CHAT_HARMONY_CALL:
        thought_close(R);
        printf("\n[call %.*s] ", (int)len, s);
        return ferror(stdout) || interrupted;
    case CHAT_HARMONY_ARGS:
        thought_close(R);
        fwrite(s, 1, len, stdout);
        return ferror(stdout) || interrupted;
    default:
        return piece(R, 0, s, len);
    }
}

/* Print each piece as it comes, the reasoning apart; Ctrl-C stops at the next token. */
static int emit(void *ctx, const char *s, size_t len)
{
    run_state *R = ctx;

    if (R->splitting && R->harmony)
        return chat_harmony_feed(&R->hsplit, s, len, harmony_piece, R);
    return R->splitting ? chat_think_feed(&R->split, s, len, piece, R) : piece(R, 0, s, len);
}

static int answer(run_state *R, int lstrip)
{
    session_gen g = {.n_predict = R->a->mo.n_predict};
    session_done done;

    for (size_t i = 0; R->a->mp && i < R->a->mp->n_stop && g.n_stops < SESSION_MAX_STOPS; i++)
        g.stops[g.n_stops++] = R->a->mp->stop[i];   /* the model's own stop words */

    if (session_generate(R->S, &g, lstrip, emit, R, &done) < 0)
        return -1;
    if (R->splitting && R->harmony)
        chat_harmony_end(&R->hsplit, harmony_piece, R);
    else if (R->splitting)
        chat_think_end(&R->split, piece, R);
    thought_close(R);
    R->splitting = 0;
    if (ferror(stdout))
        return ms_err_os("stdout");
    if (done == SESSION_DONE_CONTEXT)
        fprintf(stderr, "\nmstore: stopped: the context of %d tokens is full (--ctx for more%s)\n",
                runtime_model_n_ctx(session_model(R->S)), R->tmpl ? ", /clear starts over" : "");
    return 0;
}

static void stats(const session *S, double t_load)
{
    const session_stats *st = session_stats_get(S);

    if (t_load > 0)
        fprintf(stderr, "load duration:        %.2fms\n", t_load * 1e3);
    fprintf(stderr, "prompt eval count:    %zu token(s)\n", st->n_prompt);
    fprintf(stderr, "prompt eval duration: %.2fms\n", st->t_prompt * 1e3);
    fprintf(stderr, "prompt eval rate:     %.2f tokens/s\n",
            st->t_prompt > 0 ? (double)st->n_prompt / st->t_prompt : 0.0);
    fprintf(stderr, "eval count:           %zu token(s)\n", st->n_gen);
    fprintf(stderr, "eval duration:        %.2fms\n", st->t_gen * 1e3);
    fprintf(stderr, "eval rate:            %.2f tokens/s\n",
            st->n_gen && st->t_gen > 0 ? (double)st->n_gen / st->t_gen : 0.0);
}

/* The conversation rendered with the template, system prompt first. */
static int render(run_state *R, char **out, size_t *len)
{
    chat_msg *all = malloc((R->n_msgs + 1) * sizeof *all);
    size_t n = 0;
    int rc;

    if (!all)
        return ms_err(MS_ENOMEM, "out of memory");
    if (R->system)
        all[n++] = (chat_msg){.role = "system", .content = R->system};
    memcpy(all + n, R->msgs, R->n_msgs * sizeof *all);
    rc = chat_render_think(out, len, session_template(R->S), all, n + R->n_msgs, NULL, 0, 1, R->think);
    free(all);
    /* the answer to this prompt is split when the model thinks (and starts inside a block the
     * template opened) */
    R->harmony = chat_template_harmony(session_template(R->S));
    if (rc == 0 && R->harmony) {   /* its markers must never print, thinking or not */
        R->splitting = 1;
        chat_harmony_init(&R->hsplit);
    } else if (rc == 0 && (R->splitting = R->think == 1)) {
        chat_think_init(&R->split);
        if (chat_think_prefilled(*out, *len))
            chat_think_feed(&R->split, "<think>", 7, piece, R);
    }
    return rc;
}

/* One-shot: PROMPT (templated unless raw), one answer. */
static int generate(run_state *R, double t_load)
{
    const char *prompt = R->a->prompt ? R->a->prompt : "";
    char *full = NULL;
    size_t len = strlen(prompt);
    int rc;

    if (R->tmpl && *prompt) {
        R->msgs[0] = (chat_msg){.role = "user", .content = prompt};
        R->n_msgs = 1;
        rc = render(R, &full, &len);
        R->n_msgs = 0;
        if (rc < 0)
            return cli_fail();
    }
    rc = session_feed(R->S, full ? full : prompt, len, full != NULL, SESSION_FEED_WHOLE);
    free(full);
    if (rc < 0) {
        if (rc == MS_ETOOBIG)
            ms_err_ctx("--ctx");
        return cli_fail();
    }
    if (answer(R, session_stats_get(R->S)->n_prompt == 1 && !R->tmpl) < 0)
        return cli_fail();
    printf("\n");
    if (R->a->verbose)
        stats(R->S, t_load);
    return interrupted ? 130 : 0;
}

/* ---------------------------------------------------------------- interactive chat */

static const char chat_help[] = "Available Commands:\n"
                                "  /set parameter NAME VALUE   temperature, top_k, top_p, min_p, repeat_penalty,\n"
                                "                              repeat_last_n, frequency_penalty,\n"
                                "                              presence_penalty, seed, num_predict\n"
                                "  /set parameter format F     json, a JSON Schema (the rest of the line) or off\n"
                                "  /set system TEXT            set the system message (the context starts over)\n"
                                "  /set think, /set nothink    a model that can think shows its reasoning, or not\n"
                                "  /clear                      clear the session context\n"
                                "  /bye                        exit\n"
                                "  /?, /help                   this help\n"
                                "  \"\"\"                         begin and end a message of several lines\n\n";

static int push_msg(run_state *R, const char *role, const char *content, size_t len)
{
    char *c;

    if (R->n_msgs == R->cap_msgs) {
        size_t cap = R->cap_msgs * 2 + 8;
        chat_msg *m = realloc(R->msgs, cap * sizeof *m);
        if (!m)
            return ms_err(MS_ENOMEM, "out of memory");
        R->msgs = m, R->cap_msgs = cap;
    }
    if (!(c = malloc(len + 1)))
        return ms_err(MS_ENOMEM, "out of memory");
    memcpy(c, content, len);
    c[len] = '\0';
    R->msgs[R->n_msgs++] = (chat_msg){.role = role, .content = c};
    return 0;
}

static void clear_msgs(run_state *R)
{
    for (size_t i = 0; i < R->n_msgs; i++)
        free((char *)R->msgs[i].content);
    R->n_msgs = 0;
}

/* /set parameter NAME VALUE: the options of the table that a loaded model can change.
 * Returns 0, or -1 with the reason printed. */
static int set_parameter(run_state *R, const char *name, const char *value)
{
    const model_option *opt = name ? model_option_find(name) : NULL;
    double v;

    if (!name || !value)
        return printf("Usage: /set parameter NAME VALUE\n"), -1;
    if (opt && opt->type == MODEL_OPT_TEXT && value) { /* format: kept by the run, as the session reads it */
        char *copy = ms_strdup_printf("%s", value);
        const char *text = strcmp(value, "off") == 0 ? NULL : copy;
        if (!copy || session_format_set(R->S, text, text ? strlen(text) : 0) < 0 ||
            model_option_set_text(&R->a->mo, opt, name, text) < 0) {
            free(copy);
            return printf("Couldn't set parameter: %s\n", ms_err_msg()), -1;
        }
        free(R->format);
        R->format = copy;
        printf("Set parameter '%s' to '%s'\n", name, value);
        return 0;
    }
    if (!opt || opt->type == MODEL_OPT_STRINGS || opt->load_only)
        return printf("Couldn't set parameter: unknown parameter '%s'%s\n", name,
                      opt && opt->load_only ? " (it is set when the model loads)" : ""),
               -1;
    if (model_option_parse(&v, opt, name, value) < 0)
        return printf("Couldn't set parameter: %s\n", ms_err_msg()), -1;
    model_option_set(&R->a->mo, opt, v);
    if (session_sampler_set(R->S, &R->a->mo.so) < 0)
        return printf("Couldn't set parameter: %s\n", ms_err_msg()), -1;
    printf("Set parameter '%s' to '%s'\n", name, value);
    return 0;
}

/* A line starting with '/'. Returns 1 for /bye, else 0 (-1: out of memory). */
static int command(run_state *R, char *line)
{
    char *save = NULL, *cmd = strtok_r(line, " \t", &save), *what;

    if (strcmp(cmd, "/bye") == 0)
        return 1;
    if (strcmp(cmd, "/?") == 0 || strcmp(cmd, "/help") == 0) {
        fputs(chat_help, stdout);
    } else if (strcmp(cmd, "/clear") == 0) {
        clear_msgs(R);
        session_reset(R->S);
        printf("Cleared session context\n");
    } else if (strcmp(cmd, "/set") == 0 && (what = strtok_r(NULL, " \t", &save)) && strcmp(what, "parameter") == 0) {
        char *name = strtok_r(NULL, " \t", &save), *value;
        /* format takes the rest of the line: a schema has spaces */
        if (name && strcmp(name, "format") == 0 && save && *(save += strspn(save, " \t")))
            value = save;
        else
            value = strtok_r(NULL, " \t", &save);
        set_parameter(R, name, value);
    } else if (strcmp(cmd, "/set") == 0 && what && strcmp(what, "system") == 0) {
        char *sys = save ? save + strspn(save, " \t") : NULL, *copy;
        if (!sys || !*sys) {
            printf("Usage: /set system TEXT\n");
            return 0;
        }
        if (!(copy = ms_strdup_printf("%s", sys)))
            return -1;
        free(R->system);
        R->system = copy;
        printf("Set system message.\n");
    } else if (strcmp(cmd, "/set") == 0 && what && (!strcmp(what, "think") || !strcmp(what, "nothink"))) {
        if (R->think < 0) /* the model's template does not think: as ollama's CLI says it */
            printf("error: model does not support thinking\n");
        else {
            R->think = strcmp(what, "think") == 0;
            printf("Set '%s' mode.\n", what);
        }
    } else if (strcmp(cmd, "/set") == 0) {
        printf("Usage:\n  /set parameter NAME VALUE\n  /set system TEXT\n  /set think | nothink\n");
    } else {
        printf("Unknown command '%s'. Type /? for help\n", cmd);
    }
    return 0;
}

/* One user turn: render the whole conversation; the session prefills only what is new after
 * its cache (or all of it when the template renders the history differently), then streams. */
static int turn(run_state *R, const char *line, size_t len)
{
    ms_text reply = {NULL, 0, 0};
    char *full = NULL;
    size_t full_len = len;
    int rc;

    if (!R->tmpl) { /* raw: the context simply goes on */
        rc = session_feed(R->S, line, len, 0, SESSION_FEED_APPEND);
    } else {
        if (push_msg(R, "user", line, len) < 0 || render(R, &full, &full_len) < 0)
            goto fail;
        rc = session_feed(R->S, full, full_len, 1, SESSION_FEED_WHOLE);
    }
    free(full);
    full = NULL;
    if (rc < 0) {
        if (R->tmpl)
            free((char *)R->msgs[--R->n_msgs].content); /* the turn did not happen */
        if (rc != MS_EINVALID && rc != MS_ETOOBIG) /* an empty turn, or one past the context */
            return -1;
        fprintf(stderr, "mstore: %s; /clear starts over\n", ms_err_msg());
        return 0;
    }
    R->reply = &reply;
    rc = answer(R, 0);
    R->reply = NULL;
    if (rc < 0)
        goto fail;
    if (R->tmpl && push_msg(R, "assistant", reply.p ? reply.p : "", reply.n) < 0)
        goto fail;
    free(reply.p);
    printf("\n\n");
    fflush(stdout);
    if (R->a->verbose) { /* per answer, as ollama does: shows what was prefilled this turn */
        stats(R->S, 0);
        session_stats_clear(R->S);
    }
    return 0;
fail:
    free(full);
    free(reply.p);
    return -1;
}

/* Line editing and history (libedit) when both ends are a terminal: arrows, Ctrl-R, the
 * history of this chat. Pipes and files are read plainly. */
static int edit_on;

static void edit_begin(void)
{
    const char *term = getenv("TERM");

    edit_on = isatty(STDIN_FILENO) && isatty(STDOUT_FILENO) && !(term && strcmp(term, "dumb") == 0) &&
              !getenv("MSTORE_NO_EDIT");
    if (edit_on) {
        rl_readline_name = "mstore";
        using_history();
        stifle_history(1000);
    }
}

/* One line without its newline, malloc'd. MS_ENOTFOUND at end of input, MS_EINTR at Ctrl-C. */
static int read_line(char **out, size_t *len_out, const char *prompt, int remember)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;

    *out = NULL;
    if (edit_on) {
        fflush(stdout);
        line = readline(prompt);
        if (!line)
            return interrupted ? MS_EINTR : MS_ENOTFOUND;
        if (interrupted) { /* Ctrl-C while editing: the line is dropped, as a shell does */
            free(line);
            return MS_EINTR;
        }
        if (remember && *line)
            add_history(line);
        *out = line;
        *len_out = strlen(line);
        return 0;
    }
    printf("%s", prompt);
    fflush(stdout);
    errno = 0;
    len = getline(&line, &cap, stdin);
    if (len < 0) {
        free(line);
        if (interrupted && !feof(stdin)) {
            clearerr(stdin);
            return MS_EINTR;
        }
        return MS_ENOTFOUND;
    }
    while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
        line[--len] = '\0';
    *out = line;
    *len_out = (size_t)len;
    return 0;
}

/* Read one message: a line, or, for a line starting with """, every line up to one ending with
 * """ (as ollama does), joined by newlines without the quotes. *out malloc'd; MS_ENOTFOUND at
 * end of input, MS_EINTR at Ctrl-C. */
static int read_message(char **out, size_t *len_out, const char *prompt)
{
    ms_text msg = {NULL, 0, 0};
    char *line;
    size_t len;
    int rc;

    if ((rc = read_line(&line, &len, prompt, 1)) < 0 || len < 3 || memcmp(line, "\"\"\"", 3) != 0) {
        *out = line, *len_out = len;
        return rc;
    }
    rc = ms_text_put(&msg, line + 3, len - 3);
    for (;;) {
        int closed = msg.n >= 3 && memcmp(msg.p + msg.n - 3, "\"\"\"", 3) == 0 && (msg.n > 3 || len > 6);
        free(line);
        line = NULL;
        if (rc < 0)
            break;
        if (closed) {
            msg.n -= 3;
            msg.p[msg.n] = '\0';
            break;
        }
        if ((rc = read_line(&line, &len, "... ", 1)) < 0)
            break;
        if ((rc = ms_text_put(&msg, "\n", 1)) == 0)
            rc = ms_text_put(&msg, line, len);
    }
    if (rc < 0) {
        free(msg.p);
        return rc;
    }
    *out = msg.p ? msg.p : ms_strdup_printf("%s", "");
    *len_out = msg.n;
    return *out ? 0 : ms_err(MS_ENOMEM, "out of memory");
}

static int chat(run_state *R, double t_load)
{
    const chat_template *ct = session_template(R->S);
    int rc = 0;

    if (R->tmpl && chat_template_warning(ct))
        fprintf(stderr, "mstore: warning: %s\n", chat_template_warning(ct));
    if (R->a->verbose)
        fprintf(stderr, "load duration:        %.2fms\n", t_load * 1e3);
    edit_begin();
    for (;;) {
        char *line = NULL;
        size_t len = 0;

        rc = read_message(&line, &len, ">>> ");
        if (rc == MS_EINTR) { /* Ctrl-C at the prompt */
            interrupted = 0;
            printf("\nUse Ctrl + d or /bye to exit.\n");
            rc = 0;
            continue;
        }
        if (rc == MS_ENOTFOUND) {
            printf("\n");
            rc = 0;
            break;
        }
        if (rc < 0)
            break;
        if (len == 0) {
            free(line);
            continue;
        }
        if (line[0] == '/')
            rc = command(R, line);
        else
            rc = turn(R, line, len);
        free(line);
        if (rc != 0)
            break;
        interrupted = 0; /* Ctrl-C ends an answer, not the chat */
    }
    if (rc < 0)
        return cli_fail();
    return 0;
}

/* The model's template text: from the GGUF file, or the stored model's MT_TEMPLATE layer (from
 * the handle the weights came through). NULL (and 0) when it has none. */
static int template_text(char **out, size_t *len, const run_args *a, store_model *sm)
{
    gguf_file *g = NULL;
    const uint8_t *data;
    int rc;

    if (a->gguf) {
        if ((rc = gguf_open(&g, a->gguf)) == 0)
            rc = chat_template_text_gguf(out, len, g);
        gguf_close(g);
    } else if ((rc = store_model_find(&data, len, sm, MT_TEMPLATE, NULL)) == 0) {
        if (!(*out = malloc(*len + 1)))
            return ms_err(MS_ENOMEM, "out of memory for a chat template of %zu bytes", *len);
        memcpy(*out, data, *len);
        (*out)[*len] = '\0';
    }
    return rc == MS_ENOTFOUND ? 0 : rc;
}

/* Template, sampler and session around an open model; then one-shot or chat. */
static int run_model(run_args *a, runtime_model *m, const tokenizer *t, store_model *sm, double t0)
{
    run_state R = {.a = a};
    int interactive = !a->prompt && isatty(STDIN_FILENO);
    char *tmpl_text = NULL;
    size_t tmpl_len = 0;
    int rc = 1;

    if (!a->raw && template_text(&tmpl_text, &tmpl_len, a, sm) < 0)
        goto fail;
    if (session_new(&R.S, m, t, tmpl_text, tmpl_len) < 0 || session_sampler_set(R.S, &a->mo.so) < 0 ||
        (a->mo.format && session_format_set(R.S, a->mo.format, strlen(a->mo.format)) < 0))
        goto fail;
    if (!(R.msgs = calloc(1, sizeof *R.msgs))) {
        ms_err(MS_ENOMEM, "out of memory");
        goto fail;
    }
    R.cap_msgs = 1;
    /* The template applies unless --raw, or in one-shot mode when the model has none; a chat
     * without one renders plainly ("user: ..."). */
    R.tmpl = !a->raw && (tmpl_text || interactive);
    /* as ollama: a model that can think does unless told not to; --think for one that cannot
     * (or for a prompt sent without the template) fails */
    R.think = -1;
    if (R.tmpl && chat_template_thinks(session_template(R.S)))
        R.think = a->think < 0 ? 1 : a->think;
    else if (a->think == 1) {
        ms_err(MS_EUNSUPPORTED, "%s does not support thinking%s", a->name ? a->name : a->gguf,
               a->raw ? " with --raw (no chat template)" : "");
        goto fail;
    }
    if (R.tmpl) {
        const chat_template *ct = session_template(R.S);
        if (a->verbose)
            fprintf(stderr, "chat template:        %s\n", chat_family_name(chat_template_family(ct)));
        if (!interactive && chat_template_warning(ct))
            fprintf(stderr, "mstore: warning: %s\n", chat_template_warning(ct));
    }
    if (a->system && !R.tmpl)
        fprintf(stderr, "mstore: warning: --system is ignored: %s\n",
                a->raw ? "--raw sends the prompt as is" : "the model has no chat template to put it in");
    if (a->system && !(R.system = ms_strdup_printf("%s", a->system))) {
        ms_err(MS_ENOMEM, "out of memory");
        goto fail;
    }
    {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_sigint; /* no SA_RESTART: Ctrl-C also interrupts reading a line */
        sigaction(SIGINT, &sa, NULL);
        if (a->gguf && getenv("MSTORE_TEST_RUN_SHRINK"))   /* tests only: the file shrinks now */
            (void)!truncate(a->gguf, atoll(getenv("MSTORE_TEST_RUN_SHRINK")));
        rc = interactive ? chat(&R, now() - t0) : generate(&R, now() - t0);
        signal(SIGINT, SIG_DFL);
    }
    goto done;
fail:
    rc = cli_fail();
done:
    clear_msgs(&R);
    MS_FREE_ALL(R.msgs, R.system, R.format, tmpl_text);
    session_free(R.S);
    return rc;
}

/* run --gguf computes from a mapping of a file that is not the store's: if someone shrinks it
 * meanwhile, the next touch of a lost page is SIGBUS. Say what happened instead of dying
 * silently. The message is made before the signal can come: a handler may only write(2). */
static char bus_msg[4200];
static size_t bus_len;

static void on_sigbus(int sig)
{
    (void)sig;
    (void)!write(STDERR_FILENO, bus_msg, bus_len);
    _exit(1);
}

static void gguf_guard(const char *path)
{
    struct sigaction sa;
    int n = snprintf(bus_msg, sizeof bus_msg, "\nmstore: %s: file changed while running\n", path);

    bus_len = n < 0 ? 0 : (size_t)n < sizeof bus_msg ? (size_t)n : sizeof bus_msg - 1;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigbus;
    sigaction(SIGBUS, &sa, NULL);
}

int cmd_run(int argc, char **argv)
{
    char *stdin_prompt = NULL, **pos = calloc((size_t)argc + 1, sizeof *pos);
    run_args a = {0};
    runtime_model *m = NULL;
    const tokenizer *t;
    store *s = NULL;
    store_model *sm = NULL;
    model_name name;
    double t0;
    int rc;

    if (!pos)
        return ms_err(MS_ENOMEM, "out of memory"), cli_fail();
    rc = parse(&a, argc, argv, pos);
    if (rc != 0) {
        free(pos);
        return rc < 0 ? 0 : rc;
    }
    if (a.name && cli_name_parse(&name, a.name) < 0) {
        rc = 1;
        goto done;
    }
    /* The model's own defaults (its params and system layers) go under the flags: the arguments
     * are read again over them, so that a flag still wins. A model not in the store: offered for
     * pulling on a terminal, else how to get it is said. */
    if (!a.gguf) {
        if (!(s = cli_store_open())) {
            rc = 1;
            goto done;
        }
        /* One handle for the whole run: params, weights and template come through it, so the
         * name is resolved and the manifest read once. */
        if ((rc = store_model_open(&sm, s, &name)) == MS_ENOTFOUND && (rc = cli_pull_offer(s, &name, a.insecure)) == 0)
            rc = store_model_open(&sm, s, &name);
        if (rc == 0)
            rc = model_params_load(&a.mp, sm);
        if (rc < 0) {
            rc = cli_fail();
            goto done;
        }
        if (a.mp) {
            free(a.prompt);
            a.prompt = NULL;
            if ((rc = parse(&a, argc, argv, pos)) != 0) {
                rc = rc < 0 ? 0 : rc;
                goto done;
            }
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
        stdin_prompt = NULL;
    }
    t0 = now();
    if (a.gguf)
        gguf_guard(a.gguf);
    if (a.gguf ? runtime_model_open_gguf(&m, a.gguf, &a.o) < 0 : runtime_model_open(&m, sm, &a.o) < 0)
        rc = cli_fail();
    else if (runtime_weights_tokenizer(&t, runtime_model_weights(m)) < 0)
        rc = cli_fail();
    else
        rc = run_model(&a, m, t, sm, t0);
done:
    runtime_model_close(m);
    store_model_close(sm);
    store_close(s);
    free(a.prompt);
    model_params_free(a.mp);
    MS_FREE_ALL(a.format_file, pos, stdin_prompt);
    return rc;
}
