/* stubs.c: the store functions the modelfile sources call when they read a model in the store
 * (params.c, through the store_model handle). The fuzz targets never read a store; these keep
 * SQLite and the store out of the link, and abort if a target ever reaches one. */
#include <stdlib.h>

#include "store/store.h"

const manifest *store_model_manifest(const store_model *m) { (void)m; abort(); }
int store_model_layer_bytes(const uint8_t **data, size_t *len, store_model *m, const manifest_layer *l)
{
    (void)data, (void)len, (void)m, (void)l;
    abort();
}
