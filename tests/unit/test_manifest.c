/* test_manifest.c: manifests (src/manifest/manifest.c) and model names (src/manifest/name.c). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "manifest/manifest.h"

#define H64(c) c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c \
               c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c
#define DA "sha256:" H64("a")
#define DB "sha256:" H64("b")
#define DC "sha256:" H64("c")
#define DU "sha256:" H64("A")

static manifest *sample(void)
{
    manifest *m;

    ck_assert_int_eq(manifest_new(&m), 0);
    ck_assert_int_eq(manifest_config_set(m, MT_CONFIG, DA, 123), 0);
    ck_assert_int_eq(manifest_layer_add(m, MT_TENSOR, DB, 4096, "model.layers.0.mlp.up_proj.weight"), 0);
    ck_assert_int_eq(manifest_layer_add(m, MT_TOKENIZER, DC, 9000, NULL), 0);
    return m;
}

static const char SAMPLE_JSON[] =
    "{\"schemaVersion\":2,\"mediaType\":\"" MT_OCI_MANIFEST "\","
    "\"config\":{\"mediaType\":\"" MT_CONFIG "\",\"digest\":\"" DA "\",\"size\":123},"
    "\"layers\":[{\"mediaType\":\"" MT_TENSOR "\",\"digest\":\"" DB "\",\"size\":4096,"
    "\"name\":\"model.layers.0.mlp.up_proj.weight\"},"
    "{\"mediaType\":\"" MT_TOKENIZER "\",\"digest\":\"" DC "\",\"size\":9000}]}";

/* ---------------------------------------------------------------- manifests */

START_TEST(serialize_is_compact_with_fixed_key_order)
{
    manifest *m = sample();
    char *s;
    size_t n;

    ck_assert_int_eq(manifest_serialize(&s, &n, m), 0);
    ck_assert_str_eq(s, SAMPLE_JSON);
    ck_assert_uint_eq(n, strlen(SAMPLE_JSON));
    free(s);
    manifest_free(m);
}
END_TEST

START_TEST(parse_then_serialize_round_trips)
{
    manifest *m = sample(), *p, *q;
    char *s1, *s2, *s3;
    size_t n1, n2, n3;

    ck_assert_int_eq(manifest_serialize(&s1, &n1, m), 0);
    ck_assert_int_eq(manifest_parse(&p, s1, n1, "m.json"), 0);
    ck_assert_int_eq(p->schema_version, 2);
    ck_assert_str_eq(p->media_type, MT_OCI_MANIFEST);
    ck_assert_str_eq(p->config.media_type, MT_CONFIG);
    ck_assert_str_eq(p->config.digest, DA);
    ck_assert_uint_eq(p->config.size, 123);
    ck_assert_ptr_null(p->config.name);
    ck_assert_uint_eq(p->n_layers, 2);
    ck_assert_str_eq(p->layers[0].name, "model.layers.0.mlp.up_proj.weight");
    ck_assert_uint_eq(p->layers[0].size, 4096);
    ck_assert_str_eq(p->layers[1].digest, DC);
    ck_assert_ptr_null(p->layers[1].name);
    ck_assert_int_eq(manifest_serialize(&s2, &n2, p), 0);
    ck_assert_uint_eq(n1, n2);
    ck_assert_mem_eq(s1, s2, n1);
    ck_assert_int_eq(manifest_parse(&q, s2, n2, "m.json"), 0);
    ck_assert_int_eq(manifest_serialize(&s3, &n3, q), 0);
    ck_assert_str_eq(s3, s1);
    free(s1);
    free(s2);
    free(s3);
    manifest_free(m);
    manifest_free(p);
    manifest_free(q);
}
END_TEST

