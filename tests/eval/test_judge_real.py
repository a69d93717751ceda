"""The checkpoint judge against the real embedded default model (slow: llama.cpp on the CPU)."""

from __future__ import annotations

import pytest

from iba import prompts
from iba.eval.judge import JudgeSettings, judge_checkpoint
from iba.types import Checkpoint

pytestmark = pytest.mark.slow

CP = Checkpoint(id="c-table", dimension="api", dimension_name="API explanation", value="table",
                expected="API parameters are presented in a Markdown table.", kind="static", evidence=[])
RESPONSE = "## export()\n\n| parameter | type | meaning |\n|---|---|---|\n| path | str | where to write |\n"


async def test_real_model_returns_a_parsed_verdict(local_backend):
    v, usage = await judge_checkpoint(local_backend, RESPONSE, CP, settings=JudgeSettings(max_tokens=96))
    # schema-constrained JSON from a real model: parsed into a bool with a rationale, hashed prompt
    assert v.passed is not None, v.rationale
    assert isinstance(v.passed, bool) and v.rationale
    assert v.judge == local_backend.model_id and v.prompt_hash == prompts.template_hash("judge_checkpoint")
    assert 1 <= usage.llm_calls <= 2 and usage.prompt_tokens > 50
