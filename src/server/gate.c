/* gate.c: which browser pages (Origin) and which Host names the server answers; string checks
 * only, on a request's headers, so that they run before any work and a fuzz target can drive
 * them (tests/fuzz/fuzz_serve.c).
 *
 * Why: a page on any web site can make a browser send a "simple" request (a POST with
 * Content-Type: text/plain needs no CORS preflight) to 127.0.0.1:11434: it cannot read the
 * answer, but /api/copy, /api/delete, /api/pull and /api/push act all the same. With DNS
 * rebinding (evil.example re-resolved to 127.0.0.1) the page is same-origin with the server and
 * reads the answers too. A browser always sends the page's origin as Origin on the first kind
 * and the page's host name as Host on the second, which is what ollama checks; so do we, with
 * ollama's lists (OLLAMA_ORIGINS here is MSTORE_ORIGINS). */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "server/server_int.h"

/* ollama's envconfig.AllowedOrigins() defaults, after the user's (MSTORE_ORIGINS) entries */
static const char *const default_origins[] = {
    "http://localhost",
    "https://localhost",
    "http://localhost:*",
    "https://localhost:*",
    "http://127.0.0.1",
    "https://127.0.0.1",
    "http://127.0.0.1:*",
    "https://127.0.0.1:*",
    "http://0.0.0.0",
    "https://0.0.0.0",
    "http://0.0.0.0:*",
    "https://0.0.0.0:*",
    "app://*",
    "file://*",
    "tauri://*",
    "vscode-webview://*",
    "vscode-file://*",
    /* gin-contrib/cors's AllowBrowserExtensions, which ollama turns on */
    "chrome-extension://*",
    "safari-extension://*",
    "moz-extension://*",
    "ms-browser-extension://*",
};

struct srv_origins {
    char **pat;
    size_t n;
};

void srv_origins_free(srv_origins *o)
{
    if (!o)
        return;
    for (size_t i = 0; i < o->n; i++)
        free(o->pat[i]);
    free(o->pat);
    free(o);
}

static int origins_add(srv_origins *o, const char *s, size_t len)
{
    const char *star = memchr(s, '*', len);

    if (star && memchr(star + 1, '*', len - (size_t)(star - s) - 1))
        return ms_err(MS_EINVALID, "MSTORE_ORIGINS: '%.*s': at most one '*' in an origin", (int)len, s);
    if (!(o->pat[o->n] = malloc(len + 1)))
        return ms_err(MS_ENOMEM, "out of memory");
    memcpy(o->pat[o->n], s, len);
    o->pat[o->n++][len] = '\0';
    return 0;
}

int srv_origins_new(srv_origins **out, const char *extra)
{
    size_t n_defaults = sizeof default_origins / sizeof *default_origins, cap = n_defaults + 1;
    srv_origins *o = calloc(1, sizeof *o);
    int rc = 0;

    *out = NULL;
    for (const char *p = extra; p && *p; p++)
        cap += *p == ',';
    if (!o || !(o->pat = calloc(cap, sizeof *o->pat))) {
        srv_origins_free(o);
        return ms_err(MS_ENOMEM, "out of memory");
    }
    while (extra && *extra && rc == 0) {
        size_t len = strcspn(extra, ",");
        const char *s = extra;
        extra += len + (extra[len] == ',');
        while (len && (*s == ' ' || *s == '\t'))
            s++, len--;
        while (len && (s[len - 1] == ' ' || s[len - 1] == '\t'))
            len--;
        if (len)
            rc = origins_add(o, s, len);
    }
    for (size_t i = 0; i < n_defaults && rc == 0; i++)
        rc = origins_add(o, default_origins[i], strlen(default_origins[i]));
    if (rc < 0) {
        srv_origins_free(o);
        return rc;
    }
    *out = o;
    return 0;
}

/* gin-contrib/cors's match: equal, or one '*' standing for any run of characters (here never
 * overlapping: "a*a" does not match "a"). Case-insensitive, as scheme and host are. */
