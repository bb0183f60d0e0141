#!/usr/bin/env python3
"""render.py: the expected chat renders (expected.json) for tests/unit/test_chat.c.

Renders every template in templates/*.jinja over every conversation in conversations.json,
with and without add_generation_prompt, the way Hugging Face transformers' apply_chat_template
does: a sandboxed jinja2 environment with trim_blocks and lstrip_blocks, raise_exception and
tojson. A template that raises records the error instead of a text. Run it again after adding a
template or a conversation:  /usr/bin/python3 tests/data/chat/render.py   (needs python3-jinja2)
"""
import json
import os
import sys

from jinja2.exceptions import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))

# Each template file: the family mstore must detect, and the bos / eos texts of its tokenizer.
TEMPLATES = {
    "llama2": ("llama2", "<s>", "</s>"),
    "llama3": ("llama3", "<|begin_of_text|>", "<|eot_id|>"),
    "chatml": ("chatml", "", "<|im_end|>"),
    "qwen2": ("chatml", "", "<|im_end|>"),
    "qwen2.5": ("chatml", "", "<|im_end|>"),
    "gemma": ("gemma", "<bos>", "<eos>"),
    "gemma3": ("gemma", "<bos>", "<eos>"),
    "phi3": ("phi3", "<s>", "<|endoftext|>"),
    "phi3.5": ("phi3", "<s>", "<|endoftext|>"),
    "unknown-alpaca": ("plain", "<s>", "</s>"),
}


def raise_exception(message):
    raise TemplateError(message)


def main():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    env.filters["tojson"] = lambda x, **kw: json.dumps(x, ensure_ascii=False, **kw)
    with open(os.path.join(HERE, "conversations.json"), encoding="utf-8") as f:
        convs = json.load(f)
    out = {}
    for name, (family, bos, eos) in TEMPLATES.items():
        with open(os.path.join(HERE, "templates", name + ".jinja"), encoding="utf-8") as f:
            tmpl = env.from_string(f.read())
        renders = []
        for i, conv in enumerate(convs):
            for gen in (True, False):
                r = {"conv": i, "gen": gen}
                try:
                    r["text"] = tmpl.render(messages=conv, add_generation_prompt=gen, bos_token=bos,
                                            eos_token=eos)
                except TemplateError as e:
                    r["error"] = str(e)
                renders.append(r)
        out[name] = {"family": family, "bos": bos, "eos": eos, "renders": renders}
    with open(os.path.join(HERE, "expected.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
