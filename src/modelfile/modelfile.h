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

struct json_t; /* jansson's, for the JSON readers of the option table */

/* ---------------------------------------------------------------- run options
 *
 * The one table of the sampler and generation options, as Redis keeps its config and git its
 * parse-options: each row says an option's name (ollama's `options` key, the Modelfile's
 * PARAMETER, chat's /set parameter), its `mstore run` flag, its OpenAI request fields, its type,
 * bounds and default, and where the value goes. Every reader (run's flags, /set, ollama's
 * options, OpenAI's fields, PARAMETER and a stored params layer) looks options up here, so an
 * option is added with one row and refused everywhere with the same message:
 *   "<option>: expected a number from 0 to 100; 300 is too large". */

/* What the options set: a run's sampler, token budget and context. */
typedef struct model_opts {
    runtime_sampler_opts so;
    int n_predict; /* < 0: until the context is full */
    int n_ctx; /* <= 0: the model's own (runtime_opts.n_ctx) */
    int seed_set; /* so.seed was given; else the reader draws one (a negative seed asks for that) */
    const char *format; /* NULL: free text; "json" or a JSON Schema's text (session_format_set).
                         * Borrowed: the reader keeps the string alive while the opts are used */
} model_opts;

typedef enum model_opt_type {
    MODEL_OPT_NUMBER,
    MODEL_OPT_INTEGER,
    MODEL_OPT_STRINGS, /* stop: each reader keeps the strings where its generation wants them */
    MODEL_OPT_TEXT, /* format: one string, stored by pointer with model_option_set_text */
} model_opt_type;

/* How a value is stored at `off` in model_opts. */
typedef enum model_opt_store {
    MODEL_OPT_FLOAT,
    MODEL_OPT_INT,
    MODEL_OPT_SEED,
    MODEL_OPT_NONE,
    MODEL_OPT_PTR /* a const char * */
} model_opt_store;

typedef struct model_option {
    const char *name; /* ollama's key, PARAMETER name, /set parameter name */
    const char *flag; /* mstore run's flag, or NULL */
    const char *openai[3]; /* OpenAI's request fields, NULL-terminated */
    model_opt_type type;
    double lo, hi; /* inclusive; for MODEL_OPT_STRINGS hi is the most strings */
    double openai_lo, openai_hi; /* OpenAI's own range where its API documents another (else equal) */
    double def; /* model_opts_defaults's value */
    int load_only; /* applies when the model is loaded: chat's /set cannot change it */
    model_opt_store store;
    size_t off;
} model_option;

extern const model_option model_options[];
extern const size_t model_options_n;
#define MODEL_OPTIONS_MAX 32 /* model_options_n is at most this (a stored params layer's bitmask) */

/* The row named `name` (exact, lower case), or whose flag is `flag`; NULL when none. */
const model_option *model_option_find(const char *name);
const model_option *model_option_find_flag(const char *flag);
/* Parse `text` as o's value and check its bounds; `shown` names the option in the message (a
 * flag, "PARAMETER top_k"). MS_EINVALID: "<shown>: expected an integer from 0 to 16777216;
 * '1.5' is not an integer" (or "...; 300 is too large"). */
int model_option_parse(double *out, const model_option *o, const char *shown, const char *text);
/* The same for a JSON value (not null), with OpenAI's range when `openai`. */
int model_option_json(double *out, const model_option *o, const char *shown, const struct json_t *v, int openai);
/* Store a checked value where o says (a negative seed leaves the seed unset). */
void model_option_set(model_opts *dst, const model_option *o, double v);
/* Check a MODEL_OPT_TEXT value (format: "json" or a JSON Schema that compiles; `shown` names it)
 * and store the pointer. MS_EINVALID / MS_EUNSUPPORTED as grammar_from_format. */
int model_option_set_text(model_opts *dst, const model_option *o, const char *shown, const char *text);
/* Every number option present in a JSON object: ollama's keys ("options" object, shown with
 * `prefix`, "options.") or OpenAI's fields (`openai`). Absent and null fields keep dst's value;
 * other keys, and MODEL_OPT_STRINGS rows, are the caller's. MS_EINVALID as model_option_json. */
