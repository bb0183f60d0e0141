/* gotmpl_tools.c: ollama's tool data as its Go templates see it, Go's json.Marshal of it, and
 * the syntax of a template's tool calls.
 *
 * ollama hands a template its tools and tool calls as Go values (template/template.go:
 * templateTool, templateToolFunction, templateToolFunctionParameters, api.ToolProperty,
 * templateToolCall, templateArgs). What a template prints is Go's rendering of those values:
 * json.Marshal for the types with a String() method that marshals, which writes struct fields
 * in declaration order under their json tags, drops `omitempty` fields that are empty, sorts a
 * Go map's keys but keeps an ordered map's (api.ToolPropertiesMap) insertion order, writes
 * numbers that went through `any` as float64, and escapes <, > and & for HTML.
 *
 * We keep the data as jansson trees normalized the way Go's json.Unmarshal would fill the
 * structs (known fields only, matched case-insensitively, null leaving a field unset, a type
 * mismatch refused), and describe each Go type in a gotype table that says how to reach its
 * fields, range over it and marshal it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "chat/gotmpl_int.h"

/* ------------------------------------------------------------------ the Go types */

static const gotype t_string = {GK_STRING, "string", .elem = NULL};
static const gotype t_int = {GK_INT, "int", .elem = NULL};
static const gotype t_any = {GK_ANY, "any", .elem = &t_any}; /* its elements are `any` too */
static const gotype t_strings = {GK_SLICE, "[]string", .elem = &t_string};
static const gotype t_anys = {GK_SLICE, "[]any", .elem = &t_any};
static const gotype t_ptype = {GK_PTYPE, "api.PropertyType", .elem = &t_string};
static const gotype t_property;
static const gotype t_property_list = {GK_SLICE, "[]api.ToolProperty", .elem = &t_property};
static const gotype t_property_omap = {GK_OMAP, "*api.ToolPropertiesMap", .elem = &t_property};
/* api.ToolProperty, fields in declaration order */
static const gofield property_fields[] = {
    {"AnyOf", "anyOf", 1, &t_property_list},
    {"Type", "type", 1, &t_ptype},
    {"Items", "items", 1, &t_any},
    {"Description", "description", 1, &t_string},
    {"Enum", "enum", 1, &t_anys},
    {"Properties", "properties", 1, &t_property_omap},
    {"Required", "required", 1, &t_strings},
};
static const gotype t_property = {GK_STRUCT, "api.ToolProperty", .fields = property_fields, .n_fields = 7};
/* templateProperties: a Go map (sorted keys) whose String() marshals, "{}" when nil */
static const gotype t_properties = {GK_MAP, "templateProperties", .elem = &t_property, .prints_json = 1};
static const gofield params_fields[] = {
    {"Type", "type", 0, &t_string},
    {"Defs", "$defs", 1, &t_any},
    {"Items", "items", 1, &t_any},
    {"Required", "required", 1, &t_strings},
    {"Properties", "properties", 0, &t_properties},
};
static const gotype t_params = {GK_STRUCT, "templateToolFunctionParameters", .fields = params_fields, .n_fields = 5};
static const gofield function_fields[] = {
    {"Name", "name", 0, &t_string},
    {"Description", "description", 0, &t_string},
    {"Parameters", "parameters", 0, &t_params},
};
/* Printed as JSON: api.ToolFunction's String() did, and ollama's renders of {{ .Function }}
 * (tests/data/gotmpl-tools) are JSON; today's templateToolFunction has no String(). */
static const gotype t_function = {GK_STRUCT, "templateToolFunction", .fields = function_fields, .n_fields = 3,
                                  .prints_json = 1};
static const gofield tool_fields[] = {
    {"Type", "type", 0, &t_string},
    {"Items", "items", 1, &t_any},
    {"Function", "function", 0, &t_function},
};
static const gotype t_tool = {GK_STRUCT, "templateTool", .fields = tool_fields, .n_fields = 3, .prints_json = 1};
const gotype gotmpl__tools_type = {GK_SLICE, "templateTools", .elem = &t_tool, .prints_json = 1};

