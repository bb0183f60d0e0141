/* gguf_load.c: a tokenizer from GGUF metadata (the tokenizer.ggml.* keys llama.cpp reads). */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer_int.h"

#define KEY_MODEL "tokenizer.ggml.model"
#define KEY_TOKENS "tokenizer.ggml.tokens"
#define KEY_SCORES "tokenizer.ggml.scores"
#define KEY_TYPES "tokenizer.ggml.token_type"
#define KEY_MERGES "tokenizer.ggml.merges"
#define KEY_PRE "tokenizer.ggml.pre"

/* Element i of a fixed-size array, read little-endian (the data may be unaligned). */
static int arr_float(double *out, uint32_t type, const uint8_t *p, uint64_t i)
{
    if (type == GGUF_TYPE_FLOAT32) {
        float f;
        memcpy(&f, p + i * 4, 4);
        *out = f;
    } else if (type == GGUF_TYPE_FLOAT64) {
        memcpy(out, p + i * 8, 8);
    } else {
        return -1;
    }
    return 0;
}

static int arr_int(int64_t *out, uint32_t type, const uint8_t *p, uint64_t i)
{
    switch (type) {
    case GGUF_TYPE_INT8: *out = (int8_t)p[i]; return 0;
    case GGUF_TYPE_UINT8: *out = p[i]; return 0;
    case GGUF_TYPE_INT16: { int16_t v; memcpy(&v, p + i * 2, 2); *out = v; return 0; }
    case GGUF_TYPE_UINT16: { uint16_t v; memcpy(&v, p + i * 2, 2); *out = v; return 0; }
    case GGUF_TYPE_INT32: { int32_t v; memcpy(&v, p + i * 4, 4); *out = v; return 0; }
    case GGUF_TYPE_UINT32: { uint32_t v; memcpy(&v, p + i * 4, 4); *out = v; return 0; }
    case GGUF_TYPE_INT64: { int64_t v; memcpy(&v, p + i * 8, 8); *out = v; return 0; }
    case GGUF_TYPE_UINT64: { uint64_t v; memcpy(&v, p + i * 8, 8); *out = v > INT64_MAX ? -1 : (int64_t)v; return 0; }
    default: return -1;
    }
}

/* A fixed-size array that must have n elements; NULL data (and 0) when the key is absent. */
static int arr_fixed(const gguf_file *g, const char *key, uint64_t n, uint32_t *type, const uint8_t **data,
                     const char *what)
{
    uint64_t count;
    int rc;

    *data = NULL;
    if (gguf_kv_find(g, key) < 0)
        return 0;
    if ((rc = gguf_arr_data(g, key, type, data, &count)) < 0)
        return rc;
    if (count != n)
        return ms_err(MS_EINVALID, "%s: %s has %llu entries, %s has %llu", what, key, (unsigned long long)count,
                      KEY_TOKENS, (unsigned long long)n);
    return 0;
}

/* The length of the string array `key`: MS_ENOTFOUND when absent (`need` adds who needs it),
 * MS_EINVALID when its elements are not strings. */
static int arr_strings(const gguf_file *g, const char *key, const char *need, uint64_t *n, const char *what)
{
    uint32_t etype;
    int rc;

    if (gguf_kv_find(g, key) < 0)
        return ms_err(MS_ENOTFOUND, "%s: %s not found%s", what, key, need);
    if ((rc = gguf_get_arr(g, key, &etype, n)) < 0)
        return rc;
    if (etype != GGUF_TYPE_STRING)
        return ms_err(MS_EINVALID, "%s: %s is an array of %s, expected string", what, key,
                      gguf_type_name(etype) ? gguf_type_name(etype) : "?");
    return 0;
}

/* A special token id: absent keeps the default; 0xFFFFFFFF or -1 (as converters write "none")
 * is TOKEN_NONE; anything else must be a token. */
static int special_id(const gguf_file *g, const char *key, uint64_t n_vocab, int32_t *id, const char *what)
{
    int64_t v;
    int rc;

    if (gguf_kv_find(g, key) < 0)
        return 0;
    if ((rc = gguf_get_int(g, key, &v)) < 0)
        return rc;
    if (v == -1 || v == 0xFFFFFFFFll)
        *id = TOKEN_NONE;
    else if (v < 0 || (uint64_t)v >= n_vocab)
        return ms_err(MS_EINVALID, "%s: %s: token id %lld out of range (vocab has %llu tokens)", what, key,
                      (long long)v, (unsigned long long)n_vocab);
    else
        *id = (int32_t)v;
    return 0;
}

static int opt_bool(const gguf_file *g, const char *key, int *v)
{
    return gguf_kv_find(g, key) < 0 ? 0 : gguf_get_bool(g, key, v);
}

