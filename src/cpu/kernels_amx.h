/* kernels_amx.h: the AMX paths, included at the end of kernels_vnni8.h (whose activations, panels
 * and row dots they share, and kernels_vnni.h's) when the includer defines AMX8_NAME,
 * AMX8_GETTER, AMX8_FAST_GETTER and the same three AMX16_ ones:
 *   amx-int8, amx  prefill on AMX tiles (16 tokens x 16 rows x one block of 32 codes per
 *                  instruction), built with -mamx-tile -mamx-int8; cpu.c uses them only where
 *                  cpuid has AMX-TILE and AMX-INT8 and Linux grants the process the tile state;
 *   amx-int8-emul, amx-emul  the same source with the tile instructions emulated in C, as the
 *                  SDM defines them: any CPU, the same bits, so the logic is tested where AMX
 *                  is missing.
 *
 * Each keeps a VNNI path's arithmetic, so decode and the row dot are that path's, and a prefill
 * on tiles gives its bits:
 *   amx-int8  avx512vnni-int8's (kernels_vnni8.h): per (token, row) and block the exact integer
 *             sum of the 8-bit activation codes with the weights' unsigned codes, less the
 *             offset times the activations' sum (the same integer modulo 2^32); one tdpbsud
 *             (signed activation bytes by unsigned weight bytes) a block;
 *   amx       avx512vnni's (kernels_vnni.h; 16-bit activations, the project's default accuracy):
 *             the exact sum of the 16-bit activation codes x with the signed weight codes w. AMX
 *             has no 16-bit products, so x = 256 h + l (h its signed high byte, l its unsigned
 *             low one): tdpbssd takes h . w, tdpbusd l . w, and 256 (h . w) + l . w is the
 *             integer vpdpwssd sums (modulo 2^32, as both).
 * Then, in the block's lane, acc = fma((float)isum, a * dx, acc) and, for the offset types,
 * acc = fma(b, s, acc); the 16 lanes summed by hsum's tree. Only the direction of the vectors
 * changes: a tile's sums come out as [token][row], so here a vector holds 16 rows of one (token,
 * block), and the lanes of the definition become 16 vectors added by the same tree.
 *
 * Tiles (one configuration, rows m = the tokens of the last tile, at most 16):
 *   tmm0  A: m tokens x 32 bytes, block i's codes (int8: the codes; 16-bit: their high bytes) in
 *         order, straight from the activations (the xa layouts, act->stride bytes a token);
 *   tmm3  A for the low bytes (16-bit only);
 *   tmm1  B: 8 rows of 16 x 4 bytes: row k holds codes 4k .. 4k + 3 of block i of each weight row,
 *         from a panel of 16 rows (amx_panel);
 *   tmm2  C: m x 16 sums (tmm4 those of the low bytes), stored for the float steps.
 * Q6_K (two scales per block) keeps the VNNI tiles. Speed: on a Sapphire Rapids-class Xeon both
 * were slower than their VNNI paths (0.81-0.93x at pp512, BENCHMARKS.md), so they stay by name. */
#if defined(__AMX_TILE__) && defined(__AMX_INT8__)
#define AMX_REAL 1
#else
#define AMX_REAL 0
#endif

#define AMX_TB 32 /* tokens whose accumulators stay live across the groups */

typedef struct amx_panel {
    int32_t bw[16][QK / 4][16]; /* [i][k][r]: tile B of block i */
    float a[16][16], b[16][16]; /* [i][r]: block i's scales */
} amx_panel;

static _Thread_local _Alignas(64) amx_panel apanel;
static _Thread_local _Alignas(64) float afacc[AMX_TB][16][16]; /* [t][i][r] */
static _Thread_local _Alignas(64) int32_t acbuf[2][16][16]; /* [t][r]: C, then the low bytes' C */
static _Thread_local int amx_rows; /* the configured m; 0: none */

#if !AMX_REAL
/* the tiles of the emulation */
static _Thread_local struct {
    uint8_t a[2][16][QK];
    uint8_t b[QK / 4][64];
    int32_t c[2][16][16];
} amx_emu;

