/* pyjson.c: JSON written the way Python's json.dumps writes it, for the templates' `tojson`.
 *
 * transformers replaces Jinja's tojson (which would HTML-escape <, >, & and ') with
 * json.dumps(x, ensure_ascii=False, indent=indent). Models saw that text in training, so we write
 * it byte for byte: items separated by ", " (by "," and a newline when indented), ": " after a
 * key, keys in the order given, only '"', '\\' and control characters escaped (non-ASCII as is),
 * integers as they are and floats as Python's repr writes them (1.0, 1e-05, 1e+16). The client's
 * JSON text is parsed by jansson, which keeps the order of keys; a duplicate key keeps its first
 * place and its last value, as a Python dict does. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chat_int.h"
#include "util/util.h"

void chat__put(chat_buf *b, const char *s, size_t len)
{
    if (b->oom || len == 0)
        return;
    if (len > SIZE_MAX / 4 - b->n) {
        b->oom = 1;
        return;
    }
    if (b->n + len + 1 > b->cap) {
        size_t cap = (b->n + len + 1) * 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p, b->cap = cap;
    }
    memcpy(b->p + b->n, s, len);
    b->n += len;
    b->p[b->n] = '\0';
}

void chat__puts(chat_buf *b, const char *s)
{
    chat__put(b, s, strlen(s));
}

/* json.dumps's ESCAPE with ensure_ascii=False: '"', '\\' and U+0000..U+001F; nothing else. */
void chat__pystr(chat_buf *b, const char *s, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    size_t run = 0;

    chat__puts(b, "\"");
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[7] = {'\\', 0, 0, 0, 0, 0, 0};
        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        chat__put(b, s + run, i - run);
        run = i + 1;
        esc[1] = c == '"'    ? '"'
                 : c == '\\' ? '\\'
                 : c == '\n' ? 'n'
                 : c == '\r' ? 'r'
                 : c == '\t' ? 't'
                 : c == '\b' ? 'b'
                 : c == '\f' ? 'f'
                             : 'u';
        if (esc[1] == 'u')
            esc[2] = '0', esc[3] = '0', esc[4] = hex[c >> 4], esc[5] = hex[c & 15];
        chat__puts(b, esc);
    }
    chat__put(b, s + run, len - run);
    chat__puts(b, "\"");
}

/* Python's float repr: the shortest digits that read back as x, then fixed notation when the
 * decimal point falls within 16 places of them (with ".0" if integral), else d.ddde+XX. */
