/* chat.h: chat prompts rendered with a model's template; the whole surface of src/chat.
 *
 * Models ship a Jinja template (GGUF tokenizer.chat_template, Hugging Face tokenizer_config.json
 * or chat_template.jinja, kept in the store as the MT_TEMPLATE layer). A Jinja template that
 * parses is run by the Jinja interpreter (chat_jinja_*, below), as transformers renders it; an
 * ollama Go template by gotmpl.c. Either way the template's family is also recognized by its
 * markers, as llama.cpp's llm_chat_detect_template does: it says how the model writes tool
 * calls and thinks, and a template that parses as neither is rendered by a built-in renderer per
 * family, byte for byte what the official templates produce (tests/data/chat holds the
 * templates and their renders by jinja2):
 *   llama2   "[INST]" with "<<SYS>>"         Llama 2 chat: <s>[INST] <<SYS>>..<</SYS>> .. [/INST] .. </s>
 *   llama3   "<|start_header_id|>"          Llama 3 instruct: headers, trimmed contents, <|eot_id|>;
 *                                           Meta's Llama 3.1 / 3.2 templates with their dated system
 *                                           header, and tools
 *   chatml   "<|im_start|>"                 ChatML (Qwen 2 / 2.5 with their default system prompt);
 *                                           Qwen 2.5's template with tools
 *   gemma    "<start_of_turn>"              Gemma 1/2/3: "model" for assistant, system folded into
 *                                           the first user turn as Gemma 3 does
 *   phi3     "<|user|>" + "<|end|>"         Phi-3 (4k: <|assistant|> after each user turn) and
 *                                           Phi-3.5 (system turns, generation prompt or eos)
 *   mistral  "[INST]" + "[TOOL_CALLS]["     Mistral Nemo 2407's template exactly (other [INST]
 *                                           templates without <<SYS>> render plainly): the system
 *                                           message in the last user turn, tools before it; calls
 *                                           and results need the 9-character ids it demands
 * Tools (chat_render_tools) render in the Llama 3.1 / 3.2, Qwen 2.5 and Mistral Nemo templates, and in ollama
 * templates with .Tools; the other templates refuse them.
 * Details a template varies within a family (a BOS text, a default system prompt, Phi-3's
 * variants) are read from the template text. Anything else that is not Jinja renders plainly ("role: content"
 * lines) and the template says why in chat_template_warning: a template is never a reason to
 * fail. No template at all renders as ollama's default, "{{ .Prompt }}", does: the user
 * messages' contents, one after another, nothing else (one message: the bare prompt). */
#ifndef MSTORE_CHAT_H
#define MSTORE_CHAT_H

#include <stddef.h>

#include "format/format.h"
#include "manifest/manifest.h"

typedef enum chat_family {
    CHAT_PLAIN = 0, /* no template (rendered bare), or one we do not recognize */
    CHAT_LLAMA2,
    CHAT_LLAMA3,
    CHAT_CHATML,
    CHAT_GEMMA,
    CHAT_PHI3,
    CHAT_OLLAMA, /* an ollama Go template inside the subset gotmpl.c renders */
    CHAT_MISTRAL, /* Mistral Nemo's [INST] template, with [AVAILABLE_TOOLS] and [TOOL_CALLS] */
} chat_family;

/* "plain", "llama2", "llama3", "chatml", "gemma", "phi3", "ollama", "mistral" */
const char *chat_family_name(chat_family f);

/* A tool call, as an assistant message carries it (input) or as chat_tool_calls_parse finds it
 * in a model's answer (output: owned, free with chat_tool_calls_free). arguments: a JSON object's
 * text. id: the client's id for it (OpenAI "call_..."), or NULL. */
typedef struct chat_tool_call {
    const char *id;
    const char *name;
    const char *arguments;
} chat_tool_call;

/* One message. role: "system", "user", "assistant" or "tool" (others render where the template
 * would, as their own role; renderers that know only these drop or refuse them as the template
 * does). An assistant message may carry tool calls; a "tool" message is a call's result
 * (content), naming the tool (tool_name) and the call (tool_call_id) where the client did. */
typedef struct chat_msg {
    const char *role;
    const char *content;
    const chat_tool_call *tool_calls;
    size_t n_tool_calls;
    const char *tool_name; /* role "tool": the function whose result this is, or NULL */
    const char *tool_call_id; /* role "tool": the call answered, or NULL */
    const char *thinking; /* an assistant's reasoning, as ollama's clients send it back (ollama
                           * templates' .Thinking), or NULL */
} chat_msg;

