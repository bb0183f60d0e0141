/* fixture.h: helpers shared by the Check suites: temp homes and files. */
#ifndef MSTORE_TEST_FIXTURE_H
#define MSTORE_TEST_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

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

#endif
