"""The LLM writer (`iba build --writer llm --model M`): the planned ground truth, text by a model.

Roles, each a prompt template: a user simulator with the persona writes the user turns of every
exchange that carries a preference (evidence, and the distractors' preference talk no task depends
on: iba.construct.llm_distractors), an assistant writes the replies, a casual-chat writer writes the
sessions' filler chat and the exchanges that mention a transient state. An LLM check confirms that
each labelled turn reveals its value without naming it, and each distractor its own value and none
of the key's (JSON verdicts); a failing turn is rewritten up to `max_rewrites` times, then kept and
reported in writer_report.json and the manifest. A piece whose JSON never validates falls back to
the procedural text (also reported). Spans are recovered where the clause is found in the turn
(iba.construct.llm_exchange).

Scope: `all` writes every turn with the model; `exchanges` writes only the evidence, state and
distractor exchanges and keeps the filler chat procedural (far fewer calls and tokens).

Sessions go to a journal as they finish, so an interrupted build resumes (iba.construct.llm_journal).
With a batch folder (`--batch DIR`) no model is called: every call becomes an OpenAI Batch API
request line (iba.batch), answered calls are replayed, and the build stops with BatchPending while
any session waits; each rerun writes the next round, until every session is in the journal.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from iba import prompts
from iba.construct import evidence_bank as bank
from iba.construct.distractors import FORMS, exchange_size
from iba.construct.llm_distractors import write_distractor
from iba.construct.llm_exchange import WRITE_TEMPERATURE, Check, ExchangeModel, Written, chat_model, user_exchange
from iba.construct.llm_journal import Journal
from iba.construct.personas import persona_summary
from iba.construct.plan_types import EvidenceItem, PersonaPlan, SessionPlan, StateMention
from iba.construct.procedural_writer import ProceduralWriter
from iba.construct.rng import derive
from iba.dataset import dump_json
from iba.llm.base import Backend, CallDeferred
from iba.types import Usage, stable_hash

CATEGORY_HINTS = {"help": "a help request on an everyday topic", "chat": "light small talk"}
# what the model writes: every turn, or only the exchanges that carry a preference or a state
SCOPES = {
    "all": "every turn (filler chat included)",
    "exchanges": "the evidence, distractor and state exchanges; filler chat stays procedural",
}
PROMPTS = ("build_user_turns", "build_assistant_turns", "build_aside_turns", "build_casual_chat", "build_evidence_check",
           "build_distractor_check")


class BatchPending(Exception):
    """A batch build that waits for answers: the round written, and how many sessions wait."""

    def __init__(self, root: Path, round_dir: Path | None, written: int, waiting: int, sessions: int, total: int) -> None:
        self.root, self.round_dir, self.written, self.waiting = root, round_dir, written, waiting
        self.sessions, self.total = sessions, total
        super().__init__(f"{sessions} of {total} session(s) wait for batch answers in {root}")


def plan_hash(plans: list[PersonaPlan], seed: int) -> str:
    return stable_hash([seed, [[s.key, s.n_turns, s.turn_times[:1]] for p in plans for s in p.sessions]])


async def settle(jobs: dict[str, Awaitable[Written]]) -> dict[str, Written]:
    """Every job run to its end; then the first deferred call (a batch request), if any, is raised:
    all the session's pieces put their requests into the same round."""
    async def one(job: Awaitable[Written]) -> Written | CallDeferred:
        try:
            return await job
        except CallDeferred as d:
            return d

    names = list(jobs)
    async with asyncio.TaskGroup() as tg:
        tasks = [tg.create_task(one(jobs[n])) for n in names]
    results = [t.result() for t in tasks]
    for r in results:
        if isinstance(r, CallDeferred):
            raise r
    return dict(zip(names, results))  # type: ignore[arg-type]


def _first_error(eg: BaseExceptionGroup) -> BaseException:
    e: BaseException = eg
    while isinstance(e, BaseExceptionGroup):
        e = e.exceptions[0]
    return e