/* A tool the model may call (ollama's and OpenAI's {"type": "function", "function": {...}}):
 * parameters is a JSON Schema's text (NULL: none). */
typedef struct chat_tool {
    const char *name;
    const char *description; /* NULL: none */
    const char *parameters;
} chat_tool;

typedef struct chat_template chat_template;

/* Recognize `text` (len bytes; NULL or empty: no template). bos / eos: the texts the template's
 * bos_token / eos_token stand for (the tokenizer's; NULL: ""). Copies what it needs. Never
 * refuses a template: an unknown one gives CHAT_PLAIN with a warning. MS_ENOMEM only. */
int chat_template_new(chat_template **out, const char *text, size_t len, const char *bos, const char *eos);
void chat_template_free(chat_template *t); /* NULL is fine */
chat_family chat_template_family(const chat_template *t);
/* Why the template renders plainly or not quite as its Jinja would; NULL when it renders
 * exactly. Borrowed. */
const char *chat_template_warning(const chat_template *t);

/* Render msgs[0..n) into a malloc'd NUL-terminated string (*out; *len_out bytes without the
 * NUL). add_generation_prompt: end with the opening of an assistant turn, as the template's
 * add_generation_prompt does. Returns 0, MS_EINVALID when the template itself would refuse
 * the conversation (llama2 / gemma: "conversation roles must alternate user/assistant/..."),
 * MS_ENOMEM. */
int chat_render(char **out, size_t *len_out, const chat_template *t, const chat_msg *msgs, size_t n,
                int add_generation_prompt);

/* chat_render with tool definitions offered to the model, rendered where and as the template
 * renders them (ollama's .Tools; the Jinja families' `tools`). With n_tools 0 it is chat_render.
 * MS_EUNSUPPORTED when tools are given and the template has no place for them ("the model's
 * template (chatml) does not support tools"). MS_EINVALID where the template itself refuses (Llama
 * 3.1: more than one call in a message, tools without a user message; Mistral: a call or result
 * whose id is not 9 characters) and where a tool's parameters or a call's arguments are not JSON. */
int chat_render_tools(char **out, size_t *len_out, const chat_template *t, const chat_msg *msgs, size_t n,
                      const chat_tool *tools, size_t n_tools, int add_generation_prompt);

/* How a template's model writes tool calls in its answer. */
typedef struct chat_tool_syntax {
    char prefix[64]; /* opens the call(s): "<tool_call>\n", "[TOOL_CALLS]", "" (a bare JSON object) */
    char suffix[64]; /* closes one call: "\n</tool_call>", or "" */
    char args_key[16]; /* the call's arguments member: "arguments" or "parameters" */
    char name_key[16]; /* the call's name member: "" for "name" (Command R+ writes "tool_name") */
    int array; /* the calls are one JSON array after the prefix (Mistral), not one object each */
    int harmony; /* gpt-oss: calls are harmony messages (chat_harmony_feed finds them); the rest is "" */
} chat_tool_syntax;
/* The syntax of t's tool calls. MS_EUNSUPPORTED when the template renders no tools. */
int chat_template_tool_syntax(const chat_template *t, chat_tool_syntax *out);
/* The tool calls in a model's answer written with syntax s: *calls (owned, *n_calls of them; NULL
 * and 0 when there are none) and *content_len, the bytes of text before the first call (the
 * answer's content). Arguments come out as compact JSON object text; a call whose JSON does not
 * parse, or has no name, ends the calls (what precedes it is kept). MS_ENOMEM only. */
int chat_tool_calls_parse(const chat_tool_syntax *s, const char *text, size_t len, chat_tool_call **calls,
                          size_t *n_calls, size_t *content_len);
void chat_tool_calls_free(chat_tool_call *calls, size_t n); /* NULL is fine */

/* The template text of a GGUF (tokenizer.chat_template), malloc'd and NUL-terminated.
 * MS_ENOTFOUND when there is none; MS_EINVALID, MS_EIO, MS_ENOMEM. A stored model's template
 * is its MT_TEMPLATE layer: the caller reads those bytes (store_model_find) and passes them to
 * chat_template_new; this module never reads the store. */
int chat_template_text_gguf(char **out, size_t *len_out, const gguf_file *g);

/* ollama's Go templates (gotmpl.c): the subset its model library uses, rendered as ollama's
 * template.Execute renders them (see gotmpl.c for the subset and the data). Parse refuses
 * with the line: MS_EINVALID for a template Go would refuse too, MS_EUNSUPPORTED for valid Go
 * outside the subset. Render: MS_EUNSUPPORTED when execution needs what the subset lacks (an
 * unknown field), MS_EINVALID past the output bound. */
