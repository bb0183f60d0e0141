/* registry_int.h: helpers shared by the files of src/registry only (tests may use them too). */
#ifndef MSTORE_REGISTRY_INT_H
#define MSTORE_REGISTRY_INT_H

#include <curl/curl.h>
#include <pthread.h>
#include <stdint.h>

#include "registry/registry.h"

#define REG_ACCEPT_MANIFEST "Accept: " MT_OCI_MANIFEST ", " MT_DOCKER_MANIFEST
#define REG_MAX_ATTEMPTS 10
/* The throughput floor: a transfer slower than REG_MIN_RATE bytes/s for REG_STALL_SECONDS is cut
 * and retried ($MSTORE_REGISTRY_MIN_RATE, $MSTORE_REGISTRY_STALL_SECONDS override them). An
 * attempt that moved less than REG_PROGRESS_BYTES does not reset the retry count. */
#define REG_MIN_RATE 1024L
#define REG_STALL_SECONDS 30L
#define REG_PROGRESS_BYTES ((uint64_t)1 << 20)
/* getenv(var) as a number in [min, max]; `dflt` when unset or anything else. */
long reg_env_long(const char *var, long dflt, long min, long max);

/* One registry + repository. Shared by the download threads; the token is guarded by `mu`. */
typedef struct reg_client {
    char base[NAME_HOST_MAX + 16];   /* "https://host" */
    char host[NAME_HOST_MAX];
    char repo[2 * NAME_PART_MAX];     /* "namespace/model" */
    char *basic;                      /* "user:password" or NULL; never printed */
    char *token;                      /* bearer token or NULL; never printed */
    char scope_actions[16];           /* "pull" or "pull,push" */
    int use_basic;                    /* the registry asked for Basic: send it on every request */
    const int *cancel;                /* registry_opts.cancel */
    pthread_mutex_t mu;
} reg_client;

/* What one exchange produced. Headers of the final response only (after redirects). */
typedef struct reg_resp {
    long status;
    char *body;            /* captured body when no sink, NUL-terminated; malloc'd */
    size_t body_len, body_max;
    char digest[80];       /* Docker-Content-Digest */
    char location[4096];
    char www_auth[2048];
    char content_range[128];
    /* Sink for a 2xx body (downloads): returns 0 to go on, 1 when it has all it wants (the
     * transfer stops and counts as a success), <0 on error (the transfer fails with that code). */
    int (*sink)(void *ctx, const void *buf, size_t len);
    void *sink_ctx;
    int sink_rc;
    int overflow;          /* the body outgrew body_max */
} reg_resp;

/* Request body; NULL data for none. */
typedef struct reg_body {
    const void *data;
    size_t len, off;
} reg_body;

/* MS_EMISMATCH for a stored blob whose bytes (len of them) hash to `got`, not to its name:
 * what push says before it would publish bit rot (layout.c, push.c). */
int reg_blob_damaged(const char *digest, uint64_t len, const char *got);

int reg_client_init(reg_client *c, const char *home, const char *host, const model_name *name,
                    const registry_opts *o, int push);
void reg_client_fini(reg_client *c);
CURL *reg_easy_new(void);

/* One request: method, URL (absolute, or a path starting with '/' under c->base), extra headers
 * (NULL-terminated, may be NULL), body. Handles 401 by the Bearer or Basic flow and retries once.
 * Returns 0 with r->status set for any HTTP answer; MS_EIO for a transport failure (the message
 * names the URL and curl's error), with *transient_out = 1 when it is worth retrying. */
int reg_request(reg_client *c, CURL *h, const char *method, const char *url, const char *const *headers,
                const reg_body *body, reg_resp *r, int *transient_out);
/* reg_request with retries and backoff on transport errors, 5xx and 429 (non-streaming bodies). */
int reg_request_retry(reg_client *c, CURL *h, const char *method, const char *url,
                      const char *const *headers, const reg_body *body, reg_resp *r);
