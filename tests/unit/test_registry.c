/* test_registry.c: the registry client against an in-process mock registry (token auth, Range,
 * 5xx retries, digest checks), and its parsers: WWW-Authenticate, credentials, hosts. */
#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blob/blob.h"
#include "helpers/fixture.h"
#include "manifest/manifest.h"
#include "registry/registry_int.h"
#include "store/store.h"

static char *tmpdir, *home;
static store *st;

/* ---------------------------------------------------------------- mock registry */

#define BLOB_BYTES 300000
static struct mock {
    int fd, port, stop;
    pthread_t thread;
    char *manifest;
    size_t manifest_len;
    ms_digest manifest_digest, config_digest, layer_digest;
    uint8_t layer[BLOB_BYTES];
    const char *config;
    int fail_5xx;            /* answer this many blob GETs with 503 first */
    int max_body;            /* cut each blob response after this many bytes (0: no cut) */
    int corrupt_layer;       /* serve a byte of the layer wrong */
    int trickle;             /* send one byte of each layer response, then stall until the client hangs up */
    const char *digest_hdr;  /* Docker-Content-Digest to send instead of the true one */
    int n_token, n_blob_get, n_ranged;
    int n_echo, echo_auth;   /* requests to /echo, and how many of them carried Authorization */
    char last_scope[256];
} mk;

static uint64_t mk_declared;   /* the layer size the manifest claims (0: the true one) */

static void send_str(int c, const char *s) { (void)!write(c, s, strlen(s)); }

static void respond(int c, int status, const char *extra, const void *body, size_t len, size_t send_len)
{
    char h[1024];

    snprintf(h, sizeof h, "HTTP/1.1 %d X\r\nContent-Length: %zu\r\nConnection: close\r\n%s\r\n", status, len,
             extra ? extra : "");
    send_str(c, h);
    if (body && send_len)
        (void)!write(c, body, send_len);
}

static void handle(int c)
{
    char req[8192], method[16], path[2048], extra[512];
    const char *auth, *accept, *range;
    ssize_t n = 0, k;

    while ((size_t)n < sizeof req - 1 && (k = read(c, req + n, sizeof req - 1 - (size_t)n)) > 0) {
        n += k;
        req[n] = '\0';
        if (strstr(req, "\r\n\r\n"))
            break;
    }
    req[n > 0 ? n : 0] = '\0';
    if (sscanf(req, "%15s %2047s", method, path) != 2)
        return;
    auth = strcasestr(req, "\r\nAuthorization: ");
    accept = strcasestr(req, "\r\nAccept: ");
    range = strcasestr(req, "\r\nRange: bytes=");
    if (!strcmp(path, "/echo")) {
        mk.n_echo++;
        mk.echo_auth += auth != NULL;
        return respond(c, 200, NULL, NULL, 0, 0);
    }
    if (!strncmp(path, "/token?", 7)) {
        /* user:pass in Basic, as MSTORE_REGISTRY_AUTH gives it */
        const char *scope = strstr(path, "scope=");
        mk.n_token++;
        snprintf(mk.last_scope, sizeof mk.last_scope, "%s", scope ? scope + 6 : "");
        if (!auth || strncmp(auth + 17, "Basic dXNlcjpwYXNz", 18) != 0)
            return respond(c, 401, NULL, NULL, 0, 0);
        return respond(c, 200, "Content-Type: application/json\r\n", "{\"token\":\"tok123\"}", 18, 18);
    }
    if (!auth || strncmp(auth + 17, "Bearer tok123", 13) != 0) {
        snprintf(extra, sizeof extra,
                 "WWW-Authenticate: Bearer realm=\"http://127.0.0.1:%d/token\",service=\"mock\","
                 "scope=\"repository:ns/m:pull\"\r\n", mk.port);
        return respond(c, 401, extra, NULL, 0, 0);
    }
    if (!strcmp(path, "/v2/ns/m/manifests/v1")) {
        /* Like Docker's registry 2.8: an OCI manifest is "not found" unless Accept names it. */
        if (!accept || !strstr(accept, MT_OCI_MANIFEST))
            return respond(c, 404, NULL, NULL, 0, 0);
        snprintf(extra, sizeof extra, "Docker-Content-Digest: %s\r\nContent-Type: %s\r\n",
                 mk.digest_hdr ? mk.digest_hdr : mk.manifest_digest, MT_OCI_MANIFEST);
        return respond(c, 200, extra, mk.manifest, mk.manifest_len, mk.manifest_len);
    }
    if (!strncmp(path, "/v2/ns/m/blobs/", 15)) {
        const char *d = path + 15;
        const uint8_t *body = NULL;
        size_t len = 0, from = 0;
        uint8_t *copy = NULL;

        mk.n_blob_get++;
        if (mk.fail_5xx > 0) {
            mk.fail_5xx--;
            return respond(c, 503, NULL, "busy", 4, 4);
        }
        if (!strcmp(d, mk.config_digest))
            body = (const uint8_t *)mk.config, len = strlen(mk.config);
        else if (!strcmp(d, mk.layer_digest))
            body = mk.layer, len = BLOB_BYTES;
        else
            return respond(c, 404, NULL, NULL, 0, 0);
        if (mk.corrupt_layer && body == mk.layer) {
            copy = malloc(len);
            memcpy(copy, body, len);
            copy[len / 2] ^= 1;
            body = copy;
        }
        if (mk.trickle && body == mk.layer) {
            struct pollfd p = { c, POLLIN, 0 };
            char sink[256];
            respond(c, range ? 206 : 200, NULL, body, len, 1);
            while (poll(&p, 1, 20000) > 0 && read(c, sink, sizeof sink) > 0)
                ;   /* until the client gives up on us (or 20 s pass) */
            return;
        }
        if (range) {
            mk.n_ranged++;
            from = strtoul(range + 15, NULL, 10);
            if (from >= len) {   /* past what the blob has, as a real registry answers */
                snprintf(extra, sizeof extra, "Content-Range: bytes */%zu\r\n", len);
                free(copy);
                return respond(c, 416, extra, NULL, 0, 0);
            }
            snprintf(extra, sizeof extra, "Content-Range: bytes %zu-%zu/%zu\r\n", from, len - 1, len);
            respond(c, 206, extra, body + from, len - from,
                    mk.max_body && len - from > (size_t)mk.max_body ? (size_t)mk.max_body : len - from);
        } else {
            respond(c, 200, NULL, body, len, mk.max_body && len > (size_t)mk.max_body ? (size_t)mk.max_body : len);
        }
        free(copy);
        return;
    }
    respond(c, 404, NULL, NULL, 0, 0);
}