/* Tool calls: no json tags, so their JSON names are the Go names. */
static const gotype t_args = {GK_MAP, "templateArgs", .elem = &t_any, .prints_json = 1};
static const gofield callfn_fields[] = {
    {"Index", "Index", 0, &t_int},
    {"Name", "Name", 0, &t_string},
    {"Arguments", "Arguments", 0, &t_args},
};
static const gotype t_callfn = {GK_STRUCT, "templateToolCallFunction", .fields = callfn_fields, .n_fields = 3};
static const gofield call_fields[] = {
    {"ID", "ID", 0, &t_string},
    {"Function", "Function", 0, &t_callfn},
};
static const gotype t_call = {GK_STRUCT, "templateToolCall", .fields = call_fields, .n_fields = 2};
const gotype gotmpl__calls_type = {GK_SLICE, "[]templateToolCall", .elem = &t_call};

const gofield *gotmpl__field_find(const gotype *t, const char *go_name)
{
    for (size_t i = 0; t->kind == GK_STRUCT && i < t->n_fields; i++)
        if (!strcmp(t->fields[i].go, go_name))
            return &t->fields[i];
    return NULL;
}

/* ------------------------------------------------------------------ decoding, as json.Unmarshal */

static int decode(json_t **out, const gotype *t, json_t *in, int depth);

static int want(const gotype *t, const json_t *in)
{
    static const char *const found[] = {"an object", "a list", "a string", "a number",
                                        "a number",  "true",   "false",    "null"};
    const char *what = t->kind == GK_PTYPE    ? "a string or a list of strings"
                       : t->kind == GK_STRING ? "a string"
                       : t->kind == GK_SLICE  ? "a list"
                                              : "an object"; /* structs and maps */
    int k = json_typeof(in);

    return ms_err(MS_EINVALID, "want %s, found %s", what, k >= 0 && k < 8 ? found[k] : "?");
}

/* Any JSON value, as Go's `any` holds it; only its depth is checked, to bound the recursion
 * that marshals it. */
static int any_depth(const json_t *in, int depth)
{
    const char *k;
    json_t *v;
    size_t i;

    if (depth > GOTMPL_MAX_JSON_DEPTH)
        return ms_err(MS_EINVALID, "JSON nested deeper than %d", GOTMPL_MAX_JSON_DEPTH);
    if (json_is_object(in)) {
        json_object_foreach((json_t *)in, k, v) if (any_depth(v, depth + 1) < 0) return MS_EINVALID;
    } else if (json_is_array(in)) {
        json_array_foreach(in, i, v) if (any_depth(v, depth + 1) < 0) return MS_EINVALID;
    }
    return 0;
}

static const gofield *field_match(const gotype *t, const char *key)
{
    for (size_t i = 0; i < t->n_fields; i++)
        if (!strcmp(t->fields[i].json, key))
            return &t->fields[i];
    for (size_t i = 0; i < t->n_fields; i++) /* Go matches a key to a field case-insensitively */
        if (!strcasecmp(t->fields[i].json, key))
            return &t->fields[i];
    return NULL;
}

/* An object's known members into their canonical names; null leaves a field unset, except
 * for PropertyType, whose UnmarshalJSON reads null as the string "". */
static int decode_struct(json_t *o, const gotype *t, json_t *in, int depth)
{
    const char *key;
    json_t *v, *d;
    int rc;

    json_object_foreach(in, key, v)
    {
        const gofield *f = field_match(t, key);
        if (!f || (json_is_null(v) && f->type->kind != GK_PTYPE))
            continue;
        if ((rc = decode(&d, f->type, v, depth + 1)) < 0)
            return ms_err_ctx("%s", f->json);
        if (json_object_set_new(o, f->json, d) < 0)
            return ms_err(MS_ENOMEM, "out of memory");
    }
    return 0;
}

static int decode_list(json_t *o, const gotype *t, json_t *in, int depth)
{
    json_t *v, *d;
    size_t i;

    json_array_foreach(in, i, v)
    {
        if (json_is_null(v) && t->elem->kind != GK_ANY)
            d = t->elem->kind == GK_STRING ? json_string("") : json_object(); /* the zero value */
        else if (decode(&d, t->elem, v, depth + 1) < 0)
            return ms_err_ctx("[%zu]", i);
        if (!d || json_array_append_new(o, d) < 0)
            return ms_err(MS_ENOMEM, "out of memory");
    }
    return 0;
}

