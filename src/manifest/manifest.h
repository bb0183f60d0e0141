/* manifest.h: OCI image manifests and model names; the whole surface of src/manifest.
 *
 * A manifest is an OCI image manifest v2 (or, when pulled, a Docker v2 schema 2 manifest):
 *   {"schemaVersion": 2, "mediaType": "...", "config": {mediaType, digest, size},
 *    "layers": [{mediaType, digest, size, name?}, ...]}
 * Its bytes are kept exactly as written or received, because their sha256 is the model version.
 *
 * A model name is [host/][namespace/]model[:tag]:
 *   host       a DNS name or IPv4 address with an optional :port; it is the first of three
 *              components, or the first of two when it contains '.' or ':' or is "localhost"
 *   namespace  default "library"; the characters and length of a model
 *   model      [A-Za-z0-9][A-Za-z0-9._-]*, at most 80 characters, never "." or ".."
 *   tag        [A-Za-z0-9_][A-Za-z0-9._-]*, at most 128 characters, default "latest"
 * Nothing in a valid name can name a path outside the store ("/" only separates components).
 * An OCI reference by digest adds "@sha256:<64 lowercase hex>" (after the tag, if any): the
 * manifest must hash to it. Stored models are named by tag; a reference by digest without a
 * tag gets the tag "sha256-<64 hex>". */
#ifndef MSTORE_MANIFEST_H
#define MSTORE_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

#include "util/util.h"

#define MT_OCI_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define MT_DOCKER_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"
#define MT_CONFIG "application/vnd.mstore.model.config.v1+json"
#define MT_DOCKER_CONFIG "application/vnd.docker.container.image.v1+json"
#define MT_TENSOR "application/vnd.ollama.image.tensor"
#define MT_TOKENIZER "application/vnd.ollama.image.tokenizer"
#define MT_TOKENIZER_CONFIG "application/vnd.ollama.image.tokenizer.config"
#define MT_TEMPLATE "application/vnd.ollama.image.template"
#define MT_GGUF_META "application/vnd.mstore.gguf.metadata"   /* a GGUF file's header, verbatim */
#define MT_GGUF_GAPS "application/vnd.mstore.gguf.gaps"       /* non-zero bytes between GGUF tensors */
#define MT_GENERATION_CONFIG "application/vnd.mstore.generation.config+json"
/* ollama's layers (its server/images.go names): a whole GGUF file, JSON run options, the
 * default system prompt, the license text, and the conversation a Modelfile seeds with MESSAGE. */
#define MT_OLLAMA_MODEL "application/vnd.ollama.image.model"
#define MT_OLLAMA_PARAMS "application/vnd.ollama.image.params"
#define MT_OLLAMA_SYSTEM "application/vnd.ollama.image.system"
#define MT_OLLAMA_LICENSE "application/vnd.ollama.image.license"
#define MT_OLLAMA_MESSAGES "application/vnd.ollama.image.messages"
/* Docker Model Runner's artifacts (docker/model-runner pkg/distribution/types): a config of
 * its own (format, quantization, context_size, ...), one whole GGUF file per layer, license and
 * Jinja chat template layers, a vision projector. */
#define MT_DMR_CONFIG_V01 "application/vnd.docker.ai.model.config.v0.1+json"
#define MT_DMR_CONFIG_V02 "application/vnd.docker.ai.model.config.v0.2+json"
#define MT_DMR_GGUF "application/vnd.docker.ai.gguf.v3"
#define MT_DMR_LICENSE "application/vnd.docker.ai.license"
#define MT_DMR_CHAT_TEMPLATE "application/vnd.docker.ai.chat.template.jinja"
#define MT_DMR_MMPROJ "application/vnd.docker.ai.mmproj"
/* Safetensors directories: one layer per safetensors file, and the directory's other files
 * either one layer each (config v0.2, path in MT_CNCF_FILEPATH) or in one tar (v0.1). */
#define MT_DMR_SAFETENSORS "application/vnd.docker.ai.safetensors"
#define MT_DMR_MODEL_FILE "application/vnd.docker.ai.model.file"
#define MT_DMR_CONFIG_TAR "application/vnd.docker.ai.vllm.config.tar"
/* CNCF ModelPack (github modelpack/model-spec, docs/spec.md): the artifact type, its config
 * (descriptor, config {architecture, format, precision, ...}, modelfs) and a weight file as
 * it is (raw) or in an uncompressed tar. */
