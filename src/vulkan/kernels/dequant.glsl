/* dequant.glsl: one 32-weight block of a weight row, for the type the kernel is built for
 * (TYPE: a ggml type id, or 64 + bits for MLX affine int4 / int8). Included by matmul.comp and
 * embed.comp, so that a matrix is only ever dequantized a block at a time, in registers.
 * deq32(r, b, v): v = weights b*32 .. b*32+31 of row r (float types: 0 past cols).
 * deq8(r, b, q, v): a quarter of it, for decode, where four invocations share a block and so read
 *   consecutive bytes: v[0..3] are the weights at b*32 + DEQ8_POS(q, 0) and on, v[4..7] those at
 *   b*32 + DEQ8_POS(q, 1) (the quarter's 4-byte words hold those in every layout).
 * Block layouts are ggml's (and import.h's for MLX); arithmetic as ggml's dequantize_row_*. */

float f32_at(uint o) { return uintBitsToFloat(w32(o)); }

#if TYPE == 0 || TYPE == 1 || TYPE == 30
void deq32(uint r, uint b, out float v[32])
{
    uint rb = p.w_off + r * p.row_bytes;
    [[unroll]] for (uint j = 0u; j < 32u; j++) {
        uint k = b * 32u + j;
#if TYPE == 0
        v[j] = k < p.cols ? f32_at(rb + 4u * k) : 0.0;
#elif TYPE == 1
        v[j] = k < p.cols ? h2f(w16(rb + 2u * k)) : 0.0;
#else
        v[j] = k < p.cols ? bf2f(w16(rb + 2u * k)) : 0.0;
#endif
    }
}
#define DEQ8_POS(q, h) ((q) * 8u + 4u * (h))
void deq8(uint r, uint b, uint q, out float v[8])
{
    uint rb = p.w_off + r * p.row_bytes;
    [[unroll]] for (uint j = 0u; j < 8u; j++) {
        uint k = b * 32u + q * 8u + j;
#if TYPE == 0
        v[j] = k < p.cols ? f32_at(rb + 4u * k) : 0.0;
#elif TYPE == 1
        v[j] = k < p.cols ? h2f(w16(rb + 2u * k)) : 0.0;
#else
        v[j] = k < p.cols ? bf2f(w16(rb + 2u * k)) : 0.0;
#endif
    }
}
#elif TYPE == 8 /* Q8_0: f16 d, 32 x int8 */
void deq32(uint r, uint b, out float v[32])
{
    uint o = p.w_off + r * p.row_bytes + b * 34u;
    float d = h2f(w16(o));
    [[unroll]] for (uint i = 0u; i < 8u; i++) {
        int q = int(w32(o + 2u + 4u * i));
        [[unroll]] for (uint e = 0u; e < 4u; e++)
            v[4u * i + e] = d * float(bitfieldExtract(q, int(8u * e), 8));
    }
}
#define DEQ8_POS(q, h) ((q) * 8u + 4u * (h))
void deq8(uint r, uint b, uint qt, out float v[8])
{
    uint o = p.w_off + r * p.row_bytes + b * 34u;
    float d = h2f(w16(o));
    [[unroll]] for (uint i = 0u; i < 2u; i++) {
        int q = int(w32(o + 2u + 8u * qt + 4u * i));
        [[unroll]] for (uint e = 0u; e < 4u; e++)
            v[4u * i + e] = d * float(bitfieldExtract(q, int(8u * e), 8));
    }
}
#elif TYPE == 2 || TYPE == 3 /* Q4_0: d, 16 bytes; Q4_1: d, m, 16 bytes */
void deq32(uint r, uint b, out float v[32])
{
#if TYPE == 2
    uint o = p.w_off + r * p.row_bytes + b * 18u, qo = o + 2u;
#else
    uint o = p.w_off + r * p.row_bytes + b * 20u, qo = o + 4u;
    float m = h2f(w16(o + 2u));
#endif
    float d = h2f(w16(o));
    [[unroll]] for (uint i = 0u; i < 4u; i++) {
        uint q = w32(qo + 4u * i);
        [[unroll]] for (uint e = 0u; e < 4u; e++) {
            uint x = (q >> (8u * e)) & 0xffu;
#if TYPE == 2
            v[4u * i + e] = d * float(int(x & 15u) - 8);
            v[4u * i + e + 16u] = d * float(int(x >> 4) - 8);
#else
            v[4u * i + e] = d * float(x & 15u) + m;
            v[4u * i + e + 16u] = d * float(x >> 4) + m;
#endif
        }
    }
}
#define DEQ8_POS(q, h) ((q) * 4u + 16u * (h))
void deq8(uint r, uint b, uint qt, out float v[8])
{
#if TYPE == 2
    uint o = p.w_off + r * p.row_bytes + b * 18u, qo = o + 2u;
#else
    uint o = p.w_off + r * p.row_bytes + b * 20u, qo = o + 4u;
    float m = h2f(w16(o + 2u));
#endif
    float d = h2f(w16(o));
    uint q = w32(qo + 4u * qt);
    [[unroll]] for (uint e = 0u; e < 4u; e++) {
        uint x = (q >> (8u * e)) & 0xffu;
#if TYPE == 2
        v[e] = d * float(int(x & 15u) - 8);
        v[e + 4u] = d * float(int(x >> 4) - 8);
#else
        v[e] = d * float(x & 15u) + m;
        v[e + 4u] = d * float(x >> 4) + m;
#endif
    }
}
#elif TYPE == 6 || TYPE == 7 /* Q5_0: d, qh u32, 16 bytes; Q5_1: d, m, qh, 16 bytes */
void deq32(uint r, uint b, out float v[32])
{
#if TYPE == 6
    uint o = p.w_off + r * p.row_bytes + b * 22u, ho = o + 2u;
#else
    uint o = p.w_off + r * p.row_bytes + b * 24u, ho = o + 4u;
    float m = h2f(w16(o + 2u));
#endif
    float d = h2f(w16(o));
    uint qh = w32(ho);
    [[unroll]] for (uint i = 0u; i < 4u; i++) {
        uint q = w32(ho + 4u + 4u * i);
        [[unroll]] for (uint e = 0u; e < 4u; e++) {
            uint j = 4u * i + e, x = (q >> (8u * e)) & 0xffu;
            uint x0 = (x & 15u) | (((qh >> j) & 1u) << 4), x1 = (x >> 4) | (((qh >> (j + 16u)) & 1u) << 4);
#if TYPE == 6
            v[j] = d * float(int(x0) - 16);
            v[j + 16u] = d * float(int(x1) - 16);
#else
            v[j] = d * float(x0) + m;
            v[j + 16u] = d * float(x1) + m;
#endif
        }
    }
}
#define DEQ8_POS(q, h) ((q) * 4u + 16u * (h))
void deq8(uint r, uint b, uint qt, out float v[8])
{
#if TYPE == 6
    uint o = p.w_off + r * p.row_bytes + b * 22u, ho = o + 2u;
#else
    uint o = p.w_off + r * p.row_bytes + b * 24u, ho = o + 4u;
    float m = h2f(w16(o + 2u));
#endif
    float d = h2f(w16(o));
    uint qh = w32(ho), q = w32(ho + 4u + 4u * qt);
    [[unroll]] for (uint e = 0u; e < 4u; e++) {
        uint j = 4u * qt + e, x = (q >> (8u * e)) & 0xffu;
        uint x0 = (x & 15u) | (((qh >> j) & 1u) << 4), x1 = (x >> 4) | (((qh >> (j + 16u)) & 1u) << 4);
#if TYPE == 6
        v[e] = d * float(int(x0) - 16);
        v[e + 4u] = d * float(int(x1) - 16);
#else
        v[e] = d * float(x0) + m;
        v[e + 4u] = d * float(x1) + m;
#endif
    }
}
#elif TYPE == 12 || TYPE == 13 /* Q4_K: d, dmin, scales[12], qs[128]; Q5_K: + qh[32] before qs */
void deq32(uint r, uint b, out float v[32])
{
    uint sub = b & 7u;
#if TYPE == 12
    uint o = p.w_off + r * p.row_bytes + (b >> 3) * 144u, qo = o + 16u;
#else
    uint o = p.w_off + r * p.row_bytes + (b >> 3) * 176u, qo = o + 48u, ho = o + 16u;
#endif
    float d = h2f(w16(o)), dmin = h2f(w16(o + 2u));
    uint so = o + 4u, sc, mn;
    if (sub < 4u) {
        sc = w8(so + sub) & 63u;
        mn = w8(so + sub + 4u) & 63u;
    } else {
        sc = (w8(so + sub + 4u) & 15u) | ((w8(so + sub - 4u) >> 6) << 4);
        mn = (w8(so + sub + 4u) >> 4) | ((w8(so + sub) >> 6) << 4);
    }
    float d1 = d * float(sc), m1 = dmin * float(mn);
    uint shift = (sub & 1u) * 4u;
    qo += (sub >> 1) * 32u;
    [[unroll]] for (uint i = 0u; i < 8u; i++) {
        uint q = w32(qo + 4u * i);
#if TYPE == 13
        uint h = w32(ho + 4u * i);
#endif
        [[unroll]] for (uint e = 0u; e < 4u; e++) {
            uint x = (q >> (8u * e + shift)) & 15u;
#if TYPE == 13
            x += ((h >> (8u * e + sub)) & 1u) << 4;
#endif
            v[4u * i + e] = d1 * float(x) - m1;
        }
    }
}
#define DEQ8_POS(q, h) ((q) * 8u + 4u * (h))
void deq8(uint r, uint b, uint qt, out float v[8])
{
    uint sub = b & 7u;
#if TYPE == 12
    uint o = p.w_off + r * p.row_bytes + (b >> 3) * 144u, qo = o + 16u;
#else
    uint o = p.w_off + r * p.row_bytes + (b >> 3) * 176u, qo = o + 48u, ho = o + 16u;
#endif
    float d = h2f(w16(o)), dmin = h2f(w16(o + 2u));
    uint so = o + 4u, sc, mn;
    if (sub < 4u) {
        sc = w8(so + sub) & 63u;
        mn = w8(so + sub + 4u) & 63u;
    } else {
        sc = (w8(so + sub + 4u) & 15u) | ((w8(so + sub - 4u) >> 6) << 4);
        mn = (w8(so + sub + 4u) >> 4) | ((w8(so + sub) >> 6) << 4);
    }
    float d1 = d * float(sc), m1 = dmin * float(mn);
    uint shift = (sub & 1u) * 4u;
    qo += (sub >> 1) * 32u;
    [[unroll]] for (uint ii = 0u; ii < 2u; ii++) {
        uint i = 2u * qt + ii, q = w32(qo + 4u * i);
#if TYPE == 13
        uint h = w32(ho + 4u * i);
#endif
        [[unroll]] for (uint e = 0u; e < 4u; e++) {
            uint x = (q >> (8u * e + shift)) & 15u;
#if TYPE == 13
            x += ((h >> (8u * e + sub)) & 1u) << 4;
#endif
            v[4u * ii + e] = d1 * float(x) - m1;
        }
    }
}
#elif TYPE == 14 /* Q6_K: ql[128], qh[64], int8 scales[16], d */
void deq32(uint r, uint b, out float v[32])
{
    uint o = p.w_off + r * p.row_bytes + (b >> 3) * 210u, sub = b & 7u, half_ = sub >> 2, qq = sub & 3u;
    float d = h2f(w16(o + 208u));
    uint qlo = o + 64u * half_ + ((qq & 1u) != 0u ? 32u : 0u), qho = o + 128u + 32u * half_;
    uint lshift = qq < 2u ? 0u : 4u, hshift = 2u * qq;
    int s0 = bitfieldExtract(int(w8(o + 192u + 8u * half_ + 2u * qq)), 0, 8);
    int s1 = bitfieldExtract(int(w8(o + 192u + 8u * half_ + 2u * qq + 1u)), 0, 8);
    [[unroll]] for (uint i = 0u; i < 8u; i++) {
        uint ql = w32(qlo + 4u * i), qh = w32(qho + 4u * i);
        [[unroll]] for (uint e = 0u; e < 4u; e++) {
            uint l = 4u * i + e;
            int q = int(((ql >> (8u * e + lshift)) & 15u) | (((qh >> (8u * e + hshift)) & 3u) << 4)) - 32;
            v[l] = d * float(l < 16u ? s0 : s1) * float(q);
        }
    }
}
#define DEQ8_POS(q, h) ((q) * 8u + 4u * (h))
void deq8(uint r, uint b, uint qt, out float v[8])
{
    uint o = p.w_off + r * p.row_bytes + (b >> 3) * 210u, sub = b & 7u, half_ = sub >> 2, qq = sub & 3u;
    float d = h2f(w16(o + 208u));
    uint qlo = o + 64u * half_ + ((qq & 1u) != 0u ? 32u : 0u), qho = o + 128u + 32u * half_;
    uint lshift = qq < 2u ? 0u : 4u, hshift = 2u * qq;
    /* the quarter's 8 weights are all in one 16-weight half: one scale */
    int s = bitfieldExtract(int(w8(o + 192u + 8u * half_ + 2u * qq + (qt >> 1))), 0, 8);
    [[unroll]] for (uint ii = 0u; ii < 2u; ii++) {
        uint i = 2u * qt + ii, ql = w32(qlo + 4u * i), qh = w32(qho + 4u * i);
        [[unroll]] for (uint e = 0u; e < 4u; e++) {
            int q = int(((ql >> (8u * e + lshift)) & 15u) | (((qh >> (8u * e + hshift)) & 3u) << 4)) - 32;
            v[4u * ii + e] = d * float(s) * float(q);
        }
    }
}
#elif TYPE == 68 || TYPE == 72 /* MLX affine int4 / int8: codes, scale and bias per group */
#if GEMM == 2 /* MATMUL_ID: scales and biases lie in W's binding (A holds the expert ids) */
float scale_at(uint o)
{
    return p.stype == 1u ? h2f(w16(o)) : p.stype == 2u ? bf2f(w16(o)) : uintBitsToFloat(w32(o));
}
#define bias_at scale_at
#else
float scale_at(uint o)
{
    return p.stype == 1u ? h2f(a16(o)) : p.stype == 2u ? bf2f(a16(o)) : uintBitsToFloat(a32(o));
}
float bias_at(uint o)
{
    return p.stype == 1u ? h2f(b16(o)) : p.stype == 2u ? bf2f(b16(o)) : uintBitsToFloat(b32(o));
}
#endif
void deq32(uint r, uint b, out float v[32])
{
    const uint bits = TYPE - 64u;
    uint o = p.w_off + r * p.row_bytes + b * 4u * bits;
    uint ssz = p.stype == 0u ? 4u : 2u, g = (b * 32u) / p.gs;
    float s = scale_at(p.a_off + r * p.s_row_bytes + g * ssz), bias = bias_at(p.b_off + r * p.s_row_bytes + g * ssz);
    [[unroll]] for (uint i = 0u; i < bits; i++) {
        uint q = w32(o + 4u * i);
        [[unroll]] for (uint e = 0u; e < 32u / bits; e++)
            v[i * (32u / bits) + e] = s * float((q >> (bits * e)) & ((1u << bits) - 1u)) + bias;
    }
}
#define DEQ8_POS(q, h) ((q) * 8u + 4u * (h))
void deq8(uint r, uint b, uint qt, out float v[8])
{
    const uint bits = TYPE - 64u;
    uint o = p.w_off + r * p.row_bytes + b * 4u * bits;
    uint ssz = p.stype == 0u ? 4u : 2u, g = (b * 32u) / p.gs;
    float s = scale_at(p.a_off + r * p.s_row_bytes + g * ssz), bias = bias_at(p.b_off + r * p.s_row_bytes + g * ssz);
    [[unroll]] for (uint i = 0u; i < bits / 4u; i++) {
        uint q = w32(o + 4u * (qt * (bits / 4u) + i));
        [[unroll]] for (uint e = 0u; e < 32u / bits; e++)
            v[i * (32u / bits) + e] = s * float((q >> (bits * e)) & ((1u << bits) - 1u)) + bias;
    }
}
#else
#error "dequant.glsl: unknown TYPE"
#endif
