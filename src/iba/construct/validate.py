"""AI annotation of sampled instances with agreement statistics (paper Appendix B.1, Table 11).

Each annotator model rates each sampled instance on reasonableness, coherence and persona
consistency (binary), seeing the persona, the instance's evidence turns with their neighbouring
history, and the task. An unparseable rating is unscored: excluded from the agreement figures and
counted in the report. Agreement between each pair of annotators is raw agreement and Gwet's AC1
(iba.eval.agreement) per criterion and overall, the overall figures pooling the three criteria's
(instance, criterion) pairs.
"""

from __future__ import annotations

import asyncio
import math
from itertools import combinations
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from iba import prompts
from iba.construct.personas import persona_summary
from iba.construct.rng import derive
from iba.dataset import Dataset, dump_json
from iba.eval.agreement import gwet_ac1, raw_agreement
from iba.llm.base import Backend
from iba.llm.structured import StructuredOutputError, complete_json
from iba.types import AnswerKey, TaskView, Turn

CRITERIA: tuple[str, ...] = ("reasonableness", "coherence", "persona_consistency")
CRITERIA_NAMES = {"reasonableness": "Reasonableness", "coherence": "Coherence", "persona_consistency": "Persona Consistency"}
PROMPT = "build_validate"
NEIGHBOURS = 2  # turns shown either side of each evidence turn
MAX_HISTORY_CHARS = 6000  # keeps the prompt inside a small model's context
REPEAT_TEMPERATURE = 0.7  # the same model listed twice annotates independently (sampled, own seed)


class Ratings(BaseModel):
    reasonableness: bool
    coherence: bool
    persona_consistency: bool
    rationale: str = ""


def sample_instances(ds: Dataset, n: int, seed: int) -> list[TaskView]:
    ordered = sorted(ds.instances, key=lambda t: t.instance_id)
    if n >= len(ordered):
        return ordered
    return sorted(derive(seed, "validate-sample").sample(ordered, n), key=lambda t: t.instance_id)


def excerpts(history: list[Turn], evidence_ids: list[str]) -> str:
    """Evidence turns with `NEIGHBOURS` turns either side, in time order, gaps marked '...'."""
    pos = {t.id: i for i, t in enumerate(history)}
    keep: set[int] = set()
    for tid in evidence_ids:
        if tid in pos:
            i = pos[tid]
            keep.update(range(max(0, i - NEIGHBOURS), min(len(history), i + NEIGHBOURS + 1)))
    lines: list[str] = []
    last = -2
    for i in sorted(keep):
        if i != last + 1:
            lines.append("...")
        t = history[i]
        lines.append(f"[{t.timestamp[:16].replace('T', ' ')}] {t.role}: {t.text}")
        last = i
    text = "\n".join(lines)
    if len(text) > MAX_HISTORY_CHARS:
        text = text[:MAX_HISTORY_CHARS] + "\n... (cut)"
    return text


def prompt_vars(ds: Dataset, tv: TaskView, key: AnswerKey, history: list[Turn]) -> dict[str, Any]:
    persona = ds.evaluator_personas()[tv.user_id]  # annotators check consistency with the states too
    ids = [e.turn_id for e in key.evidence]
    return {
        "persona": persona_summary(persona),
        "history": excerpts(history, ids),
        "query": tv.query,
        "scenario": tv.scenario_name,
        "action": "write a text" if tv.action == "generate" else f"call the API {tv.api_name}",
        "now": tv.now[:16].replace("T", " "),
    }


def _nan_to_none(x: float) -> float | None:
    return None if math.isnan(x) else round(x, 4)


def agreement(a: list[Ratings | None], b: list[Ratings | None]) -> dict[str, Any]:
    """Raw agreement and AC1 per criterion and pooled over criteria; unscored items are skipped."""
    out: dict[str, Any] = {"per_dimension": {}}
    pooled_a: list[bool | None] = []
    pooled_b: list[bool | None] = []
    for c in CRITERIA:
        xa = [getattr(r, c) if r is not None else None for r in a]
        xb = [getattr(r, c) if r is not None else None for r in b]
        pooled_a += xa
        pooled_b += xb
        n = sum(x is not None and y is not None for x, y in zip(xa, xb))
        out["per_dimension"][c] = {"agreement": _nan_to_none(raw_agreement(xa, xb)), "ac1": _nan_to_none(gwet_ac1(xa, xb)), "n": n}
    n = sum(x is not None and y is not None for x, y in zip(pooled_a, pooled_b))
    out["overall"] = {"agreement": _nan_to_none(raw_agreement(pooled_a, pooled_b)), "ac1": _nan_to_none(gwet_ac1(pooled_a, pooled_b)), "n": n}
    return out


