/* models.c: models stay loaded between requests; one load shared by all; keep_alive expiry. */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blob/blob.h"
#include "chat/chat.h"
#include "server/server_int.h"

static void unload_model_only(loaded *L)
{
    for (int i = 0; L->slot && i < L->n_par; i++) /* a load that failed may have none yet */
        session_free(L->slot[i]);
    MS_FREE_ALL(L->slot, L->slot_used, L->slot_busy);
    runtime_model_close(L->m);
    pthread_mutex_destroy(&L->run);
    pthread_cond_destroy(&L->run_cv);
}

static void unload(loaded *L)
{
    if (!L)
        return;
    unload_model_only(L);
    store_model_close(L->sm); /* after the model: its weights are views into the handle */
    store_close(L->s);
    free(L);
}

int srv_model_name(model_name *out, const char *model)
{
    if (!model || !*model)
        return ms_err(MS_EINVALID, "model: required");
    if (name_parse(out, model) < 0)
        return ms_err_ctx("model");
    return 0;
}

/* A model that could not be opened or loaded for want of memory or descriptors is the server's
 * condition, not the request's: MS_EBUSY (503; a load first gives back every unused model and
 * tries once more). */
static int out_of_resources(int rc, int err)
{
    return rc == MS_ENOMEM || err == EMFILE || err == ENFILE || err == ENOMEM;
}

/* MS_EBUSY with the failure's own message kept (copied: ms_err writes where it reads). */
static int busy(const char *what)
{
    char why[512];

    snprintf(why, sizeof why, "%s", ms_err_msg());
    return ms_err(MS_EBUSY, "not enough resources to %s the model now (%s): try again later", what, why);
}

int srv_model_open(srv_model *out, server *srv, const char *model)
{
    int rc;

    memset(out, 0, sizeof *out);
    if ((rc = srv_model_name(&out->name, model)) < 0)
        return rc;
    errno = 0;
    if ((rc = store_open(&out->s, srv->home)) == 0)
        rc = store_model_open(&out->sm, out->s, &out->name);
    if (rc < 0 && rc != MS_ENOTFOUND && out_of_resources(rc, errno))
        rc = busy("open");
    if (rc < 0)
        srv_model_close(out);
    if (rc == MS_ENOTFOUND)
        return ms_err(MS_ENOTFOUND, "model '%s' not found, try pulling it first", model);
    return rc;
}

void srv_model_close(srv_model *m)
{
    store_model_close(m->sm);
    store_close(m->s);
    m->sm = NULL;
    m->s = NULL;
}

/* The model's config, read from its config blob without loading it (malloc'd: about 4 KiB of
 * rope factors, not for the stack of a connection's thread); NULL when it does not read. */
static runtime_config *config_read(store_model *sm)
{
    const uint8_t *data;
    size_t len;
    runtime_config *c;

    if (!sm || store_model_config(&data, &len, sm) < 0 || !(c = malloc(sizeof *c)))
        return NULL;
    if (runtime_config_from_json(c, (const char *)data, len, "config") < 0) {
        free(c);
        return NULL;
    }
    return c;
}

static int caps_of(const runtime_config *c)
{
    if (!c)
        return 0;
    /* an encoder, or a decoder that names a pooling (Qwen3-Embedding), is an embedding model */
    return c->encoder || (c->pooling >= RUNTIME_POOL_MEAN && c->pooling <= RUNTIME_POOL_LAST) ? SRV_CAN_EMBED
                                                                                             : SRV_CAN_COMPLETE;
}

/* Requests a load runs at once (its sequences): server_opts.parallel when set; else
 * SERVER_DEFAULT_PARALLEL, fewer when their KV caches (n_ctx positions each) would take more
 * than a quarter of the memory available now, at least 1. An embedding model: 1 (runtime_embed
 * runs alone). */
static int parallel_for(const server *srv, const runtime_config *c, int n_ctx)
{
    long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    uint64_t per, avail = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
    int n = srv->o.parallel > 0 ? srv->o.parallel : SERVER_DEFAULT_PARALLEL;

    if (!c || caps_of(c) == SRV_CAN_EMBED)
        return 1;
    per = (uint64_t)c->n_layers * (uint64_t)runtime_config_ctx(c, n_ctx) *
          runtime_config_kv_row_nbytes(c, srv->o.ro.kv_f16);
    while (srv->o.parallel <= 0 && n > 1 && avail && per * (uint64_t)n > avail / 4)
        n--;
    return n;
}

