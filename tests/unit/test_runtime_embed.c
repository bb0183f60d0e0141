/* test_runtime_embed.c: the encoders (bert, nomic-bert) and runtime_embed.
 *
 * Each model is a small synthetic GGUF written at test time by tests/reference/make_bert_gguf.py
 * (dim 64, 2 layers, 4 heads, ffn 128, context 64, random F32 weights, the bge WordPiece vocab of
 * 30522 tokens) and judged against tests/reference/ref_embed.py, a float64 encoder written from
 * Hugging Face's BertModel / NomicBertModel and sentence-transformers' pooling, run here on the
 * same file: every component within 1e-4 of the reference. The sequences are packed into batches of
 * n_batch 16 tokens (several per batch, and one of 23 tokens that runs alone), each pooling kind is
 * checked, and the same model from its Hugging Face directory imported into a store gives the
 * same vectors. */
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers/fixture.h"
#include "import/import.h"
#include "runtime/runtime.h"
#include "runtime/runtime_int.h"

static const char *src_dir(void)
{
    return getenv("MSTORE_SRC") ? getenv("MSTORE_SRC") : ".";
}

/* Sequences of [CLS] w... [SEP] with these lengths: with n_batch 16, {5, 9} share a batch, 23 runs
 * alone, then {1, 12, 3} and {7, 2} (a sequence of 1: [CLS] alone). */
static const int seq_len[] = { 5, 9, 23, 1, 12, 3, 7, 2 };
#define N_SEQS ((int)(sizeof seq_len / sizeof seq_len[0]))
#define DIM 64

static int32_t seqs[N_SEQS][64];

static void make_seqs(void)
{
    uint32_t x = 12345;

    for (int s = 0; s < N_SEQS; s++)
        for (int i = 0; i < seq_len[s]; i++) {
            x = x * 1103515245u + 12345u;
            seqs[s][i] = i == 0 ? 101 : i == seq_len[s] - 1 ? 102 : 1000 + (int32_t)((x >> 8) % 29000);
        }
}

/* The model (GGUF at *path_out, and an HF directory at `hf` when not NULL) and the reference's
 * embeddings of seqs; NULL with a skip message when python3 + numpy or the vocab are missing. */
static json_t *make_model(const char *dir, const char *arch, const char *pooling, const char *hf, char **path_out)
{
    char *models = fixture_models_dir(), *out = ms_strdup_printf("%s/%s-%s.gguf", dir, arch, pooling);
    char *ref = ms_strdup_printf("%s/%s-%s.json", dir, arch, pooling), *cmd, *args = ms_strdup_printf("%s", "");
    json_error_t e;
    json_t *j = NULL;

    *path_out = NULL;
    make_seqs();
    if (!models) {
        printf("skipped: shared models folder not found (the vocab is vocab/ggml-vocab-bert-bge.gguf)\n");
        goto done;
    }
    for (int s = 0; s < N_SEQS; s++) {
        char *a = ms_strdup_printf("%s --seq %d", args, seqs[s][0]);
        free(args);
        args = a;
        for (int i = 1; i < seq_len[s]; i++) {
            a = ms_strdup_printf("%s,%d", args, seqs[s][i]);
            free(args);
            args = a;
        }
    }
    cmd = ms_strdup_printf("/usr/bin/python3 '%s/tests/reference/make_bert_gguf.py' --arch %s --pooling %s "
                           "--vocab '%s/vocab/ggml-vocab-bert-bge.gguf' --out '%s' %s%s%s && /usr/bin/python3 "
                           "'%s/tests/reference/ref_embed.py' '%s' %s > '%s'",
                           src_dir(), arch, pooling, models, out, hf ? "--hf-dir '" : "", hf ? hf : "", hf ? "'" : "",
                           src_dir(), out, args, ref);
    if (system(cmd) != 0) {
        printf("skipped: %s failed (numpy missing?)\n", cmd);
        free(cmd);
        goto done;
    }
    free(cmd);
    j = json_load_file(ref, 0, &e);
    ck_assert_msg(j != NULL, "%s: %s", ref, e.text);
    *path_out = out;
    out = NULL;
done:
    free(args);
    free(models);
    free(out);
    free(ref);
    return j;
}

