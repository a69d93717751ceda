"""Pair each noise topic's user questions and openers with the fact that answers them (generator v3).

  python tools/pair_noise_answers.py            # print the pairs and their scores (a dry run)
  python tools/pair_noise_answers.py --write    # write `answers:` / `opener_answers:` into the topic files

Generator v3 lets the assistant answer the question the user asked, so a topic needs to say which of
its facts answers which question. The topic files were written with questions and facts side by side
but unpaired; this tool pairs them once, by meaning: the packaged MiniLM's cosine similarity between a
question and each fact, plus a little word overlap, and a one-to-one assignment per topic (questions
first, then openers, each fact answering at most one of them). A question whose best possible fact
scores below THRESHOLD gets no answer (`-1`): v3 answers it with a hedge ("I'm not sure about that
exactly, but ...") and another fact of the topic. The threshold was set by reading pairs by hand: of
14 read from 0.50 to 0.55, about half answered their question and half only shared its topic; above
0.6 most read as answers, below 0.45 most did not (and some good pairs, e.g. 0.48, fall under it). The result is data, reviewed like
any data file; rerunning the tool on unchanged topics gives the same pairs.
"""

from __future__ import annotations

import argparse
import re
from importlib import resources

import numpy as np
import yaml
from scipy.optimize import linear_sum_assignment

THRESHOLD = 0.55  # below it a question gets no pair: v3 answers it with a hedge and a related fact
OPENER_THRESHOLD = 0.35  # an opener asks broadly: a fact on its topic answers it
_WORD = re.compile(r"[a-z]{4,}")
_STOP = frozenset("that this with what when will would there their they have from your about which should does into than then them".split())


def _words(s: str) -> set[str]:
    return {w[:6] for w in _WORD.findall(s.lower())} - _STOP


def scores(embed, asks: list[str], facts: list[str]) -> np.ndarray:
    a, f = embed(asks), embed(facts)
    sim = a @ f.T
    overlap = np.array([[len(_words(q) & _words(x)) / max(1, len(_words(q))) for x in facts] for q in asks])
    return sim + 0.3 * overlap


def assign(score: np.ndarray, threshold: float = THRESHOLD) -> list[int]:
    """The fact of each row (one-to-one, highest total score), -1 where that scores under THRESHOLD."""
    rows, cols = linear_sum_assignment(-score)
    out = [-1] * score.shape[0]
    for r, c in zip(rows, cols):
        if score[r, c] >= threshold:
            out[r] = int(c)
    return out


def pair_topic(embed, topic: dict) -> tuple[list[int], list[int], np.ndarray]:
    facts = topic["facts"]
    qs = scores(embed, topic["questions"], facts)
    answers = assign(qs)
    left = [i for i in range(len(facts)) if i not in answers]
    ops = scores(embed, topic["openers"], [facts[i] for i in left])
    opener_answers = [left[i] if i >= 0 else -1 for i in assign(ops, OPENER_THRESHOLD)] if left else [-1] * len(topic["openers"])
    return answers, opener_answers, qs


def _insert(text: str, pairs: dict[str, tuple[list[int], list[int]]]) -> str:
    """The file's text with each topic's pairs written after its `topic:` line (replacing old ones)."""
    lines = [ln for ln in text.splitlines() if not ln.lstrip().startswith(("answers:", "opener_answers:"))]
    out, current = [], None
    for ln in lines:
        m = re.match(r"- id: (\S+)", ln)
        if m:
            current = m.group(1)
        out.append(ln)
        if current and ln.startswith("  topic:"):
            a, o = pairs[current]
            out.append(f"  answers: {a}  # the fact answering each question (tools/pair_noise_answers.py)")
            out.append(f"  opener_answers: {o}")
    return "\n".join(out) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--write", action="store_true", help="write the pairs into the topic files")
    args = p.parse_args()
    from iba.retrieval.embed import get_embedder

    model = get_embedder("minilm")
    cache: dict[str, np.ndarray] = {}

    def embed(texts: list[str]) -> np.ndarray:
        todo = [t for t in texts if t not in cache]
        if todo:
            for t, v in zip(todo, model.encode(todo)):
                cache[t] = v
        return np.stack([cache[t] for t in texts])

    root = resources.files("iba.construct").joinpath("data/noise_topics")
    unanswered = total = 0
    for entry in sorted(root.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".yaml"):
            continue
        text = entry.read_text(encoding="utf-8")
        pairs = {}
        for t in yaml.safe_load(text):
            a, o, qs = pair_topic(embed, t)
            pairs[t["id"]] = (a, o)
            for i, q in enumerate(t["questions"]):
                total += 1
                unanswered += a[i] < 0
                got = t["facts"][a[i]] if a[i] >= 0 else "(none)"
                print(f"{t['id']}\t{qs[i, a[i]] if a[i] >= 0 else qs[i].max():.2f}\tQ: {q}\n\t\tA: {got}")
        if args.write:
            entry_path = str(entry)
            with open(entry_path, "w", encoding="utf-8") as f:
                f.write(_insert(text, pairs))
    print(f"questions: {total}, without an answer: {unanswered}")


if __name__ == "__main__":
    main()
