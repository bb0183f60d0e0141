/* tokenizer.c: the public surface: building, accessors, encode and decode dispatch. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer_int.h"

void tokenizer_special_init_spm(tokenizer_special *s)
{
    /* llama.cpp's defaults for tokenizer.ggml.model "llama" when the GGUF states nothing. */
    *s = (tokenizer_special){ .bos = 1, .eos = 2, .unk = 0, .pad = TOKEN_NONE, .eot = TOKEN_NONE,
                              .eom = TOKEN_NONE, .add_bos = 1, .add_eos = 0, .add_space_prefix = 1,
                              .model_name = NULL };
}

void tokenizer_special_init_bpe(tokenizer_special *s)
{
    /* llama.cpp's defaults for tokenizer.ggml.model "gpt2": bos = eos = 11 (sic), no unknown
     * token, no BOS unless the pre-tokenizer or the vocab asks for it. */
    *s = (tokenizer_special){ .bos = 11, .eos = 11, .unk = TOKEN_NONE, .pad = TOKEN_NONE, .eot = TOKEN_NONE,
                              .eom = TOKEN_NONE, .add_bos = 0, .add_eos = 0, .add_space_prefix = 0,
                              .model_name = NULL };
}

void tokenizer_free(tokenizer *t)
{
    if (!t)
        return;
    bpe_data_free(t->bpe);
    wpm_data_free(t->wpm);
    MS_FREE_ALL(t->text, t->text_off, t->scores, t->attr, t->piece, t->piece_off, t->slots, t->specials, t);
}

int tok_new_vocab(tokenizer **out, tokenizer_kind kind, size_t n_vocab, const char *const *tokens,
                  const size_t *token_lens, const float *scores, const int32_t *types, const tokenizer_special *special)
{
    tokenizer *t = calloc(1, sizeof *t);
    int rc;

    *out = NULL;
    if (!t)
        return ms_err(MS_ENOMEM, "tokenizer: out of memory");
    t->kind = kind;
    if ((rc = tok_vocab_build(t, n_vocab, tokens, token_lens, scores, types, special)) < 0) {
        tokenizer_free(t);
        return rc;
    }
    *out = t;
    return 0;
}

int tokenizer_new_spm(tokenizer **out, size_t n_vocab, const char *const *tokens, const size_t *token_lens,
                      const float *scores, const int32_t *types, const tokenizer_special *special)
{
    tokenizer_special def;

    if (!special) {
        tokenizer_special_init_spm(&def);
        special = &def;
    }
    return tok_new_vocab(out, TOKENIZER_SPM, n_vocab, tokens, token_lens, scores, types, special);
}

tokenizer_kind tokenizer_kind_get(const tokenizer *t) { return t->kind; }

const char *tokenizer_kind_name(tokenizer_kind k)
{
    return k == TOKENIZER_SPM ? "SPM" : k == TOKENIZER_BPE ? "BPE" : k == TOKENIZER_WPM ? "WPM" : "?";
}
size_t tokenizer_n_vocab(const tokenizer *t) { return t->n_vocab; }
int32_t tokenizer_bos(const tokenizer *t) { return t->bos; }
int32_t tokenizer_eos(const tokenizer *t) { return t->eos; }
int32_t tokenizer_unk(const tokenizer *t) { return t->unk; }
int tokenizer_adds_bos(const tokenizer *t) { return t->add_bos; }
int tokenizer_adds_eos(const tokenizer *t) { return t->add_eos; }

static int id_ok(const tokenizer *t, int32_t id) { return id >= 0 && (size_t)id < t->n_vocab; }

int tokenizer_is_eog(const tokenizer *t, int32_t id) { return id_ok(t, id) && (t->attr[id] & ATTR_EOG); }

const char *tokenizer_token_text(const tokenizer *t, int32_t id, size_t *len_out)
{
    if (!id_ok(t, id)) {
        if (len_out)
            *len_out = 0;
        return NULL;
    }
    if (len_out)
        *len_out = t->text_off[id + 1] - t->text_off[id];
    return t->text + t->text_off[id];
}

int tokenizer_token_type(const tokenizer *t, int32_t id) { return id_ok(t, id) ? tok_type(t, id) : -1; }

float tokenizer_token_score(const tokenizer *t, int32_t id) { return id_ok(t, id) && t->scores ? t->scores[id] : 0.0f; }

