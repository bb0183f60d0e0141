/* match.c: running a grammar over bytes as a set of parse stacks, and masking a vocabulary.
 *
 * A stack is a linked list of nodes (pos: the element to match next, parent: the stack below).
 * Nodes are hash-consed, so equal stacks are the same node and a set of stacks is a list of
 * distinct node ids. Node 0 is the empty stack: the root has been matched whole.
 *
 * A set of stacks is interned too, as a state of a lazily built DFA: its transition by a byte is
 * computed once and kept, and so is its token mask. Inside a JSON string the state after each
 * character is the same state again, so after the first token there a mask is a cache hit, and
 * a new state's walk over the trie is mostly table lookups.
 *
 * The mask walks the vocab's prefix trie depth first: at each trie edge the state steps by that
 * byte; the tokens that end below an edge are allowed when some stack survives, and a subtree
 * is skipped as soon as none does. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_int.h"

#define MAX_EXPAND_DEPTH \
    4096 /* nested references without a byte between them; far above what
                                 any compiled grammar has (invariant 2), a guard against a loop */

typedef struct trie_node {
    uint32_t child, sibling; /* first child, next sibling; 0: none (the root is node 0) */
    int32_t token; /* first token whose bytes end here, or -1 */
    uint8_t byte; /* the edge from the parent */
} trie_node;

struct grammar_vocab {
    trie_node *t;
    size_t n_t, cap_t;
    int32_t *tok_next; /* next token with the same bytes, or -1 */
    int32_t *eog; /* end-of-generation tokens */
    size_t n_eog, n_vocab;
};

/* The DFA cache starts over past MAX_STATES states or MAX_MASK_BYTES of masks (each state may
 * hold 256 transitions and a mask of n_vocab bits; 64 MiB is 4096 masks of a 128k vocab). */
#define MAX_STATES     (1u << 14)
#define MAX_MASK_BYTES (64u << 20)
#define DEAD           (-2) /* a transition to no stack at all */
#define UNKNOWN        (-1)

typedef struct stack_node {
    uint32_t pos, parent, hnext;
} stack_node;

typedef struct dstate {
    uint32_t off, n; /* its stacks: sbuf[off .. off + n), sorted */
    uint32_t hash, hnext;
    int complete; /* holds the empty stack */
    int32_t *next; /* 256 transitions (UNKNOWN, DEAD or a state), or NULL before the first */
    uint64_t *mask; /* the tokens allowed here, one bit each, or NULL before the first mask */
    size_t n_allowed;
} dstate;

struct grammar_matcher {
    const grammar *g;
    stack_node *nd;
    uint32_t *mark; /* per node: the epoch of the last list it was added to */
    size_t n_nd, cap_nd;
    uint32_t *bucket;
    size_t n_bucket; /* a power of two */
    uint32_t epoch;
    dstate *st;
    size_t n_st, cap_st;
    uint32_t *sbuf; /* the states' stacks */
    size_t n_sbuf, cap_sbuf;
    uint32_t *sbucket; /* MAX_STATES * 2 heads */
    int32_t cur; /* the state after the answer so far */
    uint32_t *buf; /* scratch: the stacks one step makes */
    size_t n_buf, cap_buf;
    size_t n_vocab; /* of the masks cached, set by the first mask */
    size_t mask_bytes; /* held by the cached masks */
    int err;
};

/* ---------------------------------------------------------------- vocab */

static int trie_child(grammar_vocab *v, uint32_t at, uint8_t c, uint32_t *out)
{
    uint32_t k;

    for (k = v->t[at].child; k; k = v->t[k].sibling)
        if (v->t[k].byte == c) {
            *out = k;
            return 0;
        }
    if (ms_grow(&v->t, &v->cap_t, v->n_t + 1, sizeof *v->t) < 0)
        return ms_err(MS_ENOMEM, "out of memory");
    k = (uint32_t)v->n_t++;
    v->t[k] = (trie_node){0, v->t[at].child, -1, c};
    v->t[at].child = k;
    *out = k;
    return 0;
}

