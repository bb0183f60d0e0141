/* test_mlx.c: MLX-quantized directories and --quantize through import_path: triplets become
 * combined blobs whose dequantized values equal the source's, expert packs, refusals that leave
 * the store unchanged, and whatever real model directories $MSTORE_TEST_MODELS holds. */
#include <check.h>
#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blob/blob.h"
#include "format/format.h"
#include "helpers/fixture.h"
#include "import/import.h"
#include "quant/quant.h"
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


/* ---------------------------------------------------------------- the tests' MLX writer */

#define MAX_T 160

typedef struct src {
    char name[128];
    st_dtype dt;
    int n_dims;
    uint64_t shape[3];
    uint8_t *data;
    size_t nbytes;
    int shard;
} src;

typedef struct model {
    src t[MAX_T];
    int n;
    uint32_t rng;
} model;

static uint32_t next(model *m)
{
    m->rng = m->rng * 1664525u + 1013904223u;
    return m->rng >> 8;
}

static src *add(model *m, const char *name, st_dtype dt, int n_dims, const uint64_t *shape)
{
    src *t = &m->t[m->n++];
    size_t n = st_dtype_size(dt);

    ck_assert_int_le(m->n, MAX_T);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->dt = dt;
    t->n_dims = n_dims;
    for (int d = 0; d < n_dims; d++) {
        t->shape[d] = shape[d];
        n *= (size_t)shape[d];
    }
    t->nbytes = n;
    t->data = malloc(n ? n : 1);
    for (size_t i = 0; i < n; i++)
        t->data[i] = (uint8_t)next(m);
    return t;
}

static void fill_f16(model *m, src *t, float lo, float hi)
{
    for (size_t i = 0; i < t->nbytes / 2; i++) {
        float f = lo + (hi - lo) * (float)(next(m) & 0xffff) / 65535.0f;
        quant_from_f32(t->data + 2 * i, ST_F16, &f, 1);
    }
}

/* X.weight (random codes), X.scales, X.biases shaped for `logical` [..., out, in]. */
static void add_quant(model *m, const char *module, int n_dims, const uint64_t *logical, const char *mode, int bits,
                      int group)
{
    uint64_t q[3], sc[3];
    char name[128];
    src *t;

    for (int d = 0; d < n_dims - 1; d++)
        q[d] = sc[d] = logical[d];
    q[n_dims - 1] = logical[n_dims - 1] * (uint64_t)bits / 32;
    sc[n_dims - 1] = logical[n_dims - 1] / (uint64_t)group;
    snprintf(name, sizeof name, "%s.weight", module);
    add(m, name, ST_U32, n_dims, q);
    snprintf(name, sizeof name, "%s.scales", module);
    if (strcmp(mode, "affine") == 0) {
        fill_f16(m, add(m, name, ST_F16, n_dims, sc), -0.05f, 0.05f);
        snprintf(name, sizeof name, "%s.biases", module);
        fill_f16(m, add(m, name, ST_F16, n_dims, sc), -1.0f, 1.0f);
    } else {
        t = add(m, name, ST_U8, n_dims, sc);
        for (size_t i = 0; i < t->nbytes; i++)   /* E8M0 near 1, or positive finite E4M3 */
            t->data[i] = strcmp(mode, "nvfp4") == 0 ? (uint8_t)(0x30 + t->data[i] % 0x20) : (uint8_t)(120 + t->data[i] % 10);
    }
}

static int sink_file(void *ctx, const void *buf, size_t len) { return fwrite(buf, 1, len, ctx) == len ? 0 : MS_EIO; }

static void write_shard(const char *path, const model *m, int shard)
{
    st_writer *w;
    FILE *f = fopen(path, "wb");

    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(st_writer_new(&w), 0);
    for (int i = 0; i < m->n; i++)
        if (m->t[i].shard == shard)
            ck_assert_int_eq(st_writer_add(w, m->t[i].name, m->t[i].dt, m->t[i].n_dims, m->t[i].shape, m->t[i].data,
                                           m->t[i].nbytes), 0);
    ck_assert_int_eq(st_writer_emit(w, sink_file, f), 0);
    st_writer_free(w);
    fclose(f);
}

