/* json_load.c: a tokenizer from Hugging Face's tokenizer.json (+ tokenizer_config.json), as
 * Hugging Face and MLX directories hold it.
 *
 * model.type "BPE" is read in the two forms that cover the llama-family models:
 *   - byte-level BPE (GPT-2, Llama 3, Qwen 2/3, DeepSeek): a ByteLevel pre-tokenizer or decoder.
 *     The pre-tokenizer's regexes (Split patterns, Digits, ByteLevel's implied GPT-2 regex) are
 *     matched against the configurations llama.cpp knows, and the tokenizer is built with that
 *     llama.cpp pre-tokenizer (tokenizer.ggml.pre): the same ids as a GGUF converted from this
 *     file, by construction. A regex list we do not know is refused naming it, as llama.cpp's
 *     converter refuses an unknown pre-tokenizer, rather than tokenizing it some other way.
 *   - SentencePiece-style BPE (Llama 2, Mistral, TinyLlama: byte_fallback, "▁" for spaces) as an
 *     SPM tokenizer. tokenizer.json has merge ranks, not piece scores; the SPM merge picks the
 *     adjacent pair whose merged token scores highest, so a token's score is minus the rank of
 *     the first merge that makes it: the same order as sentencepiece's scores, from which
 *     transformers derived the merges (sorted by the merged piece's score).
 * model.type "WordPiece" (BERT and the embedding models built on it) becomes a WPM tokenizer over
 * the vocab as llama.cpp's converter writes it into a GGUF ("▁" for word-initial pieces, "##"
 * dropped from continuations), so both give the same ids; BertNormalizer's switches are kept.
 * Special tokens: added_tokens (special: CONTROL, else USER_DEFINED), model.unk_token (UNKNOWN),
 * post_processor TemplateProcessing (a special token before / after the sequence: add BOS / EOS),
 * then tokenizer_config.json's add_bos_token / add_eos_token / bos_token / eos_token, which win. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer_int.h"

#define MAX_JSON_BYTES ((size_t)1 << 30)
#define MAX_HOLES 65536      /* unused ids between the vocab's entries */
#define MAX_PRE_RE 8

/* ---------------------------------------------------------------- known pre-tokenizers */

/* A regex as text, or (text NULL) by FNV-1a 64 and length, for the one that is 499 bytes of
 * letter ranges (DeepSeek LLM's, identical in its tokenizer.json and llama.cpp). */
typedef struct re_key {
    const char *text;
    uint64_t fnv;
    size_t len;
} re_key;

#define T(s) { s, 0, 0 }
#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define RE_L3_HF "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\\p{L}\\p{N}]?\\p{L}+|"
#define RE_L3_CPP "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\\p{L}\\p{N}]?\\p{L}+|"
#define RE_L3_TAIL "| ?[^\\s\\p{L}\\p{N}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"
#define RE_CJK "[\xe4\xb8\x80-\xe9\xbe\xa5\xe0\xa0\x80-\xe4\xb8\x80\xea\xb0\x80-\xed\x9f\xbf]+"
/* Mistral's tekken and OpenAI's o200k (gpt-4o) as their tokenizer.json files write them */
#define RE_UPPER "[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]"
#define RE_LOWER "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]"
#define RE_CONTR "(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
#define RE_TEKKEN_TAIL "| ?[^\\s\\p{L}\\p{N}]+[\r\n/]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"

/* Regexes after canon() (escaped \r \n \t spelled as the characters). GPT-2's ByteLevel regex
 * ends in "|\s+"; llama.cpp's lacks it, which changes nothing: both keep the gaps between
 * matches as words, and that is all a lone "\s+" alternative can still match. */
static const struct known_pre {
    const char *pre;   /* tokenizer.ggml.pre */
    re_key re[MAX_PRE_RE];
} known[] = {
    { "gpt-2", { T(RE_GPT2 "|\\s+") } },
    { "gpt-2", { T(RE_GPT2) } },
    { "starcoder", { T("\\p{N}"), T(RE_GPT2 "|\\s+") } },
    { "starcoder", { T("\\p{N}"), T(RE_GPT2) } },
    { "llama-bpe", { T(RE_L3_HF "\\p{N}{1,3}" RE_L3_TAIL) } },
    { "llama-bpe", { T(RE_L3_CPP "\\p{N}{1,3}" RE_L3_TAIL) } },
    { "qwen2", { T(RE_L3_HF "\\p{N}" RE_L3_TAIL) } },
    { "qwen2", { T(RE_L3_CPP "\\p{N}" RE_L3_TAIL) } },
    { "deepseek-llm",
      { T("[\r\n]"), { NULL, 0x446306e04ee68a2eull, 499 },
        T("\\s?[!-/:-~\xef\xbc\x81-\xef\xbc\x8f\xef\xbc\x9a-\xef\xbd\x9e\xe2\x80\x98-\xe2\x80\x9f\xe3\x80\x80-\xe3\x80\x82]+"),
        T("\\s+$"), T(RE_CJK), T("\\p{N}+") } },
    { "tekken", { T("[^\r\n\\p{L}\\p{N}]?" RE_UPPER "*" RE_LOWER "+|[^\r\n\\p{L}\\p{N}]?" RE_UPPER "+" RE_LOWER "*|"
                    "\\p{N}" RE_TEKKEN_TAIL) } },
    { "gpt-4o", { T("[^\r\n\\p{L}\\p{N}]?" RE_UPPER "*" RE_LOWER "+" RE_CONTR "|[^\r\n\\p{L}\\p{N}]?" RE_UPPER "+"
                    RE_LOWER "*" RE_CONTR "|\\p{N}{1,3}" RE_TEKKEN_TAIL) } },
    { "deepseek-v3",
      { T("\\p{N}{1,3}"), T("[\xe4\xb8\x80-\xe9\xbe\xa5\xe3\x81\x80-\xe3\x82\x9f\xe3\x82\xa0-\xe3\x83\xbf]+"),
        T("[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+|"
          " ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+") } },
    { "deepseek-coder", { T("[\r\n]"), T("\\s?\\p{L}+"), T("\\s?\\p{P}+"), T(RE_CJK), T("\\p{N}") } },
};
#undef T

