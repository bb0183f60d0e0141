/* push.c: upload a stored model's blobs (skipping those the registry has, mounting those it has
 * in another repository) and then its manifest. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blob/blob.h"
#include "registry/registry_int.h"

/* Blobs up to this size go up in one PUT; larger ones in PATCH chunks of this size, so that a
 * proxy with a request size limit (nginx's default is 1 MB, often raised to tens of MB) and a
 * registry that spools each request still cope. */
#define PUSH_CHUNK ((size_t)32 << 20)

/* ------------------------------------------------------------------ manifest forms */

int reg_manifest_docker(char **out, size_t *len_out, const manifest *m)
{
    manifest d = *m;   /* shallow: only the two media type pointers differ */

    d.parsed = NULL;   /* another manifest now: its bytes are not m's */
    d.media_type = (char *)MT_DOCKER_MANIFEST;
    d.config.media_type = (char *)MT_DOCKER_CONFIG;
    return manifest_serialize(out, len_out, &d);
}

int reg_manifest_load(char **bytes_out, size_t *len_out, manifest **m_out, store_model *sm, const registry_opts *o)
{
    char *bytes = NULL, *conv = NULL;
    const char *kept;
    manifest *m = NULL;
    size_t len = 0, clen = 0;
    int rc;

    *bytes_out = NULL;
    *m_out = NULL;
    /* the stored bytes exactly (the handle keeps them), in a copy this function may replace */
    kept = store_model_manifest_bytes(sm, &len);
    if (!(bytes = malloc(len + 1))) {
        rc = ms_err(MS_ENOMEM, "out of memory");
        goto fail;
    }
    memcpy(bytes, kept, len);
    bytes[len] = '\0';
    if ((rc = manifest_parse(&m, bytes, len, store_model_digest(sm))) < 0 ||
        (!o->store_form && (rc = reg_source_swap(&bytes, &len, &m, sm)) < 0))
        goto fail;
    if (o->docker_format && strcmp(m->media_type, MT_DOCKER_MANIFEST) != 0) {
        if ((rc = reg_manifest_docker(&conv, &clen, m)) < 0)
            goto fail;
        free(bytes);
        bytes = conv;
        len = clen;
        manifest_free(m);
        m = NULL;
        if ((rc = manifest_parse(&m, bytes, len, "docker manifest")) < 0)
            goto fail;
    }
    *bytes_out = bytes;
    *len_out = len;
    *m_out = m;
    return 0;
fail:
    free(bytes);
    manifest_free(m);
    return rc;
}

/* ------------------------------------------------------------------ blobs */

/* The upload URL with "digest=" appended, after '?' or '&' as the URL already has a query. */
static void url_with_digest(char *buf, size_t len, const char *location, const char *digest)
{
    snprintf(buf, len, "%s%cdigest=%s", location, strchr(location, '?') ? '&' : '?', digest);
}

/* Bytes sent so far, for the progress display (NULL when there is none). */
typedef struct push_progress {
    ms_progress *bar;
    uint64_t done;
} push_progress;

static void progress_add(push_progress *p, uint64_t n)
{
    p->done += n;
    ms_progress_update(p->bar, p->done);
}

/* What a push reads blobs through: the pushed model's open handle for its own layers and config
 * (each mapped once, its size checked against the manifest), the store for a blob the push made
 * (a GGUF or archive rebuilt for the received form, held by the push's transaction). */
typedef struct push_src {
    store *s;
    store_model *sm;
} push_src;

static const manifest_layer *layer_by_digest(const manifest *m, const char *digest)
{
    if (!strcmp(m->config.digest, digest))
        return &m->config;
    for (size_t i = 0; i < m->n_layers; i++)
        if (!strcmp(m->layers[i].digest, digest))
            return &m->layers[i];
    return NULL;
}

/* The bytes of blob `digest`: in *v when the store mapped them for this call (blob_close it). */
static int push_bytes(const uint8_t **data, size_t *len, blob_view *v, const push_src *src, const char *digest)
{
    const manifest_layer *l = layer_by_digest(store_model_manifest(src->sm), digest);
    int rc;

    if (l)
        return store_model_layer_bytes(data, len, src->sm, l);
    if ((rc = store_blob_open(v, src->s, digest)) < 0)
        return rc;
    *data = v->data;
    *len = v->size;
    return 0;
}

