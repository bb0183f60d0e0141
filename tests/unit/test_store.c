/* test_store.c: the SQLite index: commit, names, listings, verify, gc, locking, schema versions. */
#include <check.h>
#include <fcntl.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "blob/blob.h"
#include "format/format.h"
#include "helpers/fixture.h"
#include "manifest/manifest.h"
#include "store/store_int.h"   /* store_model_commit, store_write_begin, store_db */

static char *home;   /* MSTORE_HOME of the test: <tmpdir>/home, created by store_open */
static char *tmpdir;
static store *st;

static void setup(void)
{
    fixture_store_open(&tmpdir, &home, &st);
    setenv("MSTORE_HOME", home, 1);
}

static void teardown(void) { fixture_store_close(&tmpdir, &home, &st); }

/* ---------------------------------------------------------------- fixtures */

/* A safetensors blob holding one F32 tensor (values seed, seed+1, ...) and optional metadata
 * pairs (key, value, ..., NULL). */
static fixture_blob put_f32_tensor(const char *name, uint64_t rows, uint64_t cols, double seed, ...)
{
    uint64_t shape[2] = { rows, cols };
    float *data = malloc(rows * cols * sizeof *data);
    fixture_mem b = { 0 };
    st_writer *w;
    const char *k;
    fixture_blob r;
    va_list ap;

    for (uint64_t i = 0; i < rows * cols; i++)
        data[i] = (float)(seed + (double)i);
    ck_assert_int_eq(st_writer_new(&w), 0);
    va_start(ap, seed);
    while ((k = va_arg(ap, const char *)) != NULL)
        ck_assert_int_eq(st_writer_meta(w, k, va_arg(ap, const char *)), 0);
    va_end(ap);
    ck_assert_int_eq(st_writer_add(w, name, ST_F32, 2, shape, data, rows * cols * sizeof *data), 0);
    ck_assert_msg(st_writer_emit(w, fixture_mem_sink, &b) == 0, "%s", ms_err_msg());
    r = fixture_blob_put(home, b.p, b.len);
    st_writer_free(w);
    free(b.p);
    free(data);
    return r;
}

/* An MLX-style quantized blob: {name} U32 packed and {name}.scale F16, int4 groups of 32. */
static fixture_blob put_quant_tensor(const char *name)
{
    uint64_t wshape[2] = { 8, 4 }, sshape[2] = { 8, 1 };
    uint32_t packed[32] = { 0 };
    uint16_t scale[8] = { 0 };
    char sname[128];
    fixture_mem b = { 0 };
    st_writer *w;
    fixture_blob r;

    snprintf(sname, sizeof sname, "%s.scale", name);
    ck_assert_int_eq(st_writer_new(&w), 0);
    ck_assert_int_eq(st_writer_meta(w, "quant_type", "int4"), 0);
    ck_assert_int_eq(st_writer_meta(w, "group_size", "32"), 0);
    ck_assert_int_eq(st_writer_add(w, name, ST_U32, 2, wshape, packed, sizeof packed), 0);
    ck_assert_int_eq(st_writer_add(w, sname, ST_F16, 2, sshape, scale, sizeof scale), 0);
    ck_assert_int_eq(st_writer_emit(w, fixture_mem_sink, &b), 0);
    r = fixture_blob_put(home, b.p, b.len);
    st_writer_free(w);
    free(b.p);
    return r;
}

typedef struct model_fixture {
    fixture_blob config, embed, quant, tmpl, manifest;
    char *json;
    size_t len;
} model_fixture;

/* A small model: config, an F32 embedding, a quantized projection, a template. `seed` makes
 * the embedding (and the config) distinct per model; the projection and template are shared. */
static model_fixture model_make(double seed)
{
    model_fixture f;
    char config[128];
    manifest *m;

    snprintf(config, sizeof config, "{\"architecture\": \"llama\", \"seed\": %g}", seed);
    f.config = fixture_blob_put(home, config, strlen(config));
    f.embed = put_f32_tensor("model.embed_tokens.weight", 4, 2, seed, NULL);
    f.quant = put_quant_tensor("model.layers.0.mlp.up_proj.weight");
    f.tmpl = fixture_blob_put(home, "{{ .Prompt }}", 13);
    ck_assert_int_eq(manifest_new(&m), 0);
    ck_assert_int_eq(manifest_config_set(m, MT_CONFIG, f.config.digest, f.config.size), 0);
    ck_assert_int_eq(manifest_layer_add(m, MT_TENSOR, f.embed.digest, f.embed.size, "model.embed_tokens.weight"), 0);
    ck_assert_int_eq(manifest_layer_add(m, MT_TENSOR, f.quant.digest, f.quant.size,
                                        "model.layers.0.mlp.up_proj.weight"), 0);
    ck_assert_int_eq(manifest_layer_add(m, MT_TEMPLATE, f.tmpl.digest, f.tmpl.size, NULL), 0);
    ck_assert_int_eq(manifest_serialize(&f.json, &f.len, m), 0);
    blob_digest_buf(f.manifest.digest, f.json, f.len);
    f.manifest.size = f.len;
    manifest_free(m);
    return f;
}

