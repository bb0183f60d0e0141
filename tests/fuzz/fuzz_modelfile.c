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
    runtime_sampler_opts so;
    int n_predict = 128, n_ctx = 2048;
    size_t emit;
    static const char pending[] = "Hello</s><|im_end|>USER:";

    CHECK(p);
    ms_err_clear();
    if (mf_params_from_json(p, o, "fuzz") == 0) {
        CHECK(p->n_stop <= MODELFILE_MAX_STOP);
        runtime_sampler_defaults(&so);
        model_params_apply(p, &so, &n_predict, &n_ctx);
        CHECK(n_predict >= 0 && n_ctx >= 1);
        sample(&so);
        model_params_stop_scan(p, pending, sizeof pending - 1, &emit);
        CHECK(emit <= sizeof pending - 1);
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
