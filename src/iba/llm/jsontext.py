"""Find the JSON object in a model's reply: bare, inside ```json fences, or after leading prose."""

from __future__ import annotations

import json
import re
from typing import Any

_FENCE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\n?(.*?)```", re.S)


def extract_json_object(text: str) -> dict[str, Any]:
    """The first JSON object in `text`; raises ValueError saying what was wrong.

    Raw control characters inside strings (a newline in a quote) are read as the text they are:
    strict JSON rejects them, but the meaning is unambiguous, and servers built on llama-cpp-python's
    schema grammar let models write them."""
    text = text.strip()
    candidates = [text] + [m.group(1).strip() for m in _FENCE.finditer(text)]
    for cand in candidates:
        try:
            value = json.loads(cand, strict=False)
        except (ValueError, RecursionError):  # deep nesting raises RecursionError: unparseable too
            continue
        if isinstance(value, dict):
            return value
        if isinstance(value, list):  # a whole list, e.g. [{"name": ..., "arguments": ...}]: its first object
            first = next((v for v in value if isinstance(v, dict)), None)
            if first is not None:
                return first
    # Leading/trailing prose: decode from each "{" until one parses as a whole object, skipping those
    # that open a value inside a broken object: a cut-off action's inner `{"x": 1}` is not the reply
    # (and could validate against a lenient schema).
    decoder = json.JSONDecoder(strict=False)
    for m in re.finditer(r"\{", text):
        if _opens_a_member(text, m.start()):
            continue
        try:
            value, _ = decoder.raw_decode(text, m.start())
        except (ValueError, RecursionError):
            continue
        if isinstance(value, dict):
            return value
    if not text:
        raise ValueError("the reply is empty; expected a JSON object")
    raise ValueError(f"no JSON object found in the reply (starts with {text[:60]!r})")


def _opens_a_member(text: str, i: int) -> bool:
    """Whether the "{" at `i` follows `[`, `,`, `{` or a key's `":` (not prose such as "Here: {")."""
    j = i - 1
    while j >= 0 and text[j].isspace():
        j -= 1
    if j < 0:
        return False
    if text[j] in "[,{":
        return True
    if text[j] != ":":
        return False
    j -= 1
    while j >= 0 and text[j].isspace():
        j -= 1
    return j >= 0 and text[j] == '"'