/* A num_ctx past the model's context length asks for that length, as ollama clamps it: chat UIs
 * send one num_ctx to every model. (Before, such a request unloaded the model and failed.) */
static int ctx_clamp(const runtime_config *c, int num_ctx)
{
    return c && c->ctx_len > 0 && num_ctx > c->ctx_len ? c->ctx_len : num_ctx;
}

/* Load from the request's handle, which L takes (its mappings are the weights' views). */
static int load(loaded **out, server *srv, srv_model *req_m, const char *shown, int num_ctx)
{
    loaded *L = calloc(1, sizeof *L);
    runtime_opts ro = srv->o.ro;
    runtime_config *c;
    const uint8_t *tmpl = NULL;
    size_t tmpl_len = 0;
    int rc;

    assert(req_m->sm); /* opened by srv_model_open, not yet taken by another load */
    *out = NULL;
    if (!L)
        return ms_err(MS_ENOMEM, "out of memory");
    c = config_read(req_m->sm);
    pthread_mutex_init(&L->run, NULL);
    pthread_cond_init(&L->run_cv, NULL);
    snprintf(L->name, sizeof L->name, "%s", shown);
    name_display(L->shown, sizeof L->shown, &req_m->name);
    L->s = req_m->s, L->sm = req_m->sm;
    req_m->s = NULL, req_m->sm = NULL;
    L->n_ctx_asked = num_ctx = ctx_clamp(c, num_ctx);
    if (num_ctx > 0)
        ro.n_ctx = num_ctx;
    ro.n_seq = L->n_par = parallel_for(srv, c, ro.n_ctx);
    free(c);
    /* The model handle stays open with the model: the weights' mappings are its views. One
     * handle gives the digest, the weights and the template (session_new copies the text). */
    if ((rc = runtime_model_open(&L->m, L->sm, &ro)) < 0 ||
        (rc = runtime_weights_tokenizer(&L->t, runtime_model_weights(L->m))) < 0)
        goto fail;
    snprintf(L->digest, sizeof L->digest, "%s", store_model_digest(L->sm));
    rc = store_model_find(&tmpl, &tmpl_len, L->sm, MT_TEMPLATE, NULL);
    if (rc < 0 && rc != MS_ENOTFOUND)
        goto fail;
    if (!(L->slot = calloc((size_t)L->n_par, sizeof *L->slot)) ||
        !(L->slot_used = calloc((size_t)L->n_par, sizeof *L->slot_used)) ||
        !(L->slot_busy = calloc((size_t)L->n_par, sizeof *L->slot_busy))) {
        rc = ms_err(MS_ENOMEM, "out of memory");
        goto fail;
    }
    for (int i = 0; i < L->n_par; i++) {
        if ((rc = session_new(&L->slot[i], L->m, L->t, (const char *)tmpl, tmpl_len)) < 0)
            goto fail;
        session_seq_set(L->slot[i], i);
    }
    L->S = L->slot[0];
    L->sized = runtime_model_pooling(L->m) == RUNTIME_POOL_NONE;
    /* what a request without num_ctx gets: the context a load without one has */
    L->ctx_default = runtime_config_ctx(runtime_model_config(L->m), srv->o.ro.n_ctx);
    L->nbytes = runtime_weights_nbytes(runtime_model_weights(L->m)) + runtime_model_kv_nbytes(L->m);
    *out = L;
    return 0;
fail:
    /* the handle goes back to the request, which may try again once others are unloaded */
    unload_model_only(L);
    req_m->s = L->s, req_m->sm = L->sm;
    free(L);
    return rc;
}

/* Loads not in use whose name now resolves elsewhere (`mstore cp` over it, a pull) are stale:
 * no request reaches them by that name again, and /api/ps must not show the name with the old
 * digest. Unloaded now when unused, else when their requests end. Called with srv->mu held. */
static void drop_stale(server *srv, const char *name, const char *digest)
{
    loaded **pp = &srv->models, *L;

    while ((L = *pp)) {
        if (strcmp(L->name, name) == 0 && strcmp(L->digest, digest) != 0) {
            L->unload_asap = 1;
            if (L->refs == 0) {
                *pp = L->next;
                unload(L);
                continue;
            }
        }
        pp = &L->next;
    }
}

