"""How coherent a build's histories read: answers to the question asked, seams, asides (issue 32).

Measured on the text alone (any build, any generator version), with the noise topic data as the
reference for what answers what:

- answered: of the user turns that ask one of the topic bank's questions, the share whose next
  assistant turn states the fact the data pairs with that question (`NoiseTopic.answers`, paired by
  meaning once, tools/pair_noise_answers.py); `other_answer`: the share whose next assistant turn
  states instead a fact paired with another question of the topic (an answer to a question not
  asked); questions the data pairs with nothing are counted apart (`unpaired`);
- seams per 1,000 turns (outside the labelled cue clauses: a cue is the taxonomy's text, verbatim),
  by kind: a connector's comma followed by a capitalised word that is not
  "I" or a proper noun ("Well, Cooked food"), doubled punctuation (",." "!." ".,"), a sentence or
  turn that starts in lower case, a lower-cased acronym ("Look, fYI");
- asides per user turn: sentences of the aside grammar (noise_bank.ASIDE_TEMPLATES) per user turn,
  the share of user turns with any, and the share with two or more.
"""

from __future__ import annotations

import json
import re
import string
from collections import Counter
from pathlib import Path
from typing import Any

from iba.construct import noise_bank
from iba.construct.coherent import starts_proper
from iba.construct.noise_topics import load_noise_topics
from iba.construct.sentences import sentences

# a capital after a short opening clause ("Well, ", "Right, so ", "From what I know, ") of a sentence
# (a clause with a name in it, "I set up Thinking, Fast and Slow", is a title's comma, not a seam)
_COMMA_CAP = re.compile(r"(?:^|[.!?]\s+)[A-Z](?:[^.!?,:A-Z]|(?<=\s)I(?=[\s'])){0,20},\s+(?:so\s+|and\s+)?([A-Z][A-Za-z'\-]*)")
# (not after a digit: "1., 2. and so on" is a list, as a cue writes it)
_DOUBLE = re.compile(r"[,;:]\s*[.!?,;:]|(?<!\b\w)(?<!\d)[.!?]\s*[,;:]|[!?]\s*\.(?!\.)|(?<![.\d])\.\s*\.(?!\.)")
# (not after "e.g.", a numbered item "2." or a title "Jr.")
_LOWER_START = re.compile(r"(?:^|(?<!\b\w)(?<![\d.])(?<!\bJr)(?<!\bSr)(?<!\bDr)(?<!\bMr)(?<!\bSt)[.!?]\s+)[a-z]")
_ARTICLE = re.compile(r" [a-z]")  # a one-letter capital is a seam only as "A" before a word ("Well, A sound")
_BROKEN_CAPITALS = re.compile(r"\b[a-z][A-Z]{2,}\b")  # "fYI": a lower-cased acronym
_LEAD = re.compile(r"^[^,:]{1,40}[,:]\s+")  # "Anyway, " / "Back to the other thing: " before a question


def _aside_sentences() -> tuple[frozenset[str], re.Pattern[str]]:
    """Every sentence the aside grammar writes, normalised (a set: a regex alternation of them all
    cost ~1 ms a turn), and a pattern for the templates with the persona's city in them."""
    plain: set[str] = set()
    city: list[str] = []
    for t in noise_bank.ASIDE_TEMPLATES:
        parsed = list(string.Formatter().parse(t))
        if any(name == "city" for _, name, _, _ in parsed):
            out = []
            for literal, name, _, _ in parsed:
                out.append(re.escape(literal))
                if name == "city":
                    out.append(r"[^.]+?")
                elif name:
                    out.append("(?:" + "|".join(re.escape(o) for o in noise_bank.ASIDE_SLOTS[name]) + ")")
            city.append("".join(out))
            continue
        texts = [""]
        for literal, name, _, _ in parsed:
            options = noise_bank.ASIDE_SLOTS[name] if name else ("",)
            texts = [f"{x}{literal}{o}" for x in texts for o in options]
        plain.update(_norm(x) for x in texts)
    return frozenset(plain), re.compile("(?:" + "|".join(city) + ")", re.IGNORECASE)


def _count_asides(text: str, plain: frozenset[str], city: re.Pattern[str]) -> int:
    return sum(_norm(s) in plain for s in sentences(text)) + len(city.findall(text))


def seams(text: str) -> Counter[str]:
    """The seams in one turn's text, by kind."""
    c: Counter[str] = Counter()
    c["capital_after_connector"] = sum(not starts_proper(text[m.start(1):]) for m in _COMMA_CAP.finditer(text)
                                       if len(m.group(1)) > 1 or (m.group(1) == "A" and _ARTICLE.match(text, m.end(1))))
    c["doubled_punctuation"] = len(_DOUBLE.findall(text))
    c["lower_case_start"] = len(_LOWER_START.findall(text))
    c["broken_capitals"] = len(_BROKEN_CAPITALS.findall(text))
    return c