/* config.json (`quant`, a JSON object text, or NULL for a float model), shards, tokenizer. */
static char *write_dir(const char *name, const model *m, const char *quant, int n_shards)
{
    char *d = ms_path_join(dir, name), *p, cfg[4096];
    json_t *idx = json_object(), *wm = json_object();

    ck_assert_int_eq(ms_mkdir_p(d, 0755), 0);
    snprintf(cfg, sizeof cfg, "{\"model_type\": \"llama\", \"hidden_size\": 64, \"num_hidden_layers\": 2, "
             "\"num_attention_heads\": 4, \"vocab_size\": 64%s%s}", quant ? ", \"quantization\": " : "", quant ? quant : "");
    free(fixture_write(d, "config.json", cfg, strlen(cfg)));
    free(fixture_write(d, "tokenizer.json", "{\"model\": {}}", 13));
    if (n_shards <= 1) {
        p = ms_path_join(d, "model.safetensors");
        write_shard(p, m, 0);
        free(p);
    } else {
        for (int k = 0; k < n_shards; k++) {
            char file[64];
            snprintf(file, sizeof file, "model-%05d-of-%05d.safetensors", k + 1, n_shards);
            p = ms_path_join(d, file);
            write_shard(p, m, k);
            free(p);
            for (int i = 0; i < m->n; i++)
                if (m->t[i].shard == k)
                    json_object_set_new(wm, m->t[i].name, json_string(file));
        }
        json_object_set_new(idx, "weight_map", wm);
        wm = NULL;
        p = ms_path_join(d, "model.safetensors.index.json");
        ck_assert_int_eq(json_dump_file(idx, p, 0), 0);
        free(p);
    }
    json_decref(wm);
    json_decref(idx);
    return d;
}

static void model_free(model *m)
{
    for (int i = 0; i < m->n; i++)
        free(m->t[i].data);
    m->n = 0;
}

static const src *src_find(const model *m, const char *name)
{
    for (int i = 0; i < m->n; i++)
        if (strcmp(m->t[i].name, name) == 0)
            return &m->t[i];
    return NULL;
}

/* ---------------------------------------------------------------- reading the store back */

typedef struct stored {
    blob_view v[MAX_T];
    st_file *f[MAX_T];
    char layer[MAX_T][128];
    int n;
} stored;

static void stored_open(stored *st, const char *model_name_text)
{
    model_name name;
    manifest *man;
    ms_digest digest;

    memset(st, 0, sizeof *st);
    ck_assert_int_eq(name_parse(&name, model_name_text), 0);
    ck_assert_int_eq(store_name_resolve(s, &name, digest), 0);
    ck_assert_int_eq(store_manifest_load(s, digest, &man), 0);
    for (size_t i = 0; i < man->n_layers; i++) {
        if (strcmp(man->layers[i].media_type, MT_TENSOR) != 0)
            continue;
        ck_assert_int_eq(blob_open(&st->v[st->n], home, man->layers[i].digest), 0);
        ck_assert_int_eq(st_parse(&st->f[st->n], st->v[st->n].data, st->v[st->n].size, 0, 0, "blob"), 0);
        snprintf(st->layer[st->n], sizeof st->layer[0], "%s", man->layers[i].name);
        st->n++;
    }
    manifest_free(man);
}

static void stored_close(stored *st)
{
    for (int i = 0; i < st->n; i++) {
        st_free(st->f[i]);
        blob_close(&st->v[i]);
    }
}

static int stored_find(const stored *st, const char *tensor)
{
    for (int i = 0; i < st->n; i++)
        if (st_find(st->f[i], tensor))
            return i;
    return -1;
}

/* Metadata `key` for `tensor`: "key:<tensor>" in packs, else "key". */
static const char *meta(const stored *st, int b, const char *key, const char *tensor)
{
    char k[256];
    snprintf(k, sizeof k, "%s:%s", key, tensor);
    return st_meta(st->f[b], k) ? st_meta(st->f[b], k) : st_meta(st->f[b], key);
}

/* The source triplet dequantized by the test's own arithmetic. */
static float ref_value(const src *w, const src *sc, const src *bi, const char *type, int group, size_t row,
                       size_t col, uint64_t in)
{
    const quant_format *f = quant_format_find(type);
    size_t i = row * (size_t)in + col, g = row * (size_t)(in / (uint64_t)group) + col / (size_t)group;
    uint32_t q = 0;
    float s, b = 0;

    for (int k = 0; k < f->bits; k++) {   /* code at bit col * bits of the row */
        size_t bit = i * (size_t)f->bits + (size_t)k;
        q |= (uint32_t)((w->data[bit / 8] >> (bit % 8)) & 1) << k;
    }
    if (f->mode == QUANT_AFFINE) {
        quant_to_f32(&s, sc->data + 2 * g, ST_F16, 1);
        quant_to_f32(&b, bi->data + 2 * g, ST_F16, 1);
        return s * (float)q + b;
    }
    s = f->mode == QUANT_NVFP4 ? quant_e4m3_to_f32(sc->data[g]) : ldexpf(1.0f, sc->data[g] - 127);
    if (f->bits == 8)
        return quant_e4m3_to_f32((uint8_t)q) * s;
    {
        static const float e2m1[8] = { 0, 0.5f, 1, 1.5f, 2, 3, 4, 6 };
        return (q & 8 ? -1.0f : 1.0f) * e2m1[q & 7] * s;
    }
}