static uint64_t fnv1a(const char *s, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (uint8_t)s[i]) * 0x100000001b3ull;
    return h;
}

/* The regex with \r, \n, \t escapes written as the characters (one regex, two spellings in the
 * wild). Any other escape is kept with its backslash. Returns a malloc'd string or NULL. */
static char *canon(const char *re)
{
    size_t n = strlen(re), k = 0;
    char *o = malloc(n + 1);
    if (!o)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        if (re[i] == '\\' && i + 1 < n) {
            char c = re[i + 1];
            if (c == 'r' || c == 'n' || c == 't') {
                o[k++] = c == 'r' ? '\r' : c == 'n' ? '\n' : '\t';
                i++;
                continue;
            }
            o[k++] = re[i++];
        }
        o[k++] = re[i];
    }
    o[k] = '\0';
    return o;
}

static int key_matches(const re_key *k, const char *re)
{
    size_t len = strlen(re);
    return k->text ? strcmp(k->text, re) == 0 : len == k->len && fnv1a(re, len) == k->fnv;
}

static const char *known_pre_find(char *const *re, int n)
{
    for (size_t i = 0; i < sizeof known / sizeof *known; i++) {
        int m = 0;
        while (m < MAX_PRE_RE && (known[i].re[m].text || known[i].re[m].len))
            m++;
        if (m != n)
            continue;
        for (m = 0; m < n && key_matches(&known[i].re[m], re[m]); m++)
            ;
        if (m == n)
            return known[i].pre;
    }
    return NULL;
}

/* ---------------------------------------------------------------- the pre-tokenizer */

typedef struct pre_walk {
    char *re[MAX_PRE_RE];
    int n;
    int byte_level;      /* a ByteLevel piece was seen */
    int metaspace;       /* SPM form: a Metaspace piece (1 + add_space_prefix) */
    const char *what;
} pre_walk;

static const char *str_or(json_t *o, const char *key, const char *dflt)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : dflt;
}

static int pre_push(pre_walk *w, const char *re, const char *path)
{
    if (w->n == MAX_PRE_RE)
        return ms_err(MS_EUNSUPPORTED, "%s: %s: more than %d pre-tokenizer regexes", w->what, path, MAX_PRE_RE);
    if (!(w->re[w->n] = canon(re)))
        return ms_err(MS_ENOMEM, "%s: out of memory", w->what);
    w->n++;
    return 0;
}

