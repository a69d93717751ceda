"""What an `iba` or `iba-fc` agent spec can set (iba_fc.FCOptions adds the controller's options).

Deep Retrieval's options are `DeepOptions` (iba.retrieval.deep), shared by name and default with
`iba eval-retrieval`. A combination in which an option given in the spec would change nothing is
rejected with its name (e.g. `retrieval=false&k=3`: plain retrieval has no per-query k)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from iba.agents.base import check_overlap
from iba.retrieval.deep import DeepOptions
from iba.retrieval.passage import Unit
from iba.retrieval.views import ViewOrder

# the deciding prompt's size in tokens (extract, align_slot, synthesize): the evidence views fill
# what the rest of the prompt leaves. 4k: reach per budget in bench/BENCHMARKS.md (issue 26)
DEFAULT_BUDGET = 4000

# named bundles of options (`iba?preset=cheap`); options given beside a preset override its values.
# cheap: rag's price, one LLM call of at most 1.2k prompt tokens (rag: one call, ~1.1k), spent on Deep
# Retrieval's evidence view: template queries and the rule reranker (no model), no BT+DA, and a
# synthesis prompt of 1,100 tokens (views count each line alone and the chat template adds its role
# markers, so the model counts up to ~5% more; bench/BENCHMARKS.md, Reach > Deep Retrieval at rag's price)
PRESETS: dict[str, dict[str, str]] = {
    "cheap": {"expansion": "template", "reranker": "rules", "btda": "false", "budget": "1100"},
}


class IBAOptions(DeepOptions):
    """Options of the `iba` agent (and `iba-fc`), from the spec: `iba?retrieval=false&reranker=rules`."""

    preset: Literal["cheap"] | None = None  # a bundle of the options below (PRESETS)
    retrieval: bool = True  # Deep Retrieval; false = plain top-3 dense (ablation "w/o Deep Retrieval")
    btda: bool = True  # Broad Thinking & Deep Alignment (ablation "w/o BT+DA")
    synthesis: Literal["plan", "rag"] = "plan"  # rag = the RAG-style synthesis ablation
    # llm: the model quotes the informative moments of the kept passages for the extractor; none: the
    # extractor reads the evidence view itself (whole user turns by relevance, within `budget`)
    compact: Literal["llm", "none"] = "llm"
    # plan: compact -> extract -> align (the paper's BT+DA); slots: for CallAPI tasks, one constrained
    # choice per enum/boolean parameter over that parameter's evidence view, enforced in the final
    # params (alignment_tools.align_slots); Generate tasks keep the plan
    align: Literal["plan", "slots"] = "plan"
    # tokens of each deciding prompt (extract, align_slot, synthesize); its evidence view gets what the
    # rest of the prompt leaves
    budget: int = Field(DEFAULT_BUDGET, ge=500)
    # the order a view takes turns in: by relevance to the nearest query; or each: the queries take turns
    # to pick their most relevant one (iba.retrieval.views.each_query_in_turn)
    view: ViewOrder = "nearest"
    # percent of each view given first to the user's latest turns before the request, whatever their
    # relevance: a transient state (an injury, a tight month) is said shortly before the request, in
    # words that share nothing with it
    recent: int = Field(0, ge=0, le=50)
    # mixed: the 256-token windows plus one unit per user turn; the views reach more gold evidence from
    # it at every budget (tuning sample, 4k, k=5: slots 0.653 -> 0.737, checkpoints 0.639 -> 0.745; issue 26)
    unit: Unit = "mixed"
    size: int = Field(256, ge=1)
    overlap: int = Field(50, ge=0)
    # the LLM steps after retrieval continue one conversation, so each prompt extends the last and
    # the model reuses its prompt state (iba.agents.step_prompts); false = one prompt per step
    chain: bool = False
    max_tokens: int | None = Field(None, ge=1)  # final answer length
    step_max_tokens: int | None = Field(None, ge=1)  # cap on every intermediate step's reply (quick tests)

    @model_validator(mode="before")
    @classmethod
    def _expand_preset(cls, data: Any) -> Any:
        """The preset's options, under those given explicitly (`explicit` tells the two apart)."""
        if isinstance(data, dict) and data.get("preset") in PRESETS:
            return {**PRESETS[data["preset"]], **data}
        return data

    @model_validator(mode="after")
    def _no_idle_options(self) -> "IBAOptions":
        idle = ignored_options(self)
        if idle:
            raise ValueError("; ".join(f"{', '.join(names)} would change nothing: {why}" for why, names in idle.items()))
        return check_overlap(self)


# options that only Deep Retrieval reads
_DEEP_ONLY = ("expansion", "reranker", "k", "method", "feedback", "scan", "repeats", "slots", "values", "states", "contrast",
              "max_candidates", "max_passages", "retain_at")


def explicit(o: IBAOptions) -> set[str]:
    """The options the spec gave, less those its preset set (to the preset's value): what a preset
    set is not the user's word, so `preset=cheap&retrieval=false` names no idle option."""
    preset = PRESETS.get(o.preset or "", {})
    return {n for n in o.model_fields_set if n not in preset or str(getattr(o, n)).lower() != preset[n]}


def ignored_options(o: IBAOptions) -> dict[str, list[str]]:
    """Options given in the spec that this combination never reads, grouped by why."""
    given = explicit(o)
    out: dict[str, list[str]] = {}

    def idle(names: tuple[str, ...] | list[str], why: str) -> None:
        hit = [n for n in names if n in given]
        if hit:
            out.setdefault(why, []).extend(hit)

    if not o.retrieval:
        idle(_DEEP_ONLY, "retrieval=false is plain top-3 dense retrieval")
    elif o.reranker == "rules":
        idle(("max_candidates",), "it bounds an LLM scorer's prompt and reranker=rules scores every candidate")
    if not o.btda:
        idle(("compact", "align"), "btda=false skips Broad Thinking & Deep Alignment")
    if o.unit in ("turn", "session"):
        idle(("size", "overlap"), f"unit={o.unit} has no token windows")
    return out
