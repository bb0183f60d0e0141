/* http.c: libmicrohttpd glue: the listening socket, connection slots, what is refused at the headers
 * (Host, Origin, the token, a declared size), bounded bodies, routing, responses. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
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

enum MHD_Result srv_queue(req *r, unsigned status, struct MHD_Response *resp)
{
    enum MHD_Result ret;

    if (!resp)
        return MHD_NO;
    if (r->origin) { /* an allowed page may read the answer (gin-contrib/cors, as ollama) */
        MHD_add_response_header(resp, "Access-Control-Allow-Origin", r->origin);
        MHD_add_response_header(resp, "Vary", "Origin");
    }
    ret = MHD_queue_response(r->c, status, resp);
    MHD_destroy_response(resp);
    r->responded = 1;
    return ret;
}

enum MHD_Result srv_respond(req *r, unsigned status, const char *type, const char *body, size_t len)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);

    if (resp && type)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    return srv_queue(r, status, resp);
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
    case MS_EBUSY: /* out of memory or descriptors for a load, or stopping: try again later */
        return 503;
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
    if (srv_queue(r, 200, resp) != MHD_YES) {
        close(p[1]);
        return ms_err(MS_EIO, "cannot queue a streamed response");
    }
    /* Before its first byte a stream may wait long, through no fault of its client: for a
     * session while --parallel requests run, then for its prompt's prefill. libmicrohttpd
     * counts a pipe with nothing to read as the connection's silence, and at SRV_IDLE_S it
     * closed such streams, answering nothing. A client that stops reading is still cut off,
     * after SRV_STREAM_IDLE_S. */
    MHD_set_connection_option(r->c, MHD_CONNECTION_OPTION_TIMEOUT, (unsigned)SRV_STREAM_IDLE_S);
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

/* ---------------------------------------------------------------- refusals */

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

/* A refusal at the headers in the shape of the API the URL names: OpenAI's under /v1 (with
 * `openai_code`), the distribution spec's under /v2 (`oci_code`), ollama's elsewhere. */
static enum MHD_Result refuse(req *r, unsigned status, const char *openai_code, const char *oci_code, const char *msg)
{
    struct MHD_Response *resp;
    json_t *j, *m = srv_json_text(msg, strlen(msg));
    char *s;

    if (strncmp(r->url, "/v1/", 4) == 0)
        j = json_pack("{s:{s:o,s:s,s:n,s:s}}", "error", "message", m, "type", "invalid_request_error", "param", "code",
                      openai_code);
    else if (strncmp(r->url, "/v2/", 4) == 0 || strcmp(r->url, "/v2") == 0)
        j = json_pack("{s:[{s:s,s:o,s:n}]}", "errors", "code", oci_code, "message", m, "detail");
    else
        j = json_pack("{s:o}", "error", m);
    s = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!s)
        return MHD_NO;
    if (!(resp = MHD_create_response_from_buffer(strlen(s), s, MHD_RESPMEM_MUST_FREE))) {
        free(s);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    if (status == 401)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"mstore\"");
    return srv_queue(r, status, resp);
}

static enum MHD_Result too_large(req *r)
{
    size_t max = r->srv->o.max_body;

    if (strncmp(r->url, "/v1/", 4) == 0)
        return srv_err_openai(r, 413, "invalid_request_error", "request body over the limit of %zu bytes", max);
    return srv_err_ollama(r, 413, "request body over the limit of %zu bytes", max);
}

/* A CORS preflight from an allowed page: what ollama's gin-contrib/cors answers (204, its
 * methods and request headers, OpenAI's SDK headers among them, cached 12 hours). */
static enum MHD_Result preflight(req *r)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);

    if (resp) {
        MHD_add_response_header(resp, "Access-Control-Allow-Methods", "GET, POST, PUT, PATCH, DELETE, HEAD, OPTIONS");
        MHD_add_response_header(
            resp, "Access-Control-Allow-Headers",
            "Authorization, Content-Type, User-Agent, Accept, X-Requested-With, OpenAI-Beta, x-stainless-arch, "
            "x-stainless-async, x-stainless-custom-poll-interval, x-stainless-helper-method, x-stainless-lang, "
            "x-stainless-os, x-stainless-package-version, x-stainless-poll-helper, x-stainless-retry-count, "
            "x-stainless-runtime, x-stainless-runtime-version, x-stainless-timeout");
        MHD_add_response_header(resp, "Access-Control-Max-Age", "43200");
    }
    return srv_queue(r, 204, resp);
}

