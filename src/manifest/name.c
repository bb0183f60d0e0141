/* name.c: model names [host/][namespace/]model[:tag] (rules in manifest.h). Validation is strict
 * because parts of a name become SQLite keys and registry URL paths: nothing may smuggle in a
 * path separator, a "..", whitespace or bytes a terminal would interpret. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blob/blob.h"
#include "manifest/manifest.h"

#define MODEL_MAX 80
#define NAMESPACE_MAX 80
#define TAG_MAX 128
#define LABEL_MAX 63   /* one DNS label */

static int is_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* A part of the name given as pointer + length; parts are never NUL-terminated in the input. */
typedef struct span {
    const char *p;
    size_t n;
} span;

/* namespace and model: [A-Za-z0-9][A-Za-z0-9._-]*; tag: [A-Za-z0-9_][A-Za-z0-9._-]*. */
static int check_part(span s, const char *field, size_t max, int underscore_first)
{
    if (s.n == 0)
        return ms_err(MS_EINVALID, "%s is empty", field);
    if (s.n > max)
        return ms_err(MS_EINVALID, "%s is %zu characters (max %zu)", field, s.n, max);
    if (!is_alnum(s.p[0]) && !(underscore_first && s.p[0] == '_'))
        return ms_err(MS_EINVALID, "%s '%.*s' must start with a letter or digit%s", field, (int)s.n, s.p,
                      underscore_first ? " or '_'" : "");
    for (size_t i = 1; i < s.n; i++) {
        char c = s.p[i];
        if (!is_alnum(c) && c != '.' && c != '_' && c != '-')
            return ms_err(MS_EINVALID, "%s '%.*s': character '%c' is not allowed", field, (int)s.n, s.p, c);
    }
    return 0;
}

/* The :port suffix of a host: 1 to 5 digits, value 1..65535. */
static int check_port(span s)
{
    unsigned long v = 0;

    if (s.n == 0 || s.n > 5)
        return ms_err(MS_EINVALID, "port '%.*s' is not a number from 1 to 65535", (int)s.n, s.p);
    for (size_t i = 0; i < s.n; i++) {
        if (!is_digit(s.p[i]))
            return ms_err(MS_EINVALID, "port '%.*s' is not a number from 1 to 65535", (int)s.n, s.p);
        v = v * 10 + (unsigned long)(s.p[i] - '0');
    }
    if (v < 1 || v > 65535)
        return ms_err(MS_EINVALID, "port %lu is out of range 1..65535", v);
    return 0;
}

/* DNS labels of [A-Za-z0-9-] (not starting or ending with '-') separated by '.'; this also
 * admits IPv4 addresses and "localhost". An optional :port follows. */
static int check_host(span s)
{
    const char *colon = memchr(s.p, ':', s.n);
    span h = { s.p, colon ? (size_t)(colon - s.p) : s.n };
    size_t label = 0;

    if (s.n >= NAME_HOST_MAX)
        return ms_err(MS_EINVALID, "host is %zu characters (max %d)", s.n, NAME_HOST_MAX - 1);
    if (colon && check_port((span){ colon + 1, s.n - h.n - 1 }) < 0)
        return ms_err_ctx("host '%.*s'", (int)s.n, s.p);
    if (h.n == 0)
        return ms_err(MS_EINVALID, "host '%.*s': host name is empty", (int)s.n, s.p);
    for (size_t i = 0; i <= h.n; i++) {
        char c = i < h.n ? h.p[i] : '.';
        if (c == '.') {
            if (label == 0 || h.p[i - 1] == '-')
                return ms_err(MS_EINVALID, "host '%.*s': empty label or label ending in '-'", (int)s.n, s.p);
            label = 0;
            continue;
        }
        if (!is_alnum(c) && !(c == '-' && label > 0))
            return ms_err(MS_EINVALID, "host '%.*s': character '%c' is not allowed", (int)s.n, s.p, c);
        if (++label > LABEL_MAX)
            return ms_err(MS_EINVALID, "host '%.*s': a label is longer than %d characters", (int)s.n, s.p,
                          LABEL_MAX);
    }
    return 0;
}

static void span_copy(char *dst, span s)
{
    memcpy(dst, s.p, s.n);
    dst[s.n] = '\0';
}

/* Printable ASCII except space: everything else is refused before any other rule, so messages
 * that quote the name never carry control bytes or invalid UTF-8. */
static int check_chars(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c <= ' ' || c >= 0x7f)
            return ms_err(MS_EINVALID, "byte 0x%02x at position %zu is not allowed", c, i);
    }
    return 0;
}

/* Splits the part before ":tag" at '/' into at most three components; refuses empty ones. */
static int split_path(span comp[3], int *n_out, span path)
{
    const char *p = path.p, *end = path.p + path.n;
    int n = 0;

    for (;;) {
        const char *slash = memchr(p, '/', (size_t)(end - p));
        const char *stop = slash ? slash : end;
        if (stop == p)
            return ms_err(MS_EINVALID, "empty component (a leading, trailing or doubled '/')");
        if (n == 3)
            return ms_err(MS_EINVALID, "more than 3 components");
        comp[n++] = (span){ p, (size_t)(stop - p) };
        if ((comp[n - 1].n == 1 && p[0] == '.') || (comp[n - 1].n == 2 && p[0] == '.' && p[1] == '.'))
            return ms_err(MS_EINVALID, "component '%.*s' is not allowed", (int)comp[n - 1].n, p);
        if (!slash)
            break;
        p = slash + 1;
    }
    *n_out = n;
    return 0;
}

