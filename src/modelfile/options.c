/* options.c: the one table of sampler and generation options, and its readers for text (flags,
 * /set, PARAMETER) and JSON (ollama's options, OpenAI's fields, a stored params layer). */
#include <assert.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"
#include "modelfile/modelfile_int.h"

#define MAX_SAFE_INT 9007199254740992.0 /* 2^53: above it a JSON number is no longer an integer */
#define AT(field)    offsetof(model_opts, field)

/* Bounds are the widest the readers had before the table, so that a request or a flag that worked
 * still works; only the seed stops at 2^53, where a JSON number (a double) stops being an exact
 * integer, and PARAMETER, which had no bounds, now has these. OpenAI documents temperature 0-2
 * and any integer seed; its max_tokens has no "until the context is full" value, ollama's
 * num_predict -1 (and -2) has. frequency_penalty and presence_penalty came after the table:
 * OpenAI's -2..2 on every surface, ollama's options and PARAMETER included (ollama hands any
 * float to llama.cpp), so that a value means the same wherever it is written. */
#define NUM  MODEL_OPT_NUMBER
#define INT  MODEL_OPT_INTEGER
#define STR  MODEL_OPT_STRINGS
#define TOP  (1 << 24)
#define SAFE MAX_SAFE_INT
/* clang-format off */
const model_option model_options[] = {
/*   name              flag                OpenAI fields                          type bounds          OpenAI's        default load  store           where */
    {"temperature",    "--temp",           {"temperature"},                       NUM, 0,    100,      0,     2,       0.8,  0, MODEL_OPT_FLOAT, AT(so.temp)},
    {"top_k",          "--top-k",          {NULL},                                INT, 0,    TOP,      0,     TOP,     40,   0, MODEL_OPT_INT,   AT(so.top_k)},
    {"top_p",          "--top-p",          {"top_p"},                             NUM, 0,    1,        0,     1,       0.95, 0, MODEL_OPT_FLOAT, AT(so.top_p)},
    {"min_p",          "--min-p",          {NULL},                                NUM, 0,    1,        0,     1,       0.05, 0, MODEL_OPT_FLOAT, AT(so.min_p)},
    {"repeat_penalty", "--repeat-penalty", {NULL},                                NUM, 0.01, 100,      0.01,  100,     1.0,  0, MODEL_OPT_FLOAT, AT(so.repeat_penalty)},
    {"repeat_last_n",  "--repeat-last-n",  {NULL},                                INT, 0,    1 << 20,  0,     1 << 20, 64,   0, MODEL_OPT_INT,   AT(so.repeat_last_n)},
    {"frequency_penalty", "--frequency-penalty", {"frequency_penalty"},          NUM, -2,   2,        -2,    2,       0,    0, MODEL_OPT_FLOAT, AT(so.frequency_penalty)},
    {"presence_penalty",  "--presence-penalty",  {"presence_penalty"},           NUM, -2,   2,        -2,    2,       0,    0, MODEL_OPT_FLOAT, AT(so.presence_penalty)},
    {"seed",           "--seed",           {"seed"},                              INT, -1,   SAFE,     -SAFE, SAFE,    -1,   0, MODEL_OPT_SEED,  AT(so.seed)},
    {"num_predict",    "-n",               {"max_tokens", "max_completion_tokens"}, INT, -2, TOP,      0,     TOP,     -1,   0, MODEL_OPT_INT,   AT(n_predict)},
    {"num_ctx",        "--ctx",            {NULL},                                INT, 0,    RUNTIME_CTX_MAX, 0, RUNTIME_CTX_MAX, 0,    1, MODEL_OPT_INT,   AT(n_ctx)},
    {"stop",           NULL,               {"stop"},                              STR, 0,    MODELFILE_MAX_STOP, 0, MODELFILE_MAX_STOP, 0, 0, MODEL_OPT_NONE, 0},
    /* OpenAI's response_format is an object of its own shape: its reader maps it */
    {"format",         "--format",         {NULL},                                MODEL_OPT_TEXT, 0, 0, 0, 0,         0,    0, MODEL_OPT_PTR,   AT(format)},
};
/* clang-format on */
#undef NUM
#undef INT
#undef STR
#undef TOP
#undef SAFE
const size_t model_options_n = sizeof model_options / sizeof *model_options;
_Static_assert(sizeof model_options / sizeof *model_options <= MODEL_OPTIONS_MAX, "model_params.set is 32 bits");

const model_option *model_option_find(const char *name)
{
    for (size_t i = 0; i < model_options_n; i++)
        if (!strcmp(model_options[i].name, name))
            return &model_options[i];
    return NULL;
}

const model_option *model_option_find_flag(const char *flag)
{
    for (size_t i = 0; i < model_options_n; i++)
        if (model_options[i].flag && !strcmp(model_options[i].flag, flag))
            return &model_options[i];
    return NULL;
}

/* A bound as people write it: 16777216, not 1.67772e+07. */
static const char *num(char buf[32], double v)
{
    snprintf(buf, 32, v == floor(v) && fabs(v) < 1e17 ? "%.0f" : "%g", v);
    return buf;
}