/* The store's name of an MLX tensor: mlx-lm's stacked experts (switch_mlp) are the store's
 * mlp.experts, as a GGUF import names them (import_moe_name). */
static const char *store_name(char *buf, size_t len, const char *name)
{
    const char *sw = strstr(name, "mlp.switch_mlp.");

    if (sw)
        snprintf(buf, len, "%.*smlp.experts.%s", (int)(sw - name), name, sw + 15);
    else
        snprintf(buf, len, "%s", name);
    return buf;
}

/* Every quantized tensor of `m` is stored combined and dequantizes to the source's values;
 * every float tensor is stored byte for byte. Returns the number of quantized tensors. */
static int check_model(const model *m, const stored *st)
{
    int nq = 0;

    for (int i = 0; i < m->n; i++) {
        const src *t = &m->t[i];
        size_t len = strlen(t->name);
        char base[128], nm[192], sn[160];
        const src *sc, *bi;
        const st_tensor *w, *ss, *bb;
        uint64_t rows = 1, in;
        const char *qt;
        int b, group;
        float *out;

        if (len > 7 && (!strcmp(t->name + len - 7, ".scales") || !strcmp(t->name + len - 7, ".biases")))
            continue;
        b = stored_find(st, store_name(sn, sizeof sn, t->name));
        ck_assert_msg(b >= 0, "tensor %s not stored", t->name);
        w = st_find(st->f[b], sn);
        snprintf(base, sizeof base, "%.*s", (int)len - 7, t->name);
        snprintf(nm, sizeof nm, "%s.scales", base);
        if (!(sc = src_find(m, nm))) {
            ck_assert_uint_eq(w->nbytes, t->nbytes);
            ck_assert_int_eq(memcmp(w->data, t->data, t->nbytes), 0);
            continue;
        }
        snprintf(nm, sizeof nm, "%s.biases", base);
        bi = src_find(m, nm);
        qt = meta(st, b, "quant_type", sn);
        ck_assert_ptr_nonnull(qt);
        group = atoi(meta(st, b, "group_size", sn));
        snprintf(nm, sizeof nm, "%s.scale", sn);
        ss = st_find(st->f[b], nm);
        snprintf(nm, sizeof nm, "%s.bias", sn);
        bb = st_find(st->f[b], nm);
        ck_assert_ptr_nonnull(ss);
        ck_assert_int_eq(bb != NULL, bi != NULL);
        in = w->shape[w->n_dims - 1] * 32 / (uint64_t)quant_format_find(qt)->bits;
        for (int d = 0; d < w->n_dims - 1; d++)
            rows *= w->shape[d];
        out = malloc((size_t)in * sizeof *out);
        for (uint64_t r = 0; r < rows; r++) {
            size_t ng = (size_t)(in / (uint64_t)group), ssz = st_dtype_size(ss->dtype);
            ck_assert_int_eq(quant_dequantize_row(qt, w->data + r * w->shape[w->n_dims - 1] * 4, ss->data + r * ng * ssz,
                                                  bb ? bb->data + r * ng * ssz : NULL, ss->dtype, group, (size_t)in, out), 0);
            for (uint64_t c = 0; c < in; c++) {
                float want = ref_value(t, sc, bi, qt, group, (size_t)r, (size_t)c, in);
                ck_assert_msg(out[c] == want || (isnan(out[c]) && isnan(want)), "%s [%llu, %llu]: %g != %g", t->name,
                              (unsigned long long)r, (unsigned long long)c, (double)out[c], (double)want);
            }
        }
        free(out);
        nq++;
    }
    return nq;
}

static int do_import(const char *path, const char *name_text, const import_opts *o)
{
    model_name name;
    ms_digest digest;
    import_opts q = { .quiet = 1 };

    ck_assert_int_eq(name_parse(&name, name_text), 0);
    return import_path(s, path, &name, o ? o : &q, digest);
}

/* ---------------------------------------------------------------- tests */

static const uint64_t emb[2] = { 64, 64 }, sq[2] = { 64, 64 }, kv[2] = { 32, 64 }, up[2] = { 128, 64 },
                      down[2] = { 64, 128 }, vec[1] = { 64 };

