"""One task's IBA-Agent state, shared by the tool groups that make up `Toolkit`."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel

from iba.agents.base import AgentEnv, AgentError
from iba.agents.iba_options import IBAOptions
from iba.agents.preferences import ResolvedPreferences
from iba.agents.replies import AlignmentPlan, CompactEvidence
from iba.agents.step_prompts import StepPrompts
from iba.agents.trace import Trace
from iba.llm.base import Backend, Completion, approx_tokens
from iba.llm.structured import complete_json
from iba.prompts import Prompt
from iba.retrieval.deep import DeepRetrieval, StepLike
from iba.retrieval.index import HistoryIndex
from iba.retrieval.passage import Passage
from iba.types import TaskView, Turn

M = TypeVar("M", bound=BaseModel)


class ToolState:
    """The (task, history) the tools work on, what they found so far, and the trace they record into.

    `env.backend` may be None where only the prompts are wanted (`iba eval-retrieval`'s reach of a
    model-free configuration): a step that would call a model then raises."""

    def __init__(self, env: AgentEnv, opts: IBAOptions, task: TaskView, history: list[Turn], trace: Trace) -> None:
        self.env = env
        self.o = opts
        self.task = task
        self.history = history
        self.turns = {t.id: t for t in history}
        self.trace = trace
        self.index: HistoryIndex | None = None
        self.evidence: list[Passage] = []  # the passages kept for the answer, best first
        self.ranked: list[Passage] = []  # kept first, then the other scored candidates (the views' source)
        self.compacted: CompactEvidence | None = None
        self.preferences: ResolvedPreferences | None = None
        self.plan: AlignmentPlan | None = None
        self.prompts = StepPrompts(env.backend, opts.chain)
        self.shown: dict[str, str] = {}  # chunk id -> its label in the open conversation's salience list
        self.deep: DeepRetrieval = self._pipeline()

    def _pipeline(self) -> DeepRetrieval:  # DeepRetrievalTools builds it with its plug-ins
        raise NotImplementedError

    @property
    def backend(self) -> Backend:
        if self.env.backend is None:
            raise AgentError(f"{self.task.instance_id}: this configuration calls a model and none was given")
        return self.env.backend

    def count(self, text: str) -> int:
        """Tokens of a prompt text, by the backend's tokenizer (else about 4 characters per token)."""
        return self.env.backend.count_tokens(text) if self.env.backend is not None else approx_tokens(text)

    def _cap(self, tokens: int) -> int:
        return min(tokens, self.o.step_max_tokens) if self.o.step_max_tokens else tokens

    async def ask(self, step: StepLike, prompt: Prompt, reply: type[M], cap: int) -> tuple[M, list[Completion]]:
        """One structured LLM call of `step`: the prompt recorded first (kept if the call fails), the
        reply (at most `cap` tokens) validated against `reply`, its completions counted."""
        step.llm(prompt, [])
        out, comps = await complete_json(self.backend, prompt.messages, reply, max_tokens=cap, seed=self.env.seed)
        step.llm(None, comps)
        return out, comps

    async def chained(self, step: StepLike, name: str, reply: type[M], tokens: int, **variables: Any) -> M:
        """`ask` for a step of the chain (StepPrompts): its prompt within the open conversation when
        `chain` is on, which then goes on from the reply."""
        cap = self._cap(tokens)
        prompt = self.prompts.prompt(name, cap, **variables)
        out, comps = await self.ask(step, prompt, reply, cap)
        self.prompts.answered(prompt, comps[-1].text)
        return out
