/* pull.c: the one pull skeleton (reg_pull) and its network source: a registry's manifest over
 * the distribution API, its blobs through download.c. layout.c is the other source. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "blob/blob.h"
#include "registry/registry_int.h"

/* GET the manifest `ref` (a tag, or a digest the bytes must hash to). */
static int manifest_fetch(reg_client *c, CURL *h, const char *ref, char **out, size_t *len_out)
{
    const char *hdrs[] = { REG_ACCEPT_MANIFEST, NULL };
    char url[600];
    ms_digest digest;
    reg_resp r = { 0 };
    int rc;

    *out = NULL;
    snprintf(url, sizeof url, "/v2/%s/manifests/%s", c->repo, ref);
    r.body_max = MANIFEST_MAX_BYTES;
    if ((rc = reg_request_retry(c, h, "GET", url, hdrs, NULL, &r)) < 0)
        goto done;
    if (r.status != 200) {
        rc = reg_http_err(r.status == 404 ? MS_ENOTFOUND : MS_EIO, "manifest", &r);
        ms_err_ctx("%s%s", c->base, url);
        goto done;
    }
    blob_digest_buf(digest, r.body ? r.body : "", r.body_len);
    if (r.digest[0] && strcmp(r.digest, digest) != 0) {
        /* the header is the host's text: quoted only when it is a digest */
        rc = ms_err(MS_EMISMATCH, "manifest %s%s: the registry says %s but its bytes hash to %s", c->base, url,
                    blob_digest_valid(r.digest) ? r.digest : "another digest", digest);
        goto done;
    }
    /* By digest, the digest is the only trust: whatever the registry says, the bytes decide. */
    if (!strncmp(ref, "sha256:", 7) && strcmp(ref, digest) != 0) {
        rc = ms_err(MS_EMISMATCH, "manifest %s%s: its bytes hash to %s, not to the digest asked for", c->base, url,
                    digest);
        goto done;
    }
    *out = r.body ? r.body : strdup("");
    *len_out = r.body_len;
    r.body = NULL;
    rc = *out ? 0 : ms_err(MS_ENOMEM, "out of memory");
done:
    reg_resp_reset(&r);
    return rc;
}

/* ------------------------------------------------------------------ the network source */

typedef struct net_source {
    reg_source base;   /* first: a reg_source * is a net_source * */
    reg_client c;
    CURL *h;           /* the manifest's handle; download threads have their own */
} net_source;

static int net_manifest_get(reg_source *src, const model_name *name, char **bytes_out, size_t *len_out,
                            const char **what_out)
{
    net_source *n = (net_source *)src;

    *what_out = "manifest";
    return manifest_fetch(&n->c, n->h, name->digest[0] ? name->digest : name->tag, bytes_out, len_out);
}

static int net_blobs_fetch(reg_source *src, store_txn *t, const manifest *m, const unsigned char *ok,
                           const registry_opts *o, const char *label)
{
    return reg_blobs_fetch(&((net_source *)src)->c, t, m, ok, o, label);
}

static void net_close(reg_source *src)
{
    net_source *n = (net_source *)src;

    if (n->h)
        curl_easy_cleanup(n->h);
    reg_client_fini(&n->c);
}

static const reg_source_ops net_ops = { net_manifest_get, net_blobs_fetch };

/* ------------------------------------------------------------------ the skeleton */

/* Blobs of `m` to fetch: ok[i] 0 for each that is not stored intact (i = 0 its config, i + 1
 * its layer i). Stored bytes are not fetched again, but only intact ones count as stored:
 * pulling a model again is how a user repairs what `verify` found damaged (blob.h invariant
 * 3). That re-reads each blob this pull would skip, once, at disk speed, on a thread a core: a
 * pull of a model already stored costs a `verify` of it instead of nothing, and still far less
 * than the download it checks against. A size that differs from the manifest's is found by
 * stat alone. Counted into the report here, once, whatever the source. */
static int blobs_missing(unsigned char **ok_out, store *s, const manifest *m, registry_pull_report *rep)
{
    int rc = reg_manifest_intact(ok_out, s, m, NULL);

    for (size_t i = 0; rc == 0 && rep && i <= m->n_layers; i++)
        if (!(*ok_out)[i]) {
            rep->blobs_downloaded++;
            rep->bytes_downloaded += i == 0 ? m->config.size : m->layers[i - 1].size;
        }
    return rc;
}

/* The blobs, the store's form of the model, the rows: everything from the first blob to the
 * commit happens inside `t`, so gc never removes what this pull is about to name and a failed
 * pull adds no name (registry.h invariant 2). *derived_out: the store's form when it is not
 * `m` itself (ollama.c). Always ends `t`. */
