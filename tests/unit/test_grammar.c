/* test_grammar.c: JSON Schema to grammar, refusals that name the keyword, byte-level acceptance
 * of valid and invalid documents, and token masks over a small vocabulary. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"
#include "helpers/fixture.h"
#include <jansson.h>

static grammar *compile_ok(const char *schema)
{
    grammar *g = NULL;
    int rc = grammar_from_format(&g, schema, strlen(schema), "--format");

    ck_assert_msg(rc == 0, "%s: %s", schema, ms_err_msg());
    return g;
}

/* Each schema with documents it must accept (+) and refuse (-). */
static const struct {
    const char *schema;
    const char *docs[12];
} cases[] = {
    {"json",
     {"+{}", "+{\"a\": [1, 2.5e3, \"x\", null, true]}", "+ {\n  \"a\": {\"b\": {}}\n}", "-[1]", "-\"x\"", "-{\"a\":}",
      "-{,}", "-{\"a\":1,}", "-{\"a\" 1}", "-{\"a\": 01}", "-{\"a\": \"\x01\"}"}},
    {"{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"age\":{\"type\":\"integer\"}},"
     "\"required\":[\"name\"]}",
     {"+{\"name\":\"Ann\"}", "+{\"name\": \"Ann\", \"age\": 31}", "-{\"age\": 31}", "-{\"name\":\"Ann\",\"x\":1}",
      "-{\"age\":3,\"name\":\"A\"}", "-{\"name\": 3}", "-{\"name\":\"A\",\"age\":1.5}"}},
    {"{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":2,\"maxItems\":3}",
     {"+[1,2]", "+[1, 2, 3]", "+[ 1 ,\n 2 ]", "-[1]", "-[]", "-[1,2,3,4]", "-[1,\"2\"]"}},
    {"{\"type\":\"array\",\"prefixItems\":[{\"type\":\"string\"},{\"type\":\"boolean\"}],\"items\":false}",
     {"+[\"a\",true]", "+[\"a\"]", "+[]", "-[\"a\",true,1]", "-[true]"}},
    {"{\"enum\":[\"red\",\"green\",3,null]}", {"+\"red\"", "+3", "+null", "-\"blue\"", "-\"re\"", "-4"}},
    {"{\"const\":{\"k\":[1,\"v\"]}}", {"+{\"k\":[1,\"v\"]}", "-{\"k\":[1]}"}},
    {"{\"anyOf\":[{\"type\":\"string\",\"maxLength\":2},{\"type\":\"integer\",\"minimum\":5}]}",
     {"+\"ab\"", "+\"\"", "+5", "+123", "-\"abc\"", "-4", "--1"}},
    {"{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},\"next\":{\"anyOf\":"
     "[{\"$ref\":\"#/$defs/node\"},{\"type\":\"null\"}]}},\"required\":[\"v\",\"next\"]}},\"$ref\":\"#/$defs/node\"}",
     {"+{\"v\":1,\"next\":null}", "+{\"v\":1,\"next\":{\"v\":2,\"next\":{\"v\":3,\"next\":null}}}", "-{\"v\":1}",
      "-{\"v\":1,\"next\":{\"v\":2}}"}},
    {"{\"type\":\"object\",\"properties\":{\"n\":{\"type\":[\"string\",\"null\"]},\"m\":{\"type\":\"string\","
     "\"nullable\":true}},\"required\":[\"n\",\"m\"]}",
     {"+{\"n\":null,\"m\":\"x\"}", "+{\"n\":\"y\",\"m\":null}", "-{\"n\":1,\"m\":null}"}},
    {"{\"type\":\"string\"}",
     {"+\"a\\\"b\\\\c\\n\\u00e9\"", "+\"h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80\"", "-\"\xc3\"", "-\"\xc0\xaf\"",
      "-\"\xed\xa0\x80\"", "-\"a\\x\"", "-\"a\\u12\"", "-\"tab\there\""}},
    {"{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}",
     {"+\"ab\"", "+\"\xc3\xa9\xc3\xa9\xc3\xa9\"", "+\"a\\nb\"", "-\"a\"", "-\"abcd\""}},
    {"{\"type\":\"integer\",\"minimum\":-15,\"maximum\":127}",
     {"+-15", "+0", "+9", "+10", "+99", "+127", "+-1", "--16", "-128", "--0", "-007", "-200"}},
    {"{\"type\":\"integer\",\"exclusiveMinimum\":0,\"exclusiveMaximum\":1000}",
     {"+1", "+999", "+500", "-0", "-1000", "--5"}},
    {"{\"type\":\"integer\",\"minimum\":100}", {"+100", "+5000", "+9999999999999999", "-99", "--1", "-0"}},
    {"{\"type\":\"integer\",\"maximum\":-3}", {"+-3", "+-100", "+-9999999999999999", "--2", "-0", "-5"}},
    {"{\"type\":\"integer\",\"minimum\":0,\"maximum\":0}", {"+0", "--0", "-1", "-00"}},
    {"{\"type\":\"string\",\"format\":\"date\"}",
     {"+\"2024-02-29\"", "+\"1999-12-31\"", "-\"2024-13-01\"", "-\"2024-00-10\"", "-\"2024-01-32\"", "-\"24-01-01\""}},
    {"{\"type\":\"string\",\"format\":\"date-time\"}",
     {"+\"2024-02-29T23:59:59Z\"", "+\"2024-02-29T00:00:00.123+05:30\"", "-\"2024-02-29T24:00:00Z\"",
      "-\"2024-02-29 10:00:00Z\""}},
    {"{\"type\":\"string\",\"format\":\"time\"}", {"+\"10:20:30Z\"", "-\"10:20\""}},
    {"{\"type\":\"string\",\"format\":\"uuid\"}",
     {"+\"123e4567-e89b-12d3-a456-426614174000\"", "-\"123e4567e89b12d3a456426614174000\"",
      "-\"123e4567-e89b-12d3-a456-42661417400g\""}},
    {"{\"type\":\"string\",\"pattern\":\"^[A-Z]{2}-\\\\d{3}(x|yz)?$\"}",
     {"+\"AB-123\"", "+\"QQ-000yz\"", "+\"AB-123x\"", "-\"ab-123\"", "-\"AB-12\"", "-\"AB-123y\""}},
    {"{\"type\":\"object\",\"additionalProperties\":{\"type\":\"number\"}}",
     {"+{}", "+{\"a\":1,\"b\":-2.5}", "-{\"a\":\"x\"}"}},
    {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"boolean\"}},\"additionalProperties\":true}",
     {"+{\"a\":true,\"z\":[1]}", "+{\"z\":{}}", "+{}"}},
    {"{\"type\":\"object\",\"properties\":{\"a\":{},\"b\":{},\"c\":{}}}",
     {"+{}", "+{\"a\":1,\"c\":3}", "+{\"b\":[],\"c\":{}}", "+{\"a\":1,\"b\":2,\"c\":3}", "-{\"c\":3,\"a\":1}",
      "-{,\"b\":1}"}},
    {"{\"$defs\":{\"p\":{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"boolean\"}},\"required\":[\"x\"]}},"
     "\"type\":\"object\",\"properties\":{\"a\":{\"allOf\":[{\"$ref\":\"#/$defs/p\"}],\"description\":\"d\"}},"
     "\"required\":[\"a\"]}",
     {"+{\"a\":{\"x\":true}}", "-{\"a\":{}}", "-{\"a\":true}"}},
    {"{\"type\":\"number\"}", {"+0", "+-1.5", "+2e10", "+3.25E-2", "-1.", "-.5", "-+1", "-01"}},
    {"{\"type\":\"array\"}", {"+[]", "+[1,{\"a\":[null]}]", "-[1,]"}},
    {"true", {"+1", "+\"x\"", "+[]", "-"}},
};

