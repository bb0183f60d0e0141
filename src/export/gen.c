/* gen.c: a GGUF built from a model that did not come from one (a safetensors or MLX
 * import): metadata from the config blob, tensors under llama.cpp's names, and the vocabulary
 * from tokenizer.json when it is byte-level BPE. llama.cpp's llama family rotates adjacent
 * pairs, so Q and K rows are permuted back from Hugging Face's halves order, as
 * convert_hf_to_gguf does. Types GGUF has no block format for (MLX int4 ...) are refused. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blob/blob.h"
#include "export/export_int.h"
#include "runtime/runtime.h"
#include "tokenizer/tokenizer.h"

typedef struct gen {
    store_model *sm;         /* borrowed: owns the mappings the tensors are read from */
    const manifest *m;
    json_t *config;
    const char *arch;        /* GGUF architecture */
    gguf_writer *w;
    void **copies;           /* permuted Q/K tensors */
    size_t n_copies;
    json_t *tok;             /* tokenizer.json */
} gen;

static json_int_t cfg_int(gen *g, const char *key)
{
    return json_integer_value(json_object_get(g->config, key));
}

static int meta_write(gen *g, const char *model_name)
{
    char k[128];
    int rc = 0;
#define KEY(suffix) (snprintf(k, sizeof k, "%s.%s", g->arch, suffix), k)
    rc |= gguf_writer_set_str(g->w, "general.architecture", g->arch, strlen(g->arch));
    rc |= gguf_writer_set_str(g->w, "general.name", model_name, strlen(model_name));
    rc |= gguf_writer_set_u32(g->w, KEY("context_length"), (uint32_t)cfg_int(g, "max_position_embeddings"));
    rc |= gguf_writer_set_u32(g->w, KEY("embedding_length"), (uint32_t)cfg_int(g, "hidden_size"));
    rc |= gguf_writer_set_u32(g->w, KEY("block_count"), (uint32_t)cfg_int(g, "num_hidden_layers"));
    rc |= gguf_writer_set_u32(g->w, KEY("feed_forward_length"), (uint32_t)cfg_int(g, "intermediate_size"));
    rc |= gguf_writer_set_u32(g->w, KEY("attention.head_count"), (uint32_t)cfg_int(g, "num_attention_heads"));
    rc |= gguf_writer_set_u32(g->w, KEY("attention.head_count_kv"), (uint32_t)cfg_int(g, "num_key_value_heads"));
    rc |= gguf_writer_set_u32(g->w, KEY("attention.key_length"), (uint32_t)cfg_int(g, "head_dim"));
    rc |= gguf_writer_set_u32(g->w, KEY("attention.value_length"), (uint32_t)cfg_int(g, "head_dim"));
    rc |= gguf_writer_set_u32(g->w, KEY("rope.dimension_count"), (uint32_t)cfg_int(g, "head_dim"));
    rc |= gguf_writer_set_u32(g->w, KEY("vocab_size"), (uint32_t)cfg_int(g, "vocab_size"));
    rc |= gguf_writer_set_f32(g->w, KEY("attention.layer_norm_rms_epsilon"),
                              (float)json_number_value(json_object_get(g->config, "rms_norm_eps")));
    rc |= gguf_writer_set_f32(g->w, KEY("rope.freq_base"), (float)json_number_value(json_object_get(g->config, "rope_theta")));
#undef KEY
    return rc ? ms_err(MS_ERROR, "writing metadata: %s", ms_err_msg()) : 0;
}

/* llama.cpp's name for a pre-tokenizer where it differs from the tokenizer module's. */
static const char *gguf_pre_name(const char *pre)
{
    if (!pre)
        return "default";
    if (strcmp(pre, "gpt2") == 0)
        return "gpt-2";
    if (strcmp(pre, "llama3") == 0)
        return "llama-bpe";
    return pre;
}

