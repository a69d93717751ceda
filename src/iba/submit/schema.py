"""The submission file's contract (`iba-submission/1`), modelled on tau2-bench's submission.json:
who submits, which dataset (generator, version, seed, tell audit), which judges (and how they did on
the judge-check), and one entry per agent x model with its results per domain, pass^k, cost, and a
verification block saying whether prompts were modified or instances omitted.

Scores are x100 (as in the paper's tables), intervals are 95% percentile-bootstrap intervals over
instances. The validators check what a reader of the file relies on: flags that agree with their
lists, intervals that hold their score, pass^k exactly for k = 1..trials, and a submission that says
"standard" only when every entry ran the shipped prompts on every instance.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, model_validator

from iba.types import Strict

FORMAT = "iba-submission/1"
OVERALL = "overall"


class Contact(Strict):
    name: str | None = None
    email: str | None = None


class Reference(Strict):
    title: str
    url: str
    type: Literal["github", "paper", "huggingface", "blog", "other"] = "other"


class TellAudit(Strict):
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
    writer: str
    seed: int
    taxonomy_version: str
    created_by: str
    instances: int
    per_domain: dict[str, int]  # instances per domain
    tell_audit: TellAudit | None = None


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
    ci: tuple[float, float] | None = None  # 95% bootstrap interval x100
    n: int = Field(ge=0)  # instances scored

    @model_validator(mode="after")
    def _shape(self) -> "Result":
        if (self.score is None) != (self.n == 0):
            raise ValueError("score is null exactly when n is 0")
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
    ingest: IngestCost | None = None  # memory agents only
    usd: float | None = Field(default=None, ge=0)  # only when prices were given (`--usd-per-mtok`)
    usd_per_mtok: tuple[float, float] | None = None  # (prompt, completion) prices used


class Counts(Strict):
    instances: int = Field(ge=0)  # of the dataset
    run: int = Field(ge=0)  # instances with at least one stored trial
    ok: int = Field(ge=0)
    failed: int = Field(ge=0)  # the agent's own failures, scored 0
    errored: int = Field(ge=0)  # infrastructure faults, unscored
    unscored: int = Field(ge=0)  # run, but no score (judge replies unreadable, judge calls errored)


class Verification(Strict):
    modified_prompts: bool
    modified: list[str] = Field(default_factory=list)  # templates whose hash is not the shipped one
    omitted_instances: bool
    omitted: list[str] = Field(default_factory=list)  # instance ids without a score
    details: str = ""

    @model_validator(mode="after")
    def _flags(self) -> "Verification":
        if self.modified_prompts != bool(self.modified):
            raise ValueError("modified_prompts must be true exactly when `modified` lists templates")
        if self.omitted_instances != bool(self.omitted):
            raise ValueError("omitted_instances must be true exactly when `omitted` lists instances")
        return self


class Entry(Strict):
    agent: str  # the agent spec, e.g. "iba?btda=false"
    model: str
    run: str
    trials: int = Field(ge=1)
    results: dict[str, Result]  # "overall" and one per domain id
    pass_k: dict[str, float] | None = None  # "1".."trials" -> x100, when trials > 1
    counts: Counts
    cost: Cost
    verification: Verification
    prompt_hashes: dict[str, str] = Field(default_factory=dict)
    third_party: bool = False  # an external or memory agent (external?cmd=/url=, memory?cmd=/url=)
    sandboxed: bool | None = None  # for third-party agents: every record ran in the sandbox

    @model_validator(mode="after")
    def _shape(self) -> "Entry":
        if OVERALL not in self.results:
            raise ValueError(f"results needs an {OVERALL!r} entry")
        if self.results[OVERALL].n > self.counts.instances:
            raise ValueError("results.overall.n exceeds the dataset's instances")
        if self.trials > 1:
            want = {str(k) for k in range(1, self.trials + 1)}
            if self.pass_k is None or set(self.pass_k) != want:
                raise ValueError(f"pass_k needs exactly the keys {sorted(want, key=int)} for {self.trials} trials")
            values = [self.pass_k[str(k)] for k in range(1, self.trials + 1)]
            if any(not 0 <= v <= 100 for v in values) or any(b > a + 1e-9 for a, b in zip(values, values[1:])):
                raise ValueError("pass_k values must lie in [0, 100] and not grow with k")
        elif self.pass_k is not None:
            raise ValueError("pass_k only with trials > 1")
        omitted = self.counts.instances - self.results[OVERALL].n
        if omitted != len(self.verification.omitted):
            raise ValueError(f"verification.omitted lists {len(self.verification.omitted)} instances, but "
                             f"{omitted} of {self.counts.instances} have no score")
        return self


class Submission(Strict):
    format: Literal["iba-submission/1"] = FORMAT
    submission_date: str
    iba_version: str
    submission_type: Literal["standard", "custom"]
    submitter: Contact = Field(default_factory=Contact)
    organization: str | None = None
    dataset: DatasetInfo
    judges: list[Judge]
    entries: list[Entry] = Field(min_length=1)
    references: list[Reference] = Field(default_factory=list)
    notes: str = ""

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
            unknown = set(e.results) - {OVERALL} - set(self.dataset.per_domain)
            if unknown:
                raise ValueError(f"entry {e.agent} ({e.model}): results for domains not in the dataset: {sorted(unknown)}")
        custom = [e for e in self.entries if e.verification.modified_prompts or e.verification.omitted_instances
                  or e.third_party]
        if self.submission_type == "standard" and custom:
            e = custom[0]
            raise ValueError(f"submission_type 'standard' but entry {e.agent} ({e.model}) modified prompts, omitted "
                             "instances or ran a third-party agent: use 'custom' and say why in notes")
        if self.submission_type == "custom" and not self.notes.strip():
            raise ValueError("a custom submission says in notes what differs from the standard protocol")
        return self


def problems(obj: Any) -> list[str]:
    """Every schema problem of a parsed JSON object, as 'field.path: message' lines."""
    from pydantic import ValidationError

    try:
        Submission.model_validate(obj)
    except ValidationError as e:
        return [f"{'.'.join(str(x) for x in err['loc']) or '(file)'}: {err['msg'].removeprefix('Value error, ')}"
                for err in e.errors()]
    return []
