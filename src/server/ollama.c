/* ollama.c: ollama's /api: generate, chat, tags, show, ps, version, copy, delete, pull, push, create,
 * blobs (embed and embeddings: embed.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "chat/chat.h"
#include "registry/registry.h"
#include "server/server_int.h"

#define MSG 1024

/* ---------------------------------------------------------------- fields */

static char *dup_str(const char *s)
{
    return s ? strdup(s) : NULL;
}

/* ---------------------------------------------------------------- generate and chat */

static enum MHD_Result load_only(req *r, gen_job *j)
{
    char when[64];
    loaded *L;
    int unload = j->keep_alive_s == 0, rc;

    if (unload) {
        srv_model_unload(r->srv, &j->ref);
    } else if ((rc = srv_model_acquire(r->srv, &j->ref, j->mo.n_ctx, &L)) < 0) {
        gen_job_free(j);
        return srv_err_ollama(r, rc == MS_EBUSY ? 503 : 500, "%s", ms_err_msg());
    } else {
        srv_model_release(r->srv, L, NULL, j->keep_alive_s);
    }
    srv_time_rfc3339(when, sizeof when, time(NULL));
    json_t *o = json_pack("{s:s,s:s,s:s,s:b,s:s}", "model", j->model, "created_at", when, "response", "", "done", 1,
                          "done_reason", unload ? "unload" : "load");
    if (j->kind == GEN_OLLAMA_CHAT) {
        json_object_del(o, "response");
        json_object_set_new(o, "message", json_pack("{s:s,s:s}", "role", "assistant", "content", ""));
    }
    gen_job_free(j);
    return srv_json(r, 200, o);
}

/* The model's own defaults, as `mstore run` applies them: its params layer under the request's
 * options (parsed again over them, checked already), its stop strings when the request sends
 * none, its system prompt when the request has none. `base` is the job's options before the
 * request's. */
static int model_defaults(gen_job *j, json_t *b, int chat, const model_opts *base, const char **system)
{
    json_t *o = json_object_get(b, "options");
    model_params *p = NULL;
    model_opts mo = *base;
    int rc, has_system = 0;

    if ((rc = model_params_load(&p, j->ref.sm)) < 0 || !p)
        return rc;
    model_params_apply(p, &mo);
    if (json_is_object(o) && (rc = model_opts_from_json(&mo, o, "options.", 0)) < 0)
        goto done;
    if (j->format) /* the request's format over the model's PARAMETER format */
        mo.format = j->format;
    j->mo = mo;
    for (size_t i = 0; j->g.n_stops == 0 && i < p->n_stop && rc == 0; i++)
        rc = gen_job_stop_add(j, p->stop[i]);
    for (size_t i = 0; i < j->n_msgs; i++)
        has_system |= strcmp(j->msgs[i].role, "system") == 0;
    if (rc < 0 || !p->system)
        goto done;
    if (!chat && (!*system || !**system) && !(j->system = strdup(p->system)))
        rc = ms_err(MS_ENOMEM, "out of memory");
    if (chat && j->n_msgs && !has_system) { /* chat_messages left room for one more */
        memmove(j->msgs + 1, j->msgs, j->n_msgs * sizeof *j->msgs);
        j->n_msgs++;
        j->msgs[0] = (chat_msg){0}; /* its old fields are message 1's now */
        if (!(j->msgs[0].role = strdup("system")) || !(j->msgs[0].content = strdup(p->system)))
            rc = ms_err(MS_ENOMEM, "out of memory");
    }
done:
    model_params_free(p);
    return rc;
}

/* The request's fields (request.c), then its model and the model's defaults. */
static int generate_parse(gen_job *j, json_t *b, int chat, const char **prompt, const char **system)
{
    model_opts base = j->mo;
    int rc;

    if ((rc = srv_ollama_fields(j, b, chat, prompt, system)) < 0 ||
        (rc = srv_model_open(&j->ref, j->srv, srv_body_model(b))) < 0)
        return rc;
    return model_defaults(j, b, chat, &base, system);
}

static enum MHD_Result generate(req *r, int chat)
{
    json_t *b = NULL;
    gen_job *j = NULL;
    const char *prompt = NULL, *system = NULL;
    int rc;

