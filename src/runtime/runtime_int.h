/* runtime_int.h: what src/runtime's files share and nothing else calls (STYLE.md 1).
 *   model.c    runtime_model: opens a model, runs a decoder, and dispatches an encoder to encoder.c
 *   encoder.c  the encoders (bert, nomic-bert) and the pooling both kinds of model embed through
 *   batch.c    several sequences per pass: runtime_forward_multi, runtime_seq_forward's gathering */
#ifndef MSTORE_RUNTIME_INT_H
#define MSTORE_RUNTIME_INT_H

#include "runtime/runtime.h"

/* Matrix `name` [rows][cols] of w as the backend's weight: absent MS_ENOTFOUND; a shape or byte
 * count that disagrees MS_EINVALID; a type the backend cannot run MS_EUNSUPPORTED. */
int runtime__expect_matrix(const backend_weight **out, backend *be, const runtime_weights *w, const char *name,
                           uint64_t rows, uint64_t cols);
/* A vector of `len` F32, F16 or BF16 values (a norm's weight, a bias). */
int runtime__expect_vec(const backend_weight **out, backend *be, const runtime_weights *w, const char *name, int len);

typedef struct runtime_encoder runtime_encoder;
/* The encoder of config c over the weights of w on backend be (all three borrowed: they outlive
 * it). Binds every tensor and allocates every buffer for n_rows rows (the most one forward
 * holds: n_batch, or a whole sequence of up to n_ctx). MS_EINVALID naming a missing or misshapen
 * tensor, MS_EUNSUPPORTED for an op the device lacks, MS_ENOMEM. */
int runtime__encoder_new(runtime_encoder **out, backend *be, const runtime_weights *w, const runtime_config *c,
                         int n_ctx, int n_batch);
void runtime__encoder_free(runtime_encoder *e);   /* host memory only: the buffers are the backend's */
/* runtime_embed for an encoder, its arguments already checked; normalize 0: runtime_embed_pooled. */
int runtime__encoder_embed(runtime_encoder *e, const int32_t *const *tokens, const int *n_tokens, int n_seqs,
                           float *out, int normalize);

/* The forwards (one backend_run each) the last runtime__encoder_embed ran; and the same of a
 * model's last runtime_embed, encoder or decoder. For the tests of packing. */
int runtime__encoder_runs(const runtime_encoder *e);
int runtime__model_embed_runs(const runtime_model *m);

/* ---- between model.c and batch.c */
typedef struct runtime__batcher runtime__batcher;
int runtime__batcher_new(runtime__batcher **out, int n_seq);
void runtime__batcher_free(runtime__batcher *b);   /* NULL is fine */
/* Take the model for the caller alone (no pass runs until runtime__batcher_let_go), waiting for
 * the pass under way: runtime_embed, which uses sequence 0's cache and the pass's buffers. */
void runtime__batcher_hold(runtime__batcher *b);
void runtime__batcher_let_go(runtime__batcher *b);
runtime__batcher *runtime__model_batcher(runtime_model *m);
int runtime__model_n_batch(const runtime_model *m);
/* runtime_forward's checks of n tokens for sequence seq: MS_EINVALID, MS_EUNSUPPORTED. */
int runtime__model_check(const runtime_model *m, int seq, const int32_t *tokens, int n);
/* One pass of items[0..n_items) (distinct sequences, checked, n_items <= n_seq, rows <= n_batch
 * in all): every item's tokens run, its logits written when it asks. One caller at a time. */
int runtime__model_pass(runtime_model *m, const runtime_seq_item *items, int n_items);

/* out[dim] = rows[n][dim] pooled (RUNTIME_POOL_MEAN: the mean of the rows, CLS: row 0, LAST: row
 * n - 1), then, when `normalize`, L2-normalized as ollama does: v / max(||v||, 1e-12). Sums in
 * double, in acc[dim]. */
void runtime__pool(float *out, double *acc, const float *rows, int n, int dim, int pooling, int normalize);
/* The last step alone, for rows that arrive in chunks: acc holds the sum of the n rows (MEAN) or
 * the one row pooled (CLS, LAST); out gets the mean (MEAN), normalized when `normalize`. */
void runtime__pool_finish(float *out, double *acc, int n, int dim, int pooling, int normalize);

#endif
