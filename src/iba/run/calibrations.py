"""Judge calibrations (`iba judge-check`) in a result store: the `judge_checks` table, one
JudgeCheckResult per (judge, case set, prompt), append-only. A part of Store (run/store.py), kept
in its own module: reports and submissions read them beside the runs they judge."""

from __future__ import annotations

from iba.eval.judge_check import JudgeCheckResult
from iba.llm.secrets import redact_stored
from iba.run.store_tables import StoreTables


class JudgeCalibrations(StoreTables):
    """Store's judge_checks table (the Store holds the connection and its lock)."""

    _JUDGE_CHECKS_SCHEMA = """
    CREATE TABLE IF NOT EXISTS judge_checks (
        judge TEXT NOT NULL,
        case_set_hash TEXT NOT NULL,
        prompt_hash TEXT NOT NULL,
        created_at TEXT NOT NULL,
        record TEXT NOT NULL,
        PRIMARY KEY (judge, case_set_hash, prompt_hash)
    );
    """

    def put_judge_check(self, result: JudgeCheckResult) -> bool:
        """Insert a JudgeCheckResult; False (nothing changed) when the same judge, case set and prompt is stored."""
        self._create(self._JUDGE_CHECKS_SCHEMA)
        return self._write("INSERT OR IGNORE INTO judge_checks VALUES (?,?,?,?,?)", result.judge, result.case_set_hash,
                           result.prompt_hash, result.created_at, redact_stored(result.model_dump_json())) == 1

    def judge_checks(self, judge: str | None = None) -> list[JudgeCheckResult]:
        """Stored JudgeCheckResults (of one judge model id if given), oldest first."""
        self._create(self._JUDGE_CHECKS_SCHEMA)
        return list(self._records(JudgeCheckResult, "judge_checks", "judge", judge))
