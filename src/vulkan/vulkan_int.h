/* vulkan_int.h: what the files of src/vulkan share: the loader's function table, the device context and
 * the table of embedded SPIR-V. The kernels' variants and push constants are src/gpu's (gpu.h), shared
 * with the Metal host. */
#ifndef MSTORE_VULKAN_INT_H
#define MSTORE_VULKAN_INT_H

#define VK_NO_PROTOTYPES
#include <stdint.h>
/* The system's vulkan/vulkan.h by its full path (CMake finds it): "vulkan/vulkan.h" is this
 * module's own header, first on the include path. */
#include MSTORE_VULKAN_HEADER

#include "gpu/gpu.h"
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
    X(vkDeviceWaitIdle) X(vkCreateQueryPool) X(vkDestroyQueryPool) X(vkCmdResetQueryPool)                   \
    X(vkCmdWriteTimestamp) X(vkGetQueryPoolResults)
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

typedef struct vk_spirv {
    const char *name;
    const uint32_t *code;
    size_t nbytes;
} vk_spirv;
extern const vk_spirv vk_spirv_table[GPU_K_COUNT];

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

/* A run: its command buffer, fence, descriptor pool and the host-written params (token ids, rope
 * tables) its ops read. Two, so that a prefill chunk can be recorded while the last one runs.
 * A run's command buffer stays open (`recording`) until the next run or a read submits it
 * (`pending` until its fence is waited for): a read then appends the copy it needs to the run. */
typedef struct vk_frame {
    VkCommandBuffer cmd;
    VkFence fence;
    VkDescriptorPool pool;
    uint32_t pool_sets;
    vk_mem params;
    int recording, pending;
    /* $MSTORE_VULKAN_PROFILE: a timestamp before the first dispatch and after each, and which
     * kernel each one closes */
    VkQueryPool qp;
    uint32_t q_cap, n_q;
    gpu_kernel *qk;
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
    VkDeviceSize import_align; /* 0: no host import */
    VkCommandPool cpool;
    VkDescriptorSetLayout dsl;
    VkPipelineLayout layout;
    VkShaderModule modules[GPU_K_COUNT];
    VkPipeline pipes[GPU_K_COUNT];
    vk_frame frames[VK_FRAMES];
    int cur; /* the frame the next run records into */
    int last; /* the frame of the last run, -1 none */
    vk_mem dummy; /* bound where a kernel has no use for a binding */
    vk_region **regions;
    size_t n_regions, cap_regions;
    gpu_limits lim; /* align: minStorageBufferOffsetAlignment (at least 4), max_range:
                     * maxStorageBufferRange; the rest backend_reserve's */
    int verbose;
    /* $MSTORE_VULKAN_DISCRETE=1 (tests): no host import and no mapping of device memory, so that
     * an integrated or software device takes a discrete GPU's paths (staging uploads, zeroing by
     * the device, read-back by copy) */
    int discrete;
    unsigned long runs, submits, waits; /* forward passes, and their submits and host waits */
    unsigned long setup; /* submits (each waited for) of uploads and zeroing */
    vk_mem readback; /* host-visible: what a read copies out of device memory, grown as needed */
    int prof; /* $MSTORE_VULKAN_PROFILE=1 and the queue has timestamps */
    double ts_ns; /* nanoseconds per timestamp tick */
    uint64_t ts_mask;
    double prof_ns[GPU_K_COUNT], prof_run_ns; /* device time by kernel, and by whole runs */
    unsigned long prof_n[GPU_K_COUNT], prof_runs;
    char desc[192];
} vk_ctx;

/* vk_device.c */
int vk_mem_new(vk_ctx *c, vk_mem *m, VkDeviceSize size, int host_visible, const char *what);
void vk_mem_free(vk_ctx *c, vk_mem *m);
int vk_oneshot_begin(vk_ctx *c, VkCommandBuffer *cmd);
int vk_oneshot_end(vk_ctx *c, VkCommandBuffer cmd);
int vk_weight_region(vk_ctx *c, vk_region **out, const backend_tensor *t, uint64_t lo, uint64_t hi);
int vk_pipeline_get(vk_ctx *c, VkPipeline *out, gpu_kernel k);
int vk_frame_wait(vk_ctx *c, int i);
int vk_flush(vk_ctx *c);
void vk_ctx_close(void *vctx);

/* vk_run.c */
extern const backend_impl vk_impl;

#endif
