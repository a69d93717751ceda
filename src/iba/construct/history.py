"""Lay a persona's sessions out on a timeline and write them as `Turn`s.

Sessions fall on distinct days (a few share a day only when a narrow window is full) over the
months before the persona's tasks. Evidence sessions honour their windows: the old value of a
changed preference early, the new value late, state mentions while the state holds. Turn ids are
stable: `u0042-s017-t03` is turn 3 of session 17 of persona u0042, sessions numbered in time order.
"""

from __future__ import annotations

import math
import random
from array import array
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta

from iba.construct.plan_types import PersonaPlan, SessionPlan, StateSpan
from iba.construct.rng import EPOCH, iso
from iba.dataset import turn_line
from iba.types import PersonaStateSpan

MIN_SPAN_DAYS = 60
DAYS_PER_SESSION = 1.25  # slack so that most sessions get a day of their own
START_OFFSET_DAYS = 120  # histories start within this many days after the epoch


def span_days(n_sessions: int, spans: list[StateSpan]) -> int:
    need = max([s.start_ago + 2 for s in spans] or [0])
    return max(MIN_SPAN_DAYS, math.ceil(n_sessions * DAYS_PER_SESSION), need)


def _window(session: SessionPlan, days: int) -> tuple[int, int]:
    item = session.item
    if session.kind == "evidence":
        f_lo, f_hi = item.window  # type: ignore[union-attr]
        lo, hi = int(f_lo * days), max(int(f_lo * days), math.ceil(f_hi * days) - 1)
        if item.before is not None:  # type: ignore[union-attr]
            hi = min(hi, days - item.before.start_ago - 1)  # type: ignore[union-attr]
            lo = min(lo, hi)
        return lo, hi
    if session.kind == "state":
        span = item.span  # type: ignore[union-attr]
        lo = max(0, days - span.start_ago)
        hi = days - 1 if span.active else days - span.end_ago - 1
        return lo, max(lo, min(hi, days - 1))
    return 0, days - 1


def layout(rng: random.Random, plan: PersonaPlan) -> None:
    """Give every session a day, a start time, turn timestamps and an index (in place)."""
    days = plan.span_days
    free = set(range(days))
    fixed = [s for s in plan.sessions if s.kind != "noise"]
    for s in fixed:
        s.day_window = _window(s, days)
    # narrow windows first, so they still find a free day
    for s in sorted(fixed, key=lambda s: (s.day_window[1] - s.day_window[0], s.key)):
        lo, hi = s.day_window
        options = [d for d in range(lo, hi + 1) if d in free]
        s.day = rng.choice(options) if options else rng.randint(lo, hi)
        free.discard(s.day)
    noise = [s for s in plan.sessions if s.kind == "noise"]
    pool = sorted(free)
    if len(pool) >= len(noise):
        chosen = sorted(rng.sample(pool, len(noise)))
    else:  # more sessions than days left: reuse days (only with tiny spans)
        chosen = sorted(pool + [rng.randrange(days) for _ in range(len(noise) - len(pool))])
    rng.shuffle(noise)
    for s, d in zip(noise, chosen):
        s.day = d
    order = {id(s): i for i, s in enumerate(plan.sessions)}
    plan.sessions.sort(key=lambda s: (s.day, order[id(s)]))
    per_day: dict[int, int] = {}
    for s in plan.sessions:
        per_day[s.day] = per_day.get(s.day, 0) + 1
    slot_of: dict[int, int] = {}
    pid = plan.persona.id
    for index, s in enumerate(plan.sessions):
        slot = slot_of.get(s.day, 0)
        slot_of[s.day] = slot + 1
        s.index = index
        # sessions of one day get consecutive slices of 07:00-21:00, so times follow the order;
        # a session lasts under 90 minutes, so slices of >= 3.5 hours never overlap
        width = 14 * 60 // per_day[s.day]
        minute = 7 * 60 + slot * width + rng.randrange(max(1, width - 90))
        s.start = plan.start + timedelta(days=s.day, minutes=minute)
        offsets = array("I")
        at = 0
        for k in range(s.n_turns):
            offsets.append(at)
            # after a user turn the assistant answers fast; after an assistant turn the user reads and types
            at += rng.randint(20, 90) if k % 2 == 0 else rng.randint(40, 240)
        s.turn_offsets = offsets
        label = s.labelled
        if label is not None:
            s.item.turn_id = turn_id(pid, index, label)  # type: ignore[union-attr]
            s.item.timestamp = s.turn_time(label)  # type: ignore[union-attr]


def session_id(persona_id: str, index: int) -> str:
    return f"{persona_id}-s{index:03d}"


def turn_id(persona_id: str, index: int, k: int) -> str:
    return f"{session_id(persona_id, index)}-t{k:02d}"


def history_start(rng: random.Random) -> datetime:
    return EPOCH + timedelta(days=rng.randrange(START_OFFSET_DAYS))


def now_day(plan: PersonaPlan) -> datetime:
    """Midnight of the day of the persona's tasks (the day after the last history day)."""
    return plan.start + timedelta(days=plan.span_days)


def state_spans(plan: PersonaPlan) -> list[PersonaStateSpan]:
    base = now_day(plan)
    return [
        PersonaStateSpan(
            state=s.state.id,
            description=s.state.description,
            start=iso(base - timedelta(days=s.start_ago)),
            end=iso(base - timedelta(days=s.end_ago)),
        )
        for s in plan.spans
    ]


def history_lines(plan: PersonaPlan, texts: Callable[[SessionPlan], list[str]]) -> Iterator[str]:
    """The persona's history in time order, one Turn's JSON line each; `texts` writes the text of
    one session."""
    pid = plan.persona.id
    for s in plan.sessions:
        sid = session_id(pid, s.index)
        body = texts(s)
        if len(body) != s.n_turns:
            raise RuntimeError(f"writer returned {len(body)} turns for session {sid}, planned {s.n_turns}")
        for k, (ts, text) in enumerate(zip(s.turn_times, body)):
            # the JSON directly: every field is produced here in the right shape, and no Turn
            # models keep the full build (millions of turns) fast
            yield turn_line(f"{sid}-t{k:02d}", sid, ts, "user" if k % 2 == 0 else "assistant", text)
