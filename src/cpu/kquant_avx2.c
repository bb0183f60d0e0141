/* kquant_avx2.c: the K-quant, IQ4 and MXFP4 row dot products of kquant_scalar.c with AVX2 + FMA. The
 * functions carry their own target attribute, so this file needs no build flags; they run only
 * after cpu.c found AVX2, FMA and F16C (the avx2 path and the paths built on it).
 * Per 32-weight span: the codes become signed bytes (every type's codes fit: Q6_K -32..31, IQ4
 * -127..113, MXFP4 -12..12), are widened to 16 bits and multiplied with the 16-bit activations by
 * _mm256_madd_epi16 (exact 32-bit sums); each span's 8 partial sums are scaled into one float
 * accumulator, so the integer sums equal the scalar ones and only float additions reorder. */
#include "cpu/kquant_int.h"

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#include <immintrin.h>

#define TARGET __attribute__((target("avx2,fma,f16c")))

TARGET static inline float hsum(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));

    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* 16 signed byte codes times 16 activations: 8 int32 partial sums. */
TARGET static inline __m256i mul16(__m128i w8, const int16_t *x)
{
    return _mm256_madd_epi16(_mm256_cvtepi8_epi16(w8), _mm256_loadu_si256((const __m256i *)(const void *)x));
}

TARGET static inline __m256i mul32(__m256i w8, const int16_t *x)
{
    return _mm256_add_epi32(mul16(_mm256_castsi256_si128(w8), x), mul16(_mm256_extracti128_si256(w8, 1), x + 16));
}

/* acc += sums * f */
TARGET static inline __m256 fma_i(__m256 acc, __m256i sums, float f)
{
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), _mm256_set1_ps(f), acc);
}

TARGET static inline __m256i xsum16(const int16_t *x)
{
    return _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(const void *)x), _mm256_set1_epi16(1));
}

TARGET float cpu_kq_avx2_dot_q2_k(const void *vx, const void *vw, int n)
{
    const cpu_q16 *x = vx;
    const uint8_t *p = vw;
    __m256 acc = _mm256_setzero_ps();

    for (int b = 0; b < n / QK_K; b++, p += CPU_Q2_K_BYTES) {
        const uint8_t *sc = p;
        float d = cpu_f16(cpu_rd16(p + 80)), dmin = cpu_f16(cpu_rd16(p + 82));
        for (int h = 0; h < 2; h++) {
            __m256i qs = _mm256_loadu_si256((const __m256i *)(const void *)(p + 16 + 32 * h));
            for (int j = 0; j < 4; j++) {
                const cpu_q16 *xb = &x[b * 8 + 4 * h + j];
                __m256i v = _mm256_and_si256(_mm256_srli_epi16(qs, 2 * j), _mm256_set1_epi8(3));
                int i = 8 * h + 2 * j;
                acc = fma_i(acc, mul16(_mm256_castsi256_si128(v), xb->q), xb->d * d * (float)(sc[i] & 15));
                acc = fma_i(acc, mul16(_mm256_extracti128_si256(v, 1), xb->q + 16), xb->d * d * (float)(sc[i + 1] & 15));
                acc = fma_i(acc, xsum16(xb->q), -xb->d * dmin * (float)(sc[i] >> 4));
                acc = fma_i(acc, xsum16(xb->q + 16), -xb->d * dmin * (float)(sc[i + 1] >> 4));
            }
        }
    }
    return hsum(acc);
}

