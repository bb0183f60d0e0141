#version 450
/* matmul.comp: dst[t][rows] = src[t][cols] . W[rows][cols]^T for one weight type (TYPE, see
 * dequant.glsl), built twice:
 *   GEMM 0  decode (a few tokens): a subgroup per weight row, MV_ROWS rows per workgroup; four
 *           invocations share each 32-weight block (a quarter each, dequantized in registers)
 *           and dot it with each token, so a subgroup reads consecutive weight bytes and
 *           consecutive activations at once; a subgroupAdd makes the row's sum.
 *   GEMM 1  prefill: a 64-row x 32-token output tile per workgroup, stepping along cols one
 *           block at a time through shared memory, so each weight block is dequantized once
 *           per 32 tokens and each activation read once per 64 rows.
 *   GEMM 2  MATMUL_ID: GEMM 0's row per subgroup, for one (token, slot) pair per workgroup row
 *           (gl_WorkGroupID.y = t * n_used + s): the rows of expert A[pos0 + pair] of the pack
 *           (row e * rows + r), so only the selected experts' rows are read. Push constants past
 *           matmul's: pos0 the ids' offset, heads n_used, interleaved src_bcast, n_rot n_expert;
 *           MLX scales and biases at a_off / b_off in W's binding.
 *           mode 1 (MATMUL_HEADS, DeepSeek's MLA): no ids, pair (t, h) = t * heads + h takes
 *           matrix h of the pack [heads][rows][cols], over a flat grid of (pair, row block)
 *           workgroups (group_index), as n * heads can pass 65535. */
#extension GL_GOOGLE_include_directive : enable
#include "common.glsl"
#include "dequant.glsl"

layout(std430, set = 0, binding = 1) buffer Dbuf { float D[]; };
layout(std430, set = 0, binding = 2) readonly buffer Sbuf { float S[]; };

#if GEMM == 0 || GEMM == 2
#define MV_ROWS 4u /* gpu.h's GPU_MV_ROWS */

/* Row wr of W dotted with S[xo ..]: each invocation takes a quarter of every (width / 4)-th block,
 * four neighbours one block. A block-per-invocation split, the first one here, had neighbours
 * read activations 128 bytes apart: on an H200 that made a 2048 x 2048 Q4_0 matvec take about 37
 * us, most of it waiting on L1 (BENCHMARKS.md). Subgroups narrower than 4 take whole blocks. */
float row_dot(uint wr, uint xo)
{
    uint nb = (p.cols + 31u) / 32u, lane = gl_SubgroupInvocationID, width = gl_SubgroupSize;
    uint qs = min(width, 4u), bstep = width / qs;
    float acc = 0.0;
    for (uint b = lane / qs; b < nb; b += bstep) {
        for (uint q = lane % qs; q < 4u; q += qs) {
            float v[8];
            deq8(wr, b, q, v);
            uint k0 = b * 32u + DEQ8_POS(q, 0u), k1 = b * 32u + DEQ8_POS(q, 1u);
            if (b * 32u + 32u <= p.cols) {
                [[unroll]] for (uint e = 0u; e < 4u; e++)
                    acc += v[e] * S[xo + k0 + e] + v[4u + e] * S[xo + k1 + e];
            } else {
                for (uint e = 0u; e < 4u; e++) {
                    if (k0 + e < p.cols)
                        acc += v[e] * S[xo + k0 + e];
                    if (k1 + e < p.cols)
                        acc += v[4u + e] * S[xo + k1 + e];
                }
            }
        }
    }
    return subgroupAdd(acc);
}
#endif

#if GEMM == 0
/* MV_ROWS rows per workgroup of 128, a row per subgroup at a time (whatever the subgroup width: 8
 * on lavapipe, 32, 64 on AMD): no shared memory and no barrier. */
layout(local_size_x = 128) in;

void main()
{
    for (uint rr = gl_SubgroupID; rr < MV_ROWS; rr += gl_NumSubgroups) {
        uint r = group_index() * MV_ROWS + rr;
        if (r >= p.rows)
            break;
        for (uint t = 0u; t < p.n; t++) {
            float acc = row_dot(r, p.src_off + t * p.cols);
            if (subgroupElect())
                D[p.dst_off + t * p.rows + r] = acc;
        }
    }
}
#elif GEMM == 2
layout(local_size_x = 128) in;

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
    for (uint rr = gl_SubgroupID; rr < MV_ROWS; rr += gl_NumSubgroups) {
        uint r = rb * MV_ROWS + rr;
        if (r >= p.rows)
            break;
        /* ids come from MOE_ROUTE; one out of range reads nothing (uniform over the workgroup) */
        float acc = e < p.n_rot ? row_dot(e * p.rows + r, xo0) : 0.0;
        if (subgroupElect())
            D[p.dst_off + pair * p.rows + r] = acc;
    }
}
#else
layout(local_size_x = 256) in;
shared float Ws[64][33];
shared float Xs[32][33];

void main()
{
    uint tid = gl_LocalInvocationID.x, nb = (p.cols + 31u) / 32u;
    uint r0 = gl_WorkGroupID.x * 64u, t0 = gl_WorkGroupID.y * 32u;
    uint rg = tid & 15u, tg = tid >> 4;
    float acc[4][2];
    for (uint a = 0u; a < 4u; a++)
        acc[a][0] = acc[a][1] = 0.0;
    for (uint b = 0u; b < nb; b++) {
        if (tid < 64u) {
            float v[32];
            if (r0 + tid < p.rows)
                deq32(r0 + tid, b, v);
            else
                for (uint j = 0u; j < 32u; j++)
                    v[j] = 0.0;
            [[unroll]] for (uint j = 0u; j < 32u; j++)
                Ws[tid][j] = v[j];
        }
        for (uint i = tid; i < 1024u; i += 256u) {
            uint tt = i >> 5, j = i & 31u, t = t0 + tt, k = b * 32u + j;
            Xs[tt][j] = t < p.n && k < p.cols ? S[p.src_off + t * p.cols + k] : 0.0;
        }
        barrier();
        for (uint j = 0u; j < 32u; j++) {
            float x0 = Xs[tg][j], x1 = Xs[tg + 16u][j];
            for (uint a = 0u; a < 4u; a++) {
                float w = Ws[rg + 16u * a][j];
                acc[a][0] += w * x0;
                acc[a][1] += w * x1;
            }
        }
        barrier();
    }
    for (uint a = 0u; a < 4u; a++) {
        for (uint c = 0u; c < 2u; c++) {
            uint r = r0 + rg + 16u * a, t = t0 + tg + 16u * c;
            if (r < p.rows && t < p.n)
                D[p.dst_off + t * p.rows + r] = acc[a][c];
        }
    }
}
#endif
