/* http.c: one HTTP exchange with a registry through libcurl: headers we need, bounded bodies,
 * the Bearer / Basic auth flow, and retries with backoff. */
#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "registry/registry_int.h"

#define DEFAULT_BODY_MAX (256u << 10)
#define TOKEN_BODY_MAX (1u << 20)

void registry_opts_init(registry_opts *o)
{
    memset(o, 0, sizeof *o);
    o->parallel = 4;
}

int registry_host(char host_out[NAME_HOST_MAX], const model_name *name)
{
    const char *env = getenv("MSTORE_REGISTRY");
    /* As ollama: a name without a host comes from ollama's registry unless told otherwise. */
    const char *h = name->host[0] ? name->host : env && *env ? env : REGISTRY_DEFAULT_HOST;

    host_out[0] = '\0';
    /* The host goes into a URL: refuse anything that could change the URL's shape. */
    for (const char *p = h; *p; p++)
        if (!(isalnum((unsigned char)*p) || *p == '.' || *p == '-' || *p == ':' || *p == '_' || *p == '[' || *p == ']'))
            return ms_err(MS_EINVALID, "registry host '%.100s': character '%c' is not allowed", h, *p);
    if (strlen(h) >= NAME_HOST_MAX)
        return ms_err(MS_EINVALID, "registry host '%.60s...': longer than %d characters", h, NAME_HOST_MAX - 1);
    snprintf(host_out, NAME_HOST_MAX, "%s", h);
    return 0;
}

long reg_env_long(const char *var, long dflt, long min, long max)
{
    const char *v = getenv(var);
    char *end;
    long n;

    if (!v || !*v)
        return dflt;
    errno = 0;
    n = strtol(v, &end, 10);
    return errno || *end || n < min || n > max ? dflt : n;
}

static void global_init(void) { curl_global_init(CURL_GLOBAL_ALL); }

CURL *reg_easy_new(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;

    /* curl_global_init is not thread-safe: run it once, before any thread makes a handle. */
    pthread_once(&once, global_init);
    return curl_easy_init();
}

/* Docker Hub is named docker.io (and index.docker.io in Docker's config.json); its
 * distribution API answers at registry-1.docker.io, where docker and Docker Model Runner send
 * `docker.io/ai/smollm2`. 1 for any of the three. */
static int docker_hub(const char *host, size_t n)
{
    static const char *const names[] = { "docker.io", "index.docker.io", "registry-1.docker.io" };

    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (n == strlen(names[i]) && !strncasecmp(host, names[i], n))
            return 1;
    return 0;
}

int reg_client_init(reg_client *c, const char *home, const char *host, const model_name *name,
                    const registry_opts *o, int push)
{
    int rc;

    memset(c, 0, sizeof *c);
    pthread_mutex_init(&c->mu, NULL);
    snprintf(c->host, sizeof c->host, "%s", host);
    snprintf(c->base, sizeof c->base, "%s://%s", o->insecure ? "http" : "https",
             docker_hub(host, strlen(host)) ? "registry-1.docker.io" : host);
    snprintf(c->repo, sizeof c->repo, "%s/%s", name->namespace_, name->model);
    /* Registries refuse upper case in repository names (the distribution spec's grammar is
     * lower case); local names match whatever their case, so the wire gets them lowered. */
    for (char *p = c->repo; *p; p++)
        *p = (char)tolower((unsigned char)*p);
    snprintf(c->scope_actions, sizeof c->scope_actions, "%s", push ? "pull,push" : "pull");
    c->cancel = o->cancel;
    if ((rc = reg_credentials_find(&c->basic, &c->token, home, host, o->auth)) < 0)
        return rc;
    return 0;
}

void reg_client_fini(reg_client *c)
{
    if (c->basic) {
        memset(c->basic, 0, strlen(c->basic));   /* a password should not linger in freed memory */
        free(c->basic);
    }
    if (c->token)
        memset(c->token, 0, strlen(c->token));
    free(c->token);
    c->basic = c->token = NULL;
    pthread_mutex_destroy(&c->mu);
}

void reg_resp_reset(reg_resp *r)
{
    free(r->body);
    r->body = NULL;
    r->body_len = 0;
    r->status = 0;
    r->overflow = 0;
    r->sink_rc = 0;
    r->digest[0] = r->location[0] = r->www_auth[0] = r->content_range[0] = '\0';
}

