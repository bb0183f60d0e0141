/* bpe.c: byte-level BPE as llama.cpp runs it for tokenizer.ggml.model "gpt2" (llm_tokenizer_bpe).
 *
 * A raw fragment is split into words by the pre-tokenizer (pretok.c). Each word's UTF-8 bytes
 * are spelled with GPT-2's byte alphabet (bytes_to_unicode: printable bytes stand for
 * themselves, the other 68 become U+0100..U+0143), and the spelled word is cut into characters,
 * one symbol each. Adjacent pairs that appear in the merge list go into a heap ordered by the
 * merge's rank (its line in tokenizer.ggml.merges; ties: the leftmost pair first); popping the
 * best pair merges it, and the two new neighbour pairs are offered. Stale entries (a symbol
 * changed since the push) are skipped, as in spm.c. Each final symbol becomes its token, or
 * when its text is no token, one token per byte that has one (others are dropped, as
 * llama.cpp does). With ignore_merges (Llama 3), a word whose spelling is a token is taken
 * whole. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer_int.h"

typedef struct merge {
    uint32_t off;        /* into bpe_data.mtext: first then second, no separator */
    uint32_t n1, n2;
    int32_t rank;
} merge;

struct bpe_data {
    pretok *pre;
    int ignore_merges;
    merge *merges;
    size_t n_merges;
    char *mtext;
    int32_t *mslots;     /* hash (first, second) -> index into merges; -1 empty */
    size_t mmask;
    char enc[256][2];    /* byte -> its character in GPT-2's alphabet, UTF-8 (1 or 2 bytes) */
    uint8_t enc_len[256];
};

/* ---------------------------------------------------------------- UTF-8 */

size_t utf8_to_cpts(const char *s8, size_t len, uint32_t *cpts)
{
    const unsigned char *s = (const unsigned char *)s8;
    size_t n = 0, i = 0;

    while (i < len) {
        unsigned c = s[i];
        size_t k = !(c & 0x80) ? 1 : !(c & 0x40) ? 0 : !(c & 0x20) ? 2 : !(c & 0x10) ? 3 : !(c & 0x08) ? 4 : 0;
        int ok = k > 0 && i + k <= len;
        for (size_t j = 1; ok && j < k; j++)
            ok = (s[i + j] & 0xC0) == 0x80;
        if (!ok) {   /* llama.cpp: skip one byte, emit U+FFFD */
            cpts[n++] = 0xFFFD;
            i++;
            continue;
        }
        switch (k) {
        case 1: cpts[n] = c; break;
        case 2: cpts[n] = (c & 0x1Fu) << 6 | (s[i + 1] & 0x3Fu); break;
        case 3: cpts[n] = (c & 0x0Fu) << 12 | (s[i + 1] & 0x3Fu) << 6 | (s[i + 2] & 0x3Fu); break;
        default:
            cpts[n] = (c & 0x07u) << 18 | (s[i + 1] & 0x3Fu) << 12 | (s[i + 2] & 0x3Fu) << 6 | (s[i + 3] & 0x3Fu);
        }
        n++;
        i += k;
    }
    return n;
}

size_t utf8_put(char *b, uint32_t c)
{
    if (c < 0x80) {
        b[0] = (char)c;
        return 1;
    }
    if (c < 0x800) {
        b[0] = (char)(0xC0 | c >> 6), b[1] = (char)(0x80 | (c & 0x3F));
        return 2;
    }
    if (c < 0x10000) {
        b[0] = (char)(0xE0 | c >> 12), b[1] = (char)(0x80 | (c >> 6 & 0x3F)), b[2] = (char)(0x80 | (c & 0x3F));
        return 3;
    }
    if (c > 0x10FFFF)
        return utf8_put(b, 0xFFFD);
    b[0] = (char)(0xF0 | c >> 18), b[1] = (char)(0x80 | (c >> 12 & 0x3F));
    b[2] = (char)(0x80 | (c >> 6 & 0x3F)), b[3] = (char)(0x80 | (c & 0x3F));
    return 4;
}

