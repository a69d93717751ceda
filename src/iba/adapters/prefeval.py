"""Import PrefEval (Zhao et al., ICLR 2025) as a standard IBA dataset.

One user per PrefEval item: the preference-revealing turns (explicit statement, choice
conversation or persona conversation) are one session placed among `filler_turns` messages drawn
from PrefEval's unrelated conversations; the item's question is the Generate(text) task. The
answer key holds the gold evidence turn ids, four judge checkpoints (PrefEval's error types in
our wording, see prompts/prefeval_checkpoint.jinja) and the MCQ options as a QA probe.

Determinism: every random choice draws from its own stream seeded by (seed, topic, index, purpose),
so an item's filler does not depend on the form, the position or which other topics are imported,
and the filler of N=10 is a prefix of the filler of N=100.
"""

from __future__ import annotations

import random
import shutil
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

from iba import __version__
from iba.adapters.prefeval_locate import MIN_MARGIN, MIN_SCORE, locate_preference
from iba.adapters.prefeval_source import (
    ChoiceItem,
    ExplicitItem,
    FillerMessage,
    McqItem,
    PersonaItem,
    PrefEvalError,
    check_root,
    load_filler,
    load_items,
    load_mcq,
    resolve_topics,
)
from iba.dataset import dump_json, write_dataset
from iba.prompts import render, template_hash
from iba.types import (
    AnswerKey,
    Checkpoint,
    EvidenceLabel,
    Manifest,
    Persona,
    QAProbe,
    SignalType,
    TaskView,
    Turn,
    stable_hash,
)

POSITIONS: tuple[str, ...] = ("start", "middle", "random")
DOMAIN = "prefeval"
# PrefEval's four error types -> the checkpoint's dimension name; order = checkpoint order
ERROR_TYPES: dict[str, str] = {
    "unaware": "Preference-unaware violation",
    "hallucinated": "Hallucinated preference violation",
    "inconsistent": "Inconsistent preference following",
    "unhelpful": "Unhelpful response",
}
CHECKPOINT_TEMPLATE = "prefeval_checkpoint"
# PrefEval's explicit form has no assistant reply; ours is written by us and its id says so
SYNTHETIC_ACK = "Thanks for letting me know. I'll keep that in mind."
SYNTHETIC_SUFFIX = "-synthetic"
SIGNALS: dict[str, SignalType] = {
    "explicit": "direct_statement",
    "choice": "implicit_pattern",  # revealed by choosing among options
    "persona": "direct_statement",  # stated in passing
}
_BASE_TIME = datetime(2024, 1, 1, 9, 0, tzinfo=timezone.utc)
_TURN_GAP = timedelta(minutes=2)
REPORT_FILE = "import_report.json"


def _rng(seed: int, *parts: object) -> random.Random:
    return random.Random(int(stable_hash([seed, *parts]), 16))


@dataclass
class _Block:
    """The preference session before it gets ids: (role, text, synthetic) and evidence indexes."""

    turns: list[tuple[str, str, bool]]
    evidence: list[int]
    unlocated: str = ""  # why the stating turn was not found (persona form)
    locator: dict[str, float] = field(default_factory=dict)


def _preference_block(form: str, item: ExplicitItem, synthetic_ack: bool) -> _Block:
    if isinstance(item, ChoiceItem):
        c = item.conversation
        turns = [("user", c.query, False), ("assistant", c.assistant_options, False), ("user", c.user_selection, False)]
        if c.assistant_acknowledgment.strip():
            turns.append(("assistant", c.assistant_acknowledgment, False))
        return _Block(turns, evidence=[2])  # the user's choice is what reveals the preference
    if isinstance(item, PersonaItem):
        turns, user_pos = [], []
        for _, ex in item.exchanges():
            user_pos.append(len(turns))
            turns.append(("user", ex.user, False))
            if ex.assistant.strip():
                turns.append(("assistant", ex.assistant, False))
        loc = locate_preference(item.preference, [turns[p][1] for p in user_pos])
        info = {"score": round(loc.score, 3), "runner_up": round(loc.runner_up, 3)}
        if loc.index is None:
            return _Block(turns, evidence=[], unlocated=loc.reason, locator=info)
        return _Block(turns, evidence=[user_pos[loc.index]], locator=info)
    turns = [("user", item.preference, False)]
    if synthetic_ack:
        turns.append(("assistant", SYNTHETIC_ACK, True))
    return _Block(turns, evidence=[0])


def _filler_sessions(filler: list[list[FillerMessage]], n: int, rng: random.Random) -> list[list[FillerMessage]]:
    """`n` messages as whole conversations in a seeded order; the last one is cut to fit.

    More than the pool holds cycles through it again (reshuffled), so any N works.
    """
    if n <= 0:
        return []
    pool = [[m for m in conv if m.content.strip()] for conv in filler]
    pool = [c for c in pool if c]
    if not pool:
        raise PrefEvalError("the filler file has no non-empty messages")
    sessions: list[list[FillerMessage]] = []
    left = n
    while left > 0:
        order = list(range(len(pool)))
        rng.shuffle(order)
        for ci in order:
            take = pool[ci][:left]
            sessions.append(take)
            left -= len(take)
            if left <= 0:
                break
    return sessions