static int parse(model_name *out, const char *s, int *tagged_out)
{
    size_t len = strlen(s);
    const char *last_slash, *colon;
    span path, tag = { "latest", 6 }, host = { "", 0 }, ns = { "library", 7 }, model, comp[3];
    int n = 0, rc;

    if (len == 0)
        return ms_err(MS_EINVALID, "is empty");
    if (len > NAME_HOST_MAX + 3 * NAME_PART_MAX)
        return ms_err(MS_EINVALID, "name is %zu characters (max %d)", len, NAME_HOST_MAX + 3 * NAME_PART_MAX);
    /* The tag follows a ':' in the last component; a ':' before the last '/' is a host's port. */
    last_slash = strrchr(s, '/');
    colon = strchr(last_slash ? last_slash + 1 : s, ':');
    path = (span){ s, colon ? (size_t)(colon - s) : len };
    *tagged_out = colon != NULL;
    if (colon) {
        tag = (span){ colon + 1, len - path.n - 1 };
        if (memchr(tag.p, ':', tag.n))
            return ms_err(MS_EINVALID, "more than one ':' after the last '/'");
        if ((rc = check_part(tag, "tag", TAG_MAX, 1)) < 0)
            return rc;
    }
    if ((rc = split_path(comp, &n, path)) < 0)
        return rc;
    model = comp[n - 1];
    if (n == 3) {
        host = comp[0];
        ns = comp[1];
    } else if (n == 2 && (memchr(comp[0].p, '.', comp[0].n) || memchr(comp[0].p, ':', comp[0].n) ||
                          (comp[0].n == 9 && memcmp(comp[0].p, "localhost", 9) == 0))) {
        host = comp[0];
    } else if (n == 2) {
        ns = comp[0];
    }
    if ((host.n && (rc = check_host(host)) < 0) || (rc = check_part(ns, "namespace", NAMESPACE_MAX, 0)) < 0 ||
        (rc = check_part(model, "model", MODEL_MAX, 0)) < 0)
        return rc;
    span_copy(out->host, host);
    span_copy(out->namespace_, ns);
    span_copy(out->model, model);
    span_copy(out->tag, tag);
    return 0;
}

/* "@sha256:<64 lowercase hex>" at `at`, into out->digest; the rest of the name is parsed by
 * the caller without it. */
static int digest_read(model_name *out, const char *at)
{
    if (strchr(at + 1, '@'))
        return ms_err(MS_EINVALID, "more than one '@'");
    if (!blob_digest_valid(at + 1))
        return ms_err(MS_EINVALID, "digest '%.80s' is not of the form sha256:<64 lowercase hex>", at + 1);
    snprintf(out->digest, sizeof out->digest, "%s", at + 1);
    return 0;
}

int name_parse(model_name *out, const char *s)
{
    char base[NAME_HOST_MAX + 3 * NAME_PART_MAX + 2];
    const char *at;
    int rc = 0, tagged = 0;

    memset(out, 0, sizeof *out);
    if (!s)
        return ms_err(MS_EINVALID, "name is missing");
    /* Quote the name in messages only once it is known to be printable; cap its length. */
    if (check_chars(s, strlen(s)) < 0)
        return ms_err_ctx("name");
    /* An OCI reference by digest: NAME@sha256:<hex> or NAME:TAG@sha256:<hex>. The name before
     * the '@' follows the usual rules. */
    if ((at = strchr(s, '@')) != NULL) {
        if ((size_t)(at - s) >= sizeof base)
            rc = ms_err(MS_EINVALID, "name is %zu characters (max %zu)", (size_t)(at - s), sizeof base - 1);
        else if ((rc = digest_read(out, at)) == 0) {
            memcpy(base, s, (size_t)(at - s));
            base[at - s] = '\0';
        }
    }
    if (rc < 0 || (rc = parse(out, at ? base : s, &tagged)) < 0) {
        memset(out, 0, sizeof *out);
        return ms_err_ctx("name '%.200s'", s);
    }
    /* Without a tag, a model pulled by digest is stored under the tag "sha256-<hex>": a name of
     * its own that no other version takes, and that the same reference finds again. */
    if (out->digest[0] && !tagged)
        snprintf(out->tag, sizeof out->tag, "sha256-%s", blob_digest_hex(out->digest));
    return 0;
}

void name_format(char *buf, size_t len, const model_name *n)
{
    snprintf(buf, len, "%s%s%s/%s:%s", n->host, n->host[0] ? "/" : "", n->namespace_, n->model, n->tag);
}

void name_display(char *buf, size_t len, const model_name *n)
{
    if (!n->host[0] && strcmp(n->namespace_, "library") == 0)
        snprintf(buf, len, "%s:%s", n->model, n->tag);
    else
        name_format(buf, len, n);
}
