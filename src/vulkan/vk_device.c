/* vk_device.c: the loader, choosing and opening a device, device memory, weights' regions
 * (imported blob mappings or uploads) and pipelines. The ops are in vk_run.c. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vulkan/vulkan_int.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

/* ---------------------------------------------------------------- loader */

/* The devices of `inst`. Lavapipe (Mesa 22.3) initialises LLVM once, inside this call, and never
 * frees what that allocates; the loader unloads the driver before exit, so LeakSanitizer cannot
 * even name it, and whether it reports depends on the host CPU (seen on AVX-512 machines). The
 * sanitizer builds ignore allocations made inside the driver's enumeration: none are ours. */
static VkResult devices_enumerate(vk_fns *f, VkInstance inst, uint32_t *n, VkPhysicalDevice *pds)
{
    VkResult r;

#if defined(__SANITIZE_ADDRESS__)
    __lsan_disable();
#endif
    r = f->vkEnumeratePhysicalDevices(inst, n, pds);
#if defined(__SANITIZE_ADDRESS__)
    __lsan_enable();
#endif
    return r;
}

static void *loader;
static char loader_err[256];
static pthread_once_t loader_once = PTHREAD_ONCE_INIT;

/* The loader stays open for the life of the process: drivers keep threads and atexit handlers
 * that must not outlive their code. */
static void loader_open(void)
{
    static const char *const names[] = {"libvulkan.so.1", "libvulkan.so", "libvulkan.1.dylib", "libMoltenVK.dylib"};
    const char *e = NULL;

    for (size_t i = 0; i < sizeof names / sizeof names[0] && !loader; i++) {
        loader = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (!loader && !e)
            e = dlerror();
    }
    if (!loader)
        snprintf(loader_err, sizeof loader_err, "vulkan: no loader (%s)", e ? e : "libvulkan.so.1 not found");
}

static int fns_global(vk_fns *f)
{
    pthread_once(&loader_once, loader_open);
    if (!loader)
        return ms_err(MS_EUNSUPPORTED, "%s", loader_err);
    *(void **)&f->vkGetInstanceProcAddr = dlsym(loader, "vkGetInstanceProcAddr");
    if (!f->vkGetInstanceProcAddr)
        return ms_err(MS_EUNSUPPORTED, "vulkan: the loader has no vkGetInstanceProcAddr");
    f->vkCreateInstance = (PFN_vkCreateInstance)f->vkGetInstanceProcAddr(NULL, "vkCreateInstance");
    if (!f->vkCreateInstance)
        return ms_err(MS_EUNSUPPORTED, "vulkan: the loader has no vkCreateInstance");
    return 0;
}

static int instance_new(vk_fns *f, VkInstance *out)
{
    PFN_vkEnumerateInstanceExtensionProperties enum_ext;
    VkApplicationInfo app = {
        .sType = VK_STRUCTURE_TYPE_APPLICATION_INFO, .pApplicationName = "mstore", .apiVersion = VK_API_VERSION_1_1};
    VkInstanceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, .pApplicationInfo = &app};
    const char *portability = "VK_KHR_portability_enumeration";
    VkExtensionProperties ext[64];
    uint32_t n_ext = 64;
    VkResult r;

    *out = VK_NULL_HANDLE;
    if (fns_global(f) < 0)
        return MS_EUNSUPPORTED;
    enum_ext = (PFN_vkEnumerateInstanceExtensionProperties)f->vkGetInstanceProcAddr(
        NULL, "vkEnumerateInstanceExtensionProperties");
    /* MoltenVK is listed only to instances that ask for portability devices */
    if (enum_ext && enum_ext(NULL, &n_ext, ext) >= 0) {
        for (uint32_t i = 0; i < n_ext; i++) {
            if (strcmp(ext[i].extensionName, portability) == 0) {
                ci.enabledExtensionCount = 1;
                ci.ppEnabledExtensionNames = &portability;
                ci.flags |= VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR;
            }
        }
    }
    if ((r = f->vkCreateInstance(&ci, NULL, out)) != VK_SUCCESS)
        return ms_err(MS_EUNSUPPORTED, "vulkan: vkCreateInstance failed (%d): no usable driver (ICD)", (int)r);
