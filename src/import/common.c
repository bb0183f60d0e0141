/* common.c: what every importer shares: the config blob, the manifest commit, dispatch, the
 * store names of MoE tensors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blob/blob.h"
#include "import/import_int.h"

static json_t *get_int(json_t *c, const char *key, json_int_t dflt)
{
    json_t *v = json_object_get(c, key);
    return json_is_integer(v) ? json_integer(json_integer_value(v)) : dflt < 0 ? json_null() : json_integer(dflt);
}

static json_t *get_real(json_t *c, const char *key, double dflt)
{
    json_t *v = json_object_get(c, key);
    return json_is_number(v) ? json_real(json_number_value(v)) : json_real(dflt);
}

int import_config_store(store_txn *t, manifest *m, json_t *config)
{
    char *text = json_dumps(config, JSON_COMPACT | JSON_SORT_KEYS);
    ms_digest digest;
    int rc;

    if (!text)
        return ms_err(MS_ENOMEM, "out of memory");
    rc = store_txn_blob_put(t, digest, text, strlen(text));
    if (rc == 0)
        rc = manifest_config_set(m, MT_CONFIG, digest, strlen(text));
    free(text);
    return rc;
}

/* Gemma3TextConfig's defaults (transformers): a multimodal checkpoint's text_config states only
 * what differs from them, and its readers fill in the rest, so this import must too. */
static const char gemma3_text_defaults[] =
    "{\"vocab_size\": 262208, \"hidden_size\": 2304, \"intermediate_size\": 9216, \"num_hidden_layers\": 26,"
    " \"num_attention_heads\": 8, \"num_key_value_heads\": 4, \"head_dim\": 256,"
    " \"hidden_activation\": \"gelu_pytorch_tanh\", \"max_position_embeddings\": 131072, \"rms_norm_eps\": 1e-6,"
    " \"pad_token_id\": 0, \"eos_token_id\": 1, \"bos_token_id\": 2, \"tie_word_embeddings\": true,"
    " \"rope_theta\": 1000000.0, \"query_pre_attn_scalar\": 256, \"sliding_window\": 4096,"
    " \"final_logit_softcapping\": null, \"rope_scaling\": null, \"rope_local_base_freq\": 10000.0,"
    " \"sliding_window_pattern\": 6}";

/* The text model's config of a multimodal checkpoint (config.json with a text_config and no
 * hidden_size of its own), as a text-only config.json would say it: the text_config's keys, then
 * the top level's (token ids, tie_word_embeddings), then the text model's defaults. NULL when hf
 * is not such a checkpoint; MS_ENOMEM through *rc. */
static json_t *text_config_flatten(json_t *hf, int *rc)
{
    json_t *text = json_object_get(hf, "text_config"), *flat, *v;
    const char *key, *type;

    *rc = 0;
    if (!json_is_object(text) || json_object_get(hf, "hidden_size"))
        return NULL;
    type = json_string_value(json_object_get(text, "model_type"));
    if (!type && json_is_string(json_object_get(hf, "model_type")) &&
        strcmp(json_string_value(json_object_get(hf, "model_type")), "gemma3") == 0)
        type = "gemma3_text";
    flat = type && strcmp(type, "gemma3_text") == 0 ? json_loads(gemma3_text_defaults, 0, NULL) : json_object();
    if (!flat) {
        *rc = ms_err(MS_ENOMEM, "out of memory");
        return NULL;
    }
    json_object_foreach(hf, key, v)
        if (strcmp(key, "text_config") != 0 && strcmp(key, "vision_config") != 0 && strcmp(key, "model_type") != 0 &&
            strcmp(key, "architectures") != 0 && json_object_set(flat, key, v) < 0)
            *rc = ms_err(MS_ENOMEM, "out of memory");
    if (json_object_update(flat, text) < 0 || (type && json_object_set_new(flat, "model_type", json_string(type)) < 0))
        *rc = ms_err(MS_ENOMEM, "out of memory");
    if (*rc < 0) {
        json_decref(flat);
        return NULL;
    }
    return flat;
}

