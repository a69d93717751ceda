"""The LLM writer and the validator against the real embedded model (slow: llama.cpp on the CPU).

SmolLM2-135M keeps these quick; its text quality does not matter here, only that the real
backend's schema-constrained JSON flows through both components (1-2 items each).
"""

from __future__ import annotations

import pytest

from iba.construct.builder import plan_dataset
from iba.construct.llm_writer import LLMWriter
from iba.construct.presets import get_preset
from iba.construct.procedural_writer import ProceduralWriter
from iba.construct.validate import CRITERIA, validate_dataset
from iba.taxonomy import load_taxonomy

pytestmark = pytest.mark.slow


async def test_real_model_writes_and_checks_one_evidence_session(smollm_backend, tmp_path):
    plans = plan_dataset(load_taxonomy(), get_preset("demo"), seed=42, noise_ratio=50, history_turns=None, personas=None)
    # an evidence session with no distractor exchange in its filler: three calls (user turns, check, replies)
    plan, session = next((p, s) for p in plans for s in p.sessions if s.kind == "evidence" and not s.distractors)
    writer = LLMWriter(smollm_backend, tmp_path, seed=42, max_rewrites=0, concurrency=1, progress=False, scope="exchanges")
    entry = await writer.write_session(plan, session)
    assert entry["key"] == session.key and entry["turn_id"] == session.item.turn_id
    # the four-turn exchange sits inside filler chat, so the session is as long as a noise session
    assert len(entry["texts"]) == session.n_turns and all(t.strip() for t in entry["texts"])
    [core] = entry["pieces"]
    assert core["role"] == "evidence" and core["attempts"] == 1  # max_rewrites=0: one try, then reported
    assert entry["usage"]["llm_calls"] >= 2 and entry["usage"]["prompt_tokens"] > 100
    if not core["fallback"]:
        assert core["passed"] in (True, False)
        assert entry["texts"] != ProceduralWriter(42).texts(plan, session)
        assert core["passed"] or core["problems"]  # a failed check always says why
        turn = entry["texts"][session.labelled]
        for name, (start, end, clause) in entry["spans"][session.item.key].items():  # found where it says
            assert turn[start:end] == clause


async def test_real_model_annotates_one_instance_twice(smollm_backend, demo_dir, tmp_path):
    report = await validate_dataset(
        demo_dir, [("a", smollm_backend), ("b", smollm_backend)], sample=1, seed=3, concurrency=1, out=tmp_path / "v.json", progress=False
    )
    assert report["sample"] == 1 and report["temperature"] > 0  # same model twice: independent samples
    item = report["items"][0]
    for label in ("a", "b"):
        r = item["ratings"][label]
        assert (r is None) == (label in item["errors"])  # parsed, or unscored with the reason
        if r is not None:
            assert all(isinstance(r[c], bool) for c in CRITERIA)
    both = all(item["ratings"][x] is not None for x in ("a", "b"))
    assert report["pairs"][0]["overall"]["n"] == (3 if both else 0)
