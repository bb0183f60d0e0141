/* jinja_render: render a chat template with mstore's Jinja interpreter, for the tests that
 * compare it with other engines (tests/e2e/t6040). Usage: jinja_render TEMPLATE CONTEXT.json;
 * the context is a JSON object whose members are the template's variables. Prints the render;
 * on an error prints "error: <message>" to stderr and exits 1. */
#include <stdio.h>
#include <stdlib.h>

#include "chat/chat.h"
#include "util/util.h"

int main(int argc, char **argv)
{
    char *tmpl = NULL, *ctx = NULL, *out = NULL;
    size_t tlen, clen, olen;
    chat_jinja *j = NULL;
    int rc = 1;

    if (argc != 3) {
        fprintf(stderr, "usage: jinja_render TEMPLATE CONTEXT.json\n");
        return 2;
    }
    if (ms_file_read(&tmpl, &tlen, argv[1], CHAT_GOTMPL_MAX_TEXT) < 0 ||
        ms_file_read(&ctx, &clen, argv[2], 64u << 20) < 0 || chat_jinja_parse(&j, tmpl, tlen) < 0 ||
        chat_jinja_render_json(&out, &olen, j, ctx) < 0)
        fprintf(stderr, "error: %s\n", ms_err_msg());
    else {
        fwrite(out, 1, olen, stdout);
        rc = 0;
    }
    free(out);
    chat_jinja_free(j);
    free(ctx);
    free(tmpl);
    return rc;
}
