/* tokenizer.h: text <-> token ids; the whole surface of src/tokenizer.
 *
 * One opaque `tokenizer` serves every kind; the kind is fixed when it is built:
 *   TOKENIZER_SPM  SentencePiece-style BPE as llama.cpp runs it for tokenizer.ggml.model "llama"
 *                  (Llama 1/2, Mistral, Phi-3, TinyLlama, ...): optional "▁" prefix, spaces become
 *                  U+2581, then bigram merges by score over UTF-8 characters, byte fallback.
 *   TOKENIZER_BPE  byte-level BPE as llama.cpp runs it for tokenizer.ggml.model "gpt2" (GPT-2,
 *                  Llama 3, Qwen 2, DeepSeek, ...): the text is split into words by the regexes of
 *                  its pre-tokenizer (tokenizer.ggml.pre; PCRE2, UTF + UCP), each word's bytes are
 *                  spelled in GPT-2's byte alphabet, then merged pairwise by rank (the order of
 *                  tokenizer.ggml.merges).
 *   TOKENIZER_WPM  WordPiece as llama.cpp runs it for tokenizer.ggml.model "bert" (BERT, bge,
 *                  all-MiniLM, nomic-embed, ...): each code point goes to the first code point of
 *                  its NFD decomposition (which drops the accents of precomposed letters) and to
 *                  lower case; control characters go; the text is split at white space, and each
 *                  punctuation character, ASCII symbol and CJK ideograph is a word of its own;
 *                  each word, prefixed with "▁", is cut greedily into the longest tokens from the
 *                  left (a word with a piece no token matches becomes the unknown token). The
 *                  vocab is in the GGUF converter's form: word-initial pieces "▁x", continuation
 *                  pieces bare ("##x" in BERT's vocab.txt / tokenizer.json). Unicode data: ucd.c,
 *                  generated from the UCD by ucd_gen.py.
 * The aim is exact agreement with llama.cpp (llama-vocab.cpp) on the same vocab, which its test
 * vectors (models/ggml-vocab-*.gguf.inp/.out) check.
 *
 * Vocab invariants, checked when a tokenizer is built (a vocab that breaks one is refused with
 * MS_EINVALID naming the field, the value and the bound):
 *   1. 1 <= n_vocab <= TOKENIZER_MAX_VOCAB; tokens, scores and types have n_vocab entries each.
 *   2. Each token's text is at most TOKENIZER_MAX_TOKEN_LEN bytes; types are 0..6 (TOKEN_TYPE_*).
 *   3. Special ids (bos, eos, unk, pad, eot, eom) are TOKEN_NONE or < n_vocab.
 * Token texts are copied: nothing the tokenizer was built from needs to outlive it.
 * A tokenizer is immutable after it is built; several threads may use one at once. */
#ifndef MSTORE_TOKENIZER_H
#define MSTORE_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "format/format.h"
#include "util/util.h"

#define TOKEN_NONE (-1)
#define TOKENIZER_MAX_VOCAB (1u << 24)      /* far above any real vocab (256k) */
#define TOKENIZER_MAX_TOKEN_LEN 4096        /* bytes of one token's text */
#define TOKENIZER_WPM_MAX_WORD 1000000      /* max_input_chars_per_word: far above BERT's 100 */

typedef enum tokenizer_kind { TOKENIZER_SPM = 1, TOKENIZER_BPE = 2, TOKENIZER_WPM = 3 } tokenizer_kind;
/* "SPM", "BPE", "WPM" (llama.cpp's names of the vocab types); "?" for anything else. Static. */
const char *tokenizer_kind_name(tokenizer_kind k);

