/* text.c: making untrusted strings safe to print on a terminal. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

const char *ms_str_safe(char *buf, size_t len, const char *s)
{
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    size_t o = 0;

    if (!len)
        return "";
    while (*p && o + 1 < len) {
        size_t n = ms_utf8_seq(p, 4); /* a NUL ends a sequence before the string does */
        /* C0 controls, DEL, and C1 controls (U+0080..U+009F, 0xc2 0x80..0x9f in UTF-8) can move
         * the cursor, retitle the window or rewrite what the user sees; so can bytes that are
         * not UTF-8, in a terminal set to a legacy 8-bit charset where 0x9b is CSI. */
        if (n == 0 || p[0] < 0x20 || p[0] == 0x7f || (n == 2 && p[0] == 0xc2 && p[1] < 0xa0)) {
            if (o + 4 >= len)
                break;
            o += (size_t)snprintf(buf + o, len - o, "\\x%02x", p[0]);
            p++;   /* a C1 pair: its second byte alone is malformed, escaped next */
            continue;
        }
        if (o + n >= len)
            break;
        memcpy(buf + o, p, n);
        o += n;
        p += n;
    }
    buf[o] = '\0';
    return buf;
}

int ms_text_put(ms_text *b, const char *s, size_t len)
{
    if (ms_grow(&b->p, &b->cap, b->n + len + 1, 1) < 0)
        return MS_ENOMEM;
    if (len)
        memcpy(b->p + b->n, s, len);
    b->n += len;
    b->p[b->n] = '\0';
    return 0;
}
