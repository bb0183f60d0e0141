/* test_backend.c: the backend seam. Device choice by name and $MSTORE_DEVICE; every op kind run
 * through an op sequence on the CPU backend gives bit for bit what the kernel it stands for gives
 * when called directly; sequences, reads and weights outside their bounds are refused. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "cpu/cpu.h"
#include "util/util.h"

static uint64_t rng = 88172645463325252ull;
static float unif(void)   /* xorshift64: [-1, 1) */
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

static backend_tensor f32_tensor(const char *name, float *data, int n_dims, uint64_t rows, uint64_t cols)
{
    backend_tensor t = { .name = name, .type = GGML_TYPE_F32, .n_dims = n_dims, .data = data };

    if (n_dims == 1) {
        t.shape[0] = cols;
    } else {
        t.shape[0] = rows;
        t.shape[1] = cols;
    }
    t.nbytes = rows * cols * sizeof(float);
    return t;
}

/* Q8_0 weights: per 32 values an f16 scale and 32 int8 codes. */
static uint8_t *q8_0_weights(backend_tensor *t, int rows, int cols)
{
    size_t nb = (size_t)rows * (size_t)(cols / 32) * 34;
    uint8_t *p = malloc(nb);

    for (size_t b = 0; b < nb / 34; b++) {
        uint16_t d = cpu_f32_to_f16(0.002f + 0.01f * (unif() + 1));
        memcpy(p + b * 34, &d, 2);
        for (int i = 0; i < 32; i++)
            p[b * 34 + 2 + i] = (uint8_t)(int8_t)(unif() * 127);
    }
    *t = (backend_tensor){ .name = "q8", .type = GGML_TYPE_Q8_0, .n_dims = 2, .data = p, .nbytes = nb };
    t->shape[0] = (uint64_t)rows;
    t->shape[1] = (uint64_t)cols;
    return p;
}

START_TEST(open_refuses_unknown_device_by_name_and_env)
{
    backend *b = NULL;

    ck_assert_int_eq(backend_open(&b, "tpu", NULL), MS_EINVALID);
    ck_assert_ptr_null(b);
    ck_assert_str_eq(ms_err_msg(), "device 'tpu': unknown; expected auto, cpu, vulkan or metal");
    setenv("MSTORE_DEVICE", "abacus", 1);
    ck_assert_int_eq(backend_open(&b, "auto", NULL), MS_EINVALID);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "device 'abacus': unknown"));
    setenv("MSTORE_DEVICE", "cpu", 1);   /* a name given by the caller wins over the environment */
    ck_assert_int_eq(backend_open(&b, "tpu", NULL), MS_EINVALID);
    unsetenv("MSTORE_DEVICE");
}
END_TEST

START_TEST(open_cpu_by_name_describes_it)
{
    backend *b = NULL;
    backend_opts o = { .n_threads = 2 };

    ck_assert_int_eq(backend_open(&b, "CPU", &o), 0);
    ck_assert_str_eq(backend_name(b), "cpu");
    ck_assert_ptr_nonnull(strstr(backend_describe(b), "2 threads"));
    backend_close(b);
    backend_close(NULL);
}
END_TEST

