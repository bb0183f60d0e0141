/* dequant.glsl: one 32-weight block of a weight row, for the type the kernel is built for
 * (TYPE: a ggml type id, or 64 + bits for MLX affine int4 / int8). Included by matmul.comp and
 * embed.comp, so that a matrix is only ever dequantized a block at a time, in registers.
 * deq32(r, b, v): v = weights b*32 .. b*32+31 of row r (float types: 0 past cols).
 * deq8(r, b, q, v): a quarter of it, for matmul.comp, where four invocations share a block and so
 *   read consecutive bytes: v[0..3] are the weights at b*32 + DEQ8_POS(q, 0) and on, v[4..7] those at
 *   b*32 + DEQ8_POS(q, 1) (the quarter's 4-byte words hold those in every layout).
 * Block layouts are ggml's (and import.h's for MLX); arithmetic as ggml's dequantize_row_*. */

float f32_at(uint o) { return uintBitsToFloat(w32(o)); }

#if TYPE == 0 || TYPE == 1 || TYPE == 30
/* Weight k of the row at byte rb; 0 past cols. */
float fw(uint rb, uint k)
{
#if TYPE == 0
    return k < p.cols ? f32_at(rb + 4u * k) : 0.0;
#elif TYPE == 1
    return k < p.cols ? h2f(w16(rb + 2u * k)) : 0.0;
#else
    return k < p.cols ? bf2f(w16(rb + 2u * k)) : 0.0;
#endif
}
void deq32(uint r, uint b, out float v[32])
{
    uint rb = p.w_off + r * p.row_bytes;
    [[unroll]] for (uint j = 0u; j < 32u; j++)
        v[j] = fw(rb, b * 32u + j);
}
#define DEQ8_POS(q, h) ((q) * 8u + 4u * (h))
void deq8(uint r, uint b, uint q, out float v[8])
{
    uint rb = p.w_off + r * p.row_bytes;
    [[unroll]] for (uint j = 0u; j < 8u; j++)
        v[j] = fw(rb, b * 32u + q * 8u + j);
}
#elif TYPE == 8 /* Q8_0: f16 d, 32 x int8 */
/* Block b of row r: its codes' offset; returns d. */
float q8_head(uint r, uint b, out uint qo)
{
    uint o = p.w_off + r * p.row_bytes + b * 34u;
    qo = o + 2u;
    return h2f(w16(o));
}
void deq32(uint r, uint b, out float v[32])
{
    uint qo;
    float d = q8_head(r, b, qo);
    [[unroll]] for (uint i = 0u; i < 8u; i++) {
        int q = int(w32(qo + 4u * i));
        [[unroll]] for (uint e = 0u; e < 4u; e++)
            v[4u * i + e] = d * float(bitfieldExtract(q, int(8u * e), 8));
    }
}
#define DEQ8_POS(q, h) ((q) * 8u + 4u * (h))
void deq8(uint r, uint b, uint qt, out float v[8])
{
    uint qo;
    float d = q8_head(r, b, qo);
    [[unroll]] for (uint i = 0u; i < 2u; i++) {
        int q = int(w32(qo + 8u * qt + 4u * i));
        [[unroll]] for (uint e = 0u; e < 4u; e++)
            v[4u * i + e] = d * float(bitfieldExtract(q, int(8u * e), 8));
    }
}
#elif TYPE == 2 || TYPE == 3 /* Q4_0: d, 16 bytes; Q4_1: d, m, 16 bytes */
/* Block b of row r: its codes' offset and m (Q4_1); returns d. */
float q4_head(uint r, uint b, out uint qo, out float m)
{
#if TYPE == 2
    uint o = p.w_off + r * p.row_bytes + b * 18u;
    qo = o + 2u;
    m = 0.0;
#else
    uint o = p.w_off + r * p.row_bytes + b * 20u;
    qo = o + 4u;
    m = h2f(w16(o + 2u));
#endif
    return h2f(w16(o));
}
float q4_val(uint x, float d, float m)
{
#if TYPE == 2
    return d * float(int(x) - 8);
#else
    return d * float(x) + m;
#endif
}
void deq32(uint r, uint b, out float v[32])
{
    uint qo;
    float m, d = q4_head(r, b, qo, m);
    [[unroll]] for (uint i = 0u; i < 4u; i++) {
        uint q = w32(qo + 4u * i);
        [[unroll]] for (uint e = 0u; e < 4u; e++) {
            uint x = (q >> (8u * e)) & 0xffu;
            v[4u * i + e] = q4_val(x & 15u, d, m);
            v[4u * i + e + 16u] = q4_val(x >> 4, d, m);
        }
    }
}
#define DEQ8_POS(q, h) ((q) * 4u + 16u * (h))
void deq8(uint r, uint b, uint qt, out float v[8])
{
    uint qo;
    float m, d = q4_head(r, b, qo, m);
    uint q = w32(qo + 4u * qt);
    [[unroll]] for (uint e = 0u; e < 4u; e++) {
        uint x = (q >> (8u * e)) & 0xffu;
        v[e] = q4_val(x & 15u, d, m);
        v[e + 4u] = q4_val(x >> 4, d, m);
    }
}
#elif TYPE == 6 || TYPE == 7 /* Q5_0: d, qh u32, 16 bytes; Q5_1: d, m, qh, 16 bytes */
/* Block b of row r: the offset of its qh word (the low nibbles follow it) and m (Q5_1);
 * returns d. */
