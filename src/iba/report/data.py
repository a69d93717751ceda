"""Everything a report reads, loaded once: runs, scores, answer keys, tasks, domain names.

A report needs the store; the dataset directories are optional but give the answer keys (for the
evidence/constraint/static-dynamic analyses and the drill-down) and the task texts. Runs are
matched to a dataset by the runner's dataset id (name@manifest-hash).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from iba.agents.base import agent_uses_model
from iba.agents.references import REFERENCES, reference_of, row_order
from iba.dataset import Dataset
from iba.eval.aggregate import instance_score, mean, task_kind
from iba.dataset import dataset_id
from iba.report.table_value import REFERENCE_MARK
from iba.run.sample import Sample
from iba.run.store import Store
from iba.types import AnswerKey, IngestRecord, RunRecord, ScoreRecord, TaskView


def domain_names() -> tuple[list[str], dict[str, str]]:
    """(domain order, domain id -> short column name) from the taxonomy, else the paper's list."""
    from iba.taxonomy import DOMAIN_ORDER, PAPER_DOMAINS

    short = {d: s for d, (_, s) in PAPER_DOMAINS.items()}
    try:
        from iba.taxonomy import load_taxonomy

        for d in load_taxonomy().domains:
            short[d.id] = d.short
    except Exception:  # a broken or partial taxonomy must not stop a report on stored runs
        pass
    return list(DOMAIN_ORDER), short


@dataclass(frozen=True)
class RowKey:
    """A table row: one agent spec with one model (and the run name when several runs share it)."""

    agent: str
    model: str
    run: str = ""
    # some of its records ran a third-party command without a sandbox (RunRecord.sandbox "none"):
    # said in the label of every table, not part of the row's identity
    unsandboxed: bool = field(default=False, compare=False)

    @property
    def reference(self) -> str | None:
        """'null', 'direct' or 'oracle' for a reference row (agents/references.py), None for a system."""
        return reference_of(self.agent)

    @property
    def label(self) -> str:
        # an agent that brings its own model (external) is not labelled with the run's --model
        base = f"{self.agent} ({self.model if agent_uses_model(self.agent) else 'own model'})"
        base = f"{self.run}: {base}" if self.run else base
        if self.reference:  # REFERENCE_MARK: tables rank without it, the page and plots set it apart
            base = f"{base} {REFERENCE_MARK}{REFERENCES[self.reference]}]"
        return f"{base} [unsandboxed]" if self.unsandboxed else base


@dataclass
class Instance:
    """One instance of one row, with its trials (task runs) and their scores."""

    row: RowKey
    dataset: str
    instance_id: str
    domain: str
    scenario: str
    kind: str  # generate | call_api
    trials: list[RunRecord]
    scores: dict[str, list[ScoreRecord]]  # run key -> records
    key: AnswerKey | None
    task: TaskView | None

    def trial_score(self, run: RunRecord, judges: Iterable[str] | None = None) -> float | None:
        return instance_score(self.kind, self.scores.get(run.key, []), judges)

    def score(self, judges: Iterable[str] | None = None) -> float | None:
        """Mean over trials of the trial scores (unscored trials left out)."""
        return mean(self.trial_score(r, judges) for r in self.trials)