void reg_backoff(int n)
{
    long ms = 200;
    struct timespec ts;

    for (int i = 1; i < n && ms < 5000; i++)
        ms *= 2;
    if (ms > 5000)
        ms = 5000;
    ts.tv_sec = ms / 1000;
    ts.tv_nsec = (ms % 1000) * 1000000L;
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* `src` into `out` (`cap` bytes), printable ASCII as it is and every other byte, '\\' and '"' as
 * \xNN, cut at a whole character with "..." when it does not fit: the text came from the network
 * and goes to terminals and JSON error fields. */
static void text_escape(char *out, size_t cap, const char *src)
{
    size_t n = 0;

    out[0] = '\0';
    for (const unsigned char *p = (const unsigned char *)(src ? src : ""); *p; p++) {
        int plain = *p >= 0x20 && *p < 0x7f && *p != '\\' && *p != '"';
        size_t w = plain ? 1 : 4;

        if (n + w + 4 > cap) { /* room for this character, "..." and the NUL */
            snprintf(out + n, cap - n, "...");
            return;
        }
        if (plain)
            out[n++] = (char)*p;
        else
            n += (size_t)snprintf(out + n, cap - n, "\\x%02x", *p);
        out[n] = '\0';
    }
}

int reg_http_err(int code, const char *what, const reg_resp *r)
{
    char ecode[48], emsg[164];
    json_t *root = r->body && r->body_len ? json_loadb(r->body, r->body_len, 0, NULL) : NULL;
    json_t *e0 = json_array_get(json_object_get(root, "errors"), 0);

    /* Only the registry's own error JSON ({"errors": [{"code", "message"}]}, the distribution
     * spec's) says why, and only its code and message are shown, escaped and cut. Any other
     * body is not shown at all: the host may be no registry (a client of `mstore serve` can
     * name an internal address), and its error page may hold anything, secrets included. */
    text_escape(ecode, sizeof ecode, json_string_value(json_object_get(e0, "code")));
    text_escape(emsg, sizeof emsg, json_string_value(json_object_get(e0, "message")));
    json_decref(root);
    return ms_err(code, "%s: HTTP %ld%s%s%s%s", what, r->status, ecode[0] ? ": " : "", ecode, emsg[0] ? ": " : "",
                  emsg);
}

/* ------------------------------------------------------------------ challenge */

static const char *param_read(const char *p, char *key, size_t klen, char *val, size_t vlen)
{
    size_t k = 0, v = 0;

    while (*p == ' ' || *p == ',')
        p++;
    while (*p && *p != '=' && *p != ',' && *p != ' ') {
        if (k + 1 < klen)
            key[k++] = *p;
        p++;
    }
    key[k] = '\0';
    if (*p != '=')
        return NULL;
    p++;
    if (*p == '"') {
        for (p++; *p && *p != '"'; p++) {
            if (*p == '\\' && p[1])
                p++;
            if (v + 1 >= vlen)
                return NULL;   /* truncating a realm URL would send us somewhere else */
            val[v++] = *p;
        }
        if (*p != '"')
            return NULL;
        p++;
    } else {
        for (; *p && *p != ',' && *p != ' '; p++) {
            if (v + 1 >= vlen)
                return NULL;
            val[v++] = *p;
        }
    }
    val[v] = '\0';
    return p;
}

int reg_challenge_parse(reg_challenge *out, const char *value)
{
    const char *p = value;
    size_t n = 0;

    memset(out, 0, sizeof *out);
    while (*p == ' ')
        p++;
    while (*p && *p != ' ' && n + 1 < sizeof out->scheme)
        out->scheme[n++] = *p++;
    out->scheme[n] = '\0';
    if (n == 0 || (*p && *p != ' '))
        return ms_err(MS_EINVALID, "www-authenticate '%.100s': no auth scheme", value);
    while (*p) {
        char key[32], val[1024];

        while (*p == ' ' || *p == ',')
            p++;
        if (!*p)
            break;
        if (!(p = param_read(p, key, sizeof key, val, sizeof val)))
            return ms_err(MS_EINVALID, "www-authenticate '%.100s': malformed parameter", value);
        char *dst = !strcasecmp(key, "realm") ? out->realm : !strcasecmp(key, "service") ? out->service
                  : !strcasecmp(key, "scope") ? out->scope : NULL;
        size_t cap = dst == out->realm ? sizeof out->realm : dst == out->service ? sizeof out->service
                   : sizeof out->scope;
        size_t vl = strlen(val);

        if (!dst)
            continue;
        if (vl >= cap)   /* a cut realm or scope would ask the wrong server for the wrong thing */
            return ms_err(MS_EINVALID, "www-authenticate: %s longer than %zu characters", key, cap - 1);
        memcpy(dst, val, vl + 1);
    }
    if (!strcasecmp(out->scheme, "Bearer") &&
        strncmp(out->realm, "https://", 8) != 0 && strncmp(out->realm, "http://", 7) != 0)
        return ms_err(MS_EINVALID, "www-authenticate '%.100s': bearer realm is not an http(s) url", value);
    return 0;
}

/* ------------------------------------------------------------------ credentials */

/* The host that names without a host go to: the one $MSTORE_REGISTRY_AUTH is for. */
static const char *env_registry_host(void)
{
    const char *env = getenv("MSTORE_REGISTRY");

    return env && *env ? env : REGISTRY_DEFAULT_HOST;
}

/* Docker's config.json keys may be URLs ("https://index.docker.io/v1/"): compare the host
 * part only, case-insensitively, as host names are; Docker Hub's names are one host. */
static int host_key_matches(const char *key, const char *host)
{
    size_t n;

    if (!strncasecmp(key, "https://", 8))
        key += 8;
    else if (!strncasecmp(key, "http://", 7))
        key += 7;
    n = strcspn(key, "/");
    return (n == strlen(host) && !strncasecmp(key, host, n)) || (docker_hub(key, n) && docker_hub(host, strlen(host)));
}

/* RFC 4648 base64 into *out (NUL-terminated); -1 for anything else. */
static int base64_decode(char **out, const char *s)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t len = strlen(s), n = 0;
    unsigned acc = 0;
    int bits = 0;
    char *b = malloc(len + 1);

    *out = NULL;
    if (!b)
        return -1;
    for (size_t i = 0; i < len && s[i] != '='; i++) {
        const char *p = memchr(tab, s[i], 64);
        if (!p || !s[i]) {
            free(b);
            return -1;
        }
        acc = (acc << 6) | (unsigned)(p - tab);
        if ((bits += 6) >= 8) {
            bits -= 8;
            b[n++] = (char)((acc >> bits) & 0xff);
        }
    }
    b[n] = '\0';
    *out = b;
    return 0;
}

