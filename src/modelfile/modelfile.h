/* modelfile.h: ollama's model definition; the whole surface of src/modelfile.
 *
 * A model may carry, besides its weights, the layers ollama defines (manifest.h):
 *   MT_OLLAMA_PARAMS   JSON object of run options: {"temperature": 0.7, "stop": ["</s>"], ...}
 *   MT_OLLAMA_SYSTEM   the default system prompt, text
 *   MT_TEMPLATE        the chat template (an ollama Go template, or the GGUF's Jinja)
 *   MT_OLLAMA_LICENSE  a license text (one layer per LICENSE)
 *   MT_OLLAMA_MESSAGES JSON array of {"role", "content"}: a conversation the model starts with
 * They come from a pull of an ollama model, or from a Modelfile through modelfile_create:
 *   FROM <model in the store | GGUF file | safetensors directory>   (exactly one, required)
 *   PARAMETER <name> <value>   TEMPLATE <text>   SYSTEM <text>   LICENSE <text>
 *   MESSAGE <system|user|assistant> <text>                          ADAPTER: refused (no LoRA yet)
 * Values are a word, a "quoted string" or a """triple-quoted""" text over several lines;
 * instructions are case-insensitive; '#' starts a comment line. Relative FROM paths are read
 * from the Modelfile's folder, as ollama does. */
#ifndef MSTORE_MODELFILE_H
#define MSTORE_MODELFILE_H

#include <stddef.h>
#include <stdint.h>

#include "manifest/manifest.h"
#include "runtime/runtime.h"
#include "store/store.h"

#define MODELFILE_MAX_BYTES (4u << 20) /* a Modelfile, or a text layer, larger than this is refused */
#define MODELFILE_MAX_STOP  16

/* A stored model's run defaults (params layer) and system prompt. Fields not in the params
 * layer keep has_* 0. */
typedef struct model_params {
    int has_temperature, has_top_k, has_top_p, has_min_p, has_repeat_penalty, has_repeat_last_n, has_seed,
        has_num_predict, has_num_ctx;
    double temperature, top_p, min_p, repeat_penalty;
    long long top_k, repeat_last_n, seed, num_predict, num_ctx;
    char *stop[MODELFILE_MAX_STOP];
    size_t n_stop;
    char *system; /* NULL when the model has no system layer */
} model_params;

/* The defaults of an open stored model. *out NULL (and 0) when it has neither a params nor a
 * system layer. MS_EINVALID (params that are not an object of options of the right types: the
 * message names the key), or what reading the layers returns. */
int model_params_load(model_params **out, store_model *m);
void model_params_free(model_params *p); /* NULL is fine */
/* Apply the defaults to sampler options and the token budget / context length (each pointer
 * may be NULL): call before the caller's own flags, so that a flag still wins. */
void model_params_apply(const model_params *p, runtime_sampler_opts *so, int *n_predict, int *n_ctx);

/* Stop strings over streamed text. `pending` holds generated text not yet shown. Returns 1 when
 * a stop string occurs in it: *emit_out is then the length before the first occurrence (show
 * that, drop the rest, stop generating). Else 0 and *emit_out is what can be shown now: all but
 * the longest tail that could still grow into a stop string. */
int model_params_stop_scan(const model_params *p, const char *pending, size_t len, size_t *emit_out);

/* ---------------------------------------------------------------- Modelfile */

typedef struct modelfile modelfile;
/* Parse a Modelfile's text; `path` names it in messages ("Modelfile:3: ..."). MS_EINVALID
 * naming the line: unknown instruction, missing or repeated FROM, a bad PARAMETER (unknown name
 * or a value of the wrong type), an unterminated quote, a MESSAGE role that is not system /
 * user / assistant, a TEMPLATE that does not parse as a Go template; MS_EUNSUPPORTED for
 * ADAPTER. */
int modelfile_parse(modelfile **out, const char *text, size_t len, const char *path);
void modelfile_free(modelfile *mf); /* NULL is fine */

/* Create model `name` from the Modelfile at `path`: the FROM model (imported first when it is
 * a file or a directory) with the Modelfile's layers in place of its own. Every tensor blob is
 * the base's; only new layers are written. Nothing is named unless all succeeds (a safetensors
 * directory is imported under `name` and then replaced). MS_EINVALID / MS_EUNSUPPORTED as
 * modelfile_parse, MS_ENOTFOUND for a FROM that is neither a file nor a stored model (the
 * message names the line), MS_EIO. `quiet`: no import progress. */
int modelfile_create(store *s, const model_name *name, const char *path, int quiet, ms_digest digest_out);

/* What `mstore show` prints of a stored model, each malloc'd and NUL-terminated, NULL when the
 * model has none: the params as "name value" lines (stop strings quoted, one line each), the
 * template, the system prompt, the licenses (separated by blank lines), and a Modelfile that
 * recreates the model ("FROM <shown name>" with its layers), read from an open stored model. */
typedef struct model_info {
    char *parameters, *template_, *system, *license, *modelfile;
} model_info;
int model_info_load(model_info *out, store_model *m);
void model_info_fini(model_info *i);

#endif
