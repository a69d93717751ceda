"""No surface tells: simple features of a turn do not locate the evidence, and the LLM writer is
not handed the retriever's cue words."""

from __future__ import annotations

import numpy as np
import pytest

from iba import prompts
from iba.construct import noise
from iba.construct.llm_exchange import SIGNAL_INSTRUCTIONS
from iba.construct.stats import TELL_FEATURES, TELL_LIMIT, auc, compute_stats
from iba.retrieval import salience
from iba.types import SIGNAL_TYPES


def test_auc_of_known_data():
    assert auc([3, 4, 5], [0, 1, 2]) == 1.0  # perfectly separated
    assert auc([0, 1, 2], [3, 4, 5]) == 0.0
    assert auc([1, 2, 3], [1, 2, 3]) == 0.5  # identical
    assert auc([7, 7], [7, 7, 7]) == 0.5  # all tied
    # by hand: pairs (pos, neg) with pos > neg count 1, ties 1/2:
    # 2 vs (1, 2, 3): 1 + .5 + 0 = 1.5; 4 vs (1, 2, 3): 3 -> 4.5 / 6 = 0.75
    assert auc([2, 4], [1, 2, 3]) == pytest.approx(0.75)
    assert auc([], [1, 2]) == 0.5


def test_auc_matches_the_pairwise_definition():
    rng = np.random.default_rng(0)
    pos, neg = rng.integers(0, 6, 40), rng.integers(1, 7, 55)  # many ties
    pairs = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    assert auc(pos, neg) == pytest.approx(pairs / (len(pos) * len(neg)))


def test_no_simple_feature_tells_evidence_from_noise(small_dir):
    tells = compute_stats(small_dir)["tells"]
    assert set(tells["auc"]) == set(TELL_FEATURES)
    assert tells["evidence_turns"] > 100 and tells["noise_user_turns"] > 10 * tells["evidence_turns"]
    bad = {k: v for k, v in tells["auc"].items() if not 0.5 <= v <= TELL_LIMIT}
    assert not bad, f"features that locate the evidence: {bad}"


def test_padded_sessions_look_like_noise_sessions():
    import random

    rng = random.Random(3)
    drawn = [noise.padded_length(rng, 4) for _ in range(2000)]
    assert all(n in noise.LENGTHS and n >= 4 and offset % 2 == 0 and 0 <= offset <= n - 4 for n, offset in drawn)
    assert len({n for n, _ in drawn}) > 8 and len({o for _, o in drawn}) > 8


def _cue_hits(text: str) -> list[str]:
    return [kind for kind, pattern in salience._CUE_RE.items() if pattern.search(text)]


@pytest.mark.parametrize("signal", SIGNAL_TYPES)
def test_writer_instructions_do_not_contain_retrieval_cues(signal):
    assert not _cue_hits(SIGNAL_INSTRUCTIONS[signal])
    for position in (0, 2):
        # neutral stand-ins for the per-item data, so only the writer's own wording is checked
        for extra in ({}, {"for_whom": "W", "mid_session": True, "anchor": True, "recent": True}):
            p = prompts.render(
                "build_user_turns", persona="P.", scenario="S", topic="T", position=position, targets=["X"], cues=["Y"],
                avoid=["Z"], signal_instruction=SIGNAL_INSTRUCTIONS[signal], feedback="F", previous="Q", **extra,
            )
            text = "\n".join(m["content"] for m in p.messages)
            assert not _cue_hits(text), (signal, position, extra, _cue_hits(text))
    for form in ("ended", "hypothetical"):  # distractors told in passing
        p = prompts.render("build_aside_turns", persona="P.", scenario="S", form=form, targets=["X"], cues=["Y"], avoid=["Z"],
                           signal_instruction=SIGNAL_INSTRUCTIONS[signal], anchor=True, feedback="F", previous="Q")
        text = "\n".join(m["content"] for m in p.messages)
        assert not _cue_hits(text), (signal, form, _cue_hits(text))


def test_chat_writer_instructions_do_not_contain_retrieval_cues():
    for mention in ("", "M"):
        p = prompts.render("build_casual_chat", persona="P.", topic="T", n_turns=4, category_hint="H", mention=mention)
        assert not _cue_hits("\n".join(m["content"] for m in p.messages))


def test_history_fields_fast_path_agrees_with_json(small_dir, tmp_path):
    import json

    from iba.construct.stats import _turn_fields

    src = sorted((small_dir / "histories").glob("*.jsonl"))[0]
    lines = [json.loads(x) for x in src.read_text(encoding="utf-8").splitlines()][:60]
    lines[3]["text"] = 'quote " and backslash \\ and é'
    lines[5]["text"] = 'a text that looks like fields: ","role":"assistant","text":"x'
    other = tmp_path / "h.jsonl"  # another key order and an escaped text: the JSON path
    other.write_text("".join(json.dumps(dict(reversed(list(t.items())))) + "\n" for t in lines), encoding="utf-8")
    same = tmp_path / "g.jsonl"
    same.write_text("".join(json.dumps(t, separators=(",", ":"), ensure_ascii=False) + "\n" for t in lines), encoding="utf-8")
    assert _turn_fields(other) == _turn_fields(same)
    users = [t for t in lines if t["role"] == "user"]
    assert _turn_fields(same)[4] == [len(t["text"]) for t in users]
    # a field after the text, a first key other than id: read as JSON, not cut at a '","'
    more = tmp_path / "m.jsonl"
    more.write_text("".join(json.dumps({**t, "lang": "en"}, separators=(",", ":"), ensure_ascii=False) + "\n"
                            for t in lines), encoding="utf-8")
    first = tmp_path / "f.jsonl"
    first.write_text("".join(json.dumps({"n": i, **t}, separators=(",", ":")) + "\n" for i, t in enumerate(lines)),
                     encoding="utf-8")
    assert _turn_fields(more) == _turn_fields(first) == _turn_fields(same)
