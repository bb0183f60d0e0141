/* test_store_txn.c: the write transaction (store_txn): abort, commit, the lock against gc,
 * registry_blobs rows and their migration. */
#include <check.h>
#include <dirent.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "blob/blob.h"
#include "format/format.h"
#include "helpers/fixture.h"
#include "manifest/manifest.h"
#include "store/store_int.h"   /* store_db, to count rows and to fake an older index */

static char *home;
static char *tmpdir;
static store *st;

static void setup(void)
{
    fixture_store_open(&tmpdir, &home, &st);
}

static void teardown(void) { fixture_store_close(&tmpdir, &home, &st); }

/* Entries directly in <home>/<sub>. */
static int files_in(const char *sub)
{
    char *dir = ms_path_join(home, sub);
    int n = fixture_count_files(dir);

    free(dir);
    return n;
}

static long count(const char *sql)
{
    sqlite3_stmt *q;
    long n = -1;

    ck_assert_int_eq(sqlite3_prepare_v2(store_db(st), sql, -1, &q, NULL), SQLITE_OK);
    if (sqlite3_step(q) == SQLITE_ROW)
        n = sqlite3_column_int64(q, 0);
    sqlite3_finalize(q);
    return n;
}

static long index_rows(void)
{
    return count("SELECT (SELECT COUNT(*) FROM blobs) + (SELECT COUNT(*) FROM manifests) + "
                 "(SELECT COUNT(*) FROM layers) + (SELECT COUNT(*) FROM tensors) + (SELECT COUNT(*) FROM names) + "
                 "(SELECT COUNT(*) FROM registry_blobs)");
}

static model_name name_of(const char *s)
{
    model_name n;

    ck_assert_msg(name_parse(&n, s) == 0, "%s", ms_err_msg());
    return n;
}

/* Into `t`: a config, a one-tensor safetensors blob through a blob writer, a template; the
 * manifest naming them in *json. */
/* store_txn_commit of the manifest `json` as a pull would commit it: parsed, its bytes kept. */
static int commit_json(store_txn *t, const model_name *n, const char *json, size_t len, ms_digest d)
{
    manifest *m = NULL;
    int rc;

    ck_assert_int_eq(manifest_parse(&m, json, len, "m"), 0);
    rc = store_txn_commit(t, n, m, d);
    manifest_free(m);
    return rc;
}

static void model_add(store_txn *t, char **json, size_t *len)
{
    static const float data[4] = { 1, 2, 3, 4 };
    uint64_t shape[2] = { 2, 2 }, size = 0;
    const char *config = "{\"architecture\": \"llama\"}";
    ms_digest cd, td, wd;
    fixture_mem b = { 0 };
    blob_writer *w = NULL;
    st_writer *sw;
    manifest *m;

    ck_assert_int_eq(store_txn_blob_put(t, cd, config, strlen(config)), 0);
    ck_assert_int_eq(store_txn_blob_put(t, td, "{{ .Prompt }}", 13), 0);
    ck_assert_int_eq(st_writer_new(&sw), 0);
    ck_assert_int_eq(st_writer_add(sw, "model.embed_tokens.weight", ST_F32, 2, shape, data, sizeof data), 0);
    ck_assert_int_eq(st_writer_emit(sw, fixture_mem_sink, &b), 0);
    st_writer_free(sw);
    ck_assert_int_eq(store_txn_blob_open(t, &w), 0);
    ck_assert_int_eq(blob_writer_write(w, b.p, b.len), 0);
    ck_assert_msg(store_txn_blob_add(t, wd, &size, w, NULL) == 0, "%s", ms_err_msg());
    ck_assert_uint_eq(size, b.len);
    ck_assert_int_eq(manifest_new(&m), 0);
    ck_assert_int_eq(manifest_config_set(m, MT_CONFIG, cd, strlen(config)), 0);
    ck_assert_int_eq(manifest_layer_add(m, MT_TENSOR, wd, b.len, "model.embed_tokens.weight"), 0);
    ck_assert_int_eq(manifest_layer_add(m, MT_TEMPLATE, td, 13, NULL), 0);
    ck_assert_int_eq(manifest_serialize(json, len, m), 0);
    manifest_free(m);
    free(b.p);
}

