/* pretok.c: byte-level BPE pre-tokenizers: llama.cpp's regexes per tokenizer.ggml.pre, run with
 * PCRE2 (UTF + UCP, JIT when the library has it).
 *
 * llama.cpp (unicode_regex_split) runs the regexes of a pre-tokenizer one after the other; each
 * splits every piece the previous ones produced, keeping both the matches and the gaps between
 * them, so no text is ever dropped. Each regex sees one piece at a time, so a look-ahead or "$"
 * stops at the piece's end. We do the same on code points.
 *
 * Where llama.cpp's regex engine sees something other than the text, we show PCRE2 the same:
 *   - white space outside ASCII becomes U+000B (llama.cpp does so because std::regex's \s knows
 *     only ASCII), so \s means exactly llama.cpp's white-space table, whatever PCRE2's is;
 *   - code points PCRE2 cannot hold in UTF-8 (surrogates, past U+10FFFF, from sloppy input that
 *     llama.cpp's decoder accepts) become U+E000, a private-use character: for \p{L}, \p{N},
 *     \p{P} that is "other", as llama.cpp's collapsed categories make them. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer_int.h"

#define MAX_RE 6

/* The regexes, as llama.cpp's llm_tokenizer_bpe writes them for each pre-tokenizer type. */
#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define RE_LLAMA3_HEAD "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
#define RE_LLAMA3_TAIL "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

#define RE_UPPER "[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]"
#define RE_LOWER "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]"
#define RE_NOT_LN "[^\\r\\n\\p{L}\\p{N}]?"
#define RE_TEKKEN_HEAD RE_NOT_LN RE_UPPER "*" RE_LOWER "+|" RE_NOT_LN RE_UPPER "+" RE_LOWER "*|"
#define RE_TEKKEN_TAIL "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
/* o200k: tekken's words with an optional contraction after each; "(?i:'s|...)" spelled out so
 * that PCRE2's Unicode case folding cannot take "'" + U+017F (long s) for "'s". */
#define RE_CONTR "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?"
#define RE_O200K_HEAD RE_NOT_LN RE_UPPER "*" RE_LOWER "+" RE_CONTR "|" RE_NOT_LN RE_UPPER "+" RE_LOWER "*" RE_CONTR "|"

typedef struct pre_def {
    const char *type;                 /* llama.cpp's LLAMA_VOCAB_PRE_TYPE_*, for messages */
    const char *names;                /* tokenizer.ggml.pre values, '|'-separated */
    int ignore_merges, add_bos;
    const char *re[MAX_RE];
} pre_def;