static void *serve(void *arg)
{
    (void)arg;
    while (!__atomic_load_n(&mk.stop, __ATOMIC_ACQUIRE)) {
        struct pollfd p = { mk.fd, POLLIN, 0 };
        int c;
        if (poll(&p, 1, 50) <= 0)
            continue;
        if ((c = accept(mk.fd, NULL, NULL)) < 0)
            continue;
        handle(c);
        shutdown(c, SHUT_RDWR);
        close(c);
    }
    return NULL;
}

static char mock_host[64];

static void mock_start(void)
{
    struct sockaddr_in a = { 0 };
    socklen_t al = sizeof a;
    manifest *m;

    memset(&mk, 0, sizeof mk);
    for (size_t i = 0; i < BLOB_BYTES; i++)
        mk.layer[i] = (uint8_t)(i * 2654435761u >> 13);
    mk.config = "{\"architecture\":\"mock\"}";
    blob_digest_buf(mk.config_digest, mk.config, strlen(mk.config));
    blob_digest_buf(mk.layer_digest, mk.layer, BLOB_BYTES);
    ck_assert_int_eq(manifest_new(&m), 0);
    ck_assert_int_eq(manifest_config_set(m, MT_CONFIG, mk.config_digest, strlen(mk.config)), 0);
    ck_assert_int_eq(manifest_layer_add(m, "application/vnd.mstore.test.data", mk.layer_digest,
                                        mk_declared ? mk_declared : BLOB_BYTES, "x"), 0);
    ck_assert_int_eq(manifest_serialize(&mk.manifest, &mk.manifest_len, m), 0);
    manifest_free(m);
    blob_digest_buf(mk.manifest_digest, mk.manifest, mk.manifest_len);
    mk.fd = socket(AF_INET, SOCK_STREAM, 0);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(bind(mk.fd, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(listen(mk.fd, 16), 0);
    getsockname(mk.fd, (struct sockaddr *)&a, &al);
    mk.port = ntohs(a.sin_port);
    ck_assert_int_eq(pthread_create(&mk.thread, NULL, serve, NULL), 0);
    /* $MSTORE_REGISTRY_AUTH is for the registry $MSTORE_REGISTRY names only: the mock's */
    snprintf(mock_host, sizeof mock_host, "127.0.0.1:%d", mk.port);
    setenv("MSTORE_REGISTRY", mock_host, 1);
}

static void mock_stop(void)
{
    __atomic_store_n(&mk.stop, 1, __ATOMIC_RELEASE);
    pthread_join(mk.thread, NULL);
    close(mk.fd);
    free(mk.manifest);
}

static void setup(void)
{
    tmpdir = fixture_tmpdir();
    ck_assert_ptr_nonnull(tmpdir);
    home = ms_path_join(tmpdir, "home");
    ck_assert_msg(store_open(&st, home) == 0, "%s", ms_err_msg());
    setenv("MSTORE_REGISTRY_AUTH", "user:pass", 1);
    signal(SIGPIPE, SIG_IGN);   /* the mock writes to clients that gave up on it (trickle) */
    mock_start();
}

static void teardown(void)
{
    mock_stop();
    store_close(st);
    free(home);
    fixture_rmrf(tmpdir);
}

static int pull(ms_digest digest)
{
    registry_opts o;
    model_name n;
    char name[128];

    registry_opts_init(&o);
    o.insecure = 1;
    o.quiet = 1;
    snprintf(name, sizeof name, "127.0.0.1:%d/ns/m:v1", mk.port);
    ck_assert_int_eq(name_parse(&n, name), 0);
    return registry_pull(st, &n, &o, digest);
}

static int stored_names(void)
{
    store_entry *list = NULL;
    size_t n = 0;

    ck_assert_int_eq(store_list(st, &list, &n), 0);
    free(list);
    return (int)n;
}

/* ---------------------------------------------------------------- pulls */

START_TEST(pull_with_token_auth_stores_model_and_blobs)
{
    ms_digest d;

    ck_assert_msg(pull(d) == 0, "%s", ms_err_msg());
    ck_assert_str_eq(d, mk.manifest_digest);
    ck_assert(blob_exists(home, mk.layer_digest, NULL));
    ck_assert(blob_exists(home, mk.config_digest, NULL));
    ck_assert_int_eq(blob_verify(home, mk.layer_digest), 0);
    ck_assert_int_ge(mk.n_token, 1);
    ck_assert_str_eq(mk.last_scope, "repository%3Ans%2Fm%3Apull");
    ck_assert_int_eq(stored_names(), 1);
    /* A second pull fetches no blob. */
    mk.n_blob_get = 0;
    ck_assert_int_eq(pull(d), 0);
    ck_assert_int_eq(mk.n_blob_get, 0);
}
END_TEST

START_TEST(pull_retries_5xx_and_resumes_cut_bodies_with_range)
{
    ms_digest d;

    mk.fail_5xx = 2;
    mk.max_body = 70000;   /* every blob response stops short: each retry must ask for the rest */
    ck_assert_msg(pull(d) == 0, "%s", ms_err_msg());
    ck_assert_int_ge(mk.n_ranged, 4);
    ck_assert_int_eq(blob_verify(home, mk.layer_digest), 0);
}
END_TEST

/* A registry that sends a byte and stalls, again and again, used to keep the pull busy for ever:
 * each byte reset the retry count. Below the throughput floor the transfer is cut, and attempts
 * that move less than REG_PROGRESS_BYTES run out: a clear error, nothing stored. */
START_TEST(pull_gives_up_on_a_trickling_registry)
{
    ms_digest d;
    int rc;

    setenv("MSTORE_REGISTRY_STALL_SECONDS", "1", 1);
    mk.trickle = 1;
    rc = pull(d);
    unsetenv("MSTORE_REGISTRY_STALL_SECONDS");
    ck_assert_int_eq(rc, MS_EIO);
    ck_assert_msg(strstr(ms_err_msg(), "giving up after 10 attempts"), "%s", ms_err_msg());
    ck_assert_msg(strstr(ms_err_msg(), "too slow"), "%s", ms_err_msg());
    ck_assert_int_eq(blob_exists(home, mk.layer_digest, NULL), 0);
    ck_assert_int_eq(stored_names(), 0);
}
END_TEST

/* The manifest's sizes are claims: a layer declaring 2^47 bytes used to buy 2M parts of
 * bookkeeping (64 MB) and a 16 MiB sidecar before a byte arrived. Parts are capped per blob,
 * so the sidecar stays under 8 KiB; the pull fails naming the short blob. */
START_TEST(pull_bookkeeping_is_bounded_whatever_the_manifest_claims)
{
    char *sidecar;
    ms_digest d;
    struct stat st;

    mock_stop();
    mk_declared = (uint64_t)1 << 47;
    mock_start();
    mk_declared = 0;
    ck_assert_int_lt(pull(d), 0);
    ck_assert_msg(strstr(ms_err_msg(), "fewer bytes than the manifest"), "%s", ms_err_msg());
    sidecar = ms_strdup_printf("%s/tmp/pull/%s.ranges", home, mk.layer_digest + 7);
    ck_assert_int_eq(stat(sidecar, &st), 0);
    ck_assert_int_le(st.st_size, BLOB_PARTIAL_RANGES_HEADER + 8 * REG_MAX_PARTS);
    ck_assert_int_eq(stored_names(), 0);
    free(sidecar);
}
END_TEST

START_TEST(pull_refuses_corrupt_blob_and_stores_nothing)
{
    ms_digest d;

    mk.corrupt_layer = 1;
    ck_assert_int_eq(pull(d), MS_EMISMATCH);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), mk.layer_digest));
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "digest mismatch"));
    ck_assert(!blob_exists(home, mk.layer_digest, NULL));
    ck_assert_int_eq(stored_names(), 0);
}
END_TEST

