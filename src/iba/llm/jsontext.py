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
    # Leading/trailing prose: decode from each "{" until one parses as a whole object.
    decoder = json.JSONDecoder(strict=False)
    for m in re.finditer(r"\{", text):
        try:
            value, _ = decoder.raw_decode(text, m.start())
        except (ValueError, RecursionError):
            continue
        if isinstance(value, dict):
            return value
    if not text:
        raise ValueError("the reply is empty; expected a JSON object")
    raise ValueError(f"no JSON object found in the reply (starts with {text[:60]!r})")
