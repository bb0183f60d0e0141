#version 450
/* norm.comp: RMS_NORM, one workgroup per row: dst[r] = src[r] / sqrt(mean(src[r]^2) + eps) * (w + p.scale),
 * p.scale being the op's w_offset (Gemma's (1 + w) norms: 1; else 0, the sum in float as the CPU's).
 * The sum of squares is a float tree (subgroup, then shared), not the CPU's double: within 1e-6
 * relative for the widths models use. dst may be src: every read of the row happens before the
 * barriers of the reduction, and each invocation then rewrites only what it reads. */
#extension GL_GOOGLE_include_directive : enable
#include "common.glsl"

layout(std430, set = 0, binding = 1) buffer Dbuf { float D[]; };
layout(std430, set = 0, binding = 2) readonly buffer Sbuf { float S[]; };
/* 256 invocations: a row is a handful of loads each (the one workgroup of a decode step waits
 * on each in turn) */
layout(local_size_x = 256) in;
shared float red[256];

void main()
{
    uint r = group_index(), tid = gl_LocalInvocationID.x;
    if (r >= p.n)
        return;
    uint so = p.src_off + r * p.cols, dof = p.dst_off + r * p.cols;
    float ss = 0.0;
    for (uint i = tid; i < p.cols; i += 256u)
        ss += S[so + i] * S[so + i];
    float total;
    WG_SUM(total, ss, red)
    float sc = 1.0 / sqrt(total / float(p.cols) + p.eps);
    for (uint i = tid; i < p.cols; i += 256u)
        D[dof + i] = S[so + i] * sc * (vec_ld(i) + p.scale);
}
