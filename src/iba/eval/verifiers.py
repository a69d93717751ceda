"""Deterministic checks of a generated text, by the ids the taxonomy may attach to a value.

`VERIFIERS` maps an id (iba.taxonomy.VERIFIER_IDS) to `check(text, **params) -> (passed, rationale)`.
They read Markdown the way an LLM writes it; each rule is stated in its docstring so a verdict
can be explained. A verifier never replaces the LLM judge: both verdicts are stored (the
verifier's under scorer "verifiers", judge id "verifier:<id>").
"""

from __future__ import annotations

import re
from collections.abc import Callable

from iba.eval.slots import mean_passed
from iba.types import Checkpoint, ScoreRecord, Verdict, VerifierRef

SCORER = "verifiers"
Check = Callable[..., tuple[bool, str]]

_FENCE = re.compile(r"^\s*(```|~~~)", re.M)
_FENCED_BLOCK = re.compile(r"(```|~~~).*?(\1|\Z)", re.S)
_NUMBERED = re.compile(r"^(\s*)(\d+|[a-zA-Z])[.)]\s+\S")
_BULLET = re.compile(r"^(\s*)[-*+\u2022\u25e6\u25aa]\s+\S")
_ATX = re.compile(r"^\s{0,3}#{1,6}\s+\S", re.M)
_SETEXT = re.compile(r"^\S.*\n\s{0,3}=+\s*$", re.M)
_TABLE_SEP = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)+\|?\s*$", re.M)
_WORD = re.compile(r"[^\W_]+(?:['\u2019\-][^\W_]+)*")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")
_FIRST = re.compile(r"\b(i|me|my|mine|myself|we|us|our|ours|ourselves|i'm|i've|i'd|i'll)\b", re.I)
_QUOTED = re.compile(r"\"[^\"\n]*\"|\u201c[^\u201d\n]*\u201d")
_CITATION = [
    (re.compile(r"\[\d+(?:[,\u2013\-]\s*\d+)*\]"), "numeric citation like [1]"),
    (re.compile(r"\([A-Z][A-Za-z'\-]+(?: et al\.?| (?:and|&) [A-Z][A-Za-z'\-]+)?,? \d{4}[a-z]?\)"),
     "author-year citation like (Smith, 2020)"),
    (re.compile(r"\bdoi:\s*10\.\d{4,}|\b10\.\d{4,}/\S+", re.I), "DOI"),
    (re.compile(r"https?://\S+"), "link"),
    (re.compile(r"^\s*(#+\s*)?(\*\*)?(references|bibliography|sources|works cited)\b", re.I | re.M),
     "references section"),
]


def _prose(text: str) -> str:
    """The text without fenced code blocks (code is not prose, lists or headings)."""
    return _FENCED_BLOCK.sub("\n", text)


def _words(text: str) -> int:
    prose = _prose(text)
    return len(_WORD.findall(_CJK.sub(" ", prose))) + len(_CJK.findall(prose))


def _list_lines(text: str) -> list[tuple[str, int, int]]:
    """(kind, indent, line number) of each list item line outside code."""
    out = []
    for i, line in enumerate(_prose(text).splitlines()):
        m = _NUMBERED.match(line)
        if m:
            out.append(("numbered", len(m.group(1).expandtabs(4)), i))
            continue
        m = _BULLET.match(line)
        if m and not re.match(r"^\s*[-*_]{3,}\s*$", line):  # a --- rule is not a bullet
            out.append(("bullet", len(m.group(1).expandtabs(4)), i))
    return out


# --------------------------------------------------------------------------- length


def word_count_range(text: str, min: int, max: int) -> tuple[bool, str]:
    """min <= words <= max; words outside code blocks, each CJK character counts as a word."""
    n = _words(text)
    return min <= n <= max, f"{n} words (wanted {min}-{max})"