/* Every affine bit width, several group sizes (overrides), a module left unquantized (false). */
static void llama_affine(model *m)
{
    add_quant(m, "model.embed_tokens", 2, emb, "affine", 4, 32);
    fill_f16(m, add(m, "model.norm.weight", ST_F16, 1, vec), 0.5f, 1.5f);
    add(m, "lm_head.weight", ST_F16, 2, emb);   /* "lm_head": false */
    for (int l = 0; l < 2; l++) {
        char p[128];
        snprintf(p, sizeof p, "model.layers.%d.self_attn.q_proj", l);
        add_quant(m, p, 2, sq, "affine", 2, 64);
        snprintf(p, sizeof p, "model.layers.%d.self_attn.k_proj", l);
        add_quant(m, p, 2, kv, "affine", 3, 32);
        snprintf(p, sizeof p, "model.layers.%d.self_attn.v_proj", l);
        add_quant(m, p, 2, kv, "affine", 5, 32);
        snprintf(p, sizeof p, "model.layers.%d.self_attn.o_proj", l);
        add_quant(m, p, 2, sq, "affine", 6, 64);
        snprintf(p, sizeof p, "model.layers.%d.mlp.up_proj", l);
        add_quant(m, p, 2, up, "affine", 8, 64);
        snprintf(p, sizeof p, "model.layers.%d.mlp.down_proj", l);
        add_quant(m, p, 2, down, "affine", 4, 128);
        snprintf(p, sizeof p, "model.layers.%d.input_layernorm.weight", l);
        fill_f16(m, add(m, p, ST_F16, 1, vec), 0.5f, 1.5f);
    }
}

static const char llama_affine_q[] =
    "{\"group_size\": 32, \"bits\": 4, \"lm_head\": false, "
    "\"model.layers.0.self_attn.q_proj\": {\"group_size\": 64, \"bits\": 2}, \"model.layers.1.self_attn.q_proj\": {\"group_size\": 64, \"bits\": 2}, "
    "\"model.layers.0.self_attn.k_proj\": {\"bits\": 3}, \"model.layers.1.self_attn.k_proj\": {\"bits\": 3}, "
    "\"model.layers.0.self_attn.v_proj\": {\"bits\": 5}, \"model.layers.1.self_attn.v_proj\": {\"bits\": 5}, "
    "\"model.layers.0.self_attn.o_proj\": {\"group_size\": 64, \"bits\": 6}, \"model.layers.1.self_attn.o_proj\": {\"group_size\": 64, \"bits\": 6}, "
    "\"model.layers.0.mlp.up_proj\": {\"group_size\": 64, \"bits\": 8}, \"model.layers.1.mlp.up_proj\": {\"group_size\": 64, \"bits\": 8}, "
    "\"model.layers.0.mlp.down_proj\": {\"group_size\": 128}, \"model.layers.1.mlp.down_proj\": {\"group_size\": 128}}";

START_TEST(mlx_affine_directory_dequantizes_to_the_source_values)
{
    model m = { .rng = 7 };
    stored st;
    char *d;

    llama_affine(&m);
    for (int i = 0; i < m.n; i++)
        m.t[i].shard = i % 3;
    d = write_dir("affine", &m, llama_affine_q, 3);
    ck_assert_msg(do_import(d, "affine", NULL) == 0, "%s", ms_err_msg());
    stored_open(&st, "affine");
    ck_assert_int_eq(check_model(&m, &st), 13);
    /* one blob per tensor: 13 quantized triplets, 4 norms, lm_head */
    ck_assert_int_eq(st.n, 13 + 3 + 1);
    {
        int b = stored_find(&st, "model.layers.1.self_attn.k_proj.weight");
        ck_assert_str_eq(st_meta(st.f[b], "quant_type"), "int3");
        ck_assert_str_eq(st_meta(st.f[b], "group_size"), "32");
        ck_assert_str_eq(st_meta(st.f[b], "logical_shape"), "[32, 64]");
        ck_assert_str_eq(st.layer[b], "model.layers.1.self_attn.k_proj.weight");
    }
    stored_close(&st);
    model_free(&m);
    free(d);
}
END_TEST

static const char *const fp_modes[] = { "mxfp4", "nvfp4", "mxfp8" };

START_TEST(mlx_fp_modes_import_with_their_scales)
{
    const char *mode = fp_modes[_i];
    const quant_format *f = quant_format_find(mode);
    model m = { .rng = 11 };
    char q[128];
    stored st;
    char *d;

    add_quant(&m, "model.embed_tokens", 2, emb, mode, f->bits, f->group_size);
    add_quant(&m, "model.layers.0.mlp.down_proj", 2, down, mode, f->bits, f->group_size);
    fill_f16(&m, add(&m, "model.norm.weight", ST_F16, 1, vec), 0.5f, 1.5f);
    snprintf(q, sizeof q, "{\"group_size\": %d, \"bits\": %d, \"mode\": \"%s\"}", f->group_size, f->bits, mode);
    d = write_dir(mode, &m, q, 1);
    ck_assert_msg(do_import(d, mode, NULL) == 0, "%s", ms_err_msg());
    stored_open(&st, mode);
    ck_assert_int_eq(check_model(&m, &st), 2);
    {
        int b = stored_find(&st, "model.embed_tokens.weight");
        const st_tensor *sc = st_find(st.f[b], "model.embed_tokens.weight.scale");
        ck_assert_str_eq(st_meta(st.f[b], "quant_type"), mode);
        ck_assert_int_eq(sc->dtype, f->mode == QUANT_NVFP4 ? ST_F8_E4M3 : ST_U8);
        ck_assert_ptr_null(st_find(st.f[b], "model.embed_tokens.weight.bias"));
    }
    stored_close(&st);
    model_free(&m);
    free(d);
}
END_TEST

