/* vulkan.h: the Vulkan compute backend; the whole surface of src/vulkan.
 *
 * backend.h's ops as GLSL compute kernels (src/vulkan/kernels/, compiled to SPIR-V by glslc at
 * build time and embedded). The loader (libvulkan.so.1) is opened at run time, so a missing
 * loader is a clear error, not a binary that fails to start.
 *   1. A forward pass is one command buffer and one submit: backend_run records every op with a
 *      pipeline barrier only where an op touches a buffer an earlier op of the pass wrote (or
 *      writes one it read), and returns without waiting. backend_read is the host's one wait.
 *   2. Weights are used where they lie: each blob mapping is imported once as device memory
 *      (VK_EXT_external_memory_host) and tensors are ranges of it. Where the device cannot import,
 *      each tensor is uploaded once at open through a bounded staging buffer.
 *   3. Matrices are dequantized a 32-weight block at a time inside the kernels, never whole.
 * Built only when the Vulkan headers and glslc were found (MSTORE_HAVE_VULKAN). */
#ifndef MSTORE_VULKAN_H
#define MSTORE_VULKAN_H

#include <stddef.h>

#include "backend/backend.h"

/* The "vulkan" device for backend_open. by_name 0 ("auto"): refuse a software implementation
 * (lavapipe), so that auto falls through to the CPU. MS_EUNSUPPORTED saying why (no loader, no
 * device, only a software one, a missing device feature), MS_ENOMEM, MS_EIO. */
int vulkan_backend_new(const backend_impl **impl_out, void **ctx_out, const backend_opts *o, int by_name);

/* Append every Vulkan device to *list (realloc'd; *n entries). No loader or no device: 0 with
 * `why` saying so and the list unchanged. MS_ENOMEM. */
int vulkan_devices_list(backend_device_info **list, size_t *n, char *why, size_t why_len);

#endif