def word_count_max(text: str, max: int) -> tuple[bool, str]:
    """words <= max."""
    n = _words(text)
    return n <= max, f"{n} words (wanted at most {max})"


def word_count_min(text: str, min: int) -> tuple[bool, str]:
    """words >= min."""
    n = _words(text)
    return n >= min, f"{n} words (wanted at least {min})"


# --------------------------------------------------------------------------- lists


def numbered_list(text: str) -> tuple[bool, str]:
    """At least two numbered items ("1." / "2)" / "a.")."""
    n = sum(1 for k, _, _ in _list_lines(text) if k == "numbered")
    return n >= 2, f"{n} numbered list items"


def unnumbered_bullets(text: str) -> tuple[bool, str]:
    """At least two bullet items ("-", "*", "+", "•") and no numbered items."""
    items = _list_lines(text)
    b = sum(1 for k, _, _ in items if k == "bullet")
    nb = sum(1 for k, _, _ in items if k == "numbered")
    return b >= 2 and nb == 0, f"{b} bullet items, {nb} numbered items"


def no_bullets(text: str) -> tuple[bool, str]:
    """No list items at all, bulleted or numbered (prose only)."""
    n = len(_list_lines(text))
    return n == 0, f"{n} list items" if n else "no list items"


def item_count(text: str, n: int) -> tuple[bool, str]:
    """Some list has exactly n top-level items.

    A list is a run of item lines of one kind at one indentation, allowing blank or continuation
    lines in between but ended by a heading or another list kind; nested items do not count.
    Responses often hold several lists (e.g. strengths and weaknesses), so one match is enough.
    """
    lines = _prose(text).splitlines()
    items = _list_lines(text)
    sizes: list[int] = []
    prev: tuple[str, int, int] | None = None
    for kind, indent, i in items:
        if prev is not None and indent > prev[1]:
            continue  # a nested item
        broken = prev is None or kind != prev[0] or indent != prev[1] or any(
            _ATX.match(lines[j]) for j in range(prev[2] + 1, i)
        )
        if broken:
            sizes.append(0)
        sizes[-1] += 1
        prev = (kind, indent, i)
    return n in sizes, f"list sizes {sizes} (wanted a list of exactly {n})" if sizes else f"no list (wanted {n} items)"


# --------------------------------------------------------------------------- perspective


def _first_person_hits(text: str) -> list[str]:
    prose = _QUOTED.sub(" ", _prose(text))  # quoted speech is not the narrator's voice
    return [m.group(0) for m in _FIRST.finditer(prose)]


def first_person(text: str) -> tuple[bool, str]:
    """At least two first-person pronouns (I, me, my, we, our...) outside quotes and code."""
    hits = _first_person_hits(text)
    return len(hits) >= 2, f"{len(hits)} first-person pronouns" + (f" (e.g. {hits[0]!r})" if hits else "")


def third_person(text: str) -> tuple[bool, str]:
    """No first-person pronouns outside quotes and code."""
    hits = _first_person_hits(text)
    return not hits, "no first-person pronouns" if not hits else f"{len(hits)} first-person pronouns (e.g. {hits[0]!r})"


# --------------------------------------------------------------------------- markdown structure


def has_code_block(text: str) -> tuple[bool, str]:
    """A fenced code block (``` or ~~~)."""
    n = (len(_FENCE.findall(text)) + 1) // 2  # an unclosed fence still opens a block
    return n >= 1, f"{n} fenced code blocks"


def no_code_block(text: str) -> tuple[bool, str]:
    """No fenced code block."""
    ok, why = has_code_block(text)
    return not ok, why


def _tables(text: str) -> int:
    prose = _prose(text)
    return len(_TABLE_SEP.findall(prose)) + len(re.findall(r"<table\b", prose, re.I))


def has_table(text: str) -> tuple[bool, str]:
    """A Markdown table (a header row followed by a |---|---| separator row) or an HTML <table>."""
    n = _tables(text)
    return n >= 1, f"{n} tables"