TARGET float cpu_kq_avx2_dot_q3_k(const void *vx, const void *vw, int n)
{
    const cpu_q16 *x = vx;
    const uint8_t *p = vw;
    __m256 acc = _mm256_setzero_ps();

    for (int b = 0; b < n / QK_K; b++, p += CPU_Q3_K_BYTES) {
        __m256i hm = _mm256_loadu_si256((const __m256i *)(const void *)p);
        float d = cpu_f16(cpu_rd16(p + 108));
        int sc[16];
        cpu_q3k_scales(sc, p + 96);
        for (int h = 0; h < 2; h++) {
            __m256i qs = _mm256_loadu_si256((const __m256i *)(const void *)(p + 32 + 32 * h));
            for (int j = 0; j < 4; j++) {
                const cpu_q16 *xb = &x[b * 8 + 4 * h + j];
                __m256i bit = _mm256_set1_epi8((char)(1 << (4 * h + j)));
                __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(hm, bit), bit);
                __m256i v = _mm256_and_si256(_mm256_srli_epi16(qs, 2 * j), _mm256_set1_epi8(3));
                int i = 8 * h + 2 * j;
                v = _mm256_sub_epi8(v, _mm256_andnot_si256(set, _mm256_set1_epi8(4)));
                acc = fma_i(acc, mul16(_mm256_castsi256_si128(v), xb->q), xb->d * d * (float)sc[i]);
                acc = fma_i(acc, mul16(_mm256_extracti128_si256(v, 1), xb->q + 16), xb->d * d * (float)sc[i + 1]);
            }
        }
    }
    return hsum(acc);
}

TARGET static float dot_q45_k(const cpu_q16 *x, const uint8_t *p, int n, int q5)
{
    __m256 acc = _mm256_setzero_ps();
    __m256i m4 = _mm256_set1_epi8(15);
    float mins = 0.0f;
    int bytes = q5 ? CPU_Q5_K_BYTES : CPU_Q4_K_BYTES;

    for (int b = 0; b < n / QK_K; b++, p += bytes) {
        const uint8_t *qs = p + (q5 ? 48 : 16);
        __m256i qh = _mm256_loadu_si256((const __m256i *)(const void *)(p + 16));
        float d = cpu_f16(cpu_rd16(p)), dmin = cpu_f16(cpu_rd16(p + 2));
        for (int j = 0; j < 4; j++) {
            __m256i q = _mm256_loadu_si256((const __m256i *)(const void *)(qs + 32 * j));
            for (int k = 0; k < 2; k++) {
                const cpu_q16 *xb = &x[b * 8 + 2 * j + k];
                __m256i v = _mm256_and_si256(k ? _mm256_srli_epi16(q, 4) : q, m4);
                int sc, m;
                if (q5) {
                    __m256i bit = _mm256_set1_epi8((char)(1 << (2 * j + k)));
                    __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(qh, bit), bit);
                    v = _mm256_or_si256(v, _mm256_and_si256(set, _mm256_set1_epi8(16)));
                }
                cpu_scale_min_k4(2 * j + k, p + 4, &sc, &m);
                acc = fma_i(acc, mul32(v, xb->q), d * (float)sc * xb->d);
                mins += dmin * (float)m * xb->s;
            }
        }
    }
    return hsum(acc) - mins;
}

TARGET float cpu_kq_avx2_dot_q4_k(const void *x, const void *w, int n) { return dot_q45_k(x, w, n, 0); }
TARGET float cpu_kq_avx2_dot_q5_k(const void *x, const void *w, int n) { return dot_q45_k(x, w, n, 1); }

