/* cp.c: mstore cp SRC DST */
#include <stdio.h>

#include "cli.h"

static const char help[] = "usage: mstore cp SRC DST\n\nGive the model SRC a second name DST (no bytes are copied).\n";

int cmd_cp(int argc, char **argv)
{
    model_name src, dst;
    store *s;
    int rc;

    for (int i = 1; i < argc; i++)
        if (cli_is_help(argv[i])) {
            fputs(help, stdout);
            return 0;
        }
    if (argc != 3)
        return cli_usage_error("cp", "needs SRC and DST");
    if (cli_name_parse(&src, argv[1]) < 0 || cli_name_parse(&dst, argv[2]) < 0)
        return 1;
    if (!(s = cli_store_open()))
        return 1;
    rc = store_name_copy(s, &src, &dst);
    store_close(s);
    if (rc < 0)
        return cli_fail();
    printf("copied '%s' to '%s'\n", argv[1], argv[2]);
    return 0;
}
