"""The submission file's contract (`iba-submission/2`), modelled on tau2-bench's submission.json:
who submits, which dataset (generator and its version, seed, tell audit and feature audit), which
judges (and how they did on the judge-check), and one entry per agent x model with its sample,
its per-instance results (every trial's verdicts, tokens and wall time) and the aggregates that
follow from them: results per domain, pass^k, cost, and a verification block saying whether
prompts were modified or instances omitted.

Scores are x100 (as in the paper's tables) in the aggregates, in [0, 1] per trial; intervals are
95% percentile-bootstrap intervals over instances, absent where n < 2 (one instance has no
interval: its `note` says so). The validators here check the shape a reader relies on; whether the
aggregates follow from the per-instance results is iba.submit.recompute's (`iba submit validate`
runs both).

An entry is built so that later fields can join it as optional ones without breaking older
files: a sampling spec and seed beside `sample.ids`, a `reference` flag for reference rows, an
ingest/act split of `cost`.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, model_validator

from iba.types import Strict

FORMAT = "iba-submission/2"
OVERALL = "overall"
INTERVALS = ("95% percentile bootstrap over the instances' scores (2000 resamples, seed 0, instances in id order); "
             "null where n < 2")
SINGLE = "n=1: a single instance has no interval"


class Contact(Strict):
    name: str | None = None
    email: str | None = None


class Reference(Strict):
    title: str
    url: str
    type: Literal["github", "paper", "huggingface", "blog", "other"] = "other"


class TellAudit(Strict):
    """The tell audit (README): can a lexical TF-IDF classifier, trained on some personas' user
    turns and tested on others', find the evidence? `run` False says why not (too small a dataset,
    no scikit-learn, not asked for)."""

    run: bool
    reason: str | None = None  # why it was not run
    train_personas: int | None = None
    test_personas: int | None = None
    test_user_turns: int | None = None
    test_evidence_turns: int | None = None
    precision_at_n: float | None = None  # of the N turns ranked highest, the share that are evidence
    evidence_share: float | None = None  # what a random ranking gets
    auc_evidence_vs_distractors: float | None = None  # None: the dataset has no distractor labels
    auc_evidence_vs_rest: float | None = None
    seed: int | None = None

    @model_validator(mode="after")
    def _shape(self) -> "TellAudit":
        if self.run and self.precision_at_n is None:
            raise ValueError("a tell audit that was run states its precision_at_n")
        if not self.run and not self.reason:
            raise ValueError("a tell audit that was not run says why (reason)")
        return self


class FeatureAudit(Strict):
    """How well one surface feature of a user turn locates the evidence (max(AUC, 1-AUC); 0.5 = not at all)."""

    auc: dict[str, float]
    limit: float
    evidence_turns: int
    noise_user_turns: int


class DatasetInfo(Strict):
    name: str
    id: str  # name@manifest-hash: the runner's dataset id, in every run key
    format: str
    generator: str
    generator_version: int | None = None  # manifest params.generator_version (None: imports, older builds)
    writer: str
    seed: int
    taxonomy_version: str
    created_by: str
    instances: int
    per_domain: dict[str, int]  # instances per domain
    tell_audit: TellAudit | None = None
    feature_audit: FeatureAudit | None = None


class JudgeCheck(Strict):
    accuracy: float | None
    violation_pass_rate: float | None  # the false-pass rate on known violations
    compliant_pass_rate: float | None
    n: int
    case_set_hash: str
    prompt_hash: str
    warnings: list[str] = Field(default_factory=list)


class Judge(Strict):
    model: str
    repeats: int = Field(ge=1)
    judge_check: JudgeCheck | None = None  # None: never calibrated (`iba judge-check MODEL --store STORE`)


class Result(Strict):
    score: float | None = Field(default=None, ge=0, le=100)  # mean instance score x100; None: nothing scored
    ci: tuple[float, float] | None = None  # 95% bootstrap interval x100; None where n < 2
    n: int = Field(ge=0)  # instances scored
    note: str | None = None  # n=1: says that there is no interval

    @model_validator(mode="after")
    def _shape(self) -> "Result":
        if (self.score is None) != (self.n == 0):
            raise ValueError("score is null exactly when n is 0")
        if self.n == 1 and (self.ci is not None or self.note != SINGLE):
            raise ValueError(f"n=1 has no interval: ci is null and note is {SINGLE!r}")
        if self.n >= 2 and self.ci is None:
            raise ValueError("n >= 2 needs its interval (ci)")
        if self.ci is not None:
            lo, hi = self.ci
            if self.score is None or not (0 <= lo <= self.score + 1e-6 and self.score - 1e-6 <= hi <= 100):
                raise ValueError(f"ci {list(self.ci)} does not hold the score {self.score}")
        return self


class Usage(Strict):
    llm_calls: int = Field(ge=0)
    prompt_tokens: int = Field(ge=0)
    completion_tokens: int = Field(ge=0)


class IngestCost(Strict):
    """A memory agent's remembering (memory?cmd=/url=), apart from its acts (Cost.agent)."""

    users: int = Field(ge=0)  # user histories ingested (x trials)
    sessions: int = Field(ge=0)  # sessions sent
    llm_calls: int = Field(ge=0)  # as the memory reported them in its replies
    prompt_tokens: int = Field(ge=0)
    completion_tokens: int = Field(ge=0)
    wall_s: float = Field(ge=0)  # summed over users, as iba measured it
    attempts: int = Field(ge=0)  # ingests made, lost sessions' included (= users when none was lost)