    if ((rc = gen_job_new(&j, &b, r, chat ? GEN_OLLAMA_CHAT : GEN_OLLAMA_GENERATE)) < 0 ||
        (rc = generate_parse(j, b, chat, &prompt, &system)) < 0 ||
        (rc = gen_model_check(j, srv_body_model(b))) < 0)
        goto fail;
    snprintf(j->model, sizeof j->model, "%s", srv_body_model(b));
    if ((chat && j->n_msgs == 0) || (!chat && (!prompt || !*prompt))) {
        json_decref(b);
        return load_only(r, j); /* as ollama: no prompt loads (or with keep_alive 0 unloads) */
    }
    if (!chat &&
        (!(j->prompt = dup_str(prompt)) || (system && *system && !j->system && !(j->system = dup_str(system))))) {
        rc = ms_err(MS_ENOMEM, "out of memory");
        goto fail;
    }
    rc = 0;
fail:
    return gen_respond(r, j, b, rc, SRV_OLLAMA);
}

/* ---------------------------------------------------------------- the store */

/* The config blob of a stored model as JSON (NULL when unreadable). */
static json_t *model_config(store_model *sm)
{
    const uint8_t *data;
    size_t len;

    if (!sm || store_model_config(&data, &len, sm) < 0 || len >= (1u << 20))
        return NULL;
    return json_loadb((const char *)data, len, 0, NULL);
}

static json_t *details(json_t *cfg)
{
    const char *arch = json_string_value(json_object_get(cfg, "architecture"));
    const char *fmt = json_string_value(json_object_get(json_object_get(cfg, "source"), "format"));
    json_t *q = json_object_get(cfg, "quantization"), *v;
    const char *k, *best = "";
    json_int_t most = -1;

    json_object_foreach(q, k, v) if (json_integer_value(v) > most) most = json_integer_value(v), best = k;
    return json_pack("{s:s,s:s,s:s,s:[s],s:s,s:s}", "parent_model", "", "format", fmt ? fmt : "safetensors", "family",
                     arch ? arch : "", "families", arch ? arch : "", "parameter_size", "", "quantization_level", best);
}

static enum MHD_Result tags(req *r)
{
    store *s = NULL;
    store_entry *ms = NULL;
    size_t n = 0;
    json_t *arr;
    char name[400], when[64];

    if (store_open(&s, r->srv->home) < 0 || store_list(s, &ms, &n) < 0) {
        store_close(s);
        return srv_err_ollama(r, 500, "%s", ms_err_msg());
    }
    arr = json_array();
    for (size_t i = 0; i < n; i++) {
        store_model *sm = NULL;
        json_t *cfg = store_model_open_digest(&sm, s, ms[i].digest) == 0 ? model_config(sm) : NULL;
        store_model_close(sm);
        name_display(name, sizeof name, &ms[i].name);
        srv_time_rfc3339(when, sizeof when, (time_t)ms[i].modified_at);
        json_array_append_new(arr, json_pack("{s:s,s:s,s:s,s:I,s:s,s:o}", "name", name, "model", name, "modified_at",
                                             when, "size", (json_int_t)ms[i].size, "digest",
                                             blob_digest_hex(ms[i].digest), "details", details(cfg)));
        json_decref(cfg);
    }
    free(ms);
    store_close(s);
    return srv_json(r, 200, json_pack("{s:o}", "models", arr));
}

/* What the model can do with what mstore builds, as ollama's clients (Open WebUI, the ollama CLI)
 * read /api/show's "capabilities": "completion" when the runtime runs its architecture (its
 * config reads as one the decoders take); "insert" when its template takes a suffix and
 * generate accepts one; "tools" when chat would take tools: the template renders them and says
 * how calls are written; "thinking" when the template makes the model think: in <think> tags,
 * or through reasoning_effort and harmony's analysis channel (gpt-oss) (srv_template_thinks);
 * "embedding" alone for an embedding model (srv_model_caps). Vision is not built, so never
 * claimed. */
static json_t *capabilities(store_model *sm, const char *tmpl)
{
    chat_tool_syntax syn;
    json_t *caps = json_array();
    int can = srv_model_caps(sm);

    if (can & SRV_CAN_EMBED) { /* as ollama: an embedding model claims nothing else */
        json_array_append_new(caps, json_string("embedding"));
        return caps;
    }
    if (can & SRV_CAN_COMPLETE)
        json_array_append_new(caps, json_string("completion"));
    if (tmpl && strstr(tmpl, ".Suffix") && !srv_unbuilt(0, "suffix"))
        json_array_append_new(caps, json_string("insert"));
    if (tmpl && srv_template_tool_syntax(tmpl, strlen(tmpl), &syn) == 0)
        json_array_append_new(caps, json_string("tools"));
    if (tmpl && srv_template_thinks(tmpl, strlen(tmpl), NULL, NULL))
        json_array_append_new(caps, json_string("thinking"));
    return caps;
}