def _insert_index(sessions: list[list[FillerMessage]], position: str, rng: random.Random) -> int:
    """Where the preference session goes among the filler sessions (never inside one)."""
    if position == "start" or not sessions:
        return 0
    if position == "random":
        return rng.randint(0, len(sessions))
    half = sum(len(s) for s in sessions) / 2
    cum, best, best_gap = 0, 0, half
    for i, s in enumerate(sessions):
        cum += len(s)
        if abs(cum - half) < best_gap:
            best, best_gap = i + 1, abs(cum - half)
    return best


def _mcq_for(mcq: list[McqItem] | None, index: int, item: ExplicitItem) -> McqItem | None:
    # the files are parallel lists; the question check guards against a reordered file
    if mcq is None:
        return None
    if index < len(mcq) and mcq[index].question.strip() == item.question.strip():
        return mcq[index]
    return next((m for m in mcq if m.question.strip() == item.question.strip()), None)


def _checkpoints(instance_id: str, item: ExplicitItem, evidence: list[str]) -> list[Checkpoint]:
    out = []
    for error, name in ERROR_TYPES.items():
        text = render(
            CHECKPOINT_TEMPLATE, error=error, preference=item.preference.strip(), explanation=item.explanation.strip()
        ).messages[-1]["content"]
        out.append(
            Checkpoint(
                id=f"{instance_id}-cp-{error}",
                dimension=error,
                dimension_name=name,
                value=item.preference.strip(),
                expected=text,
                kind="static",
                evidence=[] if error == "unhelpful" else list(evidence),
            )
        )
    return out


def _history(user_id: str, sessions: list[list[tuple[str, str, bool]]], at: int, block: _Block) -> tuple[list[Turn], list[str], str]:
    """Turns with stable ids and increasing timestamps (one day per session), the evidence ids
    and the request time (the day after the last session)."""
    turns: list[Turn] = []
    evidence: list[str] = []
    for k, sess in enumerate(sessions):
        sid = f"{user_id}-s{k:03d}"
        start = _BASE_TIME + timedelta(days=k)
        for j, (role, text, synthetic) in enumerate(sess):
            tid = f"{sid}-t{j:02d}" + (SYNTHETIC_SUFFIX if synthetic else "")
            turns.append(Turn(id=tid, session_id=sid, timestamp=(start + j * _TURN_GAP).isoformat(), role=role, text=text))  # type: ignore[arg-type]
            if k == at and j in block.evidence:
                evidence.append(tid)
    return turns, evidence, (_BASE_TIME + timedelta(days=len(sessions))).isoformat()


def _qa_probe(instance_id: str, target: str, item: ExplicitItem, m: McqItem, rng: random.Random) -> QAProbe:
    order = list(range(len(m.classification_task_options)))
    rng.shuffle(order)
    return QAProbe(
        id=f"{instance_id}-qa",
        target=target,
        question=item.question.strip(),
        options=[m.classification_task_options[i] for i in order],
        answer=order.index(0),  # PrefEval lists the preference-following option first
    )


@dataclass
class _Instance:
    persona: Persona
    turns: list[Turn]
    view: TaskView
    key: AnswerKey
    report: dict[str, object]


def _instance(
    form: str,
    topic: str,
    index: int,
    item: ExplicitItem,
    mcq: list[McqItem] | None,
    filler: list[list[FillerMessage]],
    filler_turns: int,
    position: str,
    seed: int,
    synthetic_ack: bool,
) -> _Instance:
    user_id = f"pe-{form}-{topic}-{index:03d}"
    instance_id = f"{user_id}-q"
    block = _preference_block(form, item, synthetic_ack)
    filler_s = _filler_sessions(filler, filler_turns, _rng(seed, topic, index, "filler"))
    at = _insert_index(filler_s, position, _rng(seed, topic, index, "position"))
    sessions = [[(m.role, m.content, False) for m in s] for s in filler_s]
    sessions.insert(at, block.turns)
    turns, evidence_ids, now = _history(user_id, sessions, at, block)
    stamps = {t.id: t.timestamp for t in turns}
    preference = item.preference.strip()
    checkpoints = _checkpoints(instance_id, item, evidence_ids)
    m = _mcq_for(mcq, index, item)
    qa = [] if m is None else [_qa_probe(instance_id, checkpoints[0].id, item, m, _rng(seed, topic, index, "mcq"))]
    labels = [
        EvidenceLabel(turn_id=t, signal_type=SIGNALS[form], dimension="preference", value=preference, timestamp=stamps[t])
        for t in evidence_ids
    ]
    return _Instance(
        persona=Persona(
            id=user_id,
            name=f"PrefEval {topic} #{index}",
            background={"source": "PrefEval", "topic": topic, "form": form},
            traits=[],
            role=getattr(item, "persona", "") or "PrefEval user",
        ),
        turns=turns,
        view=TaskView(
            instance_id=instance_id,
            user_id=user_id,
            domain=DOMAIN,
            scenario=topic,
            scenario_name=topic.replace("_", " "),
            query=item.question.strip(),
            action="generate",
            now=now,
        ),
        key=AnswerKey(instance_id=instance_id, checkpoints=checkpoints, evidence=labels, qa=qa),
        report={
            "instance_id": instance_id,
            "topic": topic,
            "index": index,
            "evidence": evidence_ids,
            "unlocated": block.unlocated or None,
            "locator": block.locator or None,
            "mcq": m is not None,
            "preference_session": at,
            "sessions": len(sessions),
        },
    )