START_TEST(abort_after_blobs_leaves_no_blob_and_no_index_change)
{
    long before = index_rows();
    store_txn *t = NULL;
    char *json = NULL;
    size_t len = 0;

    ck_assert_int_eq(store_txn_begin(&t, st), 0);
    model_add(t, &json, &len);
    ck_assert_int_eq(store_txn_registry_blob(t, "r.example", "library/m", "sha256:00"), 0);
    ck_assert_int_eq(files_in("blobs"), 0);   /* nothing lands before the commit */
    ck_assert_int_eq(files_in("tmp"), 3);
    store_txn_abort(t);
    ck_assert_int_eq(files_in("blobs"), 0);
    ck_assert_int_eq(files_in("tmp"), 0);
    ck_assert_int_eq(index_rows(), before);
    ck_assert_int_eq(store_gc(st, 1, NULL, NULL, NULL, NULL), 0);   /* the lock went with it */
    store_txn_abort(NULL);
    free(json);
}
END_TEST

START_TEST(commit_makes_the_name_resolvable)
{
    model_name n = name_of("tiny:1");
    char repo[64];
    ms_digest d, got, want;
    store_txn *t = NULL;
    char *json = NULL;
    size_t len = 0;

    ck_assert_int_eq(store_txn_begin(&t, st), 0);
    model_add(t, &json, &len);
    ck_assert_int_eq(store_txn_registry_blob(t, "r.example", "library/tiny", "sha256:aa"), 0);
    ck_assert_msg(commit_json(t, &n, json, len, d) == 0, "%s", ms_err_msg());
    blob_digest_buf(want, json, len);
    ck_assert_str_eq(d, want);
    ck_assert_int_eq(store_name_resolve(st, &n, got), 0);
    ck_assert_str_eq(got, want);
    ck_assert_int_eq(files_in("blobs"), 4);   /* config, tensor, template, manifest */
    ck_assert_int_eq(files_in("tmp"), 0);
    ck_assert_int_eq(count("SELECT COUNT(*) FROM tensors"), 1);
    /* The pull's registry rows came with the commit. */
    ck_assert_int_eq(store_registry_blob_find(st, "r.example", "library/other", "sha256:aa", repo, sizeof repo), 1);
    ck_assert_str_eq(repo, "library/tiny");
    ck_assert_int_eq(store_registry_blob_find(st, "r.example", "library/tiny", "sha256:aa", repo, sizeof repo), 0);
    ck_assert_int_eq(store_gc(st, 0, NULL, NULL, NULL, NULL), 0);
    ck_assert_int_eq(files_in("blobs"), 4);   /* named: gc keeps them */
    free(json);
}
END_TEST

/* Invariant 2 with the blobs the transaction wrote: a manifest naming one it neither wrote nor
 * finds stored is refused, and what it wrote goes. */
START_TEST(commit_refuses_a_missing_blob_and_lands_nothing)
{
    model_name n = name_of("broken");
    store_txn *t = NULL;
    manifest *m = NULL;
    char *json = NULL, *json2 = NULL;
    ms_digest d;
    size_t len = 0, len2 = 0;
    long before = index_rows();

    ck_assert_int_eq(store_txn_begin(&t, st), 0);
    model_add(t, &json, &len);
    ck_assert_int_eq(manifest_parse(&m, json, len, "m"), 0);
    ck_assert_int_eq(manifest_layer_add(m, MT_TENSOR, "sha256:0000000000000000000000000000000000000000000000000000000000000000",
                                        8, "missing"), 0);
    ck_assert_int_eq(manifest_serialize(&json2, &len2, m), 0);
    ck_assert_int_eq(commit_json(t, &n, json2, len2, d), MS_ENOTFOUND);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "'missing'"));
    ck_assert_int_eq(files_in("blobs"), 0);
    ck_assert_int_eq(files_in("tmp"), 0);
    ck_assert_int_eq(index_rows(), before);
    ck_assert_int_eq(store_gc(st, 1, NULL, NULL, NULL, NULL), 0);   /* the failed commit released the lock */
    manifest_free(m);
    free(json);
    free(json2);
}
END_TEST

