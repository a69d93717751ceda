"""Noise sessions: conversations with content, composed from the topic bank under a sentence budget.

Relevant (labelled) turns occur about once per `noise_ratio` turns: the history planner sizes the
noise with `noise_turns`, deals each session a topic (`TopicDeck`), and this module writes the text:
the user opens on the topic, adds details and asks follow-ups; the assistant answers with the
topic's facts. A long session moves on to another topic, as real ones do. Every sentence goes
through the history's `SentenceBudget`, so none longer than 25 characters recurs more than three
times in a history.
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any

from iba.construct import noise_bank as bank
from iba.construct.noise_topics import NoiseTopic, load_noise_topics, other_topic, topics_by_id
from iba.construct.plan_types import NoiseSpec
from iba.construct.sentences import SentenceBudget

# Session lengths (turns, even: user/assistant pairs) and their weights; mean about 14 turns.
LENGTHS = (4, 6, 8, 10, 12, 14, 16, 18, 20, 24, 28, 32)
LENGTH_WEIGHTS = (3, 5, 7, 8, 8, 8, 7, 6, 5, 4, 3, 2)
# How many asides (context sentences) a user turn carries (0..3): spreads user turn lengths.
ASIDE_WEIGHTS = (2, 3, 3, 2)
DETAIL_PROB = 0.7  # an opening noise user turn adds a situation detail of the topic
EXTRA_DETAIL_PROB = 0.6  # a follow-up adds one too (noise user turns run as long as preference turns)
SECOND_FACT_PROB = 0.35  # an assistant answer gives two facts


@dataclass
class Voice:
    """What the writer keeps per history: the sentence budget, the persona's city, the generator
    version it writes (2 or 3: iba.construct.coherent) and, in version 3, the current session's
    topic talk (a coherent.SessionTalk; the writer clears it when a session starts)."""

    budget: SentenceBudget = field(default_factory=SentenceBudget)
    city: str = "town"
    version: int = 2
    talk: Any = None


def padded_length(rng: random.Random, core: int) -> tuple[int, int]:
    """(length, offset) of a session that embeds a `core`-turn exchange at turn `offset`.

    Lengths are drawn size-biased (weight x length), so that the session length of a random
    labelled turn follows that of a random noise turn, and the offset is uniform over the even
    slots: neither a turn's session length nor its place in the session tells evidence from noise.
    """
    options = [n for n in LENGTHS if n >= core]
    n = rng.choices(options, weights=[w * n for n, w in zip(LENGTHS, LENGTH_WEIGHTS) if n >= core], k=1)[0]
    return n, 2 * rng.randint(0, (n - core) // 2)


class TopicDeck:
    """Deals a history's session topics: the bank shuffled, dealt in order, reshuffled when spent,
    so a topic comes back only after every other one has had its turn."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.topics = load_noise_topics()
        if not self.topics:
            raise RuntimeError("no noise topics installed (iba/construct/data/noise_topics/*.yaml)")
        self.order: list[int] = []

    def deal(self) -> NoiseSpec:
        if not self.order:
            self.order = list(range(len(self.topics)))
            self.rng.shuffle(self.order)
        t = self.topics[self.order.pop()]
        return NoiseSpec(category=t.kind, topic=t.topic, topic_id=t.id)


def session_lengths(rng: random.Random, total: int) -> list[int]:
    """Even session lengths summing to `total` rounded down to even (no session under 2 turns)."""
    total -= total % 2
    out: list[int] = []
    left = total
    while left > 0:
        n = rng.choices(LENGTHS, weights=LENGTH_WEIGHTS, k=1)[0]
        if n >= left or left - n < 4:
            n = left
        out.append(n)
        left -= n
    return out


def noise_turns(noise_ratio: float, relevant: int, other_turns: int, history_turns: int | None) -> int:
    """How many noise turns make the history's length: `history_turns` if set, else
    noise_ratio x relevant turns in total (never negative: evidence sessions are never dropped)."""
    target = history_turns if history_turns is not None else round(noise_ratio * relevant)
    return max(0, target - other_turns)


def cap(s: str) -> str:
    return s[:1].upper() + s[1:]


def join_lead(lead: str, text: str) -> str:
    """A lead ("Hey! ", "Also, ", "") and a sentence: a capital after an end mark or nothing, else lower case."""
    if not lead or lead.rstrip().endswith((".", "!", ":", "?")):
        return lead + cap(text)
    return lead + (text if text.startswith(("I ", "I'")) else text[:1].lower() + text[1:])


# each aside template with the slots it uses and their options (drawing only those keeps the grammar cheap)
_ASIDES = tuple(
    (t, tuple((f, bank.ASIDE_SLOTS[f]) for f in dict.fromkeys(f for _, f, _, _ in string.Formatter().parse(t) if f and f != "city")))
    for t in bank.ASIDE_TEMPLATES
)
_ASIDE_COUNTS = tuple(accumulate(ASIDE_WEIGHTS))  # with_asides draws with these (rng.choices: the same draw)


def aside(rng: random.Random, voice: Voice, tries: int = 6, *, commit: bool = True) -> str | None:
    """One context sentence from the aside grammar that still fits the budget (None if none did);
    marked used unless `commit` is False (the caller checks and marks the whole turn)."""
    choice, budget, city = rng.choice, voice.budget, voice.city  # the writer's hottest loop: names bound once
    for _ in range(tries):
        template, slots = choice(_ASIDES)
        text = template.format(city=city, **{k: choice(options) for k, options in slots})
        if budget.fits(text):
            if commit:
                budget.use(text)
            return text
    return None