static model_name name_of(const char *s)
{
    model_name n;

    ck_assert_msg(name_parse(&n, s) == 0, "%s", ms_err_msg());
    return n;
}

static void commit_ok(const model_fixture *f, const char *name)
{
    model_name n = name_of(name);
    ms_digest d;

    ck_assert_msg(store_model_commit(st, &n, f->json, f->len, d) == 0, "%s", ms_err_msg());
    ck_assert_str_eq(d, f->manifest.digest);
}

static long rows(store *s, const char *table)
{
    char sql[128];
    sqlite3_stmt *q;
    long n = -1;

    snprintf(sql, sizeof sql, "SELECT COUNT(*) FROM %s", table);
    ck_assert_int_eq(sqlite3_prepare_v2(store_db(s), sql, -1, &q, NULL), SQLITE_OK);
    if (sqlite3_step(q) == SQLITE_ROW)
        n = sqlite3_column_int64(q, 0);
    sqlite3_finalize(q);
    return n;
}

static const char *tables[] = { "blobs", "manifests", "layers", "tensors", "names" };
#define N_TABLES 5

static void rows_snapshot(long out[N_TABLES])
{
    for (int i = 0; i < N_TABLES; i++)
        out[i] = rows(st, tables[i]);
}

static void rows_same(const long before[N_TABLES])
{
    for (int i = 0; i < N_TABLES; i++)
        ck_assert_msg(rows(st, tables[i]) == before[i], "table %s changed", tables[i]);
}

static int blob_files(void)
{
    char *dir = ms_path_join(home, "blobs");
    int n = fixture_count_files(dir);

    free(dir);
    return n;
}

static int has_blob(const fixture_blob *r)
{
    return blob_exists(home, r->digest, NULL);
}

static void blob_corrupt(const char *digest)
{
    char *p = NULL;
    int fd;

    ck_assert_int_eq(blob_path(&p, home, digest), 0);
    ck_assert_int_eq(chmod(p, 0644), 0);   /* blobs are written 0444 */
    fd = open(p, O_WRONLY);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(pwrite(fd, "\xff", 1, 20), 1);
    close(fd);
    free(p);
}

/* ---------------------------------------------------------------- commit, resolve, list */

START_TEST(commit_then_resolve_and_list)
{
    model_fixture f = model_make(1);
    model_name n = name_of("tiny");
    store_entry *list;
    ms_digest d;
    size_t count;
    time_t t0 = time(NULL);

    commit_ok(&f, "tiny");
    ck_assert_int_eq(store_name_resolve(st, &n, d), 0);
    ck_assert_str_eq(d, f.manifest.digest);
    ck_assert(has_blob(&f.manifest));   /* the manifest is a blob too */
    ck_assert_int_eq(store_list(st, &list, &count), 0);
    ck_assert_uint_eq(count, 1);
    ck_assert_str_eq(list[0].name.model, "tiny");
    ck_assert_str_eq(list[0].name.tag, "latest");
    ck_assert_str_eq(list[0].digest, f.manifest.digest);
    ck_assert_uint_eq(list[0].size, f.len + f.config.size + f.embed.size + f.quant.size + f.tmpl.size);
    ck_assert_int_ge(list[0].modified_at, t0);
    free(list);
    ck_assert_int_eq(rows(st, "layers"), 3);
    ck_assert_int_eq(rows(st, "blobs"), 5);
    free(f.json);
}
END_TEST

START_TEST(manifest_bytes_are_kept_exactly)
{
    model_fixture f = model_make(1);
    manifest *m;
    char *bytes;
    size_t len;

    commit_ok(&f, "tiny");
    ck_assert_int_eq(store_manifest_bytes(st, f.manifest.digest, &bytes, &len), 0);
    ck_assert_uint_eq(len, f.len);
    ck_assert_mem_eq(bytes, f.json, len);
    free(bytes);
    ck_assert_int_eq(store_manifest_load(st, f.manifest.digest, &m), 0);
    ck_assert_uint_eq(m->n_layers, 3);
    ck_assert_str_eq(m->config.digest, f.config.digest);
    manifest_free(m);
    /* A manifest whose bytes no longer hash to its name is refused, not parsed. */
    blob_corrupt(f.manifest.digest);
    ck_assert_int_eq(store_manifest_load(st, f.manifest.digest, &m), MS_EMISMATCH);
    ck_assert_ptr_null(m);
    free(f.json);
}
END_TEST

