/* test_tokenizer_json.c: tokenizers from Hugging Face's tokenizer.json (src/tokenizer/json_load.c)
 * on hand-made files: byte-level BPE and SentencePiece-style BPE, merge order from the ranks
 * (both spellings of a merge), added tokens, BOS/EOS from post_processor and
 * tokenizer_config.json, extra end-of-generation ids, WordPiece (the vocab in GGUF form,
 * BertNormalizer's switches, max_input_chars_per_word, [CLS] / [SEP]), and a table of
 * refusals. Agreement with llama.cpp on its real vocabs, converted to tokenizer.json, is
 * tests/e2e/t5012 (and, for WordPiece, test_tokenizer_wpm.c). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blob/blob.h"
#include "helpers/fixture.h"
#include "import/import.h"
#include "runtime/runtime.h"
#include "tokenizer/tokenizer.h"

#define SP "\xe2\x96\x81"   /* U+2581 */

/* Byte-level: a b c ab bc <|end|> <U> Ġ Ġa (Ġ = U+0120, GPT-2's space). */
static const char BL[] =
    "{\"added_tokens\":[{\"id\":5,\"content\":\"<|end|>\",\"special\":true},"
    "{\"id\":6,\"content\":\"<U>\",\"special\":false}],"
    "\"normalizer\":null,"
    "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"use_regex\":true},"
    "\"post_processor\":{\"type\":\"ByteLevel\"},\"decoder\":{\"type\":\"ByteLevel\"},"
    "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"c\":2,\"ab\":3,\"bc\":4,\"\\u0120\":7,\"\\u0120a\":8},"
    "\"merges\":[\"b c\",\"a b\",\"\\u0120 a\"]}}";

/* SentencePiece-style: <unk> <s> </s> <0x0A> ▁ a b c ab bc ▁a, merges as pairs, BOS by template. */
static const char SPM[] =
    "{\"added_tokens\":[{\"id\":0,\"content\":\"<unk>\",\"special\":true},"
    "{\"id\":1,\"content\":\"<s>\",\"special\":true},{\"id\":2,\"content\":\"</s>\",\"special\":true}],"
    "\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Prepend\",\"prepend\":\"" SP "\"},"
    "{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"" SP "\"}]},"
    "\"pre_tokenizer\":null,"
    "\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<s>\",\"type_id\":0}},"
    "{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],\"special_tokens\":{\"<s>\":{\"id\":\"<s>\",\"ids\":[1],\"tokens\":[\"<s>\"]}}},"
    "\"decoder\":{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"ByteFallback\"}]},"
    "\"model\":{\"type\":\"BPE\",\"byte_fallback\":true,\"unk_token\":\"<unk>\","
    "\"vocab\":{\"<unk>\":0,\"<s>\":1,\"</s>\":2,\"<0x0A>\":3,\"" SP "\":4,\"a\":5,\"b\":6,\"c\":7,\"ab\":8,\"bc\":9,\"" SP "a\":10},"
    "\"merges\":[[\"b\",\"c\"],[\"a\",\"b\"],[\"" SP "\",\"a\"]]}}";

/* WordPiece, as BERT's tokenizer.json holds it: [PAD] [UNK] [CLS] [SEP] un ##aff ##able hello !
 * cafe ##s a 中 x ##x ##é, BertNormalizer with its defaults, [CLS] $A [SEP] by template. */
static const char WP[] =
    "{\"added_tokens\":[{\"id\":0,\"content\":\"[PAD]\",\"special\":true},"
    "{\"id\":1,\"content\":\"[UNK]\",\"special\":true},{\"id\":2,\"content\":\"[CLS]\",\"special\":true},"
    "{\"id\":3,\"content\":\"[SEP]\",\"special\":true}],"
    "\"normalizer\":{\"type\":\"BertNormalizer\",\"clean_text\":true,\"handle_chinese_chars\":true,"
    "\"strip_accents\":null,\"lowercase\":true},"
    "\"pre_tokenizer\":{\"type\":\"BertPreTokenizer\"},"
    "\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"[CLS]\",\"type_id\":0}},"
    "{\"Sequence\":{\"id\":\"A\",\"type_id\":0}},{\"SpecialToken\":{\"id\":\"[SEP]\",\"type_id\":0}}],"
    "\"special_tokens\":{\"[CLS]\":{\"id\":\"[CLS]\",\"ids\":[2],\"tokens\":[\"[CLS]\"]},"
    "\"[SEP]\":{\"id\":\"[SEP]\",\"ids\":[3],\"tokens\":[\"[SEP]\"]}}},"
    "\"decoder\":{\"type\":\"WordPiece\",\"prefix\":\"##\",\"cleanup\":true},"
    "\"model\":{\"type\":\"WordPiece\",\"unk_token\":\"[UNK]\",\"continuing_subword_prefix\":\"##\","
    "\"max_input_chars_per_word\":100,\"vocab\":{\"[PAD]\":0,\"[UNK]\":1,\"[CLS]\":2,\"[SEP]\":3,\"un\":4,"
    "\"##aff\":5,\"##able\":6,\"hello\":7,\"!\":8,\"cafe\":9,\"##s\":10,\"a\":11,\"\xe4\xb8\xad\":12,\"x\":13,"
    "\"##x\":14,\"##\xc3\xa9\":15}}}";
enum { W_PAD, W_UNK, W_CLS, W_SEP, W_UN, W_AFF, W_ABLE, W_HELLO, W_BANG, W_CAFE, W_S, W_A, W_ZH, W_X, W_XX, W_EACUTE };