static int encode_ids(const tokenizer *t, const char *text, size_t len, int add_special, int parse_special,
                      tok_ids *ids)
{
    if (len > 0 && !text)
        return ms_err(MS_EINVALID, "tokenizer: text is NULL with length %zu", len);
    switch (t->kind) {
    case TOKENIZER_SPM:
        return spm_encode(t, text, len, add_special, parse_special, ids);
    case TOKENIZER_BPE:
        return bpe_encode(t, text, len, add_special, parse_special, ids);
    case TOKENIZER_WPM:
        return wpm_encode(t, text, len, add_special, parse_special, ids);
    default:
        return ms_err(MS_EUNSUPPORTED, "tokenizer: kind %d cannot encode yet", (int)t->kind);
    }
}

int tokenizer_encode(const tokenizer *t, const char *text, size_t len, int add_special, int parse_special,
                     int32_t *ids_out, size_t cap, size_t *n_out)
{
    tok_ids ids = { NULL, 0, 0 };
    int rc = encode_ids(t, text, len, add_special, parse_special, &ids);

    *n_out = 0;
    if (rc == 0) {
        *n_out = ids.n;
        if (ids.n > 0 && cap > 0)
            memcpy(ids_out, ids.v, (ids.n < cap ? ids.n : cap) * sizeof *ids_out);
        if (ids.n > cap)
            rc = ms_err(MS_EINVALID, "tokenizer: text needs %zu ids, buffer holds %zu", ids.n, cap);
    }
    free(ids.v);
    return rc;
}

int tokenizer_encode_alloc(const tokenizer *t, const char *text, size_t len, int add_special, int parse_special,
                           int32_t **out, size_t *n_out)
{
    tok_ids ids = { NULL, 0, 0 };
    int rc = encode_ids(t, text, len, add_special, parse_special, &ids);

    *out = NULL;
    *n_out = 0;
    if (rc < 0) {
        free(ids.v);
        return rc;
    }
    if (!ids.v && !(ids.v = malloc(sizeof *ids.v)))   /* an empty result is still a real pointer */
        return ms_err(MS_ENOMEM, "tokenizer: out of memory");
    *out = ids.v;
    *n_out = ids.n;
    return 0;
}

/* The bytes of one piece after flags; *special_out says whether the token is control/unknown. */
static const char *piece_of(const tokenizer *t, int32_t id, unsigned flags, size_t *len, int *special_out)
{
    const char *p = t->piece + t->piece_off[id];
    int ty = tok_type(t, id), special = ty == TOKEN_TYPE_CONTROL || ty == TOKEN_TYPE_UNKNOWN;

    *len = t->piece_off[id + 1] - t->piece_off[id];
    if (special_out)
        *special_out = special;
    if (special && !(flags & TOKENIZER_DECODE_SPECIAL) && !(t->attr[id] & ATTR_SHOWN))
        *len = 0;
    if ((flags & TOKENIZER_DECODE_LSTRIP) && *len > 0 && *p == ' ')
        p++, (*len)--;
    return p;
}

int tokenizer_decode_piece(const tokenizer *t, int32_t id, unsigned flags, char *buf, size_t cap, size_t *n_out)
{
    size_t len;
    const char *p;

    *n_out = 0;
    if (!id_ok(t, id))
        return ms_err(MS_EINVALID, "tokenizer: token id %ld out of range (vocab has %zu tokens)", (long)id,
                      t->n_vocab);
    p = piece_of(t, id, flags, &len, NULL);
    *n_out = len;
    if (len > 0 && cap > 0)
        memcpy(buf, p, len < cap ? len : cap);
    if (len > cap)
        return ms_err(MS_EINVALID, "tokenizer: token %ld needs %zu bytes, buffer holds %zu", (long)id, len, cap);
    return 0;
}

int tokenizer_decode(const tokenizer *t, const int32_t *ids, size_t n, unsigned flags, char *buf, size_t cap,
                     size_t *n_out)
{
    int strip = t->add_space_prefix;
    size_t total = 0;

    *n_out = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len;
        int special;
        const char *p;

        if (!id_ok(t, ids[i]))
            return ms_err(MS_EINVALID, "tokenizer: ids[%zu]: token id %ld out of range (vocab has %zu tokens)", i,
                          (long)ids[i], t->n_vocab);
        piece_of(t, ids[i], 0, &len, &special);
        /* The prefix space sits on the first piece of text; control tokens before it (BOS) do
         * not count. */
        p = piece_of(t, ids[i], (flags & TOKENIZER_DECODE_SPECIAL) | (strip && !special ? TOKENIZER_DECODE_LSTRIP : 0),
                     &len, NULL);
        if (!special)
            strip = 0;
        if (total < cap && len > 0)
            memcpy(buf + total, p, len < cap - total ? len : cap - total);
        total += len;
    }
    *n_out = total;
    if (total > cap)
        return ms_err(MS_EINVALID, "tokenizer: decoded text needs %zu bytes, buffer holds %zu", total, cap);
    return 0;
}