static void embed_all(runtime_model *m, float *out)
{
    const int32_t *ptr[N_SEQS];

    for (int s = 0; s < N_SEQS; s++)
        ptr[s] = seqs[s];
    ck_assert_msg(runtime_embed(m, ptr, seq_len, N_SEQS, out) == 0, "%s", ms_err_msg());
}

/* max over every component of |got - ref| */
static double max_diff_ref(const float *got, json_t *ref)
{
    json_t *es = json_object_get(ref, "embeddings");
    double d = 0;

    ck_assert_int_eq((int)json_array_size(es), N_SEQS);
    for (int s = 0; s < N_SEQS; s++) {
        json_t *e = json_array_get(es, (size_t)s);
        ck_assert_int_eq((int)json_array_size(e), DIM);
        for (int i = 0; i < DIM; i++)
            d = fmax(d, fabs(got[s * DIM + i] - json_number_value(json_array_get(e, (size_t)i))));
    }
    return d;
}

static double max_diff(const float *a, const float *b, size_t n)
{
    double d = 0;

    for (size_t i = 0; i < n; i++)
        d = fmax(d, fabs(a[i] - b[i]));
    return d;
}

/* runtime_embed_pooled: the same vectors before the normalization (ollama's older endpoint): none
 * of length 1 here, each scaled to length 1 runtime_embed's `unit`. */
static void check_pooled(runtime_model *m, const int32_t *const *ptr, const float *unit)
{
    float raw[N_SEQS * DIM];

    ck_assert_msg(runtime_embed_pooled(m, ptr, seq_len, N_SEQS, raw) == 0, "%s", ms_err_msg());
    for (int s = 0; s < N_SEQS; s++) {
        double n = 0;
        for (int i = 0; i < DIM; i++)
            n += (double)raw[s * DIM + i] * raw[s * DIM + i];
        n = sqrt(n);
        ck_assert_msg(fabs(n - 1) > 1e-3, "sequence %d: the pooled vector has length %g", s, n);
        for (int i = 0; i < DIM; i++)
            ck_assert_double_eq_tol(raw[s * DIM + i] / n, unit[s * DIM + i], 1e-6);
    }
}

static const struct {
    const char *arch, *pooling;
    int kind;
} variants[] = {
    { "bert", "mean", RUNTIME_POOL_MEAN },       { "bert", "cls", RUNTIME_POOL_CLS },
    { "bert", "last", RUNTIME_POOL_LAST },       { "nomic-bert", "mean", RUNTIME_POOL_MEAN },
    { "nomic-bert", "cls", RUNTIME_POOL_CLS },   { "nomic-bert", "last", RUNTIME_POOL_LAST },
};

/* Packed batches against the float64 reference, and against each sequence embedded alone. */
START_TEST(embeddings_match_the_float64_reference)
{
    char *dir = fixture_tmpdir(), *path;
    json_t *ref = make_model(dir, variants[_i].arch, variants[_i].pooling, NULL, &path);
    runtime_opts o = {.n_threads = 2, .n_batch = 16};
    float got[N_SEQS * DIM], alone[DIM];
    runtime_model *m;
    double d, da = 0;

    if (ref) {
        ck_assert_msg(runtime_model_open_gguf(&m, path, &o) == 0, "%s", ms_err_msg());
        ck_assert_int_eq(runtime_model_pooling(m), variants[_i].kind);
        ck_assert_int_eq(runtime_model_embed_dim(m), DIM);
        embed_all(m, got);
        /* packed greedily into 16 rows: {5, 9}, {23} alone, {1, 12, 3}, {7, 2} */
        ck_assert_int_eq(runtime__model_embed_runs(m), 4);
        d = max_diff_ref(got, ref);
        {
            const int32_t *ptr[N_SEQS];
            for (int s = 0; s < N_SEQS; s++)
                ptr[s] = seqs[s];
            check_pooled(m, ptr, got);
        }
        for (int s = 0; s < N_SEQS; s++) {
            const int32_t *p = seqs[s];
            ck_assert_msg(runtime_embed(m, &p, &seq_len[s], 1, alone) == 0, "%s", ms_err_msg());
            da = fmax(da, max_diff(alone, got + s * DIM, DIM));
        }
        printf("measured: %s %s pooling: max |runtime - float64 reference| %.3g per component over %d sequences; "
               "packed vs alone %.3g\n", variants[_i].arch, variants[_i].pooling, d, N_SEQS, da);
        ck_assert_msg(d <= 1e-4, "%s %s: %g from the reference", variants[_i].arch, variants[_i].pooling, d);
        ck_assert_msg(da <= 1e-6, "packing changed a vector by %g", da);
        runtime_model_close(m);
        json_decref(ref);
        free(path);
    }
    fixture_rmrf(dir);
}
END_TEST

