/* server_int.h: what the files of src/server share; nothing outside src/server includes it. */
#ifndef MSTORE_SERVER_INT_H
#define MSTORE_SERVER_INT_H

#include <jansson.h>
#include <microhttpd.h>
#include <pthread.h>
#include <time.h>

#include "blob/blob.h"
#include "modelfile/modelfile.h"
#include "server/server.h"
#include "session/session.h"
#include "store/store.h"

typedef struct loaded loaded;
typedef struct srv_conn srv_conn;

/* How long the server waits on a client (http.c says why each is what it is). */
#define SRV_IDLE_S          30 /* silence mid-request, or between keep-alive requests */
#define SRV_STREAM_IDLE_S   900 /* a streamed answer's silence: its turn for the model, a long prefill */
#define SRV_BODY_S          120 /* a JSON body, from its headers to its end (blob uploads: unbounded) */
#define SRV_CONN_HEADROOM   16 /* connections past max_clients (libmicrohttpd's hard limit) */
#define SRV_EVICT_GRACE_S   2 /* a connection this young keeps its slot while headroom is left */
#define SRV_LINGER_S        30 /* draining a body after an early answer (413, 401, 403) */
#define SRV_LINGER_QUIET_MS 2000
#define SRV_LINGER_BYTES    (64u << 20)

/* ---- gate.c: which pages (Origin) and Host names are answered; string checks, no state */
typedef struct srv_origins srv_origins;
/* The allow list: `extra` (MSTORE_ORIGINS: comma-separated, at most one '*' an entry, standing
 * for any characters) and ollama's defaults: http(s)://localhost, 127.0.0.1 and 0.0.0.0 with or
 * without a port, app://, file://, tauri://, vscode-webview://, vscode-file:// and browser
 * extensions. MS_EINVALID (two '*' in an entry), MS_ENOMEM. */
int srv_origins_new(srv_origins **out, const char *extra);
void srv_origins_free(srv_origins *o);
/* 1 when a request whose Origin header is `origin` may be served: no Origin (NULL: not a
 * browser, or a same-origin GET), or one the list matches; else 0. */
int srv_origin_allowed(const srv_origins *o, const char *origin);
/* 1 when the Host header names this machine as a browser on it would: none, localhost and
 * *.localhost, *.local, *.internal, `own_name` (gethostname; NULL is fine), an IP literal that is
 * loopback, private, unspecified or one of this machine's; else 0 (a name DNS rebinding can
 * point here). */
int srv_host_allowed(const char *host, const char *own_name);

struct server {
    struct MHD_Daemon *d;
    server_opts o;
    char *home, *api_key;
    char addr[300];
    int listen_fd;
    pthread_mutex_t mu; /* guards `models` and each entry's refs / expiry */
    pthread_cond_t cv; /* wakes the reaper: a release, or stop */
    loaded *models;
    pthread_t reaper;
    int reaper_started;
    int stopping; /* set once, by srv_models_cancel; read atomically without `mu` by running work */
    uint64_t n_uses; /* acquisitions so far: the clock of least-recently-used eviction */
    int n_jobs; /* streaming jobs (generations, pulls, pushes) running in their own threads */
    srv_origins *origins; /* MSTORE_ORIGINS and the defaults */
    int check_host; /* listening on loopback: Host must name this machine (srv_host_allowed) */
    char own_name[256]; /* gethostname() */
    /* Every open connection (libmicrohttpd's socket context), so that one that has not sent a
     * whole request can make room for a new one (http.c, make_room). Guarded by conns_mu. */
    pthread_mutex_t conns_mu;
    srv_conn *conns;
    pthread_mutex_t rebuild_mu; /* one /v2 blob rebuilt at a time (oci.c, blob_get) */
};

/* One HTTP request, from its first byte to its response. */
typedef struct req {
    server *srv;
    struct MHD_Connection *c;
    const char *method, *url; /* borrowed from libmicrohttpd for the request's life */
    ms_text body; /* JSON bodies (at most max_body bytes), NUL-terminated */
    int too_big; /* the body passed the limit: discarded, answered 413 */
    int responded; /* a response was queued before the body ended */
    const char *origin; /* an allowed Origin, echoed in Access-Control-Allow-Origin; NULL: none */
    int linger; /* answered at its headers while a body was on its way: drain it before closing */
    srv_conn *conn; /* its connection's slot */
    double t_headers; /* monotonic seconds when its headers were in */
    size_t dropped; /* body bytes dropped past max_body */
    /* POST /api/blobs/:digest streams into bw, a temp file of st opened at the first chunk
     * without the store's lock (an idle client must not hold up rm and gc); txn, a store_txn on
     * st, takes the lock when the body is complete and lands the blob */
    store *st;
    store_txn *txn;
    blob_writer *bw;
    int upload_failed;
    char upload_msg[512];
    uint64_t upload_n;
} req;

