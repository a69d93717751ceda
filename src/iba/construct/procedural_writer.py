"""The procedural writer: session text from seeded banks (offline, deterministic).

A session is a list of exchanges at their turn offsets (its evidence or state exchange, distractor
exchanges placed in its filler) with noise stretches between them. Sessions are written in history
order with one `Voice` per history, so the sentence budget bounds repeats across the whole history;
each session still draws from its own random stream, so the same seed gives the same text.
The spans of every cue in a preference turn are kept by item key for the answer key and the
distractor labels (`spans`).
"""

from __future__ import annotations

from iba.construct import evidence_bank, noise
from iba.construct.evidence import Spans, render_framed_distractor, render_exchange, render_state
from iba.construct.noise import Voice
from iba.construct.plan_types import DistractorItem, PersonaPlan, SessionPlan
from iba.construct.rng import derive


class ProceduralWriter:
    name = "procedural"

    def __init__(self, seed: int, anchor_rates: dict[str, float] | None = None, version: int = 3) -> None:
        if version not in (2, 3):
            raise ValueError(f"unknown generator version {version}; choose 2 or 3")
        self.seed = seed
        self.version = version  # 3: coherent exchanges (iba.construct.coherent); 2: as built before
        # how often an evidence turn names its scenario, per scenario (default ANCHOR_PROB);
        # distractors name theirs only when they must, and the builder sets these rates so that a
        # named scenario tells neither apart (distractors.AnchorCounts.rates)
        self.anchor_rates = anchor_rates
        self.spans: dict[str, Spans] = {}  # item key -> spans of its cues in its labelled turn
        self._voice: tuple[str, Voice] | None = None

    def voice(self, plan: PersonaPlan) -> Voice:
        """The running voice of `plan`'s history (a new one when another persona starts)."""
        if self._voice is None or self._voice[0] != plan.persona.id:
            self._voice = (plan.persona.id, self._fresh_voice(plan))
        return self._voice[1]

    def texts(self, plan: PersonaPlan, session: SessionPlan) -> list[str]:
        """The session's text, in history order (the history's budget carries over)."""
        return self.write(plan, session, self.voice(plan))

    def _fresh_voice(self, plan: PersonaPlan) -> Voice:
        return Voice(city=plan.persona.background.get("city", "town").split(",")[0], version=self.version)

    def pad(self, plan: PersonaPlan, session: SessionPlan, core: list[str] | None, written: dict[str, list[str]]) -> list[str]:
        """The session on its own (a budget of its own) with the exchanges written elsewhere, e.g.
        by a model, at their places: its own exchange `core` and the distractor exchanges in
        `written` (item key -> turns); the others are rendered here, with the filler around them."""
        return self.write(plan, session, self._fresh_voice(plan), core=core, written=written)

    def write(self, plan: PersonaPlan, session: SessionPlan, voice: Voice, core: list[str] | None = None,
              written: dict[str, list[str]] | None = None) -> list[str]:
        rng = derive(self.seed, session.key, "text")
        voice.talk = None  # version 3: the session's topic starts afresh
        parts: list[tuple[int, str, object]] = [(off, "distractor", d) for off, d in session.distractors]
        if session.kind != "noise":
            parts.append((session.offset, "core", session.item))
        parts.sort(key=lambda p: p[0])
        out: list[str] = []
        for offset, kind, item in parts:
            if offset > len(out):  # filler up to this exchange
                out += noise.render_noise(rng, voice, session.noise, offset - len(out), greet=not out)  # type: ignore[arg-type]
            mid = offset > 0
            if kind == "core":
                turns = core if core is not None else self._core(rng, voice, session, mid)
            elif written and item.key in written:  # type: ignore[attr-defined]
                turns = written[item.key]  # type: ignore[attr-defined]
            else:
                turns = self._distractor(rng, voice, item, mid)  # type: ignore[arg-type]
            out += turns
        if len(out) < session.n_turns:
            out += noise.render_noise(rng, voice, session.noise, session.n_turns - len(out), greet=not out)  # type: ignore[arg-type]
        return out

    def _core(self, rng, voice: Voice, session: SessionPlan, mid: bool) -> list[str]:
        if session.kind == "evidence":
            turns, spans = render_exchange(
                rng, voice, session.item, mid_session=mid,  # type: ignore[arg-type]
                anchor_prob=evidence_bank.ANCHOR_PROB if self.anchor_rates is None else self.anchor_rates.get(session.item.scenario.id, 0.0),  # type: ignore[union-attr]
            )
        else:
            turns, spans = render_state(rng, voice, session.item, session.noise)  # type: ignore[arg-type]
        self.spans[session.item.key] = spans  # type: ignore[union-attr]
        return turns

    def _distractor(self, rng, voice: Voice, item: DistractorItem, mid: bool) -> list[str]:
        if item.form in ("own_other_topic", "other_person"):
            # names its scenario when its facet requires it (item.anchored), else never: see anchor_prob
            turns, spans = render_exchange(rng, voice, item, mid_session=mid)
        else:
            turns, spans = render_framed_distractor(rng, voice, item)
        self.spans[item.key] = spans
        return turns