/* The SDM's TDPB[SU][SU]D on the emulated tiles: per row t and dword k of A, per dword n of C,
 * the four products of A and B bytes (each sign- or zero-extended as its tile's letter says),
 * added modulo 2^32. */
static void amx_emu_dp(int ci, int ai, int a_signed, int b_signed)
{
    for (int t = 0; t < amx_rows; t++)
        for (int k = 0; k < QK / 4; k++)
            for (int n = 0; n < 16; n++) {
                uint32_t s = (uint32_t)amx_emu.c[ci][t][n];
                for (int j = 0; j < 4; j++) {
                    uint8_t ab = amx_emu.a[ai][t][4 * k + j], bb = amx_emu.b[k][4 * n + j];
                    int32_t av = a_signed ? (int8_t)ab : ab, bv = b_signed ? (int8_t)bb : bb;
                    s += (uint32_t)(av * bv);
                }
                amx_emu.c[ci][t][n] = (int32_t)s;
            }
}

/* tileloadd of m rows of QK bytes, `stride` apart, into emulated A tile ai. */
static void amx_emu_load_a(int ai, const void *x, size_t stride)
{
    for (int t = 0; t < amx_rows; t++)
        memcpy(amx_emu.a[ai][t], (const uint8_t *)x + (size_t)t * stride, QK);
}
#endif

/* The tile configuration for m tokens (ldtilecfg's 64 bytes: palette 1, then per tile its bytes
 * per row and its rows). */
static void amx_configure(int m)
{
    if (m == amx_rows)
        return;
#if AMX_REAL
    _Alignas(64) struct {
        uint8_t palette, start_row, reserved[14];
        uint16_t colsb[16];
        uint8_t rows[16];
    } cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    cfg.colsb[0] = QK, cfg.rows[0] = (uint8_t)m;
    cfg.colsb[1] = 64, cfg.rows[1] = QK / 4;
    cfg.colsb[2] = 64, cfg.rows[2] = (uint8_t)m;
    cfg.colsb[3] = QK, cfg.rows[3] = (uint8_t)m;
    cfg.colsb[4] = 64, cfg.rows[4] = (uint8_t)m;
    /* gcc's tile intrinsics are asm statements that declare no memory operands (ldtilecfg one of
     * 8 bytes): each barrier says the memory they touch is read or written there */
    __asm__ volatile("" ::: "memory");
    _tile_loadconfig(&cfg);
#endif
    amx_rows = m;
}

static void amx_release(void)
{
#if AMX_REAL
    if (amx_rows)
        _tile_release();
#endif
    amx_rows = 0;
}

/* acbuf[0][t][r] = sum over k < 32 of x[t][k] * bw[k / 4][r][k % 4], t < amx_rows: tilezero,
 * tileloadd A (x, stride) and B, tdpbsud (signed A bytes by unsigned B bytes), tilestored. */
static inline void amx_block(const int8_t *x, size_t stride, const int32_t (*bw)[16])
{
#if AMX_REAL
    __asm__ volatile("" ::: "memory");
    _tile_zero(2);
    _tile_loadd(0, x, (long)stride);
    _tile_loadd(1, bw, 64);
    _tile_dpbsud(2, 0, 1);
    _tile_stored(2, acbuf[0], 64);
    __asm__ volatile("" ::: "memory");
#else
    memset(amx_emu.c[0], 0, sizeof amx_emu.c[0]);
    amx_emu_load_a(0, x, stride);
    memcpy(amx_emu.b, bw, sizeof amx_emu.b);
    amx_emu_dp(0, 0, 1, 0);
    memcpy(acbuf[0], amx_emu.c[0], sizeof acbuf[0]);
#endif
}

/* The same for the 16-bit codes' high bytes xh (signed) and low bytes xl (unsigned) against
 * signed weight codes: tdpbssd into acbuf[0], tdpbusd into acbuf[1]. */
