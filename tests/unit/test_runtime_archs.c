/* test_runtime_archs.c: the decoders past llama / qwen: mixtures of experts (Mixtral, Qwen3-MoE,
 * Qwen2-MoE with its shared expert) and their backend ops.
 *
 * Each model is a tiny synthetic GGUF written by tests/reference/make_synthetic_arch.py (random
 * weights, 8 experts with top-2) and judged against tests/reference/ref_forward.py, the float64
 * forward written from each model's published definition, run here on the same file: first-step
 * logits within 1e-4 relative (F32; 1e-2 for Q8_0, the runtime's tolerance for quantized types)
 * and 32 greedy tokens, on prompts of 18 and 45 tokens; from the GGUF file and from the store
 * after a GGUF import (expert packs, one blob per layer). */
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "cpu/cpu.h"
#include "helpers/fixture.h"
#include "runtime/runtime.h"
#include "import/import.h"

static const char *src_dir(void)
{
    return getenv("MSTORE_SRC") ? getenv("MSTORE_SRC") : ".";
}

#define P2 "1,359,329,421,417,411,360,265,284,411,303,299,373,397,431,411,410,293"
#define P3                                                                                                           \
    "1,410,448,420,275,411,261,410,449,414,354,261,430,408,410,447,442,272,420,287,261,399,278,289,428,282,420,287," \
    "427,413,263,415,417,402,263,290,421,297,309,329,259,420,379,429,294,266"

/* max_i |got[i] - ref[i]| / max_i |ref[i]| */
static double rel_err(const float *got, json_t *ref)
{
    double num = 0, den = 0;

    for (size_t i = 0; i < json_array_size(ref); i++) {
        double r = json_number_value(json_array_get(ref, i));
        num = fmax(num, fabs(got[i] - r));
        den = fmax(den, fabs(r));
    }
    return num / den;
}

/* Write the synthetic model and its float64 reference into dir; the reference JSON, or NULL
 * with a skip message when python3 + numpy or the shared vocab are missing. */
static json_t *make_model_ref(const char *dir, const char *arch, const char *dtype, const char *flags,
                              const char *ref_flags, char **path_out)
{
    char *models = fixture_models_dir(), *out = ms_strdup_printf("%s/%s-%s.gguf", dir, arch, dtype);
    char *ref = ms_strdup_printf("%s/%s-%s.json", dir, arch, dtype), *cmd;
    json_error_t e;
    json_t *j = NULL;

    *path_out = NULL;
    if (!models) {
        printf("skipped: shared models folder not found (the vocab comes from stories260K.gguf)\n");
        goto done;
    }
    cmd = ms_strdup_printf("/usr/bin/python3 '%s/tests/reference/make_synthetic_arch.py' --arch %s --dtype %s %s "
                           "--vocab '%s/stories260K/stories260K.gguf' -o '%s' && /usr/bin/python3 "
                           "'%s/tests/reference/ref_forward.py' '%s' %s --prompt " P2 " --prompt " P3
                           " --steps 32 --logits > '%s'",
                           src_dir(), arch, dtype, flags, models, out, src_dir(), out, ref_flags, ref);
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
    free(models);
    free(out);
    free(ref);
    return j;
}

static json_t *make_model(const char *dir, const char *arch, const char *dtype, const char *flags, char **path_out)
{
    return make_model_ref(dir, arch, dtype, flags, "", path_out);
}

/* Import `src` (a GGUF file or an HF directory) into st as `nm`, quantized when `quantize` is
 * set, and open it from the store. */
static runtime_model *import_open(store *st, const char *src, const char *nm, const char *quantize,
                                  const runtime_opts *o)
{
    import_opts io = {.quiet = 1, .quantize = quantize};
    runtime_model *m;
    model_name name;
    ms_digest digest;

    ck_assert_int_eq(name_parse(&name, nm), 0);
    ck_assert_msg(import_path(st, src, &name, &io, digest) == 0, "%s", ms_err_msg());
    ck_assert_msg(runtime_model_open_store(&m, st, &name, o) == 0, "%s", ms_err_msg());
    return m;
}

/* Every prompt of `ref`: first-step logits within tol, then `need` greedy tokens equal (0: all,
 * -1: none asked). */
static void check_model(runtime_model *m, json_t *ref, const char *what, double tol, int need)
{
    json_t *ps = json_object_get(ref, "prompts");
    int V = runtime_model_config(m)->vocab_size;
    float *lg = malloc(sizeof *lg * V);

    for (size_t i = 0; i < json_array_size(ps); i++) {
        json_t *p = json_array_get(ps, i), *toks = json_object_get(p, "tokens"), *greedy = json_object_get(p, "greedy");
        int n = (int)json_array_size(toks), agree = 0;
        int32_t *ids = malloc(sizeof *ids * n), next;
        double rel;

        for (int t = 0; t < n; t++)
            ids[t] = (int32_t)json_integer_value(json_array_get(toks, t));
        runtime_model_reset(m);
        ck_assert_msg(runtime_forward(m, ids, n, lg) == 0, "%s", ms_err_msg());
        rel = rel_err(lg, json_object_get(p, "logits"));
        for (size_t s = 0; s < json_array_size(greedy); s++) {
            next = fixture_argmax(lg, V);
            if (next != json_integer_value(json_array_get(greedy, s)))
                break;
            agree++;
            ck_assert_int_eq(runtime_forward(m, &next, 1, lg), 0);
        }
        printf("measured: %s (%s): prompt of %d tokens: first-step logits rel %.3g, %d/%zu greedy\n", what,
               cpu_path_name(), n, rel, agree, json_array_size(greedy));
        ck_assert_msg(rel <= tol, "%s prompt %zu: logits rel %g > %g", what, i, rel, tol);
        ck_assert_int_ge(agree, need ? need : (int)json_array_size(greedy));
        free(ids);
    }
    free(lg);
}

