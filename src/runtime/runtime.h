/* runtime.h: running a llama-family model; the whole surface of src/runtime.
 *
 * Layers, bottom up:
 *   backend   not here: src/backend/backend.h is the seam (buffers, weights, op sequences) and
 *             src/cpu, src/vulkan implement it. The decoder below records each forward pass as
 *             one op sequence and reads back only the logits.
 *   weights   tensors by canonical (Hugging Face) name, as read-only views into mmapped files:
 *             a GGUF file directly, or the blobs of a model in the store. No copy of a weight.
 *   config    model hyper-parameters, from GGUF metadata or the config blob (import.h).
 *   model     the llama decoder: every buffer allocated at open; a forward pass allocates
 *             nothing. Prefill runs a whole chunk of tokens as one matrix-matrix batch; the
 *             tokens of several sequences (each with its own KV cache) share passes the same
 *             way (batch.c: continuous batching for the server).
 *   sampler   greedy, temperature, top-k, top-p, min-p, repeat/frequency/presence penalties,
 *             seeded PRNG.
 *
 * Weight types kept as stored: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K,
 * Q5_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4 (ggml block layouts; ids are ggml's, GGML_TYPE_* in
 * format/format.h), and MLX-quantized weights (BACKEND_TYPE_MLX: affine int2..int8 in groups of
 * 32/64/128, mxfp4, nvfp4, mxfp8). Quantized weights are used block by block (dot products per
 * row); no matrix is ever dequantized whole. */
#ifndef MSTORE_RUNTIME_H
#define MSTORE_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "format/format.h"
#include "store/store.h"
#include "tokenizer/tokenizer.h"

/* ---------------------------------------------------------------- tensors and weights */

/* A weight is a backend_tensor (backend/backend.h): the seam owns the type, as ggml owns
 * ggml_tensor, and the weight provider below fills it. */

/* The architectures the runtime runs (GGUF names; Hugging Face model_type names map onto them:
 * mixtral -> llama with experts, qwen3_moe -> qwen3moe, qwen2_moe -> qwen2moe, mistral -> llama,
 * gemma3_text -> gemma3, nomic_bert -> nomic-bert). bert and nomic-bert are encoders (embedding
 * models: runtime_embed), the others decoders. */
#define RUNTIME_ARCHS \
    "llama, mistral, mixtral, qwen2, qwen3, qwen2moe, qwen3moe, gemma3, phi3, gpt-oss, deepseek2, bert, nomic-bert"

/* Rope scaling kinds. */
enum { RUNTIME_ROPE_NONE = 0, RUNTIME_ROPE_LINEAR = 1, RUNTIME_ROPE_LLAMA3 = 2, RUNTIME_ROPE_LONGROPE = 3,
       RUNTIME_ROPE_YARN = 4 };

/* Longrope's factors from a config.json (a GGUF holds them as rope_factors_long/short tensors):
 * at most this many, one per rotated pair. */
#define RUNTIME_ROPE_MAX_FACTORS 512

/* The longest context (tokens) a model may state or a user may ask for (num_ctx, --ctx): the
 * bound the config readers, the option table and the artifact readers share. */
#define RUNTIME_CTX_MAX (1 << 22)

