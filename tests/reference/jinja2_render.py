#!/usr/bin/env python3
"""jinja2_render.py TEMPLATE CONTEXT.json: render a chat template with Python's jinja2 the way
transformers' apply_chat_template does (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks,
loopcontrols; tojson as json.dumps(ensure_ascii=False); raise_exception; strftime_now, its clock
fixed by SOURCE_DATE_EPOCH in UTC when set). The expected texts of tests/unit/test_jinja.c were
rendered this way (jinja2 3.1), over the context that file holds."""
import json
import os
import sys
from datetime import datetime, timezone

from jinja2.exceptions import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment


def raise_exception(msg):
    raise TemplateError(msg)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(fmt):
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    now = datetime.fromtimestamp(int(epoch), timezone.utc) if epoch else datetime.now()
    return now.strftime(fmt)


env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
env.filters["tojson"] = tojson
env.globals["raise_exception"] = raise_exception
env.globals["strftime_now"] = strftime_now
template = env.from_string(open(sys.argv[1], encoding="utf-8").read())
sys.stdout.write(template.render(**json.load(open(sys.argv[2], encoding="utf-8"))))
