/* create.c: mstore create NAME -f Modelfile */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "modelfile/modelfile.h"

static const char help[] = "usage: mstore create NAME [-f Modelfile] [--quiet]\n\n"
                           "Create model NAME from an ollama Modelfile and print its manifest digest. The new model\n"
                           "shares every weight blob with its base; only its own layers are written.\n\n"
                           "  -f, --file FILE   the Modelfile (default: ./Modelfile)\n"
                           "  --quiet           no import progress\n\n"
                           "Instructions: FROM (a model in the store, a GGUF file or a safetensors directory; paths\n"
                           "relative to the Modelfile), PARAMETER name value (temperature, top_k, top_p, min_p,\n"
                           "repeat_penalty, repeat_last_n, frequency_penalty, presence_penalty, seed, num_predict,\n"
                           "num_ctx, stop), TEMPLATE (an ollama Go template), SYSTEM, LICENSE, MESSAGE role text.\n"
                           "ADAPTER is not supported yet.\n";

int cmd_create(int argc, char **argv)
{
    const char *file = "Modelfile", *name_arg = NULL;
    ms_digest digest;
    model_name name;
    int quiet = 0, rc;
    store *s;

    const cli_opt opts[] = {
        { "--file", "-f", CLI_OPT_STRING, &file, "a file", 0, 0 },
        { "--quiet", "-q", CLI_OPT_FLAG, &quiet, NULL, 0, 0 },
        { NULL, NULL, 0, NULL, NULL, 0, 0 },
    };
    if ((rc = cli_args_parse(argc, argv, help, opts, &name_arg, 1, NULL)) != 0)
        return rc < 0 ? 0 : rc;
    if (!name_arg)
        return cli_usage_error("create", "needs NAME");
    if (cli_name_parse(&name, name_arg) < 0)
        return 1;
    if (!(s = cli_store_open()))
        return 1;
    rc = modelfile_create(s, &name, file, quiet, digest);
    store_close(s);
    if (rc < 0)
        return cli_fail();
    printf("%s\n", digest);
    return 0;
}
