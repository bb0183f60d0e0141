/* tokenizer_int.h: what the files of src/tokenizer share; not part of the module's surface. */
#ifndef MSTORE_TOKENIZER_INT_H
#define MSTORE_TOKENIZER_INT_H

#include "tokenizer/tokenizer.h"

/* attr[i]: the token type (after llama.cpp's overrides) in the low bits, plus flags. */
#define ATTR_TYPE_MASK 0x07
#define ATTR_LSTRIP 0x10   /* drop whitespace left of this token when matching it in text */
#define ATTR_RSTRIP 0x20   /* drop whitespace right of it */
#define ATTR_EOG 0x40      /* generation stops here */
#define ATTR_SHOWN 0x80    /* a control token decoded as its text all the same (harmony's markers) */

struct tokenizer {
    tokenizer_kind kind;
    size_t n_vocab;
    char *text;            /* every token's text, back to back */
    size_t *text_off;      /* n_vocab + 1 offsets into text */
    float *scores;
    uint8_t *attr;
    char *piece;           /* decoded pieces (as with TOKENIZER_DECODE_SPECIAL), back to back */
    size_t *piece_off;     /* n_vocab + 1 */
    int32_t *slots;        /* open-addressing hash text -> id; -1 empty; size mask + 1 */
    size_t mask;
    int32_t byte_tok[256]; /* SPM byte fallback: "<0xXX>", else the 1-byte token, else -1 */
    int32_t *specials;     /* control / user-defined / unknown ids, longest text first */
    size_t n_specials;
    int32_t bos, eos, unk, pad, eot, eom;
    int add_bos, add_eos, add_space_prefix;
    struct bpe_data *bpe;  /* TOKENIZER_BPE: merges and pre-tokenizer (bpe.c); NULL for SPM */
    struct wpm_data *wpm;  /* TOKENIZER_WPM: switches and the token trie (wpm.c) */
};

/* A growable id array. */
typedef struct tok_ids {
    int32_t *v;
    size_t n, cap;
} tok_ids;
int tok_ids_push(tok_ids *a, int32_t id);   /* MS_ENOMEM */

/* The id whose text is s[0..len) (the highest such id), or -1. */
int32_t tok_find(const tokenizer *t, const char *s, size_t len);
static inline int tok_type(const tokenizer *t, int32_t id) { return t->attr[id] & ATTR_TYPE_MASK; }

/* Build the common vocab tables (texts, hash, attrs, specials, pieces) into a calloc'd `t`
 * whose kind and special ids are set by the caller afterwards. */
/* A tokenizer of `kind` with its vocabulary built (special: not NULL); the kind's own data is the
 * caller's to add. */
int tok_new_vocab(tokenizer **out, tokenizer_kind kind, size_t n_vocab, const char *const *tokens,
                  const size_t *token_lens, const float *scores, const int32_t *types, const tokenizer_special *special);
int tok_vocab_build(tokenizer *t, size_t n_vocab, const char *const *tokens, const size_t *token_lens,
                    const float *scores, const int32_t *types, const tokenizer_special *sp);

/* The input split at special tokens: each fragment is raw text (id == TOKEN_NONE) or one token. */
typedef struct tok_frag {
    size_t off, len;
    int32_t id;
} tok_frag;
int tok_partition(const tokenizer *t, const char *text, size_t len, int parse_special, tok_frag **out,
                  size_t *n_out);
/* An encode of the kinds whose raw fragments are tokenized each on its own (BPE, WordPiece): BOS
 * as add_special asks, tok_partition, `fragment` on each raw fragment, special ids as they are,
 * then EOS. (SPM carries state from one fragment to the next, so it has its own loop.) */
typedef int (*tok_fragment_fn)(const tokenizer *t, const char *text, size_t len, tok_ids *out);
int tok_encode_fragments(const tokenizer *t, const char *text, size_t len, int add_special, int parse_special,
                         tok_fragment_fn fragment, tok_ids *out);

/* SPM: append the ids of one raw fragment. `text` is already escaped ("▁" for spaces). */
int spm_tokenize(const tokenizer *t, const char *text, size_t len, tok_ids *out);
int spm_encode(const tokenizer *t, const char *text, size_t len, int add_special, int parse_special, tok_ids *out);

/* ---------------------------------------------------------------- byte-level BPE (bpe.c, pretok.c) */

/* Decode UTF-8 into code points as llama.cpp's unicode_cpts_from_utf8 does: no check for
 * overlong forms or surrogates, and each byte that starts no complete sequence becomes U+FFFD.
 * cpts needs len entries. Returns the number of code points. */
