#version 450
/* moe_route.comp: MOE_ROUTE, one invocation per token (a router row is a few hundred logits at
 * most): p = softmax(src[t][0..cols)) with the max subtracted, then the rows (n_used) largest p
 * in descending order, ties to the lower id, into A (ids, u32) and dst (their p), divided by
 * their sum when p.mode is 1 (BACKEND_ROUTE_SOFTMAX_TOPK_NORM). The CPU sums the softmax in
 * double; here in float (within 1e-6 relative for 256 experts). cols <= 256. */
#extension GL_GOOGLE_include_directive : enable
#define A_WRITTEN 1
#include "common.glsl"

layout(std430, set = 0, binding = 1) buffer Dbuf { float D[]; };
layout(std430, set = 0, binding = 2) readonly buffer Sbuf { float S[]; };
layout(local_size_x = 64) in;

void main()
{
    uint t = group_index() * 64u + gl_LocalInvocationID.x;
    if (t >= p.n)
        return;
    uint so = p.src_off + t * p.cols, k = p.rows;
    float mx = -1.0 / 0.0, sum = 0.0, sel = 0.0;
    uint taken[8] = uint[8](0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u);
    for (uint e = 0u; e < p.cols; e++)
        mx = max(mx, S[so + e]);
    for (uint e = 0u; e < p.cols; e++)
        sum += exp(S[so + e] - mx);
    for (uint s = 0u; s < k; s++) {
        uint best = 0xffffffffu;
        float bp = -1.0;
        for (uint e = 0u; e < p.cols; e++) {
            if ((taken[e >> 5] & (1u << (e & 31u))) != 0u)
                continue;
            float pe = exp(S[so + e] - mx) / sum;
            if (best == 0xffffffffu || pe > bp) {
                best = e;
                bp = pe;
            }
        }
        taken[best >> 5] |= 1u << (best & 31u);
        A[p.a_off + t * k + s] = best;
        D[p.dst_off + t * k + s] = bp;
        sel += bp;
    }
    if (p.mode == 1u)
        for (uint s = 0u; s < k; s++)
            D[p.dst_off + t * k + s] = D[p.dst_off + t * k + s] / sel;
}
