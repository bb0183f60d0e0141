/* utf8.c: the one definition of well-formed UTF-8 (no overlong forms, no surrogates, nothing
 * past U+10FFFF: what jansson accepts and what a terminal decodes one way only), and the three
 * uses mstore has for it: checking, cutting a stream at a whole character, and repairing. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

size_t ms_utf8_seq(const void *at, size_t left)
{
    const unsigned char *s = at;
    unsigned cp;
    size_t n;

    if (left == 0)
        return 0;
    if (s[0] < 0x80)
        return 1;
    if (s[0] >= 0xc2 && s[0] <= 0xdf)
        n = 2, cp = s[0] & 0x1f;
    else if (s[0] >= 0xe0 && s[0] <= 0xef)
        n = 3, cp = s[0] & 0x0f;
    else if (s[0] >= 0xf0 && s[0] <= 0xf4)
        n = 4, cp = s[0] & 0x07;
    else
        return 0;
    if (n > left)
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

int ms_utf8_valid(const char *s, size_t len)
{
    size_t i = 0, n;

    while (i < len && (n = ms_utf8_seq(s + i, len - i)) > 0)
        i += n;
    return i == len;
}

size_t ms_utf8_complete(const char *s, size_t len)
{
    size_t i = len, back = 0;
    unsigned char c;
    size_t need;

    while (i > 0 && back < 4 && ((unsigned char)s[i - 1] & 0xc0) == 0x80)
        i--, back++;
    if (i == 0)
        return len;
    c = (unsigned char)s[i - 1];
    if (c >= 0xf8 || c < 0xc0)
        return len;
    need = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
    return back + 1 < need ? i - 1 : len;
}

char *ms_utf8_repair(const char *s, size_t len, size_t *out_len)
{
    char *out, *o;
    size_t n;

    if (len > (SIZE_MAX - 1) / 3 || !(out = malloc(len * 3 + 1)))
        return NULL;
    o = out;
    for (size_t i = 0; i < len; i += n ? n : 1) {
        if ((n = ms_utf8_seq(s + i, len - i)) > 0) {
            memcpy(o, s + i, n);
            o += n;
        } else {
            memcpy(o, "\xef\xbf\xbd", 3);
            o += 3;
        }
    }
    *o = '\0';
    *out_len = (size_t)(o - out);
    return out;
}