#define CHAT_GOTMPL_MAX_TEXT (1u << 20)
typedef struct chat_gotmpl chat_gotmpl;
int chat_gotmpl_parse(chat_gotmpl **out, const char *text, size_t len);
void chat_gotmpl_free(chat_gotmpl *t); /* NULL is fine */
int chat_gotmpl_render(char **out, size_t *len_out, const chat_gotmpl *t, const chat_msg *msgs, size_t n);
/* The same with .Tools (ollama's api.Tool values: printed as ollama's json.Marshal prints them). */
int chat_gotmpl_render_tools(char **out, size_t *len_out, const chat_gotmpl *t, const chat_msg *msgs, size_t n,
                             const chat_tool *tools, size_t n_tools);
/* How an ollama template's model writes tool calls, found as ollama finds it: from what the
 * template renders for a tool call. MS_EUNSUPPORTED when the template has no .ToolCalls. */
int chat_gotmpl_tool_syntax(const chat_gotmpl *t, chat_tool_syntax *out);
/* chat_gotmpl_render_tools (n_tools may be 0) with the request's think: .Think is think > 0,
 * .IsThinkSet think >= 0 (-1: the request left it unset), .ThinkLevel its level ("low", ...) or "". */
int chat_gotmpl_render_think(char **out, size_t *len_out, const chat_gotmpl *t, const chat_msg *msgs, size_t n,
                             const chat_tool *tools, size_t n_tools, int think);
/* 1 when `text` reads as a Go template rather than Jinja ("{{" actions and no "{%"). */
int chat_gotmpl_looks(const char *text, size_t len);

/* Jinja (jinja_*.c): a sandboxed interpreter of the subset Hugging Face chat templates use,
 * rendered as transformers renders them (trim_blocks, lstrip_blocks; tojson as json.dumps;
 * raise_exception, strftime_now). Parse: MS_EINVALID naming the line ("chat template line 12:
 * unclosed 'for' block").
 * Render: the context is a JSON object's text whose members are the template's variables
 * (messages, tools, add_generation_prompt, bos_token, ...); MS_EINVALID for an error the
 * template runs into or raises ("chat template line 3: Conversation roles must alternate"),
 * and past the bounds on steps, memory and nesting. No file, clock aside, is ever touched. */
typedef struct chat_jinja chat_jinja;
int chat_jinja_parse(chat_jinja **out, const char *text, size_t len);
void chat_jinja_free(chat_jinja *t); /* NULL is fine */
int chat_jinja_render_json(char **out, size_t *len_out, const chat_jinja *t, const char *context_json);

/* ---- thinking (think.c): the reasoning a model writes between <think> and </think> before
 * its answer (Qwen3, QwQ, DeepSeek-R1); gpt-oss's harmony channels are harmony.c's, below. */

/* 1 when the model of template t can think, as ollama's "thinking" capability says: an ollama
 * template that writes a message's .Thinking between <think> and </think>; a Jinja template
 * that knows </think> (Qwen3 and QwQ split it off past turns, DeepSeek-R1 likewise); a harmony
 * template (gpt-oss: it thinks in its analysis channel, as much as reasoning_effort says). A
 * template that only reads reasoning_effort gets the level but has nothing to split: it does not. */
int chat_template_thinks(const chat_template *t);
/* 1 when t is a Jinja template that reads reasoning_effort, or an ollama one that reads
 * .ThinkLevel (gpt-oss's): it takes a request's effort level (CHAT_THINK_LOW ...) */
int chat_template_effort(const chat_template *t);

/* A request's think: unset, off, on, or on with an effort level (OpenAI's reasoning_effort,
 * ollama's think "low" .. "high"), which a Jinja template reads as reasoning_effort. */
enum { CHAT_THINK_UNSET = -1, CHAT_THINK_OFF, CHAT_THINK_ON, CHAT_THINK_MINIMAL, CHAT_THINK_LOW, CHAT_THINK_MEDIUM,
       CHAT_THINK_HIGH };
/* "minimal" .. "high" for an effort level; NULL for the other think values */
const char *chat_think_effort(int think);

/* chat_render_tools with the request's think (CHAT_THINK_*; a level is on). Off renders as the
 * template turns thinking off where it can: Qwen3's enable_thinking=false (an empty
 * "<think>\n\n</think>\n\n" after the generation prompt); ollama templates see .Think and
 * .IsThinkSet; Jinja templates see enable_thinking when think is set, and reasoning_effort
 * with a level. Otherwise as chat_render_tools. */