#define X(fn)                                                                                                 \
    if (!(f->fn = (PFN_##fn)f->vkGetInstanceProcAddr(*out, #fn))) {                                           \
        PFN_vkDestroyInstance d = (PFN_vkDestroyInstance)f->vkGetInstanceProcAddr(*out, "vkDestroyInstance"); \
        if (d)                                                                                                \
            d(*out, NULL);                                                                                    \
        *out = VK_NULL_HANDLE;                                                                                \
        return ms_err(MS_EUNSUPPORTED, "vulkan: the loader lacks %s (Vulkan 1.1 is needed)", #fn);            \
    }
    VK_INSTANCE_FNS(X)
#undef X
    return 0;
}

/* ---------------------------------------------------------------- devices */

static const char *kind_name(VkPhysicalDeviceType t)
{
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
        return "discrete";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
        return "integrated";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
        return "virtual";
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
        return "software";
    default:
        return "other";
    }
}

/* Lower is better: auto takes the best hardware device. */
static int kind_rank(VkPhysicalDeviceType t)
{
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
        return 0;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
        return 1;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
        return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
        return 4;
    default:
        return 3;
    }
}

static int has_ext(vk_fns *f, VkPhysicalDevice pd, const char *name)
{
    uint32_t n = 0;
    VkExtensionProperties *e;
    int found = 0;

    if (f->vkEnumerateDeviceExtensionProperties(pd, NULL, &n, NULL) != VK_SUCCESS || !n)
        return 0;
    if (!(e = calloc(n, sizeof *e)))
        return 0;
    if (f->vkEnumerateDeviceExtensionProperties(pd, NULL, &n, e) >= 0)
        for (uint32_t i = 0; i < n && !found; i++)
            found = strcmp(e[i].extensionName, name) == 0;
    free(e);
    return found;
}

static uint64_t device_memory(vk_fns *f, VkPhysicalDevice pd)
{
    VkPhysicalDeviceMemoryProperties mp;
    uint64_t best = 0;

    f->vkGetPhysicalDeviceMemoryProperties(pd, &mp);
    for (uint32_t i = 0; i < mp.memoryHeapCount; i++)
        if ((mp.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) && mp.memoryHeaps[i].size > best)
            best = mp.memoryHeaps[i].size;
    return best;
}

/* The subgroup operations the kernels use: common.glsl's WG_SUM / WG_MAX (subgroupAdd,
 * subgroupMax) and matmul.comp's subgroupShuffleXor. */
#define SUBGROUP_OPS                                                                               \
    (VK_SUBGROUP_FEATURE_BASIC_BIT | VK_SUBGROUP_FEATURE_ARITHMETIC_BIT | VK_SUBGROUP_FEATURE_SHUFFLE_BIT)

/* Why this device cannot run the kernels, or NULL: compute queue, subgroup arithmetic and shuffles, and the
 * workgroup size and shared memory the kernels take. */
static const char *unusable(vk_fns *f, VkPhysicalDevice pd, uint32_t *qfam)
{
    VkPhysicalDeviceSubgroupProperties sg = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &sg};
    VkQueueFamilyProperties qf[16];
    uint32_t nq = 16;

    f->vkGetPhysicalDeviceProperties2(pd, &p2);
    if (p2.properties.apiVersion < VK_API_VERSION_1_1)
        return "Vulkan 1.1 is needed";
    f->vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, qf);
    *qfam = UINT32_MAX;
    for (uint32_t i = 0; i < nq && *qfam == UINT32_MAX; i++)
        if (qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT)
            *qfam = i;
    if (*qfam == UINT32_MAX)
        return "no compute queue";
    if (!(sg.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) ||
        (sg.supportedOperations & SUBGROUP_OPS) != SUBGROUP_OPS)
        return "no subgroup arithmetic and shuffles in compute shaders";
    if (p2.properties.limits.maxComputeWorkGroupInvocations < 256 ||
        p2.properties.limits.maxComputeSharedMemorySize < 16384)
        return "compute workgroups smaller than 256 invocations / 16 KiB shared memory";
    return NULL;
}