class Cost(Strict):
    agent: Usage  # for a memory agent: its acts
    judges: Usage
    wall_s: float = Field(ge=0)  # the agent's wall time, summed over every trial
    ingest: IngestCost | None = None  # memory agents only: what remembering cost, apart from the acts
    usd: float | None = Field(default=None, ge=0)  # only when prices were given (`--usd-per-mtok`)
    usd_per_mtok: tuple[float, float] | None = None  # (prompt, completion) prices used


class Counts(Strict):
    instances: int = Field(ge=0)  # of the dataset
    sample: int = Field(ge=0)  # of the sample the entry was run on
    run: int = Field(ge=0)  # instances with at least one stored trial
    ok: int = Field(ge=0)
    failed: int = Field(ge=0)  # the agent's own failures, scored 0
    errored: int = Field(ge=0)  # infrastructure faults, unscored
    unscored: int = Field(ge=0)  # run, but no score (judge replies unreadable, judge calls errored)


class Sample(Strict):
    """Which instances the numbers come from: the whole dataset, or a subset named by its ids."""

    kind: Literal["full", "subset"]
    instances: int = Field(ge=0)
    ids: list[str] | None = None  # subset: every instance id of the sample, sorted

    @model_validator(mode="after")
    def _shape(self) -> "Sample":
        if self.kind == "subset" and (self.ids is None or len(self.ids) != self.instances):
            raise ValueError("a subset sample lists its instance ids, as many as `instances`")
        if self.kind == "full" and self.ids is not None:
            raise ValueError("a full sample lists no ids (it is every instance of the dataset)")
        if self.ids is not None and len(set(self.ids)) != len(self.ids):
            raise ValueError("sample.ids names an instance twice")
        return self


class Verification(Strict):
    modified_prompts: bool
    modified: list[str] = Field(default_factory=list)  # templates whose hash is not the shipped one
    omitted_instances: bool
    omitted: list[str] = Field(default_factory=list)  # instance ids of the sample without a score
    details: str = ""

    @model_validator(mode="after")
    def _flags(self) -> "Verification":
        if self.modified_prompts != bool(self.modified):
            raise ValueError("modified_prompts must be true exactly when `modified` lists templates")
        if self.omitted_instances != bool(self.omitted):
            raise ValueError("omitted_instances must be true exactly when `omitted` lists instances")
        return self