/* The one refusal: the option, its type and bounds, the value found and what is wrong with it. */
static int refuse(const model_option *o, const char *shown, int openai, const char *value, const char *why)
{
    char lo[32], hi[32];

    return ms_err(MS_EINVALID, "%s: expected %s from %s to %s; %s %s", shown,
                  o->type == MODEL_OPT_INTEGER ? "an integer" : "a number", num(lo, openai ? o->openai_lo : o->lo),
                  num(hi, openai ? o->openai_hi : o->hi), value, why);
}

/* Type and bounds of a number read as d; `value` shows it in the message. */
static int check(const model_option *o, const char *shown, int openai, double d, const char *value)
{
    double lo = openai ? o->openai_lo : o->lo, hi = openai ? o->openai_hi : o->hi;

    if (d != d)
        return refuse(o, shown, openai, value, "is not a number");
    if (o->type == MODEL_OPT_INTEGER && d != floor(d) && !isinf(d))
        return refuse(o, shown, openai, value, "is not an integer");
    if (d < lo)
        return refuse(o, shown, openai, value, "is too small");
    if (d > hi)
        return refuse(o, shown, openai, value, "is too large");
    return 0;
}

int model_option_parse(double *out, const model_option *o, const char *shown, const char *text)
{
    char value[80], *end;
    double d;

    assert(o->type == MODEL_OPT_NUMBER || o->type == MODEL_OPT_INTEGER);
    snprintf(value, sizeof value, "'%.64s%s'", text, strlen(text) > 64 ? "..." : "");
    d = strtod(text, &end);
    if (end == text || *end)
        return refuse(o, shown, 0, value, "is not a number");
    if (check(o, shown, 0, d, value) < 0)
        return MS_EINVALID;
    *out = d;
    return 0;
}

int model_option_json(double *out, const model_option *o, const char *shown, const json_t *v, int openai)
{
    char value[80];
    char *dump = NULL;
    double d;

    assert(o->type == MODEL_OPT_NUMBER || o->type == MODEL_OPT_INTEGER);
    if (json_is_number(v)) {
        d = json_number_value(v);
        if (check(o, shown, openai, d, num(value, d)) < 0)
            return MS_EINVALID;
        *out = d;
        return 0;
    }
    dump = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    snprintf(value, sizeof value, "%.64s%s", dump ? dump : "the value", dump && strlen(dump) > 64 ? "..." : "");
    free(dump);
    return refuse(o, shown, openai, value, "is not a number");
}

void model_option_set(model_opts *dst, const model_option *o, double v)
{
    char *at = (char *)dst + o->off;

    switch (o->store) {
    case MODEL_OPT_FLOAT:
        *(float *)at = (float)v;
        break;
    case MODEL_OPT_INT:
        *(int *)at = (int)v;
        break;
    case MODEL_OPT_SEED: /* ollama's -1 (any negative, for OpenAI): a random seed, as without one */
        if (v >= 0) {
            *(uint64_t *)at = (uint64_t)v;
            dst->seed_set = 1;
        }
        break;
    case MODEL_OPT_NONE:
    case MODEL_OPT_PTR:
        break;
    }
}

int model_option_set_text(model_opts *dst, const model_option *o, const char *shown, const char *text)
{
    grammar *g = NULL;
    int rc;

    assert(o->type == MODEL_OPT_TEXT);
    /* compiled once here so that a bad schema is refused where it is read, with its name */
    if (text && *text && (rc = grammar_from_format(&g, text, strlen(text), shown)) < 0)
        return rc;
    grammar_free(g);
    *(const char **)((char *)dst + o->off) = text && *text ? text : NULL;
    return 0;
}

int mf_option_text_json(char **out, const model_option *o, const char *shown, const json_t *v)
{
    model_opts scratch;
    char *text;
    int rc;

    *out = NULL;
    if (!json_is_string(v) && !json_is_object(v))
        return ms_err(MS_EINVALID, "%s: expected \"json\" or a JSON schema object", shown);
    text = json_is_string(v) ? strdup(json_string_value(v)) : json_dumps(v, JSON_COMPACT);
    if (!text)
        return ms_err(MS_ENOMEM, "out of memory");
    if ((rc = model_option_set_text(&scratch, o, shown, text)) < 0) {
        free(text);
        return rc;
    }
    *out = text;
    return 0;
}

int model_opts_from_json(model_opts *dst, const json_t *obj, const char *prefix, int openai)
{
    char shown[96];
    double d;

    for (size_t i = 0; i < model_options_n; i++) {
        const model_option *o = &model_options[i];
        const char *const *keys = openai ? o->openai : &o->name;
        if (o->type != MODEL_OPT_NUMBER && o->type != MODEL_OPT_INTEGER)
            continue;
        for (size_t k = 0; k < (openai ? sizeof o->openai / sizeof *o->openai : 1) && keys[k]; k++) {
            json_t *v = obj ? json_object_get(obj, keys[k]) : NULL;
            if (!v || json_is_null(v))
                continue;
            snprintf(shown, sizeof shown, "%s%s", prefix ? prefix : "", keys[k]);
            if (model_option_json(&d, o, shown, v, openai) < 0)
                return MS_EINVALID;
            model_option_set(dst, o, d);
        }
    }
    return 0;
}

void model_opts_defaults(model_opts *o)
{
    memset(o, 0, sizeof *o);
    for (size_t i = 0; i < model_options_n; i++)
        model_option_set(o, &model_options[i], model_options[i].def);
    o->format = NULL;
}
