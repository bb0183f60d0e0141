/* oci.c: the store as a read-only OCI distribution registry (/v2/), so that another machine can
 * `mstore pull --insecure HOST:PORT/library/NAME:TAG` and skopeo can copy from it. Blobs are
 * served by digest from blobs/ (content-addressed: a digest names its bytes wherever they are
 * used); manifests by tag through the index, or by digest. A model received as an ollama, DMR
 * or ModelPack artifact and kept in the store's own form is served as it was received
 * (registry.h: registry_manifest_received, registry_source_blob_fd). */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "registry/registry.h"
#include "server/server_int.h"

#define API_HEADER "Docker-Distribution-API-Version"

static enum MHD_Result add_api_header(req *r, struct MHD_Response *resp, unsigned status)
{
    MHD_add_response_header(resp, API_HEADER, "registry/2.0");
    return srv_queue(r, status, resp);
}

/* "library/stories" + tag -> a model name; 0 or -1 (not a name). */
static int repo_name(model_name *out, const char *repo, size_t repo_len, const char *tag)
{
    char buf[600];

    if (repo_len >= 400)
        return -1;
    snprintf(buf, sizeof buf, "%.*s:%s", (int)repo_len, repo, tag);
    return name_parse(out, buf) < 0 || out->host[0] ? -1 : 0;
}

static enum MHD_Result manifest_get(req *r, const char *repo, size_t repo_len, const char *ref)
{
    char *bytes = NULL;
    ms_digest digest;
    const char *kept;
    size_t len = 0;
    model_name n;
    store *s = NULL;
    store_model *sm = NULL;
    json_t *j;
    const char *type = MT_OCI_MANIFEST;
    struct MHD_Response *resp;
    int rc;

    if (strncmp(ref, "sha256:", 7) == 0) {
        if (!blob_digest_valid(ref))
            return srv_err_oci(r, 400, "DIGEST_INVALID", "'%.100s' is not a sha256 digest", ref);
        snprintf(digest, sizeof digest, "%s", ref);
    } else if (repo_name(&n, repo, repo_len, ref) < 0) {
        return srv_err_oci(r, 404, "NAME_UNKNOWN", "no repository '%.*s' with tag '%.100s'", (int)repo_len, repo, ref);
    }
    /* The manifest's exact bytes, as the handle keeps them; a digest that names no manifest
     * (some other blob) is as unknown as a missing one. */
    if ((rc = store_open(&s, r->srv->home)) == 0)
        rc = strncmp(ref, "sha256:", 7) != 0 ? store_model_open(&sm, s, &n) : store_model_open_digest(&sm, s, digest);
    /* By tag, a model kept in the store's own form answers the manifest it was received as
     * (a Docker Model Runner, ollama or ModelPack client runs that one, not mstore's form); by
     * digest, either manifest answers as itself. */
    if (rc == 0 && strncmp(ref, "sha256:", 7) != 0)
        rc = registry_manifest_received(&bytes, &len, digest, sm);
    if (rc == 0) {
        snprintf(digest, sizeof digest, "%s", store_model_digest(sm));
        kept = store_model_manifest_bytes(sm, &len);
        if (!(bytes = malloc(len ? len : 1)))
            rc = ms_err(MS_ENOMEM, "out of memory");
        else if (len)
            memcpy(bytes, kept, len);
    }
    store_model_close(sm);
    store_close(s);
    if (rc > 0)
        rc = 0;
    if (rc == MS_ENOTFOUND || rc == MS_EINVALID)
        return srv_err_oci(r, 404, "MANIFEST_UNKNOWN", "manifest unknown: %.*s:%.100s", (int)repo_len, repo, ref);
    if (rc < 0)
        return srv_err_oci(r, 500, "UNKNOWN", "%s", ms_err_msg());
    if ((j = json_loadb(bytes, len, 0, NULL)) && json_is_string(json_object_get(j, "mediaType")))
        type = json_string_value(json_object_get(j, "mediaType"));
    resp = MHD_create_response_from_buffer(len, bytes, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        json_decref(j);
        free(bytes);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    MHD_add_response_header(resp, "Docker-Content-Digest", digest);
    json_decref(j);
    return add_api_header(r, resp, 200);
}

static enum MHD_Result blob_get(req *r, const char *digest)
{
    const char *range = MHD_lookup_connection_value(r->c, MHD_HEADER_KIND, MHD_HTTP_HEADER_RANGE);
    struct MHD_Response *resp;
    uint64_t from = 0, to, size = 0;
    unsigned status = 200;
    char cr[128];
    store *s = NULL;
    int fd = -1, rc, rebuild = 0;