/* The messages layer as JSON (an empty array when none or unreadable). */
static json_t *show_messages(store_model *sm)
{
    const uint8_t *data;
    size_t len;
    json_t *a = NULL;

    if (store_model_find(&data, &len, sm, MT_OLLAMA_MESSAGES, NULL) == 0)
        a = json_loadb((const char *)data, len, 0, NULL);
    if (!json_is_array(a)) {
        json_decref(a);
        a = json_array();
    }
    return a;
}

static json_t *show_model_info(json_t *cfg)
{
    const char *arch = json_string_value(json_object_get(cfg, "architecture"));
    char key[96];
    static const struct {
        const char *cfg, *gguf;
    } keys[] = {
        {"max_position_embeddings", "context_length"},
        {"hidden_size", "embedding_length"},
        {"num_hidden_layers", "block_count"},
        {"num_attention_heads", "attention.head_count"},
        {"num_key_value_heads", "attention.head_count_kv"},
        {"intermediate_size", "feed_forward_length"},
        {"vocab_size", "vocab_size"},
        {"rope_theta", "rope.freq_base"},
    };
    json_t *info = json_pack("{s:s}", "general.architecture", arch ? arch : "");

    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        json_t *v = json_object_get(cfg, keys[i].cfg);
        snprintf(key, sizeof key, "%s.%s", arch ? arch : "model", keys[i].gguf);
        if (v && !json_is_null(v))
            json_object_set(info, key, v);
    }
    return info;
}

static json_t *text(const char *s)
{
    return srv_json_text(s ? s : "", s ? strlen(s) : 0);
}

static enum MHD_Result show(req *r)
{
    json_t *b = NULL, *cfg = NULL, *o;
    srv_model m = {0};
    model_info mi = {0};
    const uint8_t *data;
    char *tmpl = NULL;
    size_t tmpl_len = 0;
    int rc;

    if ((rc = srv_body_json(&b, r)) == 0)
        rc = srv_model_open(&m, r->srv, srv_body_model(b));
    json_decref(b);
    if (rc < 0)
        return srv_fail(r, SRV_OLLAMA, rc);
    cfg = model_config(m.sm);
    if (store_model_find(&data, &tmpl_len, m.sm, MT_TEMPLATE, NULL) == 0 && (tmpl = malloc(tmpl_len + 1))) {
        memcpy(tmpl, data, tmpl_len);
        tmpl[tmpl_len] = '\0';
    } else {
        tmpl_len = 0;
    }
    /* parameters, system, license and the Modelfile as `mstore show` prints them; a layer that
     * does not read leaves its field empty rather than hiding the rest */
    if (model_info_load(&mi, m.sm) < 0)
        memset(&mi, 0, sizeof mi);
    /* text of the model's layers, made valid UTF-8 for JSON (srv_json_text) */
    o = json_pack("{s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}", "modelfile", text(mi.modelfile), "parameters",
                  text(mi.parameters), "template", srv_json_text(tmpl ? tmpl : "", tmpl_len), "system", text(mi.system),
                  "license", text(mi.license), "messages", show_messages(m.sm), "details", details(cfg), "model_info",
                  show_model_info(cfg), "capabilities", capabilities(m.sm, tmpl), "config",
                  cfg ? json_incref(cfg) : json_object());
    model_info_fini(&mi);
    srv_model_close(&m);
    free(tmpl);
    json_decref(cfg);
    return o ? srv_json(r, 200, o) : srv_err_ollama(r, 500, "out of memory");
}

static enum MHD_Result copy_or_delete(req *r, int del)
{
    json_t *b = NULL;
    const char *src = NULL, *dst = NULL;
    srv_model m = {0};
    model_name d;
    ms_digest digest;
    int rc;

