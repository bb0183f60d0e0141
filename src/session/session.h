/* session.h: one conversation with a loaded model; the whole surface of src/session.
 *
 * What `mstore run` and `mstore serve` share between the runtime and their users: the chat
 * template, the prompt as tokens in the KV cache, sampling, stop strings, detokenized streaming
 * and the context accounting. A session is not thread-safe: the server gives each loaded model
 * one session per sequence (session_seq_set) and lets one request at a time use each.
 *
 * KV reuse: the session remembers the text whose tokens sit in the KV cache (the prompts fed and
 * the answers generated). session_feed with SESSION_FEED_WHOLE gets the whole context each time
 * (a rendered conversation); when the cached text is a prefix of it, only the rest is tokenized
 * and run, so a second turn does not recompute the first. Otherwise (another conversation, a
 * history the template renders differently) the cache starts over. The text delta is tokenized
 * alone, which suits an interactive chat; SESSION_FEED_EXACT tokenizes the whole text and reuses
 * the cache only when its tokens begin the new ones, so a reused prompt runs exactly as a fresh
 * one (the server's choice: clients compare answers). runtime_forward only appends,
 * so a diverging prompt is re-run whole rather than truncated.
 *
 * Streaming: the text given to the emit callback is cut only at UTF-8 character boundaries
 * (a piece that ends inside a character waits for the next one), and never shows any part of a
 * stop string: a tail that could begin one is held back until it cannot. */
#ifndef MSTORE_SESSION_H
#define MSTORE_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include "chat/chat.h"
#include "grammar/grammar.h"
#include "runtime/runtime.h"

#define SESSION_MAX_STOPS    16
#define SESSION_MAX_STOP_LEN 256

typedef struct session session;

/* A session over an open model and its tokenizer (both borrowed; they must outlive it).
 * tmpl_text: the model's chat template (NULL or empty: none; renders then plainly, "user: ...").
 * The sampler starts with runtime_sampler_defaults. MS_ENOMEM, MS_EINVALID. */
int session_new(session **out, runtime_model *m, const tokenizer *t, const char *tmpl_text, size_t tmpl_len);
void session_free(session *S); /* NULL is fine */

runtime_model *session_model(const session *S);
/* Several sessions over one model (runtime.h: several sequences at once): each runs on a sequence
 * of its own, 0 by default; session_seq_set moves this one to `seq` (< runtime_model_n_seq),
 * its cache empty. Sessions on distinct sequences may then run from their own threads at once,
 * their forwards sharing passes. */
void session_seq_set(session *S, int seq);
int session_seq(const session *S);
/* Size this session's cache for n_ctx tokens (runtime_seq_set_ctx, its errors): the same size
 * keeps what it holds, another starts it empty. session_ctx: its size now. */
int session_ctx_set(session *S, int n_ctx);
int session_ctx(const session *S);
/* The session is taken by a caller that will feed and generate now (on 1), or let go (0): the
 * model's passes wait for an active session's next token (runtime_seq_active). */
void session_active_set(session *S, int on);
/* Bytes of text[0..len) that begin the text whose tokens the cache holds (the last prompt and
 * the answer generated after it): how much of a new prompt this session could reuse; 0 when
 * its cache is empty. For choosing among sessions; session_feed decides what it reuses. */
size_t session_cached_prefix(const session *S, const char *text, size_t len);
/* 1 when the model ships a chat template; 0 when it has none (the template then renders plainly). */
int session_has_template(const session *S);
const chat_template *session_template(const session *S);
const tokenizer *session_tokenizer(const session *S);

/* Render msgs[0..n) with the template, ending with the assistant's turn opening: malloc'd *out.
 * MS_EINVALID (roles the template refuses), MS_ENOMEM. Reads only the template: a request may
 * render while another uses the session. */
int session_render(const session *S, char **out, size_t *len_out, const chat_msg *msgs, size_t n);

/* Replace the sampler (options as runtime_sampler_new). The repeat penalty sees the tokens
 * already in the cache. */
int session_sampler_set(session *S, const runtime_sampler_opts *o);