int vulkan_devices_list(backend_device_info **list, size_t *n, char *why, size_t why_len)
{
    vk_fns f = {0};
    VkInstance inst;
    VkPhysicalDevice pds[16];
    uint32_t np = 16;
    backend_device_info *l;
    int rc = 0;

    if (instance_new(&f, &inst) < 0) {
        if (why && why_len)
            snprintf(why, why_len, "%s", ms_err_msg());
        ms_err_clear();
        return 0;
    }
    if (devices_enumerate(&f, inst, &np, pds) < 0 || np == 0) {
        if (why && why_len)
            snprintf(why, why_len, "vulkan: the loader found no device");
        goto done;
    }
    if (!(l = realloc(*list, (*n + np) * sizeof *l))) {
        rc = ms_err(MS_ENOMEM, "out of memory");
        goto done;
    }
    *list = l;
    for (uint32_t i = 0; i < np; i++) {
        VkPhysicalDeviceProperties p;
        backend_device_info *d = &l[(*n)++];
        uint32_t q;

        f.vkGetPhysicalDeviceProperties(pds[i], &p);
        memset(d, 0, sizeof *d);
        snprintf(d->name, sizeof d->name, "%.127s", p.deviceName);
        snprintf(d->kind, sizeof d->kind, "%s", kind_name(p.deviceType));
        snprintf(d->api, sizeof d->api, "vulkan");
        d->memory = device_memory(&f, pds[i]);
        d->host_import = has_ext(&f, pds[i], VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME);
        if (unusable(&f, pds[i], &q) && why && why_len)
            snprintf(why, why_len, "vulkan: %s: %s", p.deviceName, unusable(&f, pds[i], &q));
    }
done:
    f.vkDestroyInstance(inst, NULL);
    return rc;
}

/* The best usable device: hardware before software; software only when asked for by name. */
static int pick_device(vk_ctx *c, int by_name)
{
    VkPhysicalDevice pds[16];
    uint32_t np = 16, qfam = 0;
    int best = -1, best_rank = 99;
    char why[256] = "";

    if (devices_enumerate(&c->f, c->inst, &np, pds) < 0 || np == 0)
        return ms_err(MS_EUNSUPPORTED, "vulkan: the loader found no device");
    for (uint32_t i = 0; i < np; i++) {
        VkPhysicalDeviceProperties p;
        const char *u;
        uint32_t q;

        c->f.vkGetPhysicalDeviceProperties(pds[i], &p);
        if ((u = unusable(&c->f, pds[i], &q))) {
            snprintf(why, sizeof why, "%.120s: %.120s", p.deviceName, u);
            continue;
        }
        if (!by_name && p.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU) {
            snprintf(why, sizeof why, "only a software implementation (%.120s); ask for it with --device vulkan",
                     p.deviceName);
            continue;
        }
        if (kind_rank(p.deviceType) < best_rank) {
            best_rank = kind_rank(p.deviceType);
            best = (int)i;
            qfam = q;
        }
    }
    if (best < 0)
        return ms_err(MS_EUNSUPPORTED, "vulkan: no usable device: %s", why);
    c->phys = pds[best];
    c->qfam = qfam;
    return 0;
}

static int device_open(vk_ctx *c)
{
    VkPhysicalDeviceExternalMemoryHostPropertiesEXT hp = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_MEMORY_HOST_PROPERTIES_EXT};
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                   .queueFamilyIndex = c->qfam,
                                   .queueCount = 1,
                                   .pQueuePriorities = &prio};
    const char *ext = VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME;
    VkDeviceCreateInfo dci = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, .queueCreateInfoCount = 1, .pQueueCreateInfos = &qci};
    const char *discrete = getenv("MSTORE_VULKAN_DISCRETE");
    int import;

    VkResult r;

    c->f.vkGetPhysicalDeviceProperties(c->phys, &c->props);
    /* A discrete GPU could import the blob mappings too (NVIDIA offers the extension), but then
     * every forward would read the weights across PCIe: it gets them uploaded to its own memory. */
    c->discrete =
        (discrete && strcmp(discrete, "1") == 0) || c->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU;
    import = has_ext(&c->f, c->phys, ext) && !c->discrete;
    if (import) {
        p2.pNext = &hp;
        dci.enabledExtensionCount = 1;
        dci.ppEnabledExtensionNames = &ext;
        c->f.vkGetPhysicalDeviceProperties2(c->phys, &p2);
    }
    c->f.vkGetPhysicalDeviceMemoryProperties(c->phys, &c->memp);
    c->lim.align = c->props.limits.minStorageBufferOffsetAlignment;
    if (c->lim.align < 4)
        c->lim.align = 4;
    c->lim.max_range = c->props.limits.maxStorageBufferRange;
    if ((r = c->f.vkCreateDevice(c->phys, &dci, NULL, &c->dev)) != VK_SUCCESS)
        return ms_err(MS_EUNSUPPORTED, "vulkan: %s: vkCreateDevice failed (%d)", c->props.deviceName, (int)r);
