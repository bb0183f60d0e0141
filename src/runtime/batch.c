/* batch.c: several sequences in one forward pass. runtime_forward_multi packs the calls of one
 * thread; runtime_seq_forward gathers the calls that threads make at the same time (the server's
 * requests, one sequence each) into passes: continuous batching, where a sequence joins the next
 * pass after its call arrives and leaves when its calls stop.
 *
 * The calls wait in arrival order. Whoever finds no pass under way leads the next one: it waits
 * (briefly, GATHER_WAIT_NS) for every active sequence to have a call waiting, plans the pass
 * (plan: one row per call first, so a long prompt's chunks never hold up the others' next
 * token), runs it without the lock, then wakes everyone: finished calls return, the others wait
 * for a later pass, one of them leading it. Results never depend on who shares a pass
 * (runtime.h), so the gathering is only about speed. */
#include <assert.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/runtime_int.h"

/* How long a pass waits for an active sequence whose call has not come: enough for a generating
 * thread to sample and stream its token (tens of microseconds), little beside a pass
 * (milliseconds), so a thread held up elsewhere (a slow client) costs the others little. */
#define GATHER_WAIT_NS 3000000L

typedef struct call {
    runtime_seq_item left;   /* what is still to run: tokens advance as passes take them */
    int rc, done;
    char msg[512];
    struct call *next;
} call;

struct runtime__batcher {
    pthread_mutex_t mu;
    pthread_cond_t cv;   /* a call came, a pass ended, the model was let go */
    int busy;            /* a thread leads a pass (gathering or running) or holds the model */
    int prompts_alone;   /* the last pass ran prompt chunks alone (lead) */
    call *head;          /* waiting calls, oldest first */
    int n_seq, n_active;
    unsigned char active[RUNTIME_MAX_SEQ];
    runtime_batch_stats st;
};

int runtime__batcher_new(runtime__batcher **out, int n_seq)
{
    runtime__batcher *b = calloc(1, sizeof *b);
    pthread_condattr_t ca;

    *out = NULL;
    if (!b)
        return ms_err(MS_ENOMEM, "out of memory");
    pthread_mutex_init(&b->mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);   /* the gathering's deadline must not jump with the wall clock */
    pthread_cond_init(&b->cv, &ca);
    pthread_condattr_destroy(&ca);
    b->n_seq = n_seq;
    *out = b;
    return 0;
}

void runtime__batcher_free(runtime__batcher *b)
{
    if (!b)
        return;
    assert(!b->head && !b->busy);
    pthread_cond_destroy(&b->cv);
    pthread_mutex_destroy(&b->mu);
    free(b);
}

void runtime__batcher_hold(runtime__batcher *b)
{
    pthread_mutex_lock(&b->mu);
    while (b->busy)
        pthread_cond_wait(&b->cv, &b->mu);
    b->busy = 1;
    pthread_mutex_unlock(&b->mu);
}

void runtime__batcher_let_go(runtime__batcher *b)
{
    pthread_mutex_lock(&b->mu);
    b->busy = 0;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
}

/* How many tokens of each of items[0..n) one pass of at most n_batch rows takes (take[i]): one of
 * every item that has at least `min` left, in order, then as many more of the first ones as fit;
 * the others none (min 2: prompt chunks only). Returns the rows. */
static int plan(const runtime_seq_item *items, int n, int n_batch, int min, int *take)
{
    int rows = 0;

    for (int i = 0; i < n; i++) {
        take[i] = items[i].n >= min && rows < n_batch;
        rows += take[i];
    }
    for (int i = 0; i < n && rows < n_batch; i++) {
        int more = take[i] ? items[i].n - take[i] : 0;
        if (more > n_batch - rows)
            more = n_batch - rows;
        if (more > 0)
            take[i] += more, rows += more;
    }
    return rows;
}

/* Adds a run's counts to the model's (b->mu held). */
static void stats_add(runtime__batcher *b, const runtime_batch_stats *st)
{
    b->st.passes += st->passes, b->st.rows += st->rows, b->st.seqs += st->seqs;
    if (st->max_seqs > b->st.max_seqs)
        b->st.max_seqs = st->max_seqs;
}

/* One pass of what plan chose; each item then points past what ran. Logits only with an item's
 * last tokens. Counts the pass in st (the caller's own, added to the model's under mu). */
static int pass(runtime_model *m, runtime_seq_item *items, int n, const int *take, runtime_batch_stats *st)
{
    runtime_seq_item p[RUNTIME_MAX_SEQ] = { { 0 } };
    int k = 0, rows = 0, rc;

    for (int i = 0; i < n; i++)
        if (take[i] > 0) {
            p[k] = items[i];
            p[k].n = take[i];
            p[k].logits = take[i] == items[i].n ? items[i].logits : NULL;
            rows += take[i];
            k++;
        }
    if ((rc = runtime__model_pass(m, p, k)) < 0)
        return rc;
    for (int i = 0; i < n; i++)
        items[i].tokens += take[i], items[i].n -= take[i];
    st->passes++;
    st->rows += (uint64_t)rows;
    st->seqs += (uint64_t)k;
    if ((uint64_t)k > st->max_seqs)
        st->max_seqs = (uint64_t)k;
    return 0;
}