float q5_head(uint r, uint b, out uint ho, out float m)
{
#if TYPE == 6
    uint o = p.w_off + r * p.row_bytes + b * 22u;
    ho = o + 2u;
    m = 0.0;
#else
    uint o = p.w_off + r * p.row_bytes + b * 24u;
    ho = o + 4u;
    m = h2f(w16(o + 2u));
#endif
    return h2f(w16(o));
}
/* Weights j and j + 16 from their low-nibble byte x and the block's qh. */
void q5_pair(uint x, uint qh, uint j, float d, float m, out float v0, out float v1)
{
    uint x0 = (x & 15u) | (((qh >> j) & 1u) << 4), x1 = (x >> 4) | (((qh >> (j + 16u)) & 1u) << 4);
#if TYPE == 6
    v0 = d * float(int(x0) - 16);
    v1 = d * float(int(x1) - 16);
#else
    v0 = d * float(x0) + m;
    v1 = d * float(x1) + m;
#endif
}
void deq32(uint r, uint b, out float v[32])
{
    uint ho;
    float m, d = q5_head(r, b, ho, m);
    uint qh = w32(ho);
    [[unroll]] for (uint i = 0u; i < 4u; i++) {
        uint q = w32(ho + 4u + 4u * i);
        [[unroll]] for (uint e = 0u; e < 4u; e++) {
            uint j = 4u * i + e;
            q5_pair((q >> (8u * e)) & 0xffu, qh, j, d, m, v[j], v[j + 16u]);
        }
    }
}
#define DEQ8_POS(q, h) ((q) * 4u + 16u * (h))
void deq8(uint r, uint b, uint qt, out float v[8])
{
    uint ho;
    float m, d = q5_head(r, b, ho, m);
    uint qh = w32(ho), q = w32(ho + 4u + 4u * qt);
    [[unroll]] for (uint e = 0u; e < 4u; e++)
        q5_pair((q >> (8u * e)) & 0xffu, qh, 4u * qt + e, d, m, v[e], v[e + 4u]);
}
#elif TYPE == 12 || TYPE == 13 /* Q4_K: d, dmin, scales[12], qs[128]; Q5_K: + qh[32] before qs */
/* 32-weight block b (sub-block b % 8 of its super-block) of row r: the offset of its codes'
 * 32 bytes (low nibbles for even sub-blocks, high for odd), of the super-block's qh (Q5_K),
 * and its min; returns its scale. */