int chat_render_think(char **out, size_t *len_out, const chat_template *t, const chat_msg *msgs, size_t n,
                      const chat_tool *tools, size_t n_tools, int add_generation_prompt, int think);

/* 1 when a rendered prompt ends with "<think>" (white space after it aside): the template
 * opened the thinking block, so the answer begins inside it (chat_think_feed it first). */
int chat_think_prefilled(const char *prompt, size_t len);

/* The streaming splitter, as ollama's thinking parser splits: white space, then "<think>" at
 * the start of the answer opens the reasoning (anything else first: all of it is content);
 * the reasoning runs to "</think>"; the white space around both tags is dropped; the rest is
 * content. Tags may be cut anywhere across feeds: what might begin one is held back until the
 * next feed or chat_think_end says. No allocation: it holds at most CHAT_THINK_HOLD bytes
 * (white space before "<think>" beyond that gives up looking: it is all content). */
#define CHAT_THINK_HOLD 64
typedef struct chat_think {
    int state;
    int opened;   /* 1 once "<think>" opened the answer: its content is what follows "</think>" */
    size_t n;
    char held[CHAT_THINK_HOLD + 8];
} chat_think;
/* Where the pieces go, in order: thinking 1 for reasoning, 0 for content (len > 0). A non-zero
 * return stops the feed and is returned by it. */
typedef int (*chat_think_fn)(void *ctx, int thinking, const char *s, size_t len);
void chat_think_init(chat_think *s);
int chat_think_feed(chat_think *s, const char *text, size_t len, chat_think_fn fn, void *ctx);
/* The answer ended: what is held goes out (a cut "<thi" as content, a cut "</thi" inside the
 * reasoning as reasoning). */
int chat_think_end(chat_think *s, chat_think_fn fn, void *ctx);

/* ---- gpt-oss's harmony format (harmony.c). The model's answer is messages on channels:
 *   <|channel|>analysis<|message|>REASONING<|end|><|start|>assistant<|channel|>final<|message|>ANSWER<|return|>
 * a tool call a commentary message to a recipient, its body the arguments' JSON:
 *   <|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{"a":1}<|call|>
 * (the recipient may also follow the role: <|start|>assistant to=functions.NAME<|channel|>...).
 * The tokenizer decodes the markers as their text (tokenizer.h), so the splitter sees them. */

/* 1 when t writes harmony: its text has "<|channel|>", "<|start|>" and "<|message|>" (gpt-oss's
 * Jinja template and ollama's Go one alike). */
int chat_template_harmony(const chat_template *t);

/* The streaming splitter, as ollama's harmony parser reads an answer: it begins inside the first
 * message's header (the prompt ends "<|start|>assistant"). The analysis channel is the reasoning;
 * a message with a recipient (to=NAME) is a tool call; final, commentary without a recipient (a
 * preamble) and unknown channels are content. Markers never reach the pieces. Pieces go to a
 * chat_think_fn whose `thinking` argument is the kind:
 *   CHAT_HARMONY_CONTENT, CHAT_HARMONY_THINKING  text
 *   CHAT_HARMONY_CALL   a call begins: its name (the recipient less "functions."; may be empty)
 *   CHAT_HARMONY_ARGS   the call's arguments, in pieces: the message body as the model wrote it
 * A call's arguments end at the next CALL or the answer's end. Markers may be cut anywhere across
 * feeds. No allocation: a header is held whole, at most CHAT_HARMONY_HOLD bytes (an answer whose
 * first header is longer is not harmony: all of it is content); in a body, only a cut marker. */
enum { CHAT_HARMONY_CONTENT = 0, CHAT_HARMONY_THINKING = 1, CHAT_HARMONY_CALL = 2, CHAT_HARMONY_ARGS = 3 };
#define CHAT_HARMONY_HOLD 256
typedef struct chat_harmony {
    int state;
    int kind; /* of the current body (-1 in a header a marker opened) */
    size_t n;
    char held[CHAT_HARMONY_HOLD + 16];
} chat_harmony;
void chat_harmony_init(chat_harmony *h);
int chat_harmony_feed(chat_harmony *h, const char *text, size_t len, chat_think_fn fn, void *ctx);
/* The answer ended (at <|return|> or <|call|>, which end generation, or cut short): a cut marker
 * in a body goes out as the body's text; a cut header is dropped, unless the answer was only that
 * and held no marker (then it is content). */
int chat_harmony_end(chat_harmony *h, chat_think_fn fn, void *ctx);

#endif