START_TEST(tensors_listed_with_shapes_and_quantization)
{
    model_fixture f = model_make(1);
    store_tensor *t;
    size_t n;

    commit_ok(&f, "tiny");
    ck_assert_int_eq(store_tensors_list(st, f.manifest.digest, &t, &n), 0);
    ck_assert_uint_eq(n, 3);
    ck_assert_str_eq(t[0].name, "model.embed_tokens.weight");
    ck_assert_str_eq(t[0].dtype, "F32");
    ck_assert_str_eq(t[0].shape, "[4, 2]");
    ck_assert_ptr_null(t[0].quant_type);
    ck_assert_int_eq(t[0].group_size, 0);
    ck_assert_uint_eq(t[0].nbytes, 4 * 2 * 4);
    ck_assert_str_eq(t[0].blob_digest, f.embed.digest);
    ck_assert_uint_eq(t[0].offset % ST_ALIGN, 0);   /* absolute offset in the blob, aligned */
    ck_assert_uint_le(t[0].offset + t[0].nbytes, f.embed.size);
    ck_assert_str_eq(t[1].name, "model.layers.0.mlp.up_proj.weight");
    ck_assert_str_eq(t[1].dtype, "U32");
    ck_assert_str_eq(t[1].shape, "[8, 4]");
    ck_assert_str_eq(t[1].quant_type, "int4");
    ck_assert_int_eq(t[1].group_size, 32);
    ck_assert_str_eq(t[2].name, "model.layers.0.mlp.up_proj.weight.scale");
    ck_assert_str_eq(t[2].dtype, "F16");
    ck_assert_str_eq(t[2].shape, "[8, 1]");
    ck_assert_uint_gt(t[2].offset, t[1].offset);
    ck_assert_uint_le(t[2].offset + t[2].nbytes, f.quant.size);
    store_tensors_free(t, n);
    free(f.json);
}
END_TEST

START_TEST(logical_shape_metadata_replaces_the_byte_shape)
{
    fixture_blob cfg = fixture_blob_put(home, "{}", 2);
    fixture_blob q = put_f32_tensor("blk", 32, 18, 0, "quant_type", "Q4_0", "logical_shape", "[32, 576]", NULL);
    model_name n = name_of("gguf-like");
    store_tensor *t;
    manifest *m;
    char *json;
    ms_digest d;
    size_t len, count;

    ck_assert_int_eq(manifest_new(&m), 0);
    ck_assert_int_eq(manifest_config_set(m, MT_CONFIG, cfg.digest, cfg.size), 0);
    ck_assert_int_eq(manifest_layer_add(m, MT_TENSOR, q.digest, q.size, "blk"), 0);
    ck_assert_int_eq(manifest_serialize(&json, &len, m), 0);
    ck_assert_msg(store_model_commit(st, &n, json, len, d) == 0, "%s", ms_err_msg());
    ck_assert_int_eq(store_tensors_list(st, d, &t, &count), 0);
    ck_assert_uint_eq(count, 1);
    ck_assert_str_eq(t[0].shape, "[32, 576]");
    ck_assert_str_eq(t[0].quant_type, "Q4_0");
    store_tensors_free(t, count);
    manifest_free(m);
    free(json);
}
END_TEST

START_TEST(a_digest_listed_twice_counts_once)
{
    fixture_blob cfg = fixture_blob_put(home, "{}", 2), w = put_f32_tensor("w", 2, 2, 0, NULL);
    model_name n = name_of("twice");
    store_entry *list;
    store_tensor *t;
    manifest *m;
    char *json;
    ms_digest d;
    size_t len, count;

    ck_assert_int_eq(manifest_new(&m), 0);
    ck_assert_int_eq(manifest_config_set(m, MT_CONFIG, cfg.digest, cfg.size), 0);
    ck_assert_int_eq(manifest_layer_add(m, MT_TENSOR, w.digest, w.size, "w"), 0);
    ck_assert_int_eq(manifest_layer_add(m, MT_TENSOR, w.digest, w.size, "w"), 0);
    ck_assert_int_eq(manifest_serialize(&json, &len, m), 0);
    ck_assert_msg(store_model_commit(st, &n, json, len, d) == 0, "%s", ms_err_msg());
    ck_assert_int_eq(store_list(st, &list, &count), 0);
    ck_assert_uint_eq(list[0].size, len + cfg.size + w.size);
    free(list);
    ck_assert_int_eq(store_tensors_list(st, d, &t, &count), 0);
    ck_assert_uint_eq(count, 1);
    store_tensors_free(t, count);
    manifest_free(m);
    free(json);
}
END_TEST

START_TEST(commit_moves_an_existing_name)
{
    model_fixture a = model_make(1), b = model_make(2);
    model_name n = name_of("tiny");
    ms_digest d;

    commit_ok(&a, "tiny");
    commit_ok(&a, "tiny");   /* the same manifest again: no duplicate rows */
    ck_assert_int_eq(rows(st, "manifests"), 1);
    ck_assert_int_eq(rows(st, "layers"), 3);
    commit_ok(&b, "tiny");
    ck_assert_int_eq(store_name_resolve(st, &n, d), 0);
    ck_assert_str_eq(d, b.manifest.digest);
    ck_assert_int_eq(rows(st, "names"), 1);
    free(a.json);
    free(b.json);
}
END_TEST

