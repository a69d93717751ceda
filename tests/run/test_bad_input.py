"""Bad datasets and bad `iba run` arguments, as the user sees them: the real CLI in a subprocess.

Each must exit non-zero with a message naming the file:line or the option (and what is allowed),
never a traceback, and must stop before any agent runs (the store is not even created).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from iba.dataset import MAX_TURN_CHARS
from tests.run.helpers import tiny_dataset

# an OpenAI-compatible backend is built without a connection: nothing here reaches a model
OFFLINE = ["--model", "openai:none", "--base-url", "http://127.0.0.1:9/v1", "--judges", "none", "--quiet"]

# an external agent that records the longest history turn it was handed, and answers validly
RECORDER = """
import json, sys
req = json.load(sys.stdin)
with open(sys.argv[1], "a") as f:
    f.write(str(max(len(t["text"]) for t in req["history"])) + "\\n")
task = req["task"]
if task["action"] == "call_api":
    print(json.dumps({"kind": "call_api", "api_name": task["api_name"], "params": {"texture": "soft"}}))
else:
    print(json.dumps({"kind": "generate", "text": "ok"}))
"""


def iba(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")} | {"OPENAI_API_KEY": "unused"}
    return subprocess.run([sys.executable, "-m", "iba.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=300)


def run(root: Path, *extra: str | Path) -> subprocess.CompletedProcess[str]:
    return iba("run", root, *OFFLINE, "--store", root.parent / "s.sqlite", "--cache-dir", root.parent / "cache",
               *extra, cwd=root.parent)


def assert_clean_error(out: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert out.returncode != 0, out.stdout
    assert "Traceback" not in out.stderr, out.stderr
    for needle in needles:
        assert needle in out.stderr, out.stderr


def assert_nothing_ran(root: Path) -> None:
    assert not (root.parent / "s.sqlite").exists()


def _edit(path: Path, lineno: int, **changes) -> None:
    lines = path.read_text().splitlines()
    lines[lineno - 1] = json.dumps(json.loads(lines[lineno - 1]) | changes)
    path.write_text("\n".join(lines) + "\n")


@pytest.fixture
def root(tmp_path) -> Path:
    return tiny_dataset(tmp_path / "ds")


def test_non_utf8_history_byte(root):
    p = root / "histories" / "u0.jsonl"
    p.write_bytes(p.read_bytes().replace(b"pasta", b"p\xe2sta"))
    out = run(root)
    assert_clean_error(out, "histories/u0.jsonl:3: not valid UTF-8")
    assert_nothing_ran(root)


@pytest.mark.parametrize("option, value, message", [
    ("--concurrency", "0", "argument --concurrency: must be >= 1, got 0"),
    ("--concurrency", "two", "argument --concurrency: must be an integer >= 1, got 'two'"),
    ("--limit", "-1", "argument --limit: must be >= 1, got -1"),
    ("--limit", "0", "argument --limit: must be >= 1, got 0"),
    ("--trials", "0", "argument --trials: must be >= 1, got 0"),
    ("--qa-per-instance", "0", "argument --qa-per-instance: must be >= 1, got 0"),
    ("--judge-repeats", "0", "argument --judge-repeats: must be >= 1, got 0"),
    ("--timeout", "0", "argument --timeout: must be a finite number > 0, got 0"),
    ("--timeout", "-5", "argument --timeout: must be a finite number > 0, got -5"),
    ("--timeout", "nan", "argument --timeout: must be a finite number > 0, got nan"),
    ("--call-timeout", "inf", "argument --call-timeout: must be a finite number > 0, got inf"),
])
def test_bad_numeric_options(root, option, value, message):
    out = run(root, option, value)
    assert out.returncode == 2
    assert_clean_error(out, message)
    assert_nothing_ran(root)


@pytest.mark.parametrize("spec, message", [
    ("direct?bogus=1", "agent direct: unknown option 'bogus' (allowed: max_tokens, max_history_tokens, order)"),
    ("iba?synthesis=poem", "agent iba: option synthesis=poem: Input should be 'plan' or 'rag'"),
    ("rag?k", "agent rag: option 'k' in 'rag?k' must be key=value"),
    ("rag?k=1&k=2", "agent rag: option 'k' given twice"),
    ("external", "agent external: give exactly one of cmd=... or url=..."),
    ("nope", "unknown agent 'nope'; choose from: direct, external, iba, iba-fc, memory, null, oracle, rag"),
    # counts are >= 1 (k=0 used to run "ok" with no retrieval at all)
    ("rag?k=0", "agent rag: option k=0: must be >= 1"),
    ("rag?k=-5", "agent rag: option k=-5: must be >= 1"),
    ("rag?overlap=256", "agent rag: option overlap=256 must be below size=256"),
    ("iba?k=0", "agent iba: option k=0: must be >= 1"),
    ("iba?max_passages=0", "agent iba: option max_passages=0: must be >= 1"),
    ("iba-fc?max_steps=0", "agent iba-fc: option max_steps=0: must be >= 1"),
    ("direct?max_tokens=0", "agent direct: option max_tokens=0: must be >= 1"),
    ("external?cmd=x&max_reply_mb=0", "agent external: option max_reply_mb=0: must be > 0"),
    ("external?cmd=x&env=A&env=B", "agent external: option 'env' given twice"),
    ("rag?env=x", "agent rag: unknown option 'env'"),  # was a TypeError traceback (env is the constructor's)
])
def test_bad_agent_specs(root, spec, message):
    out = run(root, "--agent", "direct", "--agent", spec)  # the bad one need not come first
    assert_clean_error(out, "argument --agent: ", message)
    assert_nothing_ran(root)


def test_unknown_selection_and_embedder(root):
    assert_clean_error(run(root, "--scenario", "food_orderin"),
                       "argument --scenario: 'food_orderin' is not in this dataset (allowed: food_ordering, technical_documentation)")
    assert_clean_error(run(root, "--domain", "x"), "argument --domain: 'x' is not in this dataset (allowed: daily, writing)")
    assert_clean_error(run(root, "--embedder", "bert"), "argument --embedder: unknown embedder 'bert' (allowed: ")
    assert_nothing_ran(root)


def test_missing_history_is_found_before_any_agent_runs(root):
    """The second user's history is missing: the first user's instances must not run first."""
    inst = root / "instances.jsonl"
    first = json.loads(inst.read_text().splitlines()[0])
    with inst.open("a") as f:
        f.write(json.dumps(first | {"instance_id": "i2", "user_id": "u1"}) + "\n")
    personas = root / "personas.jsonl"
    p0 = json.loads(personas.read_text().splitlines()[0])
    with personas.open("a") as f:
        f.write(json.dumps(p0 | {"id": "u1"}) + "\n")
    keys = root / "answer_key.jsonl"
    k0 = json.loads(keys.read_text().splitlines()[0])
    with keys.open("a") as f:
        f.write(json.dumps(k0 | {"instance_id": "i2", "checkpoints": [], "evidence": []}) + "\n")
    (root.parent / "agent.py").write_text(RECORDER)  # a working agent: only the check can stop it
    # unsandboxed: the recorder writes outside its sandbox (what it sees is the point, not isolation)
    out = run(root, "--agent", f"external?sandbox=none&cmd=python {root.parent / 'agent.py'} {root.parent / 'seen.txt'}")
    assert_clean_error(out, "failed its check (1 problem)", "histories/u1.jsonl: file not found")
    assert_nothing_ran(root)
    assert not (root.parent / "seen.txt").exists()  # the agent was never called


def test_unknown_user_and_missing_answer_key(root):
    _edit(root / "instances.jsonl", 2, user_id="u7")
    keys = root / "answer_key.jsonl"
    keys.write_text(keys.read_text().splitlines()[0] + "\n")
    out = run(root)
    assert_clean_error(out, "instances.jsonl:2: instance 'i1': unknown user 'u7' (not in personas.jsonl)",
                       "histories/u7.jsonl: file not found",
                       "answer_key.jsonl: no answer key for instance 'i1' (instances.jsonl:2)")
    assert_nothing_ran(root)


def test_duplicate_instance_id(root):
    inst = root / "instances.jsonl"
    inst.write_text(inst.read_text() + inst.read_text().splitlines()[0] + "\n")
    out = run(root)
    assert_clean_error(out, "instances.jsonl:3: duplicate instance_id 'i0' (first on line 1)")
    assert_nothing_ran(root)


def test_duplicate_answer_key_and_persona(root):
    for name in ("answer_key.jsonl", "personas.jsonl"):
        p = root / name
        original = p.read_text()
        p.write_text(original + original.splitlines()[0] + "\n")
        n = len(original.splitlines()) + 1
        assert_clean_error(run(root), f"{name}:{n}: duplicate ")
        p.write_text(original)
    assert_nothing_ran(root)


def test_evidence_missing_from_history(root):
    keys = root / "answer_key.jsonl"
    k1 = json.loads(keys.read_text().splitlines()[1])
    k1["slots"][0]["evidence"] = ["u0-s0-t9"]
    _edit(keys, 2, slots=k1["slots"])
    out = run(root)
    assert_clean_error(out, "answer_key.jsonl:2: slot 'i1-s0' of instance 'i1' cites turn 'u0-s0-t9', "
                            "which is not in histories/u0.jsonl")
    assert_nothing_ran(root)


def test_unordered_history(root):
    _edit(root / "histories" / "u0.jsonl", 2, timestamp="2024-06-01T00:00:00")
    out = run(root)
    assert_clean_error(out, "histories/u0.jsonl:2: timestamp 2024-06-01T00:00:00 is earlier than line 1's")
    assert_nothing_ran(root)


def test_50mb_turn_is_clamped_before_the_agent_sees_it(root):
    p = root / "histories" / "u0.jsonl"
    _edit(p, 2, text="y" * 50_000_000)
    (root.parent / "agent.py").write_text(RECORDER)
    seen = root.parent / "seen.txt"
    out = run(root, "--agent", f"external?sandbox=none&cmd=python {root.parent / 'agent.py'} {seen}")
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr
    assert f"warning: {p}:2: turn 'u0-s0-t1' has 50,000,000 characters; truncated to 100,000" in out.stderr
    assert out.stderr.count("truncated to") == 1  # the runner's second read does not repeat it
    lengths = [int(x) for x in seen.read_text().split()]
    assert len(lengths) == 2 and all(MAX_TURN_CHARS < n < MAX_TURN_CHARS + 100 for n in lengths)


def test_other_commands_report_dataset_errors_without_traceback(root):
    """The top-level handler: a DatasetError from any command is a message, exit 2."""
    p = root / "histories" / "u0.jsonl"
    p.write_bytes(p.read_bytes() + b"\xff\n")
    out = iba("eval-retrieval", root, cwd=root.parent)
    assert_clean_error(out, "histories/u0.jsonl:4: not valid UTF-8")
