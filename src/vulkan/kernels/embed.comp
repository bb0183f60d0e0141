#version 450
/* embed.comp: dst[t][cols] = row tokens[t] of W, one 32-weight block per invocation, for one
 * weight type (TYPE, see dequant.glsl). The token ids come in binding 2 (src). */
#extension GL_GOOGLE_include_directive : enable
#include "common.glsl"
#include "dequant.glsl"

layout(std430, set = 0, binding = 1) buffer Dbuf { float D[]; };
layout(std430, set = 0, binding = 2) readonly buffer Sbuf { uint TOK[]; };
layout(local_size_x = 64) in;

void main()
{
    uint nb = (p.cols + 31u) / 32u, idx = group_index() * 64u + gl_LocalInvocationID.x;
    if (idx >= p.n * nb)
        return;
    uint t = idx / nb, b = idx % nb;
    float v[32];
    deq32(TOK[p.src_off + t], b, v);
    uint o = p.dst_off + t * p.cols + b * 32u;
    for (uint j = 0u; j < 32u && b * 32u + j < p.cols; j++)
        D[o + j] = v[j];
}