START_TEST(copy_and_remove_names)
{
    model_fixture f = model_make(1);
    model_name src = name_of("tiny"), dst = name_of("alice/other:v1"), nope = name_of("nope");
    store_entry *list;
    ms_digest d;
    size_t n;

    commit_ok(&f, "tiny");
    ck_assert_int_eq(store_name_copy(st, &src, &dst), 0);
    ck_assert_int_eq(store_name_resolve(st, &dst, d), 0);
    ck_assert_str_eq(d, f.manifest.digest);
    ck_assert_int_eq(store_list(st, &list, &n), 0);
    ck_assert_uint_eq(n, 2);
    ck_assert_str_eq(list[0].name.model, "other");   /* "alice/other:v1" < "tiny:latest" */
    ck_assert_str_eq(list[1].name.model, "tiny");
    free(list);
    ck_assert_int_eq(store_name_copy(st, &nope, &dst), MS_ENOTFOUND);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "model 'nope:latest' not found"));
    ck_assert_int_eq(store_name_remove(st, &src), 0);
    ck_assert_int_eq(store_name_resolve(st, &src, d), MS_ENOTFOUND);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "model 'tiny:latest' not found"));
    ck_assert_int_eq(store_name_remove(st, &src), MS_ENOTFOUND);
    ck_assert_int_eq(store_name_resolve(st, &dst, d), 0);   /* the copy is independent */
    free(f.json);
}
END_TEST

/* ---------------------------------------------------------------- refusals */

START_TEST(commit_refused_when_a_blob_is_missing_or_the_wrong_size)
{
    model_fixture f = model_make(1);
    fixture_blob cfg = fixture_blob_put(home, "{}", 2);
    model_name n = name_of("broken");
    char *json;
    ms_digest absent, d;
    long before[N_TABLES];
    size_t len;
    manifest *m;
    int files;

    commit_ok(&f, "tiny");
    rows_snapshot(before);
    files = blob_files();
    blob_digest_buf(absent, "never stored", 12);

    ck_assert_int_eq(manifest_new(&m), 0);
    ck_assert_int_eq(manifest_config_set(m, MT_CONFIG, cfg.digest, cfg.size), 0);
    ck_assert_int_eq(manifest_layer_add(m, MT_TENSOR, f.embed.digest, f.embed.size, "ok"), 0);
    ck_assert_int_eq(manifest_layer_add(m, MT_TENSOR, absent, 12, "model.norm.weight"), 0);
    ck_assert_int_eq(manifest_serialize(&json, &len, m), 0);
    ck_assert_int_eq(store_model_commit(st, &n, json, len, d), MS_ENOTFOUND);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), absent));
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "model.norm.weight"));
    ck_assert_str_eq(d, "");
    rows_same(before);
    ck_assert_int_eq(blob_files(), files);   /* not even the manifest blob was written */
    manifest_free(m);
    free(json);

    ck_assert_int_eq(manifest_new(&m), 0);
    ck_assert_int_eq(manifest_config_set(m, MT_CONFIG, cfg.digest, cfg.size + 1), 0);
    ck_assert_int_eq(manifest_serialize(&json, &len, m), 0);
    ck_assert_int_eq(store_model_commit(st, &n, json, len, d), MS_EMISMATCH);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), cfg.digest));
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "config"));
    rows_same(before);
    manifest_free(m);
    free(json);

    ck_assert_int_eq(store_model_commit(st, &n, "{\"schemaVersion\": 2", 19, d), MS_EINVALID);
    rows_same(before);
    free(f.json);
}
END_TEST

/* Tensor layers whose blob the index cannot describe: each must be refused with no row changed. */
static const struct {
    const char *meta_key, *meta_value;   /* NULL key: the blob is not safetensors at all */
    const char *expect;
} bad_tensor_blob[] = {
    { NULL, NULL, "header size 2 is below" },
    { "group_size", "abc", "group_size 'abc'" },
    { "group_size", "-64", "group_size '-64'" },
    { "logical_shape", "[4; 2]", "logical_shape '[4; 2]'" },
};

static const char not_safetensors[] = "\x02\0\0\0\0\0\0\0{}not a tensor";

START_TEST(commit_refuses_tensor_blobs_it_cannot_describe)
{
    model_fixture f = model_make(1);
    fixture_blob cfg = fixture_blob_put(home, "{}", 2), bad;
    model_name n = name_of("bad");
    long before[N_TABLES];
    char *json;
    ms_digest d;
    manifest *m;
    size_t len;

    commit_ok(&f, "tiny");
    if (bad_tensor_blob[_i].meta_key)
        bad = put_f32_tensor("w", 2, 2, 0, bad_tensor_blob[_i].meta_key, bad_tensor_blob[_i].meta_value, NULL);
    else
        bad = fixture_blob_put(home, not_safetensors, sizeof not_safetensors - 1);
    rows_snapshot(before);
    ck_assert_int_eq(manifest_new(&m), 0);
    ck_assert_int_eq(manifest_config_set(m, MT_CONFIG, cfg.digest, cfg.size), 0);
    ck_assert_int_eq(manifest_layer_add(m, MT_TENSOR, f.embed.digest, f.embed.size, "e"), 0);
    ck_assert_int_eq(manifest_layer_add(m, MT_TENSOR, bad.digest, bad.size, "w"), 0);
    ck_assert_int_eq(manifest_serialize(&json, &len, m), 0);
    ck_assert_int_eq(store_model_commit(st, &n, json, len, d), MS_EINVALID);
    ck_assert_msg(strstr(ms_err_msg(), bad_tensor_blob[_i].expect) != NULL, "%s", ms_err_msg());
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "layer 1 'w'"));
    rows_same(before);
    manifest_free(m);
    free(json);
    free(f.json);
}
END_TEST