float kq_head(uint r, uint b, out uint qo, out uint ho, out float m1)
{
    uint sub = b & 7u;
#if TYPE == 12
    uint o = p.w_off + r * p.row_bytes + (b >> 3) * 144u;
    qo = o + 16u;
    ho = 0u;
#else
    uint o = p.w_off + r * p.row_bytes + (b >> 3) * 176u;
    qo = o + 48u;
    ho = o + 16u;
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
    qo += (sub >> 1) * 32u;
    m1 = dmin * float(mn);
    return d * float(sc);
}
/* The four weights of code word i of block b. */
void kq_word(uint b, uint qo, uint ho, uint i, float d1, float m1, out vec4 w)
{
    uint sub = b & 7u, shift = (sub & 1u) * 4u, q = w32(qo + 4u * i);
#if TYPE == 13
    uint h = w32(ho + 4u * i);
#endif
    [[unroll]] for (uint e = 0u; e < 4u; e++) {
        uint x = (q >> (8u * e + shift)) & 15u;
#if TYPE == 13
        x += ((h >> (8u * e + sub)) & 1u) << 4;
#endif
        w[e] = d1 * float(x) - m1;
    }
}
void deq32(uint r, uint b, out float v[32])
{
    uint qo, ho;
    float m1, d1 = kq_head(r, b, qo, ho, m1);
    [[unroll]] for (uint i = 0u; i < 8u; i++) {
        vec4 w;
        kq_word(b, qo, ho, i, d1, m1, w);
        [[unroll]] for (uint e = 0u; e < 4u; e++)
            v[4u * i + e] = w[e];
    }
}
#define DEQ8_POS(q, h) ((q) * 8u + 4u * (h))
void deq8(uint r, uint b, uint qt, out float v[8])
{
    uint qo, ho;
    float m1, d1 = kq_head(r, b, qo, ho, m1);
    [[unroll]] for (uint ii = 0u; ii < 2u; ii++) {
        vec4 w;
        kq_word(b, qo, ho, 2u * qt + ii, d1, m1, w);
        [[unroll]] for (uint e = 0u; e < 4u; e++)
            v[4u * ii + e] = w[e];
    }
}
#elif TYPE == 14 /* Q6_K: ql[128], qh[64], int8 scales[16], d */
/* 32-weight block b of row r: where its low and high bits lie, how far to shift them, and the
 * offset of its two scales (weights 0-15, 16-31); returns d. */
float q6_head(uint r, uint b, out uint qlo, out uint qho, out uint lshift, out uint hshift, out uint so)
{
    uint o = p.w_off + r * p.row_bytes + (b >> 3) * 210u, sub = b & 7u, half_ = sub >> 2, qq = sub & 3u;
    qlo = o + 64u * half_ + ((qq & 1u) != 0u ? 32u : 0u);
    qho = o + 128u + 32u * half_;
    lshift = qq < 2u ? 0u : 4u;
    hshift = 2u * qq;
    so = o + 192u + 8u * half_ + 2u * qq;
    return h2f(w16(o + 208u));
}
int q6_scale(uint so, uint k) { return bitfieldExtract(int(w8(so + k)), 0, 8); }
/* The four signed codes of word i. */
void q6_word(uint qlo, uint qho, uint lshift, uint hshift, uint i, out ivec4 c)
{
    uint ql = w32(qlo + 4u * i), qh = w32(qho + 4u * i);
    [[unroll]] for (uint e = 0u; e < 4u; e++)
        c[e] = int(((ql >> (8u * e + lshift)) & 15u) | (((qh >> (8u * e + hshift)) & 3u) << 4)) - 32;
}
void deq32(uint r, uint b, out float v[32])
{
    uint qlo, qho, lshift, hshift, so;
    float d = q6_head(r, b, qlo, qho, lshift, hshift, so);
    int s0 = q6_scale(so, 0u), s1 = q6_scale(so, 1u);
    [[unroll]] for (uint i = 0u; i < 8u; i++) {
        ivec4 c;
        q6_word(qlo, qho, lshift, hshift, i, c);
        [[unroll]] for (uint e = 0u; e < 4u; e++) {
            uint l = 4u * i + e;
            v[l] = d * float(l < 16u ? s0 : s1) * float(c[e]);
        }
    }
}
#define DEQ8_POS(q, h) ((q) * 8u + 4u * (h))
void deq8(uint r, uint b, uint qt, out float v[8])
{
    uint qlo, qho, lshift, hshift, so;
    float d = q6_head(r, b, qlo, qho, lshift, hshift, so);
    /* the quarter's 8 weights are all in one 16-weight half: one scale */
    int s = q6_scale(so, qt >> 1);
    [[unroll]] for (uint ii = 0u; ii < 2u; ii++) {
        ivec4 c;
        q6_word(qlo, qho, lshift, hshift, 2u * qt + ii, c);
        [[unroll]] for (uint e = 0u; e < 4u; e++)
            v[4u * ii + e] = d * float(s) * float(c[e]);
    }
}
#elif TYPE == 39 /* MXFP4: e (E8M0), qs[16]: weight j is code qs[j] & 15, weight j + 16 is qs[j] >> 4 */
/* Block b of row r: its codes' offset; returns d = 2^(e - 128), ggml's "E8M0 halved", made from
 * its bits as ggml_e8m0_to_fp32_half does, so exactly: for e >= 2 the float of biased exponent
 * e - 1, for e < 2 the subnormals 2^-128 and 2^-127 (a device that flushes subnormals reads 0
 * there; no real block is that small). e = 255 is 2^127, as in ggml. */