/* Layer 1's stacked expert tensor `kind` ("down_proj"): one [8][rows][cols] tensor, of type
 * `type` (-1: any), as every form of the synthetic MoE models stores it. */
static void expect_expert_pack(runtime_model *m, const char *kind, int type)
{
    char name[128];
    const backend_tensor *t;

    snprintf(name, sizeof name, "model.layers.1.mlp.experts.%s.weight", kind);
    t = runtime_weights_find(runtime_model_weights(m), name);
    ck_assert_msg(t != NULL, "%s not found", name);
    if (type >= 0)
        ck_assert_int_eq(t->type, type);
    ck_assert_int_eq(t->n_dims, 3);
    ck_assert_uint_eq(t->shape[0], 8);
}

/* Two models of the same weights in two forms: first-step logits within 1e-4 relative on every
 * prompt of `ref`. */
static void check_same_logits(runtime_model *a, runtime_model *b, json_t *ref, const char *what)
{
    json_t *ps = json_object_get(ref, "prompts");
    int V = runtime_model_config(a)->vocab_size;
    float *la = malloc(sizeof *la * V), *lb = malloc(sizeof *lb * V);

    for (size_t i = 0; i < json_array_size(ps); i++) {
        json_t *toks = json_object_get(json_array_get(ps, i), "tokens");
        int n = (int)json_array_size(toks);
        int32_t *ids = malloc(sizeof *ids * n);
        double num = 0, den = 0;

        for (int t = 0; t < n; t++)
            ids[t] = (int32_t)json_integer_value(json_array_get(toks, t));
        runtime_model_reset(a);
        runtime_model_reset(b);
        ck_assert_msg(runtime_forward(a, ids, n, la) == 0, "%s", ms_err_msg());
        ck_assert_msg(runtime_forward(b, ids, n, lb) == 0, "%s", ms_err_msg());
        for (int v = 0; v < V; v++) {
            num = fmax(num, fabs((double)la[v] - lb[v]));
            den = fmax(den, fabs((double)lb[v]));
        }
        printf("measured: %s: int4 from HF against int4 from GGUF, prompt of %d tokens: logits rel %.3g\n", what, n,
               num / den);
        ck_assert_msg(num / den <= 1e-4, "%s prompt %zu: HF int4 and GGUF int4 logits differ by %g", what, i, num / den);
        free(ids);
    }
    free(la);
    free(lb);
}

/* ---------------------------------------------------------------- decoders */

static const struct {
    const char *arch, *dtype, *flags;
    double tol;
    int need; /* greedy tokens that must agree; 0: all 32 */
} moe[] = {
    {"mixtral", "f32", "", 1e-4, 0},
    {"qwen3moe", "f32", "", 1e-4, 0},
    {"qwen2moe", "f32", "", 1e-4, 0},
    {"mixtral", "q8_0", "", 1e-2, 8},
    {"qwen3moe", "q8_0", "", 1e-2, 8},
    {"qwen2moe", "q8_0", "", 1e-2, 8},
    /* 6 layers: 0-4 in the window of 8 (base 10000), layer 5 global, as llama.cpp runs Gemma 3 */
    {"gemma3", "f32", "--layers 6", 1e-4, 0},
    {"gemma3", "q8_0", "--layers 6", 1e-2, 8},
    {"gemma3", "f32", "--layers 6 --softcap 3", 1e-4, 0},
    /* every layer in a window of 8 */
    {"mistral", "f32", "", 1e-4, 0},
    /* fused qkv and gate_up split as views; window of 8 on every layer */
    {"phi3", "f32", "", 1e-4, 0},
    {"phi3", "q8_0", "", 1e-2, 8},
    /* Q4_K (rows of 256): the experts' packs and Gemma 3's matrices in llama.cpp's K-quant */
    {"mixtral", "q4_k", "--dim 256 --ffn 256 --head-dim 64", 1e-2, 8},
    {"qwen3moe", "q4_k", "--dim 256 --ffn 256 --head-dim 64", 1e-2, 8},
    {"qwen2moe", "q4_k", "--dim 256 --ffn 256 --head-dim 64 --shared-ffn 256", 1e-2, 8},
    {"gemma3", "q4_k", "--layers 6 --dim 256 --ffn 256 --head-dim 64", 1e-2, 8},
};