/* Stacked switch_mlp (the store's mlp.experts, as a GGUF import names them) and per-expert
 * modules: one pack per layer and kind. */
START_TEST(mlx_moe_experts_pack_one_blob_per_layer)
{
    model m = { .rng = 5 };
    const uint64_t sw_up[3] = { 4, 128, 64 }, sw_down[3] = { 4, 64, 128 }, gate[2] = { 4, 64 };
    stored st;
    char *d, p[128];

    for (int l = 0; l < 2; l++) {
        snprintf(p, sizeof p, "model.layers.%d.mlp.gate", l);
        add_quant(&m, p, 2, gate, "affine", 8, 64);
        snprintf(p, sizeof p, "model.layers.%d.mlp.switch_mlp.up_proj", l);
        add_quant(&m, p, 3, sw_up, "affine", 4, 32);
        snprintf(p, sizeof p, "model.layers.%d.mlp.switch_mlp.down_proj", l);
        add_quant(&m, p, 3, sw_down, "affine", 4, 32);
    }
    for (int e = 0; e < 3; e++) {
        snprintf(p, sizeof p, "model.layers.2.mlp.experts.%d.up_proj", e);
        add_quant(&m, p, 2, up, "affine", 4, 32);
    }
    add_quant(&m, "model.layers.2.mlp.shared_experts.up_proj", 2, up, "affine", 4, 32);
    add(&m, "model.layers.2.mlp.experts.e_score_correction_bias", ST_F32, 1, gate);
    d = write_dir("moe", &m, "{\"group_size\": 32, \"bits\": 4, \"model.layers.0.mlp.gate\": {\"group_size\": 64, \"bits\": 8}, "
                  "\"model.layers.1.mlp.gate\": {\"group_size\": 64, \"bits\": 8}}", 1);
    ck_assert_msg(do_import(d, "moe", NULL) == 0, "%s", ms_err_msg());
    stored_open(&st, "moe");
    ck_assert_int_eq(check_model(&m, &st), 2 * 3 + 3 + 1);
    /* 2 gates, 2 switch packs, layer 2's experts pack and shared_experts pack */
    ck_assert_int_eq(st.n, 6);
    {
        int b = stored_find(&st, "model.layers.1.mlp.experts.down_proj.weight");
        ck_assert_str_eq(st.layer[b], "model.layers.1.mlp.experts");
        ck_assert_int_eq((int)st_count(st.f[b]), 6);
        ck_assert_str_eq(st_meta(st.f[b], "quant_type:model.layers.1.mlp.experts.down_proj.weight"), "int4");
        ck_assert_str_eq(st_meta(st.f[b], "logical_shape:model.layers.1.mlp.experts.down_proj.weight"), "[4, 64, 128]");
        ck_assert_ptr_null(st_meta(st.f[b], "quant_type"));
        b = stored_find(&st, "model.layers.2.mlp.experts.2.up_proj.weight.bias");
        ck_assert_str_eq(st.layer[b], "model.layers.2.mlp.experts");
        ck_assert_int_eq((int)st_count(st.f[b]), 3 * 3 + 1);
        ck_assert_int_eq(b, stored_find(&st, "model.layers.2.mlp.experts.e_score_correction_bias"));
        b = stored_find(&st, "model.layers.2.mlp.shared_experts.up_proj.weight");
        ck_assert_str_eq(st.layer[b], "model.layers.2.mlp.shared_experts");
        b = stored_find(&st, "model.layers.0.mlp.gate.weight");
        ck_assert_str_eq(st_meta(st.f[b], "quant_type"), "int8");
    }
    stored_close(&st);
    model_free(&m);
    free(d);
}
END_TEST