/* ---- http.c: responses */
/* Queue resp (taken) with the CORS header the request's Origin earns; sets r->responded. */
enum MHD_Result srv_queue(req *r, unsigned status, struct MHD_Response *resp);
enum MHD_Result srv_respond(req *r, unsigned status, const char *type, const char *body, size_t len);
enum MHD_Result srv_json(req *r, unsigned status, json_t *j); /* takes j */
enum MHD_Result srv_err_ollama(req *r, unsigned status, const char *fmt, ...) MS_PRINTF(3, 4);
enum MHD_Result srv_err_openai(req *r, unsigned status, const char *type, const char *fmt, ...) MS_PRINTF(4, 5);
enum MHD_Result srv_err_oci(req *r, unsigned status, const char *code, const char *fmt, ...) MS_PRINTF(4, 5);
/* Errors of a request, on the house error path: a function returns an MS_E* code with its
 * message (ms_err), and the handler answers it here. srv_status is the one place a code becomes
 * an HTTP status: MS_EINVALID, MS_ETOOBIG, MS_EUNSUPPORTED 400; MS_ENOTFOUND 404; others 500. */
typedef enum srv_api { SRV_OLLAMA, SRV_OPENAI } srv_api;
unsigned srv_status(int code);
/* The error object in the API's shape: {"error": msg}, or OpenAI's {"error": {"message", "type",
 * "param", "code"}} (a missing model says "model_not_found"). */
json_t *srv_err_body(srv_api api, int code, const char *msg);
/* Answer `code` with ms_err_msg(). */
enum MHD_Result srv_fail(req *r, srv_api api, int code);
/* Queue a 200 whose body is what is written to *fd_out (chunked, until it is closed). */
int srv_stream_open(req *r, const char *type, int *fd_out);
/* Write all of s; -1 when the reader (the client) is gone. */
int srv_write_all(int fd, const char *s, size_t n);
/* The request body as JSON (an object). MS_EINVALID: missing, not JSON, not an object. */
int srv_body_json(json_t **out, req *r);
/* RFC 3339 time, UTC, with nanoseconds as ollama writes it. */
void srv_time_rfc3339(char *buf, size_t len, time_t t);
/* A copy of text with invalid UTF-8 bytes replaced by U+FFFD (JSON needs valid UTF-8). */
json_t *srv_json_text(const char *s, size_t len);

/* ---- routes */
enum MHD_Result ollama_route(req *r); /* /api/... */
enum MHD_Result openai_route(req *r); /* /v1/... */
enum MHD_Result oci_route(req *r); /* /v2/... */
/* POST /api/blobs/:digest body chunks (http.c calls it as data arrives). */
void ollama_blob_upload(req *r, const char *data, size_t len);
void ollama_upload_close(req *r);

/* ---- models.c: loaded models */
struct loaded {
    struct loaded *next;
    char name[400]; /* the name last used, canonical "host/namespace/model:tag" (name_format) */
    char shown[400]; /* the same as name_display writes it ("stories:260k"), for /api/ps */
    ms_digest digest; /* manifest digest: the key, one load per manifest */
    store_model *sm; /* the model's handle: owns the mappings m's weights view */
    int n_ctx_asked; /* num_ctx it was loaded for (0: default) */
    /* sized: a request's session is sized for its own num_ctx (ctx_default without one) from the
     * load's pool of KV cache (runtime_seq_set_ctx); 0 for an embedding model, whose one session
     * keeps the context it was loaded with */
    int sized, ctx_default;
    store *s;
    runtime_model *m;
    const tokenizer *t;
    /* One session per sequence of m (n_par: requests that run at once, their tokens decoded in
     * shared passes); a request takes a free one under `run` (srv_model_lock), in arrival order
     * (tickets). S is slot[0]: its template and tokenizer serve renders and counts at any time. */
    session **slot, *S;
    int n_par;
    unsigned char *slot_busy;
    uint64_t *slot_used, n_slot_uses; /* n_slot_uses at each session's last taking */
    uint64_t tickets, serving; /* the next ticket to give, the one whose turn it is */
    pthread_cond_t run_cv;
    uint64_t nbytes; /* weights + KV cache */
    pthread_mutex_t run; /* guards the sessions' taking */
    int refs; /* requests holding or waiting for `run` */
    time_t expires; /* 0: never; unloaded by the reaper after it when refs == 0 */
    int unload_asap;
    uint64_t last_used; /* srv->n_uses at its last acquisition */
};
/* The model a request names: its name parsed, resolved and its handle opened once, when the
 * request is read, so that the 404 and the work that follows read one manifest. srv_model_close
 * releases what srv_model_acquire did not take ({0} and closed ones are fine). */
