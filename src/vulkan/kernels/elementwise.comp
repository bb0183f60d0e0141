#version 450
/* elementwise.comp: the ops that touch each element once, by p.mode:
 *   0 ADD      dst[i] += src[i]
 *   1 SWIGLU   dst[i] = silu(dst[i]) * src[i]
 *   2 ADD_ROW  dst[t][c] += w[c], i = t * cols + c
 *   3 STORE    dst[i] = src[i]              (f32 dst)
 *   4 STORE    dst[i] = f16(src[i])         (f16 dst; one invocation per u32 word, so that no two
 *              invocations write the same word; a word half outside the range is kept)
 *   5 GEGLU    dst[i] = gelu_tanh(dst[i]) * src[i]
 *   6 SCALE    dst[i] *= scale
 *   7 SOFTCAP  dst[i] = scale * tanh(dst[i] / scale)
 *   8 GATED_ADD dst[t][c] += sigmoid(A[t]) * src[t][c]          (A: n gates, f32)
 *   9 MOE_SUM  dst[t][c] += sum_s A[t][s] * src[t][s][c], s < rows in order (A: weights, f32)
 *  10 GELU     dst[i] = 0.5 dst[i] (1 + erf(dst[i] / sqrt 2))   (erf_acc below; BERT's exact GELU)
 *  11 SWIGLU_OAI g = min(dst[i], eps), u = clamp(src[i], -eps, eps); dst[i] = g sigmoid(scale g) (u + 1)
 *              (gpt-oss: scale = alpha 1.702, eps = limit 7)
 *  12 ADD_ROW_ID dst[r][c] += w[A[r]][c], r = i / cols < n / cols, A the expert ids (i32), w a vector
 *              read (vec_ld) of n_rot rows of cols; an id past n_rot adds nothing
 *  13 STORE_ROWS dst[t * rows + c] = src[t][c], t < n, c < cols   (f32 dst; rows: the stride)
 *  14 STORE_ROWS as 13 into an f16 dst, one invocation per u32 word of the span the rows cover (as
 *              mode 4): a half outside the rows (past cols in a row, or outside the span) is kept
 * dst is bound as u32 words so that modes 4 and 14 can address halves. */
#extension GL_GOOGLE_include_directive : enable
#include "common.glsl"

layout(std430, set = 0, binding = 1) buffer Dbuf { uint D[]; };
layout(std430, set = 0, binding = 2) readonly buffer Sbuf { float S[]; };
layout(local_size_x = 256) in;

/* f32 -> f16 bits, round to nearest even (packHalf2x16 leaves the rounding to the device). */
uint f2h(float f)
{
    uint x = floatBitsToUint(f), sign = (x >> 16) & 0x8000u, e = (x >> 23) & 0xffu, m = x & 0x7fffffu;
    if (e == 255u)
        return sign | 0x7c00u | (m != 0u ? 0x200u | (m >> 13) : 0u);
    int ee = int(e) - 112;
    if (ee >= 31)
        return sign | 0x7c00u;
    if (ee <= 0) {
        if (ee < -10)
            return sign;
        m |= 0x800000u;
        uint shift = uint(14 - ee), hm = m >> shift, rem = m & ((1u << shift) - 1u), halfway = 1u << (shift - 1u);
        if (rem > halfway || (rem == halfway && (hm & 1u) != 0u))
            hm++;
        return sign | hm;
    }
    uint h = sign | (uint(ee) << 10) | (m >> 13), rem = m & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u) != 0u))
        h++;
    return h;
}

/* tanh to within a few ulp on every device: the odd series near 0 (where (e^2x - 1) / (e^2x + 1)
 * cancels), 1 - 2 / (e^2|x| + 1) beyond; the GLSL builtin is left to the driver's precision. */
float tanh_acc(float x)
{
    float a = abs(x);
    if (a < 0.3) {
        float x2 = x * x;
        return x * (1.0 + x2 * (-1.0 / 3.0 + x2 * (2.0 / 15.0 + x2 * (-17.0 / 315.0 +
                    x2 * (62.0 / 2835.0 + x2 * (-1382.0 / 155925.0))))));
    }
    float r = a > 10.0 ? 1.0 : 1.0 - 2.0 / (exp(2.0 * a) + 1.0);
    return x < 0.0 ? -r : r;
}

/* erf to within 6e-8 absolute in float arithmetic with an exact exp (one ulp of values near 1;
 * Abramowitz-Stegun 7.1.26 is off by 4.6e-7), which GLSL lacks. Below 0.9, x + x P(x^2), the exact
 * term carrying most of the value; from 0.9, 1 - exp(-x^2) Q(x - 2.45), Q fitted to
 * erfc(x) exp(x^2), with x clamped to 4 where erfc is below half an ulp of 1. The coefficients
 * and that measurement: src/vulkan/erf_fit.py. */
