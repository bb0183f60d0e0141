/* fma_peak.c: how many 512-bit FMAs a second the cores retire, with 12 independent chains per
 * thread so that the FMA latency hides: the ceiling of the f32 prefill of F16 and F32 weights
 * (BENCHMARKS.md, session 7).
 *   cc -O2 -mavx512f -mfma -pthread bench/fma_peak.c -o fma_peak && ./fma_peak 1 && ./fma_peak 2
 * Built without AVX-512 (cc -O2 -mavx2 -mfma ...) it measures the AVX2 class instead: 256-bit FMAs,
 * and vpmaddwd + vpaddd pairs, the inner step of the avx2 path's 16-bit block gemms (issue 38). */
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

#if defined(__AVX512F__)
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

#else
static void *run(void *out)
{
    __m256 a[CHAINS], b = _mm256_set1_ps(1.0000001f), c = _mm256_set1_ps(1e-7f);
    float s = 0;

    for (int i = 0; i < CHAINS; i++)
        a[i] = _mm256_set1_ps((float)i);
    for (long k = 0; k < ITERS; k++) {
#pragma GCC unroll 12
        for (int i = 0; i < CHAINS; i++)
            a[i] = _mm256_fmadd_ps(a[i], b, c);
    }
    for (int i = 0; i < CHAINS; i++)
        s += a[i][0];
    *(float *)out = s;
    return NULL;
}

/* 12 running sums of vpmaddwd products, as the avx2 gemm tiles keep them; the empty asm makes
 * each product its own (gcc would compute one and add it 12 times) and keeps the sums in
 * registers, in order */
static void *run_madd(void *out)
{
    __m256i x = _mm256_set1_epi16(3), y = _mm256_set1_epi16(-2);
    __m256i a0 = x, a1 = y, a2 = x, a3 = y, a4 = x, a5 = y, a6 = x, a7 = y, a8 = x, a9 = y, a10 = x, a11 = y;

#define STEP(a)                                          \
    do {                                                 \
        __asm__("" : "+x"(x));                           \
        a = _mm256_add_epi32(a, _mm256_madd_epi16(x, y)); \
    } while (0)
    for (long k = 0; k < ITERS; k++) {
        STEP(a0); STEP(a1); STEP(a2); STEP(a3); STEP(a4); STEP(a5);
        STEP(a6); STEP(a7); STEP(a8); STEP(a9); STEP(a10); STEP(a11);
        __asm__("" : "+x"(a0), "+x"(a1), "+x"(a2), "+x"(a3), "+x"(a4), "+x"(a5));
        __asm__("" : "+x"(a6), "+x"(a7), "+x"(a8), "+x"(a9), "+x"(a10), "+x"(a11));
    }
#undef STEP
    __m256i s = _mm256_add_epi32(_mm256_add_epi32(_mm256_add_epi32(a0, a1), _mm256_add_epi32(a2, a3)),
                                 _mm256_add_epi32(_mm256_add_epi32(a4, a5), _mm256_add_epi32(a6, a7)));
    s = _mm256_add_epi32(s, _mm256_add_epi32(_mm256_add_epi32(a8, a9), _mm256_add_epi32(a10, a11)));
    *(float *)out = (float)_mm256_extract_epi32(s, 0);
    return NULL;
}
#endif

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
#if defined(__AVX512F__)
    printf("%d threads: %.2f G 512-bit FMAs/s (%.2f a thread), %.1f GFLOP/s f32\n", nt, fmas / dt / 1e9,
           fmas / dt / 1e9 / nt, fmas * 32 / dt / 1e9);
#else
    printf("%d threads: %.2f G 256-bit FMAs/s (%.2f a thread), %.1f G multiply-adds/s f32\n", nt, fmas / dt / 1e9,
           fmas / dt / 1e9 / nt, fmas * 8 / dt / 1e9);
    t0 = now();
    for (int i = 0; i < nt; i++)
        pthread_create(&th[i], NULL, run_madd, &sink[i]);
    for (int i = 0; i < nt; i++)
        pthread_join(th[i], NULL);
    dt = now() - t0;
    printf("%d threads: %.2f G vpmaddwd + vpaddd/s (%.2f a thread), %.1f G multiply-adds/s int16\n", nt,
           fmas / dt / 1e9, fmas / dt / 1e9 / nt, fmas * 16 / dt / 1e9);
#endif
    return 0;
}
