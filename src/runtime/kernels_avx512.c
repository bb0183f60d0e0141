/* kernels_avx512.c: the AVX-512 path (F, BW, DQ, VL; built with those flags on x86-64 only and
 * called only after cpu.c checked the CPU). Tiled kernels of rows x tokens for the types that
 * dominate real models (Q4_0, Q8_0, F16, F32); every other type keeps the AVX2 dot product.
 *
 * Block types (16-bit activations of rt_q16): per block one vpmaddwd of the 32 weights widened
 * to 16 bits against the 32 activations (exact int32 partial sums), one int32->f32 conversion
 * and one FMA by the block's scale d_w * d_x into a 16-lane accumulator per (row, token). The
 * scales of 16 blocks are made at once (a gather of the f16 d_w, one conversion, one multiply).
 * Q4_0's "- 8" is not applied per weight: sum (n - 8) q dx = sum n q dx - 8 s, s = dx sum q
 * (rt_q16.s), one FMA per 16 blocks. A tile of 4 rows x 4 tokens widens each weight block once
 * for 4 tokens and loads each activation block once for 4 rows; decode is the 4 x 1 tile.
 *
 * Float types: 16-lane FMA accumulators per (row, token) over chunks of RT_GEMM_KC columns,
 * summed once per chunk; a tile is 4 rows x 6 tokens (24 accumulators). With several tokens an
 * F16 chunk is first converted into an f32 panel, so the conversion is paid once per weight, not
 * once per token. Values are the same either way (the conversion is exact).
 *
 * The arithmetic of one (row, token) never depends on the tile it is computed in, so these
 * kernels are also this path's dot products and decode equals prefill bit for bit. */
#include "runtime/kernels.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__) && \
    defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>
#include <pthread.h>

#define AI static inline __attribute__((always_inline))

static inline __mmask16 first(int n) { return (__mmask16)(n >= 16 ? 0xffff : (1u << n) - 1); }

/* The f16 d_w of n (<= 16) blocks of `bytes` bytes from `w`, as f32 (0 past n). Each lane reads
 * 4 bytes at a block start: d_w and the block's next two bytes, never past the block. */
AI __m512 block_dw(const uint8_t *w, int bytes, int n)
{
    __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                     _mm512_set1_epi32(bytes));
    __m512i raw = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), first(n), idx, w, 1);

    return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(raw));
}

/* Q4_0 nibbles of a block as 32 int16 in element order: qs[j] & 15 for j < 16, qs[j - 16] >> 4
 * after. The 16 bytes are broadcast to both halves, widened, shifted per half and masked. */
AI __m512i q4_0_weights(const uint8_t *block)
{
    const __m512i shift = _mm512_setr_epi64(0, 0, 0, 0, 0x0004000400040004ll, 0x0004000400040004ll,
                                            0x0004000400040004ll, 0x0004000400040004ll);
    __m512i v = _mm512_cvtepu8_epi16(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(block + 2))));

    return _mm512_and_si512(_mm512_srlv_epi16(v, shift), _mm512_set1_epi16(15));
}

AI __m512i q8_0_weights(const uint8_t *block)
{
    return _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(block + 2)));
}