static int upload(reg_client *c, CURL *h, const push_src *src, const char *digest, const char *start_location,
                  push_progress *p)
{
    const char *ct = "Content-Type: application/octet-stream";
    char location[4096], url[4400], range[96];
    const char *hdrs[] = { ct, NULL, NULL };
    reg_resp r = { 0 };
    blob_view v = { 0 };
    blob_hash *hash = blob_hash_new();
    const uint8_t *data;
    size_t size;
    ms_digest got;
    reg_body b;
    int rc;

    snprintf(location, sizeof location, "%s", start_location);
    if (!hash)
        return ms_err(MS_ENOMEM, "out of memory");
    if ((rc = push_bytes(&data, &size, &v, src, digest)) < 0) {
        blob_hash_free(hash);
        return rc;
    }
    /* Large blobs go up in chunks: each PATCH carries its Content-Range, and the registry answers
     * with the Location for the next one. */
    for (size_t off = 0; size > PUSH_CHUNK && off < size; off += PUSH_CHUNK) {
        size_t n = size - off < PUSH_CHUNK ? size - off : PUSH_CHUNK;
        b = (reg_body){ data + off, n, 0 };
        snprintf(range, sizeof range, "Content-Range: %zu-%zu", off, off + n - 1);
        hdrs[1] = range;
        blob_hash_update(hash, data + off, n);
        if ((rc = reg_request_retry(c, h, "PATCH", location, hdrs, &b, &r)) < 0)
            goto done;
        if (r.status != 202 || !r.location[0]) {
            rc = reg_http_err(MS_EIO, "upload chunk", &r);
            goto done;
        }
        snprintf(location, sizeof location, "%s", r.location);
        progress_add(p, n);
    }
    hdrs[1] = NULL;
    b = size > PUSH_CHUNK ? (reg_body){ NULL, 0, 0 } : (reg_body){ data, size, 0 };
    if (b.len)
        blob_hash_update(hash, b.data, b.len);
    blob_hash_final(got, hash);
    hash = NULL;
    /* The PUT below commits the upload. A registry is not bound to check the digest (and some
     * do not), so bytes that no longer hash to their name (bit rot in the store) stop here,
     * before they would be published under that name. */
    if (strcmp(got, digest) != 0) {
        rc = reg_blob_damaged(digest, size, got);
        goto done;
    }
    url_with_digest(url, sizeof url, location, digest);
    if ((rc = reg_request_retry(c, h, "PUT", url, hdrs, &b, &r)) < 0)
        goto done;
    if (r.status != 201)
        rc = reg_http_err(r.status == 400 ? MS_EMISMATCH : MS_EIO, "upload", &r);
    else
        progress_add(p, b.len);
done:
    blob_hash_free(hash);
    reg_resp_reset(&r);
    blob_close(&v);
    return rc;
}

static int blob_push(reg_client *c, CURL *h, const push_src *src, const char *digest, uint64_t size,
                     push_progress *p)
{
    char url[4500], from[2 * NAME_PART_MAX];
    reg_resp r = { 0 };
    int rc;

    snprintf(url, sizeof url, "/v2/%s/blobs/%s", c->repo, digest);
    if ((rc = reg_request_retry(c, h, "HEAD", url, NULL, NULL, &r)) < 0)
        goto done;
    if (r.status == 200) {
        progress_add(p, size);
        goto done;   /* the registry has it already */
    }
    (void)store_registry_blob_find(src->s, c->host, c->repo, digest, from, sizeof from);   /* none: upload it */
    if (from[0])
        snprintf(url, sizeof url, "/v2/%s/blobs/uploads/?mount=%s&from=%s", c->repo, digest, from);
    else
        snprintf(url, sizeof url, "/v2/%s/blobs/uploads/", c->repo);
    if ((rc = reg_request_retry(c, h, "POST", url, NULL, NULL, &r)) < 0)
        goto done;
    if (r.status == 201 && from[0]) {
        progress_add(p, size);
        goto done;   /* mounted: no bytes sent */
    }
    if (r.status != 202 || !r.location[0]) {
        rc = reg_http_err(MS_EIO, "start upload", &r);
        goto done;
    }
    rc = upload(c, h, src, digest, r.location, p);
done:
    if (rc < 0)
        ms_err_ctx("blob %s", digest);
    reg_resp_reset(&r);
    return rc;
}