/* ---------------------------------------------------------------- verify */

typedef struct bad_log {
    int n;
    ms_digest digest[4];
    char message[4][512];
} bad_log;

static void on_bad(void *ctx, const char *digest, const char *message)
{
    bad_log *b = ctx;

    if (b->n < 4) {
        snprintf(b->digest[b->n], sizeof b->digest[0], "%s", digest);
        snprintf(b->message[b->n], sizeof b->message[0], "%s", message);
    }
    b->n++;
}

static long verified_rows(void)
{
    sqlite3_stmt *q;
    long n = -1;

    ck_assert_int_eq(sqlite3_prepare_v2(store_db(st), "SELECT COUNT(*) FROM blobs WHERE verified_at IS NOT NULL",
                                        -1, &q, NULL), SQLITE_OK);
    if (sqlite3_step(q) == SQLITE_ROW)
        n = sqlite3_column_int64(q, 0);
    sqlite3_finalize(q);
    return n;
}

START_TEST(verify_catches_a_corrupt_blob_and_a_missing_one)
{
    model_fixture f = model_make(1);
    model_name n = name_of("tiny");
    bad_log b = { 0 };
    size_t checked = 0;
    char *junk = NULL, *p = NULL;

    commit_ok(&f, "tiny");
    ck_assert_int_eq(store_verify(st, &n, on_bad, &b, &checked), 0);
    ck_assert_uint_eq(checked, 5);   /* manifest, config, three layers */
    ck_assert_int_eq(b.n, 0);
    ck_assert_int_eq(verified_rows(), 5);
    /* Files under other names are not blobs and are not checked. */
    junk = ms_path_join(home, "blobs");
    free(fixture_write(junk, "README", "x", 1));
    ck_assert_int_eq(store_verify(st, NULL, on_bad, &b, &checked), 0);
    ck_assert_uint_eq(checked, 5);

    blob_corrupt(f.quant.digest);
    ck_assert_int_eq(store_verify(st, &n, on_bad, &b, &checked), MS_EMISMATCH);
    ck_assert_int_eq(b.n, 1);
    ck_assert_str_eq(b.digest[0], f.quant.digest);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "1 of 5"));
    b.n = 0;
    ck_assert_int_eq(store_verify(st, NULL, on_bad, &b, &checked), MS_EMISMATCH);
    ck_assert_int_eq(b.n, 1);
    ck_assert_str_eq(b.digest[0], f.quant.digest);

    ck_assert_int_eq(blob_path(&p, home, f.tmpl.digest), 0);
    ck_assert_int_eq(unlink(p), 0);
    b.n = 0;
    ck_assert_int_eq(store_verify(st, &n, on_bad, &b, &checked), MS_EMISMATCH);
    ck_assert_int_eq(b.n, 2);
    ck_assert_str_eq(b.digest[1], f.tmpl.digest);   /* layer order: quant (1) before template (2) */
    ck_assert_str_eq(b.message[1], "missing");
    b.n = 0;
    ck_assert_int_eq(store_verify(st, NULL, on_bad, &b, &checked), MS_EMISMATCH);
    ck_assert_int_eq(b.n, 2);   /* the walk cannot see a missing file; the index names it */
    ck_assert_str_eq(b.message[1], "missing");
    free(p);
    free(junk);
    free(f.json);
}
END_TEST

/* ---------------------------------------------------------------- gc */

typedef struct gc_log {
    size_t n;
    uint64_t bytes;
} gc_log;

static void on_gc(void *ctx, const char *digest, uint64_t size)
{
    gc_log *g = ctx;

    ck_assert(blob_digest_valid(digest));
    g->n++;
    g->bytes += size;
}

