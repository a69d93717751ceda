"""One task's IBA-Agent state, shared by the tool groups that make up `Toolkit`."""

from __future__ import annotations

from iba.agents.base import AgentEnv
from iba.agents.iba_options import IBAOptions
from iba.agents.preferences import ResolvedPreferences
from iba.agents.replies import AlignmentPlan, CompactEvidence
from iba.agents.step_prompts import StepPrompts
from iba.agents.trace import Trace
from iba.llm.base import Backend
from iba.retrieval.deep import CandidatePool
from iba.retrieval.expansion import FacetQueries
from iba.retrieval.index import HistoryIndex
from iba.retrieval.passage import Passage
from iba.types import TaskView, Turn


class ToolState:
    """The (task, history) the tools work on, what they found so far, and the trace they record into."""

    def __init__(self, env: AgentEnv, opts: IBAOptions, task: TaskView, history: list[Turn], trace: Trace) -> None:
        self.env = env
        self.o = opts
        self.task = task
        self.history = history
        self.trace = trace
        self.index: HistoryIndex | None = None
        self.rankings: list[tuple[str, list[Passage]]] = []
        self.queries: FacetQueries | None = None
        self.pool: CandidatePool | None = None
        self.evidence: list[Passage] = []
        self.compacted: CompactEvidence | None = None
        self.preferences: ResolvedPreferences | None = None
        self.plan: AlignmentPlan | None = None
        self.prompts = StepPrompts(env.backend, opts.chain)
        self.shown: dict[str, str] = {}  # chunk id -> its label in the open conversation's salience list

    @property
    def backend(self) -> Backend:
        return self.env.backend

    def _cap(self, tokens: int) -> int:
        return min(tokens, self.o.step_max_tokens) if self.o.step_max_tokens else tokens
