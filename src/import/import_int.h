/* import_int.h: helpers shared by the importers in src/import only. */
#ifndef MSTORE_IMPORT_INT_H
#define MSTORE_IMPORT_INT_H

#include <jansson.h>

#include "format/format.h"
#include "import/import.h"

/* Emit `w` into a new blob. */
int import_tensor_blob(char digest_out[72], uint64_t *size_out, const char *home, st_writer *w);
/* Parse a JSON object file (bounded). With required == 0 a missing file gives *out == NULL, 0. */
int import_json_file(json_t **out, const char *path, int required);
/* Add the file at `path`, when it exists, as a layer of `media_type`. */
int import_file_layer(manifest *m, const char *home, const char *path, const char *media_type);
/* Build the config blob (import.h) from a Hugging Face config.json object, store it and set it
 * as the manifest's config. `dtypes` maps tensor type -> count. */
int import_config_commit(store *s, manifest *m, json_t *hf_config, json_t *dtypes, const char *format,
                         const char *source_path);
/* Store a config object as the config blob of `m` (sorted keys, compact). */
int import_config_store(store *s, manifest *m, json_t *config);
/* Serialize `m` and commit it under `name`. */
int import_manifest_commit(store *s, manifest *m, const model_name *name, char digest_out[72]);

#endif
