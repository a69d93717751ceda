"""IBA dataset directories: `Dataset` (dataset.folder) and the jobs it delegates: files (layout,
JSON lines, atomic writes), histories (read, checked, memo), keys (the answer key and its index),
checks (before a run). The names callers import live here."""

from iba.dataset.files import (
    ANSWER_KEY,
    DISTRACTORS,
    HIDDEN_FILES,
    PERSONA_STATES,
    DatasetError,
    atomic_write_text,
    dump_json,
    read_jsonl,
    read_jsonl_lines,
    turn_line,
    write_dataset,
    write_jsonl,
)
from iba.dataset.folder import Dataset, dataset_id
from iba.dataset.histories import MAX_HISTORY_CHARS, MAX_HISTORY_TURNS, MAX_TURN_CHARS, TRUNCATION_MARKER

__all__ = [
    "ANSWER_KEY", "DISTRACTORS", "HIDDEN_FILES", "PERSONA_STATES", "MAX_HISTORY_CHARS", "MAX_HISTORY_TURNS",
    "MAX_TURN_CHARS", "TRUNCATION_MARKER", "Dataset", "DatasetError", "atomic_write_text", "dataset_id", "dump_json",
    "read_jsonl", "read_jsonl_lines", "turn_line", "write_dataset", "write_jsonl",
]
