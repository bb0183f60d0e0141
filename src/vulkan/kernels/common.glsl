/* common.glsl: what every kernel shares: the push constants (gpu_push in src/gpu/gpu.h is the same
 * struct), the read-only bindings and byte-level reads of weights. Included, not a kernel.
 *
 * Bindings (one descriptor set layout for every pipeline), numbered from 1 so that MSL made
 * by spirv-cross --msl-decoration-binding has them at buffer(1..5), the push constants at 0:
 *   1 dst   f32 elements (u32 words for f16 stores)       written
 *   2 src   f32 elements (u32 token ids for the embedding) read
 *   3 W     a weight's bytes, as u32 words                 read
 *   4 A     MLX scales / rope cos,sin table / k cache /   read (MOE_ROUTE: written)
 *           expert ids / MoE weights / gates
 *   5 B     MLX biases / v cache                           read
 * Each binding starts at an offset the device aligns; the push constants carry what remains (in
 * elements for dst, src, A, B as f32 or f16 elements, in bytes for W and the MLX scales). Weights are
 * read through u32 words and shifts because ggml blocks (18, 22, 34 bytes) are not word aligned
 * and 8/16-bit storage is an optional device feature. */
#extension GL_KHR_shader_subgroup_basic : enable
#extension GL_KHR_shader_subgroup_arithmetic : enable
#extension GL_KHR_shader_subgroup_shuffle : enable
#extension GL_EXT_control_flow_attributes : enable

layout(push_constant) uniform PC {
    uint n, rows, cols, dst_off;
    uint src_off, w_off, row_bytes, a_off;
    uint b_off, s_row_bytes, gs, stype;
    uint heads, kv_heads, head_dim, n_rot;
    uint pos0, interleaved, mode, wtype;
    float eps, scale;
    uint n_ctx, wg_x;   /* wg_x: workgroups along x in a 2-D grid (rows past 65535) */
} p;

layout(std430, set = 0, binding = 3) readonly buffer Wbuf { uint W[]; };
#ifdef A_WRITTEN   /* moe_route.comp writes its expert ids there */
layout(std430, set = 0, binding = 4) buffer Abuf { uint A[]; };
#else
layout(std430, set = 0, binding = 4) readonly buffer Abuf { uint A[]; };
#endif
layout(std430, set = 0, binding = 5) readonly buffer Bbuf { uint B[]; };

/* The workgroup's index in a grid laid out as rows of wg_x groups. */
uint group_index() { return gl_WorkGroupID.y * p.wg_x + gl_WorkGroupID.x; }

uint w8(uint o) { return (W[o >> 2] >> ((o & 3u) << 3)) & 0xffu; }
uint w16(uint o)
{
    if ((o & 3u) == 3u)
        return w8(o) | (w8(o + 1u) << 8);
    return (W[o >> 2] >> ((o & 3u) << 3)) & 0xffffu;
}
uint w32(uint o)
{
    uint s = (o & 3u) << 3;
    uint lo = W[o >> 2];
    return s == 0u ? lo : (lo >> s) | (W[(o >> 2) + 1u] << (32u - s));
}
uint a16(uint o)
{
    if ((o & 3u) == 3u)
        return ((A[o >> 2] >> 24) & 0xffu) | ((A[(o >> 2) + 1u] & 0xffu) << 8);
    return (A[o >> 2] >> ((o & 3u) << 3)) & 0xffffu;
}
uint a32(uint o)
{
    uint s = (o & 3u) << 3;
    uint lo = A[o >> 2];
    return s == 0u ? lo : (lo >> s) | (A[(o >> 2) + 1u] << (32u - s));
}
uint b16(uint o)
{
    if ((o & 3u) == 3u)
        return ((B[o >> 2] >> 24) & 0xffu) | ((B[(o >> 2) + 1u] & 0xffu) << 8);
    return (B[o >> 2] >> ((o & 3u) << 3)) & 0xffffu;
}
uint b32(uint o)
{
    uint s = (o & 3u) << 3;
    uint lo = B[o >> 2];
    return s == 0u ? lo : (lo >> s) | (B[(o >> 2) + 1u] << (32u - s));
}

float h2f(uint h) { return unpackHalf2x16(h).x; }
float bf2f(uint h) { return uintBitsToFloat(h << 16); }

/* Element i of a 1-D weight (norm weights, biases) of ggml type wtype: F32, F16 or BF16. */
float vec_ld(uint i)
{
    if (p.wtype == 1u)
        return h2f(w16(p.w_off + 2u * i));
    if (p.wtype == 30u)
        return bf2f(w16(p.w_off + 2u * i));
    return uintBitsToFloat(w32(p.w_off + 4u * i));
}

/* Sum of v over the workgroup (every invocation gets it): subgroup sums, then one shared slot per
 * subgroup. `red` must hold gl_NumSubgroups floats; two barriers. */
#define WG_SUM(result, v, red)                                                     \
    {                                                                              \
        float s_ = subgroupAdd(v);                                                 \
        if (subgroupElect())                                                       \
            red[gl_SubgroupID] = s_;                                               \
        barrier();                                                                 \
        float t_ = 0.0;                                                            \
        for (uint i_ = 0u; i_ < gl_NumSubgroups; i_++)                             \
            t_ += red[i_];                                                         \
        barrier();                                                                 \
        result = t_;                                                               \
    }
#define WG_MAX(result, v, red)                                                     \
    {                                                                              \
        float s_ = subgroupMax(v);                                                 \
        if (subgroupElect())                                                       \
            red[gl_SubgroupID] = s_;                                               \
        barrier();                                                                 \
        float t_ = red[0];                                                         \
        for (uint i_ = 1u; i_ < gl_NumSubgroups; i_++)                             \
            t_ = max(t_, red[i_]);                                                 \
        barrier();                                                                 \
        result = t_;                                                               \
    }
