/* test_import.c: GGUF and safetensors-directory import, and the GGUF export (src/export) that round-trips them, through the store. */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blob/blob.h"
#include "format/format.h"
#include "helpers/fixture.h"
#include "export/export.h"
#include "import/import.h"
#include "import/import_int.h"
#include "runtime/runtime.h"
#include "store/store.h"

static char *dir, *home;
static store *s;

static void setup(void)
{
    dir = fixture_tmpdir();
    ck_assert_ptr_nonnull(dir);
    home = ms_path_join(dir, "home");
    ck_assert_int_eq(store_open(&s, home), 0);
}

static void teardown(void)
{
    store_close(s);
    free(home);
    fixture_rmrf(dir);
}


static uint8_t pattern[1 << 20];

static int file_sink(void *ctx, const void *buf, size_t len)
{
    return fwrite(buf, 1, len, ctx) == len ? 0 : ms_err(MS_EIO, "write");
}

static void pattern_fill(void)
{
    uint32_t x = 12345;
    for (size_t i = 0; i < sizeof pattern; i++) {
        x = x * 1103515245u + 12345u;
        pattern[i] = (uint8_t)(x >> 16);
    }
}

/* A llama-shaped GGUF with one tensor of every ggml type the reader knows. */
static char *write_all_types(const char *file, uint32_t alignment, const char *arch)
{
    gguf_writer *w;
    char *path = ms_path_join(dir, file);
    size_t off = 0;
    int k = 0;

    pattern_fill();
    ck_assert_int_eq(gguf_writer_new(&w, 3, alignment), 0);
    ck_assert_int_eq(gguf_writer_set_str(w, "general.architecture", arch, strlen(arch)), 0);
    {
        char key[64];
        snprintf(key, sizeof key, "%s.embedding_length", arch);
        ck_assert_int_eq(gguf_writer_set_u32(w, key, 256), 0);
        snprintf(key, sizeof key, "%s.attention.head_count", arch);
        ck_assert_int_eq(gguf_writer_set_u32(w, key, 4), 0);
        snprintf(key, sizeof key, "%s.block_count", arch);
        ck_assert_int_eq(gguf_writer_set_u32(w, key, 40), 0);
    }
    ck_assert_int_eq(gguf_writer_set_str(w, "tokenizer.chat_template", "{{ x }}", 7), 0);
    for (int id = 0; id < GGML_TYPE_COUNT; id++) {
        uint64_t ne[2] = { 256, 2 }, nbytes;
        char name[64];
        if (!ggml_type_name(id) || ggml_type_check(id) < 0)
            continue;
        ck_assert_int_eq(ggml_tensor_nbytes(&nbytes, id, 2, ne), 0);
        ck_assert_uint_le(off + nbytes, sizeof pattern);
        snprintf(name, sizeof name, "blk.%d.attn_q.weight", k++);
        ck_assert_int_eq(gguf_writer_add_tensor(w, name, id, 2, ne, pattern + off, nbytes), 0);
        off += nbytes;
    }
    ck_assert_int_eq(gguf_writer_write_file(w, path), 0);
    gguf_writer_free(w);
    return path;
}

static void file_digest(ms_digest out, const char *path)
{
    ms_map m;
    ck_assert_int_eq(ms_map_open(&m, path), 0);
    blob_digest_buf(out, m.data, m.size);
    ms_map_close(&m);
}

/* Every blob of the manifest `digest` (and the manifest) holds bytes that OpenSSL hashes to its
 * name, and the config's source.digest is OpenSSL's digest of `path`: the import hashes each
 * chunk for its blob and for the file in one pass on its own SHA code, this checks both. */
