"""What every model-written exchange of the LLM writer shares: write, check, rewrite; spans; usage.

An exchange (an evidence or state exchange, a distractor's) is written by one prompt, its labelled
turn checked by another (build_evidence_check or build_distractor_check), and rewritten with the
check's reason up to `max_rewrites` times; a turn that never passes is kept and reported. The check
also quotes the words that show each value: where a quote (or else the planned cue) is found in the
turn, it is the label's span (EvidenceLabel.span/clause); where neither is, the label has no span.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from pydantic import BaseModel, Field, create_model

from iba import prompts
from iba.construct import evidence_bank as bank
from iba.construct.evidence import Span, clause
from iba.llm.base import Backend, Completion
from iba.llm.structured import StructuredOutputError, complete_json
from iba.types import Scenario, Usage

# How each Table 12 signal type shows, described abstractly: the writer is never handed stock
# phrases (least of all the cue words the retrieval side looks for), so the evidence is worded freely.
SIGNAL_INSTRUCTIONS = {
    "explicit_revision": "you ask the assistant to adjust what it just gave you so that it fits what you want.",
    "complaint": "you react with strong feeling to getting the opposite of what you want.",
    "direct_statement": "you mention, in passing, a concrete fact about your life that makes it plain.",
    "implicit_pattern": "you show it through what you keep doing: the choice you make each time, told as a routine, not as a rule.",
}
WRITE_TEMPERATURE = 0.7
NO_VERDICT = "the check gave no valid verdict"
MIN_QUOTE = 8  # characters: a shorter quote ("yes", "spicy") says nothing about where the clause is


def _squash(text: str) -> str:
    return " ".join(text.split())


class TwoTurns(BaseModel):
    first: str = Field(min_length=1)
    second: str = Field(min_length=1)


class AsideTurns(BaseModel):
    user: str = Field(min_length=1)
    assistant: str = Field(min_length=1)


@lru_cache(maxsize=None)
def verdict_model(n_targets: int, distractor: bool) -> type[BaseModel]:
    """The check's JSON: reveals, states_outright (and reveals_other for a distractor), one quote
    per target (minItems/maxItems constrain decoding), a reason."""
    fields: dict[str, Any] = {"reveals": (bool, ...), "states_outright": (bool, ...)}
    if distractor:
        fields["reveals_other"] = (bool, ...)
    fields["quotes"] = (list[str], Field(min_length=n_targets, max_length=n_targets))
    fields["reason"] = (str, "")
    return create_model(f"{'Distractor' if distractor else 'Evidence'}Verdict{n_targets}", **fields)


@lru_cache(maxsize=None)
def chat_model(n: int) -> type[BaseModel]:
    """A JSON shape with exactly `n` turns (the schema's minItems/maxItems constrain decoding)."""
    return create_model(f"ChatSession{n}", turns=(list[str], Field(min_length=n, max_length=n)))


def names_it(text: str, avoid: list[str]) -> str | None:
    """The first phrase of `avoid` that `text` contains (case-insensitive), if any."""
    low = _squash(text.lower())
    for phrase in avoid:
        p = phrase.lower().strip().rstrip(".")
        if p and re.search(rf"\b{re.escape(p)}\b", low):
            return phrase
    return None


def locate(text: str, phrase: str) -> Span | None:
    """Where `phrase` (a quote or a cue, as a clause, quote marks stripped) sits in `text`,
    ignoring case; None when it is not there verbatim or is too short to mean anything."""
    p = clause(phrase).strip(" \"'“”‘’`").rstrip(".,;:")
    low = text.lower()
    if len(p) < MIN_QUOTE or len(low) != len(text):
        return None
    i = low.find(p.lower())
    return None if i < 0 else (i, i + len(p), text[i : i + len(p)])


def recover_spans(text: str, wanted: list[tuple[str, str]], quotes: list[str]) -> dict[str, Span]:
    """Each (name, planned cue) of `wanted` located in `text`: by the check's quote for it, else by
    the cue itself; left out where neither is in the text."""
    out: dict[str, Span] = {}
    for k, (name, cue) in enumerate(wanted):
        for phrase in (quotes[k] if k < len(quotes) else "", cue):
            hit = locate(text, phrase) if phrase else None
            if hit is not None:
                out[name] = hit
                break
    return out


@dataclass
class Written:
    """One model-written piece of a session: an exchange's turns, or a session's chat filler.
    turns None: the model gave nothing usable and the procedural text stands in (a fallback)."""

    key: str
    role: str  # evidence, state, a distractor form, or chat
    turns: list[str] | None
    spans: dict[str, Span] = field(default_factory=dict)
    wanted_spans: int = 0
    attempts: int = 0
    passed: bool | None = None  # None: not checked (chat filler)
    problems: list[str] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    by_prompt: dict[str, Usage] = field(default_factory=dict)  # the same, per prompt template (what a rewrite repeats)

    def tally(self, prompt: str, completions: list[Completion]) -> None:
        for c in completions:
            self.usage = self.usage.add(c.usage())
            self.by_prompt[prompt] = self.by_prompt.get(prompt, Usage()).add(c.usage())

    def record(self) -> dict[str, Any]:
        return {
            "key": self.key, "role": self.role, "attempts": self.attempts, "passed": self.passed,
            "fallback": self.turns is None, "problems": self.problems, "spans": len(self.spans),
            "wanted_spans": self.wanted_spans, "usage": self.usage.model_dump(exclude={"reused_prompt_tokens"}),
            "usage_by_prompt": {k: u.model_dump(exclude={"reused_prompt_tokens"}) for k, u in sorted(self.by_prompt.items())},
        }


Check = tuple[bool, str, list[str]]  # passed, why not, quotes


class ExchangeModel:
    """The model side of the LLM writer: structured calls (usage tallied per piece), the checks,
    and the write-check-rewrite loop."""

    def __init__(self, backend: Backend, max_rewrites: int, *, concurrency: int | None = None) -> None:
        self.backend = backend
        self.max_rewrites = max_rewrites
        # model calls in flight at once (None: no bound, for a batch build, which calls no model)
        self._sem = asyncio.Semaphore(concurrency) if concurrency else None

    async def json(self, piece: Written, name: str, model: type[BaseModel], *, max_tokens: int, temperature: float,
                   seed: int, **variables: Any) -> Any:
        p = prompts.render(name, **variables)
        try:
            async with self._sem or contextlib.nullcontext():
                obj, comps = await complete_json(self.backend, p.messages, model, max_tokens=max_tokens,
                                                 temperature=temperature, seed=seed)
        except StructuredOutputError as e:
            piece.tally(name, e.completions)
            raise
        piece.tally(name, comps)
        return obj

    async def check(self, piece: Written, text: str, targets: list[str], avoid: list[str], *,
                    forbidden: list[str] | None = None) -> Check:
        """build_evidence_check (or, with `forbidden`, the preferences a distractor must not reveal:
        build_distractor_check) on `text`; a phrase of `avoid` in the text fails it without a call."""
        named = names_it(text, avoid)
        if named:
            return False, f"the message names it outright ({named!r})", []
        distractor = forbidden is not None
        try:
            v = await self.json(
                piece, "build_distractor_check" if distractor else "build_evidence_check", verdict_model(len(targets), distractor),
                max_tokens=120 + 80 * len(targets), temperature=0.0, seed=0, text=text, targets=targets,
                avoid=avoid, **({"forbidden": forbidden} if distractor else {}),
            )
        except StructuredOutputError:
            return False, NO_VERDICT, []
        quotes = [_squash(q) for q in v.quotes]
        if not v.reveals:
            return False, f"does not reveal it: {v.reason}".strip(), quotes
        if v.states_outright:
            return False, f"states it outright: {v.reason}".strip(), quotes
        if distractor and v.reveals_other:
            return False, f"reveals a preference of the user's tasks: {v.reason}".strip(), quotes
        return True, "", quotes

    async def checked(
        self, piece: Written, write: Callable[[str, str, int], Awaitable[list[str]]], labelled: int,
        check: Callable[[str], Awaitable[Check]] | None, wanted: list[tuple[str, str]],
    ) -> Written:
        """Fill `piece`: `write(feedback, previous, attempt)` gives the exchange's turns (or raises
        StructuredOutputError), the turn at `labelled` is checked, and written again with the reason
        while it fails, at most max_rewrites times; its spans are recovered for `wanted` (name, cue).
        check None: nothing to check (filler chat), one attempt."""
        feedback = previous = ""
        quotes: list[str] = []
        piece.wanted_spans = len(wanted)
        for attempt in range(self.max_rewrites + 1 if check is not None else 1):
            piece.attempts = attempt + 1
            try:
                turns = [_squash(t) for t in await write(feedback, previous, attempt)]
            except StructuredOutputError as e:
                piece.problems.append(f"attempt {piece.attempts}: the writer gave no valid JSON ({e})")
                feedback, previous = "the reply was not the requested JSON", ""
                continue
            if not all(turns):
                piece.problems.append(f"attempt {piece.attempts}: the writer gave an empty message")
                feedback, previous = "a message was empty", ""
                continue
            piece.turns = turns
            if check is None:
                break
            ok, reason, quotes = await check(turns[labelled])
            piece.passed = ok
            if ok:
                break
            if reason == NO_VERDICT:  # the check's own failure says nothing about the turn: no rewrite
                piece.problems.append(f"attempt {piece.attempts}: {reason}; the turn is kept unconfirmed")
                break
            piece.problems.append(f"attempt {piece.attempts}: {reason}")
            feedback, previous = reason, turns[labelled]
        if piece.turns is not None:
            piece.spans = recover_spans(piece.turns[labelled], wanted, quotes)
        else:
            piece.passed = None
            piece.problems.append("used the procedural text")
        return piece


async def user_exchange(
    model: ExchangeModel, piece: Written, *, persona: str, scenario: Scenario, topic: str, position: int, targets: list[str],
    cues: list[str], avoid: list[str], signal_type: str, check: Callable[[str], Awaitable[Check]], wanted: list[tuple[str, str]],
    seed_of: Callable[[int], int], pick: random.Random, **extra: Any,
) -> Written:
    """A four-turn exchange about a past task of `scenario` (an evidence one, or a distractor's in
    the same words): the user simulator writes the two user turns (build_user_turns, the revealing
    one at `position` 0 or 2), which are checked and rewritten; then the assistant writes the two
    replies (build_assistant_turns). `extra`: for_whom, mid_session, anchor, recent. `pick` draws
    the procedural replies used when the assistant's JSON never validates."""
    name = scenario.name.lower()

    async def write(feedback: str, previous: str, attempt: int) -> list[str]:
        obj = await model.json(
            piece, "build_user_turns", TwoTurns, max_tokens=300, temperature=WRITE_TEMPERATURE, seed=seed_of(attempt),
            persona=persona, scenario=name, topic=topic, position=position, targets=targets, cues=cues, avoid=avoid,
            signal_instruction=SIGNAL_INSTRUCTIONS[signal_type], feedback=feedback, previous=previous, **extra,
        )
        # placeholders for the replies, written once the user's turns are settled (never checked nor kept)
        return [obj.first, "-", obj.second, "-"]

    await model.checked(piece, write, position, check, wanted)
    if piece.turns is None:
        return piece
    first, second = piece.turns[0], piece.turns[2]
    try:
        reply = await model.json(
            piece, "build_assistant_turns", TwoTurns, max_tokens=300, temperature=WRITE_TEMPERATURE, seed=seed_of(99),
            scenario=name, topic=topic, action=scenario.action, first=first, second=second,
        )
        replies = [_squash(reply.first) or "-", _squash(reply.second) or "-"]
    except StructuredOutputError as e:
        piece.problems.append(f"the assistant writer gave no valid JSON ({e}); its replies are procedural")
        drafts = bank.DRAFTS_API if scenario.action == "call_api" else bank.DRAFTS_TEXT
        replies = [pick.choice(drafts).format(topic=topic), pick.choice(bank.SHORT_ACKS)]
    piece.turns = [first, replies[0], second, replies[1]]
    return piece

