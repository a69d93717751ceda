"""Procedural text for evidence sessions and state mentions (the offline, deterministic writer).

An evidence exchange has four turns (its session pads it with filler chat to a noise-like length,
see noise.padded_length and noise.pad_session). With the labelled turn at position 2: the user asks for a
past task of the scenario, the assistant offers a first attempt, the user reacts with the
evidence (revision, complaint, statement or habit), the assistant acknowledges. At position 0
the evidence opens the session together with the request.
"""

from __future__ import annotations

import random
import re

from iba.construct import evidence_bank as bank
from iba.construct import noise
from iba.construct import noise_bank
from iba.construct.plan import EvidenceItem, NoiseSpec, StateMention

_DOUBLE_PUNCT = re.compile(r"([.!?])[.!]+")
_SENTENCE_START = re.compile(r"([.!?]\s+)([a-z])")


def _clause(cue: str) -> str:
    """A cue as a clause: trimmed, without a trailing full stop (kept: ? and !)."""
    return cue.strip().rstrip(".").strip()


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:]


def _tidy(text: str) -> str:
    """Single spaces, no doubled end marks, a capital after each sentence end."""
    text = _DOUBLE_PUNCT.sub(r"\1", " ".join(text.split()))
    return _SENTENCE_START.sub(lambda m: m.group(1) + m.group(2).upper(), text)


def _join(prefix: str, text: str) -> str:
    # "Well, " and "Thanks, but " continue the sentence: no capital after them (except "I")
    if prefix.endswith((", ", "but ")) and not text.startswith(("I ", "I'")):
        text = text[:1].lower() + text[1:]
    return prefix + text


def evidence_text(rng: random.Random, signal_type: str, cues: list[str], *, suffix: bool = True) -> str:
    """A user turn revealing `cues` with the given Table 12 signal type."""
    first = _clause(cues[0])
    text = rng.choice(bank.WRAPPERS[signal_type]).format(cue=first, Cue=_cap(first))
    for cue in cues[1:]:
        text += " " + rng.choice(bank.CONNECTORS).format(cue=_clause(cue))
    end = rng.choice(bank.SUFFIXES) if suffix else ""
    prefixes = bank.REACTION_PREFIXES if signal_type in ("explicit_revision", "complaint") else bank.PREFIXES
    return _tidy(_join(rng.choice(prefixes), text) + end)


def _scenario_phrase(item: EvidenceItem) -> str:
    return item.scenario.name.lower()


def _topic(item: EvidenceItem) -> str:
    return item.topic or f"my {_scenario_phrase(item)}"


def render_evidence(rng: random.Random, item: EvidenceItem) -> list[str]:
    topic = _topic(item)
    opener = rng.choice(bank.OPENERS).format(topic=topic, scenario=_scenario_phrase(item))
    drafts = bank.DRAFTS_API if item.scenario.action == "call_api" else bank.DRAFTS_TEXT
    draft = rng.choice(drafts).format(topic=topic)
    cues = [r.cue for r in item.reveals]
    ack = rng.choice(bank.ACKS[item.signal_type])
    if item.position == 0:
        # the evidence opens the session, together with the request
        evidence = evidence_text(rng, item.signal_type, cues, suffix=False)
        return [_tidy(f"{evidence} {opener}"), f"{ack} {draft}", rng.choice(bank.AFTER_DRAFT), rng.choice(bank.FINAL_ASSISTANT)]
    return [opener, draft, evidence_text(rng, item.signal_type, cues), ack]


def render_state(rng: random.Random, mention: StateMention, city: str) -> list[str]:
    """A casual/help session whose first user turn mentions the state in passing."""
    spec = NoiseSpec(category="help", topic=rng.choice(noise_bank.HELP_TOPICS))
    request = rng.choice(noise_bank.HELP_OPENERS).format(topic=spec.topic)
    cue = _clause(mention.cue)
    first = _tidy(rng.choice(bank.STATE_WRAPPERS).format(cue=cue, Cue=_cap(cue), request=request))
    body = noise.assistant_reply(rng, spec)
    rest = noise.render_noise(rng, spec, 4, city)
    return [first, f"{rng.choice(bank.STATE_REPLIES)} {body}", rest[2], rest[3]]
