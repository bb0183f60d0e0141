#include <dirent.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <check.h>

#include "helpers/fixture.h"
#include "blob/blob.h"
#include "util/util.h"

char *fixture_tmpdir(void)
{
    const char *base = getenv("TMPDIR");
    char *t = ms_strdup_printf("%s/mstore-test-XXXXXX", base && *base ? base : "/tmp");

    if (!t || !mkdtemp(t)) {
        free(t);
        return NULL;
    }
    return t;
}

static void rmrf(const char *p)
{
    struct stat st;
    DIR *d;
    struct dirent *e;

    if (lstat(p, &st) < 0)
        return;
    if (S_ISDIR(st.st_mode) && (d = opendir(p)) != NULL) {
        while ((e = readdir(d)) != NULL) {
            char *c;
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                continue;
            if ((c = ms_path_join(p, e->d_name)) != NULL)
                rmrf(c);
            free(c);
        }
        closedir(d);
        rmdir(p);
    } else {
        unlink(p);
    }
}

void fixture_rmrf(char *dir)
{
    if (dir)
        rmrf(dir);
    free(dir);
}

char *fixture_write(const char *dir, const char *name, const void *buf, size_t len)
{
    char *p = ms_path_join(dir, name);
    FILE *f = p ? fopen(p, "wb") : NULL;

    if (!f) {
        free(p);
        return NULL;
    }
    if (len && fwrite(buf, 1, len, f) != len) {
        fclose(f);
        free(p);
        return NULL;
    }
    fclose(f);
    return p;
}

int fixture_count_files(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;

    if (!d)
        return -1;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

int fixture_blob_count(const char *home)
{
    char *b = ms_path_join(home, "blobs");
    int n = b ? fixture_count_files(b) : -1;

    free(b);
    return n;
}

char *fixture_models_dir(void)
{
    const char *env = getenv("MSTORE_TEST_MODELS"), *src = getenv("MSTORE_SRC");
    char *p;

    if (env && *env)
        p = strdup(env);
    else
        p = ms_strdup_printf("%s/../shared/models", src && *src ? src : ".");
    if (p && !ms_is_dir(p)) {
        free(p);
        return NULL;
    }
    return p;
}

int fixture_mem_sink(void *ctx, const void *buf, size_t len)
{
    fixture_mem *m = ctx;

    if (ms_grow(&m->p, &m->cap, m->len + len, 1) < 0)
        return MS_ENOMEM;
    if (len)
        memcpy(m->p + m->len, buf, len);
    m->len += len;
    return 0;
}

void fixture_store_open(char **tmpdir, char **home, store **st)
{
    *tmpdir = fixture_tmpdir();
    ck_assert_ptr_nonnull(*tmpdir);
    *home = ms_path_join(*tmpdir, "home");
    ck_assert_msg(store_open(st, *home) == 0, "%s", ms_err_msg());
}

void fixture_store_close(char **tmpdir, char **home, store **st)
{
    store_close(*st);
    *st = NULL;
    free(*home);
    *home = NULL;
    fixture_rmrf(*tmpdir);
    *tmpdir = NULL;
}

fixture_blob fixture_blob_put(const char *home, const void *p, size_t len)
{
    fixture_blob r;

    ck_assert_msg(blob_put_buf(r.digest, home, p, len) == 0, "%s", ms_err_msg());
    r.size = len;
    return r;
}

static void *gc_run(void *arg)
{
    fixture_gc *g = arg;

    g->rc = store_gc(g->s, 0, NULL, NULL, NULL, NULL);
    __atomic_store_n(&g->done, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

void fixture_gc_start(fixture_gc *g, const char *home)
{
    g->done = 0;
    ck_assert_msg(store_open(&g->s, home) == 0, "%s", ms_err_msg());
    ck_assert_int_eq(pthread_create(&g->th, NULL, gc_run, g), 0);
}

int fixture_gc_done(fixture_gc *g) { return __atomic_load_n(&g->done, __ATOMIC_SEQ_CST); }

int fixture_gc_join(fixture_gc *g)
{
    ck_assert_int_eq(pthread_join(g->th, NULL), 0);
    store_close(g->s);
    g->s = NULL;
    return g->rc;
}

char *fixture_model_path(const char *rel)
{
    char *dir = fixture_models_dir(), *p;

    if (!dir) {
        printf("skipped: shared models folder not found (set MSTORE_TEST_MODELS)\n");
        return NULL;
    }
    p = ms_strdup_printf("%s/%s", dir, rel);
    free(dir);
    return p;
}

int fixture_argmax(const float *l, int n)
{
    int b = 0;

    for (int i = 1; i < n; i++)
        if (l[i] > l[b])
            b = i;
    return b;
}
