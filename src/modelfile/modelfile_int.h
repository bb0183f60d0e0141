/* modelfile_int.h: helpers shared by the files of src/modelfile only (tests may use them). */
#ifndef MSTORE_MODELFILE_INT_H
#define MSTORE_MODELFILE_INT_H

#include <jansson.h>
#include <stddef.h>

#include "modelfile/modelfile.h"

/* Layer l of m as text (bounded by MODELFILE_MAX_BYTES), malloc'd and NUL-terminated. */
int mf_layer_text(char **out, size_t *len_out, store_model *m, const manifest_layer *l);
/* Fill `p` from a params object; `what` names it in messages. */
int mf_params_from_json(model_params *p, json_t *o, const char *what);
/* A MODEL_OPT_TEXT value (format) from JSON: a string, or a schema object as its compact text;
 * checked as model_option_set_text checks it. *out is the caller's to free. */
int mf_option_text_json(char **out, const model_option *o, const char *shown, const json_t *v);
/* MS_EINVALID "<what>: TEMPLATE does not parse: ..." when `text` is not a Go template (valid Go
 * outside the subset run knows is kept: run falls back to the family). */
int mf_template_check(const char *text, const char *what);

/* A parsed Modelfile, or ollama's create request (request.c) read into the same parts. */
struct modelfile {
    char *from;
    int from_line;
    int from_store_only; /* from names a stored model, never a path: a request over the network
                          * must not make the server read its own files */
    json_t *files; /* the request's "files": file name -> digest of an uploaded blob; NULL for a
                    * Modelfile (the base is then `from`) */
    json_t *params; /* object, built from PARAMETER lines */
    char *template_, *system;
    int template_line;
    char **licenses;
    size_t n_licenses;
    json_t *messages; /* array of {"role", "content"} */
};

#endif