    if ((rc = srv_body_json(&b, r)) < 0)
        return srv_fail(r, SRV_OLLAMA, rc);
    if (del)
        src = srv_body_model(b);
    else if ((rc = srv_field_str(&src, b, "source", "source")) < 0 ||
             (rc = srv_field_str(&dst, b, "destination", "destination")) < 0)
        goto fail;
    if ((rc = srv_model_open(&m, r->srv, src)) < 0)
        goto fail;
    if (!del && !dst) {
        rc = ms_err(MS_EINVALID, "destination: required");
        goto fail;
    }
    if (!del && (rc = name_parse(&d, dst)) < 0) {
        rc = ms_err_ctx("destination");
        goto fail;
    }
    json_decref(b);
    b = NULL;
    /* the name's change goes through the store the request resolved it in */
    snprintf(digest, sizeof digest, "%s", store_model_digest(m.sm));
    store_model_close(m.sm);
    m.sm = NULL;
    rc = del ? store_name_remove(m.s, &m.name) : store_name_copy(m.s, &m.name, &d);
    srv_model_close(&m);
    if (rc < 0) /* the store's failure, not the request's: 500 unless the name went meanwhile */
        return srv_err_ollama(r, rc == MS_ENOTFOUND ? 404 : 500, "%s", ms_err_msg());
    if (del)
        srv_model_unload(r->srv, &m);
    else
        srv_model_renamed(r->srv, &d, digest); /* a load the destination named serves no one now */
    return srv_respond(r, 200, NULL, "", 0);
fail:
    json_decref(b);
    srv_model_close(&m);
    return srv_fail(r, SRV_OLLAMA, rc);
}

/* ---------------------------------------------------------------- pull and push */

typedef struct xfer {
    server *srv;
    model_name name;
    int push, insecure, stream, fd, failed;
    uint64_t last;
    char err[MSG];
} xfer;

static void xfer_send(xfer *x, json_t *o)
{
    char *s = json_dumps(o, JSON_COMPACT);

    json_decref(o);
    if (s && x->fd >= 0 && !x->failed && (srv_write_all(x->fd, s, strlen(s)) < 0 || srv_write_all(x->fd, "\n", 1) < 0))
        x->failed = 1; /* the client left: the transfer goes on, unseen */
    free(s);
}

static void on_progress(void *ctx, uint64_t done, uint64_t total)
{
    xfer *x = ctx;

    if (done == x->last && done != total)
        return;
    x->last = done;
    xfer_send(x, json_pack("{s:s,s:I,s:I}", "status", "downloading", "total", (json_int_t)total, "completed",
                           (json_int_t)done));
}

static int xfer_run(xfer *x)
{
    registry_opts o;
    store *s = NULL;
    ms_digest digest;
    int rc;

    registry_opts_init(&o);
    o.quiet = 1;
    o.insecure = x->insecure;
    o.cancel = &x->srv->stopping; /* a stopping server ends even a stalled transfer */
    if (x->fd >= 0 && !x->push) {
        o.progress = on_progress;
        o.progress_ctx = x;
    }
    if (x->fd >= 0)
        xfer_send(x, json_pack("{s:s}", "status", x->push ? "retrieving manifest" : "pulling manifest"));
    if ((rc = store_open(&s, x->srv->home)) == 0)
        rc = x->push ? registry_push(s, &x->name, NULL, &o, digest) : registry_pull(s, &x->name, &o, digest);
    store_close(s);
    if (rc < 0) {
        snprintf(x->err, sizeof x->err, "%s", ms_err_msg());
        return rc;
    }
    if (x->fd >= 0) {
        if (!x->push)
            xfer_send(x, json_pack("{s:s,s:s}", "status", "verifying sha256 digest", "digest", digest));
        xfer_send(
            x, json_pack("{s:s,s:s}", "status", x->push ? "pushing manifest" : "writing manifest", "digest", digest));
        xfer_send(x, json_pack("{s:s}", "status", "success"));
    }
    return 0;
}

static void *xfer_thread(void *arg)
{
    xfer *x = arg;

    if (xfer_run(x) < 0)
        xfer_send(x, json_pack("{s:s}", "error", x->err));
    close(x->fd);
    free(x);
    return NULL;
}

/* With --no-remote-pull (MS_EINVALID, answered 403), the host a pull or push reaches is the operator's choice only: the
 * registry names without a host go to. A host in the request's name is the client's choice,
 * and would let any client make the server connect where the client cannot (an internal
 * address). */