/* One sequence with every op kind, against the kernels called one by one on host copies. */
START_TEST(sequence_equals_kernels_bit_for_bit)
{
    enum { N = 3, DIM = 64, ROWS = 40, HEADS = 4, KVH = 2, HD = 16, CTX = 8, VOCAB = 11, POS = 2 };
    backend_opts o = { .n_threads = 2 };
    backend_limits lim = { .max_rows = N, .max_cols = DIM, .n_ctx = CTX, .heads = HEADS };
    backend *b;
    backend_buf *x, *y, *q, *kc, *vc, *att, *g;
    backend_op ops[16];
    backend_seq s = { ops, 0, 16, 0 };
    static float emb[VOCAB * DIM], mat[ROWS * DIM], nw[DIM], bias[ROWS];
    int32_t tokens[N] = { 3, 10, 0 };
    double freqs[HD / 2];
    backend_tensor te, tm, tn, tb, tq;
    const backend_weight *we, *wm, *wn, *wb, *wq;
    uint8_t *q8 = q8_0_weights(&tq, ROWS, DIM);

    for (size_t i = 0; i < sizeof emb / sizeof emb[0]; i++)
        emb[i] = unif();
    for (size_t i = 0; i < sizeof mat / sizeof mat[0]; i++)
        mat[i] = unif();
    for (int i = 0; i < DIM; i++)
        nw[i] = 1.0f + 0.5f * unif();
    for (int i = 0; i < ROWS; i++)
        bias[i] = unif();
    for (int i = 0; i < HD / 2; i++)
        freqs[i] = pow(10000.0, -2.0 * i / HD);
    te = f32_tensor("emb", emb, 2, VOCAB, DIM);
    tm = f32_tensor("mat", mat, 2, ROWS, DIM);
    tn = f32_tensor("norm", nw, 1, 1, DIM);
    tb = f32_tensor("bias", bias, 1, 1, ROWS);

    ck_assert_int_eq(backend_open(&b, "cpu", &o), 0);
    ck_assert_int_eq(backend_reserve(b, &lim), 0);
    ck_assert_int_eq(backend_weight_import(&we, b, &te), 0);
    ck_assert_int_eq(backend_weight_import(&wm, b, &tm), 0);
    ck_assert_int_eq(backend_weight_import(&wn, b, &tn), 0);
    ck_assert_int_eq(backend_weight_import(&wb, b, &tb), 0);
    ck_assert_int_eq(backend_weight_import(&wq, b, &tq), 0);
    ck_assert_int_eq(backend_buf_new(&x, b, N * DIM, BACKEND_F32, "x"), 0);
    ck_assert_int_eq(backend_buf_new(&y, b, N * ROWS, BACKEND_F32, "y"), 0);
    ck_assert_int_eq(backend_buf_new(&q, b, N * HEADS * HD, BACKEND_F32, "q"), 0);
    ck_assert_int_eq(backend_buf_new(&kc, b, CTX * KVH * HD, BACKEND_F16, "k"), 0);
    ck_assert_int_eq(backend_buf_new(&vc, b, CTX * KVH * HD, BACKEND_F16, "v"), 0);
    ck_assert_int_eq(backend_buf_new(&att, b, N * HEADS * HD, BACKEND_F32, "att"), 0);
    ck_assert_int_eq(backend_buf_new(&g, b, N * ROWS, BACKEND_F32, "g"), 0);
    for (int i = 0; i < CTX * KVH * HD; i++) {   /* positions before POS, as earlier forwards left them */
        ((uint16_t *)kc->host)[i] = cpu_f32_to_f16(unif());
        ((uint16_t *)vc->host)[i] = cpu_f32_to_f16(unif());
    }

    backend_seq_embed(&s, backend_at(x, 0), we, tokens, N, DIM);
    backend_seq_rms_norm(&s, backend_at(x, 0), backend_at(x, 0), wn, N, DIM, 1e-5f);
    backend_seq_matmul(&s, backend_at(y, 0), backend_at(x, 0), wm, N);
    backend_seq_add_row(&s, backend_at(y, 0), wb, N, ROWS);
    backend_seq_matmul(&s, backend_at(g, 0), backend_at(x, 0), wq, N);
    backend_seq_swiglu(&s, backend_at(g, 0), backend_at(y, 0), N * ROWS);
    backend_seq_add(&s, backend_at(g, 0), backend_at(y, 0), N * ROWS);
    backend_seq_store(&s, backend_at(q, 0), backend_at(x, 0), N * HEADS * HD);
    backend_seq_rope(&s, backend_at(q, 0), N, HEADS, HD, HD, POS, freqs, 0);
    backend_seq_store(&s, backend_at(kc, POS * KVH * HD), backend_at(x, 0), N * KVH * HD);
    backend_seq_store(&s, backend_at(vc, POS * KVH * HD), backend_at(x, DIM), N * KVH * HD);
    backend_seq_attention(&s, backend_at(att, 0), backend_at(q, 0), backend_at(kc, 0), backend_at(vc, 0), N, POS,
                          HEADS, KVH, HD);
    ck_assert_int_eq(s.n, 12);

    /* the same by hand, before the run changes the caches */
    static float hx[N * DIM], hy[N * ROWS], hg[N * ROWS], hq[N * HEADS * HD], hatt[N * HEADS * HD];
    static uint16_t hk[CTX * KVH * HD], hv[CTX * KVH * HD];
    cpu_pool *pool;
    void *mm = malloc(cpu_matmul_scratch(N, DIM));
    float *as = malloc(cpu_attention_scratch(CTX, 2));
    memcpy(hk, kc->host, sizeof hk);
    memcpy(hv, vc->host, sizeof hv);
    ck_assert_int_eq(cpu_pool_new(&pool, 2), 0);
    for (int t = 0; t < N; t++)
        cpu_tensor_row(hx + t * DIM, &te, (uint64_t)tokens[t]);
    cpu_rms_norm(hx, hx, nw, N, DIM, 1e-5f, 0.0f);
    cpu_matmul(pool, hy, hx, N, &tm, mm);
    for (int t = 0; t < N; t++)
        cpu_add(hy + t * ROWS, bias, ROWS);
    cpu_matmul(pool, hg, hx, N, &tq, mm);
    cpu_swiglu(pool, hg, hy, N * ROWS);
    cpu_add(hg, hy, N * ROWS);
    memcpy(hq, hx, sizeof hq);
    cpu_rope(hq, N, HEADS, HD, HD, POS, freqs, 0);
    for (int i = 0; i < N * KVH * HD; i++) {
        hk[POS * KVH * HD + i] = cpu_f32_to_f16(hx[i]);
        hv[POS * KVH * HD + i] = cpu_f32_to_f16(hx[DIM + i]);
    }
    cpu_attention(pool, hatt, hq, hk, hv, 1, N, POS, HEADS, KVH, HD, as, CTX);

    ck_assert_int_eq(backend_run(b, &s), 0);
    ck_assert_mem_eq(x->host, hx, sizeof hx);
    ck_assert_mem_eq(y->host, hy, sizeof hy);
    ck_assert_mem_eq(g->host, hg, sizeof hg);
    ck_assert_mem_eq(q->host, hq, sizeof hq);
    ck_assert_mem_eq(kc->host, hk, sizeof hk);
    ck_assert_mem_eq(vc->host, hv, sizeof hv);
    ck_assert_mem_eq(att->host, hatt, sizeof hatt);
    float logits[ROWS];
    ck_assert_int_eq(backend_read(b, logits, backend_at(y, ROWS), ROWS), 0);
    ck_assert_mem_eq(logits, hy + ROWS, sizeof logits);
    cpu_pool_free(pool);
    free(mm);
    free(as);
    free(q8);
    backend_close(b);
}
END_TEST

/* The encoders' ops against the arithmetic backend.h defines, computed here in double: LayerNorm
 * with and without its bias (in place), the erf GELU, and attention in which every token of a
 * sequence sees all of it, over f32 and f16 caches. */
