/* test_tokenizer.c: the tokenizer (src/tokenizer): SPM merging on a hand-made vocab, the buffer
 * contracts, refusals of corrupt vocabs (arrays and GGUF), and exact agreement with llama.cpp's
 * test vectors (SPM, BPE and WordPiece), llama2.c's Llama 2 vectors and the stories260K prompt
 * counts. WordPiece on hand-made vocabs and from tokenizer.json: test_tokenizer_wpm.c. */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "format/format.h"
#include "helpers/fixture.h"
#include "tokenizer/tokenizer.h"

#define SP "\xe2\x96\x81"   /* U+2581, SentencePiece's space */

/* ---------------------------------------------------------------- a hand-made vocab */

enum { T_UNK, T_BOS, T_EOS, T_SP, T_A, T_B, T_C, T_AB, T_BC, T_SPA, T_AA, T_XC3, T_X0A, T_USER, T_CTRL, T_N };
static const char *const tiny_text[T_N] = { "<unk>", "<s>", "</s>", SP, "a", "b", "c", "ab", "bc", SP "a",
                                            "aa", "<0xC3>", "<0x0A>", "<U>", "<C>" };
static const float tiny_score[T_N] = { 0, 0, 0, -5, -5, -5, -5, -1, -0.5f, -2, -1, 0, 0, 0, 0 };
static const int32_t tiny_type[T_N] = { 2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 6, 6, 4, 3 };

static tokenizer *tiny(const tokenizer_special *sp)
{
    tokenizer *t;
    ck_assert_int_eq(tokenizer_new_spm(&t, T_N, tiny_text, NULL, tiny_score, tiny_type, sp), 0);
    ck_assert_ptr_nonnull(t);
    return t;
}

/* Encode and compare with the expected ids (terminated by -1). */
static void expect_ids(const tokenizer *t, const char *text, int add_special, int parse_special, const int32_t *want)
{
    int32_t got[256];
    size_t n, n_want = 0;

    while (want[n_want] != -1)
        n_want++;
    ck_assert_msg(tokenizer_encode(t, text, strlen(text), add_special, parse_special, got, 256, &n) == 0, "%s",
                  ms_err_msg());
    ck_assert_msg(n == n_want, "'%s': %zu ids, want %zu", text, n, n_want);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(got[i] == want[i], "'%s': id %zu is %d, want %d", text, i, got[i], want[i]);
}

START_TEST(spm_merges_highest_score_first)
{
    tokenizer *t = tiny(NULL);
    /* "▁abc": bc (-0.5) beats ab (-1), then ▁a (-2) merges; "abc" is no token. */
    expect_ids(t, "abc", 0, 0, (const int32_t[]){ T_SPA, T_BC, -1 });
    /* "▁ab": ab (-1) beats ▁a (-2), and "▁ab" is no token. */
    expect_ids(t, "ab", 0, 0, (const int32_t[]){ T_SP, T_AB, -1 });
    tokenizer_free(t);
}
END_TEST

START_TEST(spm_breaks_score_ties_leftmost)
{
    tokenizer *t = tiny(NULL);
    /* "▁aaa": the two "aa" pairs tie; the left one wins, leaving ▁ alone ("▁aa" is no token). */
    expect_ids(t, "aaa", 0, 0, (const int32_t[]){ T_SP, T_AA, T_A, -1 });
    tokenizer_free(t);
}
END_TEST

START_TEST(spm_falls_back_to_bytes_then_unknown)
{
    tokenizer *t = tiny(NULL);
    /* é = C3 A9: C3 has a byte token, A9 has none and becomes <unk>. */
    expect_ids(t, "\xc3\xa9\n", 0, 0, (const int32_t[]){ T_SP, T_XC3, T_UNK, T_X0A, -1 });
    tokenizer_free(t);
}
END_TEST

START_TEST(spm_space_prefix_and_specials)
{
    tokenizer_special sp;
    tokenizer *t = tiny(NULL);

    expect_ids(t, "", 0, 0, (const int32_t[]){ -1 });
    expect_ids(t, "", 1, 0, (const int32_t[]){ T_BOS, -1 });
    expect_ids(t, "a", 1, 0, (const int32_t[]){ T_BOS, T_SPA, -1 });
    expect_ids(t, " a", 0, 0, (const int32_t[]){ T_SP, T_SPA, -1 });
    /* User-defined tokens are cut out even without parse_special; the text after a special
     * token gets the space prefix again. */
    expect_ids(t, "a<U>b", 0, 0, (const int32_t[]){ T_SPA, T_USER, T_SP, T_B, -1 });
    /* Control tokens only with parse_special; otherwise "<C>" is text, and its characters have
     * no tokens, not even byte tokens: <unk> each. */
    expect_ids(t, "a<C>", 0, 1, (const int32_t[]){ T_SPA, T_CTRL, -1 });
    expect_ids(t, "a<C>", 0, 0, (const int32_t[]){ T_SPA, T_UNK, T_UNK, T_UNK, -1 });
    expect_ids(t, "<s>", 0, 1, (const int32_t[]){ T_BOS, -1 });
    tokenizer_free(t);

    tokenizer_special_init_spm(&sp);
    sp.add_space_prefix = 0;
    sp.add_eos = 1;
    t = tiny(&sp);
    expect_ids(t, "a", 1, 0, (const int32_t[]){ T_BOS, T_A, T_EOS, -1 });
    expect_ids(t, "a", 0, 0, (const int32_t[]){ T_A, -1 });
    ck_assert_int_eq(tokenizer_adds_eos(t), 1);
    tokenizer_free(t);
}
END_TEST

