/* stubs.c: the store functions the modelfile and registry sources call when they read a model in
 * the store (params.c, through the store_model handle) or land a download (download.c, through a
 * store_txn). The fuzz targets never touch a store; these keep SQLite and the store out of the
 * link, and abort if a target ever reaches one. */
#include <stdlib.h>

#include "store/store.h"

const manifest *store_model_manifest(const store_model *m) { (void)m; abort(); }
int store_model_layer_bytes(const uint8_t **data, size_t *len, store_model *m, const manifest_layer *l)
{
    (void)data, (void)len, (void)m, (void)l;
    abort();
}

/* download.c (fuzz_registry) lands what it fetched in a store_txn; the target only parses. */
store *store_txn_store(const store_txn *t) { (void)t; abort(); }
const char *store_home(const store *s) { (void)s; abort(); }
int store_txn_blob_adopt(store_txn *t, ms_digest digest_out, const char *path, const char *expect, const char *computed)
{
    (void)t, (void)digest_out, (void)path, (void)expect, (void)computed;
    abort();
}
void store_blobs_intact(store *s, const char *const *digests, const uint64_t *sizes, size_t n, unsigned char *ok,
                        int threads)
{
    (void)s, (void)digests, (void)sizes, (void)n, (void)ok, (void)threads;
    abort();
}
