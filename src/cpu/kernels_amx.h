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
 * Loops: a panel holds 16 rows x up to AMX_KG groups, filled once per 64 tokens by transposes;
 * then per 16 tokens and per lane i, the lane's 16 accumulators stay in registers while the
 * groups pass, block 16g + i each.
 * Q6_K (two scales per block) keeps the VNNI tiles. Speed: on a Sapphire Rapids-class Xeon the
 * first version (a panel per group filled by scalar stores, each lane's sums through memory per
 * block) was slower than its VNNI path (0.81-0.93x at pp512, BENCHMARKS.md); this one has not
 * met the hardware yet. Both stay by name. */
#if defined(__AMX_TILE__) && defined(__AMX_INT8__)
#define AMX_REAL 1
#else
#define AMX_REAL 0
#endif

#define AMX_TB 64 /* tokens whose lanes are kept across the column chunks */
#define AMX_KG 8 /* groups of 16 blocks in a panel: a chunk of 4096 columns */

typedef struct amx_panel {
    int32_t bw[AMX_KG][16][QK / 4][16]; /* [g][i][k][r]: tile B of block i of group g */
    float a[AMX_KG][16][16], b[AMX_KG][16][16]; /* [g][i][r]: block i's scales */
} amx_panel;

static _Thread_local _Alignas(64) amx_panel apanel;
static _Thread_local _Alignas(64) float afacc[AMX_TB][16][16]; /* [t][i][r]: lane i of (t, r) */
static _Thread_local _Alignas(64) v16s32 acbuf[2][16]; /* [t] lane r: C, then the low bytes' C */
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

/* acbuf[0][t] lane r = sum over k < 32 of x[t][k] * bw[k / 4][r][k % 4], t < amx_rows: tilezero,
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

/* v[j] lane l <-> v[l] lane j: 16 vectors of 16 lanes transposed, each step swapping one bit of the
 * vector index with the same bit of the lane index. */
