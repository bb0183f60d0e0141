/* http.c: libmicrohttpd glue: the listening socket, bounded bodies, the token, routing, responses. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server/server_int.h"

void server_opts_init(server_opts *o)
{
    memset(o, 0, sizeof *o);
    o->keep_alive_s = 300;
}

/* ---------------------------------------------------------------- responses */

enum MHD_Result srv_respond(req *r, unsigned status, const char *type, const char *body, size_t len)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    enum MHD_Result ret;

    if (!resp)
        return MHD_NO;
    if (type)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    ret = MHD_queue_response(r->c, status, resp);
    MHD_destroy_response(resp);
    r->responded = 1;
    return ret;
}

enum MHD_Result srv_json(req *r, unsigned status, json_t *j)
{
    char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
    enum MHD_Result ret;

    json_decref(j);
    if (!s)
        return srv_respond(r, 500, "application/json", "{\"error\":\"out of memory\"}", 25);
    ret = srv_respond(r, status, "application/json; charset=utf-8", s, strlen(s));
    free(s);
    return ret;
}

static json_t *vmsg(const char *fmt, va_list ap)
{
    char buf[2048];

    vsnprintf(buf, sizeof buf, fmt, ap);
    return srv_json_text(buf, strlen(buf));
}

enum MHD_Result srv_err_ollama(req *r, unsigned status, const char *fmt, ...)
{
    va_list ap;
    json_t *m;

    va_start(ap, fmt);
    m = vmsg(fmt, ap);
    va_end(ap);
    return srv_json(r, status, json_pack("{s:o}", "error", m));
}

enum MHD_Result srv_err_openai(req *r, unsigned status, const char *type, const char *fmt, ...)
{
    va_list ap;
    json_t *m;

    va_start(ap, fmt);
    m = vmsg(fmt, ap);
    va_end(ap);
    return srv_json(r, status,
                    json_pack("{s:{s:o,s:s,s:n,s:n}}", "error", "message", m, "type", type, "param", "code"));
}

unsigned srv_status(int code)
{
    switch (code) {
    case MS_EINVALID: /* a field of the wrong type or out of bounds, a bad name */
    case MS_ETOOBIG: /* a prompt longer than the context */
    case MS_EUNSUPPORTED: /* a feature that would change the answer and is not built */
        return 400;
    case MS_ENOTFOUND:
        return 404;
    default:
        return 500;
    }
}

json_t *srv_err_body(srv_api api, int code, const char *msg)
{
    json_t *m = srv_json_text(msg, strlen(msg));

    if (api == SRV_OLLAMA)
        return json_pack("{s:o}", "error", m);
    /* OpenAI's clients tell a missing model by its code (NotFoundError, "model_not_found") */
    if (code == MS_ENOTFOUND)
        return json_pack("{s:{s:o,s:s,s:s,s:s}}", "error", "message", m, "type", "invalid_request_error", "param",
                         "model", "code", "model_not_found");
    return json_pack("{s:{s:o,s:s,s:n,s:n}}", "error", "message", m, "type",
                     srv_status(code) < 500 ? "invalid_request_error" : "server_error", "param", "code");
}

enum MHD_Result srv_fail(req *r, srv_api api, int code)
{
    return srv_json(r, srv_status(code), srv_err_body(api, code, ms_err_msg()));
}

enum MHD_Result srv_err_oci(req *r, unsigned status, const char *code, const char *fmt, ...)
{
    va_list ap;
    json_t *m;

    va_start(ap, fmt);
    m = vmsg(fmt, ap);
    va_end(ap);
    return srv_json(r, status, json_pack("{s:[{s:s,s:o,s:n}]}", "errors", "code", code, "message", m, "detail"));
}

