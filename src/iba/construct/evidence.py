"""Procedural text for the exchanges that carry preferences: evidence, distractors, state mentions.

An evidence exchange has four turns (its session pads it with filler, see iba.construct.noise). With
the labelled turn at position 2: the user asks for a past task of the scenario, the assistant offers
a first attempt, the user reacts with the evidence (revision, complaint, statement or habit), the
assistant acknowledges. At position 0 the evidence opens the exchange together with the request.
A distractor in the user's own voice about another scenario is the same exchange; other distractors
(someone else's preference, an ended one, a hypothetical) are one user turn and a short reply.

A preference turn varies the way real ones do: one preference or a few, the cue at the start, in
the middle or at the end, with context around it or none, sometimes naming its scenario, sometimes
told as a story involving someone else. Every text goes through the history's sentence budget.
Each rendered turn reports the span of every cue in it: the clause that reveals the value.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence

from iba.construct import evidence_bank as bank
from iba.construct import noise, noise_bank
from iba.construct.noise import Voice
from iba.construct.sentences import long_sentences
from iba.construct.plan_types import DistractorItem, EvidenceItem, NoiseSpec, Reveal, StateMention

Span = tuple[int, int, str]  # start, end, the clause text[start:end]
Spans = dict[str, Span]  # dimension id (or "state") -> span

_DOUBLE_PUNCT = re.compile(r"([.!?])[.!]+")
_SENTENCE_START = re.compile(r"([.!?]\s+)([a-z])")
ATTEMPTS = 40  # draws of a preference turn before the least-repeated one is taken
# where context sentences go in a preference turn: (before, after) counts and their weights
CONTEXT = ((0, 0), (1, 0), (0, 1), (1, 1), (2, 0), (0, 2))
CONTEXT_WEIGHTS = (8, 1.5, 1.5, 0.5, 0.25, 0.25)
# version 3: at most one, about as often as a noise user turn has one (coherent.ASIDE_RATE)
CONTEXT_WEIGHTS_V3 = (0.92, 0.04, 0.04, 0, 0, 0)


def clause(cue: str) -> str:
    """A cue as a clause: single spaces, no trailing full stop (kept: ? and !)."""
    return " ".join(cue.split()).rstrip(".").strip()


def tidy(text: str) -> str:
    """Single spaces, no doubled end marks, a capital after each sentence end."""
    text = _DOUBLE_PUNCT.sub(r"\1", " ".join(text.split()))
    return _SENTENCE_START.sub(lambda m: m.group(1) + m.group(2).upper(), text)


# Cues travel through templates and tidying as tokens, and are put in last, verbatim: tidying never
# touches a cue's text (its "..." or its capitals), and each cue's span is known exactly.
def _token(k: int, capital: bool = False) -> str:
    return f"\x01{k}\x01" if capital else f"\x00{k}\x00"


_TOKEN = re.compile(r"([\x00\x01])(\d+)\1")
_CUE_AFTER_END = re.compile(r"((?:^|[.!?])\s*)\x00(\d+)\x00")


def fill(template: str, named: Sequence[tuple[str, str]]) -> tuple[str, Spans]:
    """`template` with token k replaced by the clause of the k-th (name, cue), capitalised where
    its token says; the spans of the cues in the result. An end mark right after a cue that ends
    in one is dropped ("...!." -> "...!")."""
    out: list[str] = []
    spans: Spans = {}
    pos = 0
    at = 0
    for m in _TOKEN.finditer(template):
        out.append(template[pos : m.start()])
        at += m.start() - pos
        name, cue = named[int(m.group(2))]
        c = clause(cue)
        if m.group(1) == "\x01":
            c = noise.cap(c)
        out.append(c)
        spans[name] = (at, at + len(c), c)
        at += len(c)
        pos = m.end()
        if c[-1:] in ".!?" and template[pos : pos + 1] in (".", "!"):
            pos += 1
    out.append(template[pos:])
    missing = [n for n, _ in named if n not in spans]
    if missing:
        raise RuntimeError(f"writer bug: cues {missing} are not in their template {template!r}")
    return "".join(out), spans


def _person(rng: random.Random) -> dict[str, str]:
    who, they, them = bank.person(rng.choice(sorted(bank.PEOPLE)))
    return {"person": who, "Person": noise.cap(who), "they": they, "them": them, "where": rng.choice(bank.WHERE)}


def _first_piece(rng: random.Random, signal: str, *, anchor: str | None, frame: str | None, v3: bool = False) -> str:
    """The sentence that carries the first cue (token 0): a signal-type wrapper around the cue, around
    the cue with its scenario named, or around the cue in a `frame` (a text with one {cue}: a past
    or a hypothetical preference, a recent change)."""
    low = _token(0)
    if anchor:
        low = rng.choice(bank.ANCHORS_V3 if v3 else bank.ANCHORS).format(scenario=anchor, cue=low).rstrip(".")
    if frame:
        if v3 and anchor and not _keeps_capital(low):  # "as of this year, with X, ..." (v2: "With X")
            low = low[:1].lower() + low[1:]
        low = frame.format(cue=low)
    low = low if low.startswith(("I ", "I'")) else low[:1].lower() + low[1:]  # a clause, like the cue
    cap = noise.cap(low) if low[:1] not in "\x00\x01" else _token(0, capital=True) + low[len(_token(0)):]
    return rng.choice(bank.WRAPPERS[signal]).format(cue=low, Cue=cap)


def _lower_start(text: str) -> str:
    """The first letter in lower case (a token: its lower-case form), except for "I"."""
    if text.startswith(_token(0, capital=True)):
        return _token(0) + text[len(_token(0)):]
    return text if text.startswith(("I ", "I'")) else text[:1].lower() + text[1:]


def _keeps_capital(text: str) -> bool:
    """Version 3: `text` starts with a word that keeps its capital after a connector ("FYI", a name)."""
    from iba.construct.coherent import starts_proper

    return text[:1] not in "\x00\x01" and starts_proper(text)


def _attempt(rng: random.Random, voice: Voice, signal: str, n_cues: int, *, suffix: bool, anchor: str | None, frame: str | None) -> str:
    """One draw of a preference turn's template (cues as tokens)."""
    pieces = [_first_piece(rng, signal, anchor=anchor, frame=frame, v3=voice.version >= 3)]
    for k in range(1, n_cues):
        pieces.append(rng.choice(bank.CONNECTORS).format(cue=_token(k), Cue=_token(k, capital=True)))
    before, after = rng.choices(CONTEXT, weights=CONTEXT_WEIGHTS if voice.version < 3 else CONTEXT_WEIGHTS_V3, k=1)[0]
    context = [noise.aside(rng, voice, commit=False) for _ in range(before + after)]
    context = [c for c in context if c]
    if len(pieces) > 1 and context and rng.random() < 0.5:
        pieces.insert(rng.randrange(1, len(pieces)), context.pop())  # between two preferences
    body = " ".join([*context[:before], *pieces, *context[before:]])
    end = rng.choice(bank.SUFFIXES) if suffix else ""
    prefixes = bank.REACTION_PREFIXES if signal in ("explicit_revision", "complaint") else bank.PREFIXES
    prefix = rng.choice(prefixes)
    if prefix.endswith((", ", "but ")) and not body.startswith(("I ", "I'")) and not (voice.version >= 3 and _keeps_capital(body)):
        body = _lower_start(body)  # "Well, " and "Thanks, but " continue the sentence
    return prefix + body + end


