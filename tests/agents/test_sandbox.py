"""The bubblewrap sandbox of external agents (iba.agents.sandbox): what it binds, what it refuses,
and, end to end through `iba run`, that a hostile agent finds neither the answer key nor iba's
secrets and scores exactly what an honest agent scores (the same agent unsandboxed finds both).

The end-to-end tests need bwrap able to create namespaces on this machine; they skip, with the
reason, where it cannot (`make install` installs bubblewrap; containers often forbid user namespaces).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from iba.agents import sandbox
from iba.agents.base import AgentError
from iba.agents.external import ExternalAgent
from iba.run.store import Store
from tests.agents.helpers import API_TASK, TEXT_TASK, env, small_history
from tests.fakes import ScriptedBackend
from tests.run.helpers import tiny_dataset

ROOT = Path(__file__).resolve().parents[2]
CHEATER = Path(__file__).resolve().parent / "cheating_agent.py"
SECRET = "sk-iba-sandbox-test-0123456789"

needs_bwrap = pytest.mark.skipif(sandbox.unavailable() is not None, reason=f"no sandbox here: {sandbox.unavailable()}")


def _agent(tmp_path, **opts) -> ExternalAgent:
    return ExternalAgent(env(ScriptedBackend([]), tmp_path), **opts)


def _script(tmp_path: Path, body: str, name: str = "agent.py") -> str:
    p = tmp_path / name
    p.write_text(body)
    return f"python {p}"


# ---------------------------------------------------------------- what is bound (no bwrap needed)


def test_command_paths_are_the_script_and_the_interpreter(tmp_path):
    script = tmp_path / "a.py"
    script.write_text("")
    paths = sandbox.command_paths([sys.executable, str(script), "--out=/nonexistent", f"--data={tmp_path}"])
    real = os.path.realpath(sys.executable)
    assert str(script) in paths or str(tmp_path) in paths
    assert str(tmp_path) in paths  # named as --data=PATH
    assert any(real == p or real.startswith(p + "/") for p in paths)  # the interpreter's real file
    assert any(sys.base_prefix == p or sys.base_prefix.startswith(p + "/") for p in paths)  # its stdlib
    assert "/nonexistent" not in paths
    assert not any(p == "/usr" or p.startswith("/usr/") for p in paths)  # bound as a whole anyway
    # no path is bound twice, nor under a folder that is bound
    assert not any(a != b and a.startswith(b + "/") for a in paths for b in paths)


def test_a_folder_holding_hidden_files_is_refused(tmp_path):
    ds = tiny_dataset(tmp_path / "ds")
    with pytest.raises(sandbox.SandboxError, match="answer_key.jsonl"):
        sandbox.check_binds([str(ds)], [])
    with pytest.raises(sandbox.SandboxError, match="holds"):
        sandbox.check_binds([str(tmp_path)], [str(ds / "answer_key.jsonl")])  # a folder above the key
    held = tmp_path / "keys"
    held.mkdir()
    (held / "distractors.jsonl").write_text("")
    with pytest.raises(sandbox.SandboxError, match="distractors.jsonl"):
        sandbox.check_binds([str(held)], [])
    sandbox.check_binds([str(ds / "histories")], [str(ds / "answer_key.jsonl")])  # a folder beside it is fine


def test_an_agent_configured_to_see_the_key_is_refused_before_it_runs(tmp_path):
    if sandbox.unavailable():
        pytest.skip(f"no sandbox here: {sandbox.unavailable()}")
    ds = tiny_dataset(tmp_path / "ds")
    with pytest.raises(ValueError, match="agent external: the sandbox would show"):
        _agent(tmp_path, cmd="python -c pass", ro=str(ds))
    # a held-back key under another name, in a folder the agent is given: the runner names it
    keys = tmp_path / "evaluator"
    keys.mkdir()
    (keys / "test-split-key.jsonl").write_text("")
    agent = _agent(tmp_path, cmd=f"python {ROOT / 'examples' / 'external_agent.py'}", ro=str(keys))
    with pytest.raises(ValueError, match="holds .*test-split-key.jsonl"):
        agent.hide([str(keys / "test-split-key.jsonl")])


def test_sandbox_env_is_clean_plus_named(monkeypatch):
    parent = {"OPENAI_API_KEY": SECRET, "PATH": "/opt/x/bin", "KEEP_ME": "1", "MY_MODEL_URL": "http://h"}
    env_ = sandbox.sandbox_env(parent, ["MY_MODEL_URL", "NOT_SET"], "/work/venv/bin/python")
    assert env_ == {"PATH": f"/work/venv/bin:{sandbox.SANDBOX_PATH}", "HOME": sandbox.INSIDE_WORK,
                    "PWD": sandbox.INSIDE_WORK, "TMPDIR": sandbox.INSIDE_TMP, "LANG": "C.UTF-8",
                    "MY_MODEL_URL": "http://h"}


def test_sandbox_bwrap_is_refused_where_it_cannot_run(tmp_path, monkeypatch, caplog):
    from iba.agents import command

    monkeypatch.setattr(sandbox, "unavailable", lambda: "bwrap is not installed (test)")
    monkeypatch.setattr(command, "_NOTED", set())
    with pytest.raises(ValueError, match="sandbox=bwrap: bwrap is not installed"):
        _agent(tmp_path, cmd="python -c pass", sandbox="bwrap")
    # auto falls back, says so once however many agents are built, and marks itself
    agents = [_agent(tmp_path, cmd="python -c pass") for _ in range(3)]
    assert {a.sandbox for a in agents} == {"none"}
    notes = [r.getMessage() for r in caplog.records if "UNSANDBOXED" in r.getMessage()]
    assert len(notes) == 1 and "bwrap is not installed (test)" in notes[0]
    assert _agent(tmp_path, url="http://127.0.0.1:9/act").sandbox is None  # iba starts no process for it


# ---------------------------------------------------------------- inside the sandbox

SEEN = r"""
import json, os, socket, sys
json.load(sys.stdin)
seen = {"cwd": os.getcwd(), "files": os.listdir("."), "env": dict(os.environ), "pids": sorted(p for p in os.listdir("/proc") if p.isdigit()),
        "root": sorted(os.listdir("/")), "tmp": os.listdir("/tmp"), "ppid": os.getppid()}