/* Make room for one more load under the cap: unload the least recently used model that no
 * request holds. 0 when there is room; 1 when every loaded model is in use (then the caller
 * waits for a release). Called with srv->mu held. */
static int make_room(server *srv, int cap)
{
    loaded **pp, **lru = NULL, *L;
    int n = 0;

    for (pp = &srv->models; (L = *pp); pp = &L->next) {
        n++;
        if (L->refs == 0 && (!lru || L->last_used < (*lru)->last_used))
            lru = pp;
    }
    if (n < cap)
        return 0;
    if (!lru)
        return 1;
    L = *lru;
    *lru = L->next;
    unload(L);
    return 0;
}

int srv_model_acquire(server *srv, srv_model *m, int num_ctx, loaded **out)
{
    char shown[400], digest[sizeof(ms_digest)];
    int cap = srv->o.max_loaded > 0 ? srv->o.max_loaded : SERVER_DEFAULT_MAX_LOADED;
    loaded *L = NULL, **pp;
    int rc = 0, retried = 0;

    *out = NULL;
    assert(m->sm);
    name_format(shown, sizeof shown, &m->name);
    snprintf(digest, sizeof digest, "%s", store_model_digest(m->sm));
    pthread_mutex_lock(&srv->mu);
    drop_stale(srv, shown, digest);
    for (;;) {
        if (srv->stopping) {
            rc = ms_err(MS_EBUSY, "the server is stopping");
            L = NULL;
            break;
        }
        /* One load per manifest digest: every name of one manifest shares it, and a name whose
         * manifest changed reaches the new one. */
        for (pp = &srv->models; (L = *pp); pp = &L->next)
            if (strcmp(L->digest, digest) == 0)
                break;
        /* A request's context is its own (no num_ctx asks for the default): a generating load
         * sizes the request's session from its pool, so only a context past what the pool holds
         * reloads, once the model is free; an embedding load reloads for another context, as
         * ollama's loads do. No request changes what later ones get. */
        if (L && (L->sized ? srv_model_ctx(L, num_ctx) > runtime_model_max_ctx(L->m)
                           : ctx_clamp(runtime_model_config(L->m), num_ctx) != L->n_ctx_asked)) {
            if (L->refs > 0) {
                pthread_cond_wait(&srv->cv, &srv->mu);
                continue;
            }
            *pp = L->next;
            unload(L);
            L = NULL;
        }
        if (L)
            break;
        if (make_room(srv, cap)) {
            pthread_cond_wait(&srv->cv, &srv->mu);
            continue;
        }
        /* Loading holds the list lock: two clients asking for one model at once load it once. */
        errno = 0;
        if ((rc = load(&L, srv, m, shown, num_ctx)) == 0) {
            L->next = srv->models;
            srv->models = L;
            break;
        }
        if (!out_of_resources(rc, errno))
            break;
        if (retried) {
            rc = busy("load");
            break;
        }
        retried = 1;
        while (!make_room(srv, 1) && srv->models) /* every unused model, then once more */
            ;
    }
    if (L) {
        L->refs++;
        L->expires = 0;
        L->last_used = ++srv->n_uses;
        name_display(L->shown, sizeof L->shown, &m->name); /* /api/ps names the last name used */
        snprintf(L->name, sizeof L->name, "%s", shown);
    }
    pthread_mutex_unlock(&srv->mu);
    if (rc < 0)
        return rc;
    *out = L;
    return 0;
}

int srv_model_ctx(const loaded *L, int num_ctx)
{
    return num_ctx > 0 ? ctx_clamp(runtime_model_config(L->m), num_ctx) : L->ctx_default;
}

/* The free session to give a request whose prompt is `text`, in a context of ctx: the one whose
 * cache holds the longest start of it at that size (a chat's next turn finds its conversation),
 * else one of that size, else the least recently used (the others keep their caches for their
 * own next turns). */
static int slot_choose(const loaded *L, const char *text, size_t len, int ctx)
{
    int best = -1, best_fit = 0;
    size_t best_n = 0;

    for (int i = 0; i < L->n_par; i++) {
        int fit = !L->sized || ctx <= 0 || session_ctx(L->slot[i]) == ctx;
        size_t n;
        if (L->slot_busy[i])
            continue;
        n = text && fit ? session_cached_prefix(L->slot[i], text, len) : 0;
        if (best < 0 || n > best_n ||
            (n == best_n && (fit > best_fit || (fit == best_fit && L->slot_used[i] < L->slot_used[best]))))
            best = i, best_n = n, best_fit = fit;
    }
    return best;
}