/* A manifest as a registry might send it: spaced, annotated, key order of its own, no mediaType. */
START_TEST(parse_accepts_foreign_layout_and_ignores_extra_fields)
{
    static const char in[] =
        "{\n  \"layers\": [\n    {\"size\": 7, \"digest\": \"" DB "\", \"mediaType\": \"" MT_TEMPLATE "\",\n"
        "     \"annotations\": {\"org.opencontainers.image.title\": \"t\"}}\n  ],\n"
        "  \"config\": {\"size\": 0, \"mediaType\": \"" MT_DOCKER_CONFIG "\", \"digest\": \"" DA "\"},\n"
        "  \"annotations\": {\"a\": \"b\"},\n  \"schemaVersion\": 2\n}\n";
    static const char want[] =
        "{\"schemaVersion\":2,\"mediaType\":\"" MT_OCI_MANIFEST "\","
        "\"config\":{\"mediaType\":\"" MT_DOCKER_CONFIG "\",\"digest\":\"" DA "\",\"size\":0},"
        "\"layers\":[{\"mediaType\":\"" MT_TEMPLATE "\",\"digest\":\"" DB "\",\"size\":7}]}";
    manifest *m;
    char *s;
    size_t n;

    ck_assert_int_eq(manifest_parse(&m, in, sizeof in - 1, "reg"), 0);
    ck_assert_str_eq(m->media_type, MT_OCI_MANIFEST);   /* absent: OCI, as the spec allows */
    ck_assert_int_eq(manifest_serialize(&s, &n, m), 0);
    ck_assert_str_eq(s, want);
    free(s);
    manifest_free(m);
}
END_TEST

START_TEST(parse_keeps_a_docker_media_type)
{
    static const char in[] =
        "{\"schemaVersion\":2,\"mediaType\":\"" MT_DOCKER_MANIFEST "\","
        "\"config\":{\"mediaType\":\"" MT_DOCKER_CONFIG "\",\"digest\":\"" DA "\",\"size\":1},\"layers\":[]}";
    manifest *m;
    char *s;
    size_t n;

    ck_assert_int_eq(manifest_parse(&m, in, sizeof in - 1, "reg"), 0);
    ck_assert_str_eq(m->media_type, MT_DOCKER_MANIFEST);
    ck_assert_uint_eq(m->n_layers, 0);
    ck_assert_int_eq(manifest_serialize(&s, &n, m), 0);
    ck_assert_str_eq(s, in);
    free(s);
    manifest_free(m);
}
END_TEST

#define CFG_OK "\"config\":{\"mediaType\":\"c\",\"digest\":\"" DA "\",\"size\":1}"
#define LAYER(fields) "{\"schemaVersion\":2," CFG_OK ",\"layers\":[" fields "]}"
#define CONFIG(fields) "{\"schemaVersion\":2,\"config\":" fields ",\"layers\":[]}"

static const struct {
    const char *json;
    const char *expect;
} bad[] = {
    { "", "m.json: not valid json" },
    { "{\"schemaVersion\":2} x", "m.json: not valid json" },
    { "[2]", "m.json: not a json object" },
    { "{\"layers\":[]," CFG_OK "}", "m.json: schemaVersion is missing or not an integer" },
    { "{\"schemaVersion\":\"2\"," CFG_OK ",\"layers\":[]}", "schemaVersion is missing or not an integer" },
    { "{\"schemaVersion\":1," CFG_OK ",\"layers\":[]}", "m.json: schemaVersion is 1, want 2" },
    { "{\"schemaVersion\":2,\"mediaType\":5," CFG_OK ",\"layers\":[]}", "m.json: mediaType is not a string" },
    { "{\"schemaVersion\":2,\"mediaType\":\"\"," CFG_OK ",\"layers\":[]}", "m.json: mediaType is empty" },
    { "{\"schemaVersion\":2,\"layers\":[]}", "m.json: config is missing" },
    { CONFIG("[]"), "m.json: config: is not an object" },
    { CONFIG("{\"digest\":\"" DA "\",\"size\":1}"), "m.json: config: mediaType is missing or not a string" },
    { CONFIG("{\"mediaType\":\"c\",\"size\":1}"), "m.json: config: digest is missing or not a string" },
    { CONFIG("{\"mediaType\":\"c\",\"digest\":\"" DU "\",\"size\":1}"),
      "m.json: config: digest '" DU "' is not of the form sha256:<64 lowercase hex>" },
    { CONFIG("{\"mediaType\":\"c\",\"digest\":\"sha256:abc\",\"size\":1}"), "config: digest 'sha256:abc' is not" },
    { CONFIG("{\"mediaType\":\"c\",\"digest\":\"md5:" H64("a") "\",\"size\":1}"), "config: digest 'md5:" },
    { CONFIG("{\"mediaType\":\"c\",\"digest\":\"" DA "a\",\"size\":1}"), "config: digest" },
    { CONFIG("{\"mediaType\":\"c\",\"digest\":\"" DA "\",\"size\":-1}"), "m.json: config: size -1 is negative" },
    { CONFIG("{\"mediaType\":\"c\",\"digest\":\"" DA "\",\"size\":1.5}"), "config: size is missing or not an integer" },
    { CONFIG("{\"mediaType\":\"c\",\"digest\":\"" DA "\"}"), "config: size is missing or not an integer" },
    { CONFIG("{\"mediaType\":\"\",\"digest\":\"" DA "\",\"size\":1}"), "config: mediaType is empty" },
    { "{\"schemaVersion\":2," CFG_OK "}", "m.json: layers is missing or not an array" },
    { "{\"schemaVersion\":2," CFG_OK ",\"layers\":{}}", "layers is missing or not an array" },
    { LAYER("{\"mediaType\":\"t\",\"digest\":\"" DB "\",\"size\":1},7"), "m.json: layers[1]: is not an object" },
    { LAYER("{\"mediaType\":\"t\",\"digest\":\"" DB "\",\"size\":1,\"name\":5}"), "m.json: layers[0]: name is not a string" },
    { LAYER("{\"mediaType\":\"t\",\"size\":1}"), "m.json: layers[0]: digest is missing or not a string" },
    { LAYER("{\"mediaType\":7,\"digest\":\"" DB "\",\"size\":1}"), "layers[0]: mediaType is missing or not a string" },
    { LAYER("{\"mediaType\":\"t\",\"digest\":\"" DB "\",\"size\":-5}"), "layers[0]: size -5 is negative" },
    { "{\"schemaVersion\":2,\"schemaVersion\":2," CFG_OK ",\"layers\":[]}", "duplicate" },
};