static void blobs_hash_to_their_names(const char *digest, const char *path)
{
    manifest *m;
    blob_view v;
    ms_digest got, want;
    json_t *cfg;

    ck_assert_int_eq(store_manifest_load(s, digest, &m), 0);
    for (size_t i = 0; i <= m->n_layers + 1; i++) {
        const char *d = i < m->n_layers ? m->layers[i].digest : i == m->n_layers ? m->config.digest : digest;
        ck_assert_int_eq(blob_open(&v, home, d), 0);
        blob_digest_buf(got, v.data, v.size);
        ck_assert_msg(strcmp(got, d) == 0, "blob %s holds bytes that hash to %s", d, got);
        if (i == m->n_layers) {
            cfg = json_loadb((const char *)v.data, v.size, 0, NULL);
            ck_assert_ptr_nonnull(cfg);
            file_digest(want, path);
            ck_assert_str_eq(json_string_value(json_object_get(json_object_get(cfg, "source"), "digest")), want);
            json_decref(cfg);
        }
        blob_close(&v);
    }
    manifest_free(m);
}

static void roundtrip(const char *path, const char *tag)
{
    char *out = ms_strdup_printf("%s.out", path);
    ms_digest want, digest;
    export_result res;
    model_name n;

    ck_assert_int_eq(name_parse(&n, tag), 0);
    ck_assert_msg(import_path(s, path, &n, NULL, digest) == 0, "%s", ms_err_msg());
    ck_assert_msg(export_gguf(s, &n, out, &res) == 0, "%s", ms_err_msg());
    file_digest(want, path);
    ck_assert_str_eq(res.digest, want);
    ck_assert_int_eq(res.identical, 1);
    free(out);
}

START_TEST(gguf_every_type_round_trips_byte_identical)
{
    char *p32 = write_all_types("all32.gguf", 32, "llama"), *p128 = write_all_types("all128.gguf", 128, "llama");
    char *p64 = write_all_types("all64.gguf", 64, "somethingnew");

    roundtrip(p32, "all:32");
    roundtrip(p128, "all:128");
    roundtrip(p64, "all:unknown-arch");
    free(p32);
    free(p128);
    free(p64);
}
END_TEST

START_TEST(gguf_tensor_blobs_hold_the_source_bytes)
{
    char *p = write_all_types("all.gguf", 32, "llama");
    ms_digest digest;
    store_tensor *t = NULL;
    gguf_file *g;
    model_name n;
    size_t nt = 0;

    ck_assert_int_eq(name_parse(&n, "all"), 0);
    ck_assert_int_eq(import_path(s, p, &n, NULL, digest), 0);
    ck_assert_int_eq(gguf_open(&g, p), 0);
    ck_assert_int_eq(store_tensors_list(s, digest, &t, &nt), 0);
    ck_assert_uint_eq(nt, gguf_tensor_count(g));
    for (size_t i = 0; i < gguf_tensor_count(g); i++) {
        const gguf_tensor *gt = gguf_tensor_at(g, i);
        char hf[128];
        const store_tensor *found = NULL;
        blob_view v;
        st_file *st;
        const st_tensor *tt;

        snprintf(hf, sizeof hf, "model.layers.%zu.self_attn.q_proj.weight", i);
        for (size_t k = 0; k < nt; k++)
            if (strcmp(t[k].name, hf) == 0)
                found = &t[k];
        ck_assert_msg(found != NULL, "%s not listed", hf);
        ck_assert_int_eq(blob_open(&v, home, found->blob_digest), 0);
        ck_assert_int_eq(st_parse(&st, v.data, v.size, v.size, 0, "blob"), 0);
        tt = st_find(st, hf);
        ck_assert_ptr_nonnull(tt);
        ck_assert_uint_eq(tt->nbytes, gt->nbytes);
        ck_assert_int_eq(memcmp(tt->data, gt->data, gt->nbytes), 0);
        ck_assert_uint_eq(tt->offset % ST_ALIGN, 0);
        ck_assert_str_eq(st_meta(st, "gguf_name"), gt->name);
        if (gt->type != GGML_TYPE_F32 && gt->type != GGML_TYPE_F16 && gt->type != GGML_TYPE_BF16 &&
            gt->type != GGML_TYPE_F64 && gt->type < GGML_TYPE_I8) {
            ck_assert_str_eq(st_meta(st, "quant_type"), ggml_type_name(gt->type));
            ck_assert_str_eq(st_meta(st, "logical_shape"), "[2, 256]");
            ck_assert_str_eq(found->quant_type, ggml_type_name(gt->type));
        }
        st_free(st);
        blob_close(&v);
    }
    store_tensors_free(t, nt);
    gguf_close(g);
    free(p);
}
END_TEST