/* Size free session i for ctx (0, or an embedding load: as it is), idle sessions giving up
 * their caches' room while the pool has none, least recently used first: 0, MS_EBUSY while
 * busy sessions hold the room, or runtime_seq_set_ctx's other errors. Called with L->run held. */
static int slot_size(loaded *L, int i, int ctx)
{
    int rc = 0;

    while (L->sized && ctx > 0 && (rc = session_ctx_set(L->slot[i], ctx)) == MS_EBUSY) {
        int lru = -1;
        for (int k = 0; k < L->n_par; k++)
            if (k != i && !L->slot_busy[k] && session_ctx(L->slot[k]) > 0 &&
                (lru < 0 || L->slot_used[k] < L->slot_used[lru]))
                lru = k;
        if (lru < 0)
            return MS_EBUSY;
        if ((rc = session_ctx_set(L->slot[lru], 0)) < 0)
            return rc;
    }
    return rc;
}

int srv_model_lock(session **out, loaded *L, const char *text, size_t len, int ctx)
{
    uint64_t ticket;
    int i = -1, rc = 0;

    *out = NULL;
    pthread_mutex_lock(&L->run);
    ticket = L->tickets++;
    /* in arrival order: the first in line waits for a free session, then for its room */
    while (ticket != L->serving || (i = slot_choose(L, text, len, ctx)) < 0 || (rc = slot_size(L, i, ctx)) == MS_EBUSY)
        pthread_cond_wait(&L->run_cv, &L->run);
    L->serving++;
    if (rc == 0) {
        L->slot_busy[i] = 1;
        L->slot_used[i] = ++L->n_slot_uses;
    }
    pthread_cond_broadcast(&L->run_cv); /* the next in line may find another session free */
    pthread_mutex_unlock(&L->run);
    if (rc < 0)
        return rc;
    session_active_set(L->slot[i], 1);
    *out = L->slot[i];
    return 0;
}

void srv_model_release(server *srv, loaded *L, session *S, int keep_alive_s)
{
    if (S) {
        session_active_set(S, 0);
        pthread_mutex_lock(&L->run);
        L->slot_busy[session_seq(S)] = 0;
        pthread_cond_broadcast(&L->run_cv);
        pthread_mutex_unlock(&L->run);
    }
    pthread_mutex_lock(&srv->mu);
    L->refs--;
    L->expires = keep_alive_s < 0 ? 0 : time(NULL) + keep_alive_s;
    L->unload_asap = keep_alive_s == 0;
    pthread_cond_broadcast(&srv->cv);
    pthread_mutex_unlock(&srv->mu);
}

void srv_model_unload(server *srv, const srv_model *m)
{
    char shown[400];

    name_format(shown, sizeof shown, &m->name);
    pthread_mutex_lock(&srv->mu);
    for (loaded *L = srv->models; L; L = L->next)
        if (m->sm ? strcmp(L->digest, store_model_digest(m->sm)) == 0 : strcmp(L->name, shown) == 0)
            L->unload_asap = 1;
    pthread_cond_broadcast(&srv->cv);
    pthread_mutex_unlock(&srv->mu);
}

void srv_model_renamed(server *srv, const model_name *name, const char *digest)
{
    char shown[400];

    name_format(shown, sizeof shown, name);
    pthread_mutex_lock(&srv->mu);
    drop_stale(srv, shown, digest);
    pthread_cond_broadcast(&srv->cv);
    pthread_mutex_unlock(&srv->mu);
}

/* Unload what expired; with all, everything not in use. Called with srv->mu held. */
static void sweep(server *srv, int all)
{
    time_t now = time(NULL);
    loaded **pp = &srv->models, *L;

    while ((L = *pp)) {
        if (L->refs == 0 && (all || L->unload_asap || (L->expires && L->expires <= now))) {
            *pp = L->next;
            unload(L);
        } else {
            pp = &L->next;
        }
    }
}

