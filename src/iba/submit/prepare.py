"""Build a Submission from a result store and the dataset its runs were on.

Each entry is one row of the report (agent spec x model x run): every stored trial of every
instance it ran, as a per-instance result (each scorer's verdicts and score, the trial score,
tokens, wall time); then the aggregates, computed from those results by iba.submit.recompute (the
rule `iba submit validate` checks them by): results per domain and overall with the report's
bootstrap intervals, pass^k, counts, cost. The entry's sample is what was run: the full dataset,
or the subset of instances run (named by id). Only the judges that count (`judges`, default all
stored) enter the results.
"""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import date
from pathlib import Path
from typing import Any

from iba import __version__, prompts
from iba.agents.references import row_order
from iba.dataset import Dataset, dataset_id
from iba.eval.panel import JUDGE_PREFIX
from iba.report.data import Instance, load_report_data
from iba.run.store import Store
from iba.submit import recompute
from iba.submit.schema import (Contact, Cost, DatasetInfo, Entry, FeatureAudit, IngestCost, InstanceResult, Judge,
                               JudgeCheck, Reference, SampleInfo, ScorerResult, Submission, TellAudit, Usage,
                               Verification)


def _stats(ds: Dataset) -> dict[str, Any] | None:
    stats_path = ds.root / "stats.json"
    if stats_path.exists():
        return json.loads(stats_path.read_text(encoding="utf-8"))
    if not ds.held_back and ds.answer_key_path.exists():
        from iba.construct.stats import compute_stats

        return compute_stats(ds.root)
    return None


def tell_audit(stats: dict[str, Any]) -> TellAudit | None:
    """The lexical tell audit of stats.json (README's meaning of the name), or why it was not run."""
    if "tell_audit" not in stats:
        return TellAudit(run=False, reason="not run (`iba stats --no-audit`)") if stats else None
    audit = stats["tell_audit"]
    c = audit.get("classifier") or {}
    if not c.get("available"):
        return TellAudit(run=False, reason=c.get("reason") or "no classifier result", seed=audit.get("seed"))
    return TellAudit(run=True, seed=audit.get("seed"),
                     **{k: c.get(k) for k in ("train_personas", "test_personas", "test_user_turns", "test_evidence_turns",
                                              "precision_at_n", "evidence_share", "auc_evidence_vs_distractors",
                                              "auc_evidence_vs_rest")})


def dataset_info(ds: Dataset) -> DatasetInfo:
    m = ds.manifest
    per_domain: dict[str, int] = defaultdict(int)
    for t in ds.instances:
        per_domain[t.domain] += 1
    stats = _stats(ds) or {}
    tells = stats.get("tells")
    return DatasetInfo(name=m.name, id=dataset_id(ds), format=m.format, generator=m.generator,
                       generator_version=m.generator_version, writer=m.writer, seed=m.seed,
                       taxonomy_version=m.taxonomy_version, created_by=m.created_by, instances=len(ds.instances),
                       per_domain=dict(per_domain), tell_audit=tell_audit(stats),
                       feature_audit=FeatureAudit.model_validate(tells) if tells else None)


def _modified(hashes: dict[str, str]) -> list[str]:
    shipped = set(prompts.names())
    return sorted(name for name, h in hashes.items() if name not in shipped or prompts.template_hash(name) != h)


def _usage(u: Any) -> Usage:
    return Usage(llm_calls=u.llm_calls, prompt_tokens=u.prompt_tokens, completion_tokens=u.completion_tokens)


def instance_results(inst: Instance, judges: list[str] | None) -> list[InstanceResult]:
    """Every stored trial of one instance of a row, with the scorers that count."""
    wanted = None if judges is None else {j if j.startswith(JUDGE_PREFIX) else JUDGE_PREFIX + j for j in judges}
    out = []
    for run in inst.trials:
        recs = [s for s in inst.scores.get(run.key, []) if s.scorer != "qa"
                and (wanted is None or not s.scorer.startswith(JUDGE_PREFIX) or s.scorer in wanted)]
        scores = [ScorerResult(scorer=s.scorer, repeat=s.repeat, score=s.score, failure=s.failure, errored=s.errored,
                               verdicts={v.target: v.passed for v in s.verdicts},
                               usage=_usage(s.usage) if s.scorer.startswith(JUDGE_PREFIX) else None)
                  for s in sorted(recs, key=lambda s: (s.scorer, s.repeat))]
        r = InstanceResult(instance_id=inst.instance_id, domain=inst.domain, action=inst.kind, trial=run.trial,  # type: ignore[arg-type]
                           status=run.status, score=None, scores=scores, usage=_usage(run.usage),
                           wall_s=round(run.latency_s, 3))
        out.append(r.model_copy(update={"score": recompute.trial_score(r)}))
    return out


def _ingest_cost(records: list[Any]) -> IngestCost | None:
    """A memory agent's ingest records summed (None for other agents)."""
    if not records:
        return None
    return IngestCost(users=len(records), sessions=sum(r.ingested for r in records),
                      llm_calls=sum(r.usage.llm_calls for r in records),
                      prompt_tokens=sum(r.usage.prompt_tokens for r in records),
                      completion_tokens=sum(r.usage.completion_tokens for r in records),
                      wall_s=round(sum(r.wall_s for r in records), 3), attempts=sum(r.attempts for r in records))


