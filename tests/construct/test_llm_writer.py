"""The LLM writer: same ground truth, model-written text (distractors too), checked, rewritten,
spans where found, two scopes, resumable, and the same text through batch rounds."""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from iba.batch.answer import answer_awaiting
from iba.batch.folder import BatchFolder
from iba.construct.builder import build_dataset
from iba.construct.llm_journal import JOURNAL, Journal
from iba.construct.llm_writer import BatchPending
from iba.dataset import Dataset
from iba.llm.base import LLMError
from tests.fakes import ScriptedBackend

HISTORY = 24  # short histories keep the scripted builds small
# what the scripted model writes for every preference turn (evidence and distractors share one prompt)
PREF = "MODEL-PREF honestly I keep going for the same thing here."
ASIDE = "MODEL-ASIDE years ago I keep going for the same thing, ha."
QUOTE = "I keep going for the same thing"


def role_of(messages) -> str:
    system, user = messages[0]["content"], messages[-1]["content"]
    if "simulate a real user" in system:
        return "aside" if '{"user":' in user else "user"
    if "check synthetic chat data" in system:
        return "distractor_check" if "must not let a reader infer" in user else "check"
    if "helpful AI assistant" in system:
        return "assistant"
    if "realistic chat logs" in system:
        return "chat"
    raise AssertionError(f"unexpected prompt: {system[:80]}")


def good_responder(messages, kwargs):
    role = role_of(messages)
    user = messages[-1]["content"]
    if role == "user":
        if "in the same message you reveal" in user:  # the plan puts the preference in the first message
            return {"first": PREF, "second": "Thanks, that works."}
        return {"first": "Could you help me with this one?", "second": PREF}
    if role == "aside":
        return {"user": ASIDE, "assistant": "Ha, fair enough."}
    if role in ("check", "distractor_check"):
        n = kwargs["json_schema"]["properties"]["quotes"]["minItems"]
        verdict = {"reveals": True, "states_outright": False, "quotes": [QUOTE] * n, "reason": "shown through a reaction"}
        return verdict | ({"reveals_other": False} if role == "distractor_check" else {})
    if role == "assistant":
        return {"first": "Here is a first version.", "second": "Understood, changing it."}
    n = int(re.search(r"exactly (\d+) messages", user).group(1))
    return {"turns": [f"MODEL-CHAT {i}" for i in range(n)]}


def _journal(out):
    entries = [json.loads(line) for line in (out / JOURNAL).read_text().splitlines()[1:]]
    return {e["key"]: e for e in entries}


def _pieces(out):
    return [p for e in _journal(out).values() for p in e["pieces"]]


def truth(ds: Dataset) -> dict:
    """The answer keys without spans: what the writer must not change."""
    return {k: v.model_dump(exclude={"evidence": {"__all__": {"span", "clause"}}}) for k, v in ds.answer_keys().items()}


def labels(ds: Dataset) -> list:
    return [d for v in ds.distractors().values() for d in v]


def distractor_truth(ds: Dataset) -> list:
    return sorted((d.turn_id, d.dimension, d.value, d.form) for d in labels(ds))


@pytest.fixture(scope="module")
def proc_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("proc")
    build_dataset(out, preset="demo", seed=5, history_turns=HISTORY, progress=False)
    return out


