/* think.c: ollama's think and OpenAI's reasoning_effort, between the request, the template and
 * the answer: whether the model can think, and the answer's reasoning split off into
 * `thinking` (ollama) / `reasoning_content` (OpenAI), streamed or whole. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server_int.h"

int srv_template_thinks(const char *text, size_t len, int *effort, int *harmony)
{
    chat_template *t = NULL;
    int thinks = 0;

    if (effort)
        *effort = 0;
    if (harmony)
        *harmony = 0;
    if (chat_template_new(&t, text, len, NULL, NULL) == 0) {
        thinks = chat_template_thinks(t);
        if (effort)
            *effort = chat_template_effort(t);
        if (harmony)
            *harmony = chat_template_harmony(t);
    }
    chat_template_free(t);
    return thinks;
}

int gen_think_check(gen_job *j)
{
    const uint8_t *data = NULL;
    size_t len = 0;
    int rc, thinks, effort, harmony;

    j->think_on = 0, j->harmony = 0;
    if (j->kind == GEN_OPENAI_COMPLETION) /* not templated: reasoning_effort "none" at most */
        return 0;
    rc = store_model_find(&data, &len, j->ref.sm, MT_TEMPLATE, NULL);
    if (rc < 0 && rc != MS_ENOTFOUND)
        return rc;
    /* the stored template is the one the loaded session renders with */
    thinks = srv_template_thinks(rc == 0 ? (const char *)data : NULL, rc == 0 ? len : 0, &effort, &harmony);
    if (j->think >= CHAT_THINK_MINIMAL && !effort) {
        if (j->kind == GEN_OLLAMA_CHAT || j->kind == GEN_OLLAMA_GENERATE)
            return ms_err(MS_EINVALID, "think value \"%s\" is not supported for this model (its template reads no "
                                       "reasoning_effort, as gpt-oss's does): use true or false",
                          chat_think_effort(j->think));
        j->think = CHAT_THINK_ON; /* OpenAI's levels: the <think> models have none, any of them is on */
    }
    if (!thinks) {
        if (j->think == CHAT_THINK_ON) /* ollama's words; false or unset render as they always did */
            return ms_err(MS_EINVALID, "\"%s\" does not support thinking", j->model);
        return 0; /* a level for a template that reads it, and no <think> block to split off */
    }
    if (j->think < 0) /* ollama: a model that can think does unless the request says not to */
        j->think = CHAT_THINK_ON;
    j->think_on = j->think >= CHAT_THINK_ON;
    /* A raw prompt is the client's: its answer comes back as the model wrote it. Otherwise, as
     * ollama's harmony parser does, the analysis is the thinking whatever think says: gpt-oss
     * always reasons (think false only leaves the template's effort line out). */
    if (harmony && !j->raw) {
        j->harmony = 1, j->think_on = 1;
        chat_harmony_init(&j->hsplit);
        return 0;
    }
    chat_think_init(&j->split);
    return 0;
}

void gen_think_prompt(gen_job *j, const char *prompt, size_t len)
{
    if (j->think_on && !j->harmony && chat_think_prefilled(prompt, len))
        chat_think_feed(&j->split, "<think>", 7, NULL, NULL); /* a whole tag: nothing comes out */
}

typedef struct piece_ctx {
    gen_job *j;
    int (*content)(gen_job *, const char *, size_t);
} piece_ctx;

static int piece(void *ctx, int thinking, const char *s, size_t len)
{
    piece_ctx *p = ctx;
    gen_job *j = p->j;

    if (!thinking)
        return p->content(j, s, len);
    if (j->fd >= 0)
        return gen_send_obj(j, gen_chunk(j, s, len, 1)) < 0; /* non-zero: the client is gone, stop */
    return ms_text_put(&j->thinking, s, len) < 0; /* out of memory: stop */
}

/* The call being gathered is whole: its arguments as compact JSON when they read as an object,
 * "{}" when there are none, else as the model wrote them (OpenAI's clients get that text;
 * ollama's an empty object). */
static int call_close(gen_job *j)
{
    chat_tool_call *c = j->n_calls ? &j->calls[j->n_calls - 1] : NULL;
    const char *raw = j->call_args.p ? j->call_args.p : "";
    json_t *v;

    if (!c || c->arguments)
        return 0;
    v = json_loadb(raw, j->call_args.n, 0, NULL);
    c->arguments = json_is_object(v) ? json_dumps(v, JSON_COMPACT | JSON_PRESERVE_ORDER)
                   : j->call_args.n  ? ms_strdup_printf("%.*s", (int)j->call_args.n, raw)
                                     : ms_strdup_printf("{}");
    json_decref(v);
    j->call_args.n = 0;
    return c->arguments == NULL;
}

#define HARMONY_MAX_CALLS 64

static int call_open(gen_job *j, const char *name, size_t len)
{
    chat_tool_call *c;

    if (call_close(j))
        return 1;
    if (j->n_calls == HARMONY_MAX_CALLS)
        return 0; /* beyond any sane answer: dropped */
    if (!(c = realloc(j->calls, (j->n_calls + 1) * sizeof *c)))
        return 1;
    j->calls = c;
    c = &j->calls[j->n_calls];
    memset(c, 0, sizeof *c);
    if (!(c->name = ms_strdup_printf("%.*s", (int)len, name)))
        return 1;
    j->n_calls++;
    return 0;
}

static int hpiece(void *ctx, int kind, const char *s, size_t len)
{
    piece_ctx *p = ctx;
    gen_job *j = p->j;

    switch (kind) {
    case CHAT_HARMONY_THINKING:
        return piece(ctx, 1, s, len);
    case CHAT_HARMONY_CALL:
        return call_open(j, s, len);
    case CHAT_HARMONY_ARGS:
        /* past the bound, the calls no one keeps have their arguments dropped */
        return j->n_calls && !j->calls[j->n_calls - 1].arguments && ms_text_put(&j->call_args, s, len) < 0;
    default:
        return p->content(j, s, len);
    }
}

int gen_think_emit(gen_job *j, const char *text, size_t len, int (*content)(gen_job *, const char *, size_t))
{
    piece_ctx p = {j, content};

    if (j->harmony) {
        j->lp_fed += len;
        return chat_harmony_feed(&j->hsplit, text, len, hpiece, &p);
    }
    if (!j->think_on)
        return content(j, text, len);
    j->lp_fed += len;   /* where the content pieces end (emit_content's logprobs) */
    return chat_think_feed(&j->split, text, len, piece, &p);
}

int gen_think_end(gen_job *j, int (*content)(gen_job *, const char *, size_t))
{
    piece_ctx p = {j, content};

    if (j->harmony) {
        int rc = chat_harmony_end(&j->hsplit, hpiece, &p);
        return rc ? rc : call_close(j);
    }
    return j->think_on ? chat_think_end(&j->split, piece, &p) : 0;
}
