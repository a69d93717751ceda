"""The append-only result store: one SQLite file that is both the output and the resume point.

`runs` holds one RunRecord per (dataset, instance, agent spec, model, trial) key; `scores` holds
one ScoreRecord per (run key, scorer, repeat), so the same runs can be re-scored by other judges
without re-running agents. Rows are not updated in place: a key already present is skipped. The
exceptions, each an infrastructure fault or an explicit request: `--retry-errored` drops errored
runs, a score whose judge call failed is replaced when judged again, and `iba score --rescore`
replaces the scores it recomputes.
WAL mode lets a report read while a run writes. Every record is scrubbed of the configured secrets
before it is written (llm.secrets.redact_stored: keys, URL credentials a reply may have echoed).

`claims` lets several `iba run` processes share one store without doing the same work twice: a
process claims a key before it runs it and drops the claim once the record is stored. A claim whose
process is gone (same host, pid not alive) or that outlived its deadline is taken over, so a killed
run never blocks its own resume.

Its version is SQLite's `user_version`; an older store is brought up to date on open, in one
transaction. 1: a QA probe's `runs` row holds its instance's id (0: "<instance>::qa::<probe>").
"""

from __future__ import annotations

import os
import socket
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from iba.llm.secrets import redact_stored
from iba.sqlite_wal import enable_wal
from iba.run.calibrations import JudgeCalibrations
from iba.run.sample import Sample
from iba.types import LEGACY_QA, IngestRecord, RunRecord, ScoreRecord

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    key TEXT PRIMARY KEY,
    run TEXT NOT NULL,
    dataset TEXT NOT NULL,
    instance_id TEXT NOT NULL,
    agent TEXT NOT NULL,
    model TEXT NOT NULL,
    trial INTEGER NOT NULL,
    status TEXT NOT NULL,
    record TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_run ON runs(run);
