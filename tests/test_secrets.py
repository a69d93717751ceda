"""Secrets stay secret: the model server's API key, and the hidden answer key from external agents.

1. A recognisable fake OPENAI_API_KEY, and a server (the fault proxy in front of a real
   llama_cpp.server) that answers errors echoing the Authorization header back: the key must
   appear in no output: the SQLite store (every table, and the raw files with their WAL), the
   response cache, stdout/stderr of `iba run` and `iba report` (the logs go there), the report
   directory, and the exception (message, repr, traceback, chained exceptions, log records).
2. An external agent command (through `iba run`, started from inside the dataset directory,
   the worst case) finds neither the key nor a way to the dataset in its env, argv, cwd or
   inherited file descriptors.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import subprocess
import sys
import traceback
from pathlib import Path

import pytest

from iba.llm import LLMError, resolve_backend
from iba.run.store import Store
from tests.llm.fault_proxy import Fault, FaultProxy
from tests.run.helpers import tiny_dataset

KEY = "sk-iba-test-SECRET-123"
FRAGMENT = "SECRET-123"  # what must not survive, even partly redacted
MODEL = "smollm2-135m"


def _iba(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "iba.cli", *args], capture_output=True, text=True, timeout=300,
                          env=env, cwd=cwd)


def _files_containing(root: Path, needle: str) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and needle.encode() in p.read_bytes()]


def _store_dump(path: Path) -> str:
    db = sqlite3.connect(path)
    try:
        return "\n".join(db.iterdump())  # every table, schema and rows, as SQL text
    finally:
        db.close()


@pytest.mark.slow
def test_the_api_key_appears_in_no_output_of_a_failing_run(llama_server, tmp_path):
    ds = tiny_dataset(tmp_path / "ds")  # i0 generate, i1 call_api
    work = tmp_path / "work"
    work.mkdir()
    store, report = work / "runs.sqlite", work / "report"
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_BASE_URL"} | {"OPENAI_API_KEY": KEY}
    with FaultProxy(llama_server) as proxy:
        # i0: a 401 that quotes the key (not retried); i1: a 503 that quotes it, retried, then the real answer
        proxy.then(Fault.http(401, echo_auth=True), Fault.http(503, echo_auth=True, retry_after=0))
        run = _iba("run", str(ds), "--agent", "direct?max_tokens=16", "--model", f"openai:{MODEL}",
                   "--base-url", proxy.base_url, "--store", str(store), "--cache-dir", str(work / "cache"),
                   "--judges", "none", "--quiet", env=env, cwd=work)
        seen_auth = {h.authorization for h in proxy.completions()}
    assert seen_auth == {f"Bearer {KEY}"}  # the key really was sent, so the server had it to echo
    assert run.returncode == 1, run.stderr  # i0 errored
    rep = _iba("report", str(store), "--dataset", str(ds), "--out", str(report), env=env, cwd=work)
    assert rep.returncode == 0, rep.stderr
    assert (report / "report.html").exists()

    dump = _store_dump(store)
    with Store(store) as s:
        runs = {r.instance_id: r for r in s.runs()}
    assert runs["i0"].status == "errored" and runs["i1"].status == "ok"
    assert "ModelRequestRejected" in runs["i0"].error and "Authorization: Bearer ***" in runs["i0"].error  # echoed, scrubbed
    assert "Authorization: Bearer ***" in dump
    for name, text in [("run stdout", run.stdout), ("run stderr", run.stderr), ("report stdout", rep.stdout),
                       ("report stderr", rep.stderr), ("store dump", dump)]:
        assert FRAGMENT not in text, f"the key leaked into {name}"
    assert "retry 1/3" in run.stderr  # the retry was logged (and that log line is clean, as checked above)
    assert _files_containing(work, FRAGMENT) == []  # store + WAL, cache, report (html, md, csv, png)


@pytest.mark.slow
def test_a_key_echoed_in_a_successful_reply_is_stored_nowhere(llama_server, tmp_path):
    """A 200 whose text quotes the key (a prompt-injected model, a debugging gateway): the reply is
    the agent's action, so it reaches the store, the response cache and the report, each scrubbed."""
    ds = tiny_dataset(tmp_path / "ds")
    work = tmp_path / "work"
    work.mkdir()
    store, report = work / "runs.sqlite", work / "report"
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_BASE_URL"} | {"OPENAI_API_KEY": KEY}
    with FaultProxy(llama_server) as proxy:
        proxy.always(Fault.echo_reply())
        run = _iba("run", str(ds), "--agent", "direct?max_tokens=8", "--model", f"openai:{MODEL}", "--limit", "1",
                   "--base-url", proxy.base_url, "--store", str(store), "--cache-dir", str(work / "cache"),
                   "--judges", "none", "--quiet", env=env, cwd=work)
        assert proxy.completions() and proxy.completions()[0].authorization == f"Bearer {KEY}"
    assert run.returncode == 0, run.stderr
    rep = _iba("report", str(store), "--dataset", str(ds), "--out", str(report), env=env, cwd=work)
    assert rep.returncode == 0, rep.stderr
    with Store(store) as s:
        [rec] = list(s.runs())
    assert rec.status == "ok" and "(you sent Bearer ***)" in rec.action.text  # the echo arrived, scrubbed
    assert (work / "cache" / "llm-responses.sqlite").exists()
    for name, text in [("run stdout", run.stdout), ("run stderr", run.stderr), ("store dump", _store_dump(store))]:
        assert FRAGMENT not in text, f"the key leaked into {name}"
    assert _files_containing(work, FRAGMENT) == []  # store + WAL, response cache, report.html and the rest


