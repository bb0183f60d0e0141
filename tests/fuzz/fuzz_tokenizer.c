/* fuzz_tokenizer.c: libFuzzer target for the tokenizer builders: Hugging Face's tokenizer.json
 * (+ tokenizer_config.json) and a GGUF's tokenizer.ggml.* metadata. An input that starts with
 * "GGUF" is read as a GGUF header; anything else is tokenizer.json, up to the first NUL byte,
 * and tokenizer_config.json after it. A refusal must say why; a built tokenizer must encode a
 * fixed text and the input's own last bytes to ids inside the vocab, and decode them again. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer.h"

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "fuzz_tokenizer: %s:%d: %s (%s)\n", __FILE__, __LINE__, #c, ms_err_msg()); abort(); } } while (0)

static void exercise(const tokenizer *t, const char *text, size_t len)
{
    size_t nv = tokenizer_n_vocab(t);

    CHECK(nv >= 1 && nv <= TOKENIZER_MAX_VOCAB);
    CHECK(tokenizer_bos(t) == TOKEN_NONE || (tokenizer_bos(t) >= 0 && (size_t)tokenizer_bos(t) < nv));
    CHECK(tokenizer_eos(t) == TOKEN_NONE || (tokenizer_eos(t) >= 0 && (size_t)tokenizer_eos(t) < nv));
    CHECK(tokenizer_unk(t) == TOKEN_NONE || (tokenizer_unk(t) >= 0 && (size_t)tokenizer_unk(t) < nv));
    for (int special = 0; special < 2; special++) {
        int32_t *ids = NULL;
        size_t n = 0, need = 0;
        char *out;

        if (tokenizer_encode_alloc(t, text, len, special, special, &ids, &n) < 0) {
            CHECK(ids == NULL && ms_err_msg()[0]);
            continue;
        }
        for (size_t i = 0; i < n; i++) {
            size_t tl;
            CHECK(ids[i] >= 0 && (size_t)ids[i] < nv);
            CHECK(tokenizer_token_text(t, ids[i], &tl) != NULL && tl <= TOKENIZER_MAX_TOKEN_LEN);
            tokenizer_is_eog(t, ids[i]);
        }
        CHECK(tokenizer_decode(t, ids, n, special ? TOKENIZER_DECODE_SPECIAL : 0, NULL, 0, &need) == 0 || need > 0);
        out = malloc(need + 1);
        CHECK(out);
        CHECK(tokenizer_decode(t, ids, n, special ? TOKENIZER_DECODE_SPECIAL : 0, out, need, &need) == 0);
        free(out);
        free(ids);
    }
    /* every id decodes, and a bad one is refused */
    for (size_t i = 0; i < nv && i < 512; i++) {
        char buf[16];
        size_t need;
        tokenizer_decode_piece(t, (int32_t)i, TOKENIZER_DECODE_SPECIAL, buf, sizeof buf, &need);
    }
    CHECK(tokenizer_token_text(t, (int32_t)nv, NULL) == NULL);
}

static const char fixed[] = "Hello world! It's 2024: 3.14159 <s>x</s> <|im_end|>\n\n\t  caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80 \xff\xfe";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tokenizer *t = (tokenizer *)&size;
    size_t tail = size < 64 ? size : 64;
    int rc;

    ms_err_clear();
    if (size >= 4 && memcmp(data, "GGUF", 4) == 0) {
        gguf_file *g = NULL;

        if (gguf_open_buf(&g, data, size, GGUF_HEADER_ONLY, "fuzz") < 0)
            return 0;
        rc = tokenizer_from_gguf(&t, g, "fuzz");
        gguf_close(g);   /* the tokenizer copies what it needs */
    } else {
        const uint8_t *nul = memchr(data, 0, size);
        size_t jlen = nul ? (size_t)(nul - data) : size;
        char *cfg = NULL;

        if (nul) {
            size_t clen = size - jlen - 1;
            CHECK((cfg = malloc(clen + 1)));
            memcpy(cfg, nul + 1, clen);
            cfg[clen] = '\0';
        }
        rc = tokenizer_from_json(&t, (const char *)data, jlen, cfg, "fuzz");
        free(cfg);
    }
    if (rc < 0) {
        CHECK(t == NULL && ms_err_msg()[0]);
        return 0;
    }
    exercise(t, fixed, sizeof fixed - 1);
    exercise(t, (const char *)data + size - tail, tail);
    tokenizer_free(t);
    return 0;
}
