/* text.c: making untrusted strings safe to print on a terminal. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

/* Length of the well-formed UTF-8 sequence at s (1..4), or 0 when it is not one. Overlong
 * forms and surrogates count as malformed, as the terminal might decode them differently. */
static size_t utf8_len(const unsigned char *s)
{
    unsigned c = s[0];
    size_t n;
    unsigned cp;

    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        n = 2, cp = c & 0x1f;
    else if (c >= 0xe0 && c <= 0xef)
        n = 3, cp = c & 0x0f;
    else if (c >= 0xf0 && c <= 0xf4)
        n = 4, cp = c & 0x07;
    else
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return n;
}

const char *ms_str_safe(char *buf, size_t len, const char *s)
{
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    size_t o = 0;

    if (!len)
        return "";
    while (*p && o + 1 < len) {
        size_t n = utf8_len(p);
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