@pytest.mark.slow
async def test_the_api_key_is_in_no_exception_or_log_record(llama_server, monkeypatch, caplog):
    secret = "iba-test-SECRET-123"  # not key-shaped: only the backend's own scrubbing can catch it
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    caplog.set_level(logging.DEBUG)  # the SDK's and httpx's debug logs included
    with FaultProxy(llama_server) as proxy:
        proxy.then(Fault.http(503, echo_auth=True, retry_after=0)).always(Fault.http(401, echo_auth=True))
        be = resolve_backend(f"openai:{MODEL}", base_url=proxy.base_url, use_cache=False, max_retries=2)
        with pytest.raises(LLMError) as ei:
            await be.complete([{"role": "user", "content": "hi"}], max_tokens=4)
        assert proxy.completions()[0].authorization == f"Bearer {secret}"
    e = ei.value
    assert "Authorization: Bearer ***" in str(e)  # the echo came back and was scrubbed
    texts = [str(e), repr(e), repr(e.args), "".join(traceback.format_exception(e)), be.model_id, repr(be.__dict__.keys()),
             caplog.text, *(repr(r.args) for r in caplog.records)]
    assert all(FRAGMENT not in t for t in texts)
    assert e.__cause__ is None and e.__context__ is None  # no provider exception (with its request) hangs off it


SPY = r'''
import json, os, sys
seen = {"argv": sys.argv, "cwd": os.getcwd(), "cwd_files": sorted(os.listdir(".")), "env": dict(os.environ)}
parent = os.path.dirname(os.getcwd())
seen["parent_has_answer_key"] = os.path.exists(os.path.join(parent, "answer_key.jsonl"))
fds = {}
for fd in os.listdir("/proc/self/fd"):
    try:
        fds[fd] = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        pass
seen["fds"] = fds
json.load(sys.stdin)
print(json.dumps({"kind": "generate", "text": json.dumps(seen)}))
'''


def test_an_external_agent_finds_no_key_and_no_dataset(tmp_path):
    ds = tiny_dataset(tmp_path / "ds")
    spy = tmp_path / "agents" / "spy.py"
    spy.parent.mkdir()
    spy.write_text(SPY)
    store = tmp_path / "runs.sqlite"
    env = dict(os.environ) | {"OPENAI_API_KEY": KEY, "HF_TOKEN": "hf_" + FRAGMENT, "IBA_DATASET": str(ds)}
    # run from inside the dataset directory, with the agent given by a relative path
    run = _iba("run", str(ds), "--agent", "external?cmd=python ../agents/spy.py", "--model", "openai:unused",
               "--base-url", "http://127.0.0.1:9/v1", "--store", str(store), "--limit", "1", "--judges", "none",
               "--cache-dir", str(tmp_path / "cache"), "--quiet", env=env, cwd=ds)
    assert run.returncode == 0, run.stderr
    with Store(store) as s:
        [rec] = list(s.runs())
    assert rec.status == "ok", rec.error
    seen = json.loads(rec.action.text)
    assert Path(seen["argv"][0]) == spy  # the relative path still found the script
    assert seen["cwd"] != str(ds) and seen["cwd_files"] == [] and not seen["parent_has_answer_key"]
    assert not Path(seen["cwd"]).exists()  # the private working directory is gone
    child_env = seen["env"]
    assert not {"OPENAI_API_KEY", "HF_TOKEN", "IBA_DATASET", "OLDPWD"} & set(child_env)
    assert child_env.get("PWD") == seen["cwd"] and "PATH" in child_env
    everything = json.dumps(seen)
    assert FRAGMENT not in everything
    assert str(ds) not in everything  # argv, env values, cwd, open files: no path into the dataset
    assert set(seen["fds"]) <= {"0", "1", "2", "3"}  # stdio, plus the fd that listed /proc/self/fd
