"""The model-provider contract: one async `Backend.complete` for every LLM call in IBA.

Agents, judges, annotators and LLM writers receive a Backend; none of them know which provider is
behind it. Providers live beside this file and are chosen by model string (see iba.llm.resolve).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from pydantic import Field

from iba.types.agent import Usage
from iba.types.common import Strict


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


class ModelRequest(Strict):
    """One model call: everything that decides the reply besides the model. Every backend takes one
    (`Backend.send`); the response cache keys it (`cache_params`), a Batch API line is made from it
    (iba.batch.lines) and read back into it, and the inspect backend maps it onto inspect's call.

    json_schema: constrain the reply to JSON matching this schema (best effort per provider;
    callers still validate). tools/tool_choice: function calling; tool_choice names a tool to
    force, "auto", "required", "none" or None.
    """

    messages: list[dict[str, Any]]
    max_tokens: int = 512
    temperature: float = 0.0
    seed: int | None = None
    json_schema: dict[str, Any] | None = None
    tools: list[ToolSpec] | None = None
    tool_choice: str | None = None
    stop: list[str] | None = None

    def offered(self) -> ModelRequest:
        """This request with tool_choice checked against the tools, and no tools at all when
        tool_choice is "none" or there are none (backends that build their own prompt; an OpenAI
        server is told "none" instead)."""
        from iba.llm.toolcalls import offered_tools

        tools, choice = offered_tools(self.tools, self.tool_choice)
        if tools is self.tools and choice == self.tool_choice:
            return self
        return self.model_copy(update={"tools": tools, "tool_choice": choice})

    def cache_params(self) -> dict[str, Any]:
        """The parameters of this call as the response cache keys them (identical across providers;
        the messages are keyed beside them)."""
        return {
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "seed": self.seed,
            "json_schema": self.json_schema,
            "tools": [t.model_dump() for t in self.tools] if self.tools else None,
            "tool_choice": self.tool_choice,
            "stop": self.stop,
        }


class Backend(ABC):
    """An LLM provider. `model_id` is the model string it was built from (no secrets in it)."""

    model_id: str
    context_window: int = 8192

    async def complete(self, messages: list[dict[str, Any]], **options: Any) -> Completion:
        """One chat completion; `options` are ModelRequest's fields (max_tokens, temperature, seed,
        json_schema, tools, tool_choice, stop). Raises LLMError once retries are exhausted."""
        return await self.send(ModelRequest(messages=messages, **options))

    @abstractmethod
    async def send(self, request: ModelRequest) -> Completion:
        """One chat completion of `request` (what every provider implements)."""

    def count_tokens(self, text: str) -> int:
        """Token count for budgeting prompts; providers with a tokenizer override this."""
        return approx_tokens(text)

    async def aclose(self) -> None:  # pragma: no cover - default no-op
        return None


def approx_tokens(text: str) -> int:
    """About four characters per token: the budget count of a backend without a tokenizer (an
    OpenAI-compatible server), and of the model-free reach measure (`iba eval-retrieval`)."""
    return max(1, len(text) // 4)