START_TEST(encoder_ops_match_their_definition)
{
    enum { N = 5, DIM = 48, HEADS = 4, KVH = 2, HD = 12, CTX = 8 };
    backend_opts o = { .n_threads = 2 };
    backend_limits lim = { .max_rows = N, .max_cols = DIM, .n_ctx = CTX, .heads = HEADS };
    backend *b;
    backend_buf *x, *y, *g, *q, *k32, *v32, *k16, *v16, *a32, *a16;
    backend_op ops[8];
    backend_seq s = { ops, 0, 8, 0 };
    static float hx[N * DIM], nw[DIM], nb[DIM];
    backend_tensor tw, tb;
    const backend_weight *ww, *wb;

    for (int i = 0; i < N * DIM; i++)
        hx[i] = 3.0f * unif() + 0.5f;   /* an offset, so that the mean matters */
    for (int i = 0; i < DIM; i++) {
        nw[i] = 1.0f + 0.5f * unif();
        nb[i] = unif();
    }
    tw = f32_tensor("ln.weight", nw, 1, 1, DIM);
    tb = f32_tensor("ln.bias", nb, 1, 1, DIM);
    ck_assert_int_eq(backend_open(&b, "cpu", &o), 0);
    ck_assert(backend_supports(b, BACKEND_OP_LAYER_NORM) && backend_supports(b, BACKEND_OP_GELU) &&
              backend_supports(b, BACKEND_OP_ATTENTION_BIDIR));
    ck_assert_int_eq(backend_reserve(b, &lim), 0);
    ck_assert_int_eq(backend_weight_import(&ww, b, &tw), 0);
    ck_assert_int_eq(backend_weight_import(&wb, b, &tb), 0);
    ck_assert_int_eq(backend_buf_new(&x, b, N * DIM, BACKEND_F32, "x"), 0);
    ck_assert_int_eq(backend_buf_new(&y, b, N * DIM, BACKEND_F32, "y"), 0);
    ck_assert_int_eq(backend_buf_new(&g, b, N * DIM, BACKEND_F32, "g"), 0);
    ck_assert_int_eq(backend_buf_new(&q, b, N * HEADS * HD, BACKEND_F32, "q"), 0);
    ck_assert_int_eq(backend_buf_new(&k32, b, CTX * KVH * HD, BACKEND_F32, "k32"), 0);
    ck_assert_int_eq(backend_buf_new(&v32, b, CTX * KVH * HD, BACKEND_F32, "v32"), 0);
    ck_assert_int_eq(backend_buf_new(&k16, b, CTX * KVH * HD, BACKEND_F16, "k16"), 0);
    ck_assert_int_eq(backend_buf_new(&v16, b, CTX * KVH * HD, BACKEND_F16, "v16"), 0);
    ck_assert_int_eq(backend_buf_new(&a32, b, N * HEADS * HD, BACKEND_F32, "a32"), 0);
    ck_assert_int_eq(backend_buf_new(&a16, b, N * HEADS * HD, BACKEND_F32, "a16"), 0);
    memcpy(x->host, hx, sizeof hx);
    memcpy(g->host, hx, sizeof hx);
    for (int i = 0; i < N * HEADS * HD; i++)
        ((float *)q->host)[i] = unif();
    /* the sequence's rows start at row 1 of the caches: k, v refs point at its first row */
    for (int i = 0; i < CTX * KVH * HD; i++) {
        float kv = unif(), vv = unif();
        ((float *)k32->host)[i] = kv;
        ((float *)v32->host)[i] = vv;
        ((uint16_t *)k16->host)[i] = cpu_f32_to_f16(kv);
        ((uint16_t *)v16->host)[i] = cpu_f32_to_f16(vv);
    }

    backend_seq_layer_norm(&s, backend_at(y, 0), backend_at(x, 0), ww, wb, N, DIM, 1e-12f);
    backend_seq_layer_norm(&s, backend_at(x, 0), backend_at(x, 0), ww, NULL, N, DIM, 1e-5f);
    backend_seq_gelu(&s, backend_at(g, 0), N * DIM);
    backend_seq_attention_bidir(&s, backend_at(a32, 0), backend_at(q, 0), backend_at(k32, KVH * HD),
                                backend_at(v32, KVH * HD), N, HEADS, KVH, HD, 0.0f);
    backend_seq_attention_bidir(&s, backend_at(a16, 0), backend_at(q, 0), backend_at(k16, KVH * HD),
                                backend_at(v16, KVH * HD), N, HEADS, KVH, HD, 0.25f);
    ck_assert_int_eq(backend_run(b, &s), 0);

    for (int t = 0; t < N; t++) {
        const float *xt = hx + t * DIM;
        double m = 0, var = 0;
        for (int i = 0; i < DIM; i++)
            m += xt[i];
        m /= DIM;
        for (int i = 0; i < DIM; i++)
            var += (xt[i] - m) * (xt[i] - m) / DIM;
        for (int i = 0; i < DIM; i++) {
            double z = (xt[i] - m) / sqrt(var + 1e-12);
            ck_assert_double_eq_tol(((float *)y->host)[t * DIM + i], z * nw[i] + nb[i], 1e-5);
            ck_assert_double_eq_tol(((float *)x->host)[t * DIM + i], (xt[i] - m) / sqrt(var + 1e-5) * nw[i], 1e-5);
        }
    }
    for (int i = 0; i < N * DIM; i++)
        ck_assert_double_eq_tol(((float *)g->host)[i], 0.5 * hx[i] * (1.0 + erf(hx[i] / sqrt(2.0))), 1e-5);
    for (int f16 = 0; f16 < 2; f16++) {
        const float *out = (float *)(f16 ? a16 : a32)->host, *hq = q->host;
        double scale = f16 ? 0.25 : 1.0 / sqrt(HD);
        for (int t = 0; t < N; t++)
            for (int h = 0; h < HEADS; h++) {
                double sc[N], mx = -1e300, sum = 0;
                int kvo = (h / (HEADS / KVH)) * HD;
                for (int p = 0; p < N; p++) {   /* every position of the sequence, after t's too */
                    double d = 0;
                    for (int i = 0; i < HD; i++) {
                        int at = (1 + p) * KVH * HD + kvo + i;
                        double kv = f16 ? cpu_f16_to_f32(((uint16_t *)k16->host)[at]) : ((float *)k32->host)[at];
                        d += hq[(t * HEADS + h) * HD + i] * kv;
                    }
                    sc[p] = d * scale;
                    mx = fmax(mx, sc[p]);
                }
                for (int p = 0; p < N; p++)
                    sum += sc[p] = exp(sc[p] - mx);
                for (int i = 0; i < HD; i++) {
                    double acc = 0;
                    for (int p = 0; p < N; p++) {
                        int at = (1 + p) * KVH * HD + kvo + i;
                        double vv = f16 ? cpu_f16_to_f32(((uint16_t *)v16->host)[at]) : ((float *)v32->host)[at];
                        acc += sc[p] / sum * vv;
                    }
                    ck_assert_double_eq_tol(out[(t * HEADS + h) * HD + i], acc, 1e-5);
                }
            }
    }
    /* a window, a ring or a start position makes no sense for an encoder: refused, nothing run */
    s.n = 0;
    backend_seq_attention_bidir(&s, backend_at(a32, 0), backend_at(q, 0), backend_at(k32, 0), backend_at(v32, 0), N,
                                HEADS, KVH, HD, 0.0f);
    ops[0].window = 2;
    ck_assert_int_eq(backend_run(b, &s), MS_ERROR);
    backend_close(b);
}
END_TEST

