"""Noise sessions: casual chat and unrelated help requests, composed from seeded banks.

Relevant (labelled) turns occur about once per `noise_ratio` turns: the history planner sizes
the noise with `noise_turns`, then this module writes each noise session's text.
"""

from __future__ import annotations

import random

from iba.construct import noise_bank as bank
from iba.construct.plan import NoiseSpec

# Session lengths (turns, even: user/assistant pairs) and their weights; mean about 14 turns.
LENGTHS = (4, 6, 8, 10, 12, 14, 16, 18, 20, 24, 28, 32)
LENGTH_WEIGHTS = (3, 5, 7, 8, 8, 8, 7, 6, 5, 4, 3, 2)
# How many context sentences a noise user turn carries (0..4): spreads noise turn lengths over
# the range of evidence turns'.
ASIDE_WEIGHTS = (1, 3, 3, 2, 1)
_ASIDE_COUNTS = tuple(k for k, w in enumerate(ASIDE_WEIGHTS) for _ in range(w))


def padded_length(rng: random.Random, core: int) -> tuple[int, int]:
    """(length, offset) of a session that embeds a `core`-turn exchange at turn `offset`.

    Lengths are drawn size-biased (weight x length), so that the session length of a random
    labelled turn follows that of a random noise turn, and the offset is uniform over the even
    slots: neither a turn's session length nor its place in the session tells evidence from noise.
    """
    options = [n for n in LENGTHS if n >= core]
    n = rng.choices(options, weights=[w * n for n, w in zip(LENGTHS, LENGTH_WEIGHTS) if n >= core], k=1)[0]
    return n, 2 * rng.randint(0, (n - core) // 2)


def noise_spec(rng: random.Random) -> NoiseSpec:
    if rng.random() < 0.55:
        return NoiseSpec(category="help", topic=rng.choice(bank.HELP_TOPICS))
    return NoiseSpec(category="chat", topic=rng.choice(bank.CHAT_TOPICS))


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


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:]


def opener(rng: random.Random, spec: NoiseSpec, greet: bool = True) -> str:
    templates = bank.HELP_OPENERS if spec.category == "help" else bank.CHAT_OPENERS
    lead = rng.choice(bank.GREETINGS if greet else bank.TOPIC_CHANGES)
    text = rng.choice(templates).format(topic=spec.topic)
    return lead + (_cap(text) if not lead or lead.endswith((". ", "! ", ": ")) else text)


def assistant_reply(rng: random.Random, spec: NoiseSpec) -> str:
    body = rng.choice(bank.BODIES).format(topic=spec.topic, topic_cap=_cap(spec.topic))
    q = rng.choice(bank.QUESTIONS)
    return f"{rng.choice(bank.ACKS)} {body}" + (f" {q}" if q else "")


def pad_session(rng: random.Random, spec: NoiseSpec, core: list[str], n_turns: int, offset: int, city: str) -> list[str]:
    """`core` placed at turn `offset` of an `n_turns`-turn session, the rest filler chat on `spec`."""
    after = n_turns - offset - len(core)
    before = render_noise(rng, spec, offset, city) if offset else []
    tail = render_noise(rng, spec, after, city, greet=False) if after > 0 else []
    return [*before, *core, *tail]


def _reply(rng: random.Random, core: str) -> str:
    lead = rng.choice(bank.REPLY_LEADS)
    # a lead ending in a full stop starts a new sentence; "Honestly," or "Yes, so" continue it
    body = _cap(core) if lead.endswith((".", ":")) else core
    return f"{lead} {body}{rng.choice(bank.REPLY_TAILS)}"


def render_noise(rng: random.Random, spec: NoiseSpec, n_turns: int, city: str, *, greet: bool = True) -> list[str]:
    """Text of a noise session of `n_turns` turns (user first, alternating); `greet=False` for a
    stretch that continues a session (it opens with a change of topic rather than a greeting)."""
    city = city.split(",")[0]
    texts = [opener(rng, spec, greet), assistant_reply(rng, spec)]
    pairs = n_turns // 2
    middle = max(0, pairs - 2) if pairs >= 3 else max(0, pairs - 1)
    follows = rng.sample(bank.FOLLOW_UPS, min(middle, len(bank.FOLLOW_UPS)))
    replies = rng.sample(bank.REPLIES, min(middle, len(bank.REPLIES)))
    for i in range(middle):
        f = follows[i % len(follows)].format(city=city, topic=spec.topic)
        texts.append(f"{rng.choice(bank.REACTIONS)} {f}")
        texts.append(_reply(rng, replies[i % len(replies)].format(topic=spec.topic)))
    if len(texts) < n_turns:
        texts.append(rng.choice(bank.CLOSINGS_USER))
        texts.append(rng.choice(bank.CLOSINGS_ASSISTANT))
    texts = texts[:n_turns]
    for i in range(0, len(texts), 2):  # user turns
        texts[i] = with_asides(rng, texts[i], spec, city)
    return texts


def with_asides(rng: random.Random, text: str, spec: NoiseSpec, city: str) -> str:
    """A user turn with some context sentences added (none, or up to four)."""
    k = _ASIDE_COUNTS[rng.randrange(len(_ASIDE_COUNTS))]
    if not k:
        return text
    # k distinct asides: a start and a stride through the bank (its size is prime), cheaper than sample()
    n = len(bank.USER_ASIDES)
    start, stride = rng.randrange(n), rng.randrange(1, n)
    asides = [bank.USER_ASIDES[(start + j * stride) % n].format(city=city, topic=spec.topic) for j in range(k)]
    return " ".join([text, *asides] if rng.random() < 0.6 else [*asides, text])