/* One pre-tokenizer object at `path` ("pre_tokenizer", "pre_tokenizer.pretokenizers[1]"). */
static int pre_walk_one(pre_walk *w, json_t *p, const char *path, int depth)
{
    const char *type = str_or(p, "type", NULL);
    char sub[160];
    int rc;

    if (!json_is_object(p) || !type)
        return ms_err(MS_EINVALID, "%s: %s: expected an object with a \"type\"", w->what, path);
    if (strcmp(type, "Sequence") == 0) {
        json_t *seq = json_object_get(p, "pretokenizers");
        if (!json_is_array(seq) || depth > 4)
            return ms_err(MS_EINVALID, "%s: %s.pretokenizers: expected an array", w->what, path);
        for (size_t i = 0; i < json_array_size(seq); i++) {
            snprintf(sub, sizeof sub, "%s.pretokenizers[%zu]", path, i);
            if ((rc = pre_walk_one(w, json_array_get(seq, i), sub, depth + 1)) < 0)
                return rc;
        }
        return 0;
    }
    if (strcmp(type, "ByteLevel") == 0) {
        w->byte_level = 1;
        if (json_is_true(json_object_get(p, "add_prefix_space")))
            return ms_err(MS_EUNSUPPORTED, "%s: %s.add_prefix_space: true is not supported", w->what, path);
        /* use_regex defaults to true: GPT-2's regex */
        return json_is_false(json_object_get(p, "use_regex")) ? 0 : pre_push(w, RE_GPT2 "|\\s+", path);
    }
    if (strcmp(type, "Digits") == 0)
        return pre_push(w, json_is_true(json_object_get(p, "individual_digits")) ? "\\p{N}" : "\\p{N}+", path);
    if (strcmp(type, "Split") == 0) {
        const char *re = str_or(json_object_get(p, "pattern"), "Regex", NULL);
        const char *behavior = str_or(p, "behavior", "");
        if (!re)
            return ms_err(MS_EUNSUPPORTED, "%s: %s.pattern: only {\"Regex\": ...} patterns are supported", w->what,
                          path);
        /* llama.cpp keeps matches and the gaps between them as words: HF's "Isolated" */
        if (strcmp(behavior, "Isolated") != 0)
            return ms_err(MS_EUNSUPPORTED, "%s: %s.behavior: '%.32s' is not supported (only Isolated)", w->what,
                          path, behavior);
        if (json_is_true(json_object_get(p, "invert")))
            return ms_err(MS_EUNSUPPORTED, "%s: %s.invert: true is not supported", w->what, path);
        return pre_push(w, re, path);
    }
    if (strcmp(type, "Metaspace") == 0) {
        const char *scheme = str_or(p, "prepend_scheme", NULL);
        const char *rep = str_or(p, "replacement", "\xe2\x96\x81");
        if (strcmp(rep, "\xe2\x96\x81") != 0)
            return ms_err(MS_EUNSUPPORTED, "%s: %s.replacement: only U+2581 is supported", w->what, path);
        /* split: true cuts words at each "▁" before merging; the SPM tokenizer merges across them */
        if (json_is_true(json_object_get(p, "split")))
            return ms_err(MS_EUNSUPPORTED, "%s: %s.split: true is not supported", w->what, path);
        if (scheme)
            w->metaspace = 1 + (strcmp(scheme, "never") != 0);
        else
            w->metaspace = 1 + !json_is_false(json_object_get(p, "add_prefix_space"));
        return 0;
    }
    return ms_err(MS_EUNSUPPORTED, "%s: %s.type: pre-tokenizer '%.32s' is not supported", w->what, path, type);
}

/* ---------------------------------------------------------------- vocab */

typedef struct vocab {
    size_t n;
    const char **text;   /* borrowed from the JSON tree, or owned[i] */
    char **owned;
    size_t *len;
    int32_t *type;
    float *score;
} vocab;

static void vocab_free(vocab *v)
{
    for (size_t i = 0; v->owned && i < v->n; i++)
        free(v->owned[i]);
    MS_FREE_ALL(v->owned, (void *)v->text, v->len, v->type, v->score);
}

static int id_of(json_int_t *id, json_t *v, const char *what, const char *field)
{
    if (!json_is_integer(v))
        return ms_err(MS_EINVALID, "%s: %s: id is not an integer", what, field);
    if (json_integer_value(v) < 0 || json_integer_value(v) >= (json_int_t)TOKENIZER_MAX_VOCAB)
        return ms_err(MS_EINVALID, "%s: %s: id %lld out of range [0, %u)", what, field,
                      (long long)json_integer_value(v), (unsigned)TOKENIZER_MAX_VOCAB);
    *id = json_integer_value(v);
    return 0;
}

/* Texts by id from model.vocab and added_tokens (which win); ids nobody names are "[PAD<id>]",
 * unused, as llama.cpp's converter writes them. */
static int vocab_build(vocab *v, json_t *mvocab, json_t *added, const char *what)
{
    const char *key;
    json_t *val;
    json_int_t id = 0, max = -1;
    size_t entries = json_object_size(mvocab) + json_array_size(added);

    json_object_foreach(mvocab, key, val) {
        char field[96];
        snprintf(field, sizeof field, "model.vocab['%.64s']", key);
        if (id_of(&id, val, what, field) < 0)
            return MS_EINVALID;
        max = id > max ? id : max;
    }
    for (size_t i = 0; i < json_array_size(added); i++) {
        json_t *a = json_array_get(added, i);
        if (!json_is_string(json_object_get(a, "content")))
            return ms_err(MS_EINVALID, "%s: added_tokens[%zu].content: expected a string", what, i);
        if (id_of(&id, json_object_get(a, "id"), what, "added_tokens[].id") < 0)
            return MS_EINVALID;
        max = id > max ? id : max;
    }
    if (max < 0)
        return ms_err(MS_EINVALID, "%s: model.vocab is empty", what);
    if ((size_t)max + 1 > entries + MAX_HOLES)
        return ms_err(MS_EINVALID, "%s: model.vocab: id %lld with only %zu tokens (more than %d unused ids)", what,
                      (long long)max, entries, MAX_HOLES);
    v->n = (size_t)max + 1;
    v->text = calloc(v->n, sizeof *v->text);
    v->owned = calloc(v->n, sizeof *v->owned);
    v->len = calloc(v->n, sizeof *v->len);
    v->type = calloc(v->n, sizeof *v->type);
    v->score = calloc(v->n, sizeof *v->score);
    if (!v->text || !v->owned || !v->len || !v->type || !v->score)
        return ms_err(MS_ENOMEM, "%s: out of memory for %zu tokens", what, v->n);
    json_object_foreach(mvocab, key, val) {
        id = json_integer_value(val);
        if (v->text[id])
            return ms_err(MS_EINVALID, "%s: model.vocab: id %lld is given to '%.64s' and '%.64s'", what,
                          (long long)id, v->text[id], key);
        v->text[id] = key;
        v->type[id] = TOKEN_TYPE_NORMAL;
    }
    for (size_t i = 0; i < json_array_size(added); i++) {
        json_t *a = json_array_get(added, i);
        id = json_integer_value(json_object_get(a, "id"));
        v->text[id] = json_string_value(json_object_get(a, "content"));
        v->type[id] = json_is_true(json_object_get(a, "special")) ? TOKEN_TYPE_CONTROL : TOKEN_TYPE_USER_DEFINED;
    }
    for (size_t i = 0; i < v->n; i++) {
        if (!v->text[i]) {
            if (!(v->owned[i] = ms_strdup_printf("[PAD%zu]", i)))
                return ms_err(MS_ENOMEM, "%s: out of memory", what);
            v->text[i] = v->owned[i];
            v->type[i] = TOKEN_TYPE_UNUSED;
        }
        v->len[i] = strlen(v->text[i]);
    }
    return 0;
}

