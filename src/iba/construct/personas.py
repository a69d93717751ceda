"""Personas p = (B, T, E, R) from seeded word banks.

B (background) and T (traits) are long-term; R (role) is the current role. E (transient states)
is filled in by the planner, because whether a state is active depends on the persona's task
times and scenarios (see iba.construct.planner).
"""

from __future__ import annotations

from iba.construct import persona_bank as bank
from iba.construct.rng import derive
from iba.types import Persona


def persona_id(index: int) -> str:
    return f"u{index:04d}"


def make_personas(n: int, seed: int) -> list[Persona]:
    """`n` personas with distinct names; persona i depends only on (seed, i) and the name pool."""
    names_rng = derive(seed, "persona-names")
    pairs = [(f, l) for f in bank.FIRST_NAMES for l in bank.LAST_NAMES]
    if n > len(pairs):
        raise ValueError(f"at most {len(pairs)} personas have distinct names; asked for {n}")
    chosen = names_rng.sample(pairs, n)
    out = []
    for i, (first, last) in enumerate(chosen):
        rng = derive(seed, "persona", i)
        background = {
            "age": str(rng.randint(19, 72)),
            "city": rng.choice(bank.CITIES),
            "education": rng.choice(bank.EDUCATION),
            "household": rng.choice(bank.HOUSEHOLDS),
            "hobbies": ", ".join(rng.sample(bank.HOBBIES, 2)),
        }
        out.append(
            Persona(
                id=persona_id(i),
                name=f"{first} {last}",
                background=background,
                traits=rng.sample(bank.TRAITS, 3),
                states=[],
                role=rng.choice(bank.ROLES),
            )
        )
    return out


def persona_summary(p: Persona) -> str:
    """A one-paragraph description of a persona (used in LLM prompts and validation)."""
    b = p.background
    text = (
        f"{p.name}, {b.get('age', '?')}, lives in {b.get('city', '?')}; {b.get('household', '')}. "
        f"Education: {b.get('education', '?')}. Hobbies: {b.get('hobbies', '?')}. "
        f"Traits: {', '.join(p.traits)}. Current role: {p.role}."
    )
    if p.states:
        text += " Recent situations: " + "; ".join(f"{s.description} ({s.start[:10]} to {s.end[:10]})" for s in p.states) + "."
    return text
