/* vocab.c: the tables every tokenizer kind shares: token texts, text -> id hash, token
 * attributes with llama.cpp's overrides, the special-token list, decoded pieces; and the split
 * of input text at special tokens (llama.cpp's tokenizer_st_partition). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tokenizer/tokenizer_int.h"

int tok_ids_push(tok_ids *a, int32_t id)
{
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 64;
        int32_t *v = realloc(a->v, cap * sizeof *v);
        if (!v)
            return ms_err(MS_ENOMEM, "tokenizer: out of memory for %zu ids", cap);
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = id;
    return 0;
}

static uint64_t hash_bytes(const char *s, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ull;   /* FNV-1a */
    for (size_t i = 0; i < len; i++)
        h = (h ^ (uint8_t)s[i]) * 0x100000001b3ull;
    return h ^ (h >> 29);
}

int32_t tok_find(const tokenizer *t, const char *s, size_t len)
{
    for (size_t i = hash_bytes(s, len) & t->mask;; i = (i + 1) & t->mask) {
        int32_t id = t->slots[i];
        if (id < 0)
            return -1;
        if (t->text_off[id + 1] - t->text_off[id] == len && memcmp(t->text + t->text_off[id], s, len) == 0)
            return id;
    }
}

/* Later ids replace earlier ones with the same text: llama.cpp fills token_to_id in id order. */
static int hash_build(tokenizer *t)
{
    size_t cap = 16;
    while (cap < t->n_vocab * 2)
        cap *= 2;
    t->slots = malloc(cap * sizeof *t->slots);
    if (!t->slots)
        return ms_err(MS_ENOMEM, "tokenizer: out of memory for the vocab hash (%zu slots)", cap);
    memset(t->slots, 0xff, cap * sizeof *t->slots);
    t->mask = cap - 1;
    for (size_t id = 0; id < t->n_vocab; id++) {
        const char *s = t->text + t->text_off[id];
        size_t len = t->text_off[id + 1] - t->text_off[id], i = hash_bytes(s, len) & t->mask;
        for (; t->slots[i] >= 0; i = (i + 1) & t->mask) {
            int32_t o = t->slots[i];
            if (t->text_off[o + 1] - t->text_off[o] == len && memcmp(t->text + t->text_off[o], s, len) == 0)
                break;
        }
        t->slots[i] = (int32_t)id;
    }
    return 0;
}

/* Copy the texts into one arena. An empty text becomes "[EMPTY_<id>]" as in llama.cpp, so that
 * every token has a text that can be looked up and shown. */
static int texts_copy(tokenizer *t, const char *const *tokens, const size_t *lens)
{
    size_t total = 0, n = t->n_vocab;
    char empty[32];

    for (size_t i = 0; i < n; i++) {
        size_t len = lens ? lens[i] : (tokens[i] ? strlen(tokens[i]) : 0);
        if (len > 0 && !tokens[i])
            return ms_err(MS_EINVALID, "tokenizer: token %zu: text is NULL with length %zu", i, len);
        if (len > TOKENIZER_MAX_TOKEN_LEN)
            return ms_err(MS_EINVALID, "tokenizer: token %zu: text is %zu bytes, more than %u", i, len,
                          (unsigned)TOKENIZER_MAX_TOKEN_LEN);
        total += len ? len : (size_t)snprintf(empty, sizeof empty, "[EMPTY_%zu]", i);
    }
    t->text = malloc(total ? total : 1);
    t->text_off = malloc((n + 1) * sizeof *t->text_off);
    if (!t->text || !t->text_off)
        return ms_err(MS_ENOMEM, "tokenizer: out of memory for %zu bytes of token text", total);
    total = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len = lens ? lens[i] : (tokens[i] ? strlen(tokens[i]) : 0);
        t->text_off[i] = total;
        if (len == 0) {
            len = (size_t)snprintf(empty, sizeof empty, "[EMPTY_%zu]", i);
            memcpy(t->text + total, empty, len), total += len;
        } else
            memcpy(t->text + total, tokens[i], len), total += len;
    }
    t->text_off[n] = total;
    return 0;
}

static void attr_set_type(tokenizer *t, int32_t id, int type)
{
    t->attr[id] = (uint8_t)((t->attr[id] & ~ATTR_TYPE_MASK) | type);
}