/* Merge i as "first second": a string is that already; a pair ["first", "second"] is joined
 * (bpe.c splits at the first space after the first byte, so `first` must hold none). */
static int merge_text(char **own, const char **out, json_t *e, size_t i, const char *what)
{
    json_t *a = json_array_get(e, 0), *b = json_array_get(e, 1);

    *own = NULL;
    if (json_is_string(e)) {
        *out = json_string_value(e);
        return 0;
    }
    if (!json_is_array(e) || json_array_size(e) != 2 || !json_is_string(a) || !json_is_string(b))
        return ms_err(MS_EINVALID, "%s: model.merges[%zu]: expected \"a b\" or [\"a\", \"b\"]", what, i);
    if (json_string_length(a) == 0 || strchr(json_string_value(a) + 1, ' '))
        return ms_err(MS_EUNSUPPORTED, "%s: model.merges[%zu]: '%.64s' is empty or holds a space", what, i,
                      json_string_value(a));
    if (!(*own = ms_strdup_printf("%s %s", json_string_value(a), json_string_value(b))))
        return ms_err(MS_ENOMEM, "%s: out of memory", what);
    *out = *own;
    return 0;
}

/* ---------------------------------------------------------------- special tokens */

/* A token named by text: a string, or an AddedToken object {"content": ...}. NULL: absent / null. */
static const char *token_name(json_t *v)
{
    return json_is_string(v) ? json_string_value(v) : json_is_object(v) ? str_or(v, "content", NULL) : NULL;
}

static int find_text(const vocab *v, const char *s)
{
    size_t len = strlen(s);
    for (size_t i = v->n; i-- > 0;)   /* the highest id, as lookups do */
        if (v->len[i] == len && memcmp(v->text[i], s, len) == 0)
            return (int)i;
    return -1;
}

static int special_from_name(int32_t *id, const vocab *v, json_t *val, const char *what, const char *field)
{
    const char *s = token_name(val);
    int k;

    if (!s)
        return 0;
    if ((k = find_text(v, s)) < 0)
        return ms_err(MS_EINVALID, "%s: %s: '%.64s' is not a token of the vocab", what, field, s);
    *id = k;
    return 0;
}

/* post_processor: TemplateProcessing's "single" template, or the TemplateProcessing inside a
 * Sequence (Llama 3.1: ByteLevel then TemplateProcessing). A special token before $A is BOS,
 * one after it EOS. */
static int post_processor_read(tokenizer_special *sp, const vocab *v, json_t *pp, const char *what, int depth)
{
    const char *type = str_or(pp, "type", "");
    json_t *single = json_object_get(pp, "single");
    int seen_a = 0, rc;

    if (strcmp(type, "Sequence") == 0 && depth < 4) {
        json_t *seq = json_object_get(pp, "processors");
        for (size_t i = 0; i < json_array_size(seq); i++)
            if ((rc = post_processor_read(sp, v, json_array_get(seq, i), what, depth + 1)) < 0)
                return rc;
        return 0;
    }
    if (strcmp(type, "TemplateProcessing") != 0)
        return 0;   /* ByteLevel, null: nothing added */
    sp->add_bos = sp->add_eos = 0;
    for (size_t i = 0; i < json_array_size(single); i++) {
        json_t *e = json_array_get(single, i), *st = json_object_get(e, "SpecialToken");
        const char *name = str_or(st, "id", NULL);
        json_t *ids = json_object_get(json_object_get(json_object_get(pp, "special_tokens"), name ? name : ""), "ids");
        int32_t id = TOKEN_NONE;

        if (json_object_get(e, "Sequence")) {
            seen_a = 1;
            continue;
        }
        if (!name)
            continue;
        if (json_is_integer(json_array_get(ids, 0))) {
            json_int_t k = json_integer_value(json_array_get(ids, 0));
            if (k < 0 || (size_t)k >= v->n)
                return ms_err(MS_EINVALID, "%s: post_processor.special_tokens['%.64s'].ids[0]: id %lld out of range "
                              "(vocab has %zu tokens)", what, name, (long long)k, v->n);
            id = (int32_t)k;
        } else if ((rc = special_from_name(&id, v, st ? json_object_get(st, "id") : NULL, what,
                                         "post_processor.single[].SpecialToken.id")) < 0)
            return rc;
        if (!seen_a)
            sp->bos = id, sp->add_bos = 1;
        else
            sp->eos = id, sp->add_eos = 1;
    }
    return 0;
}

