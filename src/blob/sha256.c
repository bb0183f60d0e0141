/* sha256.c: SHA-256 on the x86 SHA extensions, one stream or two at once.
 *
 * Why not only OpenSSL: an import hashes every byte twice, once for its tensor blob and once
 * for the whole file's digest, and on a 2-core machine those two passes cost more CPU than the
 * copy itself (BENCHMARKS.md, "Import speed"). sha256rnds2 is bound by its latency, not its
 * throughput: one stream leaves the unit idle half the time. Two independent streams, their
 * rounds interleaved, run at 1.8x the rate of one (3.2 against 1.8 GB/s on an AMD EPYC), and
 * OpenSSL has no call that hashes two buffers together. One stream here runs at OpenSSL's
 * rate, so a hash that may later be paired starts on this code from its first byte.
 *
 * The block function is written once over a 4-lane vector type. Three operations differ
 * between the builds: sha256rnds2, sha256msg1 and sha256msg2, real instructions in the
 * "sha-ni" build and their definitions (Intel SDM) in C in the "sha-ni-emulated" one, which
 * every machine runs in the tests, so the code is checked bit for bit where the instructions
 * are missing (and on aarch64, under qemu). */
#include <string.h>

#include "blob/blob_int.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

typedef uint32_t v4 __attribute__((vector_size(16)));
typedef uint8_t v16 __attribute__((vector_size(16)));

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static const uint32_t H0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                               0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};

/* The three instructions, as the SDM defines them. Lane 0 is bits 31:0. */
static inline uint32_t ror(uint32_t x, int n)
{
    return x >> n | x << (32 - n);
}
static inline uint32_t sig0(uint32_t x)
{
    return ror(x, 7) ^ ror(x, 18) ^ (x >> 3);
}
static inline uint32_t sig1(uint32_t x)
{
    return ror(x, 17) ^ ror(x, 19) ^ (x >> 10);
}

static inline v4 emul_msg1(v4 a, v4 b)
{
    return (v4){a[0] + sig0(a[1]), a[1] + sig0(a[2]), a[2] + sig0(a[3]), a[3] + sig0(b[0])};
}

static inline v4 emul_msg2(v4 a, v4 b)
{
    uint32_t w16 = a[0] + sig1(b[2]), w17 = a[1] + sig1(b[3]);
    return (v4){w16, w17, a[2] + sig1(w16), a[3] + sig1(w17)};
}

