/* list.c: mstore list */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

static const char help[] = "usage: mstore list\n\nList the models in the store: name, short id, size, modified.\n";

static void fmt_age(char *buf, size_t len, int64_t t)
{
    int64_t d = (int64_t)time(NULL) - t;

    if (d < 60)
        snprintf(buf, len, "%s", "just now");
    else if (d < 3600)
        snprintf(buf, len, "%lld minute%s ago", (long long)(d / 60), d / 60 == 1 ? "" : "s");
    else if (d < 86400)
        snprintf(buf, len, "%lld hour%s ago", (long long)(d / 3600), d / 3600 == 1 ? "" : "s");
    else
        snprintf(buf, len, "%lld day%s ago", (long long)(d / 86400), d / 86400 == 1 ? "" : "s");
}

int cmd_list(int argc, char **argv)
{
    store_entry *m = NULL;
    size_t n = 0;
    store *s;
    int rc;

    if ((rc = cli_args_parse(argc, argv, help, NULL, NULL, 0, NULL)) != 0)
        return rc < 0 ? 0 : rc;
    if (!(s = cli_store_open()))
        return 1;
    rc = store_list(s, &m, &n);
    store_close(s);
    if (rc < 0)
        return cli_fail();
    printf("%-40s %-12s %-10s %s\n", "NAME", "ID", "SIZE", "MODIFIED");
    for (size_t i = 0; i < n; i++) {
        char name[600], size[32], age[64];
        name_display(name, sizeof name, &m[i].name);
        fmt_age(age, sizeof age, m[i].modified_at);
        printf("%-40s %-12.12s %-10s %s\n", name, blob_digest_hex(m[i].digest), ms_fmt_bytes(size, sizeof size, m[i].size), age);
    }
    free(m);
    return 0;
}
