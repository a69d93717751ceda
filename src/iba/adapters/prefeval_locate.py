"""Finding the user turn that states the preference inside a persona-driven conversation.

PrefEval does not label which exchange mentions the preference, so we score each user turn by
lexical overlap with the preference text plus a bonus for a preference cue ("I usually prefer",
"I tend to avoid", ...), and accept the best turn only when it is clearly ahead of the runner-up.
An ambiguous or weak match is reported as unlocated instead of guessed: a wrong gold id would
silently corrupt every recall figure computed on the import.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# short function words carry no signal about which turn states the preference
_STOP = frozenset(
    "the and but for with that this from not any all very can will would should about have has had "
    "are was were been into than then them they their there what when where which who why how you "
    "your our just also some such more most much many other only over own same too its it's i'm i've".split()
)
# phrasings people use to state a standing preference
_CUE = re.compile(
    r"\b(prefer|preference|avoid|dislike|can't stand|cannot stand|tend to|typical(ly)? (choice|go)|go-to|"
    r"usually|rather than|instead of|not a fan|allergic|intoleran)",
    re.IGNORECASE,
)
CUE_BONUS = 0.25
MIN_SCORE = 0.35  # below this no turn shares enough with the preference
MIN_MARGIN = 0.15  # a closer runner-up makes the choice a guess


def _tokens(text: str) -> set[str]:
    # a 5-letter prefix is a crude stem that joins "avoid/avoids", "learning/learn"
    return {w[:5] for w in re.findall(r"[a-z0-9]+", text.lower()) if len(w) >= 3 and w not in _STOP}


@dataclass(frozen=True)
class Location:
    index: int | None  # position of the stating turn in `user_turns`, None when unlocated
    score: float
    runner_up: float
    reason: str = ""


def turn_score(preference: str, text: str) -> float:
    pref = _tokens(preference)
    overlap = len(pref & _tokens(text)) / max(1, len(pref))
    return overlap + (CUE_BONUS if _CUE.search(text) else 0.0)


def locate_preference(preference: str, user_turns: list[str]) -> Location:
    """The index of the user turn that states `preference`, or an unlocated result with a reason."""
    if not user_turns:
        return Location(None, 0.0, 0.0, "no user turns")
    scores = [turn_score(preference, t) for t in user_turns]
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    best = scores[order[0]]
    second = scores[order[1]] if len(order) > 1 else 0.0
    if best < MIN_SCORE:
        return Location(None, best, second, f"best score {best:.2f} < {MIN_SCORE}")
    if best - second < MIN_MARGIN:
        return Location(None, best, second, f"ambiguous: best {best:.2f} vs runner-up {second:.2f}")
    return Location(order[0], best, second)
