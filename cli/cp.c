/* cp.c: mstore cp SRC DST */
#include <stdio.h>

#include "cli.h"

static const char help[] = "usage: mstore cp SRC DST\n\nGive the model SRC a second name DST (no bytes are copied).\n";

int cmd_cp(int argc, char **argv)
{
    const char *pos[2];
    model_name src, dst;
    store *s;
    int rc, n;

    if ((rc = cli_args_parse(argc, argv, help, NULL, pos, 2, &n)) != 0)
        return rc < 0 ? 0 : rc;
    if (n != 2)
        return cli_usage_error("cp", "needs SRC and DST");
    if (cli_name_parse(&src, pos[0]) < 0 || cli_name_parse(&dst, pos[1]) < 0)
        return 1;
    if (!(s = cli_store_open()))
        return 1;
    rc = store_name_copy(s, &src, &dst);
    store_close(s);
    if (rc < 0)
        return cli_fail();
    printf("copied '%s' to '%s'\n", pos[0], pos[1]);
    return 0;
}
