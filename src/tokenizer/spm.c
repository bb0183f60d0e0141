/* spm.c: the SentencePiece-style tokenizer as llama.cpp runs it (llm_tokenizer_spm_session).
 *
 * The text (spaces already turned into U+2581) is cut into UTF-8 characters, each a symbol in a
 * doubly linked list. Every adjacent pair whose concatenation is a token goes into a max-heap
 * keyed by that token's score (ties: the leftmost pair first). Popping the best pair merges the
 * right symbol into the left one and offers the two new pairs around it; entries whose symbols
 * changed since they were pushed are stale and skipped. Each merge pushes at most two entries, so
 * the heap sees at most 3n and the whole run is O(n log n). Finally each symbol becomes its token,
 * or, when its text is not a token (a character outside the vocab), one byte token per byte. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer_int.h"

typedef tok_symbol symbol;


typedef struct spm_ctx {
    const tokenizer *t;
    const char *text;
} spm_ctx;

static void try_add(void *ctx, const symbol *sym, tok_heap *h, long left, long right)
{
    const tokenizer *t = ((const spm_ctx *)ctx)->t;
    const char *text = ((const spm_ctx *)ctx)->text;
    size_t size;
    int32_t id;

    if (left < 0 || right < 0)
        return;
    size = sym[left].n + sym[right].n;
    id = tok_find(t, text + sym[left].start, size);
    if (id < 0)
        return;
    tok_heap_push(h, (tok_bigram){ t->scores[id], left, right, size });
}

static size_t utf8_len(unsigned char c)
{
    /* llama.cpp's unicode_len_utf8: by the high nibble, no validation (a stray continuation
     * byte is a 1-byte character). */
    static const size_t lookup[16] = { 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4 };
    return lookup[c >> 4];
}

static int emit_symbol(const tokenizer *t, const char *s, size_t n, tok_ids *out)
{
    int32_t id = tok_find(t, s, n);
    int rc;

    if (id >= 0)
        return tok_ids_push(out, id);
    for (size_t j = 0; j < n; j++) {
        unsigned char b = (unsigned char)s[j];
        id = t->byte_tok[b] >= 0 ? t->byte_tok[b] : t->unk;
        if (id < 0)
            return ms_err(MS_EINVALID, "tokenizer: byte 0x%02X has no token and the vocab has no unknown token", b);
        if ((rc = tok_ids_push(out, id)) < 0)
            return rc;
    }
    return 0;
}

int spm_tokenize(const tokenizer *t, const char *text, size_t len, tok_ids *out)
{
    symbol *sym = NULL;
    tok_heap h = { NULL, 0 };
    size_t n = 0, cap;
    int rc = 0;

    if (len == 0)
        return 0;
    if (ms_mul(&cap, len, 3 * sizeof *h.v) < 0)
        return ms_err(MS_ENOMEM, "tokenizer: text of %zu bytes is too long", len);
    sym = malloc(len * sizeof *sym);
    h.v = malloc(cap);
    if (!sym || !h.v) {
        rc = ms_err(MS_ENOMEM, "tokenizer: out of memory for %zu bytes of text", len);
        goto done;
    }
    for (size_t off = 0; off < len; n++) {
        size_t l = utf8_len((unsigned char)text[off]);
        sym[n].start = off;
        sym[n].n = l < len - off ? l : len - off;
        off += sym[n].n;
        sym[n].prev = (long)n - 1;
        sym[n].next = off == len ? -1 : (long)n + 1;
    }
    tok_merge_run(sym, n, &h, try_add, &(spm_ctx){ t, text });
    /* llama.cpp re-splits a symbol that is not a token along the merges that built it; but a
     * merge only happens when the merged text is a token, so only single characters can miss,
     * and those go to bytes. */
    for (long i = 0; i != -1 && rc == 0; i = sym[i].next)
        rc = emit_symbol(t, text + sym[i].start, sym[i].n, out);
done:
    free(sym);
    free(h.v);
    return rc;
}

/* Fragment text with the space prefix and every ' ' turned into U+2581 (llama_escape_whitespace). */
static char *escape(const char *s, size_t len, int prefix, size_t *len_out)
{
    size_t spaces = prefix, n;
    char *e, *p;

    for (size_t i = 0; i < len; i++)
        spaces += s[i] == ' ';
    if (ms_mul(&n, spaces, 2) < 0 || ms_add(&n, n, len + prefix) < 0 || !(e = malloc(n ? n : 1)))
        return NULL;
    p = e;
    if (prefix)
        memcpy(p, "\xe2\x96\x81", 3), p += 3;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == ' ')
            memcpy(p, "\xe2\x96\x81", 3), p += 3;
        else
            *p++ = s[i];
    }
    *len_out = n;
    return e;
}

int spm_encode(const tokenizer *t, const char *text, size_t len, int add_special, int parse_special, tok_ids *out)
{
    tok_frag *frags = NULL;
    size_t n_frags = 0;
    int prev_special = 1;   /* the start counts as "after a special token": it gets the prefix */
    int rc;

    if (add_special && t->add_bos && (rc = tok_ids_push(out, t->bos)) < 0)
        return rc;
    if ((rc = tok_partition(t, text, len, parse_special, &frags, &n_frags)) < 0)
        return rc;
    for (size_t i = 0; i < n_frags && rc == 0; i++) {
        if (frags[i].id != TOKEN_NONE) {
            rc = tok_ids_push(out, frags[i].id);
            prev_special = 1;
        } else {
            size_t elen = 0;
            char *e = escape(text + frags[i].off, frags[i].len, t->add_space_prefix && prev_special, &elen);
            if (!e) {
                rc = ms_err(MS_ENOMEM, "tokenizer: out of memory for %zu bytes of text", frags[i].len);
                break;
            }
            rc = spm_tokenize(t, e, elen, out);
            free(e);
            prev_special = 0;
        }
    }
    free(frags);
    if (rc == 0 && add_special && t->add_eos)
        rc = tok_ids_push(out, t->eos);
    return rc;
}
