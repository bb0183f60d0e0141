#version 450
/* matmul.comp: dst[t][rows] = src[t][cols] . W[rows][cols]^T for one weight type (TYPE, see
 * dequant.glsl), built three times. They add every output in one order, whichever of them runs
 * and whatever else shares the pass, so that a token's row is the same bits alone, in a prompt,
 * or beside other sequences' tokens (runtime.h's batching promise; the plan picks GEMM 0 or 1 by
 * the pass's token count). The order, for output (t, r): 32 lanes v = 4 * phase + q; lane v's
 * running sum takes quarter q (dequant.glsl's deq8) of the blocks b = phase, phase + 8, ..., a
 * fused multiply-add a weight, v[e] then v[4 + e] for e = 0..3; the 32 sums then meet in a fixed
 * tree (s[i] += s[i + h] for h = 16, 8, 4, 2, 1). Only which invocation does each step differs
 * between the kernels.
 *   GEMM 0  decode (a few tokens): MV_ROWS rows per workgroup, a row's 32 lanes on 32
 *           consecutive invocations of a subgroup, so that it reads consecutive weight bytes and
 *           activations at once, the tree by subgroup shuffles; on a subgroup narrower than 32,
 *           a row per subgroup, an invocation holding several lanes.
 *   GEMM 1  prefill: a 16-row x 16-token output tile per workgroup of 256: 8 groups of two rows,
 *           lane v of group g on invocation 8 * v + g (eight neighbours read the same
 *           activation); eight blocks of the 16 tokens' activations at a time in shared memory,
 *           so each weight quarter is dequantized once per 16 tokens and each activation read
 *           once for two rows; the trees at the end, in the same shared memory.
 *   GEMM 2  MATMUL_ID: GEMM 0's rows (row_lane, row_dot), for one (token, slot) pair per
 *           workgroup row (gl_WorkGroupID.y = t * n_used + s): the rows of expert A[pos0 + pair]
 *           of the pack (row e * rows + r), so only the selected experts' rows are read. Push
 *           constants past matmul's: pos0 the ids' offset, heads n_used, interleaved src_bcast,
 *           n_rot n_expert; MLX scales and biases at a_off / b_off in W's binding.
 *           mode 1 (MATMUL_HEADS, DeepSeek's MLA): no ids, pair (t, h) = t * heads + h takes
 *           matrix h of the pack [heads][rows][cols], over a flat grid of (pair, row block)
 *           workgroups (group_index), as n * heads can pass 65535. */
#extension GL_GOOGLE_include_directive : enable
#include "common.glsl"
#include "dequant.glsl"

layout(std430, set = 0, binding = 1) buffer Dbuf { float D[]; };
layout(std430, set = 0, binding = 2) readonly buffer Sbuf { float S[]; };

#define MV_ROWS 4u /* gpu.h's GPU_MV_ROWS */

/* Where weight e (0..3) of half h of quarter q of block b meets its activation. */
#define LANE_K(b, q, h, e) ((b) * 32u + DEQ8_POS(q, h) + (e))
/* The order's step for weights e and 4 + e of a quarter WV, against activations X0 and X1. */
#define LANE_FMA(ACC, WV, e, X0, X1)                                                               \
    ACC = fma(WV[e], X0, ACC);                                                                     \
    ACC = fma(WV[4u + (e)], X1, ACC);

/* Block b's step of lane (b % 8, q)'s running sum ACC: quarter q's weights WV (deq8) times the
 * activations X(k). Past cols (a float weight's last block) every kernel adds weight 0 times
 * activation 0. LANE_STEP2 does two rows' sums at once (GEMM 1), each activation read once for
 * both; LANE_FMA and LANE_K make both the same operations in the same order. */
#define LANE_STEP(ACC, WV, b, q, X)                                                                \
    [[unroll]] for (uint e_ = 0u; e_ < 4u; e_++) {                                                 \
        LANE_FMA(ACC, WV, e_, X(LANE_K(b, q, 0u, e_)), X(LANE_K(b, q, 1u, e_)))                    \
    }
