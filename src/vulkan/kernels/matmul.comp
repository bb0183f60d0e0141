#version 450
/* matmul.comp: dst[t][rows] = src[t][cols] . W[rows][cols]^T for one weight type (TYPE, see
 * dequant.glsl), built twice:
 *   GEMM 0  decode (a few tokens): 32 invocations per weight row, 4 rows per workgroup; each
 *           invocation takes every 32nd 32-weight block, dequantizes it in registers and dots
 *           it with each token; consecutive invocations read consecutive blocks.
 *   GEMM 1  prefill: a 64-row x 32-token output tile per workgroup, stepping along cols one
 *           block at a time through shared memory, so each weight block is dequantized once
 *           per 32 tokens and each activation read once per 64 rows. */
#extension GL_GOOGLE_include_directive : enable
#include "common.glsl"
#include "dequant.glsl"

layout(std430, set = 0, binding = 1) buffer Dbuf { float D[]; };
layout(std430, set = 0, binding = 2) readonly buffer Sbuf { float S[]; };

#if GEMM == 0
/* 4 rows per workgroup of 128: 32 invocations per row, each taking every 32nd block, summed
 * through shared memory (a subgroup may be 8 or 64 wide, so rows cannot map to subgroups). */
layout(local_size_x = 128) in;
shared float red[128];

void main()
{
    uint tid = gl_LocalInvocationID.x, lane = tid & 31u, r = group_index() * 4u + (tid >> 5);
    uint nb = (p.cols + 31u) / 32u;
    for (uint t = 0u; t < p.n; t++) {
        float acc = 0.0;
        for (uint b = lane; r < p.rows && b < nb; b += 32u) {
            float v[32];
            deq32(r, b, v);
            uint xo = p.src_off + t * p.cols + b * 32u;
            if (b * 32u + 32u <= p.cols) {
                [[unroll]] for (uint j = 0u; j < 32u; j++)
                    acc += v[j] * S[xo + j];
            } else {
                for (uint j = 0u; b * 32u + j < p.cols; j++)
                    acc += v[j] * S[xo + j];
            }
        }
        red[tid] = acc;
        barrier();
        for (uint s = 16u; s > 0u; s >>= 1) {
            if (lane < s)
                red[tid] += red[tid + s];
            barrier();
        }
        if (lane == 0u && r < p.rows)
            D[p.dst_off + t * p.rows + r] = red[tid];
        barrier();
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