int import_config_commit(store_txn *t, manifest *m, json_t *hf_in, json_t *dtypes, const char *format,
                         const char *source_path, json_t *extra)
{
    json_t *c = json_object(), *v, *flat, *hf;
    const char *arch;
    const char *base = strrchr(source_path, '/');
    json_int_t hidden, heads;
    int rc;

    if (!c)
        return ms_err(MS_ENOMEM, "out of memory");
    if (!(flat = text_config_flatten(hf_in, &rc)) && rc < 0) {
        json_decref(c);
        return rc;
    }
    hf = flat ? flat : hf_in;
    arch = json_string_value(json_object_get(hf, "model_type"));
    if (!arch) {
        json_t *a = json_array_get(json_object_get(hf, "architectures"), 0);
        arch = json_is_string(a) ? json_string_value(a) : "unknown";
    }
    json_object_set_new(c, "architecture", json_string(arch));
    json_object_set_new(c, "hidden_size", get_int(hf, "hidden_size", -1));
    json_object_set_new(c, "num_hidden_layers", get_int(hf, "num_hidden_layers", -1));
    json_object_set_new(c, "num_attention_heads", get_int(hf, "num_attention_heads", -1));
    heads = json_integer_value(json_object_get(hf, "num_attention_heads"));
    hidden = json_integer_value(json_object_get(hf, "hidden_size"));
    json_object_set_new(c, "num_key_value_heads", get_int(hf, "num_key_value_heads", heads > 0 ? heads : -1));
    json_object_set_new(c, "head_dim", get_int(hf, "head_dim", heads > 0 && hidden > 0 ? hidden / heads : -1));
    json_object_set_new(c, "intermediate_size", get_int(hf, "intermediate_size", -1));
    json_object_set_new(c, "vocab_size", get_int(hf, "vocab_size", -1));
    json_object_set_new(c, "max_position_embeddings", get_int(hf, "max_position_embeddings", -1));
    json_object_set_new(c, "rms_norm_eps", get_real(hf, "rms_norm_eps", 1e-6));
    json_object_set_new(c, "rope_theta", get_real(hf, "rope_theta", 10000.0));
    v = json_object_get(hf, "rope_scaling");
    json_object_set(c, "rope_scaling", json_is_object(v) ? v : json_null());
    json_object_set_new(c, "rope_interleaved", json_false());   /* HF weights rotate halves */
    json_object_set_new(c, "tie_word_embeddings", json_boolean(json_is_true(json_object_get(hf, "tie_word_embeddings"))));
    json_object_set_new(c, "sliding_window", get_int(hf, "sliding_window", -1));
    json_object_set_new(c, "num_experts", get_int(hf, json_object_get(hf, "num_local_experts") ? "num_local_experts" : "num_experts", -1));
    json_object_set_new(c, "num_experts_per_tok", get_int(hf, "num_experts_per_tok", -1));
    v = json_object_get(hf, "bos_token_id");
    json_object_set(c, "bos_token_id", v ? v : json_null());
    v = json_object_get(hf, "eos_token_id");
    json_object_set(c, "eos_token_id", v ? v : json_null());
    json_object_set_new(c, "tokenizer", manifest_layer_find(m, MT_TOKENIZER, NULL)
                                            ? json_pack("{s:s, s:n}", "kind", "tokenizer.json", "pre")
                                            : json_null());
    json_object_set(c, "quantization", dtypes);
    json_object_set_new(c, "source", json_pack("{s:s, s:s}", "format", format, "file", base ? base + 1 : source_path));
    json_object_set(c, "hf_config", hf);   /* everything else config.json said, kept whole */
    if (flat)   /* the checkpoint's own config, vision tower included, for when it is run */
        json_object_set(c, "hf_multimodal_config", hf_in);
    if (extra)
        json_object_update(c, extra);
    rc = import_config_store(t, m, c);
    json_decref(c);
    json_decref(flat);
    return rc;
}

/* An import committed under `name`: `build`'s blobs and manifest in a transaction of their own. */
static int import_named(store *s, int (*build)(manifest **, store_txn *, const char *, const char *, const import_opts *),
                        const char *path, const model_name *name, const import_opts *o, ms_digest digest_out)
{
    manifest *m = NULL;
    store_txn *t = NULL;
    int rc;

    if ((rc = store_txn_begin(&t, s)) < 0)
        return rc;
    if ((rc = build(&m, t, path, NULL, o)) == 0)
        rc = store_txn_commit(t, name, m, digest_out);   /* ends t */
    else
        store_txn_abort(t);
    manifest_free(m);
    return rc;
}

int import_hf_dir(store *s, const char *dir, const model_name *name, const import_opts *o, ms_digest digest_out)
{
    return import_named(s, import_hf_manifest, dir, name, o, digest_out);
}

int import_path(store *s, const char *path, const model_name *name, const import_opts *o, ms_digest digest_out)
{
    ms_map m;
    uint32_t magic = 0;
    int rc, is_gguf;

    if (ms_is_dir(path))
        return import_hf_dir(s, path, name, o, digest_out);
    if ((rc = ms_map_open(&m, path)) < 0)
        return rc;
    is_gguf = m.size >= 4 && memcmp(m.data, "GGUF", 4) == 0;
    for (size_t i = 0; i < 4 && i < m.size; i++)
        magic |= (uint32_t)m.data[i] << (8 * i);
    ms_map_close(&m);
    if (is_gguf)
        return import_named(s, import_gguf_manifest, path, name, o, digest_out);
    return ms_err(MS_EINVALID, "%s: magic 0x%08x: not a GGUF file (0x%08x), nor a model directory", path, magic,
                  GGUF_MAGIC);
}

/* ---------------------------------------------------------------- MoE tensor names */

/* Digits at *p as a number (at most 9 of them), *p moved past them; -1 when there are none. */
static long take_num(const char **p)
{
    long v = 0;
    int n = 0;

    while (**p >= '0' && **p <= '9' && n < 9)
        v = v * 10 + (*(*p)++ - '0'), n++;
    return n && !(**p >= '0' && **p <= '9') ? v : -1;
}

