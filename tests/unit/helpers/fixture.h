/* fixture.h: helpers shared by the Check suites: temp homes and files, a store to test in. */
#ifndef MSTORE_TEST_FIXTURE_H
#define MSTORE_TEST_FIXTURE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

/* A fresh temp directory (malloc'd path); fixture_rmrf removes it and frees the path. */
char *fixture_tmpdir(void);
void fixture_rmrf(char *dir);
/* Write a file under dir; returns the malloc'd path. */
char *fixture_write(const char *dir, const char *name, const void *buf, size_t len);
/* Count regular files directly in dir (-1 when it cannot be read). */
int fixture_count_files(const char *dir);
/* A growing in-memory buffer and a sink (st_sink, gguf_writer_emit) that appends to it; free p. */
typedef struct fixture_mem {
    uint8_t *p;
    size_t len, cap;
} fixture_mem;
int fixture_mem_sink(void *ctx, const void *buf, size_t len);
/* Files in <home>/blobs (-1 when it cannot be read). */
int fixture_blob_count(const char *home);
/* The shared test models folder: $MSTORE_TEST_MODELS, else $MSTORE_SRC/../shared/models.
 * malloc'd; NULL when it does not exist. */
char *fixture_models_dir(void);
/* `rel` under the shared models folder (malloc'd), or NULL after printing a skip line when the
 * folder does not exist. */
char *fixture_model_path(const char *rel);
/* The index of the largest of l[0..n), the first of equals: greedy decoding's choice. */
int fixture_argmax(const float *l, int n);

/* The store suites' fixture: a fresh temp dir with <tmpdir>/home opened as a store; close
 * undoes it (NULLs all three). */
void fixture_store_open(char **tmpdir, char **home, store **st);
void fixture_store_close(char **tmpdir, char **home, store **st);
/* Bytes stored as a blob of `home`, with what a manifest names it by. */
typedef struct fixture_blob {
    ms_digest digest;
    uint64_t size;
} fixture_blob;
fixture_blob fixture_blob_put(const char *home, const void *p, size_t len);
/* gc on a thread and a store handle of its own (invariant 4: it must wait for writers).
 * fixture_gc_done says whether it has returned; fixture_gc_join waits, closes the handle and
 * returns gc's result. */
typedef struct fixture_gc {
    store *s;
    pthread_t th;
    int done, rc;
} fixture_gc;
void fixture_gc_start(fixture_gc *g, const char *home);
int fixture_gc_done(fixture_gc *g);
int fixture_gc_join(fixture_gc *g);

#endif