static int32_t find_str(const tokenizer *t, const char *s) { return tok_find(t, s, strlen(s)); }

/* gpt-oss's harmony format: a vocab with both "<|return|>" and "<|call|>". There "<|end|>" closes
 * one message of an answer (the analysis before the final one) and must not stop generation, as
 * llama.cpp also rules; the answer ends at <|return|> or, for a tool call, at <|call|>. The
 * markers are control tokens, yet the server's harmony splitter (src/chat) must see them in the
 * answer's text to part reasoning, content and calls, so they decode as their text. */
static void harmony_detect(tokenizer *t)
{
    static const char *const shown[] = { "<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>",
        "<|return|>", "<|call|>" };
    int32_t ret = find_str(t, "<|return|>"), call = find_str(t, "<|call|>"), end = find_str(t, "<|end|>"), id;

    if (ret < 0 || call < 0)
        return;
    if (end >= 0) {
        t->attr[end] &= (uint8_t)~ATTR_EOG;
        if (t->eot == end)
            t->eot = TOKEN_NONE;
        if (t->eos == end)
            t->eos = ret;
    }
    t->attr[ret] |= ATTR_EOG;
    t->attr[call] |= ATTR_EOG;
    for (size_t i = 0; i < sizeof shown / sizeof *shown; i++)
        if ((id = find_str(t, shown[i])) >= 0)
            t->attr[id] |= ATTR_SHOWN;
}

/* llama.cpp finds end-of-turn and end-of-generation tokens by their text when the vocab does not
 * name them, and forces those tokens to CONTROL (which also stops them from being matched in
 * text without parse_special). Mirrors llama_vocab::impl::load. */
static void eog_detect(tokenizer *t)
{
    static const char *const eot_names[] = { "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>",
        "<|endoftext|>", "<EOT>", "_<EOT>", "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>" };
    static const char *const eog_names[] = { "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>",
        "<|endoftext|>", "<|eom_id|>", "<EOT>", "_<EOT>" };
    int32_t id;

    for (size_t i = 0; t->eot == TOKEN_NONE && i < sizeof eot_names / sizeof *eot_names; i++)
        if ((id = find_str(t, eot_names[i])) >= 0) {
            t->eot = id;
            attr_set_type(t, id, TOKEN_TYPE_CONTROL);
        }
    if (t->eom == TOKEN_NONE && (id = find_str(t, "<|eom_id|>")) >= 0) {
        t->eom = id;
        attr_set_type(t, id, TOKEN_TYPE_CONTROL);
    }
    for (size_t i = 0; i < sizeof eog_names / sizeof *eog_names; i++)
        if ((id = find_str(t, eog_names[i])) >= 0) {
            attr_set_type(t, id, TOKEN_TYPE_CONTROL);
            t->attr[id] |= ATTR_EOG;
        }
    if (t->eos >= 0)
        t->attr[t->eos] |= ATTR_EOG;
    if (t->eot >= 0)
        t->attr[t->eot] |= ATTR_EOG;
    if (t->eom >= 0)
        t->attr[t->eom] |= ATTR_EOG;
    harmony_detect(t);
}

typedef struct special_key {
    size_t len;
    int32_t id;
} special_key;

/* Longest text first, so that "<|end|>" is not cut out of "<|endoftext|>"; ties by id, to be
 * deterministic (llama.cpp's std::sort leaves their order unspecified). */
