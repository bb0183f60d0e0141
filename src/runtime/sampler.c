/* sampler.c: choosing the next token. The chain is llama.cpp's: penalties (repeat, frequency,
 * presence), top-k, softmax, top-p, min-p, temperature, then a draw from the remaining
 * distribution. The PRNG is our own (PCG32), so the same seed gives the same tokens on every
 * machine. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime.h"

typedef struct cand {
    float logit, p;
    int32_t id;
} cand;

struct runtime_sampler {
    runtime_sampler_opts o;
    int n_vocab;
    cand *c;
    int32_t *hist;   /* ring of the last repeat_last_n tokens */
    int n_hist, hist_pos;
    uint64_t state, inc;
};

void runtime_sampler_defaults(runtime_sampler_opts *o)
{
    o->temp = 0.8f;
    o->top_k = 40;
    o->top_p = 0.95f;
    o->min_p = 0.05f;
    o->repeat_penalty = 1.0f;
    o->repeat_last_n = 64;
    o->frequency_penalty = 0.0f;
    o->presence_penalty = 0.0f;
    o->seed = 0;
}

static uint32_t pcg32(runtime_sampler *s)
{
    uint64_t old = s->state;
    uint32_t x = (uint32_t)(((old >> 18) ^ old) >> 27), rot = (uint32_t)(old >> 59);

    s->state = old * 6364136223846793005ull + s->inc;
    return (x >> rot) | (x << ((32 - rot) & 31));
}

int runtime_sampler_new(runtime_sampler **out, const runtime_sampler_opts *o, int n_vocab)
{
    runtime_sampler *s;

    *out = NULL;
    if (n_vocab <= 0)
        return ms_err(MS_EINVALID, "sampler: vocab size %d", n_vocab);
    if (o->repeat_last_n < 0 || o->repeat_last_n > 1 << 20)
        return ms_err(MS_EINVALID, "repeat-last-n: %d out of range [0, %d]", o->repeat_last_n, 1 << 20);
    /* the option table bounds them to OpenAI's -2..2; here only what would poison every logit */
    if (!isfinite(o->frequency_penalty))
        return ms_err(MS_EINVALID, "frequency_penalty: %g is not a finite number", (double)o->frequency_penalty);
    if (!isfinite(o->presence_penalty))
        return ms_err(MS_EINVALID, "presence_penalty: %g is not a finite number", (double)o->presence_penalty);
    s = calloc(1, sizeof *s);
    if (!s)
        return ms_err(MS_ENOMEM, "out of memory");
    s->o = *o;
    s->n_vocab = n_vocab;
    s->c = malloc((size_t)n_vocab * sizeof *s->c);
    s->hist = malloc((size_t)(o->repeat_last_n ? o->repeat_last_n : 1) * sizeof *s->hist);
    if (!s->c || !s->hist) {
        runtime_sampler_free(s);
        return ms_err(MS_ENOMEM, "out of memory");
    }
    /* PCG's seeding: the stream (inc) must be odd; two steps mix the seed in */
    s->inc = (o->seed << 1) | 1;
    pcg32(s);
    s->state += o->seed ^ 0x853c49e6748fea9bull;
    pcg32(s);
    *out = s;
    return 0;
}

void runtime_sampler_free(runtime_sampler *s)
{
    if (!s)
        return;
    MS_FREE_ALL(s->c, s->hist, s);
}

void runtime_sampler_accept(runtime_sampler *s, int32_t token)
{
    if (s->o.repeat_last_n == 0)
        return;
    s->hist[s->hist_pos] = token;
    s->hist_pos = (s->hist_pos + 1) % s->o.repeat_last_n;
    if (s->n_hist < s->o.repeat_last_n)
        s->n_hist++;
}

static int by_logit_desc(const void *a, const void *b)
{
    const cand *x = a, *y = b;

    if (x->logit != y->logit)
        return x->logit < y->logit ? 1 : -1;
    return x->id < y->id ? -1 : x->id > y->id;   /* ties: lower id first, deterministic */
}

/* The penalties, all three over one history: the last repeat_last_n tokens, prompt included.
 * For a token t seen count[t] > 0 times there (llama.cpp's llama_sampler_penalties):
 *   logit[t] = logit[t] > 0 ? logit[t] / repeat_penalty : logit[t] * repeat_penalty
 *   logit[t] -= count[t] * frequency_penalty + presence_penalty
 * OpenAI defines frequency and presence over the tokens of the completion so far; llama.cpp
 * (and ollama, which hands them to it) over this window, prompt included. We keep llama.cpp's
 * window: one history for every penalty, whose width the caller already sets (repeat_last_n,
 * 0 = all penalties off), and a model moved from ollama answers the same. Each distinct token
 * is penalized once per call, whatever its count. A masked token (-inf) stays masked. */