START_TEST(parse_refuses_bad_manifests)
{
    manifest *m = (manifest *)1;

    ck_assert_int_eq(manifest_parse(&m, bad[_i].json, strlen(bad[_i].json), "m.json"), MS_EINVALID);
    ck_assert_ptr_null(m);
    ck_assert_msg(strstr(ms_err_msg(), bad[_i].expect), "case %d: got '%s', want '%s'", _i, ms_err_msg(),
                  bad[_i].expect);
}
END_TEST

START_TEST(parse_refuses_oversized_input_before_reading_it)
{
    size_t len = (size_t)MANIFEST_MAX_BYTES + 1;
    char *big = malloc(len);   /* never touched: the size check comes first */
    manifest *m;

    ck_assert_ptr_nonnull(big);
    ck_assert_int_eq(manifest_parse(&m, big, len, "huge.json"), MS_EINVALID);
    ck_assert_ptr_null(m);
    ck_assert_str_eq(ms_err_msg(), "huge.json: manifest is 67108865 bytes (max 67108864)");
    free(big);
}
END_TEST

START_TEST(builders_refuse_bad_descriptors)
{
    manifest *m;
    char *s;
    size_t n;

    ck_assert_int_eq(manifest_new(&m), 0);
    ck_assert_int_eq(manifest_serialize(&s, &n, m), MS_EINVALID);
    ck_assert_ptr_null(s);
    ck_assert_str_eq(ms_err_msg(), "manifest has no config");
    ck_assert_int_eq(manifest_config_set(m, MT_CONFIG, DU, 1), MS_EINVALID);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "config: digest '" DU "' is not of the form"));
    ck_assert_int_eq(manifest_config_set(m, MT_CONFIG, DA, (uint64_t)INT64_MAX + 1), MS_EINVALID);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "config: size 9223372036854775808 exceeds"));
    ck_assert_int_eq(manifest_config_set(m, "", DA, 1), MS_EINVALID);
    ck_assert_int_eq(manifest_layer_add(m, MT_TENSOR, "sha256:xyz", 1, "w"), MS_EINVALID);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "layers[0]: digest 'sha256:xyz'"));
    ck_assert_int_eq(manifest_layer_add(m, MT_TENSOR, DB, 1, "bad\xff"), MS_EINVALID);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "name is not valid utf-8"));
    ck_assert_uint_eq(m->n_layers, 0);
    /* Setting the config twice replaces it. */
    ck_assert_int_eq(manifest_config_set(m, MT_CONFIG, DA, 1), 0);
    ck_assert_int_eq(manifest_config_set(m, MT_DOCKER_CONFIG, DB, 2), 0);
    ck_assert_str_eq(m->config.media_type, MT_DOCKER_CONFIG);
    ck_assert_str_eq(m->config.digest, DB);
    ck_assert_int_eq(manifest_serialize(&s, &n, m), 0);
    free(s);
    manifest_free(m);
}
END_TEST

/* A pulled manifest is stored as received (its digest is the model version), not as this
 * code would write it; once changed, its bytes are its serialization. */