AI8 void transpose16(v16s32 v[16])
{
    for (int a = 0; a < 16; a += 2) {
        v16s32 x = v[a], y = v[a + 1];
        v[a] = __builtin_shufflevector(x, y, 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30);
        v[a + 1] = __builtin_shufflevector(x, y, 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31);
    }
    for (int a = 0; a < 16; a++) {
        if (a & 2)
            continue;
        v16s32 x = v[a], y = v[a + 2];
        v[a] = __builtin_shufflevector(x, y, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
        v[a + 2] = __builtin_shufflevector(x, y, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
    }
    for (int a = 0; a < 16; a++) {
        if (a & 4)
            continue;
        v16s32 x = v[a], y = v[a + 4];
        v[a] = __builtin_shufflevector(x, y, 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
        v[a + 4] = __builtin_shufflevector(x, y, 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
    }
    for (int a = 0; a < 8; a++) {
        v16s32 x = v[a], y = v[a + 8];
        v[a] = __builtin_shufflevector(x, y, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
        v[a + 8] = __builtin_shufflevector(x, y, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
    }
}

/* Group g0 / 16 of rows w .. w + nr - 1 (nr <= 16) into panel slot gi: per row its codes in the
 * prefill layout of the int8 paths (panel8_row: lane i = block i, 0 past nb) and its scales, then
 * rows and blocks swapped by transposes, so that tile B of block i holds its codes 4k .. 4k + 3 of
 * row r at [k][r]. The int8 paths take the unsigned codes; the 16-bit ones (W16) the signed codes
 * vpdpwssd takes, the offset (128, 8, 16) taken off each byte. Rows past nr stay 0. */
AI8 void amx_panel_fill(const int W16, const int kind, const uint8_t *w, size_t ws, int nr, int g0, int nb, int gi)
{
    const int n = nb - g0 < 16 ? nb - g0 : 16, sh = off_shift(kind);
    v16s32 o[QK / 4][16], a[16], b[16];

    for (int r = 0; r < 16; r++) {
        v16s32 c[QK / 4] = {{0}};
        v16f fa = {0}, fb = {0}, a2;
        if (r < nr) {
            panel8_row(kind, w + (size_t)r * ws, g0, n, c);
            group_scales(kind, w + (size_t)r * ws, g0, n, &fa, &fb, &a2);
            if (W16 && sh >= 0)
                for (int k = 0; k < QK / 4; k++)
                    c[k] = (v16s32)((v64u8)c[k] - (uint8_t)(1u << sh));
        }
        for (int k = 0; k < QK / 4; k++)
            o[k][r] = c[k];
        memcpy(&a[r], &fa, sizeof fa);
        memcpy(&b[r], &fb, sizeof fb);
    }
    for (int k = 0; k < QK / 4; k++) {
        transpose16(o[k]);
        for (int i = 0; i < 16; i++)
            memcpy(apanel.bw[gi][i][k], &o[k][i], sizeof o[k][i]);
    }
    transpose16(a);
    transpose16(b);
    memcpy(apanel.a[gi], a, sizeof a);
    memcpy(apanel.b[gi], b, sizeof b);
}

/* v in every lane (a plain copy: 0 + v would turn -0 into +0). */
static inline v16f splat(float v)
{
    v16f r;
    for (int j = 0; j < 16; j++)
        r[j] = v;
    return r;
}

/* Lane i of tokens [t0, t0 + m) (tf: their place in afacc) over groups gc .. gc + ngk - 1 of the
 * panel: per group the block's tile, then each token's float steps, in group order as the lane
 * of the definition takes them. The 16 accumulators stay in registers across the groups (the
 * lane's partial sums went through afacc once per block before); tokens past m compute on
 * whatever the tiles hold and are not stored. */
AI8 void amx_lane(const int W16, const int kind, const cpu_act *act, int t0, int tf, int m, int gc, int ngk, int i)
{
    const int sh = W16 ? -1 : off_shift(kind);
    const size_t gsz = W16 ? sizeof(vnni_group) : sizeof(vnni8_group);
    const v16s32 *ch = acbuf[0], *cl = acbuf[1];
    const uint8_t *xt[16];
    v16f acc[16];

#pragma GCC unroll 16
    for (int t = 0; t < 16; t++) {
        xt[t] = act->x + (size_t)(t0 + (t < m ? t : m - 1)) * act->stride;
        acc[t] = gc == 0 ? (v16f){0} : ld_f(afacc[tf + t][i]);
    }
    for (int gi = 0; gi < ngk; gi++) {
        const int g = gc + gi;
        const uint8_t *xg = xt[0] + (size_t)g * gsz;
        const v16f a = ld_f(apanel.a[gi][i]), b = ld_f(apanel.b[gi][i]);

        if (W16)
            amx_block16((const int8_t *)(const void *)(xg + offsetof(vnni_group, xa.h)) + QK * i,
                        xg + offsetof(vnni_group, xa.l) + QK * i, act->stride, apanel.bw[gi][i]);
        else
            amx_block((const int8_t *)(const void *)(xg + offsetof(vnni8_group, xa)) + QK * i, act->stride,
                      apanel.bw[gi][i]);
#pragma GCC unroll 16
        for (int t = 0; t < 16; t++) {
            const vnni8_group *x8 = (const vnni8_group *)(const void *)xt[t] + g;
            const vnni_group *x16 = (const vnni_group *)(const void *)xt[t] + g;
            float dx = W16 ? x16->dx[i] : x8->dx[i], s = W16 ? x16->s[i] : x8->s[i];
            v16s32 c = ch[t];
            if (W16) /* 256 (h . w) + l . w, modulo 2^32 */
                c = (v16s32)(((v16u32)c << 8) + (v16u32)cl[t]);
            if (sh >= 0)
                c -= (int32_t)((uint32_t)x8->xs[i] << sh);
            acc[t] = fmav(__builtin_convertvector(c, v16f), a * dx, acc[t]);
            if (has_offset(kind))
                acc[t] = fmav(b, splat(s), acc[t]);
        }
    }
    /* every index a constant, so that acc stays in registers */
#pragma GCC unroll 16
    for (int t = 0; t < 16; t++)
        if (t < m)
            memcpy(afacc[tf + t][i], &acc[t], sizeof acc[t]);
}

AI8 void gemm_amx_kind(const int W16, const int kind, float *y, size_t ldy, const cpu_act *act, int n_tok,
                       const uint8_t *w, size_t ws, int n_rows, int cols)
{
    const int nb = cols / QK, ng = (nb + 15) / 16;

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
            for (int gc = 0; gc < ng; gc += AMX_KG) {
                int ngk = ng - gc < AMX_KG ? ng - gc : AMX_KG;
                for (int gi = 0; gi < ngk; gi++)
                    amx_panel_fill(W16, kind, wb, ws, nr, 16 * (gc + gi), nb, gi);
                /* the next chunk's rows (or the next rows' first chunk), a share per token tile */
                const size_t gb = group_bytes(kind);
                for (int ts = 0; ts < nt; ts += 16) {
                    int m = nt - ts < 16 ? nt - ts : 16;
                    cpu_prefetch_panel(w, ws, rb, 16, n_rows, (size_t)(gc + AMX_KG) * gb, AMX_KG * gb,
                                      t0 + AMX_TB < n_tok, ts / 16, (nt + 15) / 16);
                    amx_configure(m);
                    /* blocks past the row's end too: their scales and activation codes are 0,
                     * and the definition's lanes take fma(0, 0, acc) there as the row dot does */
                    for (int i = 0; i < 16; i++)
                        amx_lane(W16, kind, act, t0 + ts, ts, m, gc, ngk, i);
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
    static void gemm_amx_##name(float *y, size_t ldy, const cpu_act *a, int n_tok, const uint8_t *w, size_t ws,   \
                                int n_rows, int cols)                                                            \
    {                                                                                                            \
        gemm_amx_kind(0, kind, y, ldy, a, n_tok, w, ws, n_rows, cols);                                           \
    }                                                                                                            \
    static void gemm_amx16_##name(float *y, size_t ldy, const cpu_act *a, int n_tok, const uint8_t *w, size_t ws, \
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

static cpu_kernels table_amx, table_amx16;
static cpu_fast fast_amx, fast_amx16;
static pthread_once_t table_amx_once = PTHREAD_ONCE_INIT;

static void table_amx_init(void)
{
    static const struct {
        int type;
        cpu_gemm_fn gemm, gemm16;
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

const cpu_kernels *AMX8_GETTER(void)
{
    return amx_tables() ? &table_amx : NULL;
}

const cpu_fast *AMX8_FAST_GETTER(void)
{
    if (!AMX8_GETTER())
        return NULL;
    return &fast_amx;
}

const cpu_kernels *AMX16_GETTER(void)
{
    return amx_tables() ? &table_amx16 : NULL;
}

const cpu_fast *AMX16_FAST_GETTER(void)
{
    if (!AMX16_GETTER())
        return NULL;
    return &fast_amx16;
}