START_TEST(models_match_the_float64_reference)
{
    char *dir = fixture_tmpdir(), *path, *what = ms_strdup_printf("%s %s", moe[_i].arch, moe[_i].dtype);
    json_t *ref = make_model(dir, moe[_i].arch, moe[_i].dtype, moe[_i].flags, &path);
    runtime_opts o = {.n_threads = 2, .n_batch = 16}; /* prompts of 18 and 45: several chunks */
    runtime_model *m;
    store *st;
    char *home;

    if (ref) {
        ck_assert_msg(runtime_model_open_gguf(&m, path, &o) == 0, "%s", ms_err_msg());
        ck_assert_int_eq(runtime_model_config(m)->n_experts, strstr("gemma3 mistral phi3", moe[_i].arch) ? 0 : 8);
        ck_assert_int_eq(runtime_model_config(m)->sliding_window, strstr("gemma3 mistral phi3", moe[_i].arch) ? 8 : 0);
        check_model(m, ref, what, moe[_i].tol, moe[_i].need);
        runtime_model_close(m);

        /* the same model in the store: its experts packed one blob per layer */
        home = ms_strdup_printf("%s/home", dir);
        import_opts io = {.quiet = 1};
        ck_assert_int_eq(store_open(&st, home), 0);
        m = import_open(st, path, "moe:test", io.quantize, &o);
        ck_assert_ptr_nonnull(
            runtime_weights_find(runtime_model_weights(m),
                                 !strcmp(moe[_i].arch, "gemma3")    ? "model.layers.1.post_feedforward_layernorm.weight"
                                 : !strcmp(moe[_i].arch, "mistral") ? "model.layers.1.mlp.up_proj.weight"
                                 : !strcmp(moe[_i].arch, "phi3")    ? "model.layers.1.mlp.gate_up_proj.weight"
                                                                    : "model.layers.1.mlp.experts.up_proj.weight"));
        free(what);
        what = ms_strdup_printf("%s %s (store)", moe[_i].arch, moe[_i].dtype);
        check_model(m, ref, what, moe[_i].tol, moe[_i].need);
        runtime_model_close(m);
        store_close(st);
        free(home);
        json_decref(ref);
        free(path);
    }
    free(what);
    fixture_rmrf(dir);
}
END_TEST

/* gpt-oss: sinks, the biases, the alternating window (the generator's window is shorter than the
 * prompts, and n_batch 16 makes its layers' caches rings), YaRN over a short original context (so
 * that the ramp's band lies within the rotated dims), the clamped SwiGLU; F32, then its experts in
 * ggml's MXFP4 with the rest Q8_0 as gpt-oss GGUFs ship. From the file and from the store. */
static const struct {
    const char *dtype;
    double tol;
    int need;
} oss[] = {
    {"f32", 1e-4, 0},
    {"mxfp4", 1e-2, 8},
};

START_TEST(gptoss_matches_the_float64_reference)
{
    char *dir = fixture_tmpdir(), *path, *what = ms_strdup_printf("gpt-oss %s", oss[_i].dtype), *home;
    json_t *ref = make_model(dir, "gpt-oss", oss[_i].dtype, "", &path);
    runtime_opts o = {.n_threads = 2, .n_batch = 16};
    const runtime_config *c;
    const backend_tensor *t;
    runtime_model *m;
    store *st;

    if (ref) {
        ck_assert_msg(runtime_model_open_gguf(&m, path, &o) == 0, "%s", ms_err_msg());
        c = runtime_model_config(m);
        ck_assert(c->gptoss && c->swa_pattern == 2 && c->sliding_window > 0 && c->n_experts == 8);
        ck_assert_int_eq(c->rope_scaling, RUNTIME_ROPE_YARN);
        check_model(m, ref, what, oss[_i].tol, oss[_i].need);
        runtime_model_close(m);

        home = ms_strdup_printf("%s/home", dir);
        ck_assert_int_eq(store_open(&st, home), 0);
        m = import_open(st, path, "oss:test", NULL, &o);
        ck_assert_ptr_nonnull(runtime_weights_find(runtime_model_weights(m), "model.layers.1.self_attn.sinks.weight"));
        t = runtime_weights_find(runtime_model_weights(m), "model.layers.1.mlp.experts.down_proj.bias");
        ck_assert_ptr_nonnull(t);
        ck_assert_int_eq(t->type, GGML_TYPE_F32);
        expect_expert_pack(m, "down_proj", strcmp(oss[_i].dtype, "mxfp4") == 0 ? GGML_TYPE_MXFP4 : GGML_TYPE_F32);
        free(what);
        what = ms_strdup_printf("gpt-oss %s (store)", oss[_i].dtype);
        check_model(m, ref, what, oss[_i].tol, oss[_i].need);
        runtime_model_close(m);
        store_close(st);
        free(home);
        json_decref(ref);
        free(path);
    }
    free(what);
    fixture_rmrf(dir);
}
END_TEST

/* DeepSeek V2 / V3 (deepseek2): multi-head latent attention, run in its absorbed form over a cache
 * of latents, judged by the reference's plain form (each head's k and v from kv_b_proj); the
 * leading dense layer, shared experts, group-limited routing (V3's sigmoid with its selection bias,
 * V2's softmax), YaRN's score scale. V3's form in F32 and Q8_0, V2-Lite's (no q_lora, softmax; one
 * group of four kept, since V2's max-of-group score cannot exclude the top two experts when two
 * groups are kept), and mainline llama.cpp's layout (attn_k_b / attn_v_b, the *_mla keys). */
static const struct {
    const char *dtype, *flags;
    double tol;
    int need, q_lora, route, topk_group;
} ds2[] = {
    {"f32", "", 1e-4, 0, 32, BACKEND_ROUTE_SIGMOID_GROUPED, 2},
    {"q8_0", "", 1e-2, 8, 32, BACKEND_ROUTE_SIGMOID_GROUPED, 2},
    {"f32", "--q-lora 0 --gating softmax --groups-used 1", 1e-4, 0, 0, BACKEND_ROUTE_SOFTMAX_GROUPED, 1},
    {"f32", "--ds-layout mainline", 1e-4, 0, 32, BACKEND_ROUTE_SIGMOID_GROUPED, 2},
    {"q8_0", "--ds-layout mainline", 1e-2, 8, 32, BACKEND_ROUTE_SIGMOID_GROUPED, 2},
};