START_TEST(gguf_reimport_writes_no_blob)
{
    char *p = write_all_types("all.gguf", 32, "llama");
    ms_digest d1, d2;
    model_name a, b;
    int n;

    ck_assert_int_eq(name_parse(&a, "a"), 0);
    ck_assert_int_eq(name_parse(&b, "b"), 0);
    ck_assert_int_eq(import_path(s, p, &a, NULL, d1), 0);
    n = fixture_blob_count(home);
    ck_assert_int_eq(import_path(s, p, &b, NULL, d2), 0);
    ck_assert_str_eq(d1, d2);
    ck_assert_int_eq(fixture_blob_count(home), n);
    free(p);
}
END_TEST

/* Non-zero bytes between tensors (llama.cpp writes zeros, but nothing forbids them) still
 * come back byte for byte. */
START_TEST(gguf_nonzero_gaps_round_trip)
{
    char *p = write_all_types("gaps.gguf", 64, "llama");
    gguf_file *g;
    FILE *f;
    uint64_t at;

    ck_assert_int_eq(gguf_open(&g, p), 0);
    at = 0;
    for (size_t i = 0; i < gguf_tensor_count(g) && !at; i++) {   /* the first tensor followed by padding */
        const gguf_tensor *t = gguf_tensor_at(g, i);
        if (t->nbytes % 64)
            at = gguf_data_offset(g) + t->offset + t->nbytes;
    }
    ck_assert_uint_ne(at, 0);
    gguf_close(g);
    f = fopen(p, "r+b");
    ck_assert_ptr_nonnull(f);
    fseek(f, (long)at, SEEK_SET);
    fputc(0x5a, f);
    fseek(f, 0, SEEK_END);
    fputc(0x7f, f);   /* trailing byte after the last tensor */
    fclose(f);
    roundtrip(p, "gaps");
    free(p);
}
END_TEST

/* An empty tensor may sit anywhere, even inside another tensor; with non-zero bytes after the
 * last tensor that once made the gap copy run backwards (memcpy of (uint64)-32 bytes). The gaps
 * are the bytes no tensor covers, and the file still comes back byte for byte. */
START_TEST(gguf_empty_tensor_inside_another_round_trips)
{
    char *p = ms_path_join(dir, "empty.gguf");
    uint64_t ne_a[1] = { 64 }, ne_z[1] = { 0 }, at;
    gguf_writer *w;
    gguf_file *g;
    ms_map m;
    FILE *f;

    pattern_fill();
    ck_assert_int_eq(gguf_writer_new(&w, 3, 32), 0);
    ck_assert_int_eq(gguf_writer_set_str(w, "general.architecture", "llama", 5), 0);
    ck_assert_int_eq(gguf_writer_add_tensor(w, "blk.0.attn_q.weight", GGML_TYPE_F32, 1, ne_a, pattern, 256), 0);
    ck_assert_int_eq(gguf_writer_add_tensor(w, "blk.0.attn_k.weight", GGML_TYPE_F32, 1, ne_z, pattern, 0), 0);
    ck_assert_int_eq(gguf_writer_write_file(w, p), 0);
    gguf_writer_free(w);
    /* Move the empty tensor's offset (the u64 after its name, n_dims, ne and type) to 32. */
    ck_assert_int_eq(ms_map_open(&m, p), 0);
    at = (uint64_t)((const uint8_t *)memmem(m.data, m.size, "blk.0.attn_k.weight", 19) - (const uint8_t *)m.data);
    ms_map_close(&m);
    at += 19 + 4 + 8 + 4;
    f = fopen(p, "r+b");
    ck_assert_ptr_nonnull(f);
    fseek(f, (long)at, SEEK_SET);
    ck_assert_int_eq(fwrite("\x20\0\0\0\0\0\0\0", 1, 8, f), 8);   /* u64 LE 32 */
    fseek(f, 0, SEEK_END);
    fputc(0x7f, f);   /* a non-zero byte after the last tensor */
    fclose(f);
    ck_assert_int_eq(gguf_open(&g, p), 0);
    ck_assert_uint_eq(gguf_tensor_find(g, "blk.0.attn_k.weight")->offset, 32);
    gguf_close(g);
    roundtrip(p, "empty");
    free(p);
}
END_TEST