static int pull_commit(store_txn *t, reg_source *src, const model_name *name, const manifest *m,
                       const registry_opts *o, const char *label, int *derived_out)
{
    store *s = store_txn_store(t);
    manifest *fetch = NULL, *derived = NULL;
    unsigned char *ok = NULL;
    int rc;

    *derived_out = 0;
    /* An ollama GGUF that an earlier pull split is not downloaded again (reg_ollama_plan). */
    if ((rc = reg_ollama_plan(&fetch, s, m)) < 0 || (rc = blobs_missing(&ok, s, fetch ? fetch : m, o->report)) < 0)
        goto done;
    if ((rc = src->ops->blobs_fetch(src, t, fetch ? fetch : m, ok, o, label)) < 0)
        goto done;
    if ((rc = reg_ollama_derive(&derived, t, m, o, o->report)) < 0)
        goto done;
    /* What a registry repository holds, for a later push's cross-repository mounts: recorded
     * with the commit, so a failed pull records nothing. */
    for (size_t i = 0; src->host && i <= m->n_layers && rc == 0; i++)
        rc = store_txn_registry_blob(t, src->host, src->repo, i == 0 ? m->config.digest : m->layers[i - 1].digest);
    if (rc < 0)
        goto done;
    rc = store_txn_commit(t, name, derived ? derived : m, NULL);
    t = NULL;   /* the commit ended it */
    *derived_out = derived != NULL;
done:
    store_txn_abort(t);
    manifest_free(fetch);
    manifest_free(derived);
    free(ok);
    return rc;
}

/* Nothing pulled yet: no digest, an empty report. */
static void pull_reset(const registry_opts *o, ms_digest digest_out)
{
    digest_out[0] = '\0';
    if (o->report)
        memset(o->report, 0, sizeof *o->report);
}

int reg_pull(store *s, reg_source *src, const model_name *name, const registry_opts *o, ms_digest digest_out)
{
    char label[600], *bytes = NULL;
    const char *what = "manifest";
    manifest *m = NULL;
    store_txn *t = NULL;
    size_t len = 0;
    int rc, derived = 0;

    pull_reset(o, digest_out);
    name_display(label, sizeof label, name);
    if ((rc = src->ops->manifest_get(src, name, &bytes, &len, &what)) < 0 ||
        (rc = manifest_parse(&m, bytes, len, what)) < 0)
        goto done;
    if (strcmp(m->media_type, MT_OCI_MANIFEST) != 0 && strcmp(m->media_type, MT_DOCKER_MANIFEST) != 0) {
        rc = ms_err(MS_EUNSUPPORTED, "manifest media type '%s' is not an image manifest (%s or %s)", m->media_type,
                    MT_OCI_MANIFEST, MT_DOCKER_MANIFEST);
        goto done;
    }
    if ((rc = store_txn_begin(&t, s)) < 0 ||
        (rc = pull_commit(t, src, name, m, o, label, &derived)) < 0)
        goto done;
    blob_digest_buf(digest_out, bytes, len);
    if (o->report)
        snprintf(o->report->version, sizeof o->report->version, "%s", digest_out);
    if (derived)
        reg_ollama_release(s, m);
done:
    if (rc < 0)
        ms_err_ctx("pull %s from %s", label, src->where);
    manifest_free(m);
    free(bytes);
    return rc;
}

/* Opens the registry `host` for `name`; on failure nothing is left to close. */
static int net_open(net_source *n, store *s, const char *host, const model_name *name, const registry_opts *o)
{
    int rc = reg_client_init(&n->c, store_home(s), host, name, o, 0);

    n->base = (reg_source){ .ops = &net_ops, .where = n->c.host, .host = n->c.host, .repo = n->c.repo };
    if (rc == 0 && !(n->h = reg_easy_new()))
        rc = ms_err(MS_ENOMEM, "curl: out of memory");
    if (rc < 0)
        net_close(&n->base);
    return rc;
}

int registry_pull(store *s, const model_name *name, const registry_opts *o, ms_digest digest_out)
{
    char host[NAME_HOST_MAX] = "", label[600];
    net_source n = { 0 };
    int rc;

    if ((rc = registry_host(host, name)) < 0 || (rc = net_open(&n, s, host, name, o)) < 0) {
        /* refused before the skeleton: left and said as reg_pull would */
        pull_reset(o, digest_out);
        name_display(label, sizeof label, name);
        return ms_err_ctx("pull %s from %s", label, host[0] ? host : "?");
    }
    rc = reg_pull(s, &n.base, name, o, digest_out);
    net_close(&n.base);
    return rc;
}