#define X(fn)                                                         \
    if (!(c->f.fn = (PFN_##fn)c->f.vkGetDeviceProcAddr(c->dev, #fn))) \
        return ms_err(MS_EUNSUPPORTED, "vulkan: %s: no %s", c->props.deviceName, #fn);
    VK_DEVICE_FNS(X)
#undef X
    if (import) {
        c->f.vkGetMemoryHostPointerPropertiesEXT = (PFN_vkGetMemoryHostPointerPropertiesEXT)c->f.vkGetDeviceProcAddr(
            c->dev, "vkGetMemoryHostPointerPropertiesEXT");
        if (c->f.vkGetMemoryHostPointerPropertiesEXT)
            c->import_align = hp.minImportedHostPointerAlignment ? hp.minImportedHostPointerAlignment : 4096;
    }
    c->f.vkGetDeviceQueue(c->dev, c->qfam, 0, &c->queue);
    snprintf(c->desc, sizeof c->desc, "vulkan: %.120s (%s%s%s)", c->props.deviceName, kind_name(c->props.deviceType),
             c->import_align ? ", weights imported in place" : ", weights uploaded",
             c->discrete && c->props.deviceType != VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU ? ", as a discrete GPU" : "");
    return 0;
}

/* ---------------------------------------------------------------- memory */

static int mem_type(const vk_ctx *c, uint32_t bits, VkMemoryPropertyFlags want, VkMemoryPropertyFlags prefer)
{
    int fallback = -1;

    for (uint32_t i = 0; i < c->memp.memoryTypeCount; i++) {
        VkMemoryPropertyFlags fl = c->memp.memoryTypes[i].propertyFlags;
        if (!(bits & (1u << i)) || (fl & want) != want)
            continue;
        if ((fl & prefer) == prefer)
            return (int)i;
        if (fallback < 0)
            fallback = (int)i;
    }
    return fallback;
}

#define HOST_MEM (VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT)

int vk_mem_new(vk_ctx *c, vk_mem *m, VkDeviceSize size, int host_visible, const char *what)
{
    VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                             .size = size ? size : 4,
                             .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                      VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                             .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
    VkMemoryRequirements req;
    VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    int t;

    memset(m, 0, sizeof *m);
    if (c->f.vkCreateBuffer(c->dev, &bi, NULL, &m->buf) != VK_SUCCESS)
        return ms_err(MS_ENOMEM, "vulkan: cannot create a buffer of %llu bytes for %s", (unsigned long long)size, what);
    c->f.vkGetBufferMemoryRequirements(c->dev, m->buf, &req);
    t = host_visible ? mem_type(c, req.memoryTypeBits, HOST_MEM, VK_MEMORY_PROPERTY_HOST_CACHED_BIT)
                     : mem_type(c, req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0);
    if (t < 0 && !host_visible)
        t = mem_type(c, req.memoryTypeBits, 0, 0);
    ai.allocationSize = req.size;
    ai.memoryTypeIndex = (uint32_t)t;
    if (t < 0 || c->f.vkAllocateMemory(c->dev, &ai, NULL, &m->mem) != VK_SUCCESS) {
        c->f.vkDestroyBuffer(c->dev, m->buf, NULL);
        m->buf = VK_NULL_HANDLE;
        return ms_err(MS_ENOMEM, "vulkan: out of device memory for %s (%llu bytes)", what, (unsigned long long)size);
    }
    c->f.vkBindBufferMemory(c->dev, m->buf, m->mem, 0);
    m->size = bi.size;
    /* host-visible device memory (integrated GPUs, lavapipe): read and zeroed through the mapping */
    if ((c->memp.memoryTypes[t].propertyFlags & HOST_MEM) == HOST_MEM && (host_visible || !c->discrete) &&
        c->f.vkMapMemory(c->dev, m->mem, 0, VK_WHOLE_SIZE, 0, &m->host) != VK_SUCCESS)
        m->host = NULL;
    if (host_visible && !m->host) {
        vk_mem_free(c, m);
        return ms_err(MS_EIO, "vulkan: cannot map the host buffer for %s", what);
    }
    return 0;
}

void vk_mem_free(vk_ctx *c, vk_mem *m)
{
    if (m->buf)
        c->f.vkDestroyBuffer(c->dev, m->buf, NULL);
    if (m->mem)
        c->f.vkFreeMemory(c->dev, m->mem, NULL); /* unmaps it too */
    memset(m, 0, sizeof *m);
}

/* One-shot command buffers for set-up work (uploads, zeroing), waited for at once. */
int vk_oneshot_begin(vk_ctx *c, VkCommandBuffer *cmd)
{
    VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                      .commandPool = c->cpool,
                                      .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                      .commandBufferCount = 1};
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};

    if (c->f.vkAllocateCommandBuffers(c->dev, &ai, cmd) != VK_SUCCESS ||
        c->f.vkBeginCommandBuffer(*cmd, &bi) != VK_SUCCESS)
        return ms_err(MS_EIO, "vulkan: cannot begin a command buffer");
    return 0;
}

int vk_oneshot_end(vk_ctx *c, VkCommandBuffer cmd)
{
    VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &cmd};
    VkFence fence = VK_NULL_HANDLE;
    int rc = 0;

    if (c->f.vkEndCommandBuffer(cmd) != VK_SUCCESS || c->f.vkCreateFence(c->dev, &fi, NULL, &fence) != VK_SUCCESS ||
        c->f.vkQueueSubmit(c->queue, 1, &si, fence) != VK_SUCCESS ||
        c->f.vkWaitForFences(c->dev, 1, &fence, VK_TRUE, UINT64_MAX) != VK_SUCCESS)
        rc = ms_err(MS_EIO, "vulkan: a one-shot submission failed");
    if (fence)
        c->f.vkDestroyFence(c->dev, fence, NULL);
    c->f.vkFreeCommandBuffers(c->dev, c->cpool, 1, &cmd);
    return rc;
}