/* gpt-oss's ops against their definitions in double: attention with sinks (a window over a ring
 * of slots, f32 and f16 caches), each slot's expert bias (an F32 pack seen at an odd address, so
 * that the backend's aligned copy is what runs), and the clamped SwiGLU on both sides of its limit. */
START_TEST(gptoss_ops_match_their_definition)
{
    enum { N = 3, POS0 = 4, HEADS = 4, KVH = 2, HD = 8, WIN = 3, RING = WIN + N - 1, NE = 5, K = 2, ROWS = 6 };
    backend_opts o = { .n_threads = 2 };
    backend_limits lim = { .max_rows = N, .max_cols = 64, .n_ctx = 16, .heads = HEADS };
    backend *b;
    backend_buf *q, *k32, *v32, *k16, *v16, *a32, *a16, *eh, *ids, *g, *u;
    backend_op ops[8];
    backend_seq s = { ops, 0, 8, 0 };
    static float sink[HEADS], *bias, hq[N * HEADS * HD], hk[RING * KVH * HD], hv[RING * KVH * HD];
    static float heh[N * K * ROWS], hg[N * 16], hu[N * 16];
    static int32_t hid[N * K];
    float *odd = malloc((NE * ROWS + 1) * sizeof *odd);
    backend_tensor ts, tb;
    const backend_weight *ws, *wb;

    bias = odd + 1;
    for (int h = 0; h < HEADS; h++)
        sink[h] = 2.0f * unif();
    for (int i = 0; i < NE * ROWS; i++)
        bias[i] = unif();
    for (int i = 0; i < N * HEADS * HD; i++)
        hq[i] = unif();
    for (int i = 0; i < RING * KVH * HD; i++) {
        hk[i] = cpu_f16_to_f32(cpu_f32_to_f16(unif()));   /* f16-exact, so both caches hold the same */
        hv[i] = cpu_f16_to_f32(cpu_f32_to_f16(unif()));
    }
    for (int i = 0; i < N * K * ROWS; i++)
        heh[i] = unif();
    for (int i = 0; i < N * K; i++)
        hid[i] = (int32_t)((i * 3 + 1) % NE);
    for (int i = 0; i < N * 16; i++) {
        hg[i] = 12.0f * unif();   /* past the limit of 7 on both sides */
        hu[i] = 12.0f * unif();
    }
    ts = f32_tensor("sinks", sink, 1, 1, HEADS);
    tb = f32_tensor("bias", bias, 2, NE, ROWS);
    ck_assert_int_eq(backend_open(&b, "cpu", &o), 0);
    ck_assert(backend_supports(b, BACKEND_OP_ATTENTION_SINKS) && backend_supports(b, BACKEND_OP_ADD_ROW_ID) &&
              backend_supports(b, BACKEND_OP_SWIGLU_OAI));
    ck_assert_int_eq(backend_reserve(b, &lim), 0);
    ck_assert_int_eq(backend_weight_import(&ws, b, &ts), 0);
    ck_assert_int_eq(backend_weight_import(&wb, b, &tb), 0);
    ck_assert_int_eq(backend_buf_new(&q, b, N * HEADS * HD, BACKEND_F32, "q"), 0);
    ck_assert_int_eq(backend_buf_new(&k32, b, RING * KVH * HD, BACKEND_F32, "k32"), 0);
    ck_assert_int_eq(backend_buf_new(&v32, b, RING * KVH * HD, BACKEND_F32, "v32"), 0);
    ck_assert_int_eq(backend_buf_new(&k16, b, RING * KVH * HD, BACKEND_F16, "k16"), 0);
    ck_assert_int_eq(backend_buf_new(&v16, b, RING * KVH * HD, BACKEND_F16, "v16"), 0);
    ck_assert_int_eq(backend_buf_new(&a32, b, N * HEADS * HD, BACKEND_F32, "a32"), 0);
    ck_assert_int_eq(backend_buf_new(&a16, b, N * HEADS * HD, BACKEND_F32, "a16"), 0);
    ck_assert_int_eq(backend_buf_new(&eh, b, N * K * ROWS, BACKEND_F32, "eh"), 0);
    ck_assert_int_eq(backend_buf_new(&ids, b, N * K, BACKEND_I32, "ids"), 0);
    ck_assert_int_eq(backend_buf_new(&g, b, N * 16, BACKEND_F32, "g"), 0);
    ck_assert_int_eq(backend_buf_new(&u, b, N * 16, BACKEND_F32, "u"), 0);
    memcpy(q->host, hq, sizeof hq);
    memcpy(k32->host, hk, sizeof hk);
    memcpy(v32->host, hv, sizeof hv);
    for (int i = 0; i < RING * KVH * HD; i++) {
        ((uint16_t *)k16->host)[i] = cpu_f32_to_f16(hk[i]);
        ((uint16_t *)v16->host)[i] = cpu_f32_to_f16(hv[i]);
    }
    memcpy(eh->host, heh, sizeof heh);
    memcpy(ids->host, hid, sizeof hid);
    memcpy(g->host, hg, sizeof hg);
    memcpy(u->host, hu, sizeof hu);

    backend_seq_attention_sinks(&s, backend_at(a32, 0), backend_at(q, 0), backend_at(k32, 0), backend_at(v32, 0), N,
                                POS0, HEADS, KVH, HD, WIN, 0.0f, RING, ws);
    backend_seq_attention_sinks(&s, backend_at(a16, 0), backend_at(q, 0), backend_at(k16, 0), backend_at(v16, 0), N,
                                POS0, HEADS, KVH, HD, WIN, 0.3f, RING, ws);
    backend_seq_add_row_id(&s, backend_at(eh, 0), wb, backend_at(ids, 0), N, K);
    backend_seq_swiglu_oai(&s, backend_at(g, 0), backend_at(u, 0), N * 16, 1.702f, 7.0f);
    ck_assert_int_eq(backend_run(b, &s), 0);

    for (int f16 = 0; f16 < 2; f16++) {
        const float *out = (float *)(f16 ? a16 : a32)->host;
        double scale = f16 ? 0.3 : 1.0 / sqrt(HD);
        for (int t = 0; t < N; t++)
            for (int h = 0; h < HEADS; h++) {
                int pos = POS0 + t, p0 = pos - WIN + 1, kvo = (h / (HEADS / KVH)) * HD;
                double sc[WIN], mx = sink[h], sum = 0;
                for (int p = p0; p <= pos; p++) {
                    double d = 0;
                    for (int i = 0; i < HD; i++)
                        d += hq[(t * HEADS + h) * HD + i] * hk[(p % RING) * KVH * HD + kvo + i];
                    sc[p - p0] = d * scale;
                    mx = fmax(mx, sc[p - p0]);
                }
                for (int p = 0; p < WIN; p++)
                    sum += sc[p] = exp(sc[p] - mx);
                sum += exp(sink[h] - mx);   /* the sink takes its share and gives no value */
                for (int i = 0; i < HD; i++) {
                    double acc = 0;
                    for (int p = p0; p <= pos; p++)
                        acc += sc[p - p0] / sum * hv[(p % RING) * KVH * HD + kvo + i];
                    ck_assert_double_eq_tol(out[(t * HEADS + h) * HD + i], acc, 1e-5);
                }
            }
    }
    for (int r = 0; r < N * K; r++)
        for (int i = 0; i < ROWS; i++)
            ck_assert_float_eq(((float *)eh->host)[r * ROWS + i], heh[r * ROWS + i] + bias[hid[r] * ROWS + i]);
    for (int i = 0; i < N * 16; i++) {
        double x = fmin(hg[i], 7.0), y = fmin(fmax(hu[i], -7.0), 7.0);
        ck_assert_double_eq_tol(((float *)g->host)[i], x / (1.0 + exp(-1.702 * x)) * (y + 1.0), 1e-5 * (1 + fabs(x * y)));
    }
    backend_close(b);
    free(odd);
}
END_TEST

