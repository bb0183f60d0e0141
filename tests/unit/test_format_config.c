/* test_format_config.c: the one GGUF metadata reader (gguf_config_json) and the one architecture
 * table: run --gguf and a run of the imported file read the same config, and the cases where the
 * importer and the runtime used to disagree. */
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/format.h"
#include "helpers/fixture.h"
#include "runtime/runtime.h"

/* A GGUF of `arch` with the keys every decoder needs; `extra` adds more before it is emitted. */
typedef void (*extra_fn)(gguf_writer *w, const char *arch);

static gguf_file *make(fixture_mem *m, const char *arch, extra_fn extra)
{
    gguf_writer *w;
    gguf_file *g;
    char k[96];

    memset(m, 0, sizeof *m);
    ck_assert_int_eq(gguf_writer_new(&w, 3, 32), 0);
    ck_assert_int_eq(gguf_writer_set_str(w, "general.architecture", arch, strlen(arch)), 0);
#define U32(suffix, v) do { snprintf(k, sizeof k, "%s." suffix, arch); ck_assert_int_eq(gguf_writer_set_u32(w, k, v), 0); } while (0)
    U32("embedding_length", 64);
    U32("block_count", 2);
    U32("attention.head_count", 4);
    U32("attention.head_count_kv", 2);
    U32("feed_forward_length", 128);
    U32("context_length", 256);
    U32("vocab_size", 300);
#undef U32
    ck_assert_int_eq(gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1), 0);
    if (extra)
        extra(w, arch);
    ck_assert_int_eq(gguf_writer_emit(w, fixture_mem_sink, m), 0);
    ck_assert_msg(gguf_open_buf(&g, m->p, m->len, 0, "t.gguf") == 0, "%s", ms_err_msg());
    gguf_writer_free(w);
    return g;
}

static void set_u32(gguf_writer *w, const char *arch, const char *suffix, uint32_t v)
{
    char k[96];
    snprintf(k, sizeof k, "%s.%s", arch, suffix);
    ck_assert_int_eq(gguf_writer_set_u32(w, k, v), 0);
}

static void set_f32(gguf_writer *w, const char *arch, const char *suffix, float v)
{
    char k[96];
    snprintf(k, sizeof k, "%s.%s", arch, suffix);
    ck_assert_int_eq(gguf_writer_set_f32(w, k, v), 0);
}

static void set_str(gguf_writer *w, const char *arch, const char *suffix, const char *v)
{
    char k[96];
    snprintf(k, sizeof k, "%s.%s", arch, suffix);
    ck_assert_int_eq(gguf_writer_set_str(w, k, v, strlen(v)), 0);
}

/* The property the one reader gives: run --gguf's config equals the config read back from the
 * blob an import stores (the JSON text, as import_config_store dumps it). */
static json_t *check_same_config(const gguf_file *g, runtime_config *out)
{
    runtime_config a, b;
    json_t *c;
    char *text;

    ck_assert_msg(gguf_config_json(&c, g) == 0, "%s", ms_err_msg());
    ck_assert_ptr_nonnull(text = json_dumps(c, JSON_COMPACT | JSON_SORT_KEYS));
    ck_assert_msg(runtime_config_from_gguf(&a, g) == 0, "%s", ms_err_msg());
    ck_assert_msg(runtime_config_from_json(&b, text, strlen(text), "blob") == 0, "%s", ms_err_msg());
    ck_assert_msg(memcmp(&a, &b, sizeof a) == 0, "run --gguf and run of the import read different configs");
    free(text);
    *out = a;
    return c;
}

START_TEST(arch_table_is_one)
{
    ck_assert_str_eq(gguf_arch_decoder("mixtral"), "llama");
    ck_assert_str_eq(gguf_arch_decoder("mistral"), "llama");
    ck_assert_str_eq(gguf_arch_decoder("qwen2_moe"), "qwen2moe");
    ck_assert_str_eq(gguf_arch_decoder("gemma3_text"), "gemma3");
    ck_assert_ptr_null(gguf_arch_decoder("gpt2"));
    ck_assert_int_eq(gguf_arch_known("qwen3moe"), 1);
    ck_assert_int_eq(gguf_arch_known("qwen3_moe"), 0);   /* a Hugging Face spelling: no GGUF names */
    ck_assert_int_eq(gguf_arch_known("gpt2"), 0);
}
END_TEST