    if (!blob_digest_valid(digest))
        return srv_err_oci(r, 400, "DIGEST_INVALID", "'%.100s' is not a sha256 digest", digest);
    if ((rc = store_open(&s, r->srv->home)) == 0)
        rc = store_blob_fd(&fd, &size, s, digest);
    if (rc == MS_EINVALID || rc == MS_EIO) { /* the digest was checked: no such file */
        store_close(s);
        return srv_err_oci(r, 404, "BLOB_UNKNOWN", "blob unknown: %s", digest);
    }
    /* A blob of a received manifest that the store no longer keeps (the whole GGUF, the weight
     * tar) is rebuilt as push rebuilds it, one at a time: a request waiting here for the same
     * digest then finds it stored. It stays under blobs/ until `mstore gc`. */
    if (rc == MS_ENOTFOUND && s) {
        pthread_mutex_lock(&r->srv->rebuild_mu);
        if ((rc = store_blob_fd(&fd, &size, s, digest)) == MS_ENOTFOUND)
            rebuild = rc = registry_source_blob_fd(&fd, &size, s, digest);
        pthread_mutex_unlock(&r->srv->rebuild_mu);
    }
    store_close(s);
    if (rc == MS_ENOTFOUND)
        return srv_err_oci(r, 404, "BLOB_UNKNOWN", "blob unknown: %s", digest);
    /* named by a received manifest but not rebuilt: not one push rebuilds either, or the store
     * cannot take it (read-only, full): the blob is as unknown as a missing one, and says why */
    if (rc < 0 && rebuild < 0)
        return srv_err_oci(r, 404, "BLOB_UNKNOWN", "%s", ms_err_msg());
    if (rc < 0)
        return srv_err_oci(r, 500, "UNKNOWN", "%s", ms_err_msg());
    to = size ? size - 1 : 0;
    if (range) { /* one range, "bytes=A-B" or "bytes=A-" */
        unsigned long long a, b;
        int n = sscanf(range, "bytes=%llu-%llu", &a, &b);
        if (n < 1 || a >= size || (n == 2 && b < a)) {
            close(fd);
            snprintf(cr, sizeof cr, "bytes */%" PRIu64, size);
            resp = MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
            MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_RANGE, cr);
            return add_api_header(r, resp, 416);
        }
        from = a;
        if (n == 2 && b < to)
            to = b;
        status = 206;
    }
    resp = MHD_create_response_from_fd_at_offset64(size ? to - from + 1 : 0, fd, (int64_t)from);
    if (!resp) {
        close(fd);
        return MHD_NO;
    }
    if (status == 206) {
        snprintf(cr, sizeof cr, "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64, from, to, size);
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_RANGE, cr);
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/octet-stream");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_ACCEPT_RANGES, "bytes");
    MHD_add_response_header(resp, "Docker-Content-Digest", digest);
    return add_api_header(r, resp, status);
}

/* Tags of one repository, or (repo == NULL) every repository. */
static enum MHD_Result listing(req *r, const char *repo, size_t repo_len)
{
    store *s = NULL;
    store_entry *ms = NULL;
    size_t n = 0;
    json_t *arr;
    char last[400] = "";

    if (store_open(&s, r->srv->home) < 0 || store_list(s, &ms, &n) < 0) {
        store_close(s);
        return srv_err_oci(r, 500, "UNKNOWN", "%s", ms_err_msg());
    }
    store_close(s);
    arr = json_array();
    for (size_t i = 0; i < n; i++) { /* sorted by name: one repository's tags are together */
        char rn[400];
        if (ms[i].name.host[0])
            continue;
        snprintf(rn, sizeof rn, "%s/%s", ms[i].name.namespace_, ms[i].name.model);
        if (repo && strlen(rn) == repo_len && strncasecmp(rn, repo, repo_len) == 0)
            json_array_append_new(arr, json_string(ms[i].name.tag));
        else if (!repo && strcmp(rn, last) != 0)
            json_array_append_new(arr, json_string(rn));
        snprintf(last, sizeof last, "%s", rn);
    }
    free(ms);
    if (!repo)
        return srv_json(r, 200, json_pack("{s:o}", "repositories", arr));
    if (json_array_size(arr) == 0) {
        json_decref(arr);
        return srv_err_oci(r, 404, "NAME_UNKNOWN", "repository name not known to registry: %.*s", (int)repo_len, repo);
    }
    return srv_json(r, 200, json_pack("{s:s#,s:o}", "name", repo, (int)repo_len, "tags", arr));
}

enum MHD_Result oci_route(req *r)
{
    const char *u = r->url + 3, *m = r->method, *at; /* after "/v2" */
    int get = strcmp(m, "GET") == 0 || strcmp(m, "HEAD") == 0;

    if (!get)
        return srv_err_oci(r, 405, "UNSUPPORTED", "this registry is read-only (mstore serve): %s is refused", m);
    if (!*u || strcmp(u, "/") == 0) {
        struct MHD_Response *resp = MHD_create_response_from_buffer(2, "{}", MHD_RESPMEM_PERSISTENT);
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
        return add_api_header(r, resp, 200);
    }
    u++;
    if (strcmp(u, "_catalog") == 0)
        return listing(r, NULL, 0);
    if ((at = strstr(u, "/manifests/")))
        return manifest_get(r, u, (size_t)(at - u), at + 11);
    if ((at = strstr(u, "/blobs/")) && !strstr(at + 7, "/"))
        return blob_get(r, at + 7);
    if ((at = strstr(u, "/tags/list")) && !at[10])
        return listing(r, u, (size_t)(at - u));
    return srv_err_oci(r, 404, "UNSUPPORTED", "no such endpoint: %s %s", m, r->url);
}
