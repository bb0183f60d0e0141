/* gen.c: one generation request, the same for ollama's and OpenAI's APIs: the model from the
 * shared pool, the prompt rendered, the answer streamed in the API's framing or returned whole. */
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server/server_int.h"

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int gen_job_new(gen_job **out, json_t **body, req *r, gen_kind kind)
{
    server *srv = r->srv;
    gen_job *j;
    uint64_t rnd = 0;
    int rc;

    *out = NULL;
    if ((rc = srv_body_json(body, r)) < 0)
        return rc;
    if (!(j = calloc(1, sizeof *j)))
        return ms_err(MS_ENOMEM, "out of memory");
    j->srv = srv, j->kind = kind, j->fd = -1, j->think = -1;
    model_opts_defaults(&j->mo);
    if (getrandom(&rnd, sizeof rnd, GRND_NONBLOCK) != (ssize_t)sizeof rnd)
        rnd = (uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)j;
    j->mo.so.seed = rnd & 0x7fffffffffffffffULL;
    j->keep_alive_s = srv->o.keep_alive_s;
    j->created = time(NULL);
    snprintf(j->id, sizeof j->id, "%s-%016llx", kind == GEN_OPENAI_CHAT ? "chatcmpl" : "cmpl",
             (unsigned long long)(rnd >> 1));
    *out = j;
    return 0;
}

void gen_job_free(gen_job *j)
{
    if (!j)
        return;
    srv_request_fields_free(j);
    chat_tool_calls_free(j->calls, j->n_calls);
    json_decref(j->lp_queue);
    json_decref(j->lp_all);
    MS_FREE_ALL(j->out.p, j->thinking.p, j->call_args.p);
    srv_model_close(&j->ref);
    if (j->fd >= 0)
        close(j->fd);
    free(j);
}

/* ---------------------------------------------------------------- framing */

/* ollama's done_reason and OpenAI's finish_reason: "stop" at an end token or a stop string,
 * "length" at num_predict / max_tokens or a full context (both APIs have no other word for it). */
static const char *finish_reason(const gen_job *j)
{
    if (j->n_calls && j->kind == GEN_OPENAI_CHAT)
        return "tool_calls"; /* ollama says "stop" after calls too */
    return j->done == SESSION_DONE_STOP ? "stop" : "length";
}

json_t *gen_delta(const gen_job *j, json_t *delta, const char *finish)
{
    return json_pack("{s:s,s:s,s:I,s:s,s:s,s:[{s:i,s:o,s:o}]}", "id", j->id, "object", "chat.completion.chunk",
                     "created", (json_int_t)j->created, "model", j->model, "system_fingerprint", "fp_mstore", "choices",
                     "index", 0, "delta", delta, "finish_reason", finish ? json_string(finish) : json_null());
}

json_t *gen_chunk(const gen_job *j, const char *text, size_t len, int thinking)
{
    char when[64];
    json_t *t = srv_json_text(text, len), *o;

    switch (j->kind) {
    case GEN_OLLAMA_GENERATE: /* reasoning: an empty response beside it, as ollama streams it */
        srv_time_rfc3339(when, sizeof when, time(NULL));
        o = json_pack("{s:s,s:s,s:o}", "model", j->model, "created_at", when, "response", thinking ? json_string("") : t);
        if (thinking)
            json_object_set_new(o, "thinking", t); /* takes t, or frees it when o is NULL */
        json_object_set_new(o, "done", json_false());
        return o;
    case GEN_OLLAMA_CHAT:
        srv_time_rfc3339(when, sizeof when, time(NULL));
        o = json_pack("{s:s,s:o}", "role", "assistant", "content", thinking ? json_string("") : t);
        if (thinking)
            json_object_set_new(o, "thinking", t); /* takes t, or frees it when o is NULL */
        return json_pack("{s:s,s:s,s:o,s:b}", "model", j->model, "created_at", when, "message", o, "done", 0);
    case GEN_OPENAI_CHAT:
        return gen_delta(j, json_pack("{s:s,s:o}", "role", "assistant", thinking ? "reasoning_content" : "content", t),
                         NULL);
    case GEN_OPENAI_COMPLETION:
        if (thinking)
            break;
        return json_pack("{s:s,s:s,s:I,s:s,s:[{s:o,s:i,s:n,s:n}]}", "id", j->id, "object", "text_completion", "created",
                         (json_int_t)j->created, "model", j->model, "choices", "text", t, "index", 0, "logprobs",
                         "finish_reason");
    }
    json_decref(t);
    return NULL;
}

