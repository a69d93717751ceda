"""What an agent returns: an Action with the TraceSteps that made it, and their Usage."""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from iba.types.common import ActionType, Strict


class TraceStep(Strict):
    step: str
    inputs: dict[str, Any] = Field(default_factory=dict)
    outputs: Any = None
    prompt: str | None = None  # template name
    prompt_hash: str | None = None
    # the rendered prompt (its messages' contents joined by blank lines): what the step's model read,
    # so whether a gold evidence clause reached it can be measured later (iba.eval.reach)
    prompt_text: str | None = None
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reused_prompt_tokens: int = 0
    latency_s: float = 0.0
    error: str | None = None
    # the models that answered this step's calls from batch results (iba run --batch), as the results
    # name them: a run's record says which model it asked (RunRecord.model), this which one answered
    answered_by: list[str] | None = None


class Action(Strict):
    kind: ActionType
    text: str | None = None
    api_name: str | None = None
    params: dict[str, Any] | None = None
    trace: list[TraceStep] = Field(default_factory=list)

    @model_validator(mode="after")
    def _shape(self) -> "Action":
        if self.kind == "generate" and self.text is None:
            raise ValueError("a generate action needs text")
        if self.kind == "call_api" and self.params is None:
            raise ValueError("a call_api action needs params")
        return self


class Usage(Strict):
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reused_prompt_tokens: int = 0  # of prompt_tokens, those served from the model's prompt state

    def add(self, other: "Usage") -> "Usage":
        return Usage(
            llm_calls=self.llm_calls + other.llm_calls,
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            reused_prompt_tokens=self.reused_prompt_tokens + other.reused_prompt_tokens,
        )

    @classmethod
    def of_step(cls, step: "TraceStep") -> "Usage":
        return cls(llm_calls=step.llm_calls, prompt_tokens=step.prompt_tokens, completion_tokens=step.completion_tokens,
                   reused_prompt_tokens=step.reused_prompt_tokens)
