/* registry.h: pull and push models through OCI registries (the distribution API over HTTP) and
 * through OCI image layout directories; the whole surface of src/registry.
 *
 * Pull: GET /v2/<namespace>/<model>/manifests/<tag> accepting both the OCI and the Docker v2
 * manifest types; the bytes are kept exactly as received (their sha256 is the model version and
 * must equal Docker-Content-Digest when the registry sends it). Each missing blob is fetched in
 * parts (HTTP Range), several at once, into one file under <home>/tmp/pull/, hashed as it
 * arrives, and adopted into blobs/ when it hashes to the manifest's digest (registry_int.h has
 * the files and their locks), all inside one store_txn. Then the manifest, the name and the
 * registry_blobs rows (what this repository holds, for a push's mounts) are committed in one
 * transaction (store_txn_commit).
 *   1. A blob appears under blobs/ only when its sha256 and size match the manifest.
 *   2. The store gains the name only when every blob is present: a failed pull adds no name.
 *   3. Resumable downloads (blob.h, blob_partial_*) live in <home>/tmp/pull/<hex>.partial (+ <hex>.ranges, the parts
 *      done, for blobs of several parts): the names derive from the digest only, never from a
 *      pid, so a rerun (another process) continues from the bytes already there. A pull holds
 *      a flock on the files it writes, so two pulls of one blob never write one file at once:
 *      the second waits and then finds the blob stored. blob_tmp_clean leaves this folder
 *      alone; store_gc removes files in it older than 7 days that no pull holds locked.
 *
 * Push: HEAD each blob, mount it from another repository of the same registry when this store
 * has seen it there, else upload it (monolithic PUT, or chunked PATCH for large blobs), then PUT
 * the manifest. The default pushes the stored manifest bytes as they are (OCI), or for a model
 * pulled in another form (ollama, Docker Model Runner, CNCF ModelPack: ollama.c) the manifest as
 * it was received, its whole-file layers written again from the store (export, the kept tar,
 * GGUF-shard and safetensors headers: tar.c, hfdir.c); store_form pushes the store's own
 * manifest instead. docker format rewrites the media types into the Docker v2 form that
 * ollama-style registries expect; dmr and modelpack build those forms (dmr.c).
 *
 * Auth: Bearer token flow (WWW-Authenticate realm/service/scope) and Basic. Credentials are bound
 * to one registry host each, because a name's host is whoever typed the name's choice (a client
 * of `mstore serve` too): opts->auth (for the host being pulled), else $MSTORE_REGISTRY_AUTH
 * ("user:password") for the host $MSTORE_REGISTRY names only (unset: registry.ollama.ai), else
 * <home>/credentials.json, keyed by host ("host:port" as in names), flat or under "auths" as
 * Docker's config.json has it:
 *   {"reg.example:5000": "user:password",
 *    "other.example": {"username": "u", "password": "p"},
 *    "docker.example": {"auth": "<base64 of user:password>"},
 *    "127.0.0.1:11434": {"token": "<bearer token, sent with every request to that host>"}}
 * Credentials and tokens never appear in messages, nor go to another origin (http.c). */
#ifndef MSTORE_REGISTRY_H
#define MSTORE_REGISTRY_H

#include "manifest/manifest.h"
#include "store/store.h"
#include "util/util.h"

/* What a pull did, for the CLI to tell (registry_opts.report; may be NULL). */
typedef struct registry_pull_report {
    ms_digest version;             /* the manifest digest as the registry sent it */
    size_t blobs_downloaded;      /* blobs that were not stored yet, and their bytes */
    uint64_t bytes_downloaded;
    int split;                    /* 1: a whole-GGUF layer was split into tensor blobs */
    int split_reused;             /* 1: ... by an earlier pull of the same file: not downloaded again */
    size_t tensor_blobs, tensor_blobs_shared;   /* of the stored model; shared: already in the store */
    uint64_t tensor_bytes_new;
} registry_pull_report;