/* What a browser may do on a page's behalf (gate.c says why): a foreign Host or Origin is
 * refused, an allowed page's preflight answered, here at the headers, before the token is looked
 * at, a byte of the body is read or the store is opened. 1 when it answered. */
static int gate(req *r, enum MHD_Result *ret)
{
    server *srv = r->srv;
    const char *host = MHD_lookup_connection_value(r->c, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);
    const char *origin = MHD_lookup_connection_value(r->c, MHD_HEADER_KIND, MHD_HTTP_HEADER_ORIGIN);
    char msg[800];

    if (srv->check_host && !srv_host_allowed(host, srv->own_name)) {
        snprintf(msg, sizeof msg,
                 "forbidden: Host '%.200s' does not name this machine (a page using DNS rebinding?); listening on "
                 "loopback, the server answers localhost, loopback and private addresses and '%.200s'",
                 host, srv->own_name);
        *ret = refuse(r, 403, "forbidden", "DENIED", msg);
        return 1;
    }
    if (!srv_origin_allowed(srv->origins, origin)) {
        snprintf(msg, sizeof msg,
                 "forbidden: origin '%.200s' is not allowed; to let its pages use this server, add it to "
                 "MSTORE_ORIGINS (comma-separated, '*' matches any characters)",
                 origin);
        *ret = refuse(r, 403, "forbidden", "DENIED", msg);
        return 1;
    }
    r->origin = origin;
    if (origin && strcmp(r->method, "OPTIONS") == 0) {
        *ret = preflight(r);
        return 1;
    }
    return 0;
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
    if (strcmp(r->url, "/apply-template") == 0 && strcmp(r->method, "POST") == 0)
        return srv_apply_template(r);
    if (strcmp(r->url, "/") == 0 && (strcmp(r->method, "GET") == 0 || strcmp(r->method, "HEAD") == 0))
        return srv_respond(r, 200, "text/plain", "mstore is running", 17); /* what ollama answers */
    return srv_err_ollama(r, 404, "no such endpoint: %s %s", r->method, r->url);
}

/* ---------------------------------------------------------------- connection slots */

/* Every open connection, so that one that has not sent a whole request can give its slot up.
 * Without this, max_clients connections that each send half a request (a byte now and then)
 * lock every client out. */
struct srv_conn {
    srv_conn *prev, *next;
    int fd;
    int busy; /* its request is whole and being answered: never closed for another */
    int evicted; /* shut down for a newer connection; libmicrohttpd closes it next */
    double since; /* monotonic seconds of its last progress: accepted, a body chunk, an answer sent */
};

static double mono_s(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* libmicrohttpd's connection start and end, both in its listening thread, which is also the one
 * that closes sockets: an fd in the list is open while make_room uses it. */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    server *srv = cls;
    srv_conn *k = *socket_context;
    const union MHD_ConnectionInfo *ci;

    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        if (!(k = calloc(1, sizeof *k)))
            return; /* left out of the list: never closed for another */
        ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        k->fd = ci ? ci->connect_fd : -1;
        k->since = mono_s();
        pthread_mutex_lock(&srv->conns_mu);
        k->next = srv->conns;
        if (srv->conns)
            srv->conns->prev = k;
        srv->conns = k;
        pthread_mutex_unlock(&srv->conns_mu);
        *socket_context = k;
        return;
    }
    if (!k)
        return;
    pthread_mutex_lock(&srv->conns_mu);
    if (k->prev)
        k->prev->next = k->next;
    else
        srv->conns = k->next;
    if (k->next)
        k->next->prev = k->prev;
    pthread_mutex_unlock(&srv->conns_mu);
    free(k);
    *socket_context = NULL;
}

/* libmicrohttpd's accept policy, before a new connection counts. With max_clients connections
 * open, the one that has gone longest without progress and is not answering a request (headers
 * trickled in, a stalled body, an idle keep-alive) is shut down to make room: its thread sees
 * the end of the stream and closes it. A connection younger than SRV_EVICT_GRACE_S is spared
 * (a burst of clients is let in, up to SRV_CONN_HEADROOM past max_clients, rather than cut off
 * before they could send) until that headroom is nearly gone: it must never fill, because at
 * libmicrohttpd's hard limit no new connection reaches this function to make room. When every
 * connection is answering a request, the new one is let in all the same, so that a short
 * request still gets through while long generations hold the slots. */