START_TEST(bytes_are_the_parsed_bytes_until_changed)
{
    static const char in[] =
        "{ \"schemaVersion\": 2, \"mediaType\": \"" MT_OCI_MANIFEST "\",\n"
        "  \"config\": {\"mediaType\": \"" MT_CONFIG "\", \"size\": 0, \"digest\": \"" DA "\"},\n  \"layers\": [] }\n";
    manifest *m, *built;
    char *s, *want;
    size_t n, wn;

    ck_assert_int_eq(manifest_parse(&m, in, sizeof in - 1, "reg"), 0);
    ck_assert_int_eq(manifest_bytes(&s, &n, m), 0);
    ck_assert_uint_eq(n, sizeof in - 1);
    ck_assert_str_eq(s, in);
    free(s);
    ck_assert_int_eq(manifest_layer_add(m, MT_TEMPLATE, DB, 7, NULL), 0);
    ck_assert_int_eq(manifest_bytes(&s, &n, m), 0);
    ck_assert_int_eq(manifest_serialize(&want, &wn, m), 0);
    ck_assert_str_eq(s, want);
    free(s);
    free(want);
    ck_assert_int_eq(manifest_new(&built), 0);   /* built in memory: serialized */
    ck_assert_int_eq(manifest_config_set(built, MT_CONFIG, DA, 0), 0);
    ck_assert_int_eq(manifest_bytes(&s, &n, built), 0);
    ck_assert_int_eq(manifest_serialize(&want, &wn, built), 0);
    ck_assert_str_eq(s, want);
    free(s);
    free(want);
    manifest_free(built);
    manifest_free(m);
}
END_TEST

START_TEST(layers_added_after_parse_and_found)
{
    manifest *m;
    char *s;
    size_t n;
    char name[32];

    ck_assert_int_eq(manifest_parse(&m, SAMPLE_JSON, strlen(SAMPLE_JSON), "m.json"), 0);
    for (int i = 0; i < 3000; i++) {   /* past several capacity doublings, from a parsed array of 2 */
        snprintf(name, sizeof name, "w.%d", i);
        ck_assert_int_eq(manifest_layer_add(m, MT_TENSOR, DC, (uint64_t)i, name), 0);
    }
    ck_assert_uint_eq(m->n_layers, 3002);
    ck_assert_uint_eq(manifest_layer_find(m, MT_TENSOR, "w.2999")->size, 2999);
    ck_assert_str_eq(manifest_layer_find(m, MT_TENSOR, NULL)->name, "model.layers.0.mlp.up_proj.weight");
    ck_assert_str_eq(manifest_layer_find(m, MT_TOKENIZER, NULL)->digest, DC);
    ck_assert_ptr_null(manifest_layer_find(m, MT_TOKENIZER, "w.1"));
    ck_assert_ptr_null(manifest_layer_find(m, MT_TEMPLATE, NULL));
    ck_assert_uint_eq(manifest_layer_find(m, NULL, "w.7")->size, 7);
    ck_assert_int_eq(manifest_serialize(&s, &n, m), 0);
    manifest_free(m);
    ck_assert_int_eq(manifest_parse(&m, s, n, "m.json"), 0);
    ck_assert_uint_eq(m->n_layers, 3002);
    free(s);
    manifest_free(m);
}
END_TEST

/* ---------------------------------------------------------------- names */

#define X80 "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
#define X128 X80 "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
#define HEX64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define L63 "lllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllll"

static const struct {
    const char *in, *host, *ns, *model, *tag, *display;
} good[] = {
    { "llama3", "", "library", "llama3", "latest", "llama3:latest" },
    { "llama3:8b", "", "library", "llama3", "8b", "llama3:8b" },
    { "Me/Model_X.v2:v1.0-rc", "", "Me", "Model_X.v2", "v1.0-rc", "Me/Model_X.v2:v1.0-rc" },
    { "library/m:_t", "", "library", "m", "_t", "m:_t" },
    { "registry.ollama.ai/library/llama3:8b", "registry.ollama.ai", "library", "llama3", "8b",
      "registry.ollama.ai/library/llama3:8b" },
    { "hf.co/User/Repo-GGUF:Q4_K_M", "hf.co", "User", "Repo-GGUF", "Q4_K_M", "hf.co/User/Repo-GGUF:Q4_K_M" },
    { "localhost/m", "localhost", "library", "m", "latest", "localhost/library/m:latest" },
    { "localhost:5000/ns/m:t", "localhost:5000", "ns", "m", "t", "localhost:5000/ns/m:t" },
    { "127.0.0.1:65535/m", "127.0.0.1:65535", "library", "m", "latest", "127.0.0.1:65535/library/m:latest" },
    { "myhost/ns/m", "myhost", "ns", "m", "latest", "myhost/ns/m:latest" },
    { "my-host.example.com:1/a/b", "my-host.example.com:1", "a", "b", "latest", "my-host.example.com:1/a/b:latest" },
    { L63 ".io/m", L63 ".io", "library", "m", "latest", L63 ".io/library/m:latest" },
    { "m:5000", "", "library", "m", "5000", "m:5000" },
    { X80 "/" X80 ":" X128, "", X80, X80, X128, X80 "/" X80 ":" X128 },
};