START_TEST(encode_reports_needed_size)
{
    tokenizer *t = tiny(NULL);
    int32_t ids[2] = { 77, 77 }, *all;
    size_t n;

    ck_assert_int_eq(tokenizer_encode(t, "abc", 3, 1, 0, ids, 1, &n), MS_EINVALID);
    ck_assert_uint_eq(n, 3);
    ck_assert_int_eq(ids[0], T_BOS);
    ck_assert_int_eq(ids[1], 77);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "needs 3 ids, buffer holds 1"));
    ck_assert_int_eq(tokenizer_encode(t, "abc", 3, 1, 0, NULL, 0, &n), MS_EINVALID);
    ck_assert_uint_eq(n, 3);
    ck_assert_int_eq(tokenizer_encode_alloc(t, "abc", 3, 1, 0, &all, &n), 0);
    ck_assert_uint_eq(n, 3);
    ck_assert_int_eq(all[2], T_BC);
    free(all);
    ck_assert_int_eq(tokenizer_encode_alloc(t, "", 0, 0, 0, &all, &n), 0);
    ck_assert_ptr_nonnull(all);
    ck_assert_uint_eq(n, 0);
    free(all);
    tokenizer_free(t);
}
END_TEST

START_TEST(decode_pieces)
{
    tokenizer *t = tiny(NULL);
    char buf[16];
    size_t n;
    const int32_t seq[] = { T_BOS, T_SPA, T_SP, T_BC, T_X0A, T_EOS };

    ck_assert_int_eq(tokenizer_decode_piece(t, T_SPA, 0, buf, sizeof buf, &n), 0);
    ck_assert_uint_eq(n, 2);
    ck_assert_int_eq(memcmp(buf, " a", 2), 0);
    ck_assert_int_eq(tokenizer_decode_piece(t, T_SPA, TOKENIZER_DECODE_LSTRIP, buf, sizeof buf, &n), 0);
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(buf[0], 'a');
    ck_assert_int_eq(tokenizer_decode_piece(t, T_X0A, 0, buf, sizeof buf, &n), 0);
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(buf[0], '\n');
    ck_assert_int_eq(tokenizer_decode_piece(t, T_BOS, 0, buf, sizeof buf, &n), 0);
    ck_assert_uint_eq(n, 0);
    ck_assert_int_eq(tokenizer_decode_piece(t, T_BOS, TOKENIZER_DECODE_SPECIAL, buf, sizeof buf, &n), 0);
    ck_assert_uint_eq(n, 3);
    ck_assert_int_eq(memcmp(buf, "<s>", 3), 0);
    ck_assert_int_eq(tokenizer_decode_piece(t, T_USER, 0, buf, sizeof buf, &n), 0);
    ck_assert_uint_eq(n, 3);
    ck_assert_int_eq(tokenizer_decode_piece(t, T_SPA, 0, buf, 1, &n), MS_EINVALID);
    ck_assert_uint_eq(n, 2);
    ck_assert_int_eq(tokenizer_decode_piece(t, T_N, 0, buf, sizeof buf, &n), MS_EINVALID);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "token id 15 out of range"));
    ck_assert_int_eq(tokenizer_decode_piece(t, -1, 0, buf, sizeof buf, &n), MS_EINVALID);

    ck_assert_int_eq(tokenizer_decode(t, seq, 6, 0, buf, sizeof buf, &n), 0);
    ck_assert_uint_eq(n, 5);
    ck_assert_int_eq(memcmp(buf, "a bc\n", 5), 0);
    ck_assert_int_eq(tokenizer_decode(t, seq, 6, TOKENIZER_DECODE_SPECIAL, buf, sizeof buf, &n), 0);
    ck_assert_uint_eq(n, 5 + 3 + 4);
    ck_assert_int_eq(memcmp(buf, "<s>a bc\n</s>", 12), 0);
    ck_assert_int_eq(tokenizer_decode(t, seq, 6, 0, buf, 2, &n), MS_EINVALID);
    ck_assert_uint_eq(n, 5);
    tokenizer_free(t);
}
END_TEST

/* gpt-oss's harmony: <|end|> parts analysis from final and must not stop generation; <|return|>
 * and <|call|> do. The markers are control tokens yet decode as their text for the splitter. */
START_TEST(harmony_vocab_ends_at_return_and_call_and_shows_markers)
{
    const char *const text[] = { "<unk>", "<s>", "</s>", "<|start|>", "<|end|>", "<|message|>", "<|channel|>",
                                 "<|constrain|>", "<|return|>", "<|call|>", "x" };
    const int32_t type[] = { 2, 3, 3, 3, 3, 3, 3, 3, 3, 3, 1 };
    const int32_t ids[] = { 6, 10, 5, 10, 4, 1 };
    tokenizer *t, *plain;
    char buf[64];
    size_t len;

    ck_assert_int_eq(tokenizer_new_spm(&t, 11, text, NULL, NULL, type, NULL), 0);
    ck_assert_int_eq(tokenizer_is_eog(t, 4), 0);    /* <|end|> */
    ck_assert_int_eq(tokenizer_is_eog(t, 8), 1);    /* <|return|> */
    ck_assert_int_eq(tokenizer_is_eog(t, 9), 1);    /* <|call|> */
    ck_assert_int_eq(tokenizer_is_eog(t, 2), 1);    /* the eos stays */
    ck_assert_int_eq(tokenizer_decode_piece(t, 6, 0, buf, sizeof buf, &len), 0);
    ck_assert_uint_eq(len, 11);
    ck_assert_int_eq(memcmp(buf, "<|channel|>", 11), 0);
    ck_assert_int_eq(tokenizer_decode_piece(t, 1, 0, buf, sizeof buf, &len), 0);
    ck_assert_uint_eq(len, 0);                      /* other control tokens stay hidden */
    ck_assert_int_eq(tokenizer_decode(t, ids, 6, 0, buf, sizeof buf, &len), 0);
    ck_assert_uint_eq(len, sizeof "<|channel|>x<|message|>x<|end|>" - 1);
    ck_assert_int_eq(memcmp(buf, "<|channel|>x<|message|>x<|end|>", len), 0);
    /* without <|call|> it is not harmony: <|end|> ends generation and hides, as before */
    ck_assert_int_eq(tokenizer_new_spm(&plain, 9, text, NULL, NULL, type, NULL), 0);
    ck_assert_int_eq(tokenizer_is_eog(plain, 4), 1);
    ck_assert_int_eq(tokenizer_decode_piece(plain, 6, 0, buf, sizeof buf, &len), 0);
    ck_assert_uint_eq(len, 0);
    tokenizer_free(plain);
    tokenizer_free(t);
}
END_TEST