typedef struct srv_model {
    model_name name;
    store *s;
    store_model *sm;
} srv_model;
/* The model a request names, parsed: MS_EINVALID ("model: required", "model: <why>"). */
int srv_model_name(model_name *out, const char *model);
/* The same, then opened: MS_ENOTFOUND ("model 'x' not found, try pulling it first"). */
int srv_model_open(srv_model *out, server *srv, const char *model);
void srv_model_close(srv_model *m);
/* Find m's model loaded (by manifest digest: names of one manifest share a load), or load it
 * from m's handle (then taken from m), and hold it (it stays loaded until released); its
 * template and tokenizer may be used at once, its session only under srv_model_lock.
 * num_ctx > 0 asks for that context, 0 the default. A generating load sizes each request's
 * session from its pool (n_par sessions of the context it was loaded with), so it serves any
 * context the pool holds; one asked past that, or another context of an embedding load, is
 * reloaded once no one uses it. At the cap of loaded models (server_opts.max_loaded) the least
 * recently used unused one is unloaded first, or the request waits for one to be released. Load
 * errors with their message; MS_EBUSY (503) when memory or descriptors ran out, or the server is
 * stopping. */
int srv_model_acquire(server *srv, srv_model *m, int num_ctx, loaded **out);
/* The context a request asking num_ctx (0: none) runs in on load L: at most the model's length. */
int srv_model_ctx(const loaded *L, int num_ctx);
/* Take one of the model's sessions for a request whose prompt is `text` (NULL: any), sized for
 * ctx tokens (srv_model_ctx's; an embedding load ignores it): waits for the requests before it
 * and for a session to be free, then for the room while busy sessions hold it (idle ones give
 * theirs up, least recently used first); prefers the session whose cache begins with the prompt
 * and has that size. The session is marked active (session_active_set) until released. Fails
 * with runtime_seq_set_ctx's errors other than MS_EBUSY (*out NULL). */
int srv_model_lock(session **out, loaded *L, const char *text, size_t len, int ctx);
/* Let go of the model (and of session S, srv_model_lock's, when not NULL); it stays loaded
 * keep_alive_s seconds (< 0 forever, 0: unload now when no one else waits for it). */
void srv_model_release(server *srv, loaded *L, session *S, int keep_alive_s);
/* Unload m's model (its manifest's load when m is open, else loads last used by its name) when
 * no request uses it (keep_alive 0 with no prompt, a deleted name). */
void srv_model_unload(server *srv, const srv_model *m);
/* `name` now names manifest `digest` (a copy over it): loads it named before are unloaded. */
void srv_model_renamed(server *srv, const model_name *name, const char *digest);
/* What a stored model is for, read from its config blob (runtime_config_from_json) without
 * loading it, as ollama reads a GGUF's <arch>.pooling_type: SRV_CAN_EMBED for an encoder or a
 * decoder that names a mean, CLS or last pooling (Qwen3-Embedding), which then does not
 * generate; SRV_CAN_COMPLETE for another architecture the runtime runs; 0 when the config does
 * not read. */
enum { SRV_CAN_COMPLETE = 1, SRV_CAN_EMBED = 2 };
int srv_model_caps(store_model *sm);
json_t *srv_models_ps(server *srv);
int srv_models_start(server *srv);
/* The server is stopping: generations end at their next token, transfers at their next step
 * (registry_opts.cancel), requests waiting for a model get MS_EBUSY. */
void srv_models_cancel(server *srv);
/* Waits for the streaming jobs (srv_job_spawn) to end, then unloads every model. */
void srv_models_stop(server *srv);
/* Run fn(arg) on a detached thread counted in n_jobs until fn returns. 0, or -1 when no thread
 * could start: arg is still the caller's (freeing it ends its stream). */
int srv_job_spawn(server *srv, void *(*fn)(void *), void *arg);