/* Text reaches the encoder as llama.cpp b4748 tokenizes it: the model's own tokenizer (the GGUF's
 * WordPiece vocab, or the directory's tokenizer.json) gives llama-tokenize's ids for a text with
 * accents, CJK, punctuation and numbers ([CLS] ... [SEP] added). */
static void check_text_ids(runtime_model *m, const char *what)
{
    static const char text[] = "H\xc3\xa9llo w\xc3\xb6rld, \xe6\x9d\xb1\xe4\xba\xac is 42!";   /* Héllo wörld, 東京 is 42! */
    static const int32_t want[] = { 101, 7592, 2088, 1010, 1879, 1755, 2003, 4413, 999, 102 };   /* llama-tokenize --ids */
    const tokenizer *tk;
    int32_t *ids;
    size_t n;

    ck_assert_msg(runtime_weights_tokenizer(&tk, runtime_model_weights(m)) == 0, "%s: %s", what, ms_err_msg());
    ck_assert_int_eq(tokenizer_encode_alloc(tk, text, strlen(text), 1, 0, &ids, &n), 0);
    ck_assert_int_eq((int)n, (int)(sizeof want / sizeof want[0]));
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(ids[i] == want[i], "%s: id %zu is %d, llama.cpp's %d", what, i, ids[i], want[i]);
    free(ids);
}

/* The same through the Vulkan backend (lavapipe where there is no GPU: asked for by name), when
 * this build and machine have one: the GPU's LayerNorm, erf GELU and bidirectional attention. */
START_TEST(embeddings_on_vulkan_match_the_float64_reference)
{
    int v = _i ? 4 : 0;   /* bert mean, nomic-bert cls */
    char *dir = fixture_tmpdir(), *path;
    json_t *ref = make_model(dir, variants[v].arch, variants[v].pooling, NULL, &path);
    runtime_opts o = {.n_threads = 2, .n_batch = 16, .device = "vulkan"};
    float got[N_SEQS * DIM];
    runtime_model *m;
    double d;

    if (ref) {
        if (runtime_model_open_gguf(&m, path, &o) < 0) {
            printf("skipped: no Vulkan device (%s)\n", ms_err_msg());
        } else {
            embed_all(m, got);
            d = max_diff_ref(got, ref);
            printf("measured: %s %s pooling on %s: max |runtime - float64 reference| %.3g per component\n",
                   variants[v].arch, variants[v].pooling, runtime_model_device(m), d);
            ck_assert_msg(d <= 1e-4, "%g from the reference", d);
            runtime_model_close(m);
        }
        json_decref(ref);
        free(path);
    }
    fixture_rmrf(dir);
}
END_TEST

/* The generator's Hugging Face directory (config.json, model.safetensors, tokenizer.json,
 * modules.json, 1_Pooling/config.json) imported into a store: its pooling reaches the runtime and
 * its vectors are the GGUF's (the same F32 weights under Hugging Face's names); so are those of the
 * GGUF imported. */
