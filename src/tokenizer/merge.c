/* merge.c: the heap of merge candidates and the merge loop both tokenizers use (tokenizer_int.h). */
#include "tokenizer/tokenizer_int.h"

/* a goes before b: higher key, then smaller left (llama.cpp's bigram comparators). */
static int before(const tok_bigram *a, const tok_bigram *b)
{
    return a->key > b->key || (a->key == b->key && a->left < b->left);
}

void tok_heap_push(tok_heap *h, tok_bigram b)
{
    size_t i = h->n++;

    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!before(&b, &h->v[p]))
            break;
        h->v[i] = h->v[p];
        i = p;
    }
    h->v[i] = b;
}

tok_bigram tok_heap_pop(tok_heap *h)
{
    tok_bigram top = h->v[0], last = h->v[--h->n];
    size_t i = 0;

    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n)
            break;
        if (c + 1 < h->n && before(&h->v[c + 1], &h->v[c]))
            c++;
        if (!before(&h->v[c], &last))
            break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (h->n > 0)
        h->v[i] = last;
    return top;
}

void tok_merge_run(tok_symbol *sym, size_t n, tok_heap *h, tok_offer_fn offer, void *ctx)
{
    for (size_t i = 1; i < n; i++)
        offer(ctx, sym, h, (long)i - 1, (long)i);
    while (h->n > 0) {
        tok_bigram b = tok_heap_pop(h);
        tok_symbol *l = &sym[b.left], *r = &sym[b.right];

        /* stale: a side was merged away or grew since the push (while both live, l->next is r) */
        if (l->n == 0 || r->n == 0 || l->next != b.right || l->n + r->n != b.size)
            continue;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0)
            sym[r->next].prev = b.left;
        offer(ctx, sym, h, l->prev, b.left);
        offer(ctx, sym, h, b.left, l->next);
    }
}