static enum MHD_Result make_room(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
    server *srv = cls;
    srv_conn *victim = NULL;
    double now = mono_s();
    int live = 0;

    (void)addr, (void)addrlen;
    pthread_mutex_lock(&srv->conns_mu);
    for (srv_conn *k = srv->conns; k; k = k->next) {
        if (k->evicted)
            continue;
        live++;
        if (!k->busy && k->fd >= 0 && (!victim || k->since < victim->since))
            victim = k;
    }
    if (victim && live >= srv->o.max_clients &&
        (now - victim->since >= SRV_EVICT_GRACE_S || live >= srv->o.max_clients + SRV_CONN_HEADROOM - 1)) {
        victim->evicted = 1;
        shutdown(victim->fd, SHUT_RDWR);
    }
    pthread_mutex_unlock(&srv->conns_mu);
    return MHD_YES;
}

static void conn_mark(req *r, int busy)
{
    if (!r->conn)
        return;
    pthread_mutex_lock(&r->srv->conns_mu);
    r->conn->busy = busy;
    r->conn->since = mono_s();
    pthread_mutex_unlock(&r->srv->conns_mu);
}

/* Answered at its headers while the client still sends a body: libmicrohttpd closes the socket
 * with those bytes unread, and the kernel then resets the connection, often before the client
 * has read the answer (a 413 seen as a broken pipe). So, as web servers' lingering close does:
 * end our side (a FIN after the answer), then read and drop what comes until the client closes,
 * stays silent SRV_LINGER_QUIET_MS, or SRV_LINGER_BYTES or SRV_LINGER_S pass. */
