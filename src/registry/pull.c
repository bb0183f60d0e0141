/* pull.c: fetch a manifest, then its missing blobs (download.c), and commit the model once
 * every blob is verified and stored. */
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

int registry_pull(store *s, const model_name *name, const registry_opts *o, ms_digest digest_out)
{
    char host[NAME_HOST_MAX], label[600], *bytes = NULL, *derived = NULL;
    ms_digest stored;
    const char *home = store_home(s);
    reg_client c;
    CURL *h = NULL;
    manifest *m = NULL, *fetch = NULL;
    size_t len = 0, dlen = 0;
    store_txn *t = NULL;
    int rc, inited = 0;

    digest_out[0] = '\0';
    if (o->report)
        memset(o->report, 0, sizeof *o->report);
    name_display(label, sizeof label, name);
    if ((rc = registry_host(host, name)) < 0)
        goto done;
    if ((rc = reg_client_init(&c, home, host, name, o, 0)) < 0)
        goto done;
    inited = 1;
    if (!(h = reg_easy_new())) {
        rc = ms_err(MS_ENOMEM, "curl: out of memory");
        goto done;
    }
    if ((rc = manifest_fetch(&c, h, name->digest[0] ? name->digest : name->tag, &bytes, &len)) < 0)
        goto done;
    if ((rc = manifest_parse(&m, bytes, len, "manifest")) < 0)
        goto done;
    if (strcmp(m->media_type, MT_OCI_MANIFEST) != 0 && strcmp(m->media_type, MT_DOCKER_MANIFEST) != 0) {
        rc = ms_err(MS_EUNSUPPORTED, "manifest media type '%s' is not an image manifest (%s or %s)", m->media_type,
                    MT_OCI_MANIFEST, MT_DOCKER_MANIFEST);
        goto done;
    }
    /* From the first blob to the commit, gc must not remove what this pull is about to name. */
    if ((rc = store_txn_begin(&t, s)) < 0)
        goto done;
    if ((rc = reg_ollama_plan(&fetch, s, m)) < 0)
        goto done;
    if ((rc = reg_blobs_fetch(&c, t, fetch ? fetch : m, o, label)) < 0)
        goto done;
    if ((rc = reg_ollama_derive(&derived, &dlen, t, m, bytes, len, o, o->report)) < 0)
        goto done;
    /* What this repository holds, for a later push's cross-repository mounts: recorded with
     * the commit, so a failed pull records nothing. */
    for (size_t i = 0; i <= m->n_layers && rc == 0; i++)
        rc = store_txn_registry_blob(t, host, c.repo, i == 0 ? m->config.digest : m->layers[i - 1].digest);
    if (rc < 0)
        goto done;
    rc = store_txn_commit(t, name, derived ? derived : bytes, derived ? dlen : len, stored);
    t = NULL;   /* the commit ended it */
    if (rc < 0)
        goto done;
    blob_digest_buf(digest_out, bytes, len);
    if (o->report)
        snprintf(o->report->version, sizeof o->report->version, "%s", digest_out);
    if (derived)
        reg_ollama_release(s, m);
done:
    store_txn_abort(t);
    if (rc < 0)
        ms_err_ctx("pull %s from %s", label, host[0] ? host : "?");
    if (h)
        curl_easy_cleanup(h);
    if (inited)
        reg_client_fini(&c);
    manifest_free(m);
    manifest_free(fetch);
    free(derived);
    free(bytes);
    return rc;
}