START_TEST(deepseek2_matches_the_float64_reference)
{
    char *dir = fixture_tmpdir(), *path, *what = ms_strdup_printf("deepseek2 %s %s", ds2[_i].dtype, ds2[_i].flags);
    json_t *ref = make_model(dir, "deepseek2", ds2[_i].dtype, ds2[_i].flags, &path);
    runtime_opts o = {.n_threads = 2, .n_batch = 16, .n_ctx = 256};
    const runtime_config *c;
    runtime_model *m;
    store *st;
    char *home;

    if (ref) {
        ck_assert_msg(runtime_model_open_gguf(&m, path, &o) == 0, "%s", ms_err_msg());
        c = runtime_model_config(m);
        ck_assert(c->kv_lora_rank == 32 && c->n_dense_lead == 1 && c->n_group == 4 && c->head_dim == 32);
        ck_assert(c->v_head_dim == 24 && c->n_kv_heads == c->n_heads);   /* mainline's *_mla keys read as the model's */
        ck_assert_int_eq(c->topk_group, ds2[_i].topk_group);
        ck_assert_int_eq(c->q_lora_rank, ds2[_i].q_lora);
        ck_assert_int_eq(c->moe_route, ds2[_i].route);
        /* the cache holds per position and layer one row of k_pe and the latent, nothing per head */
        ck_assert_uint_eq(runtime_model_kv_nbytes(m), (uint64_t)c->n_layers * 256 * (c->n_rot + c->kv_lora_rank) * 4);
        check_model(m, ref, what, ds2[_i].tol, ds2[_i].need);
        runtime_model_close(m);

        if (_i == 0) {   /* the latent cache in f16: the rows rounded once, as STORE rounds */
            runtime_opts o16 = o;
            o16.kv_f16 = 1;
            ck_assert_msg(runtime_model_open_gguf(&m, path, &o16) == 0, "%s", ms_err_msg());
            c = runtime_model_config(m);
            ck_assert_uint_eq(runtime_model_kv_nbytes(m), (uint64_t)c->n_layers * 256 * (c->n_rot + c->kv_lora_rank) * 2);
            free(what);
            what = ms_strdup_printf("deepseek2 %s (kv f16)", ds2[_i].dtype);
            check_model(m, ref, what, 1e-2, 8);
            runtime_model_close(m);
        }
        if (_i == 0) {   /* from the store, after a GGUF import */
            home = ms_strdup_printf("%s/home", dir);
            ck_assert_int_eq(store_open(&st, home), 0);
            m = import_open(st, path, "ds:test", NULL, &o);
            ck_assert_ptr_nonnull(
                runtime_weights_find(runtime_model_weights(m), "model.layers.1.self_attn.kv_b_proj.weight"));
            ck_assert_ptr_nonnull(
                runtime_weights_find(runtime_model_weights(m), "model.layers.1.mlp.gate.e_score_correction.bias"));
            expect_expert_pack(m, "down_proj", GGML_TYPE_F32);
            free(what);
            what = ms_strdup_printf("deepseek2 %s (store)", ds2[_i].dtype);
            check_model(m, ref, what, ds2[_i].tol, ds2[_i].need);
            runtime_model_close(m);
            store_close(st);
            free(home);
        }
        json_decref(ref);
        free(path);
    }
    free(what);
    fixture_rmrf(dir);
}
END_TEST

/* The MoE models from Hugging Face directories, one tensor per expert as HF ships them: the
 * import stacks each layer's experts into [n_experts][rows][cols] tensors of one blob per layer
 * (as a GGUF import does) and renames Mixtral's block_sparse_moe, and the model runs like its
 * GGUF twin, judged by the same float64 reference. */
START_TEST(moe_from_hugging_face_is_packed_per_layer)
{
    static const char *arch[] = {"mixtral", "qwen3moe", "qwen2moe", "deepseek2"};
    char *dir = fixture_tmpdir(), *path, *hf = ms_strdup_printf("%s/hf", dir);
    char *flags = ms_strdup_printf("--hf '%s'", hf), *home = ms_strdup_printf("%s/home", dir);
    char *what = ms_strdup_printf("%s hf (store)", arch[_i]);
    json_t *ref = make_model(dir, arch[_i], "f32", flags, &path);
    runtime_opts o = {.n_threads = 2, .n_batch = 16};
    import_opts io = {.quiet = 1};
    const runtime_weights *w;
    runtime_model *m;
    store *st;

    if (ref) {
        ck_assert_int_eq(store_open(&st, home), 0);
        m = import_open(st, hf, "moe:hf", io.quantize, &o);
        w = runtime_model_weights(m);
        expect_expert_pack(m, "down_proj", -1);
        ck_assert_ptr_nonnull(runtime_weights_find(w, "model.layers.1.mlp.gate.weight"));
        ck_assert_ptr_null(runtime_weights_find(w, "model.layers.1.mlp.experts.0.down_proj.weight"));
        ck_assert_ptr_null(runtime_weights_find(w, "model.layers.1.block_sparse_moe.experts.0.w2.weight"));
        if (!strcmp(arch[_i], "qwen2moe") || !strcmp(arch[_i], "deepseek2"))
            ck_assert_ptr_nonnull(runtime_weights_find(w, "model.layers.1.mlp.shared_experts.up_proj.weight"));
        if (!strcmp(arch[_i], "deepseek2"))   /* V3's selection bias, under its GGUF import's name */
            ck_assert_ptr_nonnull(runtime_weights_find(w, "model.layers.1.mlp.gate.e_score_correction.bias"));
        check_model(m, ref, what, 1e-4, 0);
        runtime_model_close(m);

        /* --quantize int4: the experts stacked, then quantized as one 3-D MLX tensor per kind;
         * the same rows as the GGUF twin quantized on import, so the same logits (a stacking
         * out of expert order would route to other weights). Not deepseek2's: its kv_b rows of 32
         * are shorter than int4's groups of 64. */
        if (strcmp(arch[_i], "deepseek2") != 0) {
            runtime_model *mg = import_open(st, path, "moe:gguf-int4", "int4", &o);
            m = import_open(st, hf, "moe:hf-int4", "int4", &o);
            expect_expert_pack(m, "down_proj", BACKEND_TYPE_MLX);
            check_same_logits(m, mg, ref, what);
            runtime_model_close(mg);
            runtime_model_close(m);
        }
        store_close(st);
        json_decref(ref);
        free(path);
    }
    free(what);
    free(flags);
    free(home);
    free(hf);
    fixture_rmrf(dir);
}
END_TEST