/* export pads past the last tensor up to config.source.size; a pulled model's config can say
 * anything, so a size beyond the alignment's padding is refused and no file is left. A real
 * zero tail longer than the alignment still round-trips (import keeps it as a gaps layer). */
START_TEST(export_refuses_a_source_size_past_the_padding)
{
    char *p = write_all_types("size.gguf", 32, "llama"), *out = ms_path_join(dir, "size.out");
    ms_digest d, text;
    export_result res;
    manifest *m = NULL;
    store_txn *t = NULL;
    blob_view v;
    json_t *c;
    model_name a, big;
    FILE *f;

    ck_assert_int_eq(name_parse(&a, "a"), 0);
    ck_assert_int_eq(name_parse(&big, "big"), 0);
    ck_assert_int_eq(import_path(s, p, &a, NULL, d), 0);
    ck_assert_int_eq(store_manifest_load(s, d, &m), 0);
    ck_assert_int_eq(blob_open(&v, home, m->config.digest), 0);
    c = json_loadb((const char *)v.data, v.size, 0, NULL);
    blob_close(&v);
    ck_assert_ptr_nonnull(c);
    json_object_set_new(json_object_get(c, "source"), "size",
                        json_integer(json_integer_value(json_object_get(json_object_get(c, "source"), "size")) + (64 << 20)));
    ck_assert_int_eq(store_txn_begin(&t, s), 0);
    ck_assert_int_eq(import_config_store(t, m, c), 0);
    ck_assert_int_eq(store_txn_commit(t, &big, m, text), 0);
    json_decref(c);
    manifest_free(m);
    ck_assert_int_eq(export_gguf(s, &big, out, &res), MS_EINVALID);
    ck_assert_msg(strstr(ms_err_msg(), "source.size"), "%s", ms_err_msg());
    ck_assert_int_eq(access(out, F_OK), -1);

    f = fopen(p, "ab");   /* 100 zero bytes after the last tensor: more than the alignment */
    ck_assert_ptr_nonnull(f);
    for (int i = 0; i < 100; i++)
        fputc(0, f);
    fclose(f);
    roundtrip(p, "zero-tail");
    free(out);
    free(p);
}
END_TEST