START_TEST(hugging_face_directory_gives_the_same_vectors)
{
    static const char *const arch[] = { "bert", "nomic-bert" };
    char *dir = fixture_tmpdir(), *path, *hf = ms_strdup_printf("%s/hf", dir), *home = ms_strdup_printf("%s/home", dir);
    json_t *ref = make_model(dir, arch[_i], "cls", hf, &path);
    runtime_opts o = {.n_threads = 2, .n_batch = 16};
    float g[N_SEQS * DIM], h[N_SEQS * DIM], s2[N_SEQS * DIM];
    import_opts io = {.quiet = 1};
    runtime_model *m;
    model_name name;
    ms_digest digest;
    store *st;

    if (ref) {
        ck_assert_msg(runtime_model_open_gguf(&m, path, &o) == 0, "%s", ms_err_msg());
        embed_all(m, g);
        check_text_ids(m, "gguf");
        runtime_model_close(m);
        ck_assert_int_eq(store_open(&st, home), 0);
        ck_assert_int_eq(name_parse(&name, "enc:hf"), 0);
        ck_assert_msg(import_path(st, hf, &name, &io, digest) == 0, "%s", ms_err_msg());
        ck_assert_msg(runtime_model_open_store(&m, st, &name, &o) == 0, "%s", ms_err_msg());
        ck_assert_int_eq(runtime_model_pooling(m), RUNTIME_POOL_CLS);   /* from 1_Pooling/config.json */
        embed_all(m, h);
        check_text_ids(m, "hf");
        runtime_model_close(m);
        ck_assert_int_eq(name_parse(&name, "enc:gguf"), 0);
        ck_assert_msg(import_path(st, path, &name, &io, digest) == 0, "%s", ms_err_msg());
        ck_assert_msg(runtime_model_open_store(&m, st, &name, &o) == 0, "%s", ms_err_msg());
        embed_all(m, s2);
        runtime_model_close(m);
        store_close(st);
        printf("measured: %s: Hugging Face directory vs GGUF %.3g, GGUF imported vs GGUF %.3g, GGUF vs reference "
               "%.3g\n", arch[_i], max_diff(h, g, N_SEQS * DIM), max_diff(s2, g, N_SEQS * DIM), max_diff_ref(g, ref));
        ck_assert(max_diff(h, g, N_SEQS * DIM) <= 1e-6);
        ck_assert(max_diff(s2, g, N_SEQS * DIM) <= 1e-6);
        ck_assert(max_diff_ref(h, ref) <= 1e-4);
        json_decref(ref);
        free(path);
    }
    free(hf);
    free(home);
    fixture_rmrf(dir);
}
END_TEST

/* An encoder has no logits; runtime_embed refuses bad sequences by index. */
START_TEST(encoder_refuses_forward_and_bad_sequences)
{
    char *dir = fixture_tmpdir(), *path;
    json_t *ref = make_model(dir, "bert", "mean", NULL, &path);
    runtime_opts o = {.n_threads = 2, .n_batch = 16};
    int32_t toks[65] = { 101, 102 }, bad[2] = { 101, 30522 };
    const int32_t *p[2] = { toks, bad };
    int n[2] = { 2, 2 };
    float out[2 * DIM], lg[8];
    runtime_model *m;

    if (ref) {
        ck_assert_msg(runtime_model_open_gguf(&m, path, &o) == 0, "%s", ms_err_msg());
        ck_assert_int_eq(runtime_forward(m, toks, 2, lg), MS_EUNSUPPORTED);
        ck_assert_ptr_nonnull(strstr(ms_err_msg(), "is an embedding model"));
        ck_assert_int_eq(runtime_embed(m, p, n, 2, out), MS_EINVALID);
        ck_assert_msg(strstr(ms_err_msg(), "sequence 1: token 30522 at index 1 out of range"), "%s", ms_err_msg());
        n[1] = 0;
        ck_assert_int_eq(runtime_embed(m, p, n, 2, out), MS_EINVALID);
        ck_assert_msg(strstr(ms_err_msg(), "sequence 1 is empty"), "%s", ms_err_msg());
        n[0] = 65;
        ck_assert_int_eq(runtime_embed(m, p, n, 1, out), MS_EINVALID);
        ck_assert_msg(strstr(ms_err_msg(), "65 tokens exceeds the context of 64"), "%s", ms_err_msg());
        ck_assert_uint_eq(runtime_model_kv_nbytes(m), 0);
        runtime_model_close(m);
        json_decref(ref);
        free(path);
    }
    fixture_rmrf(dir);
}
END_TEST

/* Overwrite the first `old` in the file with `new` (same length) or, with val set, the u32 value
 * stored after the key `old` (key string, u32 type, value). */
static void patch(const char *path, const char *old, const char *new, int64_t val)
{
    FILE *f = fopen(path, "r+b");
    char *buf;
    long len;
    size_t n = strlen(old);

    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    len = ftell(f);
    buf = malloc((size_t)len);
    fseek(f, 0, SEEK_SET);
    ck_assert_int_eq(fread(buf, 1, (size_t)len, f), len);
    for (long i = 0; i + (long)n <= len; i++)
        if (memcmp(buf + i, old, n) == 0) {
            if (val >= 0) {
                uint32_t v = (uint32_t)val;
                memcpy(buf + i + n + 4, &v, 4);
            } else {
                memcpy(buf + i, new, n);
            }
            fseek(f, 0, SEEK_SET);
            ck_assert_int_eq(fwrite(buf, 1, (size_t)len, f), len);
            fclose(f);
            free(buf);
            return;
        }
    ck_abort_msg("%s: '%s' not found", path, old);
}

