/* session.c: prompt to tokens, KV reuse by cached text, sampling and streaming with stop strings. */
#include "session/session.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

struct session {
    runtime_model *m;
    int seq; /* the model's sequence (KV cache) this session runs on */
    const tokenizer *t;
    runtime_sampler *smp;
    runtime_sampler_opts so;
    chat_template *tmpl;
    int has_template;
    float *logits;
    char *bos_text; /* what BOS is in text ("<s>"), or "" */
    size_t max_token_len; /* bytes of the vocab's longest token text: bounds bytes per token */
    ms_text cache; /* the text whose tokens are in the KV cache (EXACT: the text they were cut from) */
    int32_t *ids; /* those tokens (for the repeat penalty of a new sampler) */
    size_t n_ids, cap_ids;
    int exact; /* the cache was fed by SESSION_FEED_EXACT: `cache` does not describe it */
    session_stats st;
    grammar *gr; /* the format's grammar, or NULL */
    grammar_vocab *gv; /* the tokenizer's trie, built with the first format */
    grammar_matcher *gm; /* the answer in progress under gr */
};

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static char *token_dup(const tokenizer *t, int32_t id)
{
    size_t len = 0;
    const char *s = id >= 0 ? tokenizer_token_text(t, id, &len) : NULL;

    return ms_strdup_printf("%.*s", s ? (int)len : 0, s ? s : "");
}

int session_new(session **out, runtime_model *m, const tokenizer *t, const char *tmpl_text, size_t tmpl_len)
{
    session *S = calloc(1, sizeof *S);
    char *eos = NULL;
    int rc = MS_ENOMEM;

    *out = NULL;
    if (!S)
        return ms_err(MS_ENOMEM, "out of memory");
    S->m = m, S->t = t;
    S->has_template = tmpl_text && tmpl_len > 0;
    if (!(S->logits = malloc(sizeof(float) * (size_t)runtime_model_config(m)->vocab_size)) ||
        !(S->bos_text = token_dup(t, tokenizer_bos(t))) || !(eos = token_dup(t, tokenizer_eos(t)))) {
        rc = ms_err(MS_ENOMEM, "out of memory");
        goto fail;
    }
    if ((rc = chat_template_new(&S->tmpl, tmpl_text, tmpl_len, S->bos_text, eos)) < 0)
        goto fail;
    for (size_t i = 0; i < tokenizer_n_vocab(t); i++) {
        size_t len = 0;
        if (tokenizer_token_text(t, (int32_t)i, &len) && len > S->max_token_len)
            S->max_token_len = len;
    }
    runtime_sampler_defaults(&S->so);
    if ((rc = session_sampler_set(S, &S->so)) < 0)
        goto fail;
    free(eos);
    *out = S;
    return 0;
fail:
    free(eos);
    session_free(S);
    return rc;
}

void session_free(session *S)
{
    if (!S)
        return;
    runtime_sampler_free(S->smp);
    chat_template_free(S->tmpl);
    MS_FREE_ALL(S->logits, S->bos_text, S->cache.p, S->ids);
    grammar_matcher_free(S->gm);
    grammar_free(S->gr);
    grammar_vocab_free(S->gv);
    free(S);
}

int session_format_set(session *S, const char *format, size_t len)
{
    return session_format_set_framed(S, format, len, NULL, NULL);
}

int session_format_set_framed(session *S, const char *format, size_t len, const char *prefix, const char *suffix)
{
    grammar *g = NULL;
    grammar_matcher *m = NULL;
    int rc;

    if (format && len) {
        if ((rc = grammar_from_format_framed(&g, format, len, prefix, suffix, "format")) < 0)
            return rc;
        if ((!S->gv && (rc = grammar_vocab_new(&S->gv, S->t)) < 0) || (rc = grammar_matcher_new(&m, g)) < 0) {
            grammar_free(g);
            return rc;
        }
    }
    grammar_matcher_free(S->gm);
    grammar_free(S->gr);
    S->gr = g, S->gm = m;
    return 0;
}

runtime_model *session_model(const session *S)
{
    return S->m;
}
void session_seq_set(session *S, int seq)
{
    S->seq = seq;
    session_reset(S); /* the one it ran on before keeps its cache; this one starts empty */
}
int session_seq(const session *S)
{
    return S->seq;
}
int session_ctx_set(session *S, int n_ctx)
{
    int rc;

    if (runtime_seq_n_ctx(S->m, S->seq) == n_ctx)
        return 0;
    if ((rc = runtime_seq_set_ctx(S->m, S->seq, n_ctx)) < 0)
        return rc;
    session_reset(S); /* the cache starts empty: so does the text it held */
    return 0;
}
int session_ctx(const session *S)
{
    return runtime_seq_n_ctx(S->m, S->seq);
}
void session_active_set(session *S, int on)
{
    runtime_seq_active(S->m, S->seq, on);
}
size_t session_cached_prefix(const session *S, const char *text, size_t len)
{
    size_t n = 0;

    if (runtime_seq_n_past(S->m, S->seq) == 0)
        return 0;
    while (n < len && n < S->cache.n && S->cache.p[n] == text[n])
        n++;
    return n;
}
int session_has_template(const session *S)
{
    return S->has_template;
}
const chat_template *session_template(const session *S)
{
    return S->tmpl;
}
const tokenizer *session_tokenizer(const session *S)
{
    return S->t;
}

