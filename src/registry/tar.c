/* tar.c: the one tar codec of the registry, for ModelPack weight layers (an uncompressed tar of
 * one file, application/vnd.cncf.model.weight.v1.tar) and Docker Model Runner's config
 * archives (application/vnd.docker.ai.vllm.config.tar).
 *
 * Reading: archives come from registries, so every header is checked before it is believed:
 * its checksum, octal (or GNU base-256) numbers that fit their fields, a size within the bytes
 * left, names that stay inside the archive (no absolute path, no "..", no NUL in a pax path).
 * Only regular files, directories and the name-carrying headers (pax 'x'/'g', GNU 'L') are
 * accepted; a link or a device is refused, naming the entry, since nothing here would follow
 * one safely. The archive is read in place (a mapped blob): nothing is allocated per entry.
 *
 * A weight tar is kept as its **frame**: the archive with the file's bytes cut out (headers,
 * padding and trailer, a few KiB). The file itself is stored in the store's own form (a GGUF
 * split into tensor blobs), and frame + exported file rebuild the received archive byte for
 * byte, whichever tool wrote it: reg_tar_scan reads a frame as it reads an archive
 * (REG_TAR_FRAME), the regular file taking no bytes but its padding.
 *
 * Writing: mstore's own archives (push --format modelpack) are one regular file, mode 0644,
 * uid, gid and times zero, so the same file always gives the same archive. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "registry/registry_int.h"

#define BLOCK 512u

static uint64_t round_up(uint64_t n)
{
    return (n + BLOCK - 1) / BLOCK * BLOCK;
}

/* An octal field (NUL- or space-terminated, leading spaces allowed) or GNU base-256 (high bit
 * of the first byte): -1 when neither, or when it does not fit 63 bits. */
static int64_t field_num(const uint8_t *f, size_t w)
{
    uint64_t v = 0;
    size_t i = 0;

    if (f[0] & 0x80) {
        if (f[0] != 0x80)
            return -1;   /* negative, or more than 63 bits */
        for (i = 1; i < w; i++) {
            if (v >> 55)
                return -1;
            v = v << 8 | f[i];
        }
        return (int64_t)v;
    }
    while (i < w && f[i] == ' ')
        i++;
    for (; i < w && f[i] >= '0' && f[i] <= '7'; i++) {
        if (v >> 60)
            return -1;
        v = v << 3 | (uint64_t)(f[i] - '0');
    }
    if (i < w && f[i] != '\0' && f[i] != ' ')
        return -1;
    return (int64_t)v;
}

static int block_zero(const uint8_t *b)
{
    for (unsigned i = 0; i < BLOCK; i++)
        if (b[i])
            return 0;
    return 1;
}

/* The sum of the header's bytes with the checksum field as spaces: POSIX's unsigned sum (some old
 * writers summed signed chars; both are accepted). */
static int checksum_ok(const uint8_t *h)
{
    int64_t want = field_num(h + 148, 8);
    uint64_t u = 0;
    int64_t sgn = 0;

    for (unsigned i = 0; i < BLOCK; i++) {
        uint8_t c = i >= 148 && i < 156 ? ' ' : h[i];
        u += c;
        sgn += (signed char)c;
    }
    return want >= 0 && ((uint64_t)want == u || want == sgn);
}

/* A name that stays inside the archive: relative, no "..", no empty path. */
static int name_safe(const char *p, size_t n)
{
    size_t i = 0;

    if (n == 0 || p[0] == '/')
        return 0;
    while (i < n) {
        size_t j = i;
        while (j < n && p[j] != '/')
            j++;
        if (j - i == 2 && p[i] == '.' && p[i + 1] == '.')
            return 0;
        i = j + 1;
    }
    return memchr(p, '\0', n) == NULL;
}

