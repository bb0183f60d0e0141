/* test_store_model.c: store_model, the one way to read a stored model: the bytes it hands out
 * are the blobs', each blob is mapped and each tensor header parsed once, and its refusals name
 * the model and the layer. Leaks show in the ASan build (close must free everything). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blob/blob.h"
#include "format/format.h"
#include "helpers/fixture.h"
#include "manifest/manifest.h"
#include "store/store.h"

static char *home, *tmpdir;
static store *st;

static void setup(void)
{
    fixture_store_open(&tmpdir, &home, &st);
}

static void teardown(void) { fixture_store_close(&tmpdir, &home, &st); }

static const float VALUES[6] = { 1, 2, 3, 4, 5, 6 };
static const char CONFIG[] = "{\"architecture\":\"llama\"}";
static const char TEMPLATE[] = "{{ .Prompt }}";

static fixture_blob put_tensor(void)
{
    uint64_t shape[2] = { 2, 3 };
    fixture_mem b = { 0 };
    st_writer *w;
    fixture_blob r;

    ck_assert_int_eq(st_writer_new(&w), 0);
    ck_assert_int_eq(st_writer_add(w, "w", ST_F32, 2, shape, VALUES, sizeof VALUES), 0);
    ck_assert_int_eq(st_writer_emit(w, fixture_mem_sink, &b), 0);
    r = fixture_blob_put(home, b.p, b.len);
    st_writer_free(w);
    free(b.p);
    return r;
}

typedef struct fixture {
    fixture_blob config, tensor, tmpl;
    ms_digest digest;
    char *json;
    size_t len;
} fixture;

/* "tiny": a config, one tensor blob listed by two layers (a and b), a template. */
static fixture make(void)
{
    fixture f;
    model_name n;
    store_txn *t;
    manifest *m;

    f.config = fixture_blob_put(home, CONFIG, strlen(CONFIG));
    f.tensor = put_tensor();
    f.tmpl = fixture_blob_put(home, TEMPLATE, strlen(TEMPLATE));
    ck_assert_int_eq(manifest_new(&m), 0);
    ck_assert_int_eq(manifest_config_set(m, MT_CONFIG, f.config.digest, f.config.size), 0);
    ck_assert_int_eq(manifest_layer_add(m, MT_TENSOR, f.tensor.digest, f.tensor.size, "a"), 0);
    ck_assert_int_eq(manifest_layer_add(m, MT_TENSOR, f.tensor.digest, f.tensor.size, "b"), 0);
    ck_assert_int_eq(manifest_layer_add(m, MT_TEMPLATE, f.tmpl.digest, f.tmpl.size, NULL), 0);
    ck_assert_int_eq(manifest_serialize(&f.json, &f.len, m), 0);
    ck_assert_int_eq(name_parse(&n, "tiny"), 0);
    ck_assert_int_eq(store_txn_begin(&t, st), 0);
    ck_assert_msg(store_txn_commit(t, &n, m, f.digest) == 0, "%s", ms_err_msg());
    manifest_free(m);
    return f;
}

static store_model *open_tiny(void)
{
    store_model *sm = NULL;
    model_name n;

    ck_assert_int_eq(name_parse(&n, "tiny"), 0);
    ck_assert_msg(store_model_open(&sm, st, &n) == 0, "%s", ms_err_msg());
    return sm;
}

START_TEST(open_hands_out_the_blobs_bytes)
{
    fixture f = make();
    store_model *sm = open_tiny();
    const manifest *m = store_model_manifest(sm);
    const uint8_t *p;
    const char *bytes;
    size_t len;

    ck_assert_str_eq(store_model_digest(sm), f.digest);
    ck_assert_str_eq(store_model_shown(sm), "tiny:latest");
    ck_assert_str_eq(store_model_name(sm)->model, "tiny");
    bytes = store_model_manifest_bytes(sm, &len);   /* exactly as committed */
    ck_assert_uint_eq(len, f.len);
    ck_assert(memcmp(bytes, f.json, len) == 0);
    ck_assert_uint_eq(m->n_layers, 3);
    ck_assert_int_eq(store_model_config(&p, &len, sm), 0);
    ck_assert_uint_eq(len, strlen(CONFIG));
    ck_assert(memcmp(p, CONFIG, len) == 0);
    ck_assert_int_eq(store_model_find(&p, &len, sm, MT_TEMPLATE, NULL), 0);
    ck_assert_uint_eq(len, strlen(TEMPLATE));
    ck_assert(memcmp(p, TEMPLATE, len) == 0);
    ck_assert_int_eq(store_model_find(&p, &len, sm, MT_TENSOR, "b"), 0);
    ck_assert_uint_eq(len, f.tensor.size);
    ck_assert_int_eq(store_model_find(&p, &len, sm, MT_OLLAMA_SYSTEM, NULL), MS_ENOTFOUND);
    ck_assert_ptr_null(p);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "model 'tiny:latest': no " MT_OLLAMA_SYSTEM " layer"));
    store_model_close(sm);
    free(f.json);
}
END_TEST

