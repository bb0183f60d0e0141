#version 450
/* norm.comp: the row norms, one workgroup per row, by p.mode:
 *   0 RMS_NORM    dst[r] = src[r] / sqrt(mean(src[r]^2) + eps) * (w + p.scale), p.scale being the
 *                 op's w_offset (Gemma's (1 + w) norms: 1; else 0, the sum in float as the CPU's)
 *   1 LAYER_NORM  dst[r] = (src[r] - mean) / sqrt(var + eps) * w
 *   2 LAYER_NORM  the same + bias, the bias a second 1-D weight at binding 5 (B): byte offset
 *                 p.b_off, ggml type p.stype
 * The sums are float trees (subgroup, then shared), not the CPU's double: within 1e-6 relative
 * for the widths models use. LayerNorm takes the corrected two-pass sums (Chan, Golub and LeVeque):
 * m0 = sum(x) / n, then d = sum(x - m0) and q = sum((x - m0)^2); mean = m0 + d / n and
 * var = q / n - (d / n)^2. The first pass's rounding in m0 comes back through d, so the mean is
 * within about an ulp of the exact one, as the CPU's (double, then float), even for a row whose
 * mean is large against its spread, where m0 alone is off by its sum's rounding and one pass of
 * sum(x^2) - n mean^2 cancels.
 * dst may be src: invocation tid reads and writes only the columns tid, tid + 256, ..., in
 * every pass. */
#extension GL_GOOGLE_include_directive : enable
#include "common.glsl"

layout(std430, set = 0, binding = 1) buffer Dbuf { float D[]; };
layout(std430, set = 0, binding = 2) readonly buffer Sbuf { float S[]; };
/* 256 invocations: a row is a handful of loads each (the one workgroup of a decode step waits
 * on each in turn) */
layout(local_size_x = 256) in;
shared float red[256];

/* Element i of the bias (LAYER_NORM mode 2): F32, F16 or BF16, as vec_ld reads the weight. */
float bias_ld(uint i)
{
    if (p.stype == 1u)
        return h2f(b16(p.b_off + 2u * i));
    if (p.stype == 30u)
        return bf2f(b16(p.b_off + 2u * i));
    return uintBitsToFloat(b32(p.b_off + 4u * i));
}

void main()
{
    uint r = group_index(), tid = gl_LocalInvocationID.x;
    if (r >= p.n)
        return;
    uint so = p.src_off + r * p.cols, dof = p.dst_off + r * p.cols;
    float n = float(p.cols);
    if (p.mode == 0u) {
        float ss = 0.0;
        for (uint i = tid; i < p.cols; i += 256u)
            ss += S[so + i] * S[so + i];
        float total;
        WG_SUM(total, ss, red)
        float sc = 1.0 / sqrt(total / n + p.eps);
        for (uint i = tid; i < p.cols; i += 256u)
            D[dof + i] = S[so + i] * sc * (vec_ld(i) + p.scale);
        return;
    }
    float s = 0.0;
    for (uint i = tid; i < p.cols; i += 256u)
        s += S[so + i];
    float m0;
    WG_SUM(m0, s, red)
    m0 /= n;
    float dp = 0.0, qp = 0.0;
    for (uint i = tid; i < p.cols; i += 256u) {
        float x = S[so + i] - m0;
        dp += x;
        qp += x * x;
    }
    float d, q;
    WG_SUM(d, dp, red)
    WG_SUM(q, qp, red)
    d /= n;
    float mean = m0 + d, sc = 1.0 / sqrt(max(q / n - d * d, 0.0) + p.eps);
    for (uint i = tid; i < p.cols; i += 256u) {
        float y = (S[so + i] - mean) * sc * vec_ld(i);
        D[dof + i] = p.mode == 2u ? y + bias_ld(i) : y;
    }
}