/* The value of `key` in pax extended header records (`len key=value\n`), or NULL; *n its length. */
static int pax_path(const uint8_t *d, size_t n, const char *key, const char **val, size_t *vlen, const char *what)
{
    size_t off = 0, klen = strlen(key);

    *val = NULL;
    while (off < n) {
        size_t len = 0, i = off;
        while (i < n && d[i] >= '0' && d[i] <= '9' && len < n)
            len = len * 10 + (size_t)(d[i++] - '0');
        if (i >= n || d[i] != ' ' || len <= i - off + 1 || len > n - off || d[off + len - 1] != '\n')
            return ms_err(MS_EINVALID, "%s: pax header record at byte %zu is malformed", what, off);
        i++;
        if ((size_t)(off + len - 1 - i) > klen && !memcmp(d + i, key, klen) && d[i + klen] == '=') {
            *val = (const char *)d + i + klen + 1;
            *vlen = off + len - 1 - (i + klen + 1);
        }
        off += len;
    }
    return 0;
}

int reg_tar_scan(const uint8_t *data, size_t n, const char *what, int flags, reg_tar_file_fn fn, void *ctx)
{
    const char *long_name = NULL;   /* from a pax 'x' or GNU 'L' header: the next entry's name */
    size_t long_len = 0, pos = 0, files = 0;
    char name[256 + 1 + 100], safe[256];
    int rc;

    while (pos + BLOCK <= n) {
        const uint8_t *h = data + pos;
        int64_t size;
        uint64_t span;
        int cut;
        const char *nm;
        size_t nl;
        char type;

        if (block_zero(h))
            return files ? 0 : ms_err(MS_EINVALID, "%s: the archive holds no file", what);
        if (!checksum_ok(h))
            return ms_err(MS_EINVALID, "%s: tar header at byte %zu: bad checksum (not a tar archive?)", what, pos);
        if ((size = field_num(h + 124, 12)) < 0)
            return ms_err(MS_EINVALID, "%s: tar header at byte %zu: size field is malformed", what, pos);
        type = (char)h[156];
        /* in a frame the regular file's bytes are cut out: only its padding is left */
        cut = (flags & REG_TAR_FRAME) && (type == '0' || type == '\0' || type == '7');
        span = round_up((uint64_t)size) - (cut ? (uint64_t)size : 0);
        if ((!cut && (uint64_t)size > n - pos - BLOCK) || span > n - pos - BLOCK)
            return ms_err(MS_EINVALID, "%s: tar header at byte %zu: size %" PRId64 " runs past the end (%zu bytes)",
                          what, pos, size, n);
        if (type == 'x' || type == 'L') {
            if (type == 'x') {
                if ((rc = pax_path(h + BLOCK, (size_t)size, "path", &long_name, &long_len, what)) < 0)
                    return rc;
            } else {
                long_name = (const char *)h + BLOCK;
                long_len = strnlen(long_name, (size_t)size);
            }
            if (long_name && (long_len == 0 || long_len >= sizeof name))
                return ms_err(MS_EINVALID, "%s: tar header at byte %zu: a name of %zu bytes", what, pos, long_len);
            pos += BLOCK + round_up((uint64_t)size);
            continue;
        }
        if (type == 'g') {   /* global pax header: nothing it says matters here */
            pos += BLOCK + round_up((uint64_t)size);
            continue;
        }
        if (long_name) {
            nm = long_name, nl = long_len;
        } else {
            size_t pl = strnlen((const char *)h + 345, 155), bl = strnlen((const char *)h, 100);
            /* ustar's prefix field only when the magic says ustar */
            if (!memcmp(h + 257, "ustar", 5) && pl) {
                snprintf(name, sizeof name, "%.*s/%.*s", (int)pl, (const char *)h + 345, (int)bl, (const char *)h);
                nl = pl + 1 + bl;
            } else {
                snprintf(name, sizeof name, "%.*s", (int)bl, (const char *)h);
                nl = bl;
            }
            nm = name;
        }
        if (nm != name) {
            memcpy(name, nm, nl);
            name[nl] = '\0';
            nm = name;
        }
        while (nl > 2 && nm[0] == '.' && nm[1] == '/')   /* "./model.gguf" is "model.gguf" */
            nm += 2, nl -= 2;
        if (!name_safe(nm, nl))
            return ms_err(MS_EINVALID, "%s: tar entry '%s': a path outside the archive", what,
                          ms_str_safe(safe, sizeof safe, nm));
        long_name = NULL;
        if (type == '5') {
            /* a directory: no bytes */
        } else if (type == '0' || type == '\0' || type == '7') {
            files++;
            if (fn && (rc = fn(ctx, nm, pos + BLOCK, (uint64_t)size)) < 0)
                return rc;
        } else {
            return ms_err(MS_EINVALID, "%s: tar entry '%s' is of type '%c' (a link or a device), which is not read", what,
                          ms_str_safe(safe, sizeof safe, nm), type >= 32 && type < 127 ? type : '?');
        }
        pos += BLOCK + span;
    }
    /* The end: two zero blocks by the standard; an archive cut at a block boundary after its
     * last file is read as complete (some writers stop there), a cut inside a block is not. */
    if (pos != n)
        return ms_err(MS_EINVALID, "%s: the archive ends inside a block (byte %zu of %zu)", what, pos, n);
    return files ? 0 : ms_err(MS_EINVALID, "%s: the archive holds no file", what);
}