START_TEST(gc_removes_unreferenced_blobs_and_keeps_referenced_ones)
{
    model_fixture a = model_make(1), b = model_make(2);
    fixture_blob orphan = fixture_blob_put(home, "orphan", 6);
    model_name nb = name_of("b"), na = name_of("a");
    char *tmp = ms_path_join(home, "tmp");
    long before[N_TABLES];
    gc_log g = { 0 };
    uint64_t bytes = 0, expect_bytes;
    size_t n = 0;
    int files;

    commit_ok(&a, "a");
    commit_ok(&b, "b");
    ck_assert_int_eq(store_name_remove(st, &nb), 0);
    /* b's own blobs: its manifest, config and embedding; the projection and template are a's too. */
    expect_bytes = orphan.size + b.len + b.config.size + b.embed.size;
    free(fixture_write(tmp, "4194305-0-1.partial", "x", 1));   /* a dead writer's leftover */

    rows_snapshot(before);
    files = blob_files();
    ck_assert_int_eq(store_gc(st, 1, on_gc, &g, &n, &bytes), 0);
    ck_assert_uint_eq(n, 4);
    ck_assert_uint_eq(bytes, expect_bytes);
    ck_assert_uint_eq(g.n, 4);
    ck_assert_uint_eq(g.bytes, expect_bytes);
    ck_assert_int_eq(blob_files(), files);   /* dry run: nothing removed */
    ck_assert_int_eq(fixture_count_files(tmp), 1);
    rows_same(before);

    g.n = 0;
    ck_assert_int_eq(store_gc(st, 0, on_gc, &g, &n, &bytes), 0);
    ck_assert_uint_eq(n, 4);
    ck_assert_uint_eq(bytes, expect_bytes);
    ck_assert_int_eq(blob_files(), files - 4);
    ck_assert(!has_blob(&orphan) && !has_blob(&b.manifest) && !has_blob(&b.embed) && !has_blob(&b.config));
    ck_assert(has_blob(&a.manifest) && has_blob(&a.config) && has_blob(&a.embed) && has_blob(&a.quant) &&
              has_blob(&a.tmpl));
    ck_assert_int_eq(fixture_count_files(tmp), 0);
    ck_assert_int_eq(rows(st, "manifests"), 1);
    ck_assert_int_eq(rows(st, "layers"), 3);
    ck_assert_int_eq(rows(st, "blobs"), 5);
    ck_assert_int_eq(rows(st, "tensors"), 3);   /* b's embedding rows went with its blob */
    ck_assert_int_eq(store_verify(st, &na, NULL, NULL, NULL), 0);
    ck_assert_int_eq(store_gc(st, 0, NULL, NULL, &n, &bytes), 0);
    ck_assert_uint_eq(n, 0);
    ck_assert_uint_eq(bytes, 0);
    free(tmp);
    free(a.json);
    free(b.json);
}
END_TEST

/* A stray directory in blobs/ under a blob's name is not a blob: gc used to stop at it (unlink
 * fails with EISDIR) and leave every later unreferenced blob behind, on every run. */
START_TEST(gc_passes_over_a_stray_directory_in_blobs)
{
    fixture_blob orphan = fixture_blob_put(home, "orphan", 6), other = fixture_blob_put(home, "another orphan", 14);
    char *stray = ms_strdup_printf("%s/blobs/sha256-%064d", home, 0);
    size_t n = 0;
    uint64_t bytes = 0;

    ck_assert_int_eq(mkdir(stray, 0755), 0);
    ck_assert_msg(store_gc(st, 0, NULL, NULL, &n, &bytes) == 0, "%s", ms_err_msg());
    ck_assert_uint_eq(n, 2);
    ck_assert_uint_eq(bytes, orphan.size + other.size);
    ck_assert(!has_blob(&orphan) && !has_blob(&other));
    ck_assert_int_eq(access(stray, F_OK), 0);   /* not ours: left where it is */
    rmdir(stray);
    free(stray);
}
END_TEST

START_TEST(gc_refuses_while_the_same_handle_writes)
{
    ck_assert_int_eq(store_write_begin(st), 0);
    ck_assert_int_eq(store_write_begin(st), 0);   /* nested */
    ck_assert_int_eq(store_gc(st, 1, NULL, NULL, NULL, NULL), MS_EBUSY);
    store_write_end(st);
    ck_assert_int_eq(store_gc(st, 1, NULL, NULL, NULL, NULL), MS_EBUSY);
    store_write_end(st);
    ck_assert_int_eq(store_gc(st, 1, NULL, NULL, NULL, NULL), 0);
}
END_TEST

/* Invariant 4: gc on another handle waits for a writer's shared lock to be released. */
START_TEST(gc_waits_for_a_writer)
{
    fixture_blob fresh = fixture_blob_put(home, "being imported", 14);
    fixture_gc g;
    struct timespec pause = { 0, 300 * 1000 * 1000 };

    ck_assert_int_eq(store_write_begin(st), 0);
    fixture_gc_start(&g, home);
    nanosleep(&pause, NULL);
    ck_assert_int_eq(fixture_gc_done(&g), 0);
    ck_assert(has_blob(&fresh));   /* unreferenced, yet safe while the writer holds the lock */
    store_write_end(st);
    ck_assert_int_eq(fixture_gc_join(&g), 0);
    ck_assert(!has_blob(&fresh));
}
END_TEST

/* ---------------------------------------------------------------- handles, schema, home */

START_TEST(a_second_handle_sees_the_first_ones_commit)
{
    model_fixture f = model_make(1);
    model_name n = name_of("tiny");
    store_entry *list;
    store *s2;
    ms_digest d;
    size_t count;

    ck_assert_int_eq(store_open(&s2, home), 0);
    ck_assert_int_eq(store_name_resolve(s2, &n, d), MS_ENOTFOUND);
    commit_ok(&f, "tiny");
    ck_assert_int_eq(store_name_resolve(s2, &n, d), 0);
    ck_assert_str_eq(d, f.manifest.digest);
    ck_assert_int_eq(store_list(s2, &list, &count), 0);
    ck_assert_uint_eq(count, 1);
    free(list);
    ck_assert_int_eq(store_name_remove(s2, &n), 0);
    ck_assert_int_eq(store_name_resolve(st, &n, d), MS_ENOTFOUND);
    store_close(s2);
    free(f.json);
}
END_TEST

