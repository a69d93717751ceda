"""The last LLM step every agent shares: a rendered prompt in, an Action's content out.

Generate tasks get plain text. CallAPI tasks get JSON constrained to the task's API schema through
`complete_json` (one corrective retry), which validates it against the schema (enum values, types,
bounds); a reply that never validates raises, and the runner records the instance as errored.
"""

from __future__ import annotations

import json
from typing import Any

from iba.agents.api_params import params_model
from iba.agents.base import AgentError
from iba.agents.trace import StepRecord
from iba.llm.base import Backend
from iba.llm.structured import complete_json
from iba.prompts import Prompt
from iba.types import Action, TaskView, TraceStep

TEXT_MAX_TOKENS = 768
PARAMS_MAX_TOKENS = 256


def schema_text(task: TaskView) -> str:
    return json.dumps(task.api_schema or {}, ensure_ascii=False)


def check_task(task: TaskView) -> None:
    if task.action == "call_api" and not task.api_schema:
        raise AgentError(f"task {task.instance_id} is a call_api task without an api_schema")


async def answer(
    backend: Backend, prompt: Prompt, task: TaskView, step: StepRecord, *, seed: int, max_tokens: int | None = None
) -> dict[str, Any]:
    """Run the final prompt; returns {"text": ...} or {"params": ...} and records usage on `step`."""
    step.llm(prompt, [])  # the prompt is recorded even if the call fails
    if task.action == "call_api":
        schema = task.api_schema or {}
        obj, completions = await complete_json(
            backend, prompt.messages, params_model(schema), max_tokens=max_tokens or PARAMS_MAX_TOKENS, seed=seed, retries=1
        )
        step.llm(None, completions)
        return {"params": obj.model_dump(exclude_none=True)}  # complete_json validated it against the schema
    comp = await backend.complete(prompt.messages, max_tokens=max_tokens or TEXT_MAX_TOKENS, seed=seed)
    step.llm(None, [comp])
    text = comp.text.strip()
    if not text:
        raise AgentError(f"{backend.model_id} returned an empty answer")
    return {"text": text}


def make_action(task: TaskView, result: dict[str, Any], trace: list[TraceStep]) -> Action:
    if task.action == "call_api":
        return Action(kind="call_api", api_name=task.api_name, params=result["params"], trace=trace)
    return Action(kind="generate", text=result["text"], trace=trace)