static const pre_def defs[] = {
    { "default", "default|", 0, 0,
      { "[\\p{P}\\$\\+<=>\\^~\\|]+", RE_GPT2, "\\p{N}+", "[0-9][0-9][0-9]" } },
    { "gpt2", "gpt-2|phi-2|jina-es|jina-de|jina-v2-es|jina-v2-de|gigachat|mpt|olmo", 0, 0, { RE_GPT2 } },
    { "starcoder", "starcoder|refact|smollm|codeshell", 0, 0, { "\\p{N}", RE_GPT2 } },
    { "llama3", "llama3|llama-v3|llama-bpe|falcon3|pixtral", 1, 1,
      { RE_LLAMA3_HEAD "\\p{N}{1,3}" RE_LLAMA3_TAIL } },
    { "qwen2", "qwen2|deepseek-r1-qwen", 0, 0, { RE_LLAMA3_HEAD "\\p{N}" RE_LLAMA3_TAIL } },
    { "deepseek-llm", "deepseek-llm", 0, 0,
      { "[\r\n]",
        "\\s?[A-Za-z\xc2\xb5\xc3\x80-\xc3\x96\xc3\x98-\xc3\xb6\xc3\xb8-\xc6\xba\xc6\xbc-\xc6\xbf\xc7\x84-\xca\x93"
        "\xca\x95-\xca\xaf\xcd\xb0-\xcd\xb3\xcd\xb6\xcd\xb7\xcd\xbb-\xcd\xbd\xcd\xbf\xce\x86\xce\x88-\xce\x8a"
        "\xce\x8c\xce\x8e-\xce\xa1\xce\xa3-\xcf\xb5\xcf\xb7-\xd2\x81\xd2\x8a-\xd4\xaf\xd4\xb1-\xd5\x96"
        "\xe1\x82\xa0-\xe1\x83\x85\xe1\x8e\xa0-\xe1\x8f\xb5\xe1\x8f\xb8-\xe1\x8f\xbd\xe1\xb2\x90-\xe1\xb2\xba"
        "\xe1\xb2\xbd-\xe1\xb2\xbf\xe1\xb4\x80-\xe1\xb4\xab\xe1\xb5\xab-\xe1\xb5\xb7\xe1\xb5\xb9-\xe1\xb6\x9a"
        "\xe1\xb8\x80-\xe1\xbc\x95\xe1\xbc\x98-\xe1\xbc\x9d\xe1\xbc\xa0-\xe1\xbd\x85\xe1\xbd\x88-\xe1\xbd\x8d"
        "\xe1\xbd\x90-\xe1\xbd\x97\xe1\xbd\x99\xe1\xbd\x9b\xe1\xbd\x9d\xe1\xbd\x9f-\xe1\xbd\xbd"
        "\xe1\xbe\x80-\xe1\xbe\xb4\xe1\xbe\xb6-\xe1\xbe\xbc\xe1\xbe\xbe\xe1\xbf\x82-\xe1\xbf\x84"
        "\xe1\xbf\x86-\xe1\xbf\x8c\xe1\xbf\x90-\xe1\xbf\x93\xe1\xbf\x96-\xe1\xbf\x9b\xe1\xbf\xa0-\xe1\xbf\xac"
        "\xe1\xbf\xb2-\xe1\xbf\xb4\xe1\xbf\xb6-\xe1\xbf\xbc\xe2\x84\x82\xe2\x84\x87\xe2\x84\x8a-\xe2\x84\x93"
        "\xe2\x84\x95\xe2\x84\x99-\xe2\x84\x9d\xe2\x84\xa4\xe2\x84\xa6\xe2\x84\xa8\xe2\x84\xaa-\xe2\x84\xad"
        "\xe2\x84\xaf-\xe2\x84\xb4\xe2\x84\xb9\xe2\x84\xbc-\xe2\x84\xbf\xe2\x85\x85-\xe2\x85\x89\xe2\x85\x8e"
        "\xe2\x86\x83\xe2\x86\x84\xe2\xb0\x80-\xe2\xb1\xbb\xe2\xb1\xbe-\xe2\xb3\xa4\xe2\xb3\xab-\xe2\xb3\xae"
        "\xe2\xb3\xb2\xe2\xb3\xb3\xea\x99\x80-\xea\x99\xad\xea\x9a\x80-\xea\x9a\x9b\xea\x9c\xa2-\xea\x9d\xaf"
        "\xea\x9d\xb1-\xea\x9e\x87\xea\x9e\x8b-\xea\x9e\x8e\xea\xad\xb0-\xea\xae\xbf\xef\xac\x80-\xef\xac\x86"
        "\xef\xac\x93-\xef\xac\x97\xef\xbc\xa1-\xef\xbc\xba\xef\xbd\x81-\xef\xbd\x9a\xf0\x90\x90\x80-\xf0\x90\x91\x8f"
        "\xf0\x90\x92\xb0-\xf0\x90\x93\x93\xf0\x90\x93\x98-\xf0\x90\x93\xbb\xf0\x90\xb2\x80-\xf0\x90\xb2\xb2"
        "\xf0\x90\xb3\x80-\xf0\x90\xb3\xb2\xf0\x91\xa2\xa0-\xf0\x91\xa3\x9f\xf0\x9e\xa4\x80-\xf0\x9e\xa5\x83]+",
        "\\s?[!-/:-~\xef\xbc\x81-\xef\xbc\x8f\xef\xbc\x9a-\xef\xbd\x9e\xe2\x80\x98-\xe2\x80\x9f\xe3\x80\x80-\xe3\x80\x82]+",
        "\\s+$",
        "[\xe4\xb8\x80-\xe9\xbe\xa5\xe0\xa0\x80-\xe4\xb8\x80\xea\xb0\x80-\xed\x9f\xbf]+",
        "\\p{N}+" } },
    /* deepseek-v3: PCRE2 counts "~" in \p{S}, as Unicode and Hugging Face's tokenizers do; llama.cpp
     * b4748 leaves it out of its ASCII symbols, so " ~x" splits differently there (t5013). */
    { "deepseek-v3", "deepseek-v3", 0, 0,
      { "\\p{N}{1,3}",
        "[\xe4\xb8\x80-\xe9\xbe\xa5\xe3\x81\x80-\xe3\x82\x9f\xe3\x82\xa0-\xe3\x83\xbf]+",
        "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+|"
        " ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+" } },
    /* tekken and gpt-4o: Hugging Face's regexes, not llama.cpp's rewrite of them. std::regex has no
     * \p{Lu}, so llama.cpp writes "letter not in a-z" for the upper-case class and "letter not in
     * A-Z" for the lower-case one, which splits runs of non-ASCII capitals (a capital E-acute before
     * "COLE" is a piece of its own); PCRE2 has the real classes, and with them the pieces are
     * tiktoken's (t5013 checks o200k against js-tiktoken). */
    { "tekken", "tekken", 1, 1, { RE_TEKKEN_HEAD "\\p{N}" RE_TEKKEN_TAIL } },
    { "gpt-4o", "gpt-4o|llama4", 0, 0, { RE_O200K_HEAD "\\p{N}{1,3}" RE_TEKKEN_TAIL } },
    { "deepseek-coder", "deepseek-coder", 0, 0,
      { "[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+",
        "[\xe4\xb8\x80-\xe9\xbe\xa5\xe0\xa0\x80-\xe4\xb8\x80\xea\xb0\x80-\xed\x9f\xbf]+", "\\p{N}" } },
};