START_TEST(grammar_schema_accepts_exactly_its_documents)
{
    grammar *g = compile_ok(cases[_i].schema);

    for (size_t k = 0; k < sizeof cases[_i].docs / sizeof *cases[_i].docs && cases[_i].docs[k]; k++) {
        const char *d = cases[_i].docs[k];
        int want = d[0] == '+';
        ck_assert_msg(grammar_accepts(g, d + 1, strlen(d + 1)) == want, "schema %s: %s should be %s", cases[_i].schema,
                      d + 1, want ? "accepted" : "refused");
    }
    grammar_free(g);
}
END_TEST

static const struct {
    const char *schema;
    int code;
    const char *expect;
} refusals[] = {
    {"{\"type\":\"object\",\"properties\":{\"a\":{\"allOf\":[]}}}", MS_EUNSUPPORTED,
     "schema keyword 'allOf' at '/properties/a' is not supported"},
    {"{\"allOf\":[{\"type\":\"string\"},{\"maxLength\":3}]}", MS_EUNSUPPORTED,
     "'allOf' at '' is not supported (only as the one keyword, of exactly one schema)"},
    {"{\"not\":{}}", MS_EUNSUPPORTED, "schema keyword 'not' at '' is not supported"},
    {"{\"type\":\"array\",\"items\":{\"uniqueItems\":true}}", MS_EUNSUPPORTED, "'uniqueItems' at '/items'"},
    {"{\"type\":\"number\",\"minimum\":1}", MS_EUNSUPPORTED, "'minimum' at '' is not supported for type 'number'"},
    {"{\"type\":\"string\",\"format\":\"email\"}", MS_EUNSUPPORTED, "format 'email' is not supported"},
    {"{\"type\":\"string\",\"pattern\":\"abc\"}", MS_EUNSUPPORTED, "must be anchored"},
    {"{\"type\":\"string\",\"pattern\":\"^a(?=b)$\"}", MS_EUNSUPPORTED, "a group of this kind"},
    {"{\"$ref\":\"https://example.com/s.json\"}", MS_EUNSUPPORTED, "'$ref' at ''"},
    {"{\"$ref\":\"#/$defs/missing\"}", MS_EINVALID, "'#/$defs/missing' resolves to nothing"},
    {"{\"type\":\"strin\"}", MS_EINVALID, "unknown type 'strin'"},
    {"{\"enum\":[]}", MS_EINVALID, "accepts nothing"},
    {"{\"type\":\"integer\",\"minimum\":5,\"maximum\":4}", MS_EINVALID, "accepts nothing"},
    {"{\"type\":\"string\",\"maxLength\":-1}", MS_EINVALID, "'maxLength' at ''"},
    {"{\"type\":\"string\",\"maxLength\":1000000}", MS_ETOOBIG, "'maxLength' at '': 1000000 is more than"},
    {"{\"properties\":{\"a\":false},\"required\":[\"a\"]}", MS_EINVALID, "schema at '/properties/a' accepts nothing"},
    {"{\"type\":", MS_EINVALID, "--format: expected \"json\" or a JSON schema"},
    {"{\"type\":\"object\",\"minProperties\":1}", MS_EUNSUPPORTED, "'minProperties'"},
};

