/* server.h: `mstore serve`, an HTTP server over a store; the whole surface of src/server.
 *
 * Three APIs on one port (libmicrohttpd, one thread per connection):
 *   /api/...  ollama's: generate, chat (NDJSON streams or one object), tags, show, ps, version,
 *            copy, delete, pull, push, blobs. Errors: {"error": "..."}.
 *   /v1/...   OpenAI's: chat/completions (server-sent events or one object), completions, models.
 *            Errors: {"error": {"message", "type", "param", "code"}}.
 *   /v2/...   the store as a read-only OCI distribution registry: manifests, blobs (Range),
 *            tags/list, _catalog. Writes: 405 with the distribution error shape.
 * Models stay loaded between requests (keep_alive, 5 minutes by default; 0 unloads when the
 * request ends), one load shared by every client; requests to one model run one at a time in
 * the order they took its lock. A client that goes away mid-stream stops its generation at the
 * next token. With an API key every request must carry "Authorization: Bearer KEY" (/v2 too).
 * Browser pages: a request with an Origin outside the allow list (MSTORE_ORIGINS and
 * localhost's) is refused 403, as is, when listening on loopback, one whose Host does not name
 * this machine (DNS rebinding); allowed pages get CORS headers and their preflights answered.
 * Request bodies are bounded (SERVER_MAX_BODY) before anything is allocated for them; one
 * declared too large is answered 413 before it is read.
 * The process must ignore SIGPIPE: a stream's writer learns of a gone client from EPIPE. */
#ifndef MSTORE_SERVER_H
#define MSTORE_SERVER_H

#include "runtime/runtime.h"

#define SERVER_DEFAULT_LISTEN "127.0.0.1:11434"
#define SERVER_MAX_BODY       (16u << 20) /* JSON request bodies */
#define SERVER_MAX_BLOB_BODY  (1ull << 40) /* POST /api/blobs/:digest, streamed to disk */
#define SERVER_VERSION        "0.6.0" /* what /api/version says: the ollama API level spoken */

#define SERVER_DEFAULT_MAX_LOADED 3 /* models loaded at once, as ollama's default on a CPU */
#define SERVER_DEFAULT_PARALLEL   4 /* requests per model at once, as ollama's default when memory allows */

typedef struct server_opts {
    const char *home; /* the store */
    const char *listen; /* "HOST:PORT" ("[::1]:PORT" for IPv6); NULL: SERVER_DEFAULT_LISTEN */
    const char *api_key; /* NULL or "": no token required */
    const char *origins; /* MSTORE_ORIGINS: web pages allowed besides localhost's (comma-separated) */
    size_t max_body; /* 0: SERVER_MAX_BODY */
    int keep_alive_s; /* default keep_alive; < 0: forever */
    int max_clients; /* connections at once before the idlest gives way; 0: 64 */
    int max_loaded; /* models loaded at once (MSTORE_MAX_LOADED_MODELS); 0: SERVER_DEFAULT_MAX_LOADED */
    runtime_opts ro; /* threads, ctx (a request's num_ctx overrides), kv_f16 */
    /* requests one loaded model runs at once (MSTORE_NUM_PARALLEL), decoded together; 0:
     * SERVER_DEFAULT_PARALLEL, or fewer when their KV caches would not fit in memory */
    int parallel;
    /* 1: /api/pull and /api/push refuse (403) a name whose host the client chose, other than
     * the registry names without a host go to ($MSTORE_REGISTRY): the server then reaches no
     * host a remote client names. 0 (default, as ollama): any host. */
    int no_remote_pull;
} server_opts;

void server_opts_init(server_opts *o); /* defaults: keep_alive 300 s */

typedef struct server server;
/* Bind and start serving in background threads. A port in use: MS_EBUSY "127.0.0.1:11434 is
 * already in use (another mstore serve or ollama?): stop it, or pick another port with --listen
 * or MSTORE_HOST". MS_EINVALID (bad address), MS_EIO. */
int server_start(server **out, const server_opts *o);
/* "127.0.0.1:11434": the address really bound (the port chosen when PORT was 0). Borrowed. */
const char *server_address(const server *srv);
/* Stop accepting, wait for requests in progress, unload every model. NULL is fine. */
void server_stop(server *srv);

#endif