class LLMWriter:
    name = "llm"

    def __init__(
        self, backend: Backend, out_dir: str | Path, *, seed: int = 42, max_rewrites: int = 2, concurrency: int = 4,
        progress: bool = True, scope: str = "all", batch: str | Path | None = None, anchor_rates: dict[str, float] | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError("--concurrency must be at least 1")
        if scope not in SCOPES:
            raise ValueError(f"unknown llm scope {scope!r}; choose from: {', '.join(SCOPES)}")
        self.folder = None
        if batch is not None:
            from iba.batch.backend import BatchBackend
            from iba.batch.folder import BatchFolder

            self.folder = BatchFolder(batch, create=True)
            backend = BatchBackend(backend, self.folder)
        self.backend = backend
        self.out = Path(out_dir)
        self.seed = seed
        self.max_rewrites = max_rewrites
        # a batch build calls no model: every session runs at once, so one round holds every request
        self.concurrency = concurrency
        self.model = ExchangeModel(backend, max_rewrites, concurrency=None if self.folder else concurrency)
        self.progress = progress
        self.scope = scope
        # how often an evidence turn names its scenario (the build's matched rates, see
        # distractors.AnchorCounts.rates), so that naming it tells evidence from distractors no better than chance
        self.anchor_rates = anchor_rates
        self.fallback = ProceduralWriter(seed)
        self.journal: Journal | None = None

    # ------------------------------------------------------------------ orchestration

    def write_all(self, plans: list[PersonaPlan]):
        """Write every session not yet in the journal; returns the text lookup for the builder.
        Raises BatchPending (after writing the round) while a batch build waits for answers."""
        self.journal = Journal(self.out, plan_hash(plans, self.seed), self.backend.model_id, self.scope)
        todo = [(p, s) for p in plans for s in p.sessions if s.key not in self.journal]
        self.waiting = 0
        asyncio.run(self._run(todo))
        if self.folder is not None:
            round_dir, written, waiting = self.folder.flush()
            if self.waiting:
                total = sum(len(p.sessions) for p in plans)
                raise BatchPending(self.folder.root, round_dir, written, waiting, self.waiting, total)
        self._write_report(plans)
        return self.texts

    async def _run(self, todo: list[tuple[PersonaPlan, SessionPlan]]) -> None:
        from tqdm import tqdm

        sem = asyncio.Semaphore(len(todo) + 1 if self.folder else self.concurrency)
        bar = tqdm(total=len(todo), desc="llm writer" + (" (batch)" if self.folder else ""), unit="session",
                   disable=not self.progress)

        async def one(plan: PersonaPlan, session: SessionPlan) -> None:
            async with sem:
                try:
                    entry = await self.write_session(plan, session)
                except CallDeferred:  # a batch request awaits its answer: a later run goes on
                    self.waiting += 1
                    bar.update(1)
                    return
            self.journal.add(entry)  # type: ignore[union-attr]
            bar.update(1)

        try:
            async with asyncio.TaskGroup() as tg:
                for plan, session in todo:
                    tg.create_task(one(plan, session))
        except BaseExceptionGroup as eg:  # surface the first real failure, not the group
            raise _first_error(eg) from None
        finally:
            bar.close()

    def texts(self, plan: PersonaPlan, session: SessionPlan) -> list[str]:
        return list(self.journal.entries[session.key]["texts"])  # type: ignore[union-attr]

    @property
    def spans(self) -> dict[str, dict[str, tuple[int, int, str]]]:
        """Item key -> dimension (or "state") -> span of its clause, where one was found."""
        out: dict[str, dict[str, tuple[int, int, str]]] = {}
        for e in self.journal.entries.values():  # type: ignore[union-attr]
            for key, names in e["spans"].items():
                out[key] = {n: (s[0], s[1], s[2]) for n, s in names.items()}
        return out

    # ------------------------------------------------------------------ one session

    def _seeds(self, key: str) -> Callable[[int], int]:
        return lambda attempt: derive(self.seed, key, "llm", attempt).randrange(2**31)

    async def write_session(self, plan: PersonaPlan, session: SessionPlan) -> dict[str, Any]:
        """The session's journal entry: its pieces written at once (each exchange and, in scope
        all, the filler chat), then put together."""
        persona = persona_summary(plan.persona)
        jobs: dict[str, Awaitable[Written]] = {}
        if session.kind == "evidence":
            jobs[session.item.key] = self._evidence(session, persona)  # type: ignore[union-attr]
        elif session.kind == "state":
            jobs[session.item.key] = self._state(session, persona)  # type: ignore[union-attr]
        for offset, d in session.distractors:
            jobs[d.key] = write_distractor(self.model, plan, d, persona=persona, mid_session=offset > 0, seed_of=self._seeds(d.key),
                                           pick=derive(self.seed, d.key, "llm-draws"))
        if self.scope == "all":
            jobs[f"{session.key}#chat"] = self._chat(session, persona)
        pieces = await settle(jobs)
        return self._compose(plan, session, pieces)

    async def _evidence(self, session: SessionPlan, persona: str) -> Written:
        item: EvidenceItem = session.item  # type: ignore[assignment]
        piece = Written(key=item.key, role="evidence", turns=None)
        targets = [r.value_text for r in item.reveals]
        avoid = sorted({r.dimension_name for r in item.reveals})
        pick = derive(self.seed, item.key, "llm-draws")
        rate = bank.ANCHOR_PROB if self.anchor_rates is None else self.anchor_rates.get(item.scenario.id, 0.0)
        anchor = pick.random() < rate
        recent = item.recent and pick.random() < bank.RECENT_PROB

        async def check(text: str):
            return await self.model.check(piece, text, targets, avoid + targets)

        return await user_exchange(
            self.model, piece, persona=persona, scenario=item.scenario, topic=item.topic or f"my {item.scenario.name.lower()}",
            position=item.position, targets=targets, cues=[r.cue for r in item.reveals], avoid=avoid, signal_type=item.signal_type,
            check=check, wanted=[(r.dimension, r.cue) for r in item.reveals], seed_of=self._seeds(item.key), pick=pick,
            mid_session=session.offset > 0, anchor=anchor, recent=recent,
        )

    async def _state(self, session: SessionPlan, persona: str) -> Written:
        """A four-turn chat whose first user turn mentions the state in passing (checked when the
        state is active: then it is evidence of the constraints the state implies)."""
        mention: StateMention = session.item  # type: ignore[assignment]
        piece = Written(key=mention.key, role="state", turns=None)
        check = None
        if mention.active:
            avoid = sorted({c.dimension.replace("_", " ") for c in mention.state.constrains})

            async def check(text: str):
                return await self.model.check(piece, text, [mention.state.description], avoid)

        return await self._casual(piece, persona, 4, "an everyday question of your choice", "help", mention.cue, check,
                                  [("state", mention.cue)])

    async def _chat(self, session: SessionPlan, persona: str) -> Written:
        """The session's filler chat: all its turns, the exchanges written over their places."""
        piece = Written(key=f"{session.key}#chat", role="chat", turns=None)
        return await self._casual(piece, persona, session.n_turns, session.noise.topic,  # type: ignore[union-attr]
                                  session.noise.category, "", None, [])  # type: ignore[union-attr]

    async def _casual(self, piece: Written, persona: str, n: int, topic: str, category: str, mention: str,
                      check: Callable[[str], Awaitable[Check]] | None, wanted: list[tuple[str, str]]) -> Written:
        """An `n`-turn chat on `topic` (build_casual_chat) whose first user turn mentions `mention` if
        given; checked by `check` and written again while it fails, or (None) written once."""
        seed_of = self._seeds(piece.key)

        async def write(feedback: str, previous: str, attempt: int) -> list[str]:
            obj = await self.model.json(
                piece, "build_casual_chat", chat_model(n), max_tokens=min(2048, 90 * n), temperature=WRITE_TEMPERATURE,
                seed=seed_of(attempt), persona=persona, topic=topic, n_turns=n, category_hint=CATEGORY_HINTS[category],
                mention=mention,
            )
            return list(obj.turns)

        return await self.model.checked(piece, write, 0, check, wanted)

    def _compose(self, plan: PersonaPlan, session: SessionPlan, pieces: dict[str, Written]) -> dict[str, Any]:
        """The session's turns: each exchange the model wrote at its place, the procedural text
        where it gave nothing usable, and the filler chat (the model's in scope all)."""
        item = session.item if session.kind != "noise" else None
        core = pieces[item.key].turns if item is not None else None  # type: ignore[union-attr]
        written = {d.key: pieces[d.key].turns for _, d in session.distractors if pieces[d.key].turns is not None}
        texts = self.fallback.pad(plan, session, core, written)  # type: ignore[arg-type]
        chat = pieces.get(f"{session.key}#chat")
        if chat is not None and chat.turns is not None:
            taken: set[int] = set(range(session.offset, session.offset + 4)) if item is not None else set()
            for offset, d in session.distractors:
                taken |= set(range(offset, offset + exchange_size(d)))
            texts = [t if k in taken else chat.turns[k] for k, t in enumerate(texts)]
        spans: dict[str, dict[str, list]] = {}
        for key in ([item.key] if item is not None else []) + [d.key for _, d in session.distractors]:  # type: ignore[union-attr]
            found = pieces[key].spans if pieces[key].turns is not None else self.fallback.spans.get(key, {})
            self.fallback.spans.pop(key, None)
            spans[key] = {n: list(s) for n, s in found.items()}
        usage = Usage()
        for p in pieces.values():
            usage = usage.add(p.usage)
        return {
            "key": session.key,
            "kind": session.kind,
            "turn_id": getattr(item, "turn_id", "") if session.labelled is not None else "",
            "texts": texts,
            "spans": spans,
            "pieces": [p.record() for p in pieces.values()],
            "usage": usage.model_dump(exclude={"reused_prompt_tokens"}),
        }

    # ------------------------------------------------------------------ records

    def report(self, plans: list[PersonaPlan]) -> dict[str, Any]:
        entries = [self.journal.entries[s.key] for p in plans for s in p.sessions]  # type: ignore[union-attr]
        pieces = [p for e in entries for p in e["pieces"]]
        labelled = [p for e in entries if e["turn_id"] for p in e["pieces"] if p["role"] in ("evidence", "state")]
        distractors = [p for p in pieces if p["role"] in FORMS]

        def checks(ps: list[dict[str, Any]]) -> dict[str, int]:
            checked = [p for p in ps if p["passed"] is not None]
            return {
                "checked_turns": len(checked),
                "passed": sum(p["passed"] is True for p in checked),
                "failed_after_rewrites": sum(p["passed"] is False for p in checked),
                "rewrites": sum(max(0, p["attempts"] - 1) for p in checked),
                "fallbacks": sum(p["fallback"] for p in ps),
                "spans_found": sum(p["spans"] for p in ps),
                "spans_wanted": sum(p["wanted_spans"] for p in ps),
            }

        usage: dict[str, dict[str, int]] = {}
        for p in pieces:
            u = usage.setdefault(p["role"], {"pieces": 0, "llm_calls": 0, "prompt_tokens": 0, "completion_tokens": 0})
            u["pieces"] += 1
            for k in ("llm_calls", "prompt_tokens", "completion_tokens"):
                u[k] += p["usage"][k]
        total = {k: sum(u[k] for u in usage.values()) for k in ("llm_calls", "prompt_tokens", "completion_tokens")}
        lab = checks(labelled)
        return {
            "model": self.backend.model_id,
            "scope": self.scope,
            "max_rewrites": self.max_rewrites,
            "sessions": len(entries),
            # the labelled turns (evidence, active state mentions), as before distractors were written
            **{k: lab[k] for k in ("checked_turns", "passed", "failed_after_rewrites", "rewrites")},
            "fallbacks": sum(p["fallback"] for p in pieces),
            "labelled": lab,
            "distractors": checks(distractors),
            "chat": {"written": sum(p["role"] == "chat" for p in pieces),
                     "fallbacks": sum(p["fallback"] for p in pieces if p["role"] == "chat")},
            "failures": [{"key": p["key"], "role": p["role"], "problems": p["problems"]}
                         for p in pieces if p["fallback"] or p["passed"] is False],
            # the calls the text took (each journaled session's; a resumed or batch build counts each once)
            "usage": total,
            "usage_by_role": usage,
            "prompt_hashes": {n: prompts.template_hash(n) for n in PROMPTS},
        }

    def _write_report(self, plans: list[PersonaPlan]) -> None:
        self._report = self.report(plans)
        dump_json(self.out / "writer_report.json", self._report)

    def manifest_params(self) -> dict[str, Any]:
        r = self._report
        return {
            "writer_model": r["model"],
            "llm_scope": r["scope"],
            "max_rewrites": r["max_rewrites"],
            "writer_report": {**{k: r[k] for k in ("checked_turns", "passed", "failed_after_rewrites", "rewrites", "fallbacks")},
                              "distractors": r["distractors"], "usage": r["usage"]},
            "prompt_hashes": r["prompt_hashes"],
        }
