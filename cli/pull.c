/* pull.c: mstore pull [options] NAME, mstore pull --from DIR NAME */
#include <signal.h>
#include <unistd.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "registry/registry.h"

static const char help[] =
    "usage: mstore pull [--insecure] [--parallel N] [--quiet] [host/][namespace/]model[:tag][@sha256:HEX]\n"
    "       mstore pull --from DIR NAME\n\n"
    "Download a model from an OCI registry (https://host; $MSTORE_REGISTRY when the name has no\n"
    "host) or from an OCI image layout directory. Every blob is checked against its sha256 before\n"
    "it is stored; blobs already in the store are not downloaded again; an interrupted pull\n"
    "continues where it stopped when run again. By digest (@sha256:HEX) the manifest must hash to\n"
    "it; without a tag such a model is stored under the tag sha256-HEX.\n\n"
    "options:\n"
    "  --insecure      use plain http (loopback and test registries)\n"
    "  --parallel N    downloads at once (default 4)\n"
    "  --quiet         no progress display\n"
    "  --from DIR      read an OCI image layout directory instead of a registry\n\n"
    "credentials, each bound to its host: $MSTORE_REGISTRY_AUTH (user:password) for $MSTORE_REGISTRY's\n"
    "host only; <home>/credentials.json for any host ({\"host:port\": \"user:password\"}, or\n"
    "{\"host:port\": {\"token\": \"...\"}} for a bearer token such as an mstore serve's API key).\n";

int cmd_pull(int argc, char **argv)
{
    registry_opts o;
    registry_pull_report rep;
    model_name name;
    const char *arg = NULL, *from = NULL;
    char shown[600];
    ms_digest digest;
    long n;
    store *s;
    int rc;

    registry_opts_init(&o);
    o.report = &rep;
    n = o.parallel;
    const cli_opt opts[] = {
        { "--insecure", NULL, CLI_OPT_FLAG, &o.insecure, NULL, 0, 0 },
        { "--quiet", "-q", CLI_OPT_FLAG, &o.quiet, NULL, 0, 0 },
        { "--parallel", NULL, CLI_OPT_LONG, &n, NULL, 1, 64 },
        { "--from", NULL, CLI_OPT_STRING, &from, "a directory", 0, 0 },
        { NULL, NULL, 0, NULL, NULL, 0, 0 },
    };
    if ((rc = cli_args_parse(argc, argv, help, opts, &arg, 1, NULL)) != 0)
        return rc < 0 ? 0 : rc;
    o.parallel = (int)n;
    if (!arg)
        return cli_usage_error("pull", "a model name is required");
    if (cli_name_parse(&name, arg) < 0)
        return 1;
    /* A peer that drops the connection must cost a retry, not the process. */
    signal(SIGPIPE, SIG_IGN);
    if (!(s = cli_store_open()))
        return 1;
    rc = from ? registry_layout_pull(s, from, &name, &o, digest) : registry_pull(s, &name, &o, digest);
    store_close(s);
    if (rc < 0)
        return cli_fail();
    name_display(shown, sizeof shown, &name);
    if (!from) {
        printf("downloaded %zu blobs, %" PRIu64 " bytes\n", rep.blobs_downloaded, rep.bytes_downloaded);
        if (rep.split_reused)
            printf("the GGUF was split by an earlier pull: its %zu tensor blobs are stored, not downloaded again\n",
                   rep.tensor_blobs);
        else if (rep.split)
            printf("split the GGUF into %zu tensor blobs: %zu new (%" PRIu64 " bytes), %zu already stored\n",
                   rep.tensor_blobs, rep.tensor_blobs - rep.tensor_blobs_shared, rep.tensor_bytes_new,
                   rep.tensor_blobs_shared);
    }
    printf("pulled %s %s\n", shown, digest);
    return 0;
}

int cli_pull_offer(store *s, const model_name *name, int insecure)
{
    char shown[600], host[NAME_HOST_MAX], answer[16] = "";
    ms_digest digest;
    registry_opts o;

    name_display(shown, sizeof shown, name);
    if (registry_host(host, name) < 0)
        return ms_err(MS_ENOTFOUND, "model '%s' not found", shown);
    if (!isatty(STDIN_FILENO) || !isatty(STDERR_FILENO))
        return ms_err(MS_ENOTFOUND, "model '%s' not found; pull it from %s with: mstore pull %s", shown, host, shown);
    fprintf(stderr, "model '%s' is not in the store. Pull it from %s? [y/N] ", shown, host);
    fflush(stderr);
    if (!fgets(answer, sizeof answer, stdin) || (answer[0] != 'y' && answer[0] != 'Y'))
        return ms_err(MS_ENOTFOUND, "model '%s' not found (not pulled)", shown);
    registry_opts_init(&o);
    o.insecure = insecure;
    signal(SIGPIPE, SIG_IGN);
    return registry_pull(s, name, &o, digest);
}