static const struct {
    const char *key, *new;
    int64_t val;
    const char *expect;
} bad_fields[] = {
    { "bert.pooling_type", NULL, 7, "kv 'bert.pooling_type': 7 out of range" },
    { "bert.attention.head_count", NULL, 5, "kv 'bert.attention.head_count': 5 heads do not divide" },
    { "token_types.weight", "token_typez.weight", -1, "token_types.weight" },
    { "blk.1.ffn_up.bias", "blk.1.ffn_up.biaz", -1, "encoder.layer.1.intermediate.dense.bias" },
};

/* A GGUF that says nonsense is refused with MS_EINVALID naming the key or tensor. */
START_TEST(bad_gguf_fields_are_refused_by_name)
{
    char *dir = fixture_tmpdir(), *path;
    json_t *ref = make_model(dir, "bert", "mean", NULL, &path);
    runtime_opts o = {.n_threads = 2, .n_batch = 16};
    runtime_model *m;

    if (ref) {
        patch(path, bad_fields[_i].key, bad_fields[_i].new, bad_fields[_i].val);
        ck_assert_int_eq(runtime_model_open_gguf(&m, path, &o), MS_EINVALID);
        ck_assert_ptr_null(m);
        ck_assert_msg(strstr(ms_err_msg(), bad_fields[_i].expect), "%s", ms_err_msg());
        json_decref(ref);
        free(path);
    }
    fixture_rmrf(dir);
}
END_TEST

/* An encoder whose GGUF says pooling none (llama.cpp's per-token output) or rank (a reranker)
 * opens, and runtime_embed refuses it saying which. */
START_TEST(an_encoder_without_pooling_is_refused_by_kind)
{
    char *dir = fixture_tmpdir(), *path;
    json_t *ref = make_model(dir, "bert", "mean", NULL, &path);
    runtime_opts o = {.n_threads = 2, .n_batch = 16};
    int32_t toks[2] = { 101, 102 };
    const int32_t *p = toks;
    int n = 2;
    float out[DIM];
    runtime_model *m;

    if (ref) {
        patch(path, "bert.pooling_type", NULL, _i ? 4 : 0);
        ck_assert_msg(runtime_model_open_gguf(&m, path, &o) == 0, "%s", ms_err_msg());
        ck_assert_int_eq(runtime_model_pooling(m), RUNTIME_POOL_NONE);
        ck_assert_int_eq(runtime_embed(m, &p, &n, 1, out), MS_EUNSUPPORTED);
        ck_assert_msg(strstr(ms_err_msg(), _i ? "pooling is rank" : "pooling_type is none"), "%s", ms_err_msg());
        runtime_model_close(m);
        json_decref(ref);
        free(path);
    }
    fixture_rmrf(dir);
}
END_TEST

/* A plain decoder cannot embed: pooling none, and runtime_embed says so. */
START_TEST(a_decoder_without_pooling_cannot_embed)
{
    char *models = fixture_models_dir(), *path;
    runtime_opts o = {.n_threads = 2};
    int32_t toks[2] = { 1, 403 };
    const int32_t *p = toks;
    int n = 2;
    float out[512];
    runtime_model *m;

    if (!models) {
        printf("skipped: shared models folder not found\n");
        return;
    }
    path = ms_strdup_printf("%s/stories260K/stories260K.gguf", models);
    ck_assert_msg(runtime_model_open_gguf(&m, path, &o) == 0, "%s", ms_err_msg());
    ck_assert_int_eq(runtime_model_pooling(m), RUNTIME_POOL_NONE);
    ck_assert_int_eq(runtime_embed(m, &p, &n, 1, out), MS_EUNSUPPORTED);
    ck_assert_msg(strstr(ms_err_msg(), "cannot embed"), "%s", ms_err_msg());
    runtime_model_close(m);
    free(path);
    free(models);
}
END_TEST