/* Each variant of a small MLX directory, and the refusal it must produce. */
enum { V_CONFIG, V_OMIT, V_INDEX, V_DUP, V_QUANTIZE };
static const struct { int kind; const char *arg; const char *expect; } bad[] = {
    { V_CONFIG, "{\"group_size\": 32, \"bits\": 7}", "quantization.bits: 7 is not one of 2, 3, 4, 5, 6, 8" },
    { V_CONFIG, "{\"group_size\": 48, \"bits\": 4}", "quantization.group_size: 48 is not allowed" },
    { V_CONFIG, "{\"group_size\": 32}", "quantization.bits: missing" },
    { V_CONFIG, "{\"bits\": 4}", "quantization.group_size: missing" },
    { V_CONFIG, "{\"group_size\": \"32\", \"bits\": 4}", "quantization.group_size: not an integer" },
    { V_CONFIG, "[4]", "quantization: not an object" },
    { V_CONFIG, "{\"group_size\": 64, \"bits\": 4}", "'model.embed_tokens.scales': shape [64, 2], expected the weight's leading dims and 1 scales" },
    { V_CONFIG, "{\"group_size\": 64, \"bits\": 8}", "group_size 64 does not divide the input dimension 32" },
    { V_CONFIG, "{\"group_size\": 32, \"bits\": 4, \"model.layers.0.mlp.down_proj\": {\"bits\": 9}}",
      "quantization.model.layers.0.mlp.down_proj.bits: 9 is not one of" },
    { V_CONFIG, "{\"group_size\": 32, \"bits\": 4, \"model.embed_tokens\": false}", "model.embed_tokens is false" },
    { V_CONFIG, "{\"group_size\": 32, \"bits\": 8, \"mode\": \"mxfp4\"}", "quantization.bits: 8, mode mxfp4 has 4" },
    { V_CONFIG, "{\"group_size\": 32, \"bits\": 4, \"mode\": \"nf4\"}", "quantization.mode: 'nf4' is not affine" },
    { V_CONFIG, "{\"quant_method\": \"gptq\", \"bits\": 4}", "quant_method: 'gptq' is not supported" },
    { V_OMIT, "model.embed_tokens.scales", "model.embed_tokens.weight' holds packed codes (U32) but its scales tensor is missing" },
    { V_OMIT, "model.embed_tokens.weight", "has no 'model.embed_tokens.weight' beside it" },
    { V_OMIT, "model.layers.0.mlp.down_proj.biases", "needs 'model.layers.0.mlp.down_proj.biases', which is missing" },
    { V_INDEX, NULL, "shard named by model.safetensors.index.json is missing" },
    { V_DUP, NULL, "tensor 'model.norm.weight' appears in both" },
    { V_QUANTIZE, "int4", "--quantize int4: the model is already quantized" },
};

START_TEST(mlx_bad_input_is_refused_and_stores_nothing)
{
    model m = { .rng = 3 };
    char *d = NULL, *p;
    int before, rc, shards = 1;
    import_opts o = { .quiet = 1 };
    const char *q = "{\"group_size\": 32, \"bits\": 4}";

    add_quant(&m, "model.embed_tokens", 2, emb, "affine", 4, 32);
    add_quant(&m, "model.layers.0.mlp.down_proj", 2, down, "affine", 4, 32);
    fill_f16(&m, add(&m, "model.norm.weight", ST_F16, 1, vec), 0.5f, 1.5f);
    if (bad[_i].kind == V_CONFIG)
        q = bad[_i].arg;
    if (bad[_i].kind == V_OMIT)
        for (int i = 0; i < m.n; i++)
            if (strcmp(m.t[i].name, bad[_i].arg) == 0)
                m.t[i].shard = 99;
    if (bad[_i].kind == V_INDEX || bad[_i].kind == V_DUP) {
        shards = 2;
        for (int i = 0; i < m.n; i++)
            m.t[i].shard = i % 2;
    }
    if (bad[_i].kind == V_DUP) {   /* the norm written in both shards; the index names one */
        src *t = add(&m, "model.norm.weight", ST_F16, 1, vec);
        t->shard = 1 - src_find(&m, "model.norm.weight")->shard;
    }
    if (bad[_i].kind == V_QUANTIZE)
        o.quantize = bad[_i].arg;
    d = write_dir("bad", &m, q, shards);
    if (bad[_i].kind == V_INDEX) {
        p = ms_path_join(d, "model-00002-of-00002.safetensors");
        ck_assert_int_eq(unlink(p), 0);
        free(p);
    }
    before = fixture_blob_count(home);
    rc = do_import(d, "bad", &o);
    ck_assert_int_lt(rc, 0);
    ck_assert_msg(strstr(ms_err_msg(), bad[_i].expect), "'%s' lacks '%s'", ms_err_msg(), bad[_i].expect);
    {
        store_entry *list = NULL;
        size_t n = 9;
        ck_assert_int_eq(store_list(s, &list, &n), 0);
        ck_assert_uint_eq(n, 0);
        free(list);
    }
    ck_assert_int_eq(fixture_blob_count(home), before);   /* everything is checked before the first blob */
    model_free(&m);
    free(d);
}
END_TEST

/* --quantize on a float directory: quantized weights within the bound of each format, norms and
 * odd-sized tensors kept, the error recorded in the config blob. */
static const struct { const char *type; int group; st_dtype dt; } qcases[] = {
    { "int4", 0, ST_F32 }, { "int8", 128, ST_BF16 }, { "int2", 64, ST_F16 }, { "nvfp4", 0, ST_F32 },
    { "mxfp8", 0, ST_BF16 }, { "mxfp4", 32, ST_F16 },
};