class ScorerResult(Strict):
    """One scorer's pass over one trial (a ScoreRecord): its verdict per target, its score."""

    scorer: str  # "slots", "judge:<model>", "verifiers"
    repeat: int = Field(0, ge=0)
    score: float | None = Field(ge=0, le=1)  # mean of the scored verdicts; 0 for an agent failure without targets
    verdicts: dict[str, bool | None]  # checkpoint or slot id -> passed (None: unscored)
    failure: str | None = None  # why the agent's failure scored 0
    errored: bool = False  # a judge call failed: unscored until judged again
    usage: Usage | None = None  # the judge's tokens


class InstanceResult(Strict):
    """One trial of one instance, as stored: what the agent's action scored and what it cost."""

    instance_id: str
    domain: str
    action: Literal["generate", "call_api"]
    trial: int = Field(ge=0)
    status: Literal["ok", "failed", "errored"]
    score: float | None = Field(ge=0, le=1)  # the trial score (iba.eval.aggregate.instance_score)
    scores: list[ScorerResult]
    usage: Usage  # the agent's
    wall_s: float = Field(ge=0)


class Entry(Strict):
    agent: str  # the agent spec, e.g. "iba?btda=false"
    model: str  # the run's --model; an external agent uses its own (third_party)
    run: str
    trials: int = Field(ge=1)
    sample: Sample
    results: dict[str, Result]  # "overall" and one per domain id
    # "1".."K" -> x100, tau-bench's unbiased pass^k = mean over instances of C(c, k) / C(n, k) (n scored
    # trials, c of them scoring 1.0), for k up to the fewest scored trials of an instance; trials > 1 only
    pass_k: dict[str, float] | None = None
    counts: Counts
    cost: Cost
    verification: Verification
    prompt_hashes: dict[str, str] = Field(default_factory=dict)
    third_party: bool = False  # an external or memory agent (external?cmd=/url=, memory?cmd=/url=)
    sandboxed: bool | None = None  # for third-party agents: every record ran in the sandbox
    instances: list[InstanceResult]  # every stored trial: what every aggregate above is computed from
    # a reference row computed by the harness, not a system: null (the direct prompt with no history),
    # direct (the full context: the most recent turns that fit the context window), oracle (only the
    # instance's gold evidence turns)
    reference: bool = False
    reference_kind: Literal["null", "direct", "oracle"] | None = None

    @model_validator(mode="after")
    def _shape(self) -> "Entry":
        if self.reference != (self.reference_kind is not None):
            raise ValueError("reference is true exactly when reference_kind names the reference (null, direct, oracle)")
        if OVERALL not in self.results:
            raise ValueError(f"results needs an {OVERALL!r} entry")
        if self.results[OVERALL].n > self.counts.sample:
            raise ValueError("results.overall.n exceeds the sample's instances")
        if self.counts.sample != self.sample.instances:
            raise ValueError(f"counts.sample {self.counts.sample} is not sample.instances {self.sample.instances}")
        if self.pass_k is not None:
            if self.trials < 2:
                raise ValueError("pass_k only with trials > 1")
            keys = sorted(self.pass_k, key=lambda k: int(k) if k.isdigit() else -1)
            if keys != [str(k) for k in range(1, len(keys) + 1)] or len(keys) > self.trials:
                raise ValueError(f"pass_k needs the keys 1..K with K <= trials ({self.trials}), got {keys}")
            values = [self.pass_k[k] for k in keys]
            if any(not 0 <= v <= 100 for v in values) or any(b > a + 1e-9 for a, b in zip(values, values[1:])):
                raise ValueError("pass_k values must lie in [0, 100] and not grow with k")
        omitted = self.counts.sample - self.results[OVERALL].n
        if omitted != len(self.verification.omitted):
            raise ValueError(f"verification.omitted lists {len(self.verification.omitted)} instances, but "
                             f"{omitted} of the sample's {self.counts.sample} have no score")
        return self


