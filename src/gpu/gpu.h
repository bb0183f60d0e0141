/* gpu.h: what every host of the GLSL kernels (src/vulkan/kernels) shares, apart from any GPU API:
 * the kernel variants, their push constants and workgroup sizes, a weight's layout as the
 * kernels read it, and the plan of each backend.h op: which kernel, which bytes of which buffer
 * at each binding, which push constants and how many workgroups. src/vulkan turns a plan into
 * descriptor sets and vkCmdDispatch; src/metal into setBuffer / setBytes and
 * dispatchThreadgroups over the MSL spirv-cross makes of the same SPIR-V. So there is one
 * place where an op becomes a dispatch, and both hosts run the same arithmetic.
 *
 * Bindings are those of common.glsl: 1 dst, 2 src, 3 W, 4 A, 5 B (gpu_dispatch.b[0..4]); the
 * push constants go at 0 (Vulkan: push constants; Metal: buffer(0) by setBytes). */
#ifndef MSTORE_GPU_H
#define MSTORE_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"

/* The kernels' push constants: common.glsl's PC, member for member. */
typedef struct gpu_push {
    uint32_t n, rows, cols, dst_off;
    uint32_t src_off, w_off, row_bytes, a_off;
    uint32_t b_off, s_row_bytes, gs, stype;
    uint32_t heads, kv_heads, head_dim, n_rot;
    uint32_t pos0, interleaved, mode, wtype;
    float eps, scale;
    uint32_t n_ctx, wg_x;
} gpu_push;

/* Weight types the kernels run, in the order of the generated variants (src/vulkan/CMakeLists.txt). */
enum {
    GPU_T_F32,
    GPU_T_F16,
    GPU_T_BF16,
    GPU_T_Q8_0,
    GPU_T_Q4_0,
    GPU_T_Q4_1,
    GPU_T_Q5_0,
    GPU_T_Q5_1,
    GPU_T_Q4_K,
    GPU_T_Q5_K,
    GPU_T_Q6_K,
    GPU_T_MLX4,
    GPU_T_MLX8,
    GPU_T_MXFP4,   /* ggml's (gpt-oss's experts); past MLX so that the older variants keep their places */
    GPU_T_COUNT
};
/* Kernel variants, in the order of the generated tables (SPIR-V and MSL). */
typedef enum gpu_kernel {
    GPU_K_MV = 0,                        /* + GPU_T_*: decode matvec */
    GPU_K_MM = GPU_K_MV + GPU_T_COUNT,   /* + GPU_T_*: prefill GEMM */
    GPU_K_EMBED = GPU_K_MM + GPU_T_COUNT, /* + GPU_T_*: embedding rows */
    GPU_K_NORM = GPU_K_EMBED + GPU_T_COUNT,
    GPU_K_ROPE,
    GPU_K_ELEM,
    GPU_K_ATT_F32,
    GPU_K_ATT_F16,
    GPU_K_ROUTE,                          /* moe_route.comp: MOE_ROUTE */
    GPU_K_MI,                             /* + GPU_T_*: MATMUL_ID (matmul.comp, GEMM 2) */
    GPU_K_COUNT = GPU_K_MI + GPU_T_COUNT
} gpu_kernel;

/* Weight rows per workgroup of the matvec kernels (GEMM 0 and 2): matmul.comp's MV_ROWS. Four:
 * a row per subgroup of 32 at once, and twice the workgroups that eight rows made, which an H200
 * needed to keep enough loads in flight (BENCHMARKS.md). */
#define GPU_MV_ROWS 4

/* The prefill GEMM's output tile (GEMM 1): rows x tokens a workgroup. */
#define GPU_MM_ROWS   16
#define GPU_MM_TOKENS 16

/* Invocations per workgroup of kernel k: its local_size_x (the kernels' layout lines). Vulkan
 * reads it from the SPIR-V; a Metal host must pass it to every dispatch. */
uint32_t gpu_kernel_threads(gpu_kernel k);

/* A weight as the kernels take it. The host makes `region` (a device buffer over the bytes
 * [lo, hi) gpu_weight_layout names, or over a whole blob mapping holding them) and sets
 * region_size (its bytes, what a binding may reach) before gpu_weight_place. */
typedef struct gpu_weight {
    void *region;                              /* the host's */
    uint64_t region_size;
    uint64_t data_off, scales_off, biases_off; /* bytes from the region's base */
    uint64_t data_end, scales_end, biases_end;
    int vt;                                    /* GPU_T_* */
    uint32_t row_bytes, s_row_bytes, gs, stype;
} gpu_weight;