static int remote_check(const server *srv, const model_name *name)
{
    model_name bare = *name;
    char own[NAME_HOST_MAX];

    if (!srv->o.no_remote_pull || !name->host[0])
        return 0;
    bare.host[0] = '\0';
    if (registry_host(own, &bare) == 0 && strcasecmp(own, name->host) == 0)
        return 0;
    return ms_err(MS_EINVALID,
                  "host '%s': this server does not pull from or push to hosts named by clients "
                  "(mstore serve --no-remote-pull); names without a host use %s",
                  name->host, own[0] ? own : "$MSTORE_REGISTRY");
}

/* A push names a stored model: 404 before the stream starts. The registry client opens it
 * itself (it reads the layers by name). */
static int push_check(xfer *x, server *srv, const char *model)
{
    srv_model m;
    int rc = srv_model_open(&m, srv, model);

    x->name = m.name;
    srv_model_close(&m);
    return rc;
}

static enum MHD_Result pull_push(req *r, int push)
{
    json_t *b = NULL;
    xfer *x = calloc(1, sizeof *x);
    const char *model;
    int rc;

    if ((rc = srv_body_json(&b, r)) == 0 && !x)
        rc = ms_err(MS_ENOMEM, "out of memory");
    if (rc == 0) {
        x->srv = r->srv, x->push = push, x->stream = 1, x->fd = -1;
        model = srv_body_model(b);
        if ((rc = srv_field_bool(&x->insecure, b, "insecure", "insecure")) == 0 &&
            (rc = srv_field_bool(&x->stream, b, "stream", "stream")) == 0)
            rc = push ? push_check(x, r->srv, model) : srv_model_name(&x->name, model);
        if (rc == 0 && remote_check(r->srv, &x->name) < 0) {
            json_decref(b);
            free(x);
            return srv_err_ollama(r, 403, "%s", ms_err_msg());
        }
    }
    json_decref(b);
    if (rc < 0) {
        free(x);
        return srv_fail(r, SRV_OLLAMA, rc);
    }
    if (!x->stream) {
        char err[MSG];
        rc = xfer_run(x);
        snprintf(err, sizeof err, "%s", x->err);
        free(x);
        /* a registry's refusal is not the request's fault: 500, unless the model is not there */
        if (rc < 0)
            return srv_err_ollama(r, rc == MS_ENOTFOUND ? 404 : 500, "%s", err);
        return srv_json(r, 200, json_pack("{s:s}", "status", "success"));
    }
    if (srv_stream_open(r, "application/x-ndjson", &x->fd) < 0) {
        free(x);
        return MHD_NO;
    }
    if (srv_job_spawn(r->srv, xfer_thread, x) < 0) {
        close(x->fd); /* the stream ends empty */
        free(x);
    }
    return MHD_YES;
}

/* ---------------------------------------------------------------- create */

/* POST /api/create: ollama's request read by src/modelfile into the Modelfile's parts, then the
 * same modelfile_create_from as `mstore create`. Everything the request can get wrong (fields,
 * parameters, a base that is not there) is answered 400 / 404 before the stream starts; the
 * stream then says what the create does and ends with {"status":"success"} or {"error"}. */
typedef struct creation {
    server *srv;
    model_name name;
    modelfile *mf;
    int fd, failed;
    char err[MSG];
} creation;

static void creation_send(creation *c, json_t *o)
{
    char *s = json_dumps(o, JSON_COMPACT);

    json_decref(o);
    if (s && c->fd >= 0 && !c->failed && (srv_write_all(c->fd, s, strlen(s)) < 0 || srv_write_all(c->fd, "\n", 1) < 0))
        c->failed = 1; /* the client left: the create goes on, unseen, as a pull does */
    free(s);
}

static void creation_status(void *ctx, const char *status)
{
    creation *c = ctx;

    if (c->fd >= 0)
        creation_send(c, json_pack("{s:o}", "status", srv_json_text(status, strlen(status))));
}

static void creation_free(creation *c)
{
    if (!c)
        return;
    modelfile_free(c->mf);
    if (c->fd >= 0)
        close(c->fd);
    free(c);
}

