/* fuzz_registry.c: libFuzzer target for what a registry sends back, as reg_request parses it:
 * header lines (status, Docker-Content-Digest, Location, WWW-Authenticate, Content-Range), the
 * WWW-Authenticate challenge, a token endpoint's JSON, an error body turned into a message,
 * the origin of a Location or realm URL (which decides where credentials go), and a pull's
 * .ranges sidecar, a tar archive (a ModelPack weight layer, or its frame). The first byte picks the parser, the rest is its input. Each must refuse
 * with a message or give fields that keep their bounds: NUL-terminated inside their arrays. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry/registry_int.h"

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "fuzz_registry: %s:%d: %s (%s)\n", __FILE__, __LINE__, #c, ms_err_msg()); abort(); } } while (0)
#define TERMINATED(a) (memchr((a), 0, sizeof (a)) != NULL)

static char *cstr(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);

    CHECK(s);
    memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

static void headers(const uint8_t *data, size_t size)
{
    reg_resp r = { 0 };
    size_t at = 0;

    /* one curl callback per line, as curl calls it (the line with its CRLF, not terminated) */
    while (at < size) {
        const uint8_t *nl = memchr(data + at, '\n', size - at);
        size_t len = nl ? (size_t)(nl - (data + at)) + 1 : size - at;
        char *line = malloc(len ? len : 1);

        CHECK(line);
        memcpy(line, data + at, len);
        CHECK(reg_resp_header(line, 1, len, &r) == len);
        free(line);
        at += len;
    }
    CHECK(TERMINATED(r.digest) && TERMINATED(r.location) && TERMINATED(r.www_auth) && TERMINATED(r.content_range));
    if (r.www_auth[0]) {
        reg_challenge ch;
        if (reg_challenge_parse(&ch, r.www_auth) == 0)
            CHECK(TERMINATED(ch.scheme) && TERMINATED(ch.realm));
    }
    if (r.location[0]) {
        char o[NAME_HOST_MAX + 32];
        reg_url_origin(o, sizeof o, r.location);
        CHECK(TERMINATED(o));
    }
}

static void challenge(const uint8_t *data, size_t size)
{
    char *s = cstr(data, size);
    reg_challenge ch;

    ms_err_clear();
    if (reg_challenge_parse(&ch, s) == 0) {
        CHECK(TERMINATED(ch.scheme) && TERMINATED(ch.realm) && TERMINATED(ch.service) && TERMINATED(ch.scope));
        CHECK(ch.scheme[0]);
        CHECK(strcasecmp(ch.scheme, "Bearer") || !strncmp(ch.realm, "https://", 8) || !strncmp(ch.realm, "http://", 7));
    } else {
        CHECK(ms_err_msg()[0]);
    }
    free(s);
}

static void token(const uint8_t *data, size_t size)
{
    char *tok = (char *)&size;

    ms_err_clear();
    if (reg_token_parse(&tok, (const char *)data, size, "https://auth.example/token") == 0) {
        CHECK(tok && tok[0]);
        free(tok);
    } else {
        CHECK(tok == NULL && ms_err_msg()[0]);
    }
}

static void error_body(const uint8_t *data, size_t size)
{
    reg_resp r = { 0 };

    r.status = 404;
    r.body = cstr(data, size);
    r.body_len = size;
    CHECK(reg_http_err(MS_EIO, "manifest", &r) == MS_EIO && strlen(ms_err_msg()) < 400);
    for (const char *p = ms_err_msg(); *p; p++)
        CHECK((unsigned char)*p >= 0x20 && *p != 0x7f);   /* nothing a terminal would act on */
    free(r.body);
}

static void origin(const uint8_t *data, size_t size)
{
    char *s = cstr(data, size), a[NAME_HOST_MAX + 32], b[16];

    reg_url_origin(a, sizeof a, s);
    CHECK(TERMINATED(a));
    reg_url_origin(b, sizeof b, s);   /* a buffer too small for the origin */
    CHECK(TERMINATED(b));
    free(s);
}

/* The caller's side of the contract: n_parts parts of part_bytes cover the blob (the last
 * part may be shorter), so a sidecar can only ever claim what a part holds. */
static void ranges(const uint8_t *data, size_t size)
{
    uint64_t done[64], blob, part;
    size_t n_parts;

    if (size < 16)
        return;
    memcpy(&blob, data, 8);
    memcpy(&part, data + 8, 8);
    blob %= (uint64_t)1 << 50;
    part = part % ((uint64_t)1 << 40) + 1;
    n_parts = (size_t)(blob / part + (blob % part != 0));
    if (n_parts == 0 || n_parts > 64)
        return;
    ms_err_clear();
    if (blob_partial_ranges_parse(done, data + 16, size - 16, blob, part, n_parts) == 0) {
        for (size_t k = 0; k < n_parts; k++)
            CHECK(done[k] <= part && k * part + done[k] <= blob);
    } else {
        CHECK(ms_err_msg()[0]);
    }
}

/* What reg_tar_scan reports lies inside the archive and names a path inside it. */
static int tar_file(void *ctx, const char *path, uint64_t off, uint64_t size)
{
    size_t n = *(const size_t *)ctx;

    CHECK(path[0] && path[0] != '/' && strcmp(path, "..") && strncmp(path, "../", 3) && !strstr(path, "/../"));
    CHECK(off <= n && size <= n - off);
    return 0;
}

static void tar(const uint8_t *data, size_t size)
{
    int frame;

    if (size < 1)
        return;
    frame = data[0] & 1;
    size--;
    ms_err_clear();
    /* a frame's regular file has no bytes in it: nothing to check but the headers */
    if (reg_tar_scan(data + 1, size, "fuzz", frame ? REG_TAR_FRAME : 0, frame ? NULL : tar_file, &size) < 0)
        CHECK(ms_err_msg()[0]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    switch (data[0] % 7) {
    case 0: headers(data + 1, size - 1); break;
    case 1: challenge(data + 1, size - 1); break;
    case 2: token(data + 1, size - 1); break;
    case 3: error_body(data + 1, size - 1); break;
    case 4: origin(data + 1, size - 1); break;
    case 5: ranges(data + 1, size - 1); break;
    case 6: tar(data + 1, size - 1); break;
    }
    return 0;
}