class SampleInfo(Strict):
    """The stratified sample the entries ran on (`iba run --sample N --sample-seed S`): two
    submissions on the same sample have the same instance_ids_sha (sha256 of the sorted ids)."""

    n: int = Field(ge=0)  # instances drawn
    seed: int
    strata: list[str]
    instance_ids_sha: str
    pool: int = Field(ge=0)  # instances drawn from (the dataset, or its --domain/--scenario part)
    filters: dict[str, list[str]] = Field(default_factory=dict)


class Submission(Strict):
    format: Literal["iba-submission/2"] = FORMAT
    submission_date: str
    iba_version: str
    submission_type: Literal["standard", "custom"]
    submitter: Contact = Field(default_factory=Contact)
    organization: str | None = None
    dataset: DatasetInfo
    judges: list[Judge]
    intervals: str = INTERVALS
    entries: list[Entry] = Field(min_length=1)
    references: list[Reference] = Field(default_factory=list)
    notes: str = ""
    sample: SampleInfo | None = None  # None: no sample was recorded (see entries' counts for what ran)

    @model_validator(mode="after")
    def _consistent(self) -> "Submission":
        if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", self.submission_date):
            raise ValueError(f"submission_date {self.submission_date!r} is not YYYY-MM-DD")
        seen = set()
        for e in self.entries:
            key = (e.agent, e.model, e.run)
            if key in seen:
                raise ValueError(f"entry {key} appears twice")
            seen.add(key)
            if e.counts.instances != self.dataset.instances:
                raise ValueError(f"entry {e.agent} ({e.model}): counts.instances {e.counts.instances} is not the "
                                 f"dataset's {self.dataset.instances}")
            if e.sample.kind == "full" and e.sample.instances != self.dataset.instances:
                raise ValueError(f"entry {e.agent} ({e.model}): a full sample has the dataset's "
                                 f"{self.dataset.instances} instances, not {e.sample.instances}")
            if self.sample is not None and e.results[OVERALL].n > self.sample.n:
                raise ValueError(f"entry {e.agent} ({e.model}): {e.results[OVERALL].n} instances scored, more than "
                                 f"the sample's {self.sample.n}")
            unknown = set(e.results) - {OVERALL} - set(self.dataset.per_domain)
            if unknown:
                raise ValueError(f"entry {e.agent} ({e.model}): results for domains not in the dataset: {sorted(unknown)}")
        custom = [e for e in self.entries if e.verification.modified_prompts or e.verification.omitted_instances
                  or e.third_party or e.sample.kind != "full"]
        if self.submission_type == "standard" and custom:
            e = custom[0]
            raise ValueError(f"submission_type 'standard' but entry {e.agent} ({e.model}) modified prompts, omitted "
                             "instances, ran a third-party agent or a subset: use 'custom' and say why in notes")
        if self.submission_type == "custom" and not self.notes.strip():
            raise ValueError("a custom submission says in notes what differs from the standard protocol")
        return self


def problems(obj: Any) -> list[str]:
    """Every schema problem of a parsed JSON object, as 'field.path: message' lines (an older
    format is named as such: its files cannot be checked against their per-instance results)."""
    from pydantic import ValidationError

    if isinstance(obj, dict) and obj.get("format") == "iba-submission/1":
        return ["format: iba-submission/1 (an older iba) has no per-instance results, so its aggregates cannot be "
                f"checked; prepare the file again with this iba (`iba submit prepare`) to get {FORMAT}"]
    try:
        Submission.model_validate(obj)
    except ValidationError as e:
        return [f"{'.'.join(str(x) for x in err['loc']) or '(file)'}: {err['msg'].removeprefix('Value error, ')}"
                for err in e.errors()]
    return []