START_TEST(grammar_schema_refusal_names_the_keyword)
{
    grammar *g = (grammar *)1;
    int rc = grammar_from_format(&g, refusals[_i].schema, strlen(refusals[_i].schema), "--format");

    ck_assert_msg(rc == refusals[_i].code, "%s: rc %d (%s)", refusals[_i].schema, rc, ms_err_msg());
    ck_assert_ptr_null(g);
    ck_assert_msg(strstr(ms_err_msg(), refusals[_i].expect), "%s: message '%s' lacks '%s'", refusals[_i].schema,
                  ms_err_msg(), refusals[_i].expect);
}
END_TEST

/* A framed grammar (a forced tool call) takes the literals around the answer, exactly. */
START_TEST(grammar_framed_takes_its_literals_exactly)
{
    static const char schema[] =
        "{\"type\":\"object\",\"properties\":{\"name\":{\"const\":\"f\"}},\"required\":[\"name\"]}";
    static const struct {
        const char *text;
        int ok;
    } docs[] = {
        {"<tool_call>\n{\"name\": \"f\"}\n</tool_call>", 1},
        {"<tool_call>\n{\"name\":\"f\"}\n</tool_call>", 1},
        {"<tool_call>\n{\"name\": \"f\"}", 0}, /* no suffix */
        {"{\"name\": \"f\"}\n</tool_call>", 0}, /* no prefix */
        {"<tool_call>{\"name\": \"f\"}\n</tool_call>", 0}, /* the prefix's newline is part of it */
        {"<tool_call>\n{\"name\": \"g\"}\n</tool_call>", 0},
        {"<tool_call>\n{\"name\": \"f\"}\n</tool_call>x", 0},
    };
    grammar *g;

    ck_assert_int_eq(grammar_from_format_framed(&g, schema, strlen(schema), "<tool_call>\n", "\n</tool_call>", "t"), 0);
    for (size_t i = 0; i < sizeof docs / sizeof *docs; i++)
        ck_assert_msg(grammar_accepts(g, docs[i].text, strlen(docs[i].text)) == docs[i].ok, "%s", docs[i].text);
    grammar_free(g);
    /* no literals: the plain grammar */
    ck_assert_int_eq(grammar_from_format_framed(&g, schema, strlen(schema), NULL, "", "t"), 0);
    ck_assert(grammar_accepts(g, "{\"name\":\"f\"}", 12));
    grammar_free(g);
}
END_TEST