/* GPT-2's bytes_to_unicode: '!'..'~', U+00A1..U+00AC, U+00AE..U+00FF map to themselves; the
 * remaining bytes, in order, to U+0100, U+0101, ... */
static int byte_is_printable(int b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; }

static void byte_alphabet(struct bpe_data *d)
{
    uint32_t next = 0x100;
    for (int b = 0; b < 256; b++)
        d->enc_len[b] = (uint8_t)utf8_put(d->enc[b], byte_is_printable(b) ? (uint32_t)b : next++);
}

/* The byte a character of the alphabet stands for, or -1. */
int bpe_char_byte(uint32_t c)
{
    if (c < 256 && byte_is_printable((int)c))
        return (int)c;
    if (c >= 0x100 && c < 0x100 + 68) {
        uint32_t k = c - 0x100;
        for (int b = 0; b < 256; b++)
            if (!byte_is_printable(b) && k-- == 0)
                return b;
    }
    return -1;
}

/* ---------------------------------------------------------------- merges */

static uint64_t hash_pair(const char *a, size_t na, const char *b, size_t nb)
{
    uint64_t h = 0xcbf29ce484222325ull;   /* FNV-1a over a, a separator that a byte cannot be, b */
    for (size_t i = 0; i < na; i++)
        h = (h ^ (uint8_t)a[i]) * 0x100000001b3ull;
    h = (h ^ 0x1FF) * 0x100000001b3ull;
    for (size_t i = 0; i < nb; i++)
        h = (h ^ (uint8_t)b[i]) * 0x100000001b3ull;
    return h ^ (h >> 29);
}

static int32_t merge_rank(const struct bpe_data *d, const char *a, size_t na, const char *b, size_t nb)
{
    for (size_t i = hash_pair(a, na, b, nb) & d->mmask;; i = (i + 1) & d->mmask) {
        int32_t k = d->mslots[i];
        const merge *m;
        if (k < 0)
            return -1;
        m = &d->merges[k];
        if (m->n1 == na && m->n2 == nb && memcmp(d->mtext + m->off, a, na) == 0 &&
            memcmp(d->mtext + m->off + na, b, nb) == 0)
            return m->rank;
    }
}

void bpe_data_free(struct bpe_data *d)
{
    if (!d)
        return;
    pretok_free(d->pre);
    MS_FREE_ALL(d->merges, d->mtext, d->mslots, d);
}

/* Each merge is "first second", split at the first space after the first byte (llama.cpp:
 * word.find(' ', 1)); a line without one is the pair ("", "") as in llama.cpp, which never
 * matches. The first line of a pair wins. */
static int merges_build(struct bpe_data *d, size_t n, const char *const *lines, const size_t *lens)
{
    size_t total = 0, cap = 16;

    if (n > INT32_MAX)
        return ms_err(MS_EINVALID, "tokenizer: %zu merges, more than %d", n, INT32_MAX);
    for (size_t i = 0; i < n; i++) {
        size_t len = lens ? lens[i] : strlen(lines[i]);
        if (len > 2 * TOKENIZER_MAX_TOKEN_LEN)
            return ms_err(MS_EINVALID, "tokenizer: merge %zu is %zu bytes, more than %u", i, len,
                          2 * TOKENIZER_MAX_TOKEN_LEN);
        total += len;
    }
    if (total > UINT32_MAX)
        return ms_err(MS_EINVALID, "tokenizer: merges hold %zu bytes, more than 4 GiB", total);
    while (cap < n * 2)
        cap *= 2;
    d->merges = malloc((n ? n : 1) * sizeof *d->merges);
    d->mtext = malloc(total ? total : 1);
    d->mslots = malloc(cap * sizeof *d->mslots);
    if (!d->merges || !d->mtext || !d->mslots)
        return ms_err(MS_ENOMEM, "tokenizer: out of memory for %zu merges", n);
    memset(d->mslots, 0xff, cap * sizeof *d->mslots);
    d->mmask = cap - 1;
    total = 0;
    for (size_t i = 0; i < n; i++) {
        const char *s = lines[i];
        size_t len = lens ? lens[i] : strlen(s), sp = 1, h;
        merge *m = &d->merges[d->n_merges];

        while (sp < len && s[sp] != ' ')
            sp++;
        if (sp >= len)
            len = sp = 0;   /* no separator: ("", "") */
        *m = (merge){ (uint32_t)total, (uint32_t)sp, (uint32_t)(len ? len - sp - 1 : 0), (int32_t)i };
        memcpy(d->mtext + total, s, sp);
        if (len)
            memcpy(d->mtext + total + sp, s + sp + 1, len - sp - 1);
        if (merge_rank(d, s, m->n1, s + sp + (len ? 1 : 0), m->n2) >= 0)
            continue;   /* a repeated pair keeps its first rank */
        for (h = hash_pair(s, m->n1, s + sp + (len ? 1 : 0), m->n2) & d->mmask; d->mslots[h] >= 0; h = (h + 1) & d->mmask)
            ;
        d->mslots[h] = (int32_t)d->n_merges++;
        total += m->n1 + m->n2;
    }
    return 0;
}

