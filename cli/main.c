/* main.c: global options and dispatch to cmd_<verb>. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "manifest/manifest.h"

const char *cli_home;
const char *cli_verb;

static const struct verb {
    const char *name;
    cli_verb_fn fn;
    const char *help;
} verbs[] = {
#define CLI_ENTRY(verb, help) { #verb, cmd_##verb, help },
    CLI_VERBS(CLI_ENTRY)
#undef CLI_ENTRY
};

static void usage(FILE *f)
{
    fprintf(f, "usage: mstore [--home DIR] <command> [args]\n\n"
               "A content-addressed store for language models, and a runtime that runs them.\n\n"
               "commands:\n");
    for (size_t i = 0; i < sizeof verbs / sizeof verbs[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "%s", verbs[i].name);
        for (char *p = name; *p; p++)
            if (*p == '_')
                *p = '-';
        if (verbs[i].fn)
            fprintf(f, "  %-13s %s\n", name, verbs[i].help);
    }
    fprintf(f, "\noptions:\n"
               "  --home DIR    the store (default: $MSTORE_HOME, else ~/.mstore)\n"
               "  --version     print the version\n\n"
               "Run 'mstore <command> --help' for a command's options.\n");
}

int cli_fail(void)
{
    char safe[8192];

    /* Messages quote names and strings from the files they refuse: escaped like any output. */
    fprintf(stderr, "mstore: %s\n", ms_str_safe(safe, sizeof safe, ms_err_msg()));
    return 1;
}

int cli_usage_error(const char *verb, const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "mstore: %s: ", verb);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n(see 'mstore %s --help')\n", verb);
    return 2;
}

int cli_is_help(const char *arg) { return strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0; }

static store *store_open_with(int (*open_fn)(store **, const char *))
{
    char *db = ms_path_join(cli_home, "index.db");
    int existed = db && ms_is_file(db);
    store *s;

    free(db);
    if (open_fn(&s, cli_home) < 0) {
        cli_fail();
        return NULL;
    }
    /* A mistyped --home or $MSTORE_HOME silently made a new empty store, and the models seemed
     * gone. Import and pull are expected to make one; any other verb says so. */
    if (!existed && cli_verb && strcmp(cli_verb, "import") != 0 && strcmp(cli_verb, "pull") != 0) {
        char safe[4096];
        fprintf(stderr, "mstore: note: there was no store at %s; created an empty one (check --home and $MSTORE_HOME)\n",
                ms_str_safe(safe, sizeof safe, cli_home));
    }
    return s;
}

store *cli_store_open(void) { return store_open_with(store_open); }
static void wait_note(void *ctx, const char *message)
{
    (void)ctx;
    fprintf(stderr, "mstore: %s\n", message);
}

/* rm and gc: a wait for the store's lock was silent, and looked like a hang */
store *cli_store_open_to_free(void)
{
    store *s = store_open_with(store_open_to_free);

    if (s)
        store_lock_wait_notify(s, wait_note, NULL);
    return s;
}

int cli_name_parse(model_name *out, const char *arg)
{
    if (name_parse(out, arg) < 0) {
        cli_fail();
        return -1;
    }
    return 0;
}

int cli_parse_long(long *out, const char *verb, const char *flag, const char *value, long min, long max)
{
    char *end;
    long v;

    if (!value)
        return cli_usage_error(verb, "%s needs a value", flag), -1;
    v = strtol(value, &end, 10);
    if (*value == '\0' || *end != '\0' || v < min || v > max)
        return cli_usage_error(verb, "%s: '%s' is not a whole number from %ld to %ld", flag, value, min, max), -1;
    *out = v;
    return 0;
}

static const cli_opt *opt_find(const cli_opt *opts, const char *arg)
{
    for (; opts && opts->name; opts++)
        if (strcmp(arg, opts->name) == 0 || (opts->alias && strcmp(arg, opts->alias) == 0))
            return opts;
    return NULL;
}

int cli_args_parse(int argc, char **argv, const char *help, const cli_opt *opts, const char **pos, int max_pos,
                   int *n_pos)
{
    const char *verb = argv[0];
    int only_pos = 0, np = 0;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const cli_opt *o;

        if (!only_pos && cli_is_help(a)) {
            fputs(help, stdout);
            return -1;
        }
        if (!only_pos && strcmp(a, "--") == 0) {
            only_pos = 1;
        } else if (!only_pos && (o = opt_find(opts, a))) {
            if (o->kind == CLI_OPT_FLAG) {
                *(int *)o->value = 1;
            } else if (o->kind == CLI_OPT_SELF) {
                *(const char **)o->value = o->name;
            } else if (i + 1 >= argc) {
                return cli_usage_error(verb, "%s needs %s", a, o->needs ? o->needs : "a value");
            } else if (o->kind == CLI_OPT_STRING) {
                *(const char **)o->value = argv[++i];
            } else if (cli_parse_long(o->value, verb, a, argv[++i], o->min, o->max) < 0) {
                return 2;
            }
        } else if (!only_pos && a[0] == '-' && a[1] != '\0') {
            return cli_usage_error(verb, "unknown option '%s'", a);
        } else if (np < max_pos) {
            pos[np++] = a;
        } else {
            return cli_usage_error(verb, "unexpected argument '%s'", a);
        }
    }
    if (n_pos)
        *n_pos = np;
    return 0;
}

int cli_parse_double(double *out, const char *verb, const char *flag, const char *value, double min, double max)
{
    char *end;
    double v;

    if (!value)
        return cli_usage_error(verb, "%s needs a value", flag), -1;
    v = strtod(value, &end);
    if (*value == '\0' || *end != '\0' || !(v >= min && v <= max))
        return cli_usage_error(verb, "%s: '%s' is not a number from %g to %g", flag, value, min, max), -1;
    *out = v;
    return 0;
}

int main(int argc, char **argv)
{
    char *home = NULL;
    const char *flag_home = NULL;
    int i = 1, rc;

    while (i < argc && argv[i][0] == '-') {
        if (strcmp(argv[i], "--home") == 0 && i + 1 < argc) {
            flag_home = argv[i + 1];
            i += 2;
        } else if (strncmp(argv[i], "--home=", 7) == 0) {
            flag_home = argv[i] + 7;
            i++;
        } else if (cli_is_help(argv[i])) {
            usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "--version") == 0) {
            printf("mstore 0.1.0\n");
            return 0;
        } else {
            fprintf(stderr, "mstore: unknown option '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (i >= argc) {
        usage(stderr);
        return 2;
    }
    for (size_t v = 0; v < sizeof verbs / sizeof verbs[0]; v++) {
        char name[32];
        snprintf(name, sizeof name, "%s", verbs[v].name);
        for (char *p = name; *p; p++)
            if (*p == '_')
                *p = '-';
        if (strcmp(name, argv[i]) != 0 || !verbs[v].fn)
            continue;
        home = store_home_default(flag_home);
        if (!home) {
            fprintf(stderr, "mstore: no store: set --home, $MSTORE_HOME or $HOME\n");
            return 1;
        }
        cli_home = home;
        cli_verb = argv[i];
        rc = verbs[v].fn(argc - i, argv + i);
        free(home);
        return rc;
    }
    fprintf(stderr, "mstore: unknown command '%s'\n", argv[i]);
    usage(stderr);
    return 2;
}