def with_asides(rng: random.Random, voice: Voice, text: str) -> str:
    """A user turn with 0-3 context sentences before or after it (version 3: at most one, rarely)."""
    if voice.version >= 3:
        from iba.construct import coherent

        return coherent.with_aside(rng, voice, text)
    k = rng.choices(range(len(ASIDE_WEIGHTS)), cum_weights=_ASIDE_COUNTS, k=1)[0]
    extra = [a for a in (aside(rng, voice) for _ in range(k)) if a]
    if not extra:
        return text
    return " ".join([text, *extra] if rng.random() < 0.6 else [*extra, text])


class TopicTalk:
    """One topic's content as a session uses it: each item at most once per session, and only
    while the history's budget allows it."""

    def __init__(self, rng: random.Random, topic: NoiseTopic) -> None:
        self.topic = topic
        self.left = {f: rng.sample(getattr(topic, f), len(getattr(topic, f))) for f in ("openers", "details", "questions", "facts")}

    def take(self, voice: Voice, field_: str) -> str | None:
        pool = self.left[field_]
        for i, text in enumerate(pool):
            if voice.budget.fits(text):
                voice.budget.use(text)
                del pool[i]
                return text
        return None


def _generic_opener(rng: random.Random, voice: Voice, topic: NoiseTopic) -> str | None:
    templates = bank.HELP_OPENERS if topic.kind == "help" else bank.CHAT_OPENERS
    return voice.budget.first_fitting(cap(t.format(topic=topic.topic)) for t in rng.sample(templates, len(templates)))


def _open(rng: random.Random, voice: Voice, talk: TopicTalk, lead: str) -> str:
    text = talk.take(voice, "openers") if rng.random() < 0.6 else None
    text = text or _generic_opener(rng, voice, talk.topic) or talk.take(voice, "openers")
    if text is None:
        text = rng.choice(bank.FALLBACK_USER)
    parts = [join_lead(lead, text)]
    if rng.random() < DETAIL_PROB:
        detail = talk.take(voice, "details")
        if detail:
            parts.append(detail)
    return " ".join(parts)


def _answer(rng: random.Random, voice: Voice, talk: TopicTalk, lead: str) -> str | None:
    """Lead + one or two facts; None when the topic has no fact left that fits."""
    first = talk.take(voice, "facts")
    if first is None:
        return None
    parts = [lead, first] if lead else [first]
    if rng.random() < SECOND_FACT_PROB:
        second = talk.take(voice, "facts")
        if second:
            parts.append(second)
    return " ".join(parts)


def _follow_up(rng: random.Random, voice: Voice, talk: TopicTalk) -> str:
    r = rng.random()
    text = None
    if r < 0.5:
        text = talk.take(voice, "questions")
    elif r < 0.85:
        text = talk.take(voice, "details")
    text = (text or voice.budget.first_fitting(t.format(topic=talk.topic.topic) for t in rng.sample(bank.FOLLOW_UPS, len(bank.FOLLOW_UPS)))
            or talk.take(voice, "questions") or rng.choice(bank.SHORT_FOLLOW_UPS))
    extra = talk.take(voice, "details") if rng.random() < EXTRA_DETAIL_PROB else None
    parts = [rng.choice(bank.REACTIONS), *([extra, text] if extra and rng.random() < 0.5 else [text, extra] if extra else [text])]
    return " ".join(parts)


def render_noise(rng: random.Random, voice: Voice, spec: NoiseSpec, n_turns: int, *, greet: bool = True, lead: str | None = None) -> list[str]:
    """Text of a noise stretch of `n_turns` turns (user first, alternating); `greet=False` for a
    stretch that continues a session (it opens with a change of topic rather than a greeting);
    `lead` sets the first turn's opening words instead."""
    if voice.version >= 3:
        from iba.construct import coherent

        return coherent.render_noise(rng, voice, spec, n_turns, greet=greet, lead=lead)
    if n_turns <= 0:
        return []
    topic = topics_by_id().get(spec.topic_id) or other_topic(rng, load_noise_topics()[0])
    talk = TopicTalk(rng, topic)
    texts: list[str] = []
    if lead is None:
        lead = rng.choice(bank.GREETINGS if greet else bank.TOPIC_CHANGES)
    pairs = n_turns // 2
    closing = pairs >= 3 and rng.random() < 0.4
    for k in range(pairs):
        last = k == pairs - 1
        if k == 0:
            user = _open(rng, voice, talk, lead)
            answer = _answer(rng, voice, talk, rng.choice(bank.ACKS))
        elif last and closing:
            texts += [with_asides(rng, voice, rng.choice(bank.CLOSINGS_USER)), rng.choice(bank.CLOSINGS_ASSISTANT)]
            break
        else:
            user = _follow_up(rng, voice, talk)
            answer = _answer(rng, voice, talk, rng.choice(bank.REPLY_LEADS))
        if answer is None:  # the topic is spent in this history: move on to another one
            talk = TopicTalk(rng, other_topic(rng, talk.topic))
            user = _open(rng, voice, talk, rng.choice(bank.TOPIC_CHANGES))
            answer = _answer(rng, voice, talk, rng.choice(bank.ACKS)) or rng.choice(bank.FALLBACK_ASSISTANT)
        q = rng.choice(bank.QUESTIONS)
        texts += [with_asides(rng, voice, user), f"{answer} {q}".strip()]
    return texts[:n_turns]