static int decode_omap(json_t *o, const gotype *t, json_t *in, int depth)
{
    const char *key;
    json_t *v, *d;

    json_object_foreach(in, key, v)
    {
        if (json_is_null(v))
            d = json_object();
        else if (decode(&d, t->elem, v, depth + 1) < 0)
            return ms_err_ctx("%s", key);
        if (!d || json_object_set_new(o, key, d) < 0)
            return ms_err(MS_ENOMEM, "out of memory");
    }
    return 0;
}

static int decode(json_t **out, const gotype *t, json_t *in, int depth)
{
    json_t *o = NULL;
    int rc = 0;

    *out = NULL;
    if (depth > GOTMPL_MAX_JSON_DEPTH)
        return ms_err(MS_EINVALID, "JSON nested deeper than %d", GOTMPL_MAX_JSON_DEPTH);
    switch (t->kind) {
    case GK_ANY:
        if (any_depth(in, depth) < 0)
            return MS_EINVALID;
        *out = json_incref(in);
        return 0;
    case GK_STRING:
        if (!json_is_string(in))
            return want(t, in);
        *out = json_incref(in);
        return 0;
    case GK_PTYPE:
        if (json_is_string(in) || json_is_null(in)) {
            o = json_pack("[s%]", json_is_null(in) ? "" : json_string_value(in),
                          json_is_null(in) ? (size_t)0 : json_string_length(in));
            break;
        }
        if (!json_is_array(in))
            return want(t, in);
        return decode(out, &t_strings, in, depth); /* or a list of strings */
    case GK_SLICE:
        if (!json_is_array(in))
            return want(t, in);
        if ((o = json_array()))
            rc = decode_list(o, t, in, depth);
        break;
    case GK_STRUCT:
    case GK_OMAP:
    case GK_MAP:
        if (!json_is_object(in))
            return want(t, in);
        if ((o = json_object()))
            rc = t->kind == GK_STRUCT ? decode_struct(o, t, in, depth) : decode_omap(o, t, in, depth);
        break;
    case GK_INT:
        return want(t, in);
    }
    if (!o)
        return ms_err(MS_ENOMEM, "out of memory");
    if (rc < 0) {
        json_decref(o);
        return rc;
    }
    *out = o;
    return 0;
}

static json_t *str_new(const char *s)
{
    return json_stringn_nocheck(s ? s : "", s ? strlen(s) : 0);
}

/* JSON text to a tree, numbers as float64 the way Go's `any` holds them. */
static int load(json_t **out, const char *text, const char *what)
{
    json_error_t e;

    if (!(*out = json_loads(text, JSON_DECODE_INT_AS_REAL | JSON_DECODE_ANY, &e)))
        return ms_err(MS_EINVALID, "%s: %s (column %d)", what, e.text, e.column);
    if (!json_is_object(*out)) {
        json_decref(*out);
        *out = NULL;
        return ms_err(MS_EINVALID, "%s: not a JSON object", what);
    }
    return 0;
}

static int tool_new(json_t **out, const chat_tool *tool)
{
    json_t *fn = json_object(), *params = NULL, *raw = NULL;
    int rc = 0;

    *out = NULL;
    if (!fn || json_object_set_new(fn, "name", str_new(tool->name)) < 0 ||
        json_object_set_new(fn, "description", str_new(tool->description)) < 0) {
        json_decref(fn);
        return ms_err(MS_ENOMEM, "out of memory");
    }
    if (tool->parameters && (rc = load(&raw, tool->parameters, "parameters")) == 0 &&
        (rc = decode(&params, &t_params, raw, 1)) < 0)
        ms_err_ctx("parameters");
    json_decref(raw);
    if (rc == 0 && params && json_object_set_new(fn, "parameters", params) < 0)
        rc = ms_err(MS_ENOMEM, "out of memory");
    if (rc == 0 && !(*out = json_pack("{s:s, s:o}", "type", "function", "function", fn)))
        return ms_err(MS_ENOMEM, "out of memory");
    if (rc < 0)
        json_decref(fn);
    return rc;
}

int gotmpl__tools_new(json_t **out, const chat_tool *tools, size_t n)
{
    json_t *a = json_array(), *t;

    *out = NULL;
    if (!a)
        return ms_err(MS_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        int rc = tool_new(&t, &tools[i]);
        if (rc == 0 && json_array_append_new(a, t) < 0)
            rc = ms_err(MS_ENOMEM, "out of memory");
        if (rc < 0) {
            json_decref(a);
            return ms_err_ctx("tool %zu ('%s')", i, tools[i].name ? tools[i].name : "");
        }
    }
    *out = a;
    return 0;
}

