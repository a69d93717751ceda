"""The checkpoint judge: what it sees, retries, unscored failures, truncation, batch mode."""

from __future__ import annotations

import pytest

from iba import prompts
from iba.eval.judge import JudgeSettings, fit_response, judge_checkpoint, judge_checkpoints_batch
from iba.llm.base import LLMError
from iba.types import Checkpoint
from tests.fakes import ScriptedBackend

CP = Checkpoint(id="c-struct", dimension="structure", dimension_name="Document structure", value="task",
                expected="The document is organised around how-to steps.", kind="dynamic",
                superseded="Concept-oriented structure.", evidence=["u1-s1-t1"])
CP2 = Checkpoint(id="c-depth", dimension="depth", dimension_name="Technical depth", value="simple",
                 expected="Explanations are simplified.", kind="static", evidence=[])
RESPONSE = "1. Install the tool.\n2. Run it."


async def test_verdict_and_what_the_judge_sees():
    b = ScriptedBackend([{"passed": True, "rationale": "It lists steps 1 and 2."}], model_id="scripted:j1")
    v, usage = await judge_checkpoint(b, RESPONSE, CP, repeat=2, settings=JudgeSettings(seed=44))
    assert (v.target, v.kind, v.judge, v.repeat, v.passed) == ("c-struct", "checkpoint", "scripted:j1", 2, True)
    assert v.rationale == "It lists steps 1 and 2."
    assert v.prompt_hash == prompts.template_hash("judge_checkpoint")
    assert usage.llm_calls == 1
    messages, kwargs = b.calls[0]
    text = "\n".join(m["content"] for m in messages)
    assert RESPONSE in text and CP.expected in text and "Concept-oriented structure." in text
    assert kwargs["seed"] == 44 and kwargs["json_schema"]["properties"]["passed"]["type"] == "boolean"


async def test_unparseable_is_retried_once_then_unscored():
    b = ScriptedBackend(["yes it passes", "still not json"])
    v, usage = await judge_checkpoint(b, RESPONSE, CP)
    assert v.passed is None and "unparseable" in v.rationale
    assert len(b.calls) == 2 and usage.llm_calls == 2


async def test_unparseable_then_valid():
    b = ScriptedBackend(["oops", {"passed": False, "rationale": "concept-first"}])
    v, _ = await judge_checkpoint(b, RESPONSE, CP)
    assert v.passed is False and len(b.calls) == 2


async def test_crash_is_retried_once_then_unscored():
    b = ScriptedBackend([LLMError("server down"), LLMError("server down")])
    v, _ = await judge_checkpoint(b, RESPONSE, CP)
    assert v.passed is None and "failed again" in v.rationale and len(b.calls) == 2
    b = ScriptedBackend([LLMError("blip"), {"passed": True, "rationale": "ok"}])
    v, _ = await judge_checkpoint(b, RESPONSE, CP)
    assert v.passed is True


async def test_long_response_is_truncated_to_the_context_window():
    b = ScriptedBackend([{"passed": True, "rationale": "ok"}])
    b.context_window = 1024
    long = "word " * 4000  # ~5000 tokens by the default 4-chars-per-token count
    v, _ = await judge_checkpoint(b, long, CP)
    sent = "\n".join(m["content"] for m in b.calls[0][0])
    assert b.count_tokens(sent) + 256 <= 1024
    assert "truncated" in sent and v.passed is True and "truncated" in v.rationale


def test_fit_response_refuses_a_tiny_window():
    b = ScriptedBackend([])
    b.context_window = 100
    with pytest.raises(ValueError):
        fit_response(b, "text", overhead_tokens=80, max_tokens=64)
    b.context_window = 4096
    assert fit_response(b, "short", 100, 64) == ("short", "")


async def test_batch_mode_one_call_missing_ids_unscored():
    b = ScriptedBackend([{"verdicts": [{"id": "c-depth", "passed": True, "rationale": "simple"}]}])
    verdicts, usage = await judge_checkpoints_batch(b, RESPONSE, [CP, CP2])
    assert [(v.target, v.passed) for v in verdicts] == [("c-struct", None), ("c-depth", True)]
    assert len(b.calls) == 1 and usage.llm_calls == 1
    assert verdicts[0].prompt_hash == prompts.template_hash("judge_checkpoints_batch")
