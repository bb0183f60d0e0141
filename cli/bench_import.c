/* bench_import.c: mstore bench-import FILE [-r N] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "import/import.h"

static const char help[] =
    "usage: mstore bench-import PATH [-r N] [--dir DIR]\n\n"
    "Import PATH N times (default 3), each into a fresh temporary store, and print the\n"
    "median time and rate. The file is read once before timing, so the cache is warm.\n\n"
    "  -r N       repetitions\n"
    "  --dir DIR  where the temporary stores go (default $TMPDIR or /tmp): put it on the\n"
    "             file system you want to measure\n";

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static uint64_t warm(const char *path)
{
    uint64_t sum = 0;
    ms_map m;

    if (ms_is_dir(path) || ms_map_open(&m, path) < 0)
        return 0;
    for (size_t i = 0; i < m.size; i += 4096)
        sum += m.data[i];
    ms_map_close(&m);
    return sum;
}

int cmd_bench_import(int argc, char **argv)
{
    const char *path = NULL, *base = getenv("TMPDIR");
    double t[64];
    long reps = 3;
    uint64_t bytes = 0;
    struct stat st;
    char b[32];
    int rc = 0;

    const cli_opt opts[] = {
        { "-r", NULL, CLI_OPT_LONG, &reps, NULL, 1, 64 },
        { "--dir", NULL, CLI_OPT_STRING, &base, "a directory", 0, 0 },
        { NULL, NULL, 0, NULL, NULL, 0, 0 },
    };
    if ((rc = cli_args_parse(argc, argv, help, opts, &path, 1, NULL)) != 0)
        return rc < 0 ? 0 : rc;
    if (!path)
        return cli_usage_error("bench-import", "needs a PATH");
    if (stat(path, &st) < 0) {
        ms_err_os("%s", path);
        return cli_fail();
    }
    bytes = (uint64_t)st.st_size;
    (void)warm(path);
    for (long r = 0; r < reps && rc == 0; r++) {
        char *home = ms_strdup_printf("%s/mstore-bench-XXXXXX", base && *base ? base : "/tmp");
        ms_digest digest;
        import_opts o = { .quiet = 1 };
        model_name name;
        store *s = NULL;
        double t0;

        if (!home || !mkdtemp(home)) {
            free(home);
            ms_err_os("temporary store");
            return cli_fail();
        }
        name_parse(&name, "bench");
        t0 = now();
        if ((rc = store_open(&s, home)) == 0)
            rc = import_path(s, path, &name, &o, digest);
        t[r] = now() - t0;
        store_close(s);
        {   /* the blobs are read-only: remove the whole tree with the shell's help is overkill */
            char *cmd = ms_strdup_printf("rm -rf '%s'", home);
            if (cmd && system(cmd) != 0)
                fprintf(stderr, "mstore: bench-import: could not remove %s\n", home);
            free(cmd);
        }
        free(home);
        if (rc == 0)
            printf("run %ld: %.3f s, %s/s\n", r + 1, t[r], ms_fmt_bytes(b, sizeof b, (uint64_t)((double)bytes / t[r])));
    }
    if (rc < 0)
        return cli_fail();
    qsort(t, (size_t)reps, sizeof t[0], cmp_double);
    printf("import %s: %s in %.3f s (median of %ld), %.1f MB/s\n", path, ms_fmt_bytes(b, sizeof b, bytes), t[reps / 2],
           reps, (double)bytes / 1e6 / t[reps / 2]);
    return 0;
}