static int creation_run(creation *c)
{
    modelfile_create_opts o = {.quiet = 1, .status = creation_status, .ctx = c};
    ms_digest digest;
    store *s = NULL;
    int rc;

    if ((rc = store_open(&s, c->srv->home)) == 0)
        rc = modelfile_create_from(s, &c->name, c->mf, "request", &o, digest);
    store_close(s);
    if (rc < 0) {
        snprintf(c->err, sizeof c->err, "%s", ms_err_msg());
        return rc;
    }
    /* a load under that name is of the manifest the name meant before: it serves no one now */
    srv_model_renamed(c->srv, &c->name, digest);
    return 0;
}

static void *creation_thread(void *arg)
{
    creation *c = arg;

    if (creation_run(c) < 0)
        creation_send(c, json_pack("{s:o}", "error", srv_json_text(c->err, strlen(c->err))));
    else
        creation_send(c, json_pack("{s:s}", "status", "success"));
    creation_free(c);
    return NULL;
}

/* The request read and its base checked: MS_EINVALID / MS_EUNSUPPORTED (400), MS_ENOTFOUND. */
static int creation_parse(creation *c, json_t *b, int *stream)
{
    store *s = NULL;
    int rc;

    if ((rc = srv_model_name(&c->name, srv_body_model(b))) < 0 ||
        (rc = srv_field_bool(stream, b, "stream", "stream")) < 0 || (rc = modelfile_from_request(&c->mf, b)) < 0)
        return rc;
    if ((rc = store_open(&s, c->srv->home)) == 0)
        rc = modelfile_base_check(s, c->mf);
    store_close(s);
    return rc;
}

static enum MHD_Result create(req *r)
{
    json_t *b = NULL;
    creation *c = calloc(1, sizeof *c);
    int stream = 1, rc;

    if ((rc = srv_body_json(&b, r)) == 0 && !c)
        rc = ms_err(MS_ENOMEM, "out of memory");
    if (rc == 0) {
        c->srv = r->srv, c->fd = -1;
        rc = creation_parse(c, b, &stream);
    }
    json_decref(b);
    if (rc < 0) {
        creation_free(c);
        return srv_fail(r, SRV_OLLAMA, rc);
    }
    if (!stream) {
        if ((rc = creation_run(c)) < 0) {
            /* an uploaded blob whose bytes are not its digest: the client uploads it again */
            unsigned st = rc == MS_EMISMATCH ? 400 : srv_status(rc);
            enum MHD_Result ret = srv_json(r, st, srv_err_body(SRV_OLLAMA, rc, c->err));
            creation_free(c);
            return ret;
        }
        creation_free(c);
        return srv_json(r, 200, json_pack("{s:s}", "status", "success"));
    }
    if (srv_stream_open(r, "application/x-ndjson", &c->fd) < 0) {
        creation_free(c);
        return MHD_NO;
    }
    if (srv_job_spawn(r->srv, creation_thread, c) < 0)
        creation_free(c); /* closes the stream: it ends empty */
    return MHD_YES;
}

/* ---------------------------------------------------------------- blobs */

/* The upload's store and its temp file, without the store's lock: a client may take its time
 * (or stall) sending the bytes, and rm and gc must not wait on it meanwhile. The lock is taken
 * when the body is complete (blobs), for the commit only. A read-only store fails here, clearly. */
static int upload_open(req *r)
{
    int rc;

    if ((rc = store_open(&r->st, r->srv->home)) < 0 || (rc = store_blob_writer_open(r->st, &r->bw)) < 0)
        return rc;
    return 0;
}

/* Everything the upload holds: temp file, lock, store. Done with the request (http.c) too. */
void ollama_upload_close(req *r)
{
    blob_writer_abort(r->bw);
    store_txn_abort(r->txn);
    store_close(r->st);
    r->bw = NULL;
    r->txn = NULL;
    r->st = NULL;
}

void ollama_blob_upload(req *r, const char *data, size_t len)
{
    const char *digest = r->url + strlen("/api/blobs/");

    if (r->upload_failed)
        return;
    if (!r->bw) {
        if (!blob_digest_valid(digest)) {
            r->upload_failed = 400;
            snprintf(r->upload_msg, sizeof r->upload_msg, "digest '%.100s': expected sha256:<64 hex>", digest);
            return;
        }
        if (upload_open(r) < 0)
            goto fail;
    }
    if (r->upload_n + len > SERVER_MAX_BLOB_BODY) {
        r->upload_failed = 413;
        snprintf(r->upload_msg, sizeof r->upload_msg, "blob over the limit of %llu bytes",
                 (unsigned long long)SERVER_MAX_BLOB_BODY);
        return;
    }
    r->upload_n += len;
    if (blob_writer_write(r->bw, data, len) == 0)
        return;
fail:
    r->upload_failed = 500;
    snprintf(r->upload_msg, sizeof r->upload_msg, "%s", ms_err_msg());
}

