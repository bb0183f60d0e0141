/* rm.c: mstore rm NAME... */
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"

static const char help[] =
    "usage: mstore rm NAME...\n\n"
    "Remove model names. Blobs no other model uses are then removed (as 'mstore gc' does).\n";

int cmd_rm(int argc, char **argv)
{
    size_t n = 0;
    uint64_t bytes = 0;
    model_name *names = NULL;
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
    if (!(names = calloc((size_t)argc, sizeof *names)))
        return ms_err(MS_ENOMEM, "out of memory"), cli_fail();
    for (int i = 1; i < argc; i++)
        if (cli_name_parse(&names[i - 1], argv[i]) < 0) {
            free(names);
            return 1;
        }
    if (!(s = cli_store_open_to_free())) {
        free(names);
        return 1;
    }
    /* Every name or none: a typo among them removes nothing. */
    if ((rc = store_names_remove(s, names, (size_t)argc - 1)) == 0)
        for (int i = 1; i < argc; i++)
            printf("deleted '%s'\n", argv[i]);
    free(names);
    /* As ollama does, rm frees the space; gc waits for imports and pulls in progress. */
    if (rc == 0)
        rc = store_gc(s, 0, NULL, NULL, &n, &bytes);
    store_close(s);
    return rc < 0 ? cli_fail() : 0;
}