/* One entry of the credentials file: "user:password", or an object with "username" and
 * "password", "auth" (base64 of user:password, as Docker's config.json has it), or "token"
 * (a Bearer token sent with every request, e.g. an `mstore serve` MSTORE_API_KEY). */
static int entry_read(char **basic_out, char **token_out, const json_t *v, const char *path, const char *host)
{
    const json_t *user, *pass, *auth, *tok;
    char *b = NULL;

    if (json_is_string(v)) {
        if (!strchr(json_string_value(v), ':'))
            goto bad;
        b = strdup(json_string_value(v));
    } else if (json_is_object(v) && json_is_string(tok = json_object_get(v, "token")) && *json_string_value(tok)) {
        if (!(*token_out = strdup(json_string_value(tok))))
            return ms_err(MS_ENOMEM, "out of memory");
        return 0;
    } else if (json_is_object(v) && json_is_string(user = json_object_get(v, "username")) &&
               json_is_string(pass = json_object_get(v, "password"))) {
        b = ms_strdup_printf("%s:%s", json_string_value(user), json_string_value(pass));
    } else if (json_is_object(v) && json_is_string(auth = json_object_get(v, "auth"))) {
        if (base64_decode(&b, json_string_value(auth)) < 0 || !strchr(b, ':')) {
            free(b);
            goto bad;
        }
    } else {
        goto bad;
    }
    if (!b)
        return ms_err(MS_ENOMEM, "out of memory");
    *basic_out = b;
    return 0;
bad:
    /* The value is a secret: the message names the host, never the value. */
    return ms_err(MS_EINVALID,
                  "%s: entry for '%s' is not \"user:password\" nor an object with \"username\" and "
                  "\"password\", \"auth\" (base64 of user:password) or \"token\"",
                  path, host);
}

