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

# Each template file: the family mstore must detect, the bos / eos texts of its tokenizer, and
# whether mstore renders its tools (the others must refuse tools).
TEMPLATES = {
    "llama2": ("llama2", "<s>", "</s>", False),
    "llama3": ("llama3", "<|begin_of_text|>", "<|eot_id|>", False),
    "llama3.1": ("llama3", "<|begin_of_text|>", "<|eot_id|>", True),
    "llama3.2": ("llama3", "<|begin_of_text|>", "<|eot_id|>", True),
    "chatml": ("chatml", "", "<|im_end|>", False),
    "qwen2": ("chatml", "", "<|im_end|>", False),
    "qwen2.5": ("chatml", "", "<|im_end|>", True),
    "gemma": ("gemma", "<bos>", "<eos>", False),
    "gemma3": ("gemma", "<bos>", "<eos>", False),
    "phi3": ("phi3", "<s>", "<|endoftext|>", False),
    "phi3.5": ("phi3", "<s>", "<|endoftext|>", False),
    "mistral-nemo": ("mistral", "<s>", "</s>", True),
    "unknown-alpaca": ("plain", "<s>", "</s>", False),
}


def render(tmpl, gen, bos, eos, messages, tools=None):
    """One render record: the text, or the error the template raised."""
    r = {"gen": gen}
    try:
        # as transformers passes them: tools=None when there are none
        r["text"] = tmpl.render(messages=messages, tools=tools, add_generation_prompt=gen, bos_token=bos,
                                eos_token=eos)
    except TemplateError as e:
        r["error"] = str(e)
    return r


def raise_exception(message):
    raise TemplateError(message)


def main():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    env.filters["tojson"] = lambda x, **kw: json.dumps(x, ensure_ascii=False, **kw)
    with open(os.path.join(HERE, "conversations.json"), encoding="utf-8") as f:
        convs = json.load(f)
    # tools.json: {"tools": [...] or null, "messages": [...]}, in transformers' shapes
    with open(os.path.join(HERE, "tools.json"), encoding="utf-8") as f:
        tool_convs = json.load(f)
    out = {}
    for name, (family, bos, eos, has_tools) in TEMPLATES.items():
        with open(os.path.join(HERE, "templates", name + ".jinja"), encoding="utf-8") as f:
            tmpl = env.from_string(f.read())
        renders = []
        for i, conv in enumerate(convs):
            for gen in (True, False):
                renders.append(dict(conv=i, **render(tmpl, gen, bos, eos, conv)))
        # a template mstore renders no tools for: only that tools are refused
        tool_renders = []
        for i, tc in enumerate(tool_convs):
            for gen in (True, False):
                if has_tools:
                    tool_renders.append(dict(conv=i, **render(tmpl, gen, bos, eos, tc["messages"], tc["tools"])))
                elif tc["tools"]:
                    tool_renders.append({"conv": i, "gen": gen, "unsupported": True})
        out[name] = {"family": family, "bos": bos, "eos": eos, "tools": has_tools, "renders": renders,
                     "tool_renders": tool_renders}
    with open(os.path.join(HERE, "expected.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