static void linger_drain(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    double end = mono_s() + SRV_LINGER_S;
    size_t total = 0;
    char buf[16384];

    if (!ci || ci->connect_fd < 0 || shutdown(ci->connect_fd, SHUT_WR) < 0)
        return;
    while (total < SRV_LINGER_BYTES && mono_s() < end) {
        struct pollfd p = {.fd = ci->connect_fd, .events = POLLIN};
        ssize_t n;
        if (poll(&p, 1, SRV_LINGER_QUIET_MS) <= 0)
            break;
        n = recv(ci->connect_fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
            continue;
        if (n <= 0)
            break;
        total += (size_t)n;
    }
}

/* ---------------------------------------------------------------- requests */

/* The first call, when the headers are in: every refusal that needs no body (foreign Host or
 * Origin, the token, a declared length over the limit) is answered here, before any of it is
 * read; a body on its way is then drained at the end (linger_drain). */
static enum MHD_Result on_headers(req *r)
{
    server *srv = r->srv;
    const char *cl = MHD_lookup_connection_value(r->c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    const char *te = MHD_lookup_connection_value(r->c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
    int has_body = (cl && strtoull(cl, NULL, 10) > 0) || te;
    enum MHD_Result ret = MHD_YES;

    if (gate(r, &ret)) {
    } else if (srv->api_key && !token_ok(srv, r->c)) {
        ret = refuse(r, 401, "invalid_api_key", "UNAUTHORIZED",
                     "unauthorized: this server requires 'Authorization: Bearer <MSTORE_API_KEY>'");
    } else if (!is_blob_upload(r->method, r->url) && cl && strtoull(cl, NULL, 10) > srv->o.max_body) {
        r->too_big = 1;
        ret = too_large(r);
    }
    r->linger = r->responded && has_body;
    return ret;
}

/* A JSON body chunk (blob uploads stream to disk instead). One over the limit is dropped and
 * answered 413 at the end; past SRV_LINGER_BYTES more, or SRV_BODY_S after its headers, the
 * connection is closed unanswered (libmicrohttpd answers only before or after a body). */
static enum MHD_Result on_body(req *r, const char *data, size_t len)
{
    server *srv = r->srv;

    if (mono_s() - r->t_headers > SRV_BODY_S) {
        fprintf(stderr, "mstore: %s %s: the body took over %d s to arrive: connection closed\n", r->method, r->url,
                SRV_BODY_S);
        return MHD_NO;
    }
    if (r->too_big || r->body.n + len > srv->o.max_body) {
        r->too_big = 1;
        r->dropped += len;
        return r->dropped > SRV_LINGER_BYTES ? MHD_NO : MHD_YES;
    }
    return ms_text_put(&r->body, data, len) < 0 ? MHD_NO : MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *data, size_t *data_size, void **con_cls)
{
    server *srv = cls;
    req *r = *con_cls;
    const union MHD_ConnectionInfo *ci;

    (void)version;
    if (!r) { /* headers are in; no body yet */
        if (!(r = calloc(1, sizeof *r)))
            return MHD_NO;
        r->srv = srv, r->c = c, r->url = url, r->method = method;
        r->t_headers = mono_s();
        if ((ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT)))
            r->conn = ci->socket_context;
        *con_cls = r;
        conn_mark(r, 0);
        return on_headers(r);
    }
    if (*data_size) {
        size_t len = *data_size;
        *data_size = 0;
        if (r->responded)
            return MHD_YES; /* answered already (token, size): the rest is discarded */
        conn_mark(r, 0);
        if (is_blob_upload(method, url)) {
            ollama_blob_upload(r, data, len);
            return MHD_YES;
        }
        return on_body(r, data, len);
    }
    if (r->responded)
        return MHD_YES;
    if (r->too_big)
        return too_large(r);
    conn_mark(r, 1);
    return route(r);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    req *r = *con_cls;

    (void)cls;
    if (!r)
        return;
    if (r->linger && toe == MHD_REQUEST_TERMINATED_COMPLETED_OK)
        linger_drain(c);
    conn_mark(r, 0);
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
    /* Listening on loopback, only this machine's browsers can reach the server, through a name
     * that resolves here: Host is checked (ollama does the same). Wider, anyone may connect. */
    if (ss.ss_family == AF_INET6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
        snprintf(shown, sizeof shown, "[%s]:%u", host, ntohs(a->sin6_port));
        srv->check_host = IN6_IS_ADDR_LOOPBACK(&a->sin6_addr) ||
                          (IN6_IS_ADDR_V4MAPPED(&a->sin6_addr) && a->sin6_addr.s6_addr[12] == 127);
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
        snprintf(shown, sizeof shown, "%s:%u", host, ntohs(a->sin_port));
        srv->check_host = (ntohl(a->sin_addr.s_addr) >> 24) == 127;
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
    pthread_mutex_init(&srv->conns_mu, NULL);
    pthread_mutex_init(&srv->rebuild_mu, NULL);
    if (!(srv->home = ms_strdup_printf("%s", o->home)) ||
        (o->api_key && *o->api_key && !(srv->api_key = ms_strdup_printf("%s", o->api_key)))) {
        rc = ms_err(MS_ENOMEM, "out of memory");
        goto fail;
    }
    if (gethostname(srv->own_name, sizeof srv->own_name) < 0)
        srv->own_name[0] = '\0';
    srv->own_name[sizeof srv->own_name - 1] = '\0';
    if ((rc = srv_origins_new(&srv->origins, o->origins)) < 0 || (rc = open_listener(srv, spec)) < 0 ||
        (rc = srv_models_start(srv)) < 0)
        goto fail;
    /* The idle timeout is short (SRV_IDLE_S) because a connection that sends nothing holds a
     * thread and a slot. An answer in one piece runs inside on_request, which the timeout does
     * not interrupt; a streamed one gets SRV_STREAM_IDLE_S (srv_stream_open). */
    srv->d = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0,
                              make_room, srv, on_request, srv, MHD_OPTION_LISTEN_SOCKET, srv->listen_fd,
                              MHD_OPTION_CONNECTION_LIMIT, (unsigned)srv->o.max_clients + SRV_CONN_HEADROOM,
                              MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)SRV_IDLE_S, MHD_OPTION_NOTIFY_COMPLETED,
                              on_completed, NULL, MHD_OPTION_NOTIFY_CONNECTION, on_connection, srv, MHD_OPTION_END);
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
    /* First the work in progress is told to stop (generations at their next token, transfers at
     * their next step, requests waiting for a model refused): stopping the daemon waits for
     * every connection's thread, and one running a long generation would hold it up. */
    srv_models_cancel(srv);
    if (srv->d)
        MHD_stop_daemon(srv->d);
    if (srv->listen_fd >= 0)
        close(srv->listen_fd);
    srv_models_stop(srv);
    pthread_cond_destroy(&srv->cv);
    pthread_mutex_destroy(&srv->mu);
    pthread_mutex_destroy(&srv->conns_mu);
    pthread_mutex_destroy(&srv->rebuild_mu);
    srv_origins_free(srv->origins);
    MS_FREE_ALL(srv->home, srv->api_key, srv);
}