static int read_specials(const gguf_file *g, uint64_t n, tokenizer_special *sp, char **name_out, const char *what)
{
    static const struct { const char *key; size_t off; } ids[] = {
        { "tokenizer.ggml.bos_token_id", offsetof(tokenizer_special, bos) },
        { "tokenizer.ggml.eos_token_id", offsetof(tokenizer_special, eos) },
        { "tokenizer.ggml.unknown_token_id", offsetof(tokenizer_special, unk) },
        { "tokenizer.ggml.padding_token_id", offsetof(tokenizer_special, pad) },
        { "tokenizer.ggml.eot_token_id", offsetof(tokenizer_special, eot) },
        { "tokenizer.ggml.eom_token_id", offsetof(tokenizer_special, eom) },
    };
    const char *s;
    size_t len;
    int rc;

    for (size_t i = 0; i < sizeof ids / sizeof *ids; i++)
        if ((rc = special_id(g, ids[i].key, n, (int32_t *)((char *)sp + ids[i].off), what)) < 0)
            return rc;
    if ((rc = opt_bool(g, "tokenizer.ggml.add_bos_token", &sp->add_bos)) < 0 ||
        (rc = opt_bool(g, "tokenizer.ggml.add_eos_token", &sp->add_eos)) < 0 ||
        (rc = opt_bool(g, "tokenizer.ggml.add_space_prefix", &sp->add_space_prefix)) < 0)
        return rc;
    if (gguf_kv_find(g, "general.name") >= 0 && gguf_get_str(g, "general.name", &s, &len) == 0) {
        if (!(*name_out = malloc(len + 1)))
            return ms_err(MS_ENOMEM, "%s: out of memory", what);
        memcpy(*name_out, s, len);
        (*name_out)[len] = '\0';
        sp->model_name = *name_out;
    }
    return 0;
}

/* The BPE half of tokenizer_from_gguf: merges, pre-tokenizer, specials with the "gpt2"
 * defaults and the pre-tokenizer's add_bos, then what the file states. */
static int load_bpe(tokenizer **out, const gguf_file *g, uint64_t n, const char **texts, const size_t *lens,
                    const int32_t *types, const char *what)
{
    const char **merges = NULL, *pre_s;
    size_t *mlens = NULL, pre_len;
    char pre[128] = "default", *name = NULL;
    uint64_t n_merges = 0;
    int ignore_merges, add_bos, rc;
    tokenizer_special sp;
    pretok *p = NULL;

    if (gguf_kv_find(g, KEY_PRE) >= 0) {
        if ((rc = gguf_get_str(g, KEY_PRE, &pre_s, &pre_len)) < 0)
            goto done;
        if (pre_len >= sizeof pre || memchr(pre_s, 0, pre_len)) {
            rc = ms_err(MS_EUNSUPPORTED, "%s: %s: unknown pre-tokenizer '%.*s'", what, KEY_PRE,
                        (int)(pre_len > 64 ? 64 : pre_len), pre_s);
            goto done;
        }
        memcpy(pre, pre_s, pre_len);
        pre[pre_len] = '\0';
    }
    /* Refuse an unknown pre-tokenizer before reading 100k merges. */
    if ((rc = pretok_new(&p, pre, &ignore_merges, &add_bos)) < 0) {
        ms_err_ctx("%s: %s", what, KEY_PRE);
        goto done;
    }
    if ((rc = arr_strings(g, KEY_MERGES, " (tokenizer 'gpt2' needs it)", &n_merges, what)) < 0)
        goto done;
    /* gguf_get_arr bounded the count by the bytes of the file: each string takes 8 bytes or more */
    merges = malloc((n_merges ? n_merges : 1) * sizeof *merges);
    mlens = malloc((n_merges ? n_merges : 1) * sizeof *mlens);
    if (!merges || !mlens) {
        rc = ms_err(MS_ENOMEM, "%s: out of memory for %llu merges", what, (unsigned long long)n_merges);
        goto done;
    }
    for (uint64_t i = 0; i < n_merges; i++)
        if ((rc = gguf_arr_str(g, KEY_MERGES, i, &merges[i], &mlens[i])) < 0)
            goto done;
    tokenizer_special_init_bpe(&sp);
    sp.add_bos = add_bos;
    if ((rc = read_specials(g, n, &sp, &name, what)) < 0)
        goto done;
    if ((rc = tokenizer_new_bpe(out, n, texts, lens, types, n_merges, merges, mlens, pre, &sp)) < 0)
        ms_err_ctx("%s", what);
done:
    pretok_free(p);
    MS_FREE_ALL(merges, mlens, name);
    return rc;
}

/* The WordPiece half: llama.cpp's "bert" defaults (each one only when the vocab has that id),
 * then what the file states; [CLS] / [SEP] by their own keys when present. */