START_TEST(grammar_schema_bounds_nesting_and_size)
{
    char deep[2048] = "";
    grammar *g = NULL;
    size_t n = 0;

    for (int i = 0; i < 80; i++)
        n += (size_t)snprintf(deep + n, sizeof deep - n, "{\"items\":");
    n += (size_t)snprintf(deep + n, sizeof deep - n, "{}");
    for (int i = 0; i < 80; i++)
        deep[n++] = '}';
    deep[n] = '\0';
    ck_assert_int_eq(grammar_from_format(&g, deep, n, "s"), MS_ETOOBIG);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "nested more than 64 deep"));
    /* a $ref cycle that never reaches a byte is not left recursion here: it still compiles to
     * something bounded, and ws is bounded so no document is endless whitespace */
    g = compile_ok("json");
    ck_assert(grammar_accepts(g, "{\n                    }", 23));
    ck_assert(!grammar_accepts(g, "{\n                     }", 24)); /* 21 spaces of indent */
    ck_assert(!grammar_accepts(g, "{  }", 4));
    grammar_free(g);
}
END_TEST

/* A vocab where every token is a few bytes: the mask must allow exactly the tokens whose bytes
 * continue the answer, and end tokens only when it is complete. */
START_TEST(grammar_mask_allows_exactly_the_continuing_tokens)
{
    static const char *const toks[] = {"<unk>", "<s>", "</s>", "{", "}",  "{\"",  "\"a\"", ":",        " ",   "1", "12",
                                       "a",     "\"",  ",",    "x", "{}", "\xc3", "\xa9",  "\xc3\xa9", "tru", "e"};
    size_t n = sizeof toks / sizeof *toks;
    int32_t types[sizeof toks / sizeof *toks];
    tokenizer *t = NULL;
    grammar *g = compile_ok("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"}},\"required\":[\"a\"]}");
    grammar_vocab *v = NULL;
    grammar_matcher *m = NULL;
    float logits[sizeof toks / sizeof *toks];
    size_t allowed;

    for (size_t i = 0; i < n; i++)
        types[i] = i < 3 ? TOKEN_TYPE_CONTROL : TOKEN_TYPE_USER_DEFINED;
    ck_assert_int_eq(tokenizer_new_spm(&t, n, toks, NULL, NULL, types, NULL), 0);
    ck_assert_int_eq(grammar_vocab_new(&v, t), 0);
    ck_assert_int_eq(grammar_matcher_new(&m, g), 0);
    for (size_t i = 0; i < n; i++)
        logits[i] = 1.0f;
    ck_assert_int_eq(grammar_matcher_mask(m, v, logits, &allowed), 0);
    /* start: "{", "{\"", " " */
    ck_assert_uint_eq(allowed, 3);
    ck_assert(isinf(logits[2]) && isinf(logits[15]) && !isinf(logits[3]) && !isinf(logits[5]) && !isinf(logits[8]));
    ck_assert_int_eq(grammar_matcher_accept(m, "{\"", 2), 0);
    ck_assert_int_eq(grammar_matcher_accept(m, "}", 1), MS_EINVALID);
    ck_assert_int_eq(grammar_matcher_accept(m, "a\":\"", 4), 0);
    /* inside the string: a UTF-8 lead byte alone is allowed, a continuation byte alone is not */
    for (size_t i = 0; i < n; i++)
        logits[i] = 1.0f;
    ck_assert_int_eq(grammar_matcher_mask(m, v, logits, &allowed), 0);
    ck_assert(!isinf(logits[16]) && isinf(logits[17]) && !isinf(logits[18]) && !isinf(logits[12]));
    ck_assert_int_eq(grammar_matcher_accept(m, "\xc3", 1), 0);
    for (size_t i = 0; i < n; i++)
        logits[i] = 1.0f;
    ck_assert_int_eq(grammar_matcher_mask(m, v, logits, &allowed), 0);
    ck_assert_uint_eq(allowed, 1);
    ck_assert(!isinf(logits[17]));
    ck_assert_int_eq(grammar_matcher_accept(m, "\xa9\"}", 3), 0);
    ck_assert(grammar_matcher_complete(m));
    for (size_t i = 0; i < n; i++)
        logits[i] = 1.0f;
    ck_assert_int_eq(grammar_matcher_mask(m, v, logits, &allowed), 0);
    ck_assert(!isinf(logits[2]) && !isinf(logits[8]) && isinf(logits[4])); /* </s> or trailing space */
    ck_assert(!grammar_matcher_finished(m));
    grammar_matcher_reset(m);
    ck_assert(!grammar_matcher_complete(m));
    grammar_matcher_free(m);
    grammar_vocab_free(v);
    grammar_free(g);
    tokenizer_free(t);
}
END_TEST

