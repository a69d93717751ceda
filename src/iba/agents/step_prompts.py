"""The prompts of one IBA action's LLM steps after retrieval, optionally chained into one conversation.

With `chain` off every step is its own prompt (the paper's layout). With it on, the first LLM step
after retrieval (salience, else compact, else extract) opens a conversation with its usual prompt
and every later step is asked as the next user turn (the template's `followup` block), after the
previous steps' replies. Each prompt then starts with the whole previous one, so the embedded
backend evaluates only the new turn (llama.cpp prompt-state reuse; servers with prefix caching
gain the same), and a later step sees the passages the earlier ones read: compact quotes from
the salience prompt's passages instead of being sent them again.

A conversation that would not leave room for the step's reply in the model's context is not
continued: that step gets its own prompt and opens a new conversation.
"""

from __future__ import annotations

from typing import Any

from iba.llm.base import Backend
from iba.prompts import Prompt, render

# per-message overhead of a chat template (role markers, separators), in tokens
_TURN_OVERHEAD = 8


class StepPrompts:
    def __init__(self, backend: Backend, chain: bool) -> None:
        self.backend = backend
        self.chain = chain
        self.convo: list[dict[str, str]] | None = None
        self._tokens = 0  # counted tokens of self.convo

    @property
    def open(self) -> bool:
        return self.convo is not None

    def prompt(self, name: str, max_tokens: int, **variables: Any) -> Prompt:
        """The step's prompt: the followup turn of the open conversation when it fits, else its own."""
        if self.chain and self.convo is not None:
            turn = render(name, followup=True, **variables)
            added = self._count(turn.messages)
            if self._tokens + added + max_tokens <= self.backend.context_window:
                self._tokens += added
                return Prompt(name=turn.name, hash=turn.hash, messages=self.convo + turn.messages)
        prompt = render(name, **variables)
        if self.chain:
            self.convo, self._tokens = None, self._count(prompt.messages)
        return prompt

    def answered(self, prompt: Prompt, reply: str) -> None:
        """The step's valid reply: the conversation continues from it (with chain on)."""
        if self.chain:
            turn = [{"role": "assistant", "content": reply}]
            self.convo = prompt.messages + turn
            self._tokens += self._count(turn)

    def _count(self, messages: list[dict[str, str]]) -> int:
        return sum(self.backend.count_tokens(m["content"]) + _TURN_OVERHEAD for m in messages)
