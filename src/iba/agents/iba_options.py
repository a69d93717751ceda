"""What an `iba` or `iba-fc` agent spec can set (iba_fc.FCOptions adds the controller's options)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from iba.retrieval.passage import Method, Unit
from iba.agents.base import check_overlap
from iba.types import Strict


class IBAOptions(Strict):
    """Options of the `iba` agent (and `iba-fc`), from the spec: `iba?retrieval=false&reranker=rules`."""

    retrieval: bool = True  # Deep Retrieval; false = plain top-3 dense (ablation "w/o Deep Retrieval")
    btda: bool = True  # Broad Thinking & Deep Alignment (ablation "w/o BT+DA")
    synthesis: Literal["plan", "rag"] = "plan"  # rag = the RAG-style synthesis ablation
    expansion: Literal["llm", "template"] = "llm"
    # llm: all candidates scored in one call; each: one call per candidate (the naive scorer, for
    # the effort comparison); rules: Table 12 by rules, no call
    reranker: Literal["llm", "each", "rules"] = "llm"
    compact: Literal["llm", "rules"] = "llm"
    # plan: compact -> extract -> align (the paper's BT+DA); slots: for CallAPI tasks, one constrained
    # choice per enum/boolean parameter from the kept passages' user lines, enforced in the final
    # params (alignment_tools.align_slots); Generate tasks keep the plan
    align: Literal["plan", "slots"] = "plan"
    slot_lines: int = Field(3, ge=0)  # align=slots: the user's lines shown per parameter (0: all of them)
    unit: Unit = "token"
    size: int = Field(256, ge=1)
    overlap: int = Field(50, ge=0)
    # passages per query and search: the paper's C.3 is top-3 dense (k=3&method=dense); top-5
    # hybrid (dense + BM25 by RRF) finds more evidence with the small offline MiniLM (see eval-retrieval)
    k: int = Field(5, ge=1)
    method: Method = "hybrid"
    feedback: bool = True  # relevance-feedback search with the best candidates' cue lines
    scan: bool = True  # signal-first scan: cue-bearing passages most similar to the queries
    repeats: bool = True  # fold in the turns where the user repeated a kept passage's cue sentence
    # rule reranker: move each candidate's relevance by how much nearer it is to the task's scenario
    # name than to the benchmark's other scenario names (AgentEnv.scenarios, 3 or more); off by default
    # until its effect on the action is measured (recall figures: bench/BENCHMARKS.md, session 7)
    contrast: bool = False
    max_candidates: int = Field(15, ge=1)  # passages the salience scorer sees (prompt-token budget)
    max_passages: int = Field(10, ge=1)
    retain_at: int = Field(5, ge=0, le=10)  # salience is 0-10
    # the LLM steps after retrieval continue one conversation, so each prompt extends the last and
    # the model reuses its prompt state (iba.agents.step_prompts); false = one prompt per step
    chain: bool = False
    max_tokens: int | None = Field(None, ge=1)  # final answer length
    step_max_tokens: int | None = Field(None, ge=1)  # cap on every intermediate step's reply (quick tests)

    @model_validator(mode="after")
    def _overlap(self) -> IBAOptions:
        return check_overlap(self)