void reg_resp_reset(reg_resp *r);   /* frees the body, keeps the sink */
/* Sleep before attempt `n` (1-based): 200 ms doubling, at most 5 s. */
void reg_backoff(int n);
/* "<what>: HTTP 404: MANIFEST_UNKNOWN: <message>" as the message, code and message from the
 * body only when it is a registry's error JSON, escaped and cut; returns `code`. */
int reg_http_err(int code, const char *what, const reg_resp *r);

/* Parse a WWW-Authenticate value: scheme ("Bearer"/"Basic") and the realm, service and scope
 * parameters (absent ones ""). MS_EINVALID for an unparsable value. */
typedef struct reg_challenge {
    char scheme[16];
    char realm[1024], service[256], scope[512];
} reg_challenge;
int reg_challenge_parse(reg_challenge *out, const char *value);

/* The response parsers reg_request runs, exposed for the tests and tests/fuzz/fuzz_registry.c.
 * reg_resp_header: curl's header callback, one header line (no NUL needed) into r's fields;
 * returns size * n. reg_token_parse: a token endpoint's JSON body, "token" else "access_token"
 * (a non-empty string) into *out, malloc'd; MS_EINVALID naming `realm`. reg_url_origin:
 * "scheme://host:port" of `url`, lower case, the default port spelled out; "" for a URL
 * without a scheme or with userinfo (an origin nothing equals). */
size_t reg_resp_header(char *buf, size_t size, size_t n, void *ctx);
int reg_token_parse(char **out, const char *body, size_t len, const char *realm);
void reg_url_origin(char *out, size_t len, const char *url);

/* Credentials for `host`, bound to the host they were given for: opts_auth (the caller's, for
 * this host); else $MSTORE_REGISTRY_AUTH when `host` is the registry $MSTORE_REGISTRY names
 * (unset: registry.ollama.ai), never another; else the entry for `host` in
 * <home>/credentials.json (registry.h has its shape). *basic_out malloc'd "user:password",
 * *token_out a malloc'd Bearer token sent with every request to the host, either NULL.
 * MS_EINVALID for a malformed file or entry (the message names the file and the host, never
 * the secret). */
int reg_credentials_find(char **basic_out, char **token_out, const char *home, const char *host, const char *opts_auth);

/* Downloads (download.c). Each missing blob is fetched into ONE partial blob (blob.h, "Partial
 * blobs": <home>/tmp/pull/<hex>.partial and its .ranges sidecar, locked while in use, resumed by
 * any later pull), in parts of REG_PART_BYTES fetched with Range on several threads and written
 * at their offsets; the sha256 runs over the bytes in order as they arrive (bytes that land
 * ahead of the hash are read back from the page cache when it gets there), and the complete
 * file is adopted into blobs/ through the pull's transaction (store_txn_blob_adopt: a rename,
 * no copy). The part size is 64 MiB, larger for blobs over REG_MAX_PARTS of those: at most
 * REG_MAX_PARTS parts, so the sidecar stays under 8 KiB whatever the manifest claims. A part's
 * progress reaches the sidecar every 256 KB at most. A digest mismatch abandons both files; I/O
 * errors and kills keep them for a rerun. store_gc removes those older than 7 days that no pull
 * has locked. */
#define REG_PART_BYTES ((uint64_t)64 << 20)
#define REG_MAX_PARTS ((uint64_t)1024)   /* per blob; larger blobs get larger parts */
#define REG_BLOB_MAX ((uint64_t)1 << 48)
/* Fetch the blobs of `m` whose ok[] entry (as reg_manifest_intact gives it) is 0. */
int reg_blobs_fetch(reg_client *c, store_txn *t, const manifest *m, const unsigned char *ok, const registry_opts *o,
                    const char *label);
/* Which blobs of `m` are stored intact (*ok_out[0] its config, [i + 1] its layer i), re-hashed
 * on a thread a core (blob_intact_each): 1 intact, 0 missing or damaged, 2 not checked (`skip`,
 * which may be NULL and is asked about layers only, said so, or an earlier checked entry has the
 * same digest). *ok_out malloc'd. */
