#version 450
/* moe_route.comp: MOE_ROUTE, one invocation per token (a router row is a few hundred logits at
 * most): p = softmax(src[t][0..cols)) with the max subtracted, then the rows (n_used) largest p
 * in descending order, ties to the lower id, into A (ids, u32) and dst (their p), divided by
 * their sum when p.mode is 1 (BACKEND_ROUTE_SOFTMAX_TOPK_NORM). The CPU sums the softmax in
 * double; here in float (within 1e-6 relative for 256 experts). cols <= 256.
 * p.mode 2, 3 (DeepSeek's grouped routes, backend.h's BACKEND_ROUTE_*_GROUPED; cols <= 1024):
 * p[e] = the softmax above (2) or sigmoid(S[e]) (3); sel[e] = p[e] + bias[e] (p.interleaved 1: the
 * bias is a vector at binding 3, read by vec_ld), in float. With p.heads (n_group) > 1 and
 * p.kv_heads (topk_group) < n_group, only the p.kv_heads runs of best score stay candidates (a
 * run's score: its max sel (2), the sum of its two largest (3); ties to the lower run); then the
 * rows candidates of largest sel, ties to the lower id; dst = p of each, divided by their sum
 * (in float; the CPU's in double) when p.n_rot (norm) is 1, times p.scale. p and sel are
 * recomputed from S as needed: nothing per expert is held. */
#extension GL_GOOGLE_include_directive : enable
#define A_WRITTEN 1
#include "common.glsl"

layout(std430, set = 0, binding = 1) buffer Dbuf { float D[]; };
layout(std430, set = 0, binding = 2) readonly buffer Sbuf { float S[]; };
layout(local_size_x = 64) in;

float prob(uint so, uint e, float mx, float sum)
{
    return p.mode == 3u ? 1.0 / (1.0 + exp(-S[so + e])) : exp(S[so + e] - mx) / sum;
}

float selv(uint so, uint e, float mx, float sum)
{
    float pe = prob(so, e, mx, sum);
    return p.interleaved != 0u ? pe + vec_ld(e) : pe;
}

void grouped(uint t, uint so, float mx, float sum)
{
    uint E = p.cols, G = p.heads > 1u ? p.heads : 1u, per = E / G, k = p.rows;
    uint keep[32];
    for (uint i = 0u; i < 32u; i++)
        keep[i] = 0u;
    if (G > 1u && p.kv_heads < G) {
        uint gtaken[32];
        for (uint i = 0u; i < 32u; i++)
            gtaken[i] = 0u;
        for (uint kg = 0u; kg < p.kv_heads; kg++) {
            uint best = 0xffffffffu;
            float bs = 0.0;
            for (uint g = 0u; g < G; g++) {
                if ((gtaken[g >> 5] & (1u << (g & 31u))) != 0u)
                    continue;
                float a = -1.0 / 0.0, b = -1.0 / 0.0;
                for (uint e = g * per; e < (g + 1u) * per; e++) {
                    float v = selv(so, e, mx, sum);
                    if (v > a) {
                        b = a;
                        a = v;
                    } else if (v > b) {
                        b = v;
                    }
                }
                float gs = p.mode == 3u && per > 1u ? a + b : a;
                if (best == 0xffffffffu || gs > bs) {
                    best = g;
                    bs = gs;
                }
            }
            gtaken[best >> 5] |= 1u << (best & 31u);
            for (uint e = best * per; e < (best + 1u) * per; e++)
                keep[e >> 5] |= 1u << (e & 31u);
        }
    } else {
        for (uint e = 0u; e < E; e++)
            keep[e >> 5] |= 1u << (e & 31u);
    }
    float tot = 0.0;
    for (uint s = 0u; s < k; s++) {
        uint best = 0xffffffffu;
        float bs = 0.0;
        for (uint e = 0u; e < E; e++) {
            if ((keep[e >> 5] & (1u << (e & 31u))) == 0u)
                continue;
            float v = selv(so, e, mx, sum);
            if (best == 0xffffffffu || v > bs) {
                best = e;
                bs = v;
            }
        }
        keep[best >> 5] &= ~(1u << (best & 31u));
        float pb = prob(so, best, mx, sum);
        A[p.a_off + t * k + s] = best;
        D[p.dst_off + t * k + s] = pb;
        tot += pb;
    }
    for (uint s = 0u; s < k; s++) {
        float w = D[p.dst_off + t * k + s];
        D[p.dst_off + t * k + s] = (p.n_rot != 0u ? w / tot : w) * p.scale;
    }
}

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
    if (p.mode >= 2u) {
        grouped(t, so, mx, sum);
        return;
    }
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
