/* chat_int.h: helpers shared by the files of src/chat only (tests may use them). */
#ifndef MSTORE_CHAT_INT_H
#define MSTORE_CHAT_INT_H

#include <stddef.h>

#include "chat/chat.h"

/* Flags read from the template text (chat.c detect, tooltmpl.c). */
enum {
    F_BOS = 1, /* the template writes bos_token */
    F_EOS = 2, /* ... eos_token (Phi-3.5: when there is no generation prompt) */
    F_SYS = 4, /* Phi-3: renders system turns */
    F_SYS_NONEMPTY = 8, /* Phi-3.5: only when their content is not empty */
    F_GEN = 16, /* Phi-3: add_generation_prompt decides; else <|assistant|> after each user turn */
    F_BARE = 32, /* plain: there is no template at all (ollama's "{{ .Prompt }}") */
    F_TOOLS = 64, /* renders tools, calls and results (tooltmpl.c): Llama 3.1 / 3.2, Qwen 2.5, Mistral Nemo */
    F_LLAMA31 = 128, /* llama3: the 3.1 system header (knowledge date, today's date, tools) */
    F_THINK = 256, /* the model thinks in <think> tags (think.c) */
    F_THINK_OFF = 512, /* chatml: Qwen3's enable_thinking, off: an empty <think></think> block */
    F_JINJA_TOOLS = 1024, /* a Jinja template that reads `tools` */
    F_JINJA_EFFORT = 2048, /* a Jinja template that reads `reasoning_effort`, or a Go one .ThinkLevel (gpt-oss) */
    F_HARMONY = 4096, /* gpt-oss's harmony format: channels, recipients (harmony.c) */
};

/* What chat_template_new learned from a template; read by the renderers. */
struct chat_template {
    chat_family family;
    unsigned flags;
    char *bos, *eos;
    char *default_system; /* chatml: the system turn written when the conversation has none */
    char *date; /* F_LLAMA31: the "Today Date" the template falls back to */
    char *warning;
    chat_gotmpl *go; /* CHAT_OLLAMA: the parsed Go template */
    chat_jinja *jinja; /* a Jinja template that parses: it renders, the family only classifies */
};

/* A growing NUL-terminated string; an allocation failure sets oom and drops what follows, so
 * renderers check once at the end. */
typedef struct chat_buf {
    char *p;
    size_t n, cap;
    int oom;
} chat_buf;
void chat__put(chat_buf *b, const char *s, size_t len);
void chat__puts(chat_buf *b, const char *s);
/* chat.c: s without leading and trailing white space as Python's str.strip() sees it (Jinja's
 * trim); a template's warning. */
void chat__put_trimmed(chat_buf *b, const char *s);
/* s[*start_out..*end_out) is s[0..len) without that white space (jinja_lib.c's trim and strip) */
void chat__trim_span(const char *s, size_t len, size_t *start_out, size_t *end_out);
int chat__warning_set(chat_template *t, const char *msg);

/* tooltmpl.c: recognizing the templates that render tools from their source s (1 or 0;
 * chat__llama31 sets F_LLAMA31 | F_TOOLS and the date, or a warning: 0 or MS_ENOMEM) ... */
int chat__qwen25_tools(const char *s);
int chat__llama31(chat_template *t, const char *s);
int chat__mistral_nemo(const char *s);
/* ... and rendering them: 0, MS_EINVALID where the template refuses, MS_ENOMEM. */
int chat__render_llama31(chat_buf *b, const chat_template *t, const chat_msg *m, size_t n, const chat_tool *tools,
                         size_t n_tools, int gen);
int chat__render_qwen25(chat_buf *b, const chat_template *t, const chat_msg *m, size_t n, const chat_tool *tools,
                        size_t n_tools, int gen);
int chat__render_mistral(chat_buf *b, const chat_template *t, const chat_msg *m, size_t n, const chat_tool *tools,
                         size_t n_tools);

/* jinja_chat.c: render with t->jinja; think as chat_render_think's (-1 leaves enable_thinking unset). MS_EINVALID where the
 * template raises or fails, or a call's arguments or a tool's parameters are not JSON. */
int chat__render_jinja(char **out, size_t *len_out, const chat_template *t, const chat_msg *m, size_t n,
                       const chat_tool *tools, size_t n_tools, int gen, int think);

/* What the Jinja templates' `tojson` writes under transformers (pyjson.c): Python's
 * json.dumps(x, ensure_ascii=False, indent=indent), indent 0 meaning none. */
/* x is the JSON text `json` (a client's arguments or parameters); MS_EINVALID when it is not JSON,
 * the message naming `what`. */
int chat__tojson(chat_buf *b, const char *json, int indent, const char *what);
/* json.dumps of the string s[0..len), and Python's repr of the float x (jinja_lib.c prints with them). */
void chat__pystr(chat_buf *b, const char *s, size_t len);
void chat__pyreal(chat_buf *b, double x);
/* x is the string s ({{ message.content | tojson }}). */
void chat__tojson_str(chat_buf *b, const char *s);
/* x is the tool as transformers passes it: {"type": "function", "function": {"name": ..,
 * "description": .., "parameters": ..}}, description and parameters only where given.
 * MS_EINVALID when its parameters are not JSON. */
int chat__tojson_tool(chat_buf *b, const chat_tool *tool, int indent);

/* think.c: the splitters' output (think.c, harmony.c). Pieces of one kind are gathered, and go
 * out when the kind changes or the feed ends (chat__out_flush). */
typedef struct chat__out {
    chat_think_fn fn;
    void *ctx;
    int kind; /* of the gathered run; -1 none */
    const char *p; /* a run inside the fed text, or NULL while it is in buf */
    size_t n;
    char buf[256];
    int rc;
} chat__out;

void chat__out_flush(chat__out *o);
/* One piece of a kind; in_text: s lies in the fed text, where adjacent pieces join without a
 * copy (held bytes are copied into buf). */
void chat__out_put(chat__out *o, int kind, const char *s, size_t len, int in_text);
/* harmony.c: 1 when the template text s holds harmony's markers (gpt-oss) */
int chat__harmony_looks(const char *s);

#endif
