"""Test-only backends. Never import these from src/."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from iba.llm.base import Backend, Completion, LLMError, ModelRequest, ToolCall, ToolSpec

Reply = str | dict[str, Any] | Completion | Exception
Responder = Callable[[list[dict[str, Any]], dict[str, Any]], Reply]


class ScriptedBackend(Backend):
    """Replies from a list (in order) or a function of (messages, kwargs).

    A dict reply is sent as JSON text; an Exception is raised (LLMError for model failures).
    Every call is recorded in `.calls` for assertions.
    """

    def __init__(self, replies: list[Reply] | Responder, model_id: str = "scripted:test") -> None:
        self.model_id = model_id
        self._replies = replies
        self.calls: list[tuple[list[dict[str, Any]], dict[str, Any]]] = []

    async def send(self, request: ModelRequest) -> Completion:
        # the options the caller gave (as complete's keywords), for assertions
        messages = request.messages
        kwargs = {k: getattr(request, k) for k in request.model_fields_set if k != "messages"}
        self.calls.append((messages, kwargs))
        if callable(self._replies):
            reply = self._replies(messages, kwargs)
        else:
            if not self._replies:
                raise LLMError("ScriptedBackend ran out of replies")
            reply = self._replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        if isinstance(reply, Completion):
            return reply
        text = json.dumps(reply) if isinstance(reply, dict) else reply
        prompt_tokens = sum(len(str(m.get("content", ""))) // 4 for m in messages)
        return Completion(text=text, prompt_tokens=prompt_tokens, completion_tokens=len(text) // 4, model=self.model_id)


def tool_call_reply(name: str, arguments: dict[str, Any], call_id: str = "call_0") -> Completion:
    return Completion(tool_calls=[ToolCall(id=call_id, name=name, arguments=arguments)], model="scripted:test")


__all__ = ["ScriptedBackend", "tool_call_reply", "ToolSpec"]