/* DeepSeek's ops: MATMUL_HEADS is one MATMUL per head on that head's rows; STORE_ROWS writes only
 * its columns of each wider row (f32, and f16 rounded as STORE rounds); the grouped routes pick
 * within the best groups, which here exclude the experts an ungrouped top-k would take. */
START_TEST(deepseek_ops_match_their_definition)
{
    enum { N = 3, H = 3, R = 5, C = 8, E = 8, STRIDE = 11 };
    backend_opts o = { .n_threads = 2 };
    backend_limits lim = { .max_rows = N, .max_cols = 64, .n_ctx = 16, .heads = H, .head_cols = C };
    static const float logits[E] = { 3.0f, -3.0f, 2.0f, 2.0f, 2.5f, -5.0f, 1.0f, 1.0f };
    static float pack[H * R * C], hsrc[N * H * C], bias[E];
    backend_buf *src, *dst, *one, *rows32, *rows16, *lg, *w[3], *id[3];
    backend_op ops[8];
    backend_seq s = { ops, 0, 8, 0 };
    backend_tensor tp = f32_tensor("pack", pack, 2, R, C), tb = f32_tensor("bias", bias, 1, 1, E);
    const backend_weight *wp, *wb;
    backend *b;

    tp.n_dims = 3;
    tp.shape[0] = H;
    tp.shape[1] = R;
    tp.shape[2] = C;
    tp.nbytes = sizeof pack;
    for (int i = 0; i < H * R * C; i++)
        pack[i] = unif();
    for (int i = 0; i < N * H * C; i++)
        hsrc[i] = unif();
    bias[6] = 0.5f;
    ck_assert_int_eq(backend_open(&b, "cpu", &o), 0);
    ck_assert(backend_supports(b, BACKEND_OP_MATMUL_HEADS) && backend_supports(b, BACKEND_OP_STORE_ROWS) &&
              backend_supports(b, BACKEND_OP_MOE_ROUTE_GROUPED));
    ck_assert_int_eq(backend_reserve(b, &lim), 0);
    ck_assert_int_eq(backend_weight_import(&wp, b, &tp), 0);
    ck_assert_int_eq(backend_weight_import(&wb, b, &tb), 0);
    ck_assert_int_eq(backend_buf_new(&src, b, N * H * C, BACKEND_F32, "src"), 0);
    ck_assert_int_eq(backend_buf_new(&dst, b, N * H * R, BACKEND_F32, "dst"), 0);
    ck_assert_int_eq(backend_buf_new(&one, b, N * R, BACKEND_F32, "one head"), 0);
    ck_assert_int_eq(backend_buf_new(&rows32, b, N * STRIDE, BACKEND_F32, "rows32"), 0);
    ck_assert_int_eq(backend_buf_new(&rows16, b, N * STRIDE, BACKEND_F16, "rows16"), 0);
    ck_assert_int_eq(backend_buf_new(&lg, b, E, BACKEND_F32, "logits"), 0);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(backend_buf_new(&w[i], b, 2, BACKEND_F32, "wts"), 0);
        ck_assert_int_eq(backend_buf_new(&id[i], b, 2, BACKEND_I32, "ids"), 0);
    }
    memcpy(src->host, hsrc, sizeof hsrc);
    memcpy(lg->host, logits, sizeof logits);
    for (int i = 0; i < N * STRIDE; i++) {
        ((float *)rows32->host)[i] = -7.0f;
        ((uint16_t *)rows16->host)[i] = cpu_f32_to_f16(-7.0f);
    }

    backend_seq_matmul_heads(&s, backend_at(dst, 0), backend_at(src, 0), wp, N);
    backend_seq_store_rows(&s, backend_at(rows32, 2), backend_at(src, 0), N, 4, STRIDE);
    backend_seq_store_rows(&s, backend_at(rows16, 2), backend_at(src, 0), N, 4, STRIDE);
    backend_seq_moe_route_grouped(&s, backend_at(w[0], 0), backend_at(id[0], 0), backend_at(lg, 0), 1, E, 2,
                                  BACKEND_ROUTE_SIGMOID_GROUPED, NULL, 4, 2, 1, 2.5f);
    backend_seq_moe_route_grouped(&s, backend_at(w[1], 0), backend_at(id[1], 0), backend_at(lg, 0), 1, E, 2,
                                  BACKEND_ROUTE_SIGMOID_GROUPED, wb, 4, 2, 1, 2.5f);
    backend_seq_moe_route_grouped(&s, backend_at(w[2], 0), backend_at(id[2], 0), backend_at(lg, 0), 1, E, 2,
                                  BACKEND_ROUTE_SOFTMAX_GROUPED, NULL, 4, 2, 0, 1.0f);
    ck_assert_int_eq(backend_run(b, &s), 0);

    for (int h = 0; h < H; h++) {   /* head h: its rows of src through its matrix, as one MATMUL gives */
        static float gathered[N * C];
        backend_tensor v = f32_tensor("head", pack + h * R * C, 2, R, C);
        const backend_weight *wv;
        backend_buf *g;
        backend_op op1[1];
        backend_seq s1 = { op1, 0, 1, 0 };
        for (int t = 0; t < N; t++)
            memcpy(gathered + t * C, hsrc + (t * H + h) * C, C * sizeof(float));
        ck_assert_int_eq(backend_weight_import(&wv, b, &v), 0);
        ck_assert_int_eq(backend_buf_new(&g, b, N * C, BACKEND_F32, "gathered"), 0);
        memcpy(g->host, gathered, sizeof gathered);
        backend_seq_matmul(&s1, backend_at(one, 0), backend_at(g, 0), wv, N);
        ck_assert_int_eq(backend_run(b, &s1), 0);
        for (int t = 0; t < N; t++)
            for (int r = 0; r < R; r++)
                ck_assert_float_eq(((float *)dst->host)[(t * H + h) * R + r], ((float *)one->host)[t * R + r]);
    }
    for (int t = 0; t < N; t++)
        for (int i = 0; i < STRIDE; i++) {
            int in = i >= 2 && i < 6;
            float want = in ? hsrc[t * 4 + i - 2] : -7.0f;
            ck_assert_float_eq(((float *)rows32->host)[t * STRIDE + i], want);
            ck_assert_float_eq(cpu_f16_to_f32(((uint16_t *)rows16->host)[t * STRIDE + i]),
                               cpu_f16_to_f32(cpu_f32_to_f16(want)));
        }
    {   /* sigmoid: groups {2,3} (top-two sums 1.76) and {6,7} (1.46) beat {0,1} (1.0) and {4,5} (0.93),
         * so 0 and 4, the two largest alone, are out; with bias[6] = 0.5, 6 leads */
        double p2 = 1 / (1 + exp(-2.0)), p6 = 1 / (1 + exp(-1.0)), sm = 0;
        const int32_t *i0 = id[0]->host, *i1 = id[1]->host, *i2 = id[2]->host;
        const float *w0 = w[0]->host, *w1 = w[1]->host, *w2 = w[2]->host;
        ck_assert(i0[0] == 2 && i0[1] == 3);
        ck_assert_double_eq_tol(w0[0], 1.25, 1e-6);
        ck_assert_double_eq_tol(w0[1], 1.25, 1e-6);
        ck_assert(i1[0] == 6 && i1[1] == 2);
        ck_assert_double_eq_tol(w1[0], 2.5 * p6 / (p6 + p2), 1e-6);
        ck_assert_double_eq_tol(w1[1], 2.5 * p2 / (p6 + p2), 1e-6);
        /* softmax: a group's score is its max: {0,1} (3.0) and {4,5} (2.5); weights unnormalized */
        for (int e = 0; e < E; e++)
            sm += exp(logits[e]);
        ck_assert(i2[0] == 0 && i2[1] == 4);
        ck_assert_double_eq_tol(w2[0], exp(3.0) / sm, 1e-6);
        ck_assert_double_eq_tol(w2[1], exp(2.5) / sm, 1e-6);
    }
    backend_close(b);
}
END_TEST