const session_stats *session_stats_get(const session *S)
{
    return &S->st;
}
void session_stats_clear(session *S)
{
    memset(&S->st, 0, sizeof S->st);
}

int session_render(const session *S, char **out, size_t *len_out, const chat_msg *msgs, size_t n)
{
    return chat_render(out, len_out, S->tmpl, msgs, n, 1);
}

int session_sampler_set(session *S, const runtime_sampler_opts *o)
{
    runtime_sampler *smp;
    size_t from;
    int rc;

    if ((rc = runtime_sampler_new(&smp, o, runtime_model_config(S->m)->vocab_size)) < 0)
        return rc;
    /* only the penalty window matters; feeding more would be wasted work */
    from = o->repeat_last_n > 0 && S->n_ids > (size_t)o->repeat_last_n ? S->n_ids - (size_t)o->repeat_last_n : 0;
    for (size_t i = from; i < S->n_ids; i++)
        runtime_sampler_accept(smp, S->ids[i]);
    runtime_sampler_free(S->smp);
    S->smp = smp;
    S->so = *o;
    return 0;
}

void session_reset(session *S)
{
    runtime_seq_reset(S->m, S->seq);
    S->cache.n = 0;
    if (S->cache.p)
        S->cache.p[0] = '\0';
    S->n_ids = 0;
    S->exact = 0;
}

static int ids_push(session *S, const int32_t *ids, size_t n)
{
    if (S->n_ids + n > S->cap_ids) {
        size_t cap = (S->n_ids + n) * 2 + 64;
        int32_t *p = realloc(S->ids, cap * sizeof *p);
        if (!p)
            return ms_err(MS_ENOMEM, "out of memory");
        S->ids = p, S->cap_ids = cap;
    }
    memcpy(S->ids + S->n_ids, ids, n * sizeof *ids);
    S->n_ids += n;
    return 0;
}

/* Tokenize and run `s` after what the cache holds. Returns 0, or MS_ETOOBIG with nothing run
 * when it does not fit. */
static int feed_after(session *S, const char *s, size_t len, int parse_special)
{
    const char *bos = S->bos_text;
    size_t bos_len = strlen(bos);
    int first = runtime_seq_n_past(S->m, S->seq) == 0;
    int add = first && !(parse_special && bos_len && len >= bos_len && memcmp(s, bos, bos_len) == 0);
    int32_t *ids = NULL;
    size_t n, n_past = (size_t)runtime_seq_n_past(S->m, S->seq);
    double t0 = now();
    int rc;

    if ((rc = tokenizer_encode_alloc(S->t, s, len, add, parse_special, &ids, &n)) < 0)
        return rc;
    if (n == 0) {
        rc = first ? ms_err(MS_EINVALID, "the prompt is empty and the vocab adds no BOS: nothing to start from") : 0;
        goto done;
    }
    /* ">=": one position must stay free for the first generated token */
    if (n_past + n >= (size_t)runtime_seq_n_ctx(S->m, S->seq)) {
        rc = ms_err(MS_ETOOBIG, "prompt of %zu tokens does not fit the context of %d tokens", n_past + n,
                    runtime_seq_n_ctx(S->m, S->seq));
        goto done;
    }
    if ((rc = ids_push(S, ids, n)) < 0)
        goto done;
    for (size_t i = 0; i < n; i++)
        runtime_sampler_accept(S->smp, ids[i]);
    if ((rc = runtime_seq_forward(S->m, S->seq, ids, (int)n, S->logits)) < 0) {
        session_reset(S); /* the cache no longer matches any text */
        goto done;
    }
    S->st.n_prompt += n;
    S->st.t_prompt += now() - t0;
    rc = ms_text_put(&S->cache, s, len);
done:
    S->st.n_prompt_total = (size_t)runtime_seq_n_past(S->m, S->seq);
    free(ids);
    return rc;
}

/* SESSION_FEED_EXACT: tokenize the whole text; run only the tokens after the longest prefix it
 * shares with the cached ones. At least one token is always run: its logits start the answer. */
/* Whether text starting with BOS's text gets no BOS of its own: it is written in it. */
static int adds_bos(const session *S, const char *s, size_t len, int parse_special)
{
    size_t bos_len = strlen(S->bos_text);

    return !(parse_special && bos_len && len >= bos_len && memcmp(s, S->bos_text, bos_len) == 0);
}