struct pretok {
    const pre_def *def;
    pcre2_code *code[MAX_RE];
    int n;
};

static int name_in(const char *names, const char *name)
{
    size_t len = strlen(name);
    for (const char *p = names;;) {
        const char *bar = strchr(p, '|');
        size_t n = bar ? (size_t)(bar - p) : strlen(p);
        if (n == len && memcmp(p, name, len) == 0)
            return 1;
        if (!bar)
            return 0;
        p = bar + 1;
    }
}

void pretok_free(pretok *p)
{
    if (!p)
        return;
    for (int i = 0; i < p->n; i++)
        pcre2_code_free(p->code[i]);
    free(p);
}

const char *pretok_name(const pretok *p) { return p->def->type; }

int pretok_new(pretok **out, const char *name, int *ignore_merges_out, int *add_bos_out)
{
    const pre_def *d = NULL;
    pretok *p;

    *out = NULL;
    for (size_t i = 0; i < sizeof defs / sizeof *defs && !d; i++)
        if (name_in(defs[i].names, name ? name : ""))
            d = &defs[i];
    if (!d)
        return ms_err(MS_EUNSUPPORTED,
                      "unknown pre-tokenizer '%.64s' (known: default, gpt-2, llama3, llama-bpe, qwen2, "
                      "deepseek-llm, deepseek-coder, deepseek-v3, starcoder, tekken, gpt-4o and their "
                      "aliases)", name);
    if (!(p = calloc(1, sizeof *p)))
        return ms_err(MS_ENOMEM, "tokenizer: out of memory");
    p->def = d;
    for (; p->n < MAX_RE && d->re[p->n]; p->n++) {
        int err;
        PCRE2_SIZE at;
        /* DOLLAR_ENDONLY: "$" is the piece's end only, as in std::regex (PCRE2 would also match
         * before a final newline). */
        p->code[p->n] = pcre2_compile((PCRE2_SPTR)d->re[p->n], PCRE2_ZERO_TERMINATED,
                                      PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &err, &at, NULL);
        if (!p->code[p->n]) {
            PCRE2_UCHAR msg[128];
            int which = p->n + 1;
            pcre2_get_error_message(err, msg, sizeof msg);
            pretok_free(p);
            return ms_err(MS_ERROR, "pre-tokenizer '%s': regex %d: %s at offset %zu", d->type, which,
                          (const char *)msg, (size_t)at);
        }
        (void)pcre2_jit_compile(p->code[p->n], PCRE2_JIT_COMPLETE);   /* no JIT: the interpreter */
    }
    *ignore_merges_out = d->ignore_merges;
    *add_bos_out = d->add_bos;
    *out = p;
    return 0;
}

int cpt_is_space(uint32_t c)
{
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
           c == 0x3000;
}

/* What the regex engine sees instead of cpt (see the top of the file). */
static uint32_t shown(uint32_t c)
{
    if (c < 0x80)
        return c;
    if (cpt_is_space(c))
        return 0x0B;
    if ((c >= 0xD800 && c <= 0xDFFF) || c > 0x10FFFF)
        return 0xE000;
    return c;
}