/* MoE models as mlx-lm writes them (MLX-community directories): 4-bit codes with F16 scales and
 * biases, the experts stacked as switch_mlp. The import names the stacks as a GGUF import does
 * (mlp.experts, one pack per layer) and the model runs straight from them; its GGUF twin holds
 * the values those codes dequantize to, so the float64 reference judges it exactly. */
START_TEST(moe_from_mlx_community_directories)
{
    static const char *arch[] = {"mixtral", "qwen3moe", "qwen2moe"};
    char *dir = fixture_tmpdir(), *path, *hf = ms_strdup_printf("%s/mlx", dir);
    char *flags = ms_strdup_printf("--hf '%s' --mlx 32", hf), *home = ms_strdup_printf("%s/home", dir);
    char *what = ms_strdup_printf("%s mlx-community int4 (store)", arch[_i]);
    json_t *ref = make_model(dir, arch[_i], "f32", flags, &path);
    runtime_opts o = {.n_threads = 2, .n_batch = 16};
    const runtime_weights *w;
    runtime_model *m;
    store *st;

    if (ref) {
        ck_assert_int_eq(store_open(&st, home), 0);
        m = import_open(st, hf, "moe:mlx", NULL, &o);
        w = runtime_model_weights(m);
        expect_expert_pack(m, "gate_proj", BACKEND_TYPE_MLX);
        ck_assert_ptr_nonnull(runtime_weights_find(w, "model.layers.1.mlp.gate.weight"));
        /* the twin's F32 values and the kernels' s * q + b round differently: 3e-5 to 8e-5
         * measured on every CPU path, so 1e-3, and every greedy token */
        check_model(m, ref, what, 1e-3, 0);
        runtime_model_close(m);
        store_close(st);
        json_decref(ref);
        free(path);
    }
    free(what);
    free(flags);
    free(home);
    free(hf);
    fixture_rmrf(dir);
}
END_TEST

/* MoE models quantized to MLX int4 on import (--quantize int4): each layer's expert packs become
 * 3-D MLX tensors in one blob, run straight from it. Judged as Gemma 3's int4 above: the float64
 * reference of the F32 source within the error 4-bit groups of 32 put into these random weights. */
START_TEST(moe_int4_packs_run_from_the_store)
{
    static const char *arch[] = {"mixtral", "qwen3moe", "qwen2moe"};
    char *dir = fixture_tmpdir(), *path, *home = ms_strdup_printf("%s/home", dir);
    json_t *ref = make_model(dir, arch[_i], "f32", "", &path);
    runtime_opts o = {.n_threads = 2, .n_batch = 16};
    import_opts io = {.quiet = 1, .quantize = "int4"};
    runtime_model *m;
    store *st;
    char *what = ms_strdup_printf("%s int4 (store)", arch[_i]);

    if (ref) {
        ck_assert_int_eq(store_open(&st, home), 0);
        m = import_open(st, path, "moe:int4", io.quantize, &o);
        expect_expert_pack(m, "down_proj", BACKEND_TYPE_MLX);
        check_model(m, ref, what, 0.35, -1);
        runtime_model_close(m);
        store_close(st);
        json_decref(ref);
        free(path);
    }
    free(what);
    free(home);
    fixture_rmrf(dir);
}
END_TEST

/* Phi-3 128k's longrope: rope_factors_long/short divide the frequencies, long when the context
 * exceeds the original one (here 128), else short, and cos, sin are scaled by the attention
 * factor; against the float64 reference run with the same context, from the GGUF and the store. */
START_TEST(phi3_longrope_matches_the_float64_reference)
{
    static const int ctx[] = {128, 256};   /* short factors, then long */
    char *dir = fixture_tmpdir(), *path, *rf = ms_strdup_printf("--n-ctx %d", ctx[_i]), *home;
    json_t *ref = make_model_ref(dir, "phi3", "f32", "--longrope 128", rf, &path);
    runtime_opts o = {.n_threads = 2, .n_batch = 16, .n_ctx = ctx[_i]};
    runtime_model *m;
    store *st;
    char *what = ms_strdup_printf("phi3 longrope, context %d", ctx[_i]);

    if (ref) {
        ck_assert_msg(runtime_model_open_gguf(&m, path, &o) == 0, "%s", ms_err_msg());
        ck_assert_int_eq(runtime_model_config(m)->rope_scaling, RUNTIME_ROPE_LONGROPE);
        ck_assert_int_eq(runtime_model_config(m)->rope_orig_ctx, 128);
        check_model(m, ref, what, 1e-4, 0);
        runtime_model_close(m);
        home = ms_strdup_printf("%s/home", dir);
        import_opts io = {.quiet = 1};
        ck_assert_int_eq(store_open(&st, home), 0);
        m = import_open(st, path, "phi3:128k", io.quantize, &o);
        check_model(m, ref, what, 1e-4, 0);
        runtime_model_close(m);
        store_close(st);
        free(home);
        json_decref(ref);
        free(path);
    }
    free(what);
    free(rf);
    fixture_rmrf(dir);
}
END_TEST

