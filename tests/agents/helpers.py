"""Tasks, a small history and a scripted LLM that answers each IBA prompt by its kind (tests only)."""

from __future__ import annotations

import json
import re
from typing import Any

from iba.agents.base import AgentEnv
from iba.types import TaskView, Turn
from tests.fakes import ScriptedBackend
from tests.retrieval.helpers import make_history

API_SCHEMA = {
    "type": "object",
    "properties": {
        "cuisine": {"type": "string", "enum": ["sichuan", "japanese", "italian"], "description": "Cuisine."},
        "spice_level": {"type": "string", "enum": ["none", "mild", "hot"], "description": "How spicy."},
        "servings": {"type": "integer", "minimum": 1, "maximum": 10, "description": "Portions."},
    },
    "required": ["cuisine", "spice_level", "servings"],
    "additionalProperties": False,
}

TEXT_TASK = TaskView(
    instance_id="u1-technical_documentation", user_id="u1", domain="writing", scenario="technical_documentation",
    scenario_name="Technical documentation writing", query="Write the developer docs for our rate limiter.",
    action="generate", now="2025-06-01T10:00:00+00:00",
)
API_TASK = TaskView(
    instance_id="u1-food_ordering", user_id="u1", domain="daily", scenario="food_ordering",
    scenario_name="Food ordering", query="Order dinner for two from the place downstairs at 19:00.",
    action="call_api", api_name="order_food", api_schema=API_SCHEMA, now="2025-06-01T10:00:00+00:00",
)

_NOISE = [
    ("user", "What's a good way to learn the guitar?"),
    ("assistant", "Start with a few chords and practise daily."),
    ("user", "How far is the moon?"),
    ("assistant", "About 384,000 km."),
]
_SIGNALS = [
    ("user", "Here's the draft doc for the cache library."),
    ("assistant", "Sure, here is a first version of the documentation."),
    ("user", "Actually, rewrite it with full code examples I can run, the fragments never work!"),
    ("assistant", "Understood, I'll redo it."),
    ("user", "I hate spicy food, no chili at all please."),
    ("assistant", "Noted."),
    ("user", "I usually order japanese food, sushi is my go-to."),
    ("assistant", "Sounds good."),
]


def small_history() -> list[Turn]:
    return make_history(_NOISE * 3 + _SIGNALS + _NOISE * 3)


def env(backend, tmp_path, **kw) -> AgentEnv:
    return AgentEnv(backend=backend, cache_dir=tmp_path / "cache", **kw)


def passages_in(messages: list[dict[str, Any]]) -> int:
    return len(re.findall(r"^\[P\d+\]$", messages[-1]["content"], flags=re.M))


def iba_reply(messages: list[dict[str, Any]], kwargs: dict[str, Any], *, params: dict | None = None) -> Any:
    """A plausible reply for each IBA prompt, chosen by the prompt's system text (or, for a chained
    step, by its followup turn)."""
    system = messages[0]["content"]
    last = messages[-1]["content"] if messages[-1]["role"] == "user" else ""
    if last.startswith(("Next step:", "Last step:")):
        system = last.replace("rate the passages", "rate passages").replace("condense the evidence", "condense evidence")
        system = system.replace("extract the user's preferences", "extract a user's preferences")
        system = system.replace("carry out the new request on behalf", "carrying out their new request")
    if "decide one setting of an API call" in system:
        param = re.search(r"parameter `(\w+)`", messages[-1]["content"]).group(1)
        return {"value": {"cuisine": "italian", "spice_level": "none"}.get(param, "unknown")}
    if "write search queries" in system:
        return {"style": "how I like docs written", "structure": "layout and sections of docs",
                "decision": "what I chose before", "correction": "what I asked to change",
                "habit": "what I usually do"}
    if "rate passages" in system:
        n = passages_in(messages)
        return {"scores": [{"relevance": 6 if i == 0 else 4, "signal": 4 if i == 0 else 1} for i in range(n)]}
    if "condense evidence" in system:
        return {"items": [{"date": "2025-01-02", "quote": "rewrite it with full code examples I can run"}]}
    if "extract a user's preferences" in system:
        return {"preferences": [
            {"aspect": "code examples", "value": "fragments", "kind": "asked_for", "date": "2024-12-01"},
            {"aspect": "Code  Examples", "value": "complete runnable code", "kind": "corrected", "date": "2025-01-02"},
            {"aspect": "spice", "value": "none", "kind": "rejected", "date": "2025-01-02"},
        ]}
    if "plan how to carry out" in system:
        if "API parameters" in messages[-1]["content"]:
            return {"slots": [{"param": "spice_level", "value": "none", "because": "hates spicy food"}], "constraints": []}
        return {"style": ["plain and direct"], "structure": ["full runnable code examples"], "constraints": []}
    if "carrying out their new request" in system or "personal assistant" in system:
        if kwargs.get("json_schema"):
            return params or {"cuisine": "japanese", "spice_level": "none", "servings": 2}
        return "# Rate limiter\n\nA complete, runnable example:\n\n```python\nlimiter = RateLimiter(10)\n```"
    raise AssertionError(f"unexpected prompt: {system[:80]}")


def iba_backend(**kw) -> ScriptedBackend:
    return ScriptedBackend(lambda m, k: iba_reply(m, k, **kw))


def dumps(obj: Any) -> str:
    return json.dumps(obj)