/* A decoder whose GGUF names a pooling (Qwen3-Embedding: qwen3 with last-token pooling) embeds its
 * final normed hidden states: a synthetic qwen3 (make_synthetic_qwen.py, stories260K's vocab of
 * 512) against ref_forward.py --embed; the KV cache is left empty. n_batch 8: little packs, and
 * the sequences past 8 run alone in chunks the KV cache carries (9: 2, 23: 3, 12: 2), 12 forwards
 * in all; n_batch 32: {5, 9}, {23, 1}, {12, 3, 7, 2} packed, 3 forwards. */
START_TEST(a_decoder_with_pooling_embeds_its_hidden_states)
{
    static const char *const pool[] = { "mean", "cls", "last" };
    static const int batch[] = { 8, 32 }, runs[] = { 12, 3 };
    int p = _i % 3, b = _i / 3;
    char *models = fixture_models_dir(), *dir = fixture_tmpdir(), *out = ms_strdup_printf("%s/q.gguf", dir);
    char *ref = ms_strdup_printf("%s/q.json", dir), *args = ms_strdup_printf("%s", ""), *cmd, *a;
    runtime_opts o = {.n_threads = 2, .n_batch = batch[b]};
    float got[N_SEQS * DIM];
    const int32_t *ptr[N_SEQS];
    int32_t toks[N_SEQS][64];
    json_error_t e;
    runtime_model *m;
    json_t *j;
    double d = 0;

    if (!models) {
        printf("skipped: shared models folder not found\n");
        goto done;
    }
    for (int s = 0; s < N_SEQS; s++) {
        a = ms_strdup_printf("%s --prompt 1", args);
        free(args);
        args = a;
        toks[s][0] = 1;
        for (int i = 1; i < seq_len[s]; i++) {
            toks[s][i] = 3 + (int32_t)((i * 37 + s * 101) % 500);
            a = ms_strdup_printf("%s,%d", args, toks[s][i]);
            free(args);
            args = a;
        }
        ptr[s] = toks[s];
    }
    cmd = ms_strdup_printf("/usr/bin/python3 '%s/tests/reference/make_synthetic_qwen.py' --arch qwen3 --dim 64 "
                           "--heads 4 --kv-heads 2 --ffn 128 --ctx 64 --pooling-type %d --vocab "
                           "'%s/stories260K/stories260K.gguf' -o '%s' && /usr/bin/python3 "
                           "'%s/tests/reference/ref_forward.py' '%s' --embed %s %s > '%s'",
                           src_dir(), p + 1, models, out, src_dir(), out, pool[p], args, ref);
    if (system(cmd) != 0) {
        printf("skipped: %s failed (numpy missing?)\n", cmd);
        free(cmd);
        goto done;
    }
    free(cmd);
    ck_assert_ptr_nonnull(j = json_load_file(ref, 0, &e));
    ck_assert_msg(runtime_model_open_gguf(&m, out, &o) == 0, "%s", ms_err_msg());
    ck_assert_int_eq(runtime_model_pooling(m), p + 1);
    ck_assert_msg(runtime_embed(m, ptr, seq_len, N_SEQS, got) == 0, "%s", ms_err_msg());
    ck_assert_int_eq(runtime_model_n_past(m), 0);
    ck_assert_int_eq(runtime__model_embed_runs(m), runs[b]);
    check_pooled(m, ptr, got);
    d = max_diff_ref(got, j);
    printf("measured: qwen3 with %s pooling, n_batch %d: max |runtime - float64 reference| %.3g per component\n",
           pool[p], batch[b], d);
    ck_assert_msg(d <= 1e-4, "%g from the reference", d);
    runtime_model_close(m);
    json_decref(j);
done:
    free(models);
    free(out);
    free(ref);
    free(args);
    fixture_rmrf(dir);
}
END_TEST

/* The one GGUF name table maps the encoders' tensors both ways: GGUF (llama.cpp's names) to
 * Hugging Face's (BertModel's, NomicBertModel's, as gguf-py's tensor_mapping.py lists them) and back,
 * as the import and export do; the decoders' shared rows do not leak into an encoder's names. */