/* A token stands for at most its vocab text's bytes (a normalizer's "▁" and "<0x0A>" are longer
 * than what they stand for); twice that and some, for any normalizer that shrinks text. A text
 * longer than that many bytes per position cannot fit: MS_ETOOBIG without tokenizing it, so
 * that refusing a huge prompt costs nothing. */
static int too_long(const session *S, size_t len, size_t n_ctx, size_t *n_out)
{
    size_t per_token = 2 * S->max_token_len + 8;

    if (len / per_token < n_ctx)
        return 0;
    *n_out = len / per_token;
    return ms_err(MS_ETOOBIG, "prompt of at least %zu tokens (%zu bytes) does not fit the context of %zu tokens",
                  *n_out, len, n_ctx);
}

int session_count(const session *S, const char *text, size_t len, int parse_special, int ctx, size_t *n_out)
{
    size_t n_ctx = (size_t)(ctx > 0 ? ctx : runtime_seq_n_ctx(S->m, S->seq));
    int32_t *ids = NULL;
    int rc;

    *n_out = 0;
    if ((rc = too_long(S, len, n_ctx, n_out)) < 0)
        return rc;
    if ((rc = tokenizer_encode_alloc(S->t, text, len, adds_bos(S, text, len, parse_special), parse_special, &ids,
                                     n_out)) < 0)
        return rc;
    free(ids);
    if (*n_out >= n_ctx)
        return ms_err(MS_ETOOBIG, "prompt of %zu tokens does not fit the context of %zu tokens", *n_out, n_ctx);
    return 0;
}

static int feed_exact(session *S, const char *s, size_t len, int parse_special)
{
    size_t n, from = 0;
    int add = adds_bos(S, s, len, parse_special);
    int32_t *ids = NULL;
    double t0 = now();
    int rc;

    if ((rc = too_long(S, len, (size_t)runtime_seq_n_ctx(S->m, S->seq), &n)) < 0)
        goto done;
    if ((rc = tokenizer_encode_alloc(S->t, s, len, add, parse_special, &ids, &n)) < 0)
        return rc;
    if (n == 0) {
        rc = ms_err(MS_EINVALID, "the prompt is empty and the vocab adds no BOS: nothing to start from");
        goto done;
    }
    if (n >= (size_t)runtime_seq_n_ctx(S->m, S->seq)) {
        rc = ms_err(MS_ETOOBIG, "prompt of %zu tokens does not fit the context of %d tokens", n,
                    runtime_seq_n_ctx(S->m, S->seq));
        goto done;
    }
    /* Keep the longest common prefix of the cached tokens and the new ones: a chat's next turn
     * shares everything up to where the answer's own tokens and a fresh tokenization of its text
     * part. One token at least is run, for the logits that start the answer. */
    while (from < S->n_ids && from + 1 < n && S->ids[from] == ids[from])
        from++;
    if (from == 0 || runtime_seq_truncate(S->m, S->seq, (int)from) < 0)
        session_reset(S), from = 0;
    else
        S->n_ids = from;
    if ((rc = ids_push(S, ids + from, n - from)) < 0)
        goto done;
    if ((rc = runtime_seq_forward(S->m, S->seq, ids + from, (int)(n - from), S->logits)) < 0) {
        session_reset(S);
        goto done;
    }
    S->exact = 1; /* the text no longer describes the cache: WHOLE mode starts over */
    S->cache.n = 0;
    rc = ms_text_put(&S->cache, s, len); /* what session_cached_prefix compares with */
    S->st.n_prompt += n - from;
    S->st.t_prompt += now() - t0;
done:
    if (rc < 0)
        session_reset(S);
    S->st.n_prompt_total = (size_t)runtime_seq_n_past(S->m, S->seq);
    free(ids);
    return rc;
}

int session_feed(session *S, const char *text, size_t len, int parse_special, int mode)
{
    int rc;

    if (mode == SESSION_FEED_EXACT)
        return feed_exact(S, text, len, parse_special);
    if (mode == SESSION_FEED_APPEND)
        return feed_after(S, text, len, parse_special);
    if (S->exact || S->cache.n > len || (S->cache.n && memcmp(S->cache.p, text, S->cache.n) != 0))
        session_reset(S);
    rc = feed_after(S, text + S->cache.n, len - S->cache.n, parse_special);
    if (rc == MS_ETOOBIG && S->cache.n > 0) { /* the delta did not fit: try the whole text alone */
        session_reset(S);
        rc = feed_after(S, text, len, parse_special);
    }
    if (rc < 0)
        session_reset(S);
    return rc;
}