/* A finished file under tmp/ (a download) is adopted at once, and the commit counts it. */
START_TEST(adopted_file_counts_for_the_commit)
{
    model_name n = name_of("adopted");
    const char *cfg = "{\"architecture\": \"x\"}";
    char *path = ms_path_join(home, "tmp/download"), *json = NULL;
    ms_digest want, d, mdg;
    store_txn *t = NULL;
    manifest *m = NULL;
    size_t len = 0;
    FILE *f = fopen(path, "wb");

    ck_assert_ptr_nonnull(f);
    fputs(cfg, f);
    fclose(f);
    blob_digest_buf(want, cfg, strlen(cfg));
    ck_assert_int_eq(store_txn_begin(&t, st), 0);
    ck_assert_msg(store_txn_blob_adopt(t, d, path, want, NULL) == 0, "%s", ms_err_msg());
    ck_assert_str_eq(d, want);
    ck_assert_int_eq(files_in("blobs"), 1);
    ck_assert_int_eq(manifest_new(&m), 0);
    ck_assert_int_eq(manifest_config_set(m, MT_CONFIG, want, strlen(cfg)), 0);
    ck_assert_int_eq(manifest_serialize(&json, &len, m), 0);
    ck_assert_msg(commit_json(t, &n, json, len, mdg) == 0, "%s", ms_err_msg());
    ck_assert_int_eq(store_name_resolve(st, &n, d), 0);
    ck_assert_str_eq(d, mdg);
    manifest_free(m);
    free(json);
    free(path);
}
END_TEST

/* Invariant 4 through the transaction: gc on the same handle refuses, gc on another waits until
 * the commit, and then keeps what the commit named. */
START_TEST(gc_waits_for_an_open_transaction)
{
    model_name n = name_of("held");
    struct timespec pause = { 0, 300 * 1000 * 1000 };
    fixture_gc g;
    store_txn *t = NULL;
    char *json = NULL;
    ms_digest d;
    size_t len = 0;

    ck_assert_int_eq(store_txn_begin(&t, st), 0);
    ck_assert_int_eq(store_gc(st, 1, NULL, NULL, NULL, NULL), MS_EBUSY);
    model_add(t, &json, &len);
    ck_assert_int_eq(store_txn_flush(t), 0);   /* on disk, unnamed: only the lock protects them */
    ck_assert_int_eq(files_in("blobs"), 3);
    fixture_gc_start(&g, home);
    nanosleep(&pause, NULL);
    ck_assert_int_eq(fixture_gc_done(&g), 0);
    ck_assert_msg(commit_json(t, &n, json, len, d) == 0, "%s", ms_err_msg());
    ck_assert_int_eq(fixture_gc_join(&g), 0);
    ck_assert_int_eq(files_in("blobs"), 4);
    free(json);
}
END_TEST

/* An index of schema 1 whose registry_blobs table src/registry made itself keeps its rows. */
START_TEST(migration_keeps_an_ad_hoc_registry_blobs_table)
{
    char repo[64];

    ck_assert_int_eq(sqlite3_exec(store_db(st),
                                  "DROP TABLE registry_blobs;"
                                  "CREATE TABLE IF NOT EXISTS registry_blobs(host TEXT NOT NULL, repo TEXT NOT NULL,"
                                  " digest TEXT NOT NULL, PRIMARY KEY(host, repo, digest)) WITHOUT ROWID;"
                                  "INSERT INTO registry_blobs VALUES('r.example', 'library/a', 'sha256:aa');"
                                  "PRAGMA user_version = 1;",
                                  NULL, NULL, NULL), SQLITE_OK);
    store_close(st);
    ck_assert_msg(store_open(&st, home) == 0, "%s", ms_err_msg());
    ck_assert_int_eq(count("PRAGMA user_version"), 2);
    ck_assert_int_eq(store_registry_blob_find(st, "r.example", "library/b", "sha256:aa", repo, sizeof repo), 1);
    ck_assert_str_eq(repo, "library/a");

    /* And one of schema 1 that never had the table gets it. */
    ck_assert_int_eq(sqlite3_exec(store_db(st), "DROP TABLE registry_blobs; PRAGMA user_version = 1;", NULL, NULL,
                                  NULL), SQLITE_OK);
    store_close(st);
    ck_assert_msg(store_open(&st, home) == 0, "%s", ms_err_msg());
    ck_assert_int_eq(count("PRAGMA user_version"), 2);
    ck_assert_int_eq(store_registry_blob_record(st, "r.example", "library/b", "sha256:bb"), 0);
    ck_assert_int_eq(store_registry_blob_find(st, "r.example", "library/c", "sha256:bb", repo, sizeof repo), 1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("store_txn");
    TCase *tc = tcase_create("store_txn");
    SRunner *sr;
    int failed;

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, abort_after_blobs_leaves_no_blob_and_no_index_change);
    tcase_add_test(tc, commit_makes_the_name_resolvable);
    tcase_add_test(tc, commit_refuses_a_missing_blob_and_lands_nothing);
    tcase_add_test(tc, adopted_file_counts_for_the_commit);
    tcase_add_test(tc, gc_waits_for_an_open_transaction);
    tcase_add_test(tc, migration_keeps_an_ad_hoc_registry_blobs_table);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