/* Hugging Face's MoE tensors under the store's names (those of a GGUF import, import/names.c):
 *   model.layers.L.block_sparse_moe.experts.E.{w1,w3,w2}.weight (Mixtral) and
 *   model.layers.L.mlp.experts.E.{gate,up,down}_proj.weight (Qwen2/3-MoE): expert E of
 *     model.layers.L.mlp.experts.{gate,up,down}_proj.weight [n_experts][rows][cols], stacked in
 *     expert order, in the pack model.layers.L.mlp.experts;
 *   model.layers.L.block_sparse_moe.gate.weight: the router, model.layers.L.mlp.gate.weight;
 *   model.layers.L.mlp.gate.e_score_correction_bias (DeepSeek V3's selection bias):
 *     model.layers.L.mlp.gate.e_score_correction.bias, a GGUF's exp_probs_b.bias;
 *   model.layers.L.mlp.shared_expert.*: model.layers.L.mlp.shared_experts.*, in the pack
 *     model.layers.L.mlp.shared_experts (Qwen2-MoE);
 *   model.layers.L.{block_sparse_moe,mlp}.switch_mlp.X (mlx-lm, whose experts come stacked
 *     already, with their .scales / .biases): model.layers.L.mlp.experts.X, in the same pack.
 * A multimodal checkpoint's text model (Gemma 3's Gemma3ForConditionalGeneration) is named as the
 * text-only one: language_model.model.X and model.language_model.X are model.X, and
 * language_model.lm_head.X is lm_head.X; its vision tower and projector keep their names.
 * Every other tensor keeps its name. *expert is E for one expert of a tensor to stack, else -1;
 * pack is "" for a tensor with a blob of its own. hf.c and mlx.c name tensors only through this. */
void import_moe_name(const char *in, char *out, size_t out_len, char *pack, size_t pack_len, long *expert)
{
    static const struct { const char *from, *to; } text[] = {
        { "language_model.model.", "model." },
        { "model.language_model.", "model." },
        { "language_model.lm_head.", "lm_head." },
    };
    char canon[512];
    const char *name = in;

    for (size_t k = 0; k < sizeof text / sizeof text[0]; k++)
        if (strncmp(in, text[k].from, strlen(text[k].from)) == 0) {
            snprintf(canon, sizeof canon, "%s%s", text[k].to, in + strlen(text[k].from));
            name = canon;
            break;
        }
    static const struct { const char *hf, *store; } kinds[] = {
        { "w1.weight", "gate_proj.weight" }, { "w3.weight", "up_proj.weight" }, { "w2.weight", "down_proj.weight" },
        { "gate_proj.weight", "gate_proj.weight" }, { "up_proj.weight", "up_proj.weight" },
        { "down_proj.weight", "down_proj.weight" },
    };
    const char *p = name + 13, *rest;
    long layer, e;
    int mixtral;

    snprintf(out, out_len, "%s", name);
    pack[0] = '\0';
    *expert = -1;
    if (strncmp(name, "model.layers.", 13) != 0 || (layer = take_num(&p)) < 0 || *p++ != '.')
        return;
    if (strcmp(p, "mlp.gate.e_score_correction_bias") == 0) {   /* DeepSeek V3's: a GGUF's exp_probs_b.bias */
        snprintf(out, out_len, "model.layers.%ld.mlp.gate.e_score_correction.bias", layer);
        return;
    }
    if (strcmp(p, "block_sparse_moe.gate.weight") == 0) {
        snprintf(out, out_len, "model.layers.%ld.mlp.gate.weight", layer);
        return;
    }
    if (strncmp(p, "mlp.shared_expert.", 18) == 0) {
        snprintf(out, out_len, "model.layers.%ld.mlp.shared_experts.%s", layer, p + 18);
        snprintf(pack, pack_len, "model.layers.%ld.mlp.shared_experts", layer);
        return;
    }
    for (int k = 0; k < 2; k++) {
        const char *pre = k ? "mlp.switch_mlp." : "block_sparse_moe.switch_mlp.";
        if (strncmp(p, pre, strlen(pre)) == 0 && p[strlen(pre)]) {
            snprintf(out, out_len, "model.layers.%ld.mlp.experts.%s", layer, p + strlen(pre));
            snprintf(pack, pack_len, "model.layers.%ld.mlp.experts", layer);
            return;
        }
    }
    mixtral = strncmp(p, "block_sparse_moe.experts.", 25) == 0;
    if (!mixtral && strncmp(p, "mlp.experts.", 12) != 0)
        return;
    rest = p + (mixtral ? 25 : 12);
    if ((e = take_num(&rest)) < 0 || *rest++ != '.')
        return;
    for (size_t k = mixtral ? 0 : 3; k < (mixtral ? 3u : 6u); k++)
        if (strcmp(rest, kinds[k].hf) == 0) {
            snprintf(out, out_len, "model.layers.%ld.mlp.experts.%s", layer, kinds[k].store);
            snprintf(pack, pack_len, "model.layers.%ld.mlp.experts", layer);
            *expert = e;
            return;
        }
}