/* base with the one occurrence of `from` replaced by `to` (from NULL: `to` is the whole text). */
static char *patched(const char *base, const char *from, const char *to)
{
    const char *at;
    char *s;

    if (!from)
        return strdup(to);
    at = strstr(base, from);
    ck_assert_msg(at && !strstr(at + 1, from), "'%s' must occur once in the base", from);
    s = malloc(strlen(base) - strlen(from) + strlen(to) + 1);
    sprintf(s, "%.*s%s%s", (int)(at - base), base, to, at + strlen(from));
    return s;
}

static tokenizer *load(const char *json, const char *config)
{
    tokenizer *t = NULL;
    int rc = tokenizer_from_json(&t, json, strlen(json), config, "tokenizer.json");
    ck_assert_msg(rc == 0, "tokenizer_from_json: %d %s", rc, ms_err_msg());
    ck_assert_ptr_nonnull(t);
    return t;
}

/* Encode and compare with the expected ids (terminated by -1). */
static void expect_ids(const tokenizer *t, const char *text, int add_special, int parse_special, const int32_t *want)
{
    int32_t *got = NULL;
    size_t n, k = 0;

    ck_assert_int_eq(tokenizer_encode_alloc(t, text, strlen(text), add_special, parse_special, &got, &n), 0);
    for (; want[k] != -1; k++) {
        ck_assert_msg(k < n, "'%s': %zu ids, want more", text, n);
        ck_assert_msg(got[k] == want[k], "'%s': id %zu is %d, want %d", text, k, got[k], want[k]);
    }
    ck_assert_msg(k == n, "'%s': %zu ids, want %zu", text, n, k);
    free(got);
}

#define IDS(...) ((const int32_t[]){ __VA_ARGS__, -1 })
#define NONE ((const int32_t[]){ -1 })

START_TEST(byte_level_merges_by_rank)
{
    tokenizer *t = load(BL, NULL);
    char *rev = patched(BL, "[\"b c\",\"a b\",", "[\"a b\",\"b c\",");
    tokenizer *r = load(rev, NULL);

    ck_assert_int_eq(tokenizer_kind_get(t), TOKENIZER_BPE);
    ck_assert_str_eq(tokenizer_pre_name(t), "gpt2");
    ck_assert_uint_eq(tokenizer_n_vocab(t), 9);
    expect_ids(t, "abc", 1, 0, IDS(0, 4));    /* "b c" ranks first: a + bc */
    expect_ids(r, "abc", 1, 0, IDS(3, 2));    /* "a b" first: ab + c */
    expect_ids(t, "c a", 1, 0, IDS(2, 8));    /* the space is Ġ, merged into Ġa */
    expect_ids(t, "a<U>b", 0, 0, IDS(0, 6, 1));   /* user-defined: matched in text always */
    expect_ids(t, "<|end|>", 0, 1, IDS(5));
    ck_assert_int_eq(tokenizer_token_type(t, 5), TOKEN_TYPE_CONTROL);
    ck_assert_int_eq(tokenizer_token_type(t, 6), TOKEN_TYPE_USER_DEFINED);
    ck_assert(tokenizer_is_eog(t, 5));        /* "<|end|>" by its text, as llama.cpp does */
    ck_assert_int_eq(tokenizer_bos(t), TOKEN_NONE);
    ck_assert(!tokenizer_adds_bos(t));
    tokenizer_free(t);
    tokenizer_free(r);
    free(rev);
}
END_TEST

START_TEST(byte_level_merge_pairs_equal_strings)
{
    char *pairs = patched(BL, "[\"b c\",\"a b\",\"\\u0120 a\"]", "[[\"b\",\"c\"],[\"a\",\"b\"],[\"\\u0120\",\"a\"]]");
    tokenizer *t = load(pairs, NULL);

    expect_ids(t, "abc", 1, 0, IDS(0, 4));
    expect_ids(t, "c a", 1, 0, IDS(2, 8));
    tokenizer_free(t);
    free(pairs);
}
END_TEST

/* Split regexes, Digits and ByteLevel(use_regex false) as Qwen 2's, DeepSeek Coder's, Mistral
 * Nemo's (tekken), gpt-oss's (o200k) and DeepSeek V3's files write them name llama.cpp's
 * pre-tokenizers. */