static inline void amx_block16(const int8_t *xh, const uint8_t *xl, size_t stride, const int32_t (*bw)[16])
{
#if AMX_REAL
    __asm__ volatile("" ::: "memory");
    _tile_zero(2);
    _tile_zero(4);
    _tile_loadd(0, xh, (long)stride);
    _tile_loadd(3, xl, (long)stride);
    _tile_loadd(1, bw, 64);
    _tile_dpbssd(2, 0, 1);
    _tile_dpbusd(4, 3, 1);
    _tile_stored(2, acbuf[0], 64);
    _tile_stored(4, acbuf[1], 64);
    __asm__ volatile("" ::: "memory");
#else
    memset(amx_emu.c, 0, sizeof amx_emu.c);
    amx_emu_load_a(0, xh, stride);
    amx_emu_load_a(1, xl, stride);
    memcpy(amx_emu.b, bw, sizeof amx_emu.b);
    amx_emu_dp(0, 0, 1, 1);
    amx_emu_dp(1, 1, 0, 1);
    memcpy(acbuf, amx_emu.c, sizeof acbuf);
#endif
}

/* Rows w .. w + nr - 1 (nr <= 16), blocks g0 .. g0 + 15 (0 past nb or nr) into apanel. */
AI8 void amx_panel_fill(const int kind, const uint8_t *w, size_t ws, int nr, int g0, int nb)
{
    int n = nb - g0 < 16 ? nb - g0 : 16;

    for (int r = 0; r < 16; r++) {
        v16s32 o[8] = {{0}};
        v16f a = {0}, b = {0}, a2;
        if (r < nr) {
            panel8_row(kind, w + (size_t)r * ws, g0, n, o);
            group_scales(kind, w + (size_t)r * ws, g0, n, &a, &b, &a2);
        }
        for (int i = 0; i < 16; i++) {
            for (int k = 0; k < QK / 4; k++)
                apanel.bw[i][k][r] = o[k][i];
            apanel.a[i][r] = a[i];
            apanel.b[i][r] = b[i];
        }
    }
}

/* The 16-bit paths' panel: the signed codes of unpack() (offsets taken off; all fit a byte) and
 * its scales. */
AI8 void amx_panel16_fill(const int kind, const uint8_t *w, size_t ws, int nr, int g0, int nb)
{
    int n = nb - g0 < 16 ? nb - g0 : 16;

    for (int r = 0; r < 16; r++)
        for (int i = 0; i < 16; i++) {
            float a = 0, b = 0, a2;
            v32s16 c = {0};
            if (r < nr && i < n)
                c = unpack(kind, w + (size_t)r * ws, g0 + i, &a, &b, &a2);
            v32s8 c8 = __builtin_convertvector(c, v32s8);
            for (int k = 0; k < QK / 4; k++)
                memcpy(&apanel.bw[i][k][r], (const int8_t *)&c8 + 4 * k, 4);
            apanel.a[i][r] = a;
            apanel.b[i][r] = b;
        }
}

/* v in every lane (a plain copy: 0 + v would turn -0 into +0). */
static inline v16f splat(float v)
{
    v16f r;
    for (int j = 0; j < 16; j++)
        r[j] = v;
    return r;
}

/* Tokens [t0, t0 + m) of the block tile just computed (block i of group g) into their lanes. */
AI8 void amx_fold(const int W16, const int kind, const rt_act *act, int t0, int tf, int m, int g, int i)
{
    const int sh = W16 ? -1 : off_shift(kind);
    const v16f a = ld_f(apanel.a[i]), b = ld_f(apanel.b[i]);

    for (int t = 0; t < m; t++) {
        const uint8_t *xt = act->x + (size_t)(t0 + t) * act->stride;
        const vnni8_group *x8 = (const vnni8_group *)(const void *)xt + g;
        const vnni_group *x16 = (const vnni_group *)(const void *)xt + g;
        float dx = W16 ? x16->dx[i] : x8->dx[i], s = W16 ? x16->s[i] : x8->s[i];
        v16s32 c = ld_s32(acbuf[0][t]);
        float *f = afacc[tf + t][i];
        if (W16) /* 256 (h . w) + l . w, modulo 2^32 */
            c = (v16s32)(((v16u32)c << 8) + (v16u32)ld_s32(acbuf[1][t]));
        if (sh >= 0)
            c -= (int32_t)((uint32_t)x8->xs[i] << sh);
        v16f acc = fmav(__builtin_convertvector(c, v16f), a * dx, ld_f(f));
        if (has_offset(kind))
            acc = fmav(b, splat(s), acc);
        memcpy(f, &acc, sizeof acc);
    }
}