@dataclass
class ReportData:
    runs: list[RunRecord]
    qa_runs: list[RunRecord]
    scores: dict[str, list[ScoreRecord]]
    keys: dict[tuple[str, str], AnswerKey] = field(default_factory=dict)
    tasks: dict[tuple[str, str], TaskView] = field(default_factory=dict)
    datasets: dict[str, Dataset] = field(default_factory=dict)
    judges: list[str] | None = None  # judge model ids to count; None = all stored
    domain_order: list[str] = field(default_factory=list)
    domain_short: dict[str, str] = field(default_factory=dict)
    samples: dict[str, Sample] = field(default_factory=dict)  # dataset id -> the store's `iba run --sample`

    def sample_note(self) -> str:
        """A sentence saying the runs are a sample (and which), empty when none was recorded."""
        return " ".join(f"Runs on {did} are {s.describe()} (`{s.command or 'iba run ' + s.command_options()}`), not the whole "
                        f"benchmark of {s.dataset_instances}." for did, s in sorted(self.samples.items()))
    # memory agents' ingests (one per dataset, user, agent, model, trial): the cost of remembering
    ingests: list[IngestRecord] = field(default_factory=list)

    def ingests_of(self, row: RowKey) -> list[IngestRecord]:
        """The ingest records of a row's memory agent (none for other agents)."""
        return [i for i in self.ingests if i.agent == row.agent and i.model == row.model and row.run in ("", i.run)]

    @cached_property
    def row_keys(self) -> dict[str, RowKey]:
        """run key -> row; the run name enters the label only where an agent x model pair
        appears in several runs (else rows would silently pool different runs)."""
        runs_per_pair: dict[tuple[str, str], set[str]] = defaultdict(set)
        for r in self.runs + self.qa_runs:
            runs_per_pair[(r.agent, r.model)].add(r.run)

        def run_of(r: RunRecord) -> str:
            return r.run if len(runs_per_pair[(r.agent, r.model)]) > 1 else ""

        unsandboxed = {(r.agent, r.model, run_of(r)) for r in self.runs + self.qa_runs if r.sandbox == "none"}
        return {r.key: RowKey(r.agent, r.model, run_of(r), (r.agent, r.model, run_of(r)) in unsandboxed)
                for r in self.runs + self.qa_runs}

    @cached_property
    def rows(self) -> list[RowKey]:
        """In order of appearance, with the reference rows apart: null first, then the systems,
        then direct (full context) and the oracle, so a table reads floor -> systems -> ceiling."""
        seen: dict[RowKey, None] = {}
        for r in self.runs:
            seen.setdefault(self.row_keys[r.key], None)
        return sorted(seen, key=lambda row: row_order(row.agent))

    @cached_property
    def instances(self) -> list[Instance]:
        """Every instance of every row, scored or not (the drill-down shows them all)."""
        groups: dict[tuple[RowKey, str, str], list[RunRecord]] = defaultdict(list)
        for r in self.runs:
            groups[(self.row_keys[r.key], r.dataset, r.instance_id)].append(r)  # noqa: E501
        out = []
        for (row, ds, iid), trials in groups.items():
            trials.sort(key=lambda r: r.trial)
            scores = {r.key: self.scores.get(r.key, []) for r in trials}
            key = self.keys.get((ds, iid))
            kind = task_kind([s for v in scores.values() for s in v], key)
            out.append(Instance(row, ds, iid, trials[0].domain, trials[0].scenario, kind, trials, scores,
                                key, self.tasks.get((ds, iid))))
        return out

    @cached_property
    def compared(self) -> list[Instance]:
        """The instances every table compares: those that *every* row has a score for (the
        intersection), so no row's mean is over an easier or smaller set than another's. An agent's
        own failures are scored 0 and stay in; errored (infrastructure) and unscored instances, and
        instances a row never ran, leave the comparison for every row: see `left_out`. A row with no
        scored instance at all (its scoring not done yet, every run errored) would empty the
        comparison for everyone: it is left out instead, and named (`rows_left_out`)."""
        rows = {i.row for i in self.instances} - set(self.rows_left_out)
        scored: dict[tuple[str, str], set[RowKey]] = defaultdict(set)
        for i in self.instances:
            if i.score(self.judges) is not None:
                scored[(i.dataset, i.instance_id)].add(i.row)
        common = {k for k, have in scored.items() if have >= rows} if rows else set()
        return [i for i in self.instances if (i.dataset, i.instance_id) in common and i.row in rows]

    @cached_property
    def compared_scores(self) -> dict[RowKey, dict[tuple[str, str], float]]:
        """row -> (dataset, instance id) -> its score, on the compared instances: what every interval,
        paired difference and reference gap of the report is computed from; in (dataset, instance id)
        order, so that `iba run`'s last lines and the report resample the same list."""
        out: dict[RowKey, dict[tuple[str, str], float]] = defaultdict(dict)
        for inst in sorted(self.compared, key=lambda i: (i.dataset, i.instance_id)):
            if (s := inst.score(self.judges)) is not None:
                out[inst.row][(inst.dataset, inst.instance_id)] = s
        return out

    @cached_property
    def rows_left_out(self) -> list[RowKey]:
        """Rows without a single scored instance: outside the comparison, so the others keep theirs."""
        scored = {i.row for i in self.instances if i.score(self.judges) is not None}
        return [r for r in self.rows if r not in scored]

    @cached_property
    def left_out(self) -> list[dict]:
        """One dict per (row, instance) outside the comparison, with why: 'errored' (an
        infrastructure fault), 'judge errored' (a judge call failed: the next `iba run` or `iba
        score` judges it again), 'unscored' (no judge verdict could be read, or no scorer), 'not
        run' by this row, or 'another row' (this row scored it, some other row did not)."""
        kept = {(i.dataset, i.instance_id) for i in self.compared}
        have = {(i.row, i.dataset, i.instance_id): i for i in self.instances}
        ids = sorted({(i.dataset, i.instance_id) for i in self.instances} - kept)
        out = []
        for ds, iid in ids:
            for row in [r for r in self.rows if r not in self.rows_left_out]:
                inst = have.get((row, ds, iid))
                if inst is None:
                    why = "not run"
                elif any(r.status == "errored" for r in inst.trials):
                    why = "errored"
                elif inst.score(self.judges) is None and any(s.errored for v in inst.scores.values() for s in v):
                    why = "judge errored"
                elif inst.score(self.judges) is None:
                    why = "unscored"
                else:
                    why = "another row"
                out.append({"row": row.label, "dataset": ds, "instance_id": iid, "why": why})
        return out

    def left_out_note(self) -> str:
        """A sentence for table notes: n compared, and what was left out and why."""
        n = len({(i.dataset, i.instance_id) for i in self.compared})
        if not self.rows:
            return "No task runs."
        gone = ""
        if self.rows_left_out:
            gone = (" Left out, with no scored instance yet (errored, unscored or not scored: `iba score`): "
                    + "; ".join(r.label for r in self.rows_left_out) + ".")
            if len(self.rows_left_out) == len(self.rows):
                return "No task runs scored yet." + gone
        if not self.left_out:
            return f"All rows compared on the same {n} instance(s)." + gone
        counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for x in self.left_out:
            if x["why"] != "another row":
                counts[x["row"]][x["why"]] += 1
        total = len({(x["dataset"], x["instance_id"]) for x in self.left_out})
        parts = "; ".join(f"{row}: " + ", ".join(f"{c} {w}" for w, c in sorted(ws.items()))
                          for row, ws in counts.items())
        return (f"All rows compared on the same {n} instance(s); {total} left out for every row "
                f"({parts}; listed in left_out.csv).{gone}")

    def domains(self) -> list[str]:
        """Domains present, in the paper's order, then any others alphabetically."""
        present = {i.domain for i in self.instances}
        order = [d for d in self.domain_order if d in present]
        return order + sorted(present - set(order))

    def short(self, domain: str) -> str:
        return self.domain_short.get(domain, domain)

    def judge_scorers(self) -> list[str]:
        found = sorted({s.scorer for v in self.scores.values() for s in v if s.scorer.startswith("judge:")})
        if self.judges is not None:
            wanted = {j if j.startswith("judge:") else f"judge:{j}" for j in self.judges}
            found = [j for j in found if j in wanted]
        return found


