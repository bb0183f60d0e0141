/* think.c: ollama's think and OpenAI's reasoning_effort, between the request, the template and
 * the answer: whether the model can think, and the answer's reasoning split off into
 * `thinking` (ollama) / `reasoning_content` (OpenAI), streamed or whole. */
#include <stdio.h>
#include <string.h>

#include "server/server_int.h"

int srv_template_thinks(const char *text, size_t len, int *effort)
{
    chat_template *t = NULL;
    int thinks = 0;

    if (effort)
        *effort = 0;
    if (chat_template_new(&t, text, len, NULL, NULL) == 0) {
        thinks = chat_template_thinks(t);
        if (effort)
            *effort = chat_template_effort(t);
    }
    chat_template_free(t);
    return thinks;
}

int gen_think_check(gen_job *j)
{
    const uint8_t *data = NULL;
    size_t len = 0;
    int rc, thinks, effort;

    j->think_on = 0;
    if (j->kind == GEN_OPENAI_COMPLETION) /* not templated: reasoning_effort "none" at most */
        return 0;
    rc = store_model_find(&data, &len, j->ref.sm, MT_TEMPLATE, NULL);
    if (rc < 0 && rc != MS_ENOTFOUND)
        return rc;
    /* the stored template is the one the loaded session renders with */
    thinks = srv_template_thinks(rc == 0 ? (const char *)data : NULL, rc == 0 ? len : 0, &effort);
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
    chat_think_init(&j->split);
    return 0;
}

void gen_think_prompt(gen_job *j, const char *prompt, size_t len)
{
    if (j->think_on && chat_think_prefilled(prompt, len))
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

int gen_think_emit(gen_job *j, const char *text, size_t len, int (*content)(gen_job *, const char *, size_t))
{
    piece_ctx p = {j, content};

    if (!j->think_on)
        return content(j, text, len);
    j->lp_fed += len;   /* where the content pieces end (emit_content's logprobs) */
    return chat_think_feed(&j->split, text, len, piece, &p);
}

int gen_think_end(gen_job *j, int (*content)(gen_job *, const char *, size_t))
{
    piece_ctx p = {j, content};

    return j->think_on ? chat_think_end(&j->split, piece, &p) : 0;
}
