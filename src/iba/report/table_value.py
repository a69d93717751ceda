"""A small table value with Markdown and CSV writers (HTML rendering lives in html.py).

Cells hold values, not strings, so the HTML page can rank a column (best bold, second
underlined) while Markdown and CSV print the same numbers. Scores are shown x100, 1 decimal.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, field
from typing import Any

DASH = "\u2013"
# what a reference row's label carries (report.data.RowKey.label): "null (m) [reference: no history]"
REFERENCE_MARK = "[reference: "


def is_reference(label: Any) -> bool:
    """Whether a row label (or a column naming a row) is a reference row's."""
    return isinstance(label, str) and REFERENCE_MARK in label


@dataclass(frozen=True)
class MeanSd:
    """mean ± sample sd of replicate scores (x100), as in the paper's Table 9."""

    mean: float | None
    sd: float | None
    n: int = 0

    def __str__(self) -> str:
        if self.mean is None:
            return DASH
        return f"{self.mean:.1f} \u00b1 {self.sd:.2f}" if self.sd is not None else f"{self.mean:.1f}"


@dataclass(frozen=True)
class Delta:
    """A score with its difference to a reference row (Table 5's "70.5 ↓ 8.3")."""

    value: float | None
    delta: float | None

    def __str__(self) -> str:
        if self.value is None:
            return DASH
        if self.delta is None:
            return f"{self.value:.1f}"
        d = round(self.delta, 1)
        arrow = "\u2191" if d > 0 else "\u2193" if d < 0 else "="
        return f"{self.value:.1f} {arrow} {abs(d):.1f}"


def fmt(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return DASH
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.1f}"
    return str(value)


def sort_value(value: Any) -> float | None:
    """The number a cell ranks by (None: not rankable)."""
    if isinstance(value, MeanSd):
        return value.mean
    if isinstance(value, Delta):
        return value.value
    if isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isnan(value):
        return float(value)
    return None


@dataclass
class Table:
    name: str  # file stem: <name>.md / <name>.csv
    title: str
    columns: list[str]
    rows: list[list[Any]]
    note: str = ""
    label_columns: int = 1  # leading columns that name the row
    rank_columns: list[int] = field(default_factory=list)  # columns whose best/second the HTML marks
    cell_format: Any = None  # optional fmt override for value cells (e.g. 3 decimals)

    def text(self, value: Any) -> str:
        if self.cell_format is not None and isinstance(value, float) and not math.isnan(value):
            return self.cell_format(value)
        return fmt(value)

    def to_markdown(self) -> str:
        out = [f"### {self.title}", ""]
        out.append("| " + " | ".join(self.columns) + " |")
        aligns = ["---"] * self.label_columns + ["---:"] * (len(self.columns) - self.label_columns)
        out.append("| " + " | ".join(aligns) + " |")
        for row in self.rows:
            cells = [self.text(v).replace("|", "\\|") for v in row]
            out.append("| " + " | ".join(cells) + " |")
        if self.note:
            out += ["", self.note]
        return "\n".join(out) + "\n"

    def to_csv(self) -> str:
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(self.columns)
        for row in self.rows:
            w.writerow([self.text(v) if v is not None else "" for v in row])
        return buf.getvalue()

    def ranks(self, col: int) -> dict[int, int]:
        """row index -> 1 (best) or 2 (second) for a ranked column; ties share a rank. Reference rows
        are not ranked (an oracle is no winner)."""
        ranked = [(i, r) for i, r in enumerate(self.rows) if not is_reference(r[0])]
        vals = sorted({v for _, r in ranked if (v := sort_value(r[col])) is not None}, reverse=True)
        # compare at the printed precision, so two cells that print the same rank the same
        shown = sorted({round(v, 1) for v in vals}, reverse=True)[:2]
        out = {}
        for i, r in ranked:
            v = sort_value(r[col])
            if v is not None and round(v, 1) in shown:
                out[i] = shown.index(round(v, 1)) + 1
        return out


def records_to_csv(records: list[dict[str, Any]]) -> str:
    """Long-format rows (one dict each) as CSV with full precision."""
    if not records:
        return ""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(records[0]), lineterminator="\n")
    w.writeheader()
    for r in records:
        w.writerow({k: ("" if v is None else round(v, 6) if isinstance(v, float) else v) for k, v in r.items()})
    return buf.getvalue()
