/* fma_peak.c: how many 512-bit FMAs a second the cores retire, with 12 independent chains per
 * thread so that the FMA latency hides: the ceiling of the f32 prefill of F16 and F32 weights
 * (BENCHMARKS.md, session 7).
 *   cc -O2 -mavx512f -mfma -pthread bench/fma_peak.c -o fma_peak && ./fma_peak 1 && ./fma_peak 2 */
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CHAINS 12
#define ITERS  200000000L
#define MAX_TH 64

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void *run(void *out)
{
    __m512 a[CHAINS], b = _mm512_set1_ps(1.0000001f), c = _mm512_set1_ps(1e-7f);
    float s = 0;

    for (int i = 0; i < CHAINS; i++)
        a[i] = _mm512_set1_ps((float)i);
    for (long k = 0; k < ITERS; k++) {
#pragma GCC unroll 12
        for (int i = 0; i < CHAINS; i++)
            a[i] = _mm512_fmadd_ps(a[i], b, c);
    }
    for (int i = 0; i < CHAINS; i++) /* used, so the loop stays */
        s += _mm512_reduce_add_ps(a[i]);
    *(float *)out = s;
    return NULL;
}

int main(int argc, char **argv)
{
    int nt = argc > 1 ? atoi(argv[1]) : 1;
    pthread_t th[MAX_TH];
    float sink[MAX_TH];

    if (nt < 1 || nt > MAX_TH) {
        fprintf(stderr, "usage: fma_peak [THREADS 1-%d]\n", MAX_TH);
        return 2;
    }
    double t0 = now();
    for (int i = 0; i < nt; i++)
        pthread_create(&th[i], NULL, run, &sink[i]);
    for (int i = 0; i < nt; i++)
        pthread_join(th[i], NULL);
    double dt = now() - t0, fmas = (double)ITERS * CHAINS * nt;
    printf("%d threads: %.2f G 512-bit FMAs/s (%.2f a thread), %.1f GFLOP/s f32\n", nt, fmas / dt / 1e9,
           fmas / dt / 1e9 / nt, fmas * 32 / dt / 1e9);
    return 0;
}
