"""`lint_taxonomy`: quality checks of cues, beyond what loading requires."""

from __future__ import annotations

from iba.types import Taxonomy


def lint_taxonomy(tax: Taxonomy) -> list[str]:
    """Quality problems of cues: a cue must not give its value away by name.

    A cue (and each of `more_cues`) may not contain its dimension's name or its value's text, nor
    end in a full stop (it is a clause the writer wraps), and all cues of a scenario are distinct.
    """
    p: list[str] = []
    for s in tax.scenarios():
        seen: dict[str, str] = {}
        for d in s.dimensions:
            for v in d.values:
                for k, raw in enumerate(v.all_cues):
                    cue = " ".join(raw.lower().split())
                    where = f"{s.domain}/{s.id}/{d.id}/{v.id}" + (f" (more_cues[{k - 1}])" if k else "")
                    if d.name.lower() in cue:
                        p.append(f"{where}: cue names the dimension {d.name!r}")
                    text = v.text.lower().rstrip(".").strip()
                    if text and text in cue:
                        p.append(f"{where}: cue quotes the value text {v.text!r}")
                    if raw.rstrip().endswith("."):
                        p.append(f"{where}: a cue is a clause: no full stop at the end (writers add their own)")
                    if cue in seen:
                        p.append(f"{where}: same cue as {seen[cue]}")
                    seen[cue] = where
    return p