static int file_find(char **basic_out, char **token_out, const char *path, const char *host)
{
    char *buf = NULL;
    json_t *root = NULL, *auths, *v;
    json_error_t jerr;
    const char *key;
    size_t len = 0;
    int rc;

    if ((rc = ms_file_read(&buf, &len, path, 1u << 20)) < 0)
        goto done;
    if (!(root = json_loadb(buf, len, 0, &jerr)) || !json_is_object(root)) {
        rc = ms_err(MS_EINVALID, "%s: not a json object {\"host\": \"user:password\"} (line %d)", path,
                    root ? 0 : jerr.line);
        goto done;
    }
    /* Docker's config.json keeps its entries under "auths"; a flat object is ours. */
    auths = json_object_get(root, "auths");
    if (!json_is_object(auths))
        auths = root;
    json_object_foreach(auths, key, v)
    {
        if (host_key_matches(key, host)) {
            rc = entry_read(basic_out, token_out, v, path, host);
            break;
        }
    }
done:
    json_decref(root);
    if (buf)
        memset(buf, 0, len);
    free(buf);
    return rc;
}

int reg_credentials_find(char **basic_out, char **token_out, const char *home, const char *host, const char *opts_auth)
{
    const char *env = getenv("MSTORE_REGISTRY_AUTH");
    char *path = NULL;
    int rc = 0;

    *basic_out = *token_out = NULL;
    /* Credentials are bound to the host they were given for. A name's host is chosen by whoever
     * typed the name (a client of `mstore serve` included), so the environment's password goes
     * only to the registry the environment names, never to any host a name brings. */
    if (!(opts_auth && *opts_auth) && env && *env && strcasecmp(host, env_registry_host()) == 0)
        opts_auth = env;
    if (opts_auth && *opts_auth) {
        if (!strchr(opts_auth, ':'))
            return ms_err(MS_EINVALID, "registry credentials: expected user:password (no ':' found)");
        return (*basic_out = strdup(opts_auth)) ? 0 : ms_err(MS_ENOMEM, "out of memory");
    }
    if (!home || !(path = ms_path_join(home, "credentials.json")))
        return home ? ms_err(MS_ENOMEM, "out of memory") : 0;
    if (ms_is_file(path))
        rc = file_find(basic_out, token_out, path, host);
    free(path);
    return rc;
}

/* ------------------------------------------------------------------ one exchange */

size_t reg_resp_header(char *buf, size_t size, size_t n, void *ctx)
{
    reg_resp *r = ctx;
    size_t len = size * n;
    char line[4200];
    size_t l = len < sizeof line - 1 ? len : sizeof line - 1;
    char *v;

    memcpy(line, buf, l);
    line[l] = '\0';
    while (l > 0 && (line[l - 1] == '\r' || line[l - 1] == '\n'))
        line[--l] = '\0';
    if (!strncmp(line, "HTTP/", 5)) {
        /* A new response (after a redirect or 100 Continue): forget the previous one's headers. */
        char *sp = strchr(line, ' ');
        r->status = sp ? strtol(sp + 1, NULL, 10) : 0;
        r->digest[0] = r->location[0] = r->www_auth[0] = r->content_range[0] = '\0';
        return len;
    }
    if (!(v = strchr(line, ':')))
        return len;
    *v++ = '\0';
    while (*v == ' ' || *v == '\t')
        v++;
    if (!strcasecmp(line, "docker-content-digest"))
        snprintf(r->digest, sizeof r->digest, "%s", v);
    else if (!strcasecmp(line, "location"))
        snprintf(r->location, sizeof r->location, "%s", v);
    else if (!strcasecmp(line, "www-authenticate"))
        snprintf(r->www_auth, sizeof r->www_auth, "%s", v);
    else if (!strcasecmp(line, "content-range"))
        snprintf(r->content_range, sizeof r->content_range, "%s", v);
    return len;
}

static size_t on_body(char *buf, size_t size, size_t n, void *ctx)
{
    reg_resp *r = ctx;
    size_t len = size * n;
    size_t max = r->body_max ? r->body_max : DEFAULT_BODY_MAX;
    char *nb;

    if (r->sink && r->status >= 200 && r->status < 300) {
        if ((r->sink_rc = r->sink(r->sink_ctx, buf, len)) != 0)
            return 0;   /* aborts the transfer with CURLE_WRITE_ERROR */
        return len;
    }
    if (r->body_len + len > max) {
        r->overflow = 1;
        return 0;
    }
    if (!(nb = realloc(r->body, r->body_len + len + 1)))
        return 0;
    r->body = nb;
    memcpy(r->body + r->body_len, buf, len);
    r->body_len += len;
    r->body[r->body_len] = '\0';
    return len;
}