float mx_head(uint r, uint b, out uint qo)
{
    uint o = p.w_off + r * p.row_bytes + b * 17u, e = w8(o);
    qo = o + 1u;
    return uintBitsToFloat(e >= 2u ? (e - 1u) << 23 : 0x00200000u << e);
}
/* Code x times d: ggml's kvalues_mxfp4 (E2M1 doubled: 0 1 2 3 4 6 8 12 by the low three bits,
 * bit 3 the sign) packed a nibble each; the value is made as an int, so code 8 is +0 as in ggml. */
float mx_val(uint x, float d)
{
    int k = int((0xc8643210u >> (4u * (x & 7u))) & 15u);
    return float((x & 8u) != 0u ? -k : k) * d;
}
void deq32(uint r, uint b, out float v[32])
{
    uint qo;
    float d = mx_head(r, b, qo);
    [[unroll]] for (uint i = 0u; i < 4u; i++) {
        uint q = w32(qo + 4u * i);
        [[unroll]] for (uint e = 0u; e < 4u; e++) {
            uint x = (q >> (8u * e)) & 0xffu;
            v[4u * i + e] = mx_val(x & 15u, d);
            v[4u * i + e + 16u] = mx_val(x >> 4, d);
        }
    }
}
#define DEQ8_POS(q, h) ((q) * 4u + 16u * (h))
void deq8(uint r, uint b, uint qt, out float v[8])
{
    uint qo;
    float d = mx_head(r, b, qo);
    uint q = w32(qo + 4u * qt);
    [[unroll]] for (uint e = 0u; e < 4u; e++) {
        uint x = (q >> (8u * e)) & 0xffu;
        v[e] = mx_val(x & 15u, d);
        v[e + 4u] = mx_val(x >> 4, d);
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
/* Block b of row r: its codes' offset, its group's scale and bias. */
uint mlx_head(uint r, uint b, out float s, out float bias)
{
    uint ssz = p.stype == 0u ? 4u : 2u, g = (b * 32u) / p.gs;
    s = scale_at(p.a_off + r * p.s_row_bytes + g * ssz);
    bias = bias_at(p.b_off + r * p.s_row_bytes + g * ssz);
    return p.w_off + r * p.row_bytes + b * 4u * (TYPE - 64u);
}
void deq32(uint r, uint b, out float v[32])
{
    const uint bits = TYPE - 64u;
    float s, bias;
    uint o = mlx_head(r, b, s, bias);
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
    float s, bias;
    uint o = mlx_head(r, b, s, bias);
    [[unroll]] for (uint i = 0u; i < bits / 4u; i++) {
        uint q = w32(o + 4u * (qt * (bits / 4u) + i));
        [[unroll]] for (uint e = 0u; e < 32u / bits; e++)
            v[i * (32u / bits) + e] = s * float((q >> (bits * e)) & ((1u << bits) - 1u)) + bias;
    }
}
#else
#error "dequant.glsl: unknown TYPE"
#endif