/* Llama 3.1's rope_freqs.weight divides the frequencies from the GGUF and, under the name the
 * import gives it (model.rope_freqs.weight), from the store: both match the reference. */
START_TEST(rope_freqs_apply_from_the_gguf_and_the_store)
{
    char *dir = fixture_tmpdir(), *path, *home;
    json_t *ref = make_model(dir, "mistral", "f32", "--rope-freqs", &path);
    runtime_opts o = {.n_threads = 2, .n_batch = 16};
    runtime_model *m;
    store *st;

    if (ref) {
        ck_assert_msg(runtime_model_open_gguf(&m, path, &o) == 0, "%s", ms_err_msg());
        check_model(m, ref, "llama with rope_freqs (gguf)", 1e-4, 0);
        runtime_model_close(m);
        home = ms_strdup_printf("%s/home", dir);
        import_opts io = {.quiet = 1};
        ck_assert_int_eq(store_open(&st, home), 0);
        m = import_open(st, path, "llama:freqs", io.quantize, &o);
        ck_assert_ptr_nonnull(runtime_weights_find(runtime_model_weights(m), "model.rope_freqs.weight"));
        check_model(m, ref, "llama with rope_freqs (store)", 1e-4, 0);
        runtime_model_close(m);
        store_close(st);
        free(home);
        json_decref(ref);
        free(path);
    }
    fixture_rmrf(dir);
}
END_TEST

/* Sliding-window layers keep a ring of window + n_batch - 1 cache slots, not the context: the
 * Mistral model (window 8 on every layer) with batches of 3 wraps its rings many times over the
 * 46-token prompt and 32 greedy tokens, and must still match the float64 reference. Truncating
 * keeps the cache only while the rings still hold the window before the new end. */
START_TEST(window_layers_keep_a_ring_cache)
{
    char *dir = fixture_tmpdir(), *path;
    json_t *ref = make_model(dir, "mistral", "f32", "", &path);
    runtime_opts o = {.n_threads = 2, .n_batch = 3, .n_ctx = 96}, full = o;
    runtime_model *m, *f;

    if (ref) {
        ck_assert_msg(runtime_model_open_gguf(&m, path, &o) == 0, "%s", ms_err_msg());
        const runtime_config *c = runtime_model_config(m);
        uint64_t row = 2ull * c->n_kv_heads * c->head_dim * sizeof(float);
        ck_assert_int_eq(c->sliding_window, 8);
        /* every layer: 8 + 3 - 1 = 10 slots of k and v rows, against 96 without the ring */
        ck_assert_uint_eq(runtime_model_kv_nbytes(m), (uint64_t)c->n_layers * 10 * row);
        check_model(m, ref, "mistral f32, ring of 10", 1e-4, 0);

        /* after the 46-token prompt the rings hold positions 36..45: back to 43 keeps 36..42, the
         * window before position 43; back to 41 would need 34, already overwritten */
        json_t *toks = json_object_get(json_array_get(json_object_get(ref, "prompts"), 1), "tokens");
        int n = (int)json_array_size(toks), V = c->vocab_size;
        int32_t *ids = malloc(sizeof *ids * n);
        float *a = malloc(sizeof *a * V), *b = malloc(sizeof *b * V);
        for (int t = 0; t < n; t++)
            ids[t] = (int32_t)json_integer_value(json_array_get(toks, t));
        ck_assert_int_eq(n, 46);
        runtime_model_reset(m);
        ck_assert_int_eq(runtime_forward(m, ids, n, a), 0);
        ck_assert_int_eq(runtime_model_truncate(m, 41), MS_EINVALID);
        ck_assert_ptr_nonnull(strstr(ms_err_msg(), "no longer holds position 34"));
        ck_assert_int_eq(runtime_model_n_past(m), 46);
        ck_assert_int_eq(runtime_model_truncate(m, 43), 0);
        ck_assert_int_eq(runtime_forward(m, ids + 43, n - 43, b), 0);
        for (int i = 0; i < V; i++)
            ck_assert_msg(fabsf(a[i] - b[i]) <= 1e-5f * (1 + fabsf(a[i])), "logit %d: %g after truncate, %g", i,
                          b[i], a[i]);

        /* a context no longer than window + n_batch - 1 needs no ring */
        full.n_ctx = 10;
        ck_assert_msg(runtime_model_open_gguf(&f, path, &full) == 0, "%s", ms_err_msg());
        ck_assert_uint_eq(runtime_model_kv_nbytes(f), (uint64_t)c->n_layers * 10 * row);
        runtime_model_close(f);
        free(ids);
        free(a);
        free(b);
        runtime_model_close(m);
        json_decref(ref);
        free(path);
    }
    fixture_rmrf(dir);
}
END_TEST

/* Gemma 3 from a Hugging Face directory: the same weights with norms holding w rather than 1 + w
 * (RMS_NORM's weight offset), config.json's pattern, local base and query_pre_attn_scalar; the
 * float64 reference of the GGUF twin judges it. Quantized to MLX int4 on import, within the
 * tolerance of quantized types. */