/* A sequence that outgrew its capacity, a read past a buffer and a matmul past the reserved sizes
 * are refused before anything runs. */
START_TEST(out_of_bounds_sequences_and_reads_are_refused)
{
    backend *b;
    backend_buf *x, *y;
    backend_op ops[1];
    backend_seq s = { ops, 0, 1, 0 };
    backend_limits lim = { .max_rows = 1, .max_cols = 32, .n_ctx = 4, .heads = 1 };
    static float mat[2 * 64];
    backend_tensor tm = f32_tensor("wide", mat, 2, 2, 64);
    const backend_weight *wm;
    float out[4];

    ck_assert_int_eq(backend_open(&b, "cpu", NULL), 0);
    ck_assert_int_eq(backend_reserve(b, &lim), 0);
    ck_assert_int_eq(backend_buf_new(&x, b, 64, BACKEND_F32, "x"), 0);
    ck_assert_int_eq(backend_buf_new(&y, b, 4, BACKEND_F32, "y"), 0);
    ((float *)y->host)[0] = 7.0f;
    backend_seq_add(&s, backend_at(y, 0), backend_at(y, 0), 1);
    backend_seq_add(&s, backend_at(y, 0), backend_at(y, 0), 1);   /* no room: the sequence is refused */
    ck_assert_int_eq(backend_run(b, &s), MS_ERROR);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "capacity of 1"));
    ck_assert_float_eq(((float *)y->host)[0], 7.0f);   /* not even the op that fitted ran */

    ck_assert_int_eq(backend_read(b, out, backend_at(y, 2), 3), MS_EINVALID);
    ck_assert_str_eq(ms_err_msg(), "read of 3 elements at 2: outside the buffer of 4");

    ck_assert_int_eq(backend_weight_import(&wm, b, &tm), 0);
    s = (backend_seq){ ops, 0, 1, 0 };
    backend_seq_matmul(&s, backend_at(y, 0), backend_at(x, 0), wm, 1);   /* 64 columns, 32 reserved */
    ck_assert_int_eq(backend_run(b, &s), MS_ERROR);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "past the reserved 1 x 32"));
    backend_close(b);
}
END_TEST

