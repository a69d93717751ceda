"""LLM builds by a real model (slow): through batch rounds answered by `iba batch answer` on the
embedded model, and through a live llama_cpp.server. SmolLM2-135M writes poorly; what is checked is
the mechanics: the answer key and distractor labels are the procedural build's, the dataset passes
its checks, the statistics and audits are computed, a killed batch build resumes from its journal.

The build is the smallest the builder makes (one persona, one CallAPI instance, a short history),
so each test makes a dozen or two model calls.
"""

from __future__ import annotations

import json

import pytest

from iba.cli import main
from iba.construct.builder import build_dataset
from iba.construct.llm_journal import JOURNAL, Journal
from iba.construct.llm_writer import BatchPending
from iba.construct.presets import Preset
from iba.construct.stats import compute_stats
from iba.dataset import Dataset
from iba.llm import resolve_backend

pytestmark = pytest.mark.slow

TINY = Preset(name="tiny", help="one persona, one food order", scenarios=("food_ordering",), personas=1,
              instances_per_scenario=1, noise_ratio=50)
SEED, HISTORY = 42, 30  # one evidence exchange, one state mention, three distractors of three forms
OPTIONS = dict(preset=TINY, seed=SEED, history_turns=HISTORY, progress=False, max_rewrites=0)


def truth(root) -> tuple:
    """What no writer may change: instances, the answer key and the distractor labels, spans aside."""
    ds = Dataset(root)
    keys = {k: v.model_dump(exclude={"evidence": {"__all__": {"span", "clause"}}}) for k, v in ds.answer_keys().items()}
    labels = sorted(d.model_dump_json(exclude={"span", "clause"}) for v in ds.distractors().values() for d in v)
    return (root / "instances.jsonl").read_bytes(), keys, labels


@pytest.fixture(scope="module")
def procedural(tmp_path_factory):
    out = tmp_path_factory.mktemp("proc")
    build_dataset(out, **OPTIONS)
    return out


def _check_llm_build(out, procedural, scope: str) -> dict:
    assert truth(out) == truth(procedural)
    ds = Dataset(out)
    ds.check()  # every recovered span points at its clause
    manifest = ds.manifest
    assert manifest.writer == "llm" and manifest.params["llm_scope"] == scope
    report = json.loads((out / "writer_report.json").read_text())
    assert report["distractors"]["checked_turns"] + report["distractors"]["fallbacks"] >= 3
    assert report["usage"]["llm_calls"] > 0 and report["usage"]["completion_tokens"] > 0
    # the turns of a model-written distractor are not the procedural writer's
    proc = {t.id: t.text for t in Dataset(procedural).history("u0000")}
    llm = {t.id: t.text for t in ds.history("u0000")}
    entries = [json.loads(x) for x in (out / JOURNAL).read_text().splitlines()[1:]]
    written = [p["key"] for e in entries for p in e["pieces"] if not p["fallback"]]
    assert written and any(llm[i] != proc[i] for i in llm)
    stats = compute_stats(out)
    # the audits run on the LLM build as on any: figures where the build is big enough, else the reason
    assert set(stats["tells"]["auc"]) >= {"turn_length", "session_length"}
    for audit in ("tell_audit", "style_audit"):
        assert audit in stats
    assert not stats["style_audit"]["available"] and "2 personas" in stats["style_audit"]["reason"]
    return report


def test_batch_rounds_answered_by_iba_batch_answer_build_the_same_key(tmp_path, procedural, smollm_gguf, monkeypatch):
    out, batch = tmp_path / "llm", tmp_path / "batch"
    backend = resolve_backend("local:smollm2-135m", use_cache=False, sends=False)
    real_add = Journal.add
    rounds, killed = 0, 0

    def dies_after_one(self, entry):  # the process is killed right after journaling a session
        real_add(self, entry)
        raise KeyboardInterrupt

    while True:
        try:
            if not killed:
                monkeypatch.setattr(Journal, "add", dies_after_one)
                try:
                    build_dataset(out, writer="llm", backend=backend, batch=batch, **OPTIONS)
                except KeyboardInterrupt:
                    journaled = (out / JOURNAL).read_text().splitlines()[1:]
                    killed = len(journaled)
                finally:
                    monkeypatch.setattr(Journal, "add", real_add)
            build_dataset(out, writer="llm", backend=backend, batch=batch, **OPTIONS)  # resumes from the journal
            break
        except BatchPending as p:
            rounds += 1
            assert rounds <= 8 and p.written > 0
            # 1: a failed call, asked again in the next round
            assert main(["batch", "answer", str(batch), "--model", "local:smollm2-135m", "--no-cache", "--quiet"]) in (0, 1)
    assert killed >= 1
    # the session journaled before the kill is kept as it was written, not asked again
    resumed = [json.loads(x) for x in (out / JOURNAL).read_text().splitlines()[1:]]
    assert [json.loads(x) for x in journaled] == resumed[:killed]
    history = [t.text for t in Dataset(out).history("u0000")]
    for entry in resumed[:killed]:
        n = len(entry["texts"])
        assert any(history[i : i + n] == entry["texts"] for i in range(len(history) - n + 1))
    # and the same result again: a rerun replays the journal into the same bytes, calling no model
    files = {f.relative_to(out): f.read_bytes() for f in sorted(out.rglob("*.jsonl"))}
    build_dataset(out, writer="llm", backend=backend, batch=batch, **OPTIONS)
    assert {f.relative_to(out): f.read_bytes() for f in sorted(out.rglob("*.jsonl"))} == files
    # user turns, their check, the replies: a round each (a corrective retry adds one)
    assert 3 <= rounds <= 8
    report = _check_llm_build(out, procedural, "all")
    assert report["chat"]["written"] > 0  # scope all: the filler chat is the model's too
    lines = (out / JOURNAL).read_text().splitlines()
    assert len({json.loads(x)["key"] for x in lines[1:]}) == len(lines) - 1  # each session journaled once


def test_a_live_server_writes_the_same_key(tmp_path, procedural, llama_server):
    out = tmp_path / "llm"
    backend = resolve_backend("openai:smollm2", base_url=llama_server, use_cache=False, timeout=600)
    build_dataset(out, writer="llm", backend=backend, llm_scope="exchanges", concurrency=2, **OPTIONS)
    report = _check_llm_build(out, procedural, "exchanges")
    assert report["chat"]["written"] == 0
