"""Memory agents through `iba run` with real processes: one session per user, fresh state, one
record per task, resume after a lost session or a killed run, and the ingest/act cost split."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from iba.agents import sandbox as bwrap
from iba.cli import main
from iba.dataset import Dataset
from iba.run.store import Store
from tests.run.helpers import users_dataset
from tests.run.test_processes import _rows

ROOT = Path(__file__).resolve().parents[2]
SCRIPTED = ROOT / "tests" / "agents" / "scripted_memory.py"
needs_bwrap = pytest.mark.skipif(bwrap.unavailable() is not None, reason=f"bwrap cannot run here: {bwrap.unavailable()}")
USERS = 3


@pytest.fixture
def ds(tmp_path) -> Path:
    return users_dataset(tmp_path / "ds", users=USERS, sessions=3)


def _run(ds: Path, store: Path, spec: str, *more: str) -> int:
    return main(["run", str(ds), "--agent", spec, "--store", str(store), "--judges", "none", "--quiet",
                 "--cache-dir", str(store.parent / "cache"), *more])


def _records(store: Path) -> list:
    with Store(store) as s:
        return list(s.runs())


def _state(rec) -> dict:
    return next(s for s in rec.action.trace if s.step == "memory-state").outputs


def _memory(*flags: str) -> str:
    return f"memory?cmd=python {SCRIPTED}" + (" " + " ".join(flags) if flags else "")


def test_each_user_gets_a_fresh_memory_that_saw_its_whole_history(ds, tmp_path, capsys):
    store = tmp_path / "s.sqlite"
    assert _run(ds, store, _memory(), "--concurrency", "2") == 0
    recs = _records(store)
    assert sorted(r.instance_id for r in recs) == sorted(f"u{u}-{k}" for u in range(USERS) for k in ("food", "doc"))
    for r in recs:
        state = _state(r)
        assert r.status == "ok" and state["users_reset"] == [r.user_id]  # a new process per user
        assert state["turn_users"] == [r.user_id] and state["sessions"] == 3 and state["turns"] == 6
    with Store(store) as s:
        ingests = s.ingests()
    assert sorted(i.user_id for i in ingests) == [f"u{u}" for u in range(USERS)]
    assert all(i.status == "ok" and (i.sessions, i.ingested, i.turns, i.attempts) == (3, 3, 6, 1) for i in ingests)
    out = capsys.readouterr().out
    assert "memory: 3 user history(ies) ingested" in out

    # a rerun has nothing to do: no user is ingested again
    assert _run(ds, store, _memory()) == 0
    with Store(store) as s:
        assert [i.attempts for i in s.ingests()] == [1, 1, 1]
    assert len(_records(store)) == 2 * USERS


@needs_bwrap
def test_a_leaky_memory_cannot_carry_one_users_history_into_anothers_act(ds, tmp_path):
    """The memory writes every ingested turn id to /tmp/leak.txt and reads the whole file at act:
    sandboxed, each user's process has its own /tmp, so no act sees another user's turns."""
    store = tmp_path / "s.sqlite"
    assert _run(ds, store, _memory("--leak /tmp/iba-test-leak.txt")) == 0
    assert all(_state(r)["turn_users"] == [r.user_id] for r in _records(store))


def test_the_same_leaky_memory_unsandboxed_leaks(ds, tmp_path):
    """Without the sandbox (sandbox=none: a shared /tmp) the same memory does carry users across:
    the sandbox, not the memory's good manners, is what keeps each user's state fresh."""
    leak = tmp_path / "leak.txt"
    store = tmp_path / "s.sqlite"
    assert _run(ds, store, _memory(f"--leak {leak}") + "&sandbox=none") == 0
    states = {r.user_id: _state(r) for r in _records(store)}
    assert states["u0"]["turn_users"] == ["u0"]  # the first user met an empty file
    assert states["u2"]["turn_users"] == ["u0", "u1", "u2"]  # the last saw everyone's
    assert all(s["users_reset"] == [u] for u, s in states.items())  # still one process per user


def test_a_memory_that_crashes_at_ingest_fails_its_users_tasks(ds, tmp_path):
    store = tmp_path / "s.sqlite"
    assert _run(ds, store, _memory("--crash-at 1")) == 0  # its own failure: stored, scored 0, nothing to retry
    recs = _records(store)
    assert len(recs) == 2 * USERS and all(r.status == "failed" for r in recs)
    assert "exited with 3 ingesting session 2/3" in recs[0].error and "crashing at session 1" in recs[0].error
    with Store(store) as s:
        ingest = s.ingests()[0]
        food = next(r for r in recs if r.instance_id == "u0-food")
        assert s.get_score(food.key, "slots") is None or s.get_score(food.key, "slots").score == 0.0
    assert (ingest.status, ingest.ingested, ingest.sessions) == ("failed", 1, 3)


def test_an_ingest_timeout_errors_the_tasks_and_retry_ingests_again(ds, tmp_path, capsys):
    store = tmp_path / "s.sqlite"
    spec = _memory("--hang-at 2") + "&ingest_timeout=1"
    assert _run(ds, store, spec, "--user", "u1") == 1  # errored: the run owes them
    recs = _records(store)
    assert [r.status for r in recs] == ["errored", "errored"]
    assert "timed out after 1s ingesting session 3/3" in recs[0].error
    assert "--retry-errored" in capsys.readouterr().err


def test_act_and_ingest_cost_are_stored_apart_and_shown(ds, tmp_path):
    store = tmp_path / "s.sqlite"
    assert _run(ds, store, _memory(), "--user", "u0") == 0
    recs = _records(store)
    assert [r.usage.llm_calls for r in recs] == [1, 1]  # each act: the memory's reported act call
    with Store(store) as s:
        (ingest,) = s.ingests()
    words = sum(len(t.text.split()) for t in Dataset(ds).history("u0"))
    assert (ingest.usage.llm_calls, ingest.usage.prompt_tokens, ingest.usage.completion_tokens) == (3, words, 15)
    assert ingest.wall_s > 0

    out = tmp_path / "report"
    assert main(["report", str(store), "--dataset", str(ds), "--out", str(out)]) == 0
    cost = (out / "cost.csv").read_text().splitlines()
    head, row = cost[0].split(","), cost[1].split(",")
    cells = dict(zip(head, row[-len(head):]))
    assert cells["users ingested"] == "1" and cells["ingest LLM calls"] == "3" and cells["LLM calls"] == "2"
    assert cells["ingest prompt tokens"] == str(words)

    sub = tmp_path / "sub.json"
    assert main(["submit", "prepare", str(store), "--dataset", str(ds), "--out", str(sub)]) == 0
    (entry,) = json.loads(sub.read_text())["entries"]
    assert entry["cost"]["agent"]["llm_calls"] == 2 and entry["third_party"] is True
    assert entry["cost"]["ingest"] == {"users": 1, "sessions": 3, "llm_calls": 3, "prompt_tokens": words,
                                       "completion_tokens": 15, "wall_s": entry["cost"]["ingest"]["wall_s"], "attempts": 1}
    assert main(["submit", "validate", str(sub), "--dataset", str(ds)]) == 0


def test_a_task_before_the_end_of_the_history_is_refused(tmp_path, capsys):
    ds = users_dataset(tmp_path / "ds", users=2)
    lines = (ds / "instances.jsonl").read_text().splitlines()
    bad = json.loads(lines[2])
    bad["now"] = "2025-01-02T12:00:00"  # u1's history runs to 2025-01-03
    lines[2] = json.dumps(bad)
    (ds / "instances.jsonl").write_text("\n".join(lines) + "\n")
    assert _run(ds, tmp_path / "s.sqlite", _memory()) == 2
    err = capsys.readouterr().err
    assert "instances.jsonl:3: instance 'u1-food': now 2025-01-02T12:00:00 is not after the last turn of u1's history" in err
    assert not (tmp_path / "s.sqlite").exists() or not _records(tmp_path / "s.sqlite")


def test_the_ray_executor_refuses_memory_agents(ds, tmp_path, capsys):
    pytest.importorskip("ray")
    assert _run(ds, tmp_path / "s.sqlite", _memory(), "--executor", "ray") == 2
    assert "memory agents run user by user with the local executor" in capsys.readouterr().err


def test_the_protocol_over_url_through_iba_run(ds, tmp_path):
    from tests.agents.test_memory import _free_port, wait_port

    port = _free_port()
    server = subprocess.Popen([sys.executable, str(SCRIPTED), "--serve", str(port)])
    try:
        wait_port(port)
        store = tmp_path / "s.sqlite"
        assert _run(ds, store, f"memory?url=http://127.0.0.1:{port}/memory", "--concurrency", "3") == 0
        recs = _records(store)
        assert len(recs) == 2 * USERS and all(_state(r)["turn_users"] == [r.user_id] for r in recs)
        assert all(r.sandbox is None for r in recs)
    finally:
        server.terminate()
        server.wait(timeout=10)


# ---------------------------------------------------------------- killed mid-ingest, then rerun

def _pids_with(marker: str) -> list[int]:
    """Host pids of processes whose command line holds `marker` (the memory, inside bwrap or not)."""
    out = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                cmdline = Path(f"/proc/{p}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            words = cmdline.split()
            if marker in cmdline and "iba.cli" not in cmdline and words and "bwrap" not in words[0]:
                out.append(int(p))
    return out


def _cmd(ds: Path, store: Path, spec: str, *more: str) -> list[str]:
    return [sys.executable, "-m", "iba.cli", "run", str(ds), "--agent", spec, "--store", str(store), "--judges",
            "none", "--quiet", "--cache-dir", str(store.parent / "cache"), *more]


def _wait_for(check, what: str, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while not (value := check()):
        assert time.monotonic() < deadline, f"waited {timeout:g}s for {what}"
        time.sleep(0.05)
    return value


def test_a_memory_killed_mid_ingest_is_errored_then_ingested_again(ds, tmp_path):
    """The memory process of the first user is SIGKILLed (as the OOM killer would) while it ingests:
    that user's tasks are errored, the others run; --retry-errored ingests that user again from
    scratch and runs only its tasks; one record per task in the end."""
    store, marker = tmp_path / "s.sqlite", f"mark-{os.getpid()}-a"
    spec = _memory("--slow 1", f"--marker {marker}")
    proc = subprocess.Popen(_cmd(ds, store, spec), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pids = _wait_for(lambda: _pids_with(marker), "the first memory process")
    time.sleep(1.5)  # mid-ingest: 3 sessions at 1 s each
    os.kill(pids[0], signal.SIGKILL)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    recs = {r.instance_id: r for r in _records(store)}
    lost = {r.user_id for r in recs.values() if r.status == "errored"}
    assert len(lost) == 1 and len(recs) == 2 * USERS
    (user,) = lost
    assert "was killed by SIGKILL ingesting session" in recs[f"{user}-food"].error
    with Store(store) as s:
        before = {i.user_id: i for i in s.ingests()}
    assert before[user].status == "errored" and before[user].ingested < 3

    res = subprocess.run(_cmd(ds, store, spec, "--retry-errored"), capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "2 errored records retried" in res.stdout and "memory: 1 user history(ies) ingested" in res.stdout
    keys = [k for (k,) in _rows(store, "SELECT key FROM runs")]
    assert len(keys) == len(set(keys)) == 2 * USERS  # one record per task
    recs = {r.instance_id: r for r in _records(store)}
    assert all(r.status == "ok" for r in recs.values())
    assert _state(recs[f"{user}-doc"])["sessions"] == 3  # ingested again, from scratch
    with Store(store) as s:
        after = {i.user_id: i for i in s.ingests()}
    assert (after[user].status, after[user].attempts) == ("ok", 2)
    assert all(after[u].attempts == 1 for u in after if u != user)  # the others were not ingested again
    assert not _rows(store, "SELECT 1 FROM claims")


@needs_bwrap  # unsandboxed, a memory in its own session outlives a SIGKILLed iba
def test_a_run_killed_mid_ingest_stores_nothing_for_that_user_and_the_rerun_ingests_it(ds, tmp_path):
    store, marker = tmp_path / "s.sqlite", f"mark-{os.getpid()}-b"
    spec = _memory("--slow 1", f"--marker {marker}")
    proc = subprocess.Popen(_cmd(ds, store, spec), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_for(lambda: _rows(store, "SELECT user_id FROM ingests"), "the first user's ingest record")
    first = _rows(store, "SELECT user_id FROM ingests")[0][0]
    _wait_for(lambda: len(_pids_with(marker)) > 0 and len(_rows(store, "SELECT 1 FROM runs")) == 2,
              "the second user's memory")
    time.sleep(1.2)  # the second user is mid-ingest
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    _wait_for(lambda: not _pids_with(marker), "the memory to die with iba", timeout=10)  # --die-with-parent
    done_users = {u for (u,) in _rows(store, "SELECT json_extract(record, '$.user_id') FROM runs")}
    assert done_users == {first}

    res = subprocess.run(_cmd(ds, store, spec), capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    keys = [k for (k,) in _rows(store, "SELECT key FROM runs")]
    assert len(keys) == len(set(keys)) == 2 * USERS
    with Store(store) as s:
        ingests = {i.user_id: i for i in s.ingests()}
    assert set(ingests) == {f"u{u}" for u in range(USERS)} and all(i.attempts == 1 for i in ingests.values())
    assert f"memory: {USERS - 1} user history(ies) ingested" in res.stdout  # the first user was not ingested again


def test_user_selection(ds, tmp_path, capsys):
    assert _run(ds, tmp_path / "s.sqlite", _memory(), "--user", "nobody") == 2
    assert "argument --user: 'nobody' is not in this dataset (allowed: u0, u1, u2)" in capsys.readouterr().err
    assert _run(ds, tmp_path / "s.sqlite", _memory(), "--user", "u2", "--user", "u0") == 0
    assert sorted({r.user_id for r in _records(tmp_path / "s.sqlite")}) == ["u0", "u2"]