AI8 void gemm_amx_kind(const int W16, const int kind, float *y, size_t ldy, const rt_act *act, int n_tok,
                       const uint8_t *w, size_t ws, int n_rows, int cols)
{
    int nb = cols / QK, ng = (nb + 15) / 16;
    size_t gsz = W16 ? sizeof(vnni_group) : sizeof(vnni8_group);

    if (n_tok == 1) { /* decode: the row dot (the activations are in its layout) */
        if (W16)
            gemm_kind(kind, y, ldy, act, n_tok, w, ws, n_rows, cols);
        else
            gemm8_kind(kind, y, ldy, act, n_tok, w, ws, n_rows, cols);
        return;
    }
    for (int rb = 0; rb < n_rows; rb += 16) {
        int nr = n_rows - rb < 16 ? n_rows - rb : 16;
        const uint8_t *wb = w + (size_t)rb * ws;
        for (int t0 = 0; t0 < n_tok; t0 += AMX_TB) {
            int nt = n_tok - t0 < AMX_TB ? n_tok - t0 : AMX_TB;
            memset(afacc, 0, (size_t)nt * sizeof afacc[0]);
            for (int g = 0; g < ng; g++) {
                if (W16)
                    amx_panel16_fill(kind, wb, ws, nr, 16 * g, nb);
                else
                    amx_panel_fill(kind, wb, ws, nr, 16 * g, nb);
                for (int ts = 0; ts < nt; ts += 16) {
                    int m = nt - ts < 16 ? nt - ts : 16;
                    const uint8_t *xg = act->x + (size_t)(t0 + ts) * act->stride + (size_t)g * gsz;
                    prefetch_panel(kind, w, ws, rb, 16, n_rows, g, t0 + AMX_TB < n_tok, ts / 16, (nt + 15) / 16);
                    amx_configure(m);
                    /* blocks past the row's end too: their codes and scales are 0, and the
                     * definition's lanes take fma(0, 0, acc) there as the row dot does */
                    for (int i = 0; i < 16; i++) {
                        if (W16)
                            amx_block16((const int8_t *)(const void *)(xg + offsetof(vnni_group, xa.h)) + QK * i,
                                        xg + offsetof(vnni_group, xa.l) + QK * i, act->stride, apanel.bw[i]);
                        else
                            amx_block((const int8_t *)(const void *)(xg + offsetof(vnni8_group, xa)) + QK * i,
                                      act->stride, apanel.bw[i]);
                        amx_fold(W16, kind, act, t0 + ts, ts, m, g, i);
                    }
                }
            }
            for (int t = 0; t < nt; t++) { /* hsum's tree: 8 + 8, 4 + 4, 2 + 2, 1 + 1 */
                const float(*f)[16] = afacc[t];
                v16f l1[8], l2[4];
                for (int j = 0; j < 8; j++)
                    l1[j] = ld_f(f[j]) + ld_f(f[j + 8]);
                for (int j = 0; j < 4; j++)
                    l2[j] = l1[j] + l1[j + 4];
                v16f s = (l2[0] + l2[2]) + (l2[1] + l2[3]);
                for (int r = 0; r < nr; r++)
                    y[(size_t)(t0 + t) * ldy + rb + r] = s[r];
            }
        }
    }
    amx_release();
}

/* The types on tiles; the activations of their prefill in the xa layout. */
static int amx_takes(int type)
{
    return type == GGML_TYPE_Q8_0 || type == GGML_TYPE_Q4_0 || type == GGML_TYPE_Q4_1 || type == GGML_TYPE_Q5_0 ||
           type == GGML_TYPE_Q5_1 || type == GGML_TYPE_Q4_K;
}

