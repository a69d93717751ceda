"""A recorded demo run is reproduced exactly: the same-seed demo build, run by direct, rag and iba
and scored (judges and QA probes included), stores the same records and scores as the recording.

The model is a digest of the request (DigestBackend): each reply is drawn from a hash of the
messages and the schema, so a change to any prompt, selection, seed or scoring rule changes what is
stored. The recording in data/recorded_demo_run.json was made on the code before the issue-34
refactor (one request type, the split Dataset and types); a change meant to alter runs records it
again: `python tests/run/test_recorded_run.py`.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from iba.llm import base

RECORDING = Path(__file__).parent / "data" / "recorded_demo_run.json"
AGENTS = ["direct", "rag", "iba"]


def _pick(digest: bytes, i: int, n: int) -> int:
    return digest[i % len(digest)] % n if n else 0


def _value(schema: dict[str, Any], defs: dict[str, Any], digest: bytes, depth: int = 0) -> Any:
    """A value of `schema` chosen by `digest` (enum members, booleans, counts and words vary with it)."""
    if "$ref" in schema:
        return _value(defs[schema["$ref"].split("/")[-1]], defs, digest, depth)
    if "enum" in schema:
        return schema["enum"][_pick(digest, depth, len(schema["enum"]))]
    if "const" in schema:
        return schema["const"]
    options = schema.get("anyOf") or schema.get("oneOf")
    if options:
        return _value(options[_pick(digest, depth, len(options))], defs, digest, depth + 1)
    kind = schema.get("type", "object")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        props = schema.get("properties", {})
        return {k: _value(props.get(k, {}), defs, digest, depth + i + 1) for i, k in enumerate(schema.get("required", []))}
    if kind == "array":
        n = max(int(schema.get("minItems", 0)), min(1, int(schema.get("maxItems", 1))))
        return [_value(schema.get("items", {}), defs, digest, depth + i + 1) for i in range(n)]
    if kind == "boolean":
        return bool(digest[depth % len(digest)] & 1)
    if kind in ("integer", "number"):
        return max(int(schema.get("minimum", 0)), _pick(digest, depth, 3))
    return ("soft", "pseudocode", "quiet", "none", "vegetarian")[_pick(digest, depth, 5)]


def reply(messages: list[dict[str, Any]], json_schema: dict[str, Any] | None) -> str:
    digest = hashlib.sha256(json.dumps([messages, json_schema], sort_keys=True, ensure_ascii=False).encode()).digest()
    if json_schema is not None:
        return json.dumps(_value(json_schema, json_schema.get("$defs", {}), digest))
    words = " ".join(str(m.get("content") or "") for m in messages if m.get("role") == "user").split()
    picked = [words[_pick(digest, i, len(words))] for i in range(12)] if words else []
    return f"Answer: {'ABCD'[_pick(digest, 0, 4)]}. " + " ".join(picked)


if hasattr(base, "ModelRequest"):
    class DigestBackend(base.Backend):
        model_id = "digest:demo"

        async def send(self, request: base.ModelRequest) -> base.Completion:
            text = reply(request.messages, request.json_schema)
            return base.Completion(text=text, prompt_tokens=1, completion_tokens=1, model=self.model_id)
else:  # the code before ModelRequest, on which the recording was made
    class DigestBackend(base.Backend):  # type: ignore[no-redef]
        model_id = "digest:demo"

        async def complete(self, messages, *, json_schema=None, **_: Any) -> base.Completion:  # type: ignore[override]
            text = reply(messages, json_schema)
            return base.Completion(text=text, prompt_tokens=1, completion_tokens=1, model=self.model_id)


def demo_run(work: Path) -> dict[str, Any]:
    """Build the demo dataset (seed 42), run AGENTS on it with DigestBackend as model and judge, and
    return what the store holds: each run's status and action digest, each score with its verdicts."""
    from iba.construct.builder import build_dataset
    from iba.dataset import Dataset
    from iba.run.runner import RunConfig, run_dataset
    from iba.run.store import Store

    # generator 2: the dataset the fixture was recorded on (the run's code is what is under test)
    build_dataset(work / "dataset", preset="demo", seed=42, progress=False, generator=2)
    backend = DigestBackend()
    cfg = RunConfig(agents=AGENTS, run="demo", seed=42, qa=True, qa_per_instance=1, cache_dir=work / "cache",
                    progress=False)
    with Store(work / "runs.sqlite") as store:
        asyncio.run(run_dataset(Dataset(work / "dataset"), backend, store, cfg, judges=[backend]))
        runs = {r.key: {"instance": r.instance_id, "probe": r.probe, "agent": r.agent, "status": r.status, "error": r.error,
                        "action": hashlib.sha256(r.action.model_dump_json(exclude={"trace"}).encode()).hexdigest()[:16]
                        if r.action else None}
                for r in store.runs()}
        scores = sorted(([s.run_key, s.scorer, s.repeat, s.score, s.failure,
                          [[v.target, v.kind, v.judge, v.passed] for v in s.verdicts]] for s in store.scores()),
                        key=lambda row: (row[0], row[1], row[2]))
    return {"runs": dict(sorted(runs.items())), "scores": scores}


@pytest.mark.slow  # no model, but ~30 s of CPU: the build, retrieval's embedder, 36 runs and their scoring
def test_a_rerun_reproduces_the_recorded_demo_run_exactly(tmp_path):
    from iba.types import split_item_id

    recorded = json.loads(RECORDING.read_text(encoding="utf-8"))
    for r in recorded["runs"].values():  # recorded before the probe was a field: "<instance>::qa::<probe>"
        if "probe" not in r:
            r["instance"], r["probe"] = split_item_id(r["instance"])
    got = json.loads(json.dumps(demo_run(tmp_path)))  # tuples and floats as the recording holds them
    assert any(r["probe"] for r in got["runs"].values())
    assert len(got["runs"]) == len(recorded["runs"]) and got["runs"] == recorded["runs"]
    assert got["scores"] == recorded["scores"]
    # the recording is not trivial: agents and judges made different choices
    assert {s[3] for s in recorded["scores"]} >= {0.0, 1.0}


if __name__ == "__main__":  # record the run: python tests/run/test_recorded_run.py
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        result = demo_run(Path(d))
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else RECORDING
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"{len(result['runs'])} runs, {len(result['scores'])} scores -> {out}")