int tokenizer_new_bpe(tokenizer **out, size_t n_vocab, const char *const *tokens, const size_t *token_lens,
                      const int32_t *types, size_t n_merges, const char *const *merges, const size_t *merge_lens,
                      const char *pre, const tokenizer_special *special)
{
    tokenizer_special sp;
    tokenizer *t = calloc(1, sizeof *t);
    int ignore_merges = 0, add_bos = 0, rc;

    *out = NULL;
    if (!t || !(t->bpe = calloc(1, sizeof *t->bpe))) {
        free(t);
        return ms_err(MS_ENOMEM, "tokenizer: out of memory");
    }
    t->kind = TOKENIZER_BPE;
    if ((rc = pretok_new(&t->bpe->pre, pre ? pre : "default", &ignore_merges, &add_bos)) < 0)
        goto fail;
    t->bpe->ignore_merges = ignore_merges;
    byte_alphabet(t->bpe);
    if (!special) {
        tokenizer_special_init_bpe(&sp);
        sp.add_bos = add_bos;
        special = &sp;
    }
    if (n_merges > 0 && !merges) {
        rc = ms_err(MS_EINVALID, "tokenizer: %zu merges without their texts", n_merges);
        goto fail;
    }
    if ((rc = merges_build(t->bpe, n_merges, merges, merge_lens)) < 0 ||
        (rc = tok_vocab_build(t, n_vocab, tokens, token_lens, NULL, types, special)) < 0)
        goto fail;
    t->add_space_prefix = 0;   /* byte-level BPE keeps spaces as they are */
    *out = t;
    return 0;
fail:
    tokenizer_free(t);
    return rc;
}

const char *tokenizer_pre_name(const tokenizer *t) { return t->bpe ? pretok_name(t->bpe->pre) : NULL; }

/* ---------------------------------------------------------------- encoding */

typedef tok_symbol symbol;   /* bytes of the spelled word */


typedef struct bpe_ctx {
    const struct bpe_data *d;
    const char *w;
} bpe_ctx;

static void try_add(void *ctx, const symbol *sym, tok_heap *h, long l, long r)
{
    const struct bpe_data *d = ((const bpe_ctx *)ctx)->d;
    const char *w = ((const bpe_ctx *)ctx)->w;
    int32_t rank;
    if (l < 0 || r < 0)
        return;
    rank = merge_rank(d, w + sym[l].start, sym[l].n, w + sym[r].start, sym[r].n);
    if (rank >= 0)
        tok_heap_push(h, (tok_bigram){ -(float)rank, l, r, sym[l].n + sym[r].n });   /* lower rank first */
}

static int emit(const tokenizer *t, const char *s, size_t n, tok_ids *out)
{
    int32_t id = tok_find(t, s, n);
    int rc;

    if (id >= 0)
        return tok_ids_push(out, id);
    for (size_t j = 0; j < n; j++)   /* llama.cpp: each byte that is a token; the rest vanish */
        if ((id = tok_find(t, s + j, 1)) >= 0 && (rc = tok_ids_push(out, id)) < 0)
            return rc;
    return 0;
}