/* cdgh = {H, G, D, C}, abef = {F, E, B, A}; two rounds with the words wk[0], wk[1]. */
static inline v4 emul_rnds2(v4 cdgh, v4 abef, v4 wk)
{
    uint32_t a = abef[3], b = abef[2], c = cdgh[3], d = cdgh[2];
    uint32_t e = abef[1], f = abef[0], g = cdgh[1], h = cdgh[0], a1 = 0, e1 = 0;

    for (int i = 0; i < 2; i++) {
        uint32_t t1 = h + (ror(e, 6) ^ ror(e, 11) ^ ror(e, 25)) + ((e & f) ^ (~e & g)) + wk[i];
        uint32_t t2 = (ror(a, 2) ^ ror(a, 13) ^ ror(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        h = g, g = f, f = e, e = d + t1;
        d = c, c = b, b = a, a = t1 + t2;
        if (i == 0)
            a1 = a, e1 = e;
    }
    return (v4){e1, e, a1, a};
}

/* The block function, once per build: sha_blocks1_<sfx> and sha_blocks2_<sfx>.
 *
 * group_<sfx> runs the four rounds of group g (0-15) of one stream, with its message words
 * w[g & 3]: loaded for g < 4, else derived from the four groups before (w[] is a ring of the
 * last four). sha_blocks2_<sfx> interleaves two streams' groups, n blocks each: while one waits
 * on sha256rnds2's latency the other's rounds run. The state lives as {F, E, B, A} and
 * {H, G, D, C}, the order the instructions take. */
#define SHA_DEFINE(sfx, ATTR, MSG1, MSG2, RNDS2)                                                                   \
    ATTR __attribute__((always_inline)) static inline void group_##sfx(v4 *s0, v4 *s1, v4 w[4], int g,             \
                                                                       const uint8_t *p)                           \
    {                                                                                                              \
        v4 x, k;                                                                                                   \
        if (g < 4) {                                                                                               \
            v16 b;                                                                                                 \
            memcpy(&b, p + 16 * g, 16);                                                                            \
            x = (v4)__builtin_shufflevector(b, b, 3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12);           \
        } else {                                                                                                   \
            x = MSG1(w[g & 3], w[(g + 1) & 3]);                                                                    \
            x += __builtin_shufflevector(w[(g + 2) & 3], w[(g + 3) & 3], 1, 2, 3, 4);                              \
            x = MSG2(x, w[(g + 3) & 3]);                                                                           \
        }                                                                                                          \
        w[g & 3] = x;                                                                                              \
        memcpy(&k, K + 4 * g, 16);                                                                                 \
        x += k;                                                                                                    \
        *s1 = RNDS2(*s1, *s0, x);                                                                                  \
        *s0 = RNDS2(*s0, *s1, __builtin_shufflevector(x, x, 2, 3, 0, 0));                                          \
    }                                                                                                              \
                                                                                                                   \
    ATTR static void sha_blocks1_##sfx(uint32_t h[8], const uint8_t *p, size_t n)                                  \
    {                                                                                                              \
        v4 s0 = {h[5], h[4], h[1], h[0]}, s1 = {h[7], h[6], h[3], h[2]};                                           \
        for (; n > 0; n--, p += 64) {                                                                              \
            v4 a0 = s0, a1 = s1, w[4];                                                                             \
            _Pragma("GCC unroll 16") for (int g = 0; g < 16; g++) group_##sfx(&s0, &s1, w, g, p);                  \
            s0 += a0;                                                                                              \
            s1 += a1;                                                                                              \
        }                                                                                                          \
        h[0] = s0[3], h[1] = s0[2], h[4] = s0[1], h[5] = s0[0];                                                    \
        h[2] = s1[3], h[3] = s1[2], h[6] = s1[1], h[7] = s1[0];                                                    \
    }                                                                                                              \
                                                                                                                   \
    ATTR static void sha_blocks2_##sfx(uint32_t h[8], const uint8_t *p, uint32_t j[8], const uint8_t *q, size_t n) \
    {                                                                                                              \
        v4 s0 = {h[5], h[4], h[1], h[0]}, s1 = {h[7], h[6], h[3], h[2]};                                           \
        v4 r0 = {j[5], j[4], j[1], j[0]}, r1 = {j[7], j[6], j[3], j[2]};                                           \
        for (; n > 0; n--, p += 64, q += 64) {                                                                     \
            v4 a0 = s0, a1 = s1, b0 = r0, b1 = r1, w[4], u[4];                                                     \
            _Pragma("GCC unroll 16") for (int g = 0; g < 16; g++)                                                  \
            {                                                                                                      \
                group_##sfx(&s0, &s1, w, g, p);                                                                    \
                group_##sfx(&r0, &r1, u, g, q);                                                                    \
            }                                                                                                      \
            s0 += a0, s1 += a1, r0 += b0, r1 += b1;                                                                \
        }                                                                                                          \
        h[0] = s0[3], h[1] = s0[2], h[4] = s0[1], h[5] = s0[0];                                                    \
        h[2] = s1[3], h[3] = s1[2], h[6] = s1[1], h[7] = s1[0];                                                    \
        j[0] = r0[3], j[1] = r0[2], j[4] = r0[1], j[5] = r0[0];                                                    \
        j[2] = r1[3], j[3] = r1[2], j[6] = r1[1], j[7] = r1[0];                                                    \
    }

#define EMUL_ATTR
SHA_DEFINE(emul, EMUL_ATTR, emul_msg1, emul_msg2, emul_rnds2)

#if defined(__x86_64__)
#define NI_ATTR           __attribute__((target("sha,ssse3,sse4.1")))
#define NI_MSG1(a, b)     ((v4)_mm_sha256msg1_epu32((__m128i)(a), (__m128i)(b)))
#define NI_MSG2(a, b)     ((v4)_mm_sha256msg2_epu32((__m128i)(a), (__m128i)(b)))
#define NI_RNDS2(a, b, k) ((v4)_mm_sha256rnds2_epu32((__m128i)(a), (__m128i)(b), (__m128i)(k)))
SHA_DEFINE(ni, NI_ATTR, NI_MSG1, NI_MSG2, NI_RNDS2)

/* cpuid leaf 7, ebx bit 29 (SHA); leaf 1, ecx bits 9 and 19 (SSSE3, SSE4.1). */
static int cpu_has_sha(void)
{
    unsigned a, b, c, d;

    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 9)) || !(c & (1u << 19)))
        return 0;
    return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & (1u << 29));
}
#endif