/* Past MAX_STATES distinct states the matcher's cache starts over, keeping the current state:
 * two long bounded strings make about 18000 states, and the answer still goes on correctly. */
START_TEST(grammar_matcher_survives_its_cache_starting_over)
{
    grammar *g = compile_ok("{\"type\":\"array\",\"prefixItems\":[{\"type\":\"string\",\"maxLength\":10000},"
                            "{\"type\":\"string\",\"maxLength\":10000}],\"items\":false,\"minItems\":2}");
    grammar_matcher *m = NULL;
    char chunk[100];

    memset(chunk, 'a', sizeof chunk);
    ck_assert_int_eq(grammar_matcher_new(&m, g), 0);
    ck_assert_int_eq(grammar_matcher_accept(m, "[\"", 2), 0);
    for (int i = 0; i < 90; i++)
        ck_assert_int_eq(grammar_matcher_accept(m, chunk, sizeof chunk), 0);
    ck_assert_int_eq(grammar_matcher_accept(m, "\",\"", 3), 0);
    for (int i = 0; i < 100; i++)
        ck_assert_int_eq(grammar_matcher_accept(m, chunk, sizeof chunk), 0);
    ck_assert(!grammar_matcher_complete(m));
    ck_assert_int_eq(grammar_matcher_accept(m, "a", 1), MS_EINVALID); /* the 10001st character */
    ck_assert_int_eq(grammar_matcher_accept(m, "\"]", 2), 0);
    ck_assert(grammar_matcher_complete(m) && !grammar_matcher_finished(m)); /* whitespace may follow */
    grammar_matcher_free(m);
    grammar_free(g);
}
END_TEST

/* On real vocabularies (SentencePiece llama, byte-level BPE gpt-2): random walks that pick any
 * allowed token each step must only ever build answers the grammar accepts, and every answer
 * that ends (an end token allowed and taken, or nothing more possible) parses as JSON. This is
 * the mask and accept agreeing on tokens of many bytes, byte tokens and split characters. */
static const char *const vocabs[] = {"ggml-vocab-llama-spm.gguf", "ggml-vocab-gpt-2.gguf"};

