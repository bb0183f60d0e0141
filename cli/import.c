/* import.c: mstore import PATH --name NAME */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "import/import.h"

static const char help[] =
    "usage: mstore import PATH --name NAME [--quiet]\n\n"
    "Import a model into the store and print its manifest digest.\n"
    "PATH is a GGUF file or a Hugging Face safetensors directory (config.json,\n"
    "model.safetensors or shards with model.safetensors.index.json, tokenizer files).\n\n"
    "  --name NAME   [host/][namespace/]model[:tag]; tag defaults to 'latest'\n"
    "  --quiet       no progress display\n";

int cmd_import(int argc, char **argv)
{
    const char *path = NULL, *name_arg = NULL;
    import_opts o = { 0 };
    char digest[72];
    model_name name;
    store *s;
    int rc;

    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            fputs(help, stdout);
            return 0;
        } else if (strcmp(argv[i], "--name") == 0 || strcmp(argv[i], "-n") == 0) {
            if (++i >= argc)
                return cli_usage_error("import", "--name needs a value");
            name_arg = argv[i];
        } else if (strcmp(argv[i], "--quiet") == 0 || strcmp(argv[i], "-q") == 0) {
            o.quiet = 1;
        } else if (argv[i][0] == '-') {
            return cli_usage_error("import", "unknown option '%s'", argv[i]);
        } else if (!path) {
            path = argv[i];
        } else {
            return cli_usage_error("import", "unexpected argument '%s'", argv[i]);
        }
    }
    if (!path || !name_arg)
        return cli_usage_error("import", "needs PATH and --name NAME");
    if (cli_name_parse(&name, name_arg) < 0)
        return 1;
    if (!(s = cli_store_open()))
        return 1;
    rc = import_path(s, path, &name, &o, digest);
    store_close(s);
    if (rc < 0)
        return cli_fail();
    printf("%s\n", digest);
    return 0;
}
