import pytest

from iba.agents.trace import Trace
from iba.llm.base import Completion
from iba.prompts import render
from iba.types import TaskView
from tests.agents.helpers import TEXT_TASK


def test_step_records_prompt_usage_outputs_and_latency():
    trace = Trace()
    prompt = render("agent_query_expansion", task=TEXT_TASK, options="")
    with trace.step("expand_queries", {"query": "q"}) as step:
        step.llm(prompt, [Completion(text="{}", prompt_tokens=100, completion_tokens=7)])
        step.llm(None, [Completion(text="{}", prompt_tokens=120, completion_tokens=9)])
        step.outputs = TaskView.model_validate(TEXT_TASK.model_dump())
    (s,) = trace.steps
    assert s.step == "expand_queries" and s.inputs == {"query": "q"}
    assert s.prompt == "agent_query_expansion" and s.prompt_hash == prompt.hash and len(s.prompt_hash) == 16
    assert (s.llm_calls, s.prompt_tokens, s.completion_tokens) == (2, 220, 16)
    assert s.outputs["instance_id"] == TEXT_TASK.instance_id  # pydantic outputs are stored as JSON
    assert s.latency_s >= 0 and s.error is None
    assert trace.usage().llm_calls == 2


def test_failed_step_is_recorded_with_error_and_tokens_then_raised():
    trace = Trace()

    class Failed(RuntimeError):
        completions = [Completion(text="bad", prompt_tokens=50, completion_tokens=3)]

    with pytest.raises(Failed) as info:
        with trace.step("extract_preferences", {}):
            raise Failed("no valid JSON")
    (s,) = trace.steps
    assert s.error == "Failed: no valid JSON" and s.llm_calls == 1 and s.prompt_tokens == 50
    assert info.value.iba_trace == trace.steps
