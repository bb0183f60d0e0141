/* export.c: mstore export NAME --gguf OUT */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "export/export.h"

static const char help[] =
    "usage: mstore export NAME --gguf OUT\n\n"
    "Write the model NAME as a GGUF file OUT. A model imported from a GGUF file comes back\n"
    "byte for byte (same sha256); the command says so.\n";

int cmd_export(int argc, char **argv)
{
    const char *arg = NULL, *out = NULL;
    export_result res;
    model_name name;
    char b[32];
    store *s;
    int rc;

    const cli_opt opts[] = {
        { "--gguf", NULL, CLI_OPT_STRING, &out, "a file name", 0, 0 },
        { NULL, NULL, 0, NULL, NULL, 0, 0 },
    };

    if ((rc = cli_args_parse(argc, argv, help, opts, &arg, 1, NULL)) != 0)
        return rc < 0 ? 0 : rc;
    if (!arg || !out)
        return cli_usage_error("export", "needs NAME and --gguf OUT");
    if (cli_name_parse(&name, arg) < 0 || !(s = cli_store_open()))
        return 1;
    rc = export_gguf(s, &name, out, &res);
    store_close(s);
    if (rc < 0)
        return cli_fail();
    printf("wrote %s (%s, %s)%s\n", out, ms_fmt_bytes(b, sizeof b, res.nbytes), res.digest,
           res.identical ? ": identical to the imported file" : "");
    return 0;
}
