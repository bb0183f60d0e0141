/* metal.h: the Metal backend; the whole surface of src/metal.
 *
 * A thin host for the same kernels the Vulkan backend runs: src/vulkan/kernels' GLSL, compiled to
 * SPIR-V by glslc and to MSL by spirv-cross at build time, embedded, and compiled by Metal at run
 * time on first use of each variant. What each op dispatches is src/gpu's plan, shared with
 * src/vulkan, so the two hosts encode the same dispatches with the same push constants.
 *   1. A forward pass is one command buffer with one serial compute encoder, committed once by
 *      backend_run, which does not wait. backend_read is the host's one wait (waitUntilCompleted).
 *   2. Weights are used where they lie: each blob mapping is wrapped once, whole, by
 *      newBufferWithBytesNoCopy (unified memory: no copy), and tensors are ranges of it.
 *   3. Buffers (activations, KV cache) are shared-storage buffers, so reading the logits back is
 *      a memcpy after the wait.
 * Built into mstore on macOS only (MSTORE_HAVE_METAL). Elsewhere it compiles, and a unit test runs
 * it against a mock of the Objective-C runtime; it has never run on a real Metal device in this
 * project's CI (README.md, "Devices"). */
#ifndef MSTORE_METAL_H
#define MSTORE_METAL_H

#include <stddef.h>

#include "backend/backend.h"

/* The "metal" device for backend_open. by_name 0 ("auto"): refused, as this host has not been
 * run on a Mac by the project's CI; it is taken only when asked for by name. MS_EUNSUPPORTED
 * saying why (no Metal device), MS_ENOMEM, MS_EIO. */
int metal_backend_new(const backend_impl **impl_out, void **ctx_out, const backend_opts *o, int by_name);

/* Append the system's default Metal device to *list (realloc'd; *n entries). None: 0 with `why`
 * saying so and the list unchanged. MS_ENOMEM. */
int metal_devices_list(backend_device_info **list, size_t *n, char *why, size_t why_len);

#endif
