"""The LLM writer: same ground truth, model-written text, checked, rewritten, resumable."""

from __future__ import annotations

import json
import re

import pytest

from iba.construct.builder import build_dataset
from iba.construct.llm_journal import JOURNAL
from iba.dataset import Dataset
from iba.llm.base import LLMError
from tests.fakes import ScriptedBackend

HISTORY = 24  # short histories keep the scripted builds small


def role_of(messages) -> str:
    system = messages[0]["content"]
    if "simulate a real user" in system:
        return "user"
    if "check synthetic chat data" in system:
        return "check"
    if "helpful AI assistant" in system:
        return "assistant"
    if "realistic chat logs" in system:
        return "chat"
    raise AssertionError(f"unexpected prompt: {system[:80]}")


def good_responder(messages, kwargs):
    role = role_of(messages)
    user = messages[-1]["content"]
    if role == "user":
        evidence = "MODEL-EVIDENCE honestly I always go for the same thing here."
        if "in the same message you reveal" in user:  # the plan puts the evidence in the first message
            return {"first": evidence, "second": "Thanks, that works."}
        return {"first": "Could you help me with this one?", "second": evidence}
    if role == "check":
        return {"reveals": True, "states_outright": False, "reason": "shown through a reaction"}
    if role == "assistant":
        return {"first": "Here is a first version.", "second": "Understood, changing it."}
    n = int(re.search(r"exactly (\d+) messages", user).group(1))
    return {"turns": [f"MODEL-CHAT {i}" for i in range(n)]}


def _sessions_by_kind(out):
    entries = [json.loads(line) for line in (out / JOURNAL).read_text().splitlines()[1:]]
    return {e["key"]: e for e in entries}


def test_llm_build_has_the_procedural_ground_truth_and_model_text(tmp_path):
    build_dataset(tmp_path / "proc", preset="demo", seed=5, history_turns=HISTORY, progress=False)
    backend = ScriptedBackend(good_responder)
    manifest = build_dataset(
        tmp_path / "llm", preset="demo", seed=5, history_turns=HISTORY, writer="llm", backend=backend, progress=False, concurrency=3
    )
    proc, llm = Dataset(tmp_path / "proc"), Dataset(tmp_path / "llm")
    # the answer key does not depend on the writer; only the procedural writer knows where each
    # clause sits in its turn (spans), a model's turn has none
    def truth(ds):
        return {k: v.model_dump(exclude={"evidence": {"__all__": {"span", "clause"}}}) for k, v in ds.answer_keys().items()}

    assert truth(proc) == truth(llm)
    assert all(lab.span is None for k in llm.answer_keys().values() for lab in k.evidence)
    assert all(lab.span is not None for k in proc.answer_keys().values() for lab in k.evidence)
    assert (tmp_path / "proc" / "instances.jsonl").read_bytes() == (tmp_path / "llm" / "instances.jsonl").read_bytes()
    keys = llm.answer_keys()
    for tv in llm.instances:
        hist = {t.id: t for t in llm.history(tv.user_id)}
        assert [t.id for t in llm.history(tv.user_id)] == [t.id for t in proc.history(tv.user_id)]
        for lab in keys[tv.instance_id].evidence:
            text = hist[lab.turn_id].text
            assert "MODEL-EVIDENCE" in text or "MODEL-CHAT 0" == text  # evidence sessions / state mentions
    assert manifest.writer == "llm"
    report = json.loads((tmp_path / "llm" / "writer_report.json").read_text())
    assert report["fallbacks"] == 0 and report["failed_after_rewrites"] == 0
    assert report["checked_turns"] == manifest.counts["relevant_turns"]
    assert manifest.params["writer_report"]["passed"] == report["passed"]


