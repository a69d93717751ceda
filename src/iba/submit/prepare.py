"""Build a Submission from a result store and the dataset its runs were on.

Each entry is one row of the report (agent spec x model x run): its instance scores (mean over
trials, as in Table 4) over the instances it scored, per domain and overall, with the report's
bootstrap intervals; pass^k as in tau-bench (share of instances whose first k trials all score 1.0);
the agent's and the judges' tokens; the instances it has no score for; and the prompt templates
whose hash is not the one this iba ships.
"""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import date
from pathlib import Path
from typing import Any

from iba import __version__, prompts
from iba.dataset import Dataset
from iba.eval.panel import JUDGE_PREFIX
from iba.report.data import Instance, load_report_data
from iba.report.intervals import bootstrap_ci
from iba.dataset import dataset_id
from iba.run.store import Store
from iba.submit.schema import (OVERALL, Contact, Cost, Counts, DatasetInfo, Entry, IngestCost, Judge, JudgeCheck,
                               Reference, Result, Submission, TellAudit, Usage, Verification)


def _result(scores: list[float]) -> Result:
    ci = bootstrap_ci(scores)
    if ci is None:
        return Result(score=None, n=0)
    return Result(score=round(100 * ci.mean, 2), ci=(round(100 * ci.lo, 2), round(100 * ci.hi, 2)), n=ci.n)


def _tells(ds: Dataset) -> TellAudit | None:
    stats_path = ds.root / "stats.json"
    stats: dict[str, Any] | None = None
    if stats_path.exists():
        stats = json.loads(stats_path.read_text(encoding="utf-8"))
    elif not ds.held_back and ds.answer_key_path.exists():
        from iba.construct.stats import compute_stats

        stats = compute_stats(ds.root)
    tells = (stats or {}).get("tells")
    return TellAudit.model_validate(tells) if tells else None


def dataset_info(ds: Dataset) -> DatasetInfo:
    m = ds.manifest
    per_domain: dict[str, int] = defaultdict(int)
    for t in ds.instances:
        per_domain[t.domain] += 1
    return DatasetInfo(name=m.name, id=dataset_id(ds), format=m.format, generator=m.generator, writer=m.writer,
                       seed=m.seed, taxonomy_version=m.taxonomy_version, created_by=m.created_by,
                       instances=len(ds.instances), per_domain=dict(per_domain), tell_audit=_tells(ds))


def _modified(hashes: dict[str, str]) -> list[str]:
    shipped = set(prompts.names())
    return sorted(name for name, h in hashes.items() if name not in shipped or prompts.template_hash(name) != h)


def _pass_k(insts: list[Instance], trials: int, judges: list[str] | None) -> dict[str, float] | None:
    if trials <= 1:
        return None
    out = {}
    for k in range(1, trials + 1):
        ok = [all(i.trial_score(r, judges) == 1.0 for r in i.trials[:k]) for i in insts if len(i.trials) >= trials]
        out[str(k)] = round(100 * sum(ok) / len(ok), 2) if ok else 0.0
    return out


def _usage(records: list[Any]) -> Usage:
    return Usage(llm_calls=sum(r.usage.llm_calls for r in records),
                 prompt_tokens=sum(r.usage.prompt_tokens for r in records),
                 completion_tokens=sum(r.usage.completion_tokens for r in records))


def _ingest_cost(records: list[Any]) -> IngestCost | None:
    """A memory agent's ingest records summed (None for other agents)."""
    if not records:
        return None
    return IngestCost(users=len(records), sessions=sum(r.ingested for r in records),
                      llm_calls=sum(r.usage.llm_calls for r in records),
                      prompt_tokens=sum(r.usage.prompt_tokens for r in records),
                      completion_tokens=sum(r.usage.completion_tokens for r in records),
                      wall_s=round(sum(r.wall_s for r in records), 3), attempts=sum(r.attempts for r in records))


def _judge_checks(store_path: Path) -> dict[str, Any]:
    with Store(store_path) as store:
        return {r.judge: r for r in store.judge_checks()}  # oldest first: the latest wins