/* ---------------------------------------------------------------- weights' regions */

static int region_add(vk_ctx *c, vk_region *r)
{
    return gpu_region_add(&c->regions, &c->n_regions, &c->cap_regions, r);
}

/* Import [base, base + nbytes) of host memory as a device buffer: no copy. 0, or a negative code
 * when the device refuses (the caller uploads instead). */
static int region_import(vk_ctx *c, vk_region *r)
{
    VkMemoryHostPointerPropertiesEXT hp = {.sType = VK_STRUCTURE_TYPE_MEMORY_HOST_POINTER_PROPERTIES_EXT};
    VkExternalMemoryBufferCreateInfo eb = {.sType = VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO,
                                           .handleTypes = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT};
    VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                             .pNext = &eb,
                             .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT,
                             .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
    VkImportMemoryHostPointerInfoEXT ii = {.sType = VK_STRUCTURE_TYPE_IMPORT_MEMORY_HOST_POINTER_INFO_EXT,
                                           .handleType = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT};
    VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .pNext = &ii};
    VkMemoryRequirements req;
    VkDeviceSize size = (r->nbytes + c->import_align - 1) / c->import_align * c->import_align;
    int t;

    if (!c->import_align || ((uintptr_t)r->base % c->import_align) != 0)
        return MS_EUNSUPPORTED;
    if (c->f.vkGetMemoryHostPointerPropertiesEXT(c->dev, VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT,
                                                 r->base, &hp) != VK_SUCCESS)
        return MS_EUNSUPPORTED;
    bi.size = size;
    if (c->f.vkCreateBuffer(c->dev, &bi, NULL, &r->m.buf) != VK_SUCCESS)
        return MS_EUNSUPPORTED;
    c->f.vkGetBufferMemoryRequirements(c->dev, r->m.buf, &req);
    t = mem_type(c, req.memoryTypeBits & hp.memoryTypeBits, 0, 0);
    ii.pHostPointer = (void *)(uintptr_t)r->base;
    ai.allocationSize = size;
    ai.memoryTypeIndex = (uint32_t)t;
    if (t < 0 || c->f.vkAllocateMemory(c->dev, &ai, NULL, &r->m.mem) != VK_SUCCESS ||
        c->f.vkBindBufferMemory(c->dev, r->m.buf, r->m.mem, 0) != VK_SUCCESS) {
        vk_mem_free(c, &r->m);
        return MS_EUNSUPPORTED;
    }
    r->m.size = size;
    r->imported = 1;
    return 0;
}

