"""The dataset checks before a run: every file's records parse, instances name known users and
scenarios, keys and labels cite turns of their users' histories with spans that fit, and (for
memory agents) every task comes after its history."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from iba.dataset.files import PERSONA_STATES, DatasetError, instant, problem_list, read_jsonl_lines
from iba.types.dataset import AnswerKey, DistractorLabel, Persona, TaskView, Turn

if TYPE_CHECKING:
    from iba.dataset.folder import Dataset


def check(ds: Dataset, instances: Iterable[TaskView] | None = None, *, answer_key: bool = True) -> list[str]:
    """Check the dataset before any agent runs; raise DatasetError listing every problem found.

    All files' records must parse; every instance's user must be a persona and its scenario
    known (against the shipped taxonomy when the dataset was built from it). For `instances`
    (default: all), each user's history must be readable and valid, and with `answer_key` each
    instance must have an answer key whose evidence turn ids are in that user's history.
    Returns the warnings (repairs made while reading).
    """
    problems: list[str] = []
    try:
        ds.manifest
    except DatasetError as e:
        problems.append(str(e))
    all_tasks = ds.instances  # nothing else can be checked without them: raise as is
    try:
        personas = ds.personas
    except DatasetError as e:
        problems.append(str(e))
        personas = None
    inst = ds.root / "instances.jsonl"
    if personas is not None:
        for t in all_tasks:
            if t.user_id not in personas:
                problems.append(f"{inst}:{ds.line('instances.jsonl', t.instance_id)}: instance "
                                f"{t.instance_id!r}: unknown user {t.user_id!r} (not in personas.jsonl)")
    problems += _check_scenarios(ds, all_tasks)
    tasks = all_tasks if instances is None else list(instances)

    turn_ids: dict[str, dict[str, str] | None] = {}  # user -> turn id -> text
    for user in dict.fromkeys(t.user_id for t in tasks):
        try:
            turn_ids[user] = {turn.id: turn.text for turn in ds.history(user)}
        except DatasetError as e:
            problems.append(str(e))
            turn_ids[user] = None

    if answer_key:
        try:
            keys = ds.answer_keys()
        except DatasetError as e:
            problems.append(str(e))
            keys = None
        if keys is not None:
            problems += _check_keys(ds, tasks, keys, turn_ids)
            problems += _check_distractors(ds, turn_ids)
            problems += _check_persona_states(ds, personas)
            known = {t.instance_id for t in all_tasks}
            extra = [k for k in keys if k not in known]
            if extra:
                ds.warn(f"{ds.answer_key_path}: {len(extra)} answer key(s) for instances not in "
                           f"instances.jsonl (first: {extra[0]!r} on line {ds.line('answer_key.jsonl', extra[0])})")
    if problems:
        raise problem_list(f"dataset {ds.root} failed its check ({len(problems)} problem"
                        f"{'s' if len(problems) > 1 else ''})", problems)
    return list(ds.warnings)

def tasks_after_history(ds: Dataset, tasks: Iterable[TaskView]) -> None:
    """DatasetError, naming each instance, unless every task's `now` comes after the last turn of
    its user's history (the builder writes them so). A memory agent ingests the whole history
    before it acts: a task dated inside the history would let it remember its own future."""
    problems: list[str] = []
    inst = ds.root / "instances.jsonl"
    last: dict[str, Turn | None] = {}
    for t in tasks:
        if t.user_id not in last:
            turns = ds.history(t.user_id)
            last[t.user_id] = turns[-1] if turns else None
        turn = last[t.user_id]
        now = instant(t.now)
        where = f"{inst}:{ds.line('instances.jsonl', t.instance_id)}: instance {t.instance_id!r}"
        if now is None:
            problems.append(f"{where}: now {t.now!r} is not ISO 8601")
        elif turn is not None and now <= (instant(turn.timestamp) or now):
            problems.append(f"{where}: now {t.now} is not after the last turn of {t.user_id}'s history "
                            f"({turn.id}, {turn.timestamp})")
    if problems:
        raise problem_list(f"dataset {ds.root}: {len(problems)} task(s) come before the end of their user's "
                        "history, so a memory agent, which ingests the whole history first, cannot be run on them",
                        problems)

def _check_scenarios(ds: Dataset, tasks: list[TaskView]) -> list[str]:
    """Scenario ids against the shipped taxonomy, when this dataset was built from that version.
    Imported datasets (e.g. PrefEval) have their own scenario ids: nothing to check them against."""
    from iba.taxonomy import load_taxonomy

    version = ds.manifest.taxonomy_version if "manifest" in vars(ds) else None
    if version is None or not version.startswith("iba-taxonomy/"):
        return []
    taxonomy = load_taxonomy()
    if version != taxonomy.version:
        ds.warn(f"{ds.root / 'manifest.json'}: built with taxonomy {version}, not the installed "
                   f"{taxonomy.version}; scenario ids not checked")
        return []
    domains = {s.id: s.domain for s in taxonomy.scenarios()}
    out = []
    inst = ds.root / "instances.jsonl"
    for t in tasks:
        where = f"{inst}:{ds.line('instances.jsonl', t.instance_id)}: instance {t.instance_id!r}"
        if t.scenario not in domains:
            out.append(f"{where}: unknown scenario {t.scenario!r} (not in taxonomy {version}; "
                       "`iba taxonomy` lists them)")
        elif t.domain != domains[t.scenario]:
            out.append(f"{where}: scenario {t.scenario!r} is in domain {domains[t.scenario]!r}, not {t.domain!r}")
    return out

def _check_keys(ds: Dataset, tasks: list[TaskView], keys: dict[str, AnswerKey],
                turn_ids: dict[str, dict[str, str] | None]) -> list[str]:
    out = []
    path = ds.answer_key_path
    for t in tasks:
        key = keys.get(t.instance_id)
        if key is None:
            out.append(f"{path}: no answer key for instance {t.instance_id!r} "
                       f"(instances.jsonl:{ds.line('instances.jsonl', t.instance_id)})")
            continue
        ids = turn_ids.get(t.user_id)
        if ids is None:  # the history itself is broken: already reported
            continue
        refs = ([(f"checkpoint {c.id!r}", e) for c in key.checkpoints for e in c.evidence]
                + [(f"slot {s.id!r}", e) for s in key.slots for e in s.evidence]
                + [("evidence", e.turn_id) for e in key.evidence])
        for what, turn_id in refs:
            if turn_id not in ids:
                out.append(f"{path}:{ds.line('answer_key.jsonl', t.instance_id)}: {what} of instance "
                           f"{t.instance_id!r} cites turn {turn_id!r}, which is not in histories/{t.user_id}.jsonl")
        for e in key.evidence:
            problem = _span_problem(e.span, e.clause, ids.get(e.turn_id))
            if problem:
                out.append(f"{path}:{ds.line('answer_key.jsonl', t.instance_id)}: evidence span of instance "
                           f"{t.instance_id!r} on turn {e.turn_id!r} ({e.dimension}): {problem}")
    return out

def _check_distractors(ds: Dataset, turn_ids: dict[str, dict[str, str] | None]) -> list[str]:
    """Distractor labels of the checked users must cite their turns, with spans that fit."""
    path = ds.distractors_path
    if not path.exists():
        return []
    out = []
    try:
        labels = list(read_jsonl_lines(path, DistractorLabel))
    except DatasetError as e:
        return [str(e)]
    for lineno, d in labels:
        if d.user_id not in turn_ids:
            continue  # a user not being checked (or unknown: a distractor cites no instance)
        texts = turn_ids[d.user_id]
        if texts is None:
            continue
        if d.turn_id not in texts:
            out.append(f"{path}:{lineno}: distractor cites turn {d.turn_id!r}, which is not in histories/{d.user_id}.jsonl")
            continue
        problem = _span_problem(d.span, d.clause, texts[d.turn_id])
        if problem:
            out.append(f"{path}:{lineno}: distractor span on turn {d.turn_id!r}: {problem}")
    return out


def _check_persona_states(ds: Dataset, personas: dict[str, Persona] | None) -> list[str]:
    """persona_states.jsonl (where there is one) must parse, each user once and a persona."""
    path = ds.persona_states_path
    if not path.exists():
        return []
    try:
        ds.persona_states()
    except DatasetError as e:
        return [str(e)]
    if personas is None:
        return []
    return [f"{path}:{ds.line(PERSONA_STATES, uid)}: states of user {uid!r}, who is not in personas.jsonl"
            for uid in ds.persona_states() if uid not in personas]


def _span_problem(span: tuple[int, int] | None, clause: str | None, text: str | None) -> str | None:
    """Why a label's span does not point at its clause in the turn's `text`, or None if it does."""
    if span is None or text is None:
        return None
    if span[1] > len(text):
        return f"span {list(span)} runs past the turn's {len(text)} characters"
    if text[span[0]:span[1]] != clause:
        return f"text at span {list(span)} is {text[span[0]:span[1]]!r}, not the labelled clause {clause!r}"
    return None