def test_llm_build_has_the_procedural_ground_truth_and_model_text(tmp_path, proc_dir):
    backend = ScriptedBackend(good_responder)
    manifest = build_dataset(
        tmp_path, preset="demo", seed=5, history_turns=HISTORY, writer="llm", backend=backend, progress=False, concurrency=3
    )
    proc, llm = Dataset(proc_dir), Dataset(tmp_path)
    # the answer key and the distractor labels do not depend on the writer
    assert truth(proc) == truth(llm)
    assert distractor_truth(proc) == distractor_truth(llm)
    assert (proc_dir / "instances.jsonl").read_bytes() == (tmp_path / "instances.jsonl").read_bytes()
    llm.check()  # spans fit their turns
    keys = llm.answer_keys()
    for tv in llm.instances:
        hist = {t.id: t for t in llm.history(tv.user_id)}
        assert list(hist) == [t.id for t in proc.history(tv.user_id)]
        for lab in keys[tv.instance_id].evidence:
            text = hist[lab.turn_id].text
            assert text == PREF or text == "MODEL-CHAT 0"  # evidence exchanges / state mentions
            if text == PREF:  # the check's quote is in the turn: it is the span
                assert lab.clause == QUOTE and text[lab.span[0]:lab.span[1]] == lab.clause
    texts = {t.id: t.text for u in llm.personas for t in llm.history(u)}
    labs = labels(llm)
    assert labs and all(texts[d.turn_id] == (ASIDE if d.form in ("ended", "hypothetical") else PREF) for d in labs)
    assert all(d.clause == QUOTE for d in labs)  # model-written, spans where the check's quote is
    # scope all: every other user turn is the model's chat
    cited = {lab.turn_id for k in keys.values() for lab in k.evidence} | {d.turn_id for d in labs}
    user_turns = [t for u in llm.personas for t in llm.history(u) if t.role == "user" and t.id not in cited]
    assert user_turns and all(t.text.startswith("MODEL-") or t.text == "Could you help me with this one?"
                              or t.text == "Thanks, that works." for t in user_turns)
    assert manifest.writer == "llm" and manifest.params["llm_scope"] == "all"
    report = json.loads((tmp_path / "writer_report.json").read_text())
    assert report["fallbacks"] == 0 and report["failed_after_rewrites"] == 0
    assert report["checked_turns"] == manifest.counts["relevant_turns"]
    assert report["distractors"]["checked_turns"] == manifest.counts["distractor_turns"] == report["distractors"]["passed"]
    assert report["usage"]["llm_calls"] == len(backend.calls)
    assert manifest.params["writer_report"]["passed"] == report["passed"]


def test_a_distractor_check_names_the_preferences_of_the_users_tasks(tmp_path):
    backend = ScriptedBackend(good_responder)
    build_dataset(tmp_path, preset="demo", seed=5, history_turns=HISTORY, writer="llm", backend=backend, progress=False,
                  llm_scope="exchanges")
    ds = Dataset(tmp_path)
    checks = [m[-1]["content"] for m, _ in backend.calls if role_of(m) == "distractor_check"]
    assert len(checks) == len({d.turn_id for d in labels(ds)})
    expected = {c.expected for k in ds.answer_keys().values() for c in k.checkpoints}
    # every forbidden list holds its persona's key values (a Generate task's expected texts among them)
    assert any(any(e.split(" (the user's")[0] in c for e in expected) for c in checks)


def test_exchanges_scope_writes_only_the_exchanges(tmp_path, proc_dir):
    backend = ScriptedBackend(good_responder)
    manifest = build_dataset(tmp_path, preset="demo", seed=5, history_turns=HISTORY, writer="llm", backend=backend,
                             progress=False, llm_scope="exchanges")
    llm = Dataset(tmp_path)
    assert truth(llm) == truth(Dataset(proc_dir))
    llm.check()
    roles = [role_of(m) for m, _ in backend.calls]
    # casual chat only for the state mentions (one each), never for filler
    states = [p for p in _pieces(tmp_path) if p["role"] == "state"]
    assert roles.count("chat") == len(states) and not any(p["role"] == "chat" for p in _pieces(tmp_path))
    texts = [t.text for u in llm.personas for t in llm.history(u)]
    assert sum(t.startswith("MODEL-CHAT") for t in texts) == 4 * len(states)  # the state exchanges' four turns
    assert manifest.params["llm_scope"] == "exchanges"