def _norm(s: str) -> str:
    return " ".join(s.lower().split())


def _question_index() -> tuple[dict[str, tuple[str, int]], dict[str, list[str]]]:
    """Question text (normalised) -> (topic id, paired fact index or -1); topic id -> facts (normalised)."""
    qs: dict[str, tuple[str, int]] = {}
    facts: dict[str, list[str]] = {}
    for t in load_noise_topics():
        answers = t.answers or [-1] * len(t.questions)
        for q, a in zip(t.questions, answers):
            qs[_norm(q)] = (t.id, a)
        facts[t.id] = [_norm(f) for f in t.facts]
    return qs, facts


def _asked(text: str, qs: dict[str, tuple[str, int]]) -> tuple[str, int] | None:
    for s in sentences(text):
        key = _norm(s)
        hit = qs.get(key) or qs.get(_LEAD.sub("", key, count=1))
        if hit:
            return hit
    return None


def cue_spans(root: str | Path) -> dict[str, list[tuple[int, int]]]:
    """Turn id -> the spans of the labelled cue clauses in it (answer key evidence, distractor labels)."""
    out: dict[str, list[tuple[int, int]]] = {}
    for name, field in (("answer_key.jsonl", "evidence"), ("distractors.jsonl", None)):
        path = Path(root) / name
        if not path.exists():
            continue
        with path.open(encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    rec = json.loads(line)
                    for e in rec[field] if field else [rec]:
                        if e.get("span"):
                            out.setdefault(e["turn_id"], []).append(tuple(e["span"]))
    return out


def _masked(text: str, spans: list[tuple[int, int]]) -> str:
    """`text` with each cue clause replaced by a placeholder of the same initial case: a cue is the
    taxonomy's text, kept verbatim ("run it? the fragments ..."); only the joins around it are the
    generator's."""
    for start, end in sorted(spans, reverse=True):
        stub = "xcue" if text[start:start + 1].islower() else "Xcue"
        text = text[:start] + stub + text[end:]
    return text


def measure(root: str | Path, users: list[str] | None = None) -> dict[str, Any]:
    """The coherence figures of the dataset at `root` (all its histories, or those of `users`);
    seams are counted outside the labelled cue clauses."""
    cues = cue_spans(root)
    qs, facts = _question_index()
    topic_answers = {t.id: {a for a in (t.answers or []) if a >= 0} for t in load_noise_topics()}
    plain, city = _aside_sentences()
    hist = Path(root) / "histories"
    files = sorted(hist.glob("*.jsonl")) if users is None else [hist / f"{u}.jsonl" for u in users]
    turns = user_turns = asides = with_aside = two_plus = 0
    asked = answered = other = unpaired = 0
    seam_counts: Counter[str] = Counter()
    for path in files:
        prev = None  # the paired question the last user turn asked, awaiting the assistant's turn
        with path.open(encoding="utf-8") as f:
            for line in f:
                if not line.strip():
                    continue
                t = json.loads(line)
                text = t["text"]
                turns += 1
                seam_counts.update(seams(_masked(text, cues[t["id"]]) if t["id"] in cues else text))
                if t["role"] == "user":
                    user_turns += 1
                    k = _count_asides(text, plain, city)
                    asides += k
                    with_aside += k > 0
                    two_plus += k > 1
                    prev = _asked(text, qs)
                    continue
                if prev is not None:
                    topic, a = prev
                    low = _norm(text)
                    if a < 0:
                        unpaired += 1
                    else:
                        asked += 1
                        if facts[topic][a] in low:
                            answered += 1
                        elif any(facts[topic][i] in low for i in topic_answers[topic] if i != a):
                            other += 1
                prev = None
    per_k = 1000 / turns if turns else 0.0
    return {
        "histories": len(files),
        "turns": turns,
        "user_turns": user_turns,
        "questions_asked": asked,
        "answered": round(answered / asked, 4) if asked else None,
        "other_answer": round(other / asked, 4) if asked else None,
        "unpaired_questions": unpaired,
        "seams_per_1000_turns": round(sum(seam_counts.values()) * per_k, 2),
        "seams_by_kind_per_1000_turns": {k: round(v * per_k, 2) for k, v in sorted(seam_counts.items())},
        "asides_per_user_turn": round(asides / user_turns, 4) if user_turns else None,
        "user_turns_with_aside": round(with_aside / user_turns, 4) if user_turns else None,
        "user_turns_with_2plus_asides": round(two_plus / user_turns, 4) if user_turns else None,
    }
