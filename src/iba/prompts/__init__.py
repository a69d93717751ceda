"""Prompt templates live in this folder as `<name>.jinja` files.

A template defines `{% block system %}` and `{% block user %}`; `render` returns the chat
messages plus the sha256 of the template source, which every result records so that a changed
prompt is visible in the data. A template may also define `{% block followup %}`: the same step
asked as the next user turn of a conversation that is already open (`render(..., followup=True)`;
see iba.agents.step_prompts), which carries the step's rules itself.
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


def render(name: str, *, followup: bool = False, **variables: Any) -> Prompt:
    """Render template `name` into [system?, user] messages, or (followup=True) into the one user
    message that continues an open conversation."""
    try:
        tmpl = _ENV.get_template(f"{name}.jinja")
    except jinja2.TemplateNotFound:
        raise KeyError(f"no prompt template {name!r}; have: {', '.join(names())}") from None
    ctx = tmpl.new_context(dict(variables))
    blocks = (("user", "followup"),) if followup else (("system", "system"), ("user", "user"))
    if followup and "followup" not in tmpl.blocks:
        raise ValueError(f"prompt template {name!r} has no followup block")
    messages = []
    for role, block in blocks:
        if block in tmpl.blocks:
            text = "".join(tmpl.blocks[block](ctx)).strip()
            if text:
                messages.append({"role": role, "content": text})
    if not messages:
        raise ValueError(f"prompt template {name!r} defines neither a system nor a user block")
    return Prompt(name=name, hash=template_hash(name), messages=messages)