static enum MHD_Result blobs(req *r)
{
    const char *digest = r->url + strlen("/api/blobs/");
    ms_digest got;
    char msg[512];
    int rc;

    if (!blob_digest_valid(digest))
        return srv_err_ollama(r, 400, "digest '%.100s': expected sha256:<64 hex>", digest);
    /* HEAD only looks for the file: re-hashing it here would let anyone who can name a digest
     * keep the server reading whole blobs. The bytes are checked where they are used (a create
     * hashes the GGUF as it imports it, and removes a damaged upload so that the next HEAD
     * answers 404 and the client sends it again). */
    if (strcmp(r->method, "HEAD") == 0) {
        store *s = NULL;
        int found = store_open(&s, r->srv->home) == 0 && store_blob_exists(s, digest, NULL);

        store_close(s);
        return srv_respond(r, found ? 200 : 404, NULL, "", 0);
    }
    if (strcmp(r->method, "POST") != 0)
        return srv_err_ollama(r, 405, "method %s not allowed on /api/blobs", r->method);
    if (r->upload_failed)
        return srv_err_ollama(r, (unsigned)r->upload_failed, "%s", r->upload_msg);
    if (!r->bw && upload_open(r) < 0) { /* an empty body is a blob too */
        ollama_upload_close(r);
        return srv_err_ollama(r, 500, "%s", ms_err_msg());
    }
    /* durable under blobs/ now, and unnamed until a create names it (as ollama's blobs are); the
     * transaction holds the lock from here to the flush, so gc cannot remove it in between */
    if ((rc = store_txn_begin(&r->txn, r->st)) == 0) {
        rc = store_txn_blob_add(r->txn, got, NULL, r->bw, digest);
        r->bw = NULL;
    }
    if (rc == 0)
        rc = store_txn_flush(r->txn);
    if (rc < 0) /* "digest mismatch: expected ..., got ... (N bytes)" or why the write failed */
        snprintf(msg, sizeof msg, "%s", ms_err_msg());
    ollama_upload_close(r);
    if (rc < 0)
        return srv_err_ollama(r, rc == MS_EMISMATCH ? 400 : 500, "%s", msg);
    return srv_respond(r, 201, NULL, "", 0);
}

/* ---------------------------------------------------------------- routing */

enum MHD_Result ollama_route(req *r)
{
    const char *u = r->url, *m = r->method;
    int get = strcmp(m, "GET") == 0 || strcmp(m, "HEAD") == 0, post = strcmp(m, "POST") == 0;

    if (strncmp(u, "/api/blobs/", 11) == 0)
        return blobs(r);
    if (strcmp(u, "/api/generate") == 0 && post)
        return generate(r, 0);
    if (strcmp(u, "/api/chat") == 0 && post)
        return generate(r, 1);
    if (strcmp(u, "/api/tags") == 0 && get)
        return tags(r);
    if (strcmp(u, "/api/show") == 0 && post)
        return show(r);
    if (strcmp(u, "/api/ps") == 0 && get)
        return srv_json(r, 200, srv_models_ps(r->srv));
    if (strcmp(u, "/api/version") == 0 && get)
        return srv_json(r, 200, json_pack("{s:s}", "version", SERVER_VERSION));
    if (strcmp(u, "/api/copy") == 0 && post)
        return copy_or_delete(r, 0);
    if (strcmp(u, "/api/delete") == 0 && strcmp(m, "DELETE") == 0)
        return copy_or_delete(r, 1);
    if (strcmp(u, "/api/pull") == 0 && post)
        return pull_push(r, 0);
    if (strcmp(u, "/api/push") == 0 && post)
        return pull_push(r, 1);
    if (strcmp(u, "/api/create") == 0 && post)
        return create(r);
    if (strcmp(u, "/api/embed") == 0 && post)
        return embed_handle(r, EMBED_OLLAMA);
    if (strcmp(u, "/api/embeddings") == 0 && post)
        return embed_handle(r, EMBED_OLLAMA_OLD);
    return srv_err_ollama(r, 404, "no such endpoint: %s %s", m, u);
}