float erf_acc(float x)
{
    float a = abs(x), r;
    if (a < 0.9) {
        float u = a * a;
        float q = 8.529401384e-05;
        q = q * u - 8.179632132e-04;
        q = q * u + 5.204226822e-03;
        q = q * u - 2.686066553e-02;
        q = q * u + 1.128371805e-01;
        q = q * u - 3.761263490e-01;
        q = q * u + 1.283791661e-01;
        r = a + a * q;
    } else {
        a = min(a, 4.0);
        float t = a - 2.45;
        float q = 1.252240622e-07;
        q = q * t - 5.147463753e-07;
        q = q * t + 1.094951813e-06;
        q = q * t - 4.148406333e-06;
        q = q * t + 1.821405567e-05;
        q = q * t - 6.662197120e-05;
        q = q * t + 2.326239919e-04;
        q = q * t - 7.994065527e-04;
        q = q * t + 2.658661921e-03;
        q = q * t - 8.514069021e-03;
        q = q * t + 2.617617138e-02;
        q = q * t - 7.690239698e-02;
        q = q * t + 2.145870924e-01;
        r = 1.0 - exp(-a * a) * q;
    }
    return x < 0.0 ? -r : r;
}

void main()
{
    uint idx = group_index() * 256u + gl_LocalInvocationID.x;
    if (p.mode == 4u) {
        /* words covering elements dst_off .. dst_off + n - 1 */
        uint w0 = p.dst_off >> 1, w = w0 + idx, end = p.dst_off + p.n;
        if (2u * w >= end)
            return;
        uint old = D[w], lo = old & 0xffffu, hi = old >> 16;
        uint e0 = 2u * w, e1 = e0 + 1u;
        if (e0 >= p.dst_off)
            lo = f2h(S[p.src_off + (e0 - p.dst_off)]);
        if (e1 < end)
            hi = f2h(S[p.src_off + (e1 - p.dst_off)]);
        D[w] = lo | (hi << 16);
        return;
    }
    if (p.mode == 13u) {
        if (idx >= p.n * p.cols)
            return;
        uint t = idx / p.cols, c = idx % p.cols;
        D[p.dst_off + t * p.rows + c] = floatBitsToUint(S[p.src_off + idx]);
        return;
    }
    if (p.mode == 14u) {
        /* words covering elements dst_off .. dst_off + span - 1 */
        uint span = p.n > 0u ? (p.n - 1u) * p.rows + p.cols : 0u, w = (p.dst_off >> 1) + idx, end = p.dst_off + span;
        if (2u * w >= end)
            return;
        uint old = D[w], h[2] = uint[2](old & 0xffffu, old >> 16);
        for (uint k = 0u; k < 2u; k++) {
            uint e = 2u * w + k;
            if (e < p.dst_off || e >= end)
                continue;
            uint j = e - p.dst_off, t = j / p.rows, c = j % p.rows;
            if (c < p.cols)
                h[k] = f2h(S[p.src_off + t * p.cols + c]);
        }
        D[w] = h[0] | (h[1] << 16);
        return;
    }
    if (idx >= p.n)
        return;
    uint d = p.dst_off + idx;
    if (p.mode == 0u) {
        D[d] = floatBitsToUint(uintBitsToFloat(D[d]) + S[p.src_off + idx]);
    } else if (p.mode == 1u) {
        float g = uintBitsToFloat(D[d]);
        D[d] = floatBitsToUint(g / (1.0 + exp(-g)) * S[p.src_off + idx]);
    } else if (p.mode == 5u) {
        float x = uintBitsToFloat(D[d]);
        D[d] = floatBitsToUint(0.5 * x * (1.0 + tanh_acc(0.7978845608 * (x + 0.044715 * x * x * x))) *
                               S[p.src_off + idx]);
    } else if (p.mode == 6u) {
        D[d] = floatBitsToUint(uintBitsToFloat(D[d]) * p.scale);
    } else if (p.mode == 7u) {
        D[d] = floatBitsToUint(p.scale * tanh_acc(uintBitsToFloat(D[d]) / p.scale));
    } else if (p.mode == 8u) {
        float g = 1.0 / (1.0 + exp(-uintBitsToFloat(A[p.a_off + idx / p.cols])));
        D[d] = floatBitsToUint(uintBitsToFloat(D[d]) + g * S[p.src_off + idx]);
    } else if (p.mode == 9u) {
        uint t = idx / p.cols, c = idx % p.cols;
        float acc = 0.0;
        for (uint s = 0u; s < p.rows; s++)
            acc += uintBitsToFloat(A[p.a_off + t * p.rows + s]) * S[p.src_off + (t * p.rows + s) * p.cols + c];
        D[d] = floatBitsToUint(uintBitsToFloat(D[d]) + acc);
    } else if (p.mode == 10u) {
        float x = uintBitsToFloat(D[d]);
        D[d] = floatBitsToUint(0.5 * x * (1.0 + erf_acc(x * 0.70710678118654752)));
    } else if (p.mode == 11u) {
        float g = min(uintBitsToFloat(D[d]), p.eps), u = clamp(S[p.src_off + idx], -p.eps, p.eps);
        D[d] = floatBitsToUint(g / (1.0 + exp(-p.scale * g)) * (u + 1.0));
    } else if (p.mode == 12u) {
        uint e = A[p.a_off + idx / p.cols];
        if (e < p.n_rot)
            D[d] = floatBitsToUint(uintBitsToFloat(D[d]) + vec_ld(e * p.cols + idx % p.cols));
    } else if (p.mode == 2u) {
        D[d] = floatBitsToUint(uintBitsToFloat(D[d]) + vec_ld(idx % p.cols));
    } else {
        D[d] = floatBitsToUint(S[p.src_off + idx]);
    }
}
