/* test_tokenizer_wpm.c: WordPiece (TOKENIZER_WPM, src/tokenizer/wpm.c). On a hand-made vocab in
 * the GGUF form: accents, case, CJK, punctuation and ASCII symbols, numbers, control and white
 * space characters, unknown words, the word limit, empty input, decoding. On llama.cpp's bge
 * vocab: a tokenizer.json built from the GGUF's tokens (as Hugging Face holds BERT's vocab:
 * "▁x" -> "x", "y" -> "##y") gives the GGUF's ids on every test vector. The GGUF's agreement with
 * llama.cpp itself is test_tokenizer.c (wpm_vectors, llama_tokenize_agreement). */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/format.h"
#include "helpers/fixture.h"
#include "tokenizer/tokenizer.h"

#define SP "\xe2\x96\x81"   /* U+2581: a word's first piece */

/* ---------------------------------------------------------------- a hand-made vocab */

enum { V_PAD, V_UNK, V_CLS, V_SEP, V_HELLO, V_WORLD, V_BANG, V_COMMA, V_CAFE, V_S, V_RESUME, V_ZHONG, V_WEN, V_1,
       V_2, V_3, V_12, V_A, V_A2, V_DOLLAR, V_X, V_XX, V_JAMO, V_DUP1, V_DUP2, V_N };
static const char *const vtext[V_N] = {
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", SP "hello", SP "world", SP "!", SP ",", SP "cafe", "s", SP "resume",
    SP "\xe4\xb8\xad", SP "\xe6\x96\x87", SP "1", "2", "3", SP "12", SP "a", "a", SP "$", SP "x", "x",
    SP "\xe1\x84\x92", SP "dup", SP "dup",
};

static tokenizer *vocab(const tokenizer_wpm_opts *o, int with_unk)
{
    int32_t types[V_N];
    tokenizer_special sp;
    tokenizer *t;

    for (int i = 0; i < V_N; i++)
        types[i] = i <= V_SEP ? TOKEN_TYPE_CONTROL : TOKEN_TYPE_NORMAL;
    tokenizer_special_init_wpm(&sp);
    sp.bos = V_CLS, sp.eos = V_SEP, sp.unk = with_unk ? V_UNK : TOKEN_NONE, sp.pad = V_PAD;
    ck_assert_msg(tokenizer_new_wpm(&t, V_N, vtext, NULL, types, o, &sp) == 0, "%s", ms_err_msg());
    return t;
}

/* Encode without specials unless asked, and compare with the expected ids (ended by -1). */
static void expect_ids(const tokenizer *t, const char *text, size_t len, int add_special, const int32_t *want)
{
    int32_t *got;
    size_t n, k = 0;

    ck_assert_msg(tokenizer_encode_alloc(t, text, len, add_special, 0, &got, &n) == 0, "%s", ms_err_msg());
    for (; want[k] != -1; k++) {
        ck_assert_msg(k < n, "'%s': %zu ids, want more", text, n);
        ck_assert_msg(got[k] == want[k], "'%s': id %zu is %d, want %d", text, k, got[k], want[k]);
    }
    ck_assert_msg(k == n, "'%s': %zu ids, want %zu", text, n, k);
    free(got);
}
#define EXPECT(t, text, ...) expect_ids(t, text, sizeof text - 1, 0, (const int32_t[]){ __VA_ARGS__, -1 })

START_TEST(specials_and_empty_input)
{
    tokenizer *t = vocab(NULL, 1);

    ck_assert_int_eq(tokenizer_kind_get(t), TOKENIZER_WPM);
    ck_assert_int_eq(tokenizer_bos(t), V_CLS);
    ck_assert_int_eq(tokenizer_eos(t), V_SEP);
    ck_assert_int_eq(tokenizer_adds_bos(t), 1);
    ck_assert_int_eq(tokenizer_adds_eos(t), 1);
    expect_ids(t, "", 0, 1, (const int32_t[]){ V_CLS, V_SEP, -1 });
    expect_ids(t, " \n\t ", 4, 1, (const int32_t[]){ V_CLS, V_SEP, -1 });
    expect_ids(t, "hello", 5, 1, (const int32_t[]){ V_CLS, V_HELLO, V_SEP, -1 });
    tokenizer_free(t);
}
END_TEST