START_TEST(gemma3_from_hugging_face_matches_its_gguf_twin)
{
    static const char *quant[] = {NULL, "int4"};
    char *dir = fixture_tmpdir(), *path, *hf = ms_strdup_printf("%s/hf", dir);
    char *flags = ms_strdup_printf("--layers 6 --hf '%s'", hf), *home = ms_strdup_printf("%s/home", dir);
    json_t *ref = make_model(dir, "gemma3", "f32", flags, &path);
    runtime_opts o = {.n_threads = 2, .n_batch = 16};
    runtime_model *m;
    store *st;

    if (ref) {
        ck_assert_int_eq(store_open(&st, home), 0);
        for (int q = 0; q < 2; q++) {
            import_opts io = {.quiet = 1, .quantize = quant[q]};
            m = import_open(st, hf, q ? "gemma3:int4" : "gemma3:hf", io.quantize, &o);
            ck_assert(runtime_model_config(m)->norm_offset == 1.0);
            ck_assert_int_eq(runtime_model_config(m)->swa_pattern, 6);
            /* int4 (group 32) of these random weights moves the logits by 0.25 relative in exact
             * arithmetic (ref_forward.py on the weights rounded to 4 bits): the bound is that, not
             * 1e-2, and no greedy agreement is asked of it */
            check_model(m, ref, q ? "gemma3 hf int4 (store)" : "gemma3 hf f32 (store)", q ? 0.35 : 1e-4, q ? -1 : 0);
            runtime_model_close(m);
        }
        store_close(st);
        json_decref(ref);
        free(path);
    }
    free(flags);
    free(home);
    free(hf);
    fixture_rmrf(dir);
}
END_TEST

/* Gemma 3 as its multimodal checkpoints ship it (Gemma3ForConditionalGeneration): the text model
 * under language_model.model.*, a sparse text_config over Gemma3TextConfig's defaults, a vision
 * tower beside it. The import runs the text model, the same as the text-only directory's; the
 * vision tensors are kept in the store. Before, the import failed on "hidden_size: missing". */
START_TEST(gemma3_multimodal_checkpoint_runs_its_text_model)
{
    char *dir = fixture_tmpdir(), *path, *hf = ms_strdup_printf("%s/hf", dir);
    char *flags = ms_strdup_printf("--layers 6 --hf '%s' --multimodal", hf), *home = ms_strdup_printf("%s/home", dir);
    json_t *ref = make_model(dir, "gemma3", "f32", flags, &path);
    runtime_opts o = {.n_threads = 2, .n_batch = 16};
    runtime_model *m;
    store *st;

    if (ref) {
        store_tensor *t = NULL;
        size_t n = 0, vision = 0;
        store_model *sm;
        model_name name;

        ck_assert_int_eq(store_open(&st, home), 0);
        m = import_open(st, hf, "gemma3:mm", NULL, &o);
        ck_assert(runtime_model_config(m)->norm_offset == 1.0);
        ck_assert_int_eq(runtime_model_config(m)->swa_pattern, 6);
        ck_assert_int_eq(runtime_model_config(m)->n_layers, 6);
        check_model(m, ref, "gemma3 multimodal checkpoint (store)", 1e-4, 0);
        runtime_model_close(m);
        ck_assert_int_eq(name_parse(&name, "gemma3:mm"), 0);
        ck_assert_int_eq(store_model_open(&sm, st, &name), 0);
        ck_assert_int_eq(store_tensors_list(st, store_model_digest(sm), &t, &n), 0);
        for (size_t i = 0; i < n; i++) {
            ck_assert_msg(strncmp(t[i].name, "language_model.", 15) != 0, "%s kept its prefix", t[i].name);
            vision += strncmp(t[i].name, "vision_tower.", 13) == 0 || strncmp(t[i].name, "multi_modal_projector.", 22) == 0;
        }
        ck_assert_uint_eq(vision, 2);
        store_tensors_free(t, n);
        store_model_close(sm);
        store_close(st);
        json_decref(ref);
        free(path);
    }
    free(flags);
    free(home);
    free(hf);
    fixture_rmrf(dir);
}
END_TEST

/* ---------------------------------------------------------------- ops */

/* The MoE ops on the CPU backend against a direct double computation, with the experts that no
 * token selects filled with NaN: if MATMUL_ID read a single row of them, the result would be NaN. */