/* Token types, numbered as in GGUF's tokenizer.ggml.token_type (llama.cpp's llama_token_type). */
enum token_type {
    TOKEN_TYPE_UNDEFINED = 0,
    TOKEN_TYPE_NORMAL = 1,
    TOKEN_TYPE_UNKNOWN = 2,
    TOKEN_TYPE_CONTROL = 3,        /* <s>, </s>: matched in text only with parse_special */
    TOKEN_TYPE_USER_DEFINED = 4,   /* always matched in text, before anything else */
    TOKEN_TYPE_UNUSED = 5,
    TOKEN_TYPE_BYTE = 6,           /* "<0x0A>": byte fallback */
};

/* Special tokens and switches. Start from tokenizer_special_init_spm (llama.cpp's SPM
 * defaults) and override what the vocab states. */
typedef struct tokenizer_special {
    int32_t bos, eos, unk, pad;    /* TOKEN_NONE when absent */
    int32_t eot, eom;              /* end of turn / message; TOKEN_NONE: detected by text as llama.cpp does */
    int add_bos, add_eos;          /* what add_special adds; add_bos is ignored when bos is TOKEN_NONE */
    int add_space_prefix;          /* SPM: put "▁" before text that starts the input or follows a special token */
    /* general.name, or NULL. llama.cpp keys a few per-model token rules on it; the one that
     * matters for SPM: names containing "phi-3"/"phi3" strip whitespace after special tokens. */
    const char *model_name;
} tokenizer_special;

/* bos 1, eos 2, unk 0, pad/eot/eom TOKEN_NONE, add_bos 1, add_eos 0, add_space_prefix 1. */
void tokenizer_special_init_spm(tokenizer_special *s);
/* llama.cpp's "gpt2" defaults: bos = eos = 11, unk/pad/eot/eom TOKEN_NONE, add_bos 0, add_eos 0,
 * add_space_prefix 0. */
void tokenizer_special_init_bpe(tokenizer_special *s);

/* llama.cpp's "bert" defaults: bos (= [CLS]) 101, eos (= [SEP]) 102, unk 100, pad 0, eot/eom
 * TOKEN_NONE, add_bos 1, add_eos 1 (add_special puts [CLS] first and [SEP] last),
 * add_space_prefix 0 (unused by WordPiece). */
void tokenizer_special_init_wpm(tokenizer_special *s);

/* WordPiece's switches, as Hugging Face's BertNormalizer and WordPiece model name them. */
typedef struct tokenizer_wpm_opts {
    int lowercase;           /* map to lower case (Unicode's simple mapping) */
    int strip_accents;       /* map each code point to the first of its NFD decomposition */
    int split_chinese;       /* each CJK ideograph is a word of its own (handle_chinese_chars) */
    int clean_text;          /* drop NUL, U+FFFD and control characters (Cc, Cf, Co, Cs) */
    size_t max_word_chars;   /* a longer word (in code points) is the unknown token; 0: no limit */
} tokenizer_wpm_opts;
/* What llama.cpp does for every "bert" vocab: every switch on, no word limit. */
void tokenizer_wpm_opts_init(tokenizer_wpm_opts *o);

typedef struct tokenizer tokenizer;

/* Build an SPM tokenizer from plain arrays of n_vocab entries: tokens[i] is token i's text,
 * token_lens[i] bytes (not NUL-terminated; token_lens NULL means strlen), scores[i] its merge
 * score (scores NULL: all 0), types[i] its enum token_type (types NULL: all NORMAL). `special` NULL means
 * tokenizer_special_init_spm's defaults. Everything is copied. When two tokens share a text,
 * the later id wins in lookups (as in llama.cpp). Returns 0, MS_EINVALID (the invariants
 * above), MS_ENOMEM. */
int tokenizer_new_spm(tokenizer **out, size_t n_vocab, const char *const *tokens, const size_t *token_lens,
                      const float *scores, const int32_t *types, const tokenizer_special *special);