START_TEST(case_and_accents)
{
    tokenizer *t = vocab(NULL, 1);

    /* É -> E (the first code point of its NFD form) -> e */
    EXPECT(t, "Caf\xc3\xa9 R\xc3\x89SUM\xc3\x89 HeLLo", V_CAFE, V_RESUME, V_HELLO);
    EXPECT(t, "caf\xc3\xa9s", V_CAFE, V_S);
    /* as in llama.cpp: a combining mark typed on its own stays (and spells no token here) */
    EXPECT(t, "cafe\xcc\x81", V_UNK);
    /* and a Hangul syllable keeps only its leading jamo: 한 (U+D55C) -> ᄒ (U+1112) */
    EXPECT(t, "\xed\x95\x9c", V_JAMO);
    tokenizer_free(t);
}
END_TEST

START_TEST(splits_punctuation_symbols_cjk)
{
    tokenizer *t = vocab(NULL, 1);

    EXPECT(t, "hello,world!", V_HELLO, V_COMMA, V_WORLD, V_BANG);
    EXPECT(t, "!!", V_BANG, V_BANG);
    /* ASCII symbols are words of their own; other symbols (€) stay inside the word */
    EXPECT(t, "$x", V_DOLLAR, V_X);
    EXPECT(t, "x\xe2\x82\xac", V_UNK);
    /* CJK ideographs: each its own word, also inside a word */
    EXPECT(t, "\xe4\xb8\xad\xe6\x96\x87", V_ZHONG, V_WEN);
    EXPECT(t, "a\xe4\xb8\xad" "a", V_A, V_ZHONG, V_A);
    tokenizer_free(t);
}
END_TEST

START_TEST(white_space_and_control_characters)
{
    tokenizer *t = vocab(NULL, 1);

    /* U+3000 and U+00A0 separate words; U+0001, U+200D (a format character) and NUL vanish */
    EXPECT(t, "\xe3\x80\x80hello\xc2\xa0world", V_HELLO, V_WORLD);
    EXPECT(t, "hel\x01lo wor\xe2\x80\x8dld", V_HELLO, V_WORLD);
    expect_ids(t, "hel\0lo", 6, 0, (const int32_t[]){ V_HELLO, -1 });
    /* invalid UTF-8 becomes U+FFFD, which vanishes too */
    EXPECT(t, "hel\xfflo", V_HELLO);
    tokenizer_free(t);
}
END_TEST

START_TEST(longest_match_first_and_unknown_words)
{
    tokenizer *t = vocab(NULL, 1);

    EXPECT(t, "123", V_12, V_3);        /* ▁12 before ▁1 */
    EXPECT(t, "1 2", V_1, V_UNK);       /* "▁2" is no token */
    EXPECT(t, "hellos", V_HELLO, V_S);
    EXPECT(t, "helloz hello", V_UNK, V_HELLO);   /* a piece no token spells: the whole word */
    EXPECT(t, "aaa", V_A, V_A2, V_A2);
    EXPECT(t, "dup", V_DUP2);           /* two tokens with one text: the later id */
    tokenizer_free(t);
    /* without an unknown token such a word cannot be encoded */
    t = vocab(NULL, 0);
    ck_assert_int_eq(tokenizer_encode_alloc(t, "hello zz", 8, 0, 0, &(int32_t *){ NULL }, &(size_t){ 0 }),
                     MS_EINVALID);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "word '" SP "zz' has no tokens and the vocab has no unknown token"));
    tokenizer_free(t);
}
END_TEST

