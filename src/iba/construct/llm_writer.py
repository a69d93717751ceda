"""The LLM writer (`iba build --writer llm --model M`): the planned ground truth, text by a model.

Roles, each a prompt template: a user simulator with the persona writes the user turns of an
evidence session (told the value and the signal type, told not to state it outright), an
assistant writes the replies, a casual-chat writer writes noise sessions and the sessions that
mention a transient state. An LLM check then confirms each evidence turn reveals its value
without naming it (JSON verdict); a failing turn is rewritten up to `max_rewrites` times, then
kept and reported in writer_report.json and the manifest. A session whose JSON never validates
falls back to the procedural text (also reported). Results go to a journal as they finish, so an
interrupted build resumes (see iba.construct.llm_journal). Model calls run with bounded concurrency.
"""

from __future__ import annotations

import asyncio
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, create_model

from iba import prompts
from iba.construct.llm_journal import Journal
from iba.construct.personas import persona_summary
from iba.construct.plan_types import EvidenceItem, PersonaPlan, SessionPlan, StateMention
from iba.construct.procedural_writer import ProceduralWriter
from iba.construct.rng import derive
from iba.dataset import dump_json
from iba.llm.base import Backend
from iba.llm.structured import StructuredOutputError, complete_json
from iba.types import Usage, stable_hash

# How each Table 12 signal type shows, described abstractly: the writer is never handed stock
# phrases (least of all the cue words the retrieval side looks for), so the evidence is worded freely.
SIGNAL_INSTRUCTIONS = {
    "explicit_revision": "you ask the assistant to adjust what it just gave you so that it fits what you want.",
    "complaint": "you react with strong feeling to getting the opposite of what you want.",
    "direct_statement": "you mention, in passing, a concrete fact about your life that makes it plain.",
    "implicit_pattern": "you show it through what you keep doing: the choice you make each time, told as a routine, not as a rule.",
}
WRITE_TEMPERATURE = 0.7
CATEGORY_HINTS = {"help": "a help request on an everyday topic", "chat": "light small talk"}


class UserTurns(BaseModel):
    first: str = Field(min_length=1)
    second: str = Field(min_length=1)


class AssistantTurns(BaseModel):
    first: str = Field(min_length=1)
    second: str = Field(min_length=1)


class EvidenceVerdict(BaseModel):
    reveals: bool
    states_outright: bool
    reason: str = ""


@lru_cache(maxsize=None)
def chat_model(n: int) -> type[BaseModel]:
    """A JSON shape with exactly `n` turns (the schema's minItems/maxItems constrain decoding)."""
    return create_model(f"ChatSession{n}", turns=(list[str], Field(min_length=n, max_length=n)))


def names_it(text: str, avoid: list[str]) -> str | None:
    """The first phrase of `avoid` that `text` contains (case-insensitive), if any."""
    low = " ".join(text.lower().split())
    for phrase in avoid:
        p = phrase.lower().strip().rstrip(".")
        if p and re.search(rf"\b{re.escape(p)}\b", low):
            return phrase
    return None


def plan_hash(plans: list[PersonaPlan], seed: int) -> str:
    return stable_hash([seed, [[s.key, s.n_turns, s.turn_times[:1]] for p in plans for s in p.sessions]])