/* tokenizer_config.json: explicit add_bos_token / add_eos_token and the token names win; for
 * WordPiece (wpm), cls_token and sep_token name BOS and EOS too. */
static int config_read(tokenizer_special *sp, const vocab *v, const char *cfg_text, int wpm, const char *what)
{
    json_error_t err;
    json_t *c = json_loads(cfg_text, 0, &err), *x;
    int rc = 0;

    if (!c)
        return ms_err(MS_EINVALID, "%s: tokenizer_config.json: line %d: %s", what, err.line, err.text);
    if (!json_is_object(c)) {
        rc = ms_err(MS_EINVALID, "%s: tokenizer_config.json: expected an object", what);
        goto done;
    }
    if (json_is_boolean(x = json_object_get(c, "add_bos_token")))
        sp->add_bos = json_is_true(x);
    if (json_is_boolean(x = json_object_get(c, "add_eos_token")))
        sp->add_eos = json_is_true(x);
    if ((rc = special_from_name(&sp->bos, v, json_object_get(c, "bos_token"), what, "tokenizer_config.json: bos_token")) < 0 ||
        (rc = special_from_name(&sp->eos, v, json_object_get(c, "eos_token"), what, "tokenizer_config.json: eos_token")) < 0 ||
        (rc = special_from_name(&sp->unk, v, json_object_get(c, "unk_token"), what, "tokenizer_config.json: unk_token")) < 0 ||
        (rc = special_from_name(&sp->pad, v, json_object_get(c, "pad_token"), what, "tokenizer_config.json: pad_token")) < 0)
        goto done;
    if (wpm && ((rc = special_from_name(&sp->bos, v, json_object_get(c, "cls_token"), what, "tokenizer_config.json: cls_token")) < 0 ||
                (rc = special_from_name(&sp->eos, v, json_object_get(c, "sep_token"), what, "tokenizer_config.json: sep_token")) < 0))
        goto done;
done:
    json_decref(c);
    return rc;
}

/* ---------------------------------------------------------------- the two forms */

/* SentencePiece-style: "<0xXX>" tokens are bytes, model.unk_token unknown, and scores are minus
 * the rank of the first merge that makes each token (see the top of the file). Tokens that no
 * merge makes (single characters, specials) keep 0 / a score below every merge. */
static int spm_scores(vocab *v, json_t *model, const char *what)
{
    json_t *merges = json_object_get(model, "merges"), *mvocab = json_object_get(model, "vocab");
    size_t n_merges = json_array_size(merges);
    const char *unk = str_or(model, "unk_token", NULL);
    int rc = 0;

    for (size_t i = 0; i < v->n; i++) {
        const char *s = v->text[i];
        if (v->type[i] == TOKEN_TYPE_NORMAL && v->len[i] == 6 && s[0] == '<' && s[1] == '0' && s[2] == 'x' &&
            s[5] == '>')
            v->type[i] = TOKEN_TYPE_BYTE;
        if (unk && strcmp(s, unk) == 0)
            v->type[i] = TOKEN_TYPE_UNKNOWN;
        v->score[i] = v->type[i] == TOKEN_TYPE_NORMAL ? -(float)(n_merges + 1 + i) : 0.0f;
    }
    for (size_t i = n_merges; i-- > 0 && rc == 0;) {   /* backwards: the first rank is written last */
        char *own = NULL, *joined = NULL;
        const char *line, *sp;
        json_t *id;

        if ((rc = merge_text(&own, &line, json_array_get(merges, i), i, what)) < 0)
            break;
        if ((sp = strchr(line + (line[0] != '\0'), ' ')) != NULL) {
            if (!(joined = ms_strdup_printf("%.*s%s", (int)(sp - line), line, sp + 1))) {
                rc = ms_err(MS_ENOMEM, "%s: out of memory", what);
            } else if (json_is_integer(id = json_object_get(mvocab, joined)) &&
                       (size_t)json_integer_value(id) < v->n && v->type[json_integer_value(id)] == TOKEN_TYPE_NORMAL) {
                v->score[json_integer_value(id)] = -(float)(i + 1);
            }
        }
        free(joined);
        free(own);
    }
    return rc;
}