START_TEST(pull_refuses_manifest_whose_digest_header_disagrees)
{
    ms_digest d;

    mk.digest_hdr = "sha256:0000000000000000000000000000000000000000000000000000000000000000";
    ck_assert_int_eq(pull(d), MS_EMISMATCH);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), mk.manifest_digest));
    ck_assert_int_eq(mk.n_blob_get, 0);
    ck_assert_int_eq(stored_names(), 0);
}
END_TEST

START_TEST(bad_credentials_fail_without_showing_them)
{
    ms_digest d;

    setenv("MSTORE_REGISTRY_AUTH", "user:wrongsecret", 1);
    ck_assert_int_lt(pull(d), 0);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "token"));
    ck_assert_ptr_null(strstr(ms_err_msg(), "wrongsecret"));
    ck_assert_int_eq(stored_names(), 0);
}
END_TEST

/* ---------------------------------------------------------------- parsers */

/* A registry that hands out an upload Location on another origin (another host name, scheme
 * or port) gets no credentials there: neither the Bearer token nor the Basic password. */
START_TEST(credentials_go_only_to_the_registry_origin)
{
    static const struct { const char *fmt; int auth; } urls[] = {
        { "/echo", 1 },                          /* relative: the registry itself */
        { "http://127.0.0.1:%d/echo", 1 },       /* the same origin spelled out */
        { "HTTP://127.0.0.1:%d/echo", 1 },       /* scheme case does not matter */
        { "http://localhost:%d/echo", 0 },       /* another host name */
    };
    registry_opts o;
    model_name n;
    reg_client c;
    reg_resp r = { 0 };
    char host[64], url[128];
    CURL *h = reg_easy_new();
    int transient;

    registry_opts_init(&o);
    o.insecure = 1;
    snprintf(host, sizeof host, "127.0.0.1:%d", mk.port);
    ck_assert_int_eq(name_parse(&n, "ns/m"), 0);
    ck_assert_int_eq(reg_client_init(&c, home, host, &n, &o, 1), 0);
    ck_assert_ptr_nonnull(c.basic);
    for (int basic = 0; basic < 2; basic++) {
        c.use_basic = basic;
        c.token = basic ? NULL : strdup("tok123");
        for (size_t i = 0; i < sizeof urls / sizeof urls[0]; i++) {
            int before = mk.echo_auth, seen = mk.n_echo;
            snprintf(url, sizeof url, urls[i].fmt, mk.port);
            ck_assert_msg(reg_request(&c, h, "PATCH", url, NULL, NULL, &r, &transient) == 0, "%s: %s", url, ms_err_msg());
            ck_assert_int_eq(r.status, 200);
            ck_assert_int_eq(mk.n_echo, seen + 1);
            ck_assert_msg(mk.echo_auth - before == urls[i].auth, "%s (%s): auth sent %d, want %d", url,
                          basic ? "basic" : "bearer", mk.echo_auth - before, urls[i].auth);
        }
        free(c.token);
        c.token = NULL;
    }
    reg_resp_reset(&r);
    curl_easy_cleanup(h);
    reg_client_fini(&c);
}
END_TEST