/* ---- gen.c: one generation, for both APIs */
typedef enum gen_kind { GEN_OLLAMA_GENERATE, GEN_OLLAMA_CHAT, GEN_OPENAI_CHAT, GEN_OPENAI_COMPLETION } gen_kind;

/* OpenAI's tool_choice (ollama's API has only auto). */
typedef enum gen_tool_choice {
    GEN_TOOLS_AUTO = 0,
    GEN_TOOLS_NONE,
    GEN_TOOLS_REQUIRED,
    GEN_TOOLS_NAMED
} gen_tool_choice;
enum { GEN_CALLS_UNDECIDED = 0, GEN_CALLS_CONTENT, GEN_CALLS_CALLS };

typedef struct gen_job {
    server *srv;
    gen_kind kind;
    srv_model ref; /* the model, resolved and opened once when the request is read */
    char model[400]; /* the model as the client named it, echoed back */
    int ctx; /* the context it runs in (srv_model_ctx), once the model is loaded */
    chat_msg *msgs; /* chat kinds: owned role and content strings */
    size_t n_msgs;
    char *prompt, *system; /* generate kinds */
    char *format; /* the request's format ("json" or a schema's text), which mo.format points at */
    /* tools (tools.c): offered to the model, rendered through its template, its calls parsed */
    chat_tool *tools; /* owned strings */
    size_t n_tools;
    gen_tool_choice tool_choice;
    char *tool_named; /* GEN_TOOLS_NAMED: the function */
    chat_tool_syntax syn; /* how the model writes calls (its template's), once loaded */
    int tool_state; /* streaming: GEN_CALLS_UNDECIDED, _CONTENT or _CALLS */
    size_t sent, call_at; /* bytes of out streamed as content; where the calls begin */
    chat_tool_call *calls; /* found in the answer */
    size_t n_calls, content_len;
    int raw;
    /* thinking (think.c): the request's think (CHAT_THINK_*: unset, off, on, an effort level; gen_think_check settles
     * it with the model); think_on: the answer goes through the splitter, its reasoning into
     * `thinking` when not streamed */
    int think, think_on;
    chat_think split;
    ms_text thinking;
    /* harmony (gpt-oss, think.c): the answer always goes through hsplit; its analysis is the
     * reasoning, its calls go into calls, each one's arguments gathered in call_args until the
     * next call or the end */
    int harmony;
    chat_harmony hsplit;
    ms_text call_args;
    model_opts mo; /* sampler, num_predict, num_ctx: read through the option table */
    session_gen g; /* stops; n_predict is mo's */
    char *stops[SESSION_MAX_STOPS];
    int keep_alive_s, stream, include_usage;
    /* logprobs (gen.c): asked for, and the alternatives per token (0..20; completions 0..5) */
    int logprobs, top_logprobs;
    const tokenizer *tk; /* the loaded model's, for the alternatives' text */
    json_t *lp_queue; /* tokens whose text is not all emitted yet: {token, logprob, bytes,
                       * top_logprobs, text_offset} */
    size_t lp_done; /* bytes of the first queued token's text already emitted */
    size_t lp_fed, lp_taken; /* with the thinking splitter: bytes fed to it, and bytes lp_take took */
    int lp_skipped;          /* the reasoning's tokens are dropped (emit_content) */
    size_t lp_chars; /* characters of the answer's tokens so far (completions' text_offset) */
    json_t *lp_all; /* not streamed: every token reported */
    int fd; /* the stream's write end; -1 when not streaming */
    struct MHD_Connection *conn; /* not streaming: the client's connection, watched for its close */
    /* results */
    ms_text out; /* the answer, when not streamed */
    session_done done;
    int code; /* 0, or the failure's MS_E* code (message in err: the stream's thread writes it) */
    char err[1024];
    size_t n_prompt, n_prompt_total, n_gen;
    double t_load, t_prompt, t_gen, t_total;
    char id[48];
    time_t created;
} gen_job;

/* A generation's job with its defaults, and the request's body read as JSON (*body: the caller's
 * to json_decref, also on failure). MS_EINVALID for a bad body, MS_ENOMEM. */
int gen_job_new(gen_job **out, json_t **body, req *r, gen_kind kind);
/* apply.c: POST /apply-template (llama-server's): the prompt a chat would render, not generated */
enum MHD_Result srv_apply_template(req *r);
void gen_job_free(gen_job *j);
/* A stop string (copied; "" is ignored). MS_EINVALID past SESSION_MAX_STOPS or _STOP_LEN. */
int gen_job_stop_add(gen_job *j, const char *s);
/* The option table's "stop" as a request spells it: an array of strings (`one_string`: or a
 * single string, as OpenAI allows); `shown` names it ("options.stop"). MS_EINVALID. */