static int load_spm(tokenizer **out, vocab *v, json_t *root, const pre_walk *w, const char *cfg, const char *what)
{
    json_t *model = json_object_get(root, "model"), *norm = json_object_get(root, "normalizer");
    tokenizer_special sp;
    int add_prefix = w->metaspace ? w->metaspace - 1 : 0, spaces = w->metaspace > 0, rc;
    json_t *list = json_is_array(json_object_get(norm, "normalizers")) ? json_object_get(norm, "normalizers") : NULL;

    /* normalizer: Prepend("▁") = add_space_prefix, Replace(" " -> "▁") = spaces as "▁" */
    for (size_t i = 0; norm && !json_is_null(norm) && i < (list ? json_array_size(list) : 1); i++) {
        json_t *n = list ? json_array_get(list, i) : norm;
        const char *type = str_or(n, "type", "");
        if (strcmp(type, "Prepend") == 0 && strcmp(str_or(n, "prepend", ""), "\xe2\x96\x81") == 0)
            add_prefix = 1;
        else if (strcmp(type, "Replace") == 0 && strcmp(str_or(json_object_get(n, "pattern"), "String", ""), " ") == 0 &&
                 strcmp(str_or(n, "content", ""), "\xe2\x96\x81") == 0)
            spaces = 1;
        else if (strcmp(type, "Sequence") != 0)
            return ms_err(MS_EUNSUPPORTED, "%s: normalizer: '%.32s' is not supported for a byte_fallback BPE", what,
                          type);
    }
    if (!spaces)
        return ms_err(MS_EUNSUPPORTED, "%s: normalizer: a byte_fallback BPE that does not turn spaces into U+2581 "
                      "is not supported", what);
    if ((rc = spm_scores(v, model, what)) < 0)
        return rc;
    tokenizer_special_init_spm(&sp);
    sp.add_space_prefix = add_prefix;
    sp.unk = find_text(v, str_or(model, "unk_token", "<unk>"));
    if ((rc = post_processor_read(&sp, v, json_object_get(root, "post_processor"), what, 0)) < 0 ||
        (cfg && (rc = config_read(&sp, v, cfg, 0, what)) < 0))
        return rc;
    /* the SPM defaults (bos 1, eos 2) when nothing named them, and a vocab that small has no such ids */
    if (sp.bos >= (int32_t)v->n)
        sp.bos = TOKEN_NONE;
    if (sp.eos >= (int32_t)v->n)
        sp.eos = TOKEN_NONE;
    if ((rc = tokenizer_new_spm(out, v->n, v->text, v->len, v->score, v->type, &sp)) < 0)
        ms_err_ctx("%s", what);
    return rc;
}

static int load_bpe(tokenizer **out, vocab *v, json_t *root, const pre_walk *w, const char *cfg, const char *what)
{
    json_t *model = json_object_get(root, "model"), *merges = json_object_get(model, "merges");
    json_t *norm = json_object_get(root, "normalizer");
    size_t n_merges = json_array_size(merges);
    const char **lines = NULL, *pre;
    char **owned = NULL;
    tokenizer_special sp;
    int rc = 0;

    /* llama.cpp applies no normalizer to byte-level BPE; Qwen's NFC leaves NFC text unchanged */
    if (norm && !json_is_null(norm) && strcmp(str_or(norm, "type", ""), "NFC") != 0)
        return ms_err(MS_EUNSUPPORTED, "%s: normalizer: '%.32s' is not supported for a byte-level BPE", what,
                      str_or(norm, "type", "?"));
    if (w->n == 0)
        return ms_err(MS_EUNSUPPORTED, "%s: pre_tokenizer: a byte-level BPE without pre-tokenizer regexes is not "
                      "supported", what);
    if (!(pre = known_pre_find(w->re, w->n)))
        return ms_err(MS_EUNSUPPORTED, "%s: pre_tokenizer: unknown pre-tokenizer (%d regexes, the first '%.80s'); "
                      "known: gpt-2, starcoder, llama-bpe, qwen2, deepseek-llm, deepseek-coder, deepseek-v3, tekken, "
                      "gpt-4o", what, w->n, w->re[0]);
    lines = calloc(n_merges ? n_merges : 1, sizeof *lines);
    owned = calloc(n_merges ? n_merges : 1, sizeof *owned);
    if (!lines || !owned) {
        rc = ms_err(MS_ENOMEM, "%s: out of memory for %zu merges", what, n_merges);
        goto done;
    }
    for (size_t i = 0; i < n_merges; i++)
        if ((rc = merge_text(&owned[i], &lines[i], json_array_get(merges, i), i, what)) < 0)
            goto done;
    tokenizer_special_init_bpe(&sp);
    sp.bos = sp.eos = TOKEN_NONE;   /* not llama.cpp's "gpt2" placeholder 11: the file names them */
    if ((rc = post_processor_read(&sp, v, json_object_get(root, "post_processor"), what, 0)) < 0 ||
        (cfg && (rc = config_read(&sp, v, cfg, 0, what)) < 0))
        goto done;
    if ((rc = tokenizer_new_bpe(out, v->n, v->text, v->len, v->type, n_merges, lines, NULL, pre, &sp)) < 0)
        ms_err_ctx("%s", what);
done:
    for (size_t i = 0; owned && i < n_merges; i++)
        free(owned[i]);
    free(owned);
    free(lines);
    return rc;
}

/* ---------------------------------------------------------------- WordPiece */