START_TEST(config_defaults_and_nulls)
{
    fixture_mem m;
    gguf_file *g = make(&m, "llama", NULL);
    runtime_config rc;
    json_t *c = check_same_config(g, &rc);

    ck_assert_str_eq(json_string_value(json_object_get(c, "architecture")), "llama");
    ck_assert_int_eq(json_integer_value(json_object_get(c, "head_dim")), 16);   /* 64 / 4 */
    ck_assert(json_is_null(json_object_get(c, "sliding_window")));
    ck_assert(json_is_null(json_object_get(c, "rope_scaling")));
    ck_assert(json_is_null(json_object_get(c, "eos_token_id")));
    ck_assert(json_is_true(json_object_get(c, "rope_interleaved")));
    ck_assert(json_is_true(json_object_get(c, "tie_word_embeddings")));
    ck_assert(json_real_value(json_object_get(c, "rope_theta")) == 10000.0);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(c, "source"), "format")), "gguf");
    ck_assert_ptr_null(json_object_get(c, "norm_topk_prob"));
    ck_assert_int_eq(rc.vocab_size, 300);
    ck_assert_int_eq(rc.bos_id, 1);
    ck_assert_int_eq(rc.eos_id, -1);
    json_decref(c);
    gguf_close(g);
    free(m.p);
}
END_TEST

static void partial_rope(gguf_writer *w, const char *a) { set_u32(w, a, "rope.dimension_count", 8); }

/* The importer stored rope_dimension_count but the JSON reader ignored it: an imported model
 * rotated all 16 dims of a head while run --gguf rotated 8. */
START_TEST(config_rope_dimension_count_reaches_both)
{
    fixture_mem m;
    gguf_file *g = make(&m, "qwen2", partial_rope);
    runtime_config rc;
    json_t *c = check_same_config(g, &rc);

    ck_assert_int_eq(json_integer_value(json_object_get(c, "rope_dimension_count")), 8);
    ck_assert_int_eq(rc.n_rot, 8);
    ck_assert_int_eq(rc.head_dim, 16);
    ck_assert_int_eq(rc.rope_interleaved, 0);
    json_decref(c);
    gguf_close(g);
    free(m.p);
}
END_TEST

static void typed_longrope(gguf_writer *w, const char *a)
{
    set_str(w, a, "rope.scaling.type", "longrope");
    set_u32(w, a, "rope.scaling.original_context_length", 64);
    set_f32(w, a, "rope.scaling.attn_factor", 1.25f);
}

/* attn_factor was kept only for the untyped longrope; run --gguf read it always. */
START_TEST(config_typed_longrope_keeps_attn_factor)
{
    fixture_mem m;
    gguf_file *g = make(&m, "phi3", typed_longrope);
    runtime_config rc;
    json_t *c = check_same_config(g, &rc), *rs = json_object_get(c, "rope_scaling");

    ck_assert_str_eq(json_string_value(json_object_get(rs, "rope_type")), "longrope");
    ck_assert(json_real_value(json_object_get(rs, "attn_factor")) == 1.25);
    ck_assert_int_eq(rc.rope_scaling, RUNTIME_ROPE_LONGROPE);
    ck_assert(rc.rope_attn_factor == 1.25);
    ck_assert_int_eq(rc.rope_orig_ctx, 64);
    json_decref(c);
    gguf_close(g);
    free(m.p);
}
END_TEST

static void linear_with_factors(gguf_writer *w, const char *a)
{
    static float f[8] = { 1, 1, 1, 1, 1, 1, 1, 1 };
    uint64_t ne[1] = { 8 };

    set_str(w, a, "rope.scaling.type", "linear");
    set_f32(w, a, "rope.scaling.factor", 2.0f);
    set_u32(w, a, "rope.scaling.original_context_length", 64);
    ck_assert_int_eq(gguf_writer_add_tensor(w, "rope_factors_long.weight", GGML_TYPE_F32, 1, ne, f, sizeof f), 0);
    ck_assert_int_eq(gguf_writer_add_tensor(w, "rope_factors_short.weight", GGML_TYPE_F32, 1, ne, f, sizeof f), 0);
}

/* The factor tensors mean longrope whatever the type says (llama.cpp applies them): the
 * importer used to store the type, run --gguf chose longrope. */