void chat__pyreal(chat_buf *b, double x)
{
    char e[40], digits[24], out[64];
    int prec, exp10, nd = 0, decpt, o = 0;

    for (prec = 1; prec <= 17; prec++) {
        snprintf(e, sizeof e, "%.*e", prec - 1, x);
        if (strtod(e, NULL) == x)
            break;
    }
    /* e is "[-]d[.ddd]e[+-]XX" */
    for (const char *p = e; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9')
            digits[nd++] = *p;
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    exp10 = atoi(strchr(e, 'e') + 1);
    decpt = exp10 + 1;
    if (e[0] == '-')
        out[o++] = '-';
    if (decpt > 16 || decpt <= -4) {
        out[o++] = digits[0];
        if (nd > 1)
            out[o++] = '.', memcpy(out + o, digits + 1, (size_t)nd - 1), o += nd - 1;
        o += snprintf(out + o, sizeof out - (size_t)o, "e%c%02d", exp10 < 0 ? '-' : '+', abs(exp10));
    } else if (decpt <= 0) {
        out[o++] = '0', out[o++] = '.';
        for (int i = decpt; i < 0; i++)
            out[o++] = '0';
        memcpy(out + o, digits, (size_t)nd), o += nd;
    } else {
        for (int i = 0; i < decpt; i++)
            out[o++] = i < nd ? digits[i] : '0';
        out[o++] = '.';
        if (nd > decpt)
            memcpy(out + o, digits + decpt, (size_t)(nd - decpt)), o += nd - decpt;
        else
            out[o++] = '0';
    }
    chat__put(b, out, (size_t)o);
}

static void put_newline(chat_buf *b, int indent, int depth)
{
    chat__puts(b, "\n");
    for (int i = 0; i < indent * depth; i++)
        chat__puts(b, " ");
}

static void put_value(chat_buf *b, const json_t *v, int indent, int depth);

/* An object's or an array's members: json.dumps puts "{}" / "[]" for empty ones, and with an
 * indent each member on its own line, the closing bracket back at the parent's depth. */
static void put_container(chat_buf *b, const json_t *v, int indent, int depth)
{
    int obj = json_is_object(v);
    size_t n = obj ? json_object_size(v) : json_array_size(v), i = 0, k;
    const char *key;
    json_t *item;

    chat__puts(b, obj ? "{" : "[");
    if (obj) {
        json_object_foreach((json_t *)v, key, item)
        {
            chat__puts(b, i++ == 0 ? "" : indent ? "," : ", ");
            if (indent)
                put_newline(b, indent, depth + 1);
            chat__pystr(b, key, strlen(key));
            chat__puts(b, ": ");
            put_value(b, item, indent, depth + 1);
        }
    } else {
        json_array_foreach(v, k, item)
        {
            chat__puts(b, k == 0 ? "" : indent ? "," : ", ");
            if (indent)
                put_newline(b, indent, depth + 1);
            put_value(b, item, indent, depth + 1);
        }
    }
    if (indent && n > 0)
        put_newline(b, indent, depth);
    chat__puts(b, obj ? "}" : "]");
}

/* jansson bounds the depth it parses (JSON_PARSER_MAX_DEPTH), which bounds this recursion. */
static void put_value(chat_buf *b, const json_t *v, int indent, int depth)
{
    char num[32];

    switch (json_typeof(v)) {
    case JSON_OBJECT:
    case JSON_ARRAY:
        put_container(b, v, indent, depth);
        break;
    case JSON_STRING:
        chat__pystr(b, json_string_value(v), json_string_length(v));
        break;
    case JSON_INTEGER:
        snprintf(num, sizeof num, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        chat__puts(b, num);
        break;
    case JSON_REAL:
        chat__pyreal(b, json_real_value(v));
        break;
    case JSON_TRUE:
        chat__puts(b, "true");
        break;
    case JSON_FALSE:
        chat__puts(b, "false");
        break;
    default:
        chat__puts(b, "null");
        break;
    }
}

static int parse(json_t **out, const char *json, const char *what)
{
    json_error_t jerr;

    /* any JSON value (a client may send a string or a number), NULs in strings kept */
    if (!(*out = json_loads(json, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr)))
        return ms_err(MS_EINVALID, "%s: not JSON: %s (at byte %d)", what, jerr.text, jerr.position);
    return 0;
}

int chat__tojson(chat_buf *b, const char *json, int indent, const char *what)
{
    json_t *v;
    int rc;

    if ((rc = parse(&v, json, what)) < 0)
        return rc;
    put_value(b, v, indent, 0);
    json_decref(v);
    return 0;
}

void chat__tojson_str(chat_buf *b, const char *s)
{
    chat__pystr(b, s, strlen(s));
}

int chat__tojson_tool(chat_buf *b, const chat_tool *tool, int indent)
{
    json_t *root = json_object(), *fn = json_object(), *params = NULL;
    const char *name = tool->name ? tool->name : "";
    int rc = 0;

    if (tool->parameters) {
        char *what = ms_strdup_printf("tool '%s': parameters", name);
        rc = what ? parse(&params, tool->parameters, what) : ms_err(MS_ENOMEM, "chat: out of memory");
        free(what);
    }
    /* nocheck: the bytes are written as they are, as Python would write the decoded string */
    if (rc == 0 &&
        (!root || !fn || json_object_set_new(root, "type", json_string("function")) < 0 ||
         json_object_set_new(fn, "name", json_stringn_nocheck(name, strlen(name))) < 0 ||
         (tool->description &&
          json_object_set_new(fn, "description", json_stringn_nocheck(tool->description, strlen(tool->description))) <
              0) ||
         (params && json_object_set(fn, "parameters", params) < 0) || json_object_set(root, "function", fn) < 0))
        rc = ms_err(MS_ENOMEM, "chat: out of memory");
    if (rc == 0)
        put_value(b, root, indent, 0);
    json_decref(params);
    json_decref(fn);
    json_decref(root);
    return rc;
}