/* BertNormalizer's switches; null is no normalizer at all. */
static int bert_normalizer(tokenizer_wpm_opts *o, json_t *norm, const char *what)
{
    json_t *x;

    if (!norm || json_is_null(norm)) {
        o->lowercase = o->strip_accents = o->split_chinese = o->clean_text = 0;
        return 0;
    }
    if (strcmp(str_or(norm, "type", ""), "BertNormalizer") != 0)
        return ms_err(MS_EUNSUPPORTED, "%s: normalizer.type: '%.32s' is not supported for WordPiece (only "
                      "BertNormalizer)", what, str_or(norm, "type", "?"));
    o->lowercase = !json_is_false(json_object_get(norm, "lowercase"));
    o->clean_text = !json_is_false(json_object_get(norm, "clean_text"));
    o->split_chinese = !json_is_false(json_object_get(norm, "handle_chinese_chars"));
    /* strip_accents null (or absent): what lowercase says, as in Hugging Face's BertNormalizer */
    x = json_object_get(norm, "strip_accents");
    o->strip_accents = json_is_boolean(x) ? json_is_true(x) : o->lowercase;
    return 0;
}

/* BertProcessing: "cls" and "sep" are ["[CLS]", 101] pairs, both added. */
static int bert_processing(tokenizer_special *sp, const vocab *v, json_t *pp, const char *what)
{
    static const char *const keys[] = { "cls", "sep" };

    for (int k = 0; k < 2; k++) {
        json_t *pair = json_object_get(pp, keys[k]), *id = json_array_get(pair, 1);
        const char *name = json_string_value(json_array_get(pair, 0));
        json_int_t i = json_integer_value(id);

        if (!name || !json_is_integer(id))
            return ms_err(MS_EINVALID, "%s: post_processor.%s: expected [\"token\", id]", what, keys[k]);
        if (i < 0 || (size_t)i >= v->n)
            return ms_err(MS_EINVALID, "%s: post_processor.%s: id %lld out of range (vocab has %zu tokens)", what,
                          keys[k], (long long)i, v->n);
        *(k ? &sp->eos : &sp->bos) = (int32_t)i;
    }
    sp->add_bos = sp->add_eos = 1;
    return 0;
}

/* The texts in the GGUF converter's form: "[X]" as it is, "##x" -> "x", anything else "▁x". */
static int phantom_texts(char ***out, const vocab *v, const char *what)
{
    char **t = calloc(v->n, sizeof *t);

    *out = t;
    if (!t)
        return ms_err(MS_ENOMEM, "%s: out of memory for %zu tokens", what, v->n);
    for (size_t i = 0; i < v->n; i++) {
        const char *s = v->text[i];
        size_t len = v->len[i];

        if (len > 0 && s[0] == '[' && s[len - 1] == ']')
            t[i] = ms_strdup_printf("%s", s);
        else if (len >= 2 && s[0] == '#' && s[1] == '#')
            t[i] = ms_strdup_printf("%s", s + 2);
        else
            t[i] = ms_strdup_printf("\xe2\x96\x81%s", s);
        if (!t[i])
            return ms_err(MS_ENOMEM, "%s: out of memory", what);
    }
    return 0;
}

static int load_wpm(tokenizer **out, vocab *v, json_t *root, const char *cfg, const char *what)
{
    json_t *model = json_object_get(root, "model"), *pp = json_object_get(root, "post_processor");
    json_t *pre = json_object_get(root, "pre_tokenizer"), *mx = json_object_get(model, "max_input_chars_per_word");
    const char *unk = str_or(model, "unk_token", NULL), *prefix = str_or(model, "continuing_subword_prefix", "##");
    const char *pp_type = str_or(pp, "type", "");
    tokenizer_wpm_opts opts;
    tokenizer_special sp;
    char **texts = NULL;
    int rc;

    tokenizer_wpm_opts_init(&opts);
    if (!unk)
        return ms_err(MS_EINVALID, "%s: model.unk_token: required for WordPiece", what);
    if (find_text(v, unk) < 0)
        return ms_err(MS_EINVALID, "%s: model.unk_token: '%.64s' is not a token of the vocab", what, unk);
    if (strcmp(prefix, "##") != 0)
        return ms_err(MS_EUNSUPPORTED, "%s: model.continuing_subword_prefix: '%.16s' is not supported (only ##)",
                      what, prefix);
    if (mx && !json_is_null(mx) && !json_is_integer(mx))
        return ms_err(MS_EINVALID, "%s: model.max_input_chars_per_word: expected an integer", what);
    if (json_is_integer(mx) && (json_integer_value(mx) < 1 || json_integer_value(mx) > TOKENIZER_WPM_MAX_WORD))
        return ms_err(MS_EINVALID, "%s: model.max_input_chars_per_word: %lld out of range (1..%d)", what,
                      (long long)json_integer_value(mx), TOKENIZER_WPM_MAX_WORD);
    opts.max_word_chars = json_is_integer(mx) ? (size_t)json_integer_value(mx) : 100;   /* Hugging Face's default */
    if (strcmp(str_or(pre, "type", ""), "BertPreTokenizer") != 0)
        return ms_err(MS_EUNSUPPORTED, "%s: pre_tokenizer: '%.32s' is not supported for WordPiece (only "
                      "BertPreTokenizer)", what, str_or(pre, "type", "null"));
    if ((rc = bert_normalizer(&opts, json_object_get(root, "normalizer"), what)) < 0)
        return rc;
    tokenizer_special_init_wpm(&sp);
    sp.bos = find_text(v, "[CLS]"), sp.eos = find_text(v, "[SEP]"), sp.pad = find_text(v, "[PAD]");
    sp.unk = find_text(v, unk);
    sp.add_bos = sp.add_eos = 0;   /* no post_processor: nothing added */
    if (strcmp(pp_type, "BertProcessing") == 0)
        rc = bert_processing(&sp, v, pp, what);
    else if (strcmp(pp_type, "TemplateProcessing") == 0 || strcmp(pp_type, "Sequence") == 0)
        rc = post_processor_read(&sp, v, pp, what, 0);
    else if (pp && !json_is_null(pp))
        rc = ms_err(MS_EUNSUPPORTED, "%s: post_processor.type: '%.32s' is not supported for WordPiece", what,
                    pp_type);
    if (rc < 0 || (cfg && (rc = config_read(&sp, v, cfg, 1, what)) < 0) || (rc = phantom_texts(&texts, v, what)) < 0)
        goto done;
    if ((rc = tokenizer_new_wpm(out, v->n, (const char *const *)texts, NULL, v->type, &opts, &sp)) < 0)
        ms_err_ctx("%s", what);
done:
    for (size_t i = 0; texts && i < v->n; i++)
        free(texts[i]);
    free(texts);
    return rc;
}

