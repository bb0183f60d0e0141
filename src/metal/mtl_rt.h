/* mtl_rt.h: the few Objective-C runtime and Metal entry points the Metal host uses, declared here
 * rather than taken from Apple's headers, so that src/metal compiles anywhere (Linux CI builds it)
 * and a test can link it against a mock of exactly these.
 *
 * On macOS they are libobjc's and Metal.framework's own symbols, except the mtl_send_* senders:
 * objc_msgSend must be called through a cast to each method's exact C type (arm64 passes
 * variadic and fixed arguments differently), so mtl_msg.c defines one sender per method
 * signature the host needs, each a cast of objc_msgSend. The mock (tests/unit/test_metal.c)
 * defines the same senders and records every message. */
#ifndef MSTORE_MTL_RT_H
#define MSTORE_MTL_RT_H

#include <stdint.h>

typedef struct objc_object *id;
typedef struct objc_selector *SEL;
typedef unsigned long NSUInteger;   /* 64 bits on every macOS that has Metal 2 */
#if defined(__arm64__) || defined(__aarch64__)
typedef _Bool mtl_BOOL;             /* Objective-C's BOOL: bool on arm64 */
#else
typedef signed char mtl_BOOL;       /* and signed char on x86_64 */
#endif

typedef struct MTLSize {
    NSUInteger width, height, depth;
} MTLSize;

/* MTLResourceOptions: CPU cache mode default, storage mode shared (the CPU and GPU see the same
 * memory: on Apple silicon, the only memory), hazard tracking by Metal. */
#define MTL_RESOURCE_SHARED ((NSUInteger)0)
/* MTLCommandBufferStatus */
#define MTL_CB_COMPLETED ((NSUInteger)4)

/* libobjc */
id objc_getClass(const char *name);
SEL sel_registerName(const char *name);
void *objc_autoreleasePoolPush(void);
void objc_autoreleasePoolPop(void *pool);
/* Metal.framework */
id MTLCreateSystemDefaultDevice(void);

/* One sender per method signature: the receiver, the selector, the method's arguments. */
id mtl_send(id o, SEL s);                                       /* -(id)m */
void mtl_send_v(id o, SEL s);                                   /* -(void)m */
const void *mtl_send_p(id o, SEL s);                            /* -(void *)m, -(const char *)m */
NSUInteger mtl_send_u(id o, SEL s);                             /* -(NSUInteger)m, -(uint64_t)m */
mtl_BOOL mtl_send_b(id o, SEL s);                               /* -(BOOL)m */
id mtl_send_o(id o, SEL s, id a);                               /* newFunctionWithName: */
id mtl_send_cstr(id o, SEL s, const char *a);                   /* initWithUTF8String: */
id mtl_send_o_err(id o, SEL s, id a, id *err);                  /* newComputePipelineStateWithFunction:error: */
id mtl_send_o_o_err(id o, SEL s, id a, id b, id *err);          /* newLibraryWithSource:options:error: */
id mtl_send_u_u(id o, SEL s, NSUInteger a, NSUInteger b);       /* newBufferWithLength:options: */
id mtl_send_p_u_u_o(id o, SEL s, void *p, NSUInteger a, NSUInteger b, id c); /* ...BytesNoCopy:...deallocator: */
void mtl_send_v_o(id o, SEL s, id a);                           /* setComputePipelineState: */
void mtl_send_v_o_u_u(id o, SEL s, id a, NSUInteger b, NSUInteger c);      /* setBuffer:offset:atIndex: */
void mtl_send_v_p_u_u(id o, SEL s, const void *p, NSUInteger a, NSUInteger b); /* setBytes:length:atIndex: */
void mtl_send_v_sz_sz(id o, SEL s, MTLSize a, MTLSize b);       /* dispatchThreadgroups:threadsPerThreadgroup: */

#endif
