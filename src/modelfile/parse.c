/* parse.c: the Modelfile syntax (modelfile.h). One pass over the lines; every refusal names
 * the file and the line. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "chat/chat.h"
#include "modelfile/modelfile_int.h"

void modelfile_free(modelfile *mf)
{
    if (!mf)
        return;
    free(mf->from);
    json_decref(mf->files);
    json_decref(mf->params);
    free(mf->template_);
    free(mf->system);
    for (size_t i = 0; i < mf->n_licenses; i++)
        free(mf->licenses[i]);
    free(mf->licenses);
    json_decref(mf->messages);
    free(mf);
}

typedef struct cursor {
    const char *p, *end, *path;
    int line;
} cursor;

static int lerr(int code, const cursor *c, int line, const char *fmt, const char *a, const char *b)
{
    return ms_err(code, "%s:%d: %s%s%s", c->path, line, fmt, a ? a : "", b ? b : "");
}

static void skip_blank(cursor *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t'))
        c->p++;
}

/* The value from the cursor: """...""" (may span lines), "..." (with \" and \\), or the rest of
 * the line, trimmed. *out malloc'd. */
static int read_value(cursor *c, char **out, int line)
{
    const char *s, *e;

    *out = NULL;
    skip_blank(c);
    if (c->end - c->p >= 3 && !memcmp(c->p, "\"\"\"", 3)) {
        s = c->p + 3;
        for (e = s; e + 3 <= c->end && memcmp(e, "\"\"\"", 3) != 0; e++)
            ;
        if (e + 3 > c->end)
            return lerr(MS_EINVALID, c, line, "unterminated \"\"\"", NULL, NULL);
        for (const char *q = c->p; q < e; q++)
            c->line += *q == '\n';
        c->p = e + 3;
    } else if (c->p < c->end && *c->p == '"') {
        char *o, *d;
        for (e = c->p + 1; e < c->end && *e != '"' && *e != '\n'; e++)
            if (*e == '\\' && e + 1 < c->end)
                e++;
        if (e >= c->end || *e != '"')
            return lerr(MS_EINVALID, c, line, "unterminated quote", NULL, NULL);
        if (!(o = d = malloc((size_t)(e - c->p))))
            return ms_err(MS_ENOMEM, "out of memory");
        for (s = c->p + 1; s < e; s++)
            *d++ = *s == '\\' && s + 1 < e ? *++s : *s;
        *d = '\0';
        *out = o;
        c->p = e + 1;
        skip_blank(c);
        if (c->p < c->end && *c->p != '\n' && *c->p != '\r') {
            free(o);
            *out = NULL;
            return lerr(MS_EINVALID, c, line, "text after the closing quote", NULL, NULL);
        }
        return 0;
    } else {
        s = c->p;
        for (e = s; e < c->end && *e != '\n'; e++)
            ;
        c->p = e;
        while (e > s && isspace((unsigned char)e[-1]))
            e--;
    }
    if (!(*out = strndup(s, (size_t)(e - s))))
        return ms_err(MS_ENOMEM, "out of memory");
    return 0;
}

/* PARAMETER name value: an option of the table, checked against its type and bounds here, so
 * that `mstore create` refuses what a run would. */
static int add_parameter(modelfile *mf, cursor *c, int line)
{
    char name[64], shown[80], *val = NULL;
    const model_option *opt;
    size_t n = 0;
    double d;
    int rc = 0;
    json_t *v = NULL;

    skip_blank(c);
    while (c->p < c->end && !isspace((unsigned char)*c->p) && n + 1 < sizeof name)
        name[n++] = (char)tolower((unsigned char)*c->p++);
    name[n] = '\0';
    if (!n)
        return lerr(MS_EINVALID, c, line, "PARAMETER needs a name and a value", NULL, NULL);
    if (!(opt = model_option_find(name)))
        return lerr(MS_EINVALID, c, line, "PARAMETER: unknown parameter '", name, "'");
    if ((rc = read_value(c, &val, line)) < 0)
        return rc;
    snprintf(shown, sizeof shown, "PARAMETER %s", name);
    if (!*val) {
        rc = lerr(MS_EINVALID, c, line, "PARAMETER ", name, ": no value");
    } else if (opt->type == MODEL_OPT_TEXT) {
        model_opts scratch;
        if ((rc = model_option_set_text(&scratch, opt, shown, val)) < 0)
            rc = ms_err_ctx("%s:%d", c->path, line);
        else
            v = json_string(val);
    } else if (opt->type == MODEL_OPT_STRINGS) {
        json_t *a = json_object_get(mf->params, name);
        if (!a && json_object_set_new(mf->params, name, a = json_array()) < 0)
            rc = ms_err(MS_ENOMEM, "out of memory");
        else if (json_array_size(a) >= MODELFILE_MAX_STOP)
            rc = lerr(MS_EINVALID, c, line, "PARAMETER stop: more than 16 stop strings", NULL, NULL);
        else
            json_array_append_new(a, json_string(val));
    } else if ((rc = model_option_parse(&d, opt, shown, val)) < 0) {
        rc = ms_err_ctx("%s:%d", c->path, line);
    } else {
        v = opt->type == MODEL_OPT_INTEGER ? json_integer((json_int_t)d) : json_real(d);
    }
    if (rc == 0 && v)
        json_object_set_new(mf->params, name, v);
    free(val);
    return rc;
}