async def _annotate(backend: Backend, messages: list[dict[str, str]], temperature: float, seed: int) -> tuple[Ratings | None, str | None]:
    try:
        ratings, _ = await complete_json(backend, messages, Ratings, max_tokens=200, temperature=temperature, seed=seed)
        return ratings, None
    except StructuredOutputError as e:
        return None, str(e)


async def validate_dataset(
    root: str | Path,
    annotators: list[tuple[str, Backend]],
    *,
    sample: int = 200,
    seed: int = 42,
    concurrency: int = 4,
    out: str | Path | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Annotate `sample` instances with each (label, backend); write and return validation.json."""
    from tqdm import tqdm

    if len(annotators) < 2:
        raise ValueError("agreement needs at least two annotators (--annotators m1,m2; the same model twice is allowed)")
    ds = Dataset(root)
    keys = ds.answer_keys()
    chosen = sample_instances(ds, sample, seed)
    histories: dict[str, list[Turn]] = {}
    messages = []
    for tv in chosen:
        if tv.user_id not in histories:
            histories[tv.user_id] = ds.history(tv.user_id)
        messages.append(prompts.render(PROMPT, **prompt_vars(ds, tv, keys[tv.instance_id], histories[tv.user_id])).messages)
    models = [b.model_id for _, b in annotators]
    repeated = len(set(models)) < len(models)
    temperature = REPEAT_TEMPERATURE if repeated else 0.0
    sem = asyncio.Semaphore(max(1, concurrency))
    bar = tqdm(total=len(chosen) * len(annotators), desc="annotating", unit="rating", disable=not progress)
    results: dict[tuple[int, int], tuple[Ratings | None, str | None]] = {}

    async def one(k: int, j: int) -> None:
        async with sem:
            results[(k, j)] = await _annotate(annotators[k][1], messages[j], temperature, seed * 1000 + k)
        bar.update(1)

    try:
        await asyncio.gather(*(one(k, j) for k in range(len(annotators)) for j in range(len(chosen))))
    finally:
        bar.close()
    labels = [label for label, _ in annotators]
    ratings = {label: [results[(k, j)][0] for j in range(len(chosen))] for k, label in enumerate(labels)}
    report: dict[str, Any] = {
        "dataset": str(ds.root),
        "sample": len(chosen),
        "seed": seed,
        "annotators": labels,
        "models": models,
        "temperature": temperature,
        "prompt_hash": prompts.template_hash(PROMPT),
        "unscored": {label: sum(r is None for r in ratings[label]) for label in labels},
        "positive_rate": {
            label: {c: _nan_to_none(_share([getattr(r, c) for r in ratings[label] if r is not None])) for c in CRITERIA} for label in labels
        },
        "pairs": [{"annotators": [a, b], **agreement(ratings[a], ratings[b])} for a, b in combinations(labels, 2)],
        "items": [
            {
                "instance_id": tv.instance_id,
                "ratings": {
                    label: (results[(k, j)][0].model_dump() if results[(k, j)][0] is not None else None) for k, label in enumerate(labels)
                },
                "errors": {label: results[(k, j)][1] for k, label in enumerate(labels) if results[(k, j)][1]},
            }
            for j, tv in enumerate(chosen)
        ],
    }
    dump_json(Path(out) if out else ds.root / "validation.json", report)
    return report


def _share(xs: list[bool]) -> float:
    return sum(xs) / len(xs) if xs else float("nan")


def format_table11(report: dict[str, Any]) -> str:
    """Table 11's shape: agreement and AC1 per criterion and overall, for each annotator pair."""
    lines = []
    for pair in report["pairs"]:
        a, b = pair["annotators"]
        lines.append(f"{a} vs {b}")
        lines.append(f"  {'Dimension':<22}{'Agreement':>10}{'AC1':>8}{'n':>6}")
        rows = [(CRITERIA_NAMES[c], pair["per_dimension"][c]) for c in CRITERIA] + [("Overall", pair["overall"])]
        for name, r in rows:
            agr = "-" if r["agreement"] is None else f"{100 * r['agreement']:.1f}%"
            ac1 = "-" if r["ac1"] is None else f"{r['ac1']:.2f}"
            lines.append(f"  {name:<22}{agr:>10}{ac1:>8}{r['n']:>6}")
    un = ", ".join(f"{k} {v}" for k, v in report["unscored"].items())
    lines.append(f"sampled instances: {report['sample']}; unscored (unparseable) ratings: {un}")
    return "\n".join(lines)
