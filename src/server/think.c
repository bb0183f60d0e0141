/* think.c: ollama's think and OpenAI's reasoning_effort, between the request, the template and
 * the answer: whether the model can think, and the answer's reasoning split off into
 * `thinking` (ollama) / `reasoning_content` (OpenAI), streamed or whole. */
#include <stdio.h>
#include <string.h>

#include "server/server_int.h"

int srv_template_thinks(const char *text, size_t len)
{
    chat_template *t = NULL;
    int thinks = 0;

    if (chat_template_new(&t, text, len, NULL, NULL) == 0)
        thinks = chat_template_thinks(t);
    chat_template_free(t);
    return thinks;
}

int gen_think_check(gen_job *j)
{
    const uint8_t *data = NULL;
    size_t len = 0;
    int rc, thinks;

    j->think_on = 0;
    if (j->kind == GEN_OPENAI_COMPLETION) /* not templated: reasoning_effort "none" at most */
        return 0;
    rc = store_model_find(&data, &len, j->ref.sm, MT_TEMPLATE, NULL);
    if (rc < 0 && rc != MS_ENOTFOUND)
        return rc;
    /* the stored template is the one the loaded session renders with */
    thinks = srv_template_thinks(rc == 0 ? (const char *)data : NULL, rc == 0 ? len : 0);
    if (!thinks) {
        if (j->think == 1) /* ollama's words; false or unset render as they always did */
            return ms_err(MS_EINVALID, "\"%s\" does not support thinking", j->model);
        return 0;
    }
    if (j->think < 0) /* ollama: a model that can think does unless the request says not to */
        j->think = 1;
    j->think_on = j->think == 1;
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