typedef struct registry_opts {
    int insecure;        /* plain http:// (loopback tests); default https:// */
    int parallel;        /* downloads at once; default 4, at most 64 */
    int quiet;           /* no progress display */
    int docker_format;   /* push: write the Docker v2 manifest form */
    /* push: the store's own manifest even for a model received in another form (an ollama, DMR
     * or ModelPack artifact, whose manifest as received is pushed by default) */
    int store_form;
    int modelpack_format;   /* push: write the CNCF ModelPack form (dmr.c): the GGUF in a tar layer */
    int dmr_format;      /* push: write Docker Model Runner's form (dmr.c): config v0.1, the GGUF by export */
    const char *auth;    /* "user:password" or NULL (then the environment / credentials file) */
    /* pull: called from the pulling thread about every 100 ms while blobs download, and once
     * when they are all in, with the bytes of missing blobs received and their total (the
     * server streams it as ollama's progress objects). NULL: none. */
    void (*progress)(void *ctx, uint64_t done, uint64_t total);
    void *progress_ctx;
    registry_pull_report *report;   /* pull: filled when not NULL */
    /* Not NULL: once *cancel is non-zero (read atomically), the transfer stops within about a
     * second, even a stalled one, and the call returns MS_EINTR ("cancelled"). What a pull had
     * received stays in tmp/ for the next pull to resume; nothing half-written is adopted.
     * `mstore serve` sets it when it stops. */
    const int *cancel;
} registry_opts;

void registry_opts_init(registry_opts *o);

/* The registry host for `name`: its own host, else $MSTORE_REGISTRY, else ollama's public
 * registry (https, anonymous Bearer tokens, as ollama pulls). MS_EINVALID for a host with
 * characters a URL host cannot have. */
#define REGISTRY_DEFAULT_HOST "registry.ollama.ai"
int registry_host(char host_out[NAME_HOST_MAX], const model_name *name);

/* Pull `name` from its registry into the store, under `name` as given (a reference by digest,
 * name->digest, fetches the manifest by that digest and refuses bytes that hash to another;
 * it is stored under name->tag, which name_parse made "sha256-<hex>" when none was given). A manifest the runtime
 * cannot use as received (ollama's whole-GGUF layer, a Docker config) is stored in the store's
 * own form, derived at pull time (ollama.c); the received bytes are kept beside it and push
 * sends them back unchanged. digest_out: the digest of the manifest as received (the version).
 * Returns 0, MS_ENOTFOUND
 * (no such manifest), MS_EMISMATCH (a blob or the manifest did not hash to its digest; the
 * message names it), MS_EIO (network, disk), MS_EINVALID (bad manifest, no host). */
int registry_pull(store *s, const model_name *name, const registry_opts *o, ms_digest digest_out);

/* Push the stored model `name` to `dest` (NULL: to `name`). digest_out gets the digest of the
 * manifest bytes pushed (differs from the stored one with docker_format). */
int registry_push(store *s, const model_name *name, const model_name *dest, const registry_opts *o,
                  ms_digest digest_out);

/* For `mstore serve`'s read-only /v2 (source.c). registry_manifest_received: the manifest stored
 * model `model` was received as, when the store keeps it in its own form (an ollama, DMR or
 * ModelPack artifact, reg_source_swap): *bytes_out (malloc'd) its exact bytes, digest_out their
 * digest, and 1; 0 (*bytes_out NULL) when the model is stored as received. MS_EMISMATCH when
 * the kept bytes no longer hash to their digest. registry_source_blob_fd: blob `digest`, which
 * the store does not keep, rebuilt as push rebuilds it (the whole GGUF by export, a ModelPack
 * tar around it) when some stored model's received manifest names it, and opened (*fd_out,
 * *size_out) before gc may see it; it then stays under blobs/, unnamed, until `mstore gc`.
 * MS_ENOTFOUND when no received manifest names it, MS_EUNSUPPORTED when it is not one push
 * can rebuild. Two calls must not rebuild one blob at once: the caller serializes them. */
int registry_manifest_received(char **bytes_out, size_t *len_out, ms_digest digest_out, store_model *model);
int registry_source_blob_fd(int *fd_out, uint64_t *size_out, store *s, const char *digest);

/* OCI image layout directory: oci-layout, index.json (manifest descriptors annotated with
 * org.opencontainers.image.ref.name = tag), blobs/sha256/<hex>. Pull runs a registry pull's
 * steps over the directory (one skeleton, registry_int.h: reg_pull): every blob verified, the
 * store's form derived for an ollama or docker-format model, digest_out the manifest's digest.
 * Push creates the directory if needed and adds or replaces the tag's entry. */
int registry_layout_pull(store *s, const char *dir, const model_name *name, const registry_opts *o,
                         ms_digest digest_out);
int registry_layout_push(store *s, const model_name *name, const char *dir, const registry_opts *o,
                         ms_digest digest_out);

#endif
