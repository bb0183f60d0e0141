/* export_int.h: shared by src/export's files; not part of its surface. */
#ifndef MSTORE_EXPORT_INT_H
#define MSTORE_EXPORT_INT_H

#include <jansson.h>

#include "export/export.h"
#include "format/format.h"

/* Export of a model not imported from GGUF (gen.c). */
int export_gguf_generate(store_model *sm, json_t *config, const char *model_name, const char *out_path,
                         export_result *res);

#endif