int srv_stream_open(req *r, const char *type, int *fd_out)
{
    struct MHD_Response *resp;
    int p[2];
    enum MHD_Result ret;

    *fd_out = -1;
    if (pipe2(p, O_CLOEXEC) < 0)
        return ms_err_os("pipe");
    if (!(resp = MHD_create_response_from_pipe(p[0]))) { /* owns p[0] from here */
        close(p[0]);
        close(p[1]);
        return ms_err(MS_ENOMEM, "cannot create a streamed response");
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    ret = MHD_queue_response(r->c, 200, resp);
    MHD_destroy_response(resp);
    r->responded = 1;
    if (ret != MHD_YES) {
        close(p[1]);
        return ms_err(MS_EIO, "cannot queue a streamed response");
    }
    *fd_out = p[1];
    return 0;
}

int srv_write_all(int fd, const char *s, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, s, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1; /* EPIPE: libmicrohttpd closed the pipe, the client is gone */
        s += w, n -= (size_t)w;
    }
    return 0;
}

int srv_body_json(json_t **out, req *r)
{
    json_error_t e;

    *out = NULL;
    if (r->body.n == 0)
        return ms_err(MS_EINVALID, "missing request body");
    if (!(*out = json_loadb(r->body.p, r->body.n, JSON_REJECT_DUPLICATES, &e)))
        return ms_err(MS_EINVALID, "invalid JSON in the request body: %s (line %d, column %d)", e.text, e.line,
                      e.column);
    if (!json_is_object(*out)) {
        json_decref(*out);
        *out = NULL;
        return ms_err(MS_EINVALID, "the request body must be a JSON object");
    }
    return 0;
}

void srv_time_rfc3339(char *buf, size_t len, time_t t)
{
    struct tm tm;

    gmtime_r(&t, &tm);
    strftime(buf, len, "%Y-%m-%dT%H:%M:%S.000000000Z", &tm);
}

json_t *srv_json_text(const char *s, size_t len)
{
    char *fixed;
    size_t n;
    json_t *j;

    if (ms_utf8_valid(s, len))
        return json_stringn(s, len);
    if (!(fixed = ms_utf8_repair(s, len, &n)))
        return NULL;
    j = json_stringn(fixed, n);
    free(fixed);
    return j;
}

/* ---------------------------------------------------------------- requests */

/* Constant time: the token must not leak through timing. */
static int token_ok(const server *srv, struct MHD_Connection *c)
{
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    const char *key = srv->api_key;
    size_t kl = strlen(key), hl;
    unsigned diff = 0;

    if (!h || strncasecmp(h, "Bearer ", 7) != 0)
        return 0;
    h += 7;
    hl = strlen(h);
    for (size_t i = 0; i < kl; i++)
        diff |= (unsigned)(unsigned char)key[i] ^ (unsigned char)(i < hl ? h[i] : 0);
    return diff == 0 && hl == kl;
}

static enum MHD_Result unauthorized(req *r)
{
    const char *msg = "unauthorized: this server requires 'Authorization: Bearer <MSTORE_API_KEY>'";
    struct MHD_Response *resp;
    json_t *j;
    char *s;
    enum MHD_Result ret;

    if (strncmp(r->url, "/v1/", 4) == 0)
        j = json_pack("{s:{s:s,s:s,s:n,s:s}}", "error", "message", msg, "type", "invalid_request_error", "param",
                      "code", "invalid_api_key");
    else if (strncmp(r->url, "/v2/", 4) == 0 || strcmp(r->url, "/v2") == 0)
        j = json_pack("{s:[{s:s,s:s,s:n}]}", "errors", "code", "UNAUTHORIZED", "message", msg, "detail");
    else
        j = json_pack("{s:s}", "error", msg);
    s = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    if (!s)
        return MHD_NO;
    resp = MHD_create_response_from_buffer(strlen(s), s, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(s);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"mstore\"");
    ret = MHD_queue_response(r->c, 401, resp);
    MHD_destroy_response(resp);
    r->responded = 1;
    return ret;
}

static enum MHD_Result too_large(req *r)
{
    size_t max = r->srv->o.max_body;

    if (strncmp(r->url, "/v1/", 4) == 0)
        return srv_err_openai(r, 413, "invalid_request_error", "request body over the limit of %zu bytes", max);
    return srv_err_ollama(r, 413, "request body over the limit of %zu bytes", max);
}