static int special_cmp(const void *pa, const void *pb)
{
    const special_key *a = pa, *b = pb;
    if (a->len != b->len)
        return a->len > b->len ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

static int is_special_type(int ty)
{
    return ty == TOKEN_TYPE_CONTROL || ty == TOKEN_TYPE_USER_DEFINED || ty == TOKEN_TYPE_UNKNOWN;
}

static int specials_build(tokenizer *t)
{
    special_key *keys = NULL;
    size_t n = 0;

    for (size_t id = 0; id < t->n_vocab; id++)
        n += is_special_type(tok_type(t, (int32_t)id));
    keys = malloc((n ? n : 1) * sizeof *keys);
    t->specials = malloc((n ? n : 1) * sizeof *t->specials);
    if (!keys || !t->specials) {
        free(keys);
        return ms_err(MS_ENOMEM, "tokenizer: out of memory for %zu special tokens", n);
    }
    n = 0;
    for (size_t id = 0; id < t->n_vocab; id++)
        if (is_special_type(tok_type(t, (int32_t)id)))
            keys[n++] = (special_key){ t->text_off[id + 1] - t->text_off[id], (int32_t)id };
    qsort(keys, n, sizeof *keys, special_cmp);
    for (size_t i = 0; i < n; i++)
        t->specials[i] = keys[i].id;
    t->n_specials = n;
    free(keys);
    return 0;
}

static int contains_ci(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    for (; *hay; hay++)
        if (strncasecmp(hay, needle, n) == 0)
            return 1;
    return 0;
}

/* llama.cpp's per-model rule for Phi-3 (keyed on general.name): whitespace right of a special
 * token belongs to the token, except after <unk>, <s> and <|endoftext|>. */
static void model_rules(tokenizer *t, const char *model_name)
{
    static const char *const keep[] = { "<unk>", "<s>", "<|endoftext|>" };
    int32_t id;

    if (!model_name || !(contains_ci(model_name, "phi-3") || contains_ci(model_name, "phi3")))
        return;
    for (size_t i = 0; i < t->n_specials; i++)
        t->attr[t->specials[i]] |= ATTR_RSTRIP;
    if ((id = find_str(t, "</s>")) >= 0)
        t->attr[id] |= ATTR_RSTRIP;
    for (size_t i = 0; i < sizeof keep / sizeof *keep; i++)
        if ((id = find_str(t, keep[i])) >= 0)
            t->attr[id] &= (uint8_t)~ATTR_RSTRIP;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* A BPE token's text spelled in GPT-2's byte alphabet, as the bytes it stands for. A character
 * outside the alphabet is kept as it is (llama.cpp writes "[UNK_BYTE_0x..]" instead); so the
 * piece is never longer than the text. */
static size_t bpe_piece(char *dst, const char *s, size_t len)
{
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        unsigned c = (unsigned char)s[i];
        size_t k = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : 0;
        int b = -1;
        if (k == 1)
            b = bpe_char_byte(c);
        else if (k == 2 && i + 1 < len && ((unsigned char)s[i + 1] & 0xC0) == 0x80)
            b = bpe_char_byte((c & 0x1Fu) << 6 | ((unsigned char)s[i + 1] & 0x3Fu));
        if (b >= 0) {
            dst[o++] = (char)b;
            i += k;
        } else {
            dst[o++] = s[i++];
        }
    }
    return o;
}

/* The piece of each token as llama.cpp's token_to_piece caches it (special = true): control,
 * unknown and user-defined tokens verbatim, normal ones with U+2581 turned into ' ' (SPM) or
 * spelled back into bytes (BPE), SPM byte tokens "<0xXX>" as that byte, others empty. Pieces
 * are never longer than the text. */
static int pieces_build(tokenizer *t)
{
    size_t o = 0, n = t->n_vocab;

    t->piece = malloc(t->text_off[n] ? t->text_off[n] : 1);
    t->piece_off = malloc((n + 1) * sizeof *t->piece_off);
    if (!t->piece || !t->piece_off)
        return ms_err(MS_ENOMEM, "tokenizer: out of memory for token pieces");
    for (size_t id = 0; id < n; id++) {
        const char *s = t->text + t->text_off[id];
        size_t len = t->text_off[id + 1] - t->text_off[id];
        int ty = tok_type(t, (int32_t)id);

        t->piece_off[id] = o;
        if (is_special_type(ty)) {
            memcpy(t->piece + o, s, len);
            o += len;
        } else if (ty == TOKEN_TYPE_NORMAL && t->kind == TOKENIZER_BPE) {
            o += bpe_piece(t->piece + o, s, len);
        } else if (ty == TOKEN_TYPE_NORMAL) {
            for (size_t i = 0; i < len; i++) {
                if (i + 2 < len && memcmp(s + i, "\xe2\x96\x81", 3) == 0) {
                    t->piece[o++] = ' ';
                    i += 2;
                } else {
                    t->piece[o++] = s[i];
                }
            }
        } else if (ty == TOKEN_TYPE_BYTE && len == 6 && memcmp(s, "<0x", 3) == 0 && s[5] == '>' &&
                   hexval(s[3]) >= 0 && hexval(s[4]) >= 0) {
            t->piece[o++] = (char)(hexval(s[3]) * 16 + hexval(s[4]));
        }
    }
    t->piece_off[n] = o;
    return 0;
}

/* SPM byte fallback, as llama.cpp's byte_to_token: the "<0xXX>" token (upper-case hex), else a
 * token whose text is that single byte. */
static void bytes_build(tokenizer *t)
{
    static const char hex[] = "0123456789ABCDEF";
    for (int b = 0; b < 256; b++) {
        char buf[6] = { '<', '0', 'x', hex[b >> 4], hex[b & 15], '>' }, c = (char)b;
        int32_t id = tok_find(t, buf, 6);
        t->byte_tok[b] = id >= 0 ? id : tok_find(t, &c, 1);
    }
}

int tok_vocab_build(tokenizer *t, size_t n_vocab, const char *const *tokens, const size_t *token_lens,
                    const float *scores, const int32_t *types, const tokenizer_special *sp)
{
    int rc;

    if (n_vocab == 0 || n_vocab > TOKENIZER_MAX_VOCAB)
        return ms_err(MS_EINVALID, "tokenizer: vocab size %zu out of range (1..%u)", n_vocab,
                      (unsigned)TOKENIZER_MAX_VOCAB);
    if (!tokens)
        return ms_err(MS_EINVALID, "tokenizer: no token texts");
    t->n_vocab = n_vocab;
    if ((rc = texts_copy(t, tokens, token_lens)) < 0)
        return rc;
    t->scores = calloc(n_vocab, sizeof *t->scores);
    t->attr = calloc(n_vocab, 1);
    if (!t->scores || !t->attr)
        return ms_err(MS_ENOMEM, "tokenizer: out of memory for %zu tokens", n_vocab);
    for (size_t i = 0; i < n_vocab; i++) {
        int32_t ty = types ? types[i] : TOKEN_TYPE_NORMAL;
        if (ty < TOKEN_TYPE_UNDEFINED || ty > TOKEN_TYPE_BYTE)
            return ms_err(MS_EINVALID, "tokenizer: token %zu: type %d out of range (0..6)", i, (int)ty);
        t->attr[i] = (uint8_t)ty;
        if (scores)
            t->scores[i] = scores[i];
    }
    t->bos = sp->bos, t->eos = sp->eos, t->unk = sp->unk, t->pad = sp->pad;
    t->eot = sp->eot, t->eom = sp->eom;
    {
        const struct { const char *name; int32_t id; } ids[] = {
            { "bos", t->bos }, { "eos", t->eos }, { "unk", t->unk },
            { "pad", t->pad }, { "eot", t->eot }, { "eom", t->eom },
        };
        for (size_t i = 0; i < sizeof ids / sizeof *ids; i++)
            if (ids[i].id != TOKEN_NONE && (ids[i].id < 0 || (size_t)ids[i].id >= n_vocab))
                return ms_err(MS_EINVALID, "tokenizer: %s token id %ld out of range (vocab has %zu tokens)",
                              ids[i].name, (long)ids[i].id, n_vocab);
    }
    t->add_bos = sp->add_bos && t->bos != TOKEN_NONE;
    t->add_eos = sp->add_eos && t->eos != TOKEN_NONE;
    t->add_space_prefix = !!sp->add_space_prefix;
    if ((rc = hash_build(t)) < 0)
        return rc;
    eog_detect(t);
    if ((rc = specials_build(t)) < 0)
        return rc;
    model_rules(t, sp->model_name);
    bytes_build(t);
    return pieces_build(t);
}

/* Split [off, off+len) at every occurrence of special token `id`, appending to *dst. */
static int split_one(const tokenizer *t, const char *text, const tok_frag *f, int32_t id, tok_frag **dst,
                     size_t *n, size_t *cap)
{
    const char *tok = t->text + t->text_off[id];
    size_t tlen = t->text_off[id + 1] - t->text_off[id], off = f->off, len = f->len;

    for (;;) {
        const char *m = len >= tlen ? memmem(text + off, len, tok, tlen) : NULL;
        size_t left = m ? (size_t)(m - text) - off : len, right_off, right_len;
        tok_frag add[2];
        int k = 0;

        if (m && (t->attr[id] & ATTR_LSTRIP))
            while (left > 0 && isspace((unsigned char)text[off + left - 1]))
                left--;
        if (left > 0)
            add[k++] = (tok_frag){ off, left, TOKEN_NONE };
        if (m)
            add[k++] = (tok_frag){ (size_t)(m - text), tlen, id };
        if (*n + (size_t)k > *cap) {
            size_t c = *cap * 2 + 8;
            tok_frag *p = realloc(*dst, c * sizeof *p);
            if (!p)
                return ms_err(MS_ENOMEM, "tokenizer: out of memory splitting text at special tokens");
            *dst = p, *cap = c;
        }
        for (int i = 0; i < k; i++)
            (*dst)[(*n)++] = add[i];
        if (!m)
            return 0;
        right_off = (size_t)(m - text) + tlen;
        right_len = off + len - right_off;
        if (t->attr[id] & ATTR_RSTRIP)
            while (right_len > 0 && isspace((unsigned char)text[right_off]))
                right_off++, right_len--;
        off = right_off, len = right_len;
        if (len == 0)
            return 0;
    }
}

int tok_encode_fragments(const tokenizer *t, const char *text, size_t len, int add_special, int parse_special,
                         tok_fragment_fn fragment, tok_ids *out)
{
    tok_frag *frags = NULL;
    size_t n_frags = 0;
    int rc;

    if (add_special && t->add_bos && (rc = tok_ids_push(out, t->bos)) < 0)
        return rc;
    if ((rc = tok_partition(t, text, len, parse_special, &frags, &n_frags)) < 0)
        return rc;
    for (size_t i = 0; i < n_frags && rc == 0; i++)
        rc = frags[i].id != TOKEN_NONE ? tok_ids_push(out, frags[i].id)
                                       : fragment(t, text + frags[i].off, frags[i].len, out);
    free(frags);
    if (rc == 0 && add_special && t->add_eos)
        rc = tok_ids_push(out, t->eos);
    return rc;
}

/* llama.cpp's tokenizer_st_partition: for each special token, longest first, cut every raw
 * fragment at its occurrences. Control and unknown tokens take part only with parse_special;
 * user-defined ones always do. */
int tok_partition(const tokenizer *t, const char *text, size_t len, int parse_special, tok_frag **out,
                  size_t *n_out)
{
    tok_frag *cur = NULL, *next = NULL;
    size_t n = 0;

    *out = NULL;
    *n_out = 0;
    if (len == 0)
        return 0;
    cur = malloc(sizeof *cur);
    if (!cur)
        return ms_err(MS_ENOMEM, "tokenizer: out of memory");
    cur[0] = (tok_frag){ 0, len, TOKEN_NONE };
    n = 1;
    for (size_t s = 0; s < t->n_specials; s++) {
        int32_t id = t->specials[s];
        int ty = tok_type(t, id);
        size_t nn = 0, ncap = n + 8;

        if (!parse_special && (ty == TOKEN_TYPE_CONTROL || ty == TOKEN_TYPE_UNKNOWN))
            continue;
        next = malloc(ncap * sizeof *next);
        if (!next)
            goto nomem;
        for (size_t i = 0; i < n; i++) {
            if (cur[i].id != TOKEN_NONE) {
                if (nn == ncap) {
                    tok_frag *p = realloc(next, (ncap = ncap * 2) * sizeof *p);
                    if (!p)
                        goto nomem;
                    next = p;
                }
                next[nn++] = cur[i];
            } else if (split_one(t, text, &cur[i], id, &next, &nn, &ncap) < 0) {
                goto fail;
            }
        }
        free(cur);
        cur = next, n = nn;
        next = NULL;
    }
    *out = cur;
    *n_out = n;
    return 0;
nomem:
    ms_err(MS_ENOMEM, "tokenizer: out of memory splitting text at special tokens");
fail:
    free(cur);
    free(next);
    return ms_err_code();
}