START_TEST(weight_import_refuses_types_the_cpu_cannot_run)
{
    backend *b;
    static uint8_t bytes[256];
    backend_tensor t = { .name = "blk.0.odd", .type = GGML_TYPE_IQ2_XXS, .n_dims = 2, .data = bytes,
                         .nbytes = sizeof bytes, .shape = { 1, 256 } };
    const backend_weight *w = (const backend_weight *)1;

    ck_assert_int_eq(backend_open(&b, "cpu", NULL), 0);
    ck_assert_int_eq(backend_weight_import(&w, b, &t), MS_EUNSUPPORTED);
    ck_assert_ptr_null(w);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "tensor 'blk.0.odd': type IQ2_XXS is not supported"));
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "IQ4_NL, IQ4_XS, MXFP4, MLX"));   /* the list names what runs */
    backend_close(b);
}
END_TEST

/* MXFP4 (gpt-oss's expert packs) through the CPU backend: a pack [E][ROWS][COLS] imported as
 * it lies, MATMUL_ID with a row per (token, slot) and with one row per token (src_bcast), a 2-D
 * MATMUL and an EMBED lookup, bit for bit what cpu_matmul on the expert's rows and cpu_tensor_row
 * give; experts no token selected hold NaN scales (e = 255), so reading one would show. */
START_TEST(mxfp4_experts_matmul_id_matmul_and_embed)
{
    enum { E = 4, ROWS = 19, COLS = 96, N = 3, K = 2, BB = 17, RB = COLS / 32 * BB };
    static uint8_t pack[E * ROWS * RB];
    static const int32_t ids[N * K] = { 2, 0, 0, 2, 2, 0 };   /* experts 1, 3 never */
    backend_tensor tp = { .name = "blk.0.ffn_up_exps.weight", .type = GGML_TYPE_MXFP4, .n_dims = 3, .data = pack,
                          .nbytes = sizeof pack, .shape = { E, ROWS, COLS } };
    backend_tensor te = tp, t2 = tp;   /* the first expert's rows as a 2-D matrix and as an embedding */
    backend_opts o = { .n_threads = 2 };
    backend_limits lim = { .max_rows = N * K, .max_cols = COLS, .n_ctx = 8, .heads = 1 };
    int32_t tokens[N] = { 7, 0, 18 };
    const backend_weight *wp, *we, *w2;
    backend_buf *bx, *bxs, *bi, *bh, *bhb, *by, *bemb;
    backend_op ops[4];
    backend_seq s = { ops, 0, 4, 0 };
    static float x[N * COLS], xs[N * K * COLS], h[N * K * ROWS], hb[N * K * ROWS], y[N * ROWS], one[N * ROWS];
    static float emb[N * COLS];
    backend *b;
    cpu_pool *pool;
    void *mm = malloc(cpu_matmul_scratch(N, COLS));

    for (size_t i = 0; i < sizeof pack; i++)
        pack[i] = (uint8_t)(unif() * 128 + 128);
    for (int blk = 0; blk < E * ROWS * COLS / 32; blk++)
        pack[blk * BB] = blk / (ROWS * COLS / 32) % 2 ? 255 : (uint8_t)(120 + blk % 5);
    for (int i = 0; i < N * COLS; i++)
        x[i] = unif();
    for (int i = 0; i < N * K * COLS; i++)
        xs[i] = unif();
    te.n_dims = t2.n_dims = 2;
    te.shape[0] = t2.shape[0] = ROWS;
    te.shape[1] = t2.shape[1] = COLS;
    te.shape[2] = t2.shape[2] = 0;
    te.nbytes = t2.nbytes = ROWS * RB;
    ck_assert_int_eq(backend_open(&b, "cpu", &o), 0);
    ck_assert_int_eq(backend_reserve(b, &lim), 0);
    ck_assert_int_eq(backend_weight_import(&wp, b, &tp), 0);
    ck_assert_int_eq(backend_weight_import(&we, b, &te), 0);
    ck_assert_int_eq(backend_weight_import(&w2, b, &t2), 0);
    ck_assert_int_eq(backend_buf_new(&bx, b, N * COLS, BACKEND_F32, "x"), 0);
    ck_assert_int_eq(backend_buf_new(&bxs, b, N * K * COLS, BACKEND_F32, "xs"), 0);
    ck_assert_int_eq(backend_buf_new(&bi, b, N * K, BACKEND_I32, "ids"), 0);
    ck_assert_int_eq(backend_buf_new(&bh, b, N * K * ROWS, BACKEND_F32, "h"), 0);
    ck_assert_int_eq(backend_buf_new(&bhb, b, N * K * ROWS, BACKEND_F32, "hb"), 0);
    ck_assert_int_eq(backend_buf_new(&by, b, N * ROWS, BACKEND_F32, "y"), 0);
    ck_assert_int_eq(backend_buf_new(&bemb, b, N * COLS, BACKEND_F32, "emb"), 0);
    memcpy(bx->host, x, sizeof x);   /* the CPU backend's host memory: tests may fill it */
    memcpy(bxs->host, xs, sizeof xs);
    memcpy(bi->host, ids, sizeof ids);
    backend_seq_matmul_id(&s, backend_at(bh, 0), backend_at(bxs, 0), wp, backend_at(bi, 0), N, K, 0);
    backend_seq_matmul_id(&s, backend_at(bhb, 0), backend_at(bx, 0), wp, backend_at(bi, 0), N, K, 1);
    backend_seq_matmul(&s, backend_at(by, 0), backend_at(bx, 0), w2, N);
    backend_seq_embed(&s, backend_at(bemb, 0), we, tokens, N, COLS);
    ck_assert_int_eq(backend_run(b, &s), 0);
    ck_assert_int_eq(backend_read(b, h, backend_at(bh, 0), N * K * ROWS), 0);
    ck_assert_int_eq(backend_read(b, hb, backend_at(bhb, 0), N * K * ROWS), 0);
    ck_assert_int_eq(backend_read(b, y, backend_at(by, 0), N * ROWS), 0);
    ck_assert_int_eq(backend_read(b, emb, backend_at(bemb, 0), N * COLS), 0);

    ck_assert_int_eq(cpu_pool_new(&pool, 2), 0);
    for (int t = 0; t < N; t++)
        for (int k = 0; k < K; k++) {
            backend_tensor v = te;   /* expert ids[t][k]'s rows */
            float want[ROWS];
            v.data = pack + (size_t)ids[t * K + k] * ROWS * RB;
            cpu_matmul(pool, want, xs + (t * K + k) * COLS, 1, &v, mm);
            ck_assert_mem_eq(h + (t * K + k) * ROWS, want, sizeof want);
            cpu_matmul(pool, want, x + t * COLS, 1, &v, mm);   /* src_bcast: every slot of token t takes x[t] */
            ck_assert_mem_eq(hb + (t * K + k) * ROWS, want, sizeof want);
        }
    for (int r = 0; r < N * K * ROWS; r++)
        ck_assert_msg(isfinite(h[r]) && isfinite(hb[r]), "[%d]: %g, %g: an unselected expert was read", r, h[r],
                      hb[r]);
    cpu_matmul(pool, one, x, N, &te, mm);
    ck_assert_mem_eq(y, one, sizeof one);
    for (int t = 0; t < N; t++) {
        float row[COLS];
        cpu_tensor_row(row, &te, (uint64_t)tokens[t]);
        ck_assert_mem_eq(emb + t * COLS, row, sizeof row);
    }
    cpu_pool_free(pool);
    free(mm);
    backend_close(b);
}
END_TEST