static int is_blob_upload(const char *method, const char *url)
{
    return strcmp(method, "POST") == 0 && strncmp(url, "/api/blobs/", 11) == 0;
}

static enum MHD_Result route(req *r)
{
    if (strncmp(r->url, "/api/", 5) == 0)
        return ollama_route(r);
    if (strncmp(r->url, "/v1/", 4) == 0)
        return openai_route(r);
    if (strcmp(r->url, "/v2") == 0 || strncmp(r->url, "/v2/", 4) == 0)
        return oci_route(r);
    if (strcmp(r->url, "/") == 0 && (strcmp(r->method, "GET") == 0 || strcmp(r->method, "HEAD") == 0))
        return srv_respond(r, 200, "text/plain", "mstore is running", 17); /* what ollama answers */
    return srv_err_ollama(r, 404, "no such endpoint: %s %s", r->method, r->url);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *data, size_t *data_size, void **con_cls)
{
    server *srv = cls;
    req *r = *con_cls;

    (void)version;
    if (!r) { /* headers are in; no body yet */
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (!(r = calloc(1, sizeof *r)))
            return MHD_NO;
        r->srv = srv, r->c = c, r->url = url, r->method = method;
        *con_cls = r;
        if (srv->api_key && !token_ok(srv, c))
            return unauthorized(r);
        if (!is_blob_upload(method, url) && cl && strtoull(cl, NULL, 10) > srv->o.max_body) {
            r->too_big = 1;
            return too_large(r);
        }
        return MHD_YES;
    }
    if (*data_size) {
        size_t len = *data_size;
        *data_size = 0;
        if (r->responded)
            return MHD_YES; /* answered already (token, size): the rest is discarded */
        if (is_blob_upload(method, url)) {
            ollama_blob_upload(r, data, len);
            return MHD_YES;
        }
        if (r->too_big || r->body.n + len > srv->o.max_body) {
            r->too_big = 1;
            return MHD_YES;
        }
        return ms_text_put(&r->body, data, len) < 0 ? MHD_NO : MHD_YES;
    }
    if (r->responded)
        return MHD_YES;
    if (r->too_big)
        return too_large(r);
    return route(r);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    req *r = *con_cls;

    (void)cls, (void)c, (void)toe;
    if (!r)
        return;
    ollama_upload_close(r); /* an upload cut short leaves nothing */
    free(r->body.p);
    free(r);
    *con_cls = NULL;
}

/* ---------------------------------------------------------------- listening */

/* Split "HOST:PORT" / "[V6]:PORT" / ":PORT" / "PORT" / "HOST" (port 11434), with an optional
 * "http://" in front, as OLLAMA_HOST accepts them. */
static int parse_listen(const char *s, char *host, size_t host_len, char *port, size_t port_len)
{
    const char *colon, *spec = s;

    if (strncmp(s, "http://", 7) == 0)
        s += 7;
    if (s[0] == '[') {
        const char *end = strchr(s, ']');
        if (!end || (end[1] && end[1] != ':'))
            return ms_err(MS_EINVALID, "listen address '%s': expected [IPV6]:PORT", spec);
        snprintf(host, host_len, "%.*s", (int)(end - s - 1), s + 1);
        snprintf(port, port_len, "%s", end[1] ? end + 2 : "11434");
    } else if ((colon = strrchr(s, ':'))) {
        snprintf(host, host_len, "%.*s", (int)(colon - s), s);
        snprintf(port, port_len, "%s", colon + 1);
    } else if (*s && strspn(s, "0123456789") == strlen(s)) {
        snprintf(host, host_len, "127.0.0.1");
        snprintf(port, port_len, "%s", s);
    } else {
        snprintf(host, host_len, "%s", s);
        snprintf(port, port_len, "11434");
    }
    if (!*host)
        snprintf(host, host_len, "127.0.0.1");
    if (!*port || strspn(port, "0123456789") != strlen(port) || atol(port) > 65535)
        return ms_err(MS_EINVALID, "listen address '%s': port '%s' is not a number from 0 to 65535", spec, port);
    return 0;
}