def _prepare_out(out_dir: Path) -> None:
    """Refuse to write into a folder that holds something else; clear a previous import's files."""
    if out_dir.exists() and any(out_dir.iterdir()):
        if not (out_dir / "manifest.json").exists():
            raise PrefEvalError(f"{out_dir}: exists and is not an IBA dataset; choose an empty or new --out folder")
        (out_dir / "manifest.json").unlink()  # first, so a crash below never leaves a mixed dataset
        shutil.rmtree(out_dir / "histories", ignore_errors=True)
        (out_dir / "stats.json").unlink(missing_ok=True)  # described the previous import


def import_prefeval(
    prefeval_dir: str | Path,
    out_dir: str | Path,
    *,
    topics: list[str] | None = None,
    form: str = "explicit",
    filler_turns: int = 300,
    position: str = "start",
    seed: int = 42,
    synthetic_ack: bool = True,
    limit: int | None = None,
) -> Manifest:
    """Convert a PrefEval folder into an IBA dataset at `out_dir` and return its manifest.

    `limit` keeps the first N items of each topic (for quick runs). Also writes
    `import_report.json` (per instance: evidence located or why not, MCQ found).
    """
    root = check_root(Path(prefeval_dir))
    out = Path(out_dir)
    if position not in POSITIONS:
        raise PrefEvalError(f"unknown position {position!r}; choose from: {', '.join(POSITIONS)}")
    if limit is not None and limit < 1:
        raise PrefEvalError(f"limit must be >= 1, got {limit}")
    if filler_turns < 0:
        raise PrefEvalError(f"filler_turns must be >= 0, got {filler_turns}")
    chosen = resolve_topics(root, form, topics)
    filler = load_filler(root) if filler_turns > 0 else []

    built: list[_Instance] = []
    for topic in chosen:
        mcq = load_mcq(root, topic)
        for index, item in enumerate(load_items(root, form, topic)[:limit]):
            built.append(_instance(form, topic, index, item, mcq, filler, filler_turns, position, seed, synthetic_ack))
    report = [b.report for b in built]
    synthetic_ids = [t.id for b in built for t in b.turns if t.id.endswith(SYNTHETIC_SUFFIX)]
    personas = [b.persona for b in built]
    histories = {b.persona.id: b.turns for b in built}
    views = [b.view for b in built]
    keys = [b.key for b in built]
    n_mcq_missing = sum(1 for b in built if not b.key.qa)

    unlocated = [r["instance_id"] for r in report if r["unlocated"]]
    counts = {
        "topics": len(chosen),
        "users": len(personas),
        "instances": len(views),
        "turns": sum(len(t) for t in histories.values()),
        "checkpoints": sum(len(k.checkpoints) for k in keys),
        "qa_probes": sum(len(k.qa) for k in keys),
        "evidence_located": len(views) - len(unlocated),
        "evidence_unlocated": len(unlocated),
        "mcq_missing": n_mcq_missing,
        "synthetic_turns": len(synthetic_ids),
    }
    manifest = Manifest(
        name=out.name,
        generator="iba.adapters.prefeval",
        writer="external:prefeval",
        seed=seed,
        taxonomy_version="prefeval",
        created_by=__version__,
        counts=counts,
        params={
            "source": "PrefEval benchmark_dataset (CC BY-NC 4.0)",
            "prefeval_dir": str(root),
            "form": form,
            "topics": chosen,
            "filler_turns": filler_turns,
            "limit_per_topic": limit,
            "position": position,
            "synthetic_ack": synthetic_ack,
            "synthetic_turn_suffix": SYNTHETIC_SUFFIX,
            "checkpoint_template": CHECKPOINT_TEMPLATE,
            "checkpoint_template_hash": template_hash(CHECKPOINT_TEMPLATE),
            "locator": {"method": "lexical overlap + cue bonus", "min_score": MIN_SCORE, "min_margin": MIN_MARGIN},
            "evidence_unlocated_instances": unlocated,
        },
    )
    _prepare_out(out)
    dump_json(out / REPORT_FILE, {"counts": counts, "synthetic_turn_ids": synthetic_ids, "instances": report})
    write_dataset(out, manifest, personas, histories, views, keys)
    return manifest
