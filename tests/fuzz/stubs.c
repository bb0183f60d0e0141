/* stubs.c: the store functions chat.c and the modelfile sources call when they read a model in the
 * store. The fuzz targets never read a store; these keep SQLite and the store out of the
 * link, and abort if a target ever reaches one. */
#include <stdlib.h>

#include "store/store.h"

const char *store_home(const store *s) { (void)s; abort(); }
int store_name_resolve(store *s, const model_name *name, char digest_out[72])
{
    (void)s, (void)name, (void)digest_out;
    abort();
}
int store_manifest_load(store *s, const char *digest, manifest **out)
{
    (void)s, (void)digest, (void)out;
    abort();
}