int gotmpl__calls_new(json_t **out, const chat_tool_call *calls, size_t n)
{
    json_t *a = json_array(), *args = NULL, *fn, *c;

    *out = NULL;
    for (size_t i = 0; a && i < n; i++) {
        if (calls[i].arguments && *calls[i].arguments &&
            (load(&args, calls[i].arguments, "arguments") < 0 || any_depth(args, 1) < 0)) {
            json_decref(args); /* any_depth refused it: loaded, not kept */
            json_decref(a);
            return ms_err_ctx("tool call %zu ('%s')", i, calls[i].name ? calls[i].name : "");
        }
        /* Index: ollama's OpenAI layer numbers a message's calls; its own API says 0 */
        fn = json_pack("{s:I, s:o}", "Index", (json_int_t)i, "Name", str_new(calls[i].name));
        if (fn && args && json_object_set_new(fn, "Arguments", args) < 0) {
            json_decref(fn);
            fn = NULL;
        } else if (!fn) {
            json_decref(args);
        }
        args = NULL;
        c = fn ? json_pack("{s:o, s:o}", "ID", str_new(calls[i].id), "Function", fn) : NULL;
        if (!c || json_array_append_new(a, c) < 0) {
            json_decref(a);
            return ms_err(MS_ENOMEM, "out of memory");
        }
    }
    if (!a)
        return ms_err(MS_ENOMEM, "out of memory");
    *out = a;
    return 0;
}

/* ------------------------------------------------------------------ marshaling, as json.Marshal */

int gotmpl__put(gotmpl_buf *b, const char *s, size_t len)
{
    if (b->t.n + len > b->max)
        return ms_err(MS_EINVALID, "template: the rendering exceeds %zu bytes", (size_t)MAX_OUT);
    return ms_text_put(&b->t, s, len);
}

/* A Go string as encoding/json writes it: HTML-safe, \b and \f short (Go 1.22 on), other
 * controls as \u00xx, U+2028 and U+2029 escaped, bytes that are not UTF-8 as \ufffd. */
int gotmpl__put_string(gotmpl_buf *b, const char *s, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    size_t i = 0, run = 0;
    int rc = gotmpl__put(b, "\"", 1);

    while (rc == 0 && i < len) {
        unsigned char c = (unsigned char)s[i];
        size_t w = c < 0x80 ? 1 : ms_utf8_seq(s + i, len - i);
        char esc[8] = "\\";
        const char *e = esc;
        size_t elen = 2;

        if (c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' && w &&
            !(w == 3 && c == 0xe2 && (unsigned char)s[i + 1] == 0x80 && ((unsigned char)s[i + 2] & 0xfe) == 0xa8)) {
            i += w;
            run += w;
            continue;
        }
        if ((rc = gotmpl__put(b, s + i - run, run)) < 0)
            break;
        run = 0;
        if (!w) {
            e = "\\ufffd", elen = 6, w = 1;
        } else if (w == 3) {
            e = (unsigned char)s[i + 2] == 0xa8 ? "\\u2028" : "\\u2029", elen = 6;
        } else if (c == '"' || c == '\\') {
            esc[1] = (char)c;
        } else if (c == '\n' || c == '\r' || c == '\t' || c == '\b' || c == '\f') {
            esc[1] = c == '\n' ? 'n' : c == '\r' ? 'r' : c == '\t' ? 't' : c == '\b' ? 'b' : 'f';
        } else {
            memcpy(esc, "\\u00", 4);
            esc[4] = hex[c >> 4], esc[5] = hex[c & 15], elen = 6;
        }
        rc = gotmpl__put(b, e, elen);
        i += w;
    }
    if (rc == 0 && (rc = gotmpl__put(b, s + i - run, run)) == 0)
        rc = gotmpl__put(b, "\"", 1);
    return rc;
}

/* The shortest decimal digits that read back as f: digits[] and the exponent of the first. */
static int shortest(double f, char digits[24], int *exp10)
{
    char buf[40];
    int p;

    for (p = 0; p < 17; p++) {
        snprintf(buf, sizeof buf, "%.*e", p, f);
        if (strtod(buf, NULL) == f)
            break;
    }
    snprintf(buf, sizeof buf, "%.*e", p, fabs(f));
    int n = 0;
    for (const char *q = buf; *q && *q != 'e'; q++)
        if (*q >= '0' && *q <= '9')
            digits[n++] = *q;
    digits[n] = '\0';
    *exp10 = atoi(strchr(buf, 'e') + 1);
    while (n > 1 && digits[n - 1] == '0') /* %.0e of 100 is 1e+02 already; keep 1 digit */
        digits[--n] = '\0';
    return n;
}