typedef struct runtime_config {
    char architecture[32];
    int dim, n_layers, n_heads, n_kv_heads, head_dim, ffn_dim, vocab_size, ctx_len;
    int n_rot;                  /* rotated dims per head (<= head_dim; llama: head_dim) */
    double rms_eps, rope_theta;
    int rope_interleaved;       /* 1: rotate adjacent pairs (GGUF); 0: halves (HF / NEOX) */
    int rope_scaling;           /* RUNTIME_ROPE_* */
    double rope_factor, rope_low_freq_factor, rope_high_freq_factor;
    int rope_orig_ctx;          /* original_max_position_embeddings (llama3, longrope) */
    /* Longrope (Phi-3 128k): each frequency divided by its long factor when the context the
     * model runs with exceeds rope_orig_ctx, else by its short factor (llama.cpp's choice, made
     * once at open), and cos, sin scaled by rope_attn_factor (0: sqrt(1 + ln(ctx_len / orig) /
     * ln(orig)), as Hugging Face computes it). The factors come from the rope_factors_long/short
     * tensors, else from these (rope_n_factors of each; 0 when the config has none). */
    double rope_attn_factor;
    int rope_n_factors;
    /* YaRN (gpt-oss, Qwen 2.5 long context): frequencies blended between f / factor and f over
     * the band of dims that corr dims beta_fast .. beta_slow give (ggml's rope_yarn, with its
     * floor / ceil of the band's ends); cos and sin scaled by yarn_mscale (ggml's attn_factor times
     * 1 + 0.1 ln(factor); Hugging Face's attention_factor when config.json sets one), which the
     * decoder folds into attn_scale as its square (both q and k carry it). */
    double yarn_beta_fast, yarn_beta_slow, yarn_mscale;
    float rope_long[RUNTIME_ROPE_MAX_FACTORS], rope_short[RUNTIME_ROPE_MAX_FACTORS];
    int bos_id, eos_id;         /* -1 when unknown */
    /* Mixture of experts (0 experts: a dense FFN). Each token's FFN is the sum over the n_experts_used
     * experts its router picks, weighted (moe_norm: the weights renormalized to sum to 1), plus a
     * shared expert of shared_ffn_dim (qwen2moe) scaled by sigmoid(its gate). */
    int n_experts, n_experts_used, expert_ffn_dim, shared_ffn_dim, moe_norm;
    /* Sliding-window attention (0: none). swa_pattern p > 0: layers l with (l + 1) % p != 0 use the
     * window and rope_local_theta, the others attend globally (Gemma 3: p = 6); p = 0: every layer
     * uses the window (Mistral). */
    int sliding_window, swa_pattern;
    /* gpt-oss: attention sinks, biases on q, k, v, o, the router and the experts, the experts'
     * clamped SwiGLU (alpha 1.702, limit 7); with swa_pattern 2, its even layers use the window */
    int gptoss;
    /* DeepSeek V2 / V3 (deepseek2): multi-head latent attention. q = Wq_b . n(Wq_a . x) (q_lora_rank
     * > 0; else Wq . x), heads of head_dim = qk_nope + n_rot (the rotated part last); the cache
     * keeps per position the latent n(Wkv_a . x) of kv_lora_rank and one rotated k_pe of n_rot, from
     * which Wkv_b gives each head's k_nope (qk_nope) and v (v_head_dim). The first n_dense_lead
     * layers have a dense FFN, the others routed experts (moe_route a BACKEND_ROUTE_*_GROUPED with
     * n_group / topk_group, weights times moe_scale) plus shared experts of shared_ffn_dim, added
     * ungated. kv_lora_rank 0: not MLA. */
    int q_lora_rank, kv_lora_rank, v_head_dim, n_dense_lead;
    int moe_route, n_group, topk_group;
    double moe_scale;
    double rope_local_theta;
    double attn_scale;          /* 0: 1 / sqrt(head_dim) (Gemma: query_pre_attn_scalar^-0.5) */
    double final_softcap;       /* 0: none */
    /* Gemma 3: embeddings times sqrt(dim), norms before and after attention and FFN, GeGLU (tanh
     * gelu). norm_offset 1: norms multiply by (1 + w) (Hugging Face weights); 0 for GGUF files,
     * whose converter stored 1 + w. */
    int gemma;
    double norm_offset;
    /* Encoders (bert, nomic-bert): bidirectional attention, LayerNorm (with bias) of epsilon
     * norm_eps after attention and after the FFN. pooling: RUNTIME_POOL_* (GGUF <arch>.pooling_type,
     * an import's 1_Pooling/config.json; an encoder with neither: mean; a decoder: none unless the
     * model says), 4 for llama.cpp's rank pooling (a reranker, which runtime_embed refuses). */
    int encoder;
    double norm_eps;
    int pooling;
} runtime_config;