/* Copy [base, base + nbytes) into a new device buffer: straight through its mapping when the
 * device memory is host-visible, else through a staging buffer of at most 64 MiB. A terminal
 * sees progress once a model's uploads pass 256 MiB. */
static int region_upload(vk_ctx *c, vk_region *r)
{
    static uint64_t total; /* this process's uploads, for the progress line */
    VkDeviceSize size = (r->nbytes + 7) & ~(VkDeviceSize)3, chunk = 64u << 20;
    vk_mem staging = {0};
    int rc;

    if ((rc = vk_mem_new(c, &r->m, size, 0, "a weight")) < 0)
        return rc;
    if (r->m.host) {
        memcpy(r->m.host, r->base, r->nbytes);
        memset((uint8_t *)r->m.host + r->nbytes, 0, size - r->nbytes);
    } else {
        if (chunk > size)
            chunk = size;
        if ((rc = vk_mem_new(c, &staging, chunk, 1, "the upload staging buffer")) < 0)
            return rc;
        for (VkDeviceSize done = 0; done < size && rc == 0; done += chunk) {
            VkDeviceSize len = size - done < chunk ? size - done : chunk, have = 0;
            VkCommandBuffer cmd;
            VkBufferCopy cp = {0, done, len};

            memset(staging.host, 0, len);
            if (done < r->nbytes)
                have = r->nbytes - done < len ? r->nbytes - done : len;
            memcpy(staging.host, r->base + done, have);
            if ((rc = vk_oneshot_begin(c, &cmd)) < 0)
                break;
            c->f.vkCmdCopyBuffer(cmd, staging.buf, r->m.buf, 1, &cp);
            rc = vk_oneshot_end(c, cmd);
            c->setup++;
        }
        vk_mem_free(c, &staging);
        if (rc < 0)
            return rc;
    }
    total += r->nbytes;
    if (total >= (256u << 20) && isatty(2))
        fprintf(stderr, "\rmstore: uploaded %llu MiB of weights to the device", (unsigned long long)(total >> 20));
    return 0;
}

/* The region that holds [lo, hi) of tensor t: its blob mapping, imported once and shared, or an
 * upload of just that range. */
int vk_weight_region(vk_ctx *c, vk_region **out, const backend_tensor *t, uint64_t lo, uint64_t hi)
{
    const uint8_t *map = t->map;
    vk_region *r;
    int rc;

    *out = NULL;
    if (map && c->import_align) {
        for (size_t i = 0; i < c->n_regions; i++) {
            if (c->regions[i]->imported && c->regions[i]->base == map && c->regions[i]->nbytes == t->map_nbytes) {
                *out = c->regions[i];
                return 0;
            }
        }
    }
    if (!(r = calloc(1, sizeof *r)))
        return ms_err(MS_ENOMEM, "out of memory");
    if (map && c->import_align && (uintptr_t)map <= lo && hi <= (uintptr_t)map + t->map_nbytes) {
        r->base = map;
        r->nbytes = t->map_nbytes;
        if (region_import(c, r) == 0)
            goto done;
    }
    r->base = (const uint8_t *)(uintptr_t)lo;
    r->nbytes = hi - lo;
    if ((rc = region_upload(c, r)) < 0) {
        free(r);
        return ms_err_ctx("tensor '%s'", t->name);
    }
done:
    if ((rc = region_add(c, r)) < 0) {
        vk_mem_free(c, &r->m);
        free(r);
        return rc;
    }
    *out = r;
    return 0;
}

/* ---------------------------------------------------------------- pipelines */