const char *session_done_name(session_done d)
{
    static const char *const names[] = {"stop", "length", "context", "cancelled"};

    return (unsigned)d < sizeof names / sizeof *names ? names[d] : "?";
}

/* Where in pend[0..n) the earliest stop string begins (n when none), and how much of its tail
 * could still begin one (*hold). */
static size_t stop_scan(const session_gen *g, const char *pend, size_t n, size_t *hold)
{
    size_t at = n;

    *hold = 0;
    for (size_t k = 0; k < g->n_stops; k++) {
        size_t sl = strlen(g->stops[k]);
        if (!sl)
            continue;
        for (size_t i = 0; i + sl <= n && i < at; i++)
            if (memcmp(pend + i, g->stops[k], sl) == 0) {
                at = i;
                break;
            }
        for (size_t h = sl - 1 < n ? sl - 1 : n; h > *hold; h--)
            if (memcmp(pend + n - h, g->stops[k], h) == 0) {
                *hold = h;
                break;
            }
    }
    return at;
}

int session_generate(session *S, const session_gen *g, int lstrip, session_emit_fn emit, void *ctx, session_done *done)
{
    ms_text pend = {NULL, 0, 0}; /* generated text not yet emitted */
    double t0 = now();
    int n = 0, rc = 0;

    *done = SESSION_DONE_LENGTH;
    if (S->gm)
        grammar_matcher_reset(S->gm);
    while (g->n_predict < 0 || n < g->n_predict) {
        int32_t tok;
        char buf[256];
        size_t len, hold, at, ready, n_allowed;

        /* the mask goes before the sampler's chain, so no setting can pick a masked token */
        if (S->gm && (rc = grammar_matcher_mask(S->gm, S->gv, S->logits, &n_allowed)) < 0)
            goto done;
        tok = runtime_sampler_sample(S->smp, S->logits);
        if (tokenizer_is_eog(S->t, tok)) {
            *done = SESSION_DONE_STOP;
            break;
        }
        /* a piece longer than buf is not a real vocab entry: it is skipped */
        if (tokenizer_decode_piece(S->t, tok, n == 0 && lstrip ? TOKENIZER_DECODE_LSTRIP : 0, buf, sizeof buf, &len) <
            0)
            len = 0;
        /* with lstrip the piece lost a leading space the mask saw; the grammar allows the space
         * to be absent wherever it allowed it present (whitespace before a value is optional) */
        if (S->gm && (rc = grammar_matcher_accept(S->gm, buf, len)) < 0)
            goto done;
        if (g->token) {
            runtime_logprob top[RUNTIME_MAX_TOP_LOGPROBS];
            session_token st = {.id = tok, .text = buf, .len = len, .top = top};
            st.n_top = runtime_logprobs(S->logits, runtime_model_config(S->m)->vocab_size, tok, &st.logprob, top, g->n_top);
            if (g->token(ctx, &st) != 0) {
                *done = SESSION_DONE_CANCELLED;
                pend.n = 0;
                break;
            }
        }
        n++;
        S->st.n_gen++;
        runtime_sampler_accept(S->smp, tok);
        if ((rc = ms_text_put(&pend, buf, len)) < 0)
            goto done;
        at = stop_scan(g, pend.p, pend.n, &hold);
        if (at < pend.n) { /* a stop string: emit what precedes it, and end */
            if (at && emit(ctx, pend.p, at) != 0)
                *done = SESSION_DONE_CANCELLED;
            else
                *done = SESSION_DONE_STOP;
            pend.n = 0;
            break;
        }
        ready = ms_utf8_complete(pend.p, pend.n - hold);
        if (ready) {
            if (emit(ctx, pend.p, ready) != 0) {
                *done = SESSION_DONE_CANCELLED;
                pend.n = 0;
                break;
            }
            memmove(pend.p, pend.p + ready, pend.n - ready);
            pend.n -= ready;
        }
        /* this token is out; no room to run it */
        if (runtime_seq_n_past(S->m, S->seq) >= runtime_seq_n_ctx(S->m, S->seq)) {
            if (g->n_predict < 0 || n < g->n_predict)
                *done = SESSION_DONE_CONTEXT;
            break;
        }
        if ((rc = runtime_seq_forward(S->m, S->seq, &tok, 1, S->logits)) < 0) {
            session_reset(S);
            goto done;
        }
        if ((rc = ids_push(S, &tok, 1)) < 0 || (rc = ms_text_put(&S->cache, buf, len)) < 0)
            goto done;
        if (S->gm && grammar_matcher_finished(S->gm)) { /* nothing can follow: the answer is whole */
            *done = SESSION_DONE_STOP;
            break;
        }
    }
    if (pend.n && emit(ctx, pend.p, pend.n) != 0)
        *done = SESSION_DONE_CANCELLED;
done:
    S->st.t_gen += now() - t0;
    free(pend.p);
    return rc;
}