START_TEST(word_limit)
{
    tokenizer_wpm_opts o;
    tokenizer *t;
    char x[301];
    int32_t *ids;
    size_t n;

    memset(x, 'x', sizeof x);
    /* llama.cpp's default: no limit */
    t = vocab(NULL, 1);
    ck_assert_int_eq(tokenizer_encode_alloc(t, x, 300, 0, 0, &ids, &n), 0);
    ck_assert_uint_eq(n, 300);
    ck_assert_int_eq(ids[0], V_X);
    ck_assert_int_eq(ids[299], V_XX);
    free(ids);
    tokenizer_free(t);
    /* max_word_chars 10: ten characters are pieces, eleven are unknown, counted in code points */
    tokenizer_wpm_opts_init(&o);
    o.max_word_chars = 10;
    t = vocab(&o, 1);
    ck_assert_int_eq(tokenizer_encode_alloc(t, x, 10, 0, 0, &ids, &n), 0);
    ck_assert_uint_eq(n, 10);
    free(ids);
    expect_ids(t, x, 11, 0, (const int32_t[]){ V_UNK, -1 });
    /* résuméssss: 10 code points in 12 bytes; one more s and it is too long */
    EXPECT(t, "r\xc3\xa9sum\xc3\xa9ssss", V_RESUME, V_S, V_S, V_S, V_S);
    EXPECT(t, "r\xc3\xa9sum\xc3\xa9sssss", V_UNK);
    tokenizer_free(t);
}
END_TEST

START_TEST(decodes_words_with_spaces)
{
    tokenizer *t = vocab(NULL, 1);
    const int32_t ids[] = { V_CLS, V_HELLO, V_S, V_COMMA, V_WORLD, V_SEP };
    char buf[64];
    size_t n;

    ck_assert_int_eq(tokenizer_decode(t, ids, 6, 0, buf, sizeof buf, &n), 0);
    ck_assert_str_eq((buf[n] = '\0', buf), "hellos , world");
    ck_assert_int_eq(tokenizer_decode(t, ids, 6, TOKENIZER_DECODE_SPECIAL, buf, sizeof buf, &n), 0);
    ck_assert_str_eq((buf[n] = '\0', buf), "[CLS]hellos , world[SEP]");
    ck_assert_int_eq(tokenizer_decode_piece(t, V_S, 0, buf, sizeof buf, &n), 0);
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(tokenizer_decode_piece(t, V_WORLD, 0, buf, sizeof buf, &n), 0);
    ck_assert_int_eq(memcmp(buf, " world", n), 0);
    tokenizer_free(t);
}
END_TEST

/* ---------------------------------------------------------------- bge: GGUF and tokenizer.json */

static tokenizer *load_bge(const char *models)
{
    char *path = ms_strdup_printf("%s/vocab/ggml-vocab-bert-bge.gguf", models);
    gguf_file *g;
    tokenizer *t = NULL;

    if (ms_is_file(path)) {
        ck_assert_msg(gguf_open(&g, path) == 0, "%s", ms_err_msg());
        ck_assert_msg(tokenizer_from_gguf(&t, g, path) == 0, "%s", ms_err_msg());
        gguf_close(g);
    } else {
        printf("test_tokenizer_wpm: skipped: %s not found\n", path);
    }
    free(path);
    return t;
}

/* tokenizer.json as Hugging Face holds the GGUF's vocab: the converter's phantom-space form
 * undone ("▁x" -> "x", "[X]" as it is, "y" -> "##y"), control tokens as special added tokens,
 * BertNormalizer / BertPreTokenizer / TemplateProcessing as bge's file has them. llama.cpp has
 * no word limit, so max_input_chars_per_word lies above every vector's words here (BERT's 100
 * is word_limit's business above). */