static json_t *usage(const gen_job *j)
{
    return json_pack("{s:I,s:I,s:I}", "prompt_tokens", (json_int_t)j->n_prompt_total, "completion_tokens",
                     (json_int_t)j->n_gen, "total_tokens", (json_int_t)(j->n_prompt_total + j->n_gen));
}

/* The answer's message when it is returned whole: its content (the text before any calls) and
 * its calls. OpenAI's content is null when there are calls and no text. */
static json_t *message(const gen_job *j, const char *text, size_t len)
{
    int openai = j->kind == GEN_OPENAI_CHAT;
    json_t *m;
    size_t k = 0;

    if (j->n_calls)
        len = j->content_len;
    while (j->n_calls && k < len && strchr(" \t\r\n", text[k]))
        k++;
    m = json_pack("{s:s,s:o}", "role", "assistant", "content",
                  openai && j->n_calls && k == len ? json_null() : srv_json_text(text, len));
    if (j->n_calls)
        json_object_set_new(m, "tool_calls", gen_tool_calls_json(j, openai));
    if (j->thinking.n) /* as ollama: only when there is some */
        json_object_set_new(m, openai ? "reasoning_content" : "thinking", srv_json_text(j->thinking.p, j->thinking.n));
    return m;
}

/* The last object: the whole text when not streamed, counts and reasons. */
static json_t * final(const gen_job *j)
{
    const char *text = j->stream || !j->out.p ? "" : j->out.p;
    size_t len = j->stream ? 0 : j->out.n;
    char when[64];
    json_t *o;

    switch (j->kind) {
    case GEN_OLLAMA_GENERATE:
    case GEN_OLLAMA_CHAT:
        srv_time_rfc3339(when, sizeof when, time(NULL));
        o = json_pack("{s:s,s:s,s:b,s:s,s:I,s:I,s:I,s:I,s:I,s:I}", "model", j->model, "created_at", when, "done", 1,
                      "done_reason", finish_reason(j), "total_duration", (json_int_t)(j->t_total * 1e9),
                      "load_duration", (json_int_t)(j->t_load * 1e9), "prompt_eval_count", (json_int_t)j->n_prompt,
                      "prompt_eval_duration", (json_int_t)(j->t_prompt * 1e9), "eval_count", (json_int_t)j->n_gen,
                      "eval_duration", (json_int_t)(j->t_gen * 1e9));
        if (j->logprobs && !j->stream)
            json_object_set_new(o, "logprobs", gen_logprobs_json(j, json_incref(j->lp_all)));
        if (j->kind == GEN_OLLAMA_GENERATE) {
            json_object_set_new(o, "response", srv_json_text(text, len));
            if (!j->stream && j->thinking.n)
                json_object_set_new(o, "thinking", srv_json_text(j->thinking.p, j->thinking.n));
        } else
            json_object_set_new(o, "message",
                                j->stream ? json_pack("{s:s,s:s}", "role", "assistant", "content", "")
                                          : message(j, text, len));
        return o;
    case GEN_OPENAI_CHAT:
        if (j->stream)
            return gen_delta(j, json_object(), finish_reason(j));
        return json_pack("{s:s,s:s,s:I,s:s,s:s,s:[{s:i,s:o,s:o,s:s}],s:o}", "id", j->id, "object", "chat.completion",
                         "created", (json_int_t)j->created, "model", j->model, "system_fingerprint", "fp_mstore",
                         "choices", "index", 0, "message", message(j, text, len), "logprobs",
                         j->logprobs ? gen_logprobs_json(j, json_incref(j->lp_all)) : json_null(), "finish_reason",
                         finish_reason(j), "usage", usage(j));
    case GEN_OPENAI_COMPLETION:
        o = json_pack("{s:s,s:s,s:I,s:s,s:[{s:o,s:i,s:o,s:s}]}", "id", j->id, "object", "text_completion", "created",
                      (json_int_t)j->created, "model", j->model, "choices", "text", srv_json_text(text, len), "index",
                      0, "logprobs",
                      j->logprobs && !j->stream ? gen_logprobs_json(j, json_incref(j->lp_all)) : json_null(),
                      "finish_reason", finish_reason(j));
        if (!j->stream)
            json_object_set_new(o, "usage", usage(j));
        return o;
    }
    return NULL;
}