typedef struct runtime_weights runtime_weights;
/* Map a GGUF file and expose its tensors under canonical names (blk.N.attn_q.weight ->
 * model.layers.N.self_attn.q_proj.weight, ...) and its llama.* metadata as the config.
 * An architecture outside RUNTIME_ARCHS: MS_EUNSUPPORTED "architecture 'x' is not
 * supported; supported: ...". MS_EINVALID, MS_ENOTFOUND, MS_EIO, MS_ENOMEM. */
int runtime_weights_open_gguf(runtime_weights **out, const char *path);
/* The tensors of an open stored model: every tensor blob mapped and its header parsed by the
 * handle (each once; import.h's contract: floats keep their dtype; GGUF block types are U8 with
 * quant_type/logical_shape), config from the config blob. `sm` is borrowed: the tensors are
 * views into its mappings, so it must outlive w. MS_ENOTFOUND (blob), MS_EMISMATCH,
 * MS_EINVALID, MS_EUNSUPPORTED. */
int runtime_weights_open_model(runtime_weights **out, store_model *sm);
/* The same, opening (and owning) the handle of `name`. MS_ENOTFOUND (name). */
int runtime_weights_open_store(runtime_weights **out, store *s, const model_name *name);
const runtime_config *runtime_weights_config(const runtime_weights *w);
const backend_tensor *runtime_weights_find(const runtime_weights *w, const char *name);   /* NULL if absent */
size_t runtime_weights_count(const runtime_weights *w);
const backend_tensor *runtime_weights_at(const runtime_weights *w, size_t i);
/* The tokenizer built at open: from the GGUF metadata (the file's, or the store's MT_GGUF_META
 * layer), else from tokenizer.json (+ tokenizer_config.json) of a Hugging Face / MLX import
 * (runtime_tokenizer_from_model). Borrowed. When none could be built: the reason, as MS_ENOTFOUND / MS_EUNSUPPORTED /
 * MS_EINVALID with its message, and *out = NULL; the weights are usable all the same. */
int runtime_weights_tokenizer(const tokenizer **out, const runtime_weights *w);
/* The tokenizer of a stored model (tokenizer_from_layers fed from the handle's layers:
 * MT_GGUF_META, else MT_TOKENIZER + MT_TOKENIZER_CONFIG + MT_GENERATION_CONFIG + the config
 * blob). One function, so that run, tokenize and export cannot disagree on a model's tokenizer.
 * Messages name the model. MS_ENOTFOUND "... no tokenizer (...)" or what the builders return. */
int runtime_tokenizer_from_model(tokenizer **out, store_model *sm);
/* Bytes of all tensor data (for memory reports). */
uint64_t runtime_weights_nbytes(const runtime_weights *w);
void runtime_weights_close(runtime_weights *w);   /* NULL is fine */

/* Fill `c` from GGUF metadata (<arch>.* keys, through gguf_config_json: the config an import of
 * the file stores, read by the same rules) / from a config blob's JSON text. MS_EINVALID naming
 * the key and value, MS_EUNSUPPORTED for an architecture outside RUNTIME_ARCHS. */
int runtime_config_from_gguf(runtime_config *c, const gguf_file *g);
int runtime_config_from_json(runtime_config *c, const char *json, size_t len, const char *what);

/* The n_rot/2 rope frequencies for the config (base theta, scaling). */
void runtime_rope_freqs(double *freqs, const runtime_config *c);
/* Bytes the KV cache keeps per position and layer (keys and values; f16 or f32): 2 kv_heads
 * head_dim elements, MLA's one row of n_rot + kv_lora_rank. */
