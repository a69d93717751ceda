"""The direct baseline: as much recent history as fits the model's context window, then the task."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from pydantic import Field

from iba.agents.answer import answer, check_task, make_action, schema_text
from iba.agents.base import Agent
from iba.agents.trace import Trace
from iba.prompts import render
from iba.retrieval.chunking import turn_line
from iba.types import Action, Strict, TaskView, Turn

T = TypeVar("T")

SAFETY = 64  # tokens kept free for the chat template's own markup


class DirectOptions(Strict):
    max_tokens: int | None = Field(None, ge=1)  # answer length; default per action kind
    max_history_tokens: int | None = Field(None, ge=1)  # cap below the context window (e.g. for cost)


def fit_history(items: Sequence[T], budget: int, count: Callable[[str], int],
                render: Callable[[T], str] = str) -> list[str]:
    """The most recent items, rendered, whose token counts sum to at most `budget`, in chronological
    order. Rendered from the newest back, so a long history costs only the part that fits."""
    kept: list[str] = []
    used = 0
    for item in reversed(items):
        line = render(item)
        cost = count(line) + 1
        if used + cost > budget:
            break
        kept.append(line)
        used += cost
    return kept[::-1]


class DirectAgent(Agent):
    name = "direct"
    options_model: type[Strict] = DirectOptions  # the reference agents (agents/references.py) take fewer

    def history_lines(self, task: TaskView, history: list[Turn]) -> tuple[list[str], int]:
        """The prompt's history lines (the most recent turns that fit the context window, less the
        prompt's fixed part and the answer's reserve) and the token budget they had."""
        backend = self.env.backend
        schema = schema_text(task) if task.action == "call_api" else ""
        # the prompt without any history, to know what the history may use
        bare = render("agent_direct", task=task, history=[], dropped=0, schema=schema)
        fixed = sum(backend.count_tokens(m["content"]) for m in bare.messages)
        reserve = self.opts.max_tokens or (256 if task.action == "call_api" else 768)
        budget = backend.context_window - fixed - reserve - SAFETY
        cap = getattr(self.opts, "max_history_tokens", None)  # direct's own option
        if cap is not None:
            budget = min(budget, cap)
        return fit_history(history, max(0, budget), backend.count_tokens, turn_line), budget

    async def act(self, task: TaskView, history: list[Turn]) -> Action:
        check_task(task)
        backend = self.env.backend
        trace = Trace()
        with trace.step("truncate_history", {"turns": len(history), "context_window": backend.context_window}) as step:
            lines, budget = self.history_lines(task, history)
            dropped = len(history) - len(lines)
            step.outputs = {"kept_turns": len(lines), "dropped_turns": dropped, "history_budget_tokens": budget}
        with trace.step("answer", {"kept_turns": len(lines)}) as step:
            schema = schema_text(task) if task.action == "call_api" else ""
            prompt = render("agent_direct", task=task, history=lines, dropped=dropped, schema=schema)
            result = await answer(backend, prompt, task, step, seed=self.env.seed, max_tokens=self.opts.max_tokens)
            step.outputs = result
        return make_action(task, result, trace.steps)
