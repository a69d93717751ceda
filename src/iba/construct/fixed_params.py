"""Task-fixed API parameters that a request template states (delivery time, party size, ...).

Taxonomy request templates are plain text with a `{topic}` slot, so the values a request fixes
are read back from the template with simple patterns: clock times for time parameters, dates for
date parameters, an enum value named in the text, and a count (digits, number words, "for me")
when the API has exactly one integer parameter that is not a slot. What is not recognised is left
out of AnswerKey.fixed_params (it is not scored either way).
"""

from __future__ import annotations

import re
from typing import Any

from iba.types import ApiParam, ApiTemplate

_TIME = re.compile(r"\b([01]?\d|2[0-3])[:.]([0-5]\d)\b")
_DATE = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_WORDS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
    "ten": 10, "eleven": 11, "twelve": 12, "a couple of": 2, "a pair of": 2, "single": 1,
}
_SOLO = re.compile(r"\b(just for me|only for me|for me|just me|for myself|solo|alone)\b", re.I)


def _is_time(p: ApiParam) -> bool:
    return p.type == "string" and ("HH:MM" in p.description or p.name.endswith("time"))


def _is_date(p: ApiParam) -> bool:
    return p.type == "string" and ("YYYY-MM-DD" in p.description or "date" in p.name)


def _counts(text: str) -> list[int]:
    without_times = _DATE.sub(" ", _TIME.sub(" ", text))
    found = [int(m) for m in re.findall(r"(?<![\w.])(\d{1,3})(?![\w.:])", without_times)]
    low = without_times.lower()
    for word, n in _WORDS.items():
        found += [n] * len(re.findall(rf"\b{word}\b", low))
    if not found and _SOLO.search(text):
        found = [1]
    return found


def extract_fixed_params(template: str, api: ApiTemplate) -> dict[str, Any]:
    """The task-fixed parameters `template` states (read without its {topic} filling)."""
    text = template.replace("{topic}", " ")
    out: dict[str, Any] = {}
    fixed = [p for p in api.params if not p.slot]
    for p in fixed:
        if _is_time(p):
            m = _TIME.search(text)
            if m:
                out[p.name] = f"{int(m.group(1)):02d}:{m.group(2)}"
        elif _is_date(p):
            m = _DATE.search(text)
            if m:
                out[p.name] = m.group(0)
        elif p.enum and p.type == "string":
            named = [e for e in p.enum if re.search(rf"\b{re.escape(str(e))}\b", text, re.I)]
            if len(named) == 1:
                out[p.name] = named[0]
    ints = [p for p in fixed if p.type == "integer" and not p.enum]
    if len(ints) == 1:
        counts = _counts(text)
        if len(set(counts)) == 1:
            n = counts[0]
            p = ints[0]
            if (p.minimum is None or n >= p.minimum) and (p.maximum is None or n <= p.maximum):
                out[p.name] = n
    return out
