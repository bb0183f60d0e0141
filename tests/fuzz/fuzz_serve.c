/* fuzz_serve.c: libFuzzer target for what `mstore serve` reads from a request before any work:
 * the Origin check against an allow list (srv_origins_new parses MSTORE_ORIGINS), the Host
 * check (srv_host_allowed), and a JSON request body as the handlers read it (jansson, duplicates
 * refused, as srv_body_json) into the option table (model_opts_from_json: ollama's "options",
 * OpenAI's top-level fields), and each endpoint's reading of its body (request.c: /api/generate,
 * /api/chat, /v1/completions, /v1/chat/completions; srv_embed_fields: /api/embed,
 * /api/embeddings, /v1/embeddings; modelfile_from_request: /api/create). The first byte picks
 * the parser (0 origin, 1 host, 2 options, 3-6 the four generation endpoints, 7 create, 8-10
 * the three embedding endpoints); an origin input is "LIST\nORIGIN". Each must answer yes or no, or refuse with a
 * message, and keep the promises the server relies on: the defaults are always allowed, no
 * Origin is always allowed, a port does not change a Host's answer, accepted options are inside
 * the table, an accepted body's messages all have a role and a content, an accepted embedding
 * request's inputs are each a text or token ids within the limits, and what a refusal left
 * behind is freed. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "modelfile/modelfile.h"
#include "server/server_int.h"

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "fuzz_serve: %s:%d: %s (%s)\n", __FILE__, __LINE__, #c, ms_err_msg()); \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static char *cstr(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);

    CHECK(s);
    memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

static void origin(const uint8_t *data, size_t size)
{
    char *in = cstr(data, size), *nl = strchr(in, '\n');
    srv_origins *o = NULL;

    if (nl)
        *nl = '\0';
    ms_err_clear();
    if (srv_origins_new(&o, in) < 0) {
        CHECK(o == NULL && strstr(ms_err_msg(), "MSTORE_ORIGINS"));
    } else {
        int a = srv_origin_allowed(o, nl ? nl + 1 : in);
        CHECK(a == 0 || a == 1);
        CHECK(srv_origin_allowed(o, NULL) == 1);
        CHECK(srv_origin_allowed(o, "http://localhost:11434") == 1);
        CHECK(srv_origin_allowed(o, "https://127.0.0.1") == 1);
        srv_origins_free(o);
    }
    free(in);
}

static void host(const uint8_t *data, size_t size)
{
    char *h = cstr(data, size), with_port[600];
    int a = srv_host_allowed(h, "fuzzhost");

    CHECK(a == 0 || a == 1);
    /* "name" and "name:port" get one answer (a bare name: no colon, no brackets) */
    if (size > 0 && size < 500 && h[0] != '[' && !strchr(h, ':') && strlen(h) == size) {
        snprintf(with_port, sizeof with_port, "%s:11434", h);
        CHECK(srv_host_allowed(with_port, "fuzzhost") == a);
    }
    free(h);
}

static void body(const uint8_t *data, size_t size)
{
    json_error_t e;
    json_t *b = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &e), *o;
    model_opts mo;

    if (!b)
        return;
    for (int openai = 0; openai <= 1; openai++) {
        model_opts_defaults(&mo);
        o = openai ? b : json_object_get(b, "options");
        ms_err_clear();
        if (!json_is_object(o))
            continue;
        if (model_opts_from_json(&mo, o, openai ? NULL : "options.", openai) < 0) {
            CHECK(ms_err_msg()[0]);
            continue;
        }
        /* what the table's bounds promise every reader */
        CHECK(mo.n_predict >= -2 && mo.n_predict <= 1 << 24 && mo.n_ctx >= 0 && mo.n_ctx <= 1 << 22);
        CHECK(mo.so.temp >= 0 && mo.so.temp <= 100 && mo.so.top_k >= 0);
        CHECK(mo.so.top_p >= 0 && mo.so.top_p <= 1 && mo.so.min_p >= 0 && mo.so.min_p <= 1);
    }
    json_decref(b);
}

/* An endpoint's reading of a whole body: which = 0 generate, 1 chat, 2 completions, 3 chat
 * completions, 4 create. */
static void endpoint(const uint8_t *data, size_t size, int which)
{
    json_error_t e;
    json_t *b = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &e);
    const char *prompt = NULL, *system = NULL, *model = NULL;
    gen_job j;
    int rc;

    if (!b)
        return;
    ms_err_clear();
    if (which == 4) {
        modelfile *mf = NULL;
        rc = modelfile_from_request(&mf, b);
        CHECK(rc == 0 ? mf != NULL : mf == NULL && ms_err_msg()[0]);
        modelfile_free(mf);
        json_decref(b);
        return;
    }
    memset(&j, 0, sizeof j);
    model_opts_defaults(&j.mo);
    rc = which < 2 ? srv_ollama_fields(&j, b, which, &prompt, &system) : srv_openai_fields(&j, b, which == 3, &model);
    if (rc < 0) {
        CHECK(ms_err_msg()[0]);
    } else {
        for (size_t i = 0; i < j.n_msgs; i++)
            CHECK(j.msgs[i].role && j.msgs[i].content);
        CHECK(j.g.n_stops <= SESSION_MAX_STOPS);
        CHECK(j.mo.so.temp >= 0 && j.mo.so.top_p >= 0 && j.mo.so.top_p <= 1);
        CHECK(which != 2 || j.prompt);
    }
    srv_request_fields_free(&j);
    json_decref(b);
}

/* An embedding endpoint's reading of a whole body (request.c, srv_embed_fields). */
static void embed(const uint8_t *data, size_t size, embed_kind kind)
{
    json_error_t e;
    json_t *b = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &e);
    const char *model = NULL;
    embed_req r;
    size_t ids = 0;

    if (!b)
        return;
    ms_err_clear();
    if (srv_embed_fields(&r, b, kind, 300, &model) < 0) {
        CHECK(ms_err_msg()[0]);
    } else {
        CHECK(r.n <= SESSION_EMBED_MAX_INPUTS && (r.n == 0 || r.in));
        for (size_t i = 0; i < r.n; i++) {
            CHECK(r.in[i].text || r.in[i].n_ids == 0 || r.in[i].ids);
            CHECK(!r.in[i].text || kind != EMBED_OLLAMA_OLD || r.n == 1);
            for (size_t k = 0; !r.in[i].text && k < r.in[i].n_ids; k++)
                CHECK(r.in[i].ids[k] >= 0);
            ids += r.in[i].text ? 0 : r.in[i].n_ids;
        }
        CHECK(kind == EMBED_OPENAI ? r.n > 0 : ids == 0); /* token arrays are OpenAI's only */
        CHECK(ids <= SESSION_EMBED_MAX_IDS && r.dimensions >= 0 && r.dimensions <= 1 << 20);
        CHECK(!r.base64 || kind == EMBED_OPENAI);
    }
    srv_embed_fields_free(&r);
    json_decref(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    switch (data[0] % 11) {
    case 0:
        origin(data + 1, size - 1);
        break;
    case 1:
        host(data + 1, size - 1);
        break;
    case 2:
        body(data + 1, size - 1);
        break;
    case 8:
    case 9:
    case 10:
        embed(data + 1, size - 1, (embed_kind)(data[0] % 11 - 8));
        break;
    default:
        endpoint(data + 1, size - 1, data[0] % 11 - 3);
        break;
    }
    return 0;
}
