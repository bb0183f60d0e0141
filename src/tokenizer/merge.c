/* merge.c: the heap of merge candidates both tokenizers use (tokenizer_int.h). */
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
