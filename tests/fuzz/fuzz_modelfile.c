/* fuzz_modelfile.c: libFuzzer target for the Modelfile parser (modelfile_parse, which also
 * parses a TEMPLATE as a Go template) and for a params layer's JSON (mf_params_from_json, what
 * a pulled model's run defaults say), applied to the sampler options as `run` applies them.
 * An input starting with '{' is a params layer; anything else a Modelfile. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "modelfile/modelfile_int.h"

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "fuzz_modelfile: %s:%d: %s (%s)\n", __FILE__, __LINE__, #c, ms_err_msg()); abort(); } } while (0)

/* The options as the sampler takes them: refused with a message, or sampling picks a token. */
static void sample(const runtime_sampler_opts *so)
{
    runtime_sampler *s = NULL;
    float logits[32];

    if (runtime_sampler_new(&s, so, 32) < 0) {
        CHECK(s == NULL && ms_err_msg()[0]);
        return;
    }
    for (int round = 0; round < 3; round++) {
        int32_t id;
        for (int i = 0; i < 32; i++)
            logits[i] = (float)((i * 7 + round) % 11) - 5.0f;
        id = runtime_sampler_sample(s, logits);
        CHECK(id >= 0 && id < 32);
        runtime_sampler_accept(s, id);
    }
    runtime_sampler_free(s);
}

static void params(json_t *o)
{
    model_params *p = calloc(1, sizeof *p);
    model_opts mo;

    CHECK(p);
    ms_err_clear();
    if (mf_params_from_json(p, o, "fuzz") == 0) {
        CHECK(p->n_stop <= MODELFILE_MAX_STOP);
        model_opts_defaults(&mo);
        model_params_apply(p, &mo);
        /* what the table's bounds promise every reader */
        CHECK(mo.n_predict >= -2 && mo.n_predict <= 1 << 24 && mo.n_ctx >= 0 && mo.n_ctx <= 1 << 22);
        CHECK(mo.so.temp >= 0 && mo.so.temp <= 100 && mo.so.top_k >= 0);
        sample(&mo.so);
    } else {
        CHECK(ms_err_msg()[0]);
    }
    model_params_free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    modelfile *mf = (modelfile *)&size;

    if (size && data[0] == '{') {
        json_t *o = json_loadb((const char *)data, size, 0, NULL);
        if (o)
            params(o);
        json_decref(o);
        return 0;
    }
    ms_err_clear();
    if (modelfile_parse(&mf, (const char *)data, size, "Modelfile") == 0) {
        CHECK(mf && mf->from && mf->from[0]);
        if (mf->params)
            params(mf->params);
        modelfile_free(mf);
    } else {
        CHECK(mf == NULL && ms_err_msg()[0]);
    }
    return 0;
}