START_TEST(reopen_keeps_the_index_and_schema_version)
{
    model_fixture f = model_make(1);
    model_name n = name_of("tiny");
    sqlite3_stmt *q;
    ms_digest d;

    commit_ok(&f, "tiny");
    store_close(st);
    ck_assert_int_eq(store_open(&st, home), 0);
    ck_assert_int_eq(store_name_resolve(st, &n, d), 0);
    ck_assert_int_eq(sqlite3_prepare_v2(store_db(st), "PRAGMA user_version", -1, &q, NULL), SQLITE_OK);
    ck_assert_int_eq(sqlite3_step(q), SQLITE_ROW);
    ck_assert_int_eq(sqlite3_column_int(q, 0), 2);
    sqlite3_finalize(q);
    ck_assert_int_eq(sqlite3_prepare_v2(store_db(st), "PRAGMA journal_mode", -1, &q, NULL), SQLITE_OK);
    ck_assert_int_eq(sqlite3_step(q), SQLITE_ROW);
    ck_assert_str_eq((const char *)sqlite3_column_text(q, 0), "wal");
    sqlite3_finalize(q);
    free(f.json);
}
END_TEST

START_TEST(index_from_a_newer_mstore_is_refused)
{
    char *db = ms_path_join(home, "index.db");
    sqlite3 *raw;
    store *s2;

    store_close(st);
    st = NULL;
    ck_assert_int_eq(sqlite3_open(db, &raw), SQLITE_OK);
    ck_assert_int_eq(sqlite3_exec(raw, "PRAGMA user_version = 99", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(raw);
    ck_assert_int_eq(store_open(&s2, home), MS_EINVALID);
    ck_assert_ptr_null(s2);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "schema version 99 is newer"));
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), db));
    free(db);
}
END_TEST

/* The reserve that rm and gc give up on a full disk (space.c): allocated, not a sparse file
 * that would free nothing, and made again by gc. */
START_TEST(store_keeps_an_allocated_space_reserve_that_gc_remakes)
{
    char *reserve = ms_path_join(home, "reserve"), *tmp = ms_path_join(home, "tmp");
    struct stat sb;

    ck_assert_int_eq(stat(reserve, &sb), 0);
    ck_assert_int_eq(sb.st_size, 4 << 20);
    ck_assert_int_ge((long long)sb.st_blocks * 512, 4 << 20);
    ck_assert_int_eq(unlink(reserve), 0);
    ck_assert_msg(store_gc(st, 1, NULL, NULL, NULL, NULL) == 0, "%s", ms_err_msg());
    ck_assert_int_ne(stat(reserve, &sb), 0);   /* a dry run changes nothing */
    ck_assert_msg(store_gc(st, 0, NULL, NULL, NULL, NULL) == 0, "%s", ms_err_msg());
    ck_assert_int_eq(stat(reserve, &sb), 0);
    ck_assert_int_eq(sb.st_size, 4 << 20);
    ck_assert_int_eq(fixture_count_files(tmp), 0);
    free(reserve);
    free(tmp);
}
END_TEST

START_TEST(unwritable_home_is_refused_naming_the_path)
{
    char *file = fixture_write(tmpdir, "plainfile", "x", 1);
    char *under_file = ms_path_join(file, "home");
    char *ro = ms_path_join(tmpdir, "readonly");
    store *s2;

    /* A home below a regular file can never be created, whoever runs the test. */
    ck_assert_int_eq(store_open(&s2, under_file), MS_EIO);
    ck_assert_ptr_null(s2);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), file));
    /* Root ignores permission bits, so a read-only directory only refuses other users. */
    if (geteuid() != 0) {
        ck_assert_int_eq(mkdir(ro, 0555), 0);
        ck_assert_int_eq(store_open(&s2, ro), MS_EIO);
        ck_assert_ptr_nonnull(strstr(ms_err_msg(), ro));
        ck_assert_ptr_nonnull(strstr(ms_err_msg(), "not writable"));
        chmod(ro, 0755);
    }
    free(file);
    free(under_file);
    free(ro);
}
END_TEST

START_TEST(home_default_prefers_flag_then_env_then_home)
{
    char *h;

    h = store_home_default("/flag/home");
    ck_assert_str_eq(h, "/flag/home");
    free(h);
    setenv("MSTORE_HOME", "/env/home", 1);
    h = store_home_default(NULL);
    ck_assert_str_eq(h, "/env/home");
    free(h);
    unsetenv("MSTORE_HOME");
    setenv("HOME", "/users/me", 1);
    h = store_home_default(NULL);
    ck_assert_str_eq(h, "/users/me/.mstore");
    free(h);
}
END_TEST

/* Resumable pull downloads in tmp/pull/: gc removes those untouched for over 7 days unless a
 * pull holds a lock on them; fresh ones stay for the next pull to resume. */