#define LANE_STEP2(ACC0, WV0, ACC1, WV1, b, q, X)                                                  \
    [[unroll]] for (uint e_ = 0u; e_ < 4u; e_++) {                                                 \
        float x0_ = X(LANE_K(b, q, 0u, e_)), x1_ = X(LANE_K(b, q, 1u, e_));                        \
        LANE_FMA(ACC0, WV0, e_, x0_, x1_)                                                          \
        LANE_FMA(ACC1, WV1, e_, x0_, x1_)                                                          \
    }

#if GEMM == 0 || GEMM == 2
layout(local_size_x = 128) in;

/* Lane v's running sum over row r and the token whose activations start at S[xo]. */
float lane_sum(uint r, uint v, uint xo)
{
    uint nb = (p.cols + 31u) / 32u, q = v & 3u;
    precise float acc = 0.0;
    for (uint b = v >> 2; b < nb; b += 8u) {
        float w[8];
        deq8(r, b, q, w);
#define XG(k) S[xo + (k)]
#define XG_LAST(k) ((k) < p.cols ? S[xo + (k)] : 0.0)
        if (b * 32u + 32u <= p.cols)
            LANE_STEP(acc, w, b, q, XG)
        else
            LANE_STEP(acc, w, b, q, XG_LAST)
#undef XG
#undef XG_LAST
    }
    return acc;
}

/* MV_ROWS rows per workgroup of 128: which of them this invocation works on (the return), as which
 * lane l of lw lanes an invocation. A subgroup of 32 or more invocations (32 on NVIDIA and Apple,
 * 64 on AMD) takes a row per 32, one lane each (lw = 32). A narrower one (8 on lavapipe) takes a
 * row, each invocation 32 / width lanes (lw = width); its subgroups past MV_ROWS have no row. */
uint row_lane(out uint l, out uint lw)
{
    uint width = gl_SubgroupSize;
    lw = min(width, 32u);
    l = gl_SubgroupInvocationID % lw;
    return gl_SubgroupID * max(width / 32u, 1u) + gl_SubgroupInvocationID / lw;
}

/* Row r of W dotted with S[xo ..] in the header's order, called by all lw invocations of the row
 * (row_lane): each its lanes' sums (0 unless live), the levels of the tree that pair lanes of one
 * invocation, then shuffles (s plus the s of lane l ^ h is the tree's s[i] + s[i + h] on both
 * lanes). Every one of them gets the total. */
float row_dot(bool live, uint r, uint l, uint lw, uint xo)
{
    precise float s[32];
    for (uint j = 0u; j < 32u / lw; j++)
        s[j] = live ? lane_sum(r, l + j * lw, xo) : 0.0;
    for (uint h = 16u; h >= lw; h >>= 1)
        for (uint j = 0u; j < h / lw; j++)
            s[j] = s[j] + s[j + h / lw];
    precise float tot = s[0];
    for (uint h = lw / 2u; h > 0u; h >>= 1)
        tot = tot + subgroupShuffleXor(tot, h);
    return tot;
}
#endif

