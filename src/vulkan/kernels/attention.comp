#version 450
/* attention.comp: causal GQA attention, one workgroup per (token, query head), over an f32 or
 * f16 (KV_F16) cache. Positions are taken 64 at a time with an online softmax (running max and
 * sum, the output rescaled as the max grows: flash-attention's recurrence), so shared memory
 * does not grow with the context. Each invocation scores one position of a tile, then owns
 * head_dim / 64 output dims. k = binding 4 (A), v = binding 5 (B), both [positions][kv_heads * head_dim]
 * from position 0 of the layer. head_dim <= HD_MAX (gpu.h's GPU_ATT_HEAD_DIM: DeepSeek's MLA attends
 * over 576-wide rows); the loops over an invocation's output dims stop at head_dim, so a smaller
 * head does the work it did when the bound was 256.
 * p.rows > 0: a sliding window, token t sees only the last p.rows positions up to pos0 + t;
 * p.cols > 0: the caches are a ring of p.cols slots, position q at slot q % p.cols; p.scale is the
 * score scale (1 / sqrt(head_dim) unless the op sets one).
 * p.mode bit 1 (an encoder's bidirectional attention; no window or ring, pos0 0): the causal bound
 * is lifted, every token sees positions 0 .. pos0 + n - 1.
 * p.mode bit 2 (gpt-oss's attention sinks): the sinks are a vector at binding 3 (W; w_off, wtype,
 * read by vec_ld); head h's sink is one more logit with no value. It starts the running max and
 * sum (m = sink, l = exp(sink - sink) = 1), so the recurrence takes it into the max and the
 * denominator as the CPU's softmax does; without bit 2, m = -inf and l = 0 as before. */
#extension GL_GOOGLE_include_directive : enable
#include "common.glsl"

layout(std430, set = 0, binding = 1) buffer Dbuf { float D[]; };
layout(std430, set = 0, binding = 2) readonly buffer Sbuf { float S[]; };
layout(local_size_x = 64) in;
#define HD_MAX 1024u              /* gpu.h's GPU_ATT_HEAD_DIM */
#define ACC_N (HD_MAX / 64u)      /* output dims per invocation */
shared float qs[HD_MAX];
shared float sc[64];
shared float red[64];

#if KV_F16
float kv_k(uint i) { return unpackHalf2x16(A[i >> 1])[i & 1u]; }
float kv_v(uint i) { return unpackHalf2x16(B[i >> 1])[i & 1u]; }
#else
float kv_k(uint i) { return uintBitsToFloat(A[i]); }
float kv_v(uint i) { return uintBitsToFloat(B[i]); }
#endif

uint slot(uint pos) { return p.cols > 0u ? pos % p.cols : pos; }

/* The online softmax over positions and each invocation's NACC_ output dims (tid + 64 i): a macro
 * so that heads of at most 256 dims (every model but MLA's) keep four accumulators, as before
 * the bound was raised, and only wider heads carry ACC_N. */
#define ATTEND(NACC_)                                                          \
    float acc[NACC_];                                                          \
    [[unroll]] for (uint i = 0u; i < NACC_; i++)                               \
        acc[i] = 0.0;                                                          \
    float m = -1.0 / 0.0, l = 0.0;                                             \
    if ((p.mode & 2u) != 0u) {                                                 \
        float sink = vec_ld(h);                                                \
        if (sink > m) {                                                        \
            m = sink;                                                          \
            l = 1.0;                                                           \
        }                                                                      \
    }                                                                          \
    for (uint c0 = first; c0 < n_pos; c0 += 64u) {                             \
        uint pos = c0 + tid;                                                   \
        float s = -1.0 / 0.0;                                                  \
        if (pos < n_pos) {                                                     \
            uint ko = p.a_off + slot(pos) * kv_dim + kvo;                      \
            float dot = 0.0;                                                   \
            for (uint d = 0u; d < hd; d++)                                     \
                dot += qs[d] * kv_k(ko + d);                                   \
            s = p.scale * dot;                                                 \
        }                                                                      \
        float cmax;                                                            \
        WG_MAX(cmax, s, red)                                                   \
        float mn = max(m, cmax);                                               \
        float e = pos < n_pos ? exp(s - mn) : 0.0;                             \
        sc[tid] = e;                                                           \
        float csum;                                                            \
        WG_SUM(csum, e, red)                                                   \
        float alpha = exp(m - mn);                                             \
        l = l * alpha + csum;                                                  \
        m = mn;                                                                \
        uint np = min(64u, n_pos - c0);                                        \
        [[unroll]] for (uint i = 0u; i < NACC_; i++) {                         \
            uint d = tid + 64u * i;                                            \
            if (d >= hd)                                                       \
                break;                                                         \
            float a = acc[i] * alpha;                                          \
            for (uint j = 0u; j < np; j++)                                     \
                a += sc[j] * kv_v(p.b_off + slot(c0 + j) * kv_dim + kvo + d);  \
            acc[i] = a;                                                        \
        }                                                                      \
        barrier();                                                             \
    }                                                                          \
    uint oo = p.dst_off + (t * p.heads + h) * hd;                              \
    [[unroll]] for (uint i = 0u; i < NACC_; i++) {                             \
        uint d = tid + 64u * i;                                                \
        if (d < hd)                                                            \
            D[oo + d] = acc[i] / l;                                            \
    }

void main()
{
    uint item = group_index(), tid = gl_LocalInvocationID.x, hd = p.head_dim;
    if (item >= p.n * p.heads)
        return;
    uint t = item / p.heads, h = item % p.heads, group = p.heads / p.kv_heads;
    uint kv_dim = p.kv_heads * hd, kvo = (h / group) * hd;
    uint n_pos = (p.mode & 1u) != 0u ? p.pos0 + p.n : p.pos0 + t + 1u;
    uint first = p.rows > 0u && n_pos > p.rows ? n_pos - p.rows : 0u;
    uint qo = p.src_off + (t * p.heads + h) * hd;
    for (uint d = tid; d < hd; d += 64u)
        qs[d] = S[qo + d];
    barrier();
    /* a sink of -inf adds exp(-inf) = 0: as none; WG_SUM's barriers also publish sc[] */
    if (hd <= 256u) {
        ATTEND(4u)
    } else {
        ATTEND(ACC_N)
    }
}