static int open_listener(server *srv, const char *spec)
{
    char host[256], port[16], shown[300];
    struct addrinfo hints = {0}, *ai = NULL;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    int fd = -1, one = 1, rc;

    if ((rc = parse_listen(spec, host, sizeof host, port, sizeof port)) < 0)
        return rc;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    if ((rc = getaddrinfo(host, port, &hints, &ai)) != 0)
        return ms_err(MS_EINVALID, "listen address '%s': %s", spec, gai_strerror(rc));
    if ((fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0) {
        rc = ms_err_os("socket");
        goto done;
    }
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 128) < 0) {
        if (errno == EADDRINUSE)
            rc = ms_err(MS_EBUSY,
                        "%s:%s is already in use (another mstore serve or ollama?): stop it, or pick another "
                        "address with --listen HOST:PORT or MSTORE_HOST",
                        host, port);
        else
            rc = ms_err_os("listen on %s:%s", host, port);
        goto done;
    }
    getsockname(fd, (struct sockaddr *)&ss, &sl);
    if (ss.ss_family == AF_INET6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
        snprintf(shown, sizeof shown, "[%s]:%u", host, ntohs(a->sin6_port));
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
        snprintf(shown, sizeof shown, "%s:%u", host, ntohs(a->sin_port));
    }
    snprintf(srv->addr, sizeof srv->addr, "%s", shown);
    srv->listen_fd = fd;
    fd = -1;
    rc = 0;
done:
    if (fd >= 0)
        close(fd);
    freeaddrinfo(ai);
    return rc;
}

int server_start(server **out, const server_opts *o)
{
    server *srv = calloc(1, sizeof *srv);
    const char *spec = o->listen && *o->listen ? o->listen : SERVER_DEFAULT_LISTEN;
    int rc;

    *out = NULL;
    if (!srv)
        return ms_err(MS_ENOMEM, "out of memory");
    srv->o = *o;
    srv->listen_fd = -1;
    if (!srv->o.max_body)
        srv->o.max_body = SERVER_MAX_BODY;
    if (!srv->o.max_clients)
        srv->o.max_clients = 64;
    pthread_mutex_init(&srv->mu, NULL);
    pthread_cond_init(&srv->cv, NULL);
    if (!(srv->home = ms_strdup_printf("%s", o->home)) ||
        (o->api_key && *o->api_key && !(srv->api_key = ms_strdup_printf("%s", o->api_key)))) {
        rc = ms_err(MS_ENOMEM, "out of memory");
        goto fail;
    }
    if ((rc = open_listener(srv, spec)) < 0 || (rc = srv_models_start(srv)) < 0)
        goto fail;
    srv->d = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0,
                              NULL, NULL, on_request, srv, MHD_OPTION_LISTEN_SOCKET, srv->listen_fd,
                              MHD_OPTION_CONNECTION_LIMIT, (unsigned)srv->o.max_clients, MHD_OPTION_CONNECTION_TIMEOUT,
                              600u, MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL, MHD_OPTION_END);
    if (!srv->d) {
        rc = ms_err(MS_EIO, "cannot start the HTTP server on %s", srv->addr);
        goto fail;
    }
    srv->listen_fd = -1; /* libmicrohttpd's now: it closes it when it stops */
    *out = srv;
    return 0;
fail:
    server_stop(srv);
    return rc;
}

const char *server_address(const server *srv)
{
    return srv->addr;
}

void server_stop(server *srv)
{
    if (!srv)
        return;
    if (srv->d)
        MHD_stop_daemon(srv->d);
    if (srv->listen_fd >= 0)
        close(srv->listen_fd);
    srv_models_stop(srv);
    pthread_cond_destroy(&srv->cv);
    pthread_mutex_destroy(&srv->mu);
    free(srv->home);
    free(srv->api_key);
    free(srv);
}