def load_report_data(
    store_path: str | Path,
    dataset_dirs: Sequence[str | Path] = (),
    runs: Sequence[str] | None = None,
    judges: Sequence[str] | None = None,
    answer_keys: Sequence[str | Path] | None = None,
) -> ReportData:
    """`answer_keys`: held-back keys (`iba run --answer-key`), one per dataset directory, in order."""
    with Store(store_path) as store:
        names = list(runs) if runs else store.run_names()
        records = [r for name in names for r in store.runs(name)]
        scores: dict[str, list[ScoreRecord]] = defaultdict(list)
        wanted_keys = {r.key for r in records}
        for s in store.scores():
            if s.run_key in wanted_keys:
                scores[s.run_key].append(s)
        samples = store.samples()
        ingests = [i for name in names for i in store.ingests(name)]
    task_runs = [r for r in records if r.probe is None]
    qa_runs = [r for r in records if r.probe is not None]
    order, short = domain_names()
    data = ReportData(task_runs, qa_runs, dict(scores), judges=list(judges) if judges else None,
                      domain_order=order, domain_short=short, ingests=ingests,
                      samples={d: s for d, s in samples.items() if d in {r.dataset for r in records}})
    for i, d in enumerate(dataset_dirs):
        ds = Dataset(d, answer_key=answer_keys[i] if answer_keys else None)
        did = dataset_id(ds)
        data.datasets[did] = ds
        data.keys.update({(did, iid): key for iid, key in ds.answer_keys().items()})
        data.tasks.update({(did, t.instance_id): t for t in ds.instances})
    return data
