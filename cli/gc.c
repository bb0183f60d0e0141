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

    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            fputs(help, stdout);
            return 0;
        } else if (strcmp(argv[i], "--dry-run") == 0 || strcmp(argv[i], "-n") == 0) {
            dry = 1;
        } else if (strcmp(argv[i], "--verbose") == 0 || strcmp(argv[i], "-v") == 0) {
            verbose = 1;
        } else {
            return cli_usage_error("gc", "unexpected argument '%s'", argv[i]);
        }
    }
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
