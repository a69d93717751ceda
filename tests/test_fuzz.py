"""Property tests: the dataset reader and the action parsers fail only with their documented errors.

Whatever bytes a dataset file or a model/external agent reply holds, the reader raises DatasetError
(naming file and line) and the parsers return a value or raise their own error class; any other
exception would reach the user as a traceback or turn a bad reply into an infrastructure fault.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from iba.agents.api_params import params_model
from iba.agents.base import AgentError
from iba.agents.external import parse_action
from iba.dataset import DatasetError, read_jsonl
from iba.llm.jsontext import extract_json_object
from iba.llm.structured import parse_reply
from iba.llm.toolcalls import parse_text_tool_calls
from iba.types import Action, AnswerKey, TaskView, Turn

FAST = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

API_SCHEMA = {"type": "object", "properties": {"texture": {"type": "string", "enum": ["soft", "regular"]},
                                               "count": {"type": "integer", "minimum": 1, "maximum": 9}},
              "required": ["texture"], "additionalProperties": False}
GEN = TaskView(instance_id="g", user_id="u", domain="d", scenario="s", scenario_name="S", query="q",
               action="generate", now="2025-01-01T00:00:00")
API = GEN.model_copy(update={"instance_id": "a", "action": "call_api", "api_name": "order", "api_schema": API_SCHEMA})

TURN = {"id": "u-s0-t0", "session_id": "u-s0", "timestamp": "2025-01-01T10:00:00", "role": "user", "text": "hi"}
ACTION = {"kind": "call_api", "api_name": "order", "params": {"texture": "soft"}}

# JSON-ish text: valid records, their mutations, and deep nesting (a RecursionError trap)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
jsonish = st.one_of(
    st.text(max_size=300),
    json_values.map(json.dumps),
    st.builds(lambda d, k, v: json.dumps({**d, k: v}), st.just(TURN) | st.just(ACTION), st.text(max_size=10), json_values),
    st.integers(1, 2500).map(lambda n: "[" * n),  # past the recursion limit (1000)
    st.integers(1, 2500).map(lambda n: '{"a":' * n),
)
lines = st.lists(st.one_of(st.binary(max_size=200), jsonish.map(str.encode), st.just(json.dumps(TURN).encode())), max_size=8)


@FAST
@given(data=st.binary(max_size=2000))
@example(data=b"\xff\xfe\n")
@example(data=b"\xef\xbb\xbf" + json.dumps(TURN).encode())  # a byte-order mark is tolerated
def test_read_jsonl_raw_bytes_only_dataset_error(tmp_path, data):
    _read_all(tmp_path, data)


@FAST
@given(parts=lines, sep=st.sampled_from([b"\n", b"\r\n", b"\r"]))
def test_read_jsonl_lines_only_dataset_error(tmp_path, parts, sep):
    _read_all(tmp_path, sep.join(parts))


def _read_all(tmp_path, data: bytes) -> None:
    path = tmp_path / "f.jsonl"
    path.write_bytes(data)
    for model in (Turn, TaskView, AnswerKey):
        try:
            records = list(read_jsonl(path, model))
        except DatasetError as e:
            assert str(e).startswith(f"{path}:")  # file (and line) first, always
        else:
            assert all(isinstance(r, model) for r in records)


@FAST
@given(text=jsonish)
@example(text="```json\n" + "[" * 3000 + "\n```")
def test_extract_json_object_returns_dict_or_value_error(text):
    try:
        assert isinstance(extract_json_object(text), dict)
    except ValueError:
        pass


@FAST
@given(text=jsonish)
@example(text='{"texture": "soft", "count": 3}')
def test_parse_reply_returns_params_or_value_error(text):
    model = params_model(API_SCHEMA)
    try:
        assert isinstance(parse_reply(text, model), model)
    except ValueError:
        pass


@FAST
@given(raw=st.one_of(jsonish.map(str.encode), st.binary(max_size=300)), task=st.sampled_from([GEN, API]))
@example(raw=json.dumps(ACTION).encode(), task=API)
def test_external_parse_action_returns_action_or_agent_error(raw, task):
    try:
        action = parse_action(raw, task, "fuzz")
    except AgentError:
        return
    assert isinstance(action, Action) and action.kind == task.action


@FAST
@given(body=jsonish, wrap=st.booleans())
def test_text_tool_calls_never_raise(body, wrap):
    text = f"<tool_call>\n{body}\n</tool_call>" if wrap else body
    rest, calls = parse_text_tool_calls(text, ["search", "final_answer"])
    assert isinstance(rest, str) and all(c.name in ("search", "final_answer") for c in calls)


def test_deep_nesting_is_a_value_error_not_recursion_error():
    """Regression: json.loads raises RecursionError on deep nesting, which escaped the parser."""
    with pytest.raises(ValueError):
        extract_json_object("[" * 100_000)
    # 3,000 levels: past the recursion limit; each '{' is a decode start, so more is only slower
    rest, calls = parse_text_tool_calls("<tool_call>" + '{"name":' * 3000 + "</tool_call>", ["search"])
    assert calls == []