/* MR rows x MT tokens (constants at each call) of Q4_0 (q4 = 1) or Q8_0 over nb blocks. */
AI void block_tile(const int MR, const int MT, const int q4, float *y, size_t ldy, const rt_act *a, int t0,
                   const uint8_t *w, size_t ws, int nb)
{
    const int bytes = q4 ? RT_Q4_0_BYTES : RT_Q8_0_BYTES;
    __m512 acc[4][4], corr[4][4];
    _Alignas(64) float sc[4][4][16];

    #pragma GCC unroll 6
    for (int r = 0; r < MR; r++)
        #pragma GCC unroll 6
        for (int t = 0; t < MT; t++)
            acc[r][t] = corr[r][t] = _mm512_setzero_ps();
    for (int b0 = 0; b0 < nb; b0 += 16) {
        int n = nb - b0 < 16 ? nb - b0 : 16;
        #pragma GCC unroll 6
        for (int r = 0; r < MR; r++) {
            __m512 dw = block_dw(w + (size_t)r * ws + (size_t)b0 * bytes, bytes, n);
            #pragma GCC unroll 6
            for (int t = 0; t < MT; t++) {
                size_t o = (size_t)(t0 + t) * (size_t)nb + (size_t)b0;
                _mm512_store_ps(sc[r][t], _mm512_mul_ps(dw, _mm512_maskz_loadu_ps(first(n), a->dx + o)));
                if (q4)
                    corr[r][t] = _mm512_fmadd_ps(dw, _mm512_maskz_loadu_ps(first(n), a->sx + o), corr[r][t]);
            }
        }
        for (int j = 0; j < n; j++) {
            __m512i wv[4];
            #pragma GCC unroll 6
            for (int r = 0; r < MR; r++) {
                const uint8_t *blk = w + (size_t)r * ws + (size_t)(b0 + j) * bytes;
                wv[r] = q4 ? q4_0_weights(blk) : q8_0_weights(blk);
            }
            #pragma GCC unroll 6
            for (int t = 0; t < MT; t++) {
                const rt_q16 *xb = (const rt_q16 *)(const void *)(a->x + (size_t)(t0 + t) * a->stride) + b0 + j;
                __m512i xv = _mm512_loadu_si512(xb->q);
                #pragma GCC unroll 6
                for (int r = 0; r < MR; r++)
                    acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_madd_epi16(wv[r], xv)),
                                                _mm512_set1_ps(sc[r][t][j]), acc[r][t]);
            }
        }
    }
    #pragma GCC unroll 6
    for (int r = 0; r < MR; r++)
        #pragma GCC unroll 6
        for (int t = 0; t < MT; t++) {
            float s = _mm512_reduce_add_ps(acc[r][t]);
            if (q4)
                s -= 8.0f * _mm512_reduce_add_ps(corr[r][t]);
            y[(size_t)t * ldy + r] = s;
        }
}

AI void block_gemm(const int q4, float *y, size_t ldy, const rt_act *a, int n_tok, const uint8_t *w, size_t ws,
                   int n_rows, int cols)
{
    int nb = cols / QK, r = 0;

    /* rows outside: the 4 rows of a tile stay in L1 while every token tile passes */
    for (; r + 4 <= n_rows; r += 4) {
        int t = 0;
        for (; t + 4 <= n_tok; t += 4)
            block_tile(4, 4, q4, y + (size_t)t * ldy + r, ldy, a, t, w + (size_t)r * ws, ws, nb);
        for (; t < n_tok; t++)
            block_tile(4, 1, q4, y + (size_t)t * ldy + r, ldy, a, t, w + (size_t)r * ws, ws, nb);
    }
    for (; r < n_rows; r++) {
        int t = 0;
        for (; t + 4 <= n_tok; t += 4)
            block_tile(1, 4, q4, y + (size_t)t * ldy + r, ldy, a, t, w + (size_t)r * ws, ws, nb);
        for (; t < n_tok; t++)
            block_tile(1, 1, q4, y + (size_t)t * ldy + r, ldy, a, t, w + (size_t)r * ws, ws, nb);
    }
}

static void gemm_q4_0(float *y, size_t ldy, const rt_act *a, int n_tok, const uint8_t *w, size_t ws, int n_rows,
                      int cols)
{
    block_gemm(1, y, ldy, a, n_tok, w, ws, n_rows, cols);
}

static void gemm_q8_0(float *y, size_t ldy, const rt_act *a, int n_tok, const uint8_t *w, size_t ws, int n_rows,
                      int cols)
{
    block_gemm(0, y, ldy, a, n_tok, w, ws, n_rows, cols);
}

/* ---------------------------------------------------------------- float weights */

/* MR rows x MT tokens over columns [k0, k0 + kc) (kc a multiple of 16, or the masked tail `tail`
 * columns after them). Weights: f16 (F16 = 1) or f32 rows `wstride` elements apart, starting at
 * column k0. y gets the chunk's sum (k0 == 0) or adds it. */
