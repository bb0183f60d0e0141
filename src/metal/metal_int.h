/* metal_int.h: what the files of src/metal share: the device context, the selectors it sends, and
 * the table of embedded MSL. */
#ifndef MSTORE_METAL_INT_H
#define MSTORE_METAL_INT_H

#include <stddef.h>
#include <stdint.h>

#include "gpu/gpu.h"
#include "metal/metal.h"
#include "metal/mtl_rt.h"
#include "util/util.h"

typedef struct mtl_msl {
    const char *name;
    const char *text;   /* NUL-terminated MSL source */
    size_t len;
} mtl_msl;
extern const mtl_msl mtl_msl_table[GPU_K_COUNT];

/* Every selector the host sends, registered once at open. */
/* clang-format off */
#define MTL_SELS(X)                                                                                       \
    X(alloc, "alloc") X(initWithUTF8String, "initWithUTF8String:") X(UTF8String, "UTF8String")         \
    X(release, "release") X(retain, "retain") X(name, "name") X(localizedDescription, "localizedDescription") \
    X(hasUnifiedMemory, "hasUnifiedMemory") X(maxBufferLength, "maxBufferLength")                       \
    X(recommendedMaxWorkingSetSize, "recommendedMaxWorkingSetSize") X(newCommandQueue, "newCommandQueue") \
    X(newLibrary, "newLibraryWithSource:options:error:") X(newFunction, "newFunctionWithName:")         \
    X(newPipeline, "newComputePipelineStateWithFunction:error:")                                        \
    X(maxThreads, "maxTotalThreadsPerThreadgroup")                                                      \
    X(newBufferLength, "newBufferWithLength:options:") \
    X(newBufferNoCopy, "newBufferWithBytesNoCopy:length:options:deallocator:") X(contents, "contents")  \
    X(length, "length") X(commandBuffer, "commandBuffer") X(computeCommandEncoder, "computeCommandEncoder") \
    X(setPipeline, "setComputePipelineState:") X(setBuffer, "setBuffer:offset:atIndex:")               \
    X(setBytes, "setBytes:length:atIndex:") X(dispatch, "dispatchThreadgroups:threadsPerThreadgroup:")  \
    X(endEncoding, "endEncoding") X(commit, "commit") X(waitUntilCompleted, "waitUntilCompleted")       \
    X(status, "status") X(error, "error")
/* clang-format on */

typedef struct mtl_sels {
#define X(f, s) SEL f;
    MTL_SELS(X)
#undef X
} mtl_sels;

/* A device buffer over host memory the kernels read weights from: a whole blob mapping wrapped
 * without a copy (shared by every tensor in it), a page-aligned window of one that is larger
 * than a buffer can be, or (memory that is not a mapping) one tensor's bytes copied. */
typedef struct mtl_region {
    const uint8_t *base;
    uint64_t nbytes;
    id buf;
    int nocopy;
} mtl_region;

/* A buffer the backend made (backend_buf.dev): shared storage, so `host` is its contents. */
typedef struct mtl_buf {
    id buf;
    void *host;
    uint64_t size;
} mtl_buf;

/* A run in flight: its command buffer (retained until waited for) and the host-written params
 * (token ids, rope tables) its ops read. Two, so that a prefill chunk can be encoded while the
 * last one runs, as in src/vulkan. */
typedef struct mtl_frame {
    id cmd;
    mtl_buf params;
} mtl_frame;

#define MTL_FRAMES 2

typedef struct mtl_ctx {
    mtl_sels s;
    id dev, queue;
    id pipes[GPU_K_COUNT];
    mtl_frame frames[MTL_FRAMES];
    int cur;
    mtl_buf dummy;   /* bound where a kernel has no use for a binding */
    mtl_region **regions;
    size_t n_regions, cap_regions;
    gpu_limits lim;        /* align MTL_ALIGN, max_range min(maxBufferLength, 2^32 - 1); the
                            * rest backend_reserve's */
    uint64_t max_buffer;   /* maxBufferLength */
    uint64_t page;
    int unified;
    int verbose;
    unsigned long runs, commits, waits;   /* forward passes, their command buffers, host waits */
    unsigned long nocopy, copies;         /* weight regions wrapped in place, and copied */
    char desc[192];
} mtl_ctx;

#endif