/* Built on first use: a model needs the variants of its own weight types only, and each costs a
 * driver compile. */
int vk_pipeline_get(vk_ctx *c, VkPipeline *out, gpu_kernel k)
{
    VkShaderModuleCreateInfo mi = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                   .codeSize = vk_spirv_table[k].nbytes,
                                   .pCode = vk_spirv_table[k].code};
    VkComputePipelineCreateInfo pi = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                  .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                  .pName = "main"},
        .layout = c->layout,
    };

    if (!c->pipes[k]) {
        if (!c->modules[k] && c->f.vkCreateShaderModule(c->dev, &mi, NULL, &c->modules[k]) != VK_SUCCESS)
            return ms_err(MS_EIO, "vulkan: cannot load kernel %s", vk_spirv_table[k].name);
        pi.stage.module = c->modules[k];
        if (c->f.vkCreateComputePipelines(c->dev, VK_NULL_HANDLE, 1, &pi, NULL, &c->pipes[k]) != VK_SUCCESS)
            return ms_err(MS_EIO, "vulkan: cannot build kernel %s", vk_spirv_table[k].name);
    }
    *out = c->pipes[k];
    return 0;
}

/* ---------------------------------------------------------------- open / close */

static void ctx_close(vk_ctx *c)
{
    if (!c)
        return;
    if (c->dev) {
        c->f.vkDeviceWaitIdle(c->dev);
        for (size_t i = 0; i < c->n_regions; i++) {
            vk_mem_free(c, &c->regions[i]->m);
            free(c->regions[i]);
        }
        for (int i = 0; i < VK_FRAMES; i++) {
            vk_mem_free(c, &c->frames[i].params);
            if (c->frames[i].fence)
                c->f.vkDestroyFence(c->dev, c->frames[i].fence, NULL);
            if (c->frames[i].pool)
                c->f.vkDestroyDescriptorPool(c->dev, c->frames[i].pool, NULL);
            if (c->frames[i].qp)
                c->f.vkDestroyQueryPool(c->dev, c->frames[i].qp, NULL);
            free(c->frames[i].qk);
        }
        vk_mem_free(c, &c->dummy);
        vk_mem_free(c, &c->readback);
        for (int k = 0; k < GPU_K_COUNT; k++) {
            if (c->pipes[k])
                c->f.vkDestroyPipeline(c->dev, c->pipes[k], NULL);
            if (c->modules[k])
                c->f.vkDestroyShaderModule(c->dev, c->modules[k], NULL);
        }
        if (c->layout)
            c->f.vkDestroyPipelineLayout(c->dev, c->layout, NULL);
        if (c->dsl)
            c->f.vkDestroyDescriptorSetLayout(c->dev, c->dsl, NULL);
        if (c->cpool)
            c->f.vkDestroyCommandPool(c->dev, c->cpool, NULL);
        c->f.vkDestroyDevice(c->dev, NULL);
    }
    if (c->inst)
        c->f.vkDestroyInstance(c->inst, NULL);
    free(c->regions);
    free(c);
}

/* $MSTORE_VULKAN_PROFILE's report: device time by kernel, most first. */
static void profile_print(const vk_ctx *c)
{
    int order[GPU_K_COUNT], n = 0;

    fprintf(stderr, "mstore: vulkan profile: %s: %lu runs timed, %.3f ms of device time a run\n", c->props.deviceName,
            c->prof_runs, c->prof_run_ns / 1e6 / (double)c->prof_runs);
    for (int k = 0; k < GPU_K_COUNT; k++) {
        int i = n;
        if (!c->prof_n[k])
            continue;
        n++;
        for (; i > 0 && c->prof_ns[order[i - 1]] < c->prof_ns[k]; i--)
            order[i] = order[i - 1];
        order[i] = k;
    }
    for (int i = 0; i < n; i++) {
        int k = order[i];
        fprintf(stderr, "mstore: vulkan profile: %-12s %7lu dispatches %10.3f ms %9.2f us each %5.1f%%\n",
                vk_spirv_table[k].name, c->prof_n[k], c->prof_ns[k] / 1e6, c->prof_ns[k] / 1e3 / (double)c->prof_n[k],
                100.0 * c->prof_ns[k] / c->prof_run_ns);
    }
}