int gen_job_stops_json(gen_job *j, json_t *v, const char *shown, int one_string);
/* An embedding model (srv_model_caps) asked to generate: MS_EUNSUPPORTED "model 'x' does not
 * support generate" (chat: "chat"), as ollama words it, before anything is loaded. */
int gen_model_check(const gen_job *j, const char *model);
/* Run the job: streamed (a thread writes the stream; the job is its) or answered in this thread.
 * Takes the job in every case. */
enum MHD_Result gen_start(req *r, gen_job *j);
/* The end of a generation request's handler: drops the body, then starts the job (rc 0) or
 * frees it and answers the failure rc in the api's error shape. */
enum MHD_Result gen_respond(req *r, gen_job *j, json_t *body, int rc, srv_api api);

/* Typed fields of a request object (the sampler's are the option table's, modelfile.h): 0 when
 * absent (*set = 0, out unchanged) or valid; MS_EINVALID naming the field ("stream: expected
 * true or false"). */
int srv_field_num(double *out, int *set, json_t *o, const char *key, const char *shown, double lo, double hi,
                  int integer);
int srv_field_str(const char **out, json_t *o, const char *key, const char *shown);
int srv_field_bool(int *out, json_t *o, const char *key, const char *shown);

/* ollama's keep_alive: seconds, or a duration ("5m"); < 0 forever. MS_EINVALID. */
int srv_duration_s(int *out, json_t *v);

/* ---- tools.c: tool calling, between the request, the template and the answer */
/* 1 when the job offers tools to the model (tools given, tool_choice not "none"). */
int gen_tools_on(const gen_job *j);
/* The tool-call syntax of a template's text (NULL or empty: none): MS_EUNSUPPORTED when it
 * renders no tools. /api/show's capabilities ask it too. */
int srv_template_tool_syntax(const char *text, size_t len, chat_tool_syntax *out);
/* The job's syntax (j->syn) from the stored model's template, before anything is loaded or
 * streamed, so that a model without tool support is answered 400 ("m: the model's template
 * ..."). */
int gen_tools_check(gen_job *j);
/* The session's grammar for this request: a forced call (required, named) framed by the
 * syntax, else the request's format, else none. */
int gen_tools_grammar(gen_job *j, session *S);
/* Streaming with tools: the answer so far is in j->out; write what is known to be content,
 * hold back what may begin a call. 0, or -1 when the client is gone. */
int gen_tools_stream(gen_job *j);
/* The answer is whole: find its calls (j->calls, j->content_len); when streaming, write the
 * content held back, then the calls. */
int gen_tools_finish(gen_job *j);
/* The calls as the API writes them in a message: ollama's objects or OpenAI's (arguments as
 * text, ids "call_..."). */
json_t *gen_tool_calls_json(const gen_job *j, int openai);
/* Stream framing (gen.c): one object written in the API's framing (taken); a chunk of content
 * text, or of reasoning (thinking: ollama's thinking, OpenAI's reasoning_content; NULL for
 * completions, which do not think); an OpenAI chat chunk around `delta` (taken), finish_reason
 * NULL for null. */
int gen_send_obj(gen_job *j, json_t *o);
json_t *gen_chunk(const gen_job *j, const char *text, size_t len, int thinking);
json_t *gen_delta(const gen_job *j, json_t *delta, const char *finish_reason);
/* gen_chunk of content with the logprobs of its `len` bytes' tokens when they were asked for
 * (the chunk streams them); NULL when out of memory. */
json_t *gen_content_chunk(gen_job *j, const char *text, size_t len);
/* Not streamed: keep only the logprobs of the tokens that begin in the answer's first `bytes`
 * (its content, where tool calls follow it). */
void gen_logprobs_cut(gen_job *j, size_t bytes);
/* The logprobs in `list` (taken; NULL: none asked) as the job's API writes them: the array of
 * {token, logprob, bytes, top_logprobs} (ollama), {"content": that} (OpenAI chat), or
 * completions' {tokens, token_logprobs, top_logprobs, text_offset}. */
json_t *gen_logprobs_json(const gen_job *j, json_t *list);

/* ---- think.c: thinking, between the request, the template and the answer */
/* 1 when a template's text (NULL or empty: none) makes its model think (chat_template_thinks);
 * /api/show's "thinking" capability. *effort, *harmony (NULL: not wanted): chat_template_effort's,
 * chat_template_harmony's. */