TARGET float cpu_kq_avx2_dot_q6_k(const void *vx, const void *vw, int n)
{
    const cpu_q16 *x = vx;
    const uint8_t *p = vw;
    __m256 acc = _mm256_setzero_ps();
    __m256i m4 = _mm256_set1_epi8(15), m2 = _mm256_set1_epi8(3), off = _mm256_set1_epi8(32);

    for (int b = 0; b < n / QK_K; b++, p += CPU_Q6_K_BYTES) {
        const int8_t *sc = (const int8_t *)(p + 192);
        float d = cpu_f16(cpu_rd16(p + 208));
        for (int h = 0; h < 2; h++) {
            __m256i a = _mm256_loadu_si256((const __m256i *)(const void *)(p + 64 * h));
            __m256i c = _mm256_loadu_si256((const __m256i *)(const void *)(p + 64 * h + 32));
            __m256i hh = _mm256_loadu_si256((const __m256i *)(const void *)(p + 128 + 32 * h));
            for (int j = 0; j < 4; j++) {
                const cpu_q16 *xb = &x[b * 8 + 4 * h + j];
                __m256i lo = j % 2 ? c : a, v;
                int i = 8 * h + 2 * j;
                lo = _mm256_and_si256(j < 2 ? lo : _mm256_srli_epi16(lo, 4), m4);
                v = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hh, 2 * j), m2), 4));
                v = _mm256_sub_epi8(v, off);
                acc = fma_i(acc, mul16(_mm256_castsi256_si128(v), xb->q), xb->d * d * (float)sc[i]);
                acc = fma_i(acc, mul16(_mm256_extracti128_si256(v, 1), xb->q + 16), xb->d * d * (float)sc[i + 1]);
            }
        }
    }
    return hsum(acc);
}

/* One IQ4 or MXFP4 block of 32 (16 bytes of nibbles): 8 int32 partial sums of table[nibble] * x,
 * the code book looked up 16 nibbles at a time by pshufb. */
TARGET static inline __m256i nl_block(__m128i table, const uint8_t *qs, const int16_t *x)
{
    __m128i m4 = _mm_set1_epi8(15), q = _mm_loadu_si128((const __m128i *)(const void *)qs);
    __m128i lo = _mm_shuffle_epi8(table, _mm_and_si128(q, m4));
    __m128i hi = _mm_shuffle_epi8(table, _mm_and_si128(_mm_srli_epi16(q, 4), m4));

    return _mm256_add_epi32(mul16(lo, x), mul16(hi, x + 16));
}

TARGET static inline __m256i iq4_block(const uint8_t *qs, const int16_t *x)
{
    return nl_block(_mm_loadu_si128((const __m128i *)(const void *)cpu_iq4_values), qs, x);
}

TARGET float cpu_kq_avx2_dot_iq4_nl(const void *vx, const void *vw, int n)
{
    const cpu_q16 *x = vx;
    const uint8_t *p = vw;
    __m256 acc = _mm256_setzero_ps();

    for (int b = 0; b < n / QK; b++, p += CPU_IQ4_NL_BYTES)
        acc = fma_i(acc, iq4_block(p + 2, x[b].q), cpu_f16(cpu_rd16(p)) * x[b].d);
    return hsum(acc);
}

TARGET float cpu_kq_avx2_dot_iq4_xs(const void *vx, const void *vw, int n)
{
    const cpu_q16 *x = vx;
    const uint8_t *p = vw;
    __m256 acc = _mm256_setzero_ps();

    for (int b = 0; b < n / QK_K; b++, p += CPU_IQ4_XS_BYTES) {
        float d = cpu_f16(cpu_rd16(p));
        unsigned sh = cpu_rd16(p + 2);
        for (int i = 0; i < 8; i++) {
            int ls = ((p[4 + i / 2] >> (4 * (i % 2))) & 15) | (int)((sh >> (2 * i)) & 3) << 4;
            acc = fma_i(acc, iq4_block(p + 8 + 16 * i, x[b * 8 + i].q), d * (float)(ls - 32) * x[b * 8 + i].d);
        }
    }
    return hsum(acc);
}

/* IQ4_NL's loop with the E8M0 scale: the same instructions per block, one byte less to load. */
TARGET float cpu_kq_avx2_dot_mxfp4(const void *vx, const void *vw, int n)
{
    const cpu_q16 *x = vx;
    const uint8_t *p = vw;
    __m128i table = _mm_loadu_si128((const __m128i *)(const void *)cpu_mxfp4_values);
    __m256 acc = _mm256_setzero_ps();

    for (int b = 0; b < n / QK; b++, p += CPU_MXFP4_BYTES)
        acc = fma_i(acc, nl_block(table, p + 1, x[b].q), cpu_mxfp4_scale(p[0]) * x[b].d);
    return hsum(acc);
}

#endif
