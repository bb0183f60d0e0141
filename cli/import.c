/* import.c: mstore import PATH --name NAME */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "import/import.h"

static const char help[] =
    "usage: mstore import PATH --name NAME [--quantize TYPE [--group-size N]] [--quiet]\n\n"
    "Import a model into the store and print its manifest digest.\n"
    "PATH is a GGUF file or a Hugging Face safetensors directory (config.json,\n"
    "model.safetensors or shards with model.safetensors.index.json, tokenizer files),\n"
    "MLX-quantized directories (config.json \"quantization\") included.\n\n"
    "  --name NAME        [host/][namespace/]model[:tag]; tag defaults to 'latest'\n"
    "  --quantize TYPE    quantize float weights of linear and embedding layers as MLX does:\n"
    "                     int4, int8, nvfp4, mxfp8 (also int2, int3, int5, int6, mxfp4);\n"
    "                     norms, biases and small tensors stay as they are. The error is\n"
    "                     shown by 'mstore show NAME --verbose'\n"
    "  --group-size N     weights per scale for int types: 32, 64 or 128 (default 32 for\n"
    "                     int4, 64 for int8); fixed for nvfp4 (16), mxfp4 and mxfp8 (32)\n"
    "  --quiet            no progress display\n";

int cmd_import(int argc, char **argv)
{
    const char *path = NULL, *name_arg = NULL;
    import_opts o = { 0 };
    ms_digest digest;
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
        } else if (strcmp(argv[i], "--quantize") == 0) {
            if (++i >= argc)
                return cli_usage_error("import", "--quantize needs a type (int4, int8, nvfp4, mxfp8)");
            o.quantize = argv[i];
        } else if (strcmp(argv[i], "--group-size") == 0) {
            long g;
            if (++i >= argc)
                return cli_usage_error("import", "--group-size needs a value");
            if (cli_parse_long(&g, "import", "--group-size", argv[i], 1, 1024) != 0)
                return 2;
            o.group_size = (int)g;
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
    if (o.group_size && !o.quantize)
        return cli_usage_error("import", "--group-size needs --quantize");
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