static int load_wpm(tokenizer **out, const gguf_file *g, uint64_t n, const char **texts, const size_t *lens,
                    const int32_t *types, const char *what)
{
    tokenizer_special sp;
    char *name = NULL;
    int32_t *ids[] = { &sp.bos, &sp.eos, &sp.unk, &sp.pad };
    int rc;

    tokenizer_special_init_wpm(&sp);
    for (size_t i = 0; i < sizeof ids / sizeof *ids; i++)
        if (*ids[i] != TOKEN_NONE && (uint64_t)*ids[i] >= n)
            *ids[i] = TOKEN_NONE;
    if ((rc = read_specials(g, n, &sp, &name, what)) < 0 ||
        (rc = special_id(g, "tokenizer.ggml.cls_token_id", n, &sp.bos, what)) < 0 ||
        (rc = special_id(g, "tokenizer.ggml.seperator_token_id", n, &sp.eos, what)) < 0)
        goto done;
    if ((rc = tokenizer_new_wpm(out, n, texts, lens, types, NULL, &sp)) < 0)
        ms_err_ctx("%s", what);
done:
    free(name);
    return rc;
}

int tokenizer_from_gguf(tokenizer **out, const gguf_file *g, const char *what)
{
    const char **texts = NULL;
    size_t *lens = NULL;
    float *scores = NULL;
    int32_t *types = NULL;
    char *name = NULL;
    const uint8_t *sdata, *tdata;
    uint32_t stype = 0, ttype = 0;
    uint64_t n = 0;
    const char *model;
    size_t model_len;
    tokenizer_special sp;
    int rc, is_bpe = 0, is_wpm = 0;

    *out = NULL;
    if (gguf_kv_find(g, KEY_MODEL) < 0) {
        rc = ms_err(MS_ENOTFOUND, "%s: no tokenizer (%s not found)", what, KEY_MODEL);
        goto done;
    }
    if ((rc = gguf_get_str(g, KEY_MODEL, &model, &model_len)) < 0)
        goto done;
    if (model_len == 4 && memcmp(model, "gpt2", 4) == 0) {
        is_bpe = 1;
    } else if (model_len == 4 && memcmp(model, "bert", 4) == 0) {
        is_wpm = 1;
    } else if (model_len != 5 || memcmp(model, "llama", 5) != 0) {
        rc = ms_err(MS_EUNSUPPORTED, "%s: tokenizer '%.*s' is not supported (supported: llama, gpt2, bert)", what,
                    (int)(model_len > 64 ? 64 : model_len), model);
        goto done;
    }
    if ((rc = arr_strings(g, KEY_TOKENS, "", &n, what)) < 0)
        goto done;
    if (n == 0 || n > TOKENIZER_MAX_VOCAB) {
        rc = ms_err(MS_EINVALID, "%s: %s has %llu entries, expected 1..%u", what, KEY_TOKENS,
                    (unsigned long long)n, (unsigned)TOKENIZER_MAX_VOCAB);
        goto done;
    }
    if ((rc = arr_fixed(g, KEY_SCORES, n, &stype, &sdata, what)) < 0 ||
        (rc = arr_fixed(g, KEY_TYPES, n, &ttype, &tdata, what)) < 0)
        goto done;
    texts = malloc(n * sizeof *texts);
    lens = malloc(n * sizeof *lens);
    scores = calloc(n, sizeof *scores);
    types = malloc(n * sizeof *types);
    if (!texts || !lens || !scores || !types) {
        rc = ms_err(MS_ENOMEM, "%s: out of memory for %llu tokens", what, (unsigned long long)n);
        goto done;
    }
    for (uint64_t i = 0; i < n; i++) {
        double f = 0;
        int64_t ty = TOKEN_TYPE_NORMAL;

        if ((rc = gguf_arr_str(g, KEY_TOKENS, i, &texts[i], &lens[i])) < 0)
            goto done;
        if (sdata && arr_float(&f, stype, sdata, i) < 0) {
            rc = ms_err(MS_EINVALID, "%s: %s is an array of %s, expected f32", what, KEY_SCORES,
                        gguf_type_name(stype) ? gguf_type_name(stype) : "?");
            goto done;
        }
        if (tdata && arr_int(&ty, ttype, tdata, i) < 0) {
            rc = ms_err(MS_EINVALID, "%s: %s is an array of %s, expected integers", what, KEY_TYPES,
                        gguf_type_name(ttype) ? gguf_type_name(ttype) : "?");
            goto done;
        }
        if (ty < TOKEN_TYPE_UNDEFINED || ty > TOKEN_TYPE_BYTE) {
            rc = ms_err(MS_EINVALID, "%s: %s[%llu] = %lld out of range (0..6)", what, KEY_TYPES,
                        (unsigned long long)i, (long long)ty);
            goto done;
        }
        scores[i] = (float)f;
        types[i] = (int32_t)ty;
    }
    if (is_bpe || is_wpm) {
        rc = (is_bpe ? load_bpe : load_wpm)(out, g, n, texts, lens, types, what);
        goto done;
    }
    tokenizer_special_init_spm(&sp);
    if ((rc = read_specials(g, n, &sp, &name, what)) < 0)
        goto done;
    if ((rc = tokenizer_new_spm(out, n, texts, lens, scores, types, &sp)) < 0)
        ms_err_ctx("%s", what);
done:
    MS_FREE_ALL(texts, lens, scores, types, name);
    return rc;
}