/* Build a byte-level BPE tokenizer: tokens / token_lens / types as for tokenizer_new_spm (token
 * texts spelled in GPT-2's byte alphabet: "Ġthe"), n_merges lines "first second" (merge_lens
 * NULL: strlen) whose order is their rank (a pair listed twice keeps its first rank), and the
 * pre-tokenizer's name as in tokenizer.ggml.pre ("gpt-2", "llama-bpe", "qwen2", "deepseek-llm",
 * "deepseek-coder", "default", ...; NULL means "default"). `special` NULL means
 * tokenizer_special_init_bpe's defaults plus what the pre-tokenizer implies (Llama 3 adds BOS).
 * Returns 0, MS_EUNSUPPORTED "unknown pre-tokenizer 'x' ...", MS_EINVALID, MS_ENOMEM. */
int tokenizer_new_bpe(tokenizer **out, size_t n_vocab, const char *const *tokens, const size_t *token_lens,
                      const int32_t *types, size_t n_merges, const char *const *merges, const size_t *merge_lens,
                      const char *pre, const tokenizer_special *special);
/* Build a WordPiece tokenizer: tokens / token_lens / types as for tokenizer_new_spm, texts in the
 * GGUF form ("▁word" starts a word, "ing" continues one). `opts` NULL: tokenizer_wpm_opts_init's;
 * `special` NULL: tokenizer_special_init_wpm's defaults (which must then lie inside the vocab).
 * Encoding needs an unknown token only for a word that no tokens spell. Returns 0, MS_EINVALID,
 * MS_ENOMEM. */
int tokenizer_new_wpm(tokenizer **out, size_t n_vocab, const char *const *tokens, const size_t *token_lens,
                      const int32_t *types, const tokenizer_wpm_opts *opts, const tokenizer_special *special);

/* The pre-tokenizer family of a BPE tokenizer ("gpt2", "llama3", "qwen2", "deepseek-llm", ...),
 * NULL for SPM. Borrowed, static. */
const char *tokenizer_pre_name(const tokenizer *t);

/* Build from a GGUF's metadata (a whole file or a GGUF_HEADER_ONLY buffer): tokenizer.ggml.model
 * ("llama" -> SPM, "gpt2" -> BPE with .merges (strings, required) and .pre (absent: "default"),
 * "bert" -> WPM, whose [CLS] is .cls_token_id, else .bos_token_id, and whose [SEP] is
 * .seperator_token_id (sic), else .eos_token_id, over tokenizer_special_init_wpm's defaults (a
 * default outside the vocab is TOKEN_NONE); anything else: MS_EUNSUPPORTED "tokenizer 'x' is not
 * supported"), tokenizer.ggml.tokens
 * (strings), .scores (floats; absent: all 0; unused by BPE), .token_type (integers; absent: all
 * NORMAL), .bos_token_id / .eos_token_id / .unknown_token_id / .padding_token_id /
 * .eot_token_id / .eom_token_id (0xFFFFFFFF or -1 means none), .add_bos_token / .add_eos_token /
 * .add_space_prefix (bools), general.name. `what` prefixes messages ("model.gguf").
 * `g` is only read during the call. Returns 0, MS_ENOTFOUND (no tokenizer.ggml.model or
 * tokens), MS_EINVALID, MS_EUNSUPPORTED, MS_ENOMEM. */
int tokenizer_from_gguf(tokenizer **out, const gguf_file *g, const char *what);

