/* vulkan_int.h: what the files of src/vulkan share: the loader's function table, the device context, the
 * kernels' push constants and the table of embedded SPIR-V. */
#ifndef MSTORE_VULKAN_INT_H
#define MSTORE_VULKAN_INT_H

#define VK_NO_PROTOTYPES
#include <stdint.h>
/* The system's vulkan/vulkan.h by its full path (CMake finds it): "vulkan/vulkan.h" is this
 * module's own header, first on the include path. */
#include MSTORE_VULKAN_HEADER

#include "util/util.h"
#include "vulkan/vulkan.h"

/* Entry points, loaded through vkGetInstanceProcAddr / vkGetDeviceProcAddr. */
/* clang-format off */
#define VK_INSTANCE_FNS(X)                                                                                   \
    X(vkDestroyInstance) X(vkEnumeratePhysicalDevices) X(vkGetPhysicalDeviceProperties)                      \
    X(vkGetPhysicalDeviceProperties2) X(vkGetPhysicalDeviceMemoryProperties)                                 \
    X(vkGetPhysicalDeviceQueueFamilyProperties) X(vkEnumerateDeviceExtensionProperties) X(vkCreateDevice)    \
    X(vkGetDeviceProcAddr)
#define VK_DEVICE_FNS(X)                                                                                     \
    X(vkDestroyDevice) X(vkGetDeviceQueue) X(vkCreateBuffer) X(vkDestroyBuffer)                              \
    X(vkGetBufferMemoryRequirements) X(vkAllocateMemory) X(vkFreeMemory) X(vkBindBufferMemory)               \
    X(vkMapMemory) X(vkUnmapMemory) X(vkCreateCommandPool) X(vkDestroyCommandPool)                           \
    X(vkAllocateCommandBuffers) X(vkFreeCommandBuffers) X(vkBeginCommandBuffer) X(vkEndCommandBuffer) X(vkQueueSubmit)               \
    X(vkCreateFence) X(vkDestroyFence) X(vkWaitForFences) X(vkResetFences) X(vkCreateShaderModule)           \
    X(vkDestroyShaderModule) X(vkCreateComputePipelines) X(vkDestroyPipeline) X(vkCreatePipelineLayout)      \
    X(vkDestroyPipelineLayout) X(vkCreateDescriptorSetLayout) X(vkDestroyDescriptorSetLayout)                \
    X(vkCreateDescriptorPool) X(vkDestroyDescriptorPool) X(vkResetDescriptorPool)                            \
    X(vkAllocateDescriptorSets) X(vkUpdateDescriptorSets) X(vkCmdBindPipeline) X(vkCmdBindDescriptorSets)    \
    X(vkCmdPushConstants) X(vkCmdDispatch) X(vkCmdPipelineBarrier) X(vkCmdCopyBuffer) X(vkCmdFillBuffer)     \
    X(vkDeviceWaitIdle)
/* clang-format on */

typedef struct vk_fns {
    PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr;
    PFN_vkCreateInstance vkCreateInstance;
#define X(f) PFN_##f f;
    VK_INSTANCE_FNS(X)
    VK_DEVICE_FNS(X)
#undef X
    PFN_vkGetMemoryHostPointerPropertiesEXT vkGetMemoryHostPointerPropertiesEXT; /* NULL: no import */
} vk_fns;

/* The kernels' push constants: common.glsl's PC, member for member. */
typedef struct vk_push {
    uint32_t n, rows, cols, dst_off;
    uint32_t src_off, w_off, row_bytes, a_off;
    uint32_t b_off, s_row_bytes, gs, stype;
    uint32_t heads, kv_heads, head_dim, n_rot;
    uint32_t pos0, interleaved, mode, wtype;
    float eps, scale;
    uint32_t n_ctx, wg_x;
} vk_push;

/* Weight types the kernels run, in the order of the generated variants (CMakeLists.txt). */
enum {
    VK_T_F32,
    VK_T_F16,
    VK_T_BF16,
    VK_T_Q8_0,
    VK_T_Q4_0,
    VK_T_Q4_1,
    VK_T_Q5_0,
    VK_T_Q5_1,
    VK_T_Q4_K,
    VK_T_Q5_K,
    VK_T_Q6_K,
    VK_T_MLX4,
    VK_T_MLX8,
    VK_T_COUNT
};
/* Kernel variants, in the order of vk_spirv_table. */
typedef enum vk_kernel {
    VK_K_MV = 0, /* + VK_T_*: decode matvec */
    VK_K_MM = VK_K_MV + VK_T_COUNT, /* + VK_T_*: prefill GEMM */
    VK_K_EMBED = VK_K_MM + VK_T_COUNT, /* + VK_T_*: embedding rows */
    VK_K_NORM = VK_K_EMBED + VK_T_COUNT,
    VK_K_ROPE,
    VK_K_ELEM,
    VK_K_ATT_F32,
    VK_K_ATT_F16,
    VK_K_COUNT
} vk_kernel;

