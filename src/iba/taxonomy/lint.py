"""`lint_taxonomy`: quality checks of cues, beyond what loading requires."""

from __future__ import annotations

from iba.types import Taxonomy


def lint_taxonomy(tax: Taxonomy) -> list[str]:
    """Quality problems of cues: a cue must not give its value away by name.

    A cue may not contain its dimension's name or its value's text, and the static values of a
    scenario need distinct cues.
    """
    p: list[str] = []
    for s in tax.scenarios():
        seen: dict[str, str] = {}
        for d in s.dimensions:
            for v in d.values:
                if v.cue is None:
                    continue
                cue = " ".join(v.cue.lower().split())
                where = f"{s.domain}/{s.id}/{d.id}/{v.id}"
                if d.name.lower() in cue:
                    p.append(f"{where}: cue names the dimension {d.name!r}")
                text = v.text.lower().rstrip(".").strip()
                if text and text in cue:
                    p.append(f"{where}: cue quotes the value text {v.text!r}")
                if cue in seen:
                    p.append(f"{where}: same cue as {seen[cue]}")
                seen[cue] = where
    return p
