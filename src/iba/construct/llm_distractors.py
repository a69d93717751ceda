"""Distractor exchanges written by the model: preference talk no task of the user depends on.

The plan stays procedural (iba.construct.distractors decides, before any text, which preference a
distractor voices, whose it is and when, so the answer key is true whatever the text says); the
model writes the text in the four roles the procedural writer has:

- own_other_topic: the user's own preference on a past task of another scenario, by the evidence
  prompt itself (build_user_turns), so that only what it is about tells it from evidence;
- other_person: the same exchange about a task done for someone else (build_user_turns with
  `for_whom`), whose preference the reaction shows;
- ended / hypothetical: a remark in passing and the assistant's short reply (build_aside_turns).

build_distractor_check then asks that the turn reveal its own value (as evidence must) and none of
the values the user's tasks are scored on; a failing turn is rewritten like an evidence turn.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from iba.construct import evidence_bank as bank
from iba.construct.llm_exchange import (
    SIGNAL_INSTRUCTIONS, WRITE_TEMPERATURE, AsideTurns, Check, ExchangeModel, Written, user_exchange,
)
from iba.construct.plan_types import DistractorItem, PersonaPlan


def forbidden_values(plan: PersonaPlan) -> list[str]:
    """What no distractor of `plan`'s persona may reveal: every value its tasks' answer keys expect,
    and the old values evidence reveals for changed ones."""
    out = {c.expected.text for inst in plan.instances for c in inst.constraints}
    out |= {c.superseded.text for inst in plan.instances for c in inst.constraints if c.superseded is not None}
    return sorted(out)


def check_targets(item: DistractorItem) -> list[str]:
    """What the check must find in the turn, said with whose and when."""
    texts = [r.value_text for r in item.reveals]
    if item.form == "other_person" and item.person is not None:
        return [f"what {item.person[0]} wants (not the user): {t}" for t in texts]
    if item.form == "ended":
        return [f"a taste the user had once and has left behind: {t}" for t in texts]
    if item.form == "hypothetical":
        return [f"what the user would want if they ever dealt with {item.scenario.name.lower()}, which they do not: {t}" for t in texts]
    return texts


async def write_distractor(
    model: ExchangeModel, plan: PersonaPlan, item: DistractorItem, *, persona: str, mid_session: bool,
    seed_of: Callable[[int], int], pick: random.Random,
) -> Written:
    """The distractor's exchange (4 turns, or 2 for ended and hypothetical), checked; `seed_of(attempt)`
    seeds each writing attempt, `pick` draws what is drawn (a recent change, procedural replies)."""
    piece = Written(key=item.key, role=item.form, turns=None)
    scenario = item.scenario.name.lower()
    targets = [r.value_text for r in item.reveals]
    avoid = sorted({r.dimension_name for r in item.reveals})
    cues = [r.cue for r in item.reveals]
    wanted = [(r.dimension, r.cue) for r in item.reveals]
    forbidden = forbidden_values(plan)

    async def check(text: str) -> Check:
        return await model.check(piece, text, check_targets(item), avoid + targets, forbidden=forbidden)

    if item.form in ("ended", "hypothetical"):
        async def aside(feedback: str, previous: str, attempt: int) -> list[str]:
            obj = await model.json(
                piece, "build_aside_turns", AsideTurns, max_tokens=200, temperature=WRITE_TEMPERATURE, seed=seed_of(attempt),
                persona=persona, scenario=scenario, form=item.form, targets=targets, cues=cues, avoid=avoid,
                signal_instruction=SIGNAL_INSTRUCTIONS[item.signal_type], anchor=item.anchored or item.form == "hypothetical",
                feedback=feedback, previous=previous,
            )
            return [obj.user, obj.assistant]

        return await model.checked(piece, aside, 0, check, wanted)

    extra: dict[str, Any] = {"mid_session": mid_session, "anchor": item.anchored,
                             "recent": item.recent and pick.random() < bank.RECENT_PROB}
    if item.form == "other_person" and item.person is not None:
        extra["for_whom"] = item.person[0]
    return await user_exchange(
        model, piece, persona=persona, scenario=item.scenario, topic=item.topic or f"my {scenario}", position=item.position,
        targets=targets, cues=cues, avoid=avoid, signal_type=item.signal_type, check=check, wanted=wanted, seed_of=seed_of,
        pick=pick, **extra,
    )
