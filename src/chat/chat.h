/* chat.h: chat prompts rendered with a model's template; the whole surface of src/chat.
 *
 * Models ship a Jinja template (GGUF tokenizer.chat_template, Hugging Face tokenizer_config.json
 * or chat_template.jinja, kept in the store as the MT_TEMPLATE layer). Rather than run Jinja,
 * we recognize the template's family by its markers, as llama.cpp's llm_chat_detect_template
 * does, and render with a built-in renderer per family, byte for byte what the official
 * templates produce (tests/data/chat holds the templates and their renders by jinja2):
 *   llama2   "[INST]" with "<<SYS>>"         Llama 2 chat: <s>[INST] <<SYS>>..<</SYS>> .. [/INST] .. </s>
 *   llama3   "<|start_header_id|>"          Llama 3 instruct: headers, trimmed contents, <|eot_id|>
 *   chatml   "<|im_start|>"                 ChatML (Qwen 2 / 2.5 with their default system prompt)
 *   gemma    "<start_of_turn>"              Gemma 1/2/3: "model" for assistant, system folded into
 *                                           the first user turn as Gemma 3 does
 *   phi3     "<|user|>" + "<|end|>"         Phi-3 (4k: <|assistant|> after each user turn) and
 *                                           Phi-3.5 (system turns, generation prompt or eos)
 * Details a template varies within a family (a BOS text, a default system prompt, Phi-3's
 * variants) are read from the template text. Anything else renders plainly ("role: content"
 * lines) and the template says why in chat_template_warning: a template is never a reason to
 * fail. No template at all renders as ollama's default, "{{ .Prompt }}", does: the user
 * messages' contents, one after another, nothing else (one message: the bare prompt). */
#ifndef MSTORE_CHAT_H
#define MSTORE_CHAT_H

#include <stddef.h>

#include "format/format.h"
#include "manifest/manifest.h"

typedef enum chat_family {
    CHAT_PLAIN = 0,   /* no template (rendered bare), or one we do not recognize */
    CHAT_LLAMA2,
    CHAT_LLAMA3,
    CHAT_CHATML,
    CHAT_GEMMA,
    CHAT_PHI3,
    CHAT_OLLAMA,      /* an ollama Go template inside the subset gotmpl.c renders */
} chat_family;

const char *chat_family_name(chat_family f);   /* "plain", "llama2", "llama3", "chatml", "gemma", "phi3", "ollama" */

/* One message. role: "system", "user" or "assistant" (others render where the template would,
 * as their own role; renderers that know only these drop or refuse them as the template does). */
typedef struct chat_msg {
    const char *role;
    const char *content;
} chat_msg;

typedef struct chat_template chat_template;

/* Recognize `text` (len bytes; NULL or empty: no template). bos / eos: the texts the template's
 * bos_token / eos_token stand for (the tokenizer's; NULL: ""). Copies what it needs. Never
 * refuses a template: an unknown one gives CHAT_PLAIN with a warning. MS_ENOMEM only. */
int chat_template_new(chat_template **out, const char *text, size_t len, const char *bos, const char *eos);
void chat_template_free(chat_template *t);   /* NULL is fine */
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
void chat_gotmpl_free(chat_gotmpl *t);   /* NULL is fine */
int chat_gotmpl_render(char **out, size_t *len_out, const chat_gotmpl *t, const chat_msg *msgs, size_t n);
/* 1 when `text` reads as a Go template rather than Jinja ("{{" actions and no "{%"). */
int chat_gotmpl_looks(const char *text, size_t len);

#endif
