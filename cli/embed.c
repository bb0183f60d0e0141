/* embed.c: mstore embed NAME [TEXT... | -] [--no-truncate] [--dimensions N] */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "runtime/runtime.h"
#include "session/session.h"

static const char help[] =
    "usage: mstore embed NAME [TEXT...] [--no-truncate] [--dimensions N]\n\n"
    "Print the embeddings of each TEXT as one JSON object, as ollama's /api/embed answers:\n"
    "  {\"model\": NAME, \"embeddings\": [[...], ...], \"prompt_eval_count\": N}\n"
    "one L2-normalized vector per text, in order; prompt_eval_count is the tokens embedded.\n"
    "With no TEXT, or TEXT \"-\", the texts are the lines of standard input (one input a line).\n"
    "The model must be an embedding model (BERT-family encoders, or a model that names a pooling).\n\n"
    "  --truncate        cut an input longer than the context to fit, keeping its final [SEP] /\n"
    "                    EOS (the default)\n"
    "  --no-truncate     refuse such an input instead, giving both sizes\n"
    "  --dimensions N    keep the first N components of each vector and renormalize them\n"
    "  --ctx N           the context to load the model with (default: the model's, at most 4096)\n"
    "  --threads N       CPU threads (default: all cores)\n"
    "  --device NAME     cpu, vulkan or auto (the default)\n";

#define EMBED_STDIN_MAX (64u << 20) /* bytes read from standard input: SESSION_EMBED_MAX_BYTES */

/* The lines of standard input as inputs; *buf_out holds their bytes (each line ended by NUL). */
static int stdin_inputs(session_embed_input **out, size_t *n_out, char **buf_out)
{
    size_t len = 0, n = 0;
    char *buf = NULL;
    session_embed_input *in = NULL;

    *out = NULL, *n_out = 0, *buf_out = NULL;
    if (ms_fd_read_all(&buf, &len, STDIN_FILENO, EMBED_STDIN_MAX) < 0)
        return ms_err_ctx("standard input");
    for (size_t i = 0; i < len; i++)
        n += buf[i] == '\n' || i + 1 == len;
    if (n > SESSION_EMBED_MAX_INPUTS) {
        free(buf);
        return ms_err(MS_EINVALID, "standard input: %zu lines, at most %d inputs", n, SESSION_EMBED_MAX_INPUTS);
    }
    if (n && !(in = calloc(n, sizeof *in))) {
        free(buf);
        return ms_err(MS_ENOMEM, "out of memory");
    }
    n = 0;
    for (size_t i = 0, start = 0; i < len; i++)
        if (buf[i] == '\n' || i + 1 == len) {
            size_t end = buf[i] == '\n' ? i : i + 1;
            in[n++] = (session_embed_input){.text = buf + start, .len = end - start};
            start = i + 1;
        }
    *out = in, *n_out = n, *buf_out = buf;
    return 0;
}

static int print_result(const char *model, const float *v, size_t n, int dim, size_t n_tokens)
{
    json_t *list = json_array(), *o;
    char *s;
    int rc = 0;

    for (size_t i = 0; list && i < n; i++) {
        json_t *row = json_array();
        for (int k = 0; row && k < dim; k++)
            json_array_append_new(row, json_real(v[i * (size_t)dim + k]));
        json_array_append_new(list, row);
    }
    o = json_pack("{s:s,s:o,s:I}", "model", model, "embeddings", list, "prompt_eval_count", (json_int_t)n_tokens);
    /* the server's own dump (http.c), so that one vector prints the same on every surface */
    s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!s)
        return ms_err(MS_ENOMEM, "out of memory"), cli_fail();
    if (printf("%s\n", s) < 0 || fflush(stdout) != 0) {
        ms_err_os("stdout");
        rc = cli_fail();
    }
    free(s);
    return rc;
}

int cmd_embed(int argc, char **argv)
{
    int truncate = 0, no_truncate = 0, rc = 1;
    long dims = 0, ctx = 0, threads = 0;
    const char *device = NULL, **pos = calloc((size_t)argc + 1, sizeof *pos);
    const cli_opt opts[] = {
        {"--truncate", NULL, CLI_OPT_FLAG, &truncate, NULL, 0, 0},
        {"--no-truncate", NULL, CLI_OPT_FLAG, &no_truncate, NULL, 0, 0},
        {"--dimensions", NULL, CLI_OPT_LONG, &dims, NULL, 1, 1 << 20},
        {"--ctx", NULL, CLI_OPT_LONG, &ctx, NULL, 1, RUNTIME_CTX_MAX},
        {"--threads", NULL, CLI_OPT_LONG, &threads, NULL, 1, 512},
        {"--device", NULL, CLI_OPT_STRING, &device, "a device name", 0, 0},
        {NULL, NULL, 0, NULL, NULL, 0, 0},
    };
    runtime_opts ro = {0};
    session_embed_opts so = {0};
    session_embed_input *in = NULL;
    size_t n = 0, n_tokens = 0;
    char *buf = NULL;
    float *v = NULL;
    int n_pos = 0, dim = 0;
    model_name name;
    store *s = NULL;
    store_model *sm = NULL;
    runtime_model *m = NULL;
    const tokenizer *t = NULL;
    session *S = NULL;

    if (!pos)
        return ms_err(MS_ENOMEM, "out of memory"), cli_fail();
    if ((rc = cli_args_parse(argc, argv, help, opts, pos, argc, &n_pos)) != 0) {
        free(pos);
        return rc < 0 ? 0 : rc;
    }
    rc = 1;
    if (n_pos == 0) {
        rc = cli_usage_error("embed", "needs NAME");
        goto done;
    }
    if (truncate && no_truncate) {
        rc = cli_usage_error("embed", "--truncate and --no-truncate exclude each other");
        goto done;
    }
    if (n_pos == 1 || (n_pos == 2 && strcmp(pos[1], "-") == 0)) {
        if (stdin_inputs(&in, &n, &buf) < 0) {
            rc = cli_fail();
            goto done;
        }
    } else if (!(in = calloc((size_t)n_pos, sizeof *in))) {
        rc = ms_err(MS_ENOMEM, "out of memory"), cli_fail();
        goto done;
    } else {
        for (int i = 1; i < n_pos; i++)
            in[n++] = (session_embed_input){.text = pos[i], .len = strlen(pos[i])};
    }
    so = (session_embed_opts){.truncate = !no_truncate, .dimensions = (int)dims, .model = pos[0]};
    ro.n_ctx = (int)ctx, ro.n_threads = (int)threads, ro.device = device;
    if (cli_name_parse(&name, pos[0]) < 0 || !(s = cli_store_open()))
        goto done;
    if (store_model_open(&sm, s, &name) < 0 || runtime_model_open(&m, sm, &ro) < 0 ||
        runtime_weights_tokenizer(&t, runtime_model_weights(m)) < 0 || session_new(&S, m, t, NULL, 0) < 0 ||
        session_embed(S, &v, &dim, &n_tokens, in, n, &so) < 0) {
        rc = cli_fail();
        goto done;
    }
    rc = print_result(pos[0], v, n, dim, n_tokens);
done:
    free(v);
    session_free(S);
    runtime_model_close(m);
    store_model_close(sm);
    store_close(s);
    MS_FREE_ALL(in, buf, pos);
    return rc;
}