static size_t on_read(char *buf, size_t size, size_t n, void *ctx)
{
    reg_body *b = ctx;
    size_t len = size * n, left = b->len - b->off;

    if (len > left)
        len = left;
    memcpy(buf, (const char *)b->data + b->off, len);
    b->off += len;
    return len;
}

static int transient_code(CURLcode e)
{
    return e == CURLE_COULDNT_CONNECT || e == CURLE_RECV_ERROR || e == CURLE_SEND_ERROR ||
           e == CURLE_PARTIAL_FILE || e == CURLE_GOT_NOTHING || e == CURLE_OPERATION_TIMEDOUT ||
           e == CURLE_HTTP2 || e == CURLE_HTTP2_STREAM ||
           e == CURLE_COULDNT_RESOLVE_HOST;
}

/* "scheme://host:port" of `url`, lower case, the default port spelled out; "" when the URL has
 * no scheme. Two URLs are the same origin when these are equal (RFC 6454). */
void reg_url_origin(char *out, size_t len, const char *url)
{
    const char *p = strstr(url, "://"), *h, *e;
    size_t n = 0;
    int https;

    out[0] = '\0';
    if (!p)
        return;
    https = (size_t)(p - url) == 5 && !strncasecmp(url, "https", 5);
    h = p + 3;
    e = h + strcspn(h, "/?#");
    if (memchr(h, '@', (size_t)(e - h)))   /* userinfo: never ours; an origin nothing equals */
        return;
    for (const char *q = url; q < e && n + 1 < len; q++)
        out[n++] = (char)tolower((unsigned char)*q);
    out[n] = '\0';
    /* no port after the host (after the "]" of an IPv6 literal): the scheme's default */
    if (!(p = memchr(h, ']', (size_t)(e - h))))
        p = h;
    if (!memchr(p, ':', (size_t)(e - p)) && n + 6 < len)
        snprintf(out + n, len - n, ":%s", https ? "443" : "80");
}

/* Credentials go only to the origin they were given for: the registry's own. An upload
 * Location, a token realm or a redirect may name any host, and the registry that names it is
 * not trusted with someone else's password (token requests carry Basic by the registry's own
 * challenge, and are sent by for_token, not here). */
static int same_origin(const reg_client *c, const char *url)
{
    char a[NAME_HOST_MAX + 32], b[NAME_HOST_MAX + 32];

    reg_url_origin(a, sizeof a, c->base);
    reg_url_origin(b, sizeof b, url);
    return a[0] && strcmp(a, b) == 0;
}

/* `for_token`: a token request, which carries the Basic credentials (if any), never a token. */
static int cancelled(const reg_client *c)
{
    return c->cancel && __atomic_load_n(c->cancel, __ATOMIC_RELAXED);
}

/* libcurl calls it often while bytes move and about once a second while they do not, so a
 * stalled transfer notices a cancel as soon as a moving one: non-zero aborts the transfer. */
static int on_xferinfo(void *ctx, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow)
{
    (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
    return cancelled(ctx);
}

/* The method and its body on `h`; `b` is read during the transfer. */
static void method_set(CURL *h, const char *method, reg_body *b)
{
    if (!strcmp(method, "GET") || !strcmp(method, "HEAD")) {
        /* Blob GETs redirect to storage (S3 and the like); curl drops our Authorization header
         * when the redirect goes to another host. */
        curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
        curl_easy_setopt(h, CURLOPT_MAXREDIRS, 5L);
        if (!strcmp(method, "HEAD"))
            curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    } else if (!strcmp(method, "POST")) {
        curl_easy_setopt(h, CURLOPT_POST, 1L);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, b->data ? (const char *)b->data : "");
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)b->len);
    } else {   /* PUT, PATCH, DELETE */
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
        if (strcmp(method, "DELETE") != 0) {
            curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
            curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read);
            curl_easy_setopt(h, CURLOPT_READDATA, b);
            curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)b->len);
        }
    }
}