int srv_template_thinks(const char *text, size_t len, int *effort, int *harmony);
/* Before anything is loaded or streamed, with the stored model's template: think true for a
 * model that cannot think is refused as ollama refuses it (MS_EINVALID "\"m\" does not
 * support thinking"); a model that can thinks unless told not to, as ollama's does. An effort
 * level goes to a template that reads reasoning_effort; to one that does not, OpenAI's is
 * plain on and ollama's is refused, as ollama refuses it for a model other than gpt-oss. */
int gen_think_check(gen_job *j);
/* harmony (gpt-oss's template, not raw): the answer is split by chat_harmony whatever think
 * says, and its analysis is the reasoning even with think false, as ollama's harmony parser has
 * it (routes.go keeps the parser's thinking unconditionally). Its calls (to=NAME) are the
 * answer's tool calls, offered tools or not. */
/* The prompt is rendered: when the job splits, a prompt that opened the <think> block starts
 * the answer inside it. */
void gen_think_prompt(gen_job *j, const char *prompt, size_t len);
/* A piece of the answer as the session writes it: through the splitter when the job splits,
 * the reasoning streamed (thinking chunks) or kept (j->thinking), the content to `content`.
 * Non-zero stops the generation. */
int gen_think_emit(gen_job *j, const char *text, size_t len, int (*content)(gen_job *, const char *, size_t));
/* The answer ended: what the splitter held goes out; harmony's last call is whole. Non-zero:
 * stopped, or out of memory. */
int gen_think_end(gen_job *j, int (*content)(gen_job *, const char *, size_t));

/* ---- request.c: a request body's fields, before any model is opened (fuzz_serve runs them) */
/* The model a body names ("model", or the older "name"); NULL when neither is a string. */
const char *srv_body_model(json_t *b);
/* /api/generate (chat 0) and /api/chat (1): the fields refused as not built, "options" through
 * the option table, stop, keep_alive, stream, raw; generate's prompt and system (borrowed from
 * b), chat's messages into j (with room for one more, a model's system prompt). MS_EINVALID
 * or MS_EUNSUPPORTED naming the field. */
int srv_ollama_fields(gen_job *j, json_t *b, int chat, const char **prompt, const char **system);
/* 1 when generate (chat 0) or chat (1) refuses `key` as not built: /api/show's capabilities
 * appear when their field is accepted. */
int srv_unbuilt(int chat, const char *key);
/* /v1/chat/completions (chat 1) and /v1/completions (0): messages or prompt, the OpenAI fields
 * through the option table, stop, stream, stream_options; *model borrowed from b. */
int srv_openai_fields(gen_job *j, json_t *b, int chat, const char **model);
/* Free what the two readers above put into j (messages, stops, prompt, system). */
void srv_request_fields_free(gen_job *j);

/* The embedding endpoints' requests (embed.c answers them through session_embed). */
typedef enum embed_kind {
    EMBED_OLLAMA = 0, /* /api/embed: input (a string or strings), truncate, dimensions, keep_alive, options */
    EMBED_OLLAMA_OLD, /* /api/embeddings: prompt (one string), keep_alive, options */
    EMBED_OPENAI, /* /v1/embeddings: input (a string, strings, token ids, arrays of them), encoding_format,
                   * dimensions, user */
} embed_kind;
typedef struct embed_req {
    embed_kind kind;
    session_embed_input *in; /* texts borrowed from the body, ids from `ids` */
    size_t n;
    int32_t *ids; /* every token array's ids, one after another (owned) */
    int truncate; /* default 1, as ollama */
    int dimensions; /* 0: the model's */
    int base64; /* OpenAI's encoding_format "base64" */
    int keep_alive_s;
    model_opts mo; /* ollama's options through the option table (num_ctx is the one used) */
} embed_req;
/* Read an embedding request's body (which must outlive e: texts are borrowed from it); *model
 * borrowed from b. Sizes are bounded before anything is allocated (SESSION_EMBED_MAX_*).
 * keep_alive_s starts from `keep_alive_s`. MS_EINVALID naming the field, MS_ENOMEM. */
int srv_embed_fields(embed_req *e, json_t *b, embed_kind kind, int keep_alive_s, const char **model);
void srv_embed_fields_free(embed_req *e);
/* embed.c: POST /api/embed, /api/embeddings and /v1/embeddings answered */
enum MHD_Result embed_handle(req *r, embed_kind kind);

#endif