enum {
    SESSION_FEED_APPEND = 0, /* the text goes after what the cache holds */
    SESSION_FEED_WHOLE = 1, /* the text is the whole context: reuse the cached text prefix */
    SESSION_FEED_EXACT = 2, /* the whole context, tokenized whole: reuse the cached tokens only
                              * when they begin its tokens (the result is exactly a fresh run's) */
};
/* Tokenize `text` (parse_special: control tokens written in it are matched, as in a rendered
 * template) and run it through the model. BOS goes first when the cache is empty, unless the
 * text starts with the BOS text itself. With SESSION_FEED_WHOLE, a text that does not extend the
 * cache, or does not fit after it, is run from an empty cache. Returns 0; MS_ETOOBIG when it
 * does not fit the context ("prompt of N tokens does not fit the context of M tokens"; nothing
 * is run and, with SESSION_FEED_WHOLE, the cache is empty); MS_EINVALID when there is nothing to
 * start from; MS_ENOMEM, runtime errors. */
int session_feed(session *S, const char *text, size_t len, int parse_special, int mode);

/* The tokens `text` takes fed with SESSION_FEED_EXACT (BOS included), without running it: 0,
 * or MS_ETOOBIG when they do not fit a context of ctx tokens (<= 0: the session's own), with
 * session_feed's message. A text longer in bytes than the context could hold in the vocab's
 * longest tokens is refused without being tokenized, so the cost is bounded by the context, not
 * by the text ("prompt of at least N tokens ..."). With ctx > 0 it reads only what session_new
 * set up (tokenizer, BOS): a request may call it while another uses the session. MS_ENOMEM. */
int session_count(const session *S, const char *text, size_t len, int parse_special, int ctx, size_t *n_out);

/* Constrain every answer to `len` bytes of `format`: "json" (any JSON object) or a JSON Schema's
 * text (grammar.h); NULL or empty: no constraint. Each step then masks the tokens that cannot
 * continue a valid answer before the sampler sees the logits (so greedy and seeded sampling both
 * obey it), end tokens only once the answer is complete, and the answer ends when the grammar
 * can take nothing more. The vocab's token trie is built on first use and kept. Returns 0, or
 * what grammar_from_format returns (the old format stays). */
int session_format_set(session *S, const char *format, size_t len);
/* The same between literal prefix and suffix (grammar_from_format_framed): a forced tool call. */
int session_format_set_framed(session *S, const char *format, size_t len, const char *prefix, const char *suffix);

/* Forget the KV cache and its text. */
void session_reset(session *S);

/* Why a generation ended. */
typedef enum session_done {
    SESSION_DONE_STOP = 0, /* end-of-generation token or a stop string */
    SESSION_DONE_LENGTH, /* n_predict tokens */
    SESSION_DONE_CONTEXT, /* the context is full */
    SESSION_DONE_CANCELLED, /* the emit callback asked to stop */
} session_done;
const char *session_done_name(session_done d); /* "stop", "length", "context", "cancelled" */

/* One generated token with its log probabilities (the APIs' logprobs). The distribution is the
 * one the sampler drew from before it shaped the draw: the model's logits after the format's
 * mask and the penalties, before temperature, top-k, top-p and min-p (runtime_logprobs), as
 * OpenAI and llama-server's post-penalty choice report it. So the numbers do not depend on the
 * sampling settings (a greedy and a sampled run of one context report the same), and under a
 * format a token the grammar forbids has probability 0 and is never listed: the alternatives
 * are what the token could have been. The chosen token's logprob is of that distribution too
 * (with temperature, top-k or top-p the draw itself was narrower). End tokens are not reported
 * (no text); tokens whose text a stop string cut are (the caller decides what to show). */
typedef struct session_token {
    int32_t id;
    const char *text; /* its bytes as they go into the answer (maybe part of a UTF-8 character) */
    size_t len;
    double logprob;
    const runtime_logprob *top; /* the n_top most likely, best first, ties by lower id */
    int n_top;
} session_token;
/* Receives each token before its text is emitted. Non-zero: stop (SESSION_DONE_CANCELLED). */
typedef int (*session_token_fn)(void *ctx, const session_token *t);