START_TEST(byte_level_pre_tokenizers_by_regex)
{
    static const struct { const char *pre, *name; } cases[] = {
        { "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":"
          "\"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}| ?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*"
          "|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+\"},\"behavior\":\"Isolated\",\"invert\":false},"
          "{\"type\":\"ByteLevel\",\"use_regex\":false}]}", "qwen2" },
        { "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":"
          "\"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}{1,3}| ?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*"
          "|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+\"},\"behavior\":\"Isolated\",\"invert\":false},"
          "{\"type\":\"ByteLevel\",\"use_regex\":false}]}", "llama3" },
        { "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":\"[\\r\\n]\"},"
          "\"behavior\":\"Isolated\"},{\"type\":\"Split\",\"pattern\":{\"Regex\":\"\\\\s?\\\\p{L}+\"},\"behavior\":\"Isolated\"},"
          "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"\\\\s?\\\\p{P}+\"},\"behavior\":\"Isolated\"},"
          "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"[\xe4\xb8\x80-\xe9\xbe\xa5\xe0\xa0\x80-\xe4\xb8\x80\xea\xb0\x80-\xed\x9f\xbf]+\"},"
          "\"behavior\":\"Isolated\"},{\"type\":\"Digits\",\"individual_digits\":true},"
          "{\"type\":\"ByteLevel\",\"use_regex\":false}]}", "deepseek-coder" },
        { "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": {\"Regex\": \"[^"
          "\\\\r\\\\n\\\\p{L}\\\\p{N}]?[\\\\p{Lu}\\\\p{Lt}\\\\p{Lm}\\\\p{Lo}\\\\p{M}]*[\\\\p{Ll}\\\\p{Lm}\\\\p"
          "{Lo}\\\\p{M}]+|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?[\\\\p{Lu}\\\\p{Lt}\\\\p{Lm}\\\\p{Lo}\\\\p{M}]+[\\\\p"
          "{Ll}\\\\p{Lm}\\\\p{Lo}\\\\p{M}]*|\\\\p{N}| ?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n/]*|\\\\s*[\\\\r"
          "\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+\"}, \"behavior\": \"Isolated\", \"invert\": false}, {\"type\": \""
          "ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": true, \"use_regex\": false}]}", "tekken" },
        { "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": {\"Regex\": \"[^"
          "\\\\r\\\\n\\\\p{L}\\\\p{N}]?[\\\\p{Lu}\\\\p{Lt}\\\\p{Lm}\\\\p{Lo}\\\\p{M}]*[\\\\p{Ll}\\\\p{Lm}\\\\p"
          "{Lo}\\\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?[\\\\p{Lu}\\\\p{Lt}\\\\p"
          "{Lm}\\\\p{Lo}\\\\p{M}]+[\\\\p{Ll}\\\\p{Lm}\\\\p{Lo}\\\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\\\p"
          "{N}{1,3}| ?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n/]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+\"}"
          ", \"behavior\": \"Isolated\", \"invert\": false}, {\"type\": \"ByteLevel\", \"add_prefix_space\""
          ": false, \"trim_offsets\": true, \"use_regex\": false}]}", "gpt-4o" },
        { "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": {\"Regex\": \"\\\\p"
          "{N}{1,3}\"}, \"behavior\": \"Isolated\", \"invert\": false}, {\"type\": \"Split\", \"pattern\": "
          "{\"Regex\": \"[\xe4\xb8\x80-\xe9\xbe\xa5\xe3\x81\x80-\xe3\x82\x9f\xe3\x82\xa0-\xe3\x83\xbf]+\"},"
          " \"behavior\": \"Isolated\", \"invert\": false}, {\"type\": \"Split\", \"pattern\": {\"Regex\": "
          "\"[!\\\"#$%&'()*+,\\\\-./:;<=>?@\\\\[\\\\\\\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\\\p{L}\\\\p{P}\\\\p"
          "{S}]?[\\\\p{L}\\\\p{M}]+| ?[\\\\p{P}\\\\p{S}]+[\\r\\n]*|\\\\s*[\\r\\n]+|\\\\s+(?!\\\\S)|\\\\s+\""
          "}, \"behavior\": \"Isolated\", \"invert\": false}, {\"type\": \"ByteLevel\", \"add_prefix_space\""
          ": false, \"trim_offsets\": true, \"use_regex\": false}]}", "deepseek-v3" },
        { "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Digits\",\"individual_digits\":true},"
          "{\"type\":\"ByteLevel\",\"use_regex\":true}]}", "starcoder" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *j = patched(BL, "{\"type\":\"ByteLevel\",\"use_regex\":true}", cases[i].pre);
        tokenizer *t = load(j, NULL);
        ck_assert_str_eq(tokenizer_pre_name(t), cases[i].name);
        tokenizer_free(t);
        free(j);
    }
}
END_TEST

START_TEST(byte_level_specials_from_template_and_config)
{
    char *tp = patched(BL, "\"post_processor\":{\"type\":\"ByteLevel\"}",
                       "\"post_processor\":{\"type\":\"Sequence\",\"processors\":[{\"type\":\"ByteLevel\"},"
                       "{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<|end|>\"}},"
                       "{\"Sequence\":{\"id\":\"A\"}},{\"SpecialToken\":{\"id\":\"<U>\"}}],"
                       "\"special_tokens\":{\"<|end|>\":{\"ids\":[5]},\"<U>\":{\"ids\":[6]}}}]}");
    tokenizer *t = load(tp, NULL), *c;

    ck_assert_int_eq(tokenizer_bos(t), 5);
    ck_assert_int_eq(tokenizer_eos(t), 6);
    expect_ids(t, "a", 1, 0, IDS(5, 0, 6));
    expect_ids(t, "a", 0, 0, IDS(0));
    /* tokenizer_config.json wins over the template */
    c = load(tp, "{\"add_bos_token\": false, \"add_eos_token\": false, \"eos_token\": {\"content\": \"<|end|>\"}}");
    expect_ids(c, "a", 1, 0, IDS(0));
    ck_assert_int_eq(tokenizer_eos(c), 5);
    tokenizer_free(t);
    tokenizer_free(c);
    free(tp);
}
END_TEST

START_TEST(unnamed_ids_are_unused_pads)
{
    char *j = patched(BL, "\"\\u0120a\":8}", "\"\\u0120a\":8,\"x\":11}");
    tokenizer *t = load(j, NULL);
    size_t len;
    const char *s;

    ck_assert_uint_eq(tokenizer_n_vocab(t), 12);
    s = tokenizer_token_text(t, 9, &len);
    ck_assert_int_eq((int)len, 6);
    ck_assert(memcmp(s, "[PAD9]", 6) == 0);
    ck_assert_int_eq(tokenizer_token_type(t, 10), TOKEN_TYPE_UNUSED);
    tokenizer_free(t);
    free(j);
}
END_TEST

START_TEST(spm_form_scores_follow_merge_ranks)
{
    tokenizer *t = load(SPM, NULL);
    char *rev = patched(SPM, "[[\"b\",\"c\"],[\"a\",\"b\"],", "[[\"a\",\"b\"],[\"b\",\"c\"],");
    tokenizer *r = load(rev, NULL);
    char buf[64];
    size_t n;

    ck_assert_int_eq(tokenizer_kind_get(t), TOKENIZER_SPM);
    ck_assert_int_eq(tokenizer_bos(t), 1);
    ck_assert_int_eq(tokenizer_unk(t), 0);
    expect_ids(t, "abc", 1, 0, IDS(1, 10, 9));     /* "▁abc": bc (rank 0), then ▁a (rank 2) */
    expect_ids(r, "abc", 1, 0, IDS(1, 4, 8, 7));   /* ab first; "▁ab" and "abc" are no tokens */
    expect_ids(t, "\n", 0, 0, IDS(4, 3));          /* byte fallback: <0x0A> */
    ck_assert_int_eq(tokenizer_token_type(t, 3), TOKEN_TYPE_BYTE);
    ck_assert_int_eq(tokenizer_token_type(t, 0), TOKEN_TYPE_UNKNOWN);
    ck_assert_int_eq(tokenizer_decode(t, IDS(1, 10, 9), 3, 0, buf, sizeof buf, &n), 0);
    ck_assert_int_eq((int)n, 3);
    ck_assert(memcmp(buf, "abc", 3) == 0);
    tokenizer_free(t);
    tokenizer_free(r);
    free(rev);
}
END_TEST

/* Mistral-style: no normalizer, a Metaspace pre-tokenizer; prepend_scheme "never": no prefix. */
START_TEST(spm_form_from_metaspace)
{
    char *m = patched(SPM, "\"pre_tokenizer\":null",
                      "\"pre_tokenizer\":{\"type\":\"Metaspace\",\"replacement\":\"" SP "\",\"prepend_scheme\":\"first\","
                      "\"split\":false}");
    char *mn = patched(SPM, "\"pre_tokenizer\":null",
                       "\"pre_tokenizer\":{\"type\":\"Metaspace\",\"replacement\":\"" SP "\",\"prepend_scheme\":\"never\","
                       "\"split\":false}");
    char *a = patched(m, "\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Prepend\",\"prepend\":\"" SP "\"},"
                      "{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"" SP "\"}]}", "\"normalizer\":null");
    char *b = patched(mn, "\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Prepend\",\"prepend\":\"" SP "\"},"
                      "{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"" SP "\"}]}", "\"normalizer\":null");
    tokenizer *ta = load(a, NULL), *tb = load(b, "{\"add_bos_token\": false}");

    expect_ids(ta, "a bc", 1, 0, IDS(1, 10, 4, 9));
    expect_ids(tb, "a bc", 1, 0, IDS(5, 4, 9));
    tokenizer_free(ta);
    tokenizer_free(tb);
    free(m);
    free(mn);
    free(a);
    free(b);
}
END_TEST

START_TEST(eog_add_marks_ids)
{
    tokenizer *t = load(BL, NULL);

    ck_assert(!tokenizer_is_eog(t, 3));
    ck_assert_int_eq(tokenizer_eog_add(t, 3), 0);
    ck_assert(tokenizer_is_eog(t, 3));
    ck_assert_int_eq(tokenizer_eos(t), 3);   /* the vocab named no EOS */
    ck_assert_int_eq(tokenizer_eog_add(t, 9), MS_EINVALID);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "token 9 out of range"));
    ck_assert_int_eq(tokenizer_eog_add(t, -1), MS_EINVALID);
    tokenizer_free(t);
}
END_TEST

/* An HF directory holding one tensor and the BL tokenizer, imported into a fresh store;
 * `gen` is generation_config.json's text (NULL: none), `cfg_eos` config.json's eos_token_id. */
static void import_tiny(store **s_out, manifest **m_out, char **home_out, const char *gen, const char *cfg_eos,
                        int with_tokenizer)
{
    char *home = fixture_tmpdir(), *hf = ms_strdup_printf("%s/hf", home), *cfg;
    ms_digest digest;
    static const float emb[9 * 4];
    uint64_t shape[2] = { 9, 4 };
    fixture_mem mem = { 0 };
    st_writer *w;
    model_name name;

    ck_assert_int_eq(ms_mkdir_p(hf, 0755), 0);
    cfg = ms_strdup_printf("{\"model_type\": \"llama\", \"hidden_size\": 4, \"intermediate_size\": 8, "
                           "\"num_hidden_layers\": 0, \"num_attention_heads\": 1, \"num_key_value_heads\": 1, "
                           "\"vocab_size\": 9, \"eos_token_id\": %s}", cfg_eos);
    free(fixture_write(hf, "config.json", cfg, strlen(cfg)));
    ck_assert_int_eq(st_writer_new(&w), 0);
    ck_assert_int_eq(st_writer_add(w, "model.embed_tokens.weight", ST_F32, 2, shape, emb, sizeof emb), 0);
    ck_assert_int_eq(st_writer_emit(w, fixture_mem_sink, &mem), 0);
    st_writer_free(w);
    free(fixture_write(hf, "model.safetensors", mem.p, mem.len));
    if (with_tokenizer)
        free(fixture_write(hf, "tokenizer.json", BL, strlen(BL)));
    if (gen)
        free(fixture_write(hf, "generation_config.json", gen, strlen(gen)));
    ck_assert_int_eq(store_open(s_out, home), 0);
    ck_assert_int_eq(name_parse(&name, "tiny"), 0);
    ck_assert_msg(import_hf_dir(*s_out, hf, &name, &(import_opts){ .quiet = 1 }, digest) == 0, "%s", ms_err_msg());
    ck_assert_int_eq(store_manifest_load(*s_out, digest, m_out), 0);
    *home_out = home;
    free(mem.p);
    free(cfg);
    free(hf);
}

START_TEST(from_manifest_reads_tokenizer_json_and_eos_lists)
{
    static const struct { const char *gen, *cfg_eos; int eos, eog[3]; } cases[] = {
        { "{\"eos_token_id\": [3, 4, 99]}", "2", 3, { 3, 4, -1 } },   /* generation_config wins; 99 is no token */
        { NULL, "[2, 1]", 2, { 2, 1, -1 } },                            /* else config.json's list */
        { "{\"eos_token_id\": 4}", "null", 4, { 4, -1 } },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        store *s;
        manifest *m;
        char *home;
        tokenizer *t = NULL;

        store_model *sm;
        model_name mn;

        import_tiny(&s, &m, &home, cases[i].gen, cases[i].cfg_eos, 1);
        ck_assert_int_eq(name_parse(&mn, "tiny"), 0);
        ck_assert_int_eq(store_model_open(&sm, s, &mn), 0);
        ck_assert_msg(runtime_tokenizer_from_model(&t, sm) == 0, "%s", ms_err_msg());
        store_model_close(sm);
        ck_assert_int_eq(tokenizer_kind_get(t), TOKENIZER_BPE);
        ck_assert_int_eq(tokenizer_eos(t), cases[i].eos);
        for (int k = 0; cases[i].eog[k] >= 0; k++)
            ck_assert_msg(tokenizer_is_eog(t, cases[i].eog[k]), "case %zu: %d ends generation", i, cases[i].eog[k]);
        ck_assert(!tokenizer_is_eog(t, 0));
        expect_ids(t, "abc", 1, 0, IDS(0, 4));
        tokenizer_free(t);
        manifest_free(m);
        store_close(s);
        fixture_rmrf(home);
    }
}
END_TEST

START_TEST(wordpiece_in_gguf_form)
{
    tokenizer *t = load(WP, NULL);
    size_t len;
    const char *p;
    char buf[64];

    ck_assert_int_eq(tokenizer_kind_get(t), TOKENIZER_WPM);
    /* the vocab as llama.cpp's converter writes it: "▁" starts a word, "##" is gone, "[X]" kept */
    p = tokenizer_token_text(t, W_UN, &len);
    ck_assert_int_eq(len, 5);
    ck_assert_int_eq(memcmp(p, SP "un", 5), 0);
    p = tokenizer_token_text(t, W_AFF, &len);
    ck_assert_int_eq(len, 3);
    ck_assert_int_eq(memcmp(p, "aff", 3), 0);
    p = tokenizer_token_text(t, W_CLS, &len);
    ck_assert_int_eq(memcmp(p, "[CLS]", len), 0);
    ck_assert_int_eq(tokenizer_token_type(t, W_CLS), TOKEN_TYPE_CONTROL);
    ck_assert_int_eq(tokenizer_bos(t), W_CLS);
    ck_assert_int_eq(tokenizer_eos(t), W_SEP);
    ck_assert_int_eq(tokenizer_unk(t), W_UNK);
    expect_ids(t, "UnAffable hello!", 1, 0, (const int32_t[]){ W_CLS, W_UN, W_AFF, W_ABLE, W_HELLO, W_BANG, W_SEP, -1 });
    expect_ids(t, "", 1, 0, (const int32_t[]){ W_CLS, W_SEP, -1 });
    /* "[CLS]" is text unless parse_special; "[" is no token: unknown */
    expect_ids(t, "[CLS]a", 0, 1, (const int32_t[]){ W_CLS, W_A, -1 });
    expect_ids(t, "[CLS]a", 0, 0, (const int32_t[]){ W_UNK, W_UNK, W_UNK, W_A, -1 });
    /* decoding: a word's first piece brings its space, the text's first loses it */
    ck_assert_int_eq(tokenizer_decode(t, (const int32_t[]){ W_CLS, W_UN, W_AFF, W_ABLE, W_HELLO, W_BANG, W_SEP }, 7, 0,
                                      buf, sizeof buf, &len), 0);
    ck_assert_str_eq((buf[len] = '\0', buf), "unaffable hello !");
    tokenizer_free(t);
}
END_TEST

/* BertNormalizer's switches, each against the default. */
START_TEST(wordpiece_normalizer_switches)
{
    static const char norm[] = "\"clean_text\":true,\"handle_chinese_chars\":true,\"strip_accents\":null,\"lowercase\":true";
    static const struct {
        const char *to, *text;
        int32_t want[4], want_default[4];
    } rows[] = {
        /* lower case, accents follow it (null): CAFÉS -> cafes; without both nothing matches */
        { "\"strip_accents\":null,\"lowercase\":false", "CAFES", { W_UNK, -1 }, { W_CAFE, W_S, -1 } },
        /* "cafeé": ##é stays a token of its own, or becomes e (and "##e" is no token) */
        { "\"strip_accents\":false,\"lowercase\":false", "cafe\xc3\xa9", { W_CAFE, W_EACUTE, -1 }, { W_UNK, -1 } },
        { "\"strip_accents\":false,\"lowercase\":true", "CAFE\xc3\x89", { W_CAFE, W_EACUTE, -1 }, { W_UNK, -1 } },
        { "\"strip_accents\":true,\"lowercase\":false", "CAF\xc3\x89S", { W_UNK, -1 }, { W_CAFE, W_S, -1 } },
        /* CJK ideographs alone, or inside the word */
        { "\"handle_chinese_chars\":false", "\xe4\xb8\xad\xe4\xb8\xad", { W_UNK, -1 }, { W_ZH, W_ZH, -1 } },
        /* control characters dropped, or kept (and so unknown) */
        { "\"clean_text\":false", "x\x01x", { W_UNK, -1 }, { W_X, W_XX, -1 } },
    };
    char *from = strdup(norm), *j;
    tokenizer *t, *d = load(WP, NULL);

    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        char *to = ms_strdup_printf("%s%s%s", norm, ",", rows[i].to);   /* the later key wins in jansson */
        j = patched(WP, from, to);
        t = load(j, NULL);
        expect_ids(t, rows[i].text, 0, 0, rows[i].want);
        expect_ids(d, rows[i].text, 0, 0, rows[i].want_default);
        tokenizer_free(t);
        free(j);
        free(to);
    }
    /* no normalizer at all: no lower case */
    j = patched(WP, "{\"type\":\"BertNormalizer\",", "null,\"x\":{");
    t = load(j, NULL);
    expect_ids(t, "HELLO hello", 0, 0, (const int32_t[]){ W_UNK, W_HELLO, -1 });
    tokenizer_free(t);
    free(j);
    tokenizer_free(d);
    free(from);
}
END_TEST

START_TEST(wordpiece_max_input_chars_per_word)
{
    char *j = patched(WP, "\"max_input_chars_per_word\":100", "\"max_input_chars_per_word\":5");
    tokenizer *t = load(j, NULL), *d = load(WP, NULL);
    char x[102];
    int32_t *ids;
    size_t n;

    expect_ids(t, "hello unaffable", 0, 0, (const int32_t[]){ W_HELLO, W_UNK, -1 });
    expect_ids(d, "hello unaffable", 0, 0, (const int32_t[]){ W_HELLO, W_UN, W_AFF, W_ABLE, -1 });
    /* the default, 100 code points: a word of 100 is cut into pieces, one of 101 is unknown */
    memset(x, 'x', 101);
    ck_assert_int_eq(tokenizer_encode_alloc(d, x, 100, 0, 0, &ids, &n), 0);
    ck_assert_uint_eq(n, 100);
    ck_assert_int_eq(ids[0], W_X);
    ck_assert_int_eq(ids[99], W_XX);
    free(ids);
    ck_assert_int_eq(tokenizer_encode_alloc(d, x, 101, 0, 0, &ids, &n), 0);
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(ids[0], W_UNK);
    free(ids);
    tokenizer_free(t);
    tokenizer_free(d);
    free(j);
}
END_TEST

/* [CLS] / [SEP] from BertProcessing, from nothing (not added), and from tokenizer_config.json. */
START_TEST(wordpiece_special_tokens)
{
    const char *tmpl = strstr(WP, "\"post_processor\":"), *end = strstr(WP, ",\"decoder\":");
    char *from = strndup(tmpl, (size_t)(end - tmpl));
    char *j = patched(WP, from, "\"post_processor\":{\"type\":\"BertProcessing\",\"sep\":[\"[SEP]\",3],\"cls\":[\"[CLS]\",2]}");
    tokenizer *t = load(j, NULL);

    expect_ids(t, "a", 1, 0, (const int32_t[]){ W_CLS, W_A, W_SEP, -1 });
    tokenizer_free(t);
    free(j);
    j = patched(WP, from, "\"post_processor\":null");
    t = load(j, NULL);
    ck_assert_int_eq(tokenizer_bos(t), W_CLS);
    ck_assert_int_eq(tokenizer_adds_bos(t), 0);
    ck_assert_int_eq(tokenizer_adds_eos(t), 0);
    expect_ids(t, "a", 1, 0, (const int32_t[]){ W_A, -1 });
    tokenizer_free(t);
    free(j);
    t = load(WP, "{\"cls_token\": \"[PAD]\", \"sep_token\": {\"content\": \"[UNK]\"}}");
    expect_ids(t, "a", 1, 0, (const int32_t[]){ W_PAD, W_A, W_UNK, -1 });
    tokenizer_free(t);
    free(from);
}
END_TEST

START_TEST(from_manifest_without_tokenizer_is_not_found)
{
    store *s;
    manifest *m;
    char *home;
    tokenizer *t = (tokenizer *)1;

    store_model *sm;
    model_name mn;

    import_tiny(&s, &m, &home, NULL, "2", 0);
    ck_assert_int_eq(name_parse(&mn, "tiny"), 0);
    ck_assert_int_eq(store_model_open(&sm, s, &mn), 0);
    ck_assert_int_eq(runtime_tokenizer_from_model(&t, sm), MS_ENOTFOUND);
    store_model_close(sm);
    ck_assert_ptr_null(t);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "model 'tiny:latest': no tokenizer (no GGUF metadata or tokenizer.json layer)"));
    manifest_free(m);
    store_close(s);
    fixture_rmrf(home);
}
END_TEST

