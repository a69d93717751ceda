"""The procedural writer: session text from seeded template banks (offline, deterministic)."""

from __future__ import annotations

from iba.construct import noise
from iba.construct.evidence import render_evidence, render_state
from iba.construct.plan import PersonaPlan, SessionPlan
from iba.construct.rng import derive


class ProceduralWriter:
    name = "procedural"

    def __init__(self, seed: int) -> None:
        self.seed = seed

    def pad(self, plan: PersonaPlan, session: SessionPlan, core: list[str]) -> list[str]:
        """An evidence or state session: its exchange `core` at `session.offset`, filler chat around it."""
        if session.n_turns == len(core):
            return list(core)
        city = plan.persona.background.get("city", "town")
        rng = derive(self.seed, session.key, "pad")
        return noise.pad_session(rng, session.noise, core, session.n_turns, session.offset, city)  # type: ignore[arg-type]

    def texts(self, plan: PersonaPlan, session: SessionPlan) -> list[str]:
        # one stream per session: a session's text does not depend on any other session
        rng = derive(self.seed, session.key, "text")
        city = plan.persona.background.get("city", "town")
        if session.kind == "evidence":
            return self.pad(plan, session, render_evidence(rng, session.item))  # type: ignore[arg-type]
        if session.kind == "state":
            return self.pad(plan, session, render_state(rng, session.item, city))  # type: ignore[arg-type]
        return noise.render_noise(rng, session.noise, session.n_turns, city)  # type: ignore[arg-type]