/* Build from Hugging Face's tokenizer.json (`len` bytes of `json`) and, when not NULL, the
 * NUL-terminated text of tokenizer_config.json. model.type "BPE" in two forms:
 *   - byte-level (a ByteLevel pre-tokenizer or decoder): TOKENIZER_BPE. The pre-tokenizer's
 *     regexes (Split with behavior Isolated, Digits, ByteLevel's use_regex) must be one of the
 *     configurations llama.cpp knows; tokenizer_pre_name then names it. Merges are "a b"
 *     strings or ["a", "b"] pairs. Normalizer null or NFC (not applied, as in llama.cpp).
 *   - SentencePiece-style (model.byte_fallback, or a Metaspace pre-tokenizer; normalizer
 *     Prepend "▁" / Replace " " -> "▁"): TOKENIZER_SPM, scores from the merge ranks.
 * model.type "WordPiece": TOKENIZER_WPM, the vocab turned into the GGUF form as llama.cpp's
 * converter does ("[X]" kept, "##x" -> "x", "x" -> "▁x"); normalizer BertNormalizer (lowercase,
 * strip_accents (null: as lowercase), handle_chinese_chars, clean_text) or null; pre-tokenizer
 * BertPreTokenizer; model.unk_token (required, a token), continuing_subword_prefix
 * "##", max_input_chars_per_word (1..TOKENIZER_WPM_MAX_WORD); post_processor TemplateProcessing
 * or BertProcessing names [CLS] / [SEP] and whether they are added (no post_processor: "[CLS]" /
 * "[SEP]" by text, not added); tokenizer_config.json's cls_token / sep_token win.
 * added_tokens: special -> CONTROL, others USER_DEFINED; ids no entry names -> "[PAD<id>]"
 * unused. BOS / EOS and whether they are added: post_processor TemplateProcessing, then
 * tokenizer_config.json (add_bos_token, add_eos_token, bos_token, eos_token, unk_token,
 * pad_token), which wins. `what` prefixes messages ("tokenizer.json").
 * Returns 0, MS_EUNSUPPORTED naming the field (model.type "Unigram", a pre-tokenizer or regex
 * llama.cpp does not know, ...), MS_EINVALID (bad JSON, ids out of range), MS_ENOMEM. */
int tokenizer_from_json(tokenizer **out, const char *json, size_t len, const char *config_json, const char *what);

/* Mark `id` as end of generation (generation_config.json's eos_token_id may list several); it
 * also becomes the EOS when the vocab named none. Call before the tokenizer is shared between
 * threads. 0, or MS_EINVALID for an id out of range. */
int tokenizer_eog_add(tokenizer *t, int32_t id);

/* The tokenizer of a stored model, from its layers' bytes (the caller reads them: the runtime's
 * runtime_tokenizer_from_model). From gguf_meta (an MT_GGUF_META layer: a GGUF header) when
 * given, else from json (MT_TOKENIZER, tokenizer.json) with config (MT_TOKENIZER_CONFIG); then
 * every id of eos_token_id in generation (MT_GENERATION_CONFIG), else in model_config (the config
 * blob), ends generation. Absent layers are NULL. Nothing is kept: the bytes are the caller's.
 * `what` names the model in messages. Returns 0, MS_ENOTFOUND "<what>: no tokenizer (no GGUF
 * metadata or tokenizer.json layer)", or what the builders return. */
typedef struct tokenizer_layers {
    const uint8_t *gguf_meta;
    size_t gguf_meta_len;
    const char *gguf_meta_what;   /* names gguf_meta in messages (its digest); NULL: "GGUF metadata" */
    const char *json, *config, *generation, *model_config;
    size_t json_len, config_len, generation_len, model_config_len;
} tokenizer_layers;
int tokenizer_from_layers(tokenizer **out, const tokenizer_layers *in, const char *what);

void tokenizer_free(tokenizer *t);   /* NULL is fine */

tokenizer_kind tokenizer_kind_get(const tokenizer *t);
size_t tokenizer_n_vocab(const tokenizer *t);
int32_t tokenizer_bos(const tokenizer *t);   /* TOKEN_NONE when absent */
int32_t tokenizer_eos(const tokenizer *t);
int32_t tokenizer_unk(const tokenizer *t);
int tokenizer_adds_bos(const tokenizer *t);  /* 1 when encode with add_special puts BOS first */
int tokenizer_adds_eos(const tokenizer *t);
/* 1 when generation should stop at `id`: eos, eot, eom, and tokens whose text is one of
 * llama.cpp's end-of-generation names (<|endoftext|>, <|end|>, <|im_end|>, <|eot_id|>, ...).
 * A vocab with gpt-oss's harmony markers (both "<|return|>" and "<|call|>") stops at those two
 * and not at "<|end|>", which parts the messages of one answer there. */
