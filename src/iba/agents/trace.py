"""Recording an agent's steps as TraceSteps: inputs, outputs, prompt name + hash, LLM usage, latency.

    trace = Trace()
    with trace.step("expand_queries", inputs) as step:
        obj, completions = await complete_json(...)
        step.llm(prompt, completions)
        step.outputs = obj

A step that raises is still recorded (with `error`) and the exception goes on; the steps so far
ride along on the exception as `iba_trace`, so a runner can keep them for an errored instance.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any

from pydantic import BaseModel

from iba.llm.base import Completion
from iba.prompts import Prompt
from iba.types import TraceStep, Usage


def _jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def prompt_text(prompt: Prompt) -> str:
    """The text a model reads from a prompt: its messages' contents, in order."""
    return "\n\n".join(str(m.get("content") or "") for m in prompt.messages)


class StepRecord:
    """The mutable record of one step while it runs."""

    def __init__(self, name: str, inputs: Any) -> None:
        self.name = name
        self.inputs = _jsonable(inputs) if inputs is not None else {}
        self.outputs: Any = None
        self.prompt: Prompt | None = None
        self.completions: list[Completion] = []

    def llm(self, prompt: Prompt | None, completions: Sequence[Completion]) -> None:
        if prompt is not None:
            self.prompt = prompt
        self.completions.extend(completions)

    def finish(self, latency: float, error: str | None) -> TraceStep:
        usage = Usage()
        for c in self.completions:
            usage = usage.add(c.usage())
        inputs = self.inputs if isinstance(self.inputs, dict) else {"value": self.inputs}
        return TraceStep(
            step=self.name,
            inputs=inputs,
            outputs=_jsonable(self.outputs),
            prompt=self.prompt.name if self.prompt else None,
            prompt_hash=self.prompt.hash if self.prompt else None,
            prompt_text=prompt_text(self.prompt) if self.prompt else None,
            llm_calls=usage.llm_calls,
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            reused_prompt_tokens=usage.reused_prompt_tokens,
            latency_s=round(latency, 4),
            error=error,
            answered_by=sorted({c.answered_by for c in self.completions if c.answered_by}) or None,
        )


class Trace:
    def __init__(self) -> None:
        self.steps: list[TraceStep] = []

    @contextmanager
    def step(self, name: str, inputs: Any = None) -> Iterator[StepRecord]:
        record = StepRecord(name, inputs)
        start = time.perf_counter()
        try:
            yield record
        except BaseException as exc:
            # failed structured calls still cost tokens; count them
            record.completions.extend(getattr(exc, "completions", None) or [])
            self.steps.append(record.finish(time.perf_counter() - start, f"{type(exc).__name__}: {exc}"))
            with suppress(AttributeError):  # exceptions without a __dict__ take no attribute
                exc.iba_trace = list(self.steps)  # type: ignore[attr-defined]
            raise
        self.steps.append(record.finish(time.perf_counter() - start, None))

    def usage(self) -> Usage:
        total = Usage()
        for s in self.steps:
            total = total.add(Usage.of_step(s))
        return total