#if GEMM == 0
void main()
{
    uint l, lw, rr = row_lane(l, lw), r = group_index() * MV_ROWS + rr;
    if (rr >= MV_ROWS) /* uniform in the subgroup */
        return;
    for (uint t = 0u; t < p.n; t++) {
        float tot = row_dot(r < p.rows, r, l, lw, p.src_off + t * p.cols);
        if (l == 0u && r < p.rows)
            D[p.dst_off + t * p.rows + r] = tot;
    }
}
#elif GEMM == 2
void main()
{
    uint pair, rb, e;
    if (p.mode == 1u) { /* MATMUL_HEADS: a flat grid of (pair, row block); pair (t, h) takes head h */
        uint nrb = (p.rows + MV_ROWS - 1u) / MV_ROWS, g = group_index();
        pair = g / nrb;
        rb = g % nrb;
        if (pair >= p.n * p.heads)
            return;
        e = pair % p.heads;
    } else {
        pair = gl_WorkGroupID.y;
        rb = gl_WorkGroupID.x;
        e = A[p.pos0 + pair];
    }
    uint t = pair / p.heads;
    uint xo0 = p.src_off + (p.interleaved != 0u ? t : pair) * p.cols;
    uint l, lw, rr = row_lane(l, lw), r = rb * MV_ROWS + rr;
    if (rr >= MV_ROWS) /* uniform in the subgroup */
        return;
    /* ids come from MOE_ROUTE; one out of range reads nothing (uniform over the workgroup) */
    bool live = e < p.n_rot && r < p.rows;
    float tot = row_dot(live, e * p.rows + r, l, lw, xo0);
    if (l == 0u && r < p.rows)
        D[p.dst_off + pair * p.rows + r] = tot;
}
#else
#define MM_T 16u /* tokens a tile: gpu.h's GPU_MM_TOKENS; rows a tile: 8 groups of 2 (GPU_MM_ROWS) */
layout(local_size_x = 256) in;
/* MM_T tokens x 8 blocks of activations; then the trees. 16 KiB: the least a device has. */
shared float X[MM_T * 256u];

/* The 32 lane sums at SH[o .. o + 32) to their total at SH[o]: the tree of the header. */
#define TREE32(SH, o)                                                                              \
    for (uint h_ = 16u; h_ > 0u; h_ >>= 1)                                                         \
        for (uint i_ = 0u; i_ < h_; i_++)                                                          \
            SH[(o) + i_] = SH[(o) + i_] + SH[(o) + i_ + h_];

void main()
{
    uint tid = gl_LocalInvocationIndex, v = tid >> 3, g = tid & 7u, q = v & 3u, ph = v >> 2;
    uint nb = (p.cols + 31u) / 32u, r0 = gl_WorkGroupID.x * 16u + 2u * g, t0 = gl_WorkGroupID.y * MM_T;
    precise float acc[2][MM_T];
    [[unroll]] for (uint i = 0u; i < 2u; i++)
        [[unroll]] for (uint tt = 0u; tt < MM_T; tt++)
            acc[i][tt] = 0.0;
    for (uint b0 = 0u; b0 < nb; b0 += 8u) {
        for (uint i = tid; i < MM_T * 256u; i += 256u) {
            uint tt = i >> 8, k = b0 * 32u + (i & 255u), t = t0 + tt;
            X[i] = t < p.n && k < p.cols ? S[p.src_off + t * p.cols + k] : 0.0;
        }
        barrier();
        uint b = b0 + ph;
        if (b < nb) {
            float w0[8], w1[8];
            [[unroll]] for (uint e = 0u; e < 8u; e++)
                w0[e] = w1[e] = 0.0;
            if (r0 < p.rows)
                deq8(r0, b, q, w0);
            if (r0 + 1u < p.rows)
                deq8(r0 + 1u, b, q, w1);
#define XS(k) X[tt * 256u + (k) - b0 * 32u]
            [[unroll]] for (uint tt = 0u; tt < MM_T; tt++)
                LANE_STEP2(acc[0][tt], w0, acc[1][tt], w1, b, q, XS)
#undef XS
        }
        barrier();
    }
    /* A row's MM_T sums of each lane at a time, X[tt * 256 + g * 32 + v]; lane tt of a group adds
     * up the group's output (row i, token tt). */
    [[unroll]] for (uint i = 0u; i < 2u; i++) {
        [[unroll]] for (uint tt = 0u; tt < MM_T; tt++)
            X[tt * 256u + g * 32u + v] = acc[i][tt];
        barrier();
        if (v < MM_T) {
            uint base = v * 256u + g * 32u, r = r0 + i, t = t0 + v;
            TREE32(X, base)
            if (r < p.rows && t < p.n)
                D[p.dst_off + t * p.rows + r] = X[base];
        }
        barrier();
    }
}
#endif