uint64_t runtime_config_kv_row_nbytes(const runtime_config *c, int kv_f16);
/* The context a model of config c opened with runtime_opts.n_ctx = n_ctx gets: n_ctx when
 * positive, else the model's context length, at most 4096. */
int runtime_config_ctx(const runtime_config *c, int n_ctx);

/* ---------------------------------------------------------------- model */

typedef struct runtime_opts {
    int n_threads;   /* <= 0: all cores */
    int n_ctx;       /* each sequence's at open; <= 0: the model's context length, at most 4096 */
    int kv_f16;      /* 1: KV cache in f16 (half the memory); 0: f32 */
    int n_batch;     /* prefill chunk; <= 0: 128 */
    const char *device;   /* backend_open's name: "cpu", "vulkan", "auto"; NULL: "auto" */
    int verbose;          /* 1: the backend says on stderr which device it chose and why */
    int n_seq;            /* sequences with a KV cache of their own (below); <= 0: 1 */
} runtime_opts;

typedef struct runtime_model runtime_model;
/* Open a GGUF file / a model in the store; allocates every buffer. opts may be NULL. */
int runtime_model_open_gguf(runtime_model **out, const char *path, const runtime_opts *opts);
int runtime_model_open_store(runtime_model **out, store *s, const model_name *name, const runtime_opts *opts);
/* Open an open stored model; `sm` is borrowed and must outlive the runtime model (a caller that
 * also needs the template or params reads them from the same handle). */
int runtime_model_open(runtime_model **out, store_model *sm, const runtime_opts *opts);
/* Run `n` tokens at positions n_past .. n_past+n-1 (prefill in batches of n_batch), append them to
 * the KV cache and write the last token's vocab_size logits. MS_EINVALID for a token id out of
 * range or when n_past + n exceeds the context ("... exceeds the context of N tokens"). */
int runtime_forward(runtime_model *m, const int32_t *tokens, int n, float *logits_out_last);
void runtime_model_reset(runtime_model *m);    /* forget the KV cache */
/* Keep the first n positions of the KV cache and forget the rest: the next forward writes from
 * position n (prefix reuse). MS_EINVALID when n is negative or past what the cache holds, or when
 * a sliding-window layer's ring cache has already overwritten positions the window before n needs
 * (the caller then starts over from position 0). */
int runtime_model_truncate(runtime_model *m, int n);
int runtime_model_n_past(const runtime_model *m);
int runtime_model_n_ctx(const runtime_model *m);   /* opts.n_ctx's: sequence 0's unless resized */
const runtime_config *runtime_model_config(const runtime_model *m);
const runtime_weights *runtime_model_weights(const runtime_model *m);
uint64_t runtime_model_kv_nbytes(const runtime_model *m);
/* The device the model runs on, as one line ("cpu avx512, 2 threads"). Borrowed. */
const char *runtime_model_device(const runtime_model *m);
void runtime_model_close(runtime_model *m);   /* NULL is fine */

/* ---------------------------------------------------------------- several sequences at once
 * A model opened with n_seq > 1 keeps n_seq KV caches, one per sequence, of n_ctx positions each
 * until runtime_seq_set_ctx sizes one otherwise: they share one pool of that total size
 * (runtime_model_kv_nbytes); sequence 0 is the one runtime_forward, _reset,
 * _truncate and _n_past use. Tokens of several sequences run as one forward pass: the rows of all
 * of them go through each matrix together, so every weight is read once per pass, while rope,
 * the cache writes and attention run per sequence at its own positions over its own cache.
 * Every op's arithmetic on a row depends only on that row (backend.h's contract), so a
 * sequence's logits and cache are bit for bit those of the same tokens run alone, whatever else
 * shares the pass and however its prompt is cut into chunks. A pass holds at most n_batch rows. */
#define RUNTIME_MAX_SEQ 64

int runtime_model_n_seq(const runtime_model *m);
/* One sequence's part of a pass: n tokens after what its cache holds; with logits, the last
 * one's vocab_size logits are written there. */