#define REG_INTACT_SKIPPED 2
int reg_manifest_intact(unsigned char **ok_out, store *s, const manifest *m,
                        int (*skip)(const manifest_layer *l));

/* Sources: where a pull gets a model from (git's transport_vtable, which puts a bundle file
 * and the network behind one table). A registry, ollama's included (the same distribution API;
 * what differs is the model it sends, which reg_pull derives whatever the source), is pull.c's
 * source; an OCI layout directory is layout.c's. reg_pull runs the steps once over either: get
 * the manifest, parse it and check it is an image manifest, open a store_txn, find the blobs
 * not stored intact, have the source fetch them, derive the store's form (ollama.c), queue the
 * registry_blobs rows (a source with a host), commit manifest and name, release a split GGUF.
 * A source embeds reg_source as its first member, as libgit2's transports embed git_transport;
 * the function that opens one (registry_pull, registry_layout_pull) closes it. */
typedef struct reg_source reg_source;
typedef struct reg_source_ops {
    /* The bytes of the manifest `name` denotes (name->digest, else name->tag), exactly as the
     * source holds them, already checked against every digest the source or the name states
     * (a reference by digest, Docker-Content-Digest, an index descriptor): a mismatch is the
     * source's MS_EMISMATCH, in its words. *what_out names the manifest in parse messages;
     * borrowed from the source. MS_ENOTFOUND, MS_EMISMATCH, MS_EIO. */
    int (*manifest_get)(reg_source *src, const model_name *name, char **bytes_out, size_t *len_out,
                        const char **what_out);
    /* Add every blob of `m` whose ok[i] is 0 (i = 0 its config, i + 1 its layer i) to `t`,
     * each verified against its digest and size. One call for the whole set, not one a blob,
     * so that a registry downloads several at once. MS_EMISMATCH, MS_ENOTFOUND, MS_EIO, MS_EINTR. */
    int (*blobs_fetch)(reg_source *src, store_txn *t, const manifest *m, const unsigned char *ok,
                       const registry_opts *o, const char *label);
} reg_source_ops;
struct reg_source {
    const reg_source_ops *ops;
    const char *where;        /* for messages: "pull tiny:latest from <where>" */
    const char *host, *repo;  /* the registry repository, for registry_blobs rows; NULL: none */
};
/* Pull `name` from `src` into the store (registry.h: registry_pull's contract, whatever the
 * source). Does not close `src`. */
int reg_pull(store *s, reg_source *src, const model_name *name, const registry_opts *o, ms_digest digest_out);

/* The Docker v2 form of a manifest: media types rewritten, layers kept. *out malloc'd. */
int reg_manifest_docker(char **out, size_t *len_out, const manifest *m);
/* The bytes to push for stored model `sm` and their parse: the manifest as received for a model
 * kept in another form (reg_source_swap) unless o->store_form, and in the Docker v2 form when
 * o->docker_format. Both malloc'd. */
int reg_manifest_load(char **bytes_out, size_t *len_out, manifest **m_out, store_model *sm, const registry_opts *o);

/* ollama-style models (ollama.c). reg_ollama_derive: *out the store's form of received
 * manifest `m` (as manifest_parse left it, its bytes kept), or NULL when `m` is usable as it
 * is; blobs it needs are added to the pull's transaction `t` (the GGUF split, the received
 * manifest's bytes), for its commit. MS_EMISMATCH (the GGUF split hashed to another digest),
 * MS_EUNSUPPORTED, MS_EINVALID. */
int reg_ollama_derive(manifest **out, store_txn *t, const manifest *m, const registry_opts *o,
                      registry_pull_report *rep);
/* *fetch_out: `m` without its whole-GGUF layer when an earlier pull split the same file and its
 * blobs are all stored (the download is then skipped and the split reused), else NULL. */
