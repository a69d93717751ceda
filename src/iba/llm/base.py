"""The model-provider contract: one async `Backend.complete` for every LLM call in IBA.

Agents, judges, annotators and LLM writers receive a Backend; none of them know which provider is
behind it. Providers live beside this file and are chosen by model string (see iba.llm.resolve).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from pydantic import Field

from iba.types import Strict, Usage


class ToolSpec(Strict):
    name: str
    description: str = ""
    parameters: dict[str, Any]  # JSON schema of the arguments


class ToolCall(Strict):
    id: str
    name: str
    arguments: dict[str, Any]


class Completion(Strict):
    text: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    # of prompt_tokens, those the provider did not compute again (llama.cpp prompt state; the
    # OpenAI protocol's prompt_tokens_details.cached_tokens)
    reused_prompt_tokens: int = 0
    model: str = ""
    finish_reason: str | None = None
    cached: bool = False
    # a batch result's own word on which model answered (its body's `model`), which may not be the one
    # asked (`iba batch import` of another model's answers); None for calls answered directly
    answered_by: str | None = None

    def usage(self) -> Usage:
        return Usage(llm_calls=1, prompt_tokens=self.prompt_tokens, completion_tokens=self.completion_tokens,
                     reused_prompt_tokens=self.reused_prompt_tokens)


class LLMError(RuntimeError):
    """A model call failed after its retries. Callers record the item as errored."""


class CallDeferred(BaseException):
    """A model call whose answer is not there yet: its request was handed to a batch (iba.batch) and
    a later run replays the answer. Not an error of anyone's: the work that made the call stops
    here, is stored nowhere, and is done again by that later run. A BaseException, like
    asyncio.CancelledError, so that no `except Exception` in an agent or judge turns it into a
    failed record or an unscored verdict."""

    def __init__(self, custom_id: str) -> None:
        super().__init__(custom_id)
        self.custom_id = custom_id


class Backend(ABC):
    """An LLM provider. `model_id` is the model string it was built from (no secrets in it)."""

    model_id: str
    context_window: int = 8192

    @abstractmethod
    async def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        max_tokens: int = 512,
        temperature: float = 0.0,
        seed: int | None = None,
        json_schema: dict[str, Any] | None = None,
        tools: list[ToolSpec] | None = None,
        tool_choice: str | None = None,
        stop: list[str] | None = None,
    ) -> Completion:
        """One chat completion.

        json_schema: constrain the reply to JSON matching this schema (best effort per provider;
        callers still validate). tools/tool_choice: function calling; tool_choice names a tool to
        force, "auto" or None. Raises LLMError once retries are exhausted.
        """

    def count_tokens(self, text: str) -> int:
        """Token count for budgeting prompts; providers with a tokenizer override this."""
        return approx_tokens(text)


def approx_tokens(text: str) -> int:
    """About four characters per token: the budget count of a backend without a tokenizer (an
    OpenAI-compatible server), and of the model-free reach measure (`iba eval-retrieval`)."""
    return max(1, len(text) // 4)


def request_params(
    max_tokens: int,
    temperature: float,
    seed: int | None,
    json_schema: dict[str, Any] | None,
    tools: list[ToolSpec] | None,
    tool_choice: str | None,
    stop: list[str] | None,
) -> dict[str, Any]:
    """The parameters of one call as the response cache keys them (identical across providers)."""
    return {
        "max_tokens": max_tokens,
        "temperature": temperature,
        "seed": seed,
        "json_schema": json_schema,
        "tools": [t.model_dump() for t in tools] if tools else None,
        "tool_choice": tool_choice,
        "stop": stop,
    }

    async def aclose(self) -> None:  # pragma: no cover - default no-op
        return None