int model_opts_from_json(model_opts *dst, const struct json_t *obj, const char *prefix, int openai);
/* Every option's default (the sampler's are runtime_sampler_defaults's); no seed set. */
void model_opts_defaults(model_opts *o);

/* A stored model's run defaults (params layer) and system prompt. */
typedef struct model_params {
    double val[MODEL_OPTIONS_MAX]; /* by row of model_options */
    uint32_t set; /* bit i: val[i] was given */
    char *stop[MODELFILE_MAX_STOP];
    size_t n_stop;
    char *format; /* the format option (a schema object is kept as its JSON text), or NULL */
    char *system; /* NULL when the model has no system layer */
} model_params;

/* The defaults of an open stored model. *out NULL (and 0) when it has neither a params nor a
 * system layer. MS_EINVALID (params that are not an object of options of the right types and
 * bounds: the message names the key), or what reading the layers returns. */
int model_params_load(model_params **out, store_model *m);
void model_params_free(model_params *p); /* NULL is fine */
/* Apply the defaults to a run's options: call before the caller's own flags, so that a flag
 * still wins. */
void model_params_apply(const model_params *p, model_opts *o);

/* ---------------------------------------------------------------- Modelfile */

typedef struct modelfile modelfile;
/* Parse a Modelfile's text; `path` names it in messages ("Modelfile:3: ..."). MS_EINVALID
 * naming the line: unknown instruction, missing or repeated FROM, a bad PARAMETER (unknown name
 * or a value of the wrong type), an unterminated quote, a MESSAGE role that is not system /
 * user / assistant, a TEMPLATE that does not parse as a Go template; MS_EUNSUPPORTED for
 * ADAPTER. */
int modelfile_parse(modelfile **out, const char *text, size_t len, const char *path);
void modelfile_free(modelfile *mf); /* NULL is fine */

/* ollama's create request (POST /api/create) read into a modelfile: the same parts a Modelfile
 * has, as JSON fields, checked as strictly as modelfile_parse checks its lines:
 *   from (a stored model's name, never a path) or files ({"<name>.gguf": "sha256:..."}: a GGUF
 *   uploaded before as a blob), template, system, license (a string or an array of strings),
 *   parameters (an object of the option table's options: stop is an array of strings),
 *   messages ([{"role", "content"}]); adapters and quantize are refused by name.
 * Other fields (model, stream) are the caller's. MS_EINVALID naming the field
 * ("parameters.tempreature: unknown parameter"), MS_EUNSUPPORTED (adapters, quantize). */
int modelfile_from_request(modelfile **out, const struct json_t *req);

/* What a create reports as it goes ("importing model.gguf", "writing manifest"), for a
 * server's progress stream. */
typedef void (*modelfile_status_fn)(void *ctx, const char *status);
typedef struct modelfile_create_opts {
    int quiet; /* no import progress on the terminal */
    modelfile_status_fn status; /* NULL: none */
    void *ctx;
} modelfile_create_opts;

/* Check, without writing, that mf's base is there: the stored model `from` names (MS_ENOTFOUND
 * "model 'x:latest' not found"), or every blob of `files` (MS_EINVALID naming the file), so that
 * a server answers 404 / 400 before its progress stream starts. A path FROM is left to the
 * create. */
int modelfile_base_check(store *s, const modelfile *mf);

/* Create model `name` from `mf`: the base (FROM: a stored model, or a file or a directory
 * imported first; files: the uploaded GGUF, its digest checked as it is read) with mf's layers
 * in place of its own. Every tensor blob is the base's; only new layers are written. Nothing
 * is named unless all succeeds (a safetensors directory is imported under `name` and then
 * replaced). `path` is the Modelfile's (relative FROM paths are read from its folder, messages
 * name it). MS_ENOTFOUND for a FROM that is neither a file nor a stored model (the message names
 * the line), MS_EMISMATCH (an uploaded blob that does not hash to its digest), MS_EINVALID,
 * MS_EUNSUPPORTED, MS_EIO. */
int modelfile_create_from(store *s, const model_name *name, const modelfile *mf, const char *path,
                          const modelfile_create_opts *o, ms_digest digest_out);
/* modelfile_parse of the file at `path`, then modelfile_create_from (what `mstore create`
 * runs). `quiet`: no import progress. */
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