START_TEST(accessors_and_eog)
{
    const char *const text[] = { "<unk>", "<s>", "</s>", "<|end|>", "x" };
    const int32_t type[] = { 2, 3, 3, 1, 1 };   /* <|end|> claims to be normal: forced to control */
    tokenizer *t;
    size_t len;

    ck_assert_int_eq(tokenizer_new_spm(&t, 5, text, NULL, NULL, type, NULL), 0);
    ck_assert_int_eq(tokenizer_kind_get(t), TOKENIZER_SPM);
    ck_assert_uint_eq(tokenizer_n_vocab(t), 5);
    ck_assert_int_eq(tokenizer_bos(t), 1);
    ck_assert_int_eq(tokenizer_eos(t), 2);
    ck_assert_int_eq(tokenizer_unk(t), 0);
    ck_assert_int_eq(tokenizer_adds_bos(t), 1);
    ck_assert_int_eq(tokenizer_adds_eos(t), 0);
    ck_assert_int_eq(tokenizer_is_eog(t, 2), 1);
    ck_assert_int_eq(tokenizer_is_eog(t, 3), 1);
    ck_assert_int_eq(tokenizer_is_eog(t, 1), 0);
    ck_assert_int_eq(tokenizer_is_eog(t, 99), 0);
    ck_assert_int_eq(tokenizer_token_type(t, 3), TOKEN_TYPE_CONTROL);
    ck_assert_int_eq(tokenizer_token_type(t, 5), -1);
    ck_assert_int_eq(memcmp(tokenizer_token_text(t, 3, &len), "<|end|>", 7), 0);
    ck_assert_uint_eq(len, 7);
    ck_assert_ptr_null(tokenizer_token_text(t, 5, &len));
    tokenizer_free(t);
}
END_TEST

/* ---------------------------------------------------------------- a hand-made byte-level BPE vocab */

enum { B_A, B_B, B_C, B_AB, B_BC, B_ABC, B_G, B_CA, B_AA, B_ATILDE, B_EOT, B_N };
static const char *const bpe_text[B_N] = { "a", "b", "c", "ab", "bc", "abc", "\xc4\xa0" /* Ġ: ' ' */, "ca", "aa",
                                           "\xc3\x83" /* Ã: byte C3 */, "<|eot|>" };
static const int32_t bpe_type[B_N] = { 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 3 };
static const char *const bpe_merges[] = { "b c", "a b", "a bc", "\xc4\xa0 a", "a a", "b c" /* repeated: rank 0 stays */ };

static tokenizer *tiny_bpe(const char *pre)
{
    tokenizer_special sp;
    tokenizer *t;

    tokenizer_special_init_bpe(&sp);
    sp.bos = sp.eos = B_EOT;
    ck_assert_msg(tokenizer_new_bpe(&t, B_N, bpe_text, NULL, bpe_type, 6, bpe_merges, NULL, pre, &sp) == 0, "%s",
                  ms_err_msg());
    return t;
}

START_TEST(bpe_merges_lowest_rank_first)
{
    tokenizer *t = tiny_bpe("gpt-2");
    char buf[32];
    size_t n;

    ck_assert_int_eq(tokenizer_kind_get(t), TOKENIZER_BPE);
    ck_assert_str_eq(tokenizer_pre_name(t), "gpt2");
    /* b c (rank 0) before a b (rank 1); then a bc (rank 2). */
    expect_ids(t, "abc", 0, 0, (const int32_t[]){ B_ABC, -1 });
    /* " ab" is one word spelled "Ġab": a b (1) before Ġ a (3), and "Ġ ab" is no merge. */
    expect_ids(t, "ab ab", 0, 0, (const int32_t[]){ B_AB, B_G, B_AB, -1 });
    /* Ties go to the leftmost pair. */
    expect_ids(t, "aaa", 0, 0, (const int32_t[]){ B_AA, B_A, -1 });
    /* "ca" is a token but no merge makes it: GPT-2 keeps the characters. */
    expect_ids(t, "ca", 0, 0, (const int32_t[]){ B_C, B_A, -1 });
    /* é = C3 A9, spelled "Ã©": "Ã" is a token; "©" is none, nor are its bytes C2 A9: it is
     * dropped, as in llama.cpp. */
    expect_ids(t, "\xc3\xa9", 0, 0, (const int32_t[]){ B_ATILDE, -1 });
    /* Control tokens only with parse_special; BOS only when asked. */
    expect_ids(t, "a<|eot|>", 0, 1, (const int32_t[]){ B_A, B_EOT, -1 });
    ck_assert_int_eq(tokenizer_adds_bos(t), 0);
    ck_assert_int_eq(tokenizer_decode(t, (const int32_t[]){ B_AB, B_G, B_AB, B_ATILDE }, 4, 0, buf, sizeof buf, &n), 0);
    ck_assert_uint_eq(n, 6);
    ck_assert_int_eq(memcmp(buf, "ab ab\xc3", 6), 0);
    tokenizer_free(t);

    /* Llama 3 takes a word that is a token whole, before any merge. */
    t = tiny_bpe("llama-bpe");
    ck_assert_str_eq(tokenizer_pre_name(t), "llama3");
    expect_ids(t, "ca", 0, 0, (const int32_t[]){ B_CA, -1 });
    tokenizer_free(t);
}
END_TEST

/* tekken's and o200k's words split where the case changes, with Unicode's upper- and lower-case
 * classes: "\xc3\x89COLE" (capital E-acute, then ASCII capitals) is one word. llama.cpp's
 * stand-ins for the classes ("letter but not a-z", "letter but not A-Z") make it two,
 * "\xc3\x89" and "COLE", and with them neither case below gives the whole token. */
enum { E_C3, E_89, E_C, E_O, E_L, E_E, E_EACUTE, E_CO, E_LE, E_COLE, E_ECOLE, E_N };
static const char *const ecole_text[E_N] = { "\xc3\x83", "\xc4\xab" /* byte 89 */, "C", "O", "L", "E",
                                             "\xc3\x83\xc4\xab", "CO", "LE", "COLE", "\xc3\x83\xc4\xab" "COLE" };
