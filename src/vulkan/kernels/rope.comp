#version 450
/* rope.comp: rotate pairs of dst[t][heads][head_dim] in place. cos and sin of (pos0 + t) *
 * freq[i] come from the host (computed in double, as the CPU does) in binding 4 (A) as
 * [t][n_rot/2][cos, sin] floats. interleaved: pairs (2i, 2i+1); else (i, i + n_rot/2). */
#extension GL_GOOGLE_include_directive : enable
#include "common.glsl"

layout(std430, set = 0, binding = 1) buffer Dbuf { float D[]; };
layout(local_size_x = 64) in;

void main()
{
    uint half_ = p.n_rot / 2u, idx = group_index() * 64u + gl_LocalInvocationID.x;
    if (idx >= p.n * p.heads * half_)
        return;
    uint i = idx % half_, th = idx / half_, t = th / p.heads;
    uint base = p.dst_off + th * p.head_dim;
    uint a = p.interleaved != 0u ? 2u * i : i, b = p.interleaved != 0u ? 2u * i + 1u : i + half_;
    uint co = p.a_off + 2u * (t * half_ + i);
    float cs = uintBitsToFloat(A[co]), sn = uintBitsToFloat(A[co + 1u]);
    float x0 = D[base + a], x1 = D[base + b];
    D[base + a] = x0 * cs - x1 * sn;
    D[base + b] = x0 * sn + x1 * cs;
}