static const struct bad_json {
    const char *base, *from, *to;   /* base with `from` replaced by `to` (from NULL: to is the text) */
    const char *config;
    int code;
    const char *expect;
} bad[] = {
    { BL, NULL, "{\"model\":", NULL, MS_EINVALID, "tokenizer.json: line 1" },
    { BL, NULL, "{\"a\":1}", NULL, MS_EINVALID, "model: expected an object" },
    { BL, NULL, "{\"model\":{\"type\":\"BPE\"}}", NULL, MS_EINVALID, "model.vocab: required, an object" },
    { BL, "\"merges\":[", "\"merges_\":[", NULL, MS_EINVALID, "model.merges: required for BPE, an array" },
    { BL, "\"type\":\"BPE\"", "\"type\":\"Unigram\"", NULL, MS_EUNSUPPORTED, "model.type: 'Unigram' is not supported" },
    { BL, "\"type\":\"BPE\"", "\"type\":\"WordLevel\"", NULL, MS_EUNSUPPORTED, "model.type: 'WordLevel' is not supported" },
    { BL, "\"use_regex\":true", "\"use_regex\":true,\"add_prefix_space\":true", NULL, MS_EUNSUPPORTED,
      "pre_tokenizer.add_prefix_space: true is not supported" },
    { BL, "{\"type\":\"ByteLevel\",\"use_regex\":true}", "{\"type\":\"Whitespace\"}", NULL, MS_EUNSUPPORTED,
      "pre_tokenizer.type: pre-tokenizer 'Whitespace' is not supported" },
    { BL, "{\"type\":\"ByteLevel\",\"use_regex\":true}",
      "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":\"a\"},\"behavior\":\"Removed\"}]}",
      NULL, MS_EUNSUPPORTED, "pre_tokenizer.pretokenizers[0].behavior: 'Removed' is not supported" },
    { BL, "{\"type\":\"ByteLevel\",\"use_regex\":true}",
      "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"a\"},\"behavior\":\"Isolated\",\"invert\":true}", NULL,
      MS_EUNSUPPORTED, "pre_tokenizer.invert: true is not supported" },
    { BL, "{\"type\":\"ByteLevel\",\"use_regex\":true}",
      "{\"type\":\"Split\",\"pattern\":{\"String\":\" \"},\"behavior\":\"Isolated\"}", NULL, MS_EUNSUPPORTED,
      "pre_tokenizer.pattern: only {\"Regex\": ...} patterns are supported" },
    { BL, "{\"type\":\"ByteLevel\",\"use_regex\":true}",
      "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":\"\\\\w+\"},"
      "\"behavior\":\"Isolated\"},{\"type\":\"ByteLevel\",\"use_regex\":false}]}", NULL, MS_EUNSUPPORTED,
      "pre_tokenizer: unknown pre-tokenizer (1 regexes, the first '\\w+')" },
    { BL, "{\"type\":\"ByteLevel\",\"use_regex\":true}", "{\"type\":\"Sequence\",\"pretokenizers\":3}", NULL,
      MS_EINVALID, "pre_tokenizer.pretokenizers: expected an array" },
    { BL, "\"normalizer\":null", "\"normalizer\":{\"type\":\"Lowercase\"}", NULL, MS_EUNSUPPORTED,
      "normalizer: 'Lowercase' is not supported for a byte-level BPE" },
    { BL, "\"a\":0", "\"a\":-1", NULL, MS_EINVALID, "model.vocab['a']: id -1 out of range" },
    { BL, "\"a\":0", "\"a\":\"0\"", NULL, MS_EINVALID, "model.vocab['a']: id is not an integer" },
    { BL, "\"b\":1", "\"b\":0", NULL, MS_EINVALID, "model.vocab: id 0 is given to" },
    { BL, "\"c\":2", "\"c\":1000000", NULL, MS_EINVALID, "more than 65536 unused ids" },
    { BL, "\"c\":2", "\"c\":16777216", NULL, MS_EINVALID, "id 16777216 out of range [0, 16777216)" },
    { BL, "[\"b c\",", "[5,", NULL, MS_EINVALID, "model.merges[0]: expected \"a b\" or [\"a\", \"b\"]" },
    { BL, "[\"b c\",", "[[\"b x\",\"c\"],", NULL, MS_EUNSUPPORTED, "model.merges[0]: 'b x' is empty or holds a space" },
    { BL, "\"content\":\"<U>\"", "\"content\":6", NULL, MS_EINVALID, "added_tokens[1].content: expected a string" },
    { BL, "\"id\":6,", "\"id\":null,", NULL, MS_EINVALID, "added_tokens[].id: id is not an integer" },
    { BL, "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"use_regex\":true},", "", NULL, MS_EUNSUPPORTED,
      "a byte-level BPE without pre-tokenizer regexes is not supported" },
    { BL, "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"use_regex\":true},\"post_processor\":{\"type\":\"ByteLevel\"},"
          "\"decoder\":{\"type\":\"ByteLevel\"},", "", NULL, MS_EUNSUPPORTED,
      "a BPE model that is neither byte-level (ByteLevel pre-tokenizer or decoder) nor SentencePiece-style" },
    { BL, "\"normalizer\":null", "\"normalizer\":null", "{\"bos_token\": \"<nope>\"}", MS_EINVALID,
      "tokenizer_config.json: bos_token: '<nope>' is not a token of the vocab" },
    { BL, "\"normalizer\":null", "\"normalizer\":null", "[1", MS_EINVALID, "tokenizer_config.json: line 1" },
    { BL, "\"post_processor\":{\"type\":\"ByteLevel\"}",
      "\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<q>\"}}]}", NULL,
      MS_EINVALID, "post_processor.single[].SpecialToken.id: '<q>' is not a token" },
    { SPM, "\"pre_tokenizer\":null", "\"pre_tokenizer\":{\"type\":\"Metaspace\",\"split\":true}", NULL,
      MS_EUNSUPPORTED, "pre_tokenizer.split: true is not supported" },
    { SPM, "{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"" SP "\"}",
      "{\"type\":\"NFKC\"}", NULL, MS_EUNSUPPORTED, "normalizer: 'NFKC' is not supported for a byte_fallback BPE" },
    { SPM, ",{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"" SP "\"}", "", NULL, MS_EUNSUPPORTED,
      "a byte_fallback BPE that does not turn spaces into U+2581 is not supported" },
    { WP, "\"vocab\":{", "\"vocab_\":{", NULL, MS_EINVALID, "tokenizer.json: model.vocab: required, an object" },
    { WP, "\"unk_token\":\"[UNK]\",", "", NULL, MS_EINVALID, "model.unk_token: required for WordPiece" },
    { WP, "\"unk_token\":\"[UNK]\"", "\"unk_token\":\"[NOPE]\"", NULL, MS_EINVALID,
      "model.unk_token: '[NOPE]' is not a token of the vocab" },
    { WP, "\"max_input_chars_per_word\":100", "\"max_input_chars_per_word\":100000000", NULL, MS_EINVALID,
      "model.max_input_chars_per_word: 100000000 out of range (1..1000000)" },
    { WP, "\"max_input_chars_per_word\":100", "\"max_input_chars_per_word\":0", NULL, MS_EINVALID,
      "model.max_input_chars_per_word: 0 out of range" },
    { WP, "\"max_input_chars_per_word\":100", "\"max_input_chars_per_word\":\"100\"", NULL, MS_EINVALID,
      "model.max_input_chars_per_word: expected an integer" },
    { WP, "\"un\":4", "\"un\":16777216", NULL, MS_EINVALID, "model.vocab['un']: id 16777216 out of range" },
    { WP, "\"un\":4", "\"un\":-4", NULL, MS_EINVALID, "model.vocab['un']: id -4 out of range" },
    { WP, "\"continuing_subword_prefix\":\"##\"", "\"continuing_subword_prefix\":\"@@\"", NULL, MS_EUNSUPPORTED,
      "model.continuing_subword_prefix: '@@' is not supported" },
    { WP, "{\"type\":\"BertNormalizer\",", "{\"type\":\"Lowercase\",", NULL, MS_EUNSUPPORTED,
      "normalizer.type: 'Lowercase' is not supported for WordPiece" },
    { WP, "{\"type\":\"BertPreTokenizer\"}", "{\"type\":\"Whitespace\"}", NULL, MS_EUNSUPPORTED,
      "pre_tokenizer: 'Whitespace' is not supported for WordPiece" },
    { WP, "{\"type\":\"BertPreTokenizer\"}", "null", NULL, MS_EUNSUPPORTED,
      "pre_tokenizer: 'null' is not supported for WordPiece" },
    { WP, "\"type\":\"TemplateProcessing\"", "\"type\":\"RobertaProcessing\"", NULL, MS_EUNSUPPORTED,
      "post_processor.type: 'RobertaProcessing' is not supported for WordPiece" },
    { WP, "\"type\":\"TemplateProcessing\"", "\"type\":\"BertProcessing\",\"cls\":[\"[CLS]\",2],\"sep\":[\"[SEP]\",999]",
      NULL, MS_EINVALID, "post_processor.sep: id 999 out of range (vocab has 16 tokens)" },
    { WP, "\"type\":\"TemplateProcessing\"", "\"type\":\"BertProcessing\",\"cls\":\"[CLS]\"", NULL, MS_EINVALID,
      "post_processor.cls: expected [\"token\", id]" },
    { WP, "\"ids\":[3],\"tokens\":[\"[SEP]\"]", "\"ids\":[99],\"tokens\":[\"[SEP]\"]", NULL, MS_EINVALID,
      "post_processor.special_tokens['[SEP]'].ids[0]: id 99 out of range (vocab has 16 tokens)" },
    { WP, "\"id\":\"[SEP]\",\"type_id\"", "\"id\":\"[NOPE]\",\"type_id\"", NULL, MS_EINVALID,
      "post_processor.single[].SpecialToken.id: '[NOPE]' is not a token of the vocab" },
    { WP, "\"normalizer\":", "\"normalizer\":", "{\"sep_token\": \"[NOPE]\"}", MS_EINVALID,
      "tokenizer_config.json: sep_token: '[NOPE]' is not a token of the vocab" },
};