static int add_message(modelfile *mf, cursor *c, int line)
{
    char role[16], *val = NULL;
    size_t n = 0;
    int rc;

    skip_blank(c);
    while (c->p < c->end && !isspace((unsigned char)*c->p) && n + 1 < sizeof role)
        role[n++] = (char)tolower((unsigned char)*c->p++);
    role[n] = '\0';
    if (strcmp(role, "system") && strcmp(role, "user") && strcmp(role, "assistant"))
        return lerr(MS_EINVALID, c, line, "MESSAGE: role '", role, "' is not system, user or assistant");
    if ((rc = read_value(c, &val, line)) < 0)
        return rc;
    json_array_append_new(mf->messages, json_pack("{s:s, s:s}", "role", role, "content", val));
    free(val);
    return 0;
}

int mf_template_check(const char *text, const char *what)
{
    chat_gotmpl *t = NULL;
    int rc = chat_gotmpl_parse(&t, text, strlen(text));

    chat_gotmpl_free(t);
    /* Valid Go outside the subset is kept: run falls back to the family, with a warning. */
    if (rc == MS_EINVALID) {
        char why[512];
        snprintf(why, sizeof why, "%s", ms_err_msg());   /* ms_err overwrites the message it reads */
        return ms_err(MS_EINVALID, "%s: TEMPLATE does not parse: %s", what, why);
    }
    return rc == MS_EUNSUPPORTED ? 0 : rc;
}

static int check_template(const modelfile *mf, const cursor *c)
{
    char what[512];

    snprintf(what, sizeof what, "%s:%d", c->path, mf->template_line);
    return mf_template_check(mf->template_, what);
}

static int instruction(modelfile *mf, cursor *c, const char *word, int line)
{
    char *val = NULL;
    int rc;

    if (!strcasecmp(word, "PARAMETER"))
        return add_parameter(mf, c, line);
    if (!strcasecmp(word, "MESSAGE"))
        return add_message(mf, c, line);
    if (!strcasecmp(word, "ADAPTER"))
        return lerr(MS_EUNSUPPORTED, c, line, "ADAPTER: LoRA adapters are not supported yet", NULL, NULL);
    if (strcasecmp(word, "FROM") && strcasecmp(word, "TEMPLATE") && strcasecmp(word, "SYSTEM") &&
        strcasecmp(word, "LICENSE"))
        return lerr(MS_EINVALID, c, line, "unknown instruction '", word,
                    "' (FROM, PARAMETER, TEMPLATE, SYSTEM, LICENSE, MESSAGE, ADAPTER)");
    if ((rc = read_value(c, &val, line)) < 0)
        return rc;
    if (!strcasecmp(word, "FROM")) {
        if (mf->from)
            rc = lerr(MS_EINVALID, c, line, "a second FROM (models of several files are not supported)", NULL, NULL);
        else if (!*val)
            rc = lerr(MS_EINVALID, c, line, "FROM needs a model name or a path", NULL, NULL);
        else {
            mf->from = val, mf->from_line = line;
            return 0;
        }
    } else if (!strcasecmp(word, "TEMPLATE")) {
        free(mf->template_);
        mf->template_ = val, mf->template_line = line;
        return 0;
    } else if (!strcasecmp(word, "SYSTEM")) {
        free(mf->system);
        mf->system = val;
        return 0;
    } else {
        char **l = realloc(mf->licenses, (mf->n_licenses + 1) * sizeof *l);
        if (!l)
            rc = ms_err(MS_ENOMEM, "out of memory");
        else {
            mf->licenses = l;
            l[mf->n_licenses++] = val;
            return 0;
        }
    }
    free(val);
    return rc;
}

int modelfile_parse(modelfile **out, const char *text, size_t len, const char *path)
{
    modelfile *mf = calloc(1, sizeof *mf);
    cursor c = {text, text + len, path, 1};
    int rc = 0;

    *out = NULL;
    if (!mf || !(mf->params = json_object()) || !(mf->messages = json_array())) {
        modelfile_free(mf);
        return ms_err(MS_ENOMEM, "out of memory");
    }
    if (len > MODELFILE_MAX_BYTES)
        rc = ms_err(MS_EINVALID, "%s: %zu bytes, more than a Modelfile may have (%u)", path, len, MODELFILE_MAX_BYTES);
    if (memchr(text, '\0', len))
        rc = ms_err(MS_EINVALID, "%s: a NUL byte: not a text file", path);
    while (rc == 0 && c.p < c.end) {
        char word[32];
        size_t n = 0;
        int line;
        skip_blank(&c);
        line = c.line;
        if (c.p < c.end && (*c.p == '\n' || *c.p == '\r' || *c.p == '#')) {
            while (c.p < c.end && *c.p != '\n')
                c.p++;
        } else if (c.p < c.end) {
            while (c.p < c.end && !isspace((unsigned char)*c.p) && n + 1 < sizeof word)
                word[n++] = *c.p++;
            word[n] = '\0';
            if (c.p < c.end && !isspace((unsigned char)*c.p)) {
                rc = lerr(MS_EINVALID, &c, line, "unknown instruction (too long)", NULL, NULL);
                break;
            }
            if ((rc = instruction(mf, &c, word, line)) < 0)
                break;
            skip_blank(&c);
            if (c.p < c.end && *c.p == '\r')
                c.p++;
            if (c.p < c.end && *c.p != '\n') {
                rc = lerr(MS_EINVALID, &c, c.line, "unexpected text after the value", NULL, NULL);
                break;
            }
        }
        if (c.p < c.end) { /* the newline */
            c.p++;
            c.line++;
        }
    }
    if (rc == 0 && !mf->from)
        rc = ms_err(MS_EINVALID, "%s: no FROM line (every Modelfile names its base model)", path);
    if (rc == 0 && mf->template_)
        rc = check_template(mf, &c);
    if (rc < 0) {
        modelfile_free(mf);
        return rc;
    }
    *out = mf;
    return 0;
}