START_TEST(challenge_parses_bearer_and_basic)
{
    reg_challenge c;

    ck_assert_int_eq(reg_challenge_parse(&c, "Bearer realm=\"https://auth.example/token\",service=\"reg\","
                                             "scope=\"repository:a/b:pull,push\""), 0);
    ck_assert_str_eq(c.scheme, "Bearer");
    ck_assert_str_eq(c.realm, "https://auth.example/token");
    ck_assert_str_eq(c.service, "reg");
    ck_assert_str_eq(c.scope, "repository:a/b:pull,push");   /* the comma inside quotes stays */
    ck_assert_int_eq(reg_challenge_parse(&c, "Basic realm=Registry"), 0);
    ck_assert_str_eq(c.scheme, "Basic");
    ck_assert_str_eq(c.realm, "Registry");
}
END_TEST

static char long_realm[1200];
static const struct {
    const char *value, *expect;
} bad_challenge[] = {
    { "", "no auth scheme" },
    { "Bearer realm=\"https://x/token", "malformed parameter" },
    { "Bearer realm", "malformed parameter" },
    { "Bearer realm=\"ftp://x/token\"", "not an http(s) url" },
    { "Bearer realm=\"file:///etc/passwd\"", "not an http(s) url" },
    { long_realm, "malformed parameter" },
};