def no_table(text: str) -> tuple[bool, str]:
    """No table."""
    n = _tables(text)
    return n == 0, f"{n} tables"


def _headings(text: str) -> int:
    prose = _prose(text)
    return len(_ATX.findall(prose)) + len(_SETEXT.findall(prose))


def has_headings(text: str) -> tuple[bool, str]:
    """At least one Markdown heading ("# Title" or a line underlined with ===)."""
    n = _headings(text)
    return n >= 1, f"{n} headings"


def no_headings(text: str) -> tuple[bool, str]:
    """No Markdown heading."""
    n = _headings(text)
    return n == 0, f"{n} headings"


# --------------------------------------------------------------------------- content


def _found_terms(text: str, terms: list[str]) -> list[str]:
    low = text.lower()
    found = []
    for t in terms:
        pattern = r"(?<!\w)" + re.escape(str(t).lower()) + r"(?!\w)"
        if re.search(pattern, low):
            found.append(str(t))
    return found


def contains_any(text: str, terms: list[str]) -> tuple[bool, str]:
    """At least one of the terms (case-insensitive, whole words)."""
    found = _found_terms(text, terms)
    return bool(found), f"found {found}" if found else f"none of {list(terms)}"


def contains_none(text: str, terms: list[str]) -> tuple[bool, str]:
    """None of the terms (case-insensitive, whole words)."""
    found = _found_terms(text, terms)
    return not found, f"found {found}" if found else f"none of {list(terms)}"


def has_citations(text: str) -> tuple[bool, str]:
    """A citation: [1], (Author, 2020), a DOI, a link, or a References section."""
    for pattern, name in _CITATION:
        m = pattern.search(text)
        if m:
            return True, f"{name}: {m.group(0).strip()[:60]!r}"
    return False, "no citations, links or references"


VERIFIERS: dict[str, Check] = {
    "word_count_range": word_count_range,
    "word_count_max": word_count_max,
    "word_count_min": word_count_min,
    "numbered_list": numbered_list,
    "unnumbered_bullets": unnumbered_bullets,
    "no_bullets": no_bullets,
    "item_count": item_count,
    "first_person": first_person,
    "third_person": third_person,
    "has_code_block": has_code_block,
    "no_code_block": no_code_block,
    "has_table": has_table,
    "no_table": no_table,
    "has_headings": has_headings,
    "no_headings": no_headings,
    "contains_any": contains_any,
    "contains_none": contains_none,
    "has_citations": has_citations,
}


def judge_id(verifier_id: str) -> str:
    return f"verifier:{verifier_id}"


def run_verifier(ref: VerifierRef, text: str, target: str) -> Verdict:
    """One checkpoint's verifier verdict; an unknown id or bad parameters give an unscored verdict."""
    check = VERIFIERS.get(ref.id)
    if check is None:
        return Verdict(target=target, kind="checkpoint", judge=judge_id(ref.id), passed=None,
                       rationale=f"unknown verifier {ref.id!r}")
    try:
        passed, why = check(text, **ref.params)
    except (TypeError, ValueError) as e:
        return Verdict(target=target, kind="checkpoint", judge=judge_id(ref.id), passed=None,
                       rationale=f"verifier {ref.id} failed: {e}")
    return Verdict(target=target, kind="checkpoint", judge=judge_id(ref.id), passed=bool(passed), rationale=why)


def score_verifiers(text: str, checkpoints: list[Checkpoint], *, run_key: str = "") -> ScoreRecord | None:
    """The "verifiers" ScoreRecord of a response: one verdict per checkpoint that has a verifier.

    None when no checkpoint has one (nothing to store)."""
    verdicts = [run_verifier(c.verifier, text, c.id) for c in checkpoints if c.verifier is not None]
    if not verdicts:
        return None
    return ScoreRecord(run_key=run_key, scorer=SCORER, repeat=0, verdicts=verdicts, score=mean_passed(verdicts))