def test_failed_checks_are_rewritten_then_reported(tmp_path):
    def names_the_dimension(messages, kwargs):
        if role_of(messages) == "user":
            # names every dimension of the demo's scenarios outright: the deterministic check rejects
            # it for evidence (distractors are about other scenarios and may pass)
            bad = ("My Cuisine, Spice level, Food texture, Document structure, Technical depth, "
                   "Example code style and API explanation preferences are these.")
            return {"first": bad, "second": bad}
        return good_responder(messages, kwargs)

    build_dataset(tmp_path, preset="demo", seed=5, history_turns=HISTORY, writer="llm", backend=ScriptedBackend(names_the_dimension),
                  progress=False, max_rewrites=1, llm_scope="exchanges")
    evidence = [p for p in _pieces(tmp_path) if p["role"] == "evidence"]
    assert evidence and all(p["attempts"] == 2 and p["passed"] is False for p in evidence)
    assert all("names it outright" in p["problems"][0] for p in evidence)
    report = json.loads((tmp_path / "writer_report.json").read_text())
    assert report["failed_after_rewrites"] >= len(evidence)
    assert {f["key"] for f in report["failures"]} >= {p["key"] for p in evidence}
    assert Dataset(tmp_path).manifest.params["writer_report"]["failed_after_rewrites"] == report["failed_after_rewrites"]


def test_a_distractor_that_reveals_a_key_value_is_rewritten(tmp_path):
    seen = {"n": 0}

    def leaky(messages, kwargs):
        if role_of(messages) == "distractor_check":
            seen["n"] += 1
            n = kwargs["json_schema"]["properties"]["quotes"]["minItems"]
            return {"reveals": True, "states_outright": False, "reveals_other": True, "quotes": [""] * n, "reason": "it shows the spice level"}
        return good_responder(messages, kwargs)

    build_dataset(tmp_path, preset="demo", seed=5, history_turns=HISTORY, writer="llm", backend=ScriptedBackend(leaky),
                  progress=False, max_rewrites=1, llm_scope="exchanges")
    distractors = [p for p in _pieces(tmp_path) if p["role"] not in ("evidence", "state", "chat")]
    assert distractors and all(p["attempts"] == 2 and p["passed"] is False for p in distractors)
    assert all("reveals a preference of the user's tasks" in p["problems"][0] for p in distractors)
    assert seen["n"] == 2 * len(distractors)
    report = json.loads((tmp_path / "writer_report.json").read_text())
    assert report["distractors"]["failed_after_rewrites"] == len(distractors)
    # no quote and a cue the model did not use: the label has no span (and the dataset is still valid)
    ds = Dataset(tmp_path)
    ds.check()
    assert all(d.span is None for d in labels(ds))


def test_a_check_without_a_verdict_keeps_the_turn_unconfirmed_without_rewriting_it(tmp_path):
    def mute_check(messages, kwargs):
        return "no verdict here" if role_of(messages) == "check" else good_responder(messages, kwargs)

    backend = ScriptedBackend(mute_check)
    build_dataset(tmp_path, preset="demo", seed=5, history_turns=HISTORY, writer="llm", backend=backend, progress=False,
                  max_rewrites=2, llm_scope="exchanges")
    evidence = [p for p in _pieces(tmp_path) if p["role"] == "evidence"]
    # the check's own failure says nothing about the turn: kept as written, reported, not rewritten
    assert evidence and all(p["attempts"] == 1 and p["passed"] is False and not p["fallback"] for p in evidence)
    assert all("kept unconfirmed" in p["problems"][-1] for p in evidence)
    assert all(p["usage_by_prompt"]["build_user_turns"]["llm_calls"] == 1 for p in evidence)