static int perform(reg_client *c, CURL *h, const char *method, const char *url, const char *const *headers,
                   const reg_body *body, reg_resp *r, int *transient_out, int for_token)
{
    struct curl_slist *hl = NULL, *t;
    char full[8192], auth[4096] = "", errbuf[CURL_ERROR_SIZE] = "";
    reg_body b = body ? *body : (reg_body){ NULL, 0, 0 };
    int rc = 0, use_basic, mine;
    CURLcode e;

    *transient_out = 0;
    if (url[0] == '/')
        snprintf(full, sizeof full, "%s%s", c->base, url);
    else
        snprintf(full, sizeof full, "%s", url);
    mine = for_token || same_origin(c, full);
    pthread_mutex_lock(&c->mu);
    if (c->token && !for_token && mine)
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", c->token);
    use_basic = mine && c->basic && (for_token || (c->use_basic && !c->token));
    pthread_mutex_unlock(&c->mu);
    for (size_t i = 0; headers && headers[i]; i++)
        if ((t = curl_slist_append(hl, headers[i])))
            hl = t;
    if (auth[0] && (t = curl_slist_append(hl, auth)))
        hl = t;
    if ((t = curl_slist_append(hl, "Expect:")))   /* no 100-continue round trip before PUT bodies */
        hl = t;
    reg_resp_reset(r);
    if (cancelled(c)) {   /* between requests (a retry, the next part): stop before starting one */
        curl_slist_free_all(hl);
        return ms_err(MS_EINTR, "%s %s: cancelled", method, full);
    }
    curl_easy_reset(h);   /* keeps the connection cache: later requests reuse the connection */
    curl_easy_setopt(h, CURLOPT_URL, full);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 15L);
    /* A connection that stalls (a dropped peer that never sends FIN) or trickles (a hostile
     * registry at 2 bytes/s) is given up after REG_STALL_SECONDS below REG_MIN_RATE, then
     * retried; the retries only reset on real progress (download.c), so a trickle ends in a
     * clear error within minutes instead of hours. */
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, reg_env_long("MSTORE_REGISTRY_MIN_RATE", REG_MIN_RATE, 1, 1L << 30));
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, reg_env_long("MSTORE_REGISTRY_STALL_SECONDS", REG_STALL_SECONDS, 1, 3600));
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    if (c->cancel) {
        curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_xferinfo);
        curl_easy_setopt(h, CURLOPT_XFERINFODATA, c);
    }
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, reg_resp_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "mstore/0.1");
    curl_easy_setopt(h, CURLOPT_BUFFERSIZE, 512L << 10);
    if (use_basic) {
        curl_easy_setopt(h, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
        curl_easy_setopt(h, CURLOPT_USERPWD, c->basic);
    }
    method_set(h, method, &b);
    e = curl_easy_perform(h);
    if (e != CURLE_OK && r->sink_rc > 0) {
        e = CURLE_OK;   /* the sink had every byte it asked for and stopped the transfer */
    } else if (e != CURLE_OK) {
        if (e == CURLE_ABORTED_BY_CALLBACK && cancelled(c))
            rc = ms_err(MS_EINTR, "%s %s: cancelled", method, full);   /* not transient: no retry */
        else if (r->sink_rc < 0)
            rc = r->sink_rc;   /* the sink's own message (disk full, too many bytes) stands */
        else if (r->overflow)
            rc = ms_err(MS_EINVALID, "%s: response body larger than %zu bytes", full,
                        r->body_max ? r->body_max : (size_t)DEFAULT_BODY_MAX);
        else if (e == CURLE_SSL_CONNECT_ERROR && strstr(errbuf, "wrong version number"))
            /* OpenSSL read "HTTP/1.1 400" where a TLS record should be: the server answered
             * our ClientHello in plain HTTP. Say so, and how to allow it, not OpenSSL's words. */
            rc = ms_err(MS_EIO, "%s %s: the registry speaks plain HTTP, not HTTPS (--insecure allows plain HTTP)",
                        method, full);
        else {
            *transient_out = transient_code(e);
            rc = ms_err(MS_EIO, "%s %s: %s", method, full, errbuf[0] ? errbuf : curl_easy_strerror(e));
        }
    }
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, NULL);
    curl_slist_free_all(hl);
    return rc;
}