int registry_push(store *s, const model_name *name, const model_name *dest, const registry_opts *o,
                  ms_digest digest_out)
{
    char host[NAME_HOST_MAX], label[600], url[600], ct[300], implicit[NAME_PART_MAX], *bytes = NULL;
    const char *hdrs[] = { ct, NULL };
    const model_name *dst = dest ? dest : name;
    reg_resp r = { 0 };
    reg_body b;
    reg_client c;
    manifest *m = NULL;
    CURL *h = NULL;
    size_t len = 0;
    push_progress prog = { 0 };
    uint64_t total = 0;
    store_txn *made = NULL;   /* holds a rebuilt GGUF blob against gc while it goes up */
    push_src src = { s, NULL };
    int rc, inited = 0;

    digest_out[0] = '\0';
    name_display(label, sizeof label, dst);
    if ((rc = registry_host(host, dst)) < 0 || (rc = store_model_open(&src.sm, s, name)) < 0)
        goto done;
    if ((rc = o->dmr_format || o->modelpack_format
                  ? reg_dmr_build(&bytes, &len, &m, &made, s, src.sm, name, o->modelpack_format)
                  : reg_manifest_load(&bytes, &len, &m, src.sm, o)) < 0)
        goto done;
    /* A destination by digest names the version to publish: the bytes must be it (docker
     * format, for one, makes other bytes), checked before anything is uploaded. */
    blob_digest_buf(digest_out, bytes, len);
    if (dst->digest[0] && strcmp(dst->digest, digest_out) != 0) {
        rc = ms_err(MS_EMISMATCH, "the manifest to push is %s, not %s", digest_out, dst->digest);
        goto done;
    }
    digest_out[0] = '\0';
    if ((rc = reg_client_init(&c, store_home(s), host, dst, o, 1)) < 0)
        goto done;
    inited = 1;
    if (!(h = reg_easy_new())) {
        rc = ms_err(MS_ENOMEM, "curl: out of memory");
        goto done;
    }
    for (size_t i = 0; i <= m->n_layers; i++)
        total += i == 0 ? m->config.size : m->layers[i - 1].size;
    if (!made && (rc = reg_source_materialize(&made, s, name, m)) < 0)
        goto done;
    prog.bar = o->quiet ? NULL : ms_progress_new(label, total, 0);
    for (size_t i = 0; i <= m->n_layers; i++) {
        const char *d = i == 0 ? m->config.digest : m->layers[i - 1].digest;
        if ((rc = blob_push(&c, h, &src, d, i == 0 ? m->config.size : m->layers[i - 1].size, &prog)) < 0)
            goto done;
        (void)store_registry_blob_record(s, host, c.repo, d);   /* a missed record only costs a later upload */
    }
    /* The manifest goes last: a registry may refuse one whose blobs it lacks, and a reader must
     * never find a tag whose blobs are still on their way. */
    snprintf(ct, sizeof ct, "Content-Type: %s", m->media_type);
    /* by digest when the name gave no tag of its own (its tag is then "sha256-<hex>") */
    snprintf(implicit, sizeof implicit, "sha256-%s", dst->digest[0] ? blob_digest_hex(dst->digest) : "");
    snprintf(url, sizeof url, "/v2/%s/manifests/%s", c.repo,
             dst->digest[0] && !strcmp(dst->tag, implicit) ? dst->digest : dst->tag);
    b = (reg_body){ bytes, len, 0 };
    if ((rc = reg_request_retry(&c, h, "PUT", url, hdrs, &b, &r)) < 0)
        goto done;
    if (r.status != 201 && r.status != 200) {
        rc = reg_http_err(MS_EIO, "manifest", &r);
        goto done;
    }
    blob_digest_buf(digest_out, bytes, len);
    if (r.digest[0] && strcmp(r.digest, digest_out) != 0)
        rc = ms_err(MS_EMISMATCH, "manifest: the registry stored %s, the bytes sent hash to %s",
                    blob_digest_valid(r.digest) ? r.digest : "another digest", digest_out);
done:
    if (rc < 0)
        ms_err_ctx("push %s to %s", label, host[0] ? host : "?");
    ms_progress_free(prog.bar);
    if (made)
        reg_ollama_release(s, m);
    store_txn_abort(made);   /* only the lock: the blob was adopted, and released just above */
    reg_resp_reset(&r);
    if (h)
        curl_easy_cleanup(h);
    if (inited)
        reg_client_fini(&c);
    store_model_close(src.sm);
    manifest_free(m);
    free(bytes);
    return rc;
}

int reg_blob_damaged(const char *digest, uint64_t len, const char *got)
{
    return ms_err(MS_EMISMATCH,
                  "blob %s is damaged: its %" PRIu64 " stored bytes hash to %s (mstore verify names the models it "
                  "belongs to; pull or import them again)",
                  digest, len, got);
}