/* float64 as Go writes it. json (is_json): 'f' between 1e-6 and 1e21, else 'e' with the
 * exponent's leading zero dropped ("1e-7"). %v (fmt): 'g' shortest, 'e' below 1e-4 or from
 * 1e21 ("1e+21", "1e-05"). */
void gotmpl__float(char out[40], double f, int is_json)
{
    char d[24];
    int e, n = shortest(f, d, &e), at = 0;
    int use_e = f != 0 && (is_json ? (fabs(f) < 1e-6 || fabs(f) >= 1e21) : (e < -4 || e >= 21));

    if (signbit(f))
        out[at++] = '-';
    if (use_e) {
        out[at++] = d[0];
        if (n > 1)
            at += sprintf(out + at, ".%s", d + 1);
        sprintf(out + at, is_json ? "e%c%d" : "e%c%02d", e < 0 ? '-' : '+', abs(e));
        return;
    }
    if (f == 0) {
        strcpy(out + at, "0");
        return;
    }
    if (e < 0) {
        at += sprintf(out + at, "0.");
        for (int i = -1; i > e; i--)
            out[at++] = '0';
        strcpy(out + at, d);
    } else if (n <= e + 1) {
        at += sprintf(out + at, "%s", d);
        for (int i = n; i <= e; i++)
            out[at++] = '0';
        out[at] = '\0';
    } else {
        sprintf(out + at, "%.*s.%s", e + 1, d, d + e + 1);
    }
}

