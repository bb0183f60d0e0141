/* source.c: what `mstore serve`'s read-only /v2 hands out for a model kept in another form than
 * it was received in (an ollama, DMR or ModelPack artifact, ollama.c): the manifest as received,
 * and the blobs it names that the store no longer keeps (the whole GGUF, the weight tar), rebuilt
 * by the path push takes (reg_source_materialize), so that the client gets the artifact it can
 * run, not the store's private form. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blob/blob.h"
#include "registry/registry_int.h"

int registry_manifest_received(char **bytes_out, size_t *len_out, ms_digest digest_out, store_model *model)
{
    const manifest_layer *l = manifest_layer_find(store_model_manifest(model), MT_SOURCE_MANIFEST, NULL);
    manifest *m = NULL;
    char *bytes = NULL;
    size_t len = 0;
    int rc;

    *bytes_out = NULL;
    *len_out = 0;
    digest_out[0] = '\0';
    if ((rc = reg_source_swap(&bytes, &len, &m, model)) < 0 || !bytes)
        return rc;
    manifest_free(m);
    /* the layer's bytes are mapped, not hashed: a damaged copy must not go out under the name */
    blob_digest_buf(digest_out, bytes, len);
    if (strcmp(digest_out, l->digest) != 0) {
        rc = reg_blob_damaged(l->digest, len, digest_out);
        digest_out[0] = '\0';
        free(bytes);
        return rc;
    }
    *bytes_out = bytes;
    *len_out = len;
    return 1;
}

static int names_blob(const manifest *m, const char *digest)
{
    if (!strcmp(m->config.digest, digest))
        return 1;
    for (size_t i = 0; i < m->n_layers; i++)
        if (!strcmp(m->layers[i].digest, digest))
            return 1;
    return 0;
}

int registry_source_blob_fd(int *fd_out, uint64_t *size_out, store *s, const char *digest)
{
    store_entry *es = NULL;
    size_t n = 0;
    int rc, found = 0;

    *fd_out = -1;
    if ((rc = store_list(s, &es, &n)) < 0)
        return rc;
    for (size_t i = 0; rc == 0 && !found && i < n; i++) {
        store_model *sm = NULL;
        store_txn *t = NULL;
        manifest *m = NULL;
        char *bytes = NULL;
        size_t len = 0;
        /* a model that does not open names nothing this request can get: the search goes on */
        if (store_model_open(&sm, s, &es[i].name) == 0 && reg_source_swap(&bytes, &len, &m, sm) == 0 && m &&
            names_blob(m, digest)) {
            found = 1;
            /* The transaction's lock keeps gc off the adopted blob until the file is open; its
             * abort leaves the blob under blobs/, unnamed, for the next request and the next
             * push, until `mstore gc` removes it. */
            if ((rc = reg_source_materialize(&t, s, &es[i].name, m)) == 0 &&
                (rc = store_blob_fd(fd_out, size_out, s, digest)) == MS_ENOTFOUND)
                rc = ms_err(MS_EUNSUPPORTED, "blob %s: model '%s' was received with it, and only its weights can be "
                            "rebuilt", digest, store_model_shown(sm));
            store_txn_abort(t);
        }
        store_model_close(sm);
        manifest_free(m);
        free(bytes);
    }
    free(es);
    if (rc == 0 && !found)
        rc = ms_err(MS_ENOTFOUND, "blob %s: not stored, and no stored model's received manifest names it", digest);
    return rc;
}
