"""IBA-Agent, the pipeline variant (paper section 4): Deep Retrieval -> Broad Thinking & Deep
Alignment -> synthesis, with the ablations of Table 5 as options:

    iba?retrieval=false      w/o Deep Retrieval (plain top-3 dense passages)
    iba?btda=false           w/o BT+DA (synthesis straight from the retained passages)
    iba?synthesis=rag        RAG-style synthesis (passages + preferences as flat context, no plan)
    iba?expansion=template&reranker=rules&compact=none   fewer LLM calls (3 instead of 6)
    iba?chain=true           the steps after retrieval continue one conversation (prompt-state reuse)
    iba?reranker=each        the naive salience scorer: one LLM call per candidate passage

LLM calls per instance with the defaults: expansion, salience, compact, extract, align, synthesis.
"""

from __future__ import annotations

from iba.agents.answer import check_task, make_action
from iba.agents.base import Agent
from iba.agents.iba_options import IBAOptions
from iba.agents.toolkit import Toolkit
from iba.agents.trace import Trace
from iba.types import Action, TaskView, Turn


class IBAAgent(Agent):
    name = "iba"
    options_model = IBAOptions
    opts: IBAOptions

    async def act(self, task: TaskView, history: list[Turn]) -> Action:
        check_task(task)
        trace = Trace()
        tools = Toolkit(self.env, self.opts, task, history, trace)
        if self.opts.retrieval:
            await tools.deep_retrieve()
        else:
            await tools.plain_retrieve()
        if self.opts.btda:
            await tools.broad_thinking()
        result = await tools.synthesize(self.opts.synthesis)
        return make_action(task, result, trace.steps)
