/* bwprobe.c: memory read bandwidth with N threads, for bench/compare.sh. Each thread sums its
 * own slice of a buffer far larger than the caches (so every pass streams from DRAM); the
 * best of several passes is printed in GB/s (1e9 bytes). Decode must read every weight once
 * per token, so bandwidth / model bytes is the decode ceiling the runtime is judged against.
 * Build: cc -O2 -march=native -pthread bwprobe.c -o bwprobe.  Usage: bwprobe [threads] [MB] */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* 32-byte vectors (GNU C): four of them in flight per iteration, so the loop issues wide
 * loads at full rate without -march tricks or intrinsics */
typedef uint64_t v4 __attribute__((vector_size(32)));

/* best of this many passes: the machines are shared, and the ceiling is the best they give */
#define PASSES 10

typedef struct slice {
    const v4 *p;
    size_t n;
    uint64_t sum;
} slice;

static pthread_barrier_t start;

static void *reader(void *arg)
{
    slice *s = arg;
    v4 a = { 0 }, b = { 0 }, c = { 0 }, d = { 0 };

    pthread_barrier_wait(&start);
    /* four independent xor chains: the loop is bound by loads, not by one dependency chain */
    for (size_t i = 0; i + 4 <= s->n; i += 4) {
        /* 4 KB ahead, as the decode kernels prefetch their next row tile: without it the probe
         * read slower than mstore's F16 decode did in the same run (ceiling ratios over 1) */
        __builtin_prefetch(&s->p[i + 128]);
        a ^= s->p[i];
        b ^= s->p[i + 1];
        c ^= s->p[i + 2];
        d ^= s->p[i + 3];
    }
    a ^= b ^ c ^ d;
    s->sum = a[0] ^ a[1] ^ a[2] ^ a[3];
    return NULL;
}

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    int n_threads = argc > 1 ? atoi(argv[1]) : 2;
    size_t mb = argc > 2 ? (size_t)atol(argv[2]) : 512, bytes = mb << 20, words = bytes / 32;
    v4 *buf;
    uint64_t sink = 0;
    double best = 0;

    if (n_threads < 1 || n_threads > 256 || mb < 64) {
        fprintf(stderr, "usage: bwprobe [threads 1..256] [MB >= 64]\n");
        return 2;
    }
    buf = aligned_alloc(64, bytes);
    if (!buf) {
        fprintf(stderr, "bwprobe: cannot allocate %zu MB\n", mb);
        return 1;
    }
    memset(buf, 1, bytes);   /* fault every page in before timing */
    for (int pass = 0; pass < PASSES; pass++) {
        pthread_t th[256];
        slice sl[256];
        double t0;

        pthread_barrier_init(&start, NULL, (unsigned)n_threads + 1);
        for (int i = 0; i < n_threads; i++) {
            sl[i] = (slice){ buf + words / n_threads * i, words / n_threads, 0 };
            pthread_create(&th[i], NULL, reader, &sl[i]);
        }
        pthread_barrier_wait(&start);
        t0 = now();
        for (int i = 0; i < n_threads; i++) {
            pthread_join(th[i], NULL);
            sink ^= sl[i].sum;
        }
        double gbs = (double)(words / n_threads * n_threads * 32) / (now() - t0) / 1e9;
        if (gbs > best)
            best = gbs;
        pthread_barrier_destroy(&start);
    }
    printf("bandwidth %.2f GB/s (%d threads, %zu MB, best of %d)%s\n", best, n_threads, mb, PASSES, sink == 42 ? " " : "");
    free(buf);
    return 0;
}