START_TEST(name_parse_accepts_good_names)
{
    model_name n, back;
    char buf[1024], full[1024];

    ck_assert_msg(name_parse(&n, good[_i].in) == 0, "'%s': %s", good[_i].in, ms_err_msg());
    ck_assert_str_eq(n.host, good[_i].host);
    ck_assert_str_eq(n.namespace_, good[_i].ns);
    ck_assert_str_eq(n.model, good[_i].model);
    ck_assert_str_eq(n.tag, good[_i].tag);
    name_display(buf, sizeof buf, &n);
    ck_assert_str_eq(buf, good[_i].display);
    /* Both printed forms name the same model. */
    name_format(full, sizeof full, &n);
    ck_assert_int_eq(name_parse(&back, full), 0);
    ck_assert_mem_eq(&back, &n, sizeof n);
    ck_assert_int_eq(name_parse(&back, buf), 0);
    ck_assert_mem_eq(&back, &n, sizeof n);
}
END_TEST

/* OCI references by digest: the digest is kept, the tag is the one given, else "sha256-<hex>"
 * (the name the model is stored under). */
START_TEST(name_parse_reads_references_by_digest)
{
    model_name n;

    ck_assert_msg(name_parse(&n, "h.io:5000/ns/m@sha256:" HEX64) == 0, "%s", ms_err_msg());
    ck_assert_str_eq(n.host, "h.io:5000");
    ck_assert_str_eq(n.namespace_, "ns");
    ck_assert_str_eq(n.model, "m");
    ck_assert_str_eq(n.tag, "sha256-" HEX64);
    ck_assert_str_eq(n.digest, "sha256:" HEX64);
    ck_assert_int_eq(name_parse(&n, "m:v1@sha256:" HEX64), 0);
    ck_assert_str_eq(n.tag, "v1");
    ck_assert_str_eq(n.digest, "sha256:" HEX64);
    ck_assert_int_eq(name_parse(&n, "m:v1"), 0);
    ck_assert_str_eq(n.digest, "");
}
END_TEST

static const struct {
    const char *in, *expect;
} bad_names[] = {
    {"", "name '': is empty"},
    {"../x", "name '../x': component '..' is not allowed"},
    {"a/./b", "component '.' is not allowed"},
    {".", "component '.' is not allowed"},
    {"..:latest", "component '..' is not allowed"},
    {"a:b:c", "name 'a:b:c': more than one ':' after the last '/'"},
    {"a//b", "name 'a//b': empty component"},
    {"/x", "empty component"},
    {"x/", "empty component"},
    {":t", "empty component"},
    {"a/b/c/d", "name 'a/b/c/d': more than 3 components"},
    {"a b", "name: byte 0x20 at position 1 is not allowed"},
    {"a\tb", "byte 0x09 at position 1"},
    {"a\nb", "byte 0x0a at position 1"},
    {"caf\xc3\xa9", "byte 0xc3 at position 3"},
    {"a\x7f", "byte 0x7f"},
    {X80 "y", "model is 81 characters (max 80)"},
    {X80 "y/m", "namespace is 81 characters (max 80)"},
    {"m:" X128 "y", "tag is 129 characters (max 128)"},
    {"m:", "name 'm:': tag is empty"},
    {"m:-x", "tag '-x' must start with a letter or digit or '_'"},
    {"m:a/b", "host 'm:a': port 'a' is not a number"},
    {"-m", "model '-m' must start with a letter or digit"},
    {"_m", "model '_m' must start"},
    {"ns/m!x", "model 'm!x': character '!' is not allowed"},
    {"n$/m", "namespace 'n$': character '$' is not allowed"},
    {"m:t~", "tag 't~': character '~' is not allowed"},
    {"a:b/m", "host 'a:b': port 'b' is not a number from 1 to 65535"},
    {"h.io:0/m", "host 'h.io:0': port 0 is out of range 1..65535"},
    {"h.io:65536/m", "port 65536 is out of range"},
    {"h.io:123456/m", "port '123456' is not a number"},
    {"h.io:/m", "port '' is not a number"},
    {":80/m", "host ':80': host name is empty"},
    {"-bad.com/m", "host '-bad.com': character '-' is not allowed"},
    {"bad-.com/m", "host 'bad-.com': empty label or label ending in '-'"},
    {"a..b/m", "empty label"},
    {".a/m", "empty label"},
    {"a./m", "empty label"},
    {"h_st/ns/m", "host 'h_st': character '_' is not allowed"},
    {L63 "l.io/m", "a label is longer than 63 characters"},
    {"m@sha256:abc", "name 'm@sha256:abc': digest 'sha256:abc' is not of the form sha256:<64 lowercase hex>"},
    {"m@", "digest '' is not of the form"},
    {"m@sha256:" HEX64 "@sha256:" HEX64, "more than one '@'"},
    {"m@SHA256:" HEX64, "digest 'SHA256:"},
    {"@sha256:" HEX64, "is empty"},
    {"m:@sha256:" HEX64, "tag is empty"},
    {"m!@sha256:" HEX64, "model 'm!': character '!' is not allowed"},
};

