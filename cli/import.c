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

    long group_size = 0;
    const cli_opt opts[] = {
        { "--name", "-n", CLI_OPT_STRING, &name_arg, "a value", 0, 0 },
        { "--quantize", NULL, CLI_OPT_STRING, &o.quantize, "a type (int4, int8, nvfp4, mxfp8)", 0, 0 },
        { "--group-size", NULL, CLI_OPT_LONG, &group_size, NULL, 1, 1024 },
        { "--quiet", "-q", CLI_OPT_FLAG, &o.quiet, NULL, 0, 0 },
        { NULL, NULL, 0, NULL, NULL, 0, 0 },
    };

    if ((rc = cli_args_parse(argc, argv, help, opts, &path, 1, NULL)) != 0)
        return rc < 0 ? 0 : rc;
    o.group_size = (int)group_size;
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