START_TEST(gguf_names_map_to_hugging_face_and_pack_experts)
{
    static const char *const in[] = { "token_embd.weight", "output_norm.weight", "output.weight",
        "blk.0.attn_norm.weight", "blk.0.attn_q.weight", "blk.0.attn_k.bias", "blk.0.ffn_norm.weight",
        "blk.0.attn_q_norm.weight", "blk.0.ffn_gate_exps.weight", "blk.0.ffn_up_exps.weight",
        "blk.0.ffn_down_exps.weight", "blk.0.ffn_gate_inp.weight", "blk.0.unheard_of.weight" };
    static const char *const out[] = { "model.embed_tokens.weight", "model.norm.weight", "lm_head.weight",
        "model.layers.0.input_layernorm.weight", "model.layers.0.self_attn.q_proj.weight",
        "model.layers.0.self_attn.k_proj.bias", "model.layers.0.post_attention_layernorm.weight",
        "model.layers.0.self_attn.q_norm.weight", "model.layers.0.mlp.experts.gate_proj.weight",
        "model.layers.0.mlp.experts.up_proj.weight", "model.layers.0.mlp.experts.down_proj.weight",
        "model.layers.0.mlp.gate.weight", "blk.0.unheard_of.weight" };
    gguf_writer *w;
    char *p = ms_path_join(dir, "moe.gguf");
    ms_digest digest, want;

    pattern_fill();
    static float data[13][64];
    uint64_t ne[2] = { 32, 2 }, ne3[3] = { 32, 2, 2 };
    manifest *m;
    model_name n;
    export_result res;
    int packs = 0;

    ck_assert_int_eq(gguf_writer_new(&w, 3, 32), 0);
    ck_assert_int_eq(gguf_writer_set_str(w, "general.architecture", "qwen3moe", 8), 0);
    for (int i = 0; i < 13; i++) {
        int is_exp = strstr(in[i], "_exps") != NULL;
        for (int k = 0; k < 64; k++)
            data[i][k] = (float)(i * 100 + k);
        if (i == 10)   /* down_exps block-quantized: 2 x 2 rows of one Q8_0 block */
            ck_assert_int_eq(gguf_writer_add_tensor(w, in[i], GGML_TYPE_Q8_0, 3, ne3, pattern, 4 * 34), 0);
        else
            ck_assert_int_eq(gguf_writer_add_tensor(w, in[i], i == 9 ? GGML_TYPE_F16 : GGML_TYPE_F32, is_exp ? 3 : 2,
                                                    is_exp ? ne3 : ne, data[i], (is_exp ? 128u : 64u) * (i == 9 ? 2 : 4)),
                             0);
    }
    ck_assert_int_eq(gguf_writer_write_file(w, p), 0);
    gguf_writer_free(w);
    ck_assert_int_eq(name_parse(&n, "moe"), 0);
    ck_assert_msg(import_path(s, p, &n, NULL, digest) == 0, "%s", ms_err_msg());
    ck_assert_int_eq(store_manifest_load(s, digest, &m), 0);
    for (int i = 0; i < 13; i++) {
        int in_pack = strstr(out[i], "mlp.experts.") != NULL;
        ck_assert_msg(in_pack || manifest_layer_find(m, MT_TENSOR, out[i]) != NULL, "no layer %s", out[i]);
    }
    for (size_t i = 0; i < m->n_layers; i++)
        if (m->layers[i].name && strcmp(m->layers[i].name, "model.layers.0.mlp.experts") == 0) {
            blob_view v;
            st_file *st;
            packs++;
            ck_assert_int_eq(blob_open(&v, home, m->layers[i].digest), 0);
            ck_assert_int_eq(st_parse(&st, v.data, v.size, v.size, 0, "pack"), 0);
            ck_assert_uint_eq(st_count(st), 3);
            ck_assert_ptr_nonnull(st_find(st, "model.layers.0.mlp.experts.up_proj.weight"));
            ck_assert_str_eq(st_meta(st, "gguf_name:model.layers.0.mlp.experts.up_proj.weight"), "blk.0.ffn_up_exps.weight");
            st_free(st);
            blob_close(&v);
        }
    ck_assert_int_eq(packs, 1);
    blobs_hash_to_their_names(digest, p);   /* a pack's tensors are read out of file order */
    {   /* the index sees each packed tensor's own type and shape */
        store_tensor *t = NULL;
        size_t nt = 0, hits = 0;
        ck_assert_int_eq(store_tensors_list(s, digest, &t, &nt), 0);
        for (size_t i = 0; i < nt; i++) {
            if (strcmp(t[i].name, "model.layers.0.mlp.experts.down_proj.weight") == 0) {
                ck_assert_str_eq(t[i].quant_type, "Q8_0");
                ck_assert_str_eq(t[i].shape, "[2, 2, 32]");
                hits++;
            } else if (strcmp(t[i].name, "model.layers.0.mlp.experts.up_proj.weight") == 0) {
                ck_assert_ptr_null(t[i].quant_type);
                ck_assert_str_eq(t[i].dtype, "F16");
                hits++;
            }
        }
        ck_assert_uint_eq(hits, 2);
        store_tensors_free(t, nt);
    }
    manifest_free(m);
    ck_assert_int_eq(export_gguf(s, &n, "/dev/null/x", &res) < 0, 1);   /* unwritable output: an error */
    {
        char *o = ms_path_join(dir, "moe.out.gguf");
        ck_assert_int_eq(export_gguf(s, &n, o, &res), 0);
        file_digest(want, p);
        ck_assert_str_eq(res.digest, want);
        free(o);
    }
    free(p);
}
END_TEST