def _least_used(voice: Voice, texts: Sequence[str]) -> str:
    return min(texts, key=lambda t: max((voice.budget.counts[s] for s in long_sentences(t)), default=0))


def _named(rng: random.Random, reveals: Sequence[Reveal], attempt: int) -> list[tuple[str, str]]:
    """(dimension, cue) of each reveal: the planned cue, or in the second half of the attempts
    another cue of the same value (the planned one's sentences may be used up in this history)."""
    if attempt < ATTEMPTS // 2:
        return [(r.dimension, r.cue) for r in reveals]
    return [(r.dimension, rng.choice(r.alternatives or (r.cue,))) for r in reveals]


def preference_text(
    rng: random.Random, voice: Voice, signal: str, reveals: Sequence[Reveal], *, suffix: bool = True,
    anchor: str | None = None, tail: str = "", frames: Sequence[str] = (),
) -> tuple[str, Spans]:
    """A user turn revealing `reveals` with the given Table 12 signal type, then `tail` (e.g. a
    request); the first cue in one of `frames` if given (filled but for {cue}). Drawn until it fits
    the budget (after ATTEMPTS draws, the one whose sentences are least used), marked used. Returns
    the text and the spans of the cues."""
    tried = []
    for attempt in range(ATTEMPTS):
        frame = rng.choice(frames) if frames else None
        body = _attempt(rng, voice, signal, len(reveals), suffix=suffix, anchor=anchor, frame=frame)
        template = tidy(f"{body} {tail}")
        if voice.version >= 3:  # a cue that starts a sentence starts with a capital (v2: as the wrapper had it)
            template = _CUE_AFTER_END.sub(lambda m: m.group(1) + _token(int(m.group(2)), capital=True), template)
        text, spans = fill(template, _named(rng, reveals, attempt))
        if voice.budget.fits(text):
            voice.budget.use(text)
            return text, spans
        tried.append((text, spans))
    text = _least_used(voice, [t for t, _ in tried])
    voice.budget.use(text)
    return text, next(sp for t, sp in tried if t == text)


def _take(rng: random.Random, voice: Voice, options: Sequence[str], fallback: Sequence[str], **fmt: str) -> str:
    """An option that fits the budget, or else one of `fallback` (short sentences: never bounded)."""
    # rendered lazily, as tried (most fit at the first try; rendering every option cost more)
    got = voice.budget.take(rng, options, render=lambda o: o.format(**fmt))
    if got is not None:
        return got.format(**fmt)
    short = rng.choice(list(fallback)).format(**fmt)
    assert not long_sentences(short), f"a fallback must be short: {short!r}"
    return short


def _scenario_phrase(scenario_name: str) -> str:
    return scenario_name.lower()