/* GET the realm for a token covering `scope`; keeps it in c->token. */
int reg_token_parse(char **out, const char *body, size_t len, const char *realm)
{
    json_t *root = json_loadb(body, len, 0, NULL), *tok;
    int rc = 0;

    *out = NULL;
    tok = root ? json_object_get(root, "token") : NULL;
    if (!tok || !json_is_string(tok))
        tok = root ? json_object_get(root, "access_token") : NULL;
    if (!tok || !json_is_string(tok) || !*json_string_value(tok))
        rc = ms_err(MS_EINVALID, "registry token response from %s: no \"token\" string", realm);
    else if (!(*out = strdup(json_string_value(tok))))
        rc = ms_err(MS_ENOMEM, "out of memory");
    json_decref(root);
    return rc;
}

static int token_fetch(reg_client *c, CURL *h, const reg_challenge *ch)
{
    char scope[600], url[4096], *es = NULL, *ss = NULL;
    reg_resp r = { 0 };
    char *tok;
    int transient, rc;
    int attempt = 0;

    if (ch->scope[0])
        snprintf(scope, sizeof scope, "%s", ch->scope);
    else
        snprintf(scope, sizeof scope, "repository:%s:%s", c->repo, c->scope_actions);
    es = curl_easy_escape(h, scope, 0);
    ss = curl_easy_escape(h, ch->service, 0);
    if (!es || !ss) {
        rc = ms_err(MS_ENOMEM, "out of memory");
        goto done;
    }
    snprintf(url, sizeof url, "%s%sservice=%s&scope=%s", ch->realm, strchr(ch->realm, '?') ? "&" : "?", ss, es);
    r.body_max = TOKEN_BODY_MAX;
    for (;;) {
        rc = perform(c, h, "GET", url, NULL, NULL, &r, &transient, 1);
        if ((rc == 0 && r.status < 500 && r.status != 429) || (rc < 0 && !transient) || ++attempt >= REG_MAX_ATTEMPTS)
            break;
        reg_backoff(attempt);
    }
    if (rc < 0)
        goto done;
    if (r.status != 200) {
        rc = reg_http_err(r.status == 401 || r.status == 403 ? MS_EINVALID : MS_EIO,
                          "registry token request (check the credentials)", &r);
        goto done;
    }
    if ((rc = reg_token_parse(&tok, r.body ? r.body : "", r.body_len, ch->realm)) < 0)
        goto done;
    pthread_mutex_lock(&c->mu);
    free(c->token);
    c->token = tok;
    pthread_mutex_unlock(&c->mu);
done:
    reg_resp_reset(&r);
    curl_free(es);
    curl_free(ss);
    return rc;
}

int reg_request(reg_client *c, CURL *h, const char *method, const char *url, const char *const *headers,
                const reg_body *body, reg_resp *r, int *transient_out)
{
    reg_challenge ch;
    int rc;

    if ((rc = perform(c, h, method, url, headers, body, r, transient_out, 0)) < 0 || r->status != 401)
        return rc;
    /* 401: the challenge says how to authenticate; answer it once, then retry the request. */
    if (!r->www_auth[0] || reg_challenge_parse(&ch, r->www_auth) < 0)
        return 0;   /* the caller reports the 401 */
    if (!strcasecmp(ch.scheme, "Bearer")) {
        if ((rc = token_fetch(c, h, &ch)) < 0)
            return rc;
    } else if (!strcasecmp(ch.scheme, "Basic") && c->basic && !c->use_basic) {
        pthread_mutex_lock(&c->mu);
        c->use_basic = 1;
        pthread_mutex_unlock(&c->mu);
    } else {
        return 0;
    }
    return perform(c, h, method, url, headers, body, r, transient_out, 0);
}

int reg_request_retry(reg_client *c, CURL *h, const char *method, const char *url,
                      const char *const *headers, const reg_body *body, reg_resp *r)
{
    int rc, transient;

    for (int attempt = 1;; attempt++) {
        rc = reg_request(c, h, method, url, headers, body, r, &transient);
        if (rc == 0 && r->status < 500 && r->status != 429)
            return 0;
        if ((rc < 0 && !transient) || attempt >= REG_MAX_ATTEMPTS)
            return rc;   /* a final 5xx returns 0 with the status for the caller to report */
        reg_backoff(attempt);
    }
}