static void *reaper(void *arg)
{
    server *srv = arg;

    pthread_mutex_lock(&srv->mu);
    while (!srv->stopping) {
        struct timespec ts;
        sweep(srv, 0);
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 1;
        pthread_cond_timedwait(&srv->cv, &srv->mu, &ts);
    }
    pthread_mutex_unlock(&srv->mu);
    return NULL;
}

json_t *srv_models_ps(server *srv)
{
    json_t *arr = json_array();
    char when[64];

    pthread_mutex_lock(&srv->mu);
    for (loaded *L = srv->models; L; L = L->next) {
        const runtime_config *c = runtime_model_config(L->m);
        /* ollama's: the bytes on the GPU; a model runs wholly on one device here */
        json_int_t vram = strncmp(runtime_model_device(L->m), "cpu", 3) == 0 ? 0 : (json_int_t)L->nbytes;
        time_t exp = L->expires ? L->expires : (time_t)253402300799; /* 9999-12-31: forever */
        srv_time_rfc3339(when, sizeof when, L->refs ? time(NULL) + srv->o.keep_alive_s : exp);
        json_array_append_new(arr, json_pack("{s:s,s:s,s:I,s:s,s:{s:s,s:s,s:[s],s:s,s:s},s:s,s:I,s:i}", "name",
                                             L->shown, "model", L->shown, "size", (json_int_t)L->nbytes, "digest",
                                             blob_digest_hex(L->digest), "details", "format", "mstore", "family",
                                             c->architecture, "families", c->architecture, "parameter_size", "",
                                             "quantization_level", "", "expires_at", when, "size_vram", vram,
                                             "context_length", runtime_model_n_ctx(L->m)));
    }
    pthread_mutex_unlock(&srv->mu);
    return json_pack("{s:o}", "models", arr);
}

int srv_models_start(server *srv)
{
    if (pthread_create(&srv->reaper, NULL, reaper, srv) != 0)
        return ms_err(MS_ENOMEM, "cannot start the model reaper thread");
    srv->reaper_started = 1;
    return 0;
}

typedef struct {
    server *srv;
    void *(*fn)(void *);
    void *arg;
} job;

static void job_done(server *srv)
{
    pthread_mutex_lock(&srv->mu);
    srv->n_jobs--;
    pthread_cond_broadcast(&srv->cv);
    pthread_mutex_unlock(&srv->mu);
}

/* The job's thread is detached: once it says it is done the server may stop and the process
 * exit before the thread's own exit has run, so it frees its per-thread state first. */
static void *job_main(void *arg)
{
    job jb = *(job *)arg;

    free(arg);
    jb.fn(jb.arg);
    blob_hash_thread_end();
    job_done(jb.srv);
    return NULL;
}

int srv_job_spawn(server *srv, void *(*fn)(void *), void *arg)
{
    pthread_attr_t attr;
    pthread_t t;
    job *jb;
    int rc;

    if (!(jb = malloc(sizeof *jb)))
        return -1;
    *jb = (job){srv, fn, arg};
    pthread_mutex_lock(&srv->mu);
    srv->n_jobs++;
    pthread_mutex_unlock(&srv->mu);
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    rc = pthread_create(&t, &attr, job_main, jb);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        free(jb);
        job_done(srv);
        return -1;
    }
    return 0;
}

void srv_models_cancel(server *srv)
{
    pthread_mutex_lock(&srv->mu);
    __atomic_store_n(&srv->stopping, 1, __ATOMIC_RELAXED); /* read without the lock between tokens */
    pthread_cond_broadcast(&srv->cv);
    pthread_mutex_unlock(&srv->mu);
}

void srv_models_stop(server *srv)
{
    pthread_mutex_lock(&srv->mu);
    srv->stopping = 1;
    pthread_cond_broadcast(&srv->cv);
    while (srv->n_jobs > 0) /* streams see their pipe closed and end at their next token */
        pthread_cond_wait(&srv->cv, &srv->mu);
    pthread_mutex_unlock(&srv->mu);
    if (srv->reaper_started)
        pthread_join(srv->reaper, NULL);
    pthread_mutex_lock(&srv->mu);
    sweep(srv, 1);
    pthread_mutex_unlock(&srv->mu);
}

int srv_model_caps(store_model *sm)
{
    runtime_config *c = config_read(sm);
    int caps = caps_of(c);

    free(c);
    return caps;
}