int reg_ollama_plan(manifest **fetch_out, store *s, const manifest *m);
/* Remove the whole-GGUF blob of received manifest `m` when no stored manifest references it. */
void reg_ollama_release(store *s, const manifest *m);
/* When stored manifest *m has a MT_SOURCE_MANIFEST layer, replace *bytes, *len, *m by the
 * received manifest (read through the stored model's handle). 0 when there is none. */
int reg_source_swap(char **bytes, size_t *len, manifest **m, store_model *model);
/* Rebuild the whole-GGUF blob of received manifest `m` from model `name` (export_gguf) when it
 * is not stored; *t_out is then the transaction that adopted it (NULL when nothing was made),
 * which the caller holds while it uploads the blob, so that gc leaves it, and aborts after
 * (reg_ollama_release first). MS_EMISMATCH when the export is not that file. */
int reg_source_materialize(store_txn **t_out, store *s, const model_name *name, const manifest *m);
/* Docker Model Runner's form of model `name`, open as `sm` (dmr.c): *bytes_out / *len_out / *m_out the
 * manifest, its config and the GGUF (written by export) stored as blobs, *t_out the transaction
 * that holds them against gc while they go up; the caller releases the GGUF blob
 * (reg_ollama_release) and aborts *t_out after. */
int reg_dmr_build(char **bytes_out, size_t *len_out, manifest **m_out, store_txn **t_out, store *s,
                  store_model *sm, const model_name *name, int modelpack);

/* tar.c: the registry's one tar codec. reg_tar_scan checks archive `data` (n bytes; `what` names
 * it in messages) header by header and calls fn for each regular file: its path (relative,
 * inside the archive, "./" dropped), the offset of its bytes in `data` and their size; fn's
 * negative return stops the scan with it. Links, devices, paths outside the archive, bad
 * checksums and sizes past the end are MS_EINVALID naming the entry; so is an archive without a
 * file. REG_TAR_FRAME: `data` is a frame, the archive with every regular file's bytes cut out. */
#define REG_TAR_FRAME 1
typedef int (*reg_tar_file_fn)(void *ctx, const char *path, uint64_t off, uint64_t size);
int reg_tar_scan(const uint8_t *data, size_t n, const char *what, int flags, reg_tar_file_fn fn, void *ctx);
/* mstore's own archive of one file `entry` of `size` bytes: head[512] its header, tail[*tail_len]
 * (at most 1535 bytes) the padding and the trailer; mode 0644, owners and times zero. */
int reg_tar_frame_make(uint8_t *head, uint8_t *tail, size_t *tail_len, const char *entry, uint64_t size);
/* Write head, the `size` bytes of file `src`, then tail, to `dst`: an archive from its frame. */
int reg_tar_wrap(const char *dst, const char *src, uint64_t size, const uint8_t *head, size_t head_len,
                 const uint8_t *tail, size_t tail_len);

/* hfdir.c: safetensors artifacts (DMR's, ModelPack's with format safetensors: modelpack_st).
 * reg_hfdir_weight: 1 when `l` is one of the directory's safetensors files. reg_hfdir_import:
 * the directory put back together under tmp/ from the stored layers and imported into `t`
 * (import_hf_manifest), *out its manifest, each safetensors file kept as its header (when that
 * and the tensor blobs give it back) or whole. reg_hfdir_rebuild: the safetensors files of
 * received manifest `m` that are not stored, written again from model `name`'s headers and
 * tensor blobs into *t_out (NULL when none was missing), as reg_source_materialize does for a
 * GGUF; MS_EUNSUPPORTED when one was kept neither way. */
int reg_hfdir_weight(const manifest_layer *l, int modelpack_st);
/* 1 when `m` has the directory's config.json, as a layer or in a config archive. */
int reg_hfdir_has_config(const manifest *m);
int reg_hfdir_import(manifest **out, store_txn *t, const manifest *m, int modelpack_st, const registry_opts *o);
int reg_hfdir_rebuild(store_txn **t_out, store *s, const model_name *name, const manifest *m, int modelpack_st);

#endif
