/* rm.c: mstore rm NAME... */
#include <stdio.h>

#include "cli.h"

static const char help[] =
    "usage: mstore rm NAME...\n\n"
    "Remove model names. Blobs no other model uses are then removed (as 'mstore gc' does).\n";

int cmd_rm(int argc, char **argv)
{
    size_t n = 0;
    uint64_t bytes = 0;
    store *s;
    int rc = 0;

    for (int i = 1; i < argc; i++)
        if (cli_is_help(argv[i])) {
            fputs(help, stdout);
            return 0;
        } else if (argv[i][0] == '-') {
            return cli_usage_error("rm", "unknown option '%s'", argv[i]);
        }
    if (argc < 2)
        return cli_usage_error("rm", "needs a NAME");
    for (int i = 1; i < argc; i++) {
        model_name name;
        if (cli_name_parse(&name, argv[i]) < 0)
            return 1;
    }
    if (!(s = cli_store_open()))
        return 1;
    for (int i = 1; i < argc && rc == 0; i++) {
        model_name name;
        name_parse(&name, argv[i]);
        if ((rc = store_name_remove(s, &name)) == 0)
            printf("deleted '%s'\n", argv[i]);
    }
    /* As ollama does, rm frees the space; gc waits for imports and pulls in progress. */
    if (rc == 0)
        rc = store_gc(s, 0, NULL, NULL, &n, &bytes);
    store_close(s);
    return rc < 0 ? cli_fail() : 0;
}