def test_failed_checks_are_rewritten_then_reported(tmp_path):
    calls = {"user": 0}

    def names_the_dimension(messages, kwargs):
        if role_of(messages) == "user":
            calls["user"] += 1
            # names every dimension of the demo outright: the deterministic check rejects it
            bad = ("My Cuisine, Spice level, Food texture, Document structure, Technical depth, "
                   "Example code style and API explanation preferences are these.")
            return {"first": bad, "second": bad}
        return good_responder(messages, kwargs)

    build_dataset(tmp_path, preset="demo", seed=5, history_turns=HISTORY, writer="llm", backend=ScriptedBackend(names_the_dimension),
                  progress=False, max_rewrites=1)
    entries = _sessions_by_kind(tmp_path)
    evidence = [e for e in entries.values() if e["kind"] == "evidence"]
    assert evidence and all(e["attempts"] == 2 and e["passed"] is False for e in evidence)
    assert calls["user"] == 2 * len(evidence)
    assert all("names it outright" in e["problems"][0] for e in evidence)
    report = json.loads((tmp_path / "writer_report.json").read_text())
    assert report["failed_after_rewrites"] >= len(evidence)
    assert {f["key"] for f in report["failures"]} >= {e["key"] for e in evidence}
    assert Dataset(tmp_path).manifest.params["writer_report"]["failed_after_rewrites"] == report["failed_after_rewrites"]


def test_unparseable_sessions_fall_back_to_procedural_text_and_are_reported(tmp_path):
    def broken_chat(messages, kwargs):
        return "not json at all" if role_of(messages) == "chat" else good_responder(messages, kwargs)

    build_dataset(tmp_path, preset="demo", seed=5, history_turns=HISTORY, writer="llm", backend=ScriptedBackend(broken_chat),
                  progress=False, max_rewrites=0)
    report = json.loads((tmp_path / "writer_report.json").read_text())
    chats = [e for e in _sessions_by_kind(tmp_path).values() if e["kind"] != "evidence"]
    assert chats and report["fallbacks"] == len(chats)
    assert all(e["fallback"] and "used the procedural text" in e["problems"][-1] for e in chats)


class Interrupt(LLMError):
    pass


def test_interrupted_build_resumes_without_redoing_finished_sessions(tmp_path):
    n_calls = {"n": 0}

    def dies_after_20(messages, kwargs):
        n_calls["n"] += 1
        if n_calls["n"] > 20:
            raise Interrupt("connection lost")
        return good_responder(messages, kwargs)

    with pytest.raises(Interrupt):
        build_dataset(tmp_path, preset="demo", seed=5, history_turns=HISTORY, writer="llm", backend=ScriptedBackend(dies_after_20),
                      progress=False, concurrency=1)
    assert not (tmp_path / "manifest.json").exists()
    first = _sessions_by_kind(tmp_path)
    assert 0 < len(first)
    before = (tmp_path / JOURNAL).read_text()

    seen = []

    def recording(messages, kwargs):
        seen.append(role_of(messages))
        return good_responder(messages, kwargs)

    manifest = build_dataset(tmp_path, preset="demo", seed=5, history_turns=HISTORY, writer="llm", backend=ScriptedBackend(recording),
                             progress=False, concurrency=1)
    after = _sessions_by_kind(tmp_path)
    assert len(first) < len(after)  # the first run really stopped part-way
    assert (tmp_path / JOURNAL).read_text().startswith(before)  # finished sessions kept as written
    assert len(after) == manifest.counts["sessions"]
    remaining = [e for k, e in after.items() if k not in first]
    # what the rerun asked for is exactly the unfinished sessions: 3 calls per evidence session,
    # 1 per chat, 2 per active state mention (chat + check)
    expected = sum(3 if e["kind"] == "evidence" else (2 if e["turn_id"] else 1) for e in remaining)
    assert len(seen) == expected
    assert seen.count("user") == sum(e["kind"] == "evidence" for e in remaining)


def test_a_journal_of_another_build_is_refused(tmp_path):
    build_dataset(tmp_path, preset="demo", seed=5, history_turns=HISTORY, writer="llm", backend=ScriptedBackend(good_responder), progress=False)
    with pytest.raises(ValueError, match="belongs to a different build"):
        build_dataset(tmp_path, preset="demo", seed=6, history_turns=HISTORY, writer="llm", backend=ScriptedBackend(good_responder),
                      progress=False)


def test_torn_last_line_is_rewritten(tmp_path):
    build_dataset(tmp_path, preset="demo", seed=5, history_turns=HISTORY, writer="llm", backend=ScriptedBackend(good_responder), progress=False)
    path = tmp_path / JOURNAL
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][:15])  # a crash mid-write
    backend = ScriptedBackend(good_responder)
    build_dataset(tmp_path, preset="demo", seed=5, history_turns=HISTORY, writer="llm", backend=backend, progress=False)
    assert 1 <= len(backend.calls) <= 3  # only the torn session again
    assert all(json.loads(line) for line in path.read_text().splitlines())