/* One object onto the stream in the API's framing: NDJSON lines, or server-sent events. */
int gen_send_obj(gen_job *j, json_t *o)
{
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    int openai = j->kind == GEN_OPENAI_CHAT || j->kind == GEN_OPENAI_COMPLETION, rc;

    json_decref(o);
    if (!s)
        return -1;
    rc = (openai ? srv_write_all(j->fd, "data: ", 6) : 0) || srv_write_all(j->fd, s, strlen(s)) ||
                 srv_write_all(j->fd, openai ? "\n\n" : "\n", openai ? 2 : 1)
             ? -1
             : 0;
    free(s);
    return rc;
}

/* Whether the client of a request answered in one piece has closed its connection. Nothing is
 * written to it before the end, so no EPIPE tells: its socket is asked instead, without waiting.
 * Readable with nothing to read is the peer's end of file (POLLRDHUP says so first on Linux);
 * bytes waiting (a pipelined request) are left where they are. */
static int client_gone(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    struct pollfd p;
    char b;

    if (!ci)
        return 0;
    p = (struct pollfd){.fd = ci->connect_fd, .events = POLLIN | POLLRDHUP};
    if (poll(&p, 1, 0) <= 0)
        return 0;
    if (p.revents & (POLLHUP | POLLERR | POLLRDHUP))
        return 1;
    return (p.revents & POLLIN) && recv(ci->connect_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

/* ---------------------------------------------------------------- logprobs
 * Each token is queued when it is sampled (token below) and leaves the queue with the chunk of
 * text that holds its last byte: a token that ends inside a UTF-8 character goes out with the
 * one that completes it, so each chunk's tokens spell exactly its text. Tokens whose text a stop
 * string cut never leave, one shown in part before the stop string included: the answer may
 * then end with bytes no reported token spells (its chunk was sent before the cut was known). `token` is the token's text with
 * invalid UTF-8 (a partial character) replaced by U+FFFD, as srv_json_text writes any text;
 * `bytes` are its bytes exactly, for a client to join. */

static json_t *lp_num(double v)
{
    json_t *n = isfinite(v) ? json_real(v) : NULL;

    return n ? n : json_null();
}

static json_t *lp_bytes(const char *s, size_t len)
{
    json_t *a = json_array();

    for (size_t i = 0; a && i < len; i++)
        json_array_append_new(a, json_integer((unsigned char)s[i]));
    return a;
}

static int token(void *ctx, const session_token *t)
{
    gen_job *j = ctx;
    json_t *top = json_array(), *e;
    size_t offset = j->lp_chars;

    for (int k = 0; top && k < t->n_top; k++) {
        char buf[256];
        size_t len;
        /* a piece longer than buf is not a real vocab entry (session_generate skips it too) */
        if (tokenizer_decode_piece(j->tk, t->top[k].id, 0, buf, sizeof buf, &len) < 0)
            len = 0;
        json_array_append_new(top, json_pack("{s:o,s:o,s:o}", "token", srv_json_text(buf, len), "logprob",
                                             lp_num(t->top[k].logprob), "bytes", lp_bytes(buf, len)));
    }
    for (size_t i = 0; i < t->len; i++)
        j->lp_chars += ((unsigned char)t->text[i] & 0xC0) != 0x80; /* a character counts at its first byte */
    e = top ? json_pack("{s:o,s:o,s:o,s:o,s:I}", "token", srv_json_text(t->text, t->len), "logprob",
                        lp_num(t->logprob), "bytes", lp_bytes(t->text, t->len), "top_logprobs", top, "text_offset",
                        (json_int_t)offset)
            : NULL;
    return !e || json_array_append_new(j->lp_queue, e) < 0; /* out of memory: stop */
}

/* The queued tokens whose text ends within the next `len` bytes emitted (a new array). */
static json_t *lp_take(gen_job *j, size_t len)
{
    json_t *out = json_array(), *e;
    size_t avail = j->lp_done + len;

    while (out && (e = json_array_get(j->lp_queue, 0))) {
        size_t n = json_array_size(json_object_get(e, "bytes"));
        if (n > avail)
            break;
        avail -= n;
        json_array_append(out, e);
        json_array_remove(j->lp_queue, 0);
    }
    j->lp_done = avail;
    j->lp_taken += len;
    return out;
}

json_t *gen_logprobs_json(const gen_job *j, json_t *list)
{
    json_t *e, *o, *toks, *lps, *tops, *offs;
    size_t i;

    if (!list)
        return json_null();
    if (j->kind != GEN_OPENAI_COMPLETION) {
        json_array_foreach(list, i, e) json_object_del(e, "text_offset");
        return j->kind == GEN_OPENAI_CHAT ? json_pack("{s:o}", "content", list) : list;
    }
    /* completions' parallel arrays; top_logprobs one object per token, its alternatives by text */
    o = json_pack("{s:[],s:[],s:[],s:[]}", "tokens", "token_logprobs", "top_logprobs", "text_offset");
    toks = json_object_get(o, "tokens"), lps = json_object_get(o, "token_logprobs");
    tops = json_object_get(o, "top_logprobs"), offs = json_object_get(o, "text_offset");
    json_array_foreach(list, i, e)
    {
        json_t *alt = json_object(), *a;
        size_t k;
        json_array_foreach(json_object_get(e, "top_logprobs"), k, a)
        {
            const char *s = json_string_value(json_object_get(a, "token"));
            if (!json_object_get(alt, s)) /* two tokens of one text: the likelier, listed first */
                json_object_set(alt, s, json_object_get(a, "logprob"));
        }
        json_array_append(toks, json_object_get(e, "token"));
        json_array_append(lps, json_object_get(e, "logprob"));
        json_array_append_new(tops, alt);
        json_array_append(offs, json_object_get(e, "text_offset"));
    }
    json_decref(list);
    return o;
}

/* A stream chunk with its tokens' logprobs where the API puts them (taken, with lp). */
static json_t *chunk_logprobs(const gen_job *j, json_t *o, json_t *lp)
{
    json_t *where = j->kind == GEN_OLLAMA_GENERATE || j->kind == GEN_OLLAMA_CHAT
                        ? o
                        : json_array_get(json_object_get(o, "choices"), 0);

    if (where)
        json_object_set_new(where, "logprobs", gen_logprobs_json(j, lp));
    else
        json_decref(lp);
    return o;
}

json_t *gen_content_chunk(gen_job *j, const char *text, size_t len)
{
    json_t *lp = NULL, *o;

    if (j->logprobs && !(lp = lp_take(j, len)))
        return NULL;
    o = gen_chunk(j, text, len, 0);
    return lp && o ? chunk_logprobs(j, o, lp) : (json_decref(lp), o);
}

void gen_logprobs_cut(gen_job *j, size_t bytes)
{
    size_t at = 0, i = 0;
    json_t *e;

    while ((e = json_array_get(j->lp_all, i)) && at < bytes)
        at += json_array_size(json_object_get(e, "bytes")), i++;
    while (json_array_size(j->lp_all) > i)
        json_array_remove(j->lp_all, i);
}

/* The answer's content (what the thinking splitter leaves of it, think.c). After a thought the
 * content is the end of the answer: its first piece ends where the fed text does (the splitter
 * holds nothing back once "</think>" passed) and every byte after it is content, so the tokens
 * before it, the reasoning and its tags, are dropped from the logprobs, once; a token that the
 * tag and the content share is the content's. */
static int emit_content(gen_job *j, const char *text, size_t len)
{
    json_t *lp = NULL;

    /* Harmony's content comes between messages of reasoning and calls: each piece ends where the
     * fed text does, less what the splitter holds (a marker's beginning), and the tokens before
     * it that no content took (markers, reasoning, calls) are dropped; a token that a marker and
     * the content share is the content's. */
    if (j->logprobs && j->harmony && j->lp_fed >= j->hsplit.n + len && j->lp_fed - j->hsplit.n - len > j->lp_taken)
        json_decref(lp_take(j, j->lp_fed - j->hsplit.n - len - j->lp_taken));
    if (j->logprobs && j->think_on && !j->harmony && j->split.opened && !j->lp_skipped) {
        j->lp_skipped = 1;
        if (j->lp_fed - len > j->lp_taken)
            json_decref(lp_take(j, j->lp_fed - len - j->lp_taken));
    }
    /* streamed with tools, the whole answer is kept (its calls are read at the end) and its
     * content goes out as gen_tools_stream decides, each chunk with its logprobs */
    if (gen_tools_on(j) && !j->harmony && j->fd >= 0) /* harmony's splitter took the calls out */
        return ms_text_put(&j->out, text, len) < 0 || gen_tools_stream(j) < 0;
    if (j->fd >= 0) { /* non-zero: the client is gone, stop */
        json_t *o = gen_content_chunk(j, text, len);
        return !o || gen_send_obj(j, o) < 0;
    }
    if (j->logprobs && !(lp = lp_take(j, len)))
        return 1; /* out of memory: stop */
    if (lp && json_array_extend(j->lp_all, lp) < 0) {
        json_decref(lp);
        return 1;
    }
    json_decref(lp);
    return ms_text_put(&j->out, text, len) < 0; /* out of memory: stop */
}

static int emit(void *ctx, const char *text, size_t len)
{
    gen_job *j = ctx;

    if (__atomic_load_n(&j->srv->stopping, __ATOMIC_RELAXED))
        return 1; /* the server is stopping: end here, and let it exit */
    if (j->fd < 0 && j->conn && client_gone(j->conn))
        return 1; /* as a stream's writer learns from EPIPE: stop, the model is free for others */
    return gen_think_emit(j, text, len, emit_content);
}

/* ---------------------------------------------------------------- running */

/* Keep the failure for the answer, which may be written after other calls reset ms_err_msg(). */
static void fail(gen_job *j, int code)
{
    j->code = code;
    snprintf(j->err, sizeof j->err, "%s", ms_err_msg());
}

/* Chat messages with the `drop` oldest turns left out (system messages and the last message
 * stay), rendered. */
static int render_dropped(char **text, size_t *len, const gen_job *j, const session *S, size_t drop)
{
    chat_msg *m = malloc((j->n_msgs + 1) * sizeof *m);
    size_t n = 0, dropped = 0;
    int rc;

    *text = NULL;
    if (!m)
        return ms_err(MS_ENOMEM, "out of memory");
    for (size_t i = 0; i < j->n_msgs; i++) {
        if (strcmp(j->msgs[i].role, "system") != 0 && dropped < drop && i + 1 < j->n_msgs) {
            dropped++;
            continue;
        }
        m[n++] = j->msgs[i];
    }
    rc = chat_render_think(text, len, session_template(S), m, n, gen_tools_on(j) ? j->tools : NULL,
                           gen_tools_on(j) ? j->n_tools : 0, 1, j->think);
    free(m);
    return rc;
}

/* Render with `drop` turns left out and count its tokens: 0 when it fits (text kept), else
 * MS_ETOOBIG (text freed) or another failure. */
static int try_fit(char **text, size_t *len, const gen_job *j, const session *S, size_t drop)
{
    size_t n;
    int rc = render_dropped(text, len, j, S, drop);

    if (rc == 0 && (rc = session_count(S, *text, *len, 1, j->ctx, &n)) < 0) {
        free(*text);
        *text = NULL;
    }
    return rc;
}

/* The prompt's text, chosen before the model's lock is taken (rendering and counting read only
 * the template and the tokenizer, so a long conversation delays no other request): rendered
 * with the template, or the raw prompt. Chat conversations longer than the context lose their
 * oldest turns (system messages and the last turn stay), as ollama does; what still does not
 * fit is refused. Fewer turns never take more tokens, so the fewest to drop is found by
 * bisection: O(log n) renderings of the conversation, each tokenized only when its bytes could
 * fit the context (session_count), so the cost grows with the request's bytes times log n. */
static int prompt_choose(char **text, size_t *len, int *special, const gen_job *j, const session *S)
{
    int chat = j->kind == GEN_OLLAMA_CHAT || j->kind == GEN_OPENAI_CHAT, rc;
    size_t droppable = 0, fits, fails, n;

    *text = NULL, *special = 1;
    if (!chat) {
        chat_msg m[2];
        size_t k = 0;
        if (j->raw || !session_has_template(S)) {
            *special = 0, *len = strlen(j->prompt);
            if (!(*text = strdup(j->prompt)))
                return ms_err(MS_ENOMEM, "out of memory");
        } else {
            if (j->system)
                m[k++] = (chat_msg){.role = "system", .content = j->system};
            m[k++] = (chat_msg){.role = "user", .content = j->prompt};
            if ((rc = chat_render_think(text, len, session_template(S), m, k, NULL, 0, 1, j->think)) < 0)
                return rc;
        }
        if ((rc = session_count(S, *text, *len, *special, j->ctx, &n)) < 0) {
            free(*text);
            *text = NULL;
        }
        return rc;
    }
    for (size_t i = 0; i + 1 < j->n_msgs; i++)
        droppable += strcmp(j->msgs[i].role, "system") != 0;
    if ((rc = try_fit(text, len, j, S, 0)) != MS_ETOOBIG || droppable == 0)
        return rc;
    if ((rc = try_fit(text, len, j, S, droppable)) < 0)
        return rc; /* the last turn and the system messages alone do not fit */
    free(*text);
    *text = NULL;
    fails = 0, fits = droppable;
    while (fits - fails > 1) {
        size_t mid = fails + (fits - fails) / 2;
        if ((rc = try_fit(text, len, j, S, mid)) == 0) {
            free(*text);
            *text = NULL;
            fits = mid;
        } else if (rc == MS_ETOOBIG) {
            fails = mid;
        } else {
            return rc;
        }
    }
    return try_fit(text, len, j, S, fits);
}

static const char *const kind_name[] = {"/api/generate", "/api/chat", "/v1/chat/completions", "/v1/completions"};

static void run(gen_job *j)
{
    double t0 = now(), t1;
    loaded *L = NULL;
    session *S = NULL;
    const session_stats *st;
    char *text = NULL;
    size_t len = 0;
    int rc, special;

    if ((rc = srv_model_acquire(j->srv, &j->ref, j->mo.n_ctx, &L)) < 0) {
        /* a model that does not load is the server's failure; a busy server says so (503) */
        fail(j, rc == MS_ENOTFOUND || rc == MS_EBUSY ? rc : MS_ERROR);
        return;
    }
    t1 = now();
    j->t_load = t1 - t0;
    j->ctx = srv_model_ctx(L, j->mo.n_ctx);
    /* the template and tokenizer are every session's: the first one's serve before one is taken */
    if ((rc = prompt_choose(&text, &len, &special, j, L->S)) < 0) {
        fail(j, rc);
        goto done;
    }
    gen_think_prompt(j, text, len);
    if ((rc = srv_model_lock(&S, L, text, len, j->ctx)) < 0) {
        fail(j, rc);
        goto done;
    }
    session_stats_clear(S);
    /* every request sets the session's format, none included: the last request's must not stay */
    if ((rc = gen_tools_grammar(j, S)) < 0) {
        fail(j, rc);
        goto done;
    }
    if ((rc = session_feed(S, text, len, special, SESSION_FEED_EXACT)) < 0) {
        fail(j, rc);
        goto done;
    }
    j->g.n_predict = j->mo.n_predict;
    if (j->logprobs) {
        j->tk = L->t, j->g.token = token, j->g.n_top = j->top_logprobs;
        if (!(j->lp_queue = json_array()) || !(j->lp_all = json_array())) {
            fail(j, ms_err(MS_ENOMEM, "out of memory"));
            goto done;
        }
    }
    if ((rc = session_sampler_set(S, &j->mo.so)) < 0 || (rc = session_generate(S, &j->g, 0, emit, j, &j->done)) < 0) {
        fail(j, MS_ERROR); /* the request was valid: what fails now is the server's */
        goto done;
    }
    if (j->done != SESSION_DONE_CANCELLED && (gen_think_end(j, emit_content) || gen_tools_finish(j) < 0) &&
        j->fd < 0) {
        fail(j, MS_ENOMEM);
        goto done;
    }
    if (j->done == SESSION_DONE_CANCELLED && __atomic_load_n(&j->srv->stopping, __ATOMIC_RELAXED))
        fail(j, ms_err(MS_EBUSY, "the server is stopping")); /* not a whole answer: say why (503) */
    st = session_stats_get(S);
    j->n_prompt = st->n_prompt, j->n_prompt_total = st->n_prompt_total, j->n_gen = st->n_gen;
    j->t_prompt = st->t_prompt, j->t_gen = st->t_gen;
    /* One line per generation for whoever runs the server; "cancelled" says the client left. */
    fprintf(stderr, "mstore: %s %s: %zu of %zu prompt tokens run, %zu generated, %s\n", kind_name[j->kind], L->shown,
            j->n_prompt, j->n_prompt_total, j->n_gen,
            j->done != SESSION_DONE_CANCELLED                      ? session_done_name(j->done)
            : __atomic_load_n(&j->srv->stopping, __ATOMIC_RELAXED) ? "cancelled (server stopping)"
                                                                   : "cancelled (client gone)");
done:
    free(text);
    j->t_total = now() - t0;
    srv_model_release(j->srv, L, S, j->keep_alive_s);
}

/* The end of a stream: the final object (or the error, in the API's shape), [DONE] for SSE. */
static void stream_end(gen_job *j)
{
    int openai = j->kind == GEN_OPENAI_CHAT || j->kind == GEN_OPENAI_COMPLETION;

    if (j->done == SESSION_DONE_CANCELLED)
        return;
    if (j->code) {
        gen_send_obj(j, srv_err_body(openai ? SRV_OPENAI : SRV_OLLAMA, j->code, j->err));
    } else {
        gen_send_obj(j, final(j));
        if (openai && j->include_usage) /* OpenAI's last chunk: no choices, the usage */
            gen_send_obj(j, json_pack("{s:s,s:s,s:I,s:s,s:[],s:o}", "id", j->id, "object",
                                      j->kind == GEN_OPENAI_CHAT ? "chat.completion.chunk" : "text_completion",
                                      "created", (json_int_t)j->created, "model", j->model, "choices", "usage",
                                      usage(j)));
    }
    if (openai)
        srv_write_all(j->fd, "data: [DONE]\n\n", 14);
}

static void *stream_thread(void *arg)
{
    gen_job *j = arg;

    run(j);
    stream_end(j);
    gen_job_free(j); /* closes the pipe: the response ends */
    return NULL;
}

int gen_model_check(const gen_job *j, const char *model)
{
    int chat = j->kind == GEN_OLLAMA_CHAT || j->kind == GEN_OPENAI_CHAT;

    if (srv_model_caps(j->ref.sm) & SRV_CAN_EMBED)
        return ms_err(MS_EUNSUPPORTED, "model '%s' does not support %s", model ? model : "", chat ? "chat" : "generate");
    return 0;
}

enum MHD_Result gen_respond(req *r, gen_job *j, json_t *body, int rc, srv_api api)
{
    json_decref(body);
    if (rc == 0)
        return gen_start(r, j);
    gen_job_free(j);
    return srv_fail(r, api, rc);
}

enum MHD_Result gen_start(req *r, gen_job *j)
{
    int openai = j->kind == GEN_OPENAI_CHAT || j->kind == GEN_OPENAI_COMPLETION;
    enum MHD_Result ret;
    int rc;

    if ((rc = gen_tools_check(j)) < 0 || (rc = gen_think_check(j)) < 0) {
        gen_job_free(j);
        return srv_fail(r, openai ? SRV_OPENAI : SRV_OLLAMA, rc);
    }
    if (!j->stream) {
        j->conn = r->c;
        run(j);
        if (j->code)
            ret = srv_json(r, srv_status(j->code), srv_err_body(openai ? SRV_OPENAI : SRV_OLLAMA, j->code, j->err));
        else
            ret = srv_json(r, 200, final(j));
        gen_job_free(j);
        return ret;
    }
    if (srv_stream_open(r, openai ? "text/event-stream" : "application/x-ndjson", &j->fd) < 0) {
        gen_job_free(j);
        return MHD_NO;
    }
    if (srv_job_spawn(r->srv, stream_thread, j) < 0)
        gen_job_free(j); /* the stream ends empty */
    return MHD_YES;
}
