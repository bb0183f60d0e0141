/* verify.c: mstore verify [NAME] */
#include <stdio.h>

#include "cli.h"

static const char help[] =
    "usage: mstore verify [NAME]\n\n"
    "Re-hash the blobs of NAME (every blob in the store when no name is given).\n"
    "Prints each damaged or missing blob and exits 1 when any fails.\n";

static void bad(void *ctx, const char *digest, const char *message)
{
    char safe[8192];

    (void)ctx;
    fprintf(stderr, "mstore: verify: %s: %s\n", digest, ms_str_safe(safe, sizeof safe, message));
}

int cmd_verify(int argc, char **argv)
{
    model_name name;
    const char *arg = NULL;
    size_t n = 0;
    store *s;
    int rc;

    if ((rc = cli_args_parse(argc, argv, help, NULL, &arg, 1, NULL)) != 0)
        return rc < 0 ? 0 : rc;
    if (arg && cli_name_parse(&name, arg) < 0)
        return 1;
    if (!(s = cli_store_open()))
        return 1;
    rc = store_verify(s, arg ? &name : NULL, bad, NULL, &n);
    store_close(s);
    if (rc == MS_EMISMATCH) {
        fprintf(stderr, "mstore: verify: %s\n", ms_err_msg());
        return 1;
    }
    if (rc < 0)
        return cli_fail();
    printf("verified %zu blob%s: all ok\n", n, n == 1 ? "" : "s");
    return 0;
}