/* The octal field ustar uses; a size of 8 GiB or more in GNU base-256 (first byte 0x80). */
static void field_put(char *f, size_t w, uint64_t v)
{
    if (v >> (3 * (w - 1))) {
        memset(f, 0, w);
        f[0] = (char)0x80;
        for (size_t i = w - 1; i > 0 && v; i--, v >>= 8)
            f[i] = (char)(v & 0xff);
        return;
    }
    snprintf(f, w, "%0*llo", (int)(w - 1), (unsigned long long)v);
}

int reg_tar_frame_make(uint8_t *head, uint8_t *tail, size_t *tail_len, const char *entry, uint64_t size)
{
    char *h = (char *)head;
    unsigned sum = 0;

    if (strlen(entry) >= 100)
        return ms_err(MS_EINVALID, "tar entry '%s': a name of 100 bytes or more", entry);
    memset(head, 0, BLOCK);
    snprintf(h, 100, "%s", entry);
    field_put(h + 100, 8, 0644);
    field_put(h + 108, 8, 0);
    field_put(h + 116, 8, 0);
    field_put(h + 124, 12, size);
    field_put(h + 136, 12, 0);
    h[156] = '0';
    memcpy(h + 257, "ustar", 6);
    memcpy(h + 263, "00", 2);
    memset(h + 148, ' ', 8);
    for (unsigned i = 0; i < BLOCK; i++)
        sum += (unsigned char)h[i];
    snprintf(h + 148, 8, "%06o", sum);
    *tail_len = (size_t)(round_up(size) - size) + 2 * BLOCK;
    memset(tail, 0, *tail_len);
    return 0;
}

int reg_tar_wrap(const char *dst, const char *src, uint64_t size, const uint8_t *head, size_t head_len,
                 const uint8_t *tail, size_t tail_len)
{
    char buf[1 << 16];
    FILE *in = fopen(src, "rb"), *out = in ? fopen(dst, "wb") : NULL;
    uint64_t left = size;
    size_t n;
    int rc = 0;

    if (!in || !out) {
        rc = ms_err(MS_EIO, "%s: cannot open: %s", in ? dst : src, strerror(errno));
        goto done;
    }
    fwrite(head, 1, head_len, out);
    while (left && (n = fread(buf, 1, left < sizeof buf ? (size_t)left : sizeof buf, in)) > 0)
        left -= n, fwrite(buf, 1, n, out);
    if (left)
        rc = ms_err(MS_EIO, "%s: %" PRIu64 " bytes short", src, left);
    else if ((tail_len && fwrite(tail, 1, tail_len, out) != tail_len) || fflush(out) != 0 || ferror(out))
        rc = ms_err(MS_EIO, "%s: write failed: %s", dst, strerror(errno));
done:
    if (in)
        fclose(in);
    if (out && fclose(out) != 0 && rc == 0)
        rc = ms_err(MS_EIO, "%s: write failed: %s", dst, strerror(errno));
    return rc;
}
