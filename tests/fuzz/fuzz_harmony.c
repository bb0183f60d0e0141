/* fuzz_harmony.c: libFuzzer target for gpt-oss's harmony splitter (src/chat/harmony.c): the input
 * as a model's answer, fed in chunks whose sizes the first bytes choose (markers and headers cut
 * anywhere), then ended. Every piece has a known kind and lies within what was fed (the splitter
 * only drops and passes on bytes: the pieces never add up to more than the answer), and nothing
 * crashes or reads past what it was given. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chat.h"

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "fuzz_harmony: %s:%d: %s\n", __FILE__, __LINE__, #c); abort(); } } while (0)

typedef struct seen {
    size_t bytes, limit;
    unsigned sum;
} seen;

static int piece(void *ctx, int kind, const char *s, size_t len)
{
    seen *z = ctx;

    CHECK(kind >= CHAT_HARMONY_CONTENT && kind <= CHAT_HARMONY_ARGS);
    CHECK(len == 0 || s != NULL);
    for (size_t i = 0; i < len; i++)   /* every byte read: ASan sees a piece past what was fed */
        z->sum += (unsigned char)s[i];
    z->bytes += len;
    CHECK(z->bytes <= z->limit);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    chat_harmony h;
    seen z = {0, size, 0};
    size_t at = size ? 1 : 0;
    int step = size ? data[0] % 17 + 1 : 1;

    chat_harmony_init(&h);
    while (at < size) {
        size_t n = (size_t)step < size - at ? (size_t)step : size - at;
        CHECK(chat_harmony_feed(&h, (const char *)data + at, n, piece, &z) == 0);
        at += n;
        step = step * 7 % 23 + 1;   /* chunk sizes vary: 1 .. 23 bytes */
    }
    CHECK(chat_harmony_end(&h, piece, &z) == 0);
    return 0;
}