int grammar_vocab_new(grammar_vocab **out, const tokenizer *t)
{
    grammar_vocab *v = calloc(1, sizeof *v);
    size_t n = tokenizer_n_vocab(t);
    char *piece = malloc(TOKENIZER_MAX_TOKEN_LEN * 4);
    int rc = MS_ENOMEM;

    *out = NULL;
    if (!v || !piece || !(v->tok_next = malloc(n * sizeof *v->tok_next)) || !(v->eog = malloc(n * sizeof *v->eog)) ||
        ms_grow(&v->t, &v->cap_t, 1 + n, sizeof *v->t) < 0) {
        rc = ms_err(MS_ENOMEM, "out of memory");
        goto fail;
    }
    v->n_vocab = n;
    v->t[0] = (trie_node){0, 0, -1, 0};
    v->n_t = 1;
    for (size_t id = 0; id < n; id++) {
        size_t len = 0;
        uint32_t at = 0;
        v->tok_next[id] = -1;
        if (tokenizer_is_eog(t, (int32_t)id)) { /* only ever allowed by completeness */
            v->eog[v->n_eog++] = (int32_t)id;
            continue;
        }
        if (tokenizer_decode_piece(t, (int32_t)id, 0, piece, TOKENIZER_MAX_TOKEN_LEN * 4, &len) < 0 || len == 0)
            continue; /* control and unused tokens: no bytes, never allowed */
        for (size_t i = 0; i < len; i++)
            if ((rc = trie_child(v, at, (uint8_t)piece[i], &at)) < 0)
                goto fail;
        v->tok_next[id] = v->t[at].token;
        v->t[at].token = (int32_t)id;
    }
    free(piece);
    *out = v;
    return 0;
fail:
    free(piece);
    grammar_vocab_free(v);
    return rc;
}

void grammar_vocab_free(grammar_vocab *v)
{
    if (!v)
        return;
    MS_FREE_ALL(v->t, v->tok_next, v->eog, v);
}

/* ---------------------------------------------------------------- stacks */

static uint32_t hash2(uint32_t a, uint32_t b)
{
    uint64_t h = ((uint64_t)a << 32 | b) * 0x9E3779B97F4A7C15ull;

    return (uint32_t)(h >> 32);
}

static int rehash(grammar_matcher *m, size_t n)
{
    uint32_t *b = malloc(n * sizeof *b);

    if (!b)
        return m->err = ms_err(MS_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++)
        b[i] = UINT32_MAX;
    for (size_t i = 1; i < m->n_nd; i++) {
        uint32_t h = hash2(m->nd[i].pos, m->nd[i].parent) & (uint32_t)(n - 1);
        m->nd[i].hnext = b[h];
        b[h] = (uint32_t)i;
    }
    free(m->bucket);
    m->bucket = b, m->n_bucket = n;
    return 0;
}

/* The node for (pos, parent), made when new. UINT32_MAX after an error (m->err). */
static uint32_t intern(grammar_matcher *m, uint32_t pos, uint32_t parent)
{
    uint32_t h = hash2(pos, parent) & (uint32_t)(m->n_bucket - 1), i;

    for (i = m->bucket[h]; i != UINT32_MAX; i = m->nd[i].hnext)
        if (m->nd[i].pos == pos && m->nd[i].parent == parent)
            return i;
    if (m->n_nd >= UINT32_MAX - 1) {
        m->err = ms_err(MS_ETOOBIG, "grammar: too many parse stacks");
        return UINT32_MAX;
    }
    if (m->n_nd + 1 > m->cap_nd) {
        size_t cap = m->cap_nd;
        if (ms_grow(&m->nd, &cap, m->n_nd + 1, sizeof *m->nd) < 0 ||
            ms_grow(&m->mark, &m->cap_nd, cap, sizeof *m->mark) < 0) {
            m->err = ms_err(MS_ENOMEM, "out of memory");
            return UINT32_MAX;
        }
    }
    if (m->n_nd + 1 > m->n_bucket * 2) {
        if (rehash(m, m->n_bucket * 4) < 0)
            return UINT32_MAX;
        h = hash2(pos, parent) & (uint32_t)(m->n_bucket - 1);
    }
    i = (uint32_t)m->n_nd++;
    m->nd[i] = (stack_node){pos, parent, m->bucket[h]};
    m->mark[i] = 0;
    m->bucket[h] = i;
    return i;
}