typedef struct vk_spirv {
    const char *name;
    const uint32_t *code;
    size_t nbytes;
} vk_spirv;
extern const vk_spirv vk_spirv_table[VK_K_COUNT];

/* Device memory and the buffer over it. `host`: its mapping when host-visible, else NULL. */
typedef struct vk_mem {
    VkBuffer buf;
    VkDeviceMemory mem;
    VkDeviceSize size;
    void *host;
} vk_mem;

/* A range of host memory the device reads weights from: an imported blob mapping (shared by
 * every tensor in it) or one tensor's bytes uploaded. */
typedef struct vk_region {
    const uint8_t *base;
    uint64_t nbytes;
    vk_mem m;
    int imported;
} vk_region;

/* A weight as the kernels take it: the region and byte offsets into it. */
typedef struct vk_weight {
    vk_region *reg;
    uint64_t data_off, scales_off, biases_off; /* bytes from reg->base */
    uint64_t data_end, scales_end, biases_end;
    int vt; /* VK_T_* */
    uint32_t row_bytes, s_row_bytes, gs, stype;
} vk_weight;

/* A run in flight: its command buffer, fence, descriptor pool and the host-written params
 * (token ids, rope tables) its ops read. Two, so that a prefill chunk can be recorded while the
 * last one runs. */
typedef struct vk_frame {
    VkCommandBuffer cmd;
    VkFence fence;
    VkDescriptorPool pool;
    uint32_t pool_sets;
    vk_mem params;
    int pending;
} vk_frame;

#define VK_FRAMES 2

typedef struct vk_ctx {
    vk_fns f;
    VkInstance inst;
    VkPhysicalDevice phys;
    VkDevice dev;
    VkQueue queue;
    uint32_t qfam;
    VkPhysicalDeviceProperties props;
    VkPhysicalDeviceMemoryProperties memp;
    VkDeviceSize align; /* minStorageBufferOffsetAlignment */
    VkDeviceSize max_range; /* maxStorageBufferRange */
    VkDeviceSize import_align; /* 0: no host import */
    VkCommandPool cpool;
    VkDescriptorSetLayout dsl;
    VkPipelineLayout layout;
    VkShaderModule modules[VK_K_COUNT];
    VkPipeline pipes[VK_K_COUNT];
    vk_frame frames[VK_FRAMES];
    int cur; /* the frame the next run records into */
    int last; /* the frame of the last run, -1 none */
    vk_mem dummy; /* bound where a kernel has no use for a binding */
    vk_region **regions;
    size_t n_regions, cap_regions;
    int max_rows, max_cols, n_ctx, heads;
    int verbose;
    /* $MSTORE_VULKAN_DISCRETE=1 (tests): no host import and no mapping of device memory, so that
     * an integrated or software device takes a discrete GPU's paths (staging uploads, zeroing by
     * the device, read-back by copy) */
    int discrete;
    unsigned long runs, submits, waits;   /* forward passes, and their submits and host waits */
    unsigned long setup;                  /* submits (each waited for) of uploads and zeroing */
    char desc[192];
} vk_ctx;

/* vk_device.c */
int vk_mem_new(vk_ctx *c, vk_mem *m, VkDeviceSize size, int host_visible, const char *what);
void vk_mem_free(vk_ctx *c, vk_mem *m);
int vk_oneshot_begin(vk_ctx *c, VkCommandBuffer *cmd);
int vk_oneshot_end(vk_ctx *c, VkCommandBuffer cmd);
int vk_weight_region(vk_ctx *c, vk_region **out, const runtime_tensor *t, uint64_t lo, uint64_t hi);
int vk_pipeline_get(vk_ctx *c, VkPipeline *out, vk_kernel k);
int vk_frame_wait(vk_ctx *c, int i);
void vk_ctx_close(void *vctx);

/* vk_run.c */
extern const backend_impl vk_impl;

#endif
