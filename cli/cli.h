/* cli.h: the mstore command's verbs. One file per verb (cli/<verb>.c) holds cmd_<verb> and its
 * --help; it parses arguments, calls src/ and prints. No store logic lives in cli/. */
#ifndef MSTORE_CLI_H
#define MSTORE_CLI_H

#include <stdio.h>

#include "store/store.h"

/* Every verb gets argv with argv[0] = the verb and the global options already removed.
 * Returns the process exit status: 0 ok, 1 failure, 2 usage. */
typedef int (*cli_verb_fn)(int argc, char **argv);

/* Set by main from --home / $MSTORE_HOME / ~/.mstore. */
extern const char *cli_home;
/* The verb being run ("list", "import"...), set by main. */
extern const char *cli_verb;

/* Print "mstore: <ms_err_msg()>" to stderr and return 1. */
int cli_fail(void);
/* Print "mstore: <verb>: <message>" plus a hint to run --help, return 2. */
int cli_usage_error(const char *verb, const char *fmt, ...) MS_PRINTF(2, 3);
/* 1 when argv[i] is -h or --help. */
int cli_is_help(const char *arg);
/* Open the store at cli_home, printing the error on failure (then returns NULL). */
store *cli_store_open(void);
/* The same for rm and gc, which must work on a full disk (store_open_to_free). */
store *cli_store_open_to_free(void);
/* Parse a model name argument, printing the error on failure. */
int cli_name_parse(model_name *out, const char *arg);
/* Parse a non-negative integer flag value; prints a usage error naming the flag. */
int cli_parse_long(long *out, const char *verb, const char *flag, const char *value, long min, long max);
int cli_parse_double(double *out, const char *verb, const char *flag, const char *value, double min, double max);

/* A verb's options, one row each, in the manner of git's parse-options: the spelling, what it
 * takes and where its value goes. A table ends with a row whose name is NULL. */
typedef enum {
    CLI_OPT_FLAG,     /* int *: set to 1 */
    CLI_OPT_STRING,   /* const char **: the next argument */
    CLI_OPT_LONG,     /* long *: the next argument, a whole number in [min, max] */
    CLI_OPT_SELF      /* const char **: the option's own name (one of several that pick a thing) */
} cli_opt_kind;
typedef struct cli_opt {
    const char *name;    /* "--gguf" */
    const char *alias;   /* "-n", or NULL */
    cli_opt_kind kind;
    void *value;
    const char *needs;   /* STRING: what the error says it needs ("a file name") */
    long min, max;       /* LONG */
} cli_opt;
/* Parse argv[1..] (argv[0] is the verb) against `opts`. -h / --help prints `help`; other
 * arguments are positionals, at most max_pos of them into pos (*n_pos counts them); "--" makes
 * every later argument a positional. Returns 0 to go on, -1 when help was printed (the verb
 * exits 0), 2 after printing a usage error (unknown option, missing value, extra argument). */
int cli_args_parse(int argc, char **argv, const char *help, const cli_opt *opts, const char **pos, int max_pos,
                   int *n_pos);

/* `run` of a model not in the store: on a terminal, ask and pull it (0 when pulled); otherwise
 * MS_ENOTFOUND saying how to pull it. insecure: plain http (loopback registries). */
int cli_pull_offer(store *s, const model_name *name, int insecure);

#define CLI_VERBS(X)                                                                              \
    X(import, "import a GGUF file or a safetensors / MLX directory")                             \
    X(create, "create a model from an ollama Modelfile")                                         \
    X(list, "list the models in the store")                                                      \
    X(show, "show a model's configuration and tensors")                                          \
    X(cp, "copy a model to a new name")                                                          \
    X(rm, "remove a model name")                                                                 \
    X(verify, "re-hash blobs and report any that are damaged")                                   \
    X(gc, "remove blobs that no model references")                                               \
    X(blob, "put or cat raw blobs")                                                              \
    X(export, "write a model back out as a GGUF file")                                           \
    X(pull, "pull a model from an OCI registry or an OCI layout directory")                      \
    X(push, "push a model to an OCI registry or an OCI layout directory")                        \
    X(run, "run a model on a prompt")                                                            \
    X(serve, "serve the ollama, OpenAI and OCI registry APIs over HTTP")                         \
    X(tokenize, "print the token ids of a text")                                                 \
    X(embed, "print the embeddings of texts as JSON")                                           \
    X(bench, "measure prefill and decode speed")                                                 \
    X(devices, "list the devices models can run on")                                             \
    X(bench_import, "measure import speed of a file")

#define CLI_DECLARE(verb, help) int cmd_##verb(int argc, char **argv) __attribute__((weak));
CLI_VERBS(CLI_DECLARE)
#undef CLI_DECLARE

#endif