START_TEST(moe_ops_read_only_the_selected_experts)
{
    enum { E = 6, ROWS = 5, COLS = 32, N = 3, K = 2 };
    static float pack[E][ROWS][COLS], x[N][COLS], logits[N][E];
    static const int chosen[N][K] = {{4, 0}, {0, 2}, {2, 4}}; /* experts 1, 3, 5 never */
    backend_tensor t = {.name = "pack",
                        .type = GGML_TYPE_F32,
                        .n_dims = 3,
                        .data = pack,
                        .nbytes = sizeof pack,
                        .shape = {E, ROWS, COLS}};
    backend_opts bo = {.n_threads = 2};
    backend_limits lim = {.max_rows = N, .max_cols = COLS, .n_ctx = 8, .heads = 1};
    backend_buf *bx, *bl, *bw, *bi, *bh, *bo_;
    const backend_weight *w;
    backend_op ops[4];
    backend_seq seq = {.ops = ops, .cap = 4};
    float wts[N * K], out[N * ROWS];
    backend *b;

    for (int e = 0; e < E; e++)
        for (int r = 0; r < ROWS; r++)
            for (int c = 0; c < COLS; c++)
                pack[e][r][c] = e % 2 ? NAN : (float)sin(1.0 + e * 7 + r * 3 + c * 0.37);
    for (int t2 = 0; t2 < N; t2++) {
        for (int c = 0; c < COLS; c++)
            x[t2][c] = (float)cos(t2 * 5 + c * 0.21);
        for (int e = 0; e < E; e++)
            logits[t2][e] = -4.0f - e * 0.01f;
        logits[t2][chosen[t2][0]] = 2.0f; /* the larger first: ids come out in descending weight */
        logits[t2][chosen[t2][1]] = 1.0f;
    }
    ck_assert_int_eq(backend_open(&b, "cpu", &bo), 0);
    ck_assert_int_eq(backend_reserve(b, &lim), 0);
    for (int k = BACKEND_OP_EMBED; k < BACKEND_OP_COUNT; k++)
        ck_assert_msg(backend_supports(b, (backend_op_kind)k), "cpu: %s", backend_op_name((backend_op_kind)k));
    ck_assert(!backend_supports(b, BACKEND_OP_COUNT));
    ck_assert_int_eq(backend_weight_import(&w, b, &t), 0);
    ck_assert_int_eq(backend_buf_new(&bx, b, N * COLS, BACKEND_F32, "x"), 0);
    ck_assert_int_eq(backend_buf_new(&bl, b, N * E, BACKEND_F32, "logits"), 0);
    ck_assert_int_eq(backend_buf_new(&bw, b, N * K, BACKEND_F32, "wts"), 0);
    ck_assert_int_eq(backend_buf_new(&bi, b, N * K, BACKEND_I32, "ids"), 0);
    ck_assert_int_eq(backend_buf_new(&bh, b, N * K * ROWS, BACKEND_F32, "h"), 0);
    ck_assert_int_eq(backend_buf_new(&bo_, b, N * ROWS, BACKEND_F32, "out"), 0);
    memcpy(bx->host, x, sizeof x); /* the CPU backend's host memory: tests may fill it */
    memcpy(bl->host, logits, sizeof logits);
    backend_seq_moe_route(&seq, backend_at(bw, 0), backend_at(bi, 0), backend_at(bl, 0), N, E, K,
                          BACKEND_ROUTE_SOFTMAX_TOPK_NORM);
    backend_seq_matmul_id(&seq, backend_at(bh, 0), backend_at(bx, 0), w, backend_at(bi, 0), N, K, 1);
    backend_seq_moe_sum(&seq, backend_at(bo_, 0), backend_at(bh, 0), backend_at(bw, 0), N, K, ROWS);
    ck_assert_int_eq(backend_run(b, &seq), 0);
    ck_assert_int_eq(backend_read(b, wts, backend_at(bw, 0), N * K), 0);
    ck_assert_int_eq(backend_read(b, out, backend_at(bo_, 0), N * ROWS), 0);
    for (int t2 = 0; t2 < N; t2++) {
        double e1 = exp(1.0 - 2.0), w0 = 1 / (1 + e1), w1 = e1 / (1 + e1); /* softmax of the two, renormalized */
        ck_assert_int_eq(((int32_t *)bi->host)[t2 * K], chosen[t2][0]);
        ck_assert_int_eq(((int32_t *)bi->host)[t2 * K + 1], chosen[t2][1]);
        ck_assert_msg(fabs(wts[t2 * K] - w0) < 1e-6 && fabs(wts[t2 * K + 1] - w1) < 1e-6, "weights %g %g", wts[t2 * K],
                      wts[t2 * K + 1]);
        for (int r = 0; r < ROWS; r++) {
            double want = 0;
            for (int s = 0; s < K; s++) {
                double dot = 0;
                for (int c = 0; c < COLS; c++)
                    dot += (double)pack[chosen[t2][s]][r][c] * x[t2][c];
                want += (s ? w1 : w0) * dot;
            }
            ck_assert_msg(isfinite(out[t2 * ROWS + r]) && fabs(out[t2 * ROWS + r] - want) < 1e-4,
                          "token %d row %d: %g, expected %g", t2, r, out[t2 * ROWS + r], want);
        }
    }
    backend_close(b);
}
END_TEST

Suite *archs_suite(void)
{
    Suite *s = suite_create("runtime_archs");
    TCase *m = tcase_create("moe"), *o = tcase_create("ops");

    tcase_add_test(o, moe_ops_read_only_the_selected_experts);
    suite_add_tcase(s, o);
    tcase_set_timeout(m, 600);
    tcase_add_test(m, gemma3_from_hugging_face_matches_its_gguf_twin);
    tcase_add_test(m, gemma3_multimodal_checkpoint_runs_its_text_model);
    tcase_add_test(m, window_layers_keep_a_ring_cache);
    tcase_add_loop_test(m, phi3_longrope_matches_the_float64_reference, 0, 2);
    tcase_add_test(m, rope_freqs_apply_from_the_gguf_and_the_store);
    tcase_add_loop_test(m, moe_int4_packs_run_from_the_store, 0, 3);
    tcase_add_loop_test(m, moe_from_mlx_community_directories, 0, 3);
    tcase_add_loop_test(m, moe_from_hugging_face_is_packed_per_layer, 0, 4);
    tcase_add_loop_test(m, models_match_the_float64_reference, 0, sizeof moe / sizeof moe[0]);
    tcase_add_loop_test(m, gptoss_matches_the_float64_reference, 0, sizeof oss / sizeof oss[0]);
    tcase_add_loop_test(m, deepseek2_matches_the_float64_reference, 0, sizeof ds2 / sizeof ds2[0]);
    suite_add_tcase(s, m);
    return s;
}

int main(void)
{
    SRunner *r = srunner_create(archs_suite());
    int failed;

    srunner_run_all(r, CK_NORMAL);
    failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? 1 : 0;
}