static int origin_match(const char *pat, const char *origin)
{
    const char *star = strchr(pat, '*');
    size_t n = strlen(origin), pre, suf;

    if (!star)
        return strcasecmp(pat, origin) == 0;
    pre = (size_t)(star - pat), suf = strlen(star + 1);
    return n >= pre + suf && strncasecmp(origin, pat, pre) == 0 && strcasecmp(origin + n - suf, star + 1) == 0;
}

int srv_origin_allowed(const srv_origins *o, const char *origin)
{
    if (!origin)
        return 1;
    for (size_t i = 0; i < o->n; i++)
        if (origin_match(o->pat[i], origin))
            return 1;
    return 0;
}

/* This machine's own addresses (ollama's isLocalIP), for a Host that is a public IP literal. */
static int ip_is_ours(int family, const void *addr)
{
    struct ifaddrs *ifs = NULL;
    int found = 0;

    if (getifaddrs(&ifs) < 0)
        return 0;
    for (struct ifaddrs *i = ifs; i && !found; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != family)
            continue;
        if (family == AF_INET)
            found = memcmp(&((struct sockaddr_in *)i->ifa_addr)->sin_addr, addr, 4) == 0;
        else
            found = memcmp(&((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr, addr, 16) == 0;
    }
    freeifaddrs(ifs);
    return found;
}

/* ollama allows an IP literal that is loopback, private, unspecified or one of the machine's:
 * a page cannot rebind its way to one (rebinding needs a name), so only a page at that very
 * address sends it. */
static int ip_allowed(const char *host)
{
    unsigned char a[16];

    if (inet_pton(AF_INET6, host, a) == 1) {
        static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        static const unsigned char zero[16];
        if (memcmp(a, mapped, 12) == 0)
            memmove(a, a + 12, 4); /* ::ffff:a.b.c.d is a.b.c.d */
        else if (memcmp(a, zero, 15) == 0 && a[15] <= 1) /* :: and ::1 */
            return 1;
        else
            return (a[0] & 0xfe) == 0xfc || ip_is_ours(AF_INET6, a); /* fc00::/7 is private */
    } else if (inet_pton(AF_INET, host, a) != 1) {
        return -1; /* not an IP literal */
    }
    return a[0] == 127 || a[0] == 10 || (a[0] == 172 && (a[1] & 0xf0) == 16) || (a[0] == 192 && a[1] == 168) ||
           (a[0] == 0 && a[1] == 0 && a[2] == 0 && a[3] == 0) || ip_is_ours(AF_INET, a);
}

static int ends_with(const char *s, size_t n, const char *suffix)
{
    size_t k = strlen(suffix);

    return n > k && strcmp(s + n - k, suffix) == 0;
}

int srv_host_allowed(const char *host, const char *own_name)
{
    char h[256];
    const char *colon;
    size_t n;
    int ip;

    if (!host || !*host)
        return 1; /* HTTP/1.0 sends none; a browser always does */
    if (host[0] == '[') { /* "[v6]:port" or "[v6]" */
        const char *end = strchr(host, ']');
        if (!end || (end[1] && end[1] != ':'))
            return 0;
        host++, n = (size_t)(end - host);
    } else if ((colon = strchr(host, ':')) && !strchr(colon + 1, ':')) {
        n = (size_t)(colon - host); /* "name:port"; more colons: a bare IPv6 address, whole */
    } else {
        n = strlen(host);
    }
    if (n == 0 || n >= sizeof h)
        return 0;
    for (size_t i = 0; i < n; i++)
        h[i] = (char)(host[i] >= 'A' && host[i] <= 'Z' ? host[i] - 'A' + 'a' : host[i]);
    h[n] = '\0';
    if ((ip = ip_allowed(h)) >= 0)
        return ip;
    if (strcmp(h, "localhost") == 0 || (own_name && *own_name && strcasecmp(h, own_name) == 0))
        return 1;
    return ends_with(h, n, ".localhost") || ends_with(h, n, ".local") || ends_with(h, n, ".internal");
}