START_TEST(each_blob_is_mapped_and_parsed_once)
{
    fixture f = make();
    store_model *sm = open_tiny();
    const manifest *m = store_model_manifest(sm);
    const uint8_t *a1, *a2, *b;
    const st_file *sa1, *sa2, *sb;
    const st_tensor *t;
    size_t len;

    ck_assert_int_eq(store_model_layer_bytes(&a1, &len, sm, &m->layers[0]), 0);
    ck_assert_int_eq(store_model_layer_bytes(&a2, &len, sm, &m->layers[0]), 0);
    ck_assert_ptr_eq(a1, a2);   /* a second request: the same mapping */
    ck_assert_int_eq(store_model_layer_bytes(&b, &len, sm, &m->layers[1]), 0);
    ck_assert_ptr_eq(a1, b);    /* another layer naming the same blob: the same mapping too */
    ck_assert_int_eq(store_model_tensors(&sa1, sm, &m->layers[0]), 0);
    ck_assert_int_eq(store_model_tensors(&sa2, sm, &m->layers[0]), 0);
    ck_assert_int_eq(store_model_tensors(&sb, sm, &m->layers[1]), 0);
    ck_assert_ptr_eq(sa1, sa2);
    ck_assert_ptr_eq(sa1, sb);
    ck_assert_ptr_nonnull(t = st_find(sa1, "w"));
    /* a tensor view points into the mapping, not into a copy */
    ck_assert(t->data >= a1 && t->data + t->nbytes <= a1 + len);
    ck_assert(memcmp(t->data, VALUES, sizeof VALUES) == 0);
    store_model_close(sm);
    free(f.json);
}
END_TEST

START_TEST(a_missing_name_is_not_found_naming_it)
{
    store_model *sm = (store_model *)1;
    model_name n;

    ck_assert_int_eq(name_parse(&n, "nosuch"), 0);
    ck_assert_int_eq(store_model_open(&sm, st, &n), MS_ENOTFOUND);
    ck_assert_ptr_null(sm);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "model 'nosuch:latest' not found"));
}
END_TEST

START_TEST(a_blob_of_the_wrong_size_is_a_mismatch_naming_the_layer)
{
    fixture f = make();
    store_model *sm = open_tiny();
    const manifest *m = store_model_manifest(sm);
    char *path = NULL;
    const uint8_t *p;
    const st_file *sf;
    size_t len;

    /* the store was damaged after the commit checked the sizes */
    ck_assert_int_eq(blob_path(&path, home, f.tensor.digest), 0);
    chmod(path, 0644);
    ck_assert_int_eq(truncate(path, (off_t)f.tensor.size - 4), 0);
    ck_assert_int_eq(store_model_layer_bytes(&p, &len, sm, &m->layers[1]), MS_EMISMATCH);
    ck_assert_ptr_null(p);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "model 'tiny:latest': layer 'b'"));
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "the manifest says"));
    ck_assert_int_eq(store_model_tensors(&sf, sm, &m->layers[0]), MS_EMISMATCH);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "layer 'a'"));
    /* the other layers still read */
    ck_assert_int_eq(store_model_find(&p, &len, sm, MT_TEMPLATE, NULL), 0);
    store_model_close(sm);
    ck_assert_int_eq(unlink(path), 0);   /* and a missing one is not found, naming the layer */
    sm = open_tiny();
    m = store_model_manifest(sm);
    ck_assert_int_eq(store_model_layer_bytes(&p, &len, sm, &m->layers[0]), MS_ENOTFOUND);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "layer 'a'"));
    store_model_close(sm);
    free(path);
    free(f.json);
}
END_TEST

START_TEST(open_by_digest_and_its_refusals)
{
    fixture f = make();
    store_model *sm = NULL, *named = open_tiny();
    const manifest *m = store_model_manifest(named);
    const manifest_layer *tmpl = manifest_layer_find(m, MT_TEMPLATE, NULL);
    manifest_layer stranger = *tmpl;
    const uint8_t *p;
    const st_file *sf;
    size_t len;

    ck_assert_msg(store_model_open_digest(&sm, st, f.digest) == 0, "%s", ms_err_msg());
    ck_assert_ptr_null(store_model_name(sm));
    ck_assert_str_eq(store_model_digest(sm), f.digest);
    ck_assert_uint_eq(store_model_manifest(sm)->n_layers, 3);
    /* a layer of another handle (or a copy) is not this model's */
    ck_assert_int_eq(store_model_layer_bytes(&p, &len, sm, tmpl), MS_EINVALID);
    ck_assert_int_eq(store_model_layer_bytes(&p, &len, named, &stranger), MS_EINVALID);
    /* a text layer has no tensors */
    ck_assert_int_eq(store_model_tensors(&sf, named, tmpl), MS_EINVALID);
    store_model_close(sm);
    store_model_close(named);
    ck_assert_int_eq(store_model_open_digest(&sm, st, "sha256:nothex"), MS_EINVALID);
    /* a blob that is no manifest (the config) does not open as one */
    ck_assert_int_ne(store_model_open_digest(&sm, st, f.config.digest), 0);
    ck_assert_ptr_null(sm);
    store_model_close(NULL);
    free(f.json);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("store_model");
    TCase *tc = tcase_create("store_model");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, open_hands_out_the_blobs_bytes);
    tcase_add_test(tc, each_blob_is_mapped_and_parsed_once);
    tcase_add_test(tc, a_missing_name_is_not_found_naming_it);
    tcase_add_test(tc, a_blob_of_the_wrong_size_is_a_mismatch_naming_the_layer);
    tcase_add_test(tc, open_by_digest_and_its_refusals);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
