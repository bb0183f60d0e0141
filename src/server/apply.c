/* apply.c: POST /apply-template, as llama-server has it: {"model", "messages", "tools"} in (the
 * fields of a chat completion, read as /v1/chat/completions reads them), {"prompt": "..."} out,
 * the text the model would be given: its template over the conversation with the generation
 * prompt (unless "add_generation_prompt": false), exactly as a chat would render it. A template
 * that raises is a 400 with its message. */
#include <stdlib.h>

#include "server/server_int.h"

enum MHD_Result srv_apply_template(req *r)
{
    json_t *b = NULL;
    gen_job *j = NULL;
    const char *model = NULL;
    loaded *L = NULL;
    char *text = NULL;
    size_t len = 0;
    int rc, gen;

    if ((rc = gen_job_new(&j, &b, r, GEN_OPENAI_CHAT)) < 0)
        goto done;
    gen = !json_is_false(json_object_get(b, "add_generation_prompt"));
    json_object_del(b, "add_generation_prompt");
    if ((rc = srv_openai_fields(j, b, 1, &model)) < 0 || (rc = srv_model_open(&j->ref, r->srv, model)) < 0 ||
        (rc = gen_model_check(j, model)) < 0 || (rc = srv_model_acquire(r->srv, &j->ref, j->mo.n_ctx, &L)) < 0)
        goto done;
    /* the template is the loaded model's, usable without its run lock */
    rc = chat_render_think(&text, &len, session_template(L->S), j->msgs, j->n_msgs, j->n_tools ? j->tools : NULL,
                           j->n_tools, gen, j->think);
    srv_model_release(r->srv, L, NULL, j->keep_alive_s);
done:
    json_decref(b);
    gen_job_free(j);
    if (rc < 0) {
        free(text);
        return srv_fail(r, SRV_OPENAI, rc);
    }
    json_t *o = json_pack("{s:o}", "prompt", srv_json_text(text, len));
    free(text);
    return srv_json(r, 200, o);
}