START_TEST(quantize_float_directory_on_import)
{
    model m = { .rng = 9 };
    const quant_format *f = quant_format_find(qcases[_i].type);
    const uint64_t odd[2] = { 8, 40 };
    import_opts o = { .quiet = 1, .quantize = qcases[_i].type, .group_size = qcases[_i].group };
    int gexp = qcases[_i].group ? qcases[_i].group : f->mode != QUANT_AFFINE ? f->group_size : f->bits == 8 ? 64 : 32;
    int nq = 0;
    double max_abs = 0;
    stored st;
    char *d;

    add(&m, "model.embed_tokens.weight", qcases[_i].dt, 2, emb);
    add(&m, "model.layers.0.mlp.down_proj.weight", qcases[_i].dt, 2, down);
    add(&m, "model.layers.0.mlp.odd_proj.weight", qcases[_i].dt, 2, odd);
    add(&m, "model.norm.weight", qcases[_i].dt, 1, vec);
    for (int i = 0; i < m.n; i++) {   /* weights in [-1, 1] */
        src *t = &m.t[i];
        size_t n = t->nbytes / st_dtype_size(t->dt);
        for (size_t k = 0; k < n; k++) {
            float v = (float)(next(&m) & 0xffff) / 32768.0f - 1.0f;
            quant_from_f32(t->data + k * st_dtype_size(t->dt), t->dt, &v, 1);
        }
    }
    d = write_dir("float", &m, NULL, 1);
    ck_assert_msg(do_import(d, "float", &o) == 0, "%s", ms_err_msg());
    stored_open(&st, "float");
    ck_assert_int_eq(st.n, 4);
    for (int i = 0; i < m.n; i++) {
        const src *t = &m.t[i];
        int b = stored_find(&st, t->name);
        const st_tensor *w = st_find(st.f[b], t->name), *sc, *bi;
        char nm[160];
        uint64_t cols = t->shape[t->n_dims - 1];
        int group;
        float *x, *out;

        if (t->n_dims == 1 || cols % (uint64_t)gexp) {   /* kept as it was */
            ck_assert_int_eq(w->dtype, t->dt);
            ck_assert_int_eq(memcmp(w->data, t->data, t->nbytes), 0);
            ck_assert_ptr_null(st_meta(st.f[b], "quant_type"));
            continue;
        }
        ck_assert_str_eq(st_meta(st.f[b], "quant_type"), f->name);
        group = atoi(st_meta(st.f[b], "group_size"));
        ck_assert_int_eq(group, gexp);
        nq++;
        snprintf(nm, sizeof nm, "%s.scale", t->name);
        sc = st_find(st.f[b], nm);
        snprintf(nm, sizeof nm, "%s.bias", t->name);
        bi = st_find(st.f[b], nm);
        ck_assert_int_eq(sc->dtype, f->mode == QUANT_AFFINE ? t->dt : f->scale_dtype);
        x = malloc(cols * sizeof *x);
        out = malloc(cols * sizeof *out);
        for (uint64_t r = 0; r < t->shape[0]; r++) {
            size_t ng = (size_t)cols / (size_t)group, ssz = st_dtype_size(sc->dtype);
            ck_assert_int_eq(quant_to_f32(x, t->data + r * cols * st_dtype_size(t->dt), t->dt, (size_t)cols), 0);
            ck_assert_int_eq(quant_dequantize_row(f->name, w->data + r * cols * (uint64_t)f->bits / 8, sc->data + r * ng * ssz,
                                                  bi ? bi->data + r * ng * ssz : NULL, sc->dtype, group, (size_t)cols, out), 0);
            for (uint64_t c = 0; c < cols; c++) {
                float err = fabsf(x[c] - out[c]), bound;
                if (f->mode == QUANT_AFFINE) {   /* |scale| (clipped far end) plus the scale's rounding */
                    float s1, b1;
                    quant_to_f32(&s1, sc->data + (r * ng + c / (size_t)group) * ssz, sc->dtype, 1);
                    quant_to_f32(&b1, bi->data + (r * ng + c / (size_t)group) * ssz, sc->dtype, 1);
                    bound = fabsf(s1) * 1.01f + (t->dt == ST_BF16 ? 0.02f : t->dt == ST_F16 ? 0.002f : 1e-6f);
                } else {
                    bound = f->bits == 4 ? 0.5f : 0.13f;
                }
                ck_assert_msg(err <= bound, "%s %s [%llu, %llu]: err %g > %g", f->name, t->name, (unsigned long long)r,
                              (unsigned long long)c, (double)err, (double)bound);
                if (err > max_abs)
                    max_abs = err;
            }
        }
        free(x);
        free(out);
    }
    stored_close(&st);
    {   /* the config blob reports the same max error */
        model_name name;
        manifest *man;
        blob_view v;
        json_t *c, *e;
        ms_digest digest;
        ck_assert_int_eq(name_parse(&name, "float"), 0);
        ck_assert_int_eq(store_name_resolve(s, &name, digest), 0);
        ck_assert_int_eq(store_manifest_load(s, digest, &man), 0);
        ck_assert_int_eq(blob_open(&v, home, man->config.digest), 0);
        c = json_loadb((const char *)v.data, v.size, 0, NULL);
        e = json_object_get(c, "quantization_error");
        ck_assert_ptr_nonnull(e);
        ck_assert_double_eq_tol(json_number_value(json_object_get(e, "max_abs")), max_abs, 1e-6);
        ck_assert_double_gt(json_number_value(json_object_get(e, "rms_rel")), 0.0);
        ck_assert_double_lt(json_number_value(json_object_get(e, "rms_rel")), f->bits <= 2 ? 0.6 : 0.2);
        ck_assert_int_eq(json_integer_value(json_object_get(e, "n_tensors")), nq);
        ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(c, "quantization"), f->name)), nq);
        ck_assert_int_ge(nq, 1);
        json_decref(c);
        blob_close(&v);
        manifest_free(man);
    }
    model_free(&m);
    free(d);
}
END_TEST