START_TEST(challenge_refuses_malformed)
{
    reg_challenge c;

    memset(long_realm, 'a', sizeof long_realm - 1);
    memcpy(long_realm, "Bearer realm=\"https://", 22);
    ck_assert_int_eq(reg_challenge_parse(&c, bad_challenge[_i].value), MS_EINVALID);
    ck_assert_msg(strstr(ms_err_msg(), bad_challenge[_i].expect), "%s: %s", bad_challenge[_i].value, ms_err_msg());
}
END_TEST

START_TEST(credentials_from_env_then_file)
{
    char *cred, *tok, *p;

    setenv("MSTORE_REGISTRY", "h:1", 1);
    ck_assert_int_eq(reg_credentials_find(&cred, &tok, home, "h:1", NULL), 0);
    ck_assert_str_eq(cred, "user:pass");
    ck_assert_ptr_null(tok);
    free(cred);
    ck_assert_int_eq(reg_credentials_find(&cred, &tok, home, "h:1", "a:b"), 0);
    ck_assert_str_eq(cred, "a:b");
    free(cred);
    unsetenv("MSTORE_REGISTRY_AUTH");
    ck_assert_int_eq(reg_credentials_find(&cred, &tok, home, "h:1", NULL), 0);
    ck_assert_ptr_null(cred);
    p = fixture_write(home, "credentials.json", "{\"h:1\": \"u:topsecret\", \"bad\": 5}", 32);
    ck_assert_int_eq(reg_credentials_find(&cred, &tok, home, "h:1", NULL), 0);
    ck_assert_str_eq(cred, "u:topsecret");
    free(cred);
    ck_assert_int_eq(reg_credentials_find(&cred, &tok, home, "bad", NULL), MS_EINVALID);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "'bad'"));
    free(p);
    p = fixture_write(home, "credentials.json", "{\"h:1\": \"u:topsecret\"", 21);
    ck_assert_int_eq(reg_credentials_find(&cred, &tok, home, "h:1", NULL), MS_EINVALID);
    ck_assert_ptr_null(strstr(ms_err_msg(), "topsecret"));
    free(p);
    setenv("MSTORE_REGISTRY_AUTH", "nocolon", 1);
    ck_assert_int_eq(reg_credentials_find(&cred, &tok, home, "h:1", NULL), MS_EINVALID);
    ck_assert_ptr_null(strstr(ms_err_msg(), "nocolon"));
}
END_TEST

/* The environment's password is for $MSTORE_REGISTRY's host (ollama's registry when unset),
 * never for a host a name brings; the file's entries are each for their own host. */