static const int32_t ecole_type[E_N] = { 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1 };
static const char *const ecole_merges[] = { "\xc3\x83 \xc4\xab", "C O", "L E", "CO LE", "\xc3\x83\xc4\xab COLE" };

START_TEST(bpe_case_classes_are_unicode)
{
    static const char *const pres[] = { "tekken", "gpt-4o" };
    for (size_t i = 0; i < 2; i++) {
        tokenizer_special sp;
        tokenizer *t;
        tokenizer_special_init_bpe(&sp);
        sp.bos = sp.eos = TOKEN_NONE;
        int rc = tokenizer_new_bpe(&t, E_N, ecole_text, NULL, ecole_type, 5, ecole_merges, NULL, pres[i], &sp);
        ck_assert_msg(rc == 0, "%s", ms_err_msg());
        ck_assert_str_eq(tokenizer_pre_name(t), pres[i]);
        expect_ids(t, "\xc3\x89" "COLE", 0, 0, (const int32_t[]){ E_ECOLE, -1 });
        /* a lower-case letter after capitals starts no new word; a capital after one does */
        expect_ids(t, "COLE\xc3\x89", 0, 0, (const int32_t[]){ E_COLE, E_EACUTE, -1 });
        tokenizer_free(t);
    }
}
END_TEST

START_TEST(bpe_refuses_unknown_pre_tokenizer)
{
    tokenizer *t = (tokenizer *)1;
    ck_assert_int_eq(tokenizer_new_bpe(&t, B_N, bpe_text, NULL, bpe_type, 6, bpe_merges, NULL, "klingon-9", NULL),
                     MS_EUNSUPPORTED);
    ck_assert_ptr_null(t);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "unknown pre-tokenizer 'klingon-9'"));
}
END_TEST

/* ---------------------------------------------------------------- refusals: arrays */

static const struct {
    size_t n_vocab;
    int32_t bad_type, bos, eos;
    size_t long_len;
    const char *expect;
} bad_arrays[] = {
    { 0, 1, 1, 2, 0, "vocab size 0 out of range" },
    { 4, 9, 1, 2, 0, "token 3: type 9 out of range (0..6)" },
    { 4, -1, 1, 2, 0, "token 3: type -1 out of range" },
    { 4, 1, 4, 2, 0, "bos token id 4 out of range (vocab has 4 tokens)" },
    { 4, 1, 1, -7, 0, "eos token id -7 out of range" },
    { 4, 1, 1, 2, TOKENIZER_MAX_TOKEN_LEN + 1, "token 3: text is 4097 bytes, more than 4096" },
};

START_TEST(new_spm_refuses_corrupt_vocab)
{
    static char long_text[TOKENIZER_MAX_TOKEN_LEN + 2];
    const char *text[] = { "<unk>", "<s>", "</s>", "x" };
    size_t lens[] = { 5, 3, 4, 1 };
    int32_t type[] = { 2, 3, 3, 1 };
    tokenizer_special sp;
    tokenizer *t = (tokenizer *)1;

    memset(long_text, 'x', sizeof long_text - 1);
    type[3] = bad_arrays[_i].bad_type;
    if (bad_arrays[_i].long_len) {
        text[3] = long_text;
        lens[3] = bad_arrays[_i].long_len;
    }
    tokenizer_special_init_spm(&sp);
    sp.bos = bad_arrays[_i].bos;
    sp.eos = bad_arrays[_i].eos;
    ck_assert_int_eq(tokenizer_new_spm(&t, bad_arrays[_i].n_vocab, text, lens, NULL, type, &sp), MS_EINVALID);
    ck_assert_ptr_null(t);
    ck_assert_msg(strstr(ms_err_msg(), bad_arrays[_i].expect), "'%s' lacks '%s'", ms_err_msg(),
                  bad_arrays[_i].expect);
}
END_TEST

/* ---------------------------------------------------------------- GGUF vocabs */

typedef struct mem {
    uint8_t *p;
    size_t len, cap;
} mem;

static int mem_sink(void *ctx, const void *buf, size_t len)
{
    mem *m = ctx;
    if (m->len + len > m->cap) {
        size_t cap = (m->len + len) * 2;
        uint8_t *p = realloc(m->p, cap);
        if (!p)
            return ms_err(MS_ENOMEM, "out of memory");
        m->p = p, m->cap = cap;
    }
    memcpy(m->p + m->len, buf, len);
    m->len += len;
    return 0;
}

/* What to break in the small GGUF vocab. */
enum { G_OK, G_GPT2, G_T5, G_BERT_CLS, G_BERT_SEP, G_PRE_UNKNOWN, G_MERGES_U32, G_NO_MODEL, G_NO_TOKENS, G_SCORES_SHORT, G_TYPES_LONG, G_BOS_RANGE, G_TOKENS_U32,
       G_TYPE_VALUE, G_SCORES_I32, G_BOOL_TYPE };