START_TEST(config_rope_factor_tensors_mean_longrope)
{
    fixture_mem m;
    gguf_file *g = make(&m, "phi3", linear_with_factors);
    runtime_config rc;
    json_t *c = check_same_config(g, &rc), *rs = json_object_get(c, "rope_scaling");

    ck_assert_str_eq(json_string_value(json_object_get(rs, "rope_type")), "longrope");
    ck_assert_ptr_null(json_object_get(rs, "factor"));
    ck_assert_int_eq(rc.rope_scaling, RUNTIME_ROPE_LONGROPE);
    json_decref(c);
    gguf_close(g);
    free(m.p);
}
END_TEST

static void moe_no_norm(gguf_writer *w, const char *a)
{
    char k[96];

    set_u32(w, a, "expert_count", 4);
    set_u32(w, a, "expert_used_count", 2);
    set_u32(w, a, "expert_feed_forward_length", 32);
    snprintf(k, sizeof k, "%s.expert_weights_norm", a);
    ck_assert_int_eq(gguf_writer_set_bool(w, k, 0), 0);
}

/* expert_weights_norm was read by run --gguf only; an imported qwen3moe renormalized anyway. */
START_TEST(config_expert_weights_norm_is_stored)
{
    fixture_mem m;
    gguf_file *g = make(&m, "qwen3moe", moe_no_norm);
    runtime_config rc;
    json_t *c = check_same_config(g, &rc);

    ck_assert(json_is_false(json_object_get(c, "norm_topk_prob")));
    ck_assert_int_eq(rc.moe_norm, 0);
    ck_assert_int_eq(rc.n_experts, 4);
    ck_assert_int_eq(rc.expert_ffn_dim, 32);
    json_decref(c);
    gguf_close(g);
    free(m.p);
}
END_TEST

static void window_as_string(gguf_writer *w, const char *a) { set_str(w, a, "attention.sliding_window", "4096"); }
static void nan_eps(gguf_writer *w, const char *a) { set_f32(w, a, "attention.layer_norm_rms_epsilon", NAN); }

/* A present key the reader cannot use is refused, naming it, by the importer and run alike (the
 * importer used to store null or the default and run the model with other values). */
START_TEST(config_refuses_unusable_keys)
{
    static const struct { extra_fn f; const char *expect; } cases[] = {
        { window_as_string, "llama.attention.sliding_window" },
        { nan_eps, "kv 'llama.attention.layer_norm_rms_epsilon': rms norm epsilon nan out of range" },
    };

    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        fixture_mem m;
        gguf_file *g = make(&m, "llama", cases[i].f);
        runtime_config rc;
        json_t *c = NULL;

        ck_assert_int_eq(gguf_config_json(&c, g), MS_EINVALID);
        ck_assert_ptr_null(c);
        ck_assert_msg(strstr(ms_err_msg(), cases[i].expect), "'%s' lacks '%s'", ms_err_msg(), cases[i].expect);
        ck_assert_int_eq(runtime_config_from_gguf(&rc, g), MS_EINVALID);
        ck_assert_msg(strstr(ms_err_msg(), cases[i].expect), "'%s' lacks '%s'", ms_err_msg(), cases[i].expect);
        gguf_close(g);
        free(m.p);
    }
}
END_TEST

/* An architecture mstore does not run still imports (its config says what it is); run refuses. */
START_TEST(config_unsupported_arch_imports_but_does_not_run)
{
    fixture_mem m;
    gguf_file *g = make(&m, "gpt2", NULL);
    runtime_config rc;
    json_t *c;

    ck_assert_int_eq(gguf_config_json(&c, g), 0);
    ck_assert_str_eq(json_string_value(json_object_get(c, "architecture")), "gpt2");
    ck_assert(json_is_false(json_object_get(c, "rope_interleaved")));
    ck_assert_int_eq(runtime_config_from_gguf(&rc, g), MS_EUNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "architecture 'gpt2' is not supported"));
    json_decref(c);
    gguf_close(g);
    free(m.p);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("format_config");
    TCase *tc = tcase_create("gguf_config");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, arch_table_is_one);
    tcase_add_test(tc, config_defaults_and_nulls);
    tcase_add_test(tc, config_rope_dimension_count_reaches_both);
    tcase_add_test(tc, config_typed_longrope_keeps_attn_factor);
    tcase_add_test(tc, config_rope_factor_tensors_mean_longrope);
    tcase_add_test(tc, config_expert_weights_norm_is_stored);
    tcase_add_test(tc, config_refuses_unusable_keys);
    tcase_add_test(tc, config_unsupported_arch_imports_but_does_not_run);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