int tokenizer_from_json(tokenizer **out, const char *json, size_t len, const char *config_json, const char *what)
{
    json_error_t err;
    json_t *root = NULL, *model, *dec;
    const char *type;
    pre_walk w = { .what = what };
    vocab v = { 0 };
    int rc;

    *out = NULL;
    if (len > MAX_JSON_BYTES)
        return ms_err(MS_EINVALID, "%s: %zu bytes, more than %zu", what, len, MAX_JSON_BYTES);
    if (!(root = json_loadb(json, len, JSON_ALLOW_NUL, &err))) {
        rc = ms_err(MS_EINVALID, "%s: line %d: %s", what, err.line, err.text);
        goto done;
    }
    model = json_object_get(root, "model");
    if (!json_is_object(model)) {
        rc = ms_err(MS_EINVALID, "%s: model: expected an object", what);
        goto done;
    }
    type = str_or(model, "type", json_object_get(model, "merges") ? "BPE" : "");
    if (strcmp(type, "BPE") != 0 && strcmp(type, "WordPiece") != 0) {
        rc = ms_err(MS_EUNSUPPORTED, "%s: model.type: '%.32s' is not supported (supported: BPE, WordPiece)", what,
                    type);
        goto done;
    }
    if (!json_is_object(json_object_get(model, "vocab"))) {
        rc = ms_err(MS_EINVALID, "%s: model.vocab: required, an object", what);
        goto done;
    }
    if (type[0] == 'B' && !json_is_array(json_object_get(model, "merges"))) {
        rc = ms_err(MS_EINVALID, "%s: model.merges: required for BPE, an array", what);
        goto done;
    }
    if (json_object_get(root, "added_tokens") && !json_is_array(json_object_get(root, "added_tokens")) &&
        !json_is_null(json_object_get(root, "added_tokens"))) {
        rc = ms_err(MS_EINVALID, "%s: added_tokens: expected an array", what);
        goto done;
    }
    if (type[0] == 'W') {
        if ((rc = vocab_build(&v, json_object_get(model, "vocab"), json_object_get(root, "added_tokens"), what)) == 0)
            rc = load_wpm(out, &v, root, config_json, what);
        goto done;
    }
    if (json_is_object(json_object_get(root, "pre_tokenizer")) &&
        (rc = pre_walk_one(&w, json_object_get(root, "pre_tokenizer"), "pre_tokenizer", 0)) < 0)
        goto done;
    if ((rc = vocab_build(&v, json_object_get(model, "vocab"), json_object_get(root, "added_tokens"), what)) < 0)
        goto done;
    dec = json_object_get(root, "decoder");
    if (json_is_true(json_object_get(model, "byte_fallback")) || w.metaspace)
        rc = load_spm(out, &v, root, &w, config_json, what);
    else if (w.byte_level || strcmp(str_or(dec, "type", ""), "ByteLevel") == 0)
        rc = load_bpe(out, &v, root, &w, config_json, what);
    else
        rc = ms_err(MS_EUNSUPPORTED, "%s: a BPE model that is neither byte-level (ByteLevel pre-tokenizer or "
                    "decoder) nor SentencePiece-style (byte_fallback, Metaspace) is not supported", what);
done:
    for (int i = 0; i < w.n; i++)
        free(w.re[i]);
    vocab_free(&v);
    json_decref(root);
    return rc;
}

int tokenizer_eog_add(tokenizer *t, int32_t id)
{
    if (id < 0 || (size_t)id >= t->n_vocab)
        return ms_err(MS_EINVALID, "end-of-generation token %d out of range (vocab has %zu tokens)", id, t->n_vocab);
    t->attr[id] |= ATTR_EOG;
    if (t->eos == TOKEN_NONE)
        t->eos = id;
    return 0;
}
