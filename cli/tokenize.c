/* tokenize.c: mstore tokenize (NAME | --gguf FILE) (TEXT | --batch) [--no-special] [--parse-special] [--verbose] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "runtime/runtime.h"
#include "tokenizer/tokenizer.h"

static const char help[] =
    "usage: mstore tokenize NAME TEXT [--no-special] [--parse-special]\n"
    "       mstore tokenize --gguf FILE TEXT [...]\n"
    "       mstore tokenize (NAME | --gguf FILE) --batch [...] < TEXTS\n\n"
    "Print the token ids of TEXT on one line, separated by spaces, as the model's tokenizer\n"
    "(from its GGUF metadata, or its tokenizer.json when it came from a Hugging Face or MLX\n"
    "directory) encodes it. BOS is included when the vocab adds it (WordPiece: [CLS] first and\n"
    "[SEP] last).\n\n"
    "  --gguf FILE       use the tokenizer of a GGUF file instead of a model in the store\n"
    "  --no-special      add no BOS / EOS\n"
    "  --parse-special   turn the texts of control tokens (\"<s>\", \"<|end|>\") into those tokens\n"
    "  --verbose         first print the tokenizer's kind (SPM, BPE, WPM), size and special tokens\n"
    "                    on standard error\n"
    "  --batch           read texts from standard input, each ended by a NUL byte (as find -print0\n"
    "                    writes), and print one line of ids per text: one tokenizer load for many\n";

/* A stored model's tokenizer: the same function `mstore run` uses (GGUF metadata or
 * tokenizer.json layers, read through the model's handle). */
static int load_from_store(tokenizer **out, const char *arg)
{
    store *s = NULL;
    store_model *sm = NULL;
    model_name name;
    int rc = -1;

    if (cli_name_parse(&name, arg) < 0 || !(s = cli_store_open()))
        return -1;
    if (store_model_open(&sm, s, &name) < 0 || runtime_tokenizer_from_model(out, sm) < 0)
        cli_fail();
    else
        rc = 0;
    store_model_close(sm);
    store_close(s);
    return rc;
}

static int load_from_file(tokenizer **out, const char *path)
{
    gguf_file *g = NULL;
    int rc = 0;

    if (gguf_open(&g, path) < 0 || tokenizer_from_gguf(out, g, path) < 0) {
        cli_fail();
        rc = -1;
    }
    gguf_close(g);
    return rc;
}

/* A token's text on a terminal: control bytes and the quote as \xNN, the rest as it is. */
static void print_escaped(FILE *f, const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f || c == '\'' || c == '\\')
            fprintf(f, "\\x%02x", c);
        else
            fputc(c, f);
    }
}

/* One special token for --verbose: "BOS 101 '[CLS]' added", or "EOS none". */
static void describe_special(const tokenizer *t, const char *what, int32_t id, int added)
{
    size_t len = 0;
    const char *s = tokenizer_token_text(t, id, &len);

    if (id == TOKEN_NONE) {
        fprintf(stderr, ", %s none", what);
        return;
    }
    fprintf(stderr, ", %s %ld '", what, (long)id);
    print_escaped(stderr, s, len);
    fprintf(stderr, "'%s", added ? " added" : "");
}

static void describe(const tokenizer *t)
{
    const char *pre = tokenizer_pre_name(t);

    fprintf(stderr, "tokenizer: %s%s%s%s, %zu tokens", tokenizer_kind_name(tokenizer_kind_get(t)), pre ? " (" : "",
            pre ? pre : "", pre ? ")" : "", tokenizer_n_vocab(t));
    describe_special(t, "BOS", tokenizer_bos(t), tokenizer_adds_bos(t));
    describe_special(t, "EOS", tokenizer_eos(t), tokenizer_adds_eos(t));
    describe_special(t, "UNK", tokenizer_unk(t), 0);
    fprintf(stderr, "\n");
}

/* Returns the exit status: 1 when stdout fails (a closed pipe, a full disk). */
static int print_ids(const int32_t *ids, size_t n)
{
    for (size_t i = 0; i < n; i++)
        printf(i ? " %d" : "%d", ids[i]);
    printf("\n");
    if (fflush(stdout) != 0 || ferror(stdout)) {
        ms_err_os("stdout");
        return cli_fail();
    }
    return 0;
}

/* --batch: each NUL-terminated text of stdin (a final one without NUL too), one line each. */
static int encode_batch(const tokenizer *t, int add_special, int parse_special)
{
    char *text = NULL;
    size_t cap = 0;
    ssize_t len;
    int rc = 0;

    while (rc == 0 && (len = getdelim(&text, &cap, '\0', stdin)) > 0) {
        int32_t *ids = NULL;
        size_t n, k = (size_t)len - (text[len - 1] == '\0');
        if (tokenizer_encode_alloc(t, text, k, add_special, parse_special, &ids, &n) < 0)
            rc = cli_fail();
        else
            rc = print_ids(ids, n);
        free(ids);
    }
    if (rc == 0 && ferror(stdin)) {
        ms_err_os("stdin");
        rc = cli_fail();
    }
    free(text);
    return rc;
}

int cmd_tokenize(int argc, char **argv)
{
    const char *file = NULL, *pos[2] = { NULL, NULL }, *model, *text;
    int add_special = 1, parse_special = 0, n_pos = 0, rc, batch = 0, verbose = 0;
    tokenizer *t = NULL;
    int32_t *ids = NULL;
    size_t n;

    int no_special = 0;
    const cli_opt opts[] = {
        { "--no-special", NULL, CLI_OPT_FLAG, &no_special, NULL, 0, 0 },
        { "--parse-special", NULL, CLI_OPT_FLAG, &parse_special, NULL, 0, 0 },
        { "--batch", NULL, CLI_OPT_FLAG, &batch, NULL, 0, 0 },
        { "--verbose", NULL, CLI_OPT_FLAG, &verbose, NULL, 0, 0 },
        { "--gguf", NULL, CLI_OPT_STRING, &file, "a FILE", 0, 0 },
        { NULL, NULL, 0, NULL, NULL, 0, 0 },
    };

    /* after "--", NAME / TEXT may start with '-' */
    if ((rc = cli_args_parse(argc, argv, help, opts, pos, 2, &n_pos)) != 0)
        return rc < 0 ? 0 : rc;
    rc = 1;
    add_special = !no_special;
    if (n_pos != (file ? 0 : 1) + !batch)
        return cli_usage_error("tokenize", batch ? (file ? "--batch reads TEXT from stdin, not the arguments"
                                                         : "--batch needs NAME only")
                                                 : file ? "--gguf FILE needs exactly one TEXT" : "needs NAME and TEXT");
    model = file ? NULL : pos[0];
    text = pos[file ? 0 : 1];
    if ((file ? load_from_file(&t, file) : load_from_store(&t, model)) < 0)
        return 1;
    if (verbose)
        describe(t);
    if (batch)
        rc = encode_batch(t, add_special, parse_special);
    else if (tokenizer_encode_alloc(t, text, strlen(text), add_special, parse_special, &ids, &n) < 0)
        cli_fail();
    else
        rc = print_ids(ids, n);
    free(ids);
    tokenizer_free(t);
    return rc;
}