AI void float_tile(const int MR, const int MT, const int F16, float *y, size_t ldy, const float *x, size_t ldx,
                   const void *w, size_t wstride, int k0, int kc, int tail)
{
    __m512 c[4][6];

    #pragma GCC unroll 6
    for (int r = 0; r < MR; r++)
        #pragma GCC unroll 6
        for (int t = 0; t < MT; t++)
            c[r][t] = _mm512_setzero_ps();
    for (int k = 0; k < kc + (tail ? 16 : 0); k += 16) {
        __mmask16 m = k < kc ? 0xffff : first(tail);
        __m512 xv[6];
        #pragma GCC unroll 6
        for (int t = 0; t < MT; t++)
            xv[t] = _mm512_maskz_loadu_ps(m, x + (size_t)t * ldx + k0 + k);
        #pragma GCC unroll 6
        for (int r = 0; r < MR; r++) {
            __m512 wv = F16 ? _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, (const uint16_t *)w + (size_t)r * wstride + k))
                            : _mm512_maskz_loadu_ps(m, (const float *)w + (size_t)r * wstride + k);
            #pragma GCC unroll 6
            for (int t = 0; t < MT; t++)
                c[r][t] = _mm512_fmadd_ps(wv, xv[t], c[r][t]);
        }
    }
    #pragma GCC unroll 6
    for (int r = 0; r < MR; r++)
        #pragma GCC unroll 6
        for (int t = 0; t < MT; t++) {
            float s = _mm512_reduce_add_ps(c[r][t]), *o = y + (size_t)t * ldy + r;
            *o = k0 ? *o + s : s;
        }
}

/* Tokens in tiles of 6 over MR rows of one chunk; MT is made a constant per case. */
AI void float_rows(const int MR, const int F16, float *y, size_t ldy, const float *x, size_t ldx, int n_tok,
                   const void *w, size_t wstride, int k0, int kc, int tail)
{
    for (int t = 0; t < n_tok; t += 6) {
        float *yt = y + (size_t)t * ldy;
        const float *xt = x + (size_t)t * ldx;
        switch (n_tok - t < 6 ? n_tok - t : 6) {
        case 6: float_tile(MR, 6, F16, yt, ldy, xt, ldx, w, wstride, k0, kc, tail); break;
        case 5: float_tile(MR, 5, F16, yt, ldy, xt, ldx, w, wstride, k0, kc, tail); break;
        case 4: float_tile(MR, 4, F16, yt, ldy, xt, ldx, w, wstride, k0, kc, tail); break;
        case 3: float_tile(MR, 3, F16, yt, ldy, xt, ldx, w, wstride, k0, kc, tail); break;
        case 2: float_tile(MR, 2, F16, yt, ldy, xt, ldx, w, wstride, k0, kc, tail); break;
        default: float_tile(MR, 1, F16, yt, ldy, xt, ldx, w, wstride, k0, kc, tail); break;
        }
    }
}

/* An F16 chunk of RT_GEMM_RB rows as f32, static so that a forward pass allocates nothing. */
static _Thread_local _Alignas(64) float panel[RT_GEMM_RB * RT_GEMM_KC];

static void float_gemm(int f16, float *y, size_t ldy, const rt_act *a, int n_tok, const uint8_t *w, size_t ws,
                       int n_rows, int cols)
{
    const float *x = (const float *)(const void *)a->x;
    size_t ldx = a->stride / sizeof(float), we = ws / (f16 ? 2 : 4);

    for (int rb = 0; rb < n_rows; rb += RT_GEMM_RB) {
        int nr = n_rows - rb < RT_GEMM_RB ? n_rows - rb : RT_GEMM_RB;
        for (int k0 = 0; k0 < cols; k0 += RT_GEMM_KC) {
            int kc = cols - k0 < RT_GEMM_KC ? cols - k0 : RT_GEMM_KC, tail = kc % 16;
            const uint8_t *wc = w + (size_t)rb * ws + (size_t)k0 * (f16 ? 2 : 4);
            int use_panel = f16 && n_tok > 1;
            kc -= tail;
            if (use_panel) {
                for (int r = 0; r < nr; r++) {
                    const uint16_t *src = (const uint16_t *)(const void *)(wc + (size_t)r * ws);
                    float *dst = panel + (size_t)r * RT_GEMM_KC;
                    for (int k = 0; k < kc; k += 16)
                        _mm512_store_ps(dst + k, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(src + k))));
                    if (tail)
                        _mm512_store_ps(dst + kc, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(first(tail), src + kc)));
                }
            }
            const void *wp = use_panel ? (const void *)panel : (const void *)wc;
            size_t wst = use_panel ? RT_GEMM_KC : we;
            int f = f16 && !use_panel, r = 0;
            for (; r + 4 <= nr; r += 4) {
                const void *wr = f ? (const void *)((const uint16_t *)wp + r * wst) : (const void *)((const float *)wp + r * wst);
                if (f)
                    float_rows(4, 1, y + rb + r, ldy, x, ldx, n_tok, wr, wst, k0, kc, tail);
                else
                    float_rows(4, 0, y + rb + r, ldy, x, ldx, n_tok, wr, wst, k0, kc, tail);
            }
            for (; r < nr; r++) {
                const void *wr = f ? (const void *)((const uint16_t *)wp + r * wst) : (const void *)((const float *)wp + r * wst);
                if (f)
                    float_rows(1, 1, y + rb + r, ldy, x, ldx, n_tok, wr, wst, k0, kc, tail);
                else
                    float_rows(1, 0, y + rb + r, ldy, x, ldx, n_tok, wr, wst, k0, kc, tail);
            }
        }
    }
}