def prepare(store_path: str | Path, dataset_dir: str | Path, *, answer_key: str | Path | None = None,
            runs: list[str] | None = None, judges: list[str] | None = None, submitter: Contact | None = None,
            organization: str | None = None, references: list[Reference] | None = None, notes: str = "",
            usd_per_mtok: tuple[float, float] | None = None) -> Submission:
    """The submission of every agent x model row of `store_path` on the dataset `dataset_dir`."""
    ds = Dataset(dataset_dir, answer_key=answer_key)
    did = dataset_id(ds)
    data = load_report_data(store_path, [dataset_dir], runs=runs, judges=judges,
                            answer_keys=[answer_key] if answer_key else None)
    mine = [i for i in data.all_instances if i.dataset == did]
    if not mine:
        others = sorted({i.dataset for i in data.all_instances})
        raise ValueError(f"{store_path} holds no runs on dataset {did}" + (f" (it has: {', '.join(others)})" if others else ""))
    by_row: dict[Any, list[Instance]] = defaultdict(list)
    for inst in mine:
        by_row[inst.row].append(inst)
    all_ids = [t.instance_id for t in ds.instances]
    checks = _judge_checks(Path(store_path))
    judge_repeats: dict[str, int] = defaultdict(int)
    entries = []
    for row, insts in by_row.items():
        scored = {i.instance_id: i.score(data.judges) for i in insts}
        scored = {k: v for k, v in scored.items() if v is not None}
        results = {OVERALL: _result(list(scored.values()))}
        for dom in sorted({t.domain for t in ds.instances}):
            results[dom] = _result([v for i in insts if i.domain == dom and (v := scored.get(i.instance_id)) is not None])
        runs_ = [r for i in insts for r in i.trials]
        score_recs = [s for i in insts for v in i.scores.values() for s in v]
        for s in score_recs:
            if s.scorer.startswith(JUDGE_PREFIX):
                judge_repeats[s.scorer[len(JUDGE_PREFIX):]] = max(judge_repeats[s.scorer[len(JUDGE_PREFIX):]], s.repeat + 1)
        hashes: dict[str, str] = {}
        for r in runs_:
            hashes.update(r.prompt_hashes)
        modified = _modified(hashes)
        omitted = [iid for iid in all_ids if iid not in scored]
        trials = max(len(i.trials) for i in insts)
        agent_usage = _usage(runs_)
        judge_usage = _usage([s for s in score_recs if s.scorer.startswith(JUDGE_PREFIX)])
        ingest = _ingest_cost([r for r in data.ingests_of(row) if r.dataset == did])
        usd = None
        if usd_per_mtok is not None:
            tokens_in = agent_usage.prompt_tokens + judge_usage.prompt_tokens + (ingest.prompt_tokens if ingest else 0)
            tokens_out = (agent_usage.completion_tokens + judge_usage.completion_tokens
                          + (ingest.completion_tokens if ingest else 0))
            usd = round((tokens_in * usd_per_mtok[0] + tokens_out * usd_per_mtok[1]) / 1e6, 6)
        third_party = row.agent.partition("?")[0] in ("external", "memory")
        details = []
        if modified:
            details.append(f"prompt templates not as shipped with iba {__version__}: {', '.join(modified)}")
        if omitted:
            why = defaultdict(int)
            for iid in omitted:
                inst = next((i for i in insts if i.instance_id == iid), None)
                why["not run" if inst is None else "errored" if any(r.status == "errored" for r in inst.trials)
                    else "unscored"] += 1
            details.append("instances without a score: " + ", ".join(f"{n} {w}" for w, n in sorted(why.items())))
        entries.append(Entry(
            agent=row.agent, model=row.model, run=row.run or insts[0].trials[0].run, trials=trials, results=results,
            pass_k=_pass_k(insts, trials, data.judges),
            counts=Counts(instances=len(all_ids), run=len(insts),
                          ok=sum(all(r.status == "ok" for r in i.trials) for i in insts),
                          failed=sum(any(r.status == "failed" for r in i.trials) for i in insts),
                          errored=sum(any(r.status == "errored" for r in i.trials) for i in insts),
                          unscored=sum(i.instance_id not in scored and not any(r.status == "errored" for r in i.trials)
                                       for i in insts)),
            cost=Cost(agent=agent_usage, judges=judge_usage, ingest=ingest, usd=usd, usd_per_mtok=usd_per_mtok),
            verification=Verification(modified_prompts=bool(modified), modified=modified,
                                      omitted_instances=bool(omitted), omitted=omitted, details="; ".join(details)),
            prompt_hashes=dict(sorted(hashes.items())), third_party=third_party,
            sandboxed=(all(r.sandbox == "bwrap" for r in runs_) if third_party else None),
        ))
    judges_out = []
    for model, repeats in sorted(judge_repeats.items()):
        r = checks.get(model)
        check = None
        if r is not None:
            warnings = []
            if r.passes_violations:
                warnings.append(f"passes {r.violation_pass_rate:.0%} of known violations")
            if r.fails_compliant:
                warnings.append(f"fails {1 - r.compliant_pass_rate:.0%} of known-compliant responses")
            check = JudgeCheck(accuracy=r.accuracy, violation_pass_rate=r.violation_pass_rate,
                               compliant_pass_rate=r.compliant_pass_rate, n=r.n, case_set_hash=r.case_set_hash,
                               prompt_hash=r.prompt_hash, warnings=warnings)
        judges_out.append(Judge(model=model, repeats=repeats, judge_check=check))
    custom = any(e.verification.modified_prompts or e.verification.omitted_instances or e.third_party for e in entries)
    if custom and not notes.strip():
        notes = "; ".join(f"{e.agent} ({e.model}): {e.verification.details or 'a third-party agent'}"
                          for e in entries if e.verification.details or e.third_party)
    return Submission(submission_date=date.today().isoformat(), iba_version=__version__,
                      submission_type="custom" if custom else "standard", submitter=submitter or Contact(),
                      organization=organization, dataset=dataset_info(ds), judges=judges_out, entries=entries,
                      references=references or [], notes=notes)