CREATE TABLE IF NOT EXISTS scores (
    run_key TEXT NOT NULL,
    scorer TEXT NOT NULL,
    repeat INTEGER NOT NULL,
    record TEXT NOT NULL,
    PRIMARY KEY (run_key, scorer, repeat)
);
CREATE TABLE IF NOT EXISTS claims (
    key TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    expires REAL NOT NULL
);
"""


VERSION = 1  # PRAGMA user_version (the module doc)
_MIGRATIONS = {  # to version N from N - 1
    1: f"UPDATE runs SET instance_id = substr(instance_id, 1, instr(instance_id, '{LEGACY_QA}') - 1) "
       f"WHERE instr(instance_id, '{LEGACY_QA}') > 0",
}

_SCORE = "run_key=? AND scorer=? AND repeat=?"  # a score's primary key

# A score record whose judge call failed: ScoreRecord.errored, as pydantic writes it (no spaces; a
# string value cannot hold it unescaped), so no JSON parsing is needed to find them.
_ERRORED_SQL = """scores.record LIKE '%"errored":true%'"""


class StoreError(RuntimeError):
    """The store file cannot be used (not an SQLite database, unreadable, locked for too long)."""


def _owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _owner_alive(owner: str) -> bool:
    """False only when the claim's process is known to be gone (same host, no such pid)."""
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return True  # another machine's claim: trust its deadline
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Store(JudgeCalibrations):
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if self.path.is_dir():
            raise StoreError(f"{self.path}: is a folder, not a result store; give the path of an SQLite file "
                             "(e.g. runs/iba.sqlite)")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StoreError(f"{self.path}: cannot create its folder: {e.strerror or e}") from None
        self._lock = threading.Lock()
        self.owner = _owner()
        try:
            self._db = sqlite3.connect(str(self.path), check_same_thread=False, timeout=30)
            enable_wal(self._db)
            self._db.executescript(_SCHEMA)
            self._migrate()
        except sqlite3.DatabaseError as e:
            raise StoreError(f"{self.path}: cannot be used as a result store ({e}); "
                             "give --store a new path or an SQLite file written by iba") from None

    def _migrate(self) -> None:
        version = self._one("PRAGMA user_version")[0]
        if version > VERSION:
            self._db.close()
            raise StoreError(f"{self.path}: written by a newer iba (store version {version}, this one reads "
                             f"{VERSION} and older); upgrade iba or give --store a new path")
        if version < VERSION:
            with self._db:  # one transaction: the updates and the new version together, or neither
                self._db.execute("BEGIN IMMEDIATE")
                for n in range(version + 1, VERSION + 1):  # each idempotent: another process may have run it
                    self._db.execute(_MIGRATIONS[n])
                self._db.execute(f"PRAGMA user_version = {VERSION}")

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------- runs
    def has_run(self, key: str) -> bool:
        return self._one("SELECT 1 FROM runs WHERE key=?", key) is not None

    def get_run(self, key: str) -> RunRecord | None:
        return self._record(RunRecord, "runs", "key=?", key)

    def drop_errored(self, keys: list[str]) -> int:
        """Delete the errored records among `keys`, and their scores, so a rerun retries them.

        The one exception to append-only, asked for explicitly (`iba run --retry-errored`): an error
        such as a timeout is a fact about that attempt, not about the agent."""
        with self._lock, self._db:
            drop = "DELETE FROM runs WHERE key=? AND status='errored'"
            dropped = [k for k in keys if self._db.execute(drop, (k,)).rowcount]
            self._db.executemany("DELETE FROM scores WHERE run_key=?", [(k,) for k in dropped])
            return len(dropped)

    def put_run(self, rec: RunRecord) -> bool:
        """Insert; returns False (and changes nothing) if the key is already stored."""
        return self._write("INSERT OR IGNORE INTO runs VALUES (?,?,?,?,?,?,?,?,?)", rec.key, rec.run, rec.dataset,
                           rec.instance_id, redact_stored(rec.agent), rec.model, rec.trial, rec.status,
                           redact_stored(rec.model_dump_json())) == 1

    # ---------------------------------------------------------------- claims (several processes)
    def claim(self, key: str, ttl_s: float) -> bool:
        """Take `key` for this process unless it is stored or another live process holds it."""
        now = time.time()
        with self._lock, self._db:
            # BEGIN IMMEDIATE: the check and the write are one step for every process on the file
            self._db.execute("BEGIN IMMEDIATE")
            if self._db.execute("SELECT 1 FROM runs WHERE key=?", (key,)).fetchone():
                return False
            row = self._db.execute("SELECT owner, expires FROM claims WHERE key=?", (key,)).fetchone()
            if row and row[0] != self.owner and row[1] > now and _owner_alive(row[0]):
                return False
            self._db.execute("INSERT OR REPLACE INTO claims VALUES (?,?,?)", (key, self.owner, now + ttl_s))
            return True

    def sweep_claims(self) -> int:
        """Drop claims left behind: of stored keys, past their deadline, or of dead processes."""
        now = time.time()
        with self._lock, self._db:
            rows = self._db.execute("SELECT key, owner, expires FROM claims").fetchall()
            stored = {k for (k,) in self._db.execute(
                "SELECT c.key FROM claims c JOIN runs r ON r.key = c.key").fetchall()}
            stale = [k for k, owner, exp in rows if k in stored or exp <= now or not _owner_alive(owner)]
            self._db.executemany("DELETE FROM claims WHERE key=?", [(k,) for k in stale])
            return len(stale)

    def release(self, key: str) -> None:
        self._write("DELETE FROM claims WHERE key=? AND owner=?", key, self.owner)

    def runs(self, run: str | None = None) -> Iterator[RunRecord]:
        return self._records(RunRecord, "runs", "run", run)

    def run_names(self) -> list[str]:
        return [r[0] for r in self._all("SELECT DISTINCT run FROM runs ORDER BY run")]

    # ---------------------------------------------------------------- scores
    def has_score(self, run_key: str, scorer: str, repeat: int = 0) -> bool:
        return self._one(f"SELECT 1 FROM scores WHERE {_SCORE}", run_key, scorer, repeat) is not None

    def score_errored(self, run_key: str, scorer: str, repeat: int = 0) -> bool | None:
        """None: no such score; True: stored but errored (a judge call failed: judged again by the
        next run); False: stored and final."""
        row = self._one(f"SELECT {_ERRORED_SQL} FROM scores WHERE {_SCORE}", run_key, scorer, repeat)
        return None if row is None else bool(row[0])

    def get_score(self, run_key: str, scorer: str, repeat: int = 0) -> ScoreRecord | None:
        return self._record(ScoreRecord, "scores", _SCORE, run_key, scorer, repeat)

    def put_score(self, rec: ScoreRecord, *, replace: bool = False) -> bool:
        """Insert; a stored record for the same (run key, scorer, repeat) is kept (False), unless it
        is errored (a judge fault is judged again, the second exception to append-only) or
        `replace` (`iba score --rescore`: judged again on purpose)."""
        row = (rec.run_key, rec.scorer, rec.repeat, redact_stored(rec.model_dump_json()))
        if replace:
            return self._write("INSERT OR REPLACE INTO scores VALUES (?,?,?,?)", *row) == 1
        # one statement: a concurrent process's final verdict is never overwritten by ours
        return self._write("INSERT INTO scores VALUES (?,?,?,?) ON CONFLICT(run_key, scorer, repeat) DO UPDATE "
                           f"SET record=excluded.record WHERE {_ERRORED_SQL}", *row) == 1

    def count_errored(self, keys: list[str]) -> tuple[int, int]:
        """(errored run records, errored score records) among the runs of `keys`: what a run of
        that selection still owes (--retry-errored; judging again)."""
        runs = faults = 0
        with self._lock:
            for i in range(0, len(keys), 500):
                chunk = keys[i:i + 500]
                marks = ",".join("?" * len(chunk))
                runs += self._db.execute(f"SELECT COUNT(*) FROM runs WHERE status='errored' AND key IN ({marks})",
                                         chunk).fetchone()[0]
                faults += self._db.execute(f"SELECT COUNT(*) FROM scores WHERE {_ERRORED_SQL} AND run_key IN ({marks})",
                                           chunk).fetchone()[0]
        return runs, faults

    def scores(self, scorer: str | None = None) -> Iterator[ScoreRecord]:
        return self._records(ScoreRecord, "scores", "scorer", scorer)

    # ---------------------------------------------------------------- ingests (memory agents)
    _INGESTS_SCHEMA = """
    CREATE TABLE IF NOT EXISTS ingests (
        key TEXT PRIMARY KEY,
        run TEXT NOT NULL,
        dataset TEXT NOT NULL,
        user_id TEXT NOT NULL,
        agent TEXT NOT NULL,
        model TEXT NOT NULL,
        trial INTEGER NOT NULL,
        status TEXT NOT NULL,
        record TEXT NOT NULL
    );
    """

    def put_ingest(self, rec: IngestRecord) -> IngestRecord:
        """Store the ingest of `rec.key`, replacing an earlier one (the user was ingested again);
        returns the record as stored, its `attempts` counting the earlier ones."""
        self._create(self._INGESTS_SCHEMA)
        with self._lock, self._db:
            self._db.execute("BEGIN IMMEDIATE")
            row = self._db.execute("SELECT record FROM ingests WHERE key=?", (rec.key,)).fetchone()
            if row is not None:
                rec = rec.model_copy(update={"attempts": IngestRecord.model_validate_json(row[0]).attempts + 1})
            self._db.execute("INSERT OR REPLACE INTO ingests VALUES (?,?,?,?,?,?,?,?,?)",
                             (rec.key, rec.run, rec.dataset, rec.user_id, redact_stored(rec.agent), rec.model,
                              rec.trial, rec.status, redact_stored(rec.model_dump_json())))
        return rec

    def ingests(self, run: str | None = None) -> list[IngestRecord]:
        """Stored IngestRecords (of one run name if given), oldest first."""
        self._create(self._INGESTS_SCHEMA)
        return list(self._records(IngestRecord, "ingests", "run", run))

    # ---------------------------------------------------------------- samples (iba run --sample)
    _SAMPLES_SCHEMA = """
    CREATE TABLE IF NOT EXISTS samples (
        dataset TEXT PRIMARY KEY,
        record TEXT NOT NULL
    );
    """

    def get_sample(self, dataset: str) -> Sample | None:
        """The sample this store's runs on `dataset` were drawn as (run.sample.bind_sample), if any."""
        self._create(self._SAMPLES_SCHEMA)
        return self._record(Sample, "samples", "dataset=?", dataset)

    def samples(self) -> dict[str, Sample]:
        """Dataset id -> its recorded sample."""
        self._create(self._SAMPLES_SCHEMA)
        rows = self._all("SELECT dataset, record FROM samples ORDER BY dataset")
        return {d: Sample.model_validate_json(text) for d, text in rows}

    def put_sample(self, sample: Sample) -> None:
        """Record (or replace: bind_sample decides when that is allowed) the sample of its dataset."""
        self._create(self._SAMPLES_SCHEMA)
        self._write("INSERT OR REPLACE INTO samples VALUES (?,?)", sample.dataset, sample.model_dump_json())

    def instance_ids(self, dataset: str) -> set[str]:
        """The instances (QA probes counted as their task's) this store holds records of on `dataset`."""
        return {i for (i,) in self._all("SELECT DISTINCT instance_id FROM runs WHERE dataset=?", dataset)}