static int cmp_key(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* An object's keys, sorted as Go sorts a map's (bytewise). Caller frees. */
const char **gotmpl__keys_sorted(const json_t *o, size_t *n_out)
{
    const char **k = malloc((json_object_size(o) + 1) * sizeof *k), *key;
    size_t n = 0;
    json_t *v;

    *n_out = 0;
    if (!k)
        return NULL;
    json_object_foreach((json_t *)o, key, v) k[n++] = key;
    qsort(k, n, sizeof *k, cmp_key);
    *n_out = n;
    return k;
}

static int marshal_any(gotmpl_buf *b, const json_t *j, int depth);

static int marshal_object(gotmpl_buf *b, const gotype *elem, const json_t *j, int sorted, int depth)
{
    size_t n = json_object_size(j), i = 0;
    const char **keys = sorted ? gotmpl__keys_sorted(j, &n) : NULL, *key;
    json_t *v;
    int rc = sorted && !keys ? ms_err(MS_ENOMEM, "out of memory") : gotmpl__put(b, "{", 1);

    if (!sorted) {
        json_object_foreach((json_t *)j, key, v)
        {
            if (rc == 0 && i++)
                rc = gotmpl__put(b, ",", 1);
            if (rc == 0 && (rc = gotmpl__put_string(b, key, strlen(key))) == 0 && (rc = gotmpl__put(b, ":", 1)) == 0)
                rc = gotmpl__marshal(b, elem, v, depth + 1);
        }
    }
    for (i = 0; sorted && rc == 0 && i < n; i++) {
        if ((i && (rc = gotmpl__put(b, ",", 1)) < 0) || (rc = gotmpl__put_string(b, keys[i], strlen(keys[i]))) < 0 ||
            (rc = gotmpl__put(b, ":", 1)) < 0)
            break;
        rc = gotmpl__marshal(b, elem, json_object_get(j, keys[i]), depth + 1);
    }
    free(keys);
    return rc < 0 ? rc : gotmpl__put(b, "}", 1);
}

static int marshal_array(gotmpl_buf *b, const gotype *elem, const json_t *j, int depth)
{
    json_t *v;
    size_t i;
    int rc = gotmpl__put(b, "[", 1);

    json_array_foreach(j, i, v)
    {
        if (rc == 0 && i)
            rc = gotmpl__put(b, ",", 1);
        if (rc == 0)
            rc = elem ? gotmpl__marshal(b, elem, v, depth + 1) : marshal_any(b, v, depth + 1);
    }
    return rc < 0 ? rc : gotmpl__put(b, "]", 1);
}

static int marshal_any(gotmpl_buf *b, const json_t *j, int depth)
{
    char num[40];

    if (depth > 2 * GOTMPL_MAX_JSON_DEPTH)
        return ms_err(MS_EINVALID, "JSON nested deeper than %d", GOTMPL_MAX_JSON_DEPTH);
    switch (json_typeof(j)) {
    case JSON_OBJECT:
        return marshal_object(b, &t_any, j, 1, depth);
    case JSON_ARRAY:
        return marshal_array(b, NULL, j, depth);
    case JSON_STRING:
        return gotmpl__put_string(b, json_string_value(j), json_string_length(j));
    case JSON_INTEGER:
    case JSON_REAL:
        gotmpl__float(num, json_number_value(j), 1);
        return gotmpl__put(b, num, strlen(num));
    case JSON_TRUE:
        return gotmpl__put(b, "true", 4);
    case JSON_FALSE:
        return gotmpl__put(b, "false", 5);
    default:
        return gotmpl__put(b, "null", 4);
    }
}

static int empty(const gotype *t, const json_t *j)
{
    if (!j)
        return 1;
    switch (t->kind) {
    case GK_STRING:
        return json_string_length(j) == 0;
    case GK_INT:
        return json_integer_value(j) == 0;
    case GK_SLICE:
    case GK_PTYPE:
        return json_array_size(j) == 0;
    case GK_MAP:
        return json_object_size(j) == 0;
    default: /* a pointer (GK_OMAP), an interface or a struct: only nil is empty */
        return 0;
    }
}

static int marshal_struct(gotmpl_buf *b, const gotype *t, const json_t *j, int depth)
{
    int rc = gotmpl__put(b, "{", 1), first = 1;

    for (size_t i = 0; rc == 0 && i < t->n_fields; i++) {
        const gofield *f = &t->fields[i];
        const json_t *v = j ? json_object_get(j, f->json) : NULL;
        if (f->omitempty && empty(f->type, v))
            continue;
        if ((!first && (rc = gotmpl__put(b, ",", 1)) < 0) ||
            (rc = gotmpl__put_string(b, f->json, strlen(f->json))) < 0 || (rc = gotmpl__put(b, ":", 1)) < 0)
            break;
        first = 0;
        rc = gotmpl__marshal(b, f->type, v, depth + 1);
    }
    return rc < 0 ? rc : gotmpl__put(b, "}", 1);
}

int gotmpl__marshal(gotmpl_buf *b, const gotype *t, const json_t *j, int depth)
{
    char num[32];

    if (depth > 2 * GOTMPL_MAX_JSON_DEPTH)
        return ms_err(MS_EINVALID, "JSON nested deeper than %d", GOTMPL_MAX_JSON_DEPTH);
    switch (t->kind) {
    case GK_STRING:
        return j ? gotmpl__put_string(b, json_string_value(j), json_string_length(j)) : gotmpl__put(b, "\"\"", 2);
    case GK_INT:
        snprintf(num, sizeof num, "%lld", j ? (long long)json_integer_value(j) : 0LL);
        return gotmpl__put(b, num, strlen(num));
    case GK_ANY:
        return j ? marshal_any(b, j, depth) : gotmpl__put(b, "null", 4);
    case GK_PTYPE:
        if (j && json_array_size(j) == 1)
            return gotmpl__marshal(b, &t_string, json_array_get(j, 0), depth);
        return j ? marshal_array(b, &t_string, j, depth) : gotmpl__put(b, "null", 4);
    case GK_SLICE:
        return j ? marshal_array(b, t->elem, j, depth) : gotmpl__put(b, "null", 4);
    case GK_MAP:
    case GK_OMAP:
        return j ? marshal_object(b, t->elem, j, t->kind == GK_MAP, depth) : gotmpl__put(b, "null", 4);
    case GK_STRUCT:
        return marshal_struct(b, t, j, depth);
    }
    return 0;
}

/* ------------------------------------------------------------------ the tool-call syntax, as ollama finds it */

static int mentions(const expr *e, const char *field)
{
    for (size_t i = 0; e && i < e->n_fields; i++)
        if (!strcmp(e->fields[i], field))
            return 1;
    for (size_t i = 0; e && i < e->n_args; i++)
        if (mentions(e->args[i], field))
            return 1;
    return 0;
}

/* The first if (kind N_IF) or range (N_RANGE) whose pipeline mentions .ToolCalls, in the
 * order ollama's walk meets them: a node, then its body, then its else. */
static const node *find_calls(node *const *v, size_t n, node_kind kind)
{
    for (size_t i = 0; i < n; i++) {
        const node *x = v[i], *y;
        if (x->kind != N_IF && x->kind != N_RANGE)
            continue;
        if (x->kind == kind && mentions(x->e, "ToolCalls"))
            return x;
        if ((y = find_calls(x->body, x->n_body, kind)) || (y = find_calls(x->alt, x->n_alt, kind)))
            return y;
    }
    return NULL;
}

/* Whether j is one call as the sample renders it: a member that is "@@name@@" and one that
 * is an object (the arguments: its key goes to args_key). */
static int sample_call(const json_t *j, chat_tool_syntax *out)
{
    const char *key, *args = NULL, *named = NULL;
    json_t *v;

    if (!json_is_object(j))
        return 0;
    json_object_foreach((json_t *)j, key, v)
    {
        if (json_is_string(v) && !strcmp(json_string_value(v), "@@name@@"))
            named = key;
        if (json_is_object(v))
            args = key;
    }
    if (!named || !args || strlen(args) >= sizeof out->args_key || strlen(named) >= sizeof out->name_key)
        return 0;
    strcpy(out->args_key, args);
    if (strcmp(named, "name") != 0)
        strcpy(out->name_key, named);
    return 1;
}

static int blank(char c)
{
    return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

/* s[0..len) without its leading (left) or trailing blanks into dst[cap]; -1 when too long. */
static int copy_trimmed(char *dst, size_t cap, const char *s, size_t len, int left)
{
    while (len && blank(left ? *s : s[len - 1])) {
        s += left;
        len--;
    }
    if (len >= cap)
        return -1;
    memcpy(dst, s, len);
    dst[len] = '\0';
    return 0;
}

/* In what the sample call rendered, the call's JSON: one object, or a list whose first element
 * is one (array). The text before it is the prefix (leading blanks dropped), after it the
 * suffix (trailing blanks dropped). */
static int find_call_json(const char *s, size_t n, chat_tool_syntax *out)
{
    const char *name = memmem(s, n, "@@name@@", 8);

    for (size_t p = 0; name && s + p < name; p++) {
        json_error_t e;
        json_t *j;
        int is_array = s[p] == '[', ok;
        size_t q;
        if (s[p] != '{' && s[p] != '[')
            continue;
        if (!(j = json_loadb(s + p, n - p, JSON_DISABLE_EOF_CHECK, &e)))
            continue;
        q = p + (size_t)e.position;
        ok = sample_call(is_array ? json_array_get(j, 0) : j, out);
        json_decref(j);
        if (!ok)
            continue;
        if (copy_trimmed(out->prefix, sizeof out->prefix, s, p, 1) < 0 ||
            copy_trimmed(out->suffix, sizeof out->suffix, s + q, n - q, 0) < 0)
            break;
        out->array = is_array;
        return 0;
    }
    memset(out, 0, sizeof *out);
    return ms_err(MS_EUNSUPPORTED, "the template's tool calls are not JSON with a name and an arguments object");
}

int chat_gotmpl_tool_syntax(const chat_gotmpl *t, chat_tool_syntax *out)
{
    static const chat_tool_call sample = {.name = "@@name@@", .arguments = "{\"@@argument@@\":1}"};
    const node *x = find_calls(t->root, t->n_root, N_IF), *range = find_calls(t->root, t->n_root, N_RANGE);
    char *text = NULL;
    size_t len;
    int rc;

    memset(out, 0, sizeof *out);
    if (!t->uses_tools || !t->uses_tool_calls || !range)
        return ms_err(MS_EUNSUPPORTED, "the model's template does not support tools (no %s)",
                      !t->uses_tools ? ".Tools" : "range over .ToolCalls");
    /* As ollama: the tool-call section is the if that tests .ToolCalls; without one, the range.
     * It renders one sample call, the variables it uses from outside it nil. */
    if ((rc = gotmpl__render_call(&text, &len, t, x ? x : range, &sample)) < 0)
        return ms_err_ctx("the template's tool calls");
    if (len > 65536)
        rc = ms_err(MS_EUNSUPPORTED, "the template's tool call renders past 64 KiB");
    else
        rc = find_call_json(text, len, out);
    free(text);
    return rc;
}