void vk_ctx_close(void *vctx)
{
    vk_ctx *c = vctx;

    if (c && c->verbose && c->runs)
        fprintf(stderr, "mstore: vulkan: %lu runs, %lu submits, %lu host waits (and %lu set-up submits at open)\n",
                c->runs, c->submits, c->waits, c->setup);
    if (c && c->prof && c->prof_runs && c->prof_run_ns > 0)
        profile_print(c);
    ctx_close(c);
}

/* $MSTORE_VULKAN_PROFILE=1: timestamps around every dispatch, where the queue has them. */
static int profile_init(vk_ctx *c)
{
    const char *e = getenv("MSTORE_VULKAN_PROFILE");
    VkQueueFamilyProperties qf[16];
    uint32_t nq = 16, bits;

    if (!e || strcmp(e, "1") != 0)
        return 0;
    c->f.vkGetPhysicalDeviceQueueFamilyProperties(c->phys, &nq, qf);
    bits = c->qfam < nq ? qf[c->qfam].timestampValidBits : 0;
    if (bits == 0 || c->props.limits.timestampPeriod <= 0) {
        fprintf(stderr, "mstore: vulkan profile: %s has no timestamps on its compute queue\n", c->props.deviceName);
        return 0;
    }
    c->prof = 1;
    c->ts_ns = c->props.limits.timestampPeriod;
    c->ts_mask = bits >= 64 ? UINT64_MAX : (UINT64_C(1) << bits) - 1;
    return 0;
}

static int objects_new(vk_ctx *c)
{
    VkDescriptorSetLayoutBinding b[5];
    VkDescriptorSetLayoutCreateInfo li = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO, .bindingCount = 5, .pBindings = b};
    VkPushConstantRange pr = {VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(gpu_push)};
    VkPipelineLayoutCreateInfo pli = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                      .setLayoutCount = 1,
                                      .pSetLayouts = &c->dsl,
                                      .pushConstantRangeCount = 1,
                                      .pPushConstantRanges = &pr};
    VkCommandPoolCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                  .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                  .queueFamilyIndex = c->qfam};
    VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    int rc;

    for (uint32_t i = 0; i < 5; i++)
        b[i] = (VkDescriptorSetLayoutBinding){i + 1, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT,
                                              NULL}; /* from 1: common.glsl says why */
    if (c->f.vkCreateDescriptorSetLayout(c->dev, &li, NULL, &c->dsl) != VK_SUCCESS ||
        c->f.vkCreatePipelineLayout(c->dev, &pli, NULL, &c->layout) != VK_SUCCESS ||
        c->f.vkCreateCommandPool(c->dev, &ci, NULL, &c->cpool) != VK_SUCCESS)
        return ms_err(MS_EIO, "vulkan: cannot create the pipeline layout or command pool");
    for (int i = 0; i < VK_FRAMES; i++) {
        VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                          .commandPool = c->cpool,
                                          .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                          .commandBufferCount = 1};
        if (c->f.vkAllocateCommandBuffers(c->dev, &ai, &c->frames[i].cmd) != VK_SUCCESS ||
            c->f.vkCreateFence(c->dev, &fi, NULL, &c->frames[i].fence) != VK_SUCCESS)
            return ms_err(MS_EIO, "vulkan: cannot create command buffers");
    }
    if ((rc = vk_mem_new(c, &c->dummy, 256, 0, "an unused binding")) < 0)
        return rc;
    c->last = -1;
    return profile_init(c);
}

int vulkan_backend_new(const backend_impl **impl_out, void **ctx_out, const backend_opts *o, int by_name)
{
    vk_ctx *c = calloc(1, sizeof *c);
    int rc;

    *impl_out = NULL;
    *ctx_out = NULL;
    if (!c)
        return ms_err(MS_ENOMEM, "out of memory");
    c->verbose = o ? o->verbose : 0;
    if ((rc = instance_new(&c->f, &c->inst)) < 0 || (rc = pick_device(c, by_name)) < 0 || (rc = device_open(c)) < 0 ||
        (rc = objects_new(c)) < 0) {
        ctx_close(c);
        return rc;
    }
    *impl_out = &vk_impl;
    *ctx_out = c;
    return 0;
}