typedef struct spans {
    size_t *v;    /* piece lengths in code points */
    size_t n, cap;
} spans;

static int spans_push(spans *s, size_t len)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        size_t *v = realloc(s->v, cap * sizeof *v);
        if (!v)
            return ms_err(MS_ENOMEM, "tokenizer: out of memory splitting words");
        s->v = v, s->cap = cap;
    }
    s->v[s->n++] = len;
    return 0;
}

/* One regex over one piece: subject bytes [b0, b1) of `subj`; cidx maps byte offsets at
 * character starts to code point indices. */
static int split_piece(pcre2_code *re, const char *subj, size_t b0, size_t b1, const size_t *cidx,
                       pcre2_match_data *md, spans *out)
{
    size_t pos = 0, len = b1 - b0;
    int rc;

    while (pos < len) {
        PCRE2_SIZE *ov;
        size_t ms, me;

        /* NO_UTF_CHECK: the subject is valid UTF-8 by construction, and PCRE2 would otherwise
         * check all of it on every call: quadratic in the piece's length. */
        rc = pcre2_match(re, (PCRE2_SPTR)(subj + b0), len, pos, PCRE2_NO_UTF_CHECK, md, NULL);
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT)   /* deep backtracking: the interpreter has the heap */
            rc = pcre2_match(re, (PCRE2_SPTR)(subj + b0), len, pos, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH)
            break;
        if (rc < 0) {
            PCRE2_UCHAR msg[128];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return ms_err(MS_ERROR, "tokenizer: pre-tokenizer regex failed: %s", (const char *)msg);
        }
        ov = pcre2_get_ovector_pointer(md);
        ms = ov[0], me = ov[1];
        if (me == ms) {   /* no pattern here matches empty; step over a character if one did */
            me = ms + 1;
            while (me < len && ((unsigned char)subj[b0 + me] & 0xC0) == 0x80)
                me++;
            pos = me;
            continue;
        }
        if (ms > pos && (rc = spans_push(out, cidx[b0 + ms] - cidx[b0 + pos])) < 0)
            return rc;
        if ((rc = spans_push(out, cidx[b0 + me] - cidx[b0 + ms])) < 0)
            return rc;
        pos = me;
    }
    if (pos < len && (rc = spans_push(out, cidx[b1] - cidx[b0 + pos])) < 0)
        return rc;
    return 0;
}

int pretok_split(const pretok *p, const uint32_t *cpts, size_t n, size_t **bounds_out, size_t *n_words_out)
{
    char *subj = NULL;
    size_t *boff = NULL, *cidx = NULL, nb = 0;
    spans cur = { 0 }, next = { 0 };
    pcre2_match_data *md = NULL;
    int rc = 0;

    *bounds_out = NULL;
    *n_words_out = 0;
    subj = malloc(n * 4 + 1);
    boff = malloc((n + 1) * sizeof *boff);
    cidx = malloc((n * 4 + 1) * sizeof *cidx);
    md = pcre2_match_data_create(1, NULL);
    if (!subj || !boff || !cidx || !md) {
        rc = ms_err(MS_ENOMEM, "tokenizer: out of memory for %zu code points", n);
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        size_t k = utf8_put(subj + nb, shown(cpts[i]));
        boff[i] = nb;
        cidx[nb] = i;
        nb += k;
    }
    boff[n] = nb;
    cidx[nb] = n;
    if ((rc = spans_push(&cur, n)) < 0)
        goto done;
    for (int r = 0; r < p->n; r++) {
        size_t c = 0;
        next.n = 0;
        for (size_t i = 0; i < cur.n; i++) {
            if (cur.v[i] > 0 && (rc = split_piece(p->code[r], subj, boff[c], boff[c + cur.v[i]], cidx, md, &next)) < 0)
                goto done;
            c += cur.v[i];
        }
        spans tmp = cur;
        cur = next, next = tmp;
    }
    {
        size_t *b = malloc((cur.n + 1) * sizeof *b), c = 0;
        if (!b) {
            rc = ms_err(MS_ENOMEM, "tokenizer: out of memory splitting words");
            goto done;
        }
        b[0] = 0;
        for (size_t i = 0; i < cur.n; i++)
            b[i + 1] = (c += cur.v[i]);
        *bounds_out = b;
        *n_words_out = cur.n;
    }
done:
    pcre2_match_data_free(md);
    MS_FREE_ALL(subj, boff, cidx, cur.v, next.v);
    return rc;
}