/* Append `region` (the host's vk_region * / mtl_region *) to the host's list of weight regions:
 * `list` is the address of its T ** array, *n its entries, *cap its capacity. Each host makes
 * one region per blob mapping (or per copied weight) and frees them all at close. MS_ENOMEM. */
int gpu_region_add(void *list, size_t *n, size_t *cap, void *region);

/* Fill w's type and row layout from t, and [*lo, *hi): the host addresses of every byte the
 * kernels read (data, and MLX scales and biases). MS_EUNSUPPORTED naming the tensor, its type
 * and `dev` when the kernels cannot run it; MS_EINVALID for a shape they cannot hold or one
 * past max_range bytes (what one binding can address). */
int gpu_weight_layout(gpu_weight *w, uint64_t *lo, uint64_t *hi, const backend_tensor *t, uint64_t max_range,
                      const char *dev);
/* The offsets of t's bytes in a region whose first byte is at host address `base`. */
void gpu_weight_place(gpu_weight *w, const backend_tensor *t, const void *base);

/* What the kernels of one run may address: the limits backend_reserve set, and the host's
 * binding alignment (bytes; a power of two, at least 4) and largest binding (bytes). */
typedef struct gpu_limits {
    int max_rows, max_cols, n_ctx, heads;   /* backend_reserve's */
    uint64_t align, max_range;              /* the device's: binding offset alignment, range */
} gpu_limits;
/* backend_impl.reserve of either host: the reserved sizes into the host's limits. */
void gpu_limits_reserve(gpu_limits *g, const backend_limits *l);

/* 1 when the kernels run ops of `kind` (backend_impl.supports of every host of them). */
int gpu_supports(backend_op_kind kind);

/* The largest head_dim attention.comp takes (its shared qs[] and acc[] per invocation): MLA's
 * 576 (DeepSeek's 64 + 512) fits. */
#define GPU_ATT_HEAD_DIM 1024

/* Refuse an op past the reserved limits or the kernels' (head_dim <= GPU_ATT_HEAD_DIM, n_rot <= 1024, token
 * ids inside the embedding), a bidirectional attention with a window, a ring, a start position or
 * sinks, sinks that are not a vector of `heads` values, an ADD_ROW_ID whose weight is not a
 * float [n_expert][rows] matrix, a MATMUL_HEADS whose pack is not [heads][rows][cols], a STORE_ROWS
 * with cols > stride, or a grouped MOE_ROUTE past 1024 experts, with fewer candidates than slots or
 * a bias that is not a float vector of n_expert values, before anything is recorded: MS_ERROR
 * saying which. */
int gpu_op_check(const gpu_limits *l, const backend_op *op);
/* Bytes of host-written parameters (token ids, rope tables) the ops of one run need. */
size_t gpu_params_size(const gpu_limits *l, const backend_op *ops, size_t n_ops);

/* One binding of a dispatch: bytes [offset, offset + range) of a buffer, a weight's region or
 * the run's parameters; offset is a multiple of gpu_limits.align. */
enum { GPU_B_NONE = 0, GPU_B_BUF, GPU_B_WEIGHT, GPU_B_PARAMS };
typedef struct gpu_bind {
    int kind;
    const backend_buf *buf;   /* GPU_B_BUF */
    const gpu_weight *w;      /* GPU_B_WEIGHT: w->region */
    uint64_t offset, range;
} gpu_bind;

typedef struct gpu_dispatch {
    gpu_kernel k;
    gpu_bind b[5];            /* bindings 1..5 */
    gpu_push pc;              /* wg_x set to gx */
    uint32_t gx, gy;          /* workgroups: a grid of rows of at most 65535 */
    /* for hosts that order dispatches themselves: the buffers written (wr2: MOE_ROUTE's ids, else
     * NULL), and those read */
    const backend_buf *wr, *wr2, *rd[3];
    int n_rd;
} gpu_dispatch;

/* The planning of one run: the host's limits, and the parameters it writes (token ids, rope
 * cos/sin tables) into host-visible memory it binds as GPU_B_PARAMS. */
typedef struct gpu_plan {
    const gpu_limits *l;
    uint8_t *params;          /* gpu_params_size bytes */
    size_t p_off;             /* next free byte of params */
    const backend_op *rope_prev;
    size_t rope_off;          /* its table */
} gpu_plan;

/* Plan op (checked by gpu_op_check): *n_out dispatches (0 or 1) into d. Writes the op's
 * parameters into p->params. MS_ERROR when a range falls outside its buffer or past max_range. */
int gpu_plan_op(gpu_plan *p, const backend_op *op, gpu_dispatch *d, int *n_out);

#endif
