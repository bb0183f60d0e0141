/* error.c: the per-thread error message behind ms_err(). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "util/util.h"

#define MSG_MAX 2048

static _Thread_local char msg[MSG_MAX];
static _Thread_local int code;

int ms_err(int c, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    code = c;
    return c;
}

int ms_err_os(const char *fmt, ...)
{
    int e = errno;
    va_list ap;
    size_t n;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    n = strlen(msg);
    snprintf(msg + n, sizeof msg - n, ": %s", strerror(e));
    code = e == ENOENT ? MS_ENOTFOUND : e == ENOMEM ? MS_ENOMEM : MS_EIO;
    return code;
}

int ms_err_ctx(const char *fmt, ...)
{
    char prefix[MSG_MAX], old[MSG_MAX];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    size_t n;

    memcpy(old, msg, sizeof old);
    /* Truncation is acceptable here: a message longer than MSG_MAX is cut, never overrun. */
    n = strnlen(prefix, sizeof prefix - 3);
    memcpy(msg, prefix, n);
    memcpy(msg + n, ": ", 2);
    n += 2;
    memcpy(msg + n, old, strnlen(old, sizeof msg - n - 1));
    msg[n + strnlen(old, sizeof msg - n - 1)] = '\0';
    if (code == 0)
        code = MS_ERROR;
    return code;
}

const char *ms_err_msg(void) { return msg; }
int ms_err_code(void) { return code; }

void ms_err_clear(void)
{
    msg[0] = '\0';
    code = 0;
}