/* merges from tokenizer.json: "a b" strings or ["a", "b"] pairs, as GGUF's "a b" strings. */
static int merges_write(gen *g)
{
    json_t *merges = json_object_get(json_object_get(g->tok, "model"), "merges");
    size_t nm = json_array_size(merges);
    const char **mstr = calloc(nm ? nm : 1, sizeof *mstr);
    char **owned = calloc(nm ? nm : 1, sizeof *owned);
    int rc = 0;

    if (!mstr || !owned) {
        rc = ms_err(MS_ENOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < nm; i++) {
        json_t *e = json_array_get(merges, i);
        if (json_is_string(e))
            mstr[i] = json_string_value(e);
        else if (json_is_array(e) && json_array_size(e) == 2 && json_is_string(json_array_get(e, 0)) &&
                 json_is_string(json_array_get(e, 1)))
            mstr[i] = owned[i] = ms_strdup_printf("%s %s", json_string_value(json_array_get(e, 0)),
                                                  json_string_value(json_array_get(e, 1)));
        if (!mstr[i]) {
            rc = ms_err(MS_EUNSUPPORTED, "tokenizer.json: merges[%zu] is neither \"a b\" nor [\"a\", \"b\"]", i);
            goto done;
        }
    }
    rc = gguf_writer_set_arr_str(g->w, "tokenizer.ggml.merges", mstr, NULL, nm);
done:
    for (size_t i = 0; owned && i < nm; i++)
        free(owned[i]);
    free(owned);
    free(mstr);
    return rc;
}

/* The vocabulary as the tokenizer module reads it from tokenizer.json (+ tokenizer_config.json,
 * generation_config.json): SentencePiece-style as "llama" with scores, byte-level BPE as "gpt2"
 * with its pre-tokenizer and merges, WordPiece as "bert"; tokens, types, BOS/EOS and whether to
 * add them. Padded to the model's vocab size with unused tokens. A model without a tokenizer
 * llama.cpp can use is written as "no_vocab" (llama.cpp loads it with dummy tokens). */
static int vocab_write(gen *g)
{
    size_t n = (size_t)cfg_int(g, "vocab_size"), nt;
    const char **toks = NULL;
    char **owned = NULL;
    int32_t *types = NULL;
    float *scores = NULL;
    tokenizer *t = NULL;
    int rc = 0, spm, wpm;

    if (!g->tok || runtime_tokenizer_from_model(&t, g->sm) < 0)
        return gguf_writer_set_str(g->w, "tokenizer.ggml.model", "no_vocab", 8);
    spm = tokenizer_kind_get(t) == TOKENIZER_SPM;
    wpm = tokenizer_kind_get(t) == TOKENIZER_WPM;
    nt = tokenizer_n_vocab(t);
    if (nt > n)
        n = nt;
    toks = calloc(n ? n : 1, sizeof *toks);
    owned = calloc(n ? n : 1, sizeof *owned);
    types = calloc(n ? n : 1, sizeof *types);
    scores = calloc(n ? n : 1, sizeof *scores);
    if (!toks || !owned || !types || !scores) {
        rc = ms_err(MS_ENOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        size_t len = 0;
        const char *text = i < nt ? tokenizer_token_text(t, (int32_t)i, &len) : NULL;
        if (text)
            owned[i] = ms_strdup_printf("%.*s", (int)len, text);
        else
            owned[i] = ms_strdup_printf("[PAD%zu]", i);   /* llama.cpp's own padding form */
        if (!owned[i]) {
            rc = ms_err(MS_ENOMEM, "out of memory");
            goto done;
        }
        toks[i] = owned[i];
        types[i] = text ? tokenizer_token_type(t, (int32_t)i) : TOKEN_TYPE_UNUSED;
        scores[i] = text ? tokenizer_token_score(t, (int32_t)i) : -1e9f;
    }
    /* WordPiece: "bert", its texts already in the converter's "▁" form; [CLS] / [SEP] by their
     * own keys, which is what tokenizer_from_gguf reads first */
    if ((rc = gguf_writer_set_str(g->w, "tokenizer.ggml.model", spm ? "llama" : wpm ? "bert" : "gpt2", spm ? 5 : 4)) < 0 ||
        (!spm && !wpm && (rc = gguf_writer_set_str(g->w, "tokenizer.ggml.pre", gguf_pre_name(tokenizer_pre_name(t)),
                                                   strlen(gguf_pre_name(tokenizer_pre_name(t))))) < 0) ||
        (rc = gguf_writer_set_arr_str(g->w, "tokenizer.ggml.tokens", toks, NULL, n)) < 0 ||
        (spm && (rc = gguf_writer_set_arr(g->w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores, n)) < 0) ||
        (rc = gguf_writer_set_arr(g->w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, n)) < 0 ||
        (!spm && !wpm && (rc = merges_write(g)) < 0))
        goto done;
    if (wpm && tokenizer_bos(t) != TOKEN_NONE && (rc = gguf_writer_set_u32(g->w, "tokenizer.ggml.cls_token_id", (uint32_t)tokenizer_bos(t))) < 0)
        goto done;
    if (wpm && tokenizer_eos(t) != TOKEN_NONE && (rc = gguf_writer_set_u32(g->w, "tokenizer.ggml.seperator_token_id", (uint32_t)tokenizer_eos(t))) < 0)
        goto done;
    if (tokenizer_bos(t) != TOKEN_NONE && (rc = gguf_writer_set_u32(g->w, "tokenizer.ggml.bos_token_id", (uint32_t)tokenizer_bos(t))) < 0)
        goto done;
    if (tokenizer_eos(t) != TOKEN_NONE && (rc = gguf_writer_set_u32(g->w, "tokenizer.ggml.eos_token_id", (uint32_t)tokenizer_eos(t))) < 0)
        goto done;
    if (tokenizer_unk(t) != TOKEN_NONE && (rc = gguf_writer_set_u32(g->w, "tokenizer.ggml.unknown_token_id", (uint32_t)tokenizer_unk(t))) < 0)
        goto done;
    if ((rc = gguf_writer_set_bool(g->w, "tokenizer.ggml.add_bos_token", tokenizer_adds_bos(t))) < 0)
        goto done;
    rc = gguf_writer_set_bool(g->w, "tokenizer.ggml.add_eos_token", tokenizer_adds_eos(t));
done:
    for (size_t i = 0; owned && i < n; i++)
        free(owned[i]);
    MS_FREE_ALL(owned, toks, types, scores);
    tokenizer_free(t);
    return rc;
}

/* out rows [h][2i + j] = in rows [h][j * hd/2 + i]: Hugging Face's rotate-halves order back to
 * GGUF's adjacent pairs, per head of head_dim rows. */
static void *permute_rows(const uint8_t *src, uint64_t rows, uint64_t row_bytes, uint64_t head_dim)
{
    uint8_t *dst = malloc(rows * row_bytes);
    uint64_t half = head_dim / 2;

    if (!dst)
        return NULL;
    for (uint64_t h = 0; h < rows / head_dim; h++)
        for (uint64_t i = 0; i < half; i++)
            for (uint64_t j = 0; j < 2; j++)
                memcpy(dst + (h * head_dim + 2 * i + j) * row_bytes, src + (h * head_dim + j * half + i) * row_bytes, row_bytes);
    return dst;
}

static int tensor_write(gen *g, const manifest_layer *l, const st_file *st, const st_tensor *t)
{
    static const struct { st_dtype st; int ggml; } types[] = {
        { ST_F32, GGML_TYPE_F32 }, { ST_F16, GGML_TYPE_F16 }, { ST_BF16, GGML_TYPE_BF16 },
    };
    char name[600];
    uint64_t ne[GGUF_MAX_DIMS];
    const void *data = t->data;
    int type = -1;

    tensor_blob_meta tm;
    int rc;

    if ((rc = tensor_blob_meta_get(&tm, st, t, l->name, l->digest)) < 0)
        return rc;
    /* A quantized weight's blob holds its .scale/.bias too, so it has several tensors like an
     * expert pack: name the quantization first, it is the reason that applies to both. */
    if (tm.quant_type)
        return ms_err(MS_EUNSUPPORTED,
                      "tensor '%s' (%s): %s quantization (group size %d) has no GGUF equivalent; "
                      "export the float model",
                      t->name, l->digest, tm.quant_type, tm.group_size);
    if (st_count(st) != 1)
        return ms_err(MS_EUNSUPPORTED,
                      "tensor '%s' (%s): an expert pack has no GGUF equivalent; export the float model", t->name,
                      l->digest);
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (types[i].st == t->dtype)
            type = types[i].ggml;
    if (type < 0 || t->n_dims < 1 || t->n_dims > GGUF_MAX_DIMS)
        return ms_err(MS_EUNSUPPORTED, "tensor '%s': dtype %s with %d dims cannot be written to GGUF", t->name,
                      st_dtype_name(t->dtype), t->n_dims);
    if (gguf_name_from_hf(name, sizeof name, g->arch, t->name) < 0)
        return ms_err(MS_EUNSUPPORTED, "tensor '%s' has no GGUF name for architecture '%s'", t->name, g->arch);
    for (int d = 0; d < t->n_dims; d++)
        ne[d] = t->shape[t->n_dims - 1 - d];
    if (strcmp(g->arch, "llama") == 0 && (strstr(t->name, "self_attn.q_proj.") || strstr(t->name, "self_attn.k_proj."))) {
        uint64_t hd = (uint64_t)cfg_int(g, "head_dim"), rows = t->shape[0];
        void *p;
        if (hd < 2 || hd % 2 || rows % hd)
            return ms_err(MS_EINVALID, "tensor '%s': %llu rows do not split into heads of %llu", t->name,
                          (unsigned long long)rows, (unsigned long long)hd);
        if (!(p = permute_rows(t->data, rows, t->nbytes / rows, hd)))
            return ms_err(MS_ENOMEM, "out of memory");
        g->copies[g->n_copies++] = p;
        data = p;
    }
    return gguf_writer_add_tensor(g->w, name, type, t->n_dims, ne, data, t->nbytes);
}

static int tensors_write(gen *g)
{
    size_t n = g->m->n_layers;
    int rc = 0;

    g->copies = calloc(n + 1, sizeof *g->copies);
    if (!g->copies)
        return ms_err(MS_ENOMEM, "out of memory");
    for (size_t i = 0; i < n && rc == 0; i++) {
        const manifest_layer *l = &g->m->layers[i];
        const st_file *st;
        if (strcmp(l->media_type, MT_TENSOR) != 0)
            continue;
        if ((rc = store_model_tensors(&st, g->sm, l)) < 0)
            break;
        for (size_t k = 0; k < st_count(st) && rc == 0; k++)
            rc = tensor_write(g, l, st, st_at(st, k));
    }
    return rc;
}

int export_gguf_generate(store_model *sm, json_t *config, const char *model_name, const char *out_path,
                         export_result *res)
{
    static const struct { const char *from, *to; } archs[] = {
        { "llama", "llama" }, { "mistral", "llama" }, { "qwen2", "qwen2" }, { "qwen3", "qwen3" },
    };
    const char *arch = json_string_value(json_object_get(config, "architecture"));
    const manifest *m = store_model_manifest(sm);
    const manifest_layer *tl = manifest_layer_find(m, MT_TOKENIZER, NULL);
    gen g = { .sm = sm, .m = m, .config = config };
    ms_map out = { 0 };
    int rc;

    for (size_t i = 0; arch && i < sizeof archs / sizeof archs[0]; i++)
        if (strcmp(arch, archs[i].from) == 0)
            g.arch = archs[i].to;
    if (!g.arch)
        return ms_err(MS_EUNSUPPORTED, "export to GGUF of architecture '%s' is not supported (supported: llama, "
                      "mistral, qwen2, qwen3)", arch ? arch : "unknown");
    if (tl) {
        const uint8_t *data;
        size_t len;
        json_error_t jerr;
        if ((rc = store_model_layer_bytes(&data, &len, sm, tl)) < 0)
            return rc;
        g.tok = json_loadb((const char *)data, len, 0, &jerr);
    }
    if ((rc = gguf_writer_new(&g.w, 3, 32)) < 0)
        goto done;
    if ((rc = meta_write(&g, model_name)) < 0 || (rc = vocab_write(&g)) < 0 || (rc = tensors_write(&g)) < 0 ||
        (rc = gguf_writer_write_file(g.w, out_path)) < 0)
        goto done;
    if ((rc = ms_map_open(&out, out_path)) < 0)
        goto done;
    blob_digest_buf(res->digest, out.data, out.size);
    res->nbytes = out.size;
    res->identical = 0;
    ms_map_close(&out);
done:
    for (size_t i = 0; i < g.n_copies; i++)
        free(g.copies[i]);
    free(g.copies);
    json_decref(g.tok);
    gguf_writer_free(g.w);
    return rc;
}
