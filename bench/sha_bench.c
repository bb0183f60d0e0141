/* sha_bench.c: sha256 rates of mstore's blob_hash implementations on this CPU, in GB/s (1e9
 * bytes), best of 5: OpenSSL and SHA-NI on one stream, and blob_hash_update2 (two streams, the
 * bytes counted once per stream). What an import's two digests cost (BENCHMARKS.md).
 * Build (after the main build):
 *   cc -O2 -std=gnu11 -Isrc bench/sha_bench.c build/libmstore_core.a \
 *      -lcrypto -ljansson -lsqlite3 -lcurl -lpcre2-8 -lm -pthread -o /tmp/sha_bench
 * Usage: sha_bench [MiB per pass] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "blob/blob.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Best rate of 5 passes over `total` bytes fed in 1 MiB pieces; `pair`: update2 into two. */
static double rate(const char *impl, const unsigned char *buf, size_t total, int pair)
{
    double best = 0;
    ms_digest d;

    for (int pass = 0; pass < 5; pass++) {
        blob_hash *a = blob_hash_new_impl(impl), *b = pair ? blob_hash_new_impl(impl) : NULL;
        double t0 = now(), t;
        if (!a || (pair && !b)) {
            blob_hash_free(a);
            return -1;
        }
        for (size_t at = 0; at < total; at += 1u << 20) {
            if (pair)
                blob_hash_update2(a, b, buf, 1u << 20);
            else
                blob_hash_update(a, buf, 1u << 20);
        }
        t = now() - t0;
        blob_hash_final(d, a);
        if (b)
            blob_hash_final(d, b);
        if ((double)total * (pair ? 2 : 1) / t / 1e9 > best)
            best = (double)total * (pair ? 2 : 1) / t / 1e9;
    }
    return best;
}

int main(int argc, char **argv)
{
    size_t mib = argc > 1 ? (size_t)atol(argv[1]) : 256;
    unsigned char *buf = malloc(1u << 20);
    static const struct {
        const char *impl;
        int pair;
    } runs[] = {{"openssl", 0}, {"openssl", 1}, {"sha-ni", 0}, {"sha-ni", 1}};

    if (!buf || mib == 0)
        return 1;
    memset(buf, 0x5a, 1u << 20); /* the same MiB again and again: in cache, as an import's chunk is */
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        double r = rate(runs[i].impl, buf, mib << 20, runs[i].pair);
        if (r < 0)
            printf("%-8s %-10s not on this CPU\n", runs[i].impl, runs[i].pair ? "two" : "one");
        else
            printf("%-8s %-10s %6.2f GB/s\n", runs[i].impl, runs[i].pair ? "two" : "one", r);
    }
    free(buf);
    return 0;
}
