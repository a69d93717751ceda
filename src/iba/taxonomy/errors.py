"""`TaxonomyError`, and pydantic errors turned into its `<file>: <key path>: <message>` problems."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import ValidationError


class TaxonomyError(ValueError):
    """Malformed taxonomy data. The message names the file and the key path of every problem."""

    def __init__(self, problems: str | list[str]) -> None:
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        shown = self.problems[:40]
        more = len(self.problems) - len(shown)
        super().__init__("\n".join(shown) + (f"\n... and {more} more problems" if more > 0 else ""))


def _loc(loc: Iterable[Any]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def validation_problems(path: Path, err: ValidationError, prefix: str = "") -> list[str]:
    """One `<path>: <key path>: <message>` line per pydantic error; `prefix` is the key path of the
    validated item inside the file (e.g. `states[3]`)."""
    problems = []
    for e in err.errors():
        loc = _loc(e["loc"])
        if prefix:
            loc = prefix + ("" if loc.startswith("[") else ".") + loc if loc != "(top level)" else prefix
        msg = e["msg"].removeprefix("Value error, ")
        problems.append(f"{path}: {loc}: {msg}")
    return problems