#define MT_CNCF_MANIFEST "application/vnd.cncf.model.manifest.v1+json"
#define MT_CNCF_CONFIG "application/vnd.cncf.model.config.v1+json"
#define MT_CNCF_WEIGHT_RAW "application/vnd.cncf.model.weight.v1.raw"
#define MT_CNCF_WEIGHT_TAR "application/vnd.cncf.model.weight.v1.tar"
#define MT_CNCF_WEIGHT_CONFIG_RAW "application/vnd.cncf.model.weight.config.v1.raw"
#define MT_CNCF_WEIGHT_CONFIG_TAR "application/vnd.cncf.model.weight.config.v1.tar"
/* Docker Model Runner's older ModelPack layers, outside the spec but still read by it. */
#define MT_CNCF_WEIGHT_GGUF "application/vnd.cncf.model.weight.v1.gguf"
#define MT_CNCF_WEIGHT_SAFETENSORS "application/vnd.cncf.model.weight.v1.safetensors"
#define MT_CNCF_FILEPATH "org.cncf.model.filepath"
/* The manifest as a registry sent it, when the store keeps a model in another form (an
 * ollama whole-GGUF model split into tensor blobs): push sends these bytes back unchanged. */
#define MT_SOURCE_MANIFEST "application/vnd.mstore.source.manifest"
/* A received tar weight layer without the file's bytes (registry/tar.c), named by the tar's
 * digest: the frame that the exported file goes back into when push sends the tar again. */
#define MT_TAR_FRAME "application/vnd.mstore.tar.frame"
/* A received safetensors file's header (registry/hfdir.c), named by the file's digest: with the
 * tensor blobs it names, the file again, byte for byte. */
#define MT_ST_FRAME "application/vnd.mstore.safetensors.frame"
/* A received GGUF shard's header, up to its data section, named by the shard's digest: with the
 * model's tensor blobs, the shard again (export_gguf_shard). */
#define MT_GGUF_SHARD "application/vnd.mstore.gguf.shard.header"

#define MANIFEST_MAX_BYTES (64u << 20)   /* refuse larger manifests before parsing */
#define MANIFEST_MAX_LAYERS 1000000

typedef struct manifest_layer {
    char *media_type;
    ms_digest digest;   /* "sha256:<64 hex>" */
    uint64_t size;
    char *name;        /* may be NULL */
    char *filepath;    /* the org.cncf.model.filepath annotation (ModelPack, DMR), or NULL */
} manifest_layer;

typedef struct manifest {
    int schema_version;
    char *media_type;
    char *artifact_type;   /* OCI 1.1 artifactType, or NULL: serialized only */
    manifest_layer config;
    size_t n_layers;
    manifest_layer *layers;
    /* The bytes manifest_parse read (a NUL-terminated copy), or NULL for a manifest built in
     * memory. Kept because their sha256 is the model version: a pull stores a registry's bytes
     * as received, never a re-serialization of them. manifest_config_set and manifest_layer_add
     * drop them (they would describe another manifest); code that writes the fields directly
     * must do the same. Read them through manifest_bytes. */
    char *parsed;
    size_t parsed_len;
} manifest;

/* Parse and validate (schemaVersion 2, media types present, digests well formed, sizes >= 0,
 * at most MANIFEST_MAX_LAYERS). `what` names the source in messages. MS_EINVALID, MS_ENOMEM. */
int manifest_parse(manifest **out, const char *buf, size_t len, const char *what);
/* Serialize as compact JSON with keys in a fixed order (the same manifest always gives the same
 * bytes). *out is malloc'd. */
int manifest_serialize(char **out, size_t *len_out, const manifest *m);
/* The bytes of `m`: those it was parsed from while it is unchanged since, else
 * manifest_serialize's. *out malloc'd. MS_ENOMEM. */
int manifest_bytes(char **out, size_t *len_out, const manifest *m);
/* An empty OCI manifest (schemaVersion 2, MT_OCI_MANIFEST, no config yet). */
int manifest_new(manifest **out);
int manifest_config_set(manifest *m, const char *media_type, const char *digest, uint64_t size);
/* `name` may be NULL. */
int manifest_layer_add(manifest *m, const char *media_type, const char *digest, uint64_t size, const char *name);
/* The first layer whose media type and name equal the given ones; a NULL argument matches any
 * value (a non-NULL name never matches a layer without one). Borrowed from m. */
const manifest_layer *manifest_layer_find(const manifest *m, const char *media_type, const char *name);
void manifest_free(manifest *m);

#define NAME_HOST_MAX 256
#define NAME_PART_MAX 129
typedef struct model_name {
    char host[NAME_HOST_MAX];        /* "" when none was given */
    char namespace_[NAME_PART_MAX];
    char model[NAME_PART_MAX];
    char tag[NAME_PART_MAX];
    char digest[72]; /* "sha256:<64 hex>" of a reference by digest, else "" */
} model_name;

/* MS_EINVALID naming what is wrong ("name '../x': model: ..."). out->digest is set for a
 * reference by digest (and out->tag then defaults to "sha256-<hex>", not "latest"). */
int name_parse(model_name *out, const char *s);
/* "host/namespace/model:tag" with every part (host omitted when empty). */
void name_format(char *buf, size_t len, const model_name *n);
/* The short form users type: omits namespace "library" (when no host) and never omits the tag. */
void name_display(char *buf, size_t len, const model_name *n);

#endif