def prepare(store_path: str | Path, dataset_dir: str | Path, *, answer_key: str | Path | None = None,
            runs: list[str] | None = None, judges: list[str] | None = None, submitter: Contact | None = None,
            organization: str | None = None, references: list[Reference] | None = None, notes: str = "",
            usd_per_mtok: tuple[float, float] | None = None) -> Submission:
    """The submission of every agent x model row of `store_path` on the dataset `dataset_dir`."""
    ds = Dataset(dataset_dir, answer_key=answer_key)
    did = dataset_id(ds)
    data = load_report_data(store_path, [dataset_dir], runs=runs, judges=judges,
                            answer_keys=[answer_key] if answer_key else None)
    mine = [i for i in data.instances if i.dataset == did]
    if not mine:
        others = sorted({i.dataset for i in data.instances})
        raise ValueError(f"{store_path} holds no runs on dataset {did}" + (f" (it has: {', '.join(others)})" if others else ""))
    by_row: dict[Any, list[Instance]] = defaultdict(list)
    for inst in mine:
        by_row[inst.row].append(inst)
    all_ids = [t.instance_id for t in ds.instances]
    with Store(store_path) as store:
        checks = {r.judge: r for r in store.judge_checks()}  # oldest first: the latest wins
    judge_repeats: dict[str, int] = defaultdict(int)
    entries = []
    domains = sorted({t.domain for t in ds.instances})
    for row, insts in by_row.items():
        results = [r for i in sorted(insts, key=lambda i: i.instance_id) for r in instance_results(i, data.judges)]
        for r in results:
            for sc in r.scores:
                if sc.scorer.startswith(JUDGE_PREFIX):
                    name = sc.scorer[len(JUDGE_PREFIX):]
                    judge_repeats[name] = max(judge_repeats[name], sc.repeat + 1)
        runs_ = [r for i in insts for r in i.trials]
        hashes: dict[str, str] = {}
        for r in runs_:
            hashes.update(r.prompt_hashes)
        modified = _modified(hashes)
        sample = recompute.sample_of((i.instance_id for i in insts), all_ids)
        omitted = recompute.omitted(results, sample.ids or all_ids)
        trials = max(len(i.trials) for i in insts)
        agent_usage = recompute.usage(r.usage for r in results)
        judge_usage = recompute.judge_usage(results)
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
        if sample.kind == "subset":
            details.append(f"run on a subset: {sample.instances} of the dataset's {len(all_ids)} instances (sample.ids)")
        if omitted:
            why: dict[str, int] = defaultdict(int)
            for iid in omitted:
                inst = next((i for i in insts if i.instance_id == iid), None)
                why["not run" if inst is None else "errored" if any(r.status == "errored" for r in inst.trials)
                    else "unscored"] += 1
            details.append("instances without a score: " + ", ".join(f"{n} {w}" for w, n in sorted(why.items())))
        entries.append(Entry(
            agent=row.agent, model=row.model, run=row.run or insts[0].trials[0].run, trials=trials, sample=sample,
            results=recompute.results(results, domains), pass_k=recompute.pass_k(results, trials),
            counts=recompute.counts(results, len(all_ids), sample.instances),
            cost=Cost(agent=agent_usage, judges=judge_usage, wall_s=round(sum(r.wall_s for r in results), 3),
                      ingest=ingest, usd=usd, usd_per_mtok=usd_per_mtok),
            verification=Verification(modified_prompts=bool(modified), modified=modified,
                                      omitted_instances=bool(omitted), omitted=omitted, details="; ".join(details)),
            prompt_hashes=dict(sorted(hashes.items())), third_party=third_party,
            sandboxed=(all(r.sandbox == "bwrap" for r in runs_) if third_party else None),
            instances=results,
            reference=row.reference is not None, reference_kind=row.reference,
        ))
    entries.sort(key=lambda e: row_order(e.agent))  # as in the report: null, the systems, direct, oracle
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
    custom = any(e.verification.modified_prompts or e.verification.omitted_instances or e.third_party
                 or e.sample.kind != "full" for e in entries)
    drawn = data.samples.get(did)
    if custom and not notes.strip():
        notes = "; ".join(f"{e.agent} ({e.model}): {e.verification.details or 'a third-party agent'}"
                          for e in entries if e.verification.details or e.third_party)
        if drawn is not None:
            notes = f"runs on {drawn.describe()}; " + notes
    return Submission(submission_date=date.today().isoformat(), iba_version=__version__,
                      submission_type="custom" if custom else "standard", submitter=submitter or Contact(),
                      organization=organization, dataset=dataset_info(ds), judges=judges_out, entries=entries,
                      references=references or [], notes=notes,
                      sample=None if drawn is None else SampleInfo(
                          n=drawn.n, seed=drawn.seed, strata=drawn.strata, instance_ids_sha=drawn.instance_ids_sha,
                          pool=drawn.pool, filters=drawn.filters))
