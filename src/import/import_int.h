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

/* 1 when GGUF tensor names of `arch` are mapped to canonical names. */
int import_arch_known(const char *arch);
/* The canonical name of GGUF tensor `gguf` under `arch` (the GGUF name itself when unmapped);
 * `pack` (may be NULL) receives the expert pack's name, or "" when the tensor has its own blob. */
void import_name_map(char *out, size_t len, char *pack, size_t pack_len, const char *arch, const char *gguf);
/* The GGUF name of canonical tensor `hf` under `arch`; -1 (no message) when the table has none. */
int import_name_unmap(char *out, size_t len, const char *arch, const char *hf);
/* Export of a model not imported from GGUF (export_gen.c). */
int export_gguf_generate(store *s, const manifest *m, json_t *config, const char *model_name, const char *out_path,
                         export_result *res);
/* GGUF file import (gguf.c). */
int import_gguf_file(store *s, const char *path, const model_name *name, const import_opts *o, char digest_out[72]);

#endif
