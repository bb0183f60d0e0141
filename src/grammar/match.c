/* match.c: running a grammar over bytes as a set of parse stacks, and masking a vocabulary.
 *
 * A stack is a linked list of nodes (pos: the element to match next, parent: the stack below).
 * Nodes are hash-consed, so equal stacks are the same node and a set of stacks is a list of
 * distinct node ids. Node 0 is the empty stack: the root has been matched whole.
 *
 * The mask walks the vocab's prefix trie depth first: at each trie edge the stacks advance by
 * that byte; the tokens that end below an edge are allowed when some stack survives, and a
 * subtree is skipped as soon as none does. The nodes a walk creates are dropped when it comes
 * back up (a mark and a rollback), so a mask leaves the node store as it found it. */
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

typedef struct stack_node {
    uint32_t pos, parent, hnext;
} stack_node;

struct grammar_matcher {
    const grammar *g;
    stack_node *nd;
    uint32_t *mark; /* per node: the epoch of the last list it was added to */
    size_t n_nd, cap_nd;
    uint32_t *bucket;
    size_t n_bucket; /* a power of two */
    uint32_t epoch;
    uint32_t *cur; /* the stacks after the answer so far */
    size_t n_cur, cap_cur;
    uint32_t *buf; /* scratch lists of stacks, one segment per trie depth */
    size_t n_buf, cap_buf;
    uint8_t *allowed;
    size_t n_allowed;
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
    free(v->t);
    free(v->tok_next);
    free(v->eog);
    free(v);
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
    /* in index order, so each chain's head is its newest node: rollback removes heads */
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

/* Drop the nodes made since n_nd was `to`, newest first (each is its chain's head). */
static void rollback(grammar_matcher *m, size_t to)
{
    while (m->n_nd > to) {
        stack_node *s = &m->nd[--m->n_nd];
        m->bucket[hash2(s->pos, s->parent) & (uint32_t)(m->n_bucket - 1)] = s->hnext;
    }
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

/* Append to m->buf the stacks that m->buf[from..from + n) become after byte c. By offset, not
 * pointer: appending may move m->buf. */
static void advance(grammar_matcher *m, size_t from, size_t n, unsigned c)
{
    new_epoch(m);
    for (size_t i = from; i < from + n; i++) {
        uint32_t id = m->buf[i], pos = m->nd[id].pos;
        if (id == 0 || !gr_set_has(&m->g->sets[m->g->el[pos].arg], c))
            continue;
        expand(m, pos + 1, m->nd[id].parent, 0);
    }
}

/* ---------------------------------------------------------------- matcher */

void grammar_matcher_reset(grammar_matcher *m)
{
    const grammar *g = m->g;

    rollback(m, 1);
    m->err = 0;
    m->n_buf = 0;
    new_epoch(m);
    for (uint32_t a = g->rule_first[0]; a < g->rule_first[1]; a++)
        expand(m, g->alt_start[a], 0, 0);
    m->n_cur = 0;
    if (!m->err && ms_grow(&m->cur, &m->cap_cur, m->n_buf + 1, sizeof *m->cur) == 0) {
        memcpy(m->cur, m->buf, m->n_buf * sizeof *m->cur);
        m->n_cur = m->n_buf;
    }
    m->n_buf = 0;
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
        rehash(m, 512) < 0) {
        grammar_matcher_free(m);
        return ms_err(MS_ENOMEM, "out of memory");
    }
    m->nd[0] = (stack_node){UINT32_MAX, 0, UINT32_MAX}; /* the empty stack; never hashed */
    m->n_nd = 1;
    grammar_matcher_reset(m);
    if (m->err) {
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
    free(m->nd);
    free(m->mark);
    free(m->bucket);
    free(m->cur);
    free(m->buf);
    free(m->allowed);
    free(m);
}

int grammar_matcher_complete(const grammar_matcher *m)
{
    for (size_t i = 0; i < m->n_cur; i++)
        if (m->cur[i] == 0)
            return 1;
    return 0;
}

int grammar_matcher_finished(const grammar_matcher *m)
{
    return m->n_cur == 0 || (m->n_cur == 1 && m->cur[0] == 0);
}

int grammar_matcher_accept(grammar_matcher *m, const char *bytes, size_t len)
{
    size_t from = 0, n = m->n_cur;

    m->n_buf = 0;
    m->err = 0;
    if (ms_grow(&m->buf, &m->cap_buf, n + 1, sizeof *m->buf) < 0)
        return ms_err(MS_ENOMEM, "out of memory");
    memcpy(m->buf, m->cur, n * sizeof *m->buf);
    m->n_buf = n;
    for (size_t i = 0; i < len; i++) {
        size_t start = m->n_buf;
        advance(m, from, n, (unsigned char)bytes[i]);
        if (m->err)
            return m->err;
        if (m->n_buf == start)
            return ms_err(MS_EINVALID, "grammar: byte %zu of the token (0x%02x) does not continue the answer", i,
                          (unsigned char)bytes[i]);
        from = start, n = m->n_buf - start;
    }
    if (ms_grow(&m->cur, &m->cap_cur, n + 1, sizeof *m->cur) < 0)
        return ms_err(MS_ENOMEM, "out of memory");
    memmove(m->cur, m->buf + from, n * sizeof *m->cur);
    m->n_cur = n;
    m->n_buf = 0;
    return 0;
}

/* The bytes any of list[0..n)'s tops accept. */
static void tops_union(const grammar_matcher *m, const uint32_t *list, size_t n, gr_set *u)
{
    memset(u, 0, sizeof *u);
    for (size_t i = 0; i < n; i++) {
        const gr_set *s;
        if (list[i] == 0)
            continue;
        s = &m->g->sets[m->g->el[m->nd[list[i]].pos].arg];
        for (int k = 0; k < 8; k++)
            u->bits[k] |= s->bits[k];
    }
}

static void walk(grammar_matcher *m, const grammar_vocab *v, uint32_t at, size_t from, size_t n)
{
    gr_set u;

    tops_union(m, m->buf + from, n, &u);
    for (uint32_t k = v->t[at].child; k && !m->err; k = v->t[k].sibling) {
        size_t start = m->n_buf, mark = m->n_nd;
        if (!gr_set_has(&u, v->t[k].byte))
            continue;
        advance(m, from, n, v->t[k].byte);
        if (m->n_buf > start) {
            for (int32_t id = v->t[k].token; id >= 0; id = v->tok_next[id])
                m->allowed[id] = 1, m->n_allowed++;
            if (v->t[k].child)
                walk(m, v, k, start, m->n_buf - start);
        }
        m->n_buf = start;
        rollback(m, mark);
    }
}

int grammar_matcher_mask(grammar_matcher *m, const grammar_vocab *v, float *logits, size_t *n_allowed_out)
{
    size_t n = m->n_cur;

    *n_allowed_out = 0;
    m->err = 0;
    if (!m->allowed && !(m->allowed = malloc(v->n_vocab ? v->n_vocab : 1)))
        return ms_err(MS_ENOMEM, "out of memory");
    memset(m->allowed, 0, v->n_vocab);
    m->n_allowed = 0;
    m->n_buf = 0;
    if (ms_grow(&m->buf, &m->cap_buf, n + 1, sizeof *m->buf) < 0)
        return ms_err(MS_ENOMEM, "out of memory");
    memcpy(m->buf, m->cur, n * sizeof *m->buf);
    m->n_buf = n;
    walk(m, v, 0, 0, n);
    m->n_buf = 0;
    if (m->err)
        return m->err;
    if (grammar_matcher_complete(m))
        for (size_t i = 0; i < v->n_eog; i++)
            m->allowed[v->eog[i]] = 1, m->n_allowed++;
    for (size_t i = 0; i < v->n_vocab; i++)
        if (!m->allowed[i])
            logits[i] = -INFINITY;
    *n_allowed_out = m->n_allowed;
    if (!m->n_allowed)
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