START_TEST(credentials_bound_to_their_host)
{
    static const char file[] = "{\"auths\": {\"https://Reg.Example:5000/v1/\": {\"auth\": \"ZG9jazpzZWNyZXQ=\"},"
                               " \"o.example\": {\"username\": \"u\", \"password\": \"p\"},"
                               " \"127.0.0.1:11434\": {\"token\": \"k3y\"}, \"nul.example\": {\"auth\": \"!!\"}}}";
    char *cred, *tok, *p;

    setenv("MSTORE_REGISTRY", "h:1", 1);
    ck_assert_int_eq(reg_credentials_find(&cred, &tok, home, "evil.example:80", NULL), 0);
    ck_assert_ptr_null(cred);
    ck_assert_ptr_null(tok);
    unsetenv("MSTORE_REGISTRY");
    ck_assert_int_eq(reg_credentials_find(&cred, &tok, home, "h:1", NULL), 0);
    ck_assert_ptr_null(cred);
    ck_assert_int_eq(reg_credentials_find(&cred, &tok, home, "registry.ollama.ai", NULL), 0);
    ck_assert_str_eq(cred, "user:pass");
    free(cred);
    p = fixture_write(home, "credentials.json", file, sizeof file - 1);
    ck_assert_int_eq(reg_credentials_find(&cred, &tok, home, "reg.example:5000", NULL), 0);
    ck_assert_str_eq(cred, "dock:secret");
    free(cred);
    ck_assert_int_eq(reg_credentials_find(&cred, &tok, home, "reg.example", NULL), 0);
    ck_assert_ptr_null(cred);
    ck_assert_int_eq(reg_credentials_find(&cred, &tok, home, "o.example", NULL), 0);
    ck_assert_str_eq(cred, "u:p");
    free(cred);
    ck_assert_int_eq(reg_credentials_find(&cred, &tok, home, "127.0.0.1:11434", NULL), 0);
    ck_assert_ptr_null(cred);
    ck_assert_str_eq(tok, "k3y");
    free(tok);
    ck_assert_int_eq(reg_credentials_find(&cred, &tok, home, "nul.example", NULL), MS_EINVALID);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "'nul.example'"));
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "credentials.json"));
    free(p);
}
END_TEST

START_TEST(host_from_name_then_environment)
{
    char host[NAME_HOST_MAX];
    model_name n;

    ck_assert_int_eq(name_parse(&n, "reg.example:5000/ns/m:t"), 0);
    ck_assert_int_eq(registry_host(host, &n), 0);
    ck_assert_str_eq(host, "reg.example:5000");
    ck_assert_int_eq(name_parse(&n, "ns/m:t"), 0);
    /* no host, no $MSTORE_REGISTRY (or an empty one): ollama's registry, as ollama pulls */
    unsetenv("MSTORE_REGISTRY");
    ck_assert_int_eq(registry_host(host, &n), 0);
    ck_assert_str_eq(host, "registry.ollama.ai");
    setenv("MSTORE_REGISTRY", "", 1);
    ck_assert_int_eq(registry_host(host, &n), 0);
    ck_assert_str_eq(host, "registry.ollama.ai");
    setenv("MSTORE_REGISTRY", "127.0.0.1:1234", 1);
    ck_assert_int_eq(registry_host(host, &n), 0);
    ck_assert_str_eq(host, "127.0.0.1:1234");
    setenv("MSTORE_REGISTRY", "evil.com/x?y", 1);
    ck_assert_int_eq(registry_host(host, &n), MS_EINVALID);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "'/'"));
    unsetenv("MSTORE_REGISTRY");
}
END_TEST

START_TEST(docker_form_rewrites_media_types_only)
{
    manifest *m, *d;
    char *buf;
    size_t len;

    ck_assert_int_eq(manifest_parse(&m, mk.manifest, mk.manifest_len, "t"), 0);
    ck_assert_int_eq(reg_manifest_docker(&buf, &len, m), 0);
    ck_assert_int_eq(manifest_parse(&d, buf, len, "docker"), 0);
    ck_assert_str_eq(d->media_type, MT_DOCKER_MANIFEST);
    ck_assert_str_eq(d->config.media_type, MT_DOCKER_CONFIG);
    ck_assert_str_eq(d->config.digest, m->config.digest);
    ck_assert_uint_eq(d->n_layers, 1);
    ck_assert_str_eq(d->layers[0].digest, mk.layer_digest);
    ck_assert_str_eq(d->layers[0].media_type, "application/vnd.mstore.test.data");
    ck_assert_str_eq(m->media_type, MT_OCI_MANIFEST);   /* the source is untouched */
    manifest_free(m);
    manifest_free(d);
    free(buf);
}
END_TEST

/* ---------------------------------------------------------------- download sidecar */

/* A sidecar for a blob of 2995 bytes in parts of 1000 (the last one 995), 10/1000/0 done. */
#define RG_SIZE 2995
#define RG_PART 1000
static size_t ranges_make(uint8_t *buf)
{
    const uint64_t v[] = { RG_SIZE, RG_PART, 3, 10, 1000, 0 };

    memcpy(buf, BLOB_PARTIAL_RANGES_MAGIC, 8);
    for (int i = 0; i < 6; i++)
        for (int b = 0; b < 8; b++)
            buf[8 + 8 * i + b] = (uint8_t)(v[i] >> (8 * b));
    return BLOB_PARTIAL_RANGES_HEADER + 3 * 8;
}

