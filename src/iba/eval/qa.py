"""The QA probe (paper Fig. 5d, the knowledge-to-action gap).

The runner asks the same agent and model the instance's multiple-choice question about the same
preference, as a plain generate task whose query is `qa_prompt(probe)`, and stores it as a
RunRecord whose `probe` is the probe's id. Scoring parses the answer
deterministically (`parse_choice_why`) under scorer "qa": 1 when the chosen option is the key's
answer, 0 when another option was chosen, and 0 flagged with its reason when no single option can
be read: "hedged_answer" (several options named) or "unparseable_answer" (none). The answer is
the agent's output, so a reply that picks nothing is the agent's failure, not a missing score.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from string import ascii_uppercase

from iba import prompts
from iba.types import AnswerKey, QAProbe, ScoreRecord, Verdict

SCORER = "qa"
JUDGE = "qa-parse"
TEMPLATE = "judge_qa_probe"


def letters(n: int) -> str:
    if not 1 <= n <= len(ascii_uppercase):
        raise ValueError(f"a QA probe needs 1 to 26 options, got {n}")
    return ascii_uppercase[:n]


def qa_prompt(probe: QAProbe) -> str:
    """The question with lettered options (A, B, C...) that the runner uses as the task query."""
    opts = [{"letter": letter, "text": text} for letter, text in zip(letters(len(probe.options)), probe.options)]
    return prompts.render(TEMPLATE, question=probe.question, options=opts).messages[-1]["content"]


# --------------------------------------------------------------------------- parsing

_MD = re.compile(r"[*_`#>]+")
_KEYWORD = re.compile(
    r"\b(?:final\s+answer|answer|option|choice|choose|chose|pick|select(?:ed)?)\b\s*(?:is|would\s+be|:|=|-)?\s*"
    r"(?:option\s+|letter\s+)?[\(\[]?([A-Za-z])(?![A-Za-z])", re.I)
_LEADING = re.compile(r"^\s*[\(\[]?([A-Z])(?:[\)\].:]|\s*$|\s+[-\u2013\u2014]\s)")
_BARE = re.compile(r"[\(\[]?([A-Za-z])[\)\].]?")
_PAREN = re.compile(r"[\(\[]([A-Z])[\)\]]")
_SEP = re.compile(r"[\s_\-]+")


def _norm(text: str) -> str:
    return _SEP.sub(" ", re.sub(r"[^\w\s\-]", " ", text.lower())).strip()


def _single(found: list[int]) -> int | None | bool:
    """One distinct index -> it; several -> False (ambiguous); none -> None (try the next rule)."""
    distinct = sorted(set(found))
    if len(distinct) == 1:
        return distinct[0]
    return False if distinct else None


def parse_choice_why(text: str, n_options: int, options: Sequence[str] | None = None) -> tuple[int | None, str]:
    """(option index, "") or (None, "hedged_answer" | "unparseable_answer").

    Rules, strongest first; the first rule that finds anything decides, and if it finds two
    different options the answer is ambiguous (None):
      1. the whole reply is one letter: "b", "(B)", "B.";
      2. a keyword before a letter: "Answer: B", "the answer is (b)", "I choose option C";
      3. a capital letter opening the reply ("B. ...", "(B) ...", "B) ...", "B - ...") together
         with parenthesised capital letters anywhere ("... so (B)");
      4. the option text itself (needs `options`), whole words, case- and punctuation-blind;
         an option whose text lies inside another found option's text is dropped.
    Letters beyond the n_options offered are ignored.
    """
    if not text or not text.strip():
        return None, "unparseable_answer"
    valid = letters(n_options)
    clean = _MD.sub("", text).strip()

    def idx(letter: str) -> int | None:
        letter = letter.upper()
        return valid.index(letter) if letter in valid else None

    def keyword_letters() -> list[int | None]:
        out = []
        for m in _KEYWORD.finditer(clean):
            letter, rest = m.group(1), clean[m.end():m.end() + 1]
            # a lower-case letter counts only when set off ("answer: b."), not "the answer is a bit"
            if letter.isupper() or rest in ("", ")", "]", ".", ",", ";", ":", "\n"):
                out.append(idx(letter))
        return out

    bare = _BARE.fullmatch(clean)
    rules = [
        [idx(bare.group(1))] if bare else [],
        keyword_letters(),
        # a leading letter and parenthesised letters form one rule, so "(A) or (B)" is ambiguous
        [idx(m.group(1)) for m in [_LEADING.match(clean)] if m] + [idx(m.group(1)) for m in _PAREN.finditer(clean)],
    ]
    if options:
        body = f" {_norm(clean)} "
        hits = [i for i, o in enumerate(options[:n_options]) if _norm(o) and f" {_norm(o)} " in body]
        rules.append([i for i in hits if not any(j != i and _norm(options[i]) in _norm(options[j]) for j in hits)])
    for found in rules:
        picked = _single([i for i in found if i is not None])
        if picked is False:
            return None, "hedged_answer"
        if picked is not None:
            return int(picked), ""
    return None, "unparseable_answer"


# --------------------------------------------------------------------------- scoring


def score_qa(text: str | None, key: AnswerKey, probe_id: str, *, run_key: str = "") -> ScoreRecord:
    """The "qa" ScoreRecord of one answered probe."""
    probe = next((p for p in key.qa if p.id == probe_id), None)
    failure: str | None = None
    if probe is None:
        v = Verdict(target=probe_id, kind="qa", judge=JUDGE, passed=None,
                    rationale=f"no QA probe {probe_id!r} in the answer key of {key.instance_id}")
    else:
        choice, why = parse_choice_why(text or "", len(probe.options), probe.options)
        right = letters(len(probe.options))[probe.answer]
        if choice is None:
            failure = why
            what = "several options named" if why == "hedged_answer" else "no option could be read"
            v = Verdict(target=probe.id, kind="qa", judge=JUDGE, passed=False,
                        rationale=f"{why}: {what} in the answer, scored 0 (correct: {right})")
        else:
            got = letters(len(probe.options))[choice]
            v = Verdict(target=probe.id, kind="qa", judge=JUDGE, passed=choice == probe.answer,
                        rationale=f"chose {got} ({probe.options[choice]!r}); correct: {right}")
    v = v.model_copy(update={"prompt_hash": prompts.template_hash(TEMPLATE)})
    return ScoreRecord(run_key=run_key, scorer=SCORER, repeat=0, verdicts=[v],
                       score=None if v.passed is None else float(v.passed), failure=failure)