int tokenizer_is_eog(const tokenizer *t, int32_t id);
/* Token i's text as stored in the vocab ("▁Hello", "<0x0A>", "<s>"); NULL for a bad id.
 * Borrowed, not NUL-terminated. */
const char *tokenizer_token_text(const tokenizer *t, int32_t id, size_t *len_out);
float tokenizer_token_score(const tokenizer *t, int32_t id);   /* SPM merge score; 0 for BPE or a bad id */
int tokenizer_token_type(const tokenizer *t, int32_t id);   /* enum token_type, after llama.cpp's
                                                               overrides; -1 for a bad id */

/* Encode `len` bytes of `text` (any bytes; NUL is an ordinary byte). With add_special, BOS / EOS
 * are added as the vocab asks (tokenizer_adds_bos/eos). With parse_special, the texts of control
 * tokens ("<s>", "<|end|>") in `text` become those tokens; without it they are plain text.
 * User-defined tokens are matched either way, as in llama.cpp.
 * Writes min(needed, cap) ids to ids_out (which may be NULL when cap is 0) and always sets
 * *n_out to the number of ids the whole text needs. Returns 0, or MS_EINVALID "... needs N ids,
 * buffer holds CAP" when cap < needed (call again with a buffer of *n_out), or MS_ENOMEM.
 * Time O(n log n) in len. */
int tokenizer_encode(const tokenizer *t, const char *text, size_t len, int add_special, int parse_special,
                     int32_t *ids_out, size_t cap, size_t *n_out);
/* The same, into a malloc'd array (*out is NULL on failure; free() it). */
int tokenizer_encode_alloc(const tokenizer *t, const char *text, size_t len, int add_special, int parse_special,
                           int32_t **out, size_t *n_out);

/* Decoding flags. */
enum {
    /* Drop one leading space of the piece. sentencepiece (and llama2.c) decode the first piece of
     * text, the one right after BOS, this way: it undoes add_space_prefix. */
    TOKENIZER_DECODE_LSTRIP = 1,
    /* Render control and unknown tokens as their text ("<s>"); by default they are empty. */
    TOKENIZER_DECODE_SPECIAL = 2,
};

/* The bytes token `id` stands for: normal tokens with "▁" turned into spaces, byte tokens
 * ("<0x0A>") as that one byte (so a piece may be part of a UTF-8 character), user-defined
 * tokens verbatim, control / unknown tokens empty (unless TOKENIZER_DECODE_SPECIAL; harmony's
 * markers <|start|> <|end|> <|message|> <|channel|> <|constrain|> <|return|> <|call|>, in a vocab
 * with harmony's end tokens, are always their text: the answer's structure is in them), unused /
 * undefined empty. Writes min(needed, cap) bytes (no NUL) and sets *n_out to the bytes needed.
 * Returns 0, MS_EINVALID for an id out of range or when cap < needed. */
int tokenizer_decode_piece(const tokenizer *t, int32_t id, unsigned flags, char *buf, size_t cap,
                           size_t *n_out);
/* Decode a sequence as sentencepiece does: the pieces concatenated, and when the vocab uses
 * add_space_prefix, the first piece that is not a control/unknown token loses one leading space
 * (so decode(encode(s)) == s for text without special-token texts). WordPiece decodes the same
 * way: each word's first piece ("▁x") brings a space, the text's first loses it; what its
 * pre-processing changed (case, accents, spaces around punctuation) stays changed. `flags` may
 * hold TOKENIZER_DECODE_SPECIAL. Same buffer contract as tokenizer_decode_piece. MS_EINVALID. */
int tokenizer_decode(const tokenizer *t, const int32_t *ids, size_t n, unsigned flags, char *buf, size_t cap,
                     size_t *n_out);

#endif