static const struct { size_t off; uint64_t val; long cut; const char *expect; } bad_ranges[] = {
    { 0, 0x58, 0, "magic" },                                  /* first byte 'X' */
    { 8, RG_SIZE + 1, 0, "blob size 2996, expected 2995" },
    { 16, 4096, 0, "part size 4096, expected 1000" },
    { 24, 4, 0, "4 parts, expected 3" },
    { 24, UINT64_MAX, 0, "parts, expected 3" },
    { 32 + 8, 1001, 0, "part 1: 1001 bytes done, more than its 1000" },
    { 32 + 16, 996, 0, "part 2: 996 bytes done, more than its 995" },
    { 32 + 16, UINT64_MAX, 0, "part 2: 18446744073709551615 bytes done" },
    { 0, 0, -1, "55 bytes, expected 56" },                    /* one byte short */
    { 0, 0, 8, "64 bytes, expected 56" },                     /* trailing bytes */
    { 0, 0, -40, "no 'MSPULL1' magic in 16 bytes" },          /* shorter than the header */
};

START_TEST(ranges_sidecar_parses_its_own_format)
{
    uint8_t buf[128];
    uint64_t done[3];
    size_t len = ranges_make(buf);

    ck_assert_int_eq(blob_partial_ranges_parse(done, buf, len, RG_SIZE, RG_PART, 3), 0);
    ck_assert_uint_eq(done[0], 10);
    ck_assert_uint_eq(done[1], 1000);
    ck_assert_uint_eq(done[2], 0);
}
END_TEST

START_TEST(ranges_sidecar_refuses_what_does_not_match_the_blob)
{
    uint8_t buf[128] = { 0 };
    uint64_t done[3];
    size_t len = ranges_make(buf);

    if (bad_ranges[_i].cut)
        len = (size_t)((long)len + bad_ranges[_i].cut);
    else if (bad_ranges[_i].off == 0)
        buf[0] = (uint8_t)bad_ranges[_i].val;
    else
        for (int b = 0; b < 8; b++)
            buf[bad_ranges[_i].off + (size_t)b] = (uint8_t)(bad_ranges[_i].val >> (8 * b));
    ck_assert_int_eq(blob_partial_ranges_parse(done, buf, len, RG_SIZE, RG_PART, 3), MS_EINVALID);
    ck_assert_msg(strstr(ms_err_msg(), bad_ranges[_i].expect), "'%s' lacks '%s'", ms_err_msg(),
                  bad_ranges[_i].expect);
}
END_TEST

/* Docker Hub: `docker.io/ai/smollm2` goes to registry-1.docker.io, with the credentials Docker's
 * config.json keeps under https://index.docker.io/v1/. */
START_TEST(docker_hub_names_its_api_host)
{
    static const char file[] = "{\"auths\": {\"https://index.docker.io/v1/\": {\"auth\": \"aHViOnB3\"}}}";
    registry_opts o;
    model_name n;
    reg_client c;
    char *p;

    p = fixture_write(home, "credentials.json", file, sizeof file - 1);
    registry_opts_init(&o);
    ck_assert_int_eq(name_parse(&n, "docker.io/ai/smollm2"), 0);
    ck_assert_int_eq(reg_client_init(&c, home, n.host, &n, &o, 0), 0);
    ck_assert_str_eq(c.base, "https://registry-1.docker.io");
    ck_assert_str_eq(c.repo, "ai/smollm2");
    ck_assert_ptr_nonnull(c.basic);
    ck_assert_str_eq(c.basic, "hub:pw");
    reg_client_fini(&c);
    ck_assert_int_eq(reg_client_init(&c, home, "docker.io.example", &n, &o, 0), 0);
    ck_assert_str_eq(c.base, "https://docker.io.example");
    ck_assert_ptr_null(c.basic);
    reg_client_fini(&c);
    free(p);
}
END_TEST

static int tar_seen(void *ctx, const char *path, uint64_t off, uint64_t size)
{
    uint64_t *got = ctx;

    ck_assert_str_eq(path, "model.gguf");
    got[0] = off, got[1] = size;
    return 0;
}

