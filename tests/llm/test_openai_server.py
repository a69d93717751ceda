"""The openai: backend over real HTTP against `python -m llama_cpp.server` with SmolLM2 (slow)."""

from __future__ import annotations

from typing import Literal

import pytest
from pydantic import BaseModel

from iba.llm import ToolSpec, resolve_backend
from iba.llm.structured import complete_json

pytestmark = pytest.mark.slow


class Pet(BaseModel):
    name: str
    kind: Literal["cat", "dog", "bird"]


ORDER = ToolSpec(
    name="order_food",
    description="Place a food delivery order.",
    parameters={
        "type": "object",
        "properties": {
            "dish": {"type": "string"},
            "spice_level": {"type": "string", "enum": ["mild", "medium", "hot"]},
        },
        "required": ["dish", "spice_level"],
    },
)
WEATHER = ToolSpec(
    name="get_weather",
    description="Current weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


@pytest.fixture()
def http_backend(llama_server, monkeypatch, tmp_path):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # a local server needs none
    return resolve_backend("openai:smollm2-135m", base_url=llama_server, cache_dir=tmp_path)


async def test_complete_over_http_counts_tokens_and_caches(http_backend):
    msgs = [{"role": "user", "content": "Say hello."}]
    c = await http_backend.complete(msgs, max_tokens=12)
    assert c.text.strip() and c.prompt_tokens > 0 and 0 < c.completion_tokens <= 12
    assert c.model == "openai:smollm2-135m" and not c.cached
    again = await http_backend.complete(msgs, max_tokens=12)
    assert again.cached and again.text == c.text


async def test_complete_json_over_http_is_schema_constrained(http_backend):
    msgs = [{"role": "user", "content": "My dog is called Rex. Give his name and kind as JSON."}]
    obj, comps = await complete_json(http_backend, msgs, Pet, max_tokens=40)
    assert isinstance(obj, Pet) and obj.kind in {"cat", "dog", "bird"}
    assert http_backend.json_mode == "json_object_schema"  # the server took the schema, no fallback
    assert len(comps) == 1


async def test_forced_and_auto_tool_calls_over_http(http_backend):
    msgs = [
        {"role": "system", "content": "You order food for the user."},
        {"role": "user", "content": "Get me a mild pad thai."},
    ]
    forced = await http_backend.complete(msgs, tools=[ORDER], tool_choice="order_food", max_tokens=48)
    [call] = forced.tool_calls
    assert call.name == "order_food" and call.arguments["spice_level"] in {"mild", "medium", "hot"}
    assert isinstance(call.arguments["dish"], str) and forced.finish_reason == "tool_calls"
    # "auto": the server's chatml-function-calling grammar lets the model pick a tool or answer.
    ask = [{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": "What's the weather in Paris?"}]
    auto = await http_backend.complete(ask, tools=[ORDER, WEATHER], tool_choice="auto", max_tokens=48)
    [call] = auto.tool_calls
    assert call.name == "get_weather" and "paris" in call.arguments["city"].lower()