typedef struct session_gen {
    int n_predict; /* < 0: until the context is full */
    const char *stops[SESSION_MAX_STOPS]; /* stop strings (not shown, end generation) */
    size_t n_stops;
    session_token_fn token; /* NULL: no log probabilities are computed; else called with emit's ctx */
    int n_top; /* alternatives per token, 0..RUNTIME_MAX_TOP_LOGPROBS */
} session_gen;

/* Receives the answer's text as it is generated. Non-zero: stop (SESSION_DONE_CANCELLED). The
 * text of a token always comes after that token's session_token_fn call. */
typedef int (*session_emit_fn)(void *ctx, const char *text, size_t len);

typedef struct session_stats {
    size_t n_prompt; /* tokens run by session_feed (only the part not reused) */
    size_t n_prompt_total; /* tokens of the whole prompt in the cache at the last feed */
    size_t n_gen; /* tokens generated */
    double t_prompt, t_gen; /* seconds */
} session_stats;

/* Sample and stream up to g->n_predict tokens after the last feed, under the format if one is
 * set. Every token emitted also goes through the model, so the cache holds exactly its text
 * (the next feed can reuse it). lstrip: drop the first piece's leading space (sentencepiece
 * right after a bare BOS). Returns 0 with *done set, or an error (runtime, MS_ENOMEM; with a
 * format, MS_EINVALID when no token of the vocab can continue the answer). */
int session_generate(session *S, const session_gen *g, int lstrip, session_emit_fn emit, void *ctx, session_done *done);

/* ---------------------------------------------------------------- embeddings
 * What `mstore embed` and the server's three embedding endpoints share: inputs to token
 * sequences (the tokenizer's specials added: [CLS] ... [SEP] for BERT), fitted to the context,
 * one runtime_embed call for the whole list (it packs the sequences into batches), then
 * `dimensions` applied. The callers only read requests and write answers. */

#define SESSION_EMBED_MAX_INPUTS 2048 /* inputs in one call, as OpenAI bounds a request */
#define SESSION_EMBED_MAX_BYTES  (64u << 20) /* bytes of text in one call, all inputs together */
#define SESSION_EMBED_MAX_IDS    (1u << 20) /* token ids given in one call, all inputs together */

/* One input: a text (tokenized with add_special, control-token texts left as text), or, when
 * text is NULL, token ids run exactly as given (nothing added). Borrowed. */
typedef struct session_embed_input {
    const char *text;
    size_t len;
    const int32_t *ids;
    size_t n_ids;
} session_embed_input;

typedef struct session_embed_opts {
    /* 1: an input past the model's context keeps its first tokens and, when its last token is
     * a control token (the [SEP] / EOS that add_special appends), that one last, as ollama
     * keeps it; 0: such an input is refused giving both sizes */
    int truncate;
    int dimensions; /* 0: the model's; else the first d components, renormalized (Matryoshka) */
    int raw;        /* 1: the pooled vectors as they are, not L2-normalized (ollama's older
                     * /api/embeddings; runtime_embed_pooled); dimensions then only cuts */
    const char *model; /* the model's name, for messages */
} session_embed_opts;

/* Embed in[0..n): on success *out is n * *dim_out floats (malloc'd; the caller frees it), row i
 * input i's vector, L2-normalized (unless raw); *n_tokens_out the tokens run (after truncation). n == 0
 * gives *out NULL, 0 tokens. The model's KV cache is left empty (session_reset).
 * MS_EUNSUPPORTED "model 'x' does not support embeddings" (runtime_model_pooling NONE);
 * MS_EINVALID: "input 3 has 700 tokens, past the context of 512" (truncate 0), an input with
 * no tokens, a token id outside the vocab, dimensions past the model's, more than the
 * SESSION_EMBED_MAX_* limits; MS_ENOMEM, runtime errors. */
int session_embed(session *S, float **out, int *dim_out, size_t *n_tokens_out, const session_embed_input *in, size_t n,
                  const session_embed_opts *o);

/* Counters since the last session_stats_clear. */
const session_stats *session_stats_get(const session *S);
void session_stats_clear(session *S);

#endif