/* mstore's own archive read back, as an archive and as its frame; a size past 8 GiB in GNU
 * base-256 read from its header; a lying size, a link and a path outside refused. */
START_TEST(tar_codec_reads_what_it_writes_and_refuses_lies)
{
    uint8_t head[512], tail[2048], buf[512 + 1024 + 2048];
    size_t tl, n;
    uint64_t got[2] = { 0, 0 };

    ck_assert_int_eq(reg_tar_frame_make(head, tail, &tl, "model.gguf", 1000), 0);
    ck_assert_uint_eq(tl, 24 + 1024);
    memcpy(buf, head, 512);
    memset(buf + 512, 'G', 1000);
    memcpy(buf + 1512, tail, tl);
    n = 1512 + tl;
    ck_assert_int_eq(reg_tar_scan(buf, n, "t", 0, tar_seen, got), 0);
    ck_assert_uint_eq(got[0], 512);
    ck_assert_uint_eq(got[1], 1000);
    memmove(buf + 512, buf + 1512, tl);   /* the frame: the file's bytes cut out */
    ck_assert_int_eq(reg_tar_scan(buf, 512 + tl, "t", REG_TAR_FRAME, tar_seen, got), 0);
    ck_assert_int_eq(reg_tar_scan(buf, 512 + tl, "t", 0, tar_seen, got), MS_EINVALID);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "ends inside a block"));

    ck_assert_int_eq(reg_tar_frame_make(head, tail, &tl, "model.gguf", (uint64_t)9 << 30), 0);
    ck_assert_uint_eq(head[124], 0x80);
    memcpy(buf, head, 512);
    memcpy(buf + 512, tail, tl);
    ck_assert_int_eq(reg_tar_scan(buf, 512 + tl, "t", REG_TAR_FRAME, tar_seen, got), 0);
    ck_assert_uint_eq(got[1], (uint64_t)9 << 30);

    reg_tar_frame_make(head, tail, &tl, "model.gguf", 0);
    memcpy(buf, head, 512);
    memcpy(buf + 512, tail, tl);
    buf[156] = '2';   /* a symlink: checksum now wrong as well, so mend it */
    {
        unsigned sum = 0;
        memset(buf + 148, ' ', 8);
        for (int i = 0; i < 512; i++)
            sum += buf[i];
        snprintf((char *)buf + 148, 8, "%06o", sum);
    }
    ck_assert_int_eq(reg_tar_scan(buf, 512 + tl, "t", 0, tar_seen, got), MS_EINVALID);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "of type '2'"));
    ck_assert_int_eq(reg_tar_frame_make(head, tail, &tl, "../model.gguf", 0), 0);
    memcpy(buf, head, 512);
    ck_assert_int_eq(reg_tar_scan(buf, 512 + tl, "t", 0, tar_seen, got), MS_EINVALID);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "outside the archive"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("registry");
    TCase *tc = tcase_create("registry");
    SRunner *sr;
    int failed;

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, pull_with_token_auth_stores_model_and_blobs);
    tcase_add_test(tc, pull_retries_5xx_and_resumes_cut_bodies_with_range);
    tcase_add_test(tc, pull_refuses_corrupt_blob_and_stores_nothing);
    tcase_add_test(tc, pull_gives_up_on_a_trickling_registry);
    tcase_add_test(tc, pull_bookkeeping_is_bounded_whatever_the_manifest_claims);
    tcase_add_test(tc, pull_refuses_manifest_whose_digest_header_disagrees);
    tcase_add_test(tc, bad_credentials_fail_without_showing_them);
    tcase_add_test(tc, credentials_go_only_to_the_registry_origin);
    tcase_add_test(tc, challenge_parses_bearer_and_basic);
    tcase_add_loop_test(tc, challenge_refuses_malformed, 0, sizeof bad_challenge / sizeof bad_challenge[0]);
    tcase_add_test(tc, credentials_from_env_then_file);
    tcase_add_test(tc, credentials_bound_to_their_host);
    tcase_add_test(tc, host_from_name_then_environment);
    tcase_add_test(tc, docker_form_rewrites_media_types_only);
    tcase_add_test(tc, ranges_sidecar_parses_its_own_format);
    tcase_add_test(tc, tar_codec_reads_what_it_writes_and_refuses_lies);
    tcase_add_test(tc, docker_hub_names_its_api_host);
    tcase_add_loop_test(tc, ranges_sidecar_refuses_what_does_not_match_the_blob, 0,
                        sizeof bad_ranges / sizeof bad_ranges[0]);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
