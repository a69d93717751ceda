"""Judge panel passes, repeats with per-repeat seeds, and the aggregation rules."""

from __future__ import annotations

import pytest

from iba.eval.panel import PanelConfig, judge_panel, mean_sd, panel_score, per_judge_scores
from iba.types import Checkpoint, ScoreRecord
from tests.fakes import ScriptedBackend

CPS = [
    Checkpoint(id=f"c{i}", dimension=f"d{i}", dimension_name=f"D{i}", value="v", expected=f"requirement {i}",
               kind="static", evidence=[])
    for i in range(3)
]


def responder(pattern):
    """Pass/fail by checkpoint (read from the prompt) and seed: pattern[(seed, requirement)]."""

    def reply(messages, kwargs):
        text = messages[1]["content"]  # the judge prompt (a retry appends more turns)
        for i in range(3):
            if f"requirement {i}" in text:
                return pattern(kwargs["seed"], i)
        raise AssertionError("unknown prompt")

    return reply


async def test_panel_repeats_vary_seed_and_aggregate():
    # judge A passes c0, c1 always; c2 only at seed 43 (repeat 1). judge B fails everything but c0,
    # and gives garbage for c2 (unscored, left out of its mean).
    a = ScriptedBackend(responder(lambda seed, i: {"passed": i < 2 or seed == 43, "rationale": "r"}), model_id="A")
    b = ScriptedBackend(responder(lambda seed, i: "garbage" if i == 2 else {"passed": i == 0, "rationale": "r"}),
                        model_id="B")
    stored: list[ScoreRecord] = []
    cfg = PanelConfig(repeats=2, seed=42)
    recs = await judge_panel("resp", CPS, [a, b], cfg, run_key="k", on_record=stored.append)
    assert [(r.scorer, r.repeat) for r in recs] == [("judge:A", 0), ("judge:A", 1), ("judge:B", 0), ("judge:B", 1)]
    assert len(stored) == 4
    got = {(r.scorer, r.repeat): r.score for r in recs}
    assert got[("judge:A", 0)] == pytest.approx(2 / 3)
    assert got[("judge:A", 1)] == pytest.approx(1.0)
    assert got[("judge:B", 0)] == pytest.approx(1 / 2)  # c2 unscored: mean over c0, c1
    assert {c[1]["seed"] for c in a.calls} == {42, 43}
    assert all(c[1]["temperature"] == 0.7 for c in a.calls)  # repeats sample so they can differ
    # per judge: A = (2/3 + 1)/2 = 5/6, B = 1/2; panel = (5/6 + 1/2)/2 = 2/3
    assert per_judge_scores(recs) == {"judge:A": pytest.approx(5 / 6), "judge:B": pytest.approx(0.5)}
    assert panel_score(recs) == pytest.approx(2 / 3)
    assert panel_score(recs, judges=["B"]) == pytest.approx(0.5)
    assert panel_score([]) is None


async def test_panel_skips_stored_pairs_and_single_pass_is_greedy():
    a = ScriptedBackend(lambda m, k: {"passed": True, "rationale": "r"}, model_id="A")
    recs = await judge_panel("resp", CPS, [a], PanelConfig(repeats=1), skip=lambda s, r: False)
    assert len(recs) == 1 and all(c[1]["temperature"] == 0.0 for c in a.calls)
    recs = await judge_panel("resp", CPS, [a], PanelConfig(repeats=3), skip=lambda s, r: r != 1)
    assert [r.repeat for r in recs] == [1]


async def test_batch_panel_uses_one_call_per_pass():
    a = ScriptedBackend(lambda m, k: {"verdicts": [{"id": c.id, "passed": True, "rationale": "r"} for c in CPS]},
                        model_id="A")
    recs = await judge_panel("resp", CPS, [a], PanelConfig(repeats=2, batch=True))
    assert len(a.calls) == 2 and [r.score for r in recs] == [1.0, 1.0]


def test_mean_sd():
    m, sd = mean_sd([0.5, 0.7, None, 0.9])
    assert m == pytest.approx(0.7) and sd == pytest.approx(0.2)  # sample sd: sqrt((.04+0+.04)/2)
    assert mean_sd([0.3]) == (0.3, None)
    assert mean_sd([None]) == (None, None)