static char *bge_json(const tokenizer *g)
{
    json_t *root = json_object(), *vocab = json_object(), *added = json_array(), *model, *pp, *st;
    char *out;

    for (size_t i = 0; i < tokenizer_n_vocab(g); i++) {
        size_t len;
        const char *s = tokenizer_token_text(g, (int32_t)i, &len);
        char *hf;

        if (len >= 3 && memcmp(s, SP, 3) == 0)
            hf = ms_strdup_printf("%.*s", (int)len - 3, s + 3);
        else if (len > 0 && s[0] == '[' && s[len - 1] == ']')
            hf = ms_strdup_printf("%.*s", (int)len, s);
        else
            hf = ms_strdup_printf("##%.*s", (int)len, s);
        ck_assert_ptr_null(json_object_get(vocab, hf));   /* no two tokens meet in one HF text */
        json_object_set_new(vocab, hf, json_integer((json_int_t)i));
        if (tokenizer_token_type(g, (int32_t)i) == TOKEN_TYPE_CONTROL)
            json_array_append_new(added, json_pack("{s:I, s:s, s:b, s:b, s:b, s:b, s:b}", "id", (json_int_t)i,
                                                   "content", hf, "single_word", 0, "lstrip", 0, "rstrip", 0,
                                                   "normalized", 0, "special", 1));
        free(hf);
    }
    model = json_pack("{s:s, s:s, s:s, s:i, s:o}", "type", "WordPiece", "unk_token", "[UNK]",
                      "continuing_subword_prefix", "##", "max_input_chars_per_word", TOKENIZER_WPM_MAX_WORD,
                      "vocab", vocab);
    st = json_pack("{s:{s:s, s:[i], s:[s]}, s:{s:s, s:[i], s:[s]}}", "[CLS]", "id", "[CLS]", "ids", 101, "tokens",
                   "[CLS]", "[SEP]", "id", "[SEP]", "ids", 102, "tokens", "[SEP]");
    pp = json_pack("{s:s, s:[{s:{s:s, s:i}}, {s:{s:s, s:i}}, {s:{s:s, s:i}}], s:o}", "type", "TemplateProcessing",
                   "single", "SpecialToken", "id", "[CLS]", "type_id", 0, "Sequence", "id", "A", "type_id", 0,
                   "SpecialToken", "id", "[SEP]", "type_id", 0, "special_tokens", st);
    json_object_set_new(root, "added_tokens", added);
    json_object_set_new(root, "normalizer", json_pack("{s:s, s:b, s:b, s:n, s:b}", "type", "BertNormalizer",
                                                      "clean_text", 1, "handle_chinese_chars", 1, "strip_accents",
                                                      "lowercase", 1));
    json_object_set_new(root, "pre_tokenizer", json_pack("{s:s}", "type", "BertPreTokenizer"));
    json_object_set_new(root, "post_processor", pp);
    json_object_set_new(root, "model", model);
    out = json_dumps(root, JSON_COMPACT);
    ck_assert_ptr_nonnull(out);
    json_decref(root);
    return out;
}

static void expect_same(const tokenizer *a, const tokenizer *b, const char *text, size_t len, int parse_special)
{
    int32_t *x, *y;
    size_t nx, ny;

    ck_assert_int_eq(tokenizer_encode_alloc(a, text, len, 1, parse_special, &x, &nx), 0);
    ck_assert_int_eq(tokenizer_encode_alloc(b, text, len, 1, parse_special, &y, &ny), 0);
    ck_assert_msg(nx == ny && memcmp(x, y, nx * sizeof *x) == 0, "'%.*s': GGUF and tokenizer.json differ",
                  (int)(len > 60 ? 60 : len), text);
    free(x);
    free(y);
}