def test_unparseable_pieces_fall_back_to_procedural_text_and_are_reported(tmp_path, proc_dir):
    def broken_chat(messages, kwargs):
        return "not json at all" if role_of(messages) in ("chat", "aside") else good_responder(messages, kwargs)

    build_dataset(tmp_path, preset="demo", seed=5, history_turns=HISTORY, writer="llm", backend=ScriptedBackend(broken_chat),
                  progress=False, max_rewrites=0)
    report = json.loads((tmp_path / "writer_report.json").read_text())
    broken = [p for p in _pieces(tmp_path) if p["role"] in ("chat", "state", "ended", "hypothetical")]
    assert broken and report["fallbacks"] == len(broken)
    assert all(p["fallback"] and "used the procedural text" in p["problems"][-1] for p in broken)
    ds = Dataset(tmp_path)
    ds.check()
    # a procedural stand-in keeps its spans
    ended = {d.turn_id for d in labels(ds) if d.form in ("ended", "hypothetical")}
    assert ended and all(d.span is not None for d in labels(ds) if d.turn_id in ended)
    assert truth(ds) == truth(Dataset(proc_dir))


class Interrupt(LLMError):
    pass


def test_interrupted_build_resumes_without_redoing_finished_sessions(tmp_path):
    n_calls = {"n": 0}

    def dies_after_60(messages, kwargs):
        n_calls["n"] += 1
        if n_calls["n"] > 60:
            raise Interrupt("connection lost")
        return good_responder(messages, kwargs)

    with pytest.raises(Interrupt):
        build_dataset(tmp_path, preset="demo", seed=5, history_turns=HISTORY, writer="llm", backend=ScriptedBackend(dies_after_60),
                      progress=False, concurrency=1)
    assert not (tmp_path / "manifest.json").exists()
    first = _journal(tmp_path)
    assert 0 < len(first)
    before = (tmp_path / JOURNAL).read_text()

    backend = ScriptedBackend(good_responder)
    manifest = build_dataset(tmp_path, preset="demo", seed=5, history_turns=HISTORY, writer="llm", backend=backend,
                             progress=False, concurrency=1)
    after = _journal(tmp_path)
    assert len(first) < len(after)  # the first run really stopped part-way
    assert (tmp_path / JOURNAL).read_text().startswith(before)  # finished sessions kept as written
    assert len(after) == manifest.counts["sessions"]
    # what the rerun asked for is exactly the calls of the unfinished sessions
    assert len(backend.calls) == sum(e["usage"]["llm_calls"] for k, e in after.items() if k not in first)


def test_a_journal_of_another_build_is_refused(tmp_path):
    build_dataset(tmp_path, preset="demo", seed=5, history_turns=HISTORY, writer="llm", backend=ScriptedBackend(good_responder),
                  progress=False, llm_scope="exchanges")
    with pytest.raises(ValueError, match="belongs to a different build"):
        build_dataset(tmp_path, preset="demo", seed=6, history_turns=HISTORY, writer="llm", backend=ScriptedBackend(good_responder),
                      progress=False, llm_scope="exchanges")
    with pytest.raises(ValueError, match="scope exchanges; this one: .* scope all"):
        build_dataset(tmp_path, preset="demo", seed=5, history_turns=HISTORY, writer="llm", backend=ScriptedBackend(good_responder),
                      progress=False)


def test_torn_last_line_is_rewritten(tmp_path):
    build_dataset(tmp_path, preset="demo", seed=5, history_turns=HISTORY, writer="llm", backend=ScriptedBackend(good_responder),
                  progress=False, llm_scope="exchanges")
    path = tmp_path / JOURNAL
    lines = path.read_text().splitlines()
    torn = json.loads(lines[-1])
    path.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][:15])  # a crash mid-write
    backend = ScriptedBackend(good_responder)
    build_dataset(tmp_path, preset="demo", seed=5, history_turns=HISTORY, writer="llm", backend=backend, progress=False,
                  llm_scope="exchanges")
    assert len(backend.calls) == torn["usage"]["llm_calls"]  # only the torn session again
    assert all(json.loads(line) for line in path.read_text().splitlines())


# ---------------------------------------------------------------------- batch rounds


