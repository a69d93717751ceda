"""Prompt templates live in this folder as `<name>.jinja` files.

A template defines `{% block system %}` and `{% block user %}`; `render` returns the chat
messages plus the sha256 of the template source, which every result records so that a changed
prompt is visible in the data.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2

_DIR = Path(__file__).parent
_ENV = jinja2.Environment(
    loader=jinja2.FileSystemLoader(str(_DIR)),
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=False,
)


@dataclass(frozen=True)
class Prompt:
    name: str
    hash: str
    messages: list[dict[str, str]]


@lru_cache(maxsize=None)
def template_hash(name: str) -> str:
    return hashlib.sha256((_DIR / f"{name}.jinja").read_bytes()).hexdigest()[:16]


def names() -> list[str]:
    return sorted(p.stem for p in _DIR.glob("*.jinja"))


def render(name: str, **variables: Any) -> Prompt:
    """Render template `name` into [system?, user] messages."""
    try:
        tmpl = _ENV.get_template(f"{name}.jinja")
    except jinja2.TemplateNotFound:
        raise KeyError(f"no prompt template {name!r}; have: {', '.join(names())}") from None
    ctx = tmpl.new_context(dict(variables))
    messages = []
    for role in ("system", "user"):
        if role in tmpl.blocks:
            text = "".join(tmpl.blocks[role](ctx)).strip()
            if text:
                messages.append({"role": role, "content": text})
    if not messages:
        raise ValueError(f"prompt template {name!r} defines neither a system nor a user block")
    return Prompt(name=name, hash=template_hash(name), messages=messages)