int runtime_forward_multi(runtime_model *m, const runtime_seq_item *items, int n_items)
{
    runtime__batcher *b = runtime__model_batcher(m);
    runtime_seq_item left[RUNTIME_MAX_SEQ];
    int take[RUNTIME_MAX_SEQ], n_batch = runtime__model_n_batch(m), rc = 0;
    runtime_batch_stats st = { 0 };

    if (n_items <= 0 || n_items > b->n_seq)
        return ms_err(MS_EINVALID, "forward: %d sequences, the model keeps %d", n_items, b->n_seq);
    for (int i = 0; i < n_items; i++) {
        if ((rc = runtime__model_check(m, items[i].seq, items[i].tokens, items[i].n)) < 0)
            return ms_err_ctx("sequence %d", items[i].seq);
        for (int j = 0; j < i; j++)
            if (items[j].seq == items[i].seq)
                return ms_err(MS_EINVALID, "forward: sequence %d given twice", items[i].seq);
        left[i] = items[i];
    }
    runtime__batcher_hold(b);
    while (plan(left, n_items, n_batch, 1, take) > 0 && (rc = pass(m, left, n_items, take, &st)) == 0) {
    }
    pthread_mutex_lock(&b->mu);
    stats_add(b, &st);
    pthread_mutex_unlock(&b->mu);
    runtime__batcher_let_go(b);
    return rc;
}

/* Calls of active sequences waiting, against the active sequences: all there, the pass can go. */
static int gathered(const runtime__batcher *b)
{
    int n = 0;

    for (const call *c = b->head; c; c = c->next)
        n += b->active[c->left.seq];
    return n >= b->n_active;
}

/* Lead one pass (b->mu held on entry and exit; b->busy is 0 on entry and on exit). */
static void lead(runtime_model *m, runtime__batcher *b)
{
    runtime_seq_item items[RUNTIME_MAX_SEQ];
    call *calls[RUNTIME_MAX_SEQ];
    int take[RUNTIME_MAX_SEQ], n = 0, rc;
    runtime_batch_stats st = { 0 };
    struct timespec until;

    b->busy = 1;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_nsec += GATHER_WAIT_NS;
    if (until.tv_nsec >= 1000000000L)
        until.tv_sec++, until.tv_nsec -= 1000000000L;
    while (!gathered(b) && pthread_cond_timedwait(&b->cv, &b->mu, &until) == 0) {
    }
    for (call *c = b->head; c && n < RUNTIME_MAX_SEQ; c = c->next)
        calls[n] = c, items[n++] = c->left;
    /* Prompt chunks (calls of several tokens) beside single next tokens: the chunks run alone
     * first, so a new request's first token waits for the pass under way and its own prefill,
     * not for the others' rows too; the pass after takes everyone (plan). */
    int prompts = 0, singles = 0;
    for (int i = 0; i < n; i++)
        prompts += items[i].n > 1, singles += items[i].n == 1;
    b->prompts_alone = prompts && singles && !b->prompts_alone;
    plan(items, n, runtime__model_n_batch(m), b->prompts_alone ? 2 : 1, take);
    pthread_mutex_unlock(&b->mu);
    rc = pass(m, items, n, take, &st);
    pthread_mutex_lock(&b->mu);
    for (int i = 0; i < n; i++) {
        call *c = calls[i];
        if (rc < 0 && take[i] > 0) {   /* this pass's failure is each of its calls' */
            c->rc = rc, c->done = 1;
            snprintf(c->msg, sizeof c->msg, "%s", ms_err_msg());
        } else if (rc == 0) {
            c->left = items[i];
            c->done = c->left.n == 0;
        }
    }
    for (call **pp = &b->head; *pp;)
        if ((*pp)->done)
            *pp = (*pp)->next;
        else
            pp = &(*pp)->next;
    stats_add(b, &st);
    b->busy = 0;
    pthread_cond_broadcast(&b->cv);
}

int runtime_seq_forward(runtime_model *m, int seq, const int32_t *tokens, int n, float *logits)
{
    runtime__batcher *b = runtime__model_batcher(m);
    call c = { .left = { .seq = seq, .tokens = tokens, .n = n, .logits = logits } }, **tail;
    int rc;

    if ((rc = runtime__model_check(m, seq, tokens, n)) < 0)
        return rc;
    pthread_mutex_lock(&b->mu);
    for (tail = &b->head; *tail; tail = &(*tail)->next)
        if ((*tail)->left.seq == seq) {
            pthread_mutex_unlock(&b->mu);
            return ms_err(MS_EINVALID, "sequence %d: another thread's forward on it is under way", seq);
        }
    *tail = &c;
    pthread_cond_broadcast(&b->cv);   /* a leader gathering may have waited for this one */
    while (!c.done) {
        if (!b->busy)
            lead(m, b);
        else
            pthread_cond_wait(&b->cv, &b->mu);
    }
    pthread_mutex_unlock(&b->mu);
    if (c.rc < 0)
        return ms_err(c.rc, "%s", c.msg);
    return 0;
}

void runtime_seq_active(runtime_model *m, int seq, int on)
{
    runtime__batcher *b = runtime__model_batcher(m);

    assert(seq >= 0 && seq < b->n_seq);
    pthread_mutex_lock(&b->mu);
    on = on != 0;
    b->n_active += on - b->active[seq];
    b->active[seq] = (unsigned char)on;
    pthread_cond_broadcast(&b->cv);   /* one fewer to wait for */
    pthread_mutex_unlock(&b->mu);
}

void runtime_batch_stats_get(runtime_model *m, runtime_batch_stats *out)
{
    runtime__batcher *b = runtime__model_batcher(m);

    pthread_mutex_lock(&b->mu);
    *out = b->st;
    pthread_mutex_unlock(&b->mu);
}
