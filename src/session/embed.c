/* embed.c: texts and token arrays to embeddings, the one routine `mstore embed` and the server's
 * /api/embed, /api/embeddings and /v1/embeddings share. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "session/session.h"

/* The limits a call is held to before anything is tokenized or allocated for its inputs. */
static int check_limits(const session_embed_input *in, size_t n, const session_embed_opts *o, int dim)
{
    size_t bytes = 0, ids = 0;

    if (n > SESSION_EMBED_MAX_INPUTS)
        return ms_err(MS_EINVALID, "%zu inputs, at most %d", n, SESSION_EMBED_MAX_INPUTS);
    for (size_t i = 0; i < n; i++) {
        if (in[i].text)
            bytes += in[i].len;
        else
            ids += in[i].n_ids;
        if (bytes > SESSION_EMBED_MAX_BYTES || ids > SESSION_EMBED_MAX_IDS)
            return ms_err(MS_EINVALID, "inputs of more than %u bytes of text or %u token ids", SESSION_EMBED_MAX_BYTES,
                          SESSION_EMBED_MAX_IDS);
    }
    if (o->dimensions < 0 || o->dimensions > dim)
        return ms_err(MS_EINVALID, "dimensions: %d is past the model's embedding length of %d", o->dimensions, dim);
    return 0;
}

/* Input i as a token sequence fitted to n_ctx: *ids_out is malloc'd (a copy, for token
 * inputs, so that truncation may rewrite its end). */
static int input_tokens(int32_t **ids_out, int *n_out, const session *S, const session_embed_input *in, size_t i,
                        const session_embed_opts *o, int n_ctx)
{
    const tokenizer *t = session_tokenizer(S);
    int n_vocab = runtime_model_config(session_model(S))->vocab_size;
    int32_t *ids = NULL;
    size_t n = in->n_ids;
    int rc;

    *ids_out = NULL;
    if (in->text) {
        if ((rc = tokenizer_encode_alloc(t, in->text, in->len, 1, 0, &ids, &n)) < 0)
            return rc;
    } else if (n > 0) {
        if (!(ids = malloc(n * sizeof *ids)))
            return ms_err(MS_ENOMEM, "out of memory");
        memcpy(ids, in->ids, n * sizeof *ids);
    }
    if (n == 0) {
        free(ids);
        return ms_err(MS_EINVALID, "input %zu is empty: no tokens to embed", i);
    }
    for (size_t k = 0; !in->text && k < n; k++)
        if (ids[k] < 0 || ids[k] >= n_vocab) {
            rc = ms_err(MS_EINVALID, "input %zu: token %d is outside the vocabulary of %d tokens", i, (int)ids[k],
                        n_vocab);
            free(ids);
            return rc;
        }
    if (n > (size_t)n_ctx) {
        if (!o->truncate) {
            free(ids);
            return ms_err(MS_EINVALID, "input %zu has %zu tokens, past the context of %d", i, n, n_ctx);
        }
        /* ollama cuts the text's tokens so that the [SEP] / EOS the tokenizer adds still ends
         * it: a BERT model pools over [CLS] ... [SEP] as it was trained. Without add_special's
         * control tokens (parse_special is off) a control token last was put there by it. */
        if (n_ctx > 1 && tokenizer_token_type(t, ids[n - 1]) == TOKEN_TYPE_CONTROL)
            ids[n_ctx - 1] = ids[n - 1];
        n = (size_t)n_ctx;
    }
    *ids_out = ids;
    *n_out = (int)n;
    return 0;
}

/* Keep the first d of each row's dim components and scale them back to unit length, as ollama
 * and OpenAI's Matryoshka models do (raw: only cut); rows are compacted in place to stride d. */
static int apply_dimensions(float *v, size_t n, int dim, int d, int raw)
{
    for (size_t i = 0; i < n; i++) {
        const float *src = v + i * (size_t)dim;
        float *dst = v + i * (size_t)d;
        double sum = 0;
        for (int k = 0; k < dim; k++)
            if (!isfinite(src[k]))
                return ms_err(MS_ERROR, "embedding %zu has a component that is not finite", i);
        if (d == dim)
            continue; /* the runtime's own vector, unchanged */
        for (int k = 0; k < d; k++)
            sum += (double)src[k] * src[k];
        double scale = raw ? 1.0 : 1.0 / fmax(sqrt(sum), 1e-12);
        for (int k = 0; k < d; k++)
            dst[k] = (float)(src[k] * scale);
    }
    return 0;
}

int session_embed(session *S, float **out, int *dim_out, size_t *n_tokens_out, const session_embed_input *in, size_t n,
                  const session_embed_opts *o)
{
    runtime_model *m = session_model(S);
    int dim = runtime_model_embed_dim(m), n_ctx = runtime_model_n_ctx(m), d, rc = 0;
    int32_t **seqs = NULL;
    int *lens = NULL;
    float *v = NULL;
    size_t total = 0, k = 0;

    *out = NULL, *dim_out = 0, *n_tokens_out = 0;
    if (runtime_model_pooling(m) == RUNTIME_POOL_NONE)
        return ms_err(MS_EUNSUPPORTED, "model '%s' does not support embeddings", o->model ? o->model : "");
    if ((rc = check_limits(in, n, o, dim)) < 0)
        return rc;
    d = o->dimensions > 0 ? o->dimensions : dim;
    if (n == 0) {
        *dim_out = d;
        return 0;
    }
    if (!(seqs = calloc(n, sizeof *seqs)) || !(lens = calloc(n, sizeof *lens)) ||
        !(v = malloc(n * (size_t)dim * sizeof *v))) {
        rc = ms_err(MS_ENOMEM, "out of memory");
        goto done;
    }
    for (k = 0; k < n; k++) {
        if ((rc = input_tokens(&seqs[k], &lens[k], S, &in[k], k, o, n_ctx)) < 0)
            goto done;
        total += (size_t)lens[k];
    }
    /* one call for the whole list: the runtime packs the sequences into batches */
    rc = (o->raw ? runtime_embed_pooled : runtime_embed)(m, (const int32_t *const *)seqs, lens, (int)n, v);
    session_reset(S); /* a decoder's KV cache is empty now: the session's text must say so */
    if (rc < 0 || (rc = apply_dimensions(v, n, dim, d, o->raw)) < 0)
        goto done;
    *out = v, *dim_out = d, *n_tokens_out = total;
    v = NULL;
done:
    for (size_t i = 0; seqs && i < n; i++)
        free(seqs[i]);
    MS_FREE_ALL(seqs, lens, v);
    return rc;
}
