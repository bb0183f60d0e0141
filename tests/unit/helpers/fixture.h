/* fixture.h: helpers shared by the Check suites: temp homes and files. */
#ifndef MSTORE_TEST_FIXTURE_H
#define MSTORE_TEST_FIXTURE_H

#include <stddef.h>

/* A fresh temp directory (malloc'd path); fixture_rmrf removes it and frees the path. */
char *fixture_tmpdir(void);
void fixture_rmrf(char *dir);
/* Write a file under dir; returns the malloc'd path. */
char *fixture_write(const char *dir, const char *name, const void *buf, size_t len);
/* Count regular files directly in dir (-1 when it cannot be read). */
int fixture_count_files(const char *dir);
/* The shared test models folder: $MSTORE_TEST_MODELS, else $MSTORE_SRC/../shared/models.
 * malloc'd; NULL when it does not exist. */
char *fixture_models_dir(void);

#endif
