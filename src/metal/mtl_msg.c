/* mtl_msg.c: the senders of mtl_rt.h, each objc_msgSend cast to its method's C type. Linked on
 * macOS only; elsewhere it is compiled (mstore_metal_host) but nothing links it, and the test
 * links a mock in its place. */
#include "metal/mtl_rt.h"

/* Declared without arguments, as Apple's <objc/message.h> does (OBJC_OLD_DISPATCH_PROTOTYPES=0):
 * it must be cast before every call. */
void objc_msgSend(void);
/* Called through a variable: a cast of the function itself is what C compilers other than Apple's
 * (gcc, which builds this file on Linux) warn about. */
static void (*const volatile msg_send)(void) = objc_msgSend;

id mtl_send(id o, SEL s)
{
    return ((id(*)(id, SEL))msg_send)(o, s);
}

void mtl_send_v(id o, SEL s)
{
    ((void (*)(id, SEL))msg_send)(o, s);
}

const void *mtl_send_p(id o, SEL s)
{
    return ((const void *(*)(id, SEL))msg_send)(o, s);
}

NSUInteger mtl_send_u(id o, SEL s)
{
    return ((NSUInteger(*)(id, SEL))msg_send)(o, s);
}

mtl_BOOL mtl_send_b(id o, SEL s)
{
    return ((mtl_BOOL(*)(id, SEL))msg_send)(o, s);
}

id mtl_send_o(id o, SEL s, id a)
{
    return ((id(*)(id, SEL, id))msg_send)(o, s, a);
}

id mtl_send_cstr(id o, SEL s, const char *a)
{
    return ((id(*)(id, SEL, const char *))msg_send)(o, s, a);
}

id mtl_send_o_err(id o, SEL s, id a, id *err)
{
    return ((id(*)(id, SEL, id, id *))msg_send)(o, s, a, err);
}

id mtl_send_o_o_err(id o, SEL s, id a, id b, id *err)
{
    return ((id(*)(id, SEL, id, id, id *))msg_send)(o, s, a, b, err);
}

id mtl_send_u_u(id o, SEL s, NSUInteger a, NSUInteger b)
{
    return ((id(*)(id, SEL, NSUInteger, NSUInteger))msg_send)(o, s, a, b);
}

id mtl_send_p_u_u_o(id o, SEL s, void *p, NSUInteger a, NSUInteger b, id c)
{
    return ((id(*)(id, SEL, void *, NSUInteger, NSUInteger, id))msg_send)(o, s, p, a, b, c);
}

void mtl_send_v_o(id o, SEL s, id a)
{
    ((void (*)(id, SEL, id))msg_send)(o, s, a);
}

void mtl_send_v_o_u_u(id o, SEL s, id a, NSUInteger b, NSUInteger c)
{
    ((void (*)(id, SEL, id, NSUInteger, NSUInteger))msg_send)(o, s, a, b, c);
}

void mtl_send_v_p_u_u(id o, SEL s, const void *p, NSUInteger a, NSUInteger b)
{
    ((void (*)(id, SEL, const void *, NSUInteger, NSUInteger))msg_send)(o, s, p, a, b);
}

void mtl_send_v_sz_sz(id o, SEL s, MTLSize a, MTLSize b)
{
    ((void (*)(id, SEL, MTLSize, MTLSize))msg_send)(o, s, a, b);
}
