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

    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            fputs(help, stdout);
            return 0;
        } else if (!strcmp(argv[i], "-f") || !strcmp(argv[i], "--file")) {
            if (++i >= argc)
                return cli_usage_error("create", "%s needs a file", argv[i - 1]);
            file = argv[i];
        } else if (!strcmp(argv[i], "--quiet") || !strcmp(argv[i], "-q")) {
            quiet = 1;
        } else if (argv[i][0] == '-') {
            return cli_usage_error("create", "unknown option '%s'", argv[i]);
        } else if (!name_arg) {
            name_arg = argv[i];
        } else {
            return cli_usage_error("create", "unexpected argument '%s'", argv[i]);
        }
    }
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
