"""A tiny hand-made dataset for runner/store tests (no builder involved)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from iba.dataset import write_dataset
from iba.types import AnswerKey, Checkpoint, EvidenceLabel, Manifest, Persona, QAProbe, Slot, TaskView, Turn, item_id

SECRET_EXPECTED = "Prefers pseudocode over runnable code."


def tiny_dataset(root: Path) -> Path:
    turns = [
        Turn(id="u0-s0-t0", session_id="u0-s0", timestamp="2025-01-01T10:00:00", role="user",
             text="just sketch the logic in plain steps, I'll port it myself"),
        Turn(id="u0-s0-t1", session_id="u0-s0", timestamp="2025-01-01T10:00:05", role="assistant", text="Sure."),
        Turn(id="u0-s1-t0", session_id="u0-s1", timestamp="2025-01-02T10:00:00", role="user", text="what's a good pasta recipe?"),
    ]
    api = {"type": "object", "properties": {"texture": {"type": "string", "enum": ["soft", "regular"]}},
           "required": ["texture"], "additionalProperties": False}
    instances = [
        TaskView(instance_id="i0", user_id="u0", domain="writing", scenario="technical_documentation",
                 scenario_name="Technical documentation writing", query="Document our retry helper.",
                 action="generate", now="2025-02-01T09:00:00"),
        TaskView(instance_id="i1", user_id="u0", domain="daily", scenario="food_ordering",
                 scenario_name="Food ordering", query="Order dinner for tonight.", action="call_api",
                 api_name="order_food", api_schema=api, now="2025-02-01T09:00:00"),
    ]
    keys = [
        AnswerKey(instance_id="i0", checkpoints=[Checkpoint(
            id="i0-c0", dimension="example_code_style", dimension_name="Example code style", value="pseudocode",
            expected=SECRET_EXPECTED, kind="static", evidence=["u0-s0-t0"])],
            evidence=[EvidenceLabel(turn_id="u0-s0-t0", signal_type="direct_statement", dimension="example_code_style",
                                    value="pseudocode", timestamp="2025-01-01T10:00:00")],
            qa=[QAProbe(id="q0", target="i0-c0", question="How does this user like code examples?",
                        options=["Complete programs", "Pseudocode"], answer=1)]),
        AnswerKey(instance_id="i1", slots=[Slot(id="i1-s0", param="texture", dimension="texture", value="soft",
                                                accepted=["soft"], evidence=["u0-s0-t0"])]),
    ]
    persona = Persona(id="u0", name="Ada", background={"city": "Lyon"}, traits=["curious"], role="engineer")
    manifest = Manifest(name="tiny", generator="tests", seed=0, taxonomy_version="test", created_by="test",
                        counts={"instances": 2})
    write_dataset(root, manifest, [persona], {"u0": turns}, instances, keys)
    return root


def users_dataset(root: Path, users: int = 3, sessions: int = 3, turns: int = 2) -> Path:
    """`users` users, each with `sessions` sessions of `turns` turns (ids "u1-s0-t0": the user is the
    first part) and two tasks after the history: a call_api and a generate one."""
    api = {"type": "object", "properties": {"texture": {"type": "string", "enum": ["soft", "regular"]}},
           "required": ["texture"], "additionalProperties": False}
    personas, histories, instances, keys = [], {}, [], []
    for u in range(users):
        uid = f"u{u}"
        personas.append(Persona(id=uid, name=f"P{u}", background={}, traits=[], role="tester"))
        histories[uid] = [
            Turn(id=f"{uid}-s{s}-t{t}", session_id=f"{uid}-s{s}", timestamp=f"2025-01-{s + 1:02d}T10:00:{t:02d}",
                 role="user" if t % 2 == 0 else "assistant", text=f"{uid} says thing {s}.{t} about soft food")
            for s in range(sessions) for t in range(turns)]
        instances += [
            TaskView(instance_id=f"{uid}-food", user_id=uid, domain="daily", scenario="food_ordering",
                     scenario_name="Food ordering", query="Order dinner.", action="call_api", api_name="order_food",
                     api_schema=api, now="2025-02-01T09:00:00"),
            TaskView(instance_id=f"{uid}-doc", user_id=uid, domain="writing", scenario="technical_documentation",
                     scenario_name="Technical documentation writing", query="Document it.", action="generate",
                     now="2025-02-01T09:30:00"),
        ]
        keys += [
            AnswerKey(instance_id=f"{uid}-food", slots=[Slot(id=f"{uid}-food-s0", param="texture", dimension="texture",
                                                              value="soft", accepted=["soft"],
                                                              evidence=[f"{uid}-s0-t0"])]),
            AnswerKey(instance_id=f"{uid}-doc", checkpoints=[Checkpoint(
                id=f"{uid}-doc-c0", dimension="example_code_style", dimension_name="Example code style",
                value="pseudocode", expected=SECRET_EXPECTED, kind="static", evidence=[f"{uid}-s0-t0"])]),
        ]
    manifest = Manifest(name="users", generator="tests", seed=0, taxonomy_version="test", created_by="test",
                        counts={"instances": len(instances)})
    write_dataset(root, manifest, personas, histories, instances, keys)
    return root


OLD_SCHEMA = """
CREATE TABLE runs (key TEXT PRIMARY KEY, run TEXT NOT NULL, dataset TEXT NOT NULL, instance_id TEXT NOT NULL,
                   agent TEXT NOT NULL, model TEXT NOT NULL, trial INTEGER NOT NULL, status TEXT NOT NULL,
                   record TEXT NOT NULL);
CREATE INDEX runs_run ON runs(run);
CREATE TABLE scores (run_key TEXT NOT NULL, scorer TEXT NOT NULL, repeat INTEGER NOT NULL, record TEXT NOT NULL,
                     PRIMARY KEY (run_key, scorer, repeat));
CREATE TABLE claims (key TEXT PRIMARY KEY, owner TEXT NOT NULL, expires REAL NOT NULL);
"""


def as_old_store(new: Path, old: Path) -> None:
    """`new`'s runs and scores, written as the code before the probe field did: a QA probe's id is
    "<instance>::qa::<probe>" in the column and the record, which has no "probe"; user_version 0."""
    src, db = sqlite3.connect(new), sqlite3.connect(old)
    db.executescript(OLD_SCHEMA)
    for row in src.execute("SELECT key, run, dataset, agent, model, trial, status, record FROM runs ORDER BY rowid"):
        rec = json.loads(row[-1])
        rec["instance_id"] = item_id(rec["instance_id"], rec.pop("probe"))
        db.execute("INSERT INTO runs VALUES (?,?,?,?,?,?,?,?,?)",
                   (*row[:3], rec["instance_id"], *row[3:7], json.dumps(rec, separators=(",", ":"))))
    db.executemany("INSERT INTO scores VALUES (?,?,?,?)", src.execute("SELECT * FROM scores ORDER BY rowid"))
    db.commit()
    assert db.execute("PRAGMA user_version").fetchone()[0] == 0
    assert db.execute("SELECT COUNT(*) FROM runs WHERE instance_id LIKE '%::qa::%'").fetchone()[0] > 0
    db.close(), src.close()
