"""llm.secrets: what is configured is masked in whatever iba stores (store, response cache)."""

from __future__ import annotations

import json

from iba.llm import secrets
from iba.llm.base import Completion
from iba.llm.cache import ResponseCache
from iba.llm.openai_compat import OpenAICompatBackend
from iba.run.store import Store
from iba.types import Action, RunRecord, ScoreRecord, Verdict

KEY = "sk-unit-SECRET-4567"


def test_configured_keys_and_url_credentials_are_masked(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", "https://ann:env-pass-9876@api.example/v1")
    text = f'key {KEY}, json {json.dumps("x" + KEY)}, url https://bob:pw-1234567@h:8000/v1, pw env-pass-9876'
    out = secrets.redact_stored(text)
    assert "SECRET" not in out and "pw-1234567" not in out and "env-pass" not in out
    assert "https://***@h:8000/v1" in out and out.count("***") == 4
    assert secrets.redact_stored("a short EMPTY key stays: EMPTY") == "a short EMPTY key stays: EMPTY"


def test_a_backend_registers_its_key_and_url_credentials(monkeypatch, tmp_path):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    OpenAICompatBackend("m", base_url="http://carol:reg-pass-24680@127.0.0.1:9/v1")
    assert secrets.redact_stored("the model says reg-pass-24680") == "the model says ***"


def test_the_store_and_the_cache_keep_no_configured_secret(monkeypatch, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    echoed = f"here is your key: {KEY}"
    rec = RunRecord(key="k", run="r", dataset="d", instance_id="i", user_id="u", domain="x", scenario="s",
                    agent="external?url=http://dan:agent-pw-13579@h/act", model="m", status="ok",
                    action=Action(kind="generate", text=echoed), started_at="t", iba_version="v")
    with Store(tmp_path / "s.sqlite") as store:
        store.put_run(rec)
        store.put_score(ScoreRecord(run_key="k", scorer="judge:m", score=1.0, verdicts=[
            Verdict(target="c", kind="checkpoint", judge="m", passed=True, rationale=echoed)]))
        [back] = list(store.runs())
        [score] = list(store.scores())
    assert back.action.text == "here is your key: ***" and score.verdicts[0].rationale == "here is your key: ***"
    assert back.agent == "external?url=http://***@h/act"
    cache = ResponseCache(tmp_path / "c.sqlite")
    cache.put("key", "m", Completion(text=echoed))
    assert cache.get("key").text == "here is your key: ***"
    cache.close()
    for path in tmp_path.iterdir():
        assert b"SECRET" not in path.read_bytes() and b"agent-pw" not in path.read_bytes(), path