size_t utf8_to_cpts(const char *s, size_t len, uint32_t *cpts);
/* Append cpt's UTF-8 (1..4 bytes; a code point past U+10FFFF as U+FFFD) to buf; returns bytes. */
size_t utf8_put(char *buf, uint32_t cpt);
/* 1 for the white space llama.cpp's tables know (ASCII \t..\r and space, U+0085, U+00A0,
 * U+1680, U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000). */
int cpt_is_space(uint32_t cpt);

/* A pre-tokenizer: the regexes llama.cpp runs for one tokenizer.ggml.pre, applied in turn, each
 * splitting every piece the previous ones left (matches and the gaps between them both become
 * pieces). */
typedef struct pretok pretok;
/* MS_EUNSUPPORTED "unknown pre-tokenizer 'x'" (listing the known ones), MS_ERROR when PCRE2
 * refuses a pattern, MS_ENOMEM. *ignore_merges_out / *add_bos_out: what llama.cpp sets for
 * that pre-tokenizer (Llama 3: a word that is a token is taken whole; BOS is added). */
int pretok_new(pretok **out, const char *name, int *ignore_merges_out, int *add_bos_out);
void pretok_free(pretok *p);
const char *pretok_name(const pretok *p);
/* Split cpts[0..n) into words: *bounds_out (malloc'd) holds n_words + 1 code point offsets,
 * bounds[0] = 0, bounds[n_words] = n. MS_ENOMEM, MS_ERROR (a PCRE2 match error). */
int pretok_split(const pretok *p, const uint32_t *cpts, size_t n, size_t **bounds_out, size_t *n_words_out);

void bpe_data_free(struct bpe_data *b);
/* The byte that character c of GPT-2's byte alphabet stands for, or -1. */
int bpe_char_byte(uint32_t c);
int bpe_encode(const tokenizer *t, const char *text, size_t len, int add_special, int parse_special, tok_ids *out);

/* ---------------------------------------------------------------- WordPiece (wpm.c, ucd.c) */

/* Build t->wpm (the switches and a byte trie of every token's text) for a `t` whose vocab
 * tables are built. MS_ENOMEM. */
int wpm_data_new(tokenizer *t, const tokenizer_wpm_opts *opts);
void wpm_data_free(struct wpm_data *w);
int wpm_encode(const tokenizer *t, const char *text, size_t len, int add_special, int parse_special, tok_ids *out);

/* ucd.c, generated by ucd_gen.py from the UCD's UnicodeData.txt (see there what each holds).
 * Sorted by code point. */
enum { UCD_CONTROL = 1, UCD_PUNCT = 2, UCD_SYMBOL = 4 };
typedef struct ucd_range { uint32_t first, flags; } ucd_range;   /* flags up to the next first */
typedef struct ucd_map { uint32_t from, to; } ucd_map;
typedef struct ucd_map3 { uint32_t first, last, to; } ucd_map3;
extern const ucd_range ucd_flags[];
extern const size_t ucd_flags_n;
extern const ucd_map3 ucd_nfd[];
extern const size_t ucd_nfd_n;
extern const ucd_map ucd_lower[];
extern const size_t ucd_lower_n;

/* Merge candidates for SPM and BPE (merge.c): a max-heap on key, ties to the leftmost pair, as
 * llama.cpp orders them. SPM's key is the merged token's score; BPE's is minus the merge rank
 * (exact in a float for ranks below 2^24). */
typedef struct tok_bigram {
    float key;
    long left, right;
    size_t size;   /* bytes of left + right when pushed: detects stale entries */
} tok_bigram;
typedef struct tok_heap {
    tok_bigram *v;   /* caller-allocated, room for every push */
    size_t n;
} tok_heap;
void tok_heap_push(tok_heap *h, tok_bigram b);
tok_bigram tok_heap_pop(tok_heap *h);   /* h->n > 0 */

/* A run of text bytes while merging; n == 0 once merged into its left neighbour. */
typedef struct tok_symbol {
    size_t start, n;
    long prev, next;   /* -1 at the ends */
} tok_symbol;
/* Pushes the pair (left, right) onto h if the tokenizer would merge it; either may be -1. */
typedef void (*tok_offer_fn)(void *ctx, const tok_symbol *sym, tok_heap *h, long left, long right);
/* The merge loop SPM and BPE share: offers the n - 1 adjacent pairs of sym[0..n), then merges
 * the best live pair and offers its two new neighbour pairs until the heap is empty. */
void tok_merge_run(tok_symbol *sym, size_t n, tok_heap *h, tok_offer_fn offer, void *ctx);

#endif
