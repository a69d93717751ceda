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


def opener(rng: random.Random, spec: NoiseSpec) -> str:
    templates = bank.HELP_OPENERS if spec.category == "help" else bank.CHAT_OPENERS
    greet = rng.choice(bank.GREETINGS)
    text = rng.choice(templates).format(topic=spec.topic)
    return greet + (_cap(text) if not greet or greet.endswith((". ", "! ", ": ")) else text)


def assistant_reply(rng: random.Random, spec: NoiseSpec) -> str:
    body = rng.choice(bank.BODIES).format(topic=spec.topic, topic_cap=_cap(spec.topic))
    q = rng.choice(bank.QUESTIONS)
    return f"{rng.choice(bank.ACKS)} {body}" + (f" {q}" if q else "")


def _reply(rng: random.Random, core: str) -> str:
    lead = rng.choice(bank.REPLY_LEADS)
    # a lead ending in a full stop starts a new sentence; "Honestly," or "Yes, so" continue it
    body = _cap(core) if lead.endswith((".", ":")) else core
    return f"{lead} {body}{rng.choice(bank.REPLY_TAILS)}"


def render_noise(rng: random.Random, spec: NoiseSpec, n_turns: int, city: str) -> list[str]:
    """Text of a noise session of `n_turns` turns (user first, alternating)."""
    city = city.split(",")[0]
    texts = [opener(rng, spec), assistant_reply(rng, spec)]
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
    return texts[:n_turns]
