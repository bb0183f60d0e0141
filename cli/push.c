/* push.c: mstore push [options] NAME [DEST], mstore push NAME --to DIR */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "registry/registry.h"

static const char help[] =
    "usage: mstore push [--insecure] [--format oci|docker|dmr|modelpack] [--quiet] NAME [DEST]\n"
    "       mstore push [--format oci|docker|dmr|modelpack] NAME --to DIR\n\n"
    "Upload a stored model to an OCI registry, under DEST when given ([host/][namespace/]model[:tag];\n"
    "$MSTORE_REGISTRY when the name has no host), or write it into an OCI image layout directory.\n"
    "Blobs the registry already has are skipped.\n\n"
    "options:\n"
    "  --insecure      use plain http (loopback and test registries)\n"
    "  --format F      default: the manifest as it was pulled for an ollama, DMR or ModelPack model\n"
    "                  (it goes back as it came), else the store's own. oci: the store's own OCI\n"
    "                  manifest (tensor blobs), even for a model pulled in another form. docker:\n"
    "                  Docker v2 manifest and config media types, for ollama-style registries.\n"
    "                  dmr: Docker Model Runner's artifact (config v0.1, the GGUF as export writes\n"
    "                  it, license and Jinja chat template layers). modelpack: CNCF ModelPack (the\n"
    "                  GGUF as model.gguf in an uncompressed tar layer, mountable as an image volume)\n"
    "  --quiet         no progress display\n"
    "  --to DIR        write an OCI image layout directory instead of pushing to a registry\n\n"
    "credentials: as for mstore pull (see mstore pull --help), each bound to its registry host.\n";

int cmd_push(int argc, char **argv)
{
    registry_opts o;
    model_name name, dest;
    const char *args[2] = { NULL, NULL }, *to = NULL;
    char shown[600];
    ms_digest digest;
    int n_args = 0, rc;
    store *s;

    registry_opts_init(&o);
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            fputs(help, stdout);
            return 0;
        } else if (!strcmp(argv[i], "--insecure")) {
            o.insecure = 1;
        } else if (!strcmp(argv[i], "--quiet") || !strcmp(argv[i], "-q")) {
            o.quiet = 1;
        } else if (!strcmp(argv[i], "--format")) {
            const char *f = i + 1 < argc ? argv[++i] : "";
            o.docker_format = !strcmp(f, "docker");
            o.dmr_format = !strcmp(f, "dmr");
            o.modelpack_format = !strcmp(f, "modelpack");
            o.store_form = !strcmp(f, "oci");
            if (!o.docker_format && !o.dmr_format && !o.modelpack_format && strcmp(f, "oci") != 0)
                return cli_usage_error("push", "--format: '%s' is not oci, docker, dmr or modelpack", f);
        } else if (!strcmp(argv[i], "--to")) {
            if (i + 1 >= argc)
                return cli_usage_error("push", "--to needs a directory");
            to = argv[++i];
        } else if (argv[i][0] == '-') {
            return cli_usage_error("push", "unknown option '%s'", argv[i]);
        } else if (n_args < 2) {
            args[n_args++] = argv[i];
        } else {
            return cli_usage_error("push", "unexpected argument '%s'", argv[i]);
        }
    }
    if (!args[0])
        return cli_usage_error("push", "a model name is required");
    if (to && args[1])
        return cli_usage_error("push", "give either DEST or --to DIR, not both");
    if (cli_name_parse(&name, args[0]) < 0 || (args[1] && cli_name_parse(&dest, args[1]) < 0))
        return 1;
    signal(SIGPIPE, SIG_IGN);
    if (!(s = cli_store_open()))
        return 1;
    rc = to ? registry_layout_push(s, &name, to, &o, digest)
            : registry_push(s, &name, args[1] ? &dest : NULL, &o, digest);
    store_close(s);
    if (rc < 0)
        return cli_fail();
    name_display(shown, sizeof shown, args[1] ? &dest : &name);
    printf("pushed %s %s\n", to ? args[0] : shown, digest);
    return 0;
}
