/* wpm.c: WordPiece as llama.cpp runs it for tokenizer.ggml.model "bert" (llm_tokenizer_wpm_session).
 *
 * Pre-processing, one code point at a time (Hugging Face's BertNormalizer + BertPreTokenizer as
 * llama.cpp approximates them): the code point becomes the first code point of its NFD
 * decomposition (so "é" is "e": accents of precomposed letters go; a combining mark typed on its
 * own stays, and a Hangul syllable keeps only its leading jamo, as in llama.cpp); white space ends
 * the word; NUL, U+FFFD and control characters (Cc, Cf, Co, Cs) vanish; punctuation (P*), ASCII
 * symbols and CJK ideographs are words of their own; anything else goes, in lower case, onto the
 * current word. The Unicode data is ucd.c (generated; see ucd_gen.py).
 *
 * Each word, prefixed with "▁", is cut greedily from the left into the longest token that
 * matches there, byte by byte; if some position matches no token, the whole word is the unknown
 * token. The longest match walks a byte trie of the token texts: O(length of the match) per
 * token, whatever the vocab's longest token (llama.cpp tries every length up to it with a hash
 * lookup each, which a vocab with one 4 KiB token would make quadratic). */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer_int.h"

#define PREFIX "\xe2\x96\x81"   /* U+2581, the converter's mark of a word's first piece */

/* Trie edges live in one open-addressing table keyed by (parent node, byte). */
struct wpm_data {
    tokenizer_wpm_opts opts;
    uint64_t *key;      /* (parent + 1) << 8 | byte; 0: empty slot */
    int32_t *child;
    size_t mask, n_edges;
    int32_t *node_tok;  /* the token whose text ends at this node, or -1; node 0 is the root */
    size_t n_nodes, cap_nodes;
};

void tokenizer_wpm_opts_init(tokenizer_wpm_opts *o)
{
    *o = (tokenizer_wpm_opts){ .lowercase = 1, .strip_accents = 1, .split_chinese = 1, .clean_text = 1,
                               .max_word_chars = 0 };
}

void tokenizer_special_init_wpm(tokenizer_special *s)
{
    /* llama.cpp's defaults for "bert": BERT's vocab.txt puts [PAD] at 0, [UNK] 100, [CLS] 101,
     * [SEP] 102. */
    *s = (tokenizer_special){ .bos = 101, .eos = 102, .unk = 100, .pad = 0, .eot = TOKEN_NONE, .eom = TOKEN_NONE,
                              .add_bos = 1, .add_eos = 1, .add_space_prefix = 0, .model_name = NULL };
}

void wpm_data_free(struct wpm_data *w)
{
    if (!w)
        return;
    MS_FREE_ALL(w->key, w->child, w->node_tok, w);
}

static size_t slot_of(uint64_t key, size_t mask)
{
    key *= 0x9e3779b97f4a7c15ull;
    return (size_t)(key ^ (key >> 29)) & mask;
}

/* The child of `node` along byte b, or -1. */
static int32_t trie_child(const struct wpm_data *w, int32_t node, unsigned char b)
{
    uint64_t key = ((uint64_t)node + 1) << 8 | b;

    for (size_t i = slot_of(key, w->mask);; i = (i + 1) & w->mask) {
        if (w->key[i] == key)
            return w->child[i];
        if (w->key[i] == 0)
            return -1;
    }
}

static int edges_grow(struct wpm_data *w)
{
    size_t cap = (w->mask + 1) * 2;
    uint64_t *key = calloc(cap, sizeof *key);
    int32_t *child = malloc(cap * sizeof *child);

    if (!key || !child) {
        free(key);
        free(child);
        return ms_err(MS_ENOMEM, "tokenizer: out of memory for the WordPiece trie (%zu edges)", w->n_edges);
    }
    for (size_t i = 0; i <= w->mask; i++) {
        size_t j;
        if (w->key[i] == 0)
            continue;
        for (j = slot_of(w->key[i], cap - 1); key[j] != 0; j = (j + 1) & (cap - 1))
            ;
        key[j] = w->key[i];
        child[j] = w->child[i];
    }
    free(w->key);
    free(w->child);
    w->key = key, w->child = child, w->mask = cap - 1;
    return 0;
}

