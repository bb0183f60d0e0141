/* blob.c: mstore blob put FILE | mstore blob cat DIGEST */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

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
        store_txn *t = NULL;
        /* Through a transaction, as every writer: the shared lock keeps gc from removing the
         * blob while it lands, and the flush makes it durable before its name exists. */
        if ((rc = store_txn_begin(&t, s)) == 0 && (rc = store_txn_blob_put_file(t, digest, NULL, argv[2])) == 0 &&
            (rc = store_txn_flush(t)) == 0)
            printf("%s\n", digest);
        store_txn_abort(t);
    } else if ((rc = store_blob_open(&v, s, argv[2])) == 0) {
        if (v.size && ms_write_all(STDOUT_FILENO, v.data, v.size) < 0)
            rc = ms_err_os("standard output: write");
        blob_close(&v);
    }
    store_close(s);
    return rc < 0 ? cli_fail() : 0;
}