/* Tensors of several MiB at odd sizes: each crosses the import's 1 MiB chunks at a different
 * offset within its blob's 64-byte hash blocks than within the file's. */
START_TEST(gguf_large_tensors_hash_to_their_names)
{
    static const uint64_t rows[] = { 700001, 3, 262144, 300007 };
    char *p = ms_path_join(dir, "large.gguf");
    gguf_writer *w;
    float *data = malloc(700001 * sizeof *data);
    ms_digest digest;
    model_name n;

    ck_assert_ptr_nonnull(data);
    for (size_t i = 0; i < 700001; i++)
        data[i] = (float)(i * 2654435761u % 1000003u);
    ck_assert_int_eq(gguf_writer_new(&w, 3, 32), 0);
    ck_assert_int_eq(gguf_writer_set_str(w, "general.architecture", "llama", 5), 0);
    for (int i = 0; i < 4; i++) {
        char name[64];
        uint64_t ne[2] = { rows[i], 1 };
        snprintf(name, sizeof name, "blk.%d.attn_q.weight", i);
        ck_assert_int_eq(gguf_writer_add_tensor(w, name, GGML_TYPE_F32, 2, ne, data + i, rows[i] * 4), 0);
    }
    ck_assert_int_eq(gguf_writer_write_file(w, p), 0);
    gguf_writer_free(w);
    ck_assert_int_eq(name_parse(&n, "large"), 0);
    ck_assert_msg(import_path(s, p, &n, NULL, digest) == 0, "%s", ms_err_msg());
    blobs_hash_to_their_names(digest, p);
    free(data);
    free(p);
}
END_TEST

/* A corrupt GGUF is refused with the reader's message, and the store is left as it was. */
START_TEST(gguf_corrupt_file_leaves_the_store_unchanged)
{
    char *p = write_all_types("bad.gguf", 32, "llama");
    ms_digest digest;
    store_entry *list = NULL;
    size_t nl = 0;
    model_name n;
    FILE *f;

    f = fopen(p, "r+b");
    fseek(f, 4, SEEK_SET);
    fputc(99, f);   /* version 99 */
    fclose(f);
    ck_assert_int_eq(name_parse(&n, "bad"), 0);
    ck_assert_int_eq(import_path(s, p, &n, NULL, digest), MS_EINVALID);
    ck_assert_msg(strstr(ms_err_msg(), "bad.gguf") && strstr(ms_err_msg(), "version 99"), "%s", ms_err_msg());
    ck_assert_int_eq(fixture_blob_count(home), 0);
    ck_assert_int_eq(store_list(s, &list, &nl), 0);
    ck_assert_uint_eq(nl, 0);
    free(list);
    free(p);
}
END_TEST