static const struct { const char *type; int group; const char *expect; } qbad[] = {
    { "int7", 0, "--quantize 'int7': not a quantization type" },
    { "Q4_0", 0, "--quantize 'Q4_0': not a quantization type" },
    { "int4", 48, "--group-size 48: int4 needs 32, 64 or 128" },
    { "nvfp4", 32, "--group-size 32: nvfp4 has a fixed group size of 16" },
};

START_TEST(quantize_refuses_unknown_types_and_groups)
{
    model m = { .rng = 2 };
    import_opts o = { .quiet = 1, .quantize = qbad[_i].type, .group_size = qbad[_i].group };
    char *d;
    int before;

    add(&m, "model.embed_tokens.weight", ST_F32, 2, emb);
    d = write_dir("float", &m, NULL, 1);
    before = fixture_blob_count(home);
    ck_assert_int_eq(do_import(d, "float", &o), MS_EINVALID);
    ck_assert_msg(strstr(ms_err_msg(), qbad[_i].expect), "'%s' lacks '%s'", ms_err_msg(), qbad[_i].expect);
    ck_assert_int_eq(fixture_blob_count(home), before);
    model_free(&m);
    free(d);
}
END_TEST

/* Real MLX or Hugging Face directories, when the machine has any: each must import. */
START_TEST(real_model_directories_import)
{
    char *models = fixture_models_dir();
    int found = 0;
    DIR *dd;
    struct dirent *e;

    if (!models || !(dd = opendir(models))) {
        fprintf(stderr, "test_mlx: no model folder ($MSTORE_TEST_MODELS unset and no shared/models): "
                        "no real MLX or HF directory to import\n");
        free(models);
        return;
    }
    while ((e = readdir(dd)) != NULL) {
        char *sub = ms_path_join(models, e->d_name), *cfg = sub ? ms_path_join(sub, "config.json") : NULL, nm[64];
        if (e->d_name[0] != '.' && cfg && ms_is_file(cfg)) {
            snprintf(nm, sizeof nm, "real%d", found++);
            ck_assert_msg(do_import(sub, nm, NULL) == 0, "%s: %s", sub, ms_err_msg());
        }
        free(cfg);
        free(sub);
    }
    closedir(dd);
    if (!found)
        fprintf(stderr, "test_mlx: %s holds no MLX or HF model directory (none today): nothing to import\n", models);
    free(models);
}
END_TEST

int main(void)
{
    Suite *su = suite_create("mlx");
    TCase *tc = tcase_create("mlx");
    SRunner *sr;
    int failed;

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, mlx_affine_directory_dequantizes_to_the_source_values);
    tcase_add_loop_test(tc, mlx_fp_modes_import_with_their_scales, 0, 3);
    tcase_add_test(tc, mlx_moe_experts_pack_one_blob_per_layer);
    tcase_add_loop_test(tc, mlx_bad_input_is_refused_and_stores_nothing, 0, (int)(sizeof bad / sizeof bad[0]));
    tcase_add_loop_test(tc, quantize_float_directory_on_import, 0, (int)(sizeof qcases / sizeof qcases[0]));
    tcase_add_loop_test(tc, quantize_refuses_unknown_types_and_groups, 0, (int)(sizeof qbad / sizeof qbad[0]));
    tcase_add_test(tc, real_model_directories_import);
    suite_add_tcase(su, tc);
    sr = srunner_create(su);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