static void buf_push(grammar_matcher *m, uint32_t node)
{
    if (m->err || m->mark[node] == m->epoch)
        return;
    if (ms_grow(&m->buf, &m->cap_buf, m->n_buf + 1, sizeof *m->buf) < 0) {
        m->err = ms_err(MS_ENOMEM, "out of memory");
        return;
    }
    m->mark[node] = m->epoch;
    m->buf[m->n_buf++] = node;
}

/* Push onto m->buf every stack whose top is a byte set, reached from "match el[pos] next, then
 * the stack `parent`". */
static void expand(grammar_matcher *m, uint32_t pos, uint32_t parent, int depth)
{
    const grammar *g = m->g;
    const gr_elem *e = &g->el[pos];

    if (m->err || depth > MAX_EXPAND_DEPTH)
        return;
    if (e->type == GR_END) {
        if (parent == 0)
            buf_push(m, 0);
        else
            expand(m, m->nd[parent].pos, m->nd[parent].parent, depth + 1);
    } else if (e->type == GR_SET) {
        uint32_t n = intern(m, pos, parent);
        if (n != UINT32_MAX)
            buf_push(m, n);
    } else {
        /* what follows the reference; when nothing does, the parent is the continuation (so
         * right recursion does not grow the stack) */
        uint32_t next = parent;
        if (g->el[pos + 1].type != GR_END && (next = intern(m, pos + 1, parent)) == UINT32_MAX)
            return;
        for (uint32_t a = g->rule_first[e->arg]; a < g->rule_first[e->arg + 1]; a++)
            expand(m, g->alt_start[a], next, depth + 1);
    }
}

static void new_epoch(grammar_matcher *m)
{
    if (++m->epoch == 0) { /* wrapped: old marks could collide */
        memset(m->mark, 0, m->n_nd * sizeof *m->mark);
        m->epoch = 1;
    }
}

/* ---------------------------------------------------------------- DFA states */

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

    return (x > y) - (x < y);
}

/* The state whose stacks are m->buf[0..n_buf) (sorted here), made when new; -1 on error. */
static int32_t state_of(grammar_matcher *m)
{
    uint32_t h = 2166136261u, b;
    size_t n = m->n_buf;
    dstate *d;

    if (m->err)
        return -1;
    qsort(m->buf, n, sizeof *m->buf, cmp_u32);
    for (size_t i = 0; i < n; i++)
        h = (h ^ m->buf[i]) * 16777619u;
    b = h & (MAX_STATES * 2 - 1);
    for (uint32_t i = m->sbucket[b]; i != UINT32_MAX; i = m->st[i].hnext)
        if (m->st[i].hash == h && m->st[i].n == n && !memcmp(m->sbuf + m->st[i].off, m->buf, n * sizeof *m->buf))
            return (int32_t)i;
    if (ms_grow(&m->st, &m->cap_st, m->n_st + 1, sizeof *m->st) < 0 ||
        ms_grow(&m->sbuf, &m->cap_sbuf, m->n_sbuf + n, sizeof *m->sbuf) < 0) {
        m->err = ms_err(MS_ENOMEM, "out of memory");
        return -1;
    }
    d = &m->st[m->n_st];
    memset(d, 0, sizeof *d);
    d->off = (uint32_t)m->n_sbuf, d->n = (uint32_t)n, d->hash = h, d->hnext = m->sbucket[b];
    d->complete = n > 0 && m->buf[0] == 0;
    memcpy(m->sbuf + m->n_sbuf, m->buf, n * sizeof *m->buf);
    m->n_sbuf += n;
    m->sbucket[b] = (uint32_t)m->n_st;
    return (int32_t)m->n_st++;
}