/* The child of `node` along b, made when missing; -1 on failure (the message set). */
static int32_t trie_add(struct wpm_data *w, int32_t node, unsigned char b)
{
    uint64_t key = ((uint64_t)node + 1) << 8 | b;
    size_t i;

    if ((w->n_edges + 1) * 2 > w->mask + 1 && edges_grow(w) < 0)
        return -1;
    for (i = slot_of(key, w->mask); w->key[i] != 0; i = (i + 1) & w->mask)
        if (w->key[i] == key)
            return w->child[i];
    if (w->n_nodes == w->cap_nodes) {
        size_t cap = w->cap_nodes * 2;
        int32_t *p = cap <= INT32_MAX ? realloc(w->node_tok, cap * sizeof *p) : NULL;
        if (!p) {
            ms_err(MS_ENOMEM, "tokenizer: out of memory for the WordPiece trie (%zu nodes)", w->n_nodes);
            return -1;
        }
        w->node_tok = p, w->cap_nodes = cap;
    }
    w->node_tok[w->n_nodes] = -1;
    w->key[i] = key;
    w->child[i] = (int32_t)w->n_nodes;
    w->n_edges++;
    return (int32_t)w->n_nodes++;
}

int wpm_data_new(tokenizer *t, const tokenizer_wpm_opts *opts)
{
    struct wpm_data *w = calloc(1, sizeof *w);

    if (!w)
        return ms_err(MS_ENOMEM, "tokenizer: out of memory");
    t->wpm = w;
    if (opts)
        w->opts = *opts;
    else
        tokenizer_wpm_opts_init(&w->opts);
    w->mask = 1023;
    w->cap_nodes = 1024;
    w->key = calloc(w->mask + 1, sizeof *w->key);
    w->child = malloc((w->mask + 1) * sizeof *w->child);
    w->node_tok = malloc(w->cap_nodes * sizeof *w->node_tok);
    if (!w->key || !w->child || !w->node_tok)
        return ms_err(MS_ENOMEM, "tokenizer: out of memory for the WordPiece trie");
    w->node_tok[0] = -1;
    w->n_nodes = 1;
    /* In id order: a later token with the same text wins, as in every lookup (tok_find). */
    for (size_t id = 0; id < t->n_vocab; id++) {
        int32_t node = 0;
        for (size_t i = t->text_off[id]; i < t->text_off[id + 1]; i++)
            if ((node = trie_add(w, node, (unsigned char)t->text[i])) < 0)
                return ms_err_code();
        w->node_tok[node] = (int32_t)id;
    }
    return 0;
}

int tokenizer_new_wpm(tokenizer **out, size_t n_vocab, const char *const *tokens, const size_t *token_lens,
                      const int32_t *types, const tokenizer_wpm_opts *opts, const tokenizer_special *special)
{
    tokenizer_special def;
    int rc;

    if (!special) {
        tokenizer_special_init_wpm(&def);
        special = &def;
    }
    if ((rc = tok_new_vocab(out, TOKENIZER_WPM, n_vocab, tokens, token_lens, NULL, types, special)) < 0)
        return rc;
    if ((rc = wpm_data_new(*out, opts)) < 0) {
        tokenizer_free(*out);
        *out = NULL;
        return rc;
    }
    /* Decoding: the first word's piece "▁x" starts the text, without its space. */
    (*out)->add_space_prefix = 1;
    return 0;
}

/* ---------------------------------------------------------------- Unicode */

/* The first row of a table sorted by the uint32_t at `off` in each row whose key is not below c
 * (n when none): one search for the three Unicode tables, whose rows differ in shape. */
