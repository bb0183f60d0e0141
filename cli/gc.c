/* gc.c: mstore gc [--dry-run] */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const char help[] =
    "usage: mstore gc [--dry-run] [--verbose]\n\n"
    "Remove blobs that no model references, and leftovers of interrupted writes.\n"
    "Waits for imports and pulls in progress; never removes a blob being written.\n\n"
    "  --dry-run   only list what would be removed\n"
    "  --verbose   print each blob removed\n";

static void each(void *ctx, const char *digest, uint64_t size)
{
    char b[32];
    printf("%s %s %s\n", *(int *)ctx ? "would remove" : "removed", digest, ms_fmt_bytes(b, sizeof b, size));
}

int cmd_gc(int argc, char **argv)
{
    int dry = 0, verbose = 0, rc;
    uint64_t bytes = 0;
    size_t n = 0;
    char b[32];
    store *s;

    const cli_opt opts[] = {
        { "--dry-run", "-n", CLI_OPT_FLAG, &dry, NULL, 0, 0 },
        { "--verbose", "-v", CLI_OPT_FLAG, &verbose, NULL, 0, 0 },
        { NULL, NULL, 0, NULL, NULL, 0, 0 },
    };

    if ((rc = cli_args_parse(argc, argv, help, opts, NULL, 0, NULL)) != 0)
        return rc < 0 ? 0 : rc;
    if (!(s = cli_store_open_to_free()))
        return 1;
    rc = store_gc(s, dry, dry || verbose ? each : NULL, &dry, &n, &bytes);
    store_close(s);
    if (rc < 0)
        return cli_fail();
    printf("%s %zu blob%s, %s\n", dry ? "would remove" : "removed", n, n == 1 ? "" : "s",
           ms_fmt_bytes(b, sizeof b, bytes));
    return 0;
}
