/* kernels_avx2.c: the AVX2 + FMA + F16C path. Built with those flags (CMakeLists.txt of this
 * folder) on x86-64 only, and only ever called after __builtin_cpu_supports said the CPU has
 * them (cpu.c). It computes what kernels_scalar.c computes: the same integer block sums, only
 * the float additions happen in another order. Q8_0, Q4_0, Q4_K, Q6_K, F16 and F32 take the row
 * dots of kernels_avx2_gemm.c instead, the ones its gemms equal bit for bit. */
#include "cpu/kernels.h"
#include "cpu/kquant_int.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>

static inline float hsum(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));

    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static float dot_f32(const float *a, const float *b, int n)
{
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int i = 0;
    float s;

    for (; i + 16 <= n; i += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
    }
    for (; i + 8 <= n; i += 8)
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    s = hsum(_mm256_add_ps(s0, s1));
    for (; i < n; i++)
        s += a[i] * b[i];
    return s;
}

static inline __m256 load_f16(const void *p) { return _mm256_cvtph_ps(_mm_loadu_si128(p)); }

static inline __m256 load_bf16(const void *p)
{
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(p)), 16));
}

static float dot_f32_f16(const float *a, const uint16_t *b, int n)
{
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int i = 0;
    float s;

    for (; i + 16 <= n; i += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), load_f16(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), load_f16(b + i + 8), s1);
    }
    for (; i + 8 <= n; i += 8)
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), load_f16(b + i), s0);
    s = hsum(_mm256_add_ps(s0, s1));
    for (; i < n; i++)
        s += a[i] * cpu_f16(b[i]);
    return s;
}

static float w_bf16(const void *x, const void *w, int n)
{
    const float *a = x;
    const uint8_t *p = w;
    __m256 s0 = _mm256_setzero_ps();
    int i = 0;
    float s;

    for (; i + 8 <= n; i += 8)
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), load_bf16(p + 2 * i), s0);
    s = hsum(s0);
    for (; i < n; i++)
        s += a[i] * cpu_bf16(cpu_rd16(p + 2 * i));
    return s;
}

/* 32 nibbles of qs[16] in element order: low nibbles are elements 0..15, high 16..31. */
static inline __m256i nibbles(const uint8_t *qs)
{
    __m128i v = _mm_loadu_si128((const __m128i *)qs), m = _mm_set1_epi8(15);

    return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_and_si128(v, m)),
                                   _mm_and_si128(_mm_srli_epi16(v, 4), m), 1);
}

/* Byte i = 0x10 when bit i of qh is set: each byte lane picks the qh byte holding its bit
 * (shuffle), then tests the bit i % 8 of it. */
static inline __m256i high_bits(uint32_t qh)
{
    const __m256i idx = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                         2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh), idx);

    v = _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x10));
}

/* Eight partial sums of w[j] * x[j]: the 32 weights (int8, signed or 0..31) widened to int16
 * and multiplied with the 16-bit activations by madd; |w| <= 128 and |x| <= 32767 keep the
 * four products summed per lane far inside int32. */
static inline __m256 dot_w(__m256i w, const cpu_q16 *b)
{
    __m256i x0 = _mm256_loadu_si256((const __m256i *)b->q), x1 = _mm256_loadu_si256((const __m256i *)(b->q + 16));
    __m256i w0 = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(w));
    __m256i w1 = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(w, 1));

    return _mm256_cvtepi32_ps(_mm256_add_epi32(_mm256_madd_epi16(w0, x0), _mm256_madd_epi16(w1, x1)));
}

/* d_w * d_x for one block; F16C converts the weight's scale without cpu_f16's branches */
static inline float h2f(const uint8_t *p) { return _cvtsh_ss(cpu_rd16(p)); }
static inline __m256 scale(const uint8_t *p, const cpu_q16 *b) { return _mm256_set1_ps(h2f(p) * b->d); }

static float w_q5_0(const void *x, const void *w, int n)
{
    const cpu_q16 *xq = x;
    const uint8_t *p = w;
    __m256 acc = _mm256_setzero_ps();

    for (int b = 0; b < n / QK; b++, p += CPU_Q5_0_BYTES) {
        __m256i q = _mm256_or_si256(nibbles(p + 6), high_bits(cpu_rd32(p + 2)));

        q = _mm256_sub_epi8(q, _mm256_set1_epi8(16));
        acc = _mm256_fmadd_ps(dot_w(q, &xq[b]), scale(p, &xq[b]), acc);
    }
    return hsum(acc);
}

static float w_q4_1(const void *x, const void *w, int n)
{
    const cpu_q16 *xq = x;
    const uint8_t *p = w;
    __m256 acc = _mm256_setzero_ps();
    float ms = 0.0f;

    for (int b = 0; b < n / QK; b++, p += CPU_Q4_1_BYTES) {
        acc = _mm256_fmadd_ps(dot_w(nibbles(p + 4), &xq[b]), scale(p, &xq[b]), acc);
        ms += h2f(p + 2) * xq[b].s;
    }
    return hsum(acc) + ms;
}