class LLMWriter:
    name = "llm"

    def __init__(
        self, backend: Backend, out_dir: str | Path, *, seed: int = 42, max_rewrites: int = 2, concurrency: int = 4, progress: bool = True
    ) -> None:
        if concurrency < 1:
            raise ValueError("--concurrency must be at least 1")
        self.backend = backend
        self.out = Path(out_dir)
        self.seed = seed
        self.max_rewrites = max_rewrites
        self.concurrency = concurrency
        self.progress = progress
        self.fallback = ProceduralWriter(seed)
        self.journal: Journal | None = None
        self.usage = Usage()

    # ------------------------------------------------------------------ orchestration

    def write_all(self, plans: list[PersonaPlan]):
        """Write every session not yet in the journal; returns the text lookup for the builder."""
        self.journal = Journal(self.out, plan_hash(plans, self.seed), self.backend.model_id)
        todo = [(p, s) for p in plans for s in p.sessions if s.key not in self.journal]
        asyncio.run(self._run(todo))
        self._write_report(plans)
        return self.texts

    async def _run(self, todo: list[tuple[PersonaPlan, SessionPlan]]) -> None:
        from tqdm import tqdm

        sem = asyncio.Semaphore(self.concurrency)
        bar = tqdm(total=len(todo), desc="llm writer", unit="session", disable=not self.progress)

        async def one(plan: PersonaPlan, session: SessionPlan) -> None:
            async with sem:
                entry = await self.write_session(plan, session)
            self.journal.add(entry)  # type: ignore[union-attr]
            bar.update(1)

        try:
            async with asyncio.TaskGroup() as tg:
                for plan, session in todo:
                    tg.create_task(one(plan, session))
        except BaseExceptionGroup as eg:  # surface the first real failure, not the group
            raise eg.exceptions[0] from None
        finally:
            bar.close()

    def texts(self, plan: PersonaPlan, session: SessionPlan) -> list[str]:
        return list(self.journal.entries[session.key]["texts"])  # type: ignore[union-attr]

    # ------------------------------------------------------------------ one session

    async def write_session(self, plan: PersonaPlan, session: SessionPlan) -> dict[str, Any]:
        persona = persona_summary(plan.persona)
        if session.kind == "evidence":
            return await self._evidence(plan, session, persona)
        mention = session.item if session.kind == "state" else None
        return await self._chat(plan, session, persona, mention)  # type: ignore[arg-type]

    def _seed(self, session: SessionPlan, attempt: int) -> int:
        return derive(self.seed, session.key, "llm", attempt).randrange(2**31)

    async def _json(self, name: str, model: type[BaseModel], *, max_tokens: int, temperature: float, seed: int, **vars: Any):
        p = prompts.render(name, **vars)
        obj, comps = await complete_json(self.backend, p.messages, model, max_tokens=max_tokens, temperature=temperature, seed=seed)
        for c in comps:
            self.usage = self.usage.add(c.usage())
        return obj

    async def _evidence(self, plan: PersonaPlan, session: SessionPlan, persona: str) -> dict[str, Any]:
        item: EvidenceItem = session.item  # type: ignore[assignment]
        targets = [r.value_text for r in item.reveals]
        avoid = sorted({r.dimension_name for r in item.reveals})
        scenario = item.scenario.name.lower()
        topic = item.topic or f"my {scenario}"
        problems: list[str] = []
        feedback = previous = ""
        user: UserTurns | None = None
        passed = False
        attempts = 0
        for attempt in range(self.max_rewrites + 1):
            attempts = attempt + 1
            try:
                candidate = await self._json(
                    "build_user_turns", UserTurns, max_tokens=300, temperature=WRITE_TEMPERATURE, seed=self._seed(session, attempt),
                    persona=persona, scenario=scenario, topic=topic, position=item.position, targets=targets,
                    cues=[r.cue for r in item.reveals], avoid=avoid, signal_instruction=SIGNAL_INSTRUCTIONS[item.signal_type],
                    feedback=feedback, previous=previous,
                )
            except StructuredOutputError as e:
                problems.append(f"attempt {attempts}: user simulator gave no valid JSON ({e})")
                feedback, previous = "the reply was not the requested JSON", ""
                continue
            user = candidate
            text = candidate.first if item.position == 0 else candidate.second
            ok, reason = await self._check(text, targets, avoid + targets)
            if ok:
                passed = True
                break
            problems.append(f"attempt {attempts}: {reason}")
            feedback, previous = reason, text
        if user is None:
            return self._fallback_entry(plan, session, attempts, problems)
        try:
            reply = await self._json(
                "build_assistant_turns", AssistantTurns, max_tokens=300, temperature=WRITE_TEMPERATURE, seed=self._seed(session, 99),
                scenario=scenario, topic=topic, action=item.scenario.action, first=user.first, second=user.second,
            )
        except StructuredOutputError as e:
            problems.append(f"assistant writer gave no valid JSON ({e}); replies are procedural")
            proc = self.fallback.standalone(plan, session)
            reply = AssistantTurns(first=proc[session.offset + 1], second=proc[session.offset + 3])
        core = [user.first, reply.first, user.second, reply.second]
        return self._entry(session, self.fallback.pad(plan, session, core), attempts, passed, problems)

    async def _check(self, text: str, targets: list[str], avoid: list[str]) -> tuple[bool, str]:
        named = names_it(text, avoid)
        if named:
            return False, f"the message names it outright ({named!r})"
        try:
            verdict = await self._json(
                "build_evidence_check", EvidenceVerdict, max_tokens=150, temperature=0.0, seed=0, text=text, targets=targets, avoid=avoid
            )
        except StructuredOutputError:
            return False, "the check gave no valid verdict"
        if not verdict.reveals:
            return False, f"does not reveal it: {verdict.reason}".strip()
        if verdict.states_outright:
            return False, f"states it outright: {verdict.reason}".strip()
        return True, ""

    async def _chat(self, plan: PersonaPlan, session: SessionPlan, persona: str, mention: StateMention | None) -> dict[str, Any]:
        # a state mention is a four-turn exchange inside filler chat (see SessionPlan.offset)
        n = session.n_turns if mention is None else 4
        if mention is not None:
            category, topic = "help", "an everyday question of your choice"
        else:
            category, topic = session.noise.category, session.noise.topic  # type: ignore[union-attr]
        problems: list[str] = []
        checked = mention is not None and mention.active
        avoid = sorted({c.dimension for c in mention.state.constrains}) if mention else []
        targets = [mention.state.description] if mention else []
        feedback_round = self.max_rewrites + 1 if checked else 1
        turns: list[str] | None = None
        passed: bool | None = None
        attempts = 0
        for attempt in range(feedback_round):
            attempts = attempt + 1
            try:
                obj = await self._json(
                    "build_casual_chat", chat_model(n), max_tokens=min(2048, 90 * n), temperature=WRITE_TEMPERATURE,
                    seed=self._seed(session, attempt), persona=persona, topic=topic, n_turns=n,
                    category_hint=CATEGORY_HINTS[category], mention=mention.cue if mention else "",
                )
            except StructuredOutputError as e:
                problems.append(f"attempt {attempts}: casual-chat writer gave no valid JSON ({e})")
                continue
            turns = list(obj.turns)  # type: ignore[attr-defined]
            if not checked:
                break
            ok, reason = await self._check(turns[0], targets, [a.replace("_", " ") for a in avoid])
            passed = ok
            if ok:
                break
            problems.append(f"attempt {attempts}: {reason}")
        if turns is None:
            return self._fallback_entry(plan, session, attempts, problems)
        if mention is not None:
            turns = self.fallback.pad(plan, session, turns)
        else:  # distractor exchanges in a chat session are procedural (not model-written) text
            turns = self.fallback.insert_distractors(plan, session, turns)
        return self._entry(session, turns, attempts, passed, problems)

    # ------------------------------------------------------------------ records

    def _entry(self, session: SessionPlan, texts: list[str], attempts: int, passed: bool | None, problems: list[str]) -> dict[str, Any]:
        item = session.item
        return {
            "key": session.key,
            "kind": session.kind,
            "turn_id": getattr(item, "turn_id", "") if session.labelled is not None else "",
            "texts": [" ".join(t.split()) for t in texts],
            "attempts": attempts,
            "passed": passed,
            "fallback": False,
            "problems": problems,
        }

    def _fallback_entry(self, plan: PersonaPlan, session: SessionPlan, attempts: int, problems: list[str]) -> dict[str, Any]:
        entry = self._entry(session, self.fallback.standalone(plan, session), attempts, None, problems + ["used the procedural text"])
        entry["fallback"] = True
        return entry

    def report(self, plans: list[PersonaPlan]) -> dict[str, Any]:
        entries = [self.journal.entries[s.key] for p in plans for s in p.sessions]  # type: ignore[union-attr]
        checked = [e for e in entries if e["passed"] is not None]
        failed = [e for e in checked if not e["passed"]]
        return {
            "model": self.backend.model_id,
            "max_rewrites": self.max_rewrites,
            "sessions": len(entries),
            "checked_turns": len(checked),
            "passed": len(checked) - len(failed),
            "failed_after_rewrites": len(failed),
            "rewrites": sum(max(0, e["attempts"] - 1) for e in checked),
            "fallbacks": sum(e["fallback"] for e in entries),
            "failures": [
                {"key": e["key"], "turn_id": e["turn_id"], "problems": e["problems"]} for e in entries if e["fallback"] or e["passed"] is False
            ],
            "usage_this_run": self.usage.model_dump(),  # calls made by this run (a resumed run skips finished sessions)
            "prompt_hashes": {n: prompts.template_hash(n) for n in ("build_user_turns", "build_assistant_turns", "build_casual_chat", "build_evidence_check")},
        }

    def _write_report(self, plans: list[PersonaPlan]) -> None:
        self._report = self.report(plans)
        dump_json(self.out / "writer_report.json", self._report)

    def manifest_params(self) -> dict[str, Any]:
        r = self._report
        return {
            "writer_model": r["model"],
            "max_rewrites": r["max_rewrites"],
            "writer_report": {k: r[k] for k in ("checked_turns", "passed", "failed_after_rewrites", "rewrites", "fallbacks")},
            "prompt_hashes": r["prompt_hashes"],
        }