START_TEST(grammar_random_walks_over_real_vocabs_stay_valid)
{
    static const char *const formats[] = {
        "json",
        "{\"type\":\"object\",\"properties\":{\"s\":{\"type\":\"string\",\"maxLength\":5},\"n\":{\"type\":"
        "\"integer\",\"minimum\":-20,\"maximum\":300},\"e\":{\"enum\":[\"a\",1,null]},\"d\":{\"type\":\"string\","
        "\"format\":\"date\"}},\"required\":[\"s\",\"n\",\"e\",\"d\"]}",
    };
    char *models = fixture_models_dir(), *path;
    gguf_file *gf = NULL;
    tokenizer *t = NULL;
    grammar_vocab *v = NULL;
    size_t n_vocab, n_ended = 0;
    float *logits;
    unsigned seed = 12345;

    if (!models)
        return;
    path = ms_strdup_printf("%s/vocab/%s", models, vocabs[_i]);
    free(models);
    ck_assert_msg(gguf_open(&gf, path) == 0, "%s", ms_err_msg());
    ck_assert_msg(tokenizer_from_gguf(&t, gf, path) == 0, "%s", ms_err_msg());
    free(path);
    ck_assert_int_eq(grammar_vocab_new(&v, t), 0);
    n_vocab = tokenizer_n_vocab(t);
    logits = malloc(n_vocab * sizeof *logits);
    for (size_t fi = 0; fi < sizeof formats / sizeof *formats; fi++) {
        grammar *g = compile_ok(formats[fi]);
        grammar_matcher *m = NULL;
        ck_assert_int_eq(grammar_matcher_new(&m, g), 0);
        for (int walk = 0; walk < 20; walk++) {
            char text[4096];
            size_t n = 0, allowed;
            grammar_matcher_reset(m);
            for (int step = 0; step < 200; step++) {
                size_t pick, len = 0;
                int32_t id = 0;
                char piece[256];
                for (size_t i = 0; i < n_vocab; i++)
                    logits[i] = 0;
                ck_assert_int_eq(grammar_matcher_mask(m, v, logits, &allowed), 0);
                /* the pick-th allowed token, short answers favoured by preferring end tokens */
                seed = seed * 1103515245u + 12345u;
                pick = (seed >> 8) % allowed;
                for (size_t i = 0; i < n_vocab; i++)
                    if (!isinf(logits[i]) && pick-- == 0) {
                        id = (int32_t)i;
                        break;
                    }
                if (grammar_matcher_complete(m) && (seed & 0x300) == 0)
                    break; /* stop as an end token would */
                if (tokenizer_is_eog(t, id))
                    break;
                ck_assert_int_eq(tokenizer_decode_piece(t, id, 0, piece, sizeof piece, &len), 0);
                ck_assert_uint_gt(len, 0);
                ck_assert_msg(grammar_matcher_accept(m, piece, len) == 0, "%s", ms_err_msg());
                ck_assert_uint_lt(n + len, sizeof text);
                memcpy(text + n, piece, len);
                n += len;
                if (grammar_matcher_finished(m))
                    break;
            }
            if (grammar_matcher_complete(m)) {
                json_error_t je;
                json_t *j = json_loadb(text, n, JSON_DECODE_ANY, &je);
                ck_assert_msg(j != NULL, "%s: %.*s: %s", formats[fi], (int)n, text, je.text);
                ck_assert(grammar_accepts(g, text, n));
                json_decref(j);
                n_ended++;
            }
        }
        grammar_matcher_free(m);
        grammar_free(g);
    }
    ck_assert_uint_gt(n_ended, 0);
    free(logits);
    grammar_vocab_free(v);
    tokenizer_free(t);
    gguf_close(gf);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("grammar");
    TCase *tc = tcase_create("grammar");
    SRunner *sr;
    int failed;

    tcase_add_loop_test(tc, grammar_schema_accepts_exactly_its_documents, 0, sizeof cases / sizeof *cases);
    tcase_add_loop_test(tc, grammar_schema_refusal_names_the_keyword, 0, sizeof refusals / sizeof *refusals);
    tcase_add_test(tc, grammar_framed_takes_its_literals_exactly);
    tcase_add_test(tc, grammar_schema_bounds_nesting_and_size);
    tcase_add_test(tc, grammar_mask_allows_exactly_the_continuing_tokens);
    tcase_add_test(tc, grammar_matcher_survives_its_cache_starting_over);
    tcase_add_loop_test(tc, grammar_random_walks_over_real_vocabs_stay_valid, 0, sizeof vocabs / sizeof *vocabs);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