def render_exchange(
    rng: random.Random, voice: Voice, item: EvidenceItem | DistractorItem, *, mid_session: bool, anchor_prob: float = 0.0
) -> tuple[list[str], Spans]:
    """The four turns of an evidence (or own-voice distractor) exchange, and the spans of its cues in
    its labelled turn (at `item.position`). `mid_session`: the exchange does not open its session,
    so its request turns to the task with a change of topic."""
    scenario = _scenario_phrase(item.scenario.name)
    topic = item.topic or f"my {scenario}"
    lead = rng.choice(noise_bank.TOPIC_CHANGES) if mid_session else ""
    other = isinstance(item, DistractorItem) and item.form == "other_person"
    fills = _person(rng)
    if other and item.person is not None:  # a task done for someone else, and their preference
        who, they, them = item.person
        fills.update(person=who, Person=noise.cap(who), they=they, them=them)
    fills["their"] = {"she": "her", "he": "his"}.get(fills["they"], "their")
    # someone else's task: the request says so at position 2; at position 0 the preference comes with
    # an ordinary request and the user's answer to the draft says whose it was
    for_other = other and item.position == 2
    openers = bank.OPENERS_FOR if for_other else (bank.OPENERS_WITH if rng.random() < bank.WITH_PROB else bank.OPENERS)
    opener = noise.join_lead(lead, _take(rng, voice, openers, ("Can you help with this?",), topic=topic, scenario=scenario, **fills))
    drafts = bank.DRAFTS_API if item.scenario.action == "call_api" else bank.DRAFTS_TEXT
    draft = _take(rng, voice, drafts, ("Here's a first go.", "Here you go.", "A first version:"), topic=topic)
    ack = _take(rng, voice, bank.ACKS[item.signal_type], bank.SHORT_ACKS)
    anchored = item.anchored or rng.random() < anchor_prob
    anchor = scenario if anchored else None
    recent = bank.RECENT_FRAMES_V3 if voice.version >= 3 else bank.RECENT_FRAMES
    frames: Sequence[str] = recent if item.recent and rng.random() < bank.RECENT_PROB else ()
    reveals = item.reveals
    if item.position == 0:
        text, spans = preference_text(rng, voice, item.signal_type, reveals, suffix=False, anchor=anchor, tail=opener, frames=frames)
        after = _take(rng, voice, bank.AFTER_DRAFT_FOR, ("It's for someone else.",), **fills) if other else \
            noise.with_asides(rng, voice, _take(rng, voice, bank.AFTER_DRAFT, bank.SHORT_ACKS))
        turns = [text, f"{ack} {draft}", after, _take(rng, voice, bank.FINAL_ASSISTANT, bank.SHORT_ACKS)]
    else:
        text, spans = preference_text(rng, voice, item.signal_type, reveals, anchor=anchor, frames=frames)
        turns = [opener, draft, text, ack]
    return turns, spans


def render_framed_distractor(rng: random.Random, voice: Voice, item: DistractorItem) -> tuple[list[str], Spans]:
    """A distractor told in passing: an ended preference or a hypothetical one, in a signal-type
    wrapper like evidence, the cue inside a frame that says when or whether; one user turn and the
    assistant's short reply."""
    scenario = _scenario_phrase(item.scenario.name)
    ended = bank.ENDED_FRAMES_V3 if voice.version >= 3 else bank.ENDED_FRAMES
    raw = {"ended": ended, "hypothetical": bank.HYPOTHETICAL_FRAMES}[item.form]
    frames = [f.format(cue="{cue}", scenario=scenario) for f in raw]
    anchor = scenario if item.anchored and item.form == "ended" else None
    text, spans = preference_text(rng, voice, item.signal_type, item.reveals, anchor=anchor, frames=frames)
    reply = _take(rng, voice, bank.ASIDE_REPLIES, bank.SHORT_ACKS)
    return [text, reply], spans


def render_state(rng: random.Random, voice: Voice, mention: StateMention, spec: NoiseSpec) -> tuple[list[str], Spans]:
    """A four-turn exchange whose first user turn mentions the state in passing, then goes on to
    the session's topic; the span of the state's cue in that turn."""
    stretch = noise.render_noise(rng, voice, spec, 4, lead="")
    request = stretch[0]
    named = [("state", mention.cue)]
    tried = []
    for _ in range(ATTEMPTS):
        template = tidy(rng.choice(bank.STATE_WRAPPERS).format(cue=_token(0), Cue=_token(0, capital=True), request=_lower_start(request)))
        if voice.version >= 3:
            template = _CUE_AFTER_END.sub(lambda m: m.group(1) + _token(int(m.group(2)), capital=True), template)
        text, spans = fill(template, named)
        if voice.budget.fits(text):
            break
        tried.append((text, spans))
    else:
        text = _least_used(voice, [t for t, _ in tried])
        spans = next(sp for t, sp in tried if t == text)
    voice.budget.use(text)
    reply = f"{_take(rng, voice, bank.STATE_REPLIES, ('Sorry to hear that.', 'Oh no, take care.'))} {stretch[1]}"
    return [text, reply, stretch[2], stretch[3]], spans