/* Every GGUF under the shared models imports and exports to the same sha256. */
START_TEST(shared_models_round_trip)
{
    static const char *const files[] = { "stories260K/stories260K.gguf", "stories260K/s260k-f16.gguf",
        "stories260K/s260k-mixed.gguf", "llama-2-tiny-random/llama-2-tiny-random.gguf",
        "vocab/ggml-vocab-llama-spm.gguf", "vocab/ggml-vocab-phi-3.gguf", "vocab/ggml-vocab-gpt-2.gguf",
        "vocab/ggml-vocab-deepseek-llm.gguf", "vocab/ggml-vocab-deepseek-coder.gguf" };
    char *models = fixture_models_dir();
    int done = 0;

    if (!models) {
        fprintf(stderr, "skipped: shared models not found (set MSTORE_TEST_MODELS)\n");
        return;
    }
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char *p = ms_path_join(models, files[i]), tag[32];
        if (!ms_is_file(p)) {
            fprintf(stderr, "skipped: %s not found\n", p);
            free(p);
            continue;
        }
        snprintf(tag, sizeof tag, "shared:%zu", i);
        /* roundtrip() writes next to the source; the shared folder is read-only, so copy. */
        {
            ms_map m;
            char *copy;
            ck_assert_int_eq(ms_map_open(&m, p), 0);
            copy = fixture_write(dir, "shared.gguf", m.data, m.size);
            ms_map_close(&m);
            roundtrip(copy, tag);
            free(copy);
        }
        done++;
        free(p);
    }
    ck_assert_int_gt(done, 0);
    free(models);
}
END_TEST