typedef struct runtime_seq_item {
    int seq;
    const int32_t *tokens;
    int n;
    float *logits;   /* may be NULL: a prompt chunk whose logits no one reads */
} runtime_seq_item;
/* Run items[0..n_items) (distinct sequences) together: passes of at most n_batch rows, each
 * taking one token of every item that has any left before more tokens of the first items (a
 * long prompt never holds back the others' single tokens). runtime_forward's checks per item,
 * all before anything runs: MS_EINVALID naming the sequence. */
int runtime_forward_multi(runtime_model *m, const runtime_seq_item *items, int n_items);
/* runtime_forward on sequence `seq`, callable from several threads at once (one per sequence):
 * calls that overlap run as one pass (runtime_forward_multi's packing). The first caller runs the
 * pass; before it does, it waits for the calls of every sequence marked active and not yet
 * waiting, briefly (a sequence busy elsewhere runs in the next pass), so that a steady set of
 * generating sequences decodes in one pass per token. Prompt chunks waiting beside single
 * tokens run in a pass of their own, the single tokens in the next (with any chunk left): a
 * new request's first token then costs the pass under way and its own prefill. */
int runtime_seq_forward(runtime_model *m, int seq, const int32_t *tokens, int n, float *logits_out_last);
/* Mark sequence `seq` as in use (on 1) by a caller that will keep calling runtime_seq_forward,
 * or no longer (0). Only the batching waits on it; results never depend on it. */
void runtime_seq_active(runtime_model *m, int seq, int on);
void runtime_seq_reset(runtime_model *m, int seq);
int runtime_seq_truncate(runtime_model *m, int seq, int n);   /* runtime_model_truncate's rules */
int runtime_seq_n_past(const runtime_model *m, int seq);
/* Size sequence seq's cache for n_ctx positions (0: none; a forward on it is then refused),
 * taking the room from the pool: the same context keeps the cache, another one starts it empty
 * (elsewhere in the pool when its place is too small). Results never depend on where a cache
 * lies or on the others' sizes: a sequence's logits are those of a model opened with n_ctx
 * alone. MS_ETOOBIG past runtime_model_max_ctx; MS_EBUSY while the other sequences' caches
 * hold the room (a caller may size idle ones to 0 and try again); MS_EUNSUPPORTED for a Phi-3
 * context across its original one when the model lacks those longrope factors, or an encoder.
 * Not while the sequence runs; other sequences may run meanwhile, and calls for distinct
 * sequences may overlap. */
int runtime_seq_set_ctx(runtime_model *m, int seq, int n_ctx);
int runtime_seq_n_ctx(const runtime_model *m, int seq);
/* The longest context one sequence may take: the pool's whole room (a layer with a sliding
 * window keeps a ring, so that may exceed it), at most the model's context length. */
int runtime_model_max_ctx(const runtime_model *m);
/* Passes run, and rows and sequences in them, since open: what the batching achieved. */
typedef struct runtime_batch_stats {
    uint64_t passes, rows, seqs, max_seqs;
} runtime_batch_stats;
void runtime_batch_stats_get(runtime_model *m, runtime_batch_stats *out);

/* ---------------------------------------------------------------- embeddings
 * Encoders (bert, nomic-bert: bidirectional attention over the whole sequence) and decoders whose
 * model names a pooling (Qwen3-Embedding: last-token) turn a sequence into one vector: the final
 * hidden states (after the last norm), pooled, then L2-normalized as ollama does. An encoder has
 * no logits: runtime_forward refuses it (MS_EUNSUPPORTED "... is an embedding model"). */

/* Pooling kinds, numbered as GGUF's <arch>.pooling_type (llama.cpp's enum llama_pooling_type). */
enum { RUNTIME_POOL_NONE = 0, RUNTIME_POOL_MEAN = 1, RUNTIME_POOL_CLS = 2, RUNTIME_POOL_LAST = 3 };