/* The state after byte c from state s: DEAD when no stack survives, -1 on error. */
static int32_t step(grammar_matcher *m, int32_t s, unsigned c)
{
    int32_t r;

    if (!m->st[s].next) {
        if (!(m->st[s].next = malloc(256 * sizeof *m->st[s].next)))
            return m->err = ms_err(MS_ENOMEM, "out of memory"), -1;
        for (int i = 0; i < 256; i++)
            m->st[s].next[i] = UNKNOWN;
    }
    if ((r = m->st[s].next[c]) != UNKNOWN)
        return r;
    m->n_buf = 0;
    new_epoch(m);
    for (uint32_t i = 0; i < m->st[s].n; i++) {
        uint32_t id = m->sbuf[m->st[s].off + i], pos = m->nd[id].pos;
        if (id == 0 || !gr_set_has(&m->g->sets[m->g->el[pos].arg], c))
            continue;
        expand(m, pos + 1, m->nd[id].parent, 0);
    }
    if (m->err)
        return -1;
    r = m->n_buf ? state_of(m) : DEAD;
    if (r != -1)
        m->st[s].next[c] = r;
    return r;
}

/* The start state: the root's alternatives expanded. */
static int32_t start_state(grammar_matcher *m)
{
    const grammar *g = m->g;

    m->n_buf = 0;
    new_epoch(m);
    for (uint32_t a = g->rule_first[0]; a < g->rule_first[1]; a++)
        expand(m, g->alt_start[a], 0, 0);
    return state_of(m);
}

/* Forget every state (not the nodes) when there are too many, keeping the current one. */
static int flush(grammar_matcher *m)
{
    dstate cur;

    if (m->n_st < MAX_STATES && m->mask_bytes < MAX_MASK_BYTES)
        return 0;
    cur = m->st[m->cur];
    if (ms_grow(&m->buf, &m->cap_buf, cur.n + 1, sizeof *m->buf) < 0)
        return ms_err(MS_ENOMEM, "out of memory");
    memcpy(m->buf, m->sbuf + cur.off, cur.n * sizeof *m->buf);
    m->n_buf = cur.n;
    for (size_t i = 0; i < m->n_st; i++)
        free(m->st[i].next), free(m->st[i].mask);
    m->n_st = 0, m->n_sbuf = 0, m->mask_bytes = 0;
    for (size_t i = 0; i < MAX_STATES * 2; i++)
        m->sbucket[i] = UINT32_MAX;
    m->cur = state_of(m);
    return m->cur < 0 ? m->err : 0;
}

/* ---------------------------------------------------------------- matcher */

void grammar_matcher_reset(grammar_matcher *m)
{
    int32_t s;

    m->err = 0;
    if (flush(m) == 0 && (s = start_state(m)) >= 0)
        m->cur = s;
}

int grammar_matcher_new(grammar_matcher **out, const grammar *g)
{
    grammar_matcher *m = calloc(1, sizeof *m);

    *out = NULL;
    if (!m)
        return ms_err(MS_ENOMEM, "out of memory");
    m->g = g;
    m->cap_nd = 256;
    if (!(m->nd = malloc(m->cap_nd * sizeof *m->nd)) || !(m->mark = calloc(m->cap_nd, sizeof *m->mark)) ||
        !(m->sbucket = malloc(MAX_STATES * 2 * sizeof *m->sbucket)) || rehash(m, 512) < 0) {
        grammar_matcher_free(m);
        return ms_err(MS_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < MAX_STATES * 2; i++)
        m->sbucket[i] = UINT32_MAX;
    m->nd[0] = (stack_node){UINT32_MAX, 0, UINT32_MAX}; /* the empty stack; never hashed */
    m->n_nd = 1;
    if ((m->cur = start_state(m)) < 0) {
        int rc = m->err;
        grammar_matcher_free(m);
        return rc;
    }
    *out = m;
    return 0;
}

void grammar_matcher_free(grammar_matcher *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n_st; i++)
        free(m->st[i].next), free(m->st[i].mask);
    MS_FREE_ALL(m->st, m->sbuf, m->sbucket, m->nd, m->mark, m->bucket, m->buf, m);
}