static const blob_sha_impl impls[] = {
#if defined(__x86_64__)
    {"sha-ni", sha_blocks1_ni, sha_blocks2_ni},
#endif
    {"sha-ni-emulated", sha_blocks1_emul, sha_blocks2_emul},
};

const blob_sha_impl *blob__sha_impl(const char *name)
{
    for (size_t i = 0; i < sizeof impls / sizeof impls[0]; i++) {
        if (strcmp(impls[i].name, name) != 0)
            continue;
#if defined(__x86_64__)
        if (impls[i].blocks1 == sha_blocks1_ni && !cpu_has_sha())
            return NULL;
#endif
        return &impls[i];
    }
    return NULL;
}

const blob_sha_impl *blob__sha_best(void)
{
#if defined(__x86_64__)
    static int known = -1; /* cpuid once; threads that race here store the same answer */
    int has = __atomic_load_n(&known, __ATOMIC_RELAXED);

    if (has < 0)
        __atomic_store_n(&known, has = cpu_has_sha(), __ATOMIC_RELAXED);
    return has ? &impls[0] : NULL;
#else
    return NULL;
#endif
}

void blob__sha_init(blob_sha *s, const blob_sha_impl *impl)
{
    memcpy(s->h, H0, sizeof s->h);
    s->len = 0;
    s->n = 0;
    s->impl = impl;
}

/* Fill a partial block from `*p`; 1 when it is full (and was hashed). */
static int sha_fill(blob_sha *s, const uint8_t **p, size_t *len)
{
    size_t take = 64 - s->n < *len ? 64 - s->n : *len;

    memcpy(s->buf + s->n, *p, take);
    s->n += take;
    s->len += take;
    *p += take;
    *len -= take;
    if (s->n < 64)
        return 0;
    s->impl->blocks1(s->h, s->buf, 1);
    s->n = 0;
    return 1;
}

void blob__sha_update(blob_sha *s, const void *buf, size_t len)
{
    const uint8_t *p = buf;

    if (s->n > 0 && !sha_fill(s, &p, &len))
        return;
    if (len >= 64) {
        s->impl->blocks1(s->h, p, len / 64);
        s->len += len / 64 * 64;
        p += len / 64 * 64;
        len %= 64;
    }
    if (len > 0)
        sha_fill(s, &p, &len);
}

/* The same bytes into two states. Each stream first completes its partial block on its own;
 * then both hash whole blocks from where they stand in `buf` (at different offsets, since
 * their partial blocks differed), together for as many blocks as both have. */
void blob__sha_update2(blob_sha *a, blob_sha *b, const void *buf, size_t len)
{
    const uint8_t *p = buf, *q = buf;
    size_t lp = len, lq = len, n;

    if (a->n > 0 && !sha_fill(a, &p, &lp)) {
        blob__sha_update(b, buf, len);
        return;
    }
    if (b->n > 0 && !sha_fill(b, &q, &lq)) {
        blob__sha_update(a, p, lp);
        return;
    }
    n = (lp < lq ? lp : lq) / 64;
    if (n > 0) {
        a->impl->blocks2(a->h, p, b->h, q, n);
        a->len += n * 64, b->len += n * 64;
        p += n * 64, q += n * 64;
        lp -= n * 64, lq -= n * 64;
    }
    blob__sha_update(a, p, lp);
    blob__sha_update(b, q, lq);
}

void blob__sha_final(uint8_t md[32], blob_sha *s)
{
    uint8_t pad[72] = {0x80};
    uint64_t bits = s->len * 8;
    size_t padlen = (s->n < 56 ? 56 : 120) - s->n;

    for (int i = 0; i < 8; i++)
        pad[padlen + i] = (uint8_t)(bits >> (56 - 8 * i));
    blob__sha_update(s, pad, padlen + 8);
    for (int i = 0; i < 8; i++) {
        md[4 * i] = (uint8_t)(s->h[i] >> 24);
        md[4 * i + 1] = (uint8_t)(s->h[i] >> 16);
        md[4 * i + 2] = (uint8_t)(s->h[i] >> 8);
        md[4 * i + 3] = (uint8_t)s->h[i];
    }
}