static void gemm_f16(float *y, size_t ldy, const rt_act *a, int n_tok, const uint8_t *w, size_t ws, int n_rows,
                     int cols)
{
    float_gemm(1, y, ldy, a, n_tok, w, ws, n_rows, cols);
}

static void gemm_f32(float *y, size_t ldy, const rt_act *a, int n_tok, const uint8_t *w, size_t ws, int n_rows,
                     int cols)
{
    float_gemm(0, y, ldy, a, n_tok, w, ws, n_rows, cols);
}

/* ---------------------------------------------------------------- one row: this path's dots */

#define MAX_DOT_BLOCKS 1024   /* the scale copies of one row live on the stack */

static float dot_block(int type, const void *x, const void *w, int n)
{
    float dx[MAX_DOT_BLOCKS], sx[MAX_DOT_BLOCKS], y;
    const rt_q16 *xq = x;
    int nb = n / QK;
    rt_act a = { .x = x, .stride = 0, .dx = dx, .sx = sx };

    if (nb > MAX_DOT_BLOCKS)
        return rt_kernels_avx2()->dot[type](x, w, n);
    for (int b = 0; b < nb; b++) {
        dx[b] = xq[b].d;
        sx[b] = xq[b].s;
    }
    (type == GGML_TYPE_Q4_0 ? gemm_q4_0 : gemm_q8_0)(&y, 1, &a, 1, w, 0, 1, n);
    return y;
}

static float dot_q4_0(const void *x, const void *w, int n) { return dot_block(GGML_TYPE_Q4_0, x, w, n); }
static float dot_q8_0(const void *x, const void *w, int n) { return dot_block(GGML_TYPE_Q8_0, x, w, n); }

static float dot_float(int f16, const float *x, const void *w, int n)
{
    rt_act a = { .x = (const uint8_t *)x, .stride = 0 };
    float y;

    float_gemm(f16, &y, 1, &a, 1, w, 0, 1, n);
    return y;
}

static float dot_f16(const void *x, const void *w, int n) { return dot_float(1, x, w, n); }
static float dot_f32w(const void *x, const void *w, int n) { return dot_float(0, x, w, n); }
static float dot_f32(const float *a, const float *b, int n) { return dot_float(0, a, b, n); }
static float dot_f32_f16(const float *a, const uint16_t *b, int n) { return dot_float(1, a, b, n); }

static rt_kernels table;
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void table_init(void)
{
    table = *rt_kernels_avx2();
    table.name = "avx512";
    table.dot[GGML_TYPE_Q4_0] = dot_q4_0;
    table.dot[GGML_TYPE_Q8_0] = dot_q8_0;
    table.dot[GGML_TYPE_F16] = dot_f16;
    table.dot[GGML_TYPE_F32] = dot_f32w;
    table.dot_f32 = dot_f32;
    table.dot_f32_f16 = dot_f32_f16;
}

static const rt_fast fast = {
    .gemm = { [GGML_TYPE_Q4_0] = gemm_q4_0, [GGML_TYPE_Q8_0] = gemm_q8_0, [GGML_TYPE_F16] = gemm_f16,
              [GGML_TYPE_F32] = gemm_f32 },
};

const rt_kernels *rt_kernels_avx512(void)
{
    if (!rt_kernels_avx2())
        return NULL;
    pthread_once(&table_once, table_init);
    return &table;
}

const rt_fast *rt_fast_avx512(void) { return rt_kernels_avx2() ? &fast : NULL; }

#else

const rt_kernels *rt_kernels_avx512(void) { return NULL; }
const rt_fast *rt_fast_avx512(void) { return NULL; }

#endif
