/* matmul_bench.c: one cpu_matmul of F16, F32, Q8_0 or Q4_0 weights, best of N runs, in G multiply-adds/s,
 * and a hash of the result's bits, so that two builds of a kernel can be compared for speed and for
 * sameness (equal hashes: the same arithmetic). Weights far larger than the caches (say 32768 x
 * 2048 F16, 128 MB) stream from DRAM each run, as decode's do.
 *   cmake --build build --target mstore_core
 *   cc -O2 -Isrc bench/matmul_bench.c build/libmstore_core.a \
 *      $(pkg-config --libs jansson sqlite3 libcrypto libcurl libpcre2-8) -lm -lpthread -o matmul_bench
 *   MSTORE_CPU=avx2 ./matmul_bench TOKENS ROWS COLS [RUNS] [THREADS] [f16|f32|q8_0|q4_0]
 * The path is MSTORE_CPU's, or the one mstore would choose. */
#include "cpu/cpu.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: matmul_bench TOKENS ROWS COLS [RUNS] [THREADS] [f16|f32|q8_0|q4_0]\n");
        return 2;
    }
    int n_tok = atoi(argv[1]), rows = atoi(argv[2]), cols = atoi(argv[3]);
    int runs = argc > 4 ? atoi(argv[4]) : 20, threads = argc > 5 ? atoi(argv[5]) : 1;
    const char *type = argc > 6 ? argv[6] : "f16";
    /* ggml's type numbers and row sizes: blocks of 32 for the quantized types */
    int f32 = strcmp(type, "f32") == 0, q8 = strcmp(type, "q8_0") == 0, q4 = strcmp(type, "q4_0") == 0;
    int gtype = f32 ? 0 : q8 ? 8 : q4 ? 2 : 1;
    if (!f32 && !q8 && !q4 && strcmp(type, "f16") != 0) {
        fprintf(stderr, "matmul_bench: type %s: not f16, f32, q8_0 or q4_0\n", type);
        return 2;
    }
    if (n_tok < 1 || rows < 1 || cols < 1 || runs < 1 || threads < 1 || n_tok > 4096 || cols > (1 << 20) ||
        (double)rows * cols > 4e9 || ((q8 || q4) && cols % 32)) {
        fprintf(stderr, "matmul_bench: sizes out of range (quantized types: COLS a multiple of 32)\n");
        return 2;
    }
    if (cpu_path_select(getenv("MSTORE_CPU")) != 0) {
        fprintf(stderr, "matmul_bench: MSTORE_CPU=%s cannot run here\n", getenv("MSTORE_CPU"));
        return 1;
    }

    size_t row_bytes = q8 ? (size_t)cols / 32 * 34 : q4 ? (size_t)cols / 32 * 18 : (size_t)cols * (f32 ? 4 : 2);
    size_t wbytes = row_bytes * rows;
    uint8_t *w = malloc(wbytes);
    float *x = malloc((size_t)n_tok * cols * sizeof(float)), *y = malloc((size_t)n_tok * rows * sizeof(float));
    void *scratch = malloc(cpu_matmul_scratch(n_tok, cols));
    cpu_pool *pool = NULL;
    if (!w || !x || !y || !scratch || cpu_pool_new(&pool, threads) != 0) {
        fprintf(stderr, "matmul_bench: out of memory\n");
        return 1;
    }
    /* F16 weights in [-2, 2] (sign, exponent near 1, random mantissa), F32 likewise, blocks with
     * random codes and a scale of 2^-7; x in [-0.5, 0.5) */
    srand(1);
    if (q8 || q4) {
        size_t bb = q8 ? 34 : 18;
        for (size_t b = 0; b < wbytes / bb; b++) {
            uint16_t d = 0x2000;
            memcpy(w + b * bb, &d, 2);
            for (size_t i = 2; i < bb; i++)
                w[b * bb + i] = (uint8_t)rand();
        }
    } else {
        for (size_t i = 0; i < (size_t)rows * cols; i++) {
            if (f32) {
                float v = ((float)(rand() % 4000) - 2000.0f) / 1000.0f;
                memcpy(w + i * 4, &v, 4);
            } else {
                uint16_t h = (uint16_t)(0x3c00 ^ (rand() & 0x83ff));
                memcpy(w + i * 2, &h, 2);
            }
        }
    }
    for (size_t i = 0; i < (size_t)n_tok * cols; i++)
        x[i] = (float)(rand() % 1000) / 1000.0f - 0.5f;

    backend_tensor t;
    memset(&t, 0, sizeof t);
    t.type = gtype;
    t.n_dims = 2;
    t.shape[0] = rows;
    t.shape[1] = cols;
    t.data = w;

    double best = 1e30;
    for (int r = 0; r < runs; r++) {
        double t0 = now();
        cpu_matmul(pool, y, x, n_tok, &t, scratch);
        double d = now() - t0;
        if (d < best)
            best = d;
    }
    uint64_t h = 1469598103934665603ull; /* FNV-1a over the result's bits */
    for (size_t i = 0; i < (size_t)n_tok * rows * sizeof(float); i++)
        h = (h ^ ((const uint8_t *)y)[i]) * 1099511628211ull;
    printf("%s %d x %d x %d, %d thread(s): best %.3f ms, %.1f GMAC/s, result %016llx\n", type, n_tok,
           rows, cols, threads, best * 1e3, (double)n_tok * rows * cols / best * 1e-9, (unsigned long long)h);
    cpu_pool_free(pool);
    free(scratch);
    free(y);
    free(x);
    free(w);
    return 0;
}