START_TEST(encoder_names_map_both_ways)
{
    static const char *const map[][3] = {
        { "bert", "token_embd.weight", "embeddings.word_embeddings.weight" },
        { "bert", "position_embd.weight", "embeddings.position_embeddings.weight" },
        { "bert", "token_types.weight", "embeddings.token_type_embeddings.weight" },
        { "bert", "token_embd_norm.bias", "embeddings.LayerNorm.bias" },
        { "bert", "blk.3.attn_q.bias", "encoder.layer.3.attention.self.query.bias" },
        { "bert", "blk.0.attn_output.weight", "encoder.layer.0.attention.output.dense.weight" },
        { "bert", "blk.0.attn_output_norm.weight", "encoder.layer.0.attention.output.LayerNorm.weight" },
        { "bert", "blk.11.ffn_up.weight", "encoder.layer.11.intermediate.dense.weight" },
        { "bert", "blk.1.ffn_down.bias", "encoder.layer.1.output.dense.bias" },
        { "bert", "blk.1.layer_output_norm.bias", "encoder.layer.1.output.LayerNorm.bias" },
        { "nomic-bert", "token_embd_norm.weight", "emb_ln.weight" },
        { "nomic-bert", "blk.2.attn_qkv.weight", "encoder.layers.2.attn.Wqkv.weight" },
        { "nomic-bert", "blk.2.attn_output.weight", "encoder.layers.2.attn.out_proj.weight" },
        { "nomic-bert", "blk.2.attn_output_norm.bias", "encoder.layers.2.norm1.bias" },
        { "nomic-bert", "blk.2.ffn_up.weight", "encoder.layers.2.mlp.fc11.weight" },
        { "nomic-bert", "blk.2.ffn_gate.weight", "encoder.layers.2.mlp.fc12.weight" },
        { "nomic-bert", "blk.2.ffn_down.weight", "encoder.layers.2.mlp.fc2.weight" },
        { "nomic-bert", "blk.2.layer_output_norm.weight", "encoder.layers.2.norm2.weight" },
        { "nomic_bert", "blk.2.layer_output_norm.weight", "encoder.layers.2.norm2.weight" },   /* HF spelling */
    };
    char buf[256];

    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
        if (strcmp(map[i][0], "nomic_bert") != 0) {   /* a Hugging Face spelling names no GGUF file */
            gguf_name_to_hf(buf, sizeof buf, NULL, 0, map[i][0], map[i][1]);
            ck_assert_str_eq(buf, map[i][2]);
        }
        ck_assert_int_eq(gguf_name_from_hf(buf, sizeof buf, map[i][0], map[i][2]), 0);
        ck_assert_str_eq(buf, map[i][1]);
    }
    gguf_name_to_hf(buf, sizeof buf, NULL, 0, "bert", "blk.0.attn_norm.weight");   /* a decoder's row: kept */
    ck_assert_str_eq(buf, "blk.0.attn_norm.weight");
    gguf_name_to_hf(buf, sizeof buf, NULL, 0, "llama", "token_embd.weight");       /* the decoders' unchanged */
    ck_assert_str_eq(buf, "model.embed_tokens.weight");
    ck_assert_str_eq(gguf_arch_decoder("nomic_bert"), "nomic-bert");
}
END_TEST

Suite *embed_suite(void)
{
    Suite *s = suite_create("runtime_embed");
    TCase *t = tcase_create("embed");

    tcase_set_timeout(t, 300);
    tcase_add_test(t, encoder_names_map_both_ways);
    tcase_add_loop_test(t, embeddings_match_the_float64_reference, 0, sizeof variants / sizeof variants[0]);
    tcase_add_loop_test(t, embeddings_on_vulkan_match_the_float64_reference, 0, 2);
    tcase_add_loop_test(t, hugging_face_directory_gives_the_same_vectors, 0, 2);
    tcase_add_test(t, encoder_refuses_forward_and_bad_sequences);
    tcase_add_loop_test(t, bad_gguf_fields_are_refused_by_name, 0, sizeof bad_fields / sizeof bad_fields[0]);
    tcase_add_loop_test(t, an_encoder_without_pooling_is_refused_by_kind, 0, 2);
    tcase_add_test(t, a_decoder_without_pooling_cannot_embed);
    tcase_add_loop_test(t, a_decoder_with_pooling_embeds_its_hidden_states, 0, 6);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    SRunner *r = srunner_create(embed_suite());
    int failed;

    srunner_run_all(r, CK_NORMAL);
    failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? 1 : 0;
}