static void penalize(runtime_sampler *s, float *logits)
{
    const runtime_sampler_opts *o = &s->o;
    int rep = o->repeat_penalty != 1.0f && o->repeat_penalty > 0.0f;

    if (!rep && o->frequency_penalty == 0.0f && o->presence_penalty == 0.0f)
        return;
    /* c[t].p is scratch here (sample overwrites it): the count of t in the window. Only the
     * history's entries are touched, so a call costs O(repeat_last_n), not O(n_vocab). */
    for (int i = 0; i < s->n_hist; i++)
        if (s->hist[i] >= 0 && s->hist[i] < s->n_vocab)
            s->c[s->hist[i]].p = 0.0f;
    for (int i = 0; i < s->n_hist; i++)
        if (s->hist[i] >= 0 && s->hist[i] < s->n_vocab)
            s->c[s->hist[i]].p += 1.0f;
    for (int i = 0; i < s->n_hist; i++) {
        int32_t t = s->hist[i];
        float count;
        if (t < 0 || t >= s->n_vocab || (count = s->c[t].p) == 0.0f)
            continue;
        s->c[t].p = 0.0f; /* done: a later occurrence of t is skipped */
        if (rep)
            logits[t] = logits[t] > 0 ? logits[t] / o->repeat_penalty : logits[t] * o->repeat_penalty;
        logits[t] -= count * o->frequency_penalty + o->presence_penalty;
    }
}

int32_t runtime_sampler_sample(runtime_sampler *s, float *logits)
{
    int n = s->n_vocab, keep;
    float mx, sum = 0.0f, r, acc;

    penalize(s, logits);
    if (s->o.temp <= 0.0f) {
        int best = 0;
        for (int i = 1; i < n; i++)
            if (logits[i] > logits[best])
                best = i;
        return best;
    }
    for (int i = 0; i < n; i++) {
        s->c[i].logit = logits[i];
        s->c[i].id = i;
    }
    qsort(s->c, (size_t)n, sizeof *s->c, by_logit_desc);
    keep = s->o.top_k > 0 && s->o.top_k < n ? s->o.top_k : n;
    /* masked tokens (-inf, a grammar's) never stay: rounding in the draw below could else fall
     * through to the last kept one */
    while (keep > 1 && isinf(s->c[keep - 1].logit) && s->c[keep - 1].logit < 0)
        keep--;
    mx = s->c[0].logit;
    for (int i = 0; i < keep; i++)
        sum += s->c[i].p = expf(s->c[i].logit - mx);
    for (int i = 0; i < keep; i++)
        s->c[i].p /= sum;
    if (s->o.top_p < 1.0f) {
        acc = 0.0f;
        for (int i = 0; i < keep; i++) {
            acc += s->c[i].p;
            if (acc >= s->o.top_p) {
                keep = i + 1;
                break;
            }
        }
    }
    if (s->o.min_p > 0.0f) {
        float floor = s->o.min_p * s->c[0].p;
        int k = 1;
        while (k < keep && s->c[k].p >= floor)
            k++;
        keep = k;
    }
    /* temperature last, on the logits of what is left */
    sum = 0.0f;
    for (int i = 0; i < keep; i++)
        sum += s->c[i].p = expf((s->c[i].logit - mx) / s->o.temp);
    r = (float)(pcg32(s) >> 8) * (1.0f / 16777216.0f) * sum;
    acc = 0.0f;
    for (int i = 0; i < keep; i++) {
        acc += s->c[i].p;
        if (r < acc)
            return s->c[i].id;
    }
    return s->c[keep - 1].id;
}

int runtime_logprobs(const float *logits, int n_vocab, int32_t chosen, double *chosen_lp, runtime_logprob *top,
                     int n_top)
{
    double mx = -INFINITY, sum = 0.0, lse;
    int n = 0;

    if (n_top > RUNTIME_MAX_TOP_LOGPROBS)
        n_top = RUNTIME_MAX_TOP_LOGPROBS;
    for (int i = 0; i < n_vocab; i++)
        if (logits[i] > mx)
            mx = logits[i];
    for (int i = 0; i < n_vocab; i++)
        if (!isinf(logits[i]))
            sum += exp((double)logits[i] - mx);
    lse = mx + log(sum);
    *chosen_lp = (double)logits[chosen] - lse;
    /* the n_top best by insertion: ids go up, so an equal logit lands after those already kept */
    for (int i = 0; i < n_vocab && n_top > 0; i++) {
        int k;
        if (isinf(logits[i]) || (n == n_top && logits[i] <= logits[top[n - 1].id]))
            continue;
        k = n < n_top ? n++ : n - 1;
        while (k > 0 && logits[top[k - 1].id] < logits[i]) {
            top[k] = top[k - 1];
            k--;
        }
        top[k].id = i;
    }
    for (int k = 0; k < n; k++)
        top[k].logprob = (double)logits[top[k].id] - lse;
    return n;
}