START_TEST(name_parse_refuses_bad_names)
{
    model_name n;

    memset(&n, 'z', sizeof n);
    ck_assert_int_eq(name_parse(&n, bad_names[_i].in), MS_EINVALID);
    ck_assert_msg(strstr(ms_err_msg(), bad_names[_i].expect), "case %d: got '%s', want '%s'", _i, ms_err_msg(),
                  bad_names[_i].expect);
    ck_assert_str_eq(n.model, "");   /* nothing half-parsed is left behind */
    ck_assert_str_eq(n.host, "");
}
END_TEST

START_TEST(name_parse_refuses_null_and_overlong_hosts)
{
    model_name n;
    char s[600];

    ck_assert_int_eq(name_parse(&n, NULL), MS_EINVALID);
    /* 5 labels of 63 = 319 characters: valid DNS labels, but over the host buffer. */
    snprintf(s, sizeof s, "%s.%s.%s.%s.%s/m", L63, L63, L63, L63, L63);
    ck_assert_int_eq(name_parse(&n, s), MS_EINVALID);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "host is 319 characters (max 255)"));
}
END_TEST

START_TEST(name_format_fits_or_truncates)
{
    model_name n;
    char buf[8];

    ck_assert_int_eq(name_parse(&n, "registry.example.com/ns/model:tag"), 0);
    name_format(buf, sizeof buf, &n);
    ck_assert_str_eq(buf, "registr");
    ck_assert_int_eq(name_parse(&n, "m"), 0);
    name_format(buf, sizeof buf, &n);
    ck_assert_str_eq(buf, "library");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("manifest");
    TCase *tm = tcase_create("manifest"), *tn = tcase_create("name");
    SRunner *sr;
    int failed;

    tcase_add_test(tm, serialize_is_compact_with_fixed_key_order);
    tcase_add_test(tm, parse_then_serialize_round_trips);
    tcase_add_test(tm, parse_accepts_foreign_layout_and_ignores_extra_fields);
    tcase_add_test(tm, parse_keeps_a_docker_media_type);
    tcase_add_loop_test(tm, parse_refuses_bad_manifests, 0, (int)(sizeof bad / sizeof bad[0]));
    tcase_add_test(tm, parse_refuses_oversized_input_before_reading_it);
    tcase_add_test(tm, builders_refuse_bad_descriptors);
    tcase_add_test(tm, bytes_are_the_parsed_bytes_until_changed);
    tcase_add_test(tm, layers_added_after_parse_and_found);
    tcase_add_loop_test(tn, name_parse_accepts_good_names, 0, (int)(sizeof good / sizeof good[0]));
    tcase_add_test(tn, name_parse_reads_references_by_digest);
    tcase_add_loop_test(tn, name_parse_refuses_bad_names, 0, (int)(sizeof bad_names / sizeof bad_names[0]));
    tcase_add_test(tn, name_parse_refuses_null_and_overlong_hosts);
    tcase_add_test(tn, name_format_fits_or_truncates);
    suite_add_tcase(s, tm);
    suite_add_tcase(s, tn);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