/* F32 weights at an odd address (a GGUF with general.alignment 1): the kernels would load them
 * through misaligned float pointers (UBSan stops this test then); the backend imports an aligned
 * copy and the results equal those of the aligned weights. */
START_TEST(misaligned_float_weights_give_the_aligned_results)
{
    enum { ROWS = 5, COLS = 64 };
    backend *b;
    backend_buf *x, *y;
    backend_op ops[2];
    backend_seq s = { ops, 0, 2, 0 };
    backend_limits lim = { .max_rows = 1, .max_cols = COLS, .n_ctx = 1, .heads = 1 };
    static float mat[ROWS * COLS], xin[COLS];
    uint8_t *odd = malloc(sizeof mat + 1);
    backend_tensor ta = f32_tensor("aligned", mat, 2, ROWS, COLS), tm = ta;
    const backend_weight *wa, *wm;
    float ya[ROWS], ym[ROWS];

    for (int i = 0; i < ROWS * COLS; i++)
        mat[i] = unif();
    for (int i = 0; i < COLS; i++)
        xin[i] = unif();
    memcpy(odd + 1, mat, sizeof mat);
    tm.name = "odd";
    tm.data = odd + 1;
    ck_assert_int_eq(backend_open(&b, "cpu", NULL), 0);
    ck_assert_int_eq(backend_reserve(b, &lim), 0);
    ck_assert_int_eq(backend_weight_import(&wa, b, &ta), 0);
    ck_assert_int_eq(backend_weight_import(&wm, b, &tm), 0);
    ck_assert_int_eq(backend_buf_new(&x, b, COLS, BACKEND_F32, "x"), 0);
    ck_assert_int_eq(backend_buf_new(&y, b, 2 * ROWS, BACKEND_F32, "y"), 0);
    memcpy(x->host, xin, sizeof xin);
    backend_seq_matmul(&s, backend_at(y, 0), backend_at(x, 0), wa, 1);
    backend_seq_matmul(&s, backend_at(y, ROWS), backend_at(x, 0), wm, 1);
    ck_assert_int_eq(backend_run(b, &s), 0);
    ck_assert_int_eq(backend_read(b, ya, backend_at(y, 0), ROWS), 0);
    ck_assert_int_eq(backend_read(b, ym, backend_at(y, ROWS), ROWS), 0);
    ck_assert_mem_eq(ya, ym, sizeof ya);
    ck_assert_float_ne(ya[0], 0.0f);
    backend_close(b);
    free(odd);
}
END_TEST

Suite *backend_suite(void)
{
    Suite *s = suite_create("backend");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, open_refuses_unknown_device_by_name_and_env);
    tcase_add_test(tc, open_cpu_by_name_describes_it);
    tcase_add_test(tc, sequence_equals_kernels_bit_for_bit);
    tcase_add_test(tc, encoder_ops_match_their_definition);
    tcase_add_test(tc, gptoss_ops_match_their_definition);
    tcase_add_test(tc, deepseek_ops_match_their_definition);
    tcase_add_test(tc, out_of_bounds_sequences_and_reads_are_refused);
    tcase_add_test(tc, weight_import_refuses_types_the_cpu_cannot_run);
    tcase_add_test(tc, misaligned_float_weights_give_the_aligned_results);
    tcase_add_test(tc, mxfp4_experts_matmul_id_matmul_and_embed);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(backend_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