/* A small llama-shaped Hugging Face directory, written with the safetensors writer. */
static char *write_hf_dir(void)
{
    static const char *const kinds[] = { "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                                         "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj", "input_layernorm",
                                         "post_attention_layernorm" };
    enum { D = 64, KV = 32, F = 128, V = 32, L = 2 };
    char *hf = ms_path_join(dir, "hf"), *p, name[128];
    static float data[64][F * D];
    const char *cfg = "{\"model_type\": \"llama\", \"hidden_size\": 64, \"intermediate_size\": 128, "
                      "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"num_key_value_heads\": 2, "
                      "\"vocab_size\": 32, \"max_position_embeddings\": 64, \"rms_norm_eps\": 1e-5, "
                      "\"rope_theta\": 10000.0, \"tie_word_embeddings\": false}";
    st_writer *w;
    FILE *f;
    int k = 0;
    uint32_t x = 7;

    ck_assert_int_eq(ms_mkdir_p(hf, 0755), 0);
    free(fixture_write(hf, "config.json", cfg, strlen(cfg)));
    for (int i = 0; i < 64; i++)
        for (int j = 0; j < F * D; j++) {
            x = x * 1664525u + 1013904223u;
            data[i][j] = ((float)(x >> 8) / 16777216.0f - 0.5f) * 0.2f;
        }
    ck_assert_int_eq(st_writer_new(&w), 0);
    {
        uint64_t emb[2] = { V, D }, norm[1] = { D };
        ck_assert_int_eq(st_writer_add(w, "model.embed_tokens.weight", ST_F32, 2, emb, data[k++], V * D * 4), 0);
        ck_assert_int_eq(st_writer_add(w, "lm_head.weight", ST_F32, 2, emb, data[k++], V * D * 4), 0);
        for (int j = 0; j < D; j++)
            data[k][j] = 1.0f + data[k][j];
        ck_assert_int_eq(st_writer_add(w, "model.norm.weight", ST_F32, 1, norm, data[k++], D * 4), 0);
    }
    for (int l = 0; l < L; l++)
        for (size_t q = 0; q < sizeof kinds / sizeof kinds[0]; q++) {
            uint64_t sh[2];
            int nd = 2;
            if (q == 0 || q == 3) { sh[0] = D; sh[1] = D; }
            else if (q == 1 || q == 2) { sh[0] = KV; sh[1] = D; }
            else if (q == 4 || q == 5) { sh[0] = F; sh[1] = D; }
            else if (q == 6) { sh[0] = D; sh[1] = F; }
            else { sh[0] = D; nd = 1; for (int j = 0; j < D; j++) data[k][j] += 1.0f; }
            snprintf(name, sizeof name, "model.layers.%d.%s.weight", l, kinds[q]);
            ck_assert_int_eq(st_writer_add(w, name, ST_F32, nd, sh, data[k++], (nd == 2 ? sh[0] * sh[1] : sh[0]) * 4), 0);
        }
    p = ms_path_join(hf, "model.safetensors");
    f = fopen(p, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(st_writer_emit(w, file_sink, f), 0);
    fclose(f);
    st_writer_free(w);
    free(p);
    return hf;
}

/* Export of a safetensors import: re-imported, the GGUF gives the same logits (Q/K rows were
 * permuted to GGUF's order and the runtime rotates pairs instead of halves). */
START_TEST(hf_export_to_gguf_runs_the_same)
{
    char *hf = write_hf_dir(), *out = ms_path_join(dir, "hf.gguf");
    ms_digest digest;
    int32_t toks[5] = { 1, 5, 7, 3, 30 };
    float a[32], b[32], maxd = 0, maxa = 0;
    runtime_opts ro = { .n_threads = 1 };
    runtime_model *ma = NULL, *mb = NULL;
    export_result res;
    model_name n1, n2;
    gguf_file *g;

    ck_assert_int_eq(name_parse(&n1, "hf"), 0);
    ck_assert_int_eq(name_parse(&n2, "back"), 0);
    ck_assert_msg(import_path(s, hf, &n1, NULL, digest) == 0, "%s", ms_err_msg());
    ck_assert_msg(export_gguf(s, &n1, out, &res) == 0, "%s", ms_err_msg());
    ck_assert_int_eq(res.identical, 0);
    ck_assert_int_eq(gguf_open(&g, out), 0);
    ck_assert_ptr_nonnull(gguf_tensor_find(g, "blk.1.attn_k.weight"));
    ck_assert_ptr_nonnull(gguf_tensor_find(g, "token_embd.weight"));
    gguf_close(g);
    ck_assert_msg(import_path(s, out, &n2, NULL, digest) == 0, "%s", ms_err_msg());
    ck_assert_msg(runtime_model_open_store(&ma, s, &n1, &ro) == 0, "%s", ms_err_msg());
    ck_assert_msg(runtime_model_open_store(&mb, s, &n2, &ro) == 0, "%s", ms_err_msg());
    ck_assert_int_eq(runtime_forward(ma, toks, 5, a), 0);
    ck_assert_int_eq(runtime_forward(mb, toks, 5, b), 0);
    for (int i = 0; i < 32; i++) {
        float d = a[i] > b[i] ? a[i] - b[i] : b[i] - a[i];
        maxd = d > maxd ? d : maxd;
        maxa = (a[i] > 0 ? a[i] : -a[i]) > maxa ? (a[i] > 0 ? a[i] : -a[i]) : maxa;
    }
    ck_assert_msg(maxd <= 1e-5f * maxa, "max diff %g of %g", maxd, maxa);
    runtime_model_close(ma);
    runtime_model_close(mb);
    free(hf);
    free(out);
}
END_TEST

int main(void)
{
    Suite *su = suite_create("import");
    TCase *tc = tcase_create("import");
    SRunner *sr;
    int failed;

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, gguf_every_type_round_trips_byte_identical);
    tcase_add_test(tc, gguf_tensor_blobs_hold_the_source_bytes);
    tcase_add_test(tc, gguf_reimport_writes_no_blob);
    tcase_add_test(tc, gguf_nonzero_gaps_round_trip);
    tcase_add_test(tc, gguf_empty_tensor_inside_another_round_trips);
    tcase_add_test(tc, export_refuses_a_source_size_past_the_padding);
    tcase_add_test(tc, gguf_names_map_to_hugging_face_and_pack_experts);
    tcase_add_test(tc, gguf_large_tensors_hash_to_their_names);
    tcase_add_test(tc, gguf_corrupt_file_leaves_the_store_unchanged);
    tcase_add_test(tc, shared_models_round_trip);
    tcase_add_test(tc, hf_export_to_gguf_runs_the_same);
    suite_add_tcase(su, tc);
    sr = srunner_create(su);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