static size_t ucd_find(const void *table, size_t n, size_t row, size_t off, uint32_t c)
{
    const unsigned char *b = table;
    size_t lo = 0, hi = n;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uint32_t key;
        memcpy(&key, b + mid * row + off, sizeof key);
        if (key < c)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static uint32_t cpt_flags(uint32_t c)
{
    /* the last range whose first <= c; the table starts at 0, so there is one */
    size_t i = c == UINT32_MAX ? ucd_flags_n
                               : ucd_find(ucd_flags, ucd_flags_n, sizeof *ucd_flags, offsetof(ucd_range, first), c + 1);

    return ucd_flags[i - 1].flags;
}

static uint32_t cpt_nfd_first(uint32_t c)
{
    size_t i = ucd_find(ucd_nfd, ucd_nfd_n, sizeof *ucd_nfd, offsetof(ucd_map3, last), c);

    return i < ucd_nfd_n && ucd_nfd[i].first <= c ? ucd_nfd[i].to : c;
}

static uint32_t cpt_lower(uint32_t c)
{
    size_t i = ucd_find(ucd_lower, ucd_lower_n, sizeof *ucd_lower, offsetof(ucd_map, from), c);

    return i < ucd_lower_n && ucd_lower[i].from == c ? ucd_lower[i].to : c;
}

/* BERT's "Chinese character" blocks (CJK Unified Ideographs and extensions, compatibility
 * ideographs), as Hugging Face's tokenizers and llama.cpp list them, with their 0x2B920 (where
 * Unicode's Extension E starts at 0x2B820). */
static int cpt_is_cjk(uint32_t c)
{
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

/* ---------------------------------------------------------------- encoding */

/* One word: "▁" + its n_chars code points, `len` bytes in all. */
static int word_tokenize(const tokenizer *t, const char *word, size_t len, size_t n_chars, tok_ids *out)
{
    const struct wpm_data *w = t->wpm;
    size_t start = out->n, i = 0;

    if (w->opts.max_word_chars == 0 || n_chars <= w->opts.max_word_chars) {
        while (i < len) {
            int32_t node = 0, best = -1;
            size_t end = i;

            for (size_t j = i; j < len && (node = trie_child(w, node, (unsigned char)word[j])) >= 0; j++)
                if (w->node_tok[node] >= 0)
                    best = w->node_tok[node], end = j + 1;
            if (best < 0)
                break;
            if (tok_ids_push(out, best) < 0)
                return ms_err_code();
            i = end;
        }
        if (i == len)
            return 0;
    }
    out->n = start;   /* a word with a piece no token spells, or too long: all of it is unknown */
    if (t->unk == TOKEN_NONE)
        return ms_err(MS_EINVALID, "tokenizer: word '%.*s' has no tokens and the vocab has no unknown token",
                      (int)(len > 64 ? 64 : len), word);
    return tok_ids_push(out, t->unk);
}

/* Pre-process one raw fragment into words and tokenize each (see the top of the file). */
static int fragment_tokenize(const tokenizer *t, const char *text, size_t len, tok_ids *out)
{
    const tokenizer_wpm_opts *o = &t->wpm->opts;
    uint32_t *cpts = NULL;
    char *word = NULL;
    size_t n, bytes, wlen = 3, wchars = 0;
    int rc = 0;

    if (len == 0)
        return 0;
    /* each code point comes from at least one byte and goes out as at most four */
    if (ms_mul(&bytes, len, 4) < 0 || ms_add(&bytes, bytes, 3) < 0 ||
        !(cpts = malloc(len * sizeof *cpts)) || !(word = malloc(bytes))) {
        free(cpts);
        return ms_err(MS_ENOMEM, "tokenizer: out of memory for %zu bytes of text", len);
    }
    n = utf8_to_cpts(text, len, cpts);
    memcpy(word, PREFIX, 3);
    for (size_t i = 0; i <= n && rc == 0; i++) {
        uint32_t c = i < n ? cpts[i] : ' ', fl;   /* a space after the end flushes the last word */
        int alone;

        if (o->strip_accents)
            c = cpt_nfd_first(c);
        if (c > 0x10FFFF)   /* from sloppy UTF-8 that llama.cpp decodes, then throws on */
            c = 0xFFFD;
        fl = cpt_flags(c);
        /* white space first: \t, \n and U+0085 are control characters too */
        alone = !cpt_is_space(c) && ((fl & (UCD_PUNCT | UCD_SYMBOL)) || (o->split_chinese && cpt_is_cjk(c)));
        if (!alone && !cpt_is_space(c)) {
            if (!(o->clean_text && (c == 0 || c == 0xFFFD || (fl & UCD_CONTROL)))) {
                wlen += utf8_put(word + wlen, o->lowercase ? cpt_lower(c) : c);
                wchars++;
            }
            continue;
        }
        if (wchars > 0 && (rc = word_tokenize(t, word, wlen, wchars, out)) < 0)
            break;
        wlen = 3, wchars = 0;
        if (alone) {
            size_t k = utf8_put(word + 3, o->lowercase ? cpt_lower(c) : c);
            rc = word_tokenize(t, word, 3 + k, 1, out);
        }
    }
    free(cpts);
    free(word);
    return rc;
}

int wpm_encode(const tokenizer *t, const char *text, size_t len, int add_special, int parse_special, tok_ids *out)
{
    return tok_encode_fragments(t, text, len, add_special, parse_special, fragment_tokenize, out);
}
