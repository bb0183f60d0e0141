/* blob.c: mstore blob put FILE | mstore blob cat DIGEST */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "blob/blob.h"
#include "cli.h"

static const char help[] =
    "usage: mstore blob put FILE\n"
    "       mstore blob cat DIGEST\n\n"
    "put stores FILE as a blob and prints its digest (sha256:<hex>); cat writes a blob's\n"
    "bytes to standard output. Blobs put by hand are not referenced by any model, so\n"
    "'mstore gc' removes them.\n";

int cmd_blob(int argc, char **argv)
{
    ms_digest digest;
    blob_view v;
    store *s;
    int rc;

    for (int i = 1; i < argc; i++)
        if (cli_is_help(argv[i])) {
            fputs(help, stdout);
            return 0;
        }
    if (argc != 3 || (strcmp(argv[1], "put") != 0 && strcmp(argv[1], "cat") != 0))
        return cli_usage_error("blob", "needs 'put FILE' or 'cat DIGEST'");
    if (!(s = cli_store_open()))
        return 1;
    if (strcmp(argv[1], "put") == 0) {
        rc = blob_put_file(digest, store_home(s), argv[2]);
        if (rc == 0)
            printf("%s\n", digest);
    } else if ((rc = blob_open(&v, store_home(s), argv[2])) == 0) {
        if (v.size && ms_write_all(STDOUT_FILENO, v.data, v.size) < 0)
            rc = ms_err_os("standard output: write");
        blob_close(&v);
    }
    store_close(s);
    return rc < 0 ? cli_fail() : 0;
}
