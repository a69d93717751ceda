"""`iba validate`: AI annotation of sampled instances, agreement by hand-checkable numbers."""

from __future__ import annotations

import json
import math
import re

import pytest

from iba.construct.validate import CRITERIA, format_table11, sample_instances, validate_dataset
from iba.dataset import Dataset
from tests.fakes import ScriptedBackend


def _annotator(table):
    """A scripted annotator answering from `table`: instance index -> (r, c, p) or None (garbage)."""

    def reply(messages, kwargs):
        prompt = " ".join(m["content"] for m in messages)  # a retry appends messages after the prompt
        idx = int(re.search(r"ITEM(\d+)", prompt).group(1))
        row = table[idx]
        if row is None:
            return "I think this instance is fine overall."  # never valid JSON: unscored
        return {"reasonableness": row[0], "coherence": row[1], "persona_consistency": row[2], "rationale": "ok"}

    return reply


@pytest.fixture
def tagged_demo(demo_dir, tmp_path):
    """The demo with each query tagged ITEMk (k = position in the validation sample)."""
    import shutil

    root = tmp_path / "demo"
    shutil.copytree(demo_dir, root)
    ds = Dataset(root)
    order = [tv.instance_id for tv in sample_instances(ds, 200, 42)]
    lines = []
    for tv in ds.instances:
        tv.query = f"ITEM{order.index(tv.instance_id)} {tv.query}"
        lines.append(tv.model_dump_json())
    (root / "instances.jsonl").write_text("\n".join(lines) + "\n")
    return root


async def test_agreement_numbers_are_the_hand_computed_ones(tagged_demo):
    a = {0: (1, 1, 1), 1: (1, 1, 1), 2: (1, 1, 0), 3: (1, 0, 1), 4: (1, 1, 1), 5: (0, 1, 1)}
    b = {0: (1, 1, 1), 1: (1, 1, 1), 2: (1, 1, 1), 3: (0, 0, 1), 4: (1, 1, 1), 5: None}
    report = await validate_dataset(
        tagged_demo, [("m1", ScriptedBackend(_annotator(a), "scripted:a")), ("m2", ScriptedBackend(_annotator(b), "scripted:b"))],
        sample=200, seed=42, progress=False, concurrency=2,
    )
    assert report["sample"] == 6
    assert report["unscored"] == {"m1": 0, "m2": 1}
    pair = report["pairs"][0]
    # items 0-4 are scored by both. reasonableness: a=1,1,1,1,1 b=1,1,1,0,1 -> Po 4/5;
    # pi_1 = 9/10, Pe = 2 * 0.9 * 0.1 = 0.18, AC1 = (0.8 - 0.18) / 0.82
    r = pair["per_dimension"]["reasonableness"]
    assert r["n"] == 5 and r["agreement"] == 0.8
    assert math.isclose(r["ac1"], round((0.8 - 0.18) / 0.82, 4))
    # coherence: a=1,1,1,0,1 b=1,1,1,0,1 -> full agreement, AC1 1
    assert pair["per_dimension"]["coherence"] == {"agreement": 1.0, "ac1": 1.0, "n": 5}
    # persona consistency: a=1,1,0,1,1 b=1,1,1,1,1 -> Po 0.8, same AC1 as reasonableness
    assert pair["per_dimension"]["persona_consistency"]["agreement"] == 0.8
    # overall pools the 15 pairs: 13 agree; 26 of the 30 labels are 1 -> pi_1 = 26/30,
    # Pe = 2 * (26/30) * (4/30) = 0.23111, AC1 = (13/15 - Pe) / (1 - Pe) = 0.8266
    o = pair["overall"]
    assert o["n"] == 15 and math.isclose(o["agreement"], round(13 / 15, 4))
    pe = 2 * (26 / 30) * (4 / 30)
    assert math.isclose(o["ac1"], round((13 / 15 - pe) / (1 - pe), 4)) and o["ac1"] == 0.8266
    saved = json.loads((tagged_demo / "validation.json").read_text())
    assert saved["pairs"] == report["pairs"]
    assert saved["items"][5]["ratings"]["m2"] is None and "m2" in saved["items"][5]["errors"]
    table = format_table11(report)
    assert "Reasonableness" in table and "80.0%" in table and "unscored (unparseable) ratings: m1 0, m2 1" in table


async def test_prompt_shows_persona_evidence_and_task(demo_dir):
    seen = []

    def reply(messages, kwargs):
        seen.append(messages[-1]["content"])
        return {"reasonableness": 1, "coherence": 1, "persona_consistency": 1}

    await validate_dataset(demo_dir, [("x", ScriptedBackend(reply)), ("y", ScriptedBackend(reply))], sample=2, seed=1,
                           out=demo_dir / "v.json", progress=False)
    ds = Dataset(demo_dir)
    keys = ds.answer_keys()
    chosen = sample_instances(ds, 2, 1)
    assert len(seen) == 4
    for tv in chosen:
        prompt = next(p for p in seen if tv.query in p)
        assert ds.personas[tv.user_id].name in prompt
        hist = {t.id: t.text for t in ds.history(tv.user_id)}
        for lab in keys[tv.instance_id].evidence:
            assert hist[lab.turn_id][:60] in prompt


async def test_one_annotator_is_refused(demo_dir):
    with pytest.raises(ValueError, match="at least two annotators"):
        await validate_dataset(demo_dir, [("x", ScriptedBackend([]))], progress=False)


def test_sample_is_seeded_and_sorted(demo):
    a = [t.instance_id for t in sample_instances(demo, 3, 1)]
    assert a == [t.instance_id for t in sample_instances(demo, 3, 1)]
    assert a == sorted(a) and len(set(a)) == 3
    assert CRITERIA == ("reasonableness", "coherence", "persona_consistency")