static float w_q5_1(const void *x, const void *w, int n)
{
    const cpu_q16 *xq = x;
    const uint8_t *p = w;
    __m256 acc = _mm256_setzero_ps();
    float ms = 0.0f;

    for (int b = 0; b < n / QK; b++, p += CPU_Q5_1_BYTES) {
        __m256i q = _mm256_or_si256(nibbles(p + 8), high_bits(cpu_rd32(p + 4)));

        acc = _mm256_fmadd_ps(dot_w(q, &xq[b]), scale(p, &xq[b]), acc);
        ms += h2f(p + 2) * xq[b].s;
    }
    return hsum(acc) + ms;
}

static void axpy_f32(float *y, float a, const float *x, int n)
{
    __m256 va = _mm256_set1_ps(a);
    int i = 0;

    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++)
        y[i] += a * x[i];
}

static void axpy_f16(float *y, float a, const uint16_t *x, int n)
{
    __m256 va = _mm256_set1_ps(a);
    int i = 0;

    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, load_f16(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++)
        y[i] += a * cpu_f16(x[i]);
}

static void f32_to_f16(uint16_t *y, const float *x, int n)
{
    int i = 0;

    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++)
        y[i] = cpu_f32_to_f16(x[i]);
}

/* Attention over many keys (cpu_int.h): dot_f32 per key, inlined; axpy_f32 with 64 columns of
 * y in registers across the keys, so that each element sees the same fma in the same order. */
static void dots_f32(float *s, const float *q, const float *k, size_t ks, int m, int n)
{
    for (int i = 0; i < m; i++)
        s[i] = dot_f32(q, k + (size_t)i * ks, n);
}

static void axpys_f32(float *y, const float *s, const float *v, size_t vs, int m, int n)
{
    int c = 0;

    for (; c + 64 <= n; c += 64) {
        __m256 acc[8];
        for (int j = 0; j < 8; j++)
            acc[j] = _mm256_loadu_ps(y + c + 8 * j);
        for (int i = 0; i < m; i++) {
            __m256 a = _mm256_set1_ps(s[i]);
            const float *x = v + (size_t)i * vs + c;
            for (int j = 0; j < 8; j++)
                acc[j] = _mm256_fmadd_ps(a, _mm256_loadu_ps(x + 8 * j), acc[j]);
        }
        for (int j = 0; j < 8; j++)
            _mm256_storeu_ps(y + c + 8 * j, acc[j]);
    }
    for (int i = 0; c < n && i < m; i++)
        axpy_f32(y + c, s[i], v + (size_t)i * vs + c, n - c);
}

/* Q4_1 to Q5_1 and the K-quants other than Q4_K and Q6_K: the scalar integer sums, added in another
 * order. Q8_0, Q4_0, Q4_K, Q6_K and MXFP4: kernels_avx2_gemm.c's 8-lane groups, on its activation layout;
 * F16 and F32: its f32 panels. */
const cpu_path cpu_path_avx2 = {
    .name = "avx2",
    .base = &cpu_path_scalar,
    .built = 1,
    .type = {
        [GGML_TYPE_F32] = CPU_F32(cpu_avx2_dot_f32, cpu_avx2_gemm_f32),
        [GGML_TYPE_F16] = CPU_F32(cpu_avx2_dot_f16, cpu_avx2_gemm_f16),
        [GGML_TYPE_BF16] = CPU_F32(w_bf16, NULL),
        [GGML_TYPE_Q8_0] = CPU_OWN(cpu_avx2_dot_q8_0, cpu_avx2_gemm_q8_0),
        [GGML_TYPE_Q4_0] = CPU_OWN(cpu_avx2_dot_q4_0, cpu_avx2_gemm_q4_0),
        [GGML_TYPE_Q4_1] = CPU_Q16(w_q4_1, NULL), [GGML_TYPE_Q5_0] = CPU_Q16(w_q5_0, NULL),
        [GGML_TYPE_Q5_1] = CPU_Q16(w_q5_1, NULL),
        [GGML_TYPE_Q2_K] = CPU_Q16(cpu_kq_avx2_dot_q2_k, NULL), [GGML_TYPE_Q3_K] = CPU_Q16(cpu_kq_avx2_dot_q3_k, NULL),
        [GGML_TYPE_Q4_K] = CPU_OWN(cpu_avx2_dot_q4_k, cpu_avx2_gemm_q4_k),
        [GGML_TYPE_Q5_K] = CPU_Q16(cpu_kq_avx2_dot_q5_k, NULL),
        [GGML_TYPE_Q6_K] = CPU_OWN(cpu_avx2_dot_q6_k, cpu_avx2_gemm_q6_k),
        [GGML_TYPE_IQ4_NL] = CPU_Q16(cpu_kq_avx2_dot_iq4_nl, NULL),
        [GGML_TYPE_IQ4_XS] = CPU_Q16(cpu_kq_avx2_dot_iq4_xs, NULL),
        [GGML_TYPE_MXFP4] = CPU_OWN(cpu_avx2_dot_mxfp4, cpu_avx2_gemm_mxfp4),
    },
    .dot_f32 = dot_f32,
    .dot_f32_f16 = dot_f32_f16,
    .axpy_f32 = axpy_f32,
    .axpy_f16 = axpy_f16,
    .f32_to_f16 = f32_to_f16,
    .dots_f32 = dots_f32,
    .axpys_f32 = axpys_f32,
    .act_bytes = cpu_avx2_act_bytes,
    .act_quantize = cpu_avx2_act_quantize,
};

#else

CPU_PATH_ABSENT(cpu_path_avx2, "avx2");

#endif