int grammar_matcher_complete(const grammar_matcher *m)
{
    return m->st[m->cur].complete;
}

int grammar_matcher_finished(const grammar_matcher *m)
{
    const dstate *d = &m->st[m->cur];

    return d->n == 0 || (d->n == 1 && d->complete);
}

int grammar_matcher_accept(grammar_matcher *m, const char *bytes, size_t len)
{
    int32_t s;
    int rc;

    m->err = 0;
    if ((rc = flush(m)) < 0)
        return rc;
    s = m->cur;
    for (size_t i = 0; i < len; i++) {
        if ((s = step(m, s, (unsigned char)bytes[i])) == -1)
            return m->err;
        if (s == DEAD)
            return ms_err(MS_EINVALID, "grammar: byte %zu of the token (0x%02x) does not continue the answer", i,
                          (unsigned char)bytes[i]);
    }
    m->cur = s;
    return 0;
}

static void walk(grammar_matcher *m, const grammar_vocab *v, int32_t s, uint32_t at, uint64_t *mask, size_t *n)
{
    for (uint32_t k = v->t[at].child; k && !m->err; k = v->t[k].sibling) {
        int32_t ns = step(m, s, v->t[k].byte);
        if (ns < 0)
            continue;
        for (int32_t id = v->t[k].token; id >= 0; id = v->tok_next[id])
            mask[id >> 6] |= 1ull << (id & 63), (*n)++;
        if (v->t[k].child)
            walk(m, v, ns, k, mask, n);
    }
}

int grammar_matcher_mask(grammar_matcher *m, const grammar_vocab *v, float *logits, size_t *n_allowed_out)
{
    uint64_t *mask;
    size_t words = (v->n_vocab + 63) / 64, n = 0;
    int rc;

    *n_allowed_out = 0;
    m->err = 0;
    if ((rc = flush(m)) < 0)
        return rc;
    if (m->n_vocab != v->n_vocab) { /* masks are per vocab: another one was used before */
        for (size_t i = 0; i < m->n_st; i++)
            free(m->st[i].mask), m->st[i].mask = NULL;
        m->n_vocab = v->n_vocab, m->mask_bytes = 0;
    }
    if (!(mask = m->st[m->cur].mask)) {
        if (!(mask = calloc(words ? words : 1, sizeof *mask)))
            return ms_err(MS_ENOMEM, "out of memory");
        walk(m, v, m->cur, 0, mask, &n);
        if (m->err) {
            free(mask);
            return m->err;
        }
        if (m->st[m->cur].complete)
            for (size_t i = 0; i < v->n_eog; i++)
                mask[v->eog[i] >> 6] |= 1ull << (v->eog[i] & 63), n++;
        m->st[m->cur].mask = mask;
        m->mask_bytes += words * sizeof *mask;
        m->st[m->cur].n_allowed = n;
    }
    for (size_t i = 0; i < v->n_vocab; i++)
        if (!(mask[i >> 6] >> (i & 63) & 1))
            logits[i] = -INFINITY;
    *n_allowed_out = m->st[m->cur].n_allowed;
    if (!*n_allowed_out)
        return ms_err(MS_EINVALID, "grammar: no token of the vocabulary can continue the answer");
    return 0;
}

int grammar_accepts(const grammar *g, const char *s, size_t len)
{
    grammar_matcher *m = NULL;
    int ok;

    if (grammar_matcher_new(&m, g) < 0)
        return 0;
    ok = grammar_matcher_accept(m, s, len) == 0 && grammar_matcher_complete(m);
    grammar_matcher_free(m);
    return ok;
}
