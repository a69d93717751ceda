"""Calibration of an LLM judge on a fixed set of (response, checkpoint) pairs with known verdicts.

Small local models pass almost everything, so a judge's scores mean little until it has shown it
can fail a response that clearly violates a requirement. `build_cases` makes a deterministic set
of pairs from the shipped taxonomy (or from a dataset's answer key):

- compliant: a response written, from a fixed template, to the checkpoint's expected value;
- violation: the same template written to another value of the same dimension; for a dynamic
  checkpoint the violation is written to the superseded (earlier) value, which must fail.

No LLM writes the responses. `judge_check` runs every pair through `judge_checkpoint`, the very
prompt (`judge_checkpoint.jinja`) and parser the scoring panel uses, so the figures measure what
scoring uses: accuracy, the pass rate on known violations (false passes), the pass rate on
compliant cases and the unscored count, with the judge id, the prompt template hash and a hash
of the case set, so that figures from different case sets or prompts are not confused.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

from pydantic import BaseModel, Field

from iba import prompts
from iba.eval.judge import TEMPLATE, JudgeSettings, judge_checkpoint
from iba.llm.base import Backend
from iba.types import Checkpoint, Dimension, PreferenceValue, Taxonomy, Usage, stable_hash

DEFAULT_N = 24
DEFAULT_SEED = 42
VIOLATION_PASS_WARN = 0.2  # a judge passing more known violations than this is not trustworthy
COMPLIANT_FAIL_WARN = 0.2  # nor one failing more known-compliant responses (a judge that says no to all)

# Fixed response templates; {desc} is the value's text as a clause ("prefers narrative-driven writing").
_TEMPLATES: tuple[str, ...] = (
    "Here is the {scenario} you asked for.\n\n"
    "I wrote it for a reader who {desc}, and kept to that from start to finish.\n\n"
    "1. Opening: the purpose and context, written in that manner.\n"
    "2. Main part: the substance, kept consistent with it.\n"
    "3. Closing: next steps, in the same manner.",
    "Draft ({dimension}): this version {desc_verb}.\n\n"
    "Every section below follows that choice; nothing deviates from it.\n\n"
    "Section A - background.\nSection B - details.\nSection C - wrap-up.",
    "As requested, below is the {scenario}. A deliberate choice about {dimension_lc}: "
    "the text is written for someone who {desc}.\n\n"
    "[Body, written throughout for someone who {desc}.]",
)


class JudgeCase(BaseModel):
    """One (response, checkpoint) pair with a known verdict."""

    id: str
    checkpoint: Checkpoint
    response: str
    expected: bool  # True: compliant, must pass; False: known violation, must fail
    written_to: str  # the value id the response was written to
    note: str = ""


class CaseOutcome(BaseModel):
    id: str
    expected: bool
    passed: bool | None
    rationale: str = ""
    errored: bool = False  # the judge call failed (infrastructure), not the judge's answer


class JudgeCheckResult(BaseModel):
    judge: str  # model id
    n: int
    n_violations: int
    n_compliant: int
    scored: int
    unscored: int
    errored: int = 0  # of the unscored: judge calls that failed (a check with any is not saved)
    accuracy: float | None  # over scored cases
    violation_pass_rate: float | None  # passes among scored known violations (false-pass rate)
    compliant_pass_rate: float | None  # passes among scored compliant cases
    prompt_template: str = TEMPLATE
    prompt_hash: str
    case_set_hash: str
    source: str = "taxonomy"  # "taxonomy" or the dataset directory
    seed: int = DEFAULT_SEED
    temperature: float = 0.0
    created_at: str = ""
    wall_s: float = 0.0
    usage: Usage = Field(default_factory=Usage)
    outcomes: list[CaseOutcome] = Field(default_factory=list)

    @property
    def scorer(self) -> str:
        from iba.eval.panel import judge_scorer

        return judge_scorer(self.judge)

    @property
    def passes_violations(self) -> bool:
        return self.violation_pass_rate is not None and self.violation_pass_rate > VIOLATION_PASS_WARN

    @property
    def fails_compliant(self) -> bool:
        return self.compliant_pass_rate is not None and 1 - self.compliant_pass_rate > COMPLIANT_FAIL_WARN


# --------------------------------------------------------------------------- cases


def _clause(text: str) -> str:
    """'Prefers narrative-driven writing.' -> 'prefers narrative-driven writing'."""
    t = text.strip().rstrip(".").strip()
    return t[:1].lower() + t[1:] if t else t


def _verb_clause(text: str) -> str:
    """A clause with the response as subject."""
    c = _clause(text)
    return f"is written for a reader who {c}"


def render_response(template: int, value_text: str, *, scenario: str, dimension: str) -> str:
    desc = _clause(value_text)
    return _TEMPLATES[template % len(_TEMPLATES)].format(
        scenario=scenario.lower(), dimension=dimension, dimension_lc=dimension.lower(),
        desc=desc, desc_verb=_verb_clause(value_text))


def _static(d: Dimension) -> list[PreferenceValue]:
    return [v for v in d.values if not v.dynamic]


class _Target(BaseModel):
    """A checkpoint to test and the value a violation is written to."""

    key: str
    scenario: str
    checkpoint: Checkpoint
    violation: PreferenceValue


def _taxonomy_targets(tax: Taxonomy) -> list[_Target]:
    out = []
    for s in tax.scenarios():
        if s.action != "generate":
            continue
        for d in s.dimensions:
            static = _static(d)
            if len(static) < 2:
                continue
            for v in d.values:
                if v.dynamic:
                    new, old = d.value(v.to_value), d.value(v.from_value)  # type: ignore[arg-type]
                    cp = Checkpoint(id=f"{s.id}.{d.id}.{v.id}", dimension=d.id, dimension_name=d.name, value=new.id,
                                    expected=new.text, kind="dynamic", superseded=old.text, evidence=[])
                    out.append(_Target(key=cp.id, scenario=s.name, checkpoint=cp, violation=old))
                else:
                    cp = Checkpoint(id=f"{s.id}.{d.id}.{v.id}", dimension=d.id, dimension_name=d.name, value=v.id,
                                    expected=v.text, kind="static", evidence=[])
                    others = [o for o in static if o.id != v.id]
                    out.append(_Target(key=cp.id, scenario=s.name, checkpoint=cp, violation=others[0]))
    return out


def _dataset_targets(dataset_dir: Path, tax: Taxonomy) -> list[_Target]:
    from iba.dataset import Dataset

    ds = Dataset(dataset_dir)
    scenario_of = {i.instance_id: i.scenario for i in ds.instances}
    out = []
    for iid, key in sorted(ds.answer_keys().items()):
        try:
            s = tax.scenario(scenario_of[iid])
        except KeyError:
            continue
        dims = {d.id: d for d in s.dimensions}
        for c in key.checkpoints:
            d = dims.get(c.dimension)
            if d is None or c.source != "preference":
                continue  # state checkpoints carry situation text a template cannot write to
            try:
                expected = d.value(c.value)
            except KeyError:
                continue
            if c.kind == "dynamic":
                old = next((v for v in _static(d) if v.text == c.superseded), None)
                if old is None:
                    continue
                violation = old
            else:
                others = [v for v in _static(d) if v.id != expected.id]
                if not others:
                    continue
                violation = others[0]
            out.append(_Target(key=c.id, scenario=s.name, checkpoint=c, violation=violation))
    return out


def build_cases(n: int = DEFAULT_N, seed: int = DEFAULT_SEED, *, dataset: str | Path | None = None,
                taxonomy: Taxonomy | None = None) -> list[JudgeCase]:
    """n pairs (n // 2 targets, each with one compliant and one violation case), deterministic in seed.

    About a third of the targets are dynamic checkpoints when the source has them."""
    if n < 2:
        raise ValueError("a judge check needs at least 2 cases (one compliant, one violation)")
    if taxonomy is None:
        from iba.taxonomy import load_taxonomy

        taxonomy = load_taxonomy()
    targets = _dataset_targets(Path(dataset), taxonomy) if dataset is not None else _taxonomy_targets(taxonomy)
    if not targets:
        raise ValueError(f"no Generate(text) checkpoints usable for a judge check in {dataset or 'the taxonomy'}")
    rng = random.Random(f"judge-check:{seed}")
    k = min(n // 2, len(targets))
    dynamic = [t for t in targets if t.checkpoint.kind == "dynamic"]
    static = [t for t in targets if t.checkpoint.kind == "static"]
    n_dyn = min(len(dynamic), max(1 if dynamic else 0, k // 3))
    chosen = rng.sample(dynamic, n_dyn) + rng.sample(static, min(len(static), k - n_dyn))
    if len(chosen) < k:  # few static targets: top up with more dynamic ones
        rest = [t for t in dynamic if t not in chosen]
        chosen += rng.sample(rest, min(len(rest), k - len(chosen)))
    rng.shuffle(chosen)
    cases: list[JudgeCase] = []
    for i, t in enumerate(chosen):
        tmpl = rng.randrange(len(_TEMPLATES))
        cp = t.checkpoint
        kw = dict(scenario=t.scenario, dimension=cp.dimension_name)
        good = JudgeCase(id=f"jc{i:02d}-pass", checkpoint=cp, expected=True, written_to=cp.value,
                         response=render_response(tmpl, cp.expected, **kw), note="written to the expected value")
        bad = JudgeCase(id=f"jc{i:02d}-fail", checkpoint=cp, expected=False, written_to=t.violation.id,
                        response=render_response(tmpl, t.violation.text, **kw),
                        note=("written to the superseded value" if cp.kind == "dynamic"
                              else "written to another value of the dimension"))
        cases += [good, bad] if rng.random() < 0.5 else [bad, good]
    return cases


def case_set_hash(cases: list[JudgeCase]) -> str:
    return stable_hash([c.model_dump(mode="json") for c in cases])


# --------------------------------------------------------------------------- the check


def _rate(values: list[bool]) -> float | None:
    return sum(values) / len(values) if values else None


async def judge_check(
    backend: Backend, cases: list[JudgeCase], *, settings: JudgeSettings = JudgeSettings(),
    concurrency: int = 4, on_case: Callable[[CaseOutcome], None] | None = None,
    source: str = "taxonomy", seed: int = DEFAULT_SEED,
) -> JudgeCheckResult:
    """Judge every case with `judge_checkpoint` (the scoring panel's own call) and tally the verdicts."""
    sem = asyncio.Semaphore(max(1, concurrency))
    start = time.monotonic()

    async def one(c: JudgeCase) -> tuple[CaseOutcome, Usage]:
        async with sem:
            v, u = await judge_checkpoint(backend, c.response, c.checkpoint, settings=settings)
        out = CaseOutcome(id=c.id, expected=c.expected, passed=v.passed, rationale=v.rationale, errored=v.errored)
        if on_case:
            on_case(out)
        return out, u

    results = await asyncio.gather(*(one(c) for c in cases))
    outcomes = [o for o, _ in results]
    usage = Usage()
    for _, u in results:
        usage = usage.add(u)
    scored = [o for o in outcomes if o.passed is not None]
    return JudgeCheckResult(
        judge=backend.model_id, n=len(cases),
        n_violations=sum(not c.expected for c in cases), n_compliant=sum(c.expected for c in cases),
        scored=len(scored), unscored=len(outcomes) - len(scored), errored=sum(o.errored for o in outcomes),
        accuracy=_rate([o.passed == o.expected for o in scored]),
        violation_pass_rate=_rate([bool(o.passed) for o in scored if not o.expected]),
        compliant_pass_rate=_rate([bool(o.passed) for o in scored if o.expected]),
        prompt_hash=prompts.template_hash(TEMPLATE), case_set_hash=case_set_hash(cases),
        source=source, seed=seed, temperature=settings.temperature,
        created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        wall_s=round(time.monotonic() - start, 2), usage=usage, outcomes=outcomes,
    )


def fmt_rate(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def format_result(r: JudgeCheckResult) -> str:
    rows = [
        ("judge", r.judge),
        ("cases", f"{r.n} ({r.n_compliant} compliant, {r.n_violations} violations; source {r.source}, seed {r.seed})"),
        ("accuracy", fmt_rate(r.accuracy)),
        ("pass rate on known violations", fmt_rate(r.violation_pass_rate) + ("  <- WARNING: passes known violations"
                                                                       if r.passes_violations else "")),
        ("pass rate on compliant cases", fmt_rate(r.compliant_pass_rate) + ("  <- WARNING: fails compliant responses"
                                                                    if r.fails_compliant else "")),
        ("unscored", str(r.unscored) + (f" ({r.errored} judge calls failed)" if r.errored else "")),
        ("prompt", f"{r.prompt_template} {r.prompt_hash}"),
        ("case set", r.case_set_hash),
        ("wall", f"{r.wall_s:.1f}s, {r.usage.llm_calls} LLM calls"),
    ]
    w = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{w}}  {v}" for k, v in rows)