static void amx_act_quantize(uint8_t *dst, const float *x, int type, int n_tok, int cols)
{
    act8_layout(dst, x, type, n_tok, cols, n_tok > 1 && amx_takes(type));
}

static void amx16_act_quantize(uint8_t *dst, const float *x, int type, int n_tok, int cols)
{
    act_layout(dst, x, type, n_tok, cols, n_tok > 1 && amx_takes(type));
}

#define AMX_TYPE(name, kind)                                                                                     \
    static void gemm_amx_##name(float *y, size_t ldy, const rt_act *a, int n_tok, const uint8_t *w, size_t ws,   \
                                int n_rows, int cols)                                                            \
    {                                                                                                            \
        gemm_amx_kind(0, kind, y, ldy, a, n_tok, w, ws, n_rows, cols);                                           \
    }                                                                                                            \
    static void gemm_amx16_##name(float *y, size_t ldy, const rt_act *a, int n_tok, const uint8_t *w, size_t ws, \
                                  int n_rows, int cols)                                                          \
    {                                                                                                            \
        gemm_amx_kind(1, kind, y, ldy, a, n_tok, w, ws, n_rows, cols);                                           \
    }
AMX_TYPE(q8_0, V_Q8_0)
AMX_TYPE(q4_0, V_Q4_0)
AMX_TYPE(q4_1, V_Q4_1)
AMX_TYPE(q5_0, V_Q5_0)
AMX_TYPE(q5_1, V_Q5_1)
AMX_TYPE(q4_k, V_Q4_K)
#undef AMX_TYPE

static rt_kernels table_amx, table_amx16;
static rt_fast fast_amx, fast_amx16;
static pthread_once_t table_amx_once = PTHREAD_ONCE_INIT;

static void table_amx_init(void)
{
    static const struct {
        int type;
        rt_gemm_fn gemm, gemm16;
    } mine[] = {
        {GGML_TYPE_Q8_0, gemm_amx_q8_0, gemm_amx16_q8_0}, {GGML_TYPE_Q4_0, gemm_amx_q4_0, gemm_amx16_q4_0},
        {GGML_TYPE_Q4_1, gemm_amx_q4_1, gemm_amx16_q4_1}, {GGML_TYPE_Q5_0, gemm_amx_q5_0, gemm_amx16_q5_0},
        {GGML_TYPE_Q5_1, gemm_amx_q5_1, gemm_amx16_q5_1}, {GGML_TYPE_Q4_K, gemm_amx_q4_k, gemm_amx16_q4_k},
    };

    table_amx = *VNNI8_GETTER();
    table_amx.name = AMX8_NAME;
    fast_amx = *VNNI8_FAST_GETTER();
    fast_amx.act_quantize = amx_act_quantize;
    table_amx16 = *VNNI_GETTER();
    table_amx16.name = AMX16_NAME;
    fast_amx16 = *VNNI_FAST_GETTER();
    fast_amx16.act_quantize = amx16_act_quantize;
    for (size_t i = 0; i < sizeof mine / sizeof mine[0]; i++) {
        fast_amx.gemm[mine[i].type] = mine[i].gemm;
        fast_amx16.gemm[mine[i].type] = mine[i].gemm16;
    }
}

/* 1 once both tables are filled in: they copy the VNNI paths' own (NULL off this CPU's build). */
static int amx_tables(void)
{
    if (!VNNI_GETTER() || !VNNI8_GETTER())
        return 0;
    pthread_once(&table_amx_once, table_amx_init);
    return 1;
}

const rt_kernels *AMX8_GETTER(void)
{
    return amx_tables() ? &table_amx : NULL;
}

const rt_fast *AMX8_FAST_GETTER(void)
{
    if (!AMX8_GETTER())
        return NULL;
    return &fast_amx;
}

const rt_kernels *AMX16_GETTER(void)
{
    return amx_tables() ? &table_amx16 : NULL;
}

const rt_fast *AMX16_FAST_GETTER(void)
{
    if (!AMX16_GETTER())
        return NULL;
    return &fast_amx16;
}