/* The model's own pooling (GGUF <arch>.pooling_type; sentence-transformers' 1_Pooling/config.json
 * in an import; an encoder with neither: MEAN, sentence-transformers' default), or
 * RUNTIME_POOL_NONE for a model that cannot embed (a plain decoder). */
int runtime_model_pooling(const runtime_model *m);
/* The length of one embedding (the hidden size). */
int runtime_model_embed_dim(const runtime_model *m);
/* Embed n_seqs sequences: sequence s is tokens[s][0 .. n_tokens[s]) (1 .. n_ctx tokens, the
 * tokenizer's specials already added: [CLS] ... [SEP]). Writes the pooled, L2-normalized vectors
 * to out[s * dim .. (s + 1) * dim). Sequences are packed into batches of at most n_batch tokens
 * (a sequence longer than n_batch runs alone): one forward per batch, attention per sequence.
 * Leaves a decoder's KV cache empty. MS_EUNSUPPORTED "<model>: cannot embed (...)" when the
 * pooling is NONE; MS_EINVALID for an empty sequence, one past the context ("... N tokens exceeds
 * the context of M"), a token id out of range. */
int runtime_embed(runtime_model *m, const int32_t *const *tokens, const int *n_tokens, int n_seqs, float *out);
/* The same vectors before the L2 normalization: the pooled hidden states as they are (ollama's
 * older /api/embeddings answers these; its /api/embed the normalized ones). Same checks. */
int runtime_embed_pooled(runtime_model *m, const int32_t *const *tokens, const int *n_tokens, int n_seqs, float *out);

/* ---------------------------------------------------------------- sampler */

typedef struct runtime_sampler_opts {
    float temp;             /* <= 0: greedy */
    int top_k;              /* <= 0: off */
    float top_p;            /* >= 1: off */
    float min_p;            /* <= 0: off */
    float repeat_penalty;   /* 1: off */
    int repeat_last_n;      /* window of past tokens (prompt included) every penalty looks at */
    uint64_t seed;
    /* OpenAI's: logit -= count * frequency_penalty + (count > 0) * presence_penalty, for each
     * token counted in that window; 0: off; negative values favour repeats */
    float frequency_penalty;
    float presence_penalty;
} runtime_sampler_opts;
void runtime_sampler_defaults(runtime_sampler_opts *o);   /* llama.cpp's: 0.8, 40, 0.95, 0.05, 1.0, 64, 0, 0 */

typedef struct runtime_sampler runtime_sampler;
int runtime_sampler_new(runtime_sampler **out, const runtime_sampler_opts *o, int n_vocab);
/* Remember a token (prompt or generated) for the penalties. */
void runtime_sampler_accept(runtime_sampler *s, int32_t token);
/* Pick the next token from logits[n_vocab] (modified in place). Same seed, same sequence. */
int32_t runtime_sampler_sample(runtime_sampler *s, float *logits);
void runtime_sampler_free(runtime_sampler *s);   /* NULL is fine */

/* Log probabilities of one step, for the APIs' logprobs. logits[n_vocab] are what the sampler
 * left after runtime_sampler_sample: the grammar's mask and the penalties applied, before
 * temperature, top-k, top-p and min-p (those shape only the draw). log-softmax in double with the
 * maximum subtracted; a masked token (-inf) has probability 0 and is never listed. *chosen_lp is
 * the log probability of `chosen`; top[0..return) the n_top (<= RUNTIME_MAX_TOP_LOGPROBS) most
 * likely tokens, best first, ties by lower id. Returns the count listed (fewer than n_top when
 * fewer tokens are unmasked). */
#define RUNTIME_MAX_TOP_LOGPROBS 20
typedef struct runtime_logprob {
    int32_t id;
    double logprob;
} runtime_logprob;
int runtime_logprobs(const float *logits, int n_vocab, int32_t chosen, double *chosen_lp, runtime_logprob *top,
                     int n_top);

#endif