/* One spelled word w[0..len): merge and emit. sym / h->v hold room for len symbols / 3 len bigrams. */
static int merge_word(const tokenizer *t, const char *w, size_t len, symbol *sym, tok_heap *h, tok_ids *out)
{
    size_t n = 0;
    int rc = 0;

    if (t->bpe->ignore_merges && tok_find(t, w, len) >= 0)
        return tok_ids_push(out, tok_find(t, w, len));
    for (size_t off = 0; off < len; n++) {
        unsigned c = (unsigned char)w[off];
        size_t l = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
        sym[n] = (symbol){ off, l < len - off ? l : len - off, (long)n - 1, 0 };
        off += sym[n].n;
        sym[n].next = off == len ? -1 : (long)n + 1;
    }
    h->n = 0;
    tok_merge_run(sym, n, h, try_add, &(bpe_ctx){ t->bpe, w });
    for (long i = 0; n > 0 && i != -1 && rc == 0; i = sym[i].next)
        rc = emit(t, w + sym[i].start, sym[i].n, out);
    return rc;
}

/* Room for a spelled word of `need` bytes: that many symbols, three bigrams per symbol (the
 * initial pairs plus two per merge). */
static int word_room(char **w, symbol **sym, tok_heap *h, size_t *cap, size_t need)
{
    size_t c = *cap ? *cap : 64;
    char *nw;
    symbol *ns;
    tok_bigram *nb;

    if (need <= *cap)
        return 0;
    while (c < need)
        c *= 2;
    if (!(nw = realloc(*w, c)))
        goto nomem;
    *w = nw;
    if (!(ns = realloc(*sym, c * sizeof *ns)))
        goto nomem;
    *sym = ns;
    if (!(nb = realloc(h->v, c * 3 * sizeof *nb)))
        goto nomem;
    h->v = nb;
    *cap = c;
    return 0;
nomem:
    return ms_err(MS_ENOMEM, "tokenizer: out of memory for a word of %zu bytes", need);
}

/* One raw fragment: code points, words, spelling, merges. */
static int bpe_tokenize(const tokenizer *t, const char *text, size_t len, tok_ids *out)
{
    const struct bpe_data *d = t->bpe;
    uint32_t *cpts = NULL;
    size_t *bounds = NULL, n_words = 0, n, cap = 0;
    char *w = NULL;
    symbol *sym = NULL;
    tok_heap h = { NULL, 0 };
    int rc = 0;

    if (len == 0)
        return 0;
    if (!(cpts = malloc(len * sizeof *cpts))) {
        rc = ms_err(MS_ENOMEM, "tokenizer: out of memory for %zu bytes of text", len);
        goto done;
    }
    n = utf8_to_cpts(text, len, cpts);
    if ((rc = pretok_split(d->pre, cpts, n, &bounds, &n_words)) < 0)
        goto done;
    for (size_t k = 0; k < n_words && rc == 0; k++) {
        size_t wl = 0;
        /* spelled, a code point takes at most 4 bytes of 2 bytes each */
        if ((rc = word_room(&w, &sym, &h, &cap, (bounds[k + 1] - bounds[k]) * 8)) < 0)
            break;
        for (size_t i = bounds[k]; i < bounds[k + 1]; i++) {
            char u[4];
            size_t ul = utf8_put(u, cpts[i]);
            for (size_t j = 0; j < ul; j++) {
                unsigned char b = (unsigned char)u[j];
                memcpy(w + wl, d->enc[b], d->enc_len[b]);
                wl += d->enc_len[b];
            }
        }
        if (wl > 0)
            rc = merge_word(t, w, wl, sym, &h, out);
    }
done:
    MS_FREE_ALL(cpts, bounds, w, sym, h.v);
    return rc;
}

int bpe_encode(const tokenizer *t, const char *text, size_t len, int add_special, int parse_special, tok_ids *out)
{
    return tok_encode_fragments(t, text, len, add_special, parse_special, bpe_tokenize, out);
}
