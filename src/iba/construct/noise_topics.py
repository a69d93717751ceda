"""Noise topics with content: what a user asks or tells about, and what the assistant answers.

Each topic (`data/noise_topics/*.yaml`) holds openers, situation details and follow-up questions
in the user's voice, and facts in the assistant's: real information, so a noise session carries
content rather than filler. None of it states a preference (likes, dislikes, habits, choices):
preference talk in the noise is the distractors' job (iba.construct.distractors), under rules
that keep the answer key true.
"""

from __future__ import annotations

import random
from functools import cache
from importlib import resources
from typing import Literal

import yaml
from pydantic import Field, ValidationError, model_validator

from iba.types import Strict

DATA = "data/noise_topics"
MIN_COUNTS = {"openers": 3, "details": 5, "questions": 5, "facts": 8}


class NoiseTopicError(ValueError):
    """A noise topic file is malformed (the message names the file and the entry)."""


class NoiseTopic(Strict):
    id: str
    kind: Literal["help", "chat"]  # help: the user asks how or why; chat: the user tells about something
    topic: str  # a noun phrase: "a squeaky door hinge"
    openers: list[str] = Field(min_length=MIN_COUNTS["openers"])
    details: list[str] = Field(min_length=MIN_COUNTS["details"])
    questions: list[str] = Field(min_length=MIN_COUNTS["questions"])
    facts: list[str] = Field(min_length=MIN_COUNTS["facts"])
    # generator v3: the fact (index into facts) that answers each question / opener, -1 for none
    # (paired once by tools/pair_noise_answers.py; v2 never reads them)
    answers: list[int] | None = None
    opener_answers: list[int] | None = None

    @model_validator(mode="after")
    def _pairs_in_range(self) -> NoiseTopic:
        for name, asks in (("answers", self.questions), ("opener_answers", self.openers)):
            got = getattr(self, name)
            if got is None:
                continue
            if len(got) != len(asks):
                raise ValueError(f"{name} has {len(got)} entries for {len(asks)} {'questions' if name == 'answers' else 'openers'}")
            bad = [i for i in got if not -1 <= i < len(self.facts)]
            if bad:
                raise ValueError(f"{name}: {bad} is not a fact index (0..{len(self.facts) - 1}) or -1")
        return self


@cache
def load_noise_topics() -> tuple[NoiseTopic, ...]:
    """Every shipped noise topic, files in name order, entries in file order; ids are unique."""
    root = resources.files("iba.construct").joinpath(DATA)
    out: list[NoiseTopic] = []
    seen: dict[str, str] = {}
    for entry in sorted(root.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".yaml"):
            continue
        try:
            # libyaml where PyYAML has it (~15x faster; the same safe loading)
            items = yaml.load(entry.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or []  # noqa: S506
        except yaml.YAMLError as e:
            raise NoiseTopicError(f"{DATA}/{entry.name}: not valid YAML: {e}") from None
        if not isinstance(items, list):
            raise NoiseTopicError(f"{DATA}/{entry.name}: expected a list of topics")
        for k, item in enumerate(items):
            try:
                t = NoiseTopic.model_validate(item)
            except ValidationError as e:
                first = e.errors()[0]
                loc = ".".join(str(x) for x in first["loc"])
                raise NoiseTopicError(f"{DATA}/{entry.name}: topic [{k}] ({(item or {}).get('id', '?')}): {loc}: {first['msg']}") from None
            if t.id in seen:
                raise NoiseTopicError(f"{DATA}/{entry.name}: duplicate topic id {t.id!r} (also in {seen[t.id]})")
            seen[t.id] = entry.name
            out.append(t)
    return tuple(out)


@cache
def topics_by_id() -> dict[str, NoiseTopic]:
    return {t.id: t for t in load_noise_topics()}  # read-only: cached (every noise stretch asks)


def other_topic(rng: random.Random, current: NoiseTopic) -> NoiseTopic:
    """A random topic, drawn once more when it is `current` (so it usually differs)."""
    topics = load_noise_topics()
    t = rng.choice(topics)
    return t if t.id != current.id or len(topics) == 1 else rng.choice(topics)