START_TEST(bge_json_matches_gguf)
{
    static const char sep[] = "\n__ggml_vocab_test__\n";
    char *models = fixture_models_dir(), *json, *inp = NULL, *data_path, *s, *e;
    tokenizer *g, *j = NULL;
    json_t *data, *c;
    json_error_t jerr;
    size_t len, i, n_inp = 0;

    if (!models || !(g = load_bge(models))) {
        printf("test_tokenizer_wpm: skipped: shared models not found\n");
        free(models);
        return;
    }
    json = bge_json(g);
    ck_assert_msg(tokenizer_from_json(&j, json, strlen(json), NULL, "bge tokenizer.json") == 0, "%s", ms_err_msg());
    ck_assert_int_eq(tokenizer_kind_get(j), TOKENIZER_WPM);
    ck_assert_uint_eq(tokenizer_n_vocab(j), tokenizer_n_vocab(g));
    ck_assert_int_eq(tokenizer_bos(j), tokenizer_bos(g));
    ck_assert_int_eq(tokenizer_eos(j), tokenizer_eos(g));
    ck_assert_int_eq(tokenizer_unk(j), tokenizer_unk(g));
    for (i = 0; i < tokenizer_n_vocab(g); i++) {   /* the same vocab, text for text */
        size_t la, lb;
        const char *a = tokenizer_token_text(g, (int32_t)i, &la), *b = tokenizer_token_text(j, (int32_t)i, &lb);
        ck_assert_msg(la == lb && memcmp(a, b, la) == 0, "token %zu: '%.*s' vs '%.*s'", i, (int)la, a, (int)lb, b);
    }
    /* llama.cpp's .inp cases, then tests/data/tokenizer's strings */
    s = ms_strdup_printf("%s/vocab/ggml-vocab-bert-bge.gguf.inp", models);
    ck_assert_int_eq(ms_file_read(&inp, &len, s, 1 << 20), 0);
    free(s);
    for (s = inp; (e = strstr(s, sep)) != NULL; s = e + strlen(sep), n_inp++)
        for (int ps = 0; ps < 2; ps++)
            expect_same(g, j, s, (size_t)(e - s), ps);
    ck_assert_uint_eq(n_inp, 46);
    data_path = ms_strdup_printf("%s/tests/data/tokenizer/ggml-vocab-bert-bge.json",
                                 getenv("MSTORE_SRC") ? getenv("MSTORE_SRC") : ".");
    data = json_load_file(data_path, 0, &jerr);
    ck_assert_msg(data != NULL, "%s: %s", data_path, jerr.text);
    ck_assert_uint_ge(json_array_size(json_object_get(data, "cases")), 100);
    json_array_foreach(json_object_get(data, "cases"), i, c) {
        const char *text = json_string_value(json_object_get(c, "text"));
        const char *hex = json_string_value(json_object_get(c, "text_hex"));
        char *bytes = NULL;

        if (!text) {   /* byte strings that are not UTF-8 */
            ck_assert_ptr_nonnull(hex);
            len = strlen(hex) / 2;
            bytes = malloc(len + 1);
            for (size_t k = 0; k < len; k++)
                sscanf(hex + 2 * k, "%2hhx", (unsigned char *)&bytes[k]);
            text = bytes;
        } else {
            len = strlen(text);
        }
        expect_same(g, j, text, len, json_is_true(json_object_get(c, "parse_special")));
        free(bytes);
    }
    json_decref(data);
    free(data_path);
    free(inp);
    free(json);
    tokenizer_free(j);
    tokenizer_free(g);
    free(models);
}
END_TEST

Suite *tokenizer_wpm_suite(void)
{
    Suite *s = suite_create("tokenizer_wpm");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, specials_and_empty_input);
    tcase_add_test(tc, case_and_accents);
    tcase_add_test(tc, splits_punctuation_symbols_cjk);
    tcase_add_test(tc, white_space_and_control_characters);
    tcase_add_test(tc, longest_match_first_and_unknown_words);
    tcase_add_test(tc, word_limit);
    tcase_add_test(tc, decodes_words_with_spaces);
    tcase_add_test(tc, bge_json_matches_gguf);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(tokenizer_wpm_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