static mem tiny_gguf(int variant)
{
    const char *toks[] = { "<unk>", "<s>", "</s>", SP "a", "a", SP };
    float scores[] = { 0, 0, 0, -1, -2, -3, -4 };
    int32_t types[] = { 2, 3, 3, 1, 1, 1, 1 };
    uint32_t u32s[] = { 1, 2, 3, 4, 5, 6 };
    gguf_writer *w;
    mem m = { 0 };

    ck_assert_int_eq(gguf_writer_new(&w, 3, 0), 0);
    ck_assert_int_eq(gguf_writer_set_str(w, "general.name", "tiny", 4), 0);
    if (variant == G_T5)
        ck_assert_int_eq(gguf_writer_set_str(w, "tokenizer.ggml.model", "t5", 2), 0);
    else if (variant == G_BERT_CLS || variant == G_BERT_SEP)
        ck_assert_int_eq(gguf_writer_set_str(w, "tokenizer.ggml.model", "bert", 4), 0);
    else if (variant == G_GPT2 || variant == G_PRE_UNKNOWN || variant == G_MERGES_U32)
        ck_assert_int_eq(gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2", 4), 0);
    else if (variant != G_NO_MODEL)
        ck_assert_int_eq(gguf_writer_set_str(w, "tokenizer.ggml.model", "llama", 5), 0);
    if (variant == G_PRE_UNKNOWN)
        ck_assert_int_eq(gguf_writer_set_str(w, "tokenizer.ggml.pre", "klingon-9", 9), 0);
    if (variant == G_BERT_CLS)
        ck_assert_int_eq(gguf_writer_set_u32(w, "tokenizer.ggml.cls_token_id", 6), 0);
    if (variant == G_BERT_SEP)
        ck_assert_int_eq(gguf_writer_set_str(w, "tokenizer.ggml.seperator_token_id", "2", 1), 0);
    if (variant == G_MERGES_U32)
        ck_assert_int_eq(gguf_writer_set_arr(w, "tokenizer.ggml.merges", GGUF_TYPE_UINT32, u32s, 6), 0);
    if (variant == G_TOKENS_U32)
        ck_assert_int_eq(gguf_writer_set_arr(w, "tokenizer.ggml.tokens", GGUF_TYPE_UINT32, u32s, 6), 0);
    else if (variant != G_NO_TOKENS)
        ck_assert_int_eq(gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, NULL, 6), 0);
    if (variant == G_SCORES_I32)
        ck_assert_int_eq(gguf_writer_set_arr(w, "tokenizer.ggml.scores", GGUF_TYPE_INT32, types, 6), 0);
    else
        ck_assert_int_eq(gguf_writer_set_arr(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores,
                                             variant == G_SCORES_SHORT ? 5 : 6), 0);
    if (variant == G_TYPE_VALUE)
        types[4] = 7;
    ck_assert_int_eq(gguf_writer_set_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types,
                                         variant == G_TYPES_LONG ? 7 : 6), 0);
    ck_assert_int_eq(gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", variant == G_BOS_RANGE ? 6 : 1), 0);
    ck_assert_int_eq(gguf_writer_set_u32(w, "tokenizer.ggml.padding_token_id", 0xFFFFFFFFu), 0);
    if (variant == G_BOOL_TYPE)
        ck_assert_int_eq(gguf_writer_set_u32(w, "tokenizer.ggml.add_bos_token", 1), 0);
    else
        ck_assert_int_eq(gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", 0), 0);
    ck_assert_int_eq(gguf_writer_emit(w, mem_sink, &m), 0);
    gguf_writer_free(w);
    return m;
}

static const struct {
    int variant, code;
    const char *expect;
} bad_gguf[] = {
    { G_GPT2, MS_ENOTFOUND, "tiny.gguf: tokenizer.ggml.merges not found (tokenizer 'gpt2' needs it)" },
    { G_T5, MS_EUNSUPPORTED, "tiny.gguf: tokenizer 't5' is not supported (supported: llama, gpt2, bert)" },
    { G_BERT_CLS, MS_EINVALID, "tiny.gguf: tokenizer.ggml.cls_token_id: token id 6 out of range (vocab has 6 tokens)" },
    { G_BERT_SEP, MS_EINVALID, "tokenizer.ggml.seperator_token_id" },
    { G_PRE_UNKNOWN, MS_EUNSUPPORTED, "tiny.gguf: tokenizer.ggml.pre: unknown pre-tokenizer 'klingon-9'" },
    { G_MERGES_U32, MS_EINVALID, "tokenizer.ggml.merges is an array of u32, expected string" },
    { G_NO_MODEL, MS_ENOTFOUND, "tiny.gguf: no tokenizer (tokenizer.ggml.model not found)" },
    { G_NO_TOKENS, MS_ENOTFOUND, "tokenizer.ggml.tokens not found" },
    { G_SCORES_SHORT, MS_EINVALID, "tokenizer.ggml.scores has 5 entries, tokenizer.ggml.tokens has 6" },
    { G_TYPES_LONG, MS_EINVALID, "tokenizer.ggml.token_type has 7 entries, tokenizer.ggml.tokens has 6" },
    { G_BOS_RANGE, MS_EINVALID, "tokenizer.ggml.bos_token_id: token id 6 out of range (vocab has 6 tokens)" },
    { G_TOKENS_U32, MS_EINVALID, "tokenizer.ggml.tokens is an array of u32, expected string" },
    { G_TYPE_VALUE, MS_EINVALID, "tokenizer.ggml.token_type[4] = 7 out of range (0..6)" },
    { G_SCORES_I32, MS_EINVALID, "tokenizer.ggml.scores is an array of i32, expected f32" },
    { G_BOOL_TYPE, MS_EINVALID, "add_bos_token" },
};

START_TEST(from_gguf_refuses_corrupt_vocab)
{
    mem m = tiny_gguf(bad_gguf[_i].variant);
    gguf_file *g;
    tokenizer *t = (tokenizer *)1;

    ck_assert_int_eq(gguf_open_buf(&g, m.p, m.len, 0, "tiny.gguf"), 0);
    ck_assert_int_eq(tokenizer_from_gguf(&t, g, "tiny.gguf"), bad_gguf[_i].code);
    ck_assert_ptr_null(t);
    ck_assert_msg(strstr(ms_err_msg(), bad_gguf[_i].expect), "'%s' lacks '%s'", ms_err_msg(), bad_gguf[_i].expect);
    gguf_close(g);
    free(m.p);
}
END_TEST

START_TEST(from_gguf_reads_small_vocab)
{
    mem m = tiny_gguf(G_OK);
    gguf_file *g;
    tokenizer *t;

    /* Header only, as the store keeps it: the buffer ends where the data would start. */
    ck_assert_int_eq(gguf_open_buf(&g, m.p, m.len, GGUF_HEADER_ONLY, "tiny.gguf"), 0);
    ck_assert_int_eq(tokenizer_from_gguf(&t, g, "tiny.gguf"), 0);
    gguf_close(g);   /* the tokenizer keeps copies */
    ck_assert_uint_eq(tokenizer_n_vocab(t), 6);
    ck_assert_int_eq(tokenizer_adds_bos(t), 0);   /* add_bos_token false wins over the default */
    /* "▁aa": ▁a (-1) before aa (no token): ▁a, a. No BOS although add_special. */
    expect_ids(t, "aa", 1, 0, (const int32_t[]){ 3, 4, -1 });
    tokenizer_free(t);
    free(m.p);
}
END_TEST

/* ---------------------------------------------------------------- shared models */

static tokenizer *load_vocab(const char *models, const char *rel)
{
    char *path = ms_strdup_printf("%s/%s", models, rel);
    gguf_file *g;
    tokenizer *t = NULL;

    ck_assert_ptr_nonnull(path);
    if (!ms_is_file(path)) {
        printf("test_tokenizer: skipped: %s not found\n", path);
        free(path);
        return NULL;
    }
    ck_assert_msg(gguf_open(&g, path) == 0, "%s", ms_err_msg());
    ck_assert_msg(tokenizer_from_gguf(&t, g, path) == 0, "%s", ms_err_msg());
    gguf_close(g);
    free(path);
    return t;
}

static void expect_round_trip(const tokenizer *t, const char *text, size_t len)
{
    int32_t *ids;
    size_t n, n_text;
    char *buf = malloc(len + 1);

    ck_assert_int_eq(tokenizer_encode_alloc(t, text, len, 1, 0, &ids, &n), 0);
    ck_assert_msg(tokenizer_decode(t, ids, n, 0, buf, len + 1, &n_text) == 0, "%s", ms_err_msg());
    ck_assert_msg(n_text == len && memcmp(buf, text, len) == 0, "round trip of '%.*s' gave '%.*s'", (int)len, text,
                  (int)n_text, buf);
    free(buf);
    free(ids);
}

/* llama.cpp's test-tokenizer-0 files: .inp holds the cases, each followed by the line
 * "__ggml_vocab_test__" (the case is what lies between "\n__ggml_vocab_test__\n" separators,
 * the first starting at the file's start); .out holds one line of ids per case, without BOS. */
static void check_vectors(const char *models, const char *vocab)
{
    static const char sep[] = "\n__ggml_vocab_test__\n";
    char *gguf_rel = ms_strdup_printf("vocab/%s", vocab);
    char *inp_path = ms_strdup_printf("%s/vocab/%s.inp", models, vocab);
    char *out_path = ms_strdup_printf("%s/vocab/%s.out", models, vocab);
    tokenizer *t = load_vocab(models, gguf_rel);
    char *inp = NULL, *outs = NULL, *s, *line;
    size_t inp_len, out_len, n_cases = 0;

    if (!t)
        goto done;
    ck_assert_int_eq(ms_file_read(&inp, &inp_len, inp_path, 1 << 20), 0);
    ck_assert_int_eq(ms_file_read(&outs, &out_len, out_path, 1 << 20), 0);
    s = inp;
    line = outs;
    for (char *e; (e = strstr(s, sep)) != NULL; s = e + strlen(sep), n_cases++) {
        char *nl = strchr(line, '\n'), *p;
        int32_t *ids;
        size_t n, k = 0;

        ck_assert_ptr_nonnull(nl);
        *nl = '\0';
        ck_assert_int_eq(tokenizer_encode_alloc(t, s, (size_t)(e - s), 0, 0, &ids, &n), 0);
        for (p = line; *p;) {
            long want = strtol(p, &p, 10);
            ck_assert_msg(k < n, "%s case %zu '%.*s': too few ids (%zu)", vocab, n_cases, (int)(e - s), s, n);
            ck_assert_msg(ids[k] == want, "%s case %zu '%.*s': id %zu is %d, want %ld", vocab, n_cases, (int)(e - s), s,
                          k, ids[k], want);
            k++;
            while (*p == ' ')
                p++;
        }
        ck_assert_msg(k == n, "%s case %zu: %zu ids, want %zu", vocab, n_cases, n, k);
        free(ids);
        /* WordPiece lowers case, drops accents and spaces before punctuation: no round trip */
        if (tokenizer_kind_get(t) != TOKENIZER_WPM)
            expect_round_trip(t, s, (size_t)(e - s));
        line = nl + 1;
    }
    ck_assert_uint_eq(n_cases, 46);
done:
    tokenizer_free(t);
    free(inp);
    free(outs);
    free(gguf_rel);
    free(inp_path);
    free(out_path);
}

START_TEST(llama_spm_vectors)
{
    char *models = fixture_models_dir();
    if (!models) {
        printf("test_tokenizer: skipped: shared models not found ($MSTORE_TEST_MODELS or $MSTORE_SRC/../shared/models)\n");
        return;
    }
    check_vectors(models, "ggml-vocab-llama-spm.gguf");
    free(models);
}
END_TEST

START_TEST(phi3_vectors)
{
    char *models = fixture_models_dir();
    tokenizer *t;

    if (!models) {
        printf("test_tokenizer: skipped: shared models not found\n");
        return;
    }
    check_vectors(models, "ggml-vocab-phi-3.gguf");
    if ((t = load_vocab(models, "vocab/ggml-vocab-phi-3.gguf")) != NULL) {
        ck_assert_int_eq(tokenizer_eos(t), 32000);
        ck_assert_int_eq(tokenizer_is_eog(t, 32000), 1);   /* <|endoftext|> */
        ck_assert_int_eq(tokenizer_is_eog(t, 32007), 1);   /* <|end|> */
        ck_assert_int_eq(tokenizer_is_eog(t, 1), 0);
        /* "</s>" is user-defined in Phi-3: cut out even as plain text, and (llama.cpp's Phi-3
         * rule) the space after it goes with it. */
        expect_ids(t, "a</s> b", 0, 0, (const int32_t[]){ 263, 2, 289, -1 });
        /* With parse_special, control tokens too; "<|end|>" strips the newline after it. */
        expect_ids(t, "<|user|>\nhi<|end|>\n", 0, 1, (const int32_t[]){ 32010, 7251, 32007, -1 });
        tokenizer_free(t);
    }
    free(models);
}
END_TEST

/* WordPiece: llama.cpp's vectors for BAAI/bge-small-en-v1.5, whose vocab is BERT's uncased one. */
START_TEST(wpm_vectors)
{
    char *models = fixture_models_dir();
    tokenizer *t;

    if (!models) {
        printf("test_tokenizer: skipped: shared models not found\n");
        return;
    }
    check_vectors(models, "ggml-vocab-bert-bge.gguf");
    if ((t = load_vocab(models, "vocab/ggml-vocab-bert-bge.gguf")) != NULL) {
        /* the GGUF names [CLS] by cls_token_id and [SEP] by seperator_token_id only */
        ck_assert_int_eq(tokenizer_kind_get(t), TOKENIZER_WPM);
        ck_assert_str_eq(tokenizer_kind_name(tokenizer_kind_get(t)), "WPM");
        ck_assert_int_eq(tokenizer_bos(t), 101);
        ck_assert_int_eq(tokenizer_eos(t), 102);
        ck_assert_int_eq(tokenizer_unk(t), 100);
        ck_assert_int_eq(tokenizer_adds_bos(t), 1);
        ck_assert_int_eq(tokenizer_adds_eos(t), 1);
        ck_assert_ptr_null(tokenizer_pre_name(t));
        /* empty text: [CLS] [SEP]; nothing at all without add_special */
        expect_ids(t, "", 1, 0, (const int32_t[]){ 101, 102, -1 });
        expect_ids(t, " \t\n", 0, 0, (const int32_t[]){ -1 });
        /* ids from the vocab file: "hello" 7592, "world" 2088, "!" 999 */
        expect_ids(t, "Hello World!", 1, 0, (const int32_t[]){ 101, 7592, 2088, 999, 102, -1 });
        tokenizer_free(t);
    }
    free(models);
}
END_TEST

START_TEST(bpe_vectors)
{
    static const char *const vocabs[] = { "ggml-vocab-gpt-2.gguf", "ggml-vocab-deepseek-llm.gguf",
                                          "ggml-vocab-deepseek-coder.gguf" };
    char *models = fixture_models_dir();

    if (!models) {
        printf("test_tokenizer: skipped: shared models not found\n");
        return;
    }
    check_vectors(models, vocabs[_i]);
    free(models);
}
END_TEST

/* tests/data/tokenizer: llama-tokenize's ids for our own strings (see its README). */
START_TEST(llama_tokenize_agreement)
{
    static const char *const vocabs[] = { "llama-spm", "phi-3", "gpt-2", "deepseek-llm", "deepseek-coder", "bert-bge" };
    char *models = fixture_models_dir(), *json_path, *gguf_rel;
    json_t *root, *c;
    json_error_t jerr;
    tokenizer *t;
    size_t i;

    if (!models) {
        printf("test_tokenizer: skipped: shared models not found\n");
        return;
    }
    json_path = ms_strdup_printf("%s/tests/data/tokenizer/ggml-vocab-%s.json",
                                 getenv("MSTORE_SRC") ? getenv("MSTORE_SRC") : ".", vocabs[_i]);
    gguf_rel = ms_strdup_printf("vocab/ggml-vocab-%s.gguf", vocabs[_i]);
    root = json_load_file(json_path, 0, &jerr);
    ck_assert_msg(root != NULL, "%s: %s", json_path, jerr.text);
    if ((t = load_vocab(models, gguf_rel)) != NULL) {
        ck_assert_uint_ge(json_array_size(json_object_get(root, "cases")), 80);
        json_array_foreach(json_object_get(root, "cases"), i, c) {
            const char *text = json_string_value(json_object_get(c, "text")), *hex;
            json_t *want = json_object_get(c, "ids");
            char *bytes = NULL;
            size_t len, n;
            int32_t *ids;

            if (!text) {
                hex = json_string_value(json_object_get(c, "text_hex"));
                len = strlen(hex) / 2;
                bytes = malloc(len + 1);
                for (size_t k = 0; k < len; k++)
                    sscanf(hex + 2 * k, "%2hhx", (unsigned char *)&bytes[k]);
                text = bytes;
            } else {
                len = strlen(text);
            }
            ck_assert_int_eq(tokenizer_encode_alloc(t, text, len, 1, json_is_true(json_object_get(c, "parse_special")),
                                                    &ids, &n), 0);
            ck_assert_msg(n == json_array_size(want), "%s case %zu '%.40s': %zu ids, llama.cpp %zu", vocabs[_i], i,
                          text, n, json_array_size(want));
            for (size_t k = 0; k < n; k++)
                ck_assert_msg(ids[k] == json_integer_value(json_array_get(want, k)), "%s case %zu '%.40s': id %zu",
                              vocabs[_i], i, text, k);
            free(ids);
            free(bytes);
        }
        tokenizer_free(t);
    }
    json_decref(root);
    free(json_path);
    free(gguf_rel);
    free(models);
}
END_TEST

START_TEST(llama2_c_vectors)
{
    char *models = fixture_models_dir(), *path;
    json_t *root, *cases, *c;
    json_error_t jerr;
    tokenizer *t;
    size_t i;

    if (!models) {
        printf("test_tokenizer: skipped: shared models not found\n");
        return;
    }
    path = ms_strdup_printf("%s/llama2-tokenizer/tokenizer_test_vectors.json", models);
    t = load_vocab(models, "vocab/ggml-vocab-llama-spm.gguf");
    if (t && ms_is_file(path)) {
        root = json_load_file(path, 0, &jerr);
        ck_assert_ptr_nonnull(root);
        cases = json_object_get(root, "cases");
        ck_assert_uint_ge(json_array_size(cases), 5);
        json_array_foreach(cases, i, c) {
            const char *text = json_string_value(json_object_get(c, "text"));
            json_t *want = json_object_get(c, "ids");
            int32_t *ids;
            size_t n;

            ck_assert_int_eq(tokenizer_encode_alloc(t, text, strlen(text), 1, 0, &ids, &n), 0);
            ck_assert_uint_eq(n, json_array_size(want));
            for (size_t k = 0; k < n; k++)
                ck_assert_msg(ids[k] == json_integer_value(json_array_get(want, k)), "case %zu id %zu", i, k);
            free(ids);
            expect_round_trip(t, text, strlen(text));
        }
        json_decref(root);
    } else if (t) {
        printf("test_tokenizer: skipped: %s not found\n", path);
    }
    tokenizer_free(t);
    free(path);
    free(models);
}
END_TEST

START_TEST(stories260k_prompt_counts)
{
    static const struct { const char *text; size_t n; } prompts[] = {
        { "I believe the meaning of life is", 18 },
        { "Write a joke about AI from a very long prompt which will not be truncated", 46 },
    };
    char *models = fixture_models_dir();
    tokenizer *t;

    if (!models) {
        printf("test_tokenizer: skipped: shared models not found\n");
        return;
    }
    if ((t = load_vocab(models, "stories260K/stories260K.gguf")) != NULL) {
        ck_assert_uint_eq(tokenizer_n_vocab(t), 512);
        for (size_t i = 0; i < sizeof prompts / sizeof *prompts; i++) {
            int32_t *ids;
            size_t n;

            ck_assert_int_eq(tokenizer_encode_alloc(t, prompts[i].text, strlen(prompts[i].text), 1, 0, &ids, &n), 0);
            ck_assert_msg(n == prompts[i].n, "'%s': %zu tokens, want %zu", prompts[i].text, n, prompts[i].n);
            ck_assert_int_eq(ids[0], 1);
            free(ids);
            expect_round_trip(t, prompts[i].text, strlen(prompts[i].text));
        }
        tokenizer_free(t);
    }
    free(models);
}
END_TEST

/* A quadratic merge loop would need minutes here; the heap needs well under a second. */
START_TEST(encode_long_text_is_fast)
{
    char *models = fixture_models_dir();
    size_t len = 1 << 19, n;
    char *text = malloc(len);
    tokenizer *t;
    int32_t *ids;
    clock_t c0;
    double secs;

    if (!models || !(t = load_vocab(models, "vocab/ggml-vocab-llama-spm.gguf"))) {
        printf("test_tokenizer: skipped: shared models not found\n");
        free(models);
        free(text);
        return;
    }
    /* No spaces: one fragment, one merge run over half a million characters. */
    for (size_t i = 0; i < len; i++)
        text[i] = "abcdefghijklmnopqrstuvwxyz0123456789.,"[(i * 7 + i / 3) % 38];
    c0 = clock();
    ck_assert_int_eq(tokenizer_encode_alloc(t, text, len, 1, 0, &ids, &n), 0);
    secs = (double)(clock() - c0) / CLOCKS_PER_SEC;
    ck_assert_uint_gt(n, len / 8);
    ck_assert_msg(secs < 20, "encoding %zu bytes took %.1f s", len, secs);
    free(ids);
    tokenizer_free(t);
    free(text);
    free(models);
}
END_TEST

/* PCRE2 re-checks the whole subject's UTF-8 on each match unless told not to: quadratic. */
START_TEST(bpe_long_text_is_fast)
{
    char *models = fixture_models_dir();
    size_t len = 1 << 19, n;
    char *text = malloc(len);
    tokenizer *t;
    int32_t *ids;
    clock_t c0;
    double secs;

    if (!models || !(t = load_vocab(models, "vocab/ggml-vocab-gpt-2.gguf"))) {
        printf("test_tokenizer: skipped: shared models not found\n");
        free(models);
        free(text);
        return;
    }
    /* One fragment for the single GPT-2 regex: words, numbers, punctuation, space runs. */
    for (size_t i = 0; i < len; i++)
        text[i] = "abc de  f1 23,\n gh;i  \t jk.l"[(i * 7 + i / 5) % 28];
    c0 = clock();
    ck_assert_int_eq(tokenizer_encode_alloc(t, text, len, 0, 0, &ids, &n), 0);
    secs = (double)(clock() - c0) / CLOCKS_PER_SEC;
    ck_assert_uint_gt(n, len / 8);
    ck_assert_msg(secs < 20, "encoding %zu bytes took %.1f s", len, secs);
    expect_round_trip(t, text, len);
    free(ids);
    tokenizer_free(t);
    free(text);
    free(models);
}
END_TEST

Suite *tokenizer_suite(void)
{
    Suite *s = suite_create("tokenizer");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, spm_merges_highest_score_first);
    tcase_add_test(tc, spm_breaks_score_ties_leftmost);
    tcase_add_test(tc, spm_falls_back_to_bytes_then_unknown);
    tcase_add_test(tc, spm_space_prefix_and_specials);
    tcase_add_test(tc, encode_reports_needed_size);
    tcase_add_test(tc, decode_pieces);
    tcase_add_test(tc, accessors_and_eog);
    tcase_add_test(tc, harmony_vocab_ends_at_return_and_call_and_shows_markers);
    tcase_add_test(tc, bpe_merges_lowest_rank_first);
    tcase_add_test(tc, bpe_case_classes_are_unicode);
    tcase_add_test(tc, bpe_refuses_unknown_pre_tokenizer);
    tcase_add_loop_test(tc, new_spm_refuses_corrupt_vocab, 0, sizeof bad_arrays / sizeof *bad_arrays);
    tcase_add_loop_test(tc, from_gguf_refuses_corrupt_vocab, 0, sizeof bad_gguf / sizeof *bad_gguf);
    tcase_add_test(tc, from_gguf_reads_small_vocab);
    tcase_add_test(tc, llama_spm_vectors);
    tcase_add_test(tc, phi3_vectors);
    tcase_add_loop_test(tc, bpe_vectors, 0, 3);
    tcase_add_test(tc, wpm_vectors);
    tcase_add_loop_test(tc, llama_tokenize_agreement, 0, 6);
    tcase_add_test(tc, llama2_c_vectors);
    tcase_add_test(tc, stories260k_prompt_counts);
    tcase_add_test(tc, encode_long_text_is_fast);
    tcase_add_test(tc, bpe_long_text_is_fast);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(tokenizer_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