START_TEST(from_json_refuses_bad_input)
{
    const struct bad_json *b = &bad[_i];
    char *j = patched(b->base, b->from, b->to);
    tokenizer *t = (tokenizer *)1;
    int rc = tokenizer_from_json(&t, j, strlen(j), b->config, "tokenizer.json");

    ck_assert_msg(rc == b->code, "case %d: rc %d, want %d (%s)", _i, rc, b->code, ms_err_msg());
    ck_assert_ptr_null(t);
    ck_assert_msg(strstr(ms_err_msg(), b->expect) != NULL, "case %d: '%s' lacks '%s'", _i, ms_err_msg(), b->expect);
    free(j);
}
END_TEST

Suite *tokenizer_json_suite(void)
{
    Suite *s = suite_create("tokenizer_json");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, byte_level_merges_by_rank);
    tcase_add_test(tc, byte_level_merge_pairs_equal_strings);
    tcase_add_test(tc, byte_level_pre_tokenizers_by_regex);
    tcase_add_test(tc, byte_level_specials_from_template_and_config);
    tcase_add_test(tc, unnamed_ids_are_unused_pads);
    tcase_add_test(tc, spm_form_scores_follow_merge_ranks);
    tcase_add_test(tc, spm_form_from_metaspace);
    tcase_add_test(tc, eog_add_marks_ids);
    tcase_add_test(tc, from_manifest_reads_tokenizer_json_and_eos_lists);
    tcase_add_test(tc, from_manifest_without_tokenizer_is_not_found);
    tcase_add_test(tc, wordpiece_in_gguf_form);
    tcase_add_test(tc, wordpiece_normalizer_switches);
    tcase_add_test(tc, wordpiece_max_input_chars_per_word);
    tcase_add_test(tc, wordpiece_special_tokens);
    tcase_add_loop_test(tc, from_json_refuses_bad_input, 0, sizeof bad / sizeof *bad);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(tokenizer_json_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