START_TEST(gc_removes_week_old_unlocked_partials_only)
{
    char *dir = ms_path_join(home, "tmp/pull");
    const char *names[] = { "old.partial", "old.ranges", "fresh.partial", "locked.partial", "edge.partial" };
    time_t now = time(NULL);
    time_t ages[] = { 8 * 86400, 8 * 86400, 3600, 8 * 86400, 6 * 86400 };
    char *paths[5];
    int lock_fd;

    ck_assert_int_eq(ms_mkdir_p(dir, 0755), 0);
    for (int i = 0; i < 5; i++) {
        struct timespec ts[2] = { { now - ages[i], 0 }, { now - ages[i], 0 } };
        paths[i] = fixture_write(dir, names[i], "bytes", 5);
        ck_assert_int_eq(utimensat(AT_FDCWD, paths[i], ts, 0), 0);
    }
    /* As a running pull does; a separate open file, so it conflicts with gc's lock. */
    lock_fd = open(paths[3], O_RDWR | O_CLOEXEC);
    ck_assert_int_ge(lock_fd, 0);
    ck_assert_int_eq(flock(lock_fd, LOCK_EX), 0);
    ck_assert_int_eq(store_gc(st, 1, NULL, NULL, NULL, NULL), 0);
    ck_assert_int_eq(fixture_count_files(dir), 5);   /* a dry run removes nothing */
    ck_assert_int_eq(store_gc(st, 0, NULL, NULL, NULL, NULL), 0);
    ck_assert_int_eq(access(paths[0], F_OK), -1);
    ck_assert_int_eq(access(paths[1], F_OK), -1);
    ck_assert_int_eq(access(paths[2], F_OK), 0);
    ck_assert_int_eq(access(paths[3], F_OK), 0);
    ck_assert_int_eq(access(paths[4], F_OK), 0);
    close(lock_fd);   /* the pull is gone: now its week-old file goes too */
    ck_assert_int_eq(store_gc(st, 0, NULL, NULL, NULL, NULL), 0);
    ck_assert_int_eq(access(paths[3], F_OK), -1);
    ck_assert_int_eq(fixture_count_files(dir), 2);
    for (int i = 0; i < 5; i++)
        free(paths[i]);
    free(dir);
}
END_TEST

/* A pull killed after adopting a blob but before unlinking its <hex>.ranges left the sidecar
 * for good (a stored blob is never fetched again). gc removes a download's files once their
 * blob is stored, whatever their age; a fresh one for a blob not stored stays for a resume. */
START_TEST(gc_removes_the_sidecar_of_a_stored_blob)
{
    char *dir = ms_path_join(home, "tmp/pull"), name[400], *done_path, *open_path;
    model_fixture a = model_make(1);

    commit_ok(&a, "a");   /* gc keeps a's blobs: the embedding's stands for the pulled blob */
    ck_assert_int_eq(ms_mkdir_p(dir, 0755), 0);
    snprintf(name, sizeof name, "%s.ranges", a.embed.digest + 7);
    done_path = fixture_write(dir, name, "MSPULL1\n", 8);
    snprintf(name, sizeof name, "%064d.ranges", 7);
    open_path = fixture_write(dir, name, "MSPULL1\n", 8);
    ck_assert_int_eq(store_gc(st, 0, NULL, NULL, NULL, NULL), 0);
    ck_assert_int_eq(access(done_path, F_OK), -1);
    ck_assert_int_eq(access(open_path, F_OK), 0);
    free(done_path);
    free(open_path);
    free(dir);
    free(a.json);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("store");
    TCase *tc = tcase_create("store");
    SRunner *sr;
    int failed;

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, commit_then_resolve_and_list);
    tcase_add_test(tc, manifest_bytes_are_kept_exactly);
    tcase_add_test(tc, tensors_listed_with_shapes_and_quantization);
    tcase_add_test(tc, logical_shape_metadata_replaces_the_byte_shape);
    tcase_add_test(tc, a_digest_listed_twice_counts_once);
    tcase_add_test(tc, commit_moves_an_existing_name);
    tcase_add_test(tc, copy_and_remove_names);
    tcase_add_test(tc, commit_refused_when_a_blob_is_missing_or_the_wrong_size);
    tcase_add_loop_test(tc, commit_refuses_tensor_blobs_it_cannot_describe, 0,
                        (int)(sizeof bad_tensor_blob / sizeof bad_tensor_blob[0]));
    tcase_add_test(tc, verify_catches_a_corrupt_blob_and_a_missing_one);
    tcase_add_test(tc, gc_removes_unreferenced_blobs_and_keeps_referenced_ones);
    tcase_add_test(tc, gc_passes_over_a_stray_directory_in_blobs);
    tcase_add_test(tc, gc_removes_the_sidecar_of_a_stored_blob);
    tcase_add_test(tc, gc_refuses_while_the_same_handle_writes);
    tcase_add_test(tc, gc_waits_for_a_writer);
    tcase_add_test(tc, a_second_handle_sees_the_first_ones_commit);
    tcase_add_test(tc, reopen_keeps_the_index_and_schema_version);
    tcase_add_test(tc, index_from_a_newer_mstore_is_refused);
    tcase_add_test(tc, unwritable_home_is_refused_naming_the_path);
    tcase_add_test(tc, store_keeps_an_allocated_space_reserve_that_gc_remakes);
    tcase_add_test(tc, home_default_prefers_flag_then_env_then_home);
    tcase_add_test(tc, gc_removes_week_old_unlocked_partials_only);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