def can(f):
    try:
        f()
        return True
    except OSError:
        return False
seen["write_tmp"] = can(lambda: open("/tmp/x", "w").write("x"))
seen["write_cwd"] = can(lambda: open("x", "w").write("x"))
seen["write_self"] = can(lambda: open(__file__, "a").write("#"))
seen["see_dataset"] = os.path.exists(sys.argv[1].removeprefix("path:")) if len(sys.argv) > 1 else None
port = int(os.environ.get("PORT_TO_TRY", "0"))
seen["network"] = can(lambda: socket.create_connection(("127.0.0.1", port), timeout=2).close()) if port else None
print(json.dumps({"kind": "generate", "text": json.dumps(seen)}))
"""


@pytest.fixture
def listener():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    stop = threading.Event()

    def serve():
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                srv.accept()[0].close()
            except OSError:
                pass

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield srv.getsockname()[1]
    stop.set()
    t.join(timeout=2)
    srv.close()


@needs_bwrap
async def test_inside_the_sandbox(tmp_path, monkeypatch, listener):
    ds = tiny_dataset(tmp_path / "ds")
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("KEEP_ME", "1")
    monkeypatch.setenv("PORT_TO_TRY", str(listener))
    monkeypatch.chdir(ds)  # iba started from the dataset folder: the worst case
    cmd = _script(tmp_path, SEEN) + f" path:{ds}"  # not a path as written: not bound (an argument ds would be refused)
    agent = _agent(tmp_path, cmd=cmd, env="PORT_TO_TRY")
    assert agent.sandbox == "bwrap"
    seen = json.loads((await agent.act(TEXT_TASK, small_history())).text)
    assert seen["cwd"] == sandbox.INSIDE_WORK and seen["files"] == []
    # a private /tmp: only the folders leading to its own script (pytest's tmp_path is under /tmp)
    assert set(seen["tmp"]) == {p.split("/")[2] for p in agent.command.binds if p.startswith("/tmp/")}
    assert set(seen["env"]) == {"PATH", "HOME", "PWD", "TMPDIR", "LANG", "PORT_TO_TRY"}  # nothing else of iba's
    assert seen["pids"] == ["1", "2"] and seen["ppid"] == 1  # bwrap's init and the agent: no iba
    assert seen["see_dataset"] is False
    # the filesystem root holds the system folders, the private ones, and the top folders of the binds
    bound_tops = {p.split("/")[1] for p in agent.command.binds}
    assert set(seen["root"]) <= {"usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "proc", "dev",
                                 "tmp", sandbox.INSIDE_WORK.strip("/")} | bound_tops
    assert seen["write_tmp"] and seen["write_cwd"] and not seen["write_self"]  # its own files are read-only
    assert seen["network"] is False  # not even loopback
    assert SECRET not in json.dumps(seen)
    # network=true shares iba's network
    agent = _agent(tmp_path, cmd=cmd, env="PORT_TO_TRY", network="true")
    assert json.loads((await agent.act(TEXT_TASK, small_history())).text)["network"] is True


@needs_bwrap
async def test_a_sandboxed_agent_can_use_named_read_only_paths(tmp_path):
    data = tmp_path / "model"
    data.mkdir()
    (data / "weights.txt").write_text("w=1")
    body = f"import json,sys; json.load(sys.stdin); print(json.dumps({{'kind':'generate','text':open({str(data / 'weights.txt')!r}).read()}}))"
    with pytest.raises(AgentError, match="(?s)exited with 1.*No such file"):
        await _agent(tmp_path, cmd=_script(tmp_path, body)).act(TEXT_TASK, [])
    action = await _agent(tmp_path, cmd=_script(tmp_path, body), ro=str(data)).act(TEXT_TASK, [])
    assert action.text == "w=1"


# ---------------------------------------------------------------- a hostile agent, end to end


def _cheat_dataset(tmp_path: Path) -> Path:
    """The tiny dataset, with a CallAPI answer that an honest guess (the first enum value, "soft")
    gets wrong and the answer key gets right ("regular"); its scenario is not the taxonomy's, so
    the slot is matched against the key alone (the taxonomy's order_food has other parameters)."""
    ds = tiny_dataset(tmp_path / "ds")
    inst = ds / "instances.jsonl"
    inst.write_text(inst.read_text().replace('"food_ordering"', '"dessert_ordering"'))
    keys = ds / "answer_key.jsonl"
    lines = [json.loads(x) for x in keys.read_text().splitlines()]
    for k in lines:
        for s in k.get("slots", []):
            s["value"], s["accepted"] = "regular", ["regular"]
    keys.write_text("".join(json.dumps(k) + "\n" for k in lines))
    return ds


def _run_cheater(tmp_path: Path, ds: Path, *specs: str, answer_key: Path | None = None) -> subprocess.CompletedProcess:
    env_ = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")} | {"OPENAI_API_KEY": SECRET}
    args = [sys.executable, "-m", "iba.cli", "run", str(ds), "--model", "openai:none", "--base-url", "http://127.0.0.1:9/v1",
            "--judges", "none", "--store", str(tmp_path / "s.sqlite"), "--cache-dir", str(tmp_path / "cache"), "--quiet"]
    for spec in specs:
        args += ["--agent", spec]
    if answer_key:
        args += ["--answer-key", str(answer_key)]
    # from inside the dataset folder, as in the issue: /proc/$PPID/cwd is the dataset
    return subprocess.run(args, cwd=ds, env=env_, capture_output=True, text=True, timeout=300)


def _outcomes(store_path: Path) -> dict[str, dict]:
    """agent spec -> {"found": its hunt step's outputs per instance, "slots": slot score per instance}."""
    with Store(store_path) as s:
        runs = list(s.runs())
        scores = {(r.run_key, r.scorer): r for r in s.scores()}
    out: dict[str, dict] = {}
    for r in runs:
        assert r.status == "ok", r.error
        o = out.setdefault(r.agent, {"found": {}, "slots": {}, "sandbox": set()})
        o["found"][r.instance_id] = next(t.outputs for t in r.action.trace if t.step == "hunt")
        o["sandbox"].add(r.sandbox)
        if (r.key, "slots") in scores:
            o["slots"][r.instance_id] = scores[(r.key, "slots")].score
    return out


HONEST = f"external?cmd=python {CHEATER} --honest"


@needs_bwrap
def test_a_cheating_agent_finds_nothing_and_scores_as_an_honest_one(tmp_path):
    ds = _cheat_dataset(tmp_path)
    out = _run_cheater(tmp_path, ds, f"external?cmd=python {CHEATER}", HONEST)
    assert out.returncode == 0, out.stderr
    got = _outcomes(tmp_path / "s.sqlite")
    cheater, honest = got[f"external?cmd=python {CHEATER}"], got[HONEST]
    assert cheater["sandbox"] == {"bwrap"}
    for found in cheater["found"].values():
        assert found["key_files"] == []
        assert found["pids"] == ["1", "2"]  # the sandbox's init and itself: iba is not there to read
        assert SECRET not in json.dumps(found)
        assert str(ds) not in json.dumps(found)  # not even the dataset's path
    assert cheater["slots"] == honest["slots"] == {"i1": 0.0}


@needs_bwrap
def test_the_same_agent_unsandboxed_finds_the_key_and_the_secret(tmp_path):
    """The control: without the sandbox the cheat works, so the test above could fail."""
    ds = _cheat_dataset(tmp_path)
    spec = f"external?sandbox=none&cmd=python {CHEATER}"
    out = _run_cheater(tmp_path, ds, spec, HONEST)
    assert out.returncode == 0, out.stderr
    assert "UNSANDBOXED" in out.stderr and out.stderr.count("UNSANDBOXED") == 1  # said once per run
    got = _outcomes(tmp_path / "s.sqlite")
    cheater = got[spec]
    assert cheater["sandbox"] == {"none"}
    assert all(str(ds / "answer_key.jsonl") in f["key_files"] for f in cheater["found"].values())
    # it read iba's /proc/$PPID/environ, key and all; what reached the store is scrubbed of the key
    assert any("OPENAI_API_KEY=***" in json.dumps(f["environ"]) for f in cheater["found"].values())
    assert SECRET not in json.dumps(cheater["found"])
    assert cheater["slots"] == {"i1": 1.0} and got[HONEST]["slots"] == {"i1": 0.0}
    # and the report marks the row
    rep = subprocess.run([sys.executable, "-m", "iba.cli", "report", str(tmp_path / "s.sqlite"), "--dataset", str(ds),
                          "--out", str(tmp_path / "report")], capture_output=True, text=True, timeout=300)
    assert rep.returncode == 0, rep.stderr
    table = (tmp_path / "report" / "table4.md").read_text()
    assert f"{spec} (own model) [unsandboxed]" in table and f"{HONEST} (own model) |" in table  # not the unused --model
    assert "ran UNSANDBOXED" in rep.stderr


@needs_bwrap
def test_a_held_back_key_and_its_distractors_stay_hidden(tmp_path):
    ds = _cheat_dataset(tmp_path)
    held = tmp_path / "evaluator"
    held.mkdir()
    (ds / "answer_key.jsonl").rename(held / "answer_key.jsonl")
    (held / "distractors.jsonl").write_text("")
    out = _run_cheater(tmp_path, ds, f"external?cmd=python {CHEATER}", HONEST, answer_key=held / "answer_key.jsonl")
    assert out.returncode == 0, out.stderr
    got = _outcomes(tmp_path / "s.sqlite")
    assert all(f["key_files"] == [] for f in got[f"external?cmd=python {CHEATER}"]["found"].values())
    assert got[f"external?cmd=python {CHEATER}"]["slots"] == got[HONEST]["slots"] == {"i1": 0.0}
    # an agent configured to read the evaluator's folder never starts
    bad = _run_cheater(tmp_path, ds, f"external?cmd=python {CHEATER}&ro={held}", answer_key=held / "answer_key.jsonl")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert "the sandbox would show" in bad.stderr


async def test_api_task_works_in_whatever_sandbox_is_available(tmp_path):
    """The example agent under the default (auto): sandboxed where bwrap runs, else unsandboxed."""
    agent = _agent(tmp_path, cmd=f"python {ROOT / 'examples' / 'external_agent.py'}")
    action = await agent.act(API_TASK, small_history())
    assert action.params["cuisine"] == "japanese"
    assert action.trace[0].outputs["sandbox"] == agent.sandbox == ("none" if sandbox.unavailable() else "bwrap")


def test_a_hard_link_of_a_hidden_file_is_refused(tmp_path):
    """The same file under another name (a hard link) is the key all the same: compared by
    (device, inode), as an argument and inside a folder the agent is given."""
    held = tmp_path / "evaluator"
    held.mkdir()
    key = held / "answer_key.jsonl"
    key.write_text('{"instance_id": "i0"}\n')
    mine = tmp_path / "agent-files"
    mine.mkdir()
    (mine / "deep").mkdir()
    os.link(key, mine / "deep" / "notes.jsonl")
    with pytest.raises(sandbox.SandboxError, match=r"hard link"):
        sandbox.check_binds([str(mine / "deep" / "notes.jsonl")], [str(key)])
    with pytest.raises(sandbox.SandboxError, match=r"notes.jsonl, a hard link of .*answer_key.jsonl"):
        sandbox.check_binds([str(mine)], [str(key)])
    (mine / "deep" / "notes.jsonl").unlink()
    (mine / "deep" / "notes.jsonl").write_text(key.read_text())  # a copy is a file of the agent's own
    sandbox.check_binds([str(mine)], [str(key)])


def test_a_folder_holding_persona_states_is_refused(tmp_path):
    held = tmp_path / "keys"
    held.mkdir()
    (held / "persona_states.jsonl").write_text("")
    with pytest.raises(sandbox.SandboxError, match="persona_states.jsonl"):
        sandbox.check_binds([str(held)], [])


@pytest.fixture(scope="module")
def built_and_public(tmp_path_factory) -> tuple[Path, Path]:
    """The demo build (states active: state-driven targets) and its held-back export."""
    pytest.importorskip("pyarrow")
    from iba.construct.builder import build_dataset
    from iba.hf.export import export_hf

    root = tmp_path_factory.mktemp("sbx")
    build_dataset(root / "ds", preset="demo", seed=42, progress=False)
    export_hf(root / "ds", root / "public", hold_back=True)
    return root / "ds", root / "public"


def test_what_the_sandbox_lets_an_agent_read_holds_nothing_of_the_evaluators(built_and_public, tmp_path):
    """Every file an external agent may read (its binds, less the system and interpreter folders
    every process has) holds no persona state, no date of one and no value of the key; the files
    that would are refused before the agent starts."""
    from tests.hidden import IN_HISTORIES, evaluator_needles, found, parquet_text

    if sandbox.unavailable():
        pytest.skip(f"no sandbox here: {sandbox.unavailable()}")
    ds, public = built_and_public
    needles = evaluator_needles(ds)
    assert needles["state"] and needles["target"]
    example = ROOT / "examples" / "external_agent.py"
    agent = _agent(tmp_path, cmd=f"python {example} {public}", ro=str(public))
    from iba.dataset import Dataset

    agent.hide(Dataset(ds).hidden_paths)  # what the runner does
    prefixes = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)}
    own = [b for b in agent.command.binds if not any(os.path.realpath(b) == p or os.path.realpath(b).startswith(p + "/")
                                               for p in prefixes)]
    files = [Path(b) for b in own if Path(b).is_file()] + [f for b in own if Path(b).is_dir()
                                                           for f in Path(b).rglob("*") if f.is_file()]
    assert Path(example) in files and any(f.suffix == ".parquet" for f in files)
    for f in files:
        text = parquet_text(f) if f.suffix == ".parquet" else f.read_text(encoding="utf-8", errors="replace")
        assert found(text, needles, skip=IN_HISTORIES if f.parent.name == "histories" else ()) == [], f
    for shown in (ds, ds / "persona_states.jsonl", ds.parent):
        with pytest.raises(ValueError, match="the sandbox would show"):
            _agent(tmp_path, cmd=f"python {example}", ro=str(shown)).hide(Dataset(ds).hidden_paths)