def _batch_build(out, batch, **kw):
    """Rounds until the build is done: each round answered by the scripted model (an offline
    answerer, as `iba batch answer` is); returns the number of rounds."""
    rounds = 0
    while True:
        try:
            build_dataset(out, preset="demo", seed=5, history_turns=HISTORY, writer="llm", progress=False,
                          backend=ScriptedBackend(lambda m, k: pytest.fail("a batch build must call no model")),
                          batch=batch, **kw)
            return rounds
        except BatchPending as p:
            rounds += 1
            assert p.written > 0 and p.round_dir is not None and rounds < 20
            counts = asyncio.run(answer_awaiting(BatchFolder(batch), ScriptedBackend(good_responder, "scripted:test"),
                                                 progress=False))
            assert counts["answered"] == p.written and counts["failed"] == 0


@pytest.mark.parametrize("scope", ["all", "exchanges"])
def test_a_batch_build_writes_what_a_direct_build_writes(tmp_path, scope):
    build_dataset(tmp_path / "direct", preset="demo", seed=5, history_turns=HISTORY, writer="llm", progress=False,
                  backend=ScriptedBackend(good_responder), llm_scope=scope)
    rounds = _batch_build(tmp_path / "batch", tmp_path / "rounds", llm_scope=scope)
    # user turns, check, assistant: one round each (every session's pieces share each round)
    assert rounds == 3
    assert len(list((tmp_path / "rounds").glob("round-*/*.requests.jsonl"))) == 3
    for name in ("answer_key.jsonl", "distractors.jsonl", "instances.jsonl"):
        assert (tmp_path / "direct" / name).read_bytes() == (tmp_path / "batch" / name).read_bytes()
    for h in sorted((tmp_path / "direct" / "histories").glob("*.jsonl")):
        assert h.read_bytes() == (tmp_path / "batch" / "histories" / h.name).read_bytes()
    a = json.loads((tmp_path / "direct" / "writer_report.json").read_text())
    b = json.loads((tmp_path / "batch" / "writer_report.json").read_text())
    assert a["usage"] == b["usage"] and a["distractors"] == b["distractors"]


def test_a_killed_batch_build_resumes_from_its_journal(tmp_path, monkeypatch):
    rounds = _batch_build(tmp_path / "whole", tmp_path / "r1", llm_scope="exchanges")
    # the same build, killed while it writes its last round's sessions into the journal
    out, batch = tmp_path / "killed", tmp_path / "r2"
    for _ in range(rounds):
        with pytest.raises(BatchPending):
            build_dataset(out, preset="demo", seed=5, history_turns=HISTORY, writer="llm", progress=False,
                          backend=ScriptedBackend(good_responder), batch=batch, llm_scope="exchanges")
        asyncio.run(answer_awaiting(BatchFolder(batch), ScriptedBackend(good_responder, "scripted:test"), progress=False))
    real_add, added = Journal.add, []

    def killed_after_5(self, entry):
        if len(added) == 5:
            raise KeyboardInterrupt  # the process dies here
        added.append(entry["key"])
        real_add(self, entry)

    monkeypatch.setattr(Journal, "add", killed_after_5)
    with pytest.raises(KeyboardInterrupt):
        build_dataset(out, preset="demo", seed=5, history_turns=HISTORY, writer="llm", progress=False,
                      backend=ScriptedBackend(good_responder), batch=batch, llm_scope="exchanges")
    monkeypatch.setattr(Journal, "add", real_add)
    assert not (out / "manifest.json").exists() and len(_journal(out)) >= 5
    # the rerun needs no new round: it replays what it lacks and writes the dataset
    build_dataset(out, preset="demo", seed=5, history_turns=HISTORY, writer="llm", progress=False,
                  backend=ScriptedBackend(good_responder), batch=batch, llm_scope="exchanges")
    assert len(list(batch.glob("round-*"))) == rounds
    for h in sorted((tmp_path / "whole" / "histories").glob("*.jsonl")):
        assert h.read_bytes() == (out / "histories" / h.name).read_bytes()
    assert (tmp_path / "whole" / "answer_key.jsonl").read_bytes() == (out / "answer_key.jsonl").read_bytes()
